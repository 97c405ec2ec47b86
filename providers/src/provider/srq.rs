//! Shared receive queues: create (prepare → `SRQ_CREATE` → finish →
//! rollback), post dispatch, limit, destroy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rverbs_uapi::rdma_user_rxe::{mminfo, rxe_modify_srq_cmd};
use tracing::debug;
use zerocopy::{FromZeros, IntoBytes};

use super::parking::Parking;
use super::{Kind, ProviderContext};
use crate::cmd::srq as cmd;
use crate::sys::UverbsFd;
use crate::wr::{PostError, PostErrorKind, RecvWr};
use crate::{mlx5, rxe, Error, Result};

/// `IBV_SRQ_LIMIT` in `ibv_srq_attr_mask`.
const SRQ_LIMIT: u32 = 2;

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

#[derive(Debug)]
enum SrqDrv {
    Rxe(rxe::RecvRing),
    Mlx5(mlx5::Srq),
    /// Moved out (parked or dropped): posts nothing.
    Gone,
}

/// The kernel SRQ, shared (cheap clone) with the QPs attached to it.
///
/// With mlx5 the SRQ buffer and doorbell record are user memory the HCA
/// reads and writes until the kernel SRQ is destroyed. The provider keeps
/// them in its registry; a driver whose owner goes while QPs still use the
/// kernel SRQ is parked here, and the registry entry is removed only after
/// the kernel destroy.
#[derive(Clone, Debug)]
pub struct KernelSrq(Arc<SrqCore>);

#[derive(Debug)]
struct SrqCore {
    fd: Arc<UverbsFd>,
    handle: u32,
    max_wr: u32,
    max_sge: u32,
    prov: SrqProv,
    /// The kernel SRQ exists (a failed destroy sets it again).
    live: AtomicBool,
    parked: Parking<SrqDrv>,
}

#[derive(Debug)]
enum SrqProv {
    /// rxe, or an mlx5 SRQ whose provider half never came to be.
    KernelOnly,
    /// Rxe: modify commands carry `rxe_modify_srq_cmd`.
    Rxe,
    Mlx5 {
        ctx: mlx5::Context,
        shared: Arc<mlx5::SrqShared>,
    },
}

impl ProviderContext {
    /// Creates a basic SRQ: `UVERBS_METHOD_SRQ_CREATE` with the provider's
    /// driver data (mlx5: buffer, doorbell record and user index first, and
    /// the core command asks for exactly the geometry they have; rxe: the
    /// ring's mmap info out), then its driver.
    #[doc(alias = "ibv_create_srq")]
    pub fn create_srq(&self, fd: &Arc<UverbsFd>, a: &SrqCreate) -> Result<(KernelSrq, SrqDriver)> {
        let core = |handle, max_wr, max_sge, prov| SrqCore {
            fd: fd.clone(),
            handle,
            max_wr,
            max_sge,
            prov,
            live: AtomicBool::new(true),
            parked: Parking::new(),
        };
        match &self.kind {
            Kind::Rxe(_) => {
                let mut drv_out = [0u8; rxe::SRQ_RESP_LEN];
                // SAFETY: rxe's create-SRQ driver data names no memory.
                let created = unsafe {
                    cmd::create_srq(fd, a.pd_handle, a.max_wr, a.max_sge, a.srq_limit, a.user_handle, &[], &mut drv_out)
                }?;
                // If mapping fails, dropping the core destroys the kernel SRQ.
                let k = KernelSrq(Arc::new(core(created.handle, created.max_wr, created.max_sge, SrqProv::Rxe)));
                let ring = rxe::srq_finish(fd, &drv_out, created.max_sge)?;
                debug!(handle = created.handle, max_wr = created.max_wr, "rxe SRQ created");
                Ok((k, SrqDriver(SrqDrv::Rxe(ring))))
            }
            Kind::Mlx5(m) => {
                let (pending, udata) = m.srq_prepare(a.max_wr, a.max_sge)?;
                // What the provider's queue really holds (rdma-core reports the same).
                let (wr, sge) = (pending.core_max_wr(), pending.core_max_sge());
                let mut drv_out = [0u8; mlx5::SRQ_RESP_LEN];
                // SAFETY: the driver data names `pending`'s buffer and doorbell
                // record, which stay allocated until the kernel SRQ is destroyed:
                // on failure here the kernel took nothing and `pending` drops.
                let created = unsafe {
                    cmd::create_srq(
                        fd,
                        a.pd_handle,
                        wr,
                        sge,
                        a.srq_limit,
                        a.user_handle,
                        udata.as_bytes(),
                        &mut drv_out,
                    )
                }?;
                // Nothing fallible between the kernel create and `srq_finish`:
                // `pending` must not be dropped while the kernel SRQ exists.
                match m.srq_finish(pending, &drv_out) {
                    Ok(srq) => {
                        let prov = SrqProv::Mlx5 { ctx: m.clone(), shared: srq.shared().clone() };
                        debug!(handle = created.handle, max_wr = wr, "mlx5 SRQ created");
                        Ok((KernelSrq(Arc::new(core(created.handle, wr, sge, prov))), SrqDriver(SrqDrv::Mlx5(srq))))
                    }
                    Err(mlx5::FinishError { error, pending }) => {
                        // The kernel SRQ uses the pending memory: destroy it first.
                        let mut c = core(created.handle, wr, sge, SrqProv::KernelOnly);
                        match c.destroy() {
                            Ok(()) => drop(pending),
                            Err(_) => std::mem::forget(pending),
                        }
                        Err(error)
                    }
                }
            }
        }
    }
}

impl SrqCore {
    /// The last holder's destroy: the kernel SRQ (unless an earlier
    /// [`destroy_now`](Self::destroy_now) did it), then the parked driver.
    fn destroy(&mut self) -> Result<()> {
        if self.fd.in_forked_child() {
            // The parent's SRQ, and memory a forked child does not have.
            if self.live.swap(false, Ordering::Relaxed) {
                self.parked.release(false);
            }
            return Ok(());
        }
        match self.destroy_now() {
            Ok(_) => {
                drop(self.parked.release(true));
                Ok(())
            }
            Err(e) => {
                // The mlx5 SRQ stays registered, and its memory is leaked
                // rather than freed under the HCA.
                self.live.store(false, Ordering::Relaxed);
                self.parked.release(false);
                Err(e)
            }
        }
    }

    /// The kernel destroy, once (0 when it was already done), and mlx5's
    /// SRQ number out of the registry right after it; on failure the SRQ
    /// is as it was.
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
        if let SrqProv::Mlx5 { ctx, shared } = &self.prov {
            ctx.srqn_destroyed(shared.srqn());
        }
        debug!(handle = self.handle, async_events = events, "SRQ destroyed");
        Ok(events)
    }
}

impl Drop for SrqCore {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "SRQ destroy failed");
        }
    }
}

impl KernelSrq {
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

    /// mlx5: the provider's SRQ state, for QPs that receive from it.
    pub(crate) fn mlx5_shared(&self) -> Option<&Arc<mlx5::SrqShared>> {
        match &self.0.prov {
            SrqProv::Mlx5 { shared, .. } => Some(shared),
            _ => None,
        }
    }

    /// Sets the limit that arms `SRQ_LIMIT_REACHED`
    /// (`IB_USER_VERBS_CMD_MODIFY_SRQ` with `IBV_SRQ_LIMIT`, `ibv_modify_srq`).
    #[doc(alias = "ibv_modify_srq")]
    pub fn modify_limit(&self, limit: u32) -> Result<()> {
        // rxe reads an `rxe_modify_srq_cmd` on every modify; its pointer is
        // where the kernel would describe a resized queue (not written for a
        // limit change, but it must be valid memory). mlx5 takes no driver data.
        let mut mi = mminfo::new_zeroed();
        let drv = rxe_modify_srq_cmd { mmap_info_addr: mi.as_mut_bytes().as_mut_ptr() as u64 };
        let drv_in = match self.0.prov {
            SrqProv::Rxe => drv.as_bytes(),
            SrqProv::Mlx5 { .. } | SrqProv::KernelOnly => &[],
        };
        // SAFETY: the only address in the driver data is `mi`'s, writable and
        // alive for the whole call.
        unsafe { cmd::modify_srq(&self.0.fd, self.0.handle, SRQ_LIMIT, 0, limit, drv_in) }
    }

    /// Takes the driver of an SRQ whose owner goes away: rxe's ring is
    /// dropped now; mlx5's is parked until the kernel SRQ is destroyed.
    pub fn park(&self, driver: SrqDriver) {
        if self.0.fd.in_forked_child() {
            std::mem::forget(driver);
            return;
        }
        match driver.0 {
            d @ SrqDrv::Mlx5(_) => self.0.parked.park(d, |_| {}),
            other => drop(other),
        }
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
        match &mut self.0 {
            SrqDrv::Rxe(ring) => ring.post(wrs),
            SrqDrv::Mlx5(srq) => srq.post(wrs),
            SrqDrv::Gone => Err(PostError { index: 0, kind: PostErrorKind::BadState }),
        }
    }

    /// Takes the driver out, leaving one that posts nothing (for the
    /// owner's `Drop`, before [`KernelSrq::park`]).
    pub fn take(&mut self) -> SrqDriver {
        SrqDriver(std::mem::replace(&mut self.0, SrqDrv::Gone))
    }
}
