//! Shared receive queues (`ibv_srq`).

use std::sync::Arc;

use rverbs_providers::cmd::srq as cmd;
use rverbs_providers::driver::Provider;
use rverbs_providers::{mlx5, rxe};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::rdma_user_rxe::{mminfo, rxe_modify_srq_cmd};
use tracing::debug;
use zerocopy::{FromZeros, IntoBytes};

use crate::cq::{need_provider, Parking};
use crate::event::EventObject;
use crate::{PostError, PostErrorKind, ProtectionDomain, RecvWr};

/// `IBV_SRQ_LIMIT` in `ibv_srq_attr_mask`.
const SRQ_LIMIT: u32 = 2;

/// SRQ attributes (`struct ibv_srq_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receive work requests it holds.
    pub max_wr: u32,
    /// SGEs per receive.
    pub max_sge: u32,
    /// Limit: when fewer receives than this remain, an `SrqLimitReached`
    /// async event fires (0 = disarmed).
    pub srq_limit: u32,
}

#[derive(Debug)]
pub(crate) enum SrqDriver {
    Rxe(rxe::RecvRing),
    Mlx5(mlx5::Srq),
    /// Moved out (parked in [`SrqShared`] or dropped): posts nothing.
    Gone,
}

/// The kernel SRQ, shared with the QPs attached to it.
///
/// With mlx5 the SRQ buffer and doorbell record are user memory the HCA
/// reads and writes until the kernel SRQ is destroyed. The provider keeps
/// them in its registry; a `SharedReceiveQueue` dropped while QPs still use
/// the kernel SRQ parks its driver here, and the registry entry is removed
/// (`srq_destroyed`) only after the kernel destroy.
#[derive(Debug)]
pub(crate) struct SrqShared {
    pd: ProtectionDomain,
    handle: u32,
    user_handle: u64,
    live: bool,
    /// The driver of a dropped `SharedReceiveQueue` (mlx5 only).
    parked: Parking<SrqDriver>,
}

impl SrqShared {
    fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        // On failure the mlx5 SRQ stays registered, so its memory is
        // leaked rather than freed under the HCA.
        let events = match cmd::destroy_srq(self.pd.context().fd(), self.handle) {
            Ok(ev) => ev,
            Err(e) => {
                self.parked.release(false);
                return Err(e);
            }
        };
        self.pd.context().unregister(self.user_handle);
        if let Some(SrqDriver::Mlx5(srq)) = self.parked.release(true) {
            if let Some(m) = self.pd.context().mlx5() {
                m.srq_destroyed(srq);
            }
        }
        debug!(handle = self.handle, async_events = events, "SRQ destroyed");
        Ok(())
    }

    fn park(&self, driver: SrqDriver) {
        match driver {
            d @ SrqDriver::Mlx5(_) => self.parked.park(d, |_| {}),
            other => drop(other),
        }
    }
}

impl Drop for SrqShared {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "SRQ destroy failed");
        }
    }
}

/// A shared receive queue: several QPs take their receive buffers from it.
///
/// ```no_run
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// let srq = pd.create_srq(128, 1, 0)?;
/// srq.modify_limit(16)?;   // arm the SRQ limit event
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct SharedReceiveQueue {
    driver: SrqDriver,
    pub(crate) shared: Arc<SrqShared>,
    max_wr: u32,
    max_sge: u32,
}

impl ProtectionDomain {
    /// Creates a basic SRQ (`UVERBS_METHOD_SRQ_CREATE`, `ibv_create_srq`).
    #[doc(alias = "ibv_create_srq")]
    pub fn create_srq(&self, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<SharedReceiveQueue> {
        const VERB: &str = "ibv_create_srq";
        let ctx = self.context();
        let _span = tracing::debug_span!("ibv_create_srq", max_wr, max_sge).entered();
        let provider = need_provider(ctx, VERB, "shared receive queues")?;
        let dev = ctx.device_attr()?;
        if max_wr == 0 || max_wr > dev.max_srq_wr || max_sge == 0 || max_sge > dev.max_srq_sge {
            return Err(Error::os(VERB, Errno::EINVAL).with_message(format!(
                "max_wr {max_wr} / max_sge {max_sge} outside 1..={} / 1..={} (the device's max_srq_wr / max_srq_sge)",
                dev.max_srq_wr, dev.max_srq_sge
            )));
        }
        if dev.max_srq == 0 {
            return Err(Error::os(VERB, Errno::EOPNOTSUPP).with_message("the device has no SRQs"));
        }
        // mlx5: the buffer, doorbell record and user index first; the core
        // command then asks for exactly the geometry they have.
        let prepared = match provider {
            Provider::Mlx5 => {
                let m = ctx.mlx5_or_err(VERB)?;
                let (pending, udata) = m.srq_prepare(max_wr, max_sge)?;
                Some((m, pending, udata))
            }
            Provider::Rxe => None,
        };
        let (core_wr, core_sge) =
            prepared.as_ref().map_or((max_wr, max_sge), |(_, p, _)| (p.core_max_wr(), p.core_max_sge()));
        let drv_in = prepared.as_ref().map_or(&[][..], |(_, _, u)| u.as_bytes());
        let out_len = match provider {
            Provider::Rxe => rxe::SRQ_RESP_LEN,
            Provider::Mlx5 => mlx5::SRQ_RESP_LEN,
        };
        let mut drv_out = [0u8; DRV_OUT_LEN];
        let user_handle = ctx.register(|h| EventObject::Srq { user_handle: h });
        // On failure `prepared` (mlx5's memory) is dropped: the kernel never took it.
        let created = cmd::create_srq(
            ctx.fd(),
            self.handle(),
            core_wr,
            core_sge,
            srq_limit,
            user_handle,
            drv_in,
            &mut drv_out[..out_len],
        )
        .inspect_err(|_| ctx.unregister(user_handle))?;
        let mut shared =
            SrqShared { pd: self.clone(), handle: created.handle, user_handle, live: true, parked: Parking::new() };
        let (driver, max_wr, max_sge) = match prepared {
            None => {
                // If mapping fails, dropping `shared` destroys the kernel SRQ.
                let ring = rxe::srq_finish(ctx.fd(), &drv_out[..out_len], created.max_sge)?;
                (SrqDriver::Rxe(ring), created.max_wr, created.max_sge)
            }
            // Nothing fallible between the kernel create and `srq_finish`:
            // `pending` must not be dropped while the kernel SRQ exists.
            Some((m, pending, _)) => {
                // What the provider's queue really holds (rdma-core reports the same).
                let (wr, sge) = (pending.core_max_wr(), pending.core_max_sge());
                match m.srq_finish(pending, &drv_out[..out_len]) {
                    Ok(srq) => (SrqDriver::Mlx5(srq), wr, sge),
                    Err(mlx5::FinishError { error, pending }) => {
                        // The kernel SRQ uses the pending memory: destroy it first.
                        match shared.destroy() {
                            Ok(()) => drop(pending),
                            Err(_) => std::mem::forget(pending),
                        }
                        return Err(error);
                    }
                }
            }
        };
        debug!(handle = created.handle, max_wr, "SRQ created");
        Ok(SharedReceiveQueue { driver, shared: Arc::new(shared), max_wr, max_sge })
    }
}

impl SharedReceiveQueue {
    /// The PD it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.shared.pd
    }
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.shared.handle
    }
    /// The value async events carry for this SRQ.
    pub fn user_handle(&self) -> u64 {
        self.shared.user_handle
    }
    /// Capacity granted.
    pub fn max_wr(&self) -> u32 {
        self.max_wr
    }
    /// SGEs per receive granted.
    pub fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Posts receive work requests (`ibv_post_srq_recv`): pure memory, no
    /// syscall. On a refused request the ones before it are posted, none
    /// after it.
    #[doc(alias = "ibv_post_srq_recv")]
    #[inline]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        match &mut self.driver {
            SrqDriver::Rxe(ring) => ring.post(wrs),
            SrqDriver::Mlx5(srq) => srq.post(wrs),
            SrqDriver::Gone => Err(PostError { index: 0, kind: PostErrorKind::BadState }),
        }
    }

    /// Sets the limit that arms the `SrqLimitReached` event
    /// (`IB_USER_VERBS_CMD_MODIFY_SRQ` with `IBV_SRQ_LIMIT`, `ibv_modify_srq`).
    #[doc(alias = "ibv_modify_srq")]
    pub fn modify_limit(&self, limit: u32) -> Result<()> {
        const VERB: &str = "ibv_modify_srq";
        if limit >= self.max_wr {
            return Err(Error::os(VERB, Errno::EINVAL)
                .with_message(format!("SRQ limit {limit} must be below the SRQ's size {}", self.max_wr)));
        }
        // rxe reads an `rxe_modify_srq_cmd` on every modify; its pointer is
        // where the kernel would describe a resized queue (not used for a
        // limit change, but it must be valid memory).
        // mlx5 takes no driver data here.
        let mut mi = mminfo::new_zeroed();
        let drv = rxe_modify_srq_cmd { mmap_info_addr: mi.as_mut_bytes().as_mut_ptr() as u64 };
        let drv_in = match self.driver {
            SrqDriver::Rxe(_) => drv.as_bytes(),
            SrqDriver::Mlx5(_) | SrqDriver::Gone => &[],
        };
        cmd::modify_srq(self.pd().context().fd(), self.handle(), SRQ_LIMIT, 0, limit, drv_in)
    }

    /// Queries the SRQ (`IB_USER_VERBS_CMD_QUERY_SRQ`, `ibv_query_srq`).
    #[doc(alias = "ibv_query_srq")]
    pub fn query(&self) -> Result<SrqAttr> {
        let r = cmd::query_srq(self.pd().context().fd(), self.handle())?;
        Ok(SrqAttr { max_wr: r.max_wr, max_sge: r.max_sge, srq_limit: r.srq_limit })
    }

    /// Destroys the SRQ now (`UVERBS_METHOD_SRQ_DESTROY`, `ibv_destroy_srq`).
    ///
    /// # Errors
    /// `EBUSY` while QPs are attached (it goes after the last of them).
    #[doc(alias = "ibv_destroy_srq")]
    pub fn destroy(mut self) -> Result<()> {
        let d = std::mem::replace(&mut self.driver, SrqDriver::Gone);
        self.shared.park(d);
        // Only QPs clone the shared SRQ, and they need `&self` to be created.
        match Arc::get_mut(&mut self.shared) {
            Some(s) => s.destroy(),
            None => Err(Error::os("ibv_destroy_srq", Errno::EBUSY)
                .with_message("QPs are still attached to this SRQ; it is destroyed after the last of them")),
        }
    }

    /// mlx5: the provider's shared SRQ state, for QPs that receive from it.
    pub(crate) fn mlx5_shared(&self) -> Option<&Arc<mlx5::SrqShared>> {
        match &self.driver {
            SrqDriver::Mlx5(srq) => Some(srq.shared()),
            _ => None,
        }
    }
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        // rxe: the ring goes now, before the kernel object (as always).
        // mlx5: parked with the kernel SRQ until its destroy.
        let d = std::mem::replace(&mut self.driver, SrqDriver::Gone);
        self.shared.park(d);
    }
}

/// Room for the largest driver answer to create-SRQ.
const DRV_OUT_LEN: usize = if rxe::SRQ_RESP_LEN > mlx5::SRQ_RESP_LEN { rxe::SRQ_RESP_LEN } else { mlx5::SRQ_RESP_LEN };
