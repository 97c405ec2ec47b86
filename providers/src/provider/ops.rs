//! The provider interface: what a vendor module implements, once per kind
//! of object, and the one create sequence (prepare → kernel command →
//! finish → rollback) every object shares.
//!
//! A provider is its context type (the list in [`super`]'s `providers!`
//! names it). The traits give defaults where a provider has nothing to do
//! (no lifecycle hook, no parking) and `EOPNOTSUPP` where it lacks a
//! feature (resize). Dispatch stays static: the enums that `providers!`
//! generates hold each provider's types, and every `match` over them
//! forwards to these traits.

use std::fmt::Debug;
use std::mem::MaybeUninit;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::cmd::cq::CqCreated;
use crate::cmd::device::ContextInfo;
use crate::cmd::qp::QpCreated;
use crate::cmd::srq::{self as srq_cmd, SrqCreated};
use crate::qp_state::{QpState as State, QpType};
use crate::sys::UverbsFd;
use crate::wr::{PostError, RecvWr, SendWr, Wc, WcFlags};
use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_qp_cap;

use super::{AhCreate, QpCreate};
use crate::{Errno, Error, Result};

/// A provider: its half of an open device context.
pub(crate) trait ProviderOps: Clone + Debug + Send + Sync + Sized + 'static {
    /// Bytes of driver data `REG_MR` carries each way, zeros in and the
    /// answer unread ([`Provider::reg_mr_udata_len`](crate::driver::Provider::reg_mr_udata_len)):
    /// siw requires them, rxe and mlx5 take none.
    const REG_MR_UDATA_LEN: usize = 0;

    /// Creates the fd's ucontext (`UVERBS_METHOD_GET_CONTEXT`) with the
    /// provider's driver data, and the provider's half from the answer.
    fn open(fd: &Arc<UverbsFd>) -> Result<(ContextInfo, Self)>;
}

/// A provider's completion queues: the create, and the state that lives as
/// long as the kernel CQ.
///
/// # Safety
/// The driver data [`cq_prepare`](Self::cq_prepare) returns may name
/// memory (addresses the device will write) only if that memory is owned
/// by the pending value it returns with it, and stays allocated while that
/// value, or the [`Cq`](Self::Cq) and [`CqState`](Self::CqState)
/// [`cq_finish`](Self::cq_finish) makes of it, lives.
pub(crate) unsafe trait CqOps: ProviderOps {
    /// The driver, polled through `&mut`.
    type Cq: CqPoll;
    /// What lives exactly as long as the kernel CQ (mlx5: the CQ number,
    /// which clean requests name).
    type CqState: Debug + Send + Sync;
    /// The memory the create's driver data names, between prepare and finish.
    type CqPending;
    /// The create's driver data in.
    type CqUdata: IntoBytes + Immutable;
    /// The create's driver data out.
    type CqResp: FromBytes + IntoBytes;
    /// What a QP's clean of this CQ names (mlx5: its shared state); `()`
    /// for a provider whose CQs need no clean.
    type CqCleanQp;
    /// The driver must outlive the kernel CQ (the device writes its memory
    /// until the destroy): a driver whose owner goes first is parked with
    /// the kernel CQ, not dropped.
    const CQ_PARKS: bool = false;
    /// Whoever reads a completion event must count it
    /// ([`KernelCq::event_counter`](super::KernelCq::event_counter)).
    const CQ_COUNTS_EVENTS: bool = false;

    /// Checks and allocates before the kernel command: the pending memory,
    /// the driver data, and the entries the core command asks for.
    fn cq_prepare(&self, cqe: u32) -> Result<(Self::CqPending, Self::CqUdata, u32)>;

    /// After the kernel created the CQ (`created`, on `fd`) and answered
    /// `resp`: the state and the driver. On failure the pending memory
    /// comes back, to be freed only after the kernel destroy.
    #[allow(clippy::type_complexity)]
    fn cq_finish(
        &self,
        fd: &Arc<UverbsFd>,
        pending: Self::CqPending,
        resp: &Self::CqResp,
        created: &CqCreated,
    ) -> std::result::Result<(Self::CqState, Self::Cq), (Error, Self::CqPending)>;

    /// Before the kernel destroy: nobody polls this CQ again.
    fn cq_destroying(_state: &Self::CqState) {}

    /// QP `qp` was destroyed or moved to RESET: its completions in this CQ
    /// go. `parked`: the CQ's driver when its owner has gone (reachable, so
    /// cleaned now); otherwise the clean must wait for the owner's next poll.
    fn cq_clean_qp(_state: &Self::CqState, _parked: Option<&mut Self::Cq>, _qp: &Self::CqCleanQp) {}

    /// QP `qp` moved to ERR (the kernel's modify done), its send queue
    /// (`send`) and receive queue (`recv`) completing here: a provider whose
    /// kernel leaves requests in the rings of a QP in ERROR (siw) has this
    /// CQ complete them, as the device does for the others.
    fn cq_qp_errored(_state: &Self::CqState, _qp: &Self::CqCleanQp, _send: bool, _recv: bool) {}
}

/// What a CQ driver's verbs see of its kernel CQ.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqRef<'a> {
    /// The fd it was created on.
    pub fd: &'a Arc<UverbsFd>,
    /// The kernel handle.
    pub handle: u32,
    /// Completion events read for it from the channel.
    pub events: &'a AtomicU32,
}

/// Why a resize failed.
#[derive(Debug)]
pub(crate) enum ResizeError {
    /// Nothing changed: the CQ is as it was.
    Kept(Error),
    /// The kernel resized the CQ to `cqe` entries, but the driver lost its
    /// ring: the CQ can no longer be polled.
    Lost { error: Error, cqe: u32 },
}

/// A provider's CQ driver: the poll, arm and resize fast paths.
///
/// Each provider picks what stays inline in the dispatch: a method marked
/// `#[inline(never)]` is one call from the dispatching `match`.
pub(crate) trait CqPoll: Debug + Send + Sized {
    /// The polls and the arm are inlined into their caller (the provider
    /// marks them `#[inline(always)]` or `#[inline]`): the dispatch tests
    /// for this provider with one compare of the tag and calls it in
    /// place; the other providers, and a dead or moved-out driver, go
    /// through one out-of-line call that dispatches again.
    const INLINE: bool = false;

    /// Moves up to `out.len()` completions into `out`; returns how many.
    fn poll(&mut self, out: &mut [Wc]) -> usize;

    /// One completion into `w`, or false (`w` as it was).
    #[inline]
    fn poll_one(&mut self, w: &mut Wc) -> bool {
        self.poll(std::slice::from_mut(w)) == 1
    }

    /// [`poll`](Self::poll) into memory that need not be initialised: the
    /// first `n` entries written whole, `n` returned (at most `out.len()`).
    fn poll_uninit(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize;

    /// [`poll_uninit`](Self::poll_uninit) with each immediate in network
    /// byte order (`ibv_wc`'s).
    #[inline(never)]
    fn poll_uninit_net_imm(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        let len = out.len();
        let n = self.poll_uninit(out).min(len);
        let done = &mut out[..n];
        // SAFETY: `poll_uninit` initialised the first `n` entries, and
        // `MaybeUninit<Wc>` has `Wc`'s layout.
        imm_to_net(unsafe { &mut *(done as *mut [MaybeUninit<Wc>] as *mut [Wc]) });
        n
    }

    /// [`poll_uninit_net_imm`](Self::poll_uninit_net_imm) when the
    /// provider can take the whole poll in line (rxe: none, one or two
    /// ready): `Some` with how many were written; `None` (nothing consumed)
    /// when the caller must call `poll_uninit_net_imm`. Only an
    /// [`INLINE`](Self::INLINE) provider's is called.
    #[inline(always)]
    fn poll_few_uninit_net_imm(&mut self, _out: &mut [MaybeUninit<Wc>]) -> Option<usize> {
        None
    }

    /// [`poll_one_uninit_net_imm`](Self::poll_one_uninit_net_imm) after an
    /// [`is_empty`](Self::is_empty) test (the C library's one-entry
    /// `ibv_poll_cq`, whose busy pollers mostly find nothing): `None` at
    /// once when nothing is ready.
    #[inline(always)]
    fn poll_one_ready_uninit_net_imm<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        if self.is_empty() {
            return None;
        }
        self.poll_one_uninit_net_imm(w)
    }

    /// One entry of [`poll_uninit_net_imm`](Self::poll_uninit_net_imm):
    /// `Some` with the completion written into `w`, or `None` (`w` untouched).
    #[cold]
    #[inline(never)]
    fn poll_one_uninit_net_imm<'a>(&mut self, w: &'a mut MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        let mut got = Wc::default();
        if !self.poll_one(&mut got) {
            return None;
        }
        imm_to_net(std::slice::from_mut(&mut got));
        Some(w.write(got))
    }

    /// True when no completion is ready; consumes nothing.
    fn is_empty(&self) -> bool;

    /// Arms the CQ for one completion event (`ibv_req_notify_cq`).
    fn arm(&mut self, cq: CqRef<'_>, solicited_only: bool) -> Result<()>;

    /// Resizes the CQ to at least `cqe` entries; returns the new size.
    fn resize(&mut self, _cq: CqRef<'_>, _cqe: u32) -> std::result::Result<u32, ResizeError> {
        Err(ResizeError::Kept(
            Error::check("ibv_resize_cq", Errno::EOPNOTSUPP)
                .with_message("resizing a CQ is not supported by this provider; create a larger one"),
        ))
    }

    /// The last step before the driver is parked with its kernel CQ
    /// (under the parking lock), when the provider parks it.
    fn on_park(&mut self) {}
}

/// A provider's shared receive queues: the create, and the state that
/// lives as long as the kernel SRQ.
///
/// # Safety
/// As for [`CqOps`]: the driver data [`srq_prepare`](Self::srq_prepare)
/// returns names only memory the pending value owns, which stays allocated
/// while it, or what [`srq_finish`](Self::srq_finish) makes of it, lives.
pub(crate) unsafe trait SrqOps: ProviderOps {
    /// The driver, posted through `&mut`.
    type Srq: RecvPost;
    /// What lives exactly as long as the kernel SRQ (mlx5: the registry
    /// entry's key and the state QPs receive through).
    type SrqState: Debug + Send + Sync;
    /// The memory the create's driver data names, between prepare and finish.
    type SrqPending;
    /// The create's driver data in.
    type SrqUdata: IntoBytes + Immutable;
    /// The create's driver data out.
    type SrqResp: FromBytes + IntoBytes;
    /// The driver must outlive the kernel SRQ: a driver whose owner goes
    /// while QPs still use the SRQ is parked with it, not dropped.
    const SRQ_PARKS: bool = false;

    /// Checks and allocates before the kernel command: the pending memory,
    /// the driver data, and the `max_wr` and `max_sge` the core command
    /// asks for.
    fn srq_prepare(&self, max_wr: u32, max_sge: u32) -> Result<(Self::SrqPending, Self::SrqUdata, u32, u32)>;

    /// After the kernel created the SRQ (`created`, on `fd`) and answered
    /// `resp`: the state, the driver, and the `max_wr` and `max_sge` the
    /// SRQ has. On failure the pending memory comes back.
    #[allow(clippy::type_complexity)]
    fn srq_finish(
        &self,
        fd: &Arc<UverbsFd>,
        pending: Self::SrqPending,
        resp: &Self::SrqResp,
        created: &SrqCreated,
    ) -> std::result::Result<(Self::SrqState, Self::Srq, u32, u32), (Error, Self::SrqPending)>;

    /// Right after the kernel destroy.
    fn srq_destroyed(_state: &Self::SrqState) {}

    /// Sets the limit that arms `SRQ_LIMIT_REACHED`: by default
    /// `MODIFY_SRQ` with no driver data.
    fn srq_modify_limit(_state: &Self::SrqState, fd: &UverbsFd, handle: u32, limit: u32) -> Result<()> {
        // SAFETY: no driver data, so no address.
        unsafe { modify_srq_limit(fd, handle, limit, &[]) }
    }
}

/// `IBV_SRQ_LIMIT` in `ibv_srq_attr_mask`.
const SRQ_LIMIT: u32 = 2;

/// `IB_USER_VERBS_CMD_MODIFY_SRQ` of the limit alone, with `drv_in`.
///
/// # Safety
/// Every address in `drv_in` must be writable memory of this process for
/// the duration of the call.
pub(crate) unsafe fn modify_srq_limit(fd: &UverbsFd, handle: u32, limit: u32, drv_in: &[u8]) -> Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe { srq_cmd::modify_srq(fd, handle, SRQ_LIMIT, 0, limit, drv_in) }
}

/// A provider's receive-queue or SRQ driver: the post fast path.
pub(crate) trait RecvPost: Debug + Send + Sized {
    /// The post is inlined into its caller: as [`CqPoll::INLINE`].
    const INLINE: bool = false;

    /// Posts receive work requests; on a refused request the ones before it
    /// are posted, none after it.
    fn post(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError>;
}

/// A provider's queue pairs: the create, the state that lives as long as
/// the kernel QP, and its steps around modify and destroy.
///
/// # Safety
/// As for [`CqOps`]: the driver data [`qp_prepare`](Self::qp_prepare)
/// returns names only memory the pending value owns, which stays allocated
/// while it, or what [`qp_finish`](Self::qp_finish) makes of it, lives.
pub(crate) unsafe trait QpOps: CqOps + SrqOps {
    /// The send half's driver.
    type Send: SendPost;
    /// The receive half's driver (none with an SRQ).
    type Recv: RecvPost;
    /// What lives exactly as long as the kernel QP (mlx5: the shared QP
    /// state, registered in the context until the kernel destroy).
    type QpState: Debug + Send + Sync;
    /// The memory the create's driver data names, between prepare and finish.
    type QpPending;
    /// The create's driver data in.
    type QpUdata: IntoBytes + Immutable;
    /// The create's driver data out.
    type QpResp: FromBytes + IntoBytes;

    /// Checks (the QP type) and allocates before the kernel command: the
    /// pending memory, the driver data, and the capacities the core
    /// command asks for. `srq`: the SRQ's state, if the QP receives from one.
    fn qp_prepare<C: ?Sized, S: ?Sized>(
        &self,
        a: &QpCreate<C, S>,
        srq: Option<&Self::SrqState>,
    ) -> Result<(Self::QpPending, Self::QpUdata, ib_uverbs_qp_cap)>;

    /// After the kernel created the QP (`created`, on `fd`) and answered
    /// `resp`: the state, the halves' drivers, and the capacities the
    /// queues really have. On failure the pending memory comes back.
    #[allow(clippy::type_complexity)]
    fn qp_finish<C: ?Sized, S: ?Sized>(
        &self,
        fd: &Arc<UverbsFd>,
        pending: Self::QpPending,
        resp: &Self::QpResp,
        created: &QpCreated,
        a: &QpCreate<C, S>,
    ) -> std::result::Result<(Self::QpState, Self::Send, Option<Self::Recv>, ib_uverbs_qp_cap), (Error, Self::QpPending)>;

    /// The kernel flushes receives posted to a QP already in ERR only when
    /// the QP is moved to ERR again (rxe: its responder drains the ring
    /// when a move to ERR schedules it, and nothing else schedules it for a
    /// QP in ERR): the poster then asks for that move.
    const RECV_IN_ERR_NEEDS_MODIFY: bool = false;

    /// Before `MODIFY_QP` from `from` to `to` (`None`: attributes only): an
    /// error refuses the modify before the kernel is asked.
    fn qp_before_modify(_state: &Self::QpState, _from: State, _to: Option<State>) -> Result<()> {
        Ok(())
    }

    /// The kernel refused `MODIFY_QP` from `from` to `to` with `errno`: the
    /// provider's own explanation of why, if it has one (the caller
    /// otherwise explains the errno itself).
    fn qp_modify_refused(_state: &Self::QpState, _from: State, _to: Option<State>, _errno: Errno) -> Option<Error> {
        None
    }

    /// After the kernel moved the QP to `to` (after the CQs' clean, on a
    /// move to RESET).
    fn qp_after_modify(_state: &Self::QpState, _to: State) {}

    /// What the QP's CQs clean of it after a destroy or a move to RESET
    /// ([`CqOps::cq_clean_qp`]); `None`: nothing to clean.
    fn qp_clean_key(_state: &Self::QpState) -> Option<&Self::CqCleanQp> {
        None
    }

    /// After the kernel destroy and the CQs' clean.
    fn qp_destroyed(_state: &Self::QpState) {}

    /// The kernel refused the destroy: the QP may still exist, so whatever
    /// the device may reach must never be freed.
    fn qp_destroy_failed(_state: &Self::QpState) {}
}

/// A provider's address handles: what it keeps to address UD sends.
pub(crate) trait AhOps: ProviderOps {
    /// Whether the create uses the source GID's type
    /// ([`Provider::ah_needs_gid_type`](crate::driver::Provider::ah_needs_gid_type)):
    /// mlx5 puts RoCE v1 or v2 in its address vector; without it rverbs
    /// reads no GID entry per AH.
    const AH_NEEDS_GID_TYPE: bool = false;

    /// What lives as long as the kernel AH (dropped after its destroy:
    /// the provider forgets the AH's number then).
    type Ah: Debug + Send + Sync;
    /// The create's driver data out (its length tells the kernel which
    /// answer the provider understands).
    type AhResp: FromBytes + IntoBytes;

    /// After the kernel created the AH on `fd` and answered `resp`: what
    /// the provider keeps, and the number UD work requests name the AH by.
    fn ah_finish(&self, fd: &Arc<UverbsFd>, a: &AhCreate, resp: &Self::AhResp) -> Result<(Self::Ah, u32)>;
}

/// The error of a QP type a provider does not create.
pub(crate) fn qp_type_unsupported(provider: &str, t: QpType) -> Error {
    Error::check("ibv_create_qp", Errno::EOPNOTSUPP)
        .with_message(format!("the rverbs {provider} provider creates RC, UC and UD QPs, not {t}"))
}

/// A provider's send-queue driver: the post fast path.
pub(crate) trait SendPost: Debug + Send + Sized {
    /// The posts are inlined into their caller: as [`CqPoll::INLINE`].
    const INLINE: bool = false;

    /// Posts `wrs` in order, then rings the doorbell once if any was posted.
    ///
    /// # Safety
    /// For every `INLINE` request, each SGE's `addr..addr+length` must be
    /// memory this process may read for the duration of the call.
    unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError>;

    /// [`post`](Self::post) of one request.
    ///
    /// # Safety
    /// As for [`post`](Self::post).
    #[inline]
    unsafe fn post_one(&mut self, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded.
        unsafe { self.post(std::slice::from_ref(wr)) }
    }
}

/// Puts the immediate of each completion that has one (`WITH_IMM`) in
/// network byte order; an invalidated rkey stays as it is.
pub(crate) fn imm_to_net(done: &mut [Wc]) {
    for w in done {
        if w.wc_flags.contains(WcFlags::WITH_IMM) {
            w.imm_data = w.imm_data.to_be();
        }
    }
}

/// The create of every kernel object whose driver data may name provider
/// memory: `create` issues the kernel command (its driver data names only
/// `pending`'s memory), `finish` builds the provider's half. If `finish`
/// fails, the kernel object is destroyed (`destroy`) before the pending
/// memory it uses is freed; if that destroy fails too, the memory is
/// leaked, never freed under the device. Inlined into each create, so
/// the provider's half is not moved once more on its way out.
#[inline(always)]
pub(crate) fn create_then_finish<P, C, F>(
    pending: P,
    create: impl FnOnce(&P) -> Result<C>,
    finish: impl FnOnce(P, &C) -> std::result::Result<F, (Error, P)>,
    destroy: impl FnOnce(&C) -> Result<()>,
) -> Result<(C, F)> {
    let created = create(&pending)?;
    // Nothing fallible between the kernel create and `finish`: `pending`
    // must not be dropped while the kernel object exists.
    match finish(pending, &created) {
        Ok(f) => Ok((created, f)),
        Err((error, pending)) => {
            match destroy(&created) {
                Ok(()) => drop(pending),
                Err(e) => {
                    tracing::warn!(error = %e, "destroy after a failed create refused: its memory is leaked");
                    std::mem::forget(pending);
                }
            }
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_immediates_go_to_network_order() {
        let mut w = [
            Wc { imm_data: 0x0102_0304, wc_flags: WcFlags::WITH_IMM, ..Wc::default() },
            Wc { imm_data: 0x0a0b_0c0d, wc_flags: WcFlags::WITH_INV, ..Wc::default() },
            Wc { imm_data: 7, ..Wc::default() },
        ];
        imm_to_net(&mut w);
        assert_eq!(w.map(|w| w.imm_data), [u32::from_ne_bytes([1, 2, 3, 4]), 0x0a0b_0c0d, 7]);
    }

    #[test]
    fn a_failed_finish_destroys_before_it_frees() {
        use std::cell::RefCell;
        let log = RefCell::new(Vec::new());
        struct Pending<'a>(&'a RefCell<Vec<&'static str>>);
        impl Drop for Pending<'_> {
            fn drop(&mut self) {
                self.0.borrow_mut().push("freed");
            }
        }
        let r: Result<((), ())> = create_then_finish(
            Pending(&log),
            |_| Ok(()),
            |p, _| Err((Error::check("t", Errno::EPROTO), p)),
            |_| {
                log.borrow_mut().push("destroyed");
                Ok(())
            },
        );
        assert!(r.is_err());
        assert_eq!(*log.borrow(), ["destroyed", "freed"]);
        log.borrow_mut().clear();
        let r: Result<((), ())> = create_then_finish(
            Pending(&log),
            |_| Ok(()),
            |p, _| Err((Error::check("t", Errno::EPROTO), p)),
            |_| Err(Error::check("t", Errno::EBUSY)),
        );
        assert!(r.is_err());
        assert!(log.borrow().is_empty(), "leaked, never freed");
    }
}
