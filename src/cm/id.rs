//! CM ids (`struct rdma_cm_id`): one method per librdmacm call.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rverbs_providers::cm::{self as cmd, CmAddr};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::rdma_user_cm::*;

use super::channel::{next_uid, ChannelShared, EventChannel};
use super::{private_data_limit, qp, ConnParam, PortSpace, PrivateDataIn, MAX_DEPTH};
use crate::{Context, Gid, Guid, QpAttr, QpAttrMask, QpControl, QpState, Transport};

/// What QUERY(ADDR) said about an id's device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DevInfo {
    pub node_guid: Guid,
    pub ibdev_index: u32,
    pub port_num: u8,
}

/// An id's mutable state.
#[derive(Debug, Default)]
pub(crate) struct IdState {
    /// The QP the CM moves through its states (`rdma_create_qp`'s `id->qp`).
    pub qp: Option<QpControl>,
    pub dev: Option<DevInfo>,
    pub src: Option<CmAddr>,
    pub dst: Option<CmAddr>,
    /// QUERY(GID)'s source and destination GIDs, asked for at the first
    /// [`CmId::gids`] after the last QUERY(ADDR) (`None`: not asked yet).
    pub gids: Option<(Option<Gid>, Option<Gid>)>,
    /// Negotiated depths: a request's (in local terms) on a child, what
    /// `connect` sent on the active side.
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub remote_ece: rdma_ucm_ece,
    /// The device's context, once mapped.
    pub context: Option<Context>,
    /// DESTROY_ID was sent.
    pub destroyed: bool,
    /// Processing a connect response failed: the REJECTED/DISCONNECTED the
    /// kernel reports next are dropped (as librdmacm does).
    pub connect_error: bool,
}

/// The kernel id and what it needs; destroyed when the last [`CmId`] (an
/// [`Event`](super::Event) holds one too) goes.
#[derive(Debug)]
pub(crate) struct IdShared {
    uid: u64,
    kernel_id: u32,
    ps: PortSpace,
    channel: Mutex<EventChannel>,
    state: Mutex<IdState>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl IdShared {
    pub(crate) fn kernel_id(&self) -> u32 {
        self.kernel_id
    }

    fn destroy_now(&self) -> Result<u32> {
        let qp = {
            let mut st = lock(&self.state);
            if st.destroyed {
                return Ok(0);
            }
            st.destroyed = true;
            st.qp.take()
        };
        drop(qp); // the QP goes first, as librdmacm's users do it
        let ch = lock(&self.channel).clone();
        ch.inner.unregister(self.uid);
        let n = cmd::destroy_id(ch.fd(), self.kernel_id)?;
        tracing::debug!(id = self.kernel_id, uid = self.uid, events_reported = n, "CM id destroyed (without waiting)");
        Ok(n)
    }
}

impl Drop for IdShared {
    fn drop(&mut self) {
        if let Err(e) = self.destroy_now() {
            tracing::warn!(id = self.kernel_id, error = %e, "rdma_destroy_id failed");
        }
    }
}

/// An RDMA CM id (`struct rdma_cm_id`): a local address, a peer, a
/// connection, or a listener. Cheap to clone (`Send + Sync`); the kernel id
/// is destroyed when the last handle goes (each [`Event`](super::Event)
/// about it holds one) or at [`destroy`](Self::destroy), never waiting.
///
/// Each method issues the ucma command of its librdmacm call; the
/// asynchronous ones (`resolve_addr`, `resolve_route`, `connect`, and
/// `accept` on RC) are answered by an [`Event`](super::Event) on the id's
/// [`channel`](Self::channel).
#[derive(Clone, Debug)]
pub struct CmId(pub(crate) Arc<IdShared>);

/// An option for [`CmId::set_option`] (`rdma_set_option`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CmOption {
    /// `RDMA_OPTION_ID_TOS`: the type of service of the connection's
    /// packets (RoCE: the IP header's TOS byte). Set it before resolving
    /// the route.
    Tos(u8),
    /// `RDMA_OPTION_ID_REUSEADDR`: allow binding an address in use.
    ReuseAddr(bool),
    /// `RDMA_OPTION_ID_AFONLY`: an IPv6 listener takes IPv6 only.
    AfOnly(bool),
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the QP's local ACK timeout exponent
    /// (4.096 µs × 2^t), instead of the one the path gives.
    AckTimeout(u8),
}

impl CmId {
    pub(crate) fn create(ch: &EventChannel, ps: PortSpace) -> Result<CmId> {
        let uid = next_uid();
        let kernel_id = cmd::create_id(ch.fd(), uid, ps.raw(), 0)?;
        Ok(Self::register(ch, ps, uid, kernel_id))
    }

    /// A listener's new id, from a CONNECT_REQUEST: its uid is ours now and
    /// the kernel's at ACCEPT (the kernel drops its events until then).
    pub(crate) fn child(ch: &EventChannel, ps: PortSpace, kernel_id: u32) -> CmId {
        Self::register(ch, ps, next_uid(), kernel_id)
    }

    fn register(ch: &EventChannel, ps: PortSpace, uid: u64, kernel_id: u32) -> CmId {
        let shared = Arc::new(IdShared {
            uid,
            kernel_id,
            ps,
            channel: Mutex::new(ch.clone()),
            state: Mutex::new(IdState::default()),
        });
        ch.inner.register(uid, &shared);
        tracing::debug!(id = kernel_id, uid, ps = ?ps, "CM id created");
        CmId(shared)
    }

    pub(crate) fn from_shared(s: Arc<IdShared>) -> CmId {
        CmId(s)
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, IdState> {
        lock(&self.0.state)
    }

    fn chan(&self) -> Arc<ChannelShared> {
        lock(&self.0.channel).inner.clone()
    }

    /// Fails with a clear error once [`destroy`](Self::destroy) ran.
    fn live(&self, verb: &'static str) -> Result<Arc<ChannelShared>> {
        if self.state().destroyed {
            return Err(Error::check(verb, Errno::ENOENT).with_message("the CM id was destroyed"));
        }
        Ok(self.chan())
    }

    /// The uid the kernel reports in this id's events.
    pub fn uid(&self) -> u64 {
        self.0.uid
    }

    /// The kernel's number for the id.
    pub fn kernel_id(&self) -> u32 {
        self.0.kernel_id
    }

    /// Its port space.
    pub fn port_space(&self) -> PortSpace {
        self.0.ps
    }

    /// The channel its events arrive on.
    pub fn channel(&self) -> EventChannel {
        lock(&self.0.channel).clone()
    }

    /// Both handles name the same id?
    pub fn same_as(&self, other: &CmId) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The local address, once bound or resolved.
    pub fn local_addr(&self) -> Option<CmAddr> {
        self.state().src
    }

    /// The peer's address, once resolved (or, on a listener's id, the
    /// requester's).
    pub fn peer_addr(&self) -> Option<CmAddr> {
        self.state().dst
    }

    /// The local and peer GIDs, once the id has a device: QUERY(GID) at
    /// the first call after the id got its addresses (bind, listen,
    /// ADDR_RESOLVED, a connect request), then kept. `None` without a
    /// device, or when the kernel no longer knows the id. (librdmacm asks
    /// at every such event; the connection itself never needs them: its
    /// QP's addresses come from INIT_QP_ATTR.)
    pub fn gids(&self) -> Option<(Gid, Gid)> {
        // Read apart from the match: the guard of `state()` in the
        // scrutinee would live through `query_gids`, which locks it too.
        let kept = self.state().gids;
        let (s, d) = match kept {
            Some(g) => g,
            None => self.query_gids()?,
        };
        Some((s?, d?))
    }

    /// QUERY(GID) (librdmacm's `ucma_query_gid`), kept for [`gids`](Self::gids).
    fn query_gids(&self) -> Option<(Option<Gid>, Option<Gid>)> {
        self.state().dev?;
        let ch = self.live("ucma_query_gid").ok()?;
        let g = match cmd::query_gid(&ch.fd, self.0.kernel_id) {
            Ok(g) => g,
            Err(e) => {
                tracing::debug!(id = self.0.kernel_id, error = %e, "QUERY(GID) failed: no GIDs");
                return None;
            }
        };
        let gid = |ad: CmAddr| match ad {
            CmAddr::Ib { gid, .. } => Some(Gid(gid)),
            _ => None,
        };
        let gids = (gid(cmd::to_cm_addr(&g.src_addr, g.src_size)), gid(cmd::to_cm_addr(&g.dst_addr, g.dst_size)));
        self.state().gids = Some(gids);
        Some(gids)
    }

    /// The port of the id's device it uses.
    pub fn port_num(&self) -> Option<u8> {
        self.state().dev.map(|d| d.port_num)
    }

    /// The node GUID of the id's device.
    pub fn node_guid(&self) -> Option<Guid> {
        self.state().dev.map(|d| d.node_guid)
    }

    /// The kernel's index of the id's device (`RDMA_NLDEV_ATTR_DEV_INDEX`).
    pub fn device_index(&self) -> Option<u32> {
        self.state().dev.map(|d| d.ibdev_index)
    }

    /// The QP attached with [`attach_qp`](Self::attach_qp).
    pub fn qp(&self) -> Option<QpControl> {
        self.state().qp.clone()
    }

    /// The rverbs context of the id's device (once bound to a specific
    /// address, resolved, or for a connect request), mapped by node GUID
    /// and device index; one context per device is shared while anything
    /// holds it.
    ///
    /// # Errors
    /// `ENODEV` before the id has a device, or when no uverbs device has
    /// its GUID.
    pub fn context(&self) -> Result<Context> {
        super::device::context_of(self)
    }

    /// The transport of the id's device, when known (InfiniBand's limits
    /// otherwise). A connection request's id has a device but no context
    /// yet: its device is looked up (no context opened), so that a
    /// reject's private data limit is the device's.
    pub(crate) fn transport(&self) -> Transport {
        let dev = {
            let st = self.state();
            if let Some(q) = &st.qp {
                return q.context().device().transport();
            }
            if let Some(c) = &st.context {
                return c.device().transport();
            }
            st.dev
        };
        dev.as_ref().map_or(Transport::Ib, super::device::transport_of)
    }

    /// QUERY(ADDR): the device, port and addresses (librdmacm's
    /// `ucma_query_addr`). The GIDs that librdmacm's `ucma_query_gid`
    /// asks for next are asked for at the first [`gids`](Self::gids)
    /// instead: one command less per connection on each side.
    pub(crate) fn query(&self) -> Result<()> {
        let ch = self.chan();
        let a = cmd::query_addr(&ch.fd, self.0.kernel_id)?;
        let src = cmd::to_cm_addr(&a.src_addr, a.src_size);
        let dst = cmd::to_cm_addr(&a.dst_addr, a.dst_size);
        let dev = (a.node_guid != 0).then_some(DevInfo {
            node_guid: Guid::from_raw_be(a.node_guid),
            ibdev_index: a.ibdev_index,
            port_num: a.port_num,
        });
        let mut st = self.state();
        // What the kernel does not report (no peer yet) stays as it was.
        if !matches!(src, CmAddr::None(_)) {
            st.src = Some(src);
        }
        if !matches!(dst, CmAddr::None(_)) {
            st.dst = Some(dst);
        }
        if dev.is_some() {
            if st.dev.is_some_and(|d| Some(d) != dev) {
                st.context = None;
            }
            st.dev = dev;
            st.gids = None;
        }
        Ok(())
    }

    /// Binds the id to a local address (`RDMA_USER_CM_CMD_BIND`, then
    /// QUERY for the device a specific address picks; `rdma_bind_addr`).
    /// Port 0 picks a free port.
    #[doc(alias = "rdma_bind_addr")]
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        let ch = self.live("rdma_bind_addr")?;
        cmd::bind(&ch.fd, self.0.kernel_id, &addr)?;
        self.query()
    }

    /// Starts resolving `dst` to a device and (RoCE) a GID; an
    /// [`AddrResolved`](super::EventKind::AddrResolved) or
    /// [`AddrError`](super::EventKind::AddrError) event follows within
    /// `timeout` (`RDMA_USER_CM_CMD_RESOLVE_ADDR`, `rdma_resolve_addr`).
    /// `src` binds the id first (else the route picks the source).
    #[doc(alias = "rdma_resolve_addr")]
    pub fn resolve_addr(&self, src: Option<SocketAddr>, dst: SocketAddr, timeout: Duration) -> Result<()> {
        let ch = self.live("rdma_resolve_addr")?;
        self.state().dst = Some(CmAddr::Ip(dst));
        cmd::resolve_addr(&ch.fd, self.0.kernel_id, src.as_ref(), &dst, timeout_ms(timeout))
    }

    /// Starts resolving the route to the resolved peer; a
    /// [`RouteResolved`](super::EventKind::RouteResolved) or
    /// [`RouteError`](super::EventKind::RouteError) event follows
    /// (`RDMA_USER_CM_CMD_RESOLVE_ROUTE`, `rdma_resolve_route`).
    #[doc(alias = "rdma_resolve_route")]
    pub fn resolve_route(&self, timeout: Duration) -> Result<()> {
        let ch = self.live("rdma_resolve_route")?;
        cmd::resolve_route(&ch.fd, self.0.kernel_id, timeout_ms(timeout))
    }

    /// Listens on the bound address; each request arrives as a
    /// [`ConnectRequest`](super::EventKind::ConnectRequest) event with a new
    /// id (`RDMA_USER_CM_CMD_LISTEN`, then QUERY; `rdma_listen`). A
    /// `backlog` of 0 or less is the kernel's maximum.
    #[doc(alias = "rdma_listen")]
    pub fn listen(&self, backlog: i32) -> Result<()> {
        let ch = self.live("rdma_listen")?;
        cmd::listen(&ch.fd, self.0.kernel_id, backlog)?;
        self.query()
    }

    fn check_private_data(&self, verb: &'static str, data: &[u8], what: PrivateDataIn) -> Result<()> {
        let transport = self.transport();
        let limit = private_data_limit(self.0.ps, transport, what);
        if data.len() > limit {
            let msg = match what {
                PrivateDataIn::Connect => "a connection request",
                PrivateDataIn::Accept => "a connection reply",
                PrivateDataIn::Reject => "a reject",
            };
            return Err(Error::check(verb, Errno::EINVAL).with_message(format!(
                "{} bytes of private data: {msg} of a {:?} id over {} carries at most {limit}",
                data.len(),
                self.0.ps,
                match transport {
                    Transport::Iwarp => "iWARP",
                    _ => "InfiniBand/RoCE",
                }
            )));
        }
        Ok(())
    }

    /// The device's (max initiator depth, max responder resources).
    fn device_depths(&self) -> Result<(u8, u8)> {
        let ctx = match self.qp() {
            Some(q) => q.context().clone(),
            None => self.context()?,
        };
        let a = ctx.device_attr()?;
        Ok((a.max_qp_init_rd_atom.min(255) as u8, a.max_qp_rd_atom.min(255) as u8))
    }

    /// The kernel's conn_param for `p` with the negotiated depths.
    fn conn_param(&self, verb: &'static str, p: &ConnParam, resp: u8, init: u8) -> Result<rdma_ucm_conn_param> {
        let qp = self.qp();
        let qp_num = match (&qp, p.qp_num) {
            (Some(q), _) => q.qp_num(),
            (None, Some(n)) => n,
            (None, None) => {
                return Err(Error::check(verb, Errno::EINVAL)
                    .with_message("no QP is attached to the id (attach_qp) and ConnParam::qp_num is not set"))
            }
        };
        let mut k = rdma_ucm_conn_param {
            qp_num,
            srq: u8::from(p.srq || qp.as_ref().is_some_and(|q| q.uses_srq())),
            responder_resources: resp,
            initiator_depth: init,
            flow_control: p.flow_control,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            private_data_len: p.private_data.len() as u8,
            ..Default::default()
        };
        k.private_data[..p.private_data.len()].copy_from_slice(&p.private_data);
        Ok(k)
    }

    /// Checks depths other than [`MAX_DEPTH`] against the device, as
    /// librdmacm's `ucma_valid_param` does.
    fn check_depths(&self, verb: &'static str, p: &ConnParam, max_init: u8, max_resp: u8) -> Result<()> {
        let bad = |what: &str, v: u8, max: u8| {
            Error::check(verb, Errno::EINVAL).with_message(format!(
                "{what} {v} is above the device's {max} (use cm::MAX_DEPTH for the device's maximum)"
            ))
        };
        if p.responder_resources != MAX_DEPTH && p.responder_resources > max_resp {
            return Err(bad("responder_resources", p.responder_resources, max_resp));
        }
        if p.initiator_depth != MAX_DEPTH && p.initiator_depth > max_init {
            return Err(bad("initiator_depth", p.initiator_depth, max_init));
        }
        Ok(())
    }

    /// Sends the connection request of a route-resolved id
    /// (`RDMA_USER_CM_CMD_CONNECT`, `rdma_connect`). With a QP attached,
    /// the CONNECT_RESPONSE is processed when it is read (INIT again, RTR,
    /// RTS, ready-to-use) and reported as
    /// [`Established`](super::EventKind::Established), or
    /// [`ConnectError`](super::EventKind::ConnectError); UD ids get
    /// `Established` with the peer's QPN, Q_Key and address.
    ///
    /// # Errors
    /// Private data above the transport's limit, depths above the device's,
    /// no QP and no `qp_num`, or the kernel's refusal.
    #[doc(alias = "rdma_connect")]
    pub fn connect(&self, p: &ConnParam) -> Result<()> {
        const VERB: &str = "rdma_connect";
        let ch = self.live(VERB)?;
        self.check_private_data(VERB, &p.private_data, PrivateDataIn::Connect)?;
        let k = if self.0.ps == PortSpace::Tcp {
            let (max_init, max_resp) = self.device_depths()?;
            self.check_depths(VERB, p, max_init, max_resp)?;
            let init = if p.initiator_depth != MAX_DEPTH { p.initiator_depth } else { max_init };
            let resp = if p.responder_resources != MAX_DEPTH { p.responder_resources } else { max_resp };
            {
                let mut st = self.state();
                st.initiator_depth = init;
                st.responder_resources = resp;
                st.connect_error = false;
            }
            self.conn_param(VERB, p, resp, init)?
        } else {
            self.conn_param(VERB, p, 0, 0)?
        };
        cmd::connect(&ch.fd, self.0.kernel_id, &k, rdma_ucm_ece::default()).map_err(|e| self.refused(e))
    }

    /// iWARP connects TCP within the CONNECT command: a port nobody
    /// listens on fails it with `ECONNREFUSED`, which then names the peer
    /// as IB's REJECTED reason 8 does.
    fn refused(&self, e: Error) -> Error {
        if e.errno() != Some(Errno::ECONNREFUSED) {
            return e;
        }
        let to = super::event::peer(self);
        e.with_message(format!("nobody listens at {to}: its TCP port refused the connection (iWARP)"))
    }

    /// Accepts the connection request of a listener's id
    /// (`RDMA_USER_CM_CMD_ACCEPT`, `rdma_accept`). RC with a QP attached:
    /// the QP goes to RTR and RTS first (INIT again, the kernel's
    /// attributes, RTR's `max_dest_rd_atomic` = responder resources, RTS's
    /// `max_rd_atomic` = initiator depth), and
    /// [`Established`](super::EventKind::Established) follows when the
    /// peer's ready-to-use arrives. UD: the peer learns our QPN and the
    /// Q_Key; no event follows.
    ///
    /// `MAX_DEPTH` depths are the smaller of the request's and the
    /// device's.
    #[doc(alias = "rdma_accept")]
    pub fn accept(&self, p: &ConnParam) -> Result<()> {
        const VERB: &str = "rdma_accept";
        let ch = self.live(VERB)?;
        self.check_private_data(VERB, &p.private_data, PrivateDataIn::Accept)?;
        let k = if self.0.ps == PortSpace::Tcp {
            let (max_init, max_resp) = self.device_depths()?;
            self.check_depths(VERB, p, max_init, max_resp)?;
            let (init, resp) = {
                let mut st = self.state();
                let init =
                    if p.initiator_depth == MAX_DEPTH { st.initiator_depth.min(max_init) } else { p.initiator_depth };
                let resp = if p.responder_resources == MAX_DEPTH {
                    st.responder_resources.min(max_resp)
                } else {
                    p.responder_resources
                };
                st.initiator_depth = init;
                st.responder_resources = resp;
                (init, resp)
            };
            if let Some(q) = self.qp() {
                let moved = qp::to_rtr(self, &q, resp).and_then(|()| qp::to_rts(self, &q, init));
                if let Err(e) = moved {
                    qp::to_err(&q);
                    return Err(e);
                }
            }
            self.conn_param(VERB, p, resp, init)?
        } else {
            self.conn_param(VERB, p, 0, 0)?
        };
        let ece = rdma_ucm_ece { vendor_id: self.state().remote_ece.vendor_id, attr_mod: 0 };
        cmd::accept(&ch.fd, self.0.kernel_id, self.0.uid, &k, ece).inspect_err(|_| {
            if let Some(q) = self.qp() {
                qp::to_err(&q);
            }
        })
    }

    /// Rejects the connection request of a listener's id with
    /// `private_data` (`RDMA_USER_CM_CMD_REJECT`, `rdma_reject`). The
    /// peer gets [`Rejected`](super::EventKind::Rejected) with status 28
    /// (consumer reject) and the data.
    #[doc(alias = "rdma_reject")]
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        const VERB: &str = "rdma_reject";
        let ch = self.live(VERB)?;
        self.check_private_data(VERB, private_data, PrivateDataIn::Reject)?;
        cmd::reject(&ch.fd, self.0.kernel_id, private_data, 0)
    }

    /// Moves the QP to ERR (InfiniBand/RoCE; SQD on iWARP), so its posted
    /// work requests flush, and disconnects (`RDMA_USER_CM_CMD_DISCONNECT`,
    /// `rdma_disconnect`). Both sides get
    /// [`Disconnected`](super::EventKind::Disconnected). A QP in ERR
    /// already (the peer's DISCONNECTED moved it there) is not modified
    /// again: the answer to a peer's disconnect is DISCONNECT alone.
    ///
    /// iWARP: after the DISCONNECT the QP goes on to ERR (the move
    /// rverbs' DISCONNECTED handler makes, made here instead, so that
    /// event moves nothing; librdmacm makes none). SQD starts siw's
    /// graceful close, but its queues are dead from then on: the doorbell
    /// is refused with `ENOTCONN` while it closes, and a send queue that
    /// was busy went to ERROR at once, where the doorbell does nothing.
    /// Only ERR, made by us, lets rverbs flush the requests posted
    /// meanwhile, so every one completes without the caller reading the
    /// CM's events.
    #[doc(alias = "rdma_disconnect")]
    pub fn disconnect(&self) -> Result<()> {
        const VERB: &str = "rdma_disconnect";
        let ch = self.live(VERB)?;
        let q = self.qp().filter(|q| q.state() != QpState::Err);
        let iwarp = q.as_ref().is_some_and(|q| q.context().device().transport() == Transport::Iwarp);
        if let Some(q) = &q {
            let to = if iwarp { QpState::Sqd } else { QpState::Err };
            q.modify(&QpAttr { qp_state: to, ..QpAttr::default() }, QpAttrMask::STATE)?;
        }
        cmd::disconnect(&ch.fd, self.0.kernel_id)?;
        if let Some(q) = q.filter(|_| iwarp) {
            qp::to_err(&q);
        }
        Ok(())
    }

    /// The active side's ready-to-use after a
    /// [`ConnectResponse`](super::EventKind::ConnectResponse), for an
    /// application that moved its QP to RTS itself (no QP attached;
    /// `RDMA_USER_CM_CMD_ACCEPT` with `valid` 0, `rdma_establish`).
    #[doc(alias = "rdma_establish")]
    pub fn establish(&self) -> Result<()> {
        const VERB: &str = "rdma_establish";
        let ch = self.live(VERB)?;
        if self.qp().is_some() {
            return Err(Error::check(VERB, Errno::EINVAL)
                .with_message("the id has a QP attached: the connect response was processed when it was read"));
        }
        cmd::establish(&ch.fd, self.0.kernel_id)
    }

    /// The attributes and mask the kernel's CM wants for moving the id's
    /// QP to `state` (`RDMA_USER_CM_CMD_INIT_QP_ATTR`, `rdma_init_qp_attr`),
    /// ready for [`QpControl::modify`]. Access bits are kept as the kernel
    /// gives them (6.12's rxe adds `FLUSH_GLOBAL | FLUSH_PERSISTENT`).
    #[doc(alias = "rdma_init_qp_attr")]
    pub fn init_qp_attr(&self, state: QpState) -> Result<(QpAttr, QpAttrMask)> {
        let ch = self.live("rdma_init_qp_attr")?;
        let a = cmd::init_qp_attr(&ch.fd, self.0.kernel_id, state as u32)?;
        Ok(qp::from_kernel(&a))
    }

    /// Makes `qp` the id's QP and moves it to INIT with the kernel's
    /// attributes (UD: on to RTS, Q_Key included), as `rdma_create_qp`
    /// does for the QP it creates. The CM then moves it on: RTR/RTS when a
    /// connect response is read or at [`accept`](Self::accept), ERR on
    /// reject, disconnect and destroy.
    ///
    /// Attaching the QP that is attached already does nothing, so that
    /// receives can be posted between `attach_qp` and
    /// [`connect_qp`](Self::connect_qp) or
    /// [`ConnectRequest::accept`](super::ConnectRequest::accept) (a QP takes
    /// receives from INIT on; the peer may send as soon as it is connected).
    ///
    /// # Errors
    /// The QP is of another device or type, or the modify failed.
    pub fn attach_qp(&self, q: &QpControl) -> Result<()> {
        const VERB: &str = "rdma_create_qp";
        self.live(VERB)?;
        if self.state().qp.as_ref().is_some_and(|a| a.same_qp(q)) {
            return Ok(());
        }
        if q.qp_type() != self.0.ps.qp_type() {
            return Err(Error::check(VERB, Errno::EINVAL).with_message(format!(
                "a {} QP cannot be attached to a {:?} id (it connects {} QPs)",
                q.qp_type(),
                self.0.ps,
                self.0.ps.qp_type()
            )));
        }
        if !super::device::same_device(self, q.context())? {
            return Err(Error::check(VERB, Errno::EINVAL).with_message(format!(
                "the QP is on {}, but the id's route goes through another device (use CmId::context())",
                q.context().device().name()
            )));
        }
        qp::init(self, q)?;
        self.state().qp = Some(q.clone());
        Ok(())
    }

    /// Forgets the attached QP (the CM no longer moves it).
    pub fn detach_qp(&self) -> Option<QpControl> {
        self.state().qp.take()
    }

    /// Moves the id (and its queued events) to `to`
    /// (`RDMA_USER_CM_CMD_MIGRATE_ID`, written to the new fd;
    /// `rdma_migrate_id`). Its later events arrive there.
    #[doc(alias = "rdma_migrate_id")]
    pub fn migrate(&self, to: &EventChannel) -> Result<()> {
        let from = self.live("rdma_migrate_id")?;
        if Arc::ptr_eq(&from, &to.inner) {
            return Ok(());
        }
        // Known to `to` before the kernel moves it there: an event that
        // another thread reads from `to` right after the command must find
        // the id (audit-2 N8: it was dropped as an event of a gone id).
        to.inner.register(self.0.uid, &self.0);
        if let Err(e) = cmd::migrate_id(to.fd(), self.0.kernel_id, from.fd.raw()) {
            to.inner.unregister(self.0.uid);
            return Err(e);
        }
        let mut ch = lock(&self.0.channel);
        from.unregister(self.0.uid);
        *ch = to.clone();
        Ok(())
    }

    /// Sets an option (`RDMA_USER_CM_CMD_SET_OPTION`, `rdma_set_option`).
    #[doc(alias = "rdma_set_option")]
    pub fn set_option(&self, opt: CmOption) -> Result<()> {
        let ch = self.live("rdma_set_option")?;
        let (name, val): (u32, Vec<u8>) = match opt {
            CmOption::Tos(t) => (RDMA_OPTION_ID_TOS, vec![t]),
            CmOption::ReuseAddr(b) => (RDMA_OPTION_ID_REUSEADDR, i32::from(b).to_ne_bytes().to_vec()),
            CmOption::AfOnly(b) => (RDMA_OPTION_ID_AFONLY, i32::from(b).to_ne_bytes().to_vec()),
            CmOption::AckTimeout(t) => (RDMA_OPTION_ID_ACK_TIMEOUT, vec![t]),
        };
        cmd::set_option(&ch.fd, self.0.kernel_id, RDMA_OPTION_ID, name, &val)
    }

    /// Tells the CM about a QP event (`RDMA_USER_CM_CMD_NOTIFY`,
    /// `rdma_notify`): `event` is an `ibv_event_type`, e.g. 9
    /// (`IBV_EVENT_COMM_EST`) when a receive completes before the
    /// ready-to-use arrived.
    #[doc(alias = "rdma_notify")]
    pub fn notify(&self, event: u32) -> Result<()> {
        let ch = self.live("rdma_notify")?;
        cmd::notify(&ch.fd, self.0.kernel_id, event)
    }

    /// Destroys the kernel id now (`RDMA_USER_CM_CMD_DESTROY_ID`,
    /// `rdma_destroy_id`), whatever other handles and unread or kept events
    /// still name it, and returns how many of its events the kernel had
    /// reported. Never waits. The attached QP is let go first; the other
    /// handles' commands fail with `ENOENT` afterwards.
    #[doc(alias = "rdma_destroy_id")]
    pub fn destroy(self) -> Result<u32> {
        self.0.destroy_now()
    }
}

fn timeout_ms(t: Duration) -> u32 {
    u32::try_from(t.as_millis()).unwrap_or(u32::MAX).max(1)
}
