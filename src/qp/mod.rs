//! Queue pairs (`ibv_qp`): create, modify through the state machine (checked
//! before the kernel sees it), query, destroy. The attributes and their
//! kernel layouts are in [`attr`], the RESET → RTS helpers in [`connect`],
//! posting in `post.rs`.

mod attr;
mod connect;

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use rverbs_providers::cmd::qp as cmd;
use rverbs_providers::pool::{ArcSlot, Pool, PoolArc};
use rverbs_providers::provider::{KernelQp, ModifyError, QpCreate};
use rverbs_providers::qp_state::check_transition;
use rverbs_providers::{Errno, Error, Result};
use tracing::debug;

pub use attr::{QpAttr, QpCap, QpInitAttr};
pub use connect::ConnectOptions;

use crate::address::check_av_with;
use crate::cq::CqUser;
use crate::post::{RecvQueue, SendQueue};
use crate::srq::SrqUser;
use crate::{Context, Gid, ProtectionDomain, QpAttrMask, QpState, QpType, Transport};

/// The kernel QP and what keeps it alive: the PD; the CQs and SRQ (with
/// their rverbs parts) are held by the kernel QP, which they outlive.
///
/// In a slot of [`QP_SLOTS`], not a `malloc` block: glibc's `malloc` of a
/// fresh block and `free` once its per-thread cache of the size is full
/// were about 240 instructions a QP in a program that creates a hundred
/// and then destroys them (issue 35). At most 104 bytes
/// (`a_qp_moves_inline`): moved inline, not by a `memcpy` call; so the
/// kernel QP holds its CQs and SRQ typed (thin pointers), not erased.
/// The memory of every [`QpShared`] of the process; it keeps its peak
/// count of QPs' worth, as the C library's pools do. A page a chunk (34
/// QPs): the heap grows about as it did with a block a QP, and a program
/// with a few QPs keeps a page, not 16 KiB.
static QP_SLOTS: Pool<ArcSlot<QpShared>> = Pool::with_chunk_bytes(4096);

#[derive(Debug)]
pub(crate) struct QpShared {
    pd: ProtectionDomain,
    pub(crate) kernel: KernelQp<CqUser, SrqUser>,
    qp_type: QpType,
    user_handle: u64,
    /// `user_handle` is in the context's registry (every QP of the Rust
    /// API; not one whose creator chose the handle: the C library's).
    registered: bool,
    /// Last state a modify or query saw (the kernel and device may move the
    /// QP to ERR/SQE on their own). Read by every post.
    pub(crate) state: AtomicU8,
    /// Port set at RESET→INIT (0 before).
    port: AtomicU8,
    /// The QP joined a multicast group (the context keeps which ones,
    /// [`Context::mcast`]): the kernel refuses to destroy a QP still in one
    /// (EBUSY), so destroy leaves them first. Control path only.
    in_mcast: AtomicBool,
}

impl QpShared {
    /// Leaves the QP's multicast groups, then destroys the kernel QP. Its
    /// registry entry goes with the `Drop`, however the kernel QP went
    /// (here, or through `c_support::destroy_qp_now`).
    fn destroy(&mut self) -> Result<()> {
        if *self.in_mcast.get_mut() {
            self.leave_mcast_groups()?;
        }
        self.kernel.destroy()
    }

    /// Detaches the QP from every group it is still in
    /// (`IB_USER_VERBS_CMD_DETACH_MCAST` each), as a destroy needs; not in
    /// a forked child, whose QP objects are the parent's.
    #[cold]
    #[inline(never)]
    fn leave_mcast_groups(&mut self) -> Result<()> {
        let (ctx, handle) = (self.pd.context(), self.kernel.handle());
        let fd = ctx.fd();
        let mut groups = ctx.mcast();
        if fd.in_forked_child() {
            groups.retain(|g| g.0 != handle);
        }
        while let Some(i) = groups.iter().rposition(|g| g.0 == handle) {
            let (_, gid, lid) = groups[i];
            cmd::detach_mcast(fd, handle, gid.0, lid)?;
            groups.remove(i);
        }
        *self.in_mcast.get_mut() = false;
        Ok(())
    }
}

impl Drop for QpShared {
    /// Inlined into the drop glue: after an explicit destroy (the usual
    /// way) it is one load and a branch, and the registry entry's removal.
    #[inline]
    fn drop(&mut self) {
        if self.kernel.is_live() {
            self.destroy_on_drop();
        }
        if self.registered {
            self.pd.context().unregister(self.user_handle);
        }
    }
}

impl QpShared {
    /// [`Drop`]'s destroy of a kernel QP still live: the last handle went.
    #[inline(never)]
    fn destroy_on_drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::warn!(handle = self.kernel.handle(), error = %e, "QP destroy failed");
        }
    }
}

/// The control side of a QP: its identity, state, modify, query and the
/// RESET → RTS helpers. Cheap to clone, `Send + Sync`; a [`QueuePair`]
/// derefs to it, and each half of [`QueuePair::into_split`] has one
/// ([`SendQueue::control`]), so the QP can still be moved to ERR or queried
/// after it was split. The kernel QP goes with the last of the pair, its
/// halves and these handles.
#[derive(Clone, Debug)]
pub struct QpControl(pub(crate) PoolArc<QpShared>);

/// A queue pair: the send and receive halves plus the [`QpControl`] it
/// derefs to (modify, query, connect helpers).
///
/// Connecting takes the peer's [`Endpoint`](crate::Endpoint): exchanged over TCP by
/// [`handshake`](QpControl::handshake), by the RDMA CM
/// ([`cm`](crate::cm)), or, for two QPs of this process,
/// [`connect_pair`](QpControl::connect_pair) in one call. By hand, step by
/// step:
///
/// ```no_run
/// use rverbs::{ConnectOptions, Endpoint, QpInitAttr, QpType, RecvWr, SendWr};
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// let cq = ctx.create_cq(64)?;
/// let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
/// let mr = pd.alloc_mr(4096, rverbs::AccessFlags::LOCAL_WRITE)?;
/// // ... exchange qp.qp_num(), a PSN and our GID with the peer, then:
/// # let remote = Endpoint::default();
/// let opts = ConnectOptions::default();
/// qp.to_init(&opts)?;
/// qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, 64)?])])?; // receives before the peer may send
/// qp.to_rtr(&remote, &opts)?;
/// qp.to_rts(0x1234, &opts)?;
/// qp.post_send(&[SendWr::send(2, &[mr.sge(64, 64)?]).signaled()])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct QueuePair {
    // The rings go before the kernel object.
    pub(crate) sq: SendQueue,
    pub(crate) rq: Option<RecvQueue>,
    control: QpControl,
}

impl Deref for QueuePair {
    type Target = QpControl;

    fn deref(&self) -> &QpControl {
        &self.control
    }
}

impl ProtectionDomain {
    /// Creates a QP (`UVERBS_METHOD_QP_CREATE`, `ibv_create_qp`).
    ///
    /// # Errors
    /// Caps above the device's limits, CQs/SRQ of another context, a QP type
    /// the device's provider does not create.
    #[doc(alias = "ibv_create_qp")]
    pub fn create_qp(&self, init: &QpInitAttr<'_>) -> Result<QueuePair> {
        self.create_qp_as::<true>(init, 0)
    }

    /// [`create_qp`](Self::create_qp): `REGISTERED`, with a handle from the
    /// context's registry (the Rust API); otherwise its events carry
    /// `given`, registered nowhere (they then name it
    /// [`EventObject::Gone`](crate::EventObject::Gone): the C library's). A parameter of the type, so
    /// that neither pays for the other's branches.
    pub(crate) fn create_qp_as<const REGISTERED: bool>(&self, init: &QpInitAttr<'_>, given: u64) -> Result<QueuePair> {
        const VERB: &str = "ibv_create_qp";
        let ctx = self.context();
        let _span = verb_span!("ibv_create_qp", qp_type = %init.qp_type);
        let provider = ctx.provider_ctx(VERB, "queue pairs")?;
        check_caps(ctx, init)?;
        // CQs or an SRQ of another context: the provider refuses them
        // (each object knows its command fd) before the kernel is asked.
        let user_handle = if REGISTERED { ctx.register_qp() } else { given };
        // The provider's QP holds its CQs and SRQ type-erased.
        let args = QpCreate {
            qp_type: init.qp_type,
            pd_handle: self.handle(),
            send_cq: init.send_cq.kernel.clone(),
            recv_cq: init.recv_cq.kernel.clone(),
            srq: init.srq.map(|s| s.control.0.clone()),
            cap: init.cap.into(),
            sq_sig_all: init.sq_sig_all,
            user_handle,
        };
        let (kernel, sq, rq) = provider.create_qp(ctx.fd_arc(), args).map_err(|e| {
            if REGISTERED {
                ctx.unregister(user_handle);
            }
            refused_caps(ctx, init, e)
        })?;
        if REGISTERED {
            ctx.set_qp_num(user_handle, kernel.qpn());
        }
        let control = QpControl(PoolArc::new(
            &QP_SLOTS,
            QpShared {
                pd: self.clone(),
                kernel,
                qp_type: init.qp_type,
                user_handle,
                registered: REGISTERED,
                state: AtomicU8::new(QpState::Reset as u8),
                port: AtomicU8::new(0),
                in_mcast: AtomicBool::new(false),
            },
        ));
        Ok(QueuePair {
            sq: SendQueue::new(sq, control.clone()),
            rq: rq.map(|ring| RecvQueue::new(ring, control.clone())),
            control,
        })
    }
}

/// [`caps_within`] when the device's limits are known; otherwise, as
/// rdma-core, no `QUERY_DEVICE` of its own: the kernel (or the provider)
/// checks, and a refusal is answered by [`refused_caps`], with the same
/// error as here.
fn check_caps(ctx: &Context, init: &QpInitAttr<'_>) -> Result<()> {
    ctx.device_attr_known().map_or(Ok(()), |a| caps_within(a, init))
}

/// A create refused with `EINVAL` or `ENOMEM`: the caps check's error if
/// the caps are what is wrong (now asking the device), else `e`.
fn refused_caps(ctx: &Context, init: &QpInitAttr<'_>, e: Error) -> Error {
    if !matches!(e.errno(), Some(Errno::EINVAL | Errno::ENOMEM)) {
        return e;
    }
    match ctx.device_attr().map(|a| caps_within(a, init)) {
        Ok(Err(c)) => c,
        _ => e,
    }
}

fn caps_within(a: &crate::DeviceAttr, init: &QpInitAttr<'_>) -> Result<()> {
    let c = &init.cap;
    let too_big = |what: &str, v: u32, max: u32| {
        Error::check("ibv_create_qp", Errno::EINVAL)
            .with_message(format!("{what} {v} is above the device's limit {max}"))
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

impl QpControl {
    /// Receives were posted to this QP in ERR: on a provider whose kernel
    /// flushes them only on another move to ERR (rxe), that move
    /// (`MODIFY_QP`), so that each completes as `WR_FLUSH_ERR`. A refusal is
    /// logged: the receives are posted, and the QP's destroy frees them.
    #[cold]
    #[inline(never)]
    pub(crate) fn posted_recv_in_err(&self) {
        if !self.0.kernel.recv_in_err_needs_modify() {
            return;
        }
        let err = QpAttr { qp_state: QpState::Err, ..QpAttr::default() };
        if let Err(e) = self.modify(&err, QpAttrMask::STATE) {
            tracing::warn!(qp_num = self.qp_num(), error = %e, "receives posted in ERR: the move to ERR that flushes them failed");
        }
    }

    /// The PD it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.0.pd
    }
    /// The context.
    pub fn context(&self) -> &Context {
        self.0.pd.context()
    }
    /// The kernel handle.
    #[inline]
    pub fn handle(&self) -> u32 {
        self.0.kernel.handle()
    }
    /// The QP number peers address.
    #[inline]
    pub fn qp_num(&self) -> u32 {
        self.0.kernel.qpn()
    }
    /// RC, UC or UD.
    pub fn qp_type(&self) -> QpType {
        self.0.qp_type
    }
    /// The capacities granted (at least what was asked).
    #[inline]
    pub fn cap(&self) -> QpCap {
        self.0.kernel.cap().into()
    }
    /// The value async events carry for this QP.
    #[inline]
    pub fn user_handle(&self) -> u64 {
        self.0.user_handle
    }
    /// Both handles control the same QP.
    pub fn same_qp(&self, other: &QpControl) -> bool {
        PoolArc::ptr_eq(&self.0, &other.0)
    }

    /// Whether it receives from an SRQ.
    pub(crate) fn uses_srq(&self) -> bool {
        self.0.kernel.uses_srq()
    }

    /// The state as of the last modify or query.
    pub fn state(&self) -> QpState {
        QpState::from_raw(self.0.state.load(Ordering::Relaxed)).unwrap_or(QpState::Err)
    }

    /// Modifies the QP (`IB_USER_VERBS_CMD_MODIFY_QP` through `INVOKE_WRITE`;
    /// the extended command when `RATE_LIMIT` is set), `ibv_modify_qp`.
    ///
    /// On InfiniBand and RoCE the transition and the mask are checked
    /// against the IBTA state table first (iWARP has none); an illegal one
    /// is an error of kind
    /// [`ErrorKind::Transition`](crate::ErrorKind::Transition) naming the
    /// states and bits, and the kernel never sees it. Addresses are checked
    /// too: RoCE needs a GRH, the source GID index must exist.
    ///
    /// mlx5: the provider learns the new state (sends need RTS, receives
    /// INIT; RESET starts the queue indices over). The completions a QP
    /// moved to RESET left in its CQs are removed at each CQ's next
    /// [`poll`](crate::CompletionQueue::poll) (rverbs cannot reach a CQ's
    /// poller from here without a lock on the poll path); until then
    /// RESET → INIT fails with `EBUSY`. rxe leaves them in the CQ, as
    /// rdma-core's rxe provider does: a QP moved to RESET (or destroyed) may
    /// still have completions polled afterwards, with its old `wr_id`s.
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        const VERB: &str = "ibv_modify_qp";
        let cur = if mask.contains(QpAttrMask::CUR_STATE) { attr.cur_qp_state } else { self.state() };
        let next = if mask.contains(QpAttrMask::STATE) { attr.qp_state } else { cur };
        let _span = verb_span!("ibv_modify_qp", qp_num = self.qp_num(), from = %cur, to = %next, mask = %mask);
        // The IBTA table is IB's and RoCE's (`ib_modify_qp_is_ok`, which
        // their drivers call). An iWARP device has none: its QPs take STATE
        // and ACCESS alone (the iw_cm's INIT attributes carry no PKEY_INDEX
        // or PORT), and the kernel's driver judges the rest.
        if self.context().device().transport() != Transport::Iwarp {
            check_transition(self.qp_type(), cur, next, mask).map_err(|e| Error::transition(VERB, e))?;
        }
        self.check_attrs(attr, mask)?;
        let req = attr.to_kernel(self.handle(), mask);
        let rate = mask.contains(QpAttrMask::RATE_LIMIT).then_some(attr.rate_limit);
        let to = mask.contains(QpAttrMask::STATE).then_some(next);
        let path = self.0.kernel.modify(&req, rate, cur, to).map_err(|e| match e {
            ModifyError::Check(e) => e,
            ModifyError::Os(errno) => {
                // An index without a GID: say so, as the full check does.
                let why = mask.contains(QpAttrMask::AV).then(|| self.check_av(attr, mask, true).err()).flatten();
                why.unwrap_or_else(|| self.modify_error(errno, attr, mask))
            }
        })?;
        if to.is_some() {
            self.0.state.store(next as u8, Ordering::Relaxed);
        }
        if mask.contains(QpAttrMask::PORT) {
            self.0.port.store(attr.port_num, Ordering::Relaxed);
        }
        if next == QpState::Reset {
            self.0.port.store(0, Ordering::Relaxed);
        }
        debug!(path = ?path, "QP modified");
        Ok(())
    }

    fn check_attrs(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        const VERB: &str = "ibv_modify_qp";
        let ctx = self.context();
        let dev = ctx.device_attr()?;
        let bad = |msg: String| Err(Error::check(VERB, Errno::EINVAL).with_message(msg));
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
            self.check_av(attr, mask, false)?;
        }
        Ok(())
    }

    /// The address vector's check; the source GID's entry is read only
    /// when `gid` (a QUERY_GID_ENTRY per RTR that rdma-core does not make:
    /// the kernel refuses an index without a GID, and then the full check
    /// explains the refusal).
    fn check_av(&self, attr: &QpAttr, mask: QpAttrMask, gid: bool) -> Result<()> {
        let port = if mask.contains(QpAttrMask::PORT) { attr.port_num } else { self.0.port.load(Ordering::Relaxed) };
        let port = if attr.ah_attr.port_num != 0 { attr.ah_attr.port_num } else { port };
        check_av_with(self.context(), &attr.ah_attr, port, "ibv_modify_qp", gid).map(|_| ())
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

    /// Records a state the kernel moved the QP to on its own (iWARP's
    /// iw_cm at ESTABLISHED), for the posts' state check.
    pub(crate) fn note_state(&self, state: QpState) {
        self.0.state.store(state as u8, Ordering::Relaxed);
    }

    /// Queries the QP (`IB_USER_VERBS_CMD_QUERY_QP`, `ibv_query_qp`). Also
    /// refreshes [`state`](Self::state), except on iWARP, whose siw reports
    /// no usable state (6.1: always RESET, 6.12: IDLE as INIT).
    #[doc(alias = "ibv_query_qp")]
    pub fn query(&self, mask: QpAttrMask) -> Result<QpAttr> {
        let r = cmd::query_qp(self.context().fd(), self.handle(), mask.bits())?;
        let attr = QpAttr::from_kernel(&r);
        if self.context().device().transport() != crate::Transport::Iwarp {
            self.0.state.store(attr.qp_state as u8, Ordering::Relaxed);
        }
        Ok(attr)
    }

    /// Attaches this UD QP to the multicast group `gid` with LID `mlid` (0
    /// on RoCE): `IB_USER_VERBS_CMD_ATTACH_MCAST`, `ibv_attach_mcast`.
    /// Datagrams sent to the group (an address handle whose destination is
    /// `gid`) then land in this QP's receive queue as well. Attaching to a
    /// group the QP is in already is no error. The QP leaves its groups when
    /// it is destroyed ([`mcast_groups`](Self::mcast_groups)).
    ///
    /// On RoCE the kernel programs the netdev's link-layer filter only:
    /// joining the IP group (IGMP), which routers and the receiving host's
    /// IP layer want, is the RDMA CM's part (`rdma_join_multicast`), as
    /// with rdma-core.
    ///
    /// # Errors
    /// `EINVAL` when `gid` is not a multicast address (`ff00::/8`, or an
    /// IPv4-mapped `224.0.0.0/4`), the QP is not UD, or `mlid` is not a
    /// multicast LID of an InfiniBand port; the kernel's errno otherwise.
    #[doc(alias = "ibv_attach_mcast")]
    pub fn attach_mcast(&self, gid: &Gid, mlid: u16) -> Result<()> {
        debug!(qpn = self.qp_num(), %gid, mlid, "ibv_attach_mcast");
        let ctx = self.context();
        let mut groups = ctx.mcast();
        cmd::attach_mcast(ctx.fd(), self.handle(), gid.0, mlid).map_err(|e| self.mcast_error(e, gid, mlid))?;
        let entry = (self.handle(), *gid, mlid);
        if !groups.contains(&entry) {
            groups.push(entry);
        }
        // Under the context's lock, as every change of the groups.
        self.0.in_mcast.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Detaches this QP from the multicast group `gid`/`mlid`:
    /// `IB_USER_VERBS_CMD_DETACH_MCAST`, `ibv_detach_mcast`.
    ///
    /// # Errors
    /// `EINVAL` when the QP is not attached to that group (or for the
    /// reasons of [`attach_mcast`](Self::attach_mcast)).
    #[doc(alias = "ibv_detach_mcast")]
    pub fn detach_mcast(&self, gid: &Gid, mlid: u16) -> Result<()> {
        debug!(qpn = self.qp_num(), %gid, mlid, "ibv_detach_mcast");
        let ctx = self.context();
        let mut groups = ctx.mcast();
        cmd::detach_mcast(ctx.fd(), self.handle(), gid.0, mlid).map_err(|e| self.mcast_error(e, gid, mlid))?;
        groups.retain(|g| *g != (self.handle(), *gid, mlid));
        Ok(())
    }

    /// The multicast groups (GID, LID) this QP is attached to, in the order
    /// they were joined. A destroy (or the drop of the last handle) detaches
    /// the QP from them first: the kernel would refuse to destroy it
    /// otherwise (EBUSY, which `ibv_destroy_qp` returns in rdma-core).
    pub fn mcast_groups(&self) -> Vec<(Gid, u16)> {
        let handle = self.handle();
        self.context().mcast().iter().filter(|g| g.0 == handle).map(|&(_, gid, lid)| (gid, lid)).collect()
    }

    fn mcast_error(&self, e: Error, gid: &Gid, mlid: u16) -> Error {
        if e.errno() != Some(Errno::EINVAL) {
            return e;
        }
        let why = if self.qp_type() != QpType::Ud {
            format!("only UD QPs join multicast groups, QP {:#x} is {}", self.qp_num(), self.qp_type())
        } else if !gid.is_multicast() {
            format!("{gid} is not a multicast GID (ff00::/8, or an IPv4-mapped 224.0.0.0/4 address)")
        } else {
            format!(
                "the kernel refused QP {:#x} and group {gid} with LID {mlid:#x} (a detach: the QP is not attached \
                 to it; on InfiniBand the LID must be a multicast LID, 0xc000..=0xfffe)",
                self.qp_num()
            )
        };
        e.with_message(why)
    }
}

impl QueuePair {
    /// The control side, as a handle of its own (cheap to clone).
    pub fn control(&self) -> &QpControl {
        &self.control
    }

    /// Destroys the QP now, reporting the kernel's answer
    /// (`UVERBS_METHOD_QP_DESTROY`, `ibv_destroy_qp`). Completions it left
    /// in its CQs are removed on mlx5 and stay on rxe (see [`QpControl::modify`]).
    ///
    /// # Errors
    /// `EBUSY` when clones of its [`QpControl`] still hold it (it is then
    /// destroyed after the last of them); the kernel's errno otherwise.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy(self) -> Result<()> {
        let QueuePair { sq, rq, mut control } = self;
        drop((sq, rq));
        // In place: moving the shared QP out of its allocation is a copy of
        // it; its `Drop` then finds the kernel QP gone and only forgets the
        // registry entry.
        match PoolArc::get_mut(&mut control.0) {
            Some(s) => s.destroy(),
            None => Err(Error::check("ibv_destroy_qp", Errno::EBUSY).with_message(
                "other handles of this QP (QpControl clones) still hold it; it goes with the last of them",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    /// LLVM moves values of up to 128 bytes with inline loads and stores
    /// and calls `memcpy` for larger ones; a QP is moved on its way out of
    /// `create_qp` and into a user's `Vec` (a `memcpy` call each cost about
    /// 30 instructions of a create).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_qp_moves_inline() {
        assert!(size_of::<super::QueuePair>() <= 128, "{} bytes", size_of::<super::QueuePair>());
        // Moved into its slot once per create.
        assert!(size_of::<super::QpShared>() <= 104, "{} bytes", size_of::<super::QpShared>());
    }
}
