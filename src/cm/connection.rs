//! The convenience calls: resolve an address, connect a QP, listen, accept,
//! each waiting for its event on an event channel of the id's own (like
//! librdmacm's synchronous ids), with a timeout, and failing with an error
//! that names the event and the address.

use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use rverbs_providers::{Errno, Error, Result};

use super::channel::{timed_out, EventChannel};
use super::event::{ConnInfo, Event, EventKind, UdInfo};
use super::id::CmId;
use super::{CmAddr, ConnParam, PortSpace};
use crate::{Context, QueuePair};

/// Waits for the next event about `id` on its channel: `Ok` when it is
/// `want`, the event's error when it is an error event, an `EPROTO`
/// error naming it otherwise.
fn wait_for(id: &CmId, want: EventKind, verb: &'static str, timeout: Duration) -> Result<Event> {
    let ch = id.channel();
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(ev) = ch.get_event_timeout(left)? else { return Err(timed_out(verb, &want.to_string(), timeout)) };
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

fn resolve_in(ps: PortSpace, dst: SocketAddr, timeout: Duration) -> Result<CmId> {
    let ch = EventChannel::new()?;
    let id = ch.create_id(ps)?;
    id.resolve_addr(None, dst, timeout)?;
    wait_for(&id, EventKind::AddrResolved, "rdma_resolve_addr", timeout + Duration::from_secs(1))?;
    id.resolve_route(timeout)?;
    wait_for(&id, EventKind::RouteResolved, "rdma_resolve_route", timeout + Duration::from_secs(1))?;
    Ok(id)
}

/// An RC id on an event channel of its own, with `dst`'s address and route
/// resolved (CREATE_ID, RESOLVE_ADDR, ADDR_RESOLVED, RESOLVE_ROUTE,
/// ROUTE_RESOLVED): ready for [`CmId::context`] and [`CmId::connect_qp`].
///
/// # Errors
/// No RDMA device on the route to `dst`, no answer from it within
/// `timeout`, no route; each names `dst`.
pub fn resolve(dst: SocketAddr, timeout: Duration) -> Result<CmId> {
    resolve_in(PortSpace::Tcp, dst, timeout)
}

/// [`resolve`] for a UD id (`RDMA_PS_UDP`).
pub fn resolve_ud(dst: SocketAddr, timeout: Duration) -> Result<CmId> {
    resolve_in(PortSpace::Udp, dst, timeout)
}

impl CmId {
    /// Connects `qp` through this route-resolved id and waits for the
    /// connection: [`attach_qp`](Self::attach_qp) (INIT), CONNECT, and for
    /// RC the connect response (INIT again, RTR, RTS, ready-to-use), for UD
    /// the peer's answer. Returns the connected QP.
    ///
    /// # Errors
    /// Nobody listening (REJECTED reason 8), the peer's reject, no answer
    /// within `timeout`, a private data or depth the transport or device
    /// does not allow.
    pub fn connect_qp(&self, qp: QueuePair, param: &ConnParam, timeout: Duration) -> Result<Connection> {
        self.attach_qp(&qp)?;
        self.connect(param)?;
        let ev = wait_for(self, EventKind::Established, "rdma_connect", timeout)?;
        Ok(Connection { qp, id: self.clone(), private_data: ev.private_data().to_vec(), ud: ev.ud_param().copied() })
    }
}

/// A listening id on an event channel of its own (`rdma_listen`).
#[derive(Debug)]
pub struct Listener {
    id: CmId,
}

impl Listener {
    /// Listens for RC connections on `addr` (port 0: a free one, see
    /// [`local_addr`](Self::local_addr); `0.0.0.0`: every device): an
    /// event channel, CREATE_ID, BIND, LISTEN with the kernel's maximum
    /// backlog.
    pub fn bind(addr: SocketAddr) -> Result<Listener> {
        Self::bind_with(addr, PortSpace::Tcp, 0)
    }

    /// [`bind`](Self::bind) in port space `ps` with `backlog` (0: the
    /// kernel's maximum).
    pub fn bind_with(addr: SocketAddr, ps: PortSpace, backlog: i32) -> Result<Listener> {
        let ch = EventChannel::new()?;
        let id = ch.create_id(ps)?;
        id.bind_addr(addr)?;
        id.listen(backlog)?;
        Ok(Listener { id })
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

    /// Waits for the next connection request (`None`: without limit). Its
    /// new id gets an event channel of its own (`rdma_migrate_id`), so the
    /// connection's events never mix with the listener's.
    pub fn get_request(&self, timeout: Option<Duration>) -> Result<ConnectRequest> {
        let t = timeout.unwrap_or(Duration::from_secs(u32::MAX.into()));
        let ev = wait_for(&self.id, EventKind::ConnectRequest, "rdma_get_request", t)?;
        ConnectRequest::from_event(&ev, &EventChannel::new()?)
    }
}

/// A connection request waiting for [`accept`](Self::accept) or
/// [`reject`](Self::reject); dropping it destroys its id (the peer then
/// sees a reject or a timeout).
#[derive(Debug)]
pub struct ConnectRequest {
    id: CmId,
    private_data: Vec<u8>,
    conn: Option<ConnInfo>,
}

impl ConnectRequest {
    /// The request a CONNECT_REQUEST event `ev` brought, its new id moved
    /// to `ch` (`RDMA_USER_CM_CMD_MIGRATE_ID`, `rdma_migrate_id`).
    pub(crate) fn from_event(ev: &Event, ch: &EventChannel) -> Result<ConnectRequest> {
        ev.id().migrate(ch)?;
        Ok(Self::from_event_here(ev))
    }

    /// The request a CONNECT_REQUEST event `ev` brought, its new id left
    /// on the listener's channel (the async listener routes its events).
    pub(crate) fn from_event_here(ev: &Event) -> ConnectRequest {
        ConnectRequest { id: ev.id().clone(), private_data: ev.private_data().to_vec(), conn: ev.conn_param().copied() }
    }

    /// The id and the private data, for an accept that waits elsewhere
    /// (the async [`AsyncConnectRequest`](crate::asynch::AsyncConnectRequest)).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn into_parts(self) -> (CmId, Vec<u8>) {
        (self.id, self.private_data)
    }

    /// The request's id.
    pub fn id(&self) -> &CmId {
        &self.id
    }

    /// The requester's private data (IB/RoCE: 56 bytes, zero-padded).
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// The request's parameters (RC).
    pub fn conn_param(&self) -> Option<&ConnInfo> {
        self.conn.as_ref()
    }

    /// The requester's address.
    pub fn peer_addr(&self) -> Option<CmAddr> {
        self.id.peer_addr()
    }

    /// The context of the device the request came in on: make the QP there.
    pub fn context(&self) -> Result<Context> {
        self.id.context()
    }

    /// Accepts with `qp` ([`CmId::attach_qp`], then [`CmId::accept`]) and,
    /// for RC, waits for the peer's ready-to-use (ESTABLISHED).
    pub fn accept(self, qp: QueuePair, param: &ConnParam, timeout: Duration) -> Result<Connection> {
        self.id.attach_qp(&qp)?;
        self.id.accept(param)?;
        let private_data = self.private_data;
        if self.id.port_space() == PortSpace::Udp {
            return Ok(Connection { qp, id: self.id, private_data, ud: None });
        }
        wait_for(&self.id, EventKind::Established, "rdma_accept", timeout)?;
        Ok(Connection { qp, id: self.id, private_data, ud: None })
    }

    /// Rejects with `private_data` (148 bytes at most on IB/RoCE).
    pub fn reject(self, private_data: &[u8]) -> Result<()> {
        self.id.reject(private_data)
    }
}

/// A connected QP and its CM id. Derefs to the [`QueuePair`]. Dropping it
/// destroys the QP and the id (a connected id's destroy disconnects).
#[derive(Debug)]
pub struct Connection {
    qp: QueuePair,
    id: CmId,
    private_data: Vec<u8>,
    ud: Option<UdInfo>,
}

impl Connection {
    /// The CM id.
    pub fn id(&self) -> &CmId {
        &self.id
    }

    /// The QP.
    pub fn qp(&self) -> &QueuePair {
        &self.qp
    }

    /// The QP, to post on.
    pub fn qp_mut(&mut self) -> &mut QueuePair {
        &mut self.qp
    }

    /// The private data of the peer's reply (active side) or request
    /// (passive side), as the kernel reported it.
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// UD, active side: the peer's QP number, Q_Key and address.
    pub fn ud_peer(&self) -> Option<&UdInfo> {
        self.ud.as_ref()
    }

    /// Moves the QP to ERR (posted work requests flush) and disconnects
    /// ([`CmId::disconnect`]).
    pub fn disconnect(&self) -> Result<()> {
        self.id.disconnect()
    }

    /// Waits up to `timeout` for DISCONNECTED (the peer's disconnect, or
    /// the answer to ours); `false` when it did not come. Other events in
    /// between are skipped, except errors.
    pub fn wait_disconnected(&self, timeout: Duration) -> Result<bool> {
        let ch = self.id.channel();
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(ev) = ch.get_event_timeout(left)? else { return Ok(false) };
            if ev.kind() == EventKind::Disconnected {
                return Ok(true);
            }
            match ev.error() {
                // UNREACHABLE can come at any time (a neighbour change): not the connection's end.
                Some(e) if ev.kind() != EventKind::Unreachable => return Err(e),
                _ => tracing::debug!(event = %ev.kind(), "waiting for DISCONNECTED: skipped"),
            }
        }
    }

    /// The next event of the connection's id within `timeout`.
    pub fn next_event(&self, timeout: Duration) -> Result<Option<Event>> {
        self.id.channel().get_event_timeout(timeout)
    }

    /// The QP and the id, apart.
    pub fn into_parts(self) -> (QueuePair, CmId) {
        (self.qp, self.id)
    }
}

impl Deref for Connection {
    type Target = QueuePair;

    fn deref(&self) -> &QueuePair {
        &self.qp
    }
}

impl DerefMut for Connection {
    fn deref_mut(&mut self) -> &mut QueuePair {
        &mut self.qp
    }
}
