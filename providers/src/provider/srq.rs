//! Shared receive queues: create (prepare → `SRQ_CREATE` → finish →
//! rollback), post dispatch, limit, destroy.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tracing::debug;
use zerocopy::{FromZeros, IntoBytes};

use super::ops::create_then_finish;
use super::parking::Parking;
use super::{modify_srq_limit, Kind, ProviderContext, RecvPost, SrqDrv, SrqOps, SrqProv, Variant};
use crate::cmd::srq as cmd;
use crate::sys::UverbsFd;
use crate::wr::{PostError, PostErrorKind, RecvWr};
use crate::{Error, Result};

/// What an SRQ is created with (`ibv_create_srq`'s `ibv_srq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct SrqCreate {
    /// The PD's kernel handle.
    pub pd_handle: u32,
    /// Receive work requests it holds (checked against the device by the caller).
    pub max_wr: u32,
    /// SGEs per receive.
    pub max_sge: u32,
    /// The limit that arms `SRQ_LIMIT_REACHED` (0: disarmed).
    pub srq_limit: u32,
    /// The value async events carry for this SRQ.
    pub user_handle: u64,
}

/// The SRQ's provider driver, posted through `&mut` (mlx5 also takes the
/// SRQ's free-list lock, which completions share).
#[derive(Debug)]
pub struct SrqDriver(SrqDrv);

impl SrqDrv {
    /// Whether this driver must outlive its kernel SRQ.
    fn parks(&self) -> bool {
        each!(self, SrqDrv, T, _ => <T as SrqOps>::SRQ_PARKS; SrqDrv::Gone => false)
    }
}

/// The kernel SRQ, shared (cheap clone) with the QPs attached to it.
///
/// With mlx5 the SRQ buffer and doorbell record are user memory the HCA
/// reads and writes until the kernel SRQ is destroyed. The provider keeps
/// them in its registry; a driver whose owner goes while QPs still use the
/// kernel SRQ is parked here (`SrqOps::SRQ_PARKS`), and the registry
/// entry is removed only after the kernel destroy.
///
/// `U` is the creator's part kept with it ([`create_srq`]'s `user`): the
/// SRQ's owner keeps it typed (`KernelSrq<ItsType>`), and so does a QP
/// of the same creator attached to it (a thin pointer); the erased
/// default ([`SrqUser`]) serves code that holds SRQs of any creator.
///
/// [`create_srq`]: ProviderContext::create_srq
#[derive(Debug)]
pub struct KernelSrq<U: ?Sized = SrqUser>(Arc<SrqCore<U>>);

impl<U: ?Sized> Clone for KernelSrq<U> {
    fn clone(&self) -> Self {
        KernelSrq(self.0.clone())
    }
}

/// What the library above keeps with a kernel SRQ, in the kernel SRQ's
/// own allocation (one per SRQ): rverbs' PD and `user_handle`. Dropped
/// right after the kernel SRQ's destroy, with the last holder.
pub type SrqUser = dyn Any + Send + Sync;

/// The kernel SRQ's one allocation: the provider's part, then the user's
/// ([`SrqUser`], last, so that it may be unsized).
#[derive(Debug)]
struct SrqCore<U: ?Sized> {
    fd: Arc<UverbsFd>,
    handle: u32,
    max_wr: u32,
    max_sge: u32,
    prov: SrqProv,
    /// The kernel SRQ exists (a failed destroy sets it again).
    live: AtomicBool,
    parked: Parking<SrqDrv>,
    /// The library's part, dropped after the kernel destroy.
    user: U,
}

impl ProviderContext {
    /// Creates a basic SRQ: `UVERBS_METHOD_SRQ_CREATE` with the provider's
    /// driver data (mlx5: buffer, doorbell record and user index first, and
    /// the core command asks for exactly the geometry they have; rxe: the
    /// ring's mmap info out), then its driver.
    ///
    /// `user` (the caller's part, `()` for none) is kept in the kernel
    /// SRQ's allocation ([`KernelSrq::user_value`]): it is dropped right
    /// after the kernel SRQ's destroy, with the last holder, or before this
    /// returns if the create fails.
    #[doc(alias = "ibv_create_srq")]
    pub fn create_srq<U: Any + Send + Sync>(
        &self,
        fd: &Arc<UverbsFd>,
        a: &SrqCreate,
        user: U,
    ) -> Result<(KernelSrq<U>, SrqDriver)> {
        each!(&self.kind, Kind, T, ctx => create_srq::<T, U>(ctx, fd, a, user))
    }
}

impl<U> SrqCore<U> {
    /// A live kernel SRQ of provider state `prov`, with no driver parked.
    fn new(fd: &Arc<UverbsFd>, handle: u32, max_wr: u32, max_sge: u32, prov: SrqProv, user: U) -> Self {
        SrqCore {
            fd: fd.clone(),
            handle,
            max_wr,
            max_sge,
            prov,
            live: AtomicBool::new(true),
            parked: Parking::new(),
            user,
        }
    }
}

/// [`ProviderContext::create_srq`] of provider `T`.
fn create_srq<T: SrqOps, U: Any + Send + Sync>(
    ctx: &T,
    fd: &Arc<UverbsFd>,
    a: &SrqCreate,
    user: U,
) -> Result<(KernelSrq<U>, SrqDriver)>
where
    SrqProv: Variant<T, Of = T::SrqState>,
    SrqDrv: Variant<T, Of = T::Srq>,
{
    let (pending, udata, wr, sge) = ctx.srq_prepare(a.max_wr, a.max_sge)?;
    let ((created, _), (state, srq, max_wr, max_sge)) = create_then_finish(
        pending,
        |_| {
            let mut resp = T::SrqResp::new_zeroed();
            // SAFETY: the driver data names only pending memory (SrqOps), freed
            // after the kernel SRQ is destroyed, or now if this create fails.
            let created = unsafe {
                cmd::create_srq(
                    fd,
                    a.pd_handle,
                    wr,
                    sge,
                    a.srq_limit,
                    a.user_handle,
                    udata.as_bytes(),
                    resp.as_mut_bytes(),
                )
            }?;
            Ok((created, resp))
        },
        |pending, (created, resp)| ctx.srq_finish(fd, pending, resp, created),
        |(created, _)| {
            SrqCore::new(fd, created.handle, created.max_wr, created.max_sge, SrqProv::KernelOnly, ()).destroy()
        },
    )?;
    debug!(handle = created.handle, max_wr, "SRQ created");
    let prov = Variant::<T>::wrap(state);
    let k = KernelSrq(Arc::new(SrqCore::new(fd, created.handle, max_wr, max_sge, prov, user)));
    Ok((k, SrqDriver(Variant::<T>::wrap(srq))))
}

impl<U: ?Sized> SrqCore<U> {
    /// The last holder's destroy: the kernel SRQ (unless an earlier
    /// [`destroy_now`](Self::destroy_now) did it), then the parked driver.
    fn destroy(&mut self) -> Result<()> {
        // A forked child: the parent's SRQ, and memory it does not have. A
        // refused destroy: the mlx5 SRQ stays registered, and its memory is
        // leaked rather than freed under the HCA.
        self.parked.destroy_last(&self.live, self.fd.in_forked_child(), || self.destroy_now())
    }

    /// The kernel destroy, once (0 when it was already done), and mlx5's
    /// SRQ number out of the registry right after it; on failure the SRQ
    /// is as it was.
    #[inline]
    fn destroy_now(&self) -> Result<u32> {
        if !self.live.swap(false, Ordering::AcqRel) {
            return Ok(0);
        }
        let events = match cmd::destroy_srq(&self.fd, self.handle) {
            Ok(ev) => ev,
            Err(e) => {
                self.live.store(true, Ordering::Release);
                return Err(e);
            }
        };
        each!(&self.prov, SrqProv, T, s => <T as SrqOps>::srq_destroyed(s); SrqProv::KernelOnly => {});
        debug!(handle = self.handle, async_events = events, "SRQ destroyed");
        Ok(events)
    }
}

impl<U: ?Sized> Drop for SrqCore<U> {
    /// Inlined into the drop glue: after an explicit destroy it is the
    /// parking slot's release, no call of its own.
    #[inline]
    fn drop(&mut self) {
        if !self.parked.drop_if_destroyed(&mut self.live) {
            self.destroy_on_drop();
        }
    }
}

impl<U: ?Sized> SrqCore<U> {
    /// [`Drop`]'s destroy of a SRQ still live.
    #[inline(never)]
    fn destroy_on_drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "SRQ destroy failed");
        }
    }
}

impl<U: Any + Send + Sync> KernelSrq<U> {
    /// The part the creator kept here (`create_srq`'s `user`).
    #[inline]
    pub fn user_value(&self) -> &U {
        &self.0.user
    }
}

impl<U: ?Sized> KernelSrq<U> {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.0.handle
    }

    /// Whether it was created on `fd`.
    pub(crate) fn is_on(&self, fd: &Arc<UverbsFd>) -> bool {
        Arc::ptr_eq(&self.0.fd, fd)
    }
    /// Receive work requests it holds.
    pub fn max_wr(&self) -> u32 {
        self.0.max_wr
    }
    /// SGEs per receive.
    pub fn max_sge(&self) -> u32 {
        self.0.max_sge
    }

    /// Provider `T`'s state of this SRQ, for QPs that receive from it.
    pub(super) fn state<T: SrqOps>(&self) -> Option<&T::SrqState>
    where
        SrqProv: Variant<T, Of = T::SrqState>,
    {
        Variant::<T>::of(&self.0.prov)
    }

    /// Sets the limit that arms `SRQ_LIMIT_REACHED`
    /// (`IB_USER_VERBS_CMD_MODIFY_SRQ` with `IBV_SRQ_LIMIT`, `ibv_modify_srq`).
    #[doc(alias = "ibv_modify_srq")]
    pub fn modify_limit(&self, limit: u32) -> Result<()> {
        let (fd, handle) = (&self.0.fd, self.0.handle);
        each!(&self.0.prov, SrqProv, T, s => <T as SrqOps>::srq_modify_limit(s, fd, handle, limit);
            // SAFETY: no driver data, so no address.
            SrqProv::KernelOnly => unsafe { modify_srq_limit(fd, handle, limit, &[]) })
    }

    /// Takes the driver of an SRQ whose owner goes away out of `driver`,
    /// leaving one that posts nothing: parked until the kernel SRQ is
    /// destroyed if its provider parks SRQ drivers (`SrqOps::SRQ_PARKS`:
    /// mlx5), dropped now, in place, otherwise (rxe's ring). A driver
    /// already taken is left as it is.
    pub fn park(&self, driver: &mut SrqDriver) {
        if matches!(driver.0, SrqDrv::Gone) {
            return;
        }
        if self.0.fd.in_forked_child() {
            std::mem::forget(driver.take());
            return;
        }
        if driver.0.parks() {
            let d = std::mem::replace(&mut driver.0, SrqDrv::Gone);
            self.0.parked.park(d, |_| {});
        } else {
            driver.0 = SrqDrv::Gone;
        }
    }

    /// Whether another handle (an attached QP's, a clone) holds it too: a
    /// [`destroy`](Self::destroy) would answer `EBUSY`.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }

    /// Destroys the kernel SRQ now (`UVERBS_METHOD_SRQ_DESTROY`), if this
    /// is the last holder; park the driver first.
    ///
    /// # Errors
    /// `EBUSY` while QPs are attached (it is destroyed after the last of them).
    #[doc(alias = "ibv_destroy_srq")]
    pub fn destroy(&mut self) -> Result<()> {
        match Arc::get_mut(&mut self.0) {
            Some(c) => c.destroy(),
            None => Err(Error::check("ibv_destroy_srq", crate::Errno::EBUSY)
                .with_message("QPs are still attached to this SRQ; it is destroyed after the last of them")),
        }
    }

    /// Destroys the kernel SRQ now, through a shared reference, and returns
    /// the kernel's count of async events it reported for the SRQ (what
    /// `ibv_destroy_srq` waits for the acknowledgements of); 0 when it was
    /// already destroyed, or in a forked child. The driver stays until the
    /// last holder goes. If the kernel refuses, nothing changed: the SRQ is
    /// usable and the destroy may be tried again.
    ///
    /// # Errors
    /// The kernel's errno (`EBUSY` while QPs are attached).
    #[doc(alias = "ibv_destroy_srq")]
    #[inline]
    pub fn destroy_now(&self) -> Result<u32> {
        if self.0.fd.in_forked_child() {
            return Ok(0);
        }
        self.0.destroy_now()
    }
}

impl SrqDriver {
    /// Posts receive work requests (`ibv_post_srq_recv`): pure memory, no
    /// syscall. On a refused request the ones before it are posted, none
    /// after it.
    #[doc(alias = "ibv_post_srq_recv")]
    #[inline]
    pub fn post(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        each!(&mut self.0, SrqDrv, T, d => RecvPost::post(d, wrs);
            SrqDrv::Gone => Err(PostError { index: 0, kind: PostErrorKind::BadState }))
    }

    /// Takes the driver out, leaving one that posts nothing (for the
    /// owner's `Drop`, before [`KernelSrq::park`]).
    pub fn take(&mut self) -> SrqDriver {
        SrqDriver(std::mem::replace(&mut self.0, SrqDrv::Gone))
    }
}
