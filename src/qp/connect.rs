//! Bringing a QP from RESET to RTS: the remote endpoint, the choices with
//! rdma-core's ping-pong defaults, and one helper per transition.

use rverbs_providers::Result;

use crate::attr::Mtu;
use crate::{AccessFlags, Endpoint, QpAttr, QpAttrMask, QpControl, QpState, QpType};

/// Choices for [`QpControl::connect`] and friends, with rdma-core's
/// ping-pong defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Local port.
    pub port: u8,
    /// Our GID index; `None` picks the port's IPv4-mapped RoCE v2 GID (RoCE)
    /// or sends no GRH (InfiniBand). See [`Context::default_sgid_index`](crate::Context::default_sgid_index).
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

impl QpControl {
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
    pub fn to_rtr(&self, remote: &Endpoint, opts: &ConnectOptions) -> Result<()> {
        if self.qp_type() == QpType::Ud {
            return self.modify(&QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() }, QpAttrMask::STATE);
        }
        let ctx = self.context();
        let ah_attr = remote.address(ctx, ctx.port_static(opts.port)?.link_layer, opts)?;
        // The active MTU can change with the netdev's: asked only when needed.
        let path_mtu = match opts.path_mtu {
            Some(m) => m,
            None => ctx.query_port(opts.port)?.active_mtu,
        };
        let mut a = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu,
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn & 0xff_ffff,
            ah_attr,
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
    pub fn connect(&self, remote: &Endpoint, local_psn: u32, opts: &ConnectOptions) -> Result<()> {
        self.to_init(opts)?;
        self.to_rtr(remote, opts)?;
        self.to_rts(local_psn, opts)
    }
}
