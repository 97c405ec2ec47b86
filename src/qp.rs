//! Queue pairs (`ibv_qp`): create, modify through the state machine (checked
//! before the kernel sees it), query, destroy; and helpers that take a QP
//! from RESET to RTS given the remote endpoint.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use rverbs_providers::cmd::qp as cmd;
use rverbs_providers::driver::Provider;
use rverbs_providers::{mlx5, rxe};
use rverbs_providers::{Errno, Error, Result};
use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_qp_cap;
use rverbs_uapi::ib_user_verbs::{
    ib_uverbs_ah_attr, ib_uverbs_global_route, ib_uverbs_modify_qp, ib_uverbs_qp_dest, ib_uverbs_query_qp_resp,
};
use tracing::debug;
use zerocopy::{FromZeros, IntoBytes};

use crate::attr::{LinkLayer, Mtu};
use crate::cq::{need_provider, CqShared};
use crate::event::EventObject;
use crate::post::{RecvDriver, RecvQueue, SendDriver, SendQueue};
use crate::qp_state::{check_transition, QpAttrMask, QpState, QpType};
use crate::srq::SrqShared;
use crate::{AccessFlags, CompletionQueue, Context, Gid, GidType, ProtectionDomain, SharedReceiveQueue};

/// Capacities of a QP's queues (`struct ibv_qp_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpCap {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Outstanding receive work requests (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send work request.
    pub max_inline_data: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
    }
}

impl From<ib_uverbs_qp_cap> for QpCap {
    fn from(c: ib_uverbs_qp_cap) -> Self {
        QpCap {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }
}

impl From<QpCap> for ib_uverbs_qp_cap {
    fn from(c: QpCap) -> Self {
        ib_uverbs_qp_cap {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }
}

/// What to create (`struct ibv_qp_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr<'a> {
    /// RC, UC or UD (what rxe supports).
    pub qp_type: QpType,
    /// CQ for send completions.
    pub send_cq: &'a CompletionQueue,
    /// CQ for receive completions (may be the same as `send_cq`).
    pub recv_cq: &'a CompletionQueue,
    /// Receive from this SRQ instead of an own receive queue.
    pub srq: Option<&'a SharedReceiveQueue>,
    /// Requested capacities (the kernel may round up; see [`QueuePair::cap`]).
    pub cap: QpCap,
    /// Every send work request completes with a CQE, signaled or not.
    pub sq_sig_all: bool,
}

impl<'a> QpInitAttr<'a> {
    /// A QP of `qp_type` using `cq` for both directions, default caps.
    pub fn new(qp_type: QpType, cq: &'a CompletionQueue) -> Self {
        QpInitAttr { qp_type, send_cq: cq, recv_cq: cq, srq: None, cap: QpCap::default(), sq_sig_all: false }
    }
}

/// The GRH part of an address (`struct ibv_global_route`). RoCE always needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalRoute {
    /// Destination GID.
    pub dgid: Gid,
    /// Flow label (RoCE v2: also picks the UDP source port on some devices).
    pub flow_label: u32,
    /// Index of our GID (RoCE: this picks v1 or v2 and the netdev).
    pub sgid_index: u8,
    /// Hop limit (the kernel overwrites it with the route's for RoCE RC/UC).
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2).
    pub traffic_class: u8,
}

/// An address vector (`struct ibv_ah_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AhAttr {
    /// Destination LID (InfiniBand; 0 for RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate.
    pub static_rate: u8,
    /// Local port.
    pub port_num: u8,
    /// Global route header; required for RoCE.
    pub grh: Option<GlobalRoute>,
}

impl AhAttr {
    pub(crate) fn to_dest(self) -> ib_uverbs_qp_dest {
        let g = self.grh.unwrap_or_default();
        ib_uverbs_qp_dest {
            dgid: g.dgid.0,
            flow_label: g.flow_label,
            dlid: self.dlid,
            reserved: 0,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            sl: self.sl,
            src_path_bits: self.src_path_bits,
            static_rate: self.static_rate,
            is_global: self.grh.is_some().into(),
            port_num: self.port_num,
        }
    }

    /// The kernel's `ib_uverbs_ah_attr` (CREATE_AH's address).
    pub(crate) fn to_kernel_ah_attr(self) -> ib_uverbs_ah_attr {
        let g = self.grh.unwrap_or_default();
        ib_uverbs_ah_attr {
            grh: ib_uverbs_global_route {
                dgid: g.dgid.0,
                flow_label: g.flow_label,
                sgid_index: g.sgid_index,
                hop_limit: g.hop_limit,
                traffic_class: g.traffic_class,
                reserved: 0,
            },
            dlid: self.dlid,
            sl: self.sl,
            src_path_bits: self.src_path_bits,
            static_rate: self.static_rate,
            is_global: self.grh.is_some().into(),
            port_num: self.port_num,
            reserved: 0,
        }
    }

    fn from_dest(d: &ib_uverbs_qp_dest) -> Self {
        AhAttr {
            dlid: d.dlid,
            sl: d.sl,
            src_path_bits: d.src_path_bits,
            static_rate: d.static_rate,
            port_num: d.port_num,
            grh: (d.is_global != 0).then_some(GlobalRoute {
                dgid: Gid(d.dgid),
                flow_label: d.flow_label,
                sgid_index: d.sgid_index,
                hop_limit: d.hop_limit,
                traffic_class: d.traffic_class,
            }),
        }
    }
}

/// QP attributes for modify and query (`struct ibv_qp_attr`). Only the
/// fields named in the attribute mask are used by a modify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// `STATE`: the state to move to.
    pub qp_state: QpState,
    /// `CUR_STATE`: the state the caller believes the QP is in.
    pub cur_qp_state: QpState,
    /// `PATH_MTU`.
    pub path_mtu: Mtu,
    /// `PATH_MIG_STATE` (0 migrated, 1 rearm, 2 armed).
    pub path_mig_state: u8,
    /// `QKEY` (UD).
    pub qkey: u32,
    /// `RQ_PSN`: expected PSN of the first incoming packet (24 bits).
    pub rq_psn: u32,
    /// `SQ_PSN`: PSN of the first outgoing packet (24 bits).
    pub sq_psn: u32,
    /// `DEST_QPN`: the remote QP number.
    pub dest_qp_num: u32,
    /// `ACCESS_FLAGS`: what remote peers may do (remote read/write/atomic).
    pub qp_access_flags: AccessFlags,
    /// Capacities (reported by query; `CAP` to resize where supported).
    pub cap: QpCap,
    /// `AV`: the primary path.
    pub ah_attr: AhAttr,
    /// `ALT_PATH`: the alternate path.
    pub alt_ah_attr: AhAttr,
    /// `PKEY_INDEX`.
    pub pkey_index: u16,
    /// `ALT_PATH`: alternate P_Key index.
    pub alt_pkey_index: u16,
    /// `EN_SQD_ASYNC_NOTIFY`.
    pub en_sqd_async_notify: bool,
    /// Query only: the SQ is draining (SQD).
    pub sq_draining: bool,
    /// `MAX_QP_RD_ATOMIC`: outstanding RDMA READ/atomics we initiate.
    pub max_rd_atomic: u8,
    /// `MAX_DEST_RD_ATOMIC`: outstanding RDMA READ/atomics we serve.
    pub max_dest_rd_atomic: u8,
    /// `MIN_RNR_TIMER`.
    pub min_rnr_timer: u8,
    /// `PORT`.
    pub port_num: u8,
    /// `TIMEOUT` (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// `RETRY_CNT`.
    pub retry_cnt: u8,
    /// `RNR_RETRY` (7 = infinite).
    pub rnr_retry: u8,
    /// `ALT_PATH`: alternate port.
    pub alt_port_num: u8,
    /// `ALT_PATH`: alternate timeout.
    pub alt_timeout: u8,
    /// `RATE_LIMIT` (kbps; extended modify only).
    pub rate_limit: u32,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            path_mtu: Mtu::Mtu1024,
            path_mig_state: 0,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            qp_access_flags: AccessFlags::empty(),
            cap: QpCap { max_send_wr: 0, max_recv_wr: 0, max_send_sge: 0, max_recv_sge: 0, max_inline_data: 0 },
            ah_attr: AhAttr::default(),
            alt_ah_attr: AhAttr::default(),
            pkey_index: 0,
            alt_pkey_index: 0,
            en_sqd_async_notify: false,
            sq_draining: false,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            port_num: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            alt_port_num: 0,
            alt_timeout: 0,
            rate_limit: 0,
        }
    }
}

impl QpAttr {
    /// The `ib_uverbs_modify_qp` body for `mask` (exactly 112 bytes).
    pub(crate) fn to_kernel(self, handle: u32, mask: QpAttrMask) -> ib_uverbs_modify_qp {
        let mut m = ib_uverbs_modify_qp::new_zeroed();
        m.dest = self.ah_attr.to_dest();
        m.alt_dest = self.alt_ah_attr.to_dest();
        m.qp_handle = handle;
        m.attr_mask = (mask - QpAttrMask::RATE_LIMIT).bits();
        m.qkey = self.qkey;
        m.rq_psn = self.rq_psn;
        m.sq_psn = self.sq_psn;
        m.dest_qp_num = self.dest_qp_num;
        m.qp_access_flags = self.qp_access_flags.bits();
        m.pkey_index = self.pkey_index;
        m.alt_pkey_index = self.alt_pkey_index;
        m.qp_state = self.qp_state as u8;
        m.cur_qp_state = self.cur_qp_state as u8;
        m.path_mtu = self.path_mtu.raw();
        m.path_mig_state = self.path_mig_state;
        m.en_sqd_async_notify = self.en_sqd_async_notify.into();
        m.max_rd_atomic = self.max_rd_atomic;
        m.max_dest_rd_atomic = self.max_dest_rd_atomic;
        m.min_rnr_timer = self.min_rnr_timer;
        m.port_num = self.port_num;
        m.timeout = self.timeout;
        m.retry_cnt = self.retry_cnt;
        m.rnr_retry = self.rnr_retry;
        m.alt_port_num = self.alt_port_num;
        m.alt_timeout = self.alt_timeout;
        m
    }

    fn from_kernel(r: &ib_uverbs_query_qp_resp) -> Self {
        QpAttr {
            qp_state: QpState::from_raw(r.qp_state).unwrap_or(QpState::Err),
            cur_qp_state: QpState::from_raw(r.cur_qp_state).unwrap_or(QpState::Err),
            path_mtu: Mtu::from_raw(r.path_mtu),
            path_mig_state: r.path_mig_state,
            qkey: r.qkey,
            rq_psn: r.rq_psn,
            sq_psn: r.sq_psn,
            dest_qp_num: r.dest_qp_num,
            qp_access_flags: AccessFlags::from_bits_retain(r.qp_access_flags),
            cap: QpCap {
                max_send_wr: r.max_send_wr,
                max_recv_wr: r.max_recv_wr,
                max_send_sge: r.max_send_sge,
                max_recv_sge: r.max_recv_sge,
                max_inline_data: r.max_inline_data,
            },
            ah_attr: AhAttr::from_dest(&r.dest),
            alt_ah_attr: AhAttr::from_dest(&r.alt_dest),
            pkey_index: r.pkey_index,
            alt_pkey_index: r.alt_pkey_index,
            en_sqd_async_notify: false,
            sq_draining: r.sq_draining != 0,
            max_rd_atomic: r.max_rd_atomic,
            max_dest_rd_atomic: r.max_dest_rd_atomic,
            min_rnr_timer: r.min_rnr_timer,
            port_num: r.port_num,
            timeout: r.timeout,
            retry_cnt: r.retry_cnt,
            rnr_retry: r.rnr_retry,
            alt_port_num: r.alt_port_num,
            alt_timeout: r.alt_timeout,
            rate_limit: 0,
        }
    }
}

/// The kernel QP and what keeps it alive: PD, CQs, SRQ.
#[derive(Debug)]
pub(crate) struct QpShared {
    pd: ProtectionDomain,
    // Held so the CQs and SRQ outlive the QP that reports into them.
    send_cq: Arc<CqShared>,
    recv_cq: Arc<CqShared>,
    _srq: Option<Arc<SrqShared>>,
    /// mlx5: the provider's shared QP state. It owns the queue memory and
    /// is registered in the mlx5 context until the kernel QP is destroyed,
    /// so the send and receive halves may be dropped at any time.
    mlx5: Option<Arc<mlx5::QpShared>>,
    handle: u32,
    qp_num: u32,
    qp_type: QpType,
    cap: QpCap,
    user_handle: u64,
    /// Last state a modify or query saw (the kernel and device may move the
    /// QP to ERR/SQE on their own).
    pub(crate) state: AtomicU8,
    /// Port set at RESET→INIT (0 before).
    port: AtomicU8,
    live: bool,
}

impl QpShared {
    fn destroy(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        let events = match cmd::destroy_qp(self.pd.context().fd(), self.handle) {
            Ok(ev) => ev,
            Err(e) => {
                // The kernel QP may still exist: an mlx5 QP's memory is
                // leaked (it stays registered, and this reference is never
                // released, not even when the context goes).
                if let Some(mqp) = &self.mlx5 {
                    std::mem::forget(mqp.clone());
                }
                return Err(e);
            }
        };
        self.pd.context().unregister(self.user_handle);
        if let (Some(m), Some(mqp)) = (self.pd.context().mlx5(), &self.mlx5) {
            // The HCA writes nothing more for this QP. Its completions still
            // in the CQs go (cleaned now, or at each CQ's next poll, the
            // request holding the QP and its user index until then); then
            // it leaves the registry, and its memory goes with the last
            // reference.
            self.clean_cqs(m, mqp);
            m.qp_shared_destroyed(mqp);
        }
        debug!(handle = self.handle, qp_num = self.qp_num, async_events = events, "QP destroyed");
        Ok(())
    }

    /// mlx5: removes (or has removed) `mqp`'s completions from both CQs.
    fn clean_cqs(&self, m: &mlx5::Context, mqp: &Arc<mlx5::QpShared>) {
        self.send_cq.clean_qp(m, mqp);
        if !Arc::ptr_eq(&self.send_cq, &self.recv_cq) {
            self.recv_cq.clean_qp(m, mqp);
        }
    }
}

impl Drop for QpShared {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.handle, error = %e, "QP destroy failed");
        }
    }
}

/// A queue pair.
///
/// ```no_run
/// use rverbs::{QpInitAttr, QpType, RemoteEndpoint, ConnectOptions};
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// let cq = ctx.create_cq(64, None, 0)?;
/// let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
/// // ... exchange qp.qp_num(), a PSN and our GID with the peer, then:
/// # let remote = RemoteEndpoint { lid: 0, qpn: 0, psn: 0, gid: Default::default() };
/// qp.connect(&remote, 0x1234, &ConnectOptions::default())?;   // RESET -> INIT -> RTR -> RTS
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct QueuePair {
    // The rings go before the kernel object.
    pub(crate) sq: SendQueue,
    pub(crate) rq: Option<RecvQueue>,
    shared: Arc<QpShared>,
}

impl ProtectionDomain {
    /// Creates a QP (`UVERBS_METHOD_QP_CREATE`, `ibv_create_qp`).
    ///
    /// # Errors
    /// Caps above the device's limits, CQs/SRQ of another context, a QP type
    /// the device does not support.
    #[doc(alias = "ibv_create_qp")]
    pub fn create_qp(&self, init: &QpInitAttr<'_>) -> Result<QueuePair> {
        const VERB: &str = "ibv_create_qp";
        let ctx = self.context();
        let _span = tracing::debug_span!("ibv_create_qp", qp_type = %init.qp_type).entered();
        let provider = need_provider(ctx, VERB, "queue pairs")?;
        check_caps(ctx, init)?;
        for cq in [init.send_cq, init.recv_cq] {
            if !cq.context().same_as(ctx) {
                return Err(Error::os(VERB, Errno::EINVAL).with_message("a CQ belongs to another device context"));
            }
        }
        if let Some(srq) = init.srq {
            if !srq.pd().context().same_as(ctx) {
                return Err(Error::os(VERB, Errno::EINVAL).with_message("the SRQ belongs to another device context"));
            }
        }
        // mlx5: size the queues and allocate their memory first; the core
        // command then carries the capacities the provider settled on.
        let prepared = match provider {
            Provider::Mlx5 => {
                let m = ctx.mlx5_or_err(VERB)?;
                let srq = match init.srq {
                    Some(s) => Some(s.mlx5_shared().cloned().ok_or_else(|| {
                        Error::os(VERB, Errno::EINVAL).with_message("the SRQ has no mlx5 receive queue")
                    })?),
                    None => None,
                };
                let (pending, udata) = m.qp_prepare(&mlx5_prepare_args(init, srq)?)?;
                Some((m, pending, udata))
            }
            Provider::Rxe => None,
        };
        let cap = prepared.as_ref().map_or(init.cap, |(_, p, _)| cap_of(p.core_caps()));
        let user_handle = ctx.register(|h| EventObject::Qp { qp_num: 0, user_handle: h });
        let args = cmd::CreateQp {
            qp_type: init.qp_type.to_kernel(),
            pd: self.handle(),
            send_cq: init.send_cq.handle(),
            recv_cq: init.recv_cq.handle(),
            srq: init.srq.map(|s| s.handle()),
            cap: cap.into(),
            sq_sig_all: init.sq_sig_all,
            user_handle,
        };
        let drv_in = prepared.as_ref().map_or(&[][..], |(_, _, u)| u.as_bytes());
        let out_len = match provider {
            Provider::Rxe => rxe::QP_RESP_LEN,
            Provider::Mlx5 => mlx5::QP_RESP_LEN,
        };
        let mut drv_out = [0u8; DRV_OUT_LEN];
        // On failure `prepared` (mlx5's memory) is dropped: the kernel never took it.
        let created = cmd::create_qp(ctx.fd(), &args, drv_in, &mut drv_out[..out_len])
            .inspect_err(|_| ctx.unregister(user_handle))?;
        ctx.update_registration(user_handle, EventObject::Qp { qp_num: created.qpn, user_handle });
        let make_shared = |cap: QpCap, mlx5: Option<Arc<mlx5::QpShared>>| QpShared {
            pd: self.clone(),
            send_cq: init.send_cq.shared.clone(),
            recv_cq: init.recv_cq.shared.clone(),
            _srq: init.srq.map(|s| s.shared.clone()),
            mlx5,
            handle: created.handle,
            qp_num: created.qpn,
            qp_type: init.qp_type,
            cap,
            user_handle,
            state: AtomicU8::new(QpState::Reset as u8),
            port: AtomicU8::new(0),
            live: true,
        };
        let (sq, rq, shared) = match prepared {
            None => {
                let shared = Arc::new(make_shared(created.cap.into(), None));
                // On failure from here, dropping `shared` destroys the kernel QP.
                let transport = match init.qp_type {
                    QpType::Rc => rxe::Transport::Rc,
                    QpType::Uc => rxe::Transport::Uc,
                    _ => rxe::Transport::Ud,
                };
                let info = rxe::QpInfo {
                    handle: created.handle,
                    send: rxe::SendLimits {
                        transport,
                        max_sge: created.cap.max_send_sge,
                        max_inline: created.cap.max_inline_data,
                    },
                    max_recv_sge: created.cap.max_recv_sge,
                    has_srq: init.srq.is_some(),
                };
                let q = rxe::qp_finish(ctx.fd_arc(), &drv_out[..out_len], &info, ctx.rxe_avs())?;
                (SendDriver::Rxe(q.sq), q.rq.map(RecvDriver::Rxe), shared)
            }
            // Nothing fallible between the kernel create and `qp_finish`:
            // `pending` must not be dropped while the kernel QP exists.
            Some((m, pending, _)) => {
                // The provider's capacities, not the kernel's echo of the request.
                let cap = cap_of(pending.caps());
                match m.qp_finish(pending, &drv_out[..out_len], created.qpn) {
                    Ok(q) => {
                        let shared = Arc::new(make_shared(cap, Some(q.shared().clone())));
                        let mlx5::Qp { sq, rq, .. } = q;
                        (SendDriver::Mlx5(sq), rq.map(RecvDriver::Mlx5), shared)
                    }
                    Err(mlx5::FinishError { error, pending }) => {
                        // The kernel QP uses the pending memory: destroy it first.
                        let mut s = make_shared(cap, None);
                        match s.destroy() {
                            Ok(()) => drop(pending),
                            Err(_) => std::mem::forget(pending),
                        }
                        return Err(error);
                    }
                }
            }
        };
        debug!(handle = created.handle, qp_num = created.qpn, "QP created");
        Ok(QueuePair {
            sq: SendQueue::new(sq, shared.clone()),
            rq: rq.map(|ring| RecvQueue::new(ring, shared.clone())),
            shared,
        })
    }
}

/// Room for the largest driver answer to create-QP.
const DRV_OUT_LEN: usize = if rxe::QP_RESP_LEN > mlx5::QP_RESP_LEN { rxe::QP_RESP_LEN } else { mlx5::QP_RESP_LEN };

fn cap_of(c: mlx5::QpCaps) -> QpCap {
    QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// What the mlx5 provider sizes a QP from: the transport, the requested
/// capacities, the SRQ's provider state, `sq_sig_all`. The provider's
/// queues carry RC, UC and UD.
pub(crate) fn mlx5_prepare_args(
    init: &QpInitAttr<'_>,
    srq: Option<Arc<mlx5::SrqShared>>,
) -> Result<mlx5::QpPrepareArgs> {
    mlx5_prepare_args_of(init.qp_type, init.cap, srq, init.sq_sig_all)
}

fn mlx5_prepare_args_of(
    qp_type: QpType,
    cap: QpCap,
    srq: Option<Arc<mlx5::SrqShared>>,
    sq_sig_all: bool,
) -> Result<mlx5::QpPrepareArgs> {
    let qp_type = match qp_type {
        QpType::Rc => mlx5::QpType::Rc,
        QpType::Uc => mlx5::QpType::Uc,
        QpType::Ud => mlx5::QpType::Ud,
        other => {
            return Err(Error::os("ibv_create_qp", Errno::EOPNOTSUPP)
                .with_message(format!("the rverbs mlx5 provider creates RC, UC and UD QPs, not {other}")))
        }
    };
    let caps = mlx5::QpCaps {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
    };
    Ok(mlx5::QpPrepareArgs { qp_type, caps, srq, sq_sig_all })
}

fn check_caps(ctx: &Context, init: &QpInitAttr<'_>) -> Result<()> {
    let a = ctx.device_attr()?;
    let c = &init.cap;
    let too_big = |what: &str, v: u32, max: u32| {
        Error::os("ibv_create_qp", Errno::EINVAL).with_message(format!("{what} {v} is above the device's limit {max}"))
    };
    if c.max_send_wr > a.max_qp_wr {
        return Err(too_big("max_send_wr", c.max_send_wr, a.max_qp_wr));
    }
    if init.srq.is_none() && c.max_recv_wr > a.max_qp_wr {
        return Err(too_big("max_recv_wr", c.max_recv_wr, a.max_qp_wr));
    }
    if c.max_send_sge > a.max_sge {
        return Err(too_big("max_send_sge", c.max_send_sge, a.max_sge));
    }
    if c.max_recv_sge > a.max_sge {
        return Err(too_big("max_recv_sge", c.max_recv_sge, a.max_sge));
    }
    Ok(())
}

impl QueuePair {
    /// The PD it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.shared.pd
    }
    /// The context.
    pub fn context(&self) -> &Context {
        self.shared.pd.context()
    }
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.shared.handle
    }
    /// The QP number peers address.
    pub fn qp_num(&self) -> u32 {
        self.shared.qp_num
    }
    /// RC, UC or UD.
    pub fn qp_type(&self) -> QpType {
        self.shared.qp_type
    }
    /// The capacities the kernel granted (at least what was asked).
    pub fn cap(&self) -> QpCap {
        self.shared.cap
    }
    /// The value async events carry for this QP.
    pub fn user_handle(&self) -> u64 {
        self.shared.user_handle
    }
    /// The state as of the last modify or query.
    pub fn state(&self) -> QpState {
        QpState::from_raw(self.shared.state.load(Ordering::Relaxed)).unwrap_or(QpState::Err)
    }

    /// Modifies the QP (`IB_USER_VERBS_CMD_MODIFY_QP` through `INVOKE_WRITE`;
    /// the extended command when `RATE_LIMIT` is set), `ibv_modify_qp`.
    ///
    /// The transition and the mask are checked against the IBTA state table
    /// first; an illegal one is an error naming the states and bits, and the
    /// kernel never sees it. Addresses are checked too: RoCE needs a GRH,
    /// the source GID index must exist.
    ///
    /// mlx5: the provider learns the new state (sends need RTS, receives
    /// INIT; RESET starts the queue indices over). The completions a QP
    /// moved to RESET left in its CQs are removed at each CQ's next
    /// [`poll`](crate::CompletionQueue::poll) (rverbs cannot reach a CQ's
    /// poller from here without a lock on the poll path); until then
    /// RESET → INIT fails with `EBUSY`.
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        const VERB: &str = "ibv_modify_qp";
        let cur = if mask.contains(QpAttrMask::CUR_STATE) { attr.cur_qp_state } else { self.state() };
        let next = if mask.contains(QpAttrMask::STATE) { attr.qp_state } else { cur };
        let _span =
            tracing::debug_span!("ibv_modify_qp", qp_num = self.qp_num(), from = %cur, to = %next, mask = %mask)
                .entered();
        check_transition(self.qp_type(), cur, next, mask)
            .map_err(|e| Error::os(VERB, Errno::EINVAL).with_message(e.to_string()))?;
        self.check_attrs(attr, mask)?;
        let mlx5 = self.context().mlx5().zip(self.shared.mlx5.as_ref());
        if let Some((m, mqp)) = mlx5 {
            if cur == QpState::Reset && next == QpState::Init && m.clean_pending(mqp) {
                return Err(Error::os(VERB, Errno::EBUSY).with_message(
                    "on mlx5 the completions this QP left before its move to RESET are removed when its CQs \
                     are next polled, and that has not happened yet: poll its CQs once (an empty slice is \
                     enough), then retry",
                ));
            }
        }
        let req = attr.to_kernel(self.handle(), mask);
        let rate = mask.contains(QpAttrMask::RATE_LIMIT).then_some(attr.rate_limit);
        let path = cmd::modify_qp(self.context().fd(), &req, rate).map_err(|e| self.modify_error(e, attr, mask))?;
        if mask.contains(QpAttrMask::STATE) {
            self.shared.state.store(next as u8, Ordering::Relaxed);
            if let Some((m, mqp)) = mlx5 {
                if next == QpState::Reset {
                    // Before the indices start over: the old completions
                    // must not be matched against the new posts.
                    self.shared.clean_cqs(m, mqp);
                }
                mqp.on_state_change(next as u8);
            }
        }
        if mask.contains(QpAttrMask::PORT) {
            self.shared.port.store(attr.port_num, Ordering::Relaxed);
        }
        if next == QpState::Reset {
            self.shared.port.store(0, Ordering::Relaxed);
        }
        debug!(path = ?path, "QP modified");
        Ok(())
    }

    fn check_attrs(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        const VERB: &str = "ibv_modify_qp";
        let ctx = self.context();
        let dev = ctx.device_attr()?;
        let bad = |msg: String| Err(Error::os(VERB, Errno::EINVAL).with_message(msg));
        if mask.contains(QpAttrMask::PORT) && (attr.port_num == 0 || attr.port_num > dev.phys_port_cnt) {
            return bad(format!(
                "port {} does not exist (the device has {} port(s))",
                attr.port_num, dev.phys_port_cnt
            ));
        }
        if mask.contains(QpAttrMask::MAX_QP_RD_ATOMIC) && u32::from(attr.max_rd_atomic) > dev.max_qp_init_rd_atom {
            return bad(format!(
                "max_rd_atomic {} is above the device's {}",
                attr.max_rd_atomic, dev.max_qp_init_rd_atom
            ));
        }
        if mask.contains(QpAttrMask::MAX_DEST_RD_ATOMIC) && u32::from(attr.max_dest_rd_atomic) > dev.max_qp_rd_atom {
            return bad(format!(
                "max_dest_rd_atomic {} is above the device's {}",
                attr.max_dest_rd_atomic, dev.max_qp_rd_atom
            ));
        }
        if mask.contains(QpAttrMask::AV) {
            let port =
                if mask.contains(QpAttrMask::PORT) { attr.port_num } else { self.shared.port.load(Ordering::Relaxed) };
            let port = if attr.ah_attr.port_num != 0 { attr.ah_attr.port_num } else { port };
            check_av(ctx, &attr.ah_attr, port, VERB)?;
        }
        Ok(())
    }

    fn modify_error(&self, e: Errno, attr: &QpAttr, mask: QpAttrMask) -> Error {
        let err = Error::os("ibv_modify_qp", e);
        let route = matches!(
            e,
            Errno::ETIMEDOUT | Errno::ENETUNREACH | Errno::EHOSTUNREACH | Errno::ENODATA | Errno::EADDRNOTAVAIL
        );
        match (route, attr.ah_attr.grh) {
            (true, Some(g)) if mask.contains(QpAttrMask::AV) => err.with_message(format!(
                "cannot reach GID {} from sgid index {} (no route or no neighbour answer from the kernel's resolver)",
                g.dgid, g.sgid_index
            )),
            _ => err.with_message(format!(
                "the kernel refused {} QP {:#x} {} with attributes {}",
                self.qp_type(),
                self.qp_num(),
                if mask.contains(QpAttrMask::STATE) {
                    format!("{} -> {}", self.state(), attr.qp_state)
                } else {
                    format!("in {}", self.state())
                },
                mask
            )),
        }
    }

    /// Queries the QP (`IB_USER_VERBS_CMD_QUERY_QP`, `ibv_query_qp`). Also
    /// refreshes [`state`](Self::state).
    #[doc(alias = "ibv_query_qp")]
    pub fn query(&self, mask: QpAttrMask) -> Result<QpAttr> {
        let r = cmd::query_qp(self.context().fd(), self.handle(), mask.bits())?;
        let attr = QpAttr::from_kernel(&r);
        self.shared.state.store(attr.qp_state as u8, Ordering::Relaxed);
        Ok(attr)
    }

    /// Destroys the QP now, reporting the kernel's answer (`UVERBS_METHOD_QP_DESTROY`).
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy(self) -> Result<()> {
        let QueuePair { sq, rq, shared } = self;
        drop((sq, rq));
        match Arc::try_unwrap(shared) {
            Ok(mut s) => s.destroy(),
            Err(_) => Ok(()),
        }
    }
}

/// Checks an address vector before the kernel sees it: RoCE needs a GRH, the
/// GID index must hold a GID, the destination GID must not be empty.
pub(crate) fn check_av(ctx: &Context, ah: &AhAttr, port: u8, verb: &'static str) -> Result<()> {
    let bad = |msg: String| Err(Error::os(verb, Errno::EINVAL).with_message(msg));
    if port == 0 {
        return bad("the address vector names no port (set ah_attr.port_num, or PORT at RESET->INIT)".into());
    }
    let p = ctx.query_port(port)?;
    let Some(g) = ah.grh else {
        if p.link_layer == LinkLayer::Ethernet {
            return bad(format!(
                "port {port} is RoCE (Ethernet): the address needs a GRH with the peer's GID (ah_attr.grh)"
            ));
        }
        return Ok(());
    };
    if u32::from(g.sgid_index) >= p.gid_tbl_len || ctx.query_gid(port, g.sgid_index.into())?.is_none() {
        return Err(Error::os(verb, Errno::ENODATA).with_message(format!(
            "GID index {} does not exist on port {port} (see `rverbs devinfo -v` for the GID table)",
            g.sgid_index
        )));
    }
    if g.dgid.is_zero() {
        return bad("the destination GID is all zeros".into());
    }
    Ok(())
}

/// The other side of a connection, as exchanged out of band (the
/// `LID:QPN:PSN:GID` line of rdma-core's ping-pong examples).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RemoteEndpoint {
    /// LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// The first PSN the peer will send.
    pub psn: u32,
    /// GID (RoCE: the peer's IPv4-mapped RoCE v2 GID, typically).
    pub gid: Gid,
}

/// Choices for [`QueuePair::connect`] and friends, with rdma-core's
/// ping-pong defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Local port.
    pub port: u8,
    /// Our GID index; `None` picks the port's IPv4-mapped RoCE v2 GID (RoCE)
    /// or sends no GRH (InfiniBand). See [`Context::default_sgid_index`].
    pub sgid_index: Option<u8>,
    /// What the peer may do to our memory.
    pub access: AccessFlags,
    /// Path MTU; `None` uses the port's active MTU.
    pub path_mtu: Option<Mtu>,
    /// Service level.
    pub sl: u8,
    /// Traffic class of the GRH.
    pub traffic_class: u8,
    /// Hop limit of the GRH (`ibv_qp_attr.ah_attr.grh.hop_limit`; default
    /// 64). Unused when no GRH is sent.
    pub hop_limit: u8,
    /// Local ACK timeout exponent (RC).
    pub timeout: u8,
    /// Transport retries (RC).
    pub retry_cnt: u8,
    /// RNR retries (RC; 7 = forever).
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer (RC).
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomics we initiate (RC).
    pub max_rd_atomic: u8,
    /// Outstanding READ/atomics we serve (RC).
    pub max_dest_rd_atomic: u8,
    /// P_Key index.
    pub pkey_index: u16,
    /// Q_Key (UD).
    pub qkey: u32,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            port: 1,
            sgid_index: None,
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            path_mtu: None,
            sl: 0,
            traffic_class: 0,
            hop_limit: 64,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            pkey_index: 0,
            qkey: 0x1111_1111,
        }
    }
}

impl Context {
    /// The GID index rverbs uses by default on `port`: the lowest-index
    /// RoCE v2 GID that is an IPv4-mapped address; else the lowest RoCE v2
    /// GID; else index 0. On InfiniBand ports: 0.
    pub fn default_sgid_index(&self, port: u8) -> Result<u8> {
        let table = self.query_gid_table()?;
        let on_port = || table.iter().filter(|e| e.port == u32::from(port));
        let pick = on_port()
            .filter(|e| e.gid_type == GidType::RoceV2 && e.gid.to_ipv4().is_some())
            .map(|e| e.index)
            .min()
            .or_else(|| on_port().filter(|e| e.gid_type == GidType::RoceV2).map(|e| e.index).min())
            .unwrap_or(0);
        u8::try_from(pick).map_err(|_| Error::os("default_sgid_index", Errno::ERANGE))
    }
}

impl QueuePair {
    /// RESET → INIT with `opts`' port, P_Key index and access flags (RC/UC)
    /// or Q_Key (UD).
    pub fn to_init(&self, opts: &ConnectOptions) -> Result<()> {
        let mut a =
            QpAttr { qp_state: QpState::Init, port_num: opts.port, pkey_index: opts.pkey_index, ..QpAttr::default() };
        let mut mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
        match self.qp_type() {
            QpType::Ud => {
                a.qkey = opts.qkey;
                mask |= QpAttrMask::QKEY;
            }
            QpType::Uc => {
                a.qp_access_flags = opts.access & (AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE);
                mask |= QpAttrMask::ACCESS_FLAGS;
            }
            _ => {
                a.qp_access_flags = opts.access;
                mask |= QpAttrMask::ACCESS_FLAGS;
            }
        }
        self.modify(&a, mask)
    }

    /// INIT → RTR towards `remote` (RC/UC: the full path; UD: state only).
    pub fn to_rtr(&self, remote: &RemoteEndpoint, opts: &ConnectOptions) -> Result<()> {
        if self.qp_type() == QpType::Ud {
            return self.modify(&QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() }, QpAttrMask::STATE);
        }
        let ctx = self.context();
        let port = ctx.query_port(opts.port)?;
        let sgid_index = match opts.sgid_index {
            Some(i) => Some(i),
            None if port.link_layer == LinkLayer::Ethernet || !remote.gid.is_zero() => {
                Some(ctx.default_sgid_index(opts.port)?)
            }
            None => None,
        };
        let grh = sgid_index.map(|sgid_index| GlobalRoute {
            dgid: remote.gid,
            flow_label: 0,
            sgid_index,
            hop_limit: opts.hop_limit,
            traffic_class: opts.traffic_class,
        });
        let mut a = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: opts.path_mtu.unwrap_or(port.active_mtu),
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn & 0xff_ffff,
            ah_attr: AhAttr { dlid: remote.lid, sl: opts.sl, port_num: opts.port, grh, ..AhAttr::default() },
            ..QpAttr::default()
        };
        let mut mask =
            QpAttrMask::STATE | QpAttrMask::AV | QpAttrMask::PATH_MTU | QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN;
        if self.qp_type() == QpType::Rc {
            a.max_dest_rd_atomic = opts.max_dest_rd_atomic;
            a.min_rnr_timer = opts.min_rnr_timer;
            mask |= QpAttrMask::MAX_DEST_RD_ATOMIC | QpAttrMask::MIN_RNR_TIMER;
        }
        self.modify(&a, mask)
    }

    /// RTR → RTS, sending from PSN `local_psn`.
    pub fn to_rts(&self, local_psn: u32, opts: &ConnectOptions) -> Result<()> {
        let mut a = QpAttr { qp_state: QpState::Rts, sq_psn: local_psn & 0xff_ffff, ..QpAttr::default() };
        let mut mask = QpAttrMask::STATE | QpAttrMask::SQ_PSN;
        if self.qp_type() == QpType::Rc {
            a.timeout = opts.timeout;
            a.retry_cnt = opts.retry_cnt;
            a.rnr_retry = opts.rnr_retry;
            a.max_rd_atomic = opts.max_rd_atomic;
            mask |= QpAttrMask::TIMEOUT | QpAttrMask::RETRY_CNT | QpAttrMask::RNR_RETRY | QpAttrMask::MAX_QP_RD_ATOMIC;
        }
        self.modify(&a, mask)
    }

    /// RESET → INIT → RTR → RTS in one call: connects an RC/UC QP to
    /// `remote`, or readies a UD QP (which ignores `remote`).
    pub fn connect(&self, remote: &RemoteEndpoint, local_psn: u32, opts: &ConnectOptions) -> Result<()> {
        self.to_init(opts)?;
        self.to_rtr(remote, opts)?;
        self.to_rts(local_psn, opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_init_attr_to_mlx5_prepare_args() {
        let cap = QpCap { max_send_wr: 64, max_recv_wr: 32, max_send_sge: 2, max_recv_sge: 3, max_inline_data: 60 };
        for (t, m) in [(QpType::Rc, mlx5::QpType::Rc), (QpType::Uc, mlx5::QpType::Uc), (QpType::Ud, mlx5::QpType::Ud)] {
            for sig in [false, true] {
                let a = mlx5_prepare_args_of(t, cap, None, sig).unwrap();
                assert_eq!(a.qp_type, m);
                assert_eq!(a.sq_sig_all, sig);
                assert!(!a.has_srq());
                assert_eq!(
                    a.caps,
                    mlx5::QpCaps {
                        max_send_wr: 64,
                        max_recv_wr: 32,
                        max_send_sge: 2,
                        max_recv_sge: 3,
                        max_inline_data: 60
                    }
                );
                assert_eq!(cap_of(a.caps), cap, "and back");
            }
        }
        for t in [QpType::RawPacket, QpType::XrcIni, QpType::XrcTgt] {
            let e = mlx5_prepare_args_of(t, cap, None, false).unwrap_err();
            assert_eq!(e.errno(), Some(Errno::EOPNOTSUPP), "{t}");
        }
    }

    /// INIT -> RTR of an RC QP over RoCE: the 112-byte `ib_uverbs_modify_qp`,
    /// hand-computed from the offsets in uverbs-abi.md §3.3, and its 120-byte
    /// write frame.
    #[test]
    fn modify_qp_rtr_bytes() {
        let dgid = Gid::parse("::ffff:192.168.77.1").unwrap();
        let a = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: Mtu::Mtu1024,
            dest_qp_num: 0x11,
            rq_psn: 0x123,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ah_attr: AhAttr {
                port_num: 1,
                grh: Some(GlobalRoute { dgid, sgid_index: 1, hop_limit: 64, ..Default::default() }),
                ..Default::default()
            },
            ..QpAttr::default()
        };
        let mask = QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER;
        let k = a.to_kernel(5, mask);
        let b = k.as_bytes();
        let mut want = [0u8; 112];
        want[10..12].copy_from_slice(&[0xff, 0xff]); // dgid ::ffff:
        want[12..16].copy_from_slice(&[192, 168, 77, 1]);
        want[24] = 1; // sgid_index
        want[25] = 64; // hop_limit
        want[30] = 1; // is_global
        want[31] = 1; // port_num
        want[64..68].copy_from_slice(&5u32.to_le_bytes()); // qp_handle
        want[68..72].copy_from_slice(&0x0012_9181u32.to_le_bytes()); // attr_mask
        want[76..80].copy_from_slice(&0x123u32.to_le_bytes()); // rq_psn
        want[84..88].copy_from_slice(&0x11u32.to_le_bytes()); // dest_qp_num
        want[96] = 2; // qp_state RTR
        want[98] = 3; // path_mtu 1024
        want[102] = 1; // max_dest_rd_atomic
        want[103] = 12; // min_rnr_timer
        assert_eq!(b, &want[..]);
        let frame = rverbs_providers::sys::write::frame(26, b, &[], 0, 0);
        assert_eq!(frame.len(), 120);
        assert_eq!(&frame[..8], &[26, 0, 0, 0, 30, 0, 0, 0]);
    }

    /// CREATE_AH's `ib_uverbs_ah_attr`, hand-computed from uverbs-abi.md §3.3.
    #[test]
    fn ah_attr_bytes() {
        let dgid = Gid::parse("::ffff:192.168.77.2").unwrap();
        let a = AhAttr {
            sl: 3,
            port_num: 1,
            grh: Some(GlobalRoute { dgid, flow_label: 7, sgid_index: 1, hop_limit: 64, traffic_class: 8 }),
            ..Default::default()
        };
        let k = a.to_kernel_ah_attr();
        let mut want = [0u8; 32];
        want[10..12].copy_from_slice(&[0xff, 0xff]);
        want[12..16].copy_from_slice(&[192, 168, 77, 2]);
        want[16..20].copy_from_slice(&7u32.to_le_bytes());
        want[20] = 1; // sgid_index
        want[21] = 64; // hop_limit
        want[22] = 8; // traffic_class
        want[26] = 3; // sl
        want[29] = 1; // is_global
        want[30] = 1; // port_num
        assert_eq!(k.as_bytes(), &want[..]);
    }
}
