//! Property tests of mlx5 completion parsing against garbage the HCA could
//! write (issue 32, hostile bytes): CQEs of any opcode, any user index or
//! QP number (ours or not), any WQE counter, any syndrome, in a CQ of the
//! HCA model's context with one RC QP that has sends and receives posted,
//! in both CQE versions. Each batch of entries is handed to software with
//! the owner bit of its pass (sometimes the wrong one); polling, with any
//! `out` length, through `poll`, `poll_one` and `poll_uninit`, returns
//! completions for at most the entries handed over, never a `wr_id` that
//! was not posted, and stops: the ring drains within the entries written.
//! The kernel's driver answers are hostile too: GET_CONTEXT's
//! (`parse_ucontext_resp`, `DeviceInfo::from_resp`, the context built on
//! it), CREATE_CQ's and CREATE_QP's (`cq_finish_with`, `qp_finish_with`),
//! CREATE_AH's (`ah::dmac_of`): any bytes, any length, give a value or an
//! `EPROTO`-style error, never a panic.
//!
//! Unsafe code (allowed below): the test writes CQEs into the CQ buffer by
//! address, as the device would.
#![allow(unsafe_code)]

use std::collections::HashSet;

use proptest::collection::vec;
use proptest::prelude::*;

use super::cqe::opcode;
use super::model::{Hca, ModelCfg, Recorder};
use super::*;
use crate::proptest_config::config;
use crate::wr::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcStatus};
use zerocopy::IntoBytes;

/// One hostile entry: 64 bytes of noise with some fields chosen.
#[derive(Clone, Debug)]
struct Entry {
    noise: [u64; 8],
    op: u8,
    /// Name our QP (its user index / QPN) in the CQE, or keep the noise's.
    ours: bool,
    wqe_counter: u16,
    /// Flip the owner bit: an entry still the hardware's.
    wrong_owner: bool,
}

fn entry() -> impl Strategy<Value = Entry> {
    let op = prop_oneof![
        Just(opcode::REQ),
        Just(opcode::RESP_WR_IMM),
        Just(opcode::RESP_SEND),
        Just(opcode::RESP_SEND_IMM),
        Just(opcode::RESP_SEND_INV),
        Just(opcode::RESIZE_CQ),
        Just(opcode::NO_PACKET),
        Just(opcode::SIG_ERR),
        Just(opcode::REQ_ERR),
        Just(opcode::RESP_ERR),
        Just(opcode::INVALID),
        0u8..16,
    ];
    let noise = proptest::array::uniform8(any::<u64>());
    (noise, op, prop::bool::weighted(0.8), any::<u16>(), prop::bool::weighted(0.1))
        .prop_map(|(noise, op, ours, wqe_counter, wrong_owner)| Entry { noise, op, ours, wqe_counter, wrong_owner })
}

/// How a batch is polled.
#[derive(Clone, Copy, Debug)]
enum Poll {
    Batch(usize),
    One,
    Uninit(usize),
}

fn poll_way() -> impl Strategy<Value = Poll> {
    prop_oneof![(0usize..9).prop_map(Poll::Batch), Just(Poll::One), (0usize..9).prop_map(Poll::Uninit)]
}

struct Fix {
    _hca: Hca,
    _ctx: Context,
    cq: Cq<Recorder>,
    qp: Qp<Recorder>,
    /// The wr_ids posted (plus 0, the value of a slot never written).
    posted: HashSet<u64>,
    /// The slot the next entry goes to (the HCA's producer).
    slot: u32,
}

impl Fix {
    fn new(cqe_version: u8, cq_entries: u32) -> Fix {
        let hca = Hca::new(ModelCfg { bf_reg_size: 0, cqe_version, ..Default::default() });
        let ctx = hca.context();
        let (p, _) = ctx.cq_prepare(cq_entries).unwrap();
        let kernel_cqe = p.ncqe() - 1;
        let cq = ctx
            .cq_finish_with(p, &[0x45, 0, 0, 0, 0, 0, 0, 0], kernel_cqe, |_, _| Recorder::default())
            .map_err(|e| e.error)
            .unwrap();
        let caps = QpCaps { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 0 };
        let args = QpPrepareArgs { qp_type: QpType::Rc, caps, srq: None, sq_sig_all: false };
        let (p, _) = ctx.qp_prepare(&args).unwrap();
        let mut qp = ctx.qp_finish_with(p, &[0u8; QP_RESP_LEN], 0x123, |_, _| Recorder::default()).unwrap();
        for s in 1..=3 {
            qp.on_state_change(s);
        }
        let mut posted = HashSet::from([0]);
        let sge = [Sge::new(0x1000, 64, 7)];
        for i in 0..5u64 {
            let wr = SendWr { wr_id: 100 + i, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
            // SAFETY: not INLINE: nothing is read through the SGE.
            unsafe { qp.sq.post(&[wr]) }.unwrap();
            qp.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 200 + i, sgl: &sge }]).unwrap();
            posted.extend([100 + i, 200 + i]);
        }
        Fix { _hca: hca, _ctx: ctx, cq, qp, posted, slot: 0 }
    }

    /// Writes `e` into the next slot, owner bit of its pass (or not).
    fn write(&mut self, e: &Entry, v1: bool) {
        let n = self.cq.ncqe();
        let mut raw = [0u8; 64];
        for (c, x) in raw.chunks_exact_mut(8).zip(e.noise) {
            c.copy_from_slice(&x.to_ne_bytes());
        }
        if e.ours {
            let rsn = if v1 { self.qp.shared().uidx() } else { 0x123 };
            if v1 {
                raw[32..36].copy_from_slice(&rsn.to_be_bytes());
            } else {
                let word = rsn | u32::from(raw[56]) << 24;
                raw[56..60].copy_from_slice(&word.to_be_bytes());
            }
        }
        raw[60..62].copy_from_slice(&e.wqe_counter.to_be_bytes());
        let owner = u8::from(self.slot & n != 0) ^ u8::from(e.wrong_owner);
        raw[63] = e.op << 4 | (raw[63] & 0x0e) | owner;
        let at = self.cq.buf_addr() + u64::from(self.slot & (n - 1)) * 64;
        // SAFETY: `at` is entry `slot & (n - 1)` of the live CQ's buffer
        // (`ncqe` entries of 64 bytes); no poll is running.
        unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), at as usize as *mut u8, 64) };
        self.slot += 1;
    }

    /// Marks every slot from our consumer index on as never written
    /// (`OP_OWN_INIT`) and moves the producer back to it.
    fn forget_unconsumed(&mut self) {
        let n = self.cq.ncqe();
        for i in self.cq.cons_index()..self.slot {
            let at = self.cq.buf_addr() + u64::from(i & (n - 1)) * 64 + 63;
            // SAFETY: the owner byte of an entry of the live CQ's buffer; no
            // poll is running.
            unsafe { (at as usize as *mut u8).write(super::cqe::OP_OWN_INIT) };
        }
        self.slot = self.cq.cons_index();
    }

    /// Polls once `how`; returns the completions.
    fn poll(&mut self, how: Poll) -> Vec<Wc> {
        match how {
            Poll::Batch(k) => {
                let mut out = vec![Wc::default(); k];
                let n = self.cq.poll(&mut out);
                assert!(n <= k, "{n} completions into {k} entries");
                out.truncate(n);
                out
            }
            Poll::One => {
                let mut w = Wc::default();
                if self.cq.poll_one(&mut w) {
                    vec![w]
                } else {
                    vec![]
                }
            }
            Poll::Uninit(k) => {
                let mut out = vec![core::mem::MaybeUninit::<Wc>::uninit(); k];
                let n = self.cq.poll_uninit(&mut out);
                assert!(n <= k);
                // SAFETY: the first `n` entries hold completions.
                out[..n].iter().map(|w| unsafe { w.assume_init() }).collect()
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn garbage_cqes_poll_to_completions_or_nothing(
        v1 in any::<bool>(),
        log2_entries in 2u32..5,
        batches in vec((vec(entry(), 1..8), poll_way()), 1..4),
    ) {
        let mut f = Fix::new(u8::from(v1), (1 << log2_entries) - 1);
        let n = f.cq.ncqe();
        let mut written = 0u32;
        for (entries, how) in &batches {
            // At most one pass of entries between polls, as an HCA writes.
            let free = n - (f.slot - f.cq.cons_index());
            for e in entries.iter().take(free as usize) {
                f.write(e, v1);
                written += 1;
            }
            let before = f.cq.cons_index();
            let mut got = f.poll(*how);
            // Drain: at most one completion per entry written, then nothing.
            let mut rounds = 0;
            loop {
                let more = f.poll(Poll::Batch(4));
                if more.is_empty() {
                    break;
                }
                got.extend(more);
                rounds += 1;
                prop_assert!(rounds <= n, "still polling after {} rounds", rounds);
            }
            prop_assert!(f.cq.is_empty());
            let consumed = f.cq.cons_index() - before;
            prop_assert!(consumed <= f.slot - before, "consumed {} of {} written", consumed, f.slot - before);
            prop_assert!(got.len() as u32 <= consumed);
            prop_assert!(f.cq.skipped() <= u64::from(f.cq.cons_index()));
            for w in &got {
                prop_assert!(f.posted.contains(&w.wr_id), "wr_id {} was never posted", w.wr_id);
                prop_assert_eq!(w.qp_num & !0xff_ffff, 0);
                if w.status != WcStatus::SUCCESS {
                    prop_assert!(w.byte_len == 0);
                }
            }
            // Entries left to the hardware (a wrong owner bit), and those
            // written after one, are not the next batch's: the HCA starts
            // again at our consumer index, over slots it has not written.
            f.forget_unconsumed();
        }
        prop_assert!(f.cq.cons_index() <= written);
    }
}

/// A GET_CONTEXT answer: the model's, with any bytes over any part of it,
/// cut to any length. The static scheme maps every UAR page the kernel
/// counts, as rdma-core does, so `tot_bfregs` is kept to at most 64
/// registers (the model allocates each page).
fn ucontext_answer() -> impl Strategy<Value = Vec<u8>> {
    let base = Hca::new(ModelCfg::default()).ucontext_resp();
    let len = base.as_bytes().len();
    (vec((0..len, any::<u8>()), 0..12), 0..=len + 8, any::<bool>()).prop_map(move |(patches, cut, noise_only)| {
        let mut b = base.as_bytes().to_vec();
        if noise_only {
            b.iter_mut().zip(patches.iter().cycle()).for_each(|(x, (_, v))| *x ^= v);
        }
        for (at, v) in patches {
            b[at] = v;
        }
        let mut r = parse_ucontext_resp(&b);
        r.tot_bfregs %= 65;
        let mut b = r.as_bytes().to_vec();
        b.resize(cut, 0);
        b
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_context_answer_gives_a_context_or_an_error(drv_out in ucontext_answer(), cq_entries in 1u32..70) {
        let resp = parse_ucontext_resp(&drv_out);
        let page = crate::sys::event::page_size();
        match DeviceInfo::from_resp(&resp, page) {
            Err(e) => prop_assert_eq!(e.errno(), Some(Errno::EPROTO)),
            Ok(d) => {
                prop_assert!(d.cqe_version <= 1 && d.num_uars_per_page >= 1);
                let hca = Hca::new(ModelCfg::default());
                if let Ok(ctx) = Context::new_model(&hca, &resp) {
                    // What the context hands out with it still works or fails cleanly.
                    if let Ok((p, _)) = ctx.cq_prepare(cq_entries) {
                        let k = p.ncqe() - 1;
                        let _ = ctx.cq_finish_with(p, &[0u8; 8], k, |_, _| Recorder::default());
                    }
                }
            }
        }
    }

    #[test]
    fn any_create_answer_finishes_or_fails(
        cq_out in vec(any::<u8>(), 0..16),
        kernel_cqe in prop_oneof![Just(None), any::<u32>().prop_map(Some)],
        qp_out in vec(any::<u8>(), 0..QP_RESP_LEN + 8),
        qpn in any::<u32>(),
        ah_out in vec(any::<u8>(), 0..24),
        dynamic_uar in any::<bool>(),
    ) {
        let hca = Hca::new(ModelCfg { dynamic_uar, ..Default::default() });
        let ctx = hca.context();
        let (p, _) = ctx.cq_prepare(7).unwrap();
        let k = kernel_cqe.unwrap_or(p.ncqe() - 1);
        let ncqe = p.ncqe();
        match ctx.cq_finish_with(p, &cq_out, k, |_, _| Recorder::default()) {
            Ok(cq) => prop_assert_eq!(cq.ncqe(), ncqe),
            Err(e) => prop_assert_eq!(e.error.errno(), Some(Errno::EPROTO)),
        }
        let caps = QpCaps { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let args = QpPrepareArgs { qp_type: QpType::Rc, caps, srq: None, sq_sig_all: false };
        let (p, _) = ctx.qp_prepare(&args).unwrap();
        if let Ok(qp) = ctx.qp_finish_with(p, &qp_out, qpn, |_, _| Recorder::default()) {
            prop_assert_eq!(qp.shared().qpn(), qpn);
        }
        let dmac = ah::dmac_of(&ah_out);
        prop_assert_eq!(dmac.is_ok(), ah_out.len() >= AH_RESP_LEN);
    }
}
