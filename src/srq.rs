//! Shared receive queues (`ibv_srq`).

use std::sync::Arc;

use rverbs_providers::cmd::srq as cmd;
use rverbs_providers::driver::Provider;
use rverbs_providers::rxe;
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::rdma_user_rxe::{mminfo, rxe_modify_srq_cmd};
use tracing::debug;
use zerocopy::{FromZeros, IntoBytes};

use crate::cq::need_provider;
use crate::event::EventObject;
use crate::{PostError, ProtectionDomain, RecvWr};

/// `IBV_SRQ_MAX_WR` in `ibv_srq_attr_mask`.
const SRQ_MAX_WR: u32 = 1;
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
}

/// The kernel SRQ, shared with the QPs attached to it.
#[derive(Debug)]
pub(crate) struct SrqShared {
    pd: ProtectionDomain,
    handle: u32,
    user_handle: u64,
    live: bool,
}

impl SrqShared {
    fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        let events = cmd::destroy_srq(self.pd.context().fd(), self.handle)?;
        self.pd.context().unregister(self.user_handle);
        debug!(handle = self.handle, async_events = events, "SRQ destroyed");
        Ok(())
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
        let user_handle = ctx.register(|h| EventObject::Srq { user_handle: h });
        let mut drv_out = [0u8; rxe::SRQ_RESP_LEN];
        let created = cmd::create_srq(ctx.fd(), self.handle(), max_wr, max_sge, srq_limit, user_handle, &[], &mut drv_out)
            .inspect_err(|_| ctx.unregister(user_handle))?;
        let shared = Arc::new(SrqShared { pd: self.clone(), handle: created.handle, user_handle, live: true });
        let driver = match provider {
            Provider::Rxe => SrqDriver::Rxe(rxe::srq_finish(ctx.fd(), &drv_out, created.max_sge)?),
            Provider::Mlx5 => unreachable!("refused by need_provider"),
        };
        debug!(handle = created.handle, max_wr = created.max_wr, "SRQ created");
        Ok(SharedReceiveQueue { driver, shared, max_wr: created.max_wr, max_sge: created.max_sge })
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
        let mut mi = mminfo::new_zeroed();
        let drv = match self.driver {
            SrqDriver::Rxe(_) => rxe_modify_srq_cmd { mmap_info_addr: mi.as_mut_bytes().as_mut_ptr() as u64 },
        };
        cmd::modify_srq(self.pd().context().fd(), self.handle(), SRQ_LIMIT, 0, limit, drv.as_bytes())
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
    pub fn destroy(self) -> Result<()> {
        let SharedReceiveQueue { driver, shared, .. } = self;
        drop(driver);
        match Arc::try_unwrap(shared) {
            Ok(mut s) => s.destroy(),
            Err(_) => Err(Error::os("ibv_destroy_srq", Errno::EBUSY)
                .with_message("QPs are still attached to this SRQ; it is destroyed after the last of them")),
        }
    }
}

#[allow(dead_code)]
const _: u32 = SRQ_MAX_WR;
