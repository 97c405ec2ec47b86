//! Completions as futures: a completion channel with its reactor
//! registration, and CQs waited on through it.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use rverbs_providers::{Errno, Error};

use super::demux::Demux;
use super::{CqOps, EventSource, Readiness};
use crate::{CompletionChannel, CompletionQueue, Result, Wc};

/// Completions polled from the CQ at once into the buffer.
const CHUNK: usize = 16;

/// A channel's event source, its reactor registration and its
/// demultiplexer (generic so that the host tests can use a model).
pub(crate) struct ChannelCore<S, R> {
    pub(crate) source: S,
    readiness: R,
    pub(crate) demux: Arc<Demux>,
    /// The one waker the reactor gets for this fd: the demultiplexer.
    fan: Waker,
}

impl<S: EventSource<Event = u64>, R: Readiness> ChannelCore<S, R> {
    pub(crate) fn new(source: S, readiness: R) -> Self {
        let demux = Arc::new(Demux::default());
        let fan = Waker::from(demux.clone());
        ChannelCore { source, readiness, demux, fan }
    }

    /// Reads every event queued on the channel (until `EAGAIN`, as an
    /// edge-triggered reactor needs) and hands each to its CQ.
    fn drain(&self) -> Result<usize> {
        let mut n = 0;
        while let Some(handle) = self.source.try_next()? {
            self.demux.route(handle);
            n += 1;
        }
        Ok(n)
    }

    /// Waits for the channel's fd with the demultiplexer as the waker;
    /// once it is readable, reads and routes its events.
    fn poll_events(&self) -> Poll<Result<usize>> {
        let mut cx = Context::from_waker(&self.fan);
        self.readiness.poll_drain(&mut cx, || self.drain())
    }
}

/// Detaches a CQ from its channel's demultiplexer when its waiter goes.
struct Attachment {
    demux: Arc<Demux>,
    handle: u64,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.demux.detach(self.handle);
    }
}

/// The state machine of one CQ on a channel: what [`AsyncCq`] runs.
pub(crate) struct CqCore<Q, S, R> {
    pub(crate) cq: Q,
    chan: Arc<ChannelCore<S, R>>,
    /// `req_notify` was called and its event not yet taken: the CQ must
    /// not be armed again before (mlx5 wants the event read first), and
    /// need not be (the event will come).
    armed: bool,
    /// Completions taken from the CQ and not yet handed out: they survive
    /// any future that is dropped.
    buf: VecDeque<Wc>,
    _attached: Attachment,
}

impl<Q: CqOps, S: EventSource<Event = u64>, R: Readiness> CqCore<Q, S, R> {
    pub(crate) fn new(cq: Q, chan: Arc<ChannelCore<S, R>>) -> Result<Self> {
        let handle = cq.handle();
        if !chan.demux.attach(handle) {
            return Err(Error::check("AsyncChannel::attach", Errno::EBUSY)
                .with_message("this CQ is already attached to the channel"));
        }
        let _attached = Attachment { demux: chan.demux.clone(), handle };
        Ok(CqCore { cq, chan, armed: false, buf: VecDeque::with_capacity(4 * CHUNK), _attached })
    }

    /// Until at least `want` completions are buffered: poll; take the
    /// events read for this CQ; arm (once per event) and poll again (a
    /// completion that came before the arm raises no event); then wait
    /// for the channel's fd and read its events. Returns `Pending` only
    /// with this CQ armed, polled empty after the arm, `cx`'s waker in
    /// the demultiplexer and the demultiplexer registered with the
    /// reactor: whatever completes next wakes this waiter.
    pub(crate) fn poll_fill(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<Result<()>> {
        let mut chunk = [Wc::default(); CHUNK];
        loop {
            while self.buf.len() < want {
                let n = self.cq.poll(&mut chunk);
                self.buf.extend(&chunk[..n]);
                if n < CHUNK {
                    break;
                }
            }
            if self.buf.len() >= want {
                return Poll::Ready(Ok(()));
            }
            let events = self.chan.demux.take(self.cq.handle(), cx.waker());
            if events > 0 {
                // The arm fired: acknowledge, and arm again (after polling).
                self.cq.ack(events);
                self.armed = false;
                continue;
            }
            if !self.armed {
                if let Err(e) = self.cq.arm() {
                    return Poll::Ready(Err(e));
                }
                self.armed = true;
                continue; // poll again
            }
            match self.chan.poll_events() {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(_)) => {}
            }
        }
    }

    pub(crate) fn poll_one(&mut self, cx: &mut Context<'_>) -> Poll<Result<Wc>> {
        match self.poll_fill(cx, 1) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(self.buf.pop_front().expect("poll_fill buffered one"))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// At least one completion into `out` (none for an empty `out`).
    pub(crate) fn poll_any(&mut self, cx: &mut Context<'_>, out: &mut [Wc]) -> Poll<Result<usize>> {
        if out.is_empty() {
            return Poll::Ready(Ok(0));
        }
        match self.poll_fill(cx, 1) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        let n = self.buf.len().min(out.len());
        for (o, wc) in out.iter_mut().zip(self.buf.drain(..n)) {
            *o = wc;
        }
        // Room left: the buffer is empty, so polling straight into `out`
        // keeps the order.
        Poll::Ready(Ok(n + self.cq.poll(&mut out[n..])))
    }

    /// Exactly `out.len()` completions into `out`, all in the last poll.
    pub(crate) fn poll_exact(&mut self, cx: &mut Context<'_>, out: &mut [Wc]) -> Poll<Result<()>> {
        match self.poll_fill(cx, out.len()) {
            Poll::Ready(Ok(())) => {
                let n = out.len();
                for (o, wc) in out.iter_mut().zip(self.buf.drain(..n)) {
                    *o = wc;
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }

    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn into_parts(self) -> (Q, Vec<Wc>) {
        (self.cq, self.buf.into())
    }
}

/// A completion channel registered with a reactor, and the demultiplexer
/// that hands its events to the CQs [`attach`](Self::attach)ed to it.
/// Cheap to clone (shared). Make one per channel: the registration is
/// made once, when it is created, and every CQ of the channel waits
/// through it (with tokio, a second registration of the same channel
/// fails with `EEXIST`).
///
/// While it exists, read the channel's events only through it (not with
/// [`CompletionQueue::wait`] or [`CompletionChannel::get_cq_event`]): an
/// event read elsewhere is not seen by its CQ's waiter. Events for CQs
/// of the channel that are not attached are read and dropped.
pub struct AsyncChannel<R> {
    core: Arc<ChannelCore<CompletionChannel, R>>,
}

impl<R> Clone for AsyncChannel<R> {
    fn clone(&self) -> Self {
        AsyncChannel { core: self.core.clone() }
    }
}

impl<R> fmt::Debug for AsyncChannel<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncChannel").field("channel", &self.core.source).finish_non_exhaustive()
    }
}

impl<R: Readiness> AsyncChannel<R> {
    /// Waits on `channel` through `readiness`, a reactor's registration of
    /// the channel's fd (for tokio, `AsyncChannel::new` makes it).
    pub fn with_readiness(channel: CompletionChannel, readiness: R) -> Self {
        tracing::debug!(fd = channel.as_fd().as_raw_fd(), "completion channel registered for async waits");
        AsyncChannel { core: Arc::new(ChannelCore::new(channel, readiness)) }
    }

    /// The channel.
    pub fn channel(&self) -> &CompletionChannel {
        &self.core.source
    }

    /// Makes `cq` wait through this channel. No syscall: the CQ is armed
    /// by its first wait.
    ///
    /// # Errors
    /// `cq` reports to another channel, or to none (create it with
    /// [`CqInitAttr::channel`](crate::CqInitAttr::channel) set to this
    /// channel).
    pub fn attach(&self, cq: CompletionQueue) -> Result<AsyncCq<R>> {
        let same = cq.channel().is_some_and(|c| c.as_fd().as_raw_fd() == self.core.source.as_fd().as_raw_fd());
        if !same {
            return Err(Error::check("AsyncChannel::attach", Errno::EINVAL).with_message(
                "the CQ reports to another completion channel, or to none: create it with \
                 CqInitAttr::channel set to this channel",
            ));
        }
        tracing::debug!(cq = cq.handle(), "CQ attached for async waits");
        Ok(AsyncCq { core: CqCore::new(cq, self.core.clone())?, chan: self.clone() })
    }
}

/// A CQ whose completions are awaited: [`next`](Self::next),
/// [`wait`](Self::wait), [`wait_any`](Self::wait_any), and (feature
/// `tokio`) a `futures_core::Stream` of `Result<Wc>`.
///
/// Each wait polls the CQ first, so completions that are there cost no
/// syscall. Only an empty CQ is armed (`req_notify`, once per event: never
/// again before the event of the last arm was read), polled again (a
/// completion that came before the arm raises no event) and then waited
/// for: the channel's fd through the reactor, its events read through
/// [`CompletionChannel::try_get_cq_event`] (which counts them for mlx5's
/// arm sequence number) and acknowledged ([`CompletionQueue::ack_events`]).
/// No wakeup is lost and nothing spins: a waiter sleeps only with the CQ
/// armed and polled empty since.
///
/// **Cancellation safety**: every future here and the stream may be
/// dropped at any point. Completions taken from the CQ wait in this
/// value's buffer, events read for it in its channel's demultiplexer, and
/// the arm state is this value's: the next waiter, on any task, gets
/// every completion exactly once.
///
/// One waiter at a time (`&mut self`); several CQs of one channel may be
/// waited on from different tasks and threads (each `AsyncCq` is `Send`
/// when `R` is `Send + Sync`). For many QPs on one CQ, one task waits and
/// hands completions out (by `qp_num` or `wr_id`).
pub struct AsyncCq<R> {
    core: CqCore<CompletionQueue, CompletionChannel, R>,
    chan: AsyncChannel<R>,
}

impl<R> fmt::Debug for AsyncCq<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncCq")
            .field("cq", &self.core.cq)
            .field("armed", &self.core.armed)
            .field("buffered", &self.core.buf.len())
            .finish_non_exhaustive()
    }
}

impl<R: Readiness> AsyncCq<R> {
    /// The CQ (to create QPs on it, read its attributes).
    pub fn cq(&self) -> &CompletionQueue {
        &self.core.cq
    }

    /// The CQ, to poll it directly. Completions already buffered here
    /// (see [`buffered`](Self::buffered)) are not in the CQ any more.
    pub fn cq_mut(&mut self) -> &mut CompletionQueue {
        &mut self.core.cq
    }

    /// The channel this CQ waits through (to attach more CQs to it).
    pub fn channel(&self) -> &AsyncChannel<R> {
        &self.chan
    }

    /// Completions taken from the CQ that no wait has handed out yet.
    pub fn buffered(&self) -> usize {
        self.core.buffered()
    }

    /// The CQ back, and the completions buffered here (oldest first):
    /// together, every completion not yet handed out. The CQ may still be
    /// armed; waiting on it synchronously afterwards is fine.
    pub fn into_inner(self) -> (CompletionQueue, Vec<Wc>) {
        self.core.into_parts()
    }

    /// The next completion. Cancellation safe.
    // An async `next` (the name), not an iterator's.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Next<'_, R> {
        Next { cq: self }
    }

    /// Fills `out` with exactly `out.len()` completions (`wait(n)` for
    /// `n = out.len()`). Cancellation safe: `out` is written only when all
    /// of them are there, in the poll that returns `Ready`; until then
    /// they wait in this value's buffer (which grows to `out.len()`).
    pub fn wait<'a>(&'a mut self, out: &'a mut [Wc]) -> Wait<'a, R> {
        Wait { cq: self, out }
    }

    /// At least one completion into `out`, as many as are there up to
    /// `out.len()`; returns how many. Cancellation safe.
    pub fn wait_any<'a>(&'a mut self, out: &'a mut [Wc]) -> WaitAny<'a, R> {
        WaitAny { cq: self, out }
    }

    /// [`next`](Self::next), poll-style.
    pub fn poll_next_completion(&mut self, cx: &mut Context<'_>) -> Poll<Result<Wc>> {
        self.core.poll_one(cx)
    }

    /// [`wait_any`](Self::wait_any), poll-style.
    pub fn poll_completions(&mut self, cx: &mut Context<'_>, out: &mut [Wc]) -> Poll<Result<usize>> {
        self.core.poll_any(cx, out)
    }
}

/// The future of [`AsyncCq::next`]: the next completion. Holds no state:
/// dropping it at any point loses nothing.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Next<'a, R> {
    cq: &'a mut AsyncCq<R>,
}

impl<R: Readiness> Future for Next<'_, R> {
    type Output = Result<Wc>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Wc>> {
        self.get_mut().cq.core.poll_one(cx)
    }
}

/// The future of [`AsyncCq::wait`]: `out` full. Holds no state: dropping
/// it at any point loses nothing (completions gathered so far stay
/// buffered in the [`AsyncCq`]; `out` is written only by the poll that
/// returns `Ready`).
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Wait<'a, R> {
    cq: &'a mut AsyncCq<R>,
    out: &'a mut [Wc],
}

impl<R: Readiness> Future for Wait<'_, R> {
    type Output = Result<()>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        this.cq.core.poll_exact(cx, this.out)
    }
}

/// The future of [`AsyncCq::wait_any`]: how many completions it wrote
/// into `out` (at least one). Holds no state: dropping it at any point
/// loses nothing.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct WaitAny<'a, R> {
    cq: &'a mut AsyncCq<R>,
    out: &'a mut [Wc],
}

impl<R: Readiness> Future for WaitAny<'_, R> {
    type Output = Result<usize>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<usize>> {
        let this = self.get_mut();
        this.cq.core.poll_any(cx, this.out)
    }
}

/// Completions, one by one; never ends. An `Err` item (a failed arm or
/// channel read) does not end it either: the next poll tries again.
/// Cancellation safe, like [`AsyncCq::next`].
#[cfg(feature = "tokio")]
impl<R: Readiness> futures_core::Stream for AsyncCq<R> {
    type Item = Result<Wc>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Wc>>> {
        self.get_mut().core.poll_one(cx).map(Some)
    }
}
