//! Completion queues (`ibv_cq`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use rverbs_providers::cmd::cq as cmd;
use rverbs_providers::driver::Provider;
use rverbs_providers::{mlx5, rxe};
use rverbs_providers::{Errno, Error, Result};
use tracing::debug;
use zerocopy::IntoBytes;

use crate::event::EventObject;
use crate::Wc;
use crate::{CompletionChannel, Context};

/// The provider half of a CQ: what the fast path works on.
#[derive(Debug)]
pub(crate) enum CqDriver {
    Rxe(rxe::CqRing),
    Mlx5(mlx5::Cq),
    /// Moved out (parked in [`CqShared`] or dropped): polls nothing. Only
    /// a `CompletionQueue` being dropped or destroyed holds it.
    Gone,
}

/// Where the provider half of a dropped user handle waits for its kernel
/// object's destroy (mlx5: queue memory the device writes until then).
/// Only control paths touch it (drop, destroy, a QP's destroy or RESET);
/// the fast path never does.
#[derive(Debug)]
pub(crate) struct Parking<D>(Mutex<Option<D>>);

impl<D> Parking<D> {
    pub(crate) fn new() -> Self {
        Parking(Mutex::new(None))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<D>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `d` until [`release`](Self::release), after running `last` on
    /// it under the lock (so [`with`](Self::with) sees it either before
    /// `last` or parked).
    pub(crate) fn park(&self, mut d: D, last: impl FnOnce(&mut D)) {
        let mut slot = self.lock();
        last(&mut d);
        *slot = Some(d);
    }

    /// Runs `f` on the parked driver (`None`: nothing parked) under the lock.
    pub(crate) fn with<R>(&self, f: impl FnOnce(Option<&mut D>) -> R) -> R {
        f(self.lock().as_mut())
    }

    /// After the kernel object's destroy: `destroyed` hands the driver back
    /// (drop it); otherwise the kernel object may still exist and the
    /// device may still reach the driver's memory, so it is leaked.
    pub(crate) fn release(&mut self, destroyed: bool) -> Option<D> {
        let d = self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if destroyed {
            d
        } else {
            std::mem::forget(d);
            None
        }
    }
}

/// The kernel CQ, shared by the `CompletionQueue` and the QPs that use it,
/// which keep it alive. Destroyed when the last holder goes.
///
/// With mlx5 the CQ buffer and doorbell record are user memory the HCA
/// writes until the kernel CQ is destroyed; a `CompletionQueue` dropped
/// while QPs still hold the kernel CQ therefore parks its driver here, and
/// it is freed only after the kernel destroy (field order + `Drop`).
#[derive(Debug)]
pub(crate) struct CqShared {
    ctx: Context,
    pub(crate) handle: u32,
    user_handle: u64,
    cqe: AtomicU32,
    /// mlx5: the CQ number (clean requests name the CQ by it).
    cqn: Option<u32>,
    /// mlx5: completion events read from the channel for this CQ.
    events: Arc<AtomicU32>,
    // Kept alive until the kernel CQ is gone: the kernel refcounts the
    // channel per CQ, and users expect to be able to drop theirs early.
    channel: Option<CompletionChannel>,
    live: bool,
    /// The driver of a dropped `CompletionQueue` (mlx5 only; rxe drops its
    /// mapping at once, as it always did). Dropped after `destroy`.
    parked: Parking<CqDriver>,
}

impl CqShared {
    fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        if let (Some(m), Some(cqn)) = (self.ctx.mlx5(), self.cqn) {
            // Nobody polls this CQ again; before the destroy, as the CQN
            // may be reused right after it.
            m.cq_destroyed(cqn);
        }
        match cmd::destroy_cq(self.ctx.fd(), self.handle) {
            Ok(ev) => {
                self.ctx.unregister(self.user_handle);
                debug!(handle = self.handle, comp_events = ev.comp, async_events = ev.async_, "CQ destroyed");
                drop(self.parked.release(true));
                Ok(())
            }
            Err(e) => {
                // The kernel CQ may still exist, and an mlx5 HCA may still
                // write its buffer: never free that memory.
                self.parked.release(false);
                Err(e)
            }
        }
    }

    /// mlx5: QP `qp` was destroyed or moved to RESET (kernel command done):
    /// its completions still in this CQ must go. A parked driver (no
    /// `CompletionQueue` any more) is cleaned now; a live one is out of
    /// reach (polled through `&mut` without a lock), so the clean is
    /// requested and runs at its next poll, before it reads any entry.
    /// Under the parking lock, so a `CompletionQueue` being dropped either
    /// sees the request or is seen parked.
    pub(crate) fn clean_qp(&self, m: &mlx5::Context, qp: &Arc<mlx5::QpShared>) {
        self.parked.with(|parked| match (parked, self.cqn) {
            (Some(CqDriver::Mlx5(cq)), _) => cq.clean_qp(qp),
            (_, Some(cqn)) => m.request_clean(cqn, qp),
            (_, None) => {}
        })
    }

    /// Takes the driver of a `CompletionQueue` that goes away. rxe: dropped
    /// now (its ring is a mapping of kernel memory; unmapping it before
    /// the kernel destroy is what rverbs always did). mlx5: owed cleans are
    /// run, then it is parked until the kernel CQ is destroyed.
    fn park(&self, driver: CqDriver) {
        match driver {
            d @ CqDriver::Mlx5(_) => self.parked.park(d, |d| {
                if let CqDriver::Mlx5(cq) = d {
                    cq.apply_cleans();
                }
            }),
            other => drop(other),
        }
    }
}

impl Drop for CqShared {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "CQ destroy failed");
        }
        // `destroy` released a parked mlx5 CQ buffer after the kernel CQ
        // was gone, or leaked it.
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
/// With mlx5 the queue is user memory the HCA writes: if QPs still use the
/// CQ when this handle goes, its memory stays (parked with the kernel CQ)
/// until the kernel CQ is destroyed.
///
/// ```no_run
/// let ctx = rverbs::devices()?[0].open()?;
/// let cq = ctx.create_cq(256, None, 0)?;
/// assert!(cq.cqe() >= 256);
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct CompletionQueue {
    driver: CqDriver,
    pub(crate) shared: Arc<CqShared>,
    events_acked: AtomicU32,
    /// mlx5: channel events already folded into the arm sequence number.
    events_synced: u32,
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // The driver goes before the kernel object (rxe), or is parked
        // with it until the kernel destroy (mlx5).
        let d = std::mem::replace(&mut self.driver, CqDriver::Gone);
        self.shared.park(d);
    }
}

/// A CQ depth must be 1..=the device's `max_cqe` (create and resize alike).
fn check_depth(ctx: &Context, verb: &'static str, cqe: u32) -> Result<()> {
    let max = ctx.device_attr()?.max_cqe;
    if cqe == 0 || cqe > max {
        return Err(Error::os(verb, Errno::EINVAL)
            .with_message(format!("CQ depth {cqe} is outside 1..={max} (the device's max_cqe)")));
    }
    Ok(())
}

pub(crate) fn need_provider(ctx: &Context, verb: &'static str, what: &str) -> Result<Provider> {
    match ctx.provider() {
        Some(p) => Ok(p),
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
    pub fn create_cq(
        &self,
        cqe: u32,
        channel: Option<&CompletionChannel>,
        comp_vector: u32,
    ) -> Result<CompletionQueue> {
        const VERB: &str = "ibv_create_cq";
        let _span = tracing::debug_span!("ibv_create_cq", cqe, comp_vector).entered();
        let provider = need_provider(self, VERB, "completion queues")?;
        check_depth(self, VERB, cqe)?;
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
        // mlx5: the buffer and doorbell record first; their addresses are the driver data.
        let prepared = match provider {
            Provider::Mlx5 => {
                let m = self.mlx5_or_err(VERB)?;
                let (pending, udata) = m.cq_prepare(cqe)?;
                if let Some(page) = pending.uar_index_attr() {
                    return Err(Error::os(VERB, Errno::EOPNOTSUPP).with_message(format!(
                        "the CQ's UAR page id {page} needs MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX, which rverbs does not send"
                    )));
                }
                Some((m, pending, udata))
            }
            Provider::Rxe => None,
        };
        let user_handle = self.register(|h| EventObject::Cq { user_handle: h });
        let channel_fd = channel.map(|c| std::os::fd::AsFd::as_fd(c));
        let core_cqe = prepared.as_ref().map_or(cqe, |(_, p, _)| p.core_cqe());
        let drv_in = prepared.as_ref().map_or(&[][..], |(_, _, u)| u.as_bytes());
        let mut drv_out = [0u8; DRV_OUT_LEN];
        let out_len = match provider {
            Provider::Rxe => rxe::CQ_RESP_LEN,
            Provider::Mlx5 => mlx5::CQ_RESP_LEN,
        };
        let args = cmd::CreateCq { cqe: core_cqe, user_handle, channel: channel_fd, comp_vector };
        // On failure `prepared` (mlx5's memory) is dropped: the kernel never took it.
        let created = match cmd::create_cq(self.fd(), &args, drv_in, &mut drv_out[..out_len]) {
            Ok(c) => c,
            Err(e) => {
                self.unregister(user_handle);
                return Err(e);
            }
        };
        let mut shared = CqShared {
            ctx: self.clone(),
            handle: created.handle,
            user_handle,
            cqe: AtomicU32::new(created.cqe),
            cqn: None,
            events: Arc::new(AtomicU32::new(0)),
            channel: channel.cloned(),
            live: true,
            parked: Parking::new(),
        };
        // If the provider's half fails, dropping `shared` destroys the kernel CQ.
        let driver = match prepared {
            None => {
                let shared = Arc::new(shared);
                let ring = rxe::cq_finish(self.fd(), &drv_out[..out_len])?;
                debug!(handle = created.handle, cqe = created.cqe, "CQ created");
                return Ok(CompletionQueue::new(CqDriver::Rxe(ring), shared));
            }
            // Nothing fallible between the kernel create and `cq_finish`:
            // `pending` must not be dropped while the kernel CQ exists.
            Some((m, pending, _)) => {
                match m.cq_finish(pending, &drv_out[..out_len], created.cqe) {
                    Ok(cq) => cq,
                    Err(mlx5::FinishError { error, pending }) => {
                        // The kernel CQ uses the pending memory: destroy it first.
                        match shared.destroy() {
                            Ok(()) => drop(pending),
                            Err(_) => std::mem::forget(pending),
                        }
                        return Err(error);
                    }
                }
            }
        };
        shared.cqn = Some(driver.cqn());
        self.track_cq_events(user_handle, shared.events.clone());
        debug!(handle = created.handle, cqe = created.cqe, cqn = driver.cqn(), "mlx5 CQ created");
        Ok(CompletionQueue::new(CqDriver::Mlx5(driver), Arc::new(shared)))
    }
}

/// Room for the largest driver answer to create-CQ.
const DRV_OUT_LEN: usize = if rxe::CQ_RESP_LEN > mlx5::CQ_RESP_LEN { rxe::CQ_RESP_LEN } else { mlx5::CQ_RESP_LEN };

impl CompletionQueue {
    fn new(driver: CqDriver, shared: Arc<CqShared>) -> CompletionQueue {
        CompletionQueue { driver, shared, events_acked: AtomicU32::new(0), events_synced: 0 }
    }

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
    /// one event on the channel (`ibv_req_notify_cq`). rxe:
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`, a syscall. mlx5: no syscall, the
    /// arm word into the doorbell record and a store to the UAR arm
    /// register; the arm carries a sequence number that counts the events
    /// read from the channel for this CQ so far (rdma-core advances it in
    /// `ibv_get_cq_event`): read the event before re-arming, as usual.
    #[doc(alias = "ibv_req_notify_cq")]
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<()> {
        match &mut self.driver {
            CqDriver::Rxe(_) => cmd::req_notify_cq(self.shared.ctx.fd(), self.shared.handle, solicited_only),
            CqDriver::Mlx5(cq) => {
                let seen = self.shared.events.load(Ordering::Acquire);
                // At most one event per arm, so this is 0 or 1 in practice.
                for _ in 0..seen.wrapping_sub(self.events_synced) {
                    cq.on_event();
                }
                self.events_synced = seen;
                cq.arm(solicited_only);
                Ok(())
            }
            CqDriver::Gone => Err(gone("ibv_req_notify_cq")),
        }
    }

    /// Acknowledges `n` completion events (`ibv_ack_cq_events`). Batching
    /// acknowledgements is fine; see the type's docs for why destroy never
    /// waits. (mlx5's arm sequence number follows the events *read* from
    /// the channel, as in rdma-core, not the acknowledgements: see
    /// [`req_notify`](Self::req_notify).)
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
    ///
    /// # Errors
    /// `EOPNOTSUPP` on mlx5 (the provider has no resize: it would need a
    /// second user buffer and copying the unpolled entries over).
    #[doc(alias = "ibv_resize_cq")]
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        const VERB: &str = "ibv_resize_cq";
        match self.driver {
            CqDriver::Rxe(_) => {}
            CqDriver::Mlx5(_) => {
                return Err(Error::os(VERB, Errno::EOPNOTSUPP)
                    .with_message("resizing a CQ is not supported by the rverbs mlx5 provider; create a larger one"))
            }
            CqDriver::Gone => return Err(gone(VERB)),
        }
        check_depth(&self.shared.ctx, VERB, cqe)?;
        let fd = self.shared.ctx.fd();
        let mut drv_out = [0u8; rxe::CQ_RESP_LEN];
        let new = cmd::resize_cq(fd, self.shared.handle, cqe, &mut drv_out)?;
        if let CqDriver::Rxe(cq) = &mut self.driver {
            *cq = rxe::cq_finish(fd, &drv_out)?;
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
    pub fn destroy(mut self) -> Result<()> {
        let d = std::mem::replace(&mut self.driver, CqDriver::Gone);
        self.shared.park(d);
        // Only QPs clone the shared CQ, and they need `&self` to be created.
        match Arc::get_mut(&mut self.shared) {
            Some(s) => s.destroy(),
            None => Err(Error::os("ibv_destroy_cq", Errno::EBUSY)
                .with_message("QPs still use this CQ; it is destroyed after the last of them")),
        }
        // Dropping `self` then drops the shared CQ (and a parked mlx5
        // buffer) after the kernel destroy.
    }

    /// Moves up to `out.len()` completions into `out` and returns how many
    /// (`ibv_poll_cq`). No syscall, no allocation, no lock: a copy out of
    /// the ring (rxe: shared with the kernel; mlx5: written by the HCA).
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        match &mut self.driver {
            CqDriver::Rxe(ring) => ring.poll(out),
            CqDriver::Mlx5(cq) => cq.poll(out),
            CqDriver::Gone => 0,
        }
    }
}

fn gone(verb: &'static str) -> Error {
    Error::os(verb, Errno::EINVAL).with_message("the CQ was destroyed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A provider half that counts its drops (as an mlx5 CQ buffer would
    /// be unmapped).
    #[derive(Debug)]
    struct Dummy(Arc<AtomicUsize>);
    impl Drop for Dummy {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A kernel object holding a parked driver, in the shape of `CqShared`:
    /// `Drop` destroys, then releases.
    struct Holder {
        log: Arc<Mutex<Vec<&'static str>>>,
        destroy_ok: bool,
        parked: Parking<Dummy>,
    }
    impl Drop for Holder {
        fn drop(&mut self) {
            self.log.lock().unwrap().push("kernel destroy");
            let d = self.parked.release(self.destroy_ok);
            drop(d);
            self.log.lock().unwrap().push("released");
        }
    }

    #[test]
    fn parked_driver_lives_until_the_kernel_destroy() {
        let drops = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let h = Arc::new(Holder { log: log.clone(), destroy_ok: true, parked: Parking::new() });
        let qp_ref = h.clone(); // a QP still holding the kernel object
        let mut ran_last = false;
        h.parked.park(Dummy(drops.clone()), |_| ran_last = true);
        assert!(ran_last);
        drop(h); // the user's handle goes
        assert_eq!(drops.load(Ordering::SeqCst), 0, "parked, not freed");
        assert!(qp_ref.parked.with(|d| d.is_some()));
        assert!(log.lock().unwrap().is_empty());
        drop(qp_ref); // the last QP goes: destroy, then free
        assert_eq!(*log.lock().unwrap(), ["kernel destroy", "released"]);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failed_destroy_leaks_the_parked_driver() {
        let drops = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let h = Holder { log, destroy_ok: false, parked: Parking::new() };
        h.parked.park(Dummy(drops.clone()), |_| {});
        drop(h);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "never freed under a device that may still write it");
    }

    #[test]
    fn nothing_parked_releases_nothing() {
        let mut p: Parking<Dummy> = Parking::new();
        assert!(p.with(|d| d.is_none()));
        assert!(p.release(true).is_none());
    }

    #[test]
    fn public_objects_stay_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<crate::Context>();
        send_sync::<CompletionQueue>();
        send_sync::<CqShared>();
        send_sync::<crate::QueuePair>();
        send_sync::<crate::SendQueue>();
        send_sync::<crate::RecvQueue>();
        send_sync::<crate::SharedReceiveQueue>();
        send_sync::<crate::AddressHandle>();
        send_sync::<crate::CompletionChannel>();
    }

    #[test]
    fn mlx5_drivers_fit_the_enums() {
        // The fast path matches on these in place; no boxing.
        assert!(size_of::<CqDriver>() >= size_of::<mlx5::Cq>());
        assert!(size_of::<CqDriver>() < 512, "{} bytes", size_of::<CqDriver>());
    }
}
