//! The RDMA connection manager, awaited: a CM event channel's events as a
//! stream ([`AsyncCmEvents`], over any [`Readiness`]), and with feature
//! `tokio` the connection calls of [`crate::cm`] as futures:
//! [`AsyncCmId::resolve`] then [`AsyncCmId::connect_qp`] (`connect(addr).await`),
//! [`AsyncListener::accept`] then [`AsyncConnectRequest::accept`].
//!
//! Each id of these calls has an event channel of its own, registered with
//! the reactor once, when the id is made (a listener's request moves to a
//! channel of its own, registered when the request is handed out: the
//! registration reports an fd that is readable already, so no event is
//! missed between the move and it).
//!
//! **Cancellation safety**: the events read from a channel wait in its
//! [`AsyncCmEvents`], so dropping [`NextCmEvent`], the stream, or
//! [`AsyncListener::accept`]'s future at any point loses no event: the next
//! call gets it. Dropping a future that connects ([`AsyncCmId::resolve`],
//! [`AsyncCmId::connect_qp`], [`AsyncConnectRequest::accept`]) abandons
//! that connection: its id is destroyed, which never waits, and the peer
//! sees a reject, a disconnect or a timeout.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rverbs_providers::{Errno, Error};

use super::events::EventsCore;
use super::{EventSource, Readiness};
use crate::cm::{CmId, Event, EventChannel, EventKind};
use crate::Result;

impl EventSource for EventChannel {
    type Event = Event;
    fn try_next(&self) -> Result<Option<Event>> {
        // GET_EVENT and rdma_get_cm_event's follow-up (non-blocking).
        self.try_get_event()
    }
}

/// A CM event channel's events, awaited: [`next`](Self::next) and
/// (feature `tokio`) a `futures_core::Stream` of `Result<Event>`. They are
/// [`EventChannel::try_get_event`]'s events, read once the reactor says
/// the channel's fd is readable: every queued event is read then, and
/// handed out one by one.
///
/// One per channel: its fd is registered with the reactor once, when this
/// is made. While it exists, read the channel's events only through it.
///
/// **Cancellation safety**: [`next`](Self::next)'s future and the stream
/// may be dropped at any point: events already read wait in this value,
/// and the next waiter gets each exactly once.
pub struct AsyncCmEvents<R> {
    core: EventsCore<EventChannel, R>,
}

impl<R> fmt::Debug for AsyncCmEvents<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncCmEvents").field("channel", &self.core.source).finish_non_exhaustive()
    }
}

impl<R: Readiness> AsyncCmEvents<R> {
    /// Reads `channel`'s events once `readiness`, a reactor's registration
    /// of the channel's fd ([`AsFd`](std::os::fd::AsFd)), says so (for
    /// tokio, `AsyncCmEvents::new` makes it).
    pub fn with_readiness(channel: EventChannel, readiness: R) -> Self {
        tracing::debug!("rdma_cm event channel registered for async waits");
        AsyncCmEvents { core: EventsCore::new(channel, readiness) }
    }

    /// The channel.
    pub fn channel(&self) -> &EventChannel {
        &self.core.source
    }

    /// The next event. Cancellation safe.
    // An async `next` (the name), not an iterator's.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> NextCmEvent<'_, R> {
        NextCmEvent { events: self }
    }

    /// [`next`](Self::next), poll-style.
    pub fn poll_next_event(&mut self, cx: &mut Context<'_>) -> Poll<Result<Event>> {
        self.core.poll_event(cx)
    }

    /// The next event about `id` (or, for a listener, a request to it):
    /// `Ok` when it is `want`, the event's error when it is an error event,
    /// an `EPROTO` error naming it otherwise. Events of other ids on the
    /// channel are dropped, as [`crate::cm`]'s blocking calls do.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // its callers are the tokio-only futures
    pub(crate) async fn expect(&mut self, id: &CmId, want: EventKind, verb: &'static str) -> Result<Event> {
        loop {
            let ev = self.next().await?;
            if !ev.id().same_as(id) && !ev.listen_id().is_some_and(|l| l.same_as(id)) {
                tracing::debug!(event = %ev.kind(), "an event of another id on this channel: dropped");
                continue;
            }
            if ev.kind() == want {
                return Ok(ev);
            }
            if let Some(e) = ev.error() {
                return Err(e);
            }
            return Err(Error::check(verb, Errno::EPROTO).with_message(format!(
                "waiting for {want}, the CM reported {} (status {})",
                ev.kind(),
                ev.status()
            )));
        }
    }
}

/// The future of [`AsyncCmEvents::next`]. Holds no state: dropping it at
/// any point loses nothing.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct NextCmEvent<'a, R> {
    events: &'a mut AsyncCmEvents<R>,
}

impl<R: Readiness> Future for NextCmEvent<'_, R> {
    type Output = Result<Event>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Event>> {
        self.get_mut().events.core.poll_event(cx)
    }
}

/// CM events, one by one; never ends (an `Err` item does not end it
/// either). Cancellation safe.
#[cfg(feature = "tokio")]
impl<R: Readiness + Unpin> futures_core::Stream for AsyncCmEvents<R> {
    type Item = Result<Event>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Event>>> {
        self.get_mut().core.poll_event(cx).map(Some)
    }
}

#[cfg(feature = "tokio")]
pub use on_tokio::{AsyncCmId, AsyncConnectRequest, AsyncConnection, AsyncListener};

#[cfg(feature = "tokio")]
mod on_tokio {
    use std::future::Future;
    use std::net::SocketAddr;
    use std::ops::{Deref, DerefMut};
    use std::time::Duration;

    use super::AsyncCmEvents;
    use crate::asynch::TokioReadiness;
    use crate::cm::{CmAddr, CmId, ConnParam, ConnectRequest, Event, EventChannel, EventKind, PortSpace, UdInfo};
    use crate::{Context, QueuePair, Result};

    impl AsyncCmEvents<TokioReadiness> {
        /// Registers `channel`'s fd with the current tokio runtime's
        /// reactor (once: one `AsyncCmEvents` per channel).
        ///
        /// # Errors
        /// Not inside a tokio runtime; the channel is registered already
        /// (`EEXIST`).
        ///
        /// # Panics
        /// When the runtime was built without IO (as tokio's own IO types).
        pub fn new(channel: EventChannel) -> Result<Self> {
            let r = TokioReadiness::register_cm(channel.clone())?;
            Ok(AsyncCmEvents::with_readiness(channel, r))
        }
    }

    /// An id on an event channel of its own, registered with tokio's
    /// reactor: the async form of [`crate::cm::resolve`] and
    /// [`CmId::connect_qp`].
    #[derive(Debug)]
    pub struct AsyncCmId {
        id: CmId,
        events: AsyncCmEvents<TokioReadiness>,
    }

    impl AsyncCmId {
        /// An RC id with `dst`'s address and route resolved (CREATE_ID,
        /// RESOLVE_ADDR, ADDR_RESOLVED, RESOLVE_ROUTE, ROUTE_RESOLVED), each
        /// step bounded by `timeout` in the kernel: make the QP on
        /// [`context`](Self::context), then [`connect_qp`](Self::connect_qp).
        ///
        /// # Errors
        /// As [`crate::cm::resolve`]: no RDMA device on the route to `dst`,
        /// no answer, no route; each names `dst`. Not inside a tokio runtime.
        pub async fn resolve(dst: SocketAddr, timeout: Duration) -> Result<AsyncCmId> {
            Self::resolve_in(PortSpace::Tcp, dst, timeout).await
        }

        /// [`resolve`](Self::resolve) for a UD id (`RDMA_PS_UDP`).
        pub async fn resolve_ud(dst: SocketAddr, timeout: Duration) -> Result<AsyncCmId> {
            Self::resolve_in(PortSpace::Udp, dst, timeout).await
        }

        async fn resolve_in(ps: PortSpace, dst: SocketAddr, timeout: Duration) -> Result<AsyncCmId> {
            let ch = EventChannel::new()?;
            let id = ch.create_id(ps)?;
            let mut events = AsyncCmEvents::new(ch)?;
            id.resolve_addr(None, dst, timeout)?;
            events.expect(&id, EventKind::AddrResolved, "rdma_resolve_addr").await?;
            id.resolve_route(timeout)?;
            events.expect(&id, EventKind::RouteResolved, "rdma_resolve_route").await?;
            Ok(AsyncCmId { id, events })
        }

        /// The id.
        pub fn id(&self) -> &CmId {
            &self.id
        }

        /// The context of the device the route goes through: make the QP there.
        pub fn context(&self) -> Result<Context> {
            self.id.context()
        }

        /// Connects `qp`: [`CmId::attach_qp`] and CONNECT are issued by
        /// this call; the future (which borrows nothing) waits for the
        /// connection (RC: the connect response, INIT again, RTR, RTS,
        /// ready-to-use; UD: the peer's answer).
        ///
        /// # Errors
        /// As [`CmId::connect_qp`]: private data over the limit (before
        /// the kernel is asked), nobody listening (REJECTED reason 8), the
        /// peer's reject, the CM's timeout.
        pub fn connect_qp(
            mut self,
            qp: QueuePair,
            param: &ConnParam,
        ) -> impl Future<Output = Result<AsyncConnection>> + Send + 'static {
            let sent = self.id.attach_qp(&qp).and_then(|()| self.id.connect(param));
            async move {
                sent?;
                let ev = self.events.expect(&self.id, EventKind::Established, "rdma_connect").await?;
                Ok(AsyncConnection {
                    private_data: ev.private_data().to_vec(),
                    ud: ev.ud_param().copied(),
                    qp,
                    id: self.id,
                    events: self.events,
                })
            }
        }
    }

    /// A listening id whose channel is registered with tokio's reactor:
    /// the async form of [`crate::cm::Listener`].
    #[derive(Debug)]
    pub struct AsyncListener {
        id: CmId,
        events: AsyncCmEvents<TokioReadiness>,
    }

    impl AsyncListener {
        /// Listens for RC connections on `addr` (CREATE_ID, BIND, LISTEN
        /// with the kernel's maximum backlog).
        ///
        /// # Errors
        /// The address is taken or not local; not inside a tokio runtime.
        pub fn bind(addr: SocketAddr) -> Result<AsyncListener> {
            Self::bind_with(addr, PortSpace::Tcp, 0)
        }

        /// [`bind`](Self::bind) in port space `ps` with `backlog` (0: the
        /// kernel's maximum).
        pub fn bind_with(addr: SocketAddr, ps: PortSpace, backlog: i32) -> Result<AsyncListener> {
            let ch = EventChannel::new()?;
            let id = ch.create_id(ps)?;
            id.bind_addr(addr)?;
            id.listen(backlog)?;
            Ok(AsyncListener { id, events: AsyncCmEvents::new(ch)? })
        }

        /// The listening id.
        pub fn id(&self) -> &CmId {
            &self.id
        }

        /// The address and port it listens on.
        pub fn local_addr(&self) -> Option<SocketAddr> {
            match self.id.local_addr() {
                Some(CmAddr::Ip(a)) => Some(a),
                _ => None,
            }
        }

        /// The next connection request. Its id moves to an event channel
        /// of its own (`rdma_migrate_id`), registered with the reactor.
        /// Cancellation safe: a request read while the future was pending
        /// waits for the next call.
        ///
        /// # Errors
        /// An error event on the listener; the move or the registration failed.
        pub async fn accept(&mut self) -> Result<AsyncConnectRequest> {
            let ev = self.events.expect(&self.id, EventKind::ConnectRequest, "rdma_get_request").await?;
            AsyncConnectRequest::from_event(&ev)
        }
    }

    /// A connection request waiting for [`accept`](Self::accept) or
    /// [`reject`](Self::reject); dropping it destroys its id. Derefs to the
    /// blocking API's [`ConnectRequest`] for what the request says (id,
    /// private data, parameters, peer, device context), and carries the
    /// stream of the id's own events for the accept to wait on.
    #[derive(Debug)]
    pub struct AsyncConnectRequest {
        request: ConnectRequest,
        events: AsyncCmEvents<TokioReadiness>,
    }

    impl Deref for AsyncConnectRequest {
        type Target = ConnectRequest;
        fn deref(&self) -> &ConnectRequest {
            &self.request
        }
    }

    impl AsyncConnectRequest {
        fn from_event(ev: &Event) -> Result<AsyncConnectRequest> {
            let ch = EventChannel::new()?;
            let request = ConnectRequest::from_event(ev, &ch)?;
            // Registered after the move: epoll reports an fd that is
            // readable already, so an event that came in between is seen.
            let events = AsyncCmEvents::new(ch)?;
            Ok(AsyncConnectRequest { request, events })
        }

        /// Accepts with `qp`: [`CmId::attach_qp`] and ACCEPT are issued by
        /// this call; the future (which borrows nothing) waits, for RC,
        /// for the peer's ready-to-use (ESTABLISHED).
        pub fn accept(
            self,
            qp: QueuePair,
            param: &ConnParam,
        ) -> impl Future<Output = Result<AsyncConnection>> + Send + 'static {
            let (id, private_data) = self.request.into_parts();
            let mut events = self.events;
            let sent = id.attach_qp(&qp).and_then(|()| id.accept(param));
            async move {
                sent?;
                if id.port_space() != PortSpace::Udp {
                    events.expect(&id, EventKind::Established, "rdma_accept").await?;
                }
                Ok(AsyncConnection { qp, id, events, private_data, ud: None })
            }
        }

        /// Rejects with `private_data` (148 bytes at most on IB/RoCE).
        pub fn reject(self, private_data: &[u8]) -> Result<()> {
            self.request.reject(private_data)
        }
    }

    /// A connected QP, its id, and the id's event stream. Derefs to the
    /// [`QueuePair`]. Dropping it destroys the QP and the id.
    #[derive(Debug)]
    pub struct AsyncConnection {
        qp: QueuePair,
        id: CmId,
        events: AsyncCmEvents<TokioReadiness>,
        private_data: Vec<u8>,
        ud: Option<UdInfo>,
    }

    impl AsyncConnection {
        /// The CM id.
        pub fn id(&self) -> &CmId {
            &self.id
        }

        /// The private data of the peer's reply (active side) or request
        /// (passive side).
        pub fn private_data(&self) -> &[u8] {
            &self.private_data
        }

        /// UD, active side: the peer's QP number, Q_Key and address.
        pub fn ud_peer(&self) -> Option<&UdInfo> {
            self.ud.as_ref()
        }

        /// The id's events (DISCONNECTED, UNREACHABLE...), as a stream.
        pub fn events(&mut self) -> &mut AsyncCmEvents<TokioReadiness> {
            &mut self.events
        }

        /// Moves the QP to ERR (posted work requests flush) and
        /// disconnects ([`CmId::disconnect`]).
        pub fn disconnect(&self) -> Result<()> {
            self.id.disconnect()
        }

        /// Waits for DISCONNECTED (the peer's disconnect, or the answer to
        /// ours); other events in between are skipped, except errors
        /// (UNREACHABLE, which can come at any time, is skipped too).
        /// Cancellation safe.
        pub async fn disconnected(&mut self) -> Result<()> {
            loop {
                let ev = self.events.next().await?;
                if ev.kind() == EventKind::Disconnected {
                    return Ok(());
                }
                match ev.error() {
                    Some(e) if ev.kind() != EventKind::Unreachable => return Err(e),
                    _ => tracing::debug!(event = %ev.kind(), "waiting for DISCONNECTED: skipped"),
                }
            }
        }

        /// The QP, the id and its event stream, apart.
        pub fn into_parts(self) -> (QueuePair, CmId, AsyncCmEvents<TokioReadiness>) {
            (self.qp, self.id, self.events)
        }
    }

    impl Deref for AsyncConnection {
        type Target = QueuePair;
        fn deref(&self) -> &QueuePair {
            &self.qp
        }
    }

    impl DerefMut for AsyncConnection {
        fn deref_mut(&mut self) -> &mut QueuePair {
            &mut self.qp
        }
    }
}
