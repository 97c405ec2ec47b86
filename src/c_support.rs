//! What rverbs' C library (`libibverbs.so.1`, the `capi` crate) needs
//! beyond the Rust API, kept out of it: hidden from the docs, no stability
//! promise, not for Rust programs.
//!
//! libibverbs' destroys differ from rverbs' in two ways. A failed destroy
//! leaves the object usable (the caller may retry), where rverbs' consuming
//! `destroy(self)` has already let it go. And `ibv_destroy_qp/_cq/_srq` wait
//! until the events the kernel reported for the object are acknowledged,
//! which needs the kernel's counts from the destroy command. So these
//! destroy the kernel object through a shared reference and return those
//! counts; the Rust object is dropped afterwards (its own destroy then has
//! nothing left to do).

use rverbs_providers::sys::event::{read_event_once, set_blocking};
use rverbs_uapi::ib_user_verbs::ib_uverbs_async_event_desc;
use zerocopy::{FromZeros, IntoBytes};

use crate::{
    AccessFlags, AddressHandle, AsyncEvent, CompletionQueue, Context, CqInitAttr, Errno, Error, MemoryWindow,
    ProtectionDomain, QpControl, QpInitAttr, QueuePair, Result, SharedReceiveQueue, SrqAttr, SrqControl, Wc,
};

pub use rverbs_providers::cmd::cq::EventsReported;

/// Creates a CQ as [`Context::create_cq_with`] does, whose events carry
/// `user_handle`: the C library's address of its `ibv_cq`, as rdma-core's
/// (its destroy waits for the events' acknowledgements, so the address is
/// live whenever an event names it). Not registered in the context.
#[doc(alias = "ibv_create_cq")]
#[inline]
pub fn create_cq_with_handle(ctx: &Context, attr: &CqInitAttr<'_>, user_handle: u64) -> Result<CompletionQueue> {
    ctx.create_cq_as(attr, user_handle)
}

/// Creates a QP as [`ProtectionDomain::create_qp`] does, whose events
/// carry `user_handle` (the C library's `ibv_qp` address; see
/// [`create_cq_with_handle`]). Not registered in the context: its async
/// events name it [`EventObject::Gone`](crate::EventObject::Gone).
#[doc(alias = "ibv_create_qp")]
pub fn create_qp_with_handle(pd: &ProtectionDomain, init: &QpInitAttr<'_>, user_handle: u64) -> Result<QueuePair> {
    pd.create_qp_as::<false>(init, user_handle)
}

/// Creates an SRQ as [`ProtectionDomain::create_srq`] does, whose events
/// carry `user_handle` (the C library's `ibv_srq` address; see
/// [`create_cq_with_handle`]).
#[doc(alias = "ibv_create_srq")]
#[inline]
pub fn create_srq_with_handle(pd: &ProtectionDomain, attr: &SrqAttr, user_handle: u64) -> Result<SharedReceiveQueue> {
    pd.create_srq_as(attr, user_handle)
}

/// After `ibv_modify_qp` to INIT or RTR on an iWARP QP: leaves the send
/// state check to the kernel, as rdma-core's libsiw does. A C program's
/// librdmacm connects such a QP without telling the library (the kernel's
/// iw_cm moves it to RTS at ESTABLISHED; siw's `QUERY_QP` reports no
/// state); a doorbell before RTS fails in the kernel (`ENOTCONN`).
/// Nothing on other transports.
pub fn iwarp_leave_sends_to_the_kernel(qp: &QpControl) {
    if qp.context().device().transport() == crate::Transport::Iwarp {
        qp.note_state(crate::QpState::Rts);
    }
}

/// Destroys the kernel QP now (`UVERBS_METHOD_QP_DESTROY`), leaving the
/// Rust object to be dropped: the async events the kernel reported for
/// it. On error nothing changed.
///
/// # Errors
/// The kernel's errno: `EBUSY` while it is attached to a multicast group
/// (`uverbs_free_qp` refuses a user's destroy then, as rdma-core 44's
/// `ibv_destroy_qp` answers; rverbs' own destroy detaches first).
#[doc(alias = "ibv_destroy_qp")]
#[inline]
pub fn destroy_qp_now(qp: &QpControl) -> Result<u32> {
    qp.0.kernel.destroy_now()
}

/// Destroys the kernel CQ now (`UVERBS_METHOD_CQ_DESTROY`), leaving the
/// Rust object to be dropped: the completion and async events the kernel
/// reported for it. On error nothing changed.
///
/// # Errors
/// `EBUSY` while QPs use it; the kernel's errno.
#[doc(alias = "ibv_destroy_cq")]
#[inline]
pub fn destroy_cq_now(cq: &CompletionQueue) -> Result<EventsReported> {
    cq.kernel.destroy_now()
}

/// Destroys the kernel SRQ now (`UVERBS_METHOD_SRQ_DESTROY`), leaving the
/// Rust object to be dropped: the async events the kernel reported for
/// it. On error nothing changed.
///
/// # Errors
/// The kernel's errno (`EBUSY` while QPs are attached).
#[doc(alias = "ibv_destroy_srq")]
#[inline]
pub fn destroy_srq_now(srq: &SrqControl) -> Result<u32> {
    srq.0.destroy_now()
}

/// Makes the context's async event fd blocking, as libibverbs opens it
/// (rverbs keeps it non-blocking for its own waits); a caller may set
/// `O_NONBLOCK` on it again, and [`read_async_event`] then answers at once.
///
/// # Errors
/// `fcntl`'s errno; none when the context has no async fd.
pub fn make_async_fd_blocking(ctx: &Context) -> Result<()> {
    match ctx.async_fd() {
        Some(fd) => set_blocking(fd, true).map_err(|e| Error::os("ibv_open_device", e)),
        None => Ok(()),
    }
}

/// One `read()` of the async event fd, as `ibv_get_async_event` does: it
/// sleeps on a blocking fd, answers `Ok(None)` on a non-blocking one with
/// no event queued, and returns a signal's `EINTR`.
///
/// # Errors
/// `EOPNOTSUPP` without an async fd; `read`'s errno; `EIO` for a short read.
#[doc(alias = "ibv_get_async_event")]
pub fn read_async_event(ctx: &Context) -> Result<Option<AsyncEvent>> {
    const VERB: &str = "ibv_get_async_event";
    let fd = ctx.async_fd().ok_or_else(|| Error::check(VERB, Errno::EOPNOTSUPP))?;
    let mut d = ib_uverbs_async_event_desc::new_zeroed();
    match read_event_once(fd, d.as_mut_bytes()).map_err(|e| Error::os(VERB, e))? {
        Some(n) if n == size_of_val(&d) => Ok(Some(ctx.decode_event(&d))),
        Some(_) => Err(Error::check(VERB, Errno::EIO).with_message("short read from the async event fd")),
        None => Ok(None),
    }
}

/// Whether the kernel copies pinned pages on `fork()`
/// (`RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK` of `RDMA_NLDEV_CMD_SYS_GET`, 5.13
/// and later): what libibverbs' `ibv_is_fork_initialized` asks. One
/// netlink round trip.
///
/// # Errors
/// The netlink socket's errno.
pub fn copy_on_fork() -> Result<bool> {
    let mut nl = rverbs_providers::sys::netlink::RdmaNetlink::open().map_err(|e| Error::os("ibv_fork_init", e))?;
    nl.copy_on_fork().map_err(|e| Error::os("ibv_fork_init", e))
}

/// Deallocates the kernel PD now (`IB_USER_VERBS_CMD_DEALLOC_PD`); the Rust
/// object is then dropped. On error nothing changed.
///
/// # Errors
/// `EBUSY` while other objects hold the PD; the kernel's errno.
#[doc(alias = "ibv_dealloc_pd")]
#[inline]
pub fn dealloc_pd_now(pd: &mut ProtectionDomain) -> Result<()> {
    match std::sync::Arc::get_mut(&mut pd.inner) {
        Some(inner) => inner.destroy(),
        None => Err(Error::check("ibv_dealloc_pd", Errno::EBUSY).with_message("objects of this PD still exist")),
    }
}

pub use rverbs_providers::cmd::mr::MrKeys;

// Registering without a `MemoryRegion` is `ProtectionDomain::reg_mr_keys`
// (unsafe, so in `mr.rs`, hidden from the docs).

/// Deregisters the MR `handle` of `pd` (`IB_USER_VERBS_CMD_DEREG_MR`). On
/// error nothing changed.
///
/// # Errors
/// The kernel's errno.
#[doc(alias = "ibv_dereg_mr")]
#[inline]
pub fn dereg_mr_handle(pd: &ProtectionDomain, handle: u32) -> Result<()> {
    pd.dereg_handle(handle)
}

/// Changes the access of the MR `handle` of `pd` as
/// [`MemoryRegion::rereg_access`](crate::MemoryRegion::rereg_access) does: its new keys. On error nothing
/// changed.
///
/// # Errors
/// As [`MemoryRegion::rereg_access`](crate::MemoryRegion::rereg_access).
#[doc(alias = "ibv_rereg_mr")]
pub fn rereg_mr_access(pd: &ProtectionDomain, handle: u32, access: AccessFlags) -> Result<MrKeys> {
    pd.rereg_access_keys(handle, access)
}

/// Deallocates the kernel MW now (`UVERBS_METHOD_MW_DESTROY`); the Rust
/// object is then dropped. On error nothing changed.
///
/// # Errors
/// The kernel's errno.
#[doc(alias = "ibv_dealloc_mw")]
pub fn dealloc_mw_now(mw: &mut MemoryWindow) -> Result<()> {
    mw.destroy()
}

/// Destroys the kernel AH now (`UVERBS_METHOD_AH_DESTROY`); the Rust object
/// is then dropped. On error nothing changed.
///
/// # Errors
/// The kernel's errno.
#[doc(alias = "ibv_destroy_ah")]
#[inline]
pub fn destroy_ah_now(ah: &mut AddressHandle) -> Result<()> {
    ah.kernel.destroy()
}

/// `CompletionQueue::poll_uninit` that leaves each `imm_data` in network
/// byte order, as libibverbs' `ibv_wc` holds it, so that the C library
/// polls straight into the caller's `ibv_wc` array and swaps nothing.
/// Every other field is as `poll` gives it. (Rust programs get host order
/// from every poll, and [`Wc::imm`].)
#[doc(alias = "ibv_poll_cq")]
#[inline(always)]
pub fn poll_uninit_net_imm<'a>(cq: &mut CompletionQueue, out: &'a mut [std::mem::MaybeUninit<Wc>]) -> &'a mut [Wc] {
    cq.driver.poll_uninit_net_imm(out)
}

/// [`poll_uninit_net_imm`] when the provider takes it in line with no call
/// (rxe, none, one or two completions ready): `Some` with how many were
/// written into the first entries of `out`; `None`, with nothing consumed,
/// when [`poll_uninit_net_imm`] must be called (out of line).
#[doc(alias = "ibv_poll_cq")]
#[inline(always)]
pub fn poll_few_uninit_net_imm(cq: &mut CompletionQueue, out: &mut [std::mem::MaybeUninit<Wc>]) -> Option<usize> {
    cq.driver.poll_few_uninit_net_imm(out)
}

/// [`poll_uninit_net_imm`] of one entry, without a slice: the next
/// completion written into `w`, or `None` with `w` untouched. For C
/// callers that poll one at a time (perftest's latency tests): on rxe it
/// inlines into the caller with no call at all.
#[doc(alias = "ibv_poll_cq")]
#[inline(always)]
pub fn poll_one_uninit_net_imm<'a>(
    cq: &mut CompletionQueue,
    w: &'a mut std::mem::MaybeUninit<Wc>,
) -> Option<&'a mut Wc> {
    cq.driver.poll_one_uninit_net_imm(w)
}

/// [`poll_one_uninit_net_imm`] after an emptiness test
/// ([`CompletionQueue::is_empty`]) in the same call: `None` at once when
/// nothing is ready. The C library's one-entry `ibv_poll_cq` on a provider
/// it does not take in line (mlx5).
#[doc(alias = "ibv_poll_cq")]
#[inline(always)]
pub fn poll_one_ready_uninit_net_imm<'a>(
    cq: &mut CompletionQueue,
    w: &'a mut std::mem::MaybeUninit<Wc>,
) -> Option<&'a mut Wc> {
    cq.driver.poll_one_ready_uninit_net_imm(w)
}
