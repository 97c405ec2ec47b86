//! Queue pairs: `ibv_create_qp`, `ibv_modify_qp`, `ibv_query_qp`,
//! `ibv_destroy_qp`, `ibv_attach_mcast`/`ibv_detach_mcast`, and the
//! `post_send`/`post_recv` ops the `verbs.h` inlines call. RC, UC and UD
//! (raw-packet and XRC answer EOPNOTSUPP).
//!
//! A send list is translated into rverbs' `SendWr`s in chunks of
//! [`CHUNK`] requests, their SGEs read in place (`struct ibv_sge` is
//! rverbs' `Sge`), and each chunk posted with one doorbell: no allocation,
//! no copy. Receives are posted one at a
//! time (rxe rings no doorbell for them).

use core::ffi::c_int;
use std::sync::atomic::Ordering;

use rverbs::{AccessFlags, AhAttr, Gid, GlobalRoute, Mtu, QpAttr, QpAttrMask, QpCap, QpState, QpType, RemoteAddr};
use rverbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, UdDest};

use crate::abi::*;
use crate::acks::Acks;
use crate::cq::cq;
use crate::errno::{self, set_errno, EINVAL, EOPNOTSUPP};
use crate::export::symver;
use crate::pd::pd;
use crate::pool::Pool;
use crate::qp_ex::WrBatch;
use crate::spin::SpinLock;

/// A QP's Rust part: rverbs' QP (posting needs it exclusively: one lock,
/// uncontended when one thread posts) and, for an extended QP, the
/// `ibv_wr_*` batch (`crate::qp_ex`). Its C struct follows it in its
/// [`QpSlot`].
#[repr(C)]
pub(crate) struct Qp {
    pub inner: SpinLock<rverbs::QueuePair>,
    /// The control side of `inner`, for the verbs that issue a command
    /// (modify, query, multicast) without taking the post lock across
    /// their syscall.
    pub control: rverbs::QpControl,
    pub sq_sig_all: bool,
    /// `qp->qp_type`, kept here: C may write its own copy.
    qp_type: u32,
    /// The `ibv_wr_*` batch of a QP that `ibv_create_qp_ex` created (what
    /// `ibv_qp_to_qp_ex` answers); `None` for `ibv_create_qp`'s, which
    /// then carry no empty batch to build and drop.
    pub batch: Option<Box<SpinLock<WrBatch>>>,
    /// Its async events acknowledged (`crate::acks`).
    pub acks: Acks,
}

impl Qp {
    /// `qp->qp_type` as created.
    #[inline]
    pub(crate) fn qp_type(&self) -> u32 {
        self.qp_type
    }
}

/// A QP's memory: its [`Qp`], then the C struct that C holds a pointer
/// to, an `ibv_qp` (`ibv_create_qp`) or an `ibv_qp_ex` (`ibv_create_qp_ex`,
/// whose first 160 bytes are the `ibv_qp`): a plain QP carries no 192
/// bytes of `ibv_wr_*` ops it never uses. C reads and writes the struct
/// (`state`, `qp_context`, `events_completed`, `wr_id`, `wr_flags`)
/// through its pointer while other threads hold a `&Qp`: the two never
/// overlap, and the C struct is reached only through raw pointers.
#[repr(C)]
pub(crate) struct QpSlot<C> {
    qp: Qp,
    c: C,
}

/// Where the C struct sits in either slot: the same place, so a C pointer
/// finds its `Qp` without knowing which.
const C_OFFSET: usize = core::mem::offset_of!(QpSlot<ibv_qp>, c);
const _: () = assert!(C_OFFSET == core::mem::offset_of!(QpSlot<ibv_qp_ex>, c));

/// The plain QPs' memory.
static QPS: Pool<QpSlot<ibv_qp>> = Pool::new();
/// The extended QPs' memory.
static QPS_EX: Pool<QpSlot<ibv_qp_ex>> = Pool::new();

/// # Safety
/// `p` is NULL or a QP `ibv_create_qp` returned and not yet destroyed.
#[inline]
pub(crate) unsafe fn qp<'a>(p: *const ibv_qp) -> Option<&'a Qp> {
    if p.is_null() {
        return None;
    }
    // SAFETY: by the contract, `p` is the `c` of a live `QpSlot`, derived
    // from the slot's pointer (`create`): its `Qp` is `C_OFFSET` bytes
    // before, in the same allocation.
    Some(unsafe { &*p.byte_sub(C_OFFSET).cast::<Qp>() })
}

/// Most SGEs one request may carry here (rxe allows 32).
pub(crate) const MAX_SGE: usize = 32;

fn qp_type(t: u32) -> Option<QpType> {
    match t {
        2 => Some(QpType::Rc),
        3 => Some(QpType::Uc),
        4 => Some(QpType::Ud),
        _ => None,
    }
}

fn cap_to_c(c: &QpCap) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn cap_from_c(c: &ibv_qp_cap) -> QpCap {
    QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// `struct ibv_qp *ibv_create_qp(struct ibv_pd *, struct ibv_qp_init_attr *)`:
/// writes the actual capabilities back into `init_attr->cap`.
unsafe extern "C" fn create_qp(p: *mut ibv_pd, init: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    // SAFETY: the C contract, passed on.
    unsafe { create(p, init, None) }
}
symver!(create_qp, ibv_create_qp, "IBVERBS_1.1");

/// `ibv_create_qp`, and `ibv_create_qp_ex` with `send_ops` (its
/// `IBV_QP_EX_WITH_*`, checked by the caller).
///
/// # Safety
/// `p` is NULL or a live PD of ours; `init` NULL or the caller's struct.
pub(crate) unsafe fn create(p: *mut ibv_pd, init: *mut ibv_qp_init_attr, send_ops: Option<u64>) -> *mut ibv_qp {
    // SAFETY: the C contract: a live PD of ours, `init` the caller's struct.
    let (Some(pd), Some(init)) = (unsafe { pd(p) }, unsafe { init.as_mut() }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    // SAFETY: the C contract: the CQs are live CQs of ours.
    let (Some(scq), Some(rcq)) = (unsafe { cq(init.send_cq) }, unsafe { cq(init.recv_cq) }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    let Some(ty) = qp_type(init.qp_type) else {
        set_errno(EOPNOTSUPP);
        return core::ptr::null_mut();
    };
    // SAFETY: the C contract: `srq` is NULL or a live SRQ of ours.
    let srq = unsafe { crate::srq::srq(init.srq.cast()) };
    if srq.is_none() && !init.srq.is_null() {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    }
    let srq_guard = srq.map(|s| s.inner.lock());
    // The slot first: its C struct's address is the QP's `user_handle`,
    // which its async events carry, as in rdma-core. Built there field by
    // field: a slot is 350 to 540 bytes, and each move of one is a `memcpy`.
    // SAFETY: a fresh slot of either pool, not yet written.
    let (q, cp) = unsafe {
        if send_ops.is_some() {
            let s = QPS_EX.alloc_uninit();
            (&raw mut (*s).qp, (&raw mut (*s).c).cast::<ibv_qp>())
        } else {
            let s = QPS.alloc_uninit();
            (&raw mut (*s).qp, &raw mut (*s).c)
        }
    };
    let created = {
        let attr = |send: &rverbs::CompletionQueue, recv: &rverbs::CompletionQueue| {
            let mut a = rverbs::QpInitAttr::new(ty, send);
            a.recv_cq = recv;
            a.srq = srq_guard.as_deref();
            a.cap = cap_from_c(&init.cap);
            a.sq_sig_all = init.sq_sig_all != 0;
            rverbs::c_support::create_qp_with_handle(&pd.inner, &a, cp as u64)
        };
        if core::ptr::eq(scq, rcq) {
            let s = scq.inner.lock();
            attr(&s, &s)
        } else {
            // Two CQs are locked in address order, whichever is the send
            // one: two threads creating QPs with the CQs swapped would
            // otherwise each hold one and spin on the other (audit-2 N3).
            let send_first = core::ptr::from_ref(scq).addr() < core::ptr::from_ref(rcq).addr();
            let (first, second) = if send_first { (scq, rcq) } else { (rcq, scq) };
            let (g1, g2) = (first.inner.lock(), second.inner.lock());
            let (s, r) = if send_first { (&g1, &g2) } else { (&g2, &g1) };
            attr(s, r)
        }
    };
    let inner = match &created {
        Ok(i) => i,
        Err(e) => {
            // SAFETY: `cp` is the slot taken above, never written.
            unsafe { free_slot(cp, send_ops.is_some(), false) };
            set_errno(errno::of(e));
            return core::ptr::null_mut();
        }
    };
    drop(srq_guard);
    let cap = inner.cap();
    init.cap = cap_to_c(&cap);
    pd.users.fetch_add(1, Ordering::AcqRel);
    scq.users.fetch_add(1, Ordering::AcqRel);
    rcq.users.fetch_add(1, Ordering::AcqRel);
    if let Some(s) = srq {
        s.users.fetch_add(1, Ordering::AcqRel);
    }
    let (handle, qp_num) = (inner.handle(), inner.qp_num());
    let control = inner.control().clone();
    let c = ibv_qp {
        context: pd.c.context,
        qp_context: init.qp_context,
        pd: p,
        send_cq: init.send_cq,
        recv_cq: init.recv_cq,
        srq: init.srq,
        handle,
        qp_num,
        state: 0,
        qp_type: init.qp_type,
        mutex: PthreadMutex([0; 40]),
        cond: PthreadCond([0; 48]),
        events_completed: 0,
    };
    // SAFETY: `q` and `cp` are the fresh slot's two parts, `cp` an
    // `ibv_qp_ex` when `send_ops` is set: each field is written once, in
    // place, all of them (`all_fields_written`) before the QP is used or
    // handed out; the C struct, once written, is borrowed alone. The
    // rverbs QP is read out of `created`, which is forgotten: it moves, it
    // is not copied.
    unsafe {
        if let Some(ops) = send_ops {
            let x = cp.cast::<ibv_qp_ex>();
            x.write(crate::qp_ex::no_ops(c));
            crate::qp_ex::set_send_ops(&mut *x, ops);
        } else {
            cp.write(c);
        }
        (&raw mut (*q).inner).write(SpinLock::new(core::ptr::read(inner)));
        core::mem::forget(created);
        (&raw mut (*q).control).write(control);
        (&raw mut (*q).sq_sig_all).write(init.sq_sig_all != 0);
        (&raw mut (*q).qp_type).write(init.qp_type);
        (&raw mut (*q).batch).write(send_ops.map(|_| crate::qp_ex::batch_for(&cap)));
        (&raw mut (*q).acks).write(Acks::default());
    }
    cp
}

/// The fields `create` writes into a QP's slot: a field added to [`Qp`]
/// fails to compile here until `create` writes it too.
#[allow(dead_code)]
fn all_fields_written(q: Qp) {
    let Qp { inner: _, control: _, sq_sig_all: _, qp_type: _, batch: _, acks: _ } = q;
}

/// Gives the slot whose C struct is `cp` back to its pool (`ex`: the
/// extended QPs'), dropping its `Qp` when `written`.
///
/// # Safety
/// `cp` is the C struct of a slot `create` took from that pool, not used
/// after; `written`: its `Qp` was written whole.
unsafe fn free_slot(cp: *mut ibv_qp, ex: bool, written: bool) {
    // SAFETY: the caller's contract; `s` is the slot's start, derived from
    // the slot's own pointer.
    unsafe {
        let s = cp.byte_sub(C_OFFSET);
        if written {
            // The C struct has no drop.
            core::ptr::drop_in_place(s.cast::<Qp>());
        }
        if ex {
            QPS_EX.free_uninit(s.cast());
        } else {
            QPS.free_uninit(s.cast());
        }
    }
}

/// `int ibv_destroy_qp(struct ibv_qp *)`: 0 or an errno. Returns once
/// every async event reported for the QP is acknowledged (`crate::acks`).
/// If the kernel refuses (EBUSY while the QP is in a multicast group, as
/// rdma-core 44 answers; rverbs' own destroy would detach it), the QP stays
/// usable.
unsafe extern "C" fn destroy_qp(p: *mut ibv_qp) -> c_int {
    // SAFETY: the C contract: NULL or a live QP of ours.
    let Some(q) = (unsafe { qp(p) }) else { return EINVAL };
    let reported = match rverbs::c_support::destroy_qp_now(&q.control) {
        Ok(n) => n,
        Err(e) => return errno::of(&e),
    };
    q.acks.wait_for(reported, 0);
    let ex = q.batch.is_some();
    // SAFETY: fields written at creation only, read through C's pointer.
    let c = unsafe { &*p };
    // SAFETY: a QP's PD, CQs and SRQ outlive it (their destroys answer
    // EBUSY before).
    unsafe {
        if let Some(x) = pd(c.pd) {
            x.users.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(x) = cq(c.send_cq) {
            x.users.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(x) = cq(c.recv_cq) {
            x.users.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(s) = crate::srq::srq(c.srq.cast()) {
            s.users.fetch_sub(1, Ordering::AcqRel);
        }
    }
    // SAFETY: made by `create` (from `QPS_EX` when it has a batch, else
    // `QPS`); the kernel QP is gone and no event names it any more: the
    // caller gives it up here.
    unsafe { free_slot(p, ex, true) };
    0
}
symver!(destroy_qp, ibv_destroy_qp, "IBVERBS_1.1");

pub(crate) fn ah_from_c(a: &ibv_ah_attr) -> AhAttr {
    AhAttr {
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        port_num: a.port_num,
        grh: (a.is_global != 0).then_some(GlobalRoute {
            dgid: Gid(a.grh.dgid),
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        }),
    }
}

fn ah_to_c(a: &AhAttr) -> ibv_ah_attr {
    let g = a.grh.unwrap_or(GlobalRoute {
        dgid: Gid([0; 16]),
        flow_label: 0,
        sgid_index: 0,
        hop_limit: 0,
        traffic_class: 0,
    });
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: g.dgid.0,
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: a.grh.is_some().into(),
        port_num: a.port_num,
    }
}

fn state(v: u32) -> Option<QpState> {
    u8::try_from(v).ok().and_then(QpState::from_raw)
}

fn attr_from_c(a: &ibv_qp_attr, mask: QpAttrMask) -> Option<QpAttr> {
    let st = |v: u32, bit: QpAttrMask| if mask.contains(bit) { state(v) } else { Some(QpState::Reset) };
    Some(QpAttr {
        qp_state: st(a.qp_state, QpAttrMask::STATE)?,
        cur_qp_state: st(a.cur_qp_state, QpAttrMask::CUR_STATE)?,
        path_mtu: Mtu::from_raw(a.path_mtu as u8),
        path_mig_state: a.path_mig_state as u8,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: AccessFlags::from_bits_truncate(a.qp_access_flags),
        cap: cap_from_c(&a.cap),
        ah_attr: ah_from_c(&a.ah_attr),
        alt_ah_attr: ah_from_c(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify != 0,
        sq_draining: a.sq_draining != 0,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    })
}

fn attr_to_c(a: &QpAttr) -> ibv_qp_attr {
    ibv_qp_attr {
        qp_state: a.qp_state as u32,
        cur_qp_state: a.cur_qp_state as u32,
        path_mtu: a.path_mtu.raw().into(),
        path_mig_state: a.path_mig_state.into(),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags.bits(),
        cap: cap_to_c(&a.cap),
        ah_attr: ah_to_c(&a.ah_attr),
        alt_ah_attr: ah_to_c(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify.into(),
        sq_draining: a.sq_draining.into(),
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

/// `int ibv_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int attr_mask)`:
/// 0 or an errno; `qp->state` follows a state change.
unsafe extern "C" fn modify_qp(p: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    // SAFETY: the C contract: a live QP of ours, `attr` the caller's struct.
    let (Some(q), Some(a)) = (unsafe { qp(p) }, unsafe { attr.as_ref() }) else { return EINVAL };
    let Some(m) = QpAttrMask::from_bits(mask as u32) else { return EINVAL };
    let Some(ra) = attr_from_c(a, m) else { return EINVAL };
    match q.control.modify(&ra, m) {
        Ok(()) => {
            if m.contains(QpAttrMask::STATE) {
                // SAFETY: `p` is live; C readers of `state` race with this
                // store exactly as with rdma-core's.
                unsafe { (*p).state = a.qp_state };
                // iWARP: librdmacm moves the QP to INIT only; the kernel's
                // iw_cm takes it to RTS unseen.
                if matches!(ra.qp_state, QpState::Init | QpState::Rtr) {
                    rverbs::c_support::iwarp_leave_sends_to_the_kernel(&q.control);
                }
            }
            0
        }
        Err(e) => errno::of(&e),
    }
}
symver!(modify_qp, ibv_modify_qp, "IBVERBS_1.1");

/// `int ibv_query_qp(struct ibv_qp *, struct ibv_qp_attr *, int attr_mask,
/// struct ibv_qp_init_attr *)`: 0 or an errno; refreshes `qp->state`.
unsafe extern "C" fn query_qp(
    p: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the C contract: a live QP of ours.
    let Some(q) = (unsafe { qp(p) }) else { return EINVAL };
    if attr.is_null() || init.is_null() {
        return EINVAL;
    }
    let m = QpAttrMask::from_bits_truncate(mask as u32);
    match q.control.query(m) {
        Ok(a) => {
            let ca = attr_to_c(&a);
            // SAFETY: `attr` and `init` are the caller's structs; `p` is live.
            unsafe {
                attr.write(ca);
                init.write(ibv_qp_init_attr {
                    qp_context: (*p).qp_context,
                    send_cq: (*p).send_cq,
                    recv_cq: (*p).recv_cq,
                    srq: (*p).srq,
                    cap: ca.cap,
                    qp_type: (*p).qp_type,
                    sq_sig_all: q.sq_sig_all.into(),
                });
                (*p).state = ca.qp_state;
            }
            0
        }
        Err(e) => errno::of(&e),
    }
}
symver!(query_qp, ibv_query_qp, "IBVERBS_1.1");

/// A multicast call on `p`'s control handle: EINVAL for a NULL QP or GID,
/// else 0 or the errno of `op`.
///
/// # Safety
/// As [`qp`]; `gid` is NULL or points at a 16-byte `union ibv_gid`.
unsafe fn mcast_call(
    p: *mut ibv_qp,
    gid: *const [u8; 16],
    op: fn(&rverbs::QpControl, &Gid, u16) -> rverbs::Result<()>,
    lid: u16,
) -> c_int {
    // SAFETY: the C contract: a live QP of ours.
    let Some(q) = (unsafe { qp(p) }) else { return EINVAL };
    // SAFETY: `gid`, when not NULL, is the caller's 16-byte union (any
    // bytes are a GID; a byte array has no alignment).
    let Some(g) = (unsafe { gid.as_ref() }) else { return EINVAL };
    match op(&q.control, &Gid(*g), lid) {
        Ok(()) => 0,
        Err(e) => errno::of(&e),
    }
}

/// `int ibv_attach_mcast(struct ibv_qp *, const union ibv_gid *, uint16_t
/// lid)`: 0 or an errno (rdma-core: the provider's `ibv_cmd_attach_mcast`).
unsafe extern "C" fn attach_mcast(p: *mut ibv_qp, gid: *const [u8; 16], lid: u16) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    unsafe { mcast_call(p, gid, rverbs::QpControl::attach_mcast, lid) }
}
symver!(attach_mcast, ibv_attach_mcast, "IBVERBS_1.1");

/// `int ibv_detach_mcast(struct ibv_qp *, const union ibv_gid *, uint16_t
/// lid)`: 0 or an errno.
unsafe extern "C" fn detach_mcast(p: *mut ibv_qp, gid: *const [u8; 16], lid: u16) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    unsafe { mcast_call(p, gid, rverbs::QpControl::detach_mcast, lid) }
}
symver!(detach_mcast, ibv_detach_mcast, "IBVERBS_1.1");

pub(crate) fn post_errno(k: &rverbs::PostErrorKind) -> c_int {
    match *k {
        rverbs::PostErrorKind::QueueFull => nix::libc::ENOMEM,
        rverbs::PostErrorKind::Doorbell(e) => e,
        _ => EINVAL,
    }
}

/// Why a post failed, for `*bad_wr`: a refused request is not in the
/// queue, so `*bad_wr` names it; after a failed rxe doorbell `write()` the
/// requests are in the ring all the same (the kernel takes them at the
/// next doorbell), so `*bad_wr` is left alone, as rdma-core's rxe leaves
/// it, and a caller that reposts from it posts nothing twice (audit-2 N2).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Refused {
    /// The request was not posted: this errno, `*bad_wr` at it.
    Request(c_int),
    /// Posted, but the doorbell failed with this errno.
    Doorbell(c_int),
}

impl From<&rverbs::PostError> for Refused {
    fn from(e: &rverbs::PostError) -> Self {
        match e.kind {
            rverbs::PostErrorKind::Doorbell(errno) => Refused::Doorbell(errno),
            ref k => Refused::Request(post_errno(k)),
        }
    }
}

/// The request's SGEs as rverbs' [`Sge`]s, in place: `struct ibv_sge`
/// and `Sge` have one layout (asserted below), so nothing is copied. `None`
/// when `num_sge` is negative or above [`MAX_SGE`], or the list is NULL.
///
/// # Safety
/// `sg_list` holds `num_sge` entries that the caller leaves alone while the
/// returned slice lives (the C contract: for the duration of the call).
pub(crate) unsafe fn sgl<'a>(sg_list: *const ibv_sge, num_sge: c_int) -> Option<&'a [Sge<'static>]> {
    let n = usize::try_from(num_sge).ok().filter(|&n| n <= MAX_SGE)?;
    if n == 0 {
        return Some(&[]);
    }
    if sg_list.is_null() {
        return None;
    }
    // `struct ibv_sge` and `Sge` share fields, offsets and alignment (asserted
    // below; any bits are valid, the lifetime marker is zero-sized).
    // SAFETY: `sg_list` is non-NULL, aligned, with `n` initialised entries.
    Some(unsafe { core::slice::from_raw_parts(sg_list.cast::<Sge<'static>>(), n) })
}

const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Sge<'static>>() == size_of::<ibv_sge>());
    assert!(align_of::<Sge<'static>>() == align_of::<ibv_sge>());
    assert!(offset_of!(Sge<'static>, addr) == offset_of!(ibv_sge, addr));
    assert!(offset_of!(Sge<'static>, length) == offset_of!(ibv_sge, length));
    assert!(offset_of!(Sge<'static>, lkey) == offset_of!(ibv_sge, lkey));
};

/// [`send_op`] for the opcodes [`translate`] does not take itself.
#[inline(never)]
fn other_send_op(w: &ibv_send_wr) -> Option<SendOp> {
    send_op(w)
}

fn send_op(w: &ibv_send_wr) -> Option<SendOp> {
    let remote = RemoteAddr { addr: w.wr[0], rkey: w.wr[1] as u32 };
    let atomic = RemoteAddr { addr: w.wr[0], rkey: w.wr[3] as u32 };
    Some(match w.opcode {
        0 => SendOp::RdmaWrite(remote),
        1 => SendOp::RdmaWriteWithImm(remote, u32::from_be(w.imm_data)),
        2 => SendOp::Send,
        3 => SendOp::SendWithImm(u32::from_be(w.imm_data)),
        4 => SendOp::RdmaRead(remote),
        5 => SendOp::AtomicCmpAndSwp { remote: atomic, compare: w.wr[1], swap: w.wr[2] },
        6 => SendOp::AtomicFetchAndAdd { remote: atomic, add: w.wr[1] },
        // `invalidate_rkey` shares `imm_data`'s place, in host order.
        7 => SendOp::LocalInv(w.imm_data),
        8 => {
            let mw = w.bind_mw[0] as *const crate::abi::ibv_mw;
            let info = crate::abi::ibv_mw_bind_info {
                mr: w.bind_mw[2] as *mut crate::abi::ibv_mr,
                addr: w.bind_mw[3],
                length: w.bind_mw[4],
                mw_access_flags: w.bind_mw[5] as u32,
            };
            // SAFETY: `bind_mw.mw` and `bind_info.mr` of a BIND_MW request
            // are live objects of ours (the C contract; the MR may be NULL).
            SendOp::BindMw(unsafe { crate::mw::bind_of(mw, w.bind_mw[1] as u32, &info) }?)
        }
        9 => SendOp::SendWithInv(w.imm_data),
        _ => return None,
    })
}

/// Requests translated per doorbell: a C list is posted in chunks of this
/// many (one `post_send_unchecked`, one doorbell, each).
pub(crate) const CHUNK: usize = 16;

/// One C request as rverbs' `SendWr` (its SGEs read in place); the errno
/// when it is malformed.
///
/// # Safety
/// `w` is the caller's request (`sg_list` holding `num_sge` entries; for a
/// UD QP, `wr.ud.ah` a live AH of ours), untouched for `'a`.
#[inline]
unsafe fn translate<'a>(w: &'a ibv_send_wr, ud_qp: bool) -> Result<SendWr<'a>, c_int> {
    let op = send_op(w).ok_or(EINVAL)?;
    // SAFETY: the caller's contract.
    unsafe { translate_with(w, ud_qp, op) }
}

/// [`translate`] with the operation already decoded.
///
/// # Safety
/// As for [`translate`].
#[inline(always)]
unsafe fn translate_with<'a>(w: &'a ibv_send_wr, ud_qp: bool, op: SendOp) -> Result<SendWr<'a>, c_int> {
    // SAFETY: the caller's contract.
    let sgl = unsafe { sgl(w.sg_list, w.num_sge) }.ok_or(EINVAL)?;
    let flags = SendFlags::from_bits_truncate(w.send_flags);
    let ud = if ud_qp {
        // SAFETY: the caller's contract.
        let ah = unsafe { crate::ah::ah(w.wr[0] as *const ibv_ah) }.ok_or(EINVAL)?;
        Some(UdDest::new(ah.inner.ah_num(), w.wr[1] as u32, (w.wr[1] >> 32) as u32))
    } else {
        None
    };
    Ok(SendWr { wr_id: w.wr_id, op, flags, sgl, ud })
}

/// Posts the one request `w` as `op`: the errno when it is malformed or
/// refused. Inlined once per opcode arm of [`post_send`], so that each arm
/// stores only its own operands.
///
/// # Safety
/// As for [`translate`].
#[inline(always)]
unsafe fn post_one(g: &mut rverbs::QueuePair, w: &ibv_send_wr, ud_qp: bool, op: SendOp) -> Result<(), Refused> {
    // SAFETY: forwarded.
    let one = unsafe { translate_with(w, ud_qp, op) }.map_err(Refused::Request)?;
    // SAFETY: for an INLINE request the caller's SGEs name memory it may
    // read now (the C contract of `ibv_post_send`); the others are checked
    // against registrations by the device.
    unsafe { g.post_send_one_unchecked(&one) }.map_err(|e| Refused::from(&e))
}

/// The `post_send` op (`ibv_post_send`): 0, or an errno with `*bad_wr` at
/// the first request not posted (those before it are posted, as rdma-core's
/// rxe). One request, the common case, is translated and posted here,
/// SEND and RDMA WRITE without the opcode table; a list goes to [`post_send_list`] in chunks of [`CHUNK`] requests, one
/// doorbell each (rdma-core rings once per list).
pub(crate) unsafe extern "C" fn post_send(
    p: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: the C contract: a live QP of ours.
    let Some(q) = (unsafe { qp(p) }) else { return fail_at(bad_wr, wr, EINVAL) };
    // SAFETY: `wr` is NULL or the caller's request.
    let Some(w) = (unsafe { wr.as_ref() }).filter(|w| w.next.is_null()) else {
        // SAFETY: the C contract of the list.
        return unsafe { post_send_slow(q, wr, bad_wr) };
    };
    let Some(mut g) = q.inner.try_lock() else {
        // SAFETY: the C contract of the list.
        return unsafe { post_send_slow(q, wr, bad_wr) };
    };
    let ud_qp = q.qp_type() == 4;
    // SEND and RDMA WRITE, perftest's and most programs' requests, each with
    // its operands alone; the other opcodes through the table (out of line).
    let posted = match w.opcode {
        // SAFETY: the C contract of the request.
        2 => unsafe { post_one(&mut g, w, ud_qp, SendOp::Send) },
        0 => {
            let remote = RemoteAddr { addr: w.wr[0], rkey: w.wr[1] as u32 };
            // SAFETY: the C contract of the request.
            unsafe { post_one(&mut g, w, ud_qp, SendOp::RdmaWrite(remote)) }
        }
        _ => match other_send_op(w) {
            // SAFETY: the C contract of the request.
            Some(op) => unsafe { post_one(&mut g, w, ud_qp, op) },
            None => Err(Refused::Request(EINVAL)),
        },
    };
    match posted {
        Ok(()) => 0,
        Err(Refused::Request(e)) => fail_at(bad_wr, wr, e),
        Err(Refused::Doorbell(e)) => e,
    }
}

/// [`post_send`] of a list, or of one request while another thread holds
/// the QP: waits for the lock, posts, releases it. `extern "C"`, so that it
/// cannot unwind and the calls above are plain tail calls.
///
/// # Safety
/// `wr` is NULL or the caller's list (the C contract of `ibv_post_send`).
#[inline(never)]
unsafe extern "C" fn post_send_slow(q: &Qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int {
    let mut g = q.inner.lock();
    // SAFETY: forwarded.
    unsafe { post_send_list(&mut g, wr, q.qp_type() == 4, bad_wr) }
}

/// A list of requests (any length: also one, or none), in chunks of
/// [`CHUNK`] with one doorbell each; out of line, so that the one-request
/// path above keeps a small frame (the chunk's `SendWr`s take 1.4 KiB of
/// stack).
///
/// # Safety
/// `wr` is the caller's list (the C contract of `ibv_post_send`).
#[inline(never)]
unsafe fn post_send_list(
    g: &mut rverbs::QueuePair,
    mut wr: *mut ibv_send_wr,
    ud_qp: bool,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let fail = |wr: *mut ibv_send_wr, e: c_int| fail_at(bad_wr, wr, e);
    while !wr.is_null() {
        let mut wrs = [const { core::mem::MaybeUninit::<SendWr<'_>>::uninit() }; CHUNK];
        let mut heads = [core::ptr::null_mut::<ibv_send_wr>(); CHUNK];
        let (mut n, mut bad) = (0, None);
        for _ in 0..CHUNK {
            // SAFETY: each `wr` is NULL or the caller's request, linked by `next`.
            let Some(w) = (unsafe { wr.as_ref() }) else { break };
            heads[n] = wr;
            // SAFETY: the C contract of the request.
            match unsafe { translate(w, ud_qp) } {
                Ok(s) => {
                    wrs[n].write(s);
                    n += 1;
                    wr = w.next;
                }
                Err(e) => {
                    bad = Some((n, e));
                    break;
                }
            }
        }
        // SAFETY: the first `n` entries were written above.
        let list = unsafe { core::slice::from_raw_parts(wrs.as_ptr().cast::<SendWr<'_>>(), n) };
        if n > 0 {
            // SAFETY: for INLINE requests the caller's SGEs name memory it
            // may read now (the C contract of `ibv_post_send`); the others
            // are checked against registrations by the device.
            if let Err(e) = unsafe { g.post_send_unchecked(list) } {
                return match Refused::from(&e) {
                    Refused::Request(errno) => fail(heads[e.index.min(n - 1)], errno),
                    // The chunk is in the ring: `*bad_wr` names the first
                    // request that is not (the refused one, or the next
                    // chunk's head), or stays alone when none is left.
                    Refused::Doorbell(errno) => {
                        let first_unposted = match bad {
                            _ if e.index < n => heads[e.index],
                            Some((i, _)) => heads[i],
                            None => wr,
                        };
                        if first_unposted.is_null() {
                            errno
                        } else {
                            fail(first_unposted, errno)
                        }
                    }
                };
            }
        }
        if let Some((i, e)) = bad {
            return fail(heads[i], e);
        }
    }
    0
}

/// The `post_recv` op (`ibv_post_recv`): 0, or an errno with `*bad_wr`.
pub(crate) unsafe extern "C" fn post_recv(
    p: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: the C contract: a live QP of ours.
    let Some(q) = (unsafe { qp(p) }) else { return fail_at(bad_wr, wr, EINVAL) };
    let mut g = q.inner.lock();
    // SAFETY: the C contract of the list.
    unsafe { post_recv_list(wr, bad_wr, |r| g.post_recv(core::slice::from_ref(r))) }
}

/// Stores `wr` in the caller's `*bad_wr` (when it gave one); returns `e`.
pub(crate) fn fail_at<W>(bad_wr: *mut *mut W, wr: *mut W, e: c_int) -> c_int {
    if !bad_wr.is_null() {
        // SAFETY: `bad_wr` is the caller's out pointer (the C contract).
        unsafe { *bad_wr = wr };
    }
    e
}

/// Posts a C receive list one request at a time through `post` (a QP's
/// receive queue or an SRQ, under its lock): 0, or an errno with `*bad_wr`
/// at the first request not posted. The SGEs are read in place.
///
/// # Safety
/// `wr` is NULL or the caller's list: each request's `sg_list` holds
/// `num_sge` entries, `next` links the next one or is NULL.
pub(crate) unsafe fn post_recv_list(
    mut wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
    mut post: impl FnMut(&RecvWr<'_>) -> Result<(), rverbs::PostError>,
) -> c_int {
    // SAFETY: each `wr` is NULL or the caller's request, linked by `next`.
    while let Some(w) = unsafe { wr.as_ref() } {
        // SAFETY: `sg_list` holds `num_sge` entries (the C contract).
        let Some(sgl) = (unsafe { sgl(w.sg_list, w.num_sge) }) else {
            return fail_at(bad_wr, wr, EINVAL);
        };
        if let Err(e) = post(&RecvWr { wr_id: w.wr_id, sgl }) {
            return fail_at(bad_wr, wr, post_errno(&e.kind));
        }
        wr = w.next;
    }
    0
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain QP's slot carries no `ibv_wr_*` ops: it is the extended
    /// one's less the 192 bytes after `ibv_qp`, and its heap cost stays
    /// under rdma-core's `struct rxe_qp` (about 480 bytes) with rverbs'
    /// shared QP (120) added.
    #[test]
    fn a_plain_qp_slot_has_no_wr_ops() {
        let (plain, ex) = (size_of::<QpSlot<ibv_qp>>(), size_of::<QpSlot<ibv_qp_ex>>());
        assert_eq!(ex - plain, size_of::<ibv_qp_ex>() - size_of::<ibv_qp>());
        assert!(plain + 120 <= 480, "plain slot {plain} bytes");
        assert_eq!(C_OFFSET, size_of::<Qp>());
    }
}
