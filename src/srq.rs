//! Shared receive queues (`ibv_srq`).

use rverbs_providers::cmd::srq as cmd;
use rverbs_providers::provider::{KernelSrq, SrqCreate, SrqDriver};
use rverbs_providers::{Errno, Error, Result};

use crate::attr::DeviceAttr;
use crate::context::counted_handle;
use crate::{PostError, ProtectionDomain, RecvWr};

/// SRQ attributes (`struct ibv_srq_attr`): what to create, and what a
/// query reports.
///
/// ```no_run
/// # let pd = rverbs::devices()?[0].open()?.alloc_pd()?;
/// let srq = pd.create_srq(&rverbs::SrqAttr { max_wr: 128, ..Default::default() })?;
/// # Ok::<(), rverbs::Error>(())
/// ```
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

impl Default for SrqAttr {
    /// 16 receives of one SGE, no limit.
    fn default() -> Self {
        SrqAttr { max_wr: 16, max_sge: 1, srq_limit: 0 }
    }
}

/// The rverbs part of an SRQ, kept in the kernel SRQ's own allocation (the
/// provider's [`KernelSrq`], whose [`user_value`](KernelSrq::user_value) it
/// is), which the QPs attached to it and the [`SrqControl`]s hold.
#[derive(Debug)]
pub(crate) struct SrqUser {
    pd: ProtectionDomain,
    user_handle: u64,
}

/// A shared receive queue: several QPs take their receive buffers from it.
///
/// ```no_run
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// let srq = pd.create_srq(&rverbs::SrqAttr { max_wr: 128, max_sge: 1, srq_limit: 0 })?;
/// srq.modify_limit(16)?;   // arm the SRQ limit event
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct SharedReceiveQueue {
    driver: SrqDriver,
    pub(crate) control: SrqControl,
}

/// The control side of an SRQ, as a handle of its own (cheap to clone):
/// the verbs that issue a kernel command (arm the limit, query) without the
/// `&mut` that posting takes, so a thread that handles the
/// `SrqLimitReached` event can re-arm it while another posts.
///
/// The SRQ is destroyed after the last of these and of its QPs
/// ([`SharedReceiveQueue::destroy`] answers `EBUSY` while one lives).
///
/// ```no_run
/// # let pd = rverbs::devices()?[0].open()?.alloc_pd()?;
/// let srq = pd.create_srq(&rverbs::SrqAttr { max_wr: 128, max_sge: 1, srq_limit: 0 })?;
/// let control = srq.control().clone();
/// std::thread::spawn(move || control.modify_limit(16));
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SrqControl(pub(crate) KernelSrq<SrqUser>);

impl SrqControl {
    /// The rverbs part kept with the kernel SRQ.
    #[inline]
    fn user(&self) -> &SrqUser {
        self.0.user_value()
    }
    /// The PD it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.user().pd
    }
    /// The kernel handle.
    #[inline]
    pub fn handle(&self) -> u32 {
        self.0.handle()
    }
    /// The value async events carry for this SRQ.
    #[inline]
    pub fn user_handle(&self) -> u64 {
        self.user().user_handle
    }
    /// Capacity granted.
    pub fn max_wr(&self) -> u32 {
        self.0.max_wr()
    }
    /// SGEs per receive granted.
    pub fn max_sge(&self) -> u32 {
        self.0.max_sge()
    }

    /// Sets the limit that arms the `SrqLimitReached` event
    /// (`IB_USER_VERBS_CMD_MODIFY_SRQ` with `IBV_SRQ_LIMIT`, `ibv_modify_srq`).
    ///
    /// # Errors
    /// `EINVAL` for a limit at or above the SRQ's size (checked here).
    #[doc(alias = "ibv_modify_srq")]
    pub fn modify_limit(&self, limit: u32) -> Result<()> {
        if limit >= self.max_wr() {
            return Err(Error::check("ibv_modify_srq", Errno::EINVAL)
                .with_message(format!("SRQ limit {limit} must be below the SRQ's size {}", self.max_wr())));
        }
        self.0.modify_limit(limit)
    }

    /// Queries the SRQ (`IB_USER_VERBS_CMD_QUERY_SRQ`, `ibv_query_srq`).
    #[doc(alias = "ibv_query_srq")]
    pub fn query(&self) -> Result<SrqAttr> {
        let r = cmd::query_srq(self.pd().context().fd(), self.handle())?;
        Ok(SrqAttr { max_wr: r.max_wr, max_sge: r.max_sge, srq_limit: r.srq_limit })
    }
}

impl ProtectionDomain {
    /// Creates a basic SRQ (`UVERBS_METHOD_SRQ_CREATE`, `ibv_create_srq`).
    ///
    /// # Errors
    /// `max_wr`/`max_sge` of 0 or above the device's limits, a device without SRQs.
    #[doc(alias = "ibv_create_srq")]
    #[inline]
    pub fn create_srq(&self, attr: &SrqAttr) -> Result<SharedReceiveQueue> {
        self.create_srq_as(attr, counted_handle())
    }

    /// [`create_srq`](Self::create_srq), the SRQ's events carrying
    /// `user_handle` (registered nowhere: see [`counted_handle`]).
    pub(crate) fn create_srq_as(&self, attr: &SrqAttr, user_handle: u64) -> Result<SharedReceiveQueue> {
        const VERB: &str = "ibv_create_srq";
        let ctx = self.context();
        let SrqAttr { max_wr, max_sge, srq_limit } = *attr;
        let _span = verb_span!("ibv_create_srq", max_wr, max_sge);
        let provider = ctx.provider_ctx(VERB, "shared receive queues")?;
        // With the device's limits not known yet (the context's first
        // create), the kernel (or the provider) checks them: no
        // `QUERY_DEVICE` of its own, and a refusal is answered with the
        // error this check gives.
        match ctx.device_attr_known() {
            Some(dev) => check_srq_attr(dev, max_wr, max_sge)?,
            None if max_wr == 0 || max_sge == 0 => check_srq_attr(ctx.device_attr()?, max_wr, max_sge)?,
            None => {}
        }
        let args = SrqCreate { pd_handle: self.handle(), max_wr, max_sge, srq_limit, user_handle };
        let user = SrqUser { pd: self.clone(), user_handle };
        let (kernel, driver) = provider.create_srq(ctx.fd_arc(), &args, user).map_err(|e| {
            match ctx.device_attr().map(|dev| check_srq_attr(dev, max_wr, max_sge)) {
                Ok(Err(c)) => c,
                _ => e,
            }
        })?;
        Ok(SharedReceiveQueue { driver, control: SrqControl(kernel) })
    }
}

/// An SRQ needs a device with SRQs, and `max_wr`/`max_sge` in 1..=its
/// `max_srq_wr`/`max_srq_sge`.
fn check_srq_attr(dev: &DeviceAttr, max_wr: u32, max_sge: u32) -> Result<()> {
    const VERB: &str = "ibv_create_srq";
    if dev.max_srq == 0 {
        return Err(Error::check(VERB, Errno::EOPNOTSUPP).with_message("the device has no SRQs"));
    }
    if max_wr == 0 || max_wr > dev.max_srq_wr || max_sge == 0 || max_sge > dev.max_srq_sge {
        return Err(Error::check(VERB, Errno::EINVAL).with_message(format!(
            "max_wr {max_wr} / max_sge {max_sge} outside 1..={} / 1..={} (the device's max_srq_wr / max_srq_sge)",
            dev.max_srq_wr, dev.max_srq_sge
        )));
    }
    Ok(())
}

impl SharedReceiveQueue {
    /// The PD it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        self.control.pd()
    }
    /// The kernel handle.
    #[inline]
    pub fn handle(&self) -> u32 {
        self.control.handle()
    }
    /// The value async events carry for this SRQ.
    #[inline]
    pub fn user_handle(&self) -> u64 {
        self.control.user_handle()
    }
    /// Capacity granted.
    pub fn max_wr(&self) -> u32 {
        self.control.max_wr()
    }
    /// SGEs per receive granted.
    pub fn max_sge(&self) -> u32 {
        self.control.max_sge()
    }

    /// Posts receive work requests (`ibv_post_srq_recv`): pure memory, no
    /// syscall. On a refused request the ones before it are posted, none
    /// after it.
    #[doc(alias = "ibv_post_srq_recv")]
    #[inline]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        self.driver.post(wrs)
    }

    /// Its control side, as a handle of its own (clone it to keep one):
    /// see [`SrqControl`].
    pub fn control(&self) -> &SrqControl {
        &self.control
    }

    /// Sets the limit that arms the `SrqLimitReached` event
    /// (`IB_USER_VERBS_CMD_MODIFY_SRQ` with `IBV_SRQ_LIMIT`, `ibv_modify_srq`):
    /// [`SrqControl::modify_limit`].
    #[doc(alias = "ibv_modify_srq")]
    pub fn modify_limit(&self, limit: u32) -> Result<()> {
        self.control.modify_limit(limit)
    }

    /// Queries the SRQ (`IB_USER_VERBS_CMD_QUERY_SRQ`, `ibv_query_srq`):
    /// [`SrqControl::query`].
    #[doc(alias = "ibv_query_srq")]
    pub fn query(&self) -> Result<SrqAttr> {
        self.control.query()
    }

    /// Destroys the SRQ now (`UVERBS_METHOD_SRQ_DESTROY`, `ibv_destroy_srq`).
    ///
    /// # Errors
    /// `EBUSY` while QPs are attached or [`SrqControl`] clones live (it
    /// goes after the last of them).
    #[doc(alias = "ibv_destroy_srq")]
    pub fn destroy(mut self) -> Result<()> {
        self.control.0.park(&mut self.driver);
        // QPs and `SrqControl` clones hold the kernel SRQ.
        if self.control.0.is_shared() {
            return Err(Error::check("ibv_destroy_srq", Errno::EBUSY).with_message(
                "QPs are still attached to this SRQ (or SrqControl clones hold it); it is destroyed after the last of them",
            ));
        }
        self.control.0.destroy()
    }
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        // rxe: the ring goes now, before the kernel object (as always).
        // mlx5: parked with the kernel SRQ until its destroy.
        self.control.0.park(&mut self.driver);
    }
}
