//! Completion channels and CQs: `ibv_create_comp_channel`,
//! `ibv_destroy_comp_channel`, `ibv_create_cq`, `ibv_destroy_cq`, `ibv_resize_cq`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`, and the `poll_cq` and
//! `req_notify_cq` ops the `verbs.h` inlines call.
//!
//! A C program may poll one CQ from several threads, so each CQ's rverbs
//! half sits behind a mutex (uncontended: one atomic pair per poll call).
//! A CQ from `ibv_create_cq_ex` is an `ibv_cq_ex` (its extended polling
//! ops: `crate::cq_ex`); one from `ibv_create_cq` is an `ibv_cq` only (C
//! has no way from an `ibv_cq` to an `ibv_cq_ex`).

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{ibv_comp_channel, ibv_context, ibv_cq, ibv_cq_ex, ibv_wc, PthreadCond, PthreadMutex};
use crate::acks::Acks;
use crate::context::ctx;
use crate::cq_ex::Span;
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

/// A CQ's Rust part: rverbs' CQ and the number of QPs using it. Its C
/// struct follows it in its [`CqSlot`].
#[repr(C)]
pub(crate) struct Cq {
    pub inner: SpinLock<rverbs::CompletionQueue>,
    pub users: AtomicU32,
    /// From `ibv_create_cq_ex`: its slot is a `CqSlot<ibv_cq_ex, Span>`.
    ex: bool,
    /// Its completion and async events acknowledged (`crate::acks`).
    pub acks: Acks,
}

/// A CQ's memory: its [`Cq`], then the C struct that C holds a pointer
/// to, an `ibv_cq` (`ibv_create_cq`) or an `ibv_cq_ex` (`ibv_create_cq_ex`,
/// whose first 128 bytes are the `ibv_cq`) followed by its polling
/// [`Span`]: a plain CQ carries no 160 bytes of `ibv_cq_ex` ops and no span
/// it never uses. C reads `status`/`wr_id` and the event counters, and may
/// write `cq_context`, through its pointer while other threads hold a
/// `&Cq`: the two never overlap, and the C struct is reached only through
/// raw pointers.
#[repr(C)]
pub(crate) struct CqSlot<C, S> {
    cq: Cq,
    c: C,
    span: S,
}

/// Where the C struct sits in either slot: the same place, so a C pointer
/// finds its `Cq` without knowing which.
const C_OFFSET: usize = core::mem::offset_of!(CqSlot<ibv_cq, ()>, c);
const _: () = assert!(C_OFFSET == core::mem::offset_of!(CqSlot<ibv_cq_ex, Span>, c));
/// How far after an extended CQ's `ibv_cq_ex` its span sits.
const SPAN_AFTER_C: usize = core::mem::offset_of!(CqSlot<ibv_cq_ex, Span>, span) - C_OFFSET;

/// The plain CQs' memory.
static CQS: Pool<CqSlot<ibv_cq, ()>> = Pool::new();
/// The extended CQs' memory.
static CQS_EX: Pool<CqSlot<ibv_cq_ex, Span>> = Pool::new();

/// # Safety
/// `p` is NULL or a CQ `ibv_create_cq` returned and not yet destroyed.
#[inline]
pub(crate) unsafe fn cq<'a>(p: *const ibv_cq) -> Option<&'a Cq> {
    if p.is_null() {
        return None;
    }
    // SAFETY: by the contract, `p` is the `c` of a live `CqSlot`, derived
    // from the slot's pointer (`create`): its `Cq` is `C_OFFSET` bytes
    // before, in the same allocation.
    Some(unsafe { &*p.byte_sub(C_OFFSET).cast::<Cq>() })
}

/// The polling span of an extended CQ.
///
/// # Safety
/// `p` is a live CQ of ours from `ibv_create_cq_ex`.
#[inline]
pub(crate) unsafe fn span<'a>(p: *const ibv_cq_ex) -> &'a Span {
    // SAFETY: by the contract, `p` is the `c` of a live
    // `CqSlot<ibv_cq_ex, Span>`, derived from the slot's pointer: its span
    // is `SPAN_AFTER_C` bytes after, in the same allocation.
    unsafe { &*p.byte_add(SPAN_AFTER_C).cast::<Span>() }
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
    unsafe { create(context, cqe, cq_context, chan, comp_vector, false) }
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
    ex: bool,
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
    // The slot first: its C struct's address is the CQ's `user_handle`,
    // which its events carry (`get_cq_event`, `get_async_event`), as in
    // rdma-core. Built there field by field: a slot is 300 to 520 bytes,
    // and each move of one (or of the rverbs CQ, 128) is a `memcpy`.
    // SAFETY: a fresh slot of either pool, not yet written.
    let (q, p) = unsafe {
        if ex {
            let s = CQS_EX.alloc_uninit();
            (&raw mut (*s).cq, (&raw mut (*s).c).cast::<ibv_cq>())
        } else {
            let s = CQS.alloc_uninit();
            (&raw mut (*s).cq, &raw mut (*s).c)
        }
    };
    let created = rverbs::c_support::create_cq_with_handle(&c.inner, &attr, p as u64);
    let inner = match &created {
        Ok(q) => q,
        Err(e) => {
            // SAFETY: `p` is the slot taken above, never written.
            unsafe { free_slot(p, ex, false) };
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
    // SAFETY: `q` and `p` are the fresh slot's parts, `p` an `ibv_cq_ex`
    // followed by a `Span` when `ex`: each field is written once, in
    // place, all of them (`all_fields_written`) before the CQ is used or
    // handed out. The rverbs CQ is read out of `created`, which is
    // forgotten: it moves, it is not copied.
    unsafe {
        if ex {
            let x = p.cast::<ibv_cq_ex>();
            x.write(crate::cq_ex::without_ops(cc));
            x.byte_add(SPAN_AFTER_C).cast::<Span>().write(Span::new());
        } else {
            p.write(cc);
        }
        (&raw mut (*q).inner).write(SpinLock::new(core::ptr::read(inner)));
        core::mem::forget(created);
        (&raw mut (*q).users).write(AtomicU32::new(0));
        (&raw mut (*q).ex).write(ex);
        (&raw mut (*q).acks).write(Acks::default());
    }
    if !chan.is_null() {
        let _refcnts = c.refcnts.lock();
        // SAFETY: `chan` is a live channel (checked above); only this
        // library writes `refcnt`, under the context's `refcnts` lock.
        unsafe { (*chan).refcnt += 1 };
    }
    p
}

/// The fields `create` writes into a CQ's slot: a field added to [`Cq`]
/// fails to compile here until `create` writes it too.
#[allow(dead_code)]
fn all_fields_written(q: Cq) {
    let Cq { inner: _, users: _, ex: _, acks: _ } = q;
}

/// Gives the slot whose C struct is `p` back to its pool (`ex`: the
/// extended CQs'), dropping its `Cq` when `written`.
///
/// # Safety
/// `p` is the C struct of a slot `create` took from that pool, not used
/// after; `written`: its `Cq` was written whole.
unsafe fn free_slot(p: *mut ibv_cq, ex: bool, written: bool) {
    // SAFETY: the caller's contract; `s` is the slot's start, derived from
    // the slot's own pointer. The C struct and the span need no drop.
    unsafe {
        let s = p.byte_sub(C_OFFSET);
        if written {
            core::ptr::drop_in_place(s.cast::<Cq>());
        }
        if ex {
            CQS_EX.free_uninit(s.cast());
        } else {
            CQS.free_uninit(s.cast());
        }
    }
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
    let ex = q.ex;
    // SAFETY: `context` and `channel` are written at creation only.
    let (context, chan) = unsafe { ((*p).context, (*p).channel) };
    if !chan.is_null() {
        // SAFETY: the CQ's context outlives it (the C contract of close).
        if let Some(c) = unsafe { ctx(context) } {
            let _refcnts = c.refcnts.lock();
            // SAFETY: a CQ's channel outlives it (destroy answers EBUSY
            // before); `refcnt` is written only under the `refcnts` lock.
            unsafe { (*chan).refcnt -= 1 };
        }
    }
    // SAFETY: made by `create` (from `CQS_EX` when `ex`, else `CQS`); the
    // kernel CQ is gone and no event names it any more: the caller gives
    // it up here.
    unsafe { free_slot(p, ex, true) };
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
/// On rxe one straight line with no call and no frame, both for the empty
/// poll of a busy-polling caller (the NULL tests, the lock (`lock bts`),
/// the provider's producer index against ours, the release) and for a
/// poll that finds one or two completions (the same, then the copies into
/// the caller's array and the consumer's store). Three or more, other
/// providers, a held lock and bad arguments go on, as tail calls, to
/// functions out of line.
pub(crate) unsafe extern "C" fn poll_cq(p: *mut ibv_cq, num: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the C contract: a live CQ of ours.
    let Some(q) = (unsafe { cq(p) }) else { return -EINVAL };
    let Some(mut g) = q.inner.try_lock_bts() else {
        // SAFETY: forwarded (`num` and `wc` are tested there).
        return unsafe { poll_contended(q, num, wc) };
    };
    if num < 1 || wc.is_null() {
        return bad_poll(g, num);
    }
    // SAFETY: as in `poll_locked`.
    let out = unsafe { core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<rverbs::Wc>>(), num as usize) };
    match rverbs::c_support::poll_few_uninit_net_imm(&mut g, out) {
        Some(n) => n as c_int,
        // SAFETY: forwarded.
        None => unsafe { poll_locked(g, num, wc) },
    }
}

/// [`poll_cq`] when another thread holds the CQ: waits for it, then polls.
///
/// # Safety
/// `wc` is NULL or holds `num` entries.
#[cold]
#[inline(never)]
unsafe extern "C" fn poll_contended(q: &Cq, num: c_int, wc: *mut ibv_wc) -> c_int {
    let g = q.inner.lock();
    if num < 1 || wc.is_null() {
        return bad_poll(g, num);
    }
    // SAFETY: forwarded.
    unsafe { poll_locked(g, num, wc) }
}

/// [`poll_cq`] of `num` entries (at least 1, into a non-NULL `wc`) that
/// [`poll_few_uninit_net_imm`](rverbs::c_support::poll_few_uninit_net_imm)
/// did not take: up to `num` completions written into `wc`; returns how
/// many. Takes the held lock and releases it on return. Tests for an empty
/// CQ first: another provider's emptiness test (mlx5: the next entry's
/// owner bit) costs less than its poll, and a busy-polling caller's polls
/// are nearly all empty. The provider
/// decodes straight into the caller's array: rverbs' `Wc` has `ibv_wc`'s
/// layout (asserted below; its `port_num` lies in `ibv_wc`'s tail
/// padding), and the `*_net_imm` polls leave `imm_data` in network order
/// as `ibv_wc` holds it, so there is no local copy, no zeroing, no swap.
///
/// # Safety
/// `num >= 1`, and `wc` holds `num` entries.
#[inline(never)]
unsafe extern "C" fn poll_locked(mut cq: SpinGuard<'_, rverbs::CompletionQueue>, num: c_int, wc: *mut ibv_wc) -> c_int {
    if num == 1 {
        // One entry (perftest's latency tests) on a provider that is not
        // inlined (`poll_cq` takes every one-entry poll of rxe in line):
        // the emptiness test and its one-entry path (mlx5's
        // `poll_one_uninit`, no slice to test) in one call.
        // SAFETY: the caller's array holds one `ibv_wc`, seen as an
        // uninitialised `Wc` of the same layout; no other reference to it
        // exists while the C caller waits for this call.
        let w = unsafe { &mut *wc.cast::<MaybeUninit<rverbs::Wc>>() };
        return c_int::from(rverbs::c_support::poll_one_ready_uninit_net_imm(&mut cq, w).is_some());
    }
    if cq.is_empty() {
        return 0;
    }
    // SAFETY: the caller's array holds `num` entries of `ibv_wc` (the C
    // contract), as many `Wc`s of the same size and alignment; seen as
    // `MaybeUninit`, nothing is assumed of what they hold, and no other
    // reference to them exists while the C caller waits for this call.
    let out = unsafe { core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<rverbs::Wc>>(), num as usize) };
    rverbs::c_support::poll_uninit_net_imm(&mut cq, out).len() as c_int
}

/// [`poll_cq`]'s answer to `num < 1` or a NULL array: 0 for an empty CQ
/// or for `num == 0`, else `-EINVAL`. Releases the lock.
#[cold]
#[inline(never)]
extern "C" fn bad_poll(cq: SpinGuard<'_, rverbs::CompletionQueue>, num: c_int) -> c_int {
    if cq.is_empty() || num == 0 {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain CQ's slot carries no `ibv_cq_ex` ops and no polling span:
    /// the extended one is larger by exactly those.
    #[test]
    fn a_plain_cq_slot_has_no_ex_ops_or_span() {
        let (plain, ex) = (size_of::<CqSlot<ibv_cq, ()>>(), size_of::<CqSlot<ibv_cq_ex, Span>>());
        assert_eq!(ex - plain, size_of::<ibv_cq_ex>() - size_of::<ibv_cq>() + size_of::<Span>());
        assert!(plain <= 300, "plain slot {plain} bytes");
        assert_eq!(C_OFFSET, size_of::<Cq>());
    }
}
