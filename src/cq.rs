//! Completion queues (`ibv_cq`): create, poll (one, a batch, a draining
//! iterator), arm, wait, resize, destroy.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rverbs_providers::provider::{CqCreate, CqDriver, KernelCq};
use rverbs_providers::{Errno, Error, Result};

use crate::context::counted_handle;
use crate::Wc;
use crate::{CompletionChannel, Context};

/// What a CQ is created with (`struct ibv_cq_init_attr_ex`'s basic part).
///
/// ```no_run
/// # let ctx = rverbs::devices()?[0].open()?;
/// let ch = ctx.create_comp_channel()?;
/// let cq = ctx.create_cq_with(&rverbs::CqInitAttr { cqe: 256, channel: Some(&ch), ..Default::default() })?;
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CqInitAttr<'a> {
    /// At least this many entries (1..=the device's `max_cqe`).
    pub cqe: u32,
    /// The completion channel that reports this CQ's events, if any (needed
    /// by [`CompletionQueue::wait`] and [`CompletionQueue::req_notify`]'s events).
    pub channel: Option<&'a CompletionChannel>,
    /// Completion vector (`0..num_comp_vectors`).
    pub comp_vector: u32,
}

/// What keeps a CQ's events meaningful (its context, its channel) and
/// its `user_handle`: kept in the kernel CQ's own allocation
/// (the provider's [`KernelCq`], whose [`user_value`](KernelCq::user_value) it is),
/// which the QPs using the CQ hold, so it outlives them.
#[derive(Debug)]
pub(crate) struct CqUser {
    ctx: Context,
    user_handle: u64,
    // Kept alive until the kernel CQ is gone: the kernel refcounts the
    // channel per CQ, and users expect to be able to drop theirs early.
    channel: Option<CompletionChannel>,
    /// [`CompletionQueue::ack_events`]' count: kept here, not in the
    /// handle, so that the handle stays small enough (128 bytes) for
    /// LLVM to move inline instead of calling `memcpy`.
    events_acked: AtomicU32,
}

impl Drop for CqUser {
    fn drop(&mut self) {
        // Dropped right after the kernel CQ's destroy, with the last
        // `KernelCq` clone (the CQ's, or the last QP's using it), or when
        // the create failed: its channel stops counting its events.
        if let Some(ch) = &self.channel {
            ch.untrack(self.user_handle);
        }
    }
}

/// A completion queue. Work requests of QPs attached to it report their
/// completions here.
///
/// Sizing: the CQ must hold every completion not yet polled. A send or
/// receive slot is free again as soon as the device has written the
/// request's completion (on rxe: the kernel), not when it is polled, so
/// the queues' sizes do not bound what waits here: a poster that outruns
/// its poller overruns the CQ. The device then drops the completions that
/// do not fit (those requests never complete) and raises
/// [`AsyncEventType::CqErr`](crate::AsyncEventType::CqErr). Keep the
/// requests posted and not yet polled within [`cqe`](Self::cqe) (as
/// rdma-core's ping-pongs and perftest do with their depths).
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
/// let mut cq = ctx.create_cq(256)?;
/// assert!(cq.cqe() >= 256);
/// while let Some(wc) = cq.poll_one() {
///     println!("wr {} {}", wc.wr_id, wc.status);
/// }
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct CompletionQueue {
    /// Dropped first (the fields' order): rxe's ring is unmapped before
    /// the kernel CQ goes; mlx5's parks itself with the kernel CQ until
    /// its destroy (`CqDriver`'s `Drop`).
    pub(crate) driver: CqDriver,
    /// The kernel CQ with the rverbs part ([`CqUser`]) in its allocation,
    /// typed (its fields at fixed offsets: `req_notify` reads them).
    pub(crate) kernel: KernelCq<CqUser>,
}

/// A CQ depth must be 1..=the device's `max_cqe` (create and resize alike).
fn check_depth(ctx: &Context, verb: &'static str, cqe: u32) -> Result<()> {
    let max = ctx.device_attr()?.max_cqe;
    depth_within(verb, cqe, max)
}

fn depth_within(verb: &'static str, cqe: u32, max: u32) -> Result<()> {
    if cqe == 0 || cqe > max {
        return Err(Error::check(verb, Errno::EINVAL)
            .with_message(format!("CQ depth {cqe} is outside 1..={max} (the device's max_cqe)")));
    }
    Ok(())
}

/// [`check_depth`] for a create, with no `QUERY_DEVICE` of its own: when
/// the device's limits are not known yet (the context's first create), the
/// kernel (or the provider) checks the depth, and a refusal is answered by
/// [`refused_depth`], with the same error as here.
#[inline]
fn check_depth_known(ctx: &Context, verb: &'static str, cqe: u32) -> Result<()> {
    match ctx.device_attr_known() {
        Some(a) => depth_within(verb, cqe, a.max_cqe),
        None if cqe == 0 => check_depth(ctx, verb, cqe),
        None => Ok(()),
    }
}

/// A create refused with `EINVAL`: the depth check's error if the depth is
/// what is wrong (now asking the device), else `e`.
fn refused_depth(ctx: &Context, verb: &'static str, cqe: u32, e: Error) -> Error {
    if e.errno() != Some(Errno::EINVAL) {
        return e;
    }
    match check_depth(ctx, verb, cqe) {
        Err(c) if c.errno() == Some(Errno::EINVAL) => c,
        _ => e,
    }
}

impl Context {
    /// Creates a CQ with at least `cqe` entries, no completion channel, on
    /// completion vector 0 (`UVERBS_METHOD_CQ_CREATE`, `ibv_create_cq`).
    /// [`create_cq_with`](Self::create_cq_with) takes a channel and a vector.
    ///
    /// # Errors
    /// `cqe` of 0 or above the device's `max_cqe`.
    #[doc(alias = "ibv_create_cq")]
    #[inline]
    pub fn create_cq(&self, cqe: u32) -> Result<CompletionQueue> {
        self.create_cq_with(&CqInitAttr { cqe, ..Default::default() })
    }

    /// Creates a CQ as `attr` says (`UVERBS_METHOD_CQ_CREATE`, `ibv_create_cq`).
    ///
    /// # Errors
    /// A depth of 0 or above the device's `max_cqe`, a channel of another
    /// context, a vector the device does not have.
    #[doc(alias = "ibv_create_cq")]
    #[doc(alias = "ibv_create_cq_ex")]
    #[inline]
    pub fn create_cq_with(&self, attr: &CqInitAttr<'_>) -> Result<CompletionQueue> {
        self.create_cq_as(attr, counted_handle())
    }

    /// [`create_cq_with`](Self::create_cq_with), the CQ's events carrying
    /// `user_handle` (registered nowhere: see [`counted_handle`]).
    pub(crate) fn create_cq_as(&self, attr: &CqInitAttr<'_>, user_handle: u64) -> Result<CompletionQueue> {
        const VERB: &str = "ibv_create_cq";
        let (cqe, comp_vector) = (attr.cqe, attr.comp_vector);
        let _span = verb_span!("ibv_create_cq", cqe, comp_vector);
        let provider = self.provider_ctx(VERB, "completion queues")?;
        check_depth_known(self, VERB, cqe)?;
        if comp_vector >= self.num_comp_vectors().max(1) {
            return Err(Error::check(VERB, Errno::EINVAL).with_message(format!(
                "completion vector {comp_vector} does not exist (the device has {})",
                self.num_comp_vectors()
            )));
        }
        if let Some(ch) = attr.channel {
            if !ch.context().same_as(self) {
                return Err(Error::check(VERB, Errno::EINVAL)
                    .with_message("the completion channel belongs to another device context"));
            }
        }
        let args = CqCreate { cqe, user_handle, channel: attr.channel.map(std::os::fd::AsFd::as_fd), comp_vector };
        let user =
            CqUser { ctx: self.clone(), user_handle, channel: attr.channel.cloned(), events_acked: AtomicU32::new(0) };
        // Built where it is returned (no move of the 128-byte CQ on the way).
        let made = provider
            .create_cq_into(self.fd_arc(), &args, user, |kernel, driver| CompletionQueue { driver, kernel })
            .map_err(|e| refused_depth(self, VERB, cqe, e));
        if let (Ok(q), Some(ch)) = (&made, attr.channel) {
            if let Some(counter) = q.kernel.event_counter() {
                ch.track(user_handle, counter.clone());
            }
        }
        made
    }
}

impl CompletionQueue {
    /// The rverbs part kept with the kernel CQ.
    #[inline]
    fn user(&self) -> &CqUser {
        self.kernel.user_value()
    }
    /// The context it belongs to.
    pub fn context(&self) -> &Context {
        &self.user().ctx
    }
    /// The kernel handle.
    #[inline]
    pub fn handle(&self) -> u32 {
        self.kernel.handle()
    }
    /// The value completion and async events carry for this CQ.
    #[inline]
    pub fn user_handle(&self) -> u64 {
        self.user().user_handle
    }
    /// Number of entries the CQ holds.
    #[inline]
    pub fn cqe(&self) -> u32 {
        self.kernel.cqe()
    }
    /// The completion channel it reports to.
    pub fn channel(&self) -> Option<&CompletionChannel> {
        self.user().channel.as_ref()
    }

    /// Moves up to `out.len()` completions into `out` and returns how many
    /// (`ibv_poll_cq`). No syscall, no allocation, and no lock (mlx5 takes
    /// its QP registry's read lock when a CQE names a QP other than the one
    /// it resolved last): a copy out of the ring (rxe: shared with the
    /// kernel; mlx5: written by the HCA).
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.driver.poll(out)
    }

    /// [`poll`](Self::poll) into memory that need not be initialised (a
    /// caller-owned array of `MaybeUninit<Wc>`):
    /// returns the completions written, the first entries of `out`; the
    /// rest of `out` is left as it was. rxe decodes straight into `out`
    /// (no zeroing, no copy); mlx5 initialises `out` first.
    ///
    /// ```no_run
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let mut cq = ctx.create_cq(16)?;
    /// let mut buf = [std::mem::MaybeUninit::<rverbs::Wc>::uninit(); 16];
    /// for wc in cq.poll_uninit(&mut buf) {
    ///     println!("{} {:?}", wc.wr_id, wc.status);
    /// }
    /// # Ok::<(), rverbs::Error>(())
    /// ```
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_uninit<'a>(&mut self, out: &'a mut [std::mem::MaybeUninit<Wc>]) -> &'a mut [Wc] {
        self.driver.poll_uninit(out)
    }

    /// True when no completion is ready: a [`poll`](Self::poll) now would
    /// return 0. A few loads, nothing consumed, nothing called (rxe: the
    /// kernel's producer index against ours; mlx5: the owner bit of the next
    /// entry). For busy loops whose empty polls should cost next to nothing;
    /// a `false` is followed by a `poll` that finds at least one.
    ///
    /// ```no_run
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let mut cq = ctx.create_cq(16)?;
    /// let mut wcs = [rverbs::Wc::default(); 4];
    /// while cq.is_empty() {
    ///     std::hint::spin_loop(); // each empty turn: a few loads
    /// }
    /// let n = cq.poll(&mut wcs);
    /// assert!(n >= 1);
    /// # Ok::<(), rverbs::Error>(())
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.driver.is_empty()
    }

    /// The next completion, if there is one (`ibv_poll_cq` with room for
    /// one). No syscall, no allocation; on mlx5 the provider's one-entry
    /// path, which has no slice to test (fewer instructions than
    /// [`poll`](Self::poll) with a one-entry slice).
    ///
    /// ```no_run
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let mut cq = ctx.create_cq(16)?;
    /// if let Some(wc) = cq.poll_one() {
    ///     println!("{} {:?}", wc.wr_id, wc.status);
    /// }
    /// # Ok::<(), rverbs::Error>(())
    /// ```
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_one(&mut self) -> Option<Wc> {
        let mut wc = Wc::default();
        self.driver.poll_one(&mut wc).then_some(wc)
    }

    /// An iterator over the completions in the CQ, one poll per `next`,
    /// ending at the first empty poll. Nothing is buffered, so dropping it
    /// early loses nothing.
    ///
    /// ```no_run
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let mut cq = ctx.create_cq(16)?;
    /// for wc in cq.drain() {
    ///     wc.ok()?; // an Err names the status, the opcode and the wr_id
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain(&mut self) -> Drain<'_> {
        Drain { cq: self }
    }

    /// Arms the CQ: the next completion (or the next solicited one) raises
    /// one event on the channel (`ibv_req_notify_cq`). rxe:
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`, a syscall. mlx5: no syscall, the
    /// arm word into the doorbell record and a store to the UAR arm
    /// register, carrying a sequence number that counts the events read
    /// from the channel for this CQ (rdma-core advances it in
    /// `ibv_get_cq_event`): read events through [`CompletionChannel`]'s
    /// methods (or let [`wait`](Self::wait) do it), never by `read(2)` on
    /// its fd, and read the event before re-arming, as usual.
    ///
    /// The sequence that loses no wakeup is arm → poll again → sleep:
    /// completions that arrived before the arm raise no event.
    /// [`wait`](Self::wait) does exactly that.
    #[doc(alias = "ibv_req_notify_cq")]
    #[inline]
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<()> {
        self.driver.req_notify(&self.kernel, solicited_only)
    }

    /// Waits until `out` is **full** of completions or `timeout` passes
    /// (`None`: no limit), sleeping on the CQ's completion channel in
    /// between; returns how many completions it wrote (fewer than
    /// `out.len()` only on timeout). It polls, arms ([`req_notify`](Self::req_notify)),
    /// polls again (a completion that came before the arm raises no event),
    /// and only then sleeps on the channel; every event it reads is counted
    /// and acknowledged. An event it reads for another CQ of the same
    /// channel is counted for that CQ (so its arms keep working) but wakes
    /// nobody else: give a shared channel one waiting thread. For "at least
    /// one", see [`wait_any`](Self::wait_any).
    ///
    /// # Errors
    /// The CQ has no channel (create it with [`CqInitAttr::channel`]); the
    /// arm or the channel read failed.
    pub fn wait(&mut self, out: &mut [Wc], timeout: Option<Duration>) -> Result<usize> {
        self.wait_for(out, timeout, out.len(), "CompletionQueue::wait")
    }

    /// At least one completion into `out`, as many as are there up to
    /// `out.len()`, or none once `timeout` passes (`None`: no limit);
    /// returns how many. The blocking counterpart of the async
    /// `AsyncCq::wait_any`. With a completion channel it sleeps on the
    /// channel between polls as [`wait`](Self::wait) does; without one it
    /// polls (spins) until a completion comes or the time is up.
    ///
    /// ```no_run
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let mut cq = ctx.create_cq(16)?;
    /// let mut wc = [rverbs::Wc::default(); 16];
    /// let n = cq.wait_any(&mut wc, Some(std::time::Duration::from_secs(5)))?;
    /// for w in &wc[..n] {
    ///     w.ok()?; // an error status becomes an rverbs::Error
    /// }
    /// # Ok::<(), rverbs::Error>(())
    /// ```
    ///
    /// # Errors
    /// The arm or the channel read failed.
    pub fn wait_any(&mut self, out: &mut [Wc], timeout: Option<Duration>) -> Result<usize> {
        let want = out.len().min(1);
        if self.channel().is_some() {
            return self.wait_for(out, timeout, want, "CompletionQueue::wait_any");
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let n = self.poll(out);
            if n >= want {
                return Ok(n);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(0);
            }
            std::hint::spin_loop();
        }
    }

    /// Polls until `want` completions are in `out` or the deadline passes,
    /// sleeping on the channel in between (see [`wait`](Self::wait)).
    fn wait_for(
        &mut self,
        out: &mut [Wc],
        timeout: Option<Duration>,
        want: usize,
        verb: &'static str,
    ) -> Result<usize> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut n = self.poll(out);
        if n >= want {
            return Ok(n);
        }
        let channel = self.channel().cloned().ok_or_else(|| {
            Error::check(verb, Errno::EINVAL).with_message(
                "waiting needs a completion channel: create the CQ with CqInitAttr::channel (or poll instead)",
            )
        })?;
        loop {
            self.req_notify(false)?;
            let got = self.poll(&mut out[n..]);
            n += got;
            if n >= want {
                return Ok(n);
            }
            if got > 0 {
                continue;
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) => Some(left),
                    None => return Ok(n),
                },
                None => None,
            };
            match channel.wait_event(left)? {
                Some(ev) if ev.cq_user_handle == self.user_handle() => self.ack_events(1),
                Some(_) | None => {}
            }
            n += self.poll(&mut out[n..]);
            if n >= want {
                return Ok(n);
            }
        }
    }

    /// Acknowledges `n` completion events (`ibv_ack_cq_events`). Batching
    /// acknowledgements is fine; see the type's docs for why destroy never
    /// waits. (mlx5's arm sequence number follows the events *read* from
    /// the channel, as in rdma-core, not the acknowledgements: see
    /// [`req_notify`](Self::req_notify).)
    #[doc(alias = "ibv_ack_cq_events")]
    pub fn ack_events(&self, n: u32) {
        self.user().events_acked.fetch_add(n, Ordering::Relaxed);
    }

    /// Events acknowledged so far.
    pub fn events_acked(&self) -> u32 {
        self.user().events_acked.load(Ordering::Relaxed)
    }

    /// Resizes the CQ to at least `cqe` entries (`IB_USER_VERBS_CMD_RESIZE_CQ`,
    /// `ibv_resize_cq`). Completions not yet polled are kept by the kernel.
    ///
    /// # Errors
    /// A depth of 0 or above `max_cqe`; `EOPNOTSUPP` on mlx5 (the provider
    /// has no resize: it would need a second user buffer and copying the
    /// unpolled entries over); if the kernel resized but the new ring could
    /// not be mapped (rxe), the CQ can no longer be polled and must be
    /// recreated (the error says so).
    #[doc(alias = "ibv_resize_cq")]
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        check_depth(self.context(), "ibv_resize_cq", cqe)?;
        self.driver.resize(&self.kernel, cqe).map(drop)
    }

    /// Destroys the CQ now, reporting the kernel's answer (`UVERBS_METHOD_CQ_DESTROY`).
    ///
    /// # Errors
    /// `EBUSY` while QPs still use it (it is then destroyed after the last of them).
    #[doc(alias = "ibv_destroy_cq")]
    pub fn destroy(mut self) -> Result<()> {
        // In place (no move of the CQ out of `self`): the driver is taken
        // (rxe: dropped; mlx5: parked), and what is left of it drops as nothing.
        self.kernel.park(&mut self.driver);
        // Only QPs clone the kernel CQ, and they need `&self` to be
        // created: `EBUSY` while one holds it.
        self.kernel.destroy()
        // Dropping `self` then drops the kernel CQ's allocation (a parked
        // mlx5 buffer, then the rverbs part) after the kernel destroy.
    }
}

/// The iterator of [`CompletionQueue::drain`].
#[derive(Debug)]
pub struct Drain<'a> {
    cq: &'a mut CompletionQueue,
}

impl Iterator for Drain<'_> {
    type Item = Wc;

    #[inline]
    fn next(&mut self) -> Option<Wc> {
        self.cq.poll_one()
    }
}

#[cfg(test)]
mod tests {
    /// LLVM moves values of up to 128 bytes with inline loads and stores
    /// and calls `memcpy` for larger ones; a CQ is moved a few times on its
    /// way out of `create_cq` (and into a user's `Vec`).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_cq_moves_inline() {
        assert!(size_of::<super::CompletionQueue>() <= 128, "{} bytes", size_of::<super::CompletionQueue>());
    }

    #[test]
    fn public_objects_stay_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<crate::Context>();
        send_sync::<crate::CompletionQueue>();
        send_sync::<super::CqUser>();
        send_sync::<crate::QueuePair>();
        send_sync::<crate::QpControl>();
        send_sync::<crate::SendQueue>();
        send_sync::<crate::RecvQueue>();
        send_sync::<crate::SharedReceiveQueue>();
        send_sync::<crate::AddressHandle>();
        send_sync::<crate::CompletionChannel>();
        send_sync::<crate::MemoryRegion>();
    }
}
