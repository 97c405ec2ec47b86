//! Completions and async events as futures, for any reactor that can wait
//! for an fd to become readable (docs/ASYNC.md).
//!
//! The core here needs no runtime: it is the readiness state machine of a
//! completion channel (arm → poll again → wait for the fd → read the
//! channel's events → acknowledge → poll) and of the async-event fd, over
//! a [`Readiness`] that a reactor implements for one fd. Feature `tokio`
//! brings `TokioReadiness` (one `AsyncFd` registration per fd, made
//! once) with constructors `AsyncChannel::new`, `AsyncCq::new` and
//! `AsyncEvents::new`, and `futures_core::Stream` for [`AsyncCq`] and
//! [`AsyncEvents`].
//!
//! - [`AsyncChannel`]: one completion channel and its reactor
//!   registration. Several CQs may share the channel: each
//!   [`attach`](AsyncChannel::attach)es to the same `AsyncChannel`, and a
//!   per-channel demultiplexer hands each event read from the channel to
//!   the waiter of the CQ it names.
//! - [`AsyncCq`]: a CQ waited on through its channel: [`next`](AsyncCq::next),
//!   [`wait`](AsyncCq::wait) (exactly `out.len()` completions),
//!   [`wait_any`](AsyncCq::wait_any) (at least one), a `Stream` of
//!   completions.
//! - [`AsyncEvents`]: the context's async events ([`crate::Context::get_async_event`]'s
//!   async form).
//! - [`AsyncCmEvents`]: a CM event channel's events; with feature `tokio`,
//!   `AsyncCmId::resolve(addr).await` → `connect_qp(qp, &param).await`,
//!   `AsyncListener::accept().await` → `AsyncConnectRequest::accept`
//!   ([`crate::cm`]'s calls, awaited), their ids on an `AsyncCmChannel`:
//!   one channel and one reactor registration for a listener and every
//!   connection it accepts (or for many clients), one task reading it and
//!   routing each event to its id's `AsyncIdEvents`.
//!
//! **Cancellation**: the futures hold no state of their own. Completions
//! taken from the CQ and events read from a channel are kept in the
//! [`AsyncCq`]/[`AsyncChannel`]/[`AsyncEvents`], so dropping a future at
//! any point (a `select!` that took another branch, a timeout) loses
//! nothing, and the next waiter carries on from the CQ's arm state.
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn f() -> rverbs::Result<()> {
//! use rverbs::asynch::AsyncCq;
//! let ctx = rverbs::devices()?[0].open()?;
//! let ch = ctx.create_comp_channel()?;
//! let cq = ctx.create_cq_with(&rverbs::CqInitAttr { cqe: 64, channel: Some(&ch), ..Default::default() })?;
//! let mut cq = AsyncCq::new(cq)?; // registers the channel with tokio's reactor
//! // ... post work requests on QPs of this CQ (`cq.cq()` to create them) ...
//! let wc = cq.next().await?;       // sleeps on the channel, never spins
//! println!("wr {} {}", wc.wr_id, wc.status);
//! # Ok(()) }
//! ```

use std::task::{Context, Poll};

use crate::Result;

mod cm;
mod cq;
mod demux;
mod events;
#[cfg(feature = "tokio")]
mod on_tokio;
mod router;
#[cfg(test)]
mod router_tests;
#[cfg(test)]
mod tests;

#[cfg(feature = "tokio")]
pub use cm::{
    AsyncCmChannel, AsyncCmId, AsyncConnectRequest, AsyncConnection, AsyncIdEvents, AsyncListener, NextIdEvent,
};
pub use cm::{AsyncCmEvents, NextCmEvent};
pub use cq::{AsyncChannel, AsyncCq, Next, Wait, WaitAny};
pub use events::{AsyncEvents, NextEvent};
#[cfg(feature = "tokio")]
pub use on_tokio::TokioReadiness;

/// A reactor's registration of one fd (a completion channel's, or the
/// context's async-event fd), made once when the [`AsyncChannel`] or
/// [`AsyncEvents`] is created. rverbs reads the fd (through
/// [`CompletionChannel::try_get_cq_event`](crate::CompletionChannel::try_get_cq_event)
/// and [`Context::try_get_async_event`](crate::Context::try_get_async_event),
/// never `read(2)` on it); the reactor only says when to try.
///
/// Implementations exist for edge-triggered reactors (tokio's `AsyncFd`:
/// `TokioReadiness`) and fit level-triggered ones as well. For
/// async-io/smol, `poll_drain` is `ready!(async_fd.poll_readable(cx))?`
/// followed by `Poll::Ready(drain())`.
pub trait Readiness {
    /// Waits for the fd, poll-style. While the reactor has not seen the fd
    /// readable since its readiness was last cleared: registers `cx`'s
    /// waker to be woken once it does, and returns `Pending`. Otherwise:
    /// runs `drain` (which reads the fd until it is empty), and if `drain`
    /// succeeded clears the readiness that it saw *before* running `drain`
    /// (so that an edge that came while `drain` ran is kept), and returns
    /// `drain`'s result.
    ///
    /// A reactor that keeps one waker per fd (tokio) may keep only the
    /// last one: rverbs always passes the same waker for a given fd.
    fn poll_drain<T>(&self, cx: &mut Context<'_>, drain: impl FnOnce() -> Result<T>) -> Poll<Result<T>>;
}

/// What the state machines need of a CQ (a trait so that the host tests
/// can drive them with a model of the hardware).
pub(crate) trait CqOps {
    /// `ibv_poll_cq`.
    fn poll(&mut self, out: &mut [crate::Wc]) -> usize;
    /// `ibv_req_notify_cq` for the next completion.
    fn arm(&mut self) -> Result<()>;
    /// `ibv_ack_cq_events`.
    fn ack(&self, n: u32);
    /// The `user_handle` its events carry.
    fn handle(&self) -> u64;
}

impl CqOps for crate::CompletionQueue {
    #[inline]
    fn poll(&mut self, out: &mut [crate::Wc]) -> usize {
        crate::CompletionQueue::poll(self, out)
    }
    fn arm(&mut self) -> Result<()> {
        self.req_notify(false)
    }
    fn ack(&self, n: u32) {
        self.ack_events(n);
    }
    fn handle(&self) -> u64 {
        self.user_handle()
    }
}

/// A non-blocking source of events on an fd (a completion channel, the
/// async-event fd; a socket in the host tests).
pub(crate) trait EventSource {
    type Event;
    /// The next event, or `None` when the fd is empty.
    fn try_next(&self) -> Result<Option<Self::Event>>;
}

impl EventSource for crate::CompletionChannel {
    /// The CQ's `user_handle`.
    type Event = u64;
    fn try_next(&self) -> Result<Option<u64>> {
        // Through rverbs, never read(2): this counts the event for the CQ
        // (mlx5's next arm carries the count).
        Ok(self.try_get_cq_event()?.map(|e| e.cq_user_handle))
    }
}

impl EventSource for crate::Context {
    type Event = crate::AsyncEvent;
    fn try_next(&self) -> Result<Option<crate::AsyncEvent>> {
        self.try_get_async_event()
    }
}
