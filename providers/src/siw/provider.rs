//! siw's side of the provider interface ([`crate::provider`]'s traits):
//! the context, and for each object its create and its driver. The kernel
//! allocates every ring; the create responses carry their mmap keys
//! (rdmacm.md §B.2), and finishing a create maps them.
#![allow(unsafe_code)] // `unsafe impl` of the create traits; each says why

use std::mem::MaybeUninit;
use std::sync::Arc;

use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_qp_cap;
use rverbs_uapi::siw_abi::{
    siw_cq_ctrl, siw_uresp_alloc_ctx, siw_uresp_create_cq, siw_uresp_create_qp, siw_uresp_create_srq,
};
use zerocopy::{FromZeros, IntoBytes};

use super::datapath::{CqRing, Doorbell, RecvQueue, SendQueue};
use super::flush::{CqFlush, QpRings};
use super::ring::Ring;
use super::wqe::{SendLimits, MAX_INLINE, MAX_SGE};
use crate::cmd::cq::CqCreated;
use crate::cmd::device::{self as device, ContextInfo};
use crate::cmd::qp::QpCreated;
use crate::cmd::srq::SrqCreated;
use crate::provider::{
    AhCreate, AhOps, CqOps, CqPoll, CqRef, ProviderOps, QpCreate, QpOps, RecvPost, SendPost, SrqOps,
};
use crate::qp_state::{QpState, QpType};
use crate::sys::UverbsFd;
use crate::wr::{PostError, RecvWr, SendWr, Wc};
use crate::{Errno, Error, Result};

/// siw's half of an open context: nothing beyond the kernel's.
#[derive(Clone, Debug)]
pub struct Context;

impl ProviderOps for Context {
    /// `siw_ureq_reg_mr` in, room for `siw_uresp_reg_mr` out: without
    /// them `REG_MR` fails with `EINVAL`.
    const REG_MR_UDATA_LEN: usize = size_of::<rverbs_uapi::siw_abi::siw_ureq_reg_mr>();

    /// siw requires room for its 8-byte `siw_uresp_alloc_ctx` (the device's
    /// vendor part id, which `QUERY_DEVICE` reports too): without it
    /// `GET_CONTEXT` fails with `EINVAL`.
    fn open(fd: &Arc<UverbsFd>) -> Result<(ContextInfo, Self)> {
        let mut resp = siw_uresp_alloc_ctx::new_zeroed();
        let info = device::get_context(fd, &[], resp.as_mut_bytes())?;
        Ok((info, Context))
    }
}

// SAFETY: siw's create-CQ driver data in is empty: it names no memory.
unsafe impl CqOps for Context {
    type Cq = CqRing;
    /// The flush the CQ's QPs reach when they move to ERR.
    type CqState = Arc<CqFlush>;
    type CqPending = ();
    type CqUdata = [u8; 0];
    type CqResp = siw_uresp_create_cq;
    type CqCleanQp = Arc<QpRings>;

    fn cq_prepare(&self, cqe: u32) -> Result<((), [u8; 0], u32)> {
        Ok(((), [], cqe))
    }

    /// Maps the ring the kernel made: `num_cqe` entries and the arm word.
    fn cq_finish(
        &self,
        fd: &Arc<UverbsFd>,
        (): (),
        resp: &siw_uresp_create_cq,
        _created: &CqCreated,
    ) -> std::result::Result<(Arc<CqFlush>, CqRing), (Error, ())> {
        let tail = size_of::<siw_cq_ctrl>();
        let ring =
            Ring::map("ibv_create_cq", fd, resp.cq_key, resp.num_cqe, tail, "completion queue").map_err(|e| (e, ()))?;
        let cq = CqRing::new(ring);
        Ok((cq.flush().clone(), cq))
    }

    /// siw leaves requests posted to a QP in ERROR in its rings, and flushes
    /// nothing posted after the QP got there: this CQ completes them
    /// ([`super::flush`]).
    fn cq_qp_errored(state: &Arc<CqFlush>, qp: &Arc<QpRings>, send: bool, recv: bool) {
        state.take(qp, send, recv);
    }
}

// A CQ's verbs are all memory: the poll is the ring's, inlined; arming
// stores the arm word (no `REQ_NOTIFY_CQ` command); resizing is not
// supported (siw has no `resize_cq`: the default `EOPNOTSUPP`).
impl CqPoll for CqRing {
    #[inline]
    fn poll(&mut self, out: &mut [Wc]) -> usize {
        CqRing::poll(self, out)
    }

    #[inline]
    fn poll_uninit(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        CqRing::poll_uninit(self, out)
    }

    /// siw completions carry no immediate: nothing to swap.
    #[inline]
    fn poll_uninit_net_imm(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        CqRing::poll_uninit(self, out)
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        CqRing::is_empty(self)
    }

    /// The arm word (`siw_cq_ctrl.flags`): no syscall, cannot fail.
    #[inline]
    fn arm(&mut self, _cq: CqRef<'_>, solicited_only: bool) -> Result<()> {
        CqRing::arm(self, solicited_only);
        Ok(())
    }
}

// SAFETY: siw's create-SRQ driver data in is empty: it names no memory.
unsafe impl SrqOps for Context {
    type Srq = RecvQueue;
    type SrqState = ();
    type SrqPending = ();
    type SrqUdata = [u8; 0];
    type SrqResp = siw_uresp_create_srq;

    fn srq_prepare(&self, max_wr: u32, max_sge: u32) -> Result<((), [u8; 0], u32, u32)> {
        check_sge("ibv_create_srq", "max_sge", max_sge)?;
        Ok(((), [], max_wr, max_sge))
    }

    /// Maps the ring the kernel made (`num_rqe` entries).
    fn srq_finish(
        &self,
        fd: &Arc<UverbsFd>,
        (): (),
        resp: &siw_uresp_create_srq,
        created: &SrqCreated,
    ) -> std::result::Result<((), RecvQueue, u32, u32), (Error, ())> {
        let ring = Ring::map("ibv_create_srq", fd, resp.srq_key, resp.num_rqe, 0, "shared receive queue")
            .map_err(|e| (e, ()))?;
        let q = RecvQueue::new(ring, created.max_sge);
        let max_sge = q.max_sge();
        Ok(((), q, created.max_wr, max_sge))
    }
}

/// `EINVAL` for more SGEs than a siw entry holds.
fn check_sge(verb: &'static str, what: &str, n: u32) -> Result<()> {
    if n > MAX_SGE {
        return Err(Error::check(verb, Errno::EINVAL)
            .with_message(format!("{what} is {n}: a siw work request holds at most {MAX_SGE} SGEs")));
    }
    Ok(())
}

/// The doorbell of one siw QP: `POST_SEND` with no work requests on the
/// uverbs fd, for the handle its send queue passes
/// ([`SendDoorbellFrame`](crate::sys::SendDoorbellFrame)). The kernel
/// sends what the SQ holds inside the call; `ENOTCONN` before the QP is
/// connected (RTS).
#[derive(Debug)]
pub struct UverbsDoorbell {
    fd: Arc<UverbsFd>,
}

impl Doorbell for UverbsDoorbell {
    #[inline]
    fn ring(&self, qp_handle: u32) -> std::result::Result<(), Errno> {
        self.fd.ring_send_doorbell(qp_handle)
    }
}

// SAFETY: siw's create-QP driver data in is empty: it names no memory.
unsafe impl QpOps for Context {
    type Send = SendQueue<UverbsDoorbell>;
    type Recv = RecvQueue;
    /// The rings, for the CQs to flush once the QP is in ERR.
    type QpState = Arc<QpRings>;
    type QpPending = ();
    type QpUdata = [u8; 0];
    type QpResp = siw_uresp_create_qp;

    /// RC only (iWARP has no UC or UD), with capacities an entry holds.
    fn qp_prepare<C: ?Sized, S: ?Sized>(
        &self,
        a: &QpCreate<C, S>,
        _srq: Option<&()>,
    ) -> Result<((), [u8; 0], ib_uverbs_qp_cap)> {
        const VERB: &str = "ibv_create_qp";
        if a.qp_type != QpType::Rc {
            return Err(Error::check(VERB, Errno::EOPNOTSUPP).with_message(format!(
                "siw (soft-iWARP) creates RC QPs only, not {}: iWARP has no UC, UD or XRC transport; \
                 use rxe (soft-RoCE) for those",
                a.qp_type
            )));
        }
        check_sge(VERB, "max_send_sge", a.cap.max_send_sge)?;
        check_sge(VERB, "max_recv_sge", a.cap.max_recv_sge)?;
        if a.cap.max_inline_data > MAX_INLINE {
            return Err(Error::check(VERB, Errno::EINVAL).with_message(format!(
                "max_inline_data is {}: a siw send holds at most {MAX_INLINE} bytes inline",
                a.cap.max_inline_data
            )));
        }
        if a.cap.max_send_wr == 0 {
            return Err(Error::check(VERB, Errno::EINVAL)
                .with_message("max_send_wr is 0: siw needs a send queue of at least one request"));
        }
        Ok(((), [], a.cap))
    }

    /// Maps the send ring and, unless the QP receives from an SRQ, the
    /// receive ring the kernel made.
    fn qp_finish<C: ?Sized, S: ?Sized>(
        &self,
        fd: &Arc<UverbsFd>,
        (): (),
        resp: &siw_uresp_create_qp,
        created: &QpCreated,
        a: &QpCreate<C, S>,
    ) -> std::result::Result<(Arc<QpRings>, SendQueue<UverbsDoorbell>, Option<RecvQueue>, ib_uverbs_qp_cap), (Error, ())>
    {
        const VERB: &str = "ibv_create_qp";
        let sq = Ring::map(VERB, fd, resp.sq_key, resp.num_sqe, 0, "send queue").map_err(|e| (e, ()))?;
        let rq = if a.srq.is_some() || resp.num_rqe == 0 {
            None
        } else {
            Some(Ring::map(VERB, fd, resp.rq_key, resp.num_rqe, 0, "receive queue").map_err(|e| (e, ()))?)
        };
        let rings = Arc::new(QpRings::new(created.qpn, &sq, rq.as_ref()));
        let rq = rq.map(|r| RecvQueue::new(r, created.cap.max_recv_sge));
        let lim = SendLimits {
            max_sge: created.cap.max_send_sge,
            max_inline: created.cap.max_inline_data,
            sig_all: a.sq_sig_all,
        };
        let doorbell = UverbsDoorbell { fd: fd.clone() };
        Ok((rings, SendQueue::new(sq, lim, doorbell, created.handle), rq, created.cap))
    }

    /// A user move to RTS fails on siw (`EINVAL`) unless the QP is there
    /// already: the kernel enters RTS only with the socket and MPA
    /// parameters its connection manager (iw_cm) hands it. A QP that iw_cm
    /// connected without the CM id knowing it (`rping -q`: a QP not
    /// attached to the id) is in RTS, so the move is the kernel's no-op
    /// and records RTS for the posts.
    fn qp_modify_refused(_: &Arc<QpRings>, from: QpState, to: Option<QpState>, errno: Errno) -> Option<Error> {
        (to == Some(QpState::Rts) && from != QpState::Rts && errno == Errno::EINVAL).then(|| rts_through_cm(errno))
    }

    /// The CQs flush the rings once the QP is in ERR.
    fn qp_clean_key(s: &Arc<QpRings>) -> Option<&Arc<QpRings>> {
        Some(s)
    }

    /// The CQs stop flushing it.
    fn qp_destroyed(s: &Arc<QpRings>) {
        s.destroyed();
    }
}

/// The error of a user modify to RTS of a QP the CM did not connect.
fn rts_through_cm(errno: Errno) -> Error {
    Error::os("ibv_modify_qp", errno).with_message(
        "siw (iWARP) QPs connect only through the connection manager: the kernel moves a QP to RTS itself \
         when rdma_connect/rdma_accept (rverbs::cm) set up its TCP stream; connect it with rverbs::cm, \
         not with a modify to RTS",
    )
}

impl SendPost for SendQueue<UverbsDoorbell> {
    #[inline]
    unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded (the queue's `post` has the same contract).
        unsafe { SendQueue::post(self, wrs) }
    }
}

impl RecvPost for RecvQueue {
    #[inline]
    fn post(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        RecvQueue::post(self, wrs)
    }
}

impl AhOps for Context {
    type Ah = ();
    type AhResp = [u8; 0];

    /// siw has no address handles (the kernel refuses `CREATE_AH` before
    /// this is reached).
    fn ah_finish(&self, _fd: &Arc<UverbsFd>, _a: &AhCreate, _resp: &[u8; 0]) -> Result<((), u32)> {
        Err(Error::check("ibv_create_ah", Errno::EOPNOTSUPP).with_message(
            "siw (iWARP) has no address handles: its QPs are RC and reach their peer through the connection \
             manager (rverbs::cm)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rings() -> Arc<QpRings> {
        Arc::new(QpRings::new(1, &Ring::new_heap(2, 0), None))
    }

    #[test]
    fn only_the_cm_moves_to_rts() {
        let s = &rings();
        // The kernel's EINVAL for a move to RTS of a QP not yet there is
        // explained as the CM's job.
        for from in [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Sqd] {
            let e = <Context as QpOps>::qp_modify_refused(s, from, Some(QpState::Rts), Errno::EINVAL).unwrap();
            assert_eq!(e.errno(), Some(Errno::EINVAL));
            let text = e.to_string();
            assert!(text.contains("ibv_modify_qp") && text.contains("connection manager"), "{text}");
        }
        // Nothing is refused before the kernel is asked: a QP iw_cm moved
        // to RTS unseen (rping -q) takes the move as a no-op.
        for from in [QpState::Reset, QpState::Init, QpState::Rts] {
            assert!(<Context as QpOps>::qp_before_modify(s, from, Some(QpState::Rts)).is_ok());
        }
        // Other refusals keep the caller's own explanation.
        for (from, to, errno) in [
            (QpState::Rts, Some(QpState::Rts), Errno::EINVAL),
            (QpState::Init, Some(QpState::Rts), Errno::EPERM),
            (QpState::Init, Some(QpState::Rtr), Errno::EINVAL),
            (QpState::Init, None, Errno::EINVAL),
        ] {
            assert!(<Context as QpOps>::qp_modify_refused(s, from, to, errno).is_none(), "{from:?} -> {to:?}");
        }
    }

    #[test]
    fn sge_limit() {
        assert!(check_sge("ibv_create_qp", "max_send_sge", 6).is_ok());
        let e = check_sge("ibv_create_qp", "max_send_sge", 7).unwrap_err();
        assert_eq!(e.errno(), Some(Errno::EINVAL));
        assert!(e.to_string().contains("at most 6 SGEs"), "{e}");
    }
}
