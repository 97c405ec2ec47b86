//! Async events (`ibv_get_async_event`) as a stream.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rverbs_providers::{Errno, Error};

use super::{EventSource, Readiness};
use crate::{AsyncEvent, Result};

/// The state machine of an event fd read by one consumer: what
/// [`AsyncEvents`] runs (generic so that the host tests can use a model).
pub(crate) struct EventsCore<S: EventSource, R> {
    pub(crate) source: S,
    readiness: R,
    /// Events read and not yet handed out: they survive dropped futures.
    buf: VecDeque<S::Event>,
}

impl<S: EventSource, R: Readiness> EventsCore<S, R> {
    pub(crate) fn new(source: S, readiness: R) -> Self {
        EventsCore { source, readiness, buf: VecDeque::new() }
    }

    /// The next event: a buffered one, else read every event queued on
    /// the fd (until `EAGAIN`) once the reactor says it is readable.
    pub(crate) fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Result<S::Event>> {
        loop {
            if let Some(e) = self.buf.pop_front() {
                return Poll::Ready(Ok(e));
            }
            let (source, buf) = (&self.source, &mut self.buf);
            let drain = || {
                // Events read before an error stay buffered.
                while let Some(e) = source.try_next()? {
                    buf.push_back(e);
                }
                Ok(())
            };
            match self.readiness.poll_drain(cx, drain) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
        }
    }
}

/// A context's async events (QP, CQ and SRQ errors, port state, SRQ
/// limit, device fatal), awaited: [`next`](Self::next) and (feature
/// `tokio`) a `futures_core::Stream` of `Result<AsyncEvent>`. The events
/// are those of [`Context::get_async_event`](crate::Context::get_async_event),
/// read without blocking ([`Context::try_get_async_event`](crate::Context::try_get_async_event))
/// once the reactor says the async fd is readable.
///
/// One per context: the async fd is registered with the reactor once,
/// when this is created, and each event goes to one reader. While it
/// exists, read the context's events only through it.
///
/// **Cancellation safety**: [`next`](Self::next)'s future and the stream
/// may be dropped at any point: events already read wait in this value,
/// and the next waiter gets each exactly once.
pub struct AsyncEvents<R> {
    core: EventsCore<crate::Context, R>,
}

impl<R> fmt::Debug for AsyncEvents<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncEvents")
            .field("device", &self.core.source.device().name())
            .field("buffered", &self.core.buf.len())
            .finish_non_exhaustive()
    }
}

impl<R: Readiness> AsyncEvents<R> {
    /// Reads `ctx`'s async events once `readiness`, a reactor's
    /// registration of [`ctx.async_fd()`](crate::Context::async_fd), says
    /// so (for tokio, `AsyncEvents::new` makes it).
    ///
    /// # Errors
    /// `EOPNOTSUPP` when the kernel gave the context no async fd.
    pub fn with_readiness(ctx: &crate::Context, readiness: R) -> Result<Self> {
        check_async_fd(ctx)?;
        tracing::debug!(device = ctx.device().name(), "async event fd registered for async waits");
        Ok(AsyncEvents { core: EventsCore::new(ctx.clone(), readiness) })
    }

    /// The context.
    pub fn context(&self) -> &crate::Context {
        &self.core.source
    }

    /// The next event. Cancellation safe.
    // An async `next` (the name), not an iterator's.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> NextEvent<'_, R> {
        NextEvent { events: self }
    }

    /// [`next`](Self::next), poll-style.
    pub fn poll_next_event(&mut self, cx: &mut Context<'_>) -> Poll<Result<AsyncEvent>> {
        self.core.poll_event(cx)
    }
}

/// `EOPNOTSUPP` unless `ctx` has an async fd.
pub(crate) fn check_async_fd(ctx: &crate::Context) -> Result<()> {
    match ctx.async_fd() {
        Some(_) => Ok(()),
        None => Err(Error::check("AsyncEvents", Errno::EOPNOTSUPP).with_message("this context has no async event fd")),
    }
}

/// The future of [`AsyncEvents::next`]. Holds no state: dropping it at
/// any point loses nothing.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct NextEvent<'a, R> {
    events: &'a mut AsyncEvents<R>,
}

impl<R: Readiness> Future for NextEvent<'_, R> {
    type Output = Result<AsyncEvent>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<AsyncEvent>> {
        self.get_mut().events.core.poll_event(cx)
    }
}

/// Async events, one by one; never ends. An `Err` item (the device went
/// away: `EIO`) does not end it either. Cancellation safe.
#[cfg(feature = "tokio")]
impl<R: Readiness + Unpin> futures_core::Stream for AsyncEvents<R> {
    type Item = Result<AsyncEvent>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<AsyncEvent>>> {
        self.get_mut().core.poll_event(cx).map(Some)
    }
}
