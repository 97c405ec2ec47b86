//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq` (the limit),
//! `ibv_query_srq`, `ibv_destroy_srq`, and the `post_srq_recv` op.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{ibv_pd, ibv_recv_wr, ibv_srq, ibv_srq_attr, ibv_srq_init_attr, PthreadCond, PthreadMutex};
use crate::acks::Acks;
use crate::errno::{self, set_errno, EINVAL, EOPNOTSUPP};
use crate::export::symver;
use crate::pd::pd;
use crate::pool::Pool;
use crate::qp::{fail_at, post_recv_list};
use crate::spin::SpinLock;

/// An SRQ: the C `ibv_srq`, then rverbs' SRQ (posting needs it
/// exclusively: one lock), its control handle (modify and query issue
/// their command without that lock) and the number of QPs using it.
#[repr(C)]
pub(crate) struct Srq {
    /// C writes `srq_context` and reads `events_completed` through the
    /// pointer it holds: reached only through raw pointers.
    pub c: UnsafeCell<ibv_srq>,
    pub inner: SpinLock<rverbs::SharedReceiveQueue>,
    pub control: rverbs::SrqControl,
    pub users: AtomicU32,
    /// Its async events acknowledged (`crate::acks`).
    pub acks: Acks,
}

/// The SRQs' memory.
static SRQS: Pool<Srq> = Pool::new();

/// # Safety
/// `p` is NULL or an SRQ `ibv_create_srq` returned and not yet destroyed.
pub(crate) unsafe fn srq<'a>(p: *const ibv_srq) -> Option<&'a Srq> {
    // SAFETY: by the contract, the `ibv_srq` is the first field of a live `Srq`.
    unsafe { p.cast::<Srq>().as_ref() }
}

/// `struct ibv_srq *ibv_create_srq(struct ibv_pd *, struct ibv_srq_init_attr *)`:
/// writes the actual sizes back into `attr`.
unsafe extern "C" fn create_srq(p: *mut ibv_pd, init: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    // SAFETY: the C contract: a live PD of ours and the caller's attributes.
    let (Some(pd), Some(init)) = (unsafe { pd(p) }, unsafe { init.as_mut() }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    let a = rverbs::SrqAttr { max_wr: init.attr.max_wr, max_sge: init.attr.max_sge, srq_limit: init.attr.srq_limit };
    // The slot first: its address is the SRQ's `user_handle`, which its
    // async events carry, as in rdma-core.
    let s = SRQS.alloc_uninit();
    let created = rverbs::c_support::create_srq_with_handle(&pd.inner, &a, s as u64);
    let inner = match &created {
        Ok(i) => i,
        Err(e) => {
            // SAFETY: `s` is the slot taken above, never written.
            unsafe { SRQS.free_uninit(s) };
            set_errno(errno::of(e));
            return core::ptr::null_mut();
        }
    };
    pd.users.fetch_add(1, Ordering::AcqRel);
    init.attr.max_wr = inner.max_wr();
    init.attr.max_sge = inner.max_sge();
    let c = ibv_srq {
        context: pd.c.context,
        srq_context: init.srq_context,
        pd: p,
        handle: inner.handle(),
        mutex: PthreadMutex([0; 40]),
        cond: PthreadCond([0; 48]),
        events_completed: 0,
    };
    let control = inner.control().clone();
    // SAFETY: `s` is a fresh slot for an `Srq`: each field is written
    // once, in place (no `memcpy` of the whole), all of them
    // (`all_fields_written`) before the `Srq` is used or handed out. The
    // rverbs SRQ is read out of `created`, which is forgotten: it moves,
    // it is not copied.
    unsafe {
        (&raw mut (*s).c).write(UnsafeCell::new(c));
        (&raw mut (*s).inner).write(SpinLock::new(core::ptr::read(inner)));
        core::mem::forget(created);
        (&raw mut (*s).control).write(control);
        (&raw mut (*s).users).write(AtomicU32::new(0));
        (&raw mut (*s).acks).write(Acks::default());
    }
    s.cast()
}
symver!(create_srq, ibv_create_srq, "IBVERBS_1.1");

/// The fields `create_srq` writes into an SRQ's slot: a field added to
/// [`Srq`] fails to compile here until `create_srq` writes it too.
#[allow(dead_code)]
fn all_fields_written(s: Srq) {
    let Srq { c: _, inner: _, control: _, users: _, acks: _ } = s;
}

/// `IBV_SRQ_MAX_WR`, `IBV_SRQ_LIMIT`.
const SRQ_MAX_WR: c_int = 1;
const SRQ_LIMIT: c_int = 2;

/// `int ibv_modify_srq(struct ibv_srq *, struct ibv_srq_attr *, int mask)`:
/// the limit only (resizing answers EOPNOTSUPP).
unsafe extern "C" fn modify_srq(p: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int {
    // SAFETY: the C contract: a live SRQ of ours and the caller's attributes.
    let (Some(s), Some(a)) = (unsafe { srq(p) }, unsafe { attr.as_ref() }) else { return EINVAL };
    if mask & !(SRQ_MAX_WR | SRQ_LIMIT) != 0 {
        return EINVAL;
    }
    if mask & SRQ_MAX_WR != 0 {
        return EOPNOTSUPP;
    }
    if mask & SRQ_LIMIT == 0 {
        return 0;
    }
    match s.control.modify_limit(a.srq_limit) {
        Ok(()) => 0,
        Err(e) => errno::of(&e),
    }
}
symver!(modify_srq, ibv_modify_srq, "IBVERBS_1.1");

/// `int ibv_query_srq(struct ibv_srq *, struct ibv_srq_attr *)`.
unsafe extern "C" fn query_srq(p: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    // SAFETY: the C contract: a live SRQ of ours.
    let Some(s) = (unsafe { srq(p) }) else { return EINVAL };
    if attr.is_null() {
        return EINVAL;
    }
    match s.control.query() {
        Ok(a) => {
            // SAFETY: `attr` is the caller's struct.
            unsafe { attr.write(ibv_srq_attr { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit }) };
            0
        }
        Err(e) => errno::of(&e),
    }
}
symver!(query_srq, ibv_query_srq, "IBVERBS_1.1");

/// `int ibv_destroy_srq(struct ibv_srq *)`: EBUSY while QPs use it. Returns
/// once every async event reported for the SRQ is acknowledged
/// (`crate::acks`); if the kernel refuses, the SRQ stays usable.
unsafe extern "C" fn destroy_srq(p: *mut ibv_srq) -> c_int {
    // SAFETY: the C contract: a live SRQ of ours.
    let Some(s) = (unsafe { srq(p) }) else { return EINVAL };
    if s.users.load(Ordering::Acquire) != 0 {
        return nix::libc::EBUSY;
    }
    let reported = match rverbs::c_support::destroy_srq_now(&s.control) {
        Ok(n) => n,
        Err(e) => return errno::of(&e),
    };
    s.acks.wait_for(reported, 0);
    // SAFETY: `pd` is written at creation only.
    let srq_pd = unsafe { (*s.c.get()).pd };
    // SAFETY: an SRQ's PD outlives it (dealloc answers EBUSY before).
    if let Some(pd) = unsafe { pd(srq_pd) } {
        pd.users.fetch_sub(1, Ordering::AcqRel);
    }
    // SAFETY: made by `create_srq` (from `SRQS`); the kernel SRQ is gone
    // and no event names it any more: the caller gives it up here.
    unsafe { SRQS.free(p.cast::<Srq>()) };
    0
}
symver!(destroy_srq, ibv_destroy_srq, "IBVERBS_1.1");

/// The `post_srq_recv` op (`ibv_post_srq_recv`): 0, or an errno with `*bad_wr`.
pub(crate) unsafe extern "C" fn post_srq_recv(
    p: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: the C contract: a live SRQ of ours.
    let Some(s) = (unsafe { srq(p) }) else { return fail_at(bad_wr, wr, EINVAL) };
    let mut g = s.inner.lock();
    // SAFETY: the C contract of the list.
    unsafe { post_recv_list(wr, bad_wr, |r| g.post_recv(core::slice::from_ref(r))) }
}
