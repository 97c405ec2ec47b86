//! Completion queues (`ibv_cq`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use rverbs_providers::cmd::cq as cmd;
use rverbs_providers::driver::Provider;
use rverbs_providers::rxe;
use rverbs_providers::{Errno, Error, Result};
use tracing::debug;

use crate::event::EventObject;
use crate::Wc;
use crate::{CompletionChannel, Context};

/// The provider half of a CQ: what the fast path works on.
#[derive(Debug)]
pub(crate) enum CqDriver {
    Rxe(rxe::CqRing),
}

/// The kernel CQ, shared by the `CompletionQueue` and the QPs that use it,
/// which keep it alive. Destroyed when the last holder goes.
#[derive(Debug)]
pub(crate) struct CqShared {
    ctx: Context,
    pub(crate) handle: u32,
    user_handle: u64,
    cqe: AtomicU32,
    // Kept alive until the kernel CQ is gone: the kernel refcounts the
    // channel per CQ, and users expect to be able to drop theirs early.
    channel: Option<CompletionChannel>,
    live: bool,
}

impl CqShared {
    fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        let ev = cmd::destroy_cq(self.ctx.fd(), self.handle)?;
        self.ctx.unregister(self.user_handle);
        debug!(handle = self.handle, comp_events = ev.comp, async_events = ev.async_, "CQ destroyed");
        Ok(())
    }
}

impl Drop for CqShared {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "CQ destroy failed");
        }
    }
}

/// A completion queue. Work requests of QPs attached to it report their
/// completions here.
///
/// Destroying: dropping it (or [`destroy`](Self::destroy)) destroys the
/// kernel CQ once no QP uses it any more. rdma-core's `ibv_destroy_cq` waits
/// until every completion event was acknowledged because its events carry
/// the CQ's address; rverbs' events carry the `user_handle` value, so nothing
/// dangles and destroy never waits. [`ack_events`](Self::ack_events) is kept
/// for parity and bookkeeping.
///
/// ```no_run
/// let ctx = rverbs::devices()?[0].open()?;
/// let cq = ctx.create_cq(256, None, 0)?;
/// assert!(cq.cqe() >= 256);
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct CompletionQueue {
    // Field order: the driver (ring mapping) goes before the kernel object.
    driver: CqDriver,
    pub(crate) shared: Arc<CqShared>,
    events_acked: AtomicU32,
}

pub(crate) fn need_provider(ctx: &Context, verb: &'static str, what: &str) -> Result<Provider> {
    match ctx.provider() {
        Some(Provider::Rxe) => Ok(Provider::Rxe),
        Some(Provider::Mlx5) => Err(Error::os(verb, Errno::EOPNOTSUPP)
            .with_message(format!("{what} on mlx5 devices needs the mlx5 provider's queues, which rverbs does not have yet"))),
        None => Err(Error::os(verb, Errno::EOPNOTSUPP).with_message(format!(
            "{what} need a userspace provider, and rverbs has none for driver {}",
            ctx.device().driver()
        ))),
    }
}

impl Context {
    /// Creates a CQ with at least `cqe` entries, optionally reporting to a
    /// completion channel, on completion vector `comp_vector`
    /// (`UVERBS_METHOD_CQ_CREATE`, `ibv_create_cq`).
    ///
    /// # Errors
    /// `cqe` of 0 or above the device's `max_cqe`, a channel of another
    /// context, a vector the device does not have.
    #[doc(alias = "ibv_create_cq")]
    pub fn create_cq(&self, cqe: u32, channel: Option<&CompletionChannel>, comp_vector: u32) -> Result<CompletionQueue> {
        const VERB: &str = "ibv_create_cq";
        let _span = tracing::debug_span!("ibv_create_cq", cqe, comp_vector).entered();
        let provider = need_provider(self, VERB, "completion queues")?;
        let max = self.device_attr()?.max_cqe;
        if cqe == 0 || cqe > max {
            return Err(Error::os(VERB, Errno::EINVAL)
                .with_message(format!("CQ depth {cqe} is outside 1..={max} (the device's max_cqe)")));
        }
        if comp_vector >= self.num_comp_vectors().max(1) {
            return Err(Error::os(VERB, Errno::EINVAL).with_message(format!(
                "completion vector {comp_vector} does not exist (the device has {})",
                self.num_comp_vectors()
            )));
        }
        if let Some(ch) = channel {
            if !ch.context().same_as(self) {
                return Err(Error::os(VERB, Errno::EINVAL)
                    .with_message("the completion channel belongs to another device context"));
            }
        }
        let user_handle = self.register(|h| EventObject::Cq { user_handle: h });
        let mut drv_out = [0u8; rxe::CQ_RESP_LEN];
        let args = cmd::CreateCq { cqe, user_handle, channel: channel.map(|c| std::os::fd::AsFd::as_fd(c)), comp_vector };
        let created = match cmd::create_cq(self.fd(), &args, &[], &mut drv_out) {
            Ok(c) => c,
            Err(e) => {
                self.unregister(user_handle);
                return Err(e);
            }
        };
        let shared = Arc::new(CqShared {
            ctx: self.clone(),
            handle: created.handle,
            user_handle,
            cqe: AtomicU32::new(created.cqe),
            channel: channel.cloned(),
            live: true,
        });
        // If the provider's half fails, dropping `shared` destroys the kernel CQ.
        let driver = match provider {
            Provider::Rxe => CqDriver::Rxe(rxe::cq_finish(self.fd(), &drv_out)?),
            Provider::Mlx5 => unreachable!("refused above"),
        };
        debug!(handle = created.handle, cqe = created.cqe, "CQ created");
        Ok(CompletionQueue { driver, shared, events_acked: AtomicU32::new(0) })
    }
}

impl CompletionQueue {
    /// The context it belongs to.
    pub fn context(&self) -> &Context {
        &self.shared.ctx
    }
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.shared.handle
    }
    /// The value completion and async events carry for this CQ.
    pub fn user_handle(&self) -> u64 {
        self.shared.user_handle
    }
    /// Number of entries the CQ holds.
    pub fn cqe(&self) -> u32 {
        self.shared.cqe.load(Ordering::Relaxed)
    }
    /// The completion channel it reports to.
    pub fn channel(&self) -> Option<&CompletionChannel> {
        self.shared.channel.as_ref()
    }

    /// Arms the CQ: the next completion (or the next solicited one) raises
    /// one event on the channel (`ibv_req_notify_cq`; rxe:
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`).
    #[doc(alias = "ibv_req_notify_cq")]
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<()> {
        match &self.driver {
            CqDriver::Rxe(_) => cmd::req_notify_cq(self.shared.ctx.fd(), self.shared.handle, solicited_only),
        }
    }

    /// Acknowledges `n` completion events (`ibv_ack_cq_events`). Batching
    /// acknowledgements is fine; see the type's docs for why destroy never waits.
    #[doc(alias = "ibv_ack_cq_events")]
    pub fn ack_events(&self, n: u32) {
        self.events_acked.fetch_add(n, Ordering::Relaxed);
    }

    /// Events acknowledged so far.
    pub fn events_acked(&self) -> u32 {
        self.events_acked.load(Ordering::Relaxed)
    }

    /// Resizes the CQ to at least `cqe` entries (`IB_USER_VERBS_CMD_RESIZE_CQ`,
    /// `ibv_resize_cq`). Completions not yet polled are kept by the kernel.
    #[doc(alias = "ibv_resize_cq")]
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        const VERB: &str = "ibv_resize_cq";
        let max = self.shared.ctx.device_attr()?.max_cqe;
        if cqe == 0 || cqe > max {
            return Err(Error::os(VERB, Errno::EINVAL)
                .with_message(format!("CQ depth {cqe} is outside 1..={max} (the device's max_cqe)")));
        }
        let fd = self.shared.ctx.fd();
        let mut drv_out = [0u8; rxe::CQ_RESP_LEN];
        let new = cmd::resize_cq(fd, self.shared.handle, cqe, &mut drv_out)?;
        match &mut self.driver {
            CqDriver::Rxe(cq) => *cq = rxe::cq_finish(fd, &drv_out)?,
        }
        self.shared.cqe.store(new, Ordering::Relaxed);
        debug!(handle = self.shared.handle, cqe = new, "CQ resized");
        Ok(())
    }

    /// Destroys the CQ now, reporting the kernel's answer (`UVERBS_METHOD_CQ_DESTROY`).
    ///
    /// # Errors
    /// `EBUSY` while QPs still use it (it is then destroyed after the last of them).
    #[doc(alias = "ibv_destroy_cq")]
    pub fn destroy(self) -> Result<()> {
        let CompletionQueue { driver, shared, .. } = self;
        drop(driver);
        match Arc::try_unwrap(shared) {
            Ok(mut s) => s.destroy(),
            Err(_) => Err(Error::os("ibv_destroy_cq", Errno::EBUSY)
                .with_message("QPs still use this CQ; it is destroyed after the last of them")),
        }
    }

    /// Moves up to `out.len()` completions into `out` and returns how many
    /// (`ibv_poll_cq`). No syscall, no allocation: a copy out of the ring
    /// the kernel shares with us.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        match &mut self.driver {
            CqDriver::Rxe(ring) => ring.poll(out),
        }
    }
}
