//! The rxe (soft-RoCE) provider: the kernel allocates every queue and we map
//! it; driver data is output only (mmap info, AH numbers).
//!
//! Control-path hooks live here; the fast path (post, poll) comes with the
//! rxe provider issue.

pub mod queue;

use rverbs_uapi::rdma_user_rxe::{rxe_create_ah_resp, rxe_create_cq_resp, rxe_create_qp_resp, rxe_create_srq_resp};
use zerocopy::FromBytes;

pub use queue::Queue;

use crate::sys::UverbsFd;
use crate::{Errno, Error, Result};

fn parse<T: FromBytes>(verb: &'static str, b: &[u8]) -> Result<T> {
    T::read_from_prefix(b).map(|(v, _)| v).map_err(|_| Error::os(verb, Errno::EPROTO))
}

fn map(verb: &'static str, fd: &UverbsFd, mi: &rverbs_uapi::rdma_user_rxe::mminfo, what: &str) -> Result<Queue> {
    Queue::map(fd, mi).map_err(|e| Error::os(verb, e).with_message(format!("cannot map the {what} the kernel created")))
}

/// An rxe CQ's userspace half: its mapped completion ring.
#[derive(Debug)]
pub struct Cq {
    /// The completion ring.
    pub queue: Queue,
}

/// Driver response length of create CQ (`rxe_create_cq_resp`).
pub const CQ_RESP_LEN: usize = size_of::<rxe_create_cq_resp>();
/// Driver response length of create QP (`rxe_create_qp_resp`).
pub const QP_RESP_LEN: usize = size_of::<rxe_create_qp_resp>();
/// Driver response length of create SRQ (`rxe_create_srq_resp`).
pub const SRQ_RESP_LEN: usize = size_of::<rxe_create_srq_resp>();
/// Driver response length of create AH (`rxe_create_ah_resp`); shorter
/// makes the kernel treat us as an old provider without AH numbers.
pub const AH_RESP_LEN: usize = size_of::<rxe_create_ah_resp>();

impl Cq {
    /// Maps the ring described by the create-CQ driver response.
    pub fn finish(fd: &UverbsFd, drv_out: &[u8]) -> Result<Cq> {
        let resp: rxe_create_cq_resp = parse("ibv_create_cq", drv_out)?;
        Ok(Cq { queue: map("ibv_create_cq", fd, &resp.mi, "completion queue")? })
    }
}

/// An rxe QP's userspace half: its mapped send ring and, unless it receives
/// from an SRQ, its receive ring.
#[derive(Debug)]
pub struct Qp {
    /// Send queue.
    pub sq: Queue,
    /// Receive queue; `None` with an SRQ.
    pub rq: Option<Queue>,
}

impl Qp {
    /// Maps the rings described by the create-QP driver response.
    pub fn finish(fd: &UverbsFd, drv_out: &[u8], has_srq: bool) -> Result<Qp> {
        const VERB: &str = "ibv_create_qp";
        let resp: rxe_create_qp_resp = parse(VERB, drv_out)?;
        let sq = map(VERB, fd, &resp.sq_mi, "send queue")?;
        let rq = if has_srq || resp.rq_mi.size == 0 { None } else { Some(map(VERB, fd, &resp.rq_mi, "receive queue")?) };
        Ok(Qp { sq, rq })
    }
}

/// An rxe SRQ's userspace half: its mapped receive ring.
#[derive(Debug)]
pub struct Srq {
    /// The receive ring.
    pub queue: Queue,
    /// SRQ number.
    pub srq_num: u32,
}

impl Srq {
    /// Maps the ring described by the create-SRQ driver response.
    pub fn finish(fd: &UverbsFd, drv_out: &[u8]) -> Result<Srq> {
        let resp: rxe_create_srq_resp = parse("ibv_create_srq", drv_out)?;
        Ok(Srq { queue: map("ibv_create_srq", fd, &resp.mi, "shared receive queue")?, srq_num: resp.srq_num })
    }
}

/// The AH number the kernel gave (0 on kernels without AH numbers, in which
/// case UD work requests carry the full address vector).
pub fn ah_num(drv_out: &[u8]) -> Result<u32> {
    parse::<rxe_create_ah_resp>("ibv_create_ah", drv_out).map(|r| r.ah_num)
}
