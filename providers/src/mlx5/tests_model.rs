//! End-to-end tests: the provider posts and polls, the HCA model
//! (`model.rs`) watches the doorbells, executes the WQEs between modeled QPs
//! over real memory and writes the CQEs. Every run ends with
//! `assert_clean()`: no ordering, doorbell, UAR or overrun violation.
//!
//! Unsafe code (allowed below): test memory regions are raw allocations the
//! model writes by "DMA"; the tests read them back through raw pointers.
#![allow(unsafe_code)]

use std::collections::VecDeque;

use super::model::{access, Hca, HcaMmio, ModelCfg};
use super::*;
use crate::wr::{
    PostErrorKind, RecvWr, RemoteAddr, SendFlags, SendOp, SendWr, Sge, UdDest, Wc, WcFlags, WcOpcode, WcStatus,
};

/// Registered memory the model may touch; only ever accessed raw.
struct Region {
    ptr: *mut u8,
    len: usize,
    lkey: u32,
    rkey: u32,
}

impl Region {
    fn new(hca: &Hca, len: usize, acc: u32) -> Region {
        let ptr = Box::into_raw(vec![0u8; len].into_boxed_slice()).cast::<u8>();
        let (lkey, rkey) = hca.reg_mr(ptr as u64, len as u64, acc);
        Region { ptr, len, lkey, rkey }
    }
    fn addr(&self, off: usize) -> u64 {
        assert!(off <= self.len);
        self.ptr as u64 + off as u64
    }
    fn sge(&self, off: usize, len: u32) -> Sge<'static> {
        Sge::new(self.addr(off), len, self.lkey)
    }
    fn read(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len);
        let mut v = vec![0u8; len];
        // SAFETY: inside our allocation; the model is not running.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), v.as_mut_ptr(), len) };
        v
    }
    fn write(&self, off: usize, b: &[u8]) {
        assert!(off + b.len() <= self.len);
        // SAFETY: inside our allocation; the model is not running.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.ptr.add(off), b.len()) };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` of a slice of `len`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) >> 1) as u8).collect()
}

fn rc_caps() -> QpCaps {
    QpCaps { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 2, max_recv_sge: 1, max_inline_data: 48 }
}

fn args(qp_type: QpType, caps: QpCaps) -> QpPrepareArgs {
    QpPrepareArgs { qp_type, caps, srq: None, sq_sig_all: false }
}

/// Polls `cq` until `n` completions arrived (the model has already run).
fn poll_n(cq: &mut Cq<HcaMmio>, n: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = [Wc::default(); 3];
    for _ in 0..n + 8 {
        // The peek agrees with the poll (the owner bit of the next entry).
        let empty = cq.is_empty();
        let k = cq.poll(&mut buf);
        assert_eq!(empty, k == 0, "is_empty() before a poll that returned {k}");
        out.extend_from_slice(&buf[..k]);
        if out.len() >= n || k == 0 {
            break;
        }
    }
    assert_eq!(out.len(), n, "completions: {out:?}");
    out
}

fn post_send(qp: &mut Qp<HcaMmio>, wrs: &[SendWr<'_>]) -> Result<(), crate::wr::PostError> {
    // SAFETY: every INLINE SGE in these tests points into a live `Region`
    // or a local array.
    unsafe { qp.sq.post(wrs) }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Send,
    SendImm,
    SendInline,
    Write,
    WriteImm,
    WriteInline,
    Read,
    Cas,
    Faa,
}

const OPS: [Op; 9] =
    [Op::Send, Op::SendImm, Op::SendInline, Op::Write, Op::WriteImm, Op::WriteInline, Op::Read, Op::Cas, Op::Faa];

/// Two connected RC QPs, A → B, with their CQs and memory.
struct Rc {
    hca: Hca,
    ctx: Context,
    cq_a: Cq<HcaMmio>,
    cq_b: Cq<HcaMmio>,
    a: Qp<HcaMmio>,
    b: Qp<HcaMmio>,
    src: Region,
    local: Region,
    remote: Region,
    rbuf: Region,
    recv_posted: u64,
    recv_done: u64,
}

const RSLOT: usize = 64;

impl Rc {
    fn new(cfg: ModelCfg, cqe: u32) -> Rc {
        let hca = Hca::new(cfg);
        let ctx = hca.context();
        let cq_a = hca.new_cq(&ctx, cqe);
        let cq_b = hca.new_cq(&ctx, cqe);
        let a = hca.new_qp(&ctx, &args(QpType::Rc, rc_caps()), cq_a.cqn(), cq_a.cqn());
        let b = hca.new_qp(&ctx, &args(QpType::Rc, rc_caps()), cq_b.cqn(), cq_b.cqn());
        hca.connect(&a, &b);
        let src = Region::new(&hca, 4096, 0);
        let local = Region::new(&hca, 4096, access::LOCAL_WRITE);
        let remote = Region::new(&hca, 4096, access::ALL);
        let rbuf = Region::new(&hca, 8 * RSLOT, access::LOCAL_WRITE);
        let mut r = Rc { hca, ctx, cq_a, cq_b, a, b, src, local, remote, rbuf, recv_posted: 0, recv_done: 0 };
        r.refill();
        r
    }

    /// Keeps B's 8 receives posted; receive k lands in slot k % 8.
    fn refill(&mut self) {
        while self.recv_posted - self.recv_done < 8 {
            let k = self.recv_posted;
            let sge = [self.rbuf.sge((k % 8) as usize * RSLOT, RSLOT as u32)];
            self.b.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 0x1_0000_0000 + k, sgl: &sge }]).unwrap();
            self.recv_posted += 1;
        }
    }
}

/// What one operation should produce.
struct Expect {
    req: Option<Wc>,
    resp: Option<(WcOpcode, u32, u32, WcFlags, Vec<u8>)>,
    check: Box<dyn Fn(&Rc)>,
}

/// Runs `per_op` operations of every opcode, in batches of 1..=4 requests
/// per post call (one doorbell each; single requests go through
/// BlueFlame), the last of a batch signaled, every third one too.
fn rc_run(cfg: ModelCfg, per_op: u64) -> Rc {
    let mut t = Rc::new(cfg, 15);
    let total = per_op * OPS.len() as u64;
    let mut i = 0u64;
    let mut calls = 0u64;
    let mut atomic_val = 0x1000u64;
    t.remote.write(0, &atomic_val.to_be_bytes());
    while i < total {
        let bs = (1 + (i / 3) % 4).min(total - i);
        let mut sges: Vec<[Sge; 1]> = Vec::new();
        let mut wrs_meta = Vec::new();
        for j in 0..bs {
            let n = i + j;
            let op = OPS[(n % OPS.len() as u64) as usize];
            let signaled = j == bs - 1 || n % 3 == 0;
            let len = 1 + (n % 48) as u32;
            let slot = (n % 32) as usize;
            let data = pattern(n, len as usize);
            let mut flags = if signaled { SendFlags::SIGNALED } else { SendFlags::empty() };
            let imm = (n as u32).wrapping_mul(0x9e37_79b9);
            let remote_off = 64 + slot * 64;
            let (wop, sge, exp): (SendOp, Sge, Expect);
            match op {
                Op::Send | Op::SendImm | Op::SendInline => {
                    t.src.write(slot * 64, &data);
                    sge = t.src.sge(slot * 64, len);
                    if matches!(op, Op::SendInline) {
                        flags |= SendFlags::INLINE;
                    }
                    let with_imm = matches!(op, Op::SendImm);
                    wop = if with_imm { SendOp::SendWithImm(imm) } else { SendOp::Send };
                    let f = if with_imm { WcFlags::WITH_IMM } else { WcFlags::empty() };
                    exp = Expect {
                        req: signaled.then(|| Wc { wr_id: n, opcode: WcOpcode::SEND, wc_flags: f, ..Wc::default() }),
                        resp: Some((WcOpcode::RECV, len, if with_imm { imm } else { 0 }, f, data.clone())),
                        check: Box::new(|_| {}),
                    };
                }
                Op::Write | Op::WriteImm | Op::WriteInline => {
                    t.src.write(slot * 64, &data);
                    sge = t.src.sge(slot * 64, len);
                    if matches!(op, Op::WriteInline) {
                        flags |= SendFlags::INLINE;
                    }
                    let r = RemoteAddr { addr: t.remote.addr(remote_off), rkey: t.remote.rkey };
                    let with_imm = matches!(op, Op::WriteImm);
                    wop = if with_imm { SendOp::RdmaWriteWithImm(r, imm) } else { SendOp::RdmaWrite(r) };
                    let f = if with_imm { WcFlags::WITH_IMM } else { WcFlags::empty() };
                    let d2 = data.clone();
                    exp = Expect {
                        req: signaled.then(|| Wc {
                            wr_id: n,
                            opcode: WcOpcode::RDMA_WRITE,
                            wc_flags: f,
                            ..Wc::default()
                        }),
                        resp: with_imm.then(|| (WcOpcode::RECV_RDMA_WITH_IMM, len, imm, WcFlags::WITH_IMM, Vec::new())),
                        check: Box::new(move |t: &Rc| assert_eq!(t.remote.read(remote_off, d2.len()), d2, "write {n}")),
                    };
                }
                Op::Read => {
                    t.remote.write(remote_off, &data);
                    sge = t.local.sge(slot * 64, len);
                    wop = SendOp::RdmaRead(RemoteAddr { addr: t.remote.addr(remote_off), rkey: t.remote.rkey });
                    let d2 = data.clone();
                    exp = Expect {
                        req: signaled.then(|| Wc {
                            wr_id: n,
                            opcode: WcOpcode::RDMA_READ,
                            byte_len: len,
                            ..Wc::default()
                        }),
                        resp: None,
                        check: Box::new(move |t: &Rc| assert_eq!(t.local.read(slot * 64, d2.len()), d2, "read {n}")),
                    };
                }
                Op::Cas | Op::Faa => {
                    sge = t.local.sge(2048 + slot * 8, 8);
                    let r = RemoteAddr { addr: t.remote.addr(0), rkey: t.remote.rkey };
                    let old = atomic_val;
                    let (new, opcode) = if matches!(op, Op::Cas) {
                        wop = SendOp::AtomicCmpAndSwp { remote: r, compare: old, swap: old ^ n };
                        (old ^ n, WcOpcode::COMP_SWAP)
                    } else {
                        wop = SendOp::AtomicFetchAndAdd { remote: r, add: n };
                        (old.wrapping_add(n), WcOpcode::FETCH_ADD)
                    };
                    atomic_val = new;
                    exp = Expect {
                        req: signaled.then(|| Wc { wr_id: n, opcode, byte_len: 8, ..Wc::default() }),
                        resp: None,
                        check: Box::new(move |t: &Rc| {
                            assert_eq!(t.local.read(2048 + slot * 8, 8), old.to_be_bytes(), "atomic result {n}");
                        }),
                    };
                }
            }
            sges.push([sge]);
            wrs_meta.push((n, wop, flags, exp));
        }
        let wrs: Vec<SendWr<'_>> = wrs_meta
            .iter()
            .zip(&sges)
            .map(|((n, op, flags, _), sgl)| SendWr { wr_id: *n, op: *op, flags: *flags, sgl, ud: None })
            .collect();
        post_send(&mut t.a, &wrs).unwrap();
        calls += 1;
        t.hca.run();
        // Effects, then completions, in order.
        let reqs: Vec<Wc> = wrs_meta.iter().filter_map(|m| m.3.req).collect();
        let resps: Vec<_> = wrs_meta.iter().filter_map(|m| m.3.resp.clone()).collect();
        for m in &wrs_meta {
            (m.3.check)(&t);
        }
        let got = poll_n(&mut t.cq_a, reqs.len());
        for (g, w) in got.iter().zip(&reqs) {
            assert_eq!(*g, Wc { qp_num: t.a.qpn(), ..*w });
        }
        let got = poll_n(&mut t.cq_b, resps.len());
        for (g, (op, len, imm, flags, data)) in got.iter().zip(&resps) {
            let k = t.recv_done;
            let want = Wc {
                wr_id: 0x1_0000_0000 + k,
                opcode: *op,
                byte_len: *len,
                imm_data: *imm,
                wc_flags: *flags,
                qp_num: t.b.qpn(),
                src_qp: t.a.qpn(),
                ..Wc::default()
            };
            assert_eq!(*g, want, "receive {k}");
            if !data.is_empty() {
                assert_eq!(t.rbuf.read((k % 8) as usize * RSLOT, data.len()), *data, "received data {k}");
            }
            t.recv_done += 1;
        }
        t.refill();
        i += bs;
    }
    t.hca.assert_clean();
    let s = t.hca.stats();
    assert_eq!(s.doorbells + s.bf_copies, calls, "one doorbell per post call");
    if cfg.bf_reg_size != 0 {
        assert!(s.bf_copies > 0 && s.doorbells > 0, "{s:?}");
    } else {
        assert_eq!(s.bf_copies, 0);
    }
    assert_eq!(t.b.rq.as_ref().unwrap().head(), t.recv_posted);
    t
}

#[test]
fn rc_10k_of_every_opcode_with_wraparound() {
    let t = rc_run(ModelCfg::default(), 10_000);
    // The SQ has 16 WQEBBs, the RQ 8 slots, the CQs 16 entries: all wrapped
    // many times (and the 16-bit WQE counter at least once).
    assert!(t.a.sq.cur_post() > 65_536, "cur_post {}", t.a.sq.cur_post());
    assert!(t.cq_a.cons_index() > 16 * 1000);
    assert!(t.cq_b.cons_index() > 16 * 1000);
    assert!(t.recv_posted > 8 * 1000);
}

#[test]
fn rc_cqe_v0_no_blueflame_static_uars() {
    let cfg = ModelCfg { cqe_version: 0, bf_reg_size: 0, dynamic_uar: false, ..Default::default() };
    let t = rc_run(cfg, 500);
    assert_eq!(t.a.shared().uidx(), table::NO_UIDX);
}

#[test]
fn rc_static_uars_with_blueflame() {
    rc_run(ModelCfg { dynamic_uar: false, ..Default::default() }, 300);
}

#[test]
fn bad_lkey_then_flush_of_everything_outstanding() {
    let mut t = Rc::new(ModelCfg::default(), 63);
    // A also has receives posted: they are flushed too.
    let abuf = Region::new(&t.hca, 256, access::LOCAL_WRITE);
    for k in 0..5 {
        let sge = [abuf.sge(k * 16, 16)];
        t.a.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 500 + k as u64, sgl: &sge }]).unwrap();
    }
    let good = [t.src.sge(0, 8)];
    let bad = [Sge::new(good[0].addr, good[0].length, 0xdead)];
    let wrs = [
        SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &bad, ud: None },
        SendWr { wr_id: 2, op: SendOp::Send, flags: SendFlags::empty(), sgl: &good, ud: None },
        SendWr { wr_id: 3, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &good, ud: None },
        SendWr { wr_id: 4, op: SendOp::Send, flags: SendFlags::empty(), sgl: &good, ud: None },
    ];
    post_send(&mut t.a, &wrs).unwrap();
    t.hca.run();
    let got = poll_n(&mut t.cq_a, 9);
    assert_eq!((got[0].wr_id, got[0].status, got[0].opcode), (1, WcStatus::LOC_PROT_ERR, WcOpcode::SEND));
    assert_eq!(got[0].vendor_err, 0x42);
    // Every outstanding WQE, signaled or not, gets a flush-error completion.
    let sends: Vec<_> = got.iter().filter(|w| !w.opcode.is_recv()).map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        sends,
        vec![
            (1, WcStatus::LOC_PROT_ERR),
            (2, WcStatus::WR_FLUSH_ERR),
            (3, WcStatus::WR_FLUSH_ERR),
            (4, WcStatus::WR_FLUSH_ERR)
        ]
    );
    let recvs: Vec<_> = got.iter().filter(|w| w.opcode.is_recv()).map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(recvs, (500..505).map(|k| (k, WcStatus::WR_FLUSH_ERR)).collect::<Vec<_>>());
    // Requests posted in the error state are flushed as well.
    t.a.on_state_change(6);
    post_send(&mut t.a, &wrs[1..3]).unwrap();
    t.hca.run();
    let got = poll_n(&mut t.cq_a, 2);
    assert!(got.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR));
    assert_eq!(poll_n(&mut t.cq_b, 0).len(), 0, "nothing reached B");
    t.hca.assert_clean();
}

#[test]
fn flush_count_equals_posted() {
    let mut t = Rc::new(ModelCfg::default(), 255);
    let good = [t.src.sge(0, 8)];
    // Fill the SQ (8 requests, every other one signaled) without running the
    // device, then fail the QP.
    let wrs: Vec<SendWr<'_>> = (0..8)
        .map(|n| SendWr {
            wr_id: n,
            op: SendOp::Send,
            flags: if n % 2 == 0 { SendFlags::SIGNALED } else { SendFlags::empty() },
            sgl: &good,
            ud: None,
        })
        .collect();
    post_send(&mut t.a, &wrs).unwrap();
    let e = post_send(&mut t.a, &wrs[..1]).unwrap_err();
    assert_eq!(e.kind, PostErrorKind::QueueFull);
    t.hca.force_error(t.a.qpn());
    t.hca.force_error(t.b.qpn());
    t.hca.run();
    let got = poll_n(&mut t.cq_a, 8);
    assert_eq!(got.iter().map(|w| w.wr_id).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    assert!(got.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR && w.qp_num == t.a.qpn()));
    // B's 8 posted receives.
    let got = poll_n(&mut t.cq_b, 8);
    assert!(got.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR && w.opcode == WcOpcode::RECV));
    // The queues are empty again: posting works (and flushes).
    t.a.on_state_change(6);
    post_send(&mut t.a, &wrs).unwrap();
    t.hca.run();
    assert_eq!(poll_n(&mut t.cq_a, 8).len(), 8);
    t.hca.assert_clean();
}

#[test]
fn bad_rkey_is_remote_access_error() {
    let mut t = Rc::new(ModelCfg::default(), 15);
    let sge = [t.src.sge(0, 16)];
    let r = RemoteAddr { addr: t.remote.addr(64), rkey: t.remote.rkey ^ 0x100 };
    let wr = SendWr { wr_id: 7, op: SendOp::RdmaWrite(r), flags: SendFlags::empty(), sgl: &sge, ud: None };
    post_send(&mut t.a, &[wr]).unwrap();
    t.hca.run();
    let got = poll_n(&mut t.cq_a, 1);
    assert_eq!((got[0].wr_id, got[0].status, got[0].opcode), (7, WcStatus::REM_ACCESS_ERR, WcOpcode::RDMA_WRITE));
    // Reading past the end of the region is the same.
    let mut t = Rc::new(ModelCfg::default(), 15);
    let dst = [t.local.sge(0, 64)];
    let r = RemoteAddr { addr: t.remote.addr(4096 - 32), rkey: t.remote.rkey };
    post_send(
        &mut t.a,
        &[SendWr { wr_id: 8, op: SendOp::RdmaRead(r), flags: SendFlags::SIGNALED, sgl: &dst, ud: None }],
    )
    .unwrap();
    t.hca.run();
    assert_eq!(poll_n(&mut t.cq_a, 1)[0].status, WcStatus::REM_ACCESS_ERR);
    t.hca.assert_clean();
}

#[test]
fn receive_too_small_and_rnr() {
    let mut t = Rc::new(ModelCfg::default(), 31);
    let sge = [t.src.sge(0, 100)]; // B's receives are 64 bytes
    post_send(&mut t.a, &[SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::empty(), sgl: &sge, ud: None }])
        .unwrap();
    t.hca.run();
    assert_eq!(poll_n(&mut t.cq_a, 1)[0].status, WcStatus::REM_INV_REQ_ERR);
    let b = poll_n(&mut t.cq_b, 8);
    assert_eq!((b[0].status, b[0].wr_id), (WcStatus::LOC_LEN_ERR, 0x1_0000_0000));
    assert!(b[1..].iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR));
    // RNR: no receive posted and rnr_retry 0.
    let hca = Hca::new(ModelCfg { rnr_infinite: false, ..Default::default() });
    let ctx = hca.context();
    let cq = hca.new_cq(&ctx, 15);
    let mut a = hca.new_qp(&ctx, &args(QpType::Rc, rc_caps()), cq.cqn(), cq.cqn());
    let b = hca.new_qp(&ctx, &args(QpType::Rc, rc_caps()), cq.cqn(), cq.cqn());
    hca.connect(&a, &b);
    let mut cq = cq;
    let src = Region::new(&hca, 64, 0);
    let sge = [src.sge(0, 8)];
    post_send(&mut a, &[SendWr { wr_id: 3, op: SendOp::Send, flags: SendFlags::empty(), sgl: &sge, ud: None }])
        .unwrap();
    hca.run();
    let w = poll_n(&mut cq, 1);
    assert_eq!((w[0].wr_id, w[0].status), (3, WcStatus::RNR_RETRY_EXC_ERR));
    hca.assert_clean();
}

#[test]
fn rnr_wait_completes_when_a_receive_arrives() {
    let hca = Hca::new(ModelCfg::default());
    let ctx = hca.context();
    let mut cq = hca.new_cq(&ctx, 15);
    let mut a = hca.new_qp(&ctx, &args(QpType::Rc, rc_caps()), cq.cqn(), cq.cqn());
    let mut b = hca.new_qp(&ctx, &args(QpType::Rc, rc_caps()), cq.cqn(), cq.cqn());
    hca.connect(&a, &b);
    let src = Region::new(&hca, 64, 0);
    let dst = Region::new(&hca, 64, access::LOCAL_WRITE);
    src.write(0, b"stalled");
    let sge = [src.sge(0, 7)];
    post_send(&mut a, &[SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }])
        .unwrap();
    hca.run();
    assert!(cq.is_empty());
    assert_eq!(cq.poll(&mut [Wc::default(); 4]), 0);
    b.rq.as_mut().unwrap().post(&[RecvWr { wr_id: 9, sgl: &[dst.sge(0, 64)] }]).unwrap();
    hca.run();
    let got = poll_n(&mut cq, 2);
    assert!(got.iter().any(|w| w.wr_id == 9 && w.byte_len == 7));
    assert_eq!(dst.read(0, 7), b"stalled");
    hca.assert_clean();
}

/// SRQ: two senders, one receiver QP pair sharing one SRQ, 10,000 sends
/// through an 8-entry SRQ (free list recycled), CQE versions 1 and 0.
fn srq_run(cfg: ModelCfg, n: u64) {
    let hca = Hca::new(cfg);
    let ctx = hca.context();
    let mut scq = hca.new_cq(&ctx, 15);
    let mut rcq = hca.new_cq(&ctx, 15);
    let mut srq = hca.new_srq(&ctx, 7, 1);
    let srq_args = QpPrepareArgs { srq: Some(srq.shared().clone()), ..args(QpType::Rc, rc_caps()) };
    let mut senders = [
        hca.new_qp(&ctx, &args(QpType::Rc, rc_caps()), scq.cqn(), scq.cqn()),
        hca.new_qp(&ctx, &args(QpType::Rc, rc_caps()), scq.cqn(), scq.cqn()),
    ];
    let recvs = [hca.new_qp(&ctx, &srq_args, scq.cqn(), rcq.cqn()), hca.new_qp(&ctx, &srq_args, scq.cqn(), rcq.cqn())];
    assert!(recvs[0].rq.is_none(), "no receive queue with an SRQ");
    hca.connect(&senders[0], &recvs[0]);
    hca.connect(&senders[1], &recvs[1]);
    let src = Region::new(&hca, 64, 0);
    let buf = Region::new(&hca, 7 * 64, access::LOCAL_WRITE);
    // Receive k uses buffer slot k % 7; wr_id k.
    let mut posted = 0u64;
    let mut slot_of = std::collections::HashMap::new();
    let mut free: VecDeque<usize> = (0..7).collect();
    let post_recvs = |srq: &mut Srq,
                      posted: &mut u64,
                      free: &mut VecDeque<usize>,
                      slot_of: &mut std::collections::HashMap<u64, usize>| {
        while let Some(s) = free.pop_front() {
            let sge = [buf.sge(s * 64, 64)];
            srq.post(&[RecvWr { wr_id: *posted, sgl: &sge }]).unwrap();
            slot_of.insert(*posted, s);
            *posted += 1;
        }
    };
    post_recvs(&mut srq, &mut posted, &mut free, &mut slot_of);
    // The SRQ is full now (7 posted of 8 WQEs).
    assert_eq!(srq.post(&[RecvWr { wr_id: 99, sgl: &[buf.sge(0, 8)] }]).unwrap_err().kind, PostErrorKind::QueueFull);
    let mut seen = std::collections::HashSet::new();
    for i in 0..n {
        let s = (i % 2) as usize;
        let data = pattern(i, 1 + (i % 60) as usize);
        src.write(0, &data);
        let sge = [src.sge(0, data.len() as u32)];
        post_send(
            &mut senders[s],
            &[SendWr { wr_id: i, op: SendOp::SendWithImm(i as u32), flags: SendFlags::SIGNALED, sgl: &sge, ud: None }],
        )
        .unwrap();
        hca.run();
        let w = poll_n(&mut scq, 1)[0];
        assert_eq!((w.wr_id, w.status, w.qp_num), (i, WcStatus::SUCCESS, senders[s].qpn()));
        let r = poll_n(&mut rcq, 1)[0];
        assert_eq!(
            (r.status, r.imm_data, r.byte_len, r.qp_num),
            (WcStatus::SUCCESS, i as u32, data.len() as u32, recvs[s].qpn())
        );
        assert!(seen.insert(r.wr_id), "wr_id {} twice", r.wr_id);
        let slot = slot_of.remove(&r.wr_id).expect("a posted receive");
        assert_eq!(buf.read(slot * 64, data.len()), data);
        free.push_back(slot);
        post_recvs(&mut srq, &mut posted, &mut free, &mut slot_of);
    }
    assert!(posted > 8 * 100);
    hca.assert_clean();
}

#[test]
fn srq_10k_cqe_v1() {
    srq_run(ModelCfg::default(), 10_000);
}

#[test]
fn srq_cqe_v0() {
    srq_run(ModelCfg { cqe_version: 0, ..Default::default() }, 1000);
}

/// UD: 10,000 datagrams (SEND and SEND_IMM, some inline) between two UD
/// QPs through an address handle; the receiver sees a 40-byte GRH first.
#[test]
fn ud_10k_with_grh_and_wraparound() {
    let hca = Hca::new(ModelCfg::default());
    let ctx = hca.context();
    let mut cq_a = hca.new_cq(&ctx, 15);
    let mut cq_b = hca.new_cq(&ctx, 15);
    let caps = QpCaps { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 32 };
    let mut a = hca.new_qp(&ctx, &args(QpType::Ud, caps), cq_a.cqn(), cq_a.cqn());
    let mut b = hca.new_qp(&ctx, &args(QpType::Ud, caps), cq_b.cqn(), cq_b.cqn());
    for s in 1..=3 {
        hca.set_state(&a, s, None, Some(0x1111));
        hca.set_state(&b, s, None, Some(0x2222));
    }
    let dgid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let attr = AhAttr {
        is_eth: true,
        roce_v2: true,
        sl: 5,
        grh: Some(Grh { dgid, flow_label: 0, sgid_index: 1, hop_limit: 64, traffic_class: 0 }),
        ..Default::default()
    };
    let mut resp = [0u8; AH_RESP_LEN];
    resp[4..10].copy_from_slice(&ModelCfg::default().mac);
    let ah = ctx.ah_create(&attr, &resp).unwrap();
    assert!(ah.av().expect("the AH's vector is in the table").rlid() >= 0xc000, "random RoCE v2 source port");
    let src = Region::new(&hca, 128, 0);
    let rbuf = Region::new(&hca, 4 * 128, access::LOCAL_WRITE);
    let mut recv_k = 0u64;
    let post_recv = |b: &mut Qp<HcaMmio>, k: u64| {
        let sge = [rbuf.sge((k % 4) as usize * 128, 128)];
        b.rq.as_mut().unwrap().post(&[RecvWr { wr_id: k, sgl: &sge }]).unwrap();
    };
    for k in 0..4 {
        post_recv(&mut b, k);
    }
    let dest = UdDest::new(ah.ah_num(), b.qpn(), 0x2222);
    for i in 0..10_000u64 {
        let data = pattern(i, 1 + (i % 80) as usize);
        src.write(0, &data);
        let sge = [src.sge(0, data.len() as u32)];
        let inline = data.len() <= 32 && i % 2 == 0;
        let flags = SendFlags::SIGNALED | if inline { SendFlags::INLINE } else { SendFlags::empty() };
        let op = if i % 3 == 0 { SendOp::SendWithImm(i as u32) } else { SendOp::Send };
        post_send(&mut a, &[SendWr { wr_id: i, op, flags, sgl: &sge, ud: Some(dest) }]).unwrap();
        hca.run();
        let w = poll_n(&mut cq_a, 1)[0];
        assert_eq!((w.wr_id, w.status, w.opcode), (i, WcStatus::SUCCESS, WcOpcode::SEND));
        let r = poll_n(&mut cq_b, 1)[0];
        let mut flags = WcFlags::GRH;
        if i % 3 == 0 {
            flags |= WcFlags::WITH_IMM;
        }
        let want = Wc {
            wr_id: recv_k,
            opcode: WcOpcode::RECV,
            byte_len: 40 + data.len() as u32,
            imm_data: if i % 3 == 0 { i as u32 } else { 0 },
            qp_num: b.qpn(),
            src_qp: a.qpn(),
            wc_flags: flags,
            sl: 5,
            ..Wc::default()
        };
        assert_eq!(r, want, "datagram {i}");
        let slot = (recv_k % 4) as usize * 128;
        assert_eq!(rbuf.read(slot + 24, 16), dgid, "GRH DGID");
        assert_eq!(rbuf.read(slot + 40, data.len()), data);
        recv_k += 1;
        post_recv(&mut b, recv_k + 3);
    }
    // A wrong Q_Key: the send completes, nothing arrives.
    let bad = UdDest::new(dest.ah_num, dest.remote_qpn, 0x3333);
    let sge = [src.sge(0, 4)];
    post_send(&mut a, &[SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: Some(bad) }])
        .unwrap();
    hca.run();
    assert_eq!(poll_n(&mut cq_a, 1)[0].status, WcStatus::SUCCESS);
    assert_eq!(cq_b.poll(&mut [Wc::default(); 2]), 0);
    assert_eq!(hca.stats().ud_dropped, 1);
    assert!(a.sq.cur_post() > 10_000, "the 8-WQEBB ring wrapped {} times", a.sq.cur_post() / 8);
    hca.assert_clean();
}

#[test]
fn arm_events_and_sequence_numbers() {
    let mut t = Rc::new(ModelCfg::default(), 15);
    let cqn = t.cq_b.cqn();
    let sge = [t.src.sge(0, 8)];
    // Armed for the next completion: one event, however many completions.
    t.cq_b.arm(false);
    for _ in 0..2 {
        post_send(&mut t.a, &[SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }])
            .unwrap();
    }
    t.hca.run();
    assert_eq!(t.hca.events(cqn), 1);
    poll_n(&mut t.cq_b, 2);
    poll_n(&mut t.cq_a, 2);
    t.cq_b.on_event();
    // Solicited only: an unsolicited send raises nothing, a solicited one does.
    t.cq_b.arm(true);
    post_send(&mut t.a, &[SendWr { wr_id: 2, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }])
        .unwrap();
    t.hca.run();
    assert_eq!(t.hca.events(cqn), 1);
    post_send(
        &mut t.a,
        &[SendWr {
            wr_id: 3,
            op: SendOp::Send,
            flags: SendFlags::SIGNALED | SendFlags::SOLICITED,
            sgl: &sge,
            ud: None,
        }],
    )
    .unwrap();
    t.hca.run();
    assert_eq!(t.hca.events(cqn), 2);
    poll_n(&mut t.cq_b, 2);
    t.cq_b.on_event();
    // Arming with completions not yet polled raises the event at once.
    post_send(&mut t.a, &[SendWr { wr_id: 4, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }])
        .unwrap();
    t.hca.run();
    t.cq_b.arm(false);
    assert_eq!(t.hca.events(cqn), 3);
    assert_eq!(t.cq_b.arm_sn(), 2);
    // The model checked every arm's sequence number against the events.
    t.hca.assert_clean();
    assert_eq!(t.hca.stats().arms, 3);
    // Forgetting `on_event` is caught: the next arm carries a stale number.
    t.cq_b.arm(false);
    assert!(t.hca.violations().iter().any(|v| v.contains("arm sequence")));
}

#[test]
fn destroy_cleans_the_cq_and_unregisters() {
    let mut t = Rc::new(ModelCfg::default(), 31);
    let sge = [t.src.sge(0, 8)];
    for i in 0..3 {
        post_send(&mut t.a, &[SendWr { wr_id: i, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }])
            .unwrap();
    }
    t.hca.run();
    // B's CQ holds 3 receive completions, A's 3 send completions. Destroy B.
    assert_eq!(t.ctx.registry().qp_count(), 2);
    t.hca.destroy_qp(t.b.qpn());
    let shared = t.b.shared().clone();
    t.cq_b.clean_qp(&shared);
    assert_eq!(t.cq_b.cons_index(), 3);
    let b = std::mem::replace(&mut t.b, t.hca.new_qp(&t.ctx, &args(QpType::Rc, rc_caps()), t.cq_b.cqn(), t.cq_b.cqn()));
    assert!(b.shared().leave_registry());
    drop(b);
    drop(shared);
    assert_eq!(t.ctx.registry().qp_count(), 2, "old B gone, new B registered");
    assert_eq!(t.cq_b.poll(&mut [Wc::default(); 8]), 0);
    assert_eq!(poll_n(&mut t.cq_a, 3).len(), 3);
    t.hca.assert_clean();
}

/// CQE version 0 names QPs by QPN, which the kernel may give again right
/// after a destroy: while a clean of the old QP is still owed, a new QP of
/// the same number would have its completions cleaned with the old ones,
/// so creating it is refused with `EBUSY` until the CQ was polled (audit
/// L5).
#[test]
fn cqe_v0_qpn_reused_while_a_clean_is_owed_is_ebusy() {
    let mut t = Rc::new(ModelCfg { cqe_version: 0, ..Default::default() }, 31);
    let sge = [t.src.sge(0, 8)];
    for i in 0..3 {
        post_send(&mut t.a, &[SendWr { wr_id: i, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }])
            .unwrap();
    }
    t.hca.run();
    // Destroy B the safe layer's way: its CQ's poller is out of reach.
    let old = t.b.qpn();
    t.hca.destroy_qp(old);
    let shared = t.b.shared().clone();
    t.ctx.request_clean(t.cq_b.cqn(), &shared);
    assert!(shared.leave_registry());
    t.hca.reuse_qpns();
    let a = args(QpType::Rc, rc_caps());
    let (p, u) = t.ctx.qp_prepare(&a).unwrap();
    let (qpn, resp) = t.hca.create_qp(&u, QpType::Rc, &p.core_caps(), t.cq_b.cqn(), t.cq_b.cqn(), None).unwrap();
    assert_eq!(qpn, old, "the model gave the QPN again");
    let e = t.ctx.qp_finish_with(p, &resp, qpn, |r, _| t.hca.mmio_for_qp(r)).unwrap_err();
    assert_eq!(e.error.errno(), Some(crate::Errno::EBUSY), "{}", e.error);
    // The caller destroys the kernel QP, then drops the pending one.
    t.hca.destroy_qp(qpn);
    drop(e);
    // Once the CQ is polled (the clean runs), the same number is fine.
    assert_eq!(t.cq_b.poll(&mut [Wc::default(); 8]), 0, "the 3 stale receives were cleaned");
    assert!(!t.ctx.clean_pending(&shared));
    let b = t.hca.new_qp(&t.ctx, &a, t.cq_b.cqn(), t.cq_b.cqn());
    assert_eq!(b.qpn(), old);
    drop(std::mem::replace(&mut t.b, b));
    t.hca.connect(&t.a, &t.b);
    t.recv_posted = 0;
    t.recv_done = 0;
    t.refill();
    post_send(&mut t.a, &[SendWr { wr_id: 9, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }])
        .unwrap();
    t.hca.run();
    assert_eq!(poll_n(&mut t.cq_b, 1)[0].qp_num, old, "the new QP's completion is delivered");
    t.hca.assert_clean();
}

#[test]
fn deferred_clean_runs_at_the_next_poll_and_holds_the_user_index() {
    // The safe layer's way: the QP halves are gone, the CQ poller is out of
    // reach; the clean is requested and runs when the CQ is next polled.
    let mut t = Rc::new(ModelCfg::default(), 31);
    let sge = [t.src.sge(0, 8)];
    for i in 0..3 {
        post_send(&mut t.a, &[SendWr { wr_id: i, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }])
            .unwrap();
    }
    t.hca.run();
    t.hca.destroy_qp(t.b.qpn());
    let shared = t.b.shared().clone();
    let uidx = shared.uidx();
    t.ctx.request_clean(t.cq_b.cqn(), &shared);
    t.ctx.request_clean(t.cq_b.cqn(), &shared); // not repeated
    assert!(shared.leave_registry());
    assert!(!shared.leave_registry(), "already gone");
    let b = std::mem::replace(&mut t.b, t.hca.new_qp(&t.ctx, &args(QpType::Rc, rc_caps()), t.cq_b.cqn(), t.cq_b.cqn()));
    drop(b);
    drop(shared);
    // The request holds the old QP: its user index is not handed out again.
    assert_ne!(t.b.shared().uidx(), uidx);
    assert_eq!(t.cq_b.cons_index(), 0);
    assert_eq!(t.cq_b.poll(&mut [Wc::default(); 8]), 0, "the 3 stale receives were cleaned, not skipped");
    assert_eq!(t.cq_b.cons_index(), 3);
    assert_eq!(t.cq_b.skipped(), 0);
    assert_eq!(poll_n(&mut t.cq_a, 3).len(), 3);
    // The other CQ had nothing to do; the request is gone, the index free.
    let mut seen = false;
    for _ in 0..4 {
        let (p, _) = t.ctx.qp_prepare(&args(QpType::Rc, rc_caps())).unwrap();
        seen |= p.uidx() == uidx;
    }
    assert!(seen, "user index {uidx} returned after the clean");
    t.hca.assert_clean();
}

#[test]
fn deferred_clean_after_reset_and_cq_destroyed() {
    let mut t = Rc::new(ModelCfg::default(), 15);
    let sge = [t.src.sge(0, 8)];
    let wr = SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
    for _ in 0..4 {
        post_send(&mut t.a, &[wr]).unwrap();
    }
    t.hca.run();
    poll_n(&mut t.cq_b, 4);
    // A's CQ still holds 4 send completions; A goes to RESET.
    t.hca.set_state(&t.a, 0, None, None);
    let sa = t.a.shared().clone();
    t.ctx.request_clean(t.cq_a.cqn(), &sa);
    assert!(t.ctx.clean_pending(&sa));
    t.cq_a.apply_cleans();
    assert!(!t.ctx.clean_pending(&sa));
    assert_eq!(t.cq_a.poll(&mut [Wc::default(); 8]), 0);
    assert_eq!(t.cq_a.cons_index(), 4);
    // Requests of a CQ that goes away are dropped.
    t.ctx.request_clean(t.cq_b.cqn(), &sa);
    assert_eq!(t.ctx.cq_destroyed(t.cq_b.cqn()), 1);
    assert!(!t.ctx.clean_pending(&sa));
    t.recv_posted = 0;
    t.recv_done = 0;
    t.hca.set_state(&t.b, 0, None, None);
    t.hca.connect(&t.a, &t.b);
    t.refill();
    post_send(&mut t.a, &[wr]).unwrap();
    t.hca.run();
    assert_eq!(poll_n(&mut t.cq_a, 1)[0].wr_id, 1);
    t.hca.assert_clean();
}

#[test]
fn reset_and_reconnect() {
    let mut t = Rc::new(ModelCfg::default(), 15);
    let sge = [t.src.sge(0, 8)];
    let wr = SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
    for _ in 0..5 {
        post_send(&mut t.a, &[wr]).unwrap();
    }
    t.hca.run();
    poll_n(&mut t.cq_a, 5);
    poll_n(&mut t.cq_b, 5);
    // Both to RESET (indices and doorbell records start over), back to RTS.
    for q in [&t.a, &t.b] {
        t.hca.set_state(q, 0, None, None);
    }
    let (sa, sb) = (t.a.shared().clone(), t.b.shared().clone());
    t.cq_a.clean_qp(&sa);
    t.cq_b.clean_qp(&sb);
    t.recv_posted = 0;
    t.recv_done = 0;
    t.hca.connect(&t.a, &t.b);
    t.refill();
    for _ in 0..20 {
        post_send(&mut t.a, &[wr]).unwrap();
        t.hca.run();
        poll_n(&mut t.cq_a, 1);
        poll_n(&mut t.cq_b, 1);
        t.recv_done += 1;
        t.refill();
    }
    // Request counts run on through RESET; the device's WQEBB counter
    // started over.
    assert_eq!(t.a.sq.head(), 25);
    assert_eq!(t.a.sq.cur_post(), 20);
    t.hca.assert_clean();
}

/// A CQ poller on another thread may be past its registry check when the
/// QP moves to RESET and store an old request's retirement after the move
/// (audit M2). Polling the old completions after `on_state_change(RESET)`
/// and before the clean produces exactly that store; the posters of the
/// new epoch must still stop at `max_post` (the old scheme reset the
/// retire counters to 0 at RESET, and this stale value let them post
/// `max_post + 5` sends and `max_post + 5` receives, overwriting WQEs the
/// HCA had not executed).
#[test]
fn stale_retirement_after_reset_does_not_let_posters_exceed_max_post() {
    let mut t = Rc::new(ModelCfg::default(), 63);
    let sge = [t.src.sge(0, 8)];
    let wr = SendWr { wr_id: 1, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
    for _ in 0..5 {
        post_send(&mut t.a, &[wr]).unwrap();
    }
    t.hca.run();
    for q in [&t.a, &t.b] {
        t.hca.set_state(q, 0, None, None);
    }
    // The late poller: its retirements land after the reset.
    assert_eq!(poll_n(&mut t.cq_a, 5).len(), 5);
    assert_eq!(poll_n(&mut t.cq_b, 5).len(), 5);
    let (sa, sb) = (t.a.shared().clone(), t.b.shared().clone());
    t.cq_a.clean_qp(&sa);
    t.cq_b.clean_qp(&sb);
    t.hca.connect(&t.a, &t.b);
    let max = t.a.sq.max_post();
    let mut sent = 0;
    while post_send(&mut t.a, &[wr]).is_ok() {
        sent += 1;
        assert!(sent <= max + 5, "runaway poster");
    }
    assert_eq!(sent, max, "sends accepted in the new epoch");
    let rq = t.b.rq.as_mut().unwrap();
    let max = rq.shared().sizes().rq_max_post;
    let rsge = [t.rbuf.sge(0, RSLOT as u32)];
    let mut posted = 0;
    while rq.post(&[RecvWr { wr_id: 7, sgl: &rsge }]).is_ok() {
        posted += 1;
        assert!(posted <= max + 5, "runaway receive poster");
    }
    assert_eq!(posted, max, "receives accepted in the new epoch");
    t.hca.assert_clean();
}

#[test]
fn concurrent_poster_and_poller_threads() {
    // The send half and the CQ in two threads, the model in a third step
    // loop: exercises the Acquire/Release retire counters.
    let t = Rc::new(ModelCfg::default(), 63);
    let Rc { hca, mut cq_a, mut cq_b, mut a, b, src, remote, .. } = t;
    let sge = [src.sge(0, 8)];
    let r = RemoteAddr { addr: remote.addr(64), rkey: remote.rkey };
    let n = 2000u64;
    let done = std::sync::atomic::AtomicBool::new(false);
    let mut b = b;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0;
            while i < n {
                let wr = SendWr { wr_id: i, op: SendOp::RdmaWrite(r), flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
                match post_send(&mut a, &[wr]) {
                    Ok(()) => i += 1,
                    Err(e) => assert_eq!(e.kind, PostErrorKind::QueueFull),
                }
                std::thread::yield_now();
            }
        });
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                hca.run();
                std::thread::yield_now();
            }
        });
        let mut got = 0;
        let mut out = [Wc::default(); 4];
        while got < n {
            let k = cq_a.poll(&mut out);
            for w in &out[..k] {
                assert_eq!((w.wr_id, w.status), (got, WcStatus::SUCCESS));
                got += 1;
            }
            std::thread::yield_now();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(cq_b.poll(&mut [Wc::default(); 1]), 0);
    let _ = &mut b;
    hca.assert_clean();
}

/// `poll_uninit` hands over the same completions as `poll` and leaves the
/// entries past them as `poll` leaves them (initialised, unwritten).
#[test]
fn poll_uninit_matches_poll() {
    let mut t = Rc::new(ModelCfg::default(), 15);
    let r = RemoteAddr { addr: t.remote.addr(0), rkey: t.remote.rkey };
    let write = [t.src.sge(0, 8)];
    let wrs: Vec<SendWr<'_>> = (0..5)
        .map(|id| SendWr { wr_id: id, op: SendOp::RdmaWrite(r), flags: SendFlags::SIGNALED, sgl: &write, ud: None })
        .collect();
    post_send(&mut t.a, &wrs).unwrap();
    t.hca.run();
    let mut buf = [core::mem::MaybeUninit::<Wc>::uninit(); 3];
    let mut ids = Vec::new();
    for want in [3, 2, 0] {
        let n = t.cq_a.poll_uninit(&mut buf);
        assert_eq!(n, want);
        for w in &buf[..n] {
            // SAFETY: `poll_uninit` initialised every entry of `buf`.
            let w = unsafe { w.assume_init() };
            assert_eq!((w.status, w.opcode, w.qp_num), (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE, t.a.qpn()));
            ids.push(w.wr_id);
        }
    }
    assert_eq!(ids, vec![0, 1, 2, 3, 4]);
}

#[test]
fn single_entry_polls_across_many_wraps() {
    // `poll` into one `Wc` takes its own path (a cursor at the consumer
    // index instead of index math): one at a time, mixed with batches, over
    // a 16-entry CQ many times round, both CQE versions; requester entries
    // on A's CQ (WRITE and READ, the READ's length from the CQE), responder
    // entries on B's (the single poll hands them to the general path).
    for cqe_version in [1, 0] {
        let mut t = Rc::new(ModelCfg { cqe_version, ..Default::default() }, 15);
        assert_eq!(t.cq_a.ncqe(), 16);
        let r = RemoteAddr { addr: t.remote.addr(0), rkey: t.remote.rkey };
        let (mut posted, mut done, mut recvs) = (0u64, 0u64, 0u64);
        let (write, read, send) = ([t.src.sge(0, 8)], [t.local.sge(0, 12)], [t.src.sge(0, 4)]);
        let mut one = [Wc::default(); 1];
        assert_eq!(t.cq_a.poll(&mut one), 0, "empty");
        for round in 0..400u64 {
            let k = 1 + round % 7;
            let wrs: Vec<SendWr<'_>> = (0..k)
                .map(|i| {
                    let id = posted + i;
                    let (op, sgl) = match id % 3 {
                        0 => (SendOp::RdmaWrite(r), &write[..]),
                        1 => (SendOp::RdmaRead(r), &read[..]),
                        _ => (SendOp::Send, &send[..]),
                    };
                    SendWr { wr_id: id, op, flags: SendFlags::SIGNALED, sgl, ud: None }
                })
                .collect();
            post_send(&mut t.a, &wrs).unwrap();
            posted += k;
            t.hca.run();
            while done < posted {
                let got = if round % 5 == 4 {
                    let mut three = [Wc::default(); 3];
                    let n = t.cq_a.poll(&mut three);
                    three[..n].to_vec()
                } else {
                    let empty = t.cq_a.is_empty();
                    let n = t.cq_a.poll(&mut one);
                    assert_eq!(empty, n == 0);
                    one[..n].to_vec()
                };
                assert!(!got.is_empty(), "round {round}: {done} of {posted}");
                for w in got {
                    assert_eq!((w.wr_id, w.status, w.qp_num), (done, WcStatus::SUCCESS, t.a.qpn()));
                    let (opcode, len) = match done % 3 {
                        0 => (WcOpcode::RDMA_WRITE, 0),
                        1 => (WcOpcode::RDMA_READ, 12),
                        _ => (WcOpcode::SEND, 0),
                    };
                    assert_eq!((w.opcode, w.byte_len), (opcode, len), "wr {done}");
                    done += 1;
                }
            }
            assert_eq!(t.cq_a.poll(&mut one), 0);
            // B's receives, one at a time.
            while t.cq_b.poll(&mut one) == 1 {
                assert_eq!((one[0].wr_id, one[0].opcode), (0x1_0000_0000 + recvs, WcOpcode::RECV));
                recvs += 1;
                t.recv_done += 1;
            }
            t.refill();
        }
        assert_eq!(recvs, (posted + 1) / 3);
        assert_eq!(u64::from(t.cq_a.cons_index()), posted);
        assert!(posted > 16 * 50);
        t.hca.assert_clean();
    }
}

/// Two QPs (A, C) on one CQ (X) for sends and receives, their peers (B, D)
/// on another (Y): what `poll_one_matches_poll` runs twice.
struct Shared {
    hca: Hca,
    ctx: Context,
    x: Cq<HcaMmio>,
    y: Cq<HcaMmio>,
    a: Qp<HcaMmio>,
    b: Qp<HcaMmio>,
    c: Qp<HcaMmio>,
    _d: Qp<HcaMmio>,
    src: Region,
    local: Region,
    remote: Region,
    rbuf: Region,
    /// Receives posted / completed on A and B.
    recv: [(u64, u64); 2],
}

impl Shared {
    fn new(cqe_version: u8) -> Shared {
        let hca = Hca::new(ModelCfg { cqe_version, ..Default::default() });
        let ctx = hca.context();
        let x = hca.new_cq(&ctx, 15);
        let y = hca.new_cq(&ctx, 63);
        let qa = args(QpType::Rc, rc_caps());
        let a = hca.new_qp(&ctx, &qa, x.cqn(), x.cqn());
        let b = hca.new_qp(&ctx, &qa, y.cqn(), y.cqn());
        let c = hca.new_qp(&ctx, &qa, x.cqn(), x.cqn());
        let d = hca.new_qp(&ctx, &qa, y.cqn(), y.cqn());
        hca.connect(&a, &b);
        hca.connect(&c, &d);
        let src = Region::new(&hca, 4096, 0);
        let local = Region::new(&hca, 4096, access::LOCAL_WRITE);
        let remote = Region::new(&hca, 4096, access::ALL);
        let rbuf = Region::new(&hca, 16 * RSLOT, access::LOCAL_WRITE);
        let mut s = Shared { hca, ctx, x, y, a, b, c, _d: d, src, local, remote, rbuf, recv: [(0, 0); 2] };
        s.refill();
        s
    }

    /// Keeps 8 receives posted on A and on B.
    fn refill(&mut self) {
        for (i, qp) in [&mut self.a, &mut self.b].into_iter().enumerate() {
            let (posted, done) = &mut self.recv[i];
            while *posted - *done < 8 {
                let sge = [self.rbuf.sge((i * 8 + (*posted % 8) as usize) * RSLOT, RSLOT as u32)];
                qp.rq.as_mut().unwrap().post(&[RecvWr { wr_id: (i as u64 + 1) << 32 | *posted, sgl: &sge }]).unwrap();
                *posted += 1;
            }
        }
    }

    /// Round `r` of the script: posts on A (WRITE, READ, SEND by wr_id),
    /// on C (a WRITE every other round; at round 100 one with a bad rkey,
    /// after which C is in error and every request is flushed), on B (a
    /// SEND to A every third round), and every 50 rounds a destroy of a
    /// spare QP (a registry generation bump that closes X's gate); then runs
    /// the model and drains Y.
    fn round(&mut self, r: u64, next_a: &mut u64) {
        let rr = RemoteAddr { addr: self.remote.addr(0), rkey: self.remote.rkey };
        let (write, read, send) = ([self.src.sge(0, 8)], [self.local.sge(0, 12)], [self.src.sge(0, 4)]);
        let k = 1 + r % 5;
        let wrs: Vec<SendWr<'_>> = (*next_a..*next_a + k)
            .map(|id| {
                let (op, sgl) = match id % 3 {
                    0 => (SendOp::RdmaWrite(rr), &write[..]),
                    1 => (SendOp::RdmaRead(rr), &read[..]),
                    _ => (SendOp::Send, &send[..]),
                };
                SendWr { wr_id: id, op, flags: SendFlags::SIGNALED, sgl, ud: None }
            })
            .collect();
        post_send(&mut self.a, &wrs).unwrap();
        *next_a += k;
        if r % 2 == 0 {
            let bad = RemoteAddr { addr: self.remote.addr(64), rkey: self.remote.rkey ^ 0x100 };
            let op = SendOp::RdmaWrite(if r == 100 { bad } else { rr });
            let wr = SendWr { wr_id: 0xc000 + r, op, flags: SendFlags::SIGNALED, sgl: &write, ud: None };
            post_send(&mut self.c, &[wr]).unwrap();
        }
        if r % 3 == 0 {
            let wr = SendWr { wr_id: 0xb000 + r, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &send, ud: None };
            post_send(&mut self.b, &[wr]).unwrap();
        }
        if r % 50 == 25 {
            let e = self.hca.new_qp(&self.ctx, &args(QpType::Rc, rc_caps()), self.y.cqn(), self.y.cqn());
            self.hca.destroy_qp(e.qpn());
            assert!(e.shared().leave_registry());
        }
        self.hca.run();
        let mut buf = [Wc::default(); 8];
        loop {
            let n = self.y.poll(&mut buf);
            if n == 0 {
                break;
            }
            for w in &buf[..n] {
                if w.opcode == WcOpcode::RECV && w.qp_num == self.b.qpn() {
                    self.recv[1].1 += 1;
                }
            }
        }
    }
}

/// `poll_one` hands over the same completions as `poll` with one-entry
/// slices (and the same counters), over a 16-entry CQ many times round,
/// both CQE versions: successful requester entries of two QPs interleaved
/// (the cached QP changes), RDMA READs (which the inlined fast path leaves
/// to the slow one), responder entries, error and flush entries of a QP in
/// error, registry generation bumps (the gate closes) and a batch poll
/// every seventh round; the completions are also checked against the
/// script.
#[test]
fn poll_one_matches_poll() {
    for cqe_version in [1, 0] {
        let (mut p, mut o) = (Shared::new(cqe_version), Shared::new(cqe_version));
        assert_eq!(p.x.ncqe(), 16);
        let (mut next_p, mut next_o) = (0u64, 0u64);
        let (mut a_done, mut c_seen, mut c_errors) = (0u64, 0u64, 0u64);
        for r in 0..400u64 {
            p.round(r, &mut next_p);
            o.round(r, &mut next_o);
            let (mut got_p, mut got_o) = (Vec::new(), Vec::new());
            if r % 7 == 6 {
                for (s, got) in [(&mut p, &mut got_p), (&mut o, &mut got_o)] {
                    let mut three = [Wc::default(); 3];
                    let n = s.x.poll(&mut three);
                    got.extend_from_slice(&three[..n]);
                }
            }
            loop {
                let mut one = [Wc::default(); 1];
                let empty = p.x.is_empty();
                let n = p.x.poll(&mut one);
                assert_eq!(empty, n == 0);
                let mut w = Wc { wr_id: 0xdead, ..Wc::default() };
                let empty = o.x.is_empty();
                let got = o.x.poll_one(&mut w);
                assert_eq!(empty, !got);
                assert_eq!(n == 1, got, "round {r}: poll {n}, poll_one {got}");
                if !got {
                    assert_eq!(w.wr_id, 0xdead, "left as it was");
                    break;
                }
                got_p.push(one[0]);
                got_o.push(w);
            }
            assert_eq!(got_p, got_o, "round {r}");
            for w in &got_o {
                if w.qp_num == o.a.qpn() && w.opcode == WcOpcode::RECV {
                    assert_eq!((w.wr_id, w.status), (1 << 32 | o.recv[0].1, WcStatus::SUCCESS));
                    p.recv[0].1 += 1;
                    o.recv[0].1 += 1;
                } else if w.qp_num == o.a.qpn() {
                    assert_eq!((w.wr_id, w.status), (a_done, WcStatus::SUCCESS), "round {r}");
                    let (opcode, len) = match a_done % 3 {
                        0 => (WcOpcode::RDMA_WRITE, 0),
                        1 => (WcOpcode::RDMA_READ, 12),
                        _ => (WcOpcode::SEND, 0),
                    };
                    assert_eq!((w.opcode, w.byte_len), (opcode, len), "wr {a_done}");
                    a_done += 1;
                } else {
                    assert_eq!(w.qp_num, o.c.qpn(), "{w:?}");
                    assert_eq!(w.wr_id, 0xc000 + 2 * c_seen, "C's in order");
                    if w.wr_id < 0xc000 + 100 {
                        assert_eq!(w.status, WcStatus::SUCCESS);
                    } else {
                        assert_ne!(w.status, WcStatus::SUCCESS, "C in error from round 100: {w:?}");
                        c_errors += 1;
                    }
                    c_seen += 1;
                }
            }
            p.refill();
            o.refill();
        }
        assert_eq!(a_done, next_o);
        assert_eq!(c_seen, 200);
        assert_eq!(c_errors, 150);
        assert!(o.recv[0].1 > 100);
        for s in [&p, &o] {
            assert!(s.x.cons_index() > 16 * 80, "many times round: {}", s.x.cons_index());
        }
        assert_eq!(p.x.cons_index(), o.x.cons_index());
        assert_eq!(p.x.skipped(), o.x.skipped());
        p.hca.assert_clean();
        o.hca.assert_clean();
    }
}

/// A clean requested for a CQ runs before `poll_one` (and a one-entry
/// `poll`) hands over anything, also when the fast path had the QP cached
/// and its gate open: the request closes the gate.
#[test]
fn poll_one_runs_a_requested_clean_first() {
    for (cqe_version, use_poll) in [(1, false), (1, true), (0, false)] {
        let mut t = Rc::new(ModelCfg { cqe_version, ..Default::default() }, 15);
        let sge = [t.src.sge(0, 8)];
        let r = RemoteAddr { addr: t.remote.addr(0), rkey: t.remote.rkey };
        let wr = SendWr { wr_id: 7, op: SendOp::RdmaWrite(r), flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
        for _ in 0..4 {
            post_send(&mut t.a, &[wr]).unwrap();
        }
        t.hca.run();
        let one = |cq: &mut Cq<HcaMmio>| {
            let mut w = Wc::default();
            let got = if use_poll { cq.poll(std::slice::from_mut(&mut w)) == 1 } else { cq.poll_one(&mut w) };
            got.then_some(w)
        };
        // The first completion: A is cached, the gate open.
        assert_eq!(one(&mut t.cq_a).map(|w| w.wr_id), Some(7));
        // A goes to RESET; its other 3 completions must not come out.
        t.hca.set_state(&t.a, 0, None, None);
        let sa = t.a.shared().clone();
        t.ctx.request_clean(t.cq_a.cqn(), &sa);
        assert!(t.ctx.clean_pending(&sa));
        assert_eq!(one(&mut t.cq_a), None);
        assert!(!t.ctx.clean_pending(&sa));
        assert_eq!((t.cq_a.cons_index(), t.cq_a.skipped()), (4, 0));
        // Back to work: the next completion comes out.
        t.hca.set_state(&t.b, 0, None, None);
        t.hca.connect(&t.a, &t.b);
        t.recv_posted = 0;
        t.recv_done = 0;
        t.refill();
        post_send(&mut t.a, &[SendWr { wr_id: 8, ..wr }]).unwrap();
        t.hca.run();
        assert_eq!(one(&mut t.cq_a).map(|w| (w.wr_id, w.status)), Some((8, WcStatus::SUCCESS)));
        assert_eq!(one(&mut t.cq_a), None);
        t.hca.assert_clean();
    }
}

/// An RC QP on CQ `cqn` connected to one on CQ `peer_cqn`.
fn rc_pair(hca: &Hca, ctx: &Context, cqn: u32, peer_cqn: u32) -> (Qp<HcaMmio>, Qp<HcaMmio>) {
    let a = hca.new_qp(ctx, &args(QpType::Rc, rc_caps()), cqn, cqn);
    let b = hca.new_qp(ctx, &args(QpType::Rc, rc_caps()), peer_cqn, peer_cqn);
    hca.connect(&a, &b);
    (a, b)
}

/// Many QPs on one CQ, their completions alternating (so the CQ finds
/// each CQE's QP through its table of recent QPs, not the one-entry
/// cache): every completion names its own QP and wr_id, before and after
/// a QP is destroyed and its user index given to a new QP (the table is
/// dropped with the generation bump, so the new QP's completions never
/// resolve to the old one's slots; with CQE version 0 the new QP has the
/// old one's QPN, its resource number). CQE version 0 and 1.
#[test]
fn many_qps_on_one_cq_alternate_and_survive_a_replaced_qp() {
    for cqe_version in [1, 0] {
        let hca = Hca::new(ModelCfg { cqe_version, ..Default::default() });
        let ctx = hca.context();
        let (mut cq, other) = (hca.new_cq(&ctx, 64), hca.new_cq(&ctx, 64));
        let (cqn, other_cqn) = (cq.cqn(), other.cqn());
        let new_pair = || rc_pair(&hca, &ctx, cqn, other_cqn);
        let mut qps: Vec<_> = (0..5).map(|_| new_pair()).collect();
        let src = Region::new(&hca, 64, access::ALL);
        let dst = Region::new(&hca, 64, access::ALL);
        let sge = [src.sge(0, 8)];
        let op = SendOp::RdmaWrite(RemoteAddr { addr: dst.addr(0), rkey: dst.rkey });
        let round = |qps: &mut Vec<(Qp<HcaMmio>, Qp<HcaMmio>)>, cq: &mut Cq<HcaMmio>, r: u64| {
            for (i, (a, _)) in qps.iter_mut().enumerate() {
                let wr = SendWr { wr_id: 1000 * i as u64 + r, op, flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
                post_send(a, &[wr]).unwrap();
            }
            hca.run();
            let mut seen = vec![false; qps.len()];
            for w in poll_n(cq, qps.len()) {
                let i = qps.iter().position(|(a, _)| a.qpn() == w.qp_num).expect("a completion of one of the QPs");
                assert_eq!((w.status, w.wr_id), (WcStatus::SUCCESS, 1000 * i as u64 + r), "QP {i}");
                assert!(!std::mem::replace(&mut seen[i], true), "two completions of QP {i}");
            }
        };
        for r in 0..3 {
            round(&mut qps, &mut cq, r);
        }
        // Replace QP 2: destroyed (its CQ cleaned), a new one in its place.
        let (old, _) = qps.remove(2);
        let old_qpn = old.qpn();
        hca.destroy_qp(old.qpn());
        let shared = old.shared().clone();
        cq.clean_qp(&shared);
        assert!(shared.leave_registry(), "unregistered: the generation moves");
        drop(old);
        drop(shared);
        hca.reuse_qpns();
        qps.insert(2, new_pair());
        if cqe_version == 0 {
            // Version 0 names QPs by QPN, and the model gave the old one again.
            assert_eq!(qps[2].0.qpn(), old_qpn, "the new QP has the old one's QPN");
        }
        for r in 3..6 {
            round(&mut qps, &mut cq, r);
        }
        hca.assert_clean();
    }
}

/// Many QPs on one CQ in runs the fast path takes whole, switching QPs in
/// place ([`Cq`]'s table of recent QPs): each round posts one to three
/// WRITEs on each of 7 QPs (signaled or not), and the CQ is polled in
/// batches of 16, 1, 3 and 5 and with `poll_one`. Every signaled request
/// completes once, in its QP's order, and each switch retires the QP it
/// leaves: 150 rounds through send queues of 8 would run out of room
/// otherwise (`post` fails with `QueueFull`). CQE version 0 and 1.
#[test]
fn runs_switch_qps_in_place_and_retire_each() {
    for cqe_version in [1, 0] {
        let hca = Hca::new(ModelCfg { cqe_version, ..Default::default() });
        let ctx = hca.context();
        let (mut cq, other) = (hca.new_cq(&ctx, 63), hca.new_cq(&ctx, 63));
        let mut qps: Vec<_> = (0..7).map(|_| rc_pair(&hca, &ctx, cq.cqn(), other.cqn())).collect();
        let src = Region::new(&hca, 64, access::ALL);
        let dst = Region::new(&hca, 64, access::ALL);
        let sge = [src.sge(0, 8)];
        let op = SendOp::RdmaWrite(RemoteAddr { addr: dst.addr(0), rkey: dst.rkey });
        let (mut next, mut want) = (vec![0u64; qps.len()], vec![Vec::new(); qps.len()]);
        let mut got: Vec<Vec<u64>> = vec![Vec::new(); qps.len()];
        let mut polls = 0usize;
        // Under Miri fewer, still more requests a QP than its queue holds.
        let rounds = if cfg!(miri) { 20 } else { 150 };
        for r in 0..rounds {
            for (i, (a, _)) in qps.iter_mut().enumerate() {
                let count = 1 + (r * 7 + i * 3) % 3;
                for j in 0..count {
                    let signaled = j + 1 == count || (r + i + j) % 2 == 0;
                    let wr_id = (i as u64) << 32 | next[i];
                    next[i] += 1;
                    let flags = if signaled { SendFlags::SIGNALED } else { SendFlags::empty() };
                    post_send(a, &[SendWr { wr_id, op, flags, sgl: &sge, ud: None }])
                        .unwrap_or_else(|e| panic!("round {r}, QP {i}: {e:?}"));
                    if signaled {
                        want[i].push(wr_id);
                    }
                }
            }
            hca.run();
            let total: usize = want.iter().map(Vec::len).sum();
            while got.iter().map(Vec::len).sum::<usize>() < total {
                let mut buf = [Wc::default(); 16];
                let k = match polls % 5 {
                    0 => cq.poll(&mut buf),
                    1 => cq.poll(&mut buf[..1]),
                    2 => cq.poll(&mut buf[..3]),
                    3 => cq.poll(&mut buf[..5]),
                    _ => usize::from(cq.poll_one(&mut buf[0])),
                };
                polls += 1;
                assert!(k != 0, "round {r}: the CQ ran dry");
                for w in &buf[..k] {
                    let i = (w.wr_id >> 32) as usize;
                    assert_eq!(
                        (w.status, w.opcode, w.qp_num),
                        (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE, qps[i].0.qpn())
                    );
                    got[i].push(w.wr_id);
                }
            }
            assert!(cq.is_empty(), "round {r}: a completion too many");
        }
        assert_eq!(got, want);
        assert!(cq.skipped() == 0);
        hca.assert_clean();
    }
}
