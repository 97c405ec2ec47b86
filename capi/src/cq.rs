//! Completion channels and CQs: `ibv_create_comp_channel`,
//! `ibv_destroy_comp_channel`, `ibv_create_cq`, `ibv_destroy_cq`, `ibv_resize_cq`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`, and the `poll_cq` and
//! `req_notify_cq` ops the `verbs.h` inlines call.
//!
//! A C program may poll one CQ from several threads, so each CQ's rverbs
//! half sits behind a mutex (uncontended: one atomic pair per poll call).
//! Every CQ is an `ibv_cq_ex` (its extended polling ops: `crate::cq_ex`).

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::abi::{ibv_comp_channel, ibv_context, ibv_cq, ibv_cq_ex, ibv_wc, PthreadCond, PthreadMutex};
use crate::acks::Acks;
use crate::context::ctx;
use crate::errno::{self, set_errno, EINVAL};
use crate::export::symver;
use crate::pool::Pool;
use crate::spin::{SpinGuard, SpinLock};

/// A completion channel: the C struct (its `refcnt` counts the CQs using it).
#[repr(C)]
struct Channel {
    /// `refcnt` is written under the context's `refcnts` lock while other
    /// threads hold a `&Channel`: reached only through raw pointers.
    c: UnsafeCell<ibv_comp_channel>,
    inner: rverbs::CompletionChannel,
}

/// A CQ: the C `ibv_cq_ex` (whose first 128 bytes are the `ibv_cq`), then
/// rverbs' CQ, the number of QPs using it, and the state of an
/// `ibv_start_poll` … `ibv_end_poll` span.
#[repr(C)]
pub(crate) struct Cq {
    /// C reads `status`/`wr_id` and the event counters, and may write
    /// `cq_context`, through the pointer it holds, while other threads hold
    /// a `&Cq`: reached only through raw pointers.
    pub c: UnsafeCell<ibv_cq_ex>,
    pub inner: SpinLock<rverbs::CompletionQueue>,
    pub users: AtomicU32,
    /// The thread holding the polling span, from a successful `start_poll`
    /// to its `end_poll` (rdma-core's providers hold the CQ lock over the
    /// same span), as `crate::cq_ex::me()`; 0 when none does.
    pub polling: AtomicUsize,
    /// The current completion of the span: written by `start_poll` and
    /// `next_poll`, read by the `ibv_wc_read_*` ops, only by the thread
    /// holding `polling`.
    pub cur: UnsafeCell<ibv_wc>,
    /// Its completion and async events acknowledged (`crate::acks`).
    pub acks: Acks,
}

/// The CQs' memory.
static CQS: Pool<Cq> = Pool::new();

/// # Safety
/// `p` is NULL or a CQ `ibv_create_cq` returned and not yet destroyed.
pub(crate) unsafe fn cq<'a>(p: *const ibv_cq) -> Option<&'a Cq> {
    // SAFETY: by the contract, the `ibv_cq` is the first field of a live `Cq`.
    unsafe { p.cast::<Cq>().as_ref() }
}

/// # Safety
/// `p` is NULL or a live channel of ours.
unsafe fn channel<'a>(p: *const ibv_comp_channel) -> Option<&'a Channel> {
    // SAFETY: by the contract, the C struct is the first field of a live `Channel`.
    unsafe { p.cast::<Channel>().as_ref() }
}

/// `struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *)`.
unsafe extern "C" fn create_comp_channel(context: *mut ibv_context) -> *mut ibv_comp_channel {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    // Blocking, as libibverbs creates it: `ibv_get_cq_event` is one read()
    // that sleeps, and a caller's fcntl(O_NONBLOCK) gets EAGAIN from it.
    match c.inner.create_comp_channel().and_then(|ch| ch.set_blocking(true).map(|()| ch)) {
        Ok(inner) => {
            let c = ibv_comp_channel { context, fd: inner.as_fd().as_raw_fd(), refcnt: 0 };
            Box::into_raw(Box::new(Channel { c: UnsafeCell::new(c), inner })).cast()
        }
        Err(e) => {
            set_errno(errno::of(&e));
            core::ptr::null_mut()
        }
    }
}
symver!(create_comp_channel, ibv_create_comp_channel, "IBVERBS_1.0");

/// `int ibv_destroy_comp_channel(struct ibv_comp_channel *)`: EBUSY while CQs use it.
unsafe extern "C" fn destroy_comp_channel(p: *mut ibv_comp_channel) -> c_int {
    // SAFETY: the C contract: a live channel of ours.
    let Some(ch) = (unsafe { channel(p) }) else { return EINVAL };
    // SAFETY: `refcnt` is written under the `refcnts` lock only; a CQ being
    // created on this channel now is the caller's race, as with rdma-core.
    if unsafe { (*ch.c.get()).refcnt } != 0 {
        return nix::libc::EBUSY;
    }
    // SAFETY: boxed by `create_comp_channel`; the caller gives it up here.
    drop(unsafe { Box::from_raw(p.cast::<Channel>()) });
    0
}
symver!(destroy_comp_channel, ibv_destroy_comp_channel, "IBVERBS_1.0");

/// `struct ibv_cq *ibv_create_cq(ctx, int cqe, void *cq_context, struct
/// ibv_comp_channel *, int comp_vector)`.
unsafe extern "C" fn create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    chan: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: the C contract, passed on.
    unsafe { create(context, cqe, cq_context, chan, comp_vector) }
}
symver!(create_cq, ibv_create_cq, "IBVERBS_1.1");

/// `ibv_create_cq`, also behind `ibv_create_cq_ex` (a separate function:
/// an export called from Rust too loses its `.symver` alias).
///
/// # Safety
/// `context` is NULL or one we opened; `chan` NULL or a live channel of ours.
pub(crate) unsafe fn create(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    chan: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: the C contract: `context` is one we opened, `chan` NULL or a live channel.
    let (Some(c), ch) = (unsafe { ctx(context) }, unsafe { channel(chan) }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    if cqe < 1 || comp_vector < 0 || (!chan.is_null() && ch.is_none()) {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    }
    let attr = rverbs::CqInitAttr { cqe: cqe as u32, channel: ch.map(|ch| &ch.inner), comp_vector: comp_vector as u32 };
    // The slot first: its address is the CQ's `user_handle`, which its
    // events carry (`get_cq_event`, `get_async_event`), as in rdma-core.
    // Built there field by field: a `Cq` is about 560 bytes, and each move
    // of one (or of the rverbs CQ, 128) is a `memcpy`.
    let p = CQS.alloc_uninit();
    let created = rverbs::c_support::create_cq_with_handle(&c.inner, &attr, p as u64);
    let inner = match &created {
        Ok(q) => q,
        Err(e) => {
            // SAFETY: `p` is the slot taken above, never written.
            unsafe { CQS.free_uninit(p) };
            set_errno(errno::of(e));
            return core::ptr::null_mut();
        }
    };
    let cc = ibv_cq {
        context,
        channel: chan,
        cq_context,
        handle: inner.handle(),
        cqe: inner.cqe() as c_int,
        mutex: PthreadMutex([0; 40]),
        cond: PthreadCond([0; 48]),
        comp_events_completed: 0,
        async_events_completed: 0,
    };
    // SAFETY: `p` is a fresh slot for a `Cq`: each field is written once,
    // in place, all of them (`all_fields_written`) before the `Cq` is used
    // or handed out. The rverbs CQ is read out of `created`, which is
    // forgotten: it moves, it is not copied.
    unsafe {
        (&raw mut (*p).c).write(UnsafeCell::new(crate::cq_ex::without_ops(cc)));
        (&raw mut (*p).inner).write(SpinLock::new(core::ptr::read(inner)));
        core::mem::forget(created);
        (&raw mut (*p).users).write(AtomicU32::new(0));
        (&raw mut (*p).polling).write(AtomicUsize::new(0));
        (&raw mut (*p).cur).write(UnsafeCell::new(crate::cq_ex::NO_WC));
        (&raw mut (*p).acks).write(Acks::default());
    }
    if !chan.is_null() {
        let _refcnts = c.refcnts.lock();
        // SAFETY: `chan` is a live channel (checked above); only this
        // library writes `refcnt`, under the context's `refcnts` lock.
        unsafe { (*chan).refcnt += 1 };
    }
    p.cast()
}

/// The fields `create` writes into a CQ's slot: a field added to [`Cq`]
/// fails to compile here until `create` writes it too.
#[allow(dead_code)]
fn all_fields_written(q: Cq) {
    let Cq { c: _, inner: _, users: _, polling: _, cur: _, acks: _ } = q;
}

/// `ibv_cq_ex *` and `ibv_cq *` of a CQ are the same pointer.
const _: () = assert!(core::mem::offset_of!(ibv_cq_ex, cq) == 0);

/// `int ibv_destroy_cq(struct ibv_cq *)`: EBUSY while QPs use it. Returns
/// once every completion and async event reported for the CQ is
/// acknowledged (`crate::acks`); if the kernel refuses, the CQ stays usable.
unsafe extern "C" fn destroy_cq(p: *mut ibv_cq) -> c_int {
    // SAFETY: the C contract: a live CQ of ours.
    let Some(q) = (unsafe { cq(p) }) else { return EINVAL };
    if q.users.load(Ordering::Acquire) != 0 {
        return nix::libc::EBUSY;
    }
    let reported = rverbs::c_support::destroy_cq_now(&q.inner.lock());
    let reported = match reported {
        Ok(r) => r,
        Err(e) => return errno::of(&e),
    };
    q.acks.wait_for(reported.async_, reported.comp);
    // SAFETY: `context` and `channel` are written at creation only.
    let (context, chan) = unsafe { ((*q.c.get()).cq.context, (*q.c.get()).cq.channel) };
    if !chan.is_null() {
        // SAFETY: the CQ's context outlives it (the C contract of close).
        if let Some(c) = unsafe { ctx(context) } {
            let _refcnts = c.refcnts.lock();
            // SAFETY: a CQ's channel outlives it (destroy answers EBUSY
            // before); `refcnt` is written only under the `refcnts` lock.
            unsafe { (*chan).refcnt -= 1 };
        }
    }
    // SAFETY: made by `create` (from `CQS`); the kernel CQ is gone and no
    // event names it any more: the caller gives it up here.
    unsafe { CQS.free(p.cast::<Cq>()) };
    0
}
symver!(destroy_cq, ibv_destroy_cq, "IBVERBS_1.1");

/// `int ibv_resize_cq(struct ibv_cq *, int cqe)`: 0 or an errno (EINVAL
/// for a depth below 1 or above the device's `max_cqe`); `cq->cqe` then
/// holds the new depth. Unpolled completions are kept.
unsafe extern "C" fn resize_cq(p: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: the C contract: a live CQ of ours.
    let Some(q) = (unsafe { cq(p) }) else { return EINVAL };
    let Ok(n) = u32::try_from(cqe) else { return EINVAL };
    let mut g = q.inner.lock();
    match g.resize(n) {
        Ok(()) => {
            // SAFETY: `p` is live; written under the CQ's lock, read by C
            // callers as with rdma-core's.
            unsafe { (*p).cqe = g.cqe() as c_int };
            0
        }
        Err(e) => errno::of(&e),
    }
}
symver!(resize_cq, ibv_resize_cq, "IBVERBS_1.1");

/// `int ibv_get_cq_event(struct ibv_comp_channel *, struct ibv_cq **, void
/// **cq_context)`: 0, or -1 with errno (`EAGAIN` on a non-blocking fd with
/// no event queued, `EINTR` when a signal cut the sleep short).
unsafe extern "C" fn get_cq_event(
    chan: *mut ibv_comp_channel,
    out_cq: *mut *mut ibv_cq,
    out_ctx: *mut *mut c_void,
) -> c_int {
    // SAFETY: the C contract: a live channel of ours.
    let Some(ch) = (unsafe { channel(chan) }) else {
        set_errno(EINVAL);
        return -1;
    };
    // One read(), as rdma-core's: it sleeps on the channel's fd, which is
    // blocking unless the caller made it non-blocking (then EAGAIN when
    // no event is queued); a signal's EINTR is returned, not retried.
    let ev = match ch.inner.read_cq_event() {
        Ok(Some(ev)) => ev,
        Ok(None) => {
            set_errno(nix::libc::EAGAIN);
            return -1;
        }
        Err(e) => {
            set_errno(errno::of(&e));
            return -1;
        }
    };
    // The handle is the CQ's address (`create`). Its destroy frees it only
    // after the acknowledgement of this event, which the kernel counted
    // when the read above returned it (and a destroy before the read took
    // the event off the channel).
    let p = ev.cq_user_handle as usize as *mut ibv_cq;
    if p.is_null() {
        set_errno(nix::libc::EIO);
        return -1;
    }
    // SAFETY: `p` is a CQ of ours not yet freed (above); the out pointers
    // are the caller's.
    unsafe {
        if !out_cq.is_null() {
            *out_cq = p;
        }
        if !out_ctx.is_null() {
            *out_ctx = (*p).cq_context;
        }
    }
    0
}
symver!(get_cq_event, ibv_get_cq_event, "IBVERBS_1.1");

/// `void ibv_ack_cq_events(struct ibv_cq *, unsigned int nevents)`.
unsafe extern "C" fn ack_cq_events(p: *mut ibv_cq, n: u32) {
    // SAFETY: the C contract: a live CQ of ours (a destroy waits for this).
    if let Some(q) = unsafe { cq(p) } {
        // SAFETY: the field of this live CQ.
        unsafe { q.acks.ack_comp(n, &raw mut (*p).comp_events_completed) };
    }
}
symver!(ack_cq_events, ibv_ack_cq_events, "IBVERBS_1.1");

pub(crate) fn wc_to_c(w: &rverbs::Wc) -> ibv_wc {
    ibv_wc {
        wr_id: w.wr_id,
        status: w.status.0,
        opcode: w.opcode.0,
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        imm_data: w.imm_data.to_be(),
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: w.wc_flags.bits(),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
    }
}

/// The `poll_cq` op (`ibv_poll_cq`): the number of completions written, or
/// `-EINVAL` for a NULL CQ, and, when completions are ready, for a
/// negative `num` or a NULL array. An empty CQ answers 0 whatever `num`
/// and `wc` are (nothing is written), as rdma-core's providers do.
///
/// Shaped for a busy-polling caller, whose polls are nearly all empty: the
/// empty one is the NULL test, the lock (`lock bts`), the provider's
/// emptiness test ([`rverbs::CompletionQueue::is_empty`]: a jump on the
/// provider, then on rxe its producer index against ours) and the release,
/// with no call and no frame (19 instructions on rxe, from 32). A poll that
/// finds something goes on, as a tail call, to [`poll_one_locked`] or
/// [`poll_locked`], which test the arguments and copy.
pub(crate) unsafe extern "C" fn poll_cq(p: *mut ibv_cq, num: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the C contract: a live CQ of ours.
    let Some(q) = (unsafe { cq(p) }) else { return -EINVAL };
    let Some(g) = q.inner.try_lock_bts() else {
        // SAFETY: forwarded (`wc` is tested there).
        return unsafe { poll_contended(q, num, wc) };
    };
    if g.is_empty() {
        return 0;
    }
    if num == 1 {
        // SAFETY: forwarded (`wc` is tested there).
        return unsafe { poll_one_locked(g, wc) };
    }
    // SAFETY: forwarded (`num` and `wc` are tested there).
    unsafe { poll_locked(g, num, wc) }
}

/// [`poll_cq`] when another thread holds the CQ: waits for it, then polls.
///
/// # Safety
/// `wc` is NULL or holds `num` entries.
#[inline(never)]
unsafe extern "C" fn poll_contended(q: &Cq, num: c_int, wc: *mut ibv_wc) -> c_int {
    let g = q.inner.lock();
    if num == 1 {
        // SAFETY: forwarded.
        return unsafe { poll_one_locked(g, wc) };
    }
    // SAFETY: forwarded.
    unsafe { poll_locked(g, num, wc) }
}

/// [`poll_cq`] of one entry (perftest's latency tests) that may find a
/// completion: it is written into `wc`; returns 1, or 0 if there was none
/// after all, or `-EINVAL` for a NULL `wc`. Takes the held lock and
/// releases it on return. rxe's ring copy is inlined here (one frame).
///
/// rverbs' `Wc` has `ibv_wc`'s layout (asserted below; its `port_num` lies
/// in `ibv_wc`'s tail padding), and the `*_net_imm` polls leave `imm_data`
/// in network order as `ibv_wc` holds it, so the provider decodes straight
/// into the caller's array: no local copy, no zeroing, no swap.
///
/// # Safety
/// `wc` is NULL or holds one entry.
#[cold]
#[inline(never)]
unsafe extern "C" fn poll_one_locked(mut cq: SpinGuard<'_, rverbs::CompletionQueue>, wc: *mut ibv_wc) -> c_int {
    if wc.is_null() {
        drop(cq);
        return -EINVAL;
    }
    // SAFETY: the caller's array holds one `ibv_wc`, seen as an
    // uninitialised `Wc` of the same layout; no other reference to it
    // exists while the C caller waits for this call.
    let w = unsafe { &mut *wc.cast::<MaybeUninit<rverbs::Wc>>() };
    c_int::from(rverbs::c_support::poll_one_uninit_net_imm(&mut cq, w).is_some())
}

/// [`poll_cq`] of `num` entries that may find completions: up to `num` of
/// them written into `wc`; returns how many, or for `num < 1` or a NULL
/// `wc` [`bad_poll`]'s answer. Takes the held lock and releases it on
/// return. As [`poll_one_locked`], straight into the caller's array.
///
/// # Safety
/// `wc` is NULL or holds `num` entries.
#[cold]
#[inline(never)]
unsafe extern "C" fn poll_locked(mut cq: SpinGuard<'_, rverbs::CompletionQueue>, num: c_int, wc: *mut ibv_wc) -> c_int {
    if num < 1 || wc.is_null() {
        drop(cq);
        return bad_poll(num);
    }
    // SAFETY: the caller's array holds `num` entries of `ibv_wc` (the C
    // contract), as many `Wc`s of the same size and alignment; seen as
    // `MaybeUninit`, nothing is assumed of what they hold, and no other
    // reference to them exists while the C caller waits for this call.
    let out = unsafe { core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<rverbs::Wc>>(), num as usize) };
    rverbs::c_support::poll_uninit_net_imm(&mut cq, out).len() as c_int
}

/// [`poll_locked`]'s answer to `num < 1` or a NULL array: 0 for `num ==
/// 0`, else `-EINVAL`.
#[cold]
#[inline(never)]
fn bad_poll(num: c_int) -> c_int {
    if num == 0 {
        0
    } else {
        -EINVAL
    }
}

const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    use rverbs::Wc;
    assert!(size_of::<Wc>() == size_of::<ibv_wc>());
    assert!(align_of::<Wc>() == align_of::<ibv_wc>());
    assert!(offset_of!(Wc, wr_id) == offset_of!(ibv_wc, wr_id));
    assert!(offset_of!(Wc, status) == offset_of!(ibv_wc, status));
    assert!(offset_of!(Wc, opcode) == offset_of!(ibv_wc, opcode));
    assert!(offset_of!(Wc, vendor_err) == offset_of!(ibv_wc, vendor_err));
    assert!(offset_of!(Wc, byte_len) == offset_of!(ibv_wc, byte_len));
    assert!(offset_of!(Wc, imm_data) == offset_of!(ibv_wc, imm_data));
    assert!(offset_of!(Wc, qp_num) == offset_of!(ibv_wc, qp_num));
    assert!(offset_of!(Wc, src_qp) == offset_of!(ibv_wc, src_qp));
    assert!(offset_of!(Wc, wc_flags) == offset_of!(ibv_wc, wc_flags));
    assert!(offset_of!(Wc, pkey_index) == offset_of!(ibv_wc, pkey_index));
    assert!(offset_of!(Wc, slid) == offset_of!(ibv_wc, slid));
    assert!(offset_of!(Wc, sl) == offset_of!(ibv_wc, sl));
    assert!(offset_of!(Wc, dlid_path_bits) == offset_of!(ibv_wc, dlid_path_bits));
    // `port_num`, which `ibv_wc` lacks, falls in its tail padding.
    assert!(offset_of!(Wc, port_num) > offset_of!(ibv_wc, dlid_path_bits));
    assert!(offset_of!(Wc, port_num) < size_of::<ibv_wc>());
};

/// The `req_notify_cq` op (`ibv_req_notify_cq`): 0 or an errno.
pub(crate) unsafe extern "C" fn req_notify_cq(p: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: the C contract: a live CQ of ours.
    let Some(q) = (unsafe { cq(p) }) else { return EINVAL };
    let mut g = q.inner.lock();
    match g.req_notify(solicited_only != 0) {
        Ok(()) => 0,
        Err(e) => errno::of(&e),
    }
}
