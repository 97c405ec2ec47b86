//! Feature `tokio`: the fds registered with tokio's reactor (`AsyncFd`,
//! tokio's `net` feature), once each.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::task::{Context, Poll};

use rverbs_providers::{Errno, Error};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::{AsyncChannel, AsyncCq, AsyncEvents, Readiness};
use crate::{CompletionChannel, CompletionQueue, Result};

/// An fd registered with tokio's reactor (an `AsyncFd`, edge-triggered),
/// for [`AsyncChannel`], [`AsyncCq`] and [`AsyncEvents`]. It keeps what
/// owns the fd (the channel, the context) alive while registered.
pub struct TokioReadiness {
    fd: AsyncFd<Owner>,
}

/// What owns the registered fd.
enum Owner {
    Channel(CompletionChannel),
    Events(crate::Context),
    Cm(crate::cm::EventChannel),
}

impl AsRawFd for Owner {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Owner::Channel(c) => c.as_fd().as_raw_fd(),
            // Checked at registration: the context has an async fd.
            Owner::Events(ctx) => ctx.async_fd().map_or(-1, |f| f.as_raw_fd()),
            Owner::Cm(ch) => ch.as_fd().as_raw_fd(),
        }
    }
}

impl fmt::Debug for TokioReadiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokioReadiness").field("fd", &self.fd.as_raw_fd()).finish()
    }
}

fn io_error(verb: &'static str, e: &io::Error) -> Error {
    match e.raw_os_error() {
        Some(errno) => Error::os(verb, Errno::from_raw(errno)),
        None => Error::check(verb, Errno::EIO),
    }
    .with_message(format!("tokio's reactor: {e}"))
}

impl TokioReadiness {
    /// Registers `owner`'s fd for readability with the current runtime.
    fn register(verb: &'static str, owner: Owner, again: &str) -> Result<Self> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::check(verb, Errno::EINVAL)
                .with_message("must be called from within a tokio runtime (with IO enabled)"));
        }
        // tokio 1.54 deprecates `with_interest` for the unsafe
        // `register_with_interest`: with an arbitrary `AsRawFd` inner, the
        // fd could be closed or replaced under the registration. Here the
        // inner is an `Owner`, which owns its fd (a channel, the context's
        // async fd, a CM channel) for as long as the `AsyncFd` holds it and
        // always returns the same number. The new function does not exist
        // before 1.54, and rverbs takes tokio from 1.38.
        #[allow(deprecated)]
        let registered = AsyncFd::with_interest(owner, Interest::READABLE);
        match registered {
            Ok(fd) => Ok(TokioReadiness { fd }),
            Err(e) if e.raw_os_error() == Some(Errno::EEXIST as i32) => {
                Err(Error::os(verb, Errno::EEXIST).with_message(format!("the fd is registered already: {again}")))
            }
            Err(e) => Err(io_error(verb, &e)),
        }
    }
}

impl TokioReadiness {
    /// Registers a CM event channel's fd (for [`AsyncCmEvents`](super::AsyncCmEvents)).
    pub(crate) fn register_cm(channel: crate::cm::EventChannel) -> Result<Self> {
        let again = "make one AsyncCmEvents per CM event channel";
        Self::register("AsyncCmEvents::new", Owner::Cm(channel), again)
    }
}

impl Readiness for TokioReadiness {
    fn poll_drain<T>(&self, cx: &mut Context<'_>, drain: impl FnOnce() -> Result<T>) -> Poll<Result<T>> {
        let mut guard = match self.fd.poll_read_ready(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(guard)) => guard,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(io_error("AsyncFd::poll_read_ready", &e))),
        };
        let r = drain();
        if r.is_ok() {
            // `drain` read until EAGAIN. The guard holds the readiness seen
            // before it ran: an edge since then is not cleared.
            guard.clear_ready();
        }
        Poll::Ready(r)
    }
}

impl AsyncChannel<TokioReadiness> {
    /// Registers `channel`'s fd with the current tokio runtime's reactor
    /// (once: attach every CQ of the channel to this value).
    ///
    /// # Errors
    /// Not inside a tokio runtime; the channel is registered already
    /// (`EEXIST`).
    ///
    /// # Panics
    /// When the runtime was built without IO (tokio panics, as for any
    /// of its IO types: use `enable_io` or `enable_all`).
    pub fn new(channel: CompletionChannel) -> Result<Self> {
        let again = "make one AsyncChannel per completion channel and attach each of its CQs to it";
        let r = TokioReadiness::register("AsyncChannel::new", Owner::Channel(channel.clone()), again)?;
        Ok(AsyncChannel::with_readiness(channel, r))
    }
}

impl AsyncCq<TokioReadiness> {
    /// Registers `cq`'s channel with the current tokio runtime's reactor
    /// and attaches `cq` to it: for a channel with one CQ. With several,
    /// attach the others through [`channel`](AsyncCq::channel) (or make an
    /// [`AsyncChannel`] first).
    ///
    /// # Errors
    /// `cq` has no channel; not inside a tokio runtime; the channel is
    /// registered already (`EEXIST`: attach through its `AsyncChannel`).
    ///
    /// # Panics
    /// As [`AsyncChannel::new`].
    pub fn new(cq: CompletionQueue) -> Result<Self> {
        let channel = cq.channel().cloned().ok_or_else(|| {
            Error::check("AsyncCq::new", Errno::EINVAL)
                .with_message("the CQ has no completion channel: create it with CqInitAttr::channel")
        })?;
        AsyncChannel::new(channel)?.attach(cq)
    }
}

impl AsyncEvents<TokioReadiness> {
    /// Registers `ctx`'s async fd with the current tokio runtime's reactor.
    ///
    /// # Errors
    /// The context has no async fd (`EOPNOTSUPP`); not inside a tokio
    /// runtime; registered already (`EEXIST`: one `AsyncEvents` per context).
    ///
    /// # Panics
    /// As [`AsyncChannel::new`].
    pub fn new(ctx: &crate::Context) -> Result<Self> {
        super::events::check_async_fd(ctx)?;
        let again = "make one AsyncEvents per context";
        let r = TokioReadiness::register("AsyncEvents::new", Owner::Events(ctx.clone()), again)?;
        AsyncEvents::with_readiness(ctx, r)
    }
}
