//! `mlx5-diff --many-qp SIDE,QPS,N[,BATCH]`: the scale bench's many-QP
//! poll on the fake ConnectX, one library per run (`c`: rdma-core 44's
//! libibverbs + libmlx5, or with `--lib PATH` rverbs' C library; `r`:
//! rverbs' Rust API). One CQ under QPS RC QPs; each fill posts one
//! signaled RDMA WRITE on every QP, [`ROUNDS`] times, and the fake HCA
//! completes them in that order, so that consecutive CQEs name different
//! QPs (with more than one) and every CQE's QP is looked up. N CQEs are
//! polled, BATCH (default [`BATCH`]) a call, through `bench_poll_c` or
//! `bench_poll_r` (never inlined): `valgrind --tool=callgrind
//! --trace-children=yes --collect-atstart=no
//! --toggle-collect='*bench_poll_c*'` counts exactly the library's poll.
//! Every completion is checked (status, wr_id in order); the last line is
//! `mlx5-diff: 1 passed, 0 failed`.

use std::hint::black_box;

use rverbs::{CompletionQueue, QpCap, QpInitAttr, QpType, QueuePair, SendFlags, SendOp, SendWr, Sge, Wc};
use rverbs_mlx5_fake::hca;
use rverbs_mlx5_fake::record;

use crate::check::FakeLog;
use crate::hca_side::{self, HcaSide};
use crate::ibv::{self, Ibverbs};
use crate::scenario::{Completion, Kind, Setup};
use crate::sides::{self, CBase, RBase, Shared};

/// Requests per QP in one fill (its send queue's depth).
pub const ROUNDS: u32 = 16;
/// Completions a poll call asks for.
pub const BATCH: usize = 16;

/// The library a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// rdma-core's libibverbs + libmlx5.
    C,
    /// rverbs' Rust API.
    R,
}

/// `--many-qp SIDE,QPS,N[,BATCH]`.
#[derive(Clone, Copy, Debug)]
pub struct ManyQp {
    pub side: Side,
    pub qps: u32,
    pub n: u64,
    /// Completions a poll call asks for (1..=[`BATCH`], default `BATCH`).
    pub batch: usize,
}

impl ManyQp {
    /// Parses `c,16,100000` or `c,16,100000,1`.
    pub fn parse(s: &str) -> Result<ManyQp, String> {
        let bad = || format!("--many-qp {s:?}: want SIDE,QPS,N[,BATCH] (SIDE c or r, QPS 1..=256, BATCH 1..=16)");
        let mut it = s.split(',');
        let side = match it.next() {
            Some("c") => Side::C,
            Some("r") => Side::R,
            _ => return Err(bad()),
        };
        let qps: u32 = it.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let n: u64 = it.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let batch = match it.next() {
            Some(v) => v.parse().map_err(|_| bad())?,
            None => BATCH,
        };
        if it.next().is_some() || !(1..=256).contains(&qps) || n == 0 || !(1..=BATCH).contains(&batch) {
            return Err(bad());
        }
        Ok(ManyQp { side, qps, n, batch })
    }
}

/// One `ibv_poll_cq` of the loaded library's: the measured unit.
///
/// # Safety
/// `cq` is a live CQ of `ibv`.
#[inline(never)]
unsafe fn bench_poll_c(ibv: &Ibverbs, cq: *mut ibv::ibv_cq, out: &mut [ibv::ibv_wc]) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { ibv.poll_cq(cq, out) }
}

/// One `CompletionQueue::poll` of rverbs': the measured unit.
#[inline(never)]
fn bench_poll_r(cq: &mut CompletionQueue, out: &mut [Wc]) -> usize {
    cq.poll(out)
}

/// What one library does here: post one WRITE on QP `i`, poll a batch.
trait Queues {
    fn cmd_fd(&self) -> i32;
    /// The QPs' numbers, in creation order.
    fn qpns(&self) -> Vec<u32>;
    fn post_write(&mut self, i: usize, wr_id: u64, shared: &Shared) -> Result<(), String>;
    /// Polls once for up to `batch` completions; returns each one's
    /// (wr_id, status).
    fn poll(&mut self, batch: usize, got: &mut Vec<(u64, u32)>);
}

fn setup(qps: u32) -> Setup {
    Setup { send_wr: ROUNDS, recv_wr: 1, cqe: qps * ROUNDS, ..Setup::new(Kind::Rc) }
}

struct C<'a> {
    // Field order is drop order: the QPs before `b` (see `Drop`).
    qps: Vec<*mut ibv::ibv_qp>,
    wc: Vec<ibv::ibv_wc>,
    b: CBase<'a>,
}

impl<'a> C<'a> {
    fn open(ibv: &'a Ibverbs, qps: u32, shared: &mut Shared) -> Result<C<'a>, String> {
        let s = setup(qps);
        let b = CBase::open(ibv, s.cqe, shared)?;
        // SAFETY: plain C data; all zeroes is valid.
        let wc = (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        let mut c = C { qps: Vec::new(), wc, b };
        for _ in 0..qps {
            let mut init = ibv::ibv_qp_init_attr {
                qp_context: std::ptr::null_mut(),
                send_cq: c.b.cq,
                recv_cq: c.b.cq,
                srq: std::ptr::null_mut(),
                cap: ibv::ibv_qp_cap {
                    max_send_wr: s.send_wr,
                    max_recv_wr: s.recv_wr,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
                qp_type: 2,
                sq_sig_all: 0,
            };
            // SAFETY: a live PD and CQ of this library; NULL on failure, checked.
            let qp = unsafe { (ibv.ibv_create_qp)(c.b.pd, &mut init) };
            if qp.is_null() {
                return Err(format!("ibv_create_qp: {}", std::io::Error::last_os_error()));
            }
            c.qps.push(qp);
            // SAFETY: the QP just made.
            unsafe { sides::c_to_rts(ibv, qp, &s)? };
        }
        Ok(c)
    }
}

impl Drop for C<'_> {
    fn drop(&mut self) {
        for &qp in &self.qps {
            // SAFETY: each QP is this library's, destroyed once, before
            // `b` (its CQ and PD) drops.
            unsafe { (self.b.ibv.ibv_destroy_qp)(qp) };
        }
    }
}

impl Queues for C<'_> {
    fn cmd_fd(&self) -> i32 {
        // SAFETY: `ctx` is live while self is.
        unsafe { (*self.b.ctx).cmd_fd }
    }

    fn qpns(&self) -> Vec<u32> {
        // SAFETY: live QPs.
        self.qps.iter().map(|&q| unsafe { (*q).qp_num }).collect()
    }

    fn post_write(&mut self, i: usize, wr_id: u64, shared: &Shared) -> Result<(), String> {
        // SAFETY: `mr` is live.
        let lkey = unsafe { (*self.b.mr).lkey };
        let mut sge = ibv::ibv_sge { addr: shared.addr(), length: 8, lkey };
        // SAFETY: plain C data; all zeroes is valid.
        let mut wr: ibv::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        // IBV_WR_RDMA_WRITE 0, IBV_SEND_SIGNALED 2.
        wr.opcode = 0;
        wr.send_flags = 2;
        wr.wr[0] = shared.addr() + 64;
        wr.wr[1] = u64::from(lkey);
        // SAFETY: a live QP; the request and its SGE live across the call
        // and name the registered shared buffer.
        unsafe { self.b.ibv.post_send(self.qps[i], &mut wr) }.map_err(|(rc, _)| format!("ibv_post_send: {rc}"))
    }

    fn poll(&mut self, batch: usize, got: &mut Vec<(u64, u32)>) {
        // SAFETY: `b.cq` is live while self is.
        let n = unsafe { bench_poll_c(self.b.ibv, black_box(self.b.cq), &mut self.wc[..batch]) };
        got.extend(self.wc[..n.max(0) as usize].iter().map(|w| (w.wr_id, w.status)));
    }
}

struct R {
    // Field order is drop order: children first.
    qps: Vec<QueuePair>,
    lkey: u32,
    wc: [Wc; BATCH],
    b: RBase,
}

impl R {
    fn open(qps: u32, sysfs: &std::path::Path, shared: &mut Shared) -> Result<R, String> {
        let s = setup(qps);
        let b = RBase::open(s.cqe, sysfs, shared)?;
        let mut list = Vec::new();
        for _ in 0..qps {
            let mut init = QpInitAttr::new(QpType::Rc, &b.cq);
            init.cap = QpCap {
                max_send_wr: s.send_wr,
                max_recv_wr: s.recv_wr,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            };
            let qp = b.pd.create_qp(&init).map_err(sides::r_err("create_qp"))?;
            sides::r_to_rts(&qp, &s)?;
            list.push(qp);
        }
        Ok(R { lkey: b.mr.lkey(), qps: list, wc: [Wc::default(); BATCH], b })
    }
}

impl Queues for R {
    fn cmd_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.b.ctx.cmd_fd().as_raw_fd()
    }

    fn qpns(&self) -> Vec<u32> {
        self.qps.iter().map(|q| q.qp_num()).collect()
    }

    fn post_write(&mut self, i: usize, wr_id: u64, shared: &Shared) -> Result<(), String> {
        let sge = [Sge::new(shared.addr(), 8, self.lkey)];
        let remote = rverbs::RemoteAddr { addr: shared.addr() + 64, rkey: self.lkey };
        let wr = SendWr { wr_id, op: SendOp::RdmaWrite(remote), flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
        self.qps[i].post_send(&[wr]).map_err(|err| format!("post_send: {err}"))
    }

    fn poll(&mut self, batch: usize, got: &mut Vec<(u64, u32)>) {
        let n = bench_poll_r(black_box(&mut self.b.cq), &mut self.wc[..batch]);
        got.extend(self.wc[..n].iter().map(|w| (w.wr_id, w.status.0)));
    }
}

/// Runs `m` under the fake kernel (the re-executed child); the `c` side
/// on `lib` (a `libibverbs.so.1`'s path) where given.
pub fn run(m: ManyQp, lib: Option<&str>, sysfs: &std::path::Path) -> Result<bool, String> {
    let fake = FakeLog::find()?;
    let mut shared = Shared::new();
    fake.take();
    let result = match m.side {
        Side::C => {
            let ibv = match lib {
                Some(path) => Ibverbs::load_from(path)?,
                None => Ibverbs::load()?,
            };
            let mut c = C::open(&ibv, m.qps, &mut shared)?;
            drive(&mut c, &fake, &shared, m)
        }
        Side::R => {
            let mut r = R::open(m.qps, sysfs, &mut shared)?;
            drive(&mut r, &fake, &shared, m)
        }
    };
    match result {
        Ok(()) => {
            println!("mlx5-diff: 1 passed, 0 failed");
            Ok(true)
        }
        Err(e) => {
            println!("FAIL many-qp {m:?}: {e}\nmlx5-diff: 0 passed, 1 failed");
            Ok(false)
        }
    }
}

/// Fills the CQ and polls it empty until `m.n` completions came back,
/// each checked.
fn drive(lib: &mut impl Queues, fake: &FakeLog, shared: &Shared, m: ManyQp) -> Result<(), String> {
    let snap = fake.take();
    let cx = snap.contexts.iter().find(|c| c.fd == lib.cmd_fd()).ok_or("no fake context for our fd")?;
    let recs: Vec<&record::Qp> = lib
        .qpns()
        .iter()
        .map(|n| cx.qps.iter().find(|q| q.qpn == *n).ok_or(format!("no fake QP {n:#x}")))
        .collect::<Result<_, _>>()?;
    let cq = cx.cqs.first().ok_or("no fake CQ")?;
    let mut hs: Vec<HcaSide> = recs.iter().map(|_| HcaSide::default()).collect();
    let (mut next_wr, mut want, mut cqes) = (0u64, 0u64, 0u32);
    let mut got = Vec::with_capacity(BATCH);
    while want < m.n {
        for _ in 0..ROUNDS {
            for i in 0..recs.len() {
                lib.post_write(i, next_wr, shared)?;
                next_wr += 1;
            }
        }
        for (h, q) in hs.iter_mut().zip(&recs) {
            // SAFETY: a live QP of this process.
            unsafe { hca_side::take_posted(h, q) };
        }
        for _ in 0..ROUNDS {
            for (h, q) in hs.iter_mut().zip(&recs) {
                // SAFETY: as above.
                let cqe = unsafe { hca_side::next_cqe(h, &Completion::Send, q, None, cx.cqe_version) }
                    .ok_or("a posted WRITE the HCA did not see")?;
                // SAFETY: the live CQ's buffer.
                unsafe { hca::write_cqe(cq, cqes, &cqe) };
                cqes += 1;
            }
        }
        while want < next_wr {
            got.clear();
            lib.poll(m.batch, &mut got);
            if got.is_empty() {
                return Err(format!("the CQ ran dry at wr_id {want} of {next_wr}"));
            }
            for &(wr_id, status) in &got {
                if (wr_id, status) != (want, 0) {
                    return Err(format!("completion (wr_id {wr_id}, status {status}), want ({want}, 0)"));
                }
                want += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_side_qps_and_count() {
        let m = ManyQp::parse("c,16,4096").unwrap();
        assert_eq!((m.side, m.qps, m.n, m.batch), (Side::C, 16, 4096, BATCH));
        assert_eq!(ManyQp::parse("c,16,4096,1").unwrap().batch, 1);
        assert_eq!(ManyQp::parse("r,256,1").unwrap().side, Side::R);
        for bad in ["", "x,1,1", "c,0,1", "c,257,1", "c,1,0", "c,1", "c,1,1,0", "c,1,1,17", "c,1,1,1,1", "c,a,1"] {
            assert!(ManyQp::parse(bad).is_err(), "{bad:?}");
        }
    }
}
