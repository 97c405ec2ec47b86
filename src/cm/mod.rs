//! The RDMA connection manager (`librdmacm`'s `rdma_cm`), in pure Rust:
//! connecting queue pairs by IP address and port, interoperable with any
//! rdma_cm peer (rdma-core's `rping`, `ucmatose`, `udaddy`, NVMe-oF, SMB
//! Direct...). It talks to the kernel's CM through
//! `/dev/infiniband/rdma_cm` (the ucma ABI, version 4), never through
//! librdmacm.
//!
//! # Two levels
//!
//! **The convenience calls** return a connected [`QueuePair`](crate::QueuePair)
//! (inside a [`Connection`]), each on an event channel of its own, so no
//! event of another connection gets in the way:
//!
//! ```no_run
//! use std::time::Duration;
//! use rverbs::cm::{self, ConnParam};
//! use rverbs::{QpInitAttr, QpType};
//!
//! // Client: resolve the address and route, make a QP on the device the
//! // route goes through, connect.
//! let id = cm::resolve("192.168.77.1:7471".parse()?, Duration::from_secs(2))?;
//! let ctx = id.context()?;
//! let pd = ctx.alloc_pd()?;
//! let cq = ctx.create_cq(16)?;
//! let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
//! let conn = id.connect_qp(qp, &ConnParam::default(), Duration::from_secs(5))?;
//! // `conn` derefs to the QueuePair: post_send, post_recv, ...
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! and the server side, [`Listener::bind`], [`Listener::get_request`],
//! [`ConnectRequest::accept`]. The README has both in one program.
//!
//! **The CM itself**: an [`EventChannel`] (an fd: [`AsFd`](std::os::fd::AsFd),
//! non-blocking, for any event loop), [`CmId`]s on it with one method per
//! librdmacm call (`bind_addr`, `resolve_addr`, `resolve_route`, `listen`,
//! `connect`, `accept`, `reject`, `disconnect`, `init_qp_attr`, `migrate`,
//! `set_option`...), and owned, decoded [`Event`]s. Reading an event does
//! what `rdma_get_cm_event` does after the read (§A.5 of the project's
//! `rdmacm.md`): the device is queried when an address resolves, a
//! connect request gets its own id, a connect response moves the id's QP
//! through INIT (again: without it rxe refuses the peer's RDMA READ and
//! WRITE), RTR and RTS and answers with the ready-to-use.
//!
//! # What differs from librdmacm on purpose
//!
//! - **Destroying an id never waits.** librdmacm's `rdma_destroy_id`
//!   blocks until every event it reported was acked (the classic hang when
//!   one was not). Here an [`Event`] owns a reference to its id; dropping
//!   the last handle of an id, or [`CmId::destroy`], destroys it at once,
//!   and events the kernel still reports for a dead id are dropped.
//! - **Unknown event numbers are kept** ([`EventKind::Other`]), never a
//!   panic; `UNREACHABLE` can come at any time (since 6.0 also on a
//!   neighbour change) and is reported like any other event.
//! - **A peer's disconnect flushes the QP**: on DISCONNECTED the id's QP is
//!   moved to ERR, so every posted work request completes (flushed).
//! - **Private data limits are checked** before the kernel is asked, with
//!   the transport's limit in the message.
//! - No threads are started; every wait has a timeout.
//!
//! # Devices
//! The kernel picks the device from the address (RoCE: the GID of the
//! netdev the route leaves through). [`CmId::context`] maps it to an rverbs
//! [`Context`](crate::Context) by node GUID and the kernel's device index,
//! opening the device on first use and sharing one `Context` per device
//! while any handle of it lives.

mod channel;
mod connection;
mod device;
mod event;
mod id;
mod qp;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use channel::EventChannel;
pub(crate) use channel::UidHash;
pub use connection::{resolve, resolve_ud, ConnectRequest, Connection, Listener};
pub use event::{ConnInfo, Event, EventKind, UdInfo};
pub use id::{CmId, CmOption};
pub use rverbs_providers::cm::CmAddr;

use crate::Transport;

/// The port space of an id (`enum rdma_port_space`): which QP type it
/// connects and which service ids its ports map to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PortSpace {
    /// `RDMA_PS_TCP`: reliable connected QPs.
    Tcp,
    /// `RDMA_PS_UDP`: unreliable datagram QPs (SIDR on IB/RoCE).
    Udp,
}

impl PortSpace {
    /// `RDMA_PS_*`.
    pub fn raw(self) -> u16 {
        match self {
            PortSpace::Tcp => rverbs_uapi::rdma_user_cm::RDMA_PS_TCP as u16,
            PortSpace::Udp => rverbs_uapi::rdma_user_cm::RDMA_PS_UDP as u16,
        }
    }

    /// The QP type its connections use.
    pub fn qp_type(self) -> crate::QpType {
        match self {
            PortSpace::Tcp => crate::QpType::Rc,
            PortSpace::Udp => crate::QpType::Ud,
        }
    }
}

/// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH`: "the device's maximum" in
/// [`ConnParam::responder_resources`] and [`ConnParam::initiator_depth`].
pub const MAX_DEPTH: u8 = 0xff;

/// The Q_Key of UD ids in `RDMA_PS_UDP` (`RDMA_UDP_QKEY`): the kernel sets
/// it at INIT and a UD peer answers with it.
pub const UDP_QKEY: u32 = 0x0123_4567;

/// Connection parameters (`struct rdma_conn_param`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnParam {
    /// Sent to the peer in the request, reply or reject. The limits depend
    /// on the transport and the message ([`private_data_limit`]).
    pub private_data: Vec<u8>,
    /// RDMA READ/atomics the peer may have outstanding at us;
    /// [`MAX_DEPTH`] = the device's maximum (`max_qp_rd_atom`); on accept,
    /// the smaller of what the peer asked and our maximum.
    pub responder_resources: u8,
    /// RDMA READ/atomics we may have outstanding at the peer; [`MAX_DEPTH`]
    /// = the device's maximum (`max_qp_init_rd_atom`).
    pub initiator_depth: u8,
    /// Whether we do end-to-end flow control (IB CM's REQ field).
    pub flow_control: u8,
    /// Transport retries (RC; 7 at most).
    pub retry_count: u8,
    /// RNR retries (RC; 7 = forever).
    pub rnr_retry_count: u8,
    /// The QP receives from an SRQ (taken from the QP when one is attached).
    pub srq: bool,
    /// The QP number, when no QP is attached to the id (an application that
    /// moves its QP itself, like rping `-q`).
    pub qp_num: Option<u32>,
}

impl Default for ConnParam {
    /// librdmacm's defaults for a NULL parameter: the device's maximum
    /// depths, 7 retries, 7 RNR retries (forever), no private data.
    fn default() -> Self {
        ConnParam {
            private_data: Vec::new(),
            responder_resources: MAX_DEPTH,
            initiator_depth: MAX_DEPTH,
            flow_control: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: false,
            qp_num: None,
        }
    }
}

/// Which message private data rides in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivateDataIn {
    /// A connection request (`rdma_connect`).
    Connect,
    /// The reply (`rdma_accept`).
    Accept,
    /// A reject (`rdma_reject`).
    Reject,
}

/// How many bytes of private data a message can carry
/// (`shared/reference/rdmacm.md` §A.7): on IB and RoCE the IB CM's message
/// sizes less the CM's own header (RC over IP: REQ 56, REP 196; UD: SIDR
/// REQ 180, SIDR REP 136; REJ 148); on iWARP what MPA v2 leaves (248).
pub fn private_data_limit(ps: PortSpace, transport: Transport, what: PrivateDataIn) -> usize {
    if transport == Transport::Iwarp {
        return 248;
    }
    match (ps, what) {
        (PortSpace::Tcp, PrivateDataIn::Connect) => 56,
        (PortSpace::Tcp, PrivateDataIn::Accept) => 196,
        (PortSpace::Udp, PrivateDataIn::Connect) => 180,
        (PortSpace::Udp, PrivateDataIn::Accept) => 136,
        (_, PrivateDataIn::Reject) => 148,
    }
}
