//! Completion channels (`ibv_comp_channel`): an fd that becomes readable
//! when an armed CQ gets a completion.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rverbs_providers::cmd::cq as cmd;
use rverbs_providers::sys::event::{
    make_nonblocking, read_comp_event, read_comp_event_once, set_blocking, wait_comp_event,
};
use rverbs_providers::{Errno, Error, Result};

use crate::Context;

/// A completion channel. Several CQs may share one; each event names the CQ
/// by its [`user_handle`](crate::CompletionQueue::user_handle). Cheap to
/// clone; CQs created on it keep it alive.
///
/// The fd is non-blocking (unless [`set_blocking`](CompletionChannel::set_blocking)
/// makes it blocking, as libibverbs creates it) and can go into `poll`/`epoll` through [`AsFd`]
/// **for readiness only**: read events with [`try_get_cq_event`](Self::try_get_cq_event)
/// (or the other `get_cq_event*` methods), never with `read(2)` on the fd.
/// Reading an event also counts it for its CQ, and mlx5's next arm must
/// carry that count (rdma-core does the same in `ibv_get_cq_event`): an
/// event read behind rverbs' back leaves the CQ's arms ignored by the HCA.
///
/// Events are not lost between an arm and a sleep only if the CQ is polled
/// again after the arm: arm → poll → sleep → read the event → poll.
/// [`CompletionQueue::wait`](crate::CompletionQueue::wait) does that loop:
///
/// ```no_run
/// let ctx = rverbs::devices()?[0].open()?;
/// let ch = ctx.create_comp_channel()?;
/// let mut cq = ctx.create_cq_with(&rverbs::CqInitAttr { cqe: 16, channel: Some(&ch), ..Default::default() })?;
/// let mut wc = [rverbs::Wc::default(); 4];
/// let n = cq.wait(&mut wc, Some(std::time::Duration::from_secs(5)))?; // sleeps on the channel
/// // By hand, the same thing:
/// cq.req_notify(false)?;                // 1. arm
/// if cq.poll(&mut wc) == 0 {            // 2. poll again: earlier completions raised no event
///     let ev = ch.get_cq_event()?;      // 3. sleep until the event
///     assert_eq!(ev.cq_user_handle, cq.user_handle());
///     cq.ack_events(1);
///     cq.poll(&mut wc);                 // 4. and poll
/// }
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CompletionChannel {
    inner: Arc<ChannelInner>,
}

#[derive(Debug)]
struct ChannelInner {
    ctx: Context,
    fd: OwnedFd,
    /// Set by [`CompletionChannel::set_blocking`]: the fd is blocking.
    blocking: AtomicBool,
    /// The event counts of the CQs whose provider needs them.
    counts: EventCounts,
}

/// One completion event: the CQ it is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqEvent {
    /// The CQ's `user_handle`.
    pub cq_user_handle: u64,
}

impl Context {
    /// Creates a completion channel (`IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`
    /// through `INVOKE_WRITE`).
    #[doc(alias = "ibv_create_comp_channel")]
    pub fn create_comp_channel(&self) -> Result<CompletionChannel> {
        let fd = cmd::create_comp_channel(self.fd())?;
        make_nonblocking(fd.as_fd()).map_err(|e| Error::os("ibv_create_comp_channel", e))?;
        tracing::debug!("completion channel created");
        let inner =
            ChannelInner { ctx: self.clone(), fd, blocking: AtomicBool::new(false), counts: EventCounts::default() };
        Ok(CompletionChannel { inner: Arc::new(inner) })
    }
}

impl CompletionChannel {
    /// The context it belongs to.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Blocks until a completion event arrives (`ibv_get_cq_event`). On
    /// mlx5 reading an event also advances the CQ's arm sequence number
    /// (used by its next [`req_notify`](crate::CompletionQueue::req_notify)).
    ///
    /// On a non-blocking channel (the default) a wait is a `ppoll()` and a
    /// `read()`; on a blocking one ([`set_blocking`](Self::set_blocking)),
    /// a `read()` that sleeps, as libibverbs' call. A signal that
    /// interrupts the wait does not end it.
    #[doc(alias = "ibv_get_cq_event")]
    pub fn get_cq_event(&self) -> Result<CqEvent> {
        loop {
            let got = if self.inner.blocking.load(Ordering::Relaxed) {
                match self.read_cq_event() {
                    Err(e) if e.errno() == Some(Errno::EINTR) => None,
                    other => other?,
                }
            } else {
                self.wait_event(None)?
            };
            if let Some(e) = got {
                return Ok(e);
            }
        }
    }

    /// Makes the channel's fd blocking (`true`: what libibverbs creates) or
    /// non-blocking (`false`: what rverbs creates), with `fcntl(F_SETFL)`.
    /// On a blocking channel [`read_cq_event`](Self::read_cq_event) waits
    /// for an event in one syscall; keep it non-blocking for
    /// [`try_get_cq_event`](Self::try_get_cq_event), for the timeouts of
    /// the other waits (their `read()` after a `ppoll()` would sleep if
    /// another reader took the event) and for [`crate::asynch`].
    pub fn set_blocking(&self, blocking: bool) -> Result<()> {
        set_blocking(self.inner.fd.as_fd(), blocking)
            .map_err(|e| Error::os("fcntl(F_SETFL) on a completion channel", e))?;
        self.inner.blocking.store(blocking, Ordering::Relaxed);
        tracing::debug!(blocking, "completion channel mode set");
        Ok(())
    }

    /// One `read()` of the channel, all that `ibv_get_cq_event` does: on a
    /// blocking channel ([`set_blocking`](Self::set_blocking)) it sleeps in
    /// the kernel until an event is queued, so a wait costs one syscall
    /// (the timed waits take a `ppoll()` and a `read()`). `None` when the
    /// channel is non-blocking and no event is queued; an error with errno
    /// `EINTR` when a signal interrupted the sleep, as `ibv_get_cq_event`
    /// reports it (a handler installed without `SA_RESTART`, a periodic
    /// alarm, is how a caller bounds such waits at no cost per wait).
    ///
    /// ```no_run
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// let ch = ctx.create_comp_channel()?;
    /// ch.set_blocking(true)?;
    /// let mut cq = ctx.create_cq_with(&rverbs::CqInitAttr { cqe: 16, channel: Some(&ch), ..Default::default() })?;
    /// cq.req_notify(false)?;
    /// // ... post work ...
    /// if let Some(ev) = ch.read_cq_event()? {
    ///     assert_eq!(ev.cq_user_handle, cq.user_handle());
    ///     cq.ack_events(1);
    /// }
    /// # Ok::<(), rverbs::Error>(())
    /// ```
    #[doc(alias = "ibv_get_cq_event")]
    #[inline]
    pub fn read_cq_event(&self) -> Result<Option<CqEvent>> {
        let inner = &*self.inner;
        match read_comp_event_once(inner.fd.as_fd()) {
            Ok(Some(cq_user_handle)) => {
                inner.counts.count(cq_user_handle);
                Ok(Some(CqEvent { cq_user_handle }))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(read_error(e)),
        }
    }

    /// Returns the next event if one is queued, without blocking.
    pub fn try_get_cq_event(&self) -> Result<Option<CqEvent>> {
        self.read_one()
    }

    /// Waits up to `timeout_ms` milliseconds (`-1`: forever) for an event.
    pub fn get_cq_event_timeout(&self, timeout_ms: i32) -> Result<Option<CqEvent>> {
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        self.wait_event(timeout)
    }

    /// Waits up to `timeout` (`None`: forever) for an event. The timeout is
    /// a deadline: losing a race for an event to another reader does not
    /// start it over.
    ///
    /// Syscalls: `ppoll()` until the fd is readable, and a `read()`: two,
    /// whether the event was already queued or not (most waits of a
    /// ping-pong are not: starting with a `read()` cost more than it
    /// saved, `sys::event::wait_comp_event`). No clock is read: the kernel
    /// counts down the time left.
    ///
    /// Inlined are the two syscalls of a wait that gets its event; a
    /// timeout, a retry or a failure goes on out of line.
    #[inline]
    pub fn wait_event(&self, timeout: Option<Duration>) -> Result<Option<CqEvent>> {
        let inner = &*self.inner;
        match wait_comp_event(inner.fd.as_fd(), timeout) {
            Ok(Some(cq_user_handle)) => {
                inner.counts.count(cq_user_handle);
                Ok(Some(CqEvent { cq_user_handle }))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(read_error(e)),
        }
    }

    /// One `read()` of the fd: an event (counted for its CQ when its
    /// provider needs the count), or `None` when none is queued.
    fn read_one(&self) -> Result<Option<CqEvent>> {
        self.read_raw().map_err(read_error)
    }

    #[inline]
    fn read_raw(&self) -> std::result::Result<Option<CqEvent>, Errno> {
        let got = read_comp_event(self.inner.fd.as_fd())?;
        if let Some(cq_user_handle) = got {
            self.inner.counts.count(cq_user_handle);
            return Ok(Some(CqEvent { cq_user_handle }));
        }
        Ok(None)
    }

    /// Starts counting the events read for CQ `user_handle` (created on
    /// this channel, before it can be armed).
    pub(crate) fn track(&self, user_handle: u64, counter: Arc<AtomicU32>) {
        self.inner.counts.track(user_handle, counter);
    }

    /// Stops counting for CQ `user_handle` (destroyed). Out of line: the
    /// CQ's drop that calls it stays a leaf.
    #[inline(never)]
    pub(crate) fn untrack(&self, user_handle: u64) {
        self.inner.counts.untrack(user_handle);
    }
}

/// The completion events read for each CQ whose provider needs the count
/// (mlx5's arm sequence number follows the events read, as rdma-core's
/// `ibv_get_cq_event` counts them), by `user_handle`. A CQ reports to one
/// channel, so its counter lives with the channel, next to the reads.
/// rxe CQs are never in it (the kernel keeps their arm state): while no CQ
/// is, counting an event is one load, no lock.
#[derive(Debug, Default)]
struct EventCounts {
    /// How many counters `list` holds.
    len: AtomicUsize,
    list: RwLock<Vec<(u64, Arc<AtomicU32>)>>,
}

impl EventCounts {
    /// An event for `user_handle` was read.
    #[inline]
    fn count(&self, user_handle: u64) {
        if self.len.load(Ordering::Acquire) != 0 {
            self.count_slow(user_handle);
        }
    }

    /// mlx5: the CQ's next arm must carry the new event count (rdma-core's
    /// `mlx5_cq_event`, run by `ibv_get_cq_event`).
    #[cold]
    fn count_slow(&self, user_handle: u64) {
        if let Ok(v) = self.list.read() {
            if let Some((_, c)) = v.iter().find(|(h, _)| *h == user_handle) {
                c.fetch_add(1, Ordering::Release);
            }
        }
    }

    fn track(&self, user_handle: u64, counter: Arc<AtomicU32>) {
        if let Ok(mut v) = self.list.write() {
            v.push((user_handle, counter));
            self.len.store(v.len(), Ordering::Release);
        }
    }

    fn untrack(&self, user_handle: u64) {
        if let Ok(mut v) = self.list.write() {
            v.retain(|(h, _)| *h != user_handle);
            self.len.store(v.len(), Ordering::Release);
        }
    }
}

/// The verb named in errors of reading events.
const VERB: &str = "ibv_get_cq_event";

#[cold]
fn read_error(e: Errno) -> Error {
    match e {
        Errno::EIO => Error::check(VERB, Errno::EIO).with_message("short read from the completion channel"),
        e => Error::os(VERB, e),
    }
}

/// Milliseconds until `deadline` for `poll(2)`, rounded up so a wait never
/// ends early (`-1`: no deadline; 0 once it passed).
pub(crate) fn remaining_ms(deadline: Option<Instant>) -> i32 {
    match deadline {
        None => -1,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            let ms = left.as_micros().div_ceil(1000);
            i32::try_from(ms).unwrap_or(i32::MAX)
        }
    }
}

impl AsFd for CompletionChannel {
    /// The channel's fd, for readiness (`poll`, `epoll`, an async reactor).
    /// Read events through the channel's methods, not from the fd.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_tracked_cqs() {
        let c = EventCounts::default();
        c.count(7); // nothing tracked: nothing to do
        let (a, b) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        c.track(7, a.clone());
        c.track(8, b.clone());
        c.count(7);
        c.count(7);
        c.count(8);
        c.count(9); // an untracked CQ (rxe) of the same channel
        assert_eq!((a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)), (2, 1));
        c.untrack(7);
        c.count(7);
        c.count(8);
        assert_eq!((a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)), (2, 2));
        c.untrack(8);
        assert_eq!(c.len.load(Ordering::Relaxed), 0);
    }
}
