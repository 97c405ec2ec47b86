//! Queue pairs: create (prepare → `QP_CREATE` → finish → rollback), the
//! post dispatch of the send and receive halves, modify with the
//! provider's before/after steps, and destroy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_qp_cap;
use rverbs_uapi::ib_user_verbs::ib_uverbs_modify_qp;
use tracing::debug;
use zerocopy::{FromZeros, IntoBytes};

use super::ops::create_then_finish;
use super::{
    CqProv, CqUser, Drv, KernelCq, KernelSrq, Kind, ProviderContext, QpOps, QpProv, RecvDrv, RecvPost, SendDrv,
    SendPost, SrqProv, SrqUser, Variant, VariantMut,
};
use crate::cmd::qp as cmd;
use crate::qp_state::{QpState, QpType};
use crate::sys::{CmdPath, UverbsFd};
use crate::wr::{PostError, RecvWr, SendWr};
use crate::{Errno, Error, Result};

/// What a QP is created with (`ibv_create_qp`'s `ibv_qp_init_attr`, with
/// the objects already resolved to their kernel halves). The CQs and SRQ
/// are handles of the caller's, which the kernel QP keeps (moved in, not
/// cloned again).
#[derive(Debug)]
pub struct QpCreate<C: ?Sized = CqUser, S: ?Sized = SrqUser> {
    /// The transport.
    pub qp_type: QpType,
    /// The PD's kernel handle.
    pub pd_handle: u32,
    /// CQ for send completions.
    pub send_cq: KernelCq<C>,
    /// CQ for receive completions (may be the same).
    pub recv_cq: KernelCq<C>,
    /// The SRQ it receives from, if any.
    pub srq: Option<KernelSrq<S>>,
    /// Requested capacities (checked against the device by the caller).
    pub cap: ib_uverbs_qp_cap,
    /// Every send work request completes with a CQE.
    pub sq_sig_all: bool,
    /// The value async events carry for this QP.
    pub user_handle: u64,
}

impl<C: ?Sized, S: ?Sized> Clone for QpCreate<C, S> {
    fn clone(&self) -> Self {
        QpCreate {
            qp_type: self.qp_type,
            pd_handle: self.pd_handle,
            send_cq: self.send_cq.clone(),
            recv_cq: self.recv_cq.clone(),
            srq: self.srq.clone(),
            cap: self.cap,
            sq_sig_all: self.sq_sig_all,
            user_handle: self.user_handle,
        }
    }
}

/// The send half's provider driver. `&mut` to post: no lock.
#[derive(Debug)]
pub struct SendDriver(SendDrv);

/// The receive half's provider driver (absent with an SRQ).
#[derive(Debug)]
pub struct RecvDriver(RecvDrv);

/// The kernel QP and the provider state that lives exactly as long:
/// mlx5's shared QP state, which owns the queue memory and is registered in
/// the context until the kernel QP is destroyed, so the send and receive
/// halves may be dropped at any time. Holds its CQs and SRQ, which must
/// outlive it: `C` and `S` are their creator's parts (rverbs' own types,
/// thin pointers; the erased defaults for CQs and SRQs of any creator).
#[derive(Debug)]
pub struct KernelQp<C: ?Sized = CqUser, S: ?Sized = SrqUser> {
    fd: Arc<UverbsFd>,
    handle: u32,
    qpn: u32,
    cap: ib_uverbs_qp_cap,
    prov: QpProv,
    send_cq: KernelCq<C>,
    recv_cq: KernelCq<C>,
    _srq: Option<KernelSrq<S>>,
    /// The kernel QP exists (cleared by a destroy that succeeded; a failed
    /// one sets it again, so the QP stays usable and the destroy can be
    /// retried, as with rdma-core).
    live: AtomicBool,
}

/// Why [`KernelQp::modify`] failed.
#[derive(Debug)]
pub enum ModifyError {
    /// The provider refused before the kernel was asked.
    Check(Error),
    /// The kernel refused `MODIFY_QP` with this errno.
    Os(Errno),
}

impl ProviderContext {
    /// Creates a QP: `UVERBS_METHOD_QP_CREATE` with the provider's driver
    /// data (mlx5: the queues sized and allocated first, the core command
    /// then carries the capacities they have; rxe: none in, the rings' mmap
    /// info out), then its halves. If anything fails after the kernel
    /// create, the kernel QP is destroyed before the memory it uses is freed.
    #[doc(alias = "ibv_create_qp")]
    pub fn create_qp<C: ?Sized, S: ?Sized>(
        &self,
        fd: &Arc<UverbsFd>,
        a: QpCreate<C, S>,
    ) -> Result<(KernelQp<C, S>, SendDriver, Option<RecvDriver>)> {
        // The CQs and SRQ are objects of this fd: a QP holds them, and
        // mlx5's cleans reach them, as objects of its own context.
        if !(a.send_cq.is_on(fd) && a.recv_cq.is_on(fd) && a.srq.as_ref().map_or(true, |s| s.is_on(fd))) {
            return Err(Error::check("ibv_create_qp", Errno::EINVAL)
                .with_message("a CQ or the SRQ belongs to another device context than the QP"));
        }
        each!(&self.kind, Kind, T, ctx => create_qp::<T, C, S>(ctx, fd, a))
    }
}

/// [`ProviderContext::create_qp`] of provider `T`.
#[allow(clippy::type_complexity)]
#[inline]
fn create_qp<T: QpOps, C: ?Sized, S: ?Sized>(
    ctx: &T,
    fd: &Arc<UverbsFd>,
    a: QpCreate<C, S>,
) -> Result<(KernelQp<C, S>, SendDriver, Option<RecvDriver>)>
where
    QpProv: Variant<T, Of = T::QpState>,
    SendDrv: Variant<T, Of = T::Send>,
    RecvDrv: Variant<T, Of = T::Recv>,
    SrqProv: Variant<T, Of = T::SrqState>,
{
    let srq = match &a.srq {
        Some(s) => Some(s.state::<T>().ok_or_else(|| {
            Error::check("ibv_create_qp", Errno::EINVAL).with_message("the SRQ has no receive queue of this provider")
        })?),
        None => None,
    };
    let (pending, udata, cap) = ctx.qp_prepare(&a, srq)?;
    let args = cmd::CreateQp {
        qp_type: a.qp_type.to_kernel(),
        pd: a.pd_handle,
        send_cq: a.send_cq.handle(),
        recv_cq: a.recv_cq.handle(),
        srq: a.srq.as_ref().map(|s| s.handle()),
        cap,
        sq_sig_all: a.sq_sig_all,
        user_handle: a.user_handle,
    };
    let kernel = |created: &cmd::QpCreated, cap, prov, (send_cq, recv_cq, _srq)| KernelQp {
        fd: fd.clone(),
        handle: created.handle,
        qpn: created.qpn,
        cap,
        prov,
        send_cq,
        recv_cq,
        _srq,
        live: AtomicBool::new(true),
    };
    let ((created, _), (state, sq, rq, cap)) = create_then_finish(
        pending,
        |_| {
            let mut resp = T::QpResp::new_zeroed();
            // SAFETY: the driver data names only pending memory (QpOps), freed
            // after the kernel QP is destroyed, or now if this create fails.
            let created = unsafe { cmd::create_qp(fd, &args, udata.as_bytes(), resp.as_mut_bytes()) }?;
            Ok((created, resp))
        },
        |pending, (created, resp)| ctx.qp_finish(fd, pending, resp, created, &a),
        |(created, _)| {
            let holds = (a.send_cq.clone(), a.recv_cq.clone(), a.srq.clone());
            kernel(created, created.cap, QpProv::KernelOnly, holds).destroy()
        },
    )?;
    debug!(handle = created.handle, qp_num = created.qpn, "QP created");
    let k = kernel(&created, cap, Variant::<T>::wrap(state), (a.send_cq, a.recv_cq, a.srq));
    Ok((k, SendDriver(Variant::<T>::wrap(sq)), rq.map(|r| RecvDriver(Variant::<T>::wrap(r)))))
}

impl<C: ?Sized, S: ?Sized> KernelQp<C, S> {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// The QP number peers address.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
    /// The capacities granted (what the provider's queues really hold).
    pub fn cap(&self) -> ib_uverbs_qp_cap {
        self.cap
    }

    /// Whether the kernel QP may still exist: not destroyed, and not given
    /// up after a refused destroy.
    #[inline]
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    /// Whether it receives from an SRQ.
    pub fn uses_srq(&self) -> bool {
        self._srq.is_some()
    }

    /// Whether receives posted to it in ERR complete only after another
    /// move to ERR (rxe), which the poster must then ask for.
    pub fn recv_in_err_needs_modify(&self) -> bool {
        each!(&self.prov, QpProv, T, _s => <T as QpOps>::RECV_IN_ERR_NEEDS_MODIFY; QpProv::KernelOnly => false)
    }

    /// `IB_USER_VERBS_CMD_MODIFY_QP` (`EX_MODIFY_QP` with a rate limit) with
    /// the provider's steps around it, for a QP in `from` moving to `to`
    /// (`None`: an attribute-only modify). mlx5: RESET → INIT is refused
    /// with `EBUSY` until the CQs have run the clean owed from the last move
    /// to RESET; after the command the provider learns the new state (sends
    /// need RTS, receives INIT; RESET starts the queue indices over and
    /// removes the old completions from the CQs).
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(
        &self,
        req: &ib_uverbs_modify_qp,
        rate_limit: Option<u32>,
        from: QpState,
        to: Option<QpState>,
    ) -> std::result::Result<CmdPath, ModifyError> {
        each!(&self.prov, QpProv, T, s => <T as QpOps>::qp_before_modify(s, from, to).map_err(ModifyError::Check)?;
            QpProv::KernelOnly => {});
        let path = cmd::modify_qp(&self.fd, req, rate_limit).map_err(|errno| {
            let why = each!(&self.prov, QpProv, T, s => <T as QpOps>::qp_modify_refused(s, from, to, errno);
                QpProv::KernelOnly => None);
            why.map_or(ModifyError::Os(errno), ModifyError::Check)
        })?;
        if let Some(next) = to {
            each!(&self.prov, QpProv, T, s => {
                if next == QpState::Reset {
                    // Before the indices start over: the old completions
                    // must not be matched against the new posts.
                    self.clean_cqs::<T>(s);
                } else if next == QpState::Err {
                    self.errored_cqs::<T>(s);
                }
                <T as QpOps>::qp_after_modify(s, next)
            }; QpProv::KernelOnly => {});
        }
        Ok(path)
    }

    /// Destroys the kernel QP now (`UVERBS_METHOD_QP_DESTROY`,
    /// `ibv_destroy_qp`); a second call does nothing. mlx5: then its
    /// completions still in the CQs go (cleaned now, or at each CQ's next
    /// poll, the request holding the QP's user index until then), and it
    /// leaves the registry; its memory goes with the last reference. If the
    /// kernel refuses, the memory is leaked, never freed under the HCA.
    #[doc(alias = "ibv_destroy_qp")]
    #[inline]
    pub fn destroy(&mut self) -> Result<()> {
        match self.destroy_now() {
            Ok(_) => Ok(()),
            Err(e) => {
                // Not retried from here: the kernel QP may still exist, so
                // an mlx5 QP's memory is leaked (it stays registered, and
                // this reference is never released, not even when the
                // context goes).
                self.live.store(false, Ordering::Relaxed);
                each!(&self.prov, QpProv, T, s => <T as QpOps>::qp_destroy_failed(s); QpProv::KernelOnly => {});
                Err(e)
            }
        }
    }

    /// Destroys the kernel QP now, through a shared reference, and returns
    /// the kernel's count of async events it reported for the QP (what
    /// `ibv_destroy_qp` waits for the acknowledgements of); 0 when it was
    /// already destroyed or in a forked child (whose QP is the parent's).
    /// If the kernel refuses, nothing changed: the QP is usable and the
    /// destroy may be tried again.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy_now(&self) -> Result<u32> {
        if self.fd.in_forked_child() || !self.live.swap(false, Ordering::AcqRel) {
            // A forked child: no destroy, and no clean of CQ memory that
            // it does not have (mlx5's is MADV_DONTFORK).
            return Ok(0);
        }
        let events = match cmd::destroy_qp(&self.fd, self.handle) {
            Ok(ev) => ev,
            Err(e) => {
                self.live.store(true, Ordering::Release);
                return Err(e);
            }
        };
        each!(&self.prov, QpProv, T, s => {
            self.clean_cqs::<T>(s);
            <T as QpOps>::qp_destroyed(s)
        }; QpProv::KernelOnly => {});
        debug!(handle = self.handle, qp_num = self.qpn, async_events = events, "QP destroyed");
        Ok(events)
    }

    /// Tells both CQs this QP is in ERR ([`CqOps::cq_qp_errored`]), when its
    /// provider names QPs to CQs (`QpOps::qp_clean_key`).
    fn errored_cqs<T: QpOps>(&self, s: &T::QpState)
    where
        CqProv: Variant<T, Of = T::CqState>,
    {
        let Some(key) = T::qp_clean_key(s) else { return };
        let recv = !self.uses_srq();
        if self.send_cq.same_as(&self.recv_cq) {
            self.send_cq.qp_errored::<T>(key, true, recv);
        } else {
            self.send_cq.qp_errored::<T>(key, true, false);
            self.recv_cq.qp_errored::<T>(key, false, recv);
        }
    }

    /// Removes (or has removed) this QP's completions from both CQs, when
    /// its provider cleans CQs (`QpOps::qp_clean_key`).
    fn clean_cqs<T: QpOps>(&self, s: &T::QpState)
    where
        CqProv: Variant<T, Of = T::CqState>,
        Drv: VariantMut<T, Of = T::Cq>,
    {
        let Some(key) = T::qp_clean_key(s) else { return };
        self.send_cq.clean_qp::<T>(key);
        if !self.send_cq.same_as(&self.recv_cq) {
            self.recv_cq.clean_qp::<T>(key);
        }
    }
}

impl<C: ?Sized, S: ?Sized> Drop for KernelQp<C, S> {
    /// Inlined into the drop glue: after an explicit destroy (the usual
    /// way) it is one load and a branch, no call.
    #[inline]
    fn drop(&mut self) {
        if *self.live.get_mut() {
            self.destroy_on_drop();
        }
        // Else destroyed already, or a refused destroy gave it up.
    }
}

impl<C: ?Sized, S: ?Sized> KernelQp<C, S> {
    /// [`Drop`]'s destroy of a QP still live.
    #[cold]
    #[inline(never)]
    fn destroy_on_drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "QP destroy failed");
        }
    }
}

/// `inline_first!(&mut drv, Enum, Trait, Assoc, q => fast, slow)`: the
/// dispatch of a post, as the CQ driver's (`cq.rs`): a provider whose
/// posts are inlined (`Trait::INLINE` of its `QpOps::Assoc`) is called in
/// place after one compare of the tag; every other provider calls `slow`
/// out of line, which dispatches again.
macro_rules! inline_first {
    ($drv:expr, $E:ident, $Tr:ident, $Of:ident, $q:ident => $fast:expr, $slow:expr) => {
        'inline: {
            each!($drv, $E, T, $q => if <<T as QpOps>::$Of as $Tr>::INLINE { break 'inline $fast; });
            $slow
        }
    };
}

// The posts of the providers that are not inlined into the dispatch.
impl SendDrv {
    /// # Safety
    /// As for [`SendDriver::post`].
    #[inline(never)]
    unsafe fn post_elsewhere(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded from this function's contract.
        each!(self, SendDrv, T, q => unsafe { SendPost::post(q, wrs) })
    }

    /// # Safety
    /// As for [`SendDriver::post`].
    #[inline(never)]
    unsafe fn post_one_elsewhere(&mut self, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded from this function's contract.
        each!(self, SendDrv, T, q => unsafe { SendPost::post_one(q, wr) })
    }
}

impl RecvDrv {
    #[inline(never)]
    fn post_elsewhere(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        each!(self, RecvDrv, T, q => RecvPost::post(q, wrs))
    }
}

impl SendDriver {
    /// Posts `wrs` in order, then rings the doorbell once if any was
    /// posted (rxe: one `write()`; mlx5: the doorbell record and a UAR
    /// store or a BlueFlame copy). On a refused request the ones before it
    /// are posted, none after it, and the error names its index.
    ///
    /// # Safety
    /// For every `INLINE` request, each SGE's `addr..addr+length` must be
    /// memory this process may read for the duration of the call (it is
    /// copied now). Nothing else is read through the SGEs here; the device
    /// checks the keys.
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded from this function's contract (`SendPost::post`
        // and `post_elsewhere` have the same).
        inline_first!(&mut self.0, SendDrv, SendPost, Send, q => unsafe { SendPost::post(q, wrs) },
            // SAFETY: as above.
            unsafe { self.0.post_elsewhere(wrs) })
    }

    /// [`post`](Self::post) of the one request `wr`, inlined into the
    /// caller on rxe (the ring's short path for one usual request, see
    /// `SendRing::post_one`); mlx5's post stays one call. For callers that
    /// post one request per call, such as the C library's `ibv_post_send`.
    ///
    /// # Safety
    /// As for [`post`](Self::post).
    #[doc(alias = "ibv_post_send")]
    #[inline(always)]
    pub unsafe fn post_one(&mut self, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded from this function's contract.
        inline_first!(&mut self.0, SendDrv, SendPost, Send, q => unsafe { SendPost::post_one(q, wr) },
            // SAFETY: as above.
            unsafe { self.0.post_one_elsewhere(wr) })
    }
}

impl RecvDriver {
    /// Posts receive work requests (`ibv_post_recv`): WQEs and the
    /// producer index or doorbell record, no syscall. On a refused request
    /// the ones before it are posted, none after it.
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        inline_first!(&mut self.0, RecvDrv, RecvPost, Recv, q => RecvPost::post(q, wrs), self.0.post_elsewhere(wrs))
    }
}
