//! CM events (`struct rdma_cm_event`): owned and decoded, with what
//! `rdma_get_cm_event` does after reading one.

use std::fmt;

use rverbs_providers::cm::{self as cmd, CmAddr};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::rdma_user_cm::*;

use super::channel::EventChannel;
use super::id::CmId;
use super::{qp, PortSpace};
use crate::AhAttr;

/// What happened (`enum rdma_cm_event_type`). Numbers the library does
/// not know are kept in [`Other`](Self::Other).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED` (0): the id has a device and a source.
    AddrResolved,
    /// `RDMA_CM_EVENT_ADDR_ERROR` (1): status = -errno.
    AddrError,
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED` (2).
    RouteResolved,
    /// `RDMA_CM_EVENT_ROUTE_ERROR` (3): status = -errno.
    RouteError,
    /// `RDMA_CM_EVENT_CONNECT_REQUEST` (4): [`Event::id`] is the new id,
    /// [`Event::listen_id`] the listener.
    ConnectRequest,
    /// `RDMA_CM_EVENT_CONNECT_RESPONSE` (5): only for an id without a QP
    /// (with one, it is processed and reported as `Established`).
    ConnectResponse,
    /// `RDMA_CM_EVENT_CONNECT_ERROR` (6): status = -errno.
    ConnectError,
    /// `RDMA_CM_EVENT_UNREACHABLE` (7): the peer did not answer (status
    /// -ETIMEDOUT); since 6.0 also on a neighbour change, at any time.
    Unreachable,
    /// `RDMA_CM_EVENT_REJECTED` (8): status is the IB CM's reason (8:
    /// nobody listens, 28: the peer rejected, 35: ECE), or -errno on iWARP.
    Rejected,
    /// `RDMA_CM_EVENT_ESTABLISHED` (9).
    Established,
    /// `RDMA_CM_EVENT_DISCONNECTED` (10).
    Disconnected,
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL` (11): drop everything of the device.
    DeviceRemoval,
    /// `RDMA_CM_EVENT_MULTICAST_JOIN` (12).
    MulticastJoin,
    /// `RDMA_CM_EVENT_MULTICAST_ERROR` (13).
    MulticastError,
    /// `RDMA_CM_EVENT_ADDR_CHANGE` (14).
    AddrChange,
    /// `RDMA_CM_EVENT_TIMEWAIT_EXIT` (15): the QP may be reused.
    TimewaitExit,
    /// A number this library does not know.
    Other(u32),
}

impl EventKind {
    /// From the kernel's number.
    pub fn from_raw(v: u32) -> Self {
        match v {
            RDMA_CM_EVENT_ADDR_RESOLVED => EventKind::AddrResolved,
            RDMA_CM_EVENT_ADDR_ERROR => EventKind::AddrError,
            RDMA_CM_EVENT_ROUTE_RESOLVED => EventKind::RouteResolved,
            RDMA_CM_EVENT_ROUTE_ERROR => EventKind::RouteError,
            RDMA_CM_EVENT_CONNECT_REQUEST => EventKind::ConnectRequest,
            RDMA_CM_EVENT_CONNECT_RESPONSE => EventKind::ConnectResponse,
            RDMA_CM_EVENT_CONNECT_ERROR => EventKind::ConnectError,
            RDMA_CM_EVENT_UNREACHABLE => EventKind::Unreachable,
            RDMA_CM_EVENT_REJECTED => EventKind::Rejected,
            RDMA_CM_EVENT_ESTABLISHED => EventKind::Established,
            RDMA_CM_EVENT_DISCONNECTED => EventKind::Disconnected,
            RDMA_CM_EVENT_DEVICE_REMOVAL => EventKind::DeviceRemoval,
            RDMA_CM_EVENT_MULTICAST_JOIN => EventKind::MulticastJoin,
            RDMA_CM_EVENT_MULTICAST_ERROR => EventKind::MulticastError,
            RDMA_CM_EVENT_ADDR_CHANGE => EventKind::AddrChange,
            RDMA_CM_EVENT_TIMEWAIT_EXIT => EventKind::TimewaitExit,
            o => EventKind::Other(o),
        }
    }

    /// The kernel's number.
    pub fn raw(self) -> u32 {
        match self {
            EventKind::AddrResolved => RDMA_CM_EVENT_ADDR_RESOLVED,
            EventKind::AddrError => RDMA_CM_EVENT_ADDR_ERROR,
            EventKind::RouteResolved => RDMA_CM_EVENT_ROUTE_RESOLVED,
            EventKind::RouteError => RDMA_CM_EVENT_ROUTE_ERROR,
            EventKind::ConnectRequest => RDMA_CM_EVENT_CONNECT_REQUEST,
            EventKind::ConnectResponse => RDMA_CM_EVENT_CONNECT_RESPONSE,
            EventKind::ConnectError => RDMA_CM_EVENT_CONNECT_ERROR,
            EventKind::Unreachable => RDMA_CM_EVENT_UNREACHABLE,
            EventKind::Rejected => RDMA_CM_EVENT_REJECTED,
            EventKind::Established => RDMA_CM_EVENT_ESTABLISHED,
            EventKind::Disconnected => RDMA_CM_EVENT_DISCONNECTED,
            EventKind::DeviceRemoval => RDMA_CM_EVENT_DEVICE_REMOVAL,
            EventKind::MulticastJoin => RDMA_CM_EVENT_MULTICAST_JOIN,
            EventKind::MulticastError => RDMA_CM_EVENT_MULTICAST_ERROR,
            EventKind::AddrChange => RDMA_CM_EVENT_ADDR_CHANGE,
            EventKind::TimewaitExit => RDMA_CM_EVENT_TIMEWAIT_EXIT,
            EventKind::Other(o) => o,
        }
    }

    /// A failure of what the id was doing (address, route, connection).
    pub fn is_error(self) -> bool {
        matches!(
            self,
            EventKind::AddrError
                | EventKind::RouteError
                | EventKind::ConnectError
                | EventKind::Unreachable
                | EventKind::Rejected
                | EventKind::DeviceRemoval
                | EventKind::MulticastError
        )
    }
}

impl fmt::Display for EventKind {
    /// `rdma_event_str`'s names (`RDMA_CM_EVENT_ESTABLISHED`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            EventKind::AddrResolved => "RDMA_CM_EVENT_ADDR_RESOLVED",
            EventKind::AddrError => "RDMA_CM_EVENT_ADDR_ERROR",
            EventKind::RouteResolved => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            EventKind::RouteError => "RDMA_CM_EVENT_ROUTE_ERROR",
            EventKind::ConnectRequest => "RDMA_CM_EVENT_CONNECT_REQUEST",
            EventKind::ConnectResponse => "RDMA_CM_EVENT_CONNECT_RESPONSE",
            EventKind::ConnectError => "RDMA_CM_EVENT_CONNECT_ERROR",
            EventKind::Unreachable => "RDMA_CM_EVENT_UNREACHABLE",
            EventKind::Rejected => "RDMA_CM_EVENT_REJECTED",
            EventKind::Established => "RDMA_CM_EVENT_ESTABLISHED",
            EventKind::Disconnected => "RDMA_CM_EVENT_DISCONNECTED",
            EventKind::DeviceRemoval => "RDMA_CM_EVENT_DEVICE_REMOVAL",
            EventKind::MulticastJoin => "RDMA_CM_EVENT_MULTICAST_JOIN",
            EventKind::MulticastError => "RDMA_CM_EVENT_MULTICAST_ERROR",
            EventKind::AddrChange => "RDMA_CM_EVENT_ADDR_CHANGE",
            EventKind::TimewaitExit => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            EventKind::Other(n) => return write!(f, "RDMA_CM_EVENT_UNKNOWN({n})"),
        };
        f.write_str(s)
    }
}

/// The connection parameters an RC event carries (`rdma_conn_param`),
/// in local terms (a request's `responder_resources` is what we may
/// serve).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnInfo {
    /// The peer's QP number (requests and replies).
    pub qp_num: u32,
    /// The peer's QP uses an SRQ.
    pub srq: bool,
    /// RDMA READ/atomics the peer may have outstanding at us.
    pub responder_resources: u8,
    /// RDMA READ/atomics we may have outstanding at the peer.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: u8,
    /// Transport retries.
    pub retry_count: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
}

/// What a UD event carries (`rdma_ud_param`): on the active side's
/// `Established`, the peer's QP and how to reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdInfo {
    /// The peer's QP number.
    pub qp_num: u32,
    /// The peer's Q_Key.
    pub qkey: u32,
    /// The address to send to (for [`ProtectionDomain::create_ah`](crate::ProtectionDomain::create_ah)).
    pub ah_attr: AhAttr,
}

/// One CM event, owned: it keeps its id alive (never the other way
/// round: dropping or destroying the id does not wait for events).
#[derive(Debug)]
pub struct Event {
    id: CmId,
    listen_id: Option<CmId>,
    kind: EventKind,
    status: i32,
    conn: Option<ConnInfo>,
    ud: Option<UdInfo>,
    private_data: Vec<u8>,
    ece: (u32, u32),
}

impl Event {
    /// The id it is about (a [`ConnectRequest`](EventKind::ConnectRequest):
    /// the new id, to accept or reject).
    pub fn id(&self) -> &CmId {
        &self.id
    }

    /// The listener a connect request came to.
    pub fn listen_id(&self) -> Option<&CmId> {
        self.listen_id.as_ref()
    }

    /// What happened.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// The kernel's status: 0, -errno, or (REJECTED on IB/RoCE) the IB CM
    /// reject reason.
    pub fn status(&self) -> i32 {
        self.status
    }

    /// The peer's private data as the kernel reports it: on IB and RoCE at
    /// the message's full capacity (a request 56 bytes, a reply 196, a
    /// reject 148, zero-padded), not at the length the peer sent; on
    /// iWARP exactly what was sent.
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// The connection parameters of an RC request, reply or reject.
    pub fn conn_param(&self) -> Option<&ConnInfo> {
        self.conn.as_ref()
    }

    /// The UD parameters (the active side's `Established`: the peer).
    pub fn ud_param(&self) -> Option<&UdInfo> {
        self.ud.as_ref()
    }

    /// The peer's ECE options `(vendor_id, attr_mod)`, 0 when none.
    pub fn ece(&self) -> (u32, u32) {
        self.ece
    }

    /// For an error event, the error it means, naming the address:
    /// `ECONNREFUSED` "nobody listens at ..." for REJECTED with reason 8
    /// (IB CM) or status `-ECONNREFUSED` (iWARP), the errno of `status`
    /// for the others.
    pub fn error(&self) -> Option<Error> {
        self.kind.is_error().then(|| error_of(self))
    }

    /// `Ok(self)` unless it is an error event (then [`error`](Self::error)).
    pub fn into_result(self) -> Result<Event> {
        match self.error() {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }
}

pub(super) fn peer(id: &CmId) -> String {
    match id.peer_addr() {
        Some(CmAddr::Ip(a)) => a.to_string(),
        Some(CmAddr::Ib { gid, .. }) => crate::Gid(gid).to_string(),
        _ => "the peer".to_owned(),
    }
}

fn errno_of(status: i32) -> Errno {
    Errno::from_raw(status.checked_neg().unwrap_or(0).max(0))
}

fn error_of(ev: &Event) -> Error {
    let to = peer(&ev.id);
    let errno = errno_of(ev.status);
    let name = ev.kind;
    match ev.kind {
        EventKind::AddrError => {
            let why = match errno {
                Errno::ENODEV => format!("no RDMA device is on the route to {to}"),
                Errno::ETIMEDOUT => format!("{to} did not answer the address resolution (ARP/ND) in time"),
                Errno::ENETUNREACH | Errno::EHOSTUNREACH => format!("no route to {to}"),
                Errno::EADDRNOTAVAIL => format!("no usable source address for {to}"),
                _ => format!("cannot resolve {to}"),
            };
            Error::os("rdma_resolve_addr", errno).with_message(format!("{why} ({name})"))
        }
        EventKind::RouteError => {
            Error::os("rdma_resolve_route", errno).with_message(format!("no route to {to} ({name})"))
        }
        EventKind::Rejected if ev.status > 0 => {
            let why = match ev.status {
                8 => format!("nobody listens at {to}"),
                28 => format!("{to} rejected the connection"),
                35 => format!("{to} rejected the connection's ECE options"),
                r => format!("{to} rejected the connection (IB CM reason {r})"),
            };
            Error::os("rdma_connect", Errno::ECONNREFUSED).with_message(format!("{why} ({name}, reason {})", ev.status))
        }
        // iWARP: iw_cm reports the TCP connection's refusal as -ECONNREFUSED.
        EventKind::Rejected if errno == Errno::ECONNREFUSED => Error::os("rdma_connect", errno)
            .with_message(format!("nobody listens at {to}: its TCP port refused the connection ({name})")),
        EventKind::Rejected => Error::os("rdma_connect", if ev.status == 0 { Errno::ECONNREFUSED } else { errno })
            .with_message(format!("{to} refused the connection ({name})")),
        EventKind::Unreachable => Error::os("rdma_connect", Errno::ETIMEDOUT)
            .with_message(format!("{to} is unreachable: the connection request got no answer ({name})")),
        EventKind::ConnectError => {
            Error::os("rdma_connect", errno).with_message(format!("connecting to {to} failed ({name})"))
        }
        EventKind::DeviceRemoval => Error::os("rdma_get_cm_event", Errno::ENODEV)
            .with_message(format!("the id's RDMA device was removed ({name})")),
        _ => Error::os("rdma_get_cm_event", errno).with_message(format!("{name} for {to}")),
    }
}

fn conn_info(c: &rdma_ucm_conn_param) -> ConnInfo {
    ConnInfo {
        qp_num: c.qp_num & 0xff_ffff,
        srq: c.srq != 0,
        responder_resources: c.responder_resources,
        initiator_depth: c.initiator_depth,
        flow_control: c.flow_control,
        retry_count: c.retry_count,
        rnr_retry_count: c.rnr_retry_count,
    }
}

/// The params and private data of `raw` for an id of port space `ps`.
fn params(raw: &rdma_ucm_event_resp, ps: PortSpace, kind: EventKind) -> (Option<ConnInfo>, Option<UdInfo>, Vec<u8>) {
    let carries = matches!(
        kind,
        EventKind::ConnectRequest
            | EventKind::ConnectResponse
            | EventKind::Established
            | EventKind::Rejected
            | EventKind::Disconnected
            | EventKind::Other(_)
    );
    match ps {
        PortSpace::Tcp => {
            let c = raw.conn();
            let n = usize::from(c.private_data_len);
            (carries.then(|| conn_info(&c)), None, c.private_data[..n].to_vec())
        }
        PortSpace::Udp => {
            let u = raw.ud();
            let n = usize::from(u.private_data_len);
            let info =
                UdInfo { qp_num: u.qp_num & 0xff_ffff, qkey: u.qkey, ah_attr: AhAttr::from_kernel_ah_attr(&u.ah_attr) };
            let carries = carries && kind != EventKind::Rejected;
            (None, carries.then_some(info), u.private_data[..n].to_vec())
        }
    }
}

/// Decodes one event and does librdmacm's follow-up (`rdma_get_cm_event`);
/// `None` when it is for an id that is gone (then dropped; a connect
/// request's new id is destroyed), or one librdmacm drops too.
pub(crate) fn decode(ch: &EventChannel, raw: &rdma_ucm_event_resp) -> Result<Option<Event>> {
    let mut kind = EventKind::from_raw(raw.event);
    let mut status = raw.status as i32;
    // A uid of 0: old kernels sent it with ESTABLISHED; look up by id then.
    let target = match raw.uid {
        0 if kind == EventKind::Established => ch.inner.lookup_kernel_id(raw.id),
        0 => None,
        uid => ch.inner.lookup(uid),
    };
    let Some(target) = target.map(CmId::from_shared) else {
        tracing::debug!(event = %kind, uid = raw.uid, id = raw.id, "CM event for an id that is gone: dropped");
        if kind == EventKind::ConnectRequest {
            // Its new id is ours to destroy: nobody will accept it.
            let _ = cmd::destroy_id(ch.fd(), raw.id);
        }
        return Ok(None);
    };
    let ps = target.port_space();
    let (conn, ud, private_data) = params(raw, ps, kind);
    let ece = (raw.ece.vendor_id, raw.ece.attr_mod);
    let (id, listen_id) = match kind {
        EventKind::ConnectRequest => {
            let child = CmId::child(ch, ps, raw.id);
            if let Some(c) = &conn {
                let mut st = child.state();
                st.responder_resources = c.responder_resources;
                st.initiator_depth = c.initiator_depth;
                st.remote_ece = raw.ece;
            }
            if let Err(e) = child.query() {
                tracing::debug!(error = %e, "connect request: querying the new id failed; dropped");
                return Ok(None); // dropping `child` destroys it
            }
            (child, Some(target))
        }
        _ => (target, None),
    };
    match kind {
        EventKind::AddrResolved => match id.query() {
            Ok(()) if id.node_guid().is_some() => {}
            Ok(()) => (kind, status) = (EventKind::AddrError, -(Errno::ENODEV as i32)),
            Err(e) => (kind, status) = (EventKind::AddrError, -(e.errno().unwrap_or(Errno::EIO) as i32)),
        },
        EventKind::ConnectResponse => {
            if let Some(q) = id.qp() {
                match qp::process_conn_resp(&id, &q) {
                    Ok(()) => kind = EventKind::Established,
                    Err(e) => {
                        tracing::debug!(error = %e, "processing the connect response failed");
                        id.state().connect_error = true;
                        (kind, status) = (EventKind::ConnectError, -(e.errno().unwrap_or(Errno::EINVAL) as i32));
                    }
                }
            }
        }
        EventKind::Established => {
            if let Some(q) = id.qp() {
                qp::learn_iwarp_state(&q);
            }
        }
        EventKind::Rejected | EventKind::Disconnected => {
            if id.state().connect_error {
                tracing::debug!(event = %kind, "after a failed connect response: dropped, as librdmacm does");
                return Ok(None);
            }
            if let Some(q) = id.qp() {
                qp::to_err(&q);
            }
        }
        _ => {}
    }
    tracing::debug!(event = %kind, status, id = id.kernel_id(), "CM event");
    Ok(Some(Event { id, listen_id, kind, status, conn, ud, private_data, ece }))
}
