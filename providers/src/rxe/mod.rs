//! The rxe (soft-RoCE) provider: the kernel allocates every queue and we map
//! it; driver data is output only (mmap info, AH numbers).
//!
//! Control-path hooks live here; the fast path (post, poll) is in
//! [`datapath`], the WQE/CQE layouts in [`wqe`], userspace address vectors
//! for kernels without AH numbers in [`av`].
//!
//! The rings' `Queue`s are crate-internal: their index words are shared
//! with the kernel, and a `Queue` publishes whatever index it is given.
//! Outside the crate a ring can post and poll, nothing else:
//!
//! ```compile_fail,E0603
//! use rverbs_providers::rxe::Queue;
//! ```
//! ```compile_fail
//! fn f<D: rverbs_providers::rxe::Doorbell>(s: &rverbs_providers::rxe::SendRing<D>) {
//!     s.queue().publish_producer(0);
//! }
//! ```
//! ```compile_fail
//! fn f(c: &rverbs_providers::rxe::CqRing) {
//!     c.queue().publish_consumer(0);
//! }
//! ```

pub mod av;
#[cfg(feature = "mock")]
#[doc(hidden)]
pub mod bench;
pub mod datapath;
// The kernel's side of the rings: crate-internal, as it rewrites the
// indices of whatever queue it is given (the `bench` fixtures expose it
// only over queues they own).
#[cfg(any(test, feature = "mock"))]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod mock;
#[cfg(test)]
mod proptests;
// The provider interface's implementation.
mod provider;
// A queue's index words are shared with the kernel: crate-internal.
pub(crate) mod queue;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_av;
pub mod wqe;

use rverbs_uapi::rdma_user_rxe::{rxe_create_ah_resp, rxe_create_cq_resp, rxe_create_qp_resp, rxe_create_srq_resp};
use std::sync::Arc;

use zerocopy::FromBytes;

pub use av::{Av, AvAttr, AvHandle, AvTable, AV_NUM_FLAG};
pub use datapath::{CqRing, Doorbell, RecvRing, SendRing};
pub(crate) use provider::Context;
pub(crate) use queue::Queue;
pub use wqe::{SendLimits, Transport};

use crate::sys::UverbsFd;
use crate::{Errno, Error, Result};

fn parse<T: FromBytes>(verb: &'static str, b: &[u8]) -> Result<T> {
    T::read_from_prefix(b).map(|(v, _)| v).map_err(|_| Error::check(verb, Errno::EPROTO))
}

#[inline]
fn map(verb: &'static str, fd: &UverbsFd, mi: &rverbs_uapi::rdma_user_rxe::mminfo, what: &str) -> Result<Queue> {
    Queue::map(fd, mi).map_err(|e| map_failed(verb, mi, what, e))
}

/// The error of a ring mmap the kernel refused.
#[cold]
#[inline(never)]
fn map_failed(verb: &'static str, mi: &rverbs_uapi::rdma_user_rxe::mminfo, what: &str, e: Errno) -> Error {
    let why = match e {
        // mmap's ENOMEM: the address space limit, or too many mappings.
        Errno::ENOMEM => {
            let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_AS).map_or_else(
                |_| "?".to_owned(),
                |(soft, _)| {
                    if soft == nix::libc::RLIM_INFINITY {
                        "unlimited".into()
                    } else {
                        format!("{soft} bytes")
                    }
                },
            );
            format!(
                ": mmap of {} bytes refused (RLIMIT_AS is {limit}, `ulimit -v`; or vm.max_map_count mappings \
                     exist)",
                mi.size
            )
        }
        _ => String::new(),
    };
    Error::os(verb, e).with_message(format!("cannot map the {what} the kernel created{why}"))
}

/// Checks that `q`'s slots hold the `min` bytes of header the data path
/// always writes (or, for a CQ, reads): a kernel that reported smaller
/// slots would have us write over slots it owns.
#[inline]
fn check_slots(verb: &'static str, q: Queue, min: usize, what: &str) -> Result<Queue> {
    if q.elem_size() < min {
        return Err(slots_too_small(verb, q.elem_size(), min, what));
    }
    Ok(q)
}

/// The error of [`check_slots`].
#[cold]
#[inline(never)]
fn slots_too_small(verb: &'static str, size: usize, min: usize, what: &str) -> Error {
    Error::check(verb, Errno::EPROTO).with_message(format!(
        "the kernel's {what} slots are {size} bytes, smaller than the {min}-byte header every entry has"
    ))
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

/// Maps the completion ring described by a create-CQ (or resize-CQ) driver response.
///
/// Crate-internal in spirit: with a driver response that is not the
/// kernel's answer for a CQ (another queue's `mminfo`), the ring would
/// publish a consumer index into a queue the kernel produces into
/// differently.
pub(crate) fn cq_finish(fd: &UverbsFd, drv_out: &[u8]) -> Result<CqRing> {
    let resp: rxe_create_cq_resp = parse("ibv_create_cq", drv_out)?;
    let q = map("ibv_create_cq", fd, &resp.mi, "completion queue")?;
    // Each slot must hold a whole `ib_uverbs_wc`, which poll copies out.
    let q = check_slots("ibv_create_cq", q, wqe::CQE_LEN, "completion queue")?;
    Ok(CqRing::new(q))
}

/// The doorbell of one rxe QP: `POST_SEND` with no work requests on the
/// uverbs fd, for the handle its send ring passes
/// ([`SendDoorbellFrame`](crate::sys::SendDoorbellFrame)).
#[derive(Debug)]
pub struct UverbsDoorbell {
    fd: Arc<UverbsFd>,
}

impl Doorbell for UverbsDoorbell {
    #[inline]
    fn ring(&self, qp_handle: u32) -> Result<(), Errno> {
        self.fd.ring_send_doorbell(qp_handle)
    }
}

/// An rxe QP's userspace half: its send ring (with doorbell) and, unless it
/// receives from an SRQ, its receive ring.
#[derive(Debug)]
pub struct Qp {
    /// Send queue.
    pub sq: SendRing<UverbsDoorbell>,
    /// Receive queue; `None` with an SRQ.
    pub rq: Option<RecvRing>,
}

/// What the provider needs to know about a new QP.
#[derive(Clone, Copy, Debug)]
pub struct QpInfo {
    /// The kernel handle (for the doorbell).
    pub handle: u32,
    /// Send limits from the create response.
    pub send: SendLimits,
    /// Receive SGEs per request from the create response.
    pub max_recv_sge: u32,
    /// Whether the QP receives from an SRQ.
    pub has_srq: bool,
}

/// Maps the rings described by the create-QP driver response; UD sends may
/// name the address vectors of `avs` (the context's).
///
/// Crate-internal in spirit: a forged response (another queue's `mminfo`)
/// would have the rings write WQEs into memory the kernel writes.
pub(crate) fn qp_finish(fd: &Arc<UverbsFd>, drv_out: &[u8], info: &QpInfo, avs: &Arc<AvTable>) -> Result<Qp> {
    const VERB: &str = "ibv_create_qp";
    let resp: rxe_create_qp_resp = parse(VERB, drv_out)?;
    let sq = check_slots(VERB, map(VERB, fd, &resp.sq_mi, "send queue")?, wqe::SEND_DATA, "send queue")?;
    let rq = if info.has_srq || resp.rq_mi.size == 0 {
        None
    } else {
        let q = map(VERB, fd, &resp.rq_mi, "receive queue")?;
        Some(RecvRing::new(check_slots(VERB, q, wqe::RECV_DATA, "receive queue")?, info.max_recv_sge))
    };
    let doorbell = UverbsDoorbell { fd: fd.clone() };
    Ok(Qp { sq: SendRing::new(sq, info.send, doorbell, info.handle).with_av_table(avs.clone()), rq })
}

/// Maps the receive ring described by the create-SRQ driver response.
///
/// Crate-internal in spirit, as [`qp_finish`].
pub(crate) fn srq_finish(fd: &UverbsFd, drv_out: &[u8], max_sge: u32) -> Result<RecvRing> {
    const VERB: &str = "ibv_create_srq";
    let resp: rxe_create_srq_resp = parse(VERB, drv_out)?;
    let q = map(VERB, fd, &resp.mi, "shared receive queue")?;
    Ok(RecvRing::new(check_slots(VERB, q, wqe::RECV_DATA, "shared receive queue")?, max_sge))
}

/// The AH number the kernel gave (0 on kernels before 5.16, which expect a
/// full address vector in every UD work request instead: see [`av`]).
pub fn ah_num(drv_out: &[u8]) -> Result<u32> {
    parse::<rxe_create_ah_resp>("ibv_create_ah", drv_out).map(|r| r.ah_num)
}
