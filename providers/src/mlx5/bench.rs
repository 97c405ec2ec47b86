//! Benchmark fixtures (`--features mock`, hidden from the docs): mlx5
//! queues with the HCA model behind them, for `examples/mlx5_bench.rs`.
//!
//! Sound to expose: each fixture owns the model, the context, the queues
//! and the memory the model reads and writes, and hands out none of them
//! (no `&mut Qp` or `&mut Cq` that could be swapped into another fixture,
//! whose model would then write memory this one frees).
//!
//! Unsafe code (allowed below): `post` forwards `SendQueue::post`'s
//! INLINE contract; `fill` posts requests that are not INLINE.
#![allow(unsafe_code)]

use crate::mlx5::mem::DmaBuf;
use crate::mlx5::mmio::NoopMmio;
use crate::mlx5::model::{access, retire_all_sends, Hca, HcaMmio, ModelCfg};
use crate::mlx5::qp::{QpCaps, QpPrepareArgs, QpType};
use crate::mlx5::{Context, Cq, Qp};
use crate::wr::{PostError, RemoteAddr, SendFlags, SendOp, SendWr, Sge, Wc};

fn rc_args(sq_wr: u32) -> QpPrepareArgs {
    let caps = QpCaps { max_send_wr: sq_wr, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    QpPrepareArgs { qp_type: QpType::Rc, caps, srq: None, sq_sig_all: false }
}

/// An RC QP in RTS whose doorbell goes nowhere ([`NoopMmio`]: the UAR
/// store and its barriers compile away; the doorbell record is written).
/// Nothing executes its requests: [`retire_all`](Self::retire_all)
/// pretends the device completed them.
// `repr(C)`, the queue first: `&mut self.qp` is `self`, so the measured
// code is the same as on a bare `&mut Qp` (no extra pointer adjustment).
#[derive(Debug)]
#[repr(C)]
pub struct PostBench {
    qp: Qp<NoopMmio>,
    _cq: Cq<HcaMmio>,
    _ctx: Context,
    _hca: Hca,
}

impl PostBench {
    /// A QP of `sq_wr` send requests (one SGE each) on a CQ of `cq_depth`.
    pub fn new(sq_wr: u32, cq_depth: u32) -> PostBench {
        let hca = Hca::new(ModelCfg::default());
        let ctx = hca.context();
        let cq = hca.new_cq(&ctx, cq_depth);
        let (p, u) = ctx.qp_prepare(&rc_args(sq_wr)).expect("qp_prepare");
        let (qpn, resp) = hca.create_qp(&u, QpType::Rc, &p.core_caps(), cq.cqn(), cq.cqn(), None).expect("create_qp");
        let qp = ctx.qp_finish_with(p, &resp, qpn, |_, _| NoopMmio).map_err(|e| e.error).expect("qp_finish");
        for s in 1..=3 {
            qp.on_state_change(s);
        }
        PostBench { qp, _cq: cq, _ctx: ctx, _hca: hca }
    }

    /// [`SendQueue::post`](crate::mlx5::SendQueue::post).
    ///
    /// # Safety
    /// As for `SendQueue::post`.
    #[inline(always)]
    pub unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        // SAFETY: forwarded.
        unsafe { self.qp.sq.post(wrs) }
    }

    /// Send requests that may be outstanding.
    pub fn max_post(&self) -> u32 {
        self.qp.sq.max_post()
    }

    /// Pretends the device completed every request posted.
    pub fn retire_all(&mut self) {
        retire_all_sends(&self.qp);
    }
}

/// A connected pair of RC QPs on the HCA model and the CQ of the first:
/// [`fill`](Self::fill) posts RDMA WRITEs (8 bytes within a region the
/// fixture owns) and runs the model, which writes their completions.
// `repr(C)`, the CQ first: see `PostBench`.
#[derive(Debug)]
#[repr(C)]
pub struct PollBench {
    cq: Cq<HcaMmio>,
    a: Qp<HcaMmio>,
    _b: Qp<HcaMmio>,
    _other: Cq<HcaMmio>,
    hca: Hca,
    _ctx: Context,
    mem: DmaBuf,
    lkey: u32,
    rkey: u32,
}

impl PollBench {
    /// QPs of `sq_wr` send requests, CQs of `cq_depth`.
    pub fn new(sq_wr: u32, cq_depth: u32) -> PollBench {
        let hca = Hca::new(ModelCfg::default());
        let ctx = hca.context();
        let cq = hca.new_cq(&ctx, cq_depth);
        let other = hca.new_cq(&ctx, cq_depth);
        let a = hca.new_qp(&ctx, &rc_args(sq_wr), cq.cqn(), cq.cqn());
        let b = hca.new_qp(&ctx, &rc_args(sq_wr), other.cqn(), other.cqn());
        hca.connect(&a, &b);
        let mem = DmaBuf::new("mlx5_bench", 4096).expect("bench memory");
        // The model writes only inside this region, which lives as long as it.
        let (lkey, rkey) = hca.reg_mr(mem.addr(), 4096, access::ALL);
        PollBench { cq, a, _b: b, _other: other, hca, _ctx: ctx, mem, lkey, rkey }
    }

    /// [`Cq::poll`].
    #[inline(always)]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.cq.poll(out)
    }

    /// [`Cq::poll_one`].
    #[inline(always)]
    pub fn poll_one(&mut self, w: &mut Wc) -> bool {
        self.cq.poll_one(w)
    }

    /// The most completions one [`fill`](Self::fill) may ask for.
    pub fn fill_max(&self) -> u64 {
        u64::from(self.cq.ncqe()).min(u64::from(self.a.sq.max_post()))
    }

    /// Posts `n` (at most [`fill_max`](Self::fill_max)) signaled RDMA
    /// WRITEs with wr_ids `first..first + n` and runs the model; their
    /// completions are then in the CQ, to be polled.
    pub fn fill(&mut self, first: u64, n: u64) {
        assert!(n <= self.fill_max(), "{n} completions do not fit");
        let base = self.mem.addr();
        let sge = [Sge::new(base, 8, self.lkey)];
        let op = SendOp::RdmaWrite(RemoteAddr { addr: base + 2048, rkey: self.rkey });
        let wrs: Vec<SendWr<'_>> =
            (0..n).map(|i| SendWr { wr_id: first + i, op, flags: SendFlags::SIGNALED, sgl: &sge, ud: None }).collect();
        // SAFETY: not INLINE: nothing is read here.
        unsafe { self.a.sq.post(&wrs) }.expect("post");
        self.hca.run();
    }

    /// Panics if the model saw the provider break a rule.
    pub fn assert_clean(&self) {
        self.hca.assert_clean();
    }
}

/// `qps` connected pairs of RC QPs on the HCA model whose first QPs all
/// complete on one CQ (`examples/mlx5_scale.rs`): [`fill`](Self::fill)
/// posts one RDMA WRITE on each of them per round and runs the model
/// after every round, so consecutive CQEs name different QPs, and a poll
/// looks each QP up in the context's registry (the one-entry cache of the
/// last QP misses every time with more than one).
// `repr(C)`, the CQ first: see `PostBench`.
#[derive(Debug)]
#[repr(C)]
pub struct ManyQpPollBench {
    cq: Cq<HcaMmio>,
    a: Vec<Qp<HcaMmio>>,
    _b: Vec<Qp<HcaMmio>>,
    _other: Cq<HcaMmio>,
    hca: Hca,
    _ctx: Context,
    mem: DmaBuf,
    lkey: u32,
    rkey: u32,
}

impl ManyQpPollBench {
    /// `qps` pairs; the shared CQ holds `rounds` rounds of completions.
    pub fn new(qps: u32, rounds: u32) -> ManyQpPollBench {
        let hca = Hca::new(ModelCfg::default());
        let ctx = hca.context();
        let cq = hca.new_cq(&ctx, qps * rounds);
        let other = hca.new_cq(&ctx, 1);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..qps {
            let x = hca.new_qp(&ctx, &rc_args(rounds), cq.cqn(), cq.cqn());
            let y = hca.new_qp(&ctx, &rc_args(1), other.cqn(), other.cqn());
            hca.connect(&x, &y);
            a.push(x);
            b.push(y);
        }
        let mem = DmaBuf::new("mlx5_scale", 4096).expect("bench memory");
        // The model writes only inside this region, which lives as long as it.
        let (lkey, rkey) = hca.reg_mr(mem.addr(), 4096, access::ALL);
        ManyQpPollBench { cq, a, _b: b, _other: other, hca, _ctx: ctx, mem, lkey, rkey }
    }

    /// [`Cq::poll`].
    #[inline(always)]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.cq.poll(out)
    }

    /// `rounds` rounds (at most `new`'s) of one signaled 8-byte WRITE per
    /// QP, the model run after each; their completions are then in the CQ.
    pub fn fill(&mut self, first: u64, rounds: u32) {
        let base = self.mem.addr();
        let sge = [Sge::new(base, 8, self.lkey)];
        let op = SendOp::RdmaWrite(RemoteAddr { addr: base + 2048, rkey: self.rkey });
        for r in 0..u64::from(rounds) {
            for (i, qp) in self.a.iter_mut().enumerate() {
                let wr = SendWr { wr_id: first + r, op, flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
                // SAFETY: not INLINE: nothing is read here.
                unsafe { qp.sq.post(std::slice::from_ref(&wr)) }.unwrap_or_else(|e| panic!("post on QP {i}: {e:?}"));
            }
            self.hca.run();
        }
    }

    /// Panics if the model saw the provider break a rule.
    pub fn assert_clean(&self) {
        self.hca.assert_clean();
    }
}
