//! Bringing a QP from RESET to RTS: the remote endpoint, the choices with
//! rdma-core's ping-pong defaults, and one helper per transition.

use rverbs_providers::{Errno, Error, Result};

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

    /// Connects this QP to `remote` with the PSN already chosen in `local`,
    /// this QP's own endpoint (from [`local_endpoint`](Self::local_endpoint),
    /// so the PSN is given once):
    /// what [`handshake`](Self::handshake) does once the endpoints are
    /// exchanged, for endpoints that travel some other way. RESET → INIT
    /// ([`to_init`](Self::to_init)) when the QP is in RESET (a QP already in
    /// INIT, with receives posted, is left there), INIT → RTR towards
    /// `remote` ([`to_rtr`](Self::to_rtr)), RTR → RTS from `local.psn`
    /// ([`to_rts`](Self::to_rts)): three `ibv_modify_qp`s. A UD QP ignores
    /// `remote`. For two QPs of this process, [`connect_pair`](Self::connect_pair)
    /// is one call.
    ///
    /// ```no_run
    /// # use rverbs::{ConnectOptions, Endpoint, QpInitAttr, QpType};
    /// # fn main() -> rverbs::Result<()> {
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(16)?;
    /// let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    /// let opts = ConnectOptions::default();
    /// let me = qp.local_endpoint(Endpoint::random_psn(), &opts)?;
    /// // ... send `me.to_text()?` to the peer, get its endpoint back ...
    /// # let peer_text = me.to_text()?;
    /// let peer = Endpoint::from_text(&peer_text)?;
    /// qp.connect(&me, &peer, &opts)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// `local` is another QP's endpoint (`EINVAL`), the QP is past INIT
    /// (`EINVAL`), or a transition failed: the error names it and the
    /// kernel's errno.
    #[doc(alias = "ibv_modify_qp")]
    pub fn connect(&self, local: &Endpoint, remote: &Endpoint, opts: &ConnectOptions) -> Result<()> {
        const VERB: &str = "QpControl::connect";
        if local.qpn != self.qp_num() {
            return Err(Error::check(VERB, Errno::EINVAL).with_message(format!(
                "the local endpoint is QP {:#x}'s, not this QP's ({:#x}): pass this QP's local_endpoint()",
                local.qpn,
                self.qp_num()
            )));
        }
        let step = |e: Error, step: &str| {
            let msg = format!("{step}: {}", e.message());
            e.with_message(msg)
        };
        match self.state() {
            QpState::Reset => self.to_init(opts).map_err(|e| step(e, "RESET -> INIT"))?,
            QpState::Init => {}
            s => {
                return Err(Error::check(VERB, Errno::EINVAL)
                    .with_message(format!("QP {:#x} is in {s}: connecting starts from RESET or INIT", self.qp_num())))
            }
        }
        self.to_rtr(remote, opts).map_err(|e| step(e, &format!("INIT -> RTR towards QP {:#x}", remote.qpn)))?;
        self.to_rts(local.psn, opts).map_err(|e| step(e, "RTR -> RTS"))
    }

    /// Connects this QP and `peer`, two QPs of this process (tests, a
    /// loopback on one device, or two devices of one host), to each other
    /// in one call: a random PSN each ([`Endpoint::random_psn`]), each
    /// one's [`local_endpoint`](Self::local_endpoint), then
    /// [`connect`](Self::connect) on both. No TCP, no
    /// CM. Either QP may be in RESET or in INIT (receives posted first);
    /// `peer` may be this QP itself (an RC QP connected to itself). Returns
    /// both endpoints, `(ours, peer's)`: add
    /// [`with_memory`](Endpoint::with_memory) to say where the other may
    /// READ and WRITE.
    ///
    /// ```no_run
    /// use rverbs::{AccessFlags, ConnectOptions, QpInitAttr, QpType, RemoteMemory, SendWr};
    /// # fn main() -> rverbs::Result<()> {
    /// let ctx = rverbs::devices()?[0].open()?;
    /// let pd = ctx.alloc_pd()?;
    /// let (cq_a, cq_b) = (ctx.create_cq(16)?, ctx.create_cq(16)?);
    /// let mut a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a))?;
    /// let b = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_b))?;
    /// a.connect_pair(&b, &ConnectOptions::default())?;
    ///
    /// let src = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    /// let dst = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    /// src.write_at(0, b"hello")?;
    /// let to = RemoteMemory::of(&dst).at(0, 5)?;
    /// a.post_send(&[SendWr::write(1, &[src.sge(0, 5)?], to).signaled()])?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As for [`connect`](Self::connect), naming which
    /// QP failed; `a` may be connected when `b` fails.
    #[doc(alias = "ibv_modify_qp")]
    pub fn connect_pair(&self, peer: &QpControl, opts: &ConnectOptions) -> Result<(Endpoint, Endpoint)> {
        let ours = self.local_endpoint(Endpoint::random_psn(), opts)?;
        if rverbs_providers::pool::PoolArc::ptr_eq(&self.0, &peer.0) {
            self.connect(&ours, &ours, opts)?;
            return Ok((ours, ours));
        }
        let theirs = peer.local_endpoint(Endpoint::random_psn(), opts)?;
        let which = |e: Error, qpn: u32| {
            let msg = format!("QP {qpn:#x}: {}", e.message());
            e.with_message(msg)
        };
        self.connect(&ours, &theirs, opts).map_err(|e| which(e, ours.qpn))?;
        peer.connect(&theirs, &ours, opts).map_err(|e| which(e, theirs.qpn))?;
        Ok((ours, theirs))
    }
}
