//! The RDMA connection manager, awaited: a CM event channel's events as a
//! stream ([`AsyncCmEvents`], over any [`Readiness`]), and with feature
//! `tokio` the connection calls of [`crate::cm`] as futures:
//! [`AsyncCmId::resolve`] then [`AsyncCmId::connect_qp`] (`connect(addr).await`),
//! [`AsyncListener::accept`] then [`AsyncConnectRequest::accept`].
//!
//! The ids of these calls are on an [`AsyncCmChannel`]: one event channel
//! registered with the reactor once, read by one task that routes each
//! event to its id's [`AsyncIdEvents`] (`router.rs`). A listener's
//! accepted connections stay on its channel, as librdmacm's users keep
//! theirs on one: no channel, `rdma_migrate_id` or registration per
//! connection.
//!
//! **Cancellation safety**: the events read from a channel wait in its
//! [`AsyncCmEvents`], or in the router until their id's owner takes them,
//! so dropping [`NextCmEvent`], `NextIdEvent`, the streams, or
//! [`AsyncListener::accept`]'s future at any point loses no event: the
//! next call gets it. Dropping a future that connects
//! ([`AsyncCmId::resolve`], [`AsyncCmId::connect_qp`],
//! [`AsyncConnectRequest::accept`]) abandons that connection: its id is
//! destroyed, which never waits, and the peer sees a reject, a disconnect
//! or a timeout.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::events::EventsCore;
use super::{EventSource, Readiness};
use crate::cm::{Event, EventChannel};
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
pub use on_tokio::{
    AsyncCmChannel, AsyncCmId, AsyncConnectRequest, AsyncConnection, AsyncIdEvents, AsyncListener, NextIdEvent,
};

#[cfg(feature = "tokio")]
mod on_tokio {
    use std::fmt;
    use std::future::Future;
    use std::net::SocketAddr;
    use std::ops::{Deref, DerefMut};
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context as TaskContext, Poll};
    use std::time::Duration;

    use rverbs_providers::{Errno, Error};

    use super::super::router::Router;
    use super::super::Readiness;
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

    /// The channel's router and the task that reads the channel; the task
    /// is aborted when the last handle goes.
    struct Shared {
        router: Arc<Router<EventChannel>>,
        driver: tokio::task::JoinHandle<()>,
    }

    impl Drop for Shared {
        fn drop(&mut self) {
            self.driver.abort();
        }
    }

    /// A CM event channel shared by many async ids, as librdmacm's users
    /// share one (`rdma_create_event_channel` once, every id on it): one
    /// fd, one registration with tokio's reactor, and one task that reads
    /// every event when the fd is readable and hands it to the id it is
    /// about. Each id's events wait for their owner
    /// ([`AsyncIdEvents`]) in the order the kernel reported them.
    ///
    /// An [`AsyncListener`]'s accepted connections stay on its channel
    /// (no `rdma_migrate_id`, no channel per connection); clients that
    /// [`resolve_on`](AsyncCmId::resolve_on) one channel share it.
    /// Cheap to clone; every id on it keeps it (and its task) alive.
    #[derive(Clone)]
    pub struct AsyncCmChannel {
        shared: Arc<Shared>,
    }

    impl fmt::Debug for AsyncCmChannel {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("AsyncCmChannel").field("channel", &self.shared.router.source).finish_non_exhaustive()
        }
    }

    /// The driver: waits for the fd, reads every queued event and routes
    /// it, until the channel fails for good (then every owner gets the
    /// error) or the last handle aborts it.
    async fn drive(router: Arc<Router<EventChannel>>, readiness: TokioReadiness) {
        loop {
            let read = std::future::poll_fn(|cx| readiness.poll_drain(cx, || router.drain())).await;
            if let Err(e) = read {
                tracing::warn!(error = %e, "reading the rdma_cm event channel failed: its ids get the error");
                router.fail(e);
                return;
            }
        }
    }

    impl AsyncCmChannel {
        /// Opens a CM event channel (`rdma_create_event_channel`),
        /// registers its fd with the current tokio runtime's reactor and
        /// starts the task that routes its events.
        ///
        /// # Errors
        /// As [`EventChannel::new`]; not inside a tokio runtime.
        ///
        /// # Panics
        /// When the runtime was built without IO (as tokio's own IO types).
        pub fn new() -> Result<AsyncCmChannel> {
            let channel = EventChannel::new()?;
            let readiness = TokioReadiness::register_cm(channel.clone())?;
            let router = Arc::new(Router::new(channel));
            let driver = tokio::spawn(drive(router.clone(), readiness));
            tracing::debug!("rdma_cm event channel registered; one task routes its events");
            Ok(AsyncCmChannel { shared: Arc::new(Shared { router, driver }) })
        }

        /// The channel (for ids made here by hand: create them on it with
        /// [`EventChannel::create_id`], then [`events_of`](Self::events_of)
        /// before the first command that makes the kernel report one).
        pub fn channel(&self) -> &EventChannel {
            &self.shared.router.source
        }

        /// Starts keeping `id`'s events for the returned owner (dropping
        /// it drops the events not taken). `id` must be on this channel.
        ///
        /// # Errors
        /// `EINVAL`: `id` is on another channel; `EEXIST`: its events have
        /// an owner already.
        pub fn events_of(&self, id: &CmId) -> Result<AsyncIdEvents> {
            if !id.channel().same_as(self.channel()) {
                return Err(Error::check("AsyncCmChannel::events_of", Errno::EINVAL)
                    .with_message("the CM id is on another event channel"));
            }
            self.open(id.uid()).ok_or_else(|| {
                Error::check("AsyncCmChannel::events_of", Errno::EEXIST)
                    .with_message("the CM id's events already have an owner (one AsyncIdEvents per id)")
            })
        }

        fn open(&self, uid: u64) -> Option<AsyncIdEvents> {
            self.shared.router.open(uid).then(|| AsyncIdEvents { channel: self.clone(), uid })
        }

        /// A new id in `ps` and the owner of its events.
        fn create(&self, ps: PortSpace) -> Result<(CmId, AsyncIdEvents)> {
            let id = self.channel().create_id(ps)?;
            let events = self.open(id.uid()).ok_or_else(|| Error::check("rdma_create_id", Errno::EEXIST))?;
            Ok((id, events))
        }
    }

    /// The events of one id on an [`AsyncCmChannel`], awaited:
    /// [`next`](Self::next) and a `futures_core::Stream` of
    /// `Result<Event>` (a listener's: its connect requests). Dropping it
    /// drops the events not taken (and the ids they hold).
    ///
    /// **Cancellation safety**: the events wait in the channel's router
    /// until taken, so [`next`](Self::next)'s future and the stream may be
    /// dropped at any point: the next call gets each event exactly once.
    pub struct AsyncIdEvents {
        channel: AsyncCmChannel,
        uid: u64,
    }

    impl fmt::Debug for AsyncIdEvents {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("AsyncIdEvents").field("uid", &self.uid).finish_non_exhaustive()
        }
    }

    impl Drop for AsyncIdEvents {
        fn drop(&mut self) {
            self.channel.shared.router.close(self.uid);
        }
    }

    impl AsyncIdEvents {
        /// The channel the id is on.
        pub fn channel(&self) -> &AsyncCmChannel {
            &self.channel
        }

        /// The next event of the id. Cancellation safe.
        // An async `next` (the name), not an iterator's.
        #[allow(clippy::should_implement_trait)]
        pub fn next(&mut self) -> NextIdEvent<'_> {
            NextIdEvent { events: self }
        }

        /// [`next`](Self::next), poll-style.
        pub fn poll_next_event(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<Event>> {
            self.channel.shared.router.poll_take(self.uid, cx)
        }

        /// The next event: `Ok` when it is `want`, the event's error when
        /// it is an error event, an `EPROTO` error naming it otherwise.
        pub(crate) async fn expect(&mut self, want: EventKind, verb: &'static str) -> Result<Event> {
            let ev = self.next().await?;
            if ev.kind() == want {
                return Ok(ev);
            }
            if let Some(e) = ev.error() {
                return Err(e);
            }
            Err(Error::check(verb, Errno::EPROTO).with_message(format!(
                "waiting for {want}, the CM reported {} (status {})",
                ev.kind(),
                ev.status()
            )))
        }
    }

    /// The future of [`AsyncIdEvents::next`]. Holds no state: dropping it
    /// at any point loses nothing.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless awaited"]
    pub struct NextIdEvent<'a> {
        events: &'a mut AsyncIdEvents,
    }

    impl Future for NextIdEvent<'_> {
        type Output = Result<Event>;
        fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<Event>> {
            self.get_mut().events.poll_next_event(cx)
        }
    }

    /// The id's events, one by one; never ends (an `Err` item does not end
    /// it either). Cancellation safe.
    impl futures_core::Stream for AsyncIdEvents {
        type Item = Result<Event>;
        fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Result<Event>>> {
            self.get_mut().poll_next_event(cx).map(Some)
        }
    }

    /// An RC (or UD) id with its address and route resolved, its events
    /// routed to it by an [`AsyncCmChannel`]: the async form of
    /// [`crate::cm::resolve`] and [`CmId::connect_qp`].
    #[derive(Debug)]
    pub struct AsyncCmId {
        // Declared before `id`: dropping the owner first drops the events
        // not taken, then the last handle destroys the kernel id.
        events: AsyncIdEvents,
        id: CmId,
    }

    impl AsyncCmId {
        /// An RC id with `dst`'s address and route resolved (CREATE_ID,
        /// RESOLVE_ADDR, ADDR_RESOLVED, RESOLVE_ROUTE, ROUTE_RESOLVED), each
        /// step bounded by `timeout` in the kernel, on an event channel of
        /// its own: make the QP on [`context`](Self::context), then
        /// [`connect_qp`](Self::connect_qp). Many clients: share one
        /// channel with [`resolve_on`](Self::resolve_on).
        ///
        /// # Errors
        /// As [`crate::cm::resolve`]: no RDMA device on the route to `dst`,
        /// no answer, no route; each names `dst`. Not inside a tokio runtime.
        pub async fn resolve(dst: SocketAddr, timeout: Duration) -> Result<AsyncCmId> {
            Self::resolve_in(&AsyncCmChannel::new()?, PortSpace::Tcp, dst, timeout).await
        }

        /// [`resolve`](Self::resolve) for a UD id (`RDMA_PS_UDP`).
        pub async fn resolve_ud(dst: SocketAddr, timeout: Duration) -> Result<AsyncCmId> {
            Self::resolve_in(&AsyncCmChannel::new()?, PortSpace::Udp, dst, timeout).await
        }

        /// [`resolve`](Self::resolve) with the id on `channel`, shared with
        /// other ids (as ucmatose's connections share one channel).
        pub async fn resolve_on(channel: &AsyncCmChannel, dst: SocketAddr, timeout: Duration) -> Result<AsyncCmId> {
            Self::resolve_in(channel, PortSpace::Tcp, dst, timeout).await
        }

        /// [`resolve_on`](Self::resolve_on) for a UD id.
        pub async fn resolve_ud_on(channel: &AsyncCmChannel, dst: SocketAddr, timeout: Duration) -> Result<AsyncCmId> {
            Self::resolve_in(channel, PortSpace::Udp, dst, timeout).await
        }

        async fn resolve_in(
            ch: &AsyncCmChannel,
            ps: PortSpace,
            dst: SocketAddr,
            timeout: Duration,
        ) -> Result<AsyncCmId> {
            let (id, mut events) = ch.create(ps)?;
            id.resolve_addr(None, dst, timeout)?;
            events.expect(EventKind::AddrResolved, "rdma_resolve_addr").await?;
            id.resolve_route(timeout)?;
            events.expect(EventKind::RouteResolved, "rdma_resolve_route").await?;
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
                let ev = self.events.expect(EventKind::Established, "rdma_connect").await?;
                Ok(AsyncConnection {
                    private_data: ev.private_data().to_vec(),
                    ud: ev.ud_param().copied(),
                    qp,
                    events: self.events,
                    id: self.id,
                })
            }
        }
    }

    /// A listening id whose events an [`AsyncCmChannel`] routes: the
    /// async form of [`crate::cm::Listener`]. Its requests' ids stay on
    /// its channel.
    #[derive(Debug)]
    pub struct AsyncListener {
        events: AsyncIdEvents,
        id: CmId,
    }

    impl AsyncListener {
        /// Listens for RC connections on `addr` (an event channel,
        /// CREATE_ID, BIND, LISTEN with the kernel's maximum backlog).
        ///
        /// # Errors
        /// The address is taken or not local; not inside a tokio runtime.
        pub fn bind(addr: SocketAddr) -> Result<AsyncListener> {
            Self::bind_with(addr, PortSpace::Tcp, 0)
        }

        /// [`bind`](Self::bind) in port space `ps` with `backlog` (0: the
        /// kernel's maximum).
        pub fn bind_with(addr: SocketAddr, ps: PortSpace, backlog: i32) -> Result<AsyncListener> {
            Self::bind_on(&AsyncCmChannel::new()?, addr, ps, backlog)
        }

        /// [`bind_with`](Self::bind_with) on `channel`, shared with other ids.
        pub fn bind_on(
            channel: &AsyncCmChannel,
            addr: SocketAddr,
            ps: PortSpace,
            backlog: i32,
        ) -> Result<AsyncListener> {
            let (id, events) = channel.create(ps)?;
            id.bind_addr(addr)?;
            id.listen(backlog)?;
            Ok(AsyncListener { id, events })
        }

        /// The listening id.
        pub fn id(&self) -> &CmId {
            &self.id
        }

        /// The channel its requests arrive on (and their ids stay on).
        pub fn channel(&self) -> &AsyncCmChannel {
            self.events.channel()
        }

        /// The address and port it listens on.
        pub fn local_addr(&self) -> Option<SocketAddr> {
            match self.id.local_addr() {
                Some(CmAddr::Ip(a)) => Some(a),
                _ => None,
            }
        }

        /// The next connection request; its id stays on the listener's
        /// channel, its events routed to the request (no
        /// `rdma_migrate_id`, no channel of its own). Cancellation safe: a
        /// request read while the future was pending waits for the next
        /// call.
        ///
        /// # Errors
        /// An error event on the listener (`DEVICE_REMOVAL`...).
        pub async fn accept(&mut self) -> Result<AsyncConnectRequest> {
            let ev = self.events.expect(EventKind::ConnectRequest, "rdma_get_request").await?;
            AsyncConnectRequest::from_event(self.events.channel(), &ev)
        }
    }

    /// A connection request waiting for [`accept`](Self::accept) or
    /// [`reject`](Self::reject); dropping it destroys its id. Derefs to the
    /// blocking API's [`ConnectRequest`] for what the request says (id,
    /// private data, parameters, peer, device context), and owns the id's
    /// events for the accept to wait on.
    #[derive(Debug)]
    pub struct AsyncConnectRequest {
        events: AsyncIdEvents,
        request: ConnectRequest,
    }

    impl Deref for AsyncConnectRequest {
        type Target = ConnectRequest;
        fn deref(&self) -> &ConnectRequest {
            &self.request
        }
    }

    impl AsyncConnectRequest {
        fn from_event(ch: &AsyncCmChannel, ev: &Event) -> Result<AsyncConnectRequest> {
            // The kernel reports none of the new id's events before ACCEPT
            // gives it our uid: owned from here, none is missed.
            let request = ConnectRequest::from_event_here(ev);
            let events = ch.events_of(request.id())?;
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
                    events.expect(EventKind::Established, "rdma_accept").await?;
                }
                Ok(AsyncConnection { qp, events, id, private_data, ud: None })
            }
        }

        /// Rejects with `private_data` (148 bytes at most on IB/RoCE).
        pub fn reject(self, private_data: &[u8]) -> Result<()> {
            self.request.reject(private_data)
        }
    }

    /// A connected QP, its id, and the id's events. Derefs to the
    /// [`QueuePair`]. Dropping it destroys the QP and the id, and drops
    /// the id's events not taken.
    #[derive(Debug)]
    pub struct AsyncConnection {
        qp: QueuePair,
        events: AsyncIdEvents,
        id: CmId,
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

        /// The id's events (DISCONNECTED, UNREACHABLE, TIMEWAIT_EXIT...), as
        /// a stream.
        pub fn events(&mut self) -> &mut AsyncIdEvents {
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

        /// The QP, the id and its events, apart.
        pub fn into_parts(self) -> (QueuePair, CmId, AsyncIdEvents) {
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
