//! Memory windows: the `alloc_mw`, `bind_mw` and `dealloc_mw` ops of
//! `ibv_context_ops` (the inlines `ibv_alloc_mw`, `ibv_bind_mw`,
//! `ibv_dealloc_mw` call them), and the translation of a bind's C fields
//! into rverbs' `MwBind` for `IBV_WR_BIND_MW` requests and `wr_bind_mw`.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use std::sync::atomic::Ordering;

use rverbs::{inc_rkey, MwBind, MwType, SendFlags};

use crate::abi::{ibv_mw, ibv_mw_bind, ibv_mw_bind_info, ibv_pd, ibv_qp};
use crate::errno::{self, set_errno, EINVAL};
use crate::pd::pd;
use crate::qp::{post_errno, qp};

/// An MW: the C `ibv_mw`, then rverbs' window.
#[repr(C)]
struct Mw {
    /// C reads `rkey` through the pointer it holds while `bind_mw` writes
    /// it: reached only through raw pointers.
    c: UnsafeCell<ibv_mw>,
    inner: rverbs::MemoryWindow,
}

/// `IBV_ACCESS_ZERO_BASED`: rxe cannot bind a window zero-based.
const ZERO_BASED: u32 = 0x20;

/// The `alloc_mw` op (`ibv_alloc_mw(pd, type)`): NULL with EINVAL for a
/// type other than 1 and 2 (the kernel's answer), or the kernel's errno.
pub(crate) unsafe extern "C" fn alloc_mw(p: *mut ibv_pd, mw_type: u32) -> *mut ibv_mw {
    // SAFETY: the C contract: `p` is a live PD of ours.
    let (Some(pd), Some(t)) = (unsafe { pd(p) }, MwType::from_raw(mw_type)) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    match pd.inner.alloc_mw(t) {
        Ok(inner) => {
            pd.users.fetch_add(1, Ordering::AcqRel);
            let c = ibv_mw { context: pd.c.context, pd: p, rkey: inner.rkey(), handle: inner.handle(), mw_type };
            Box::into_raw(Box::new(Mw { c: UnsafeCell::new(c), inner })).cast()
        }
        Err(e) => {
            set_errno(errno::of(&e));
            core::ptr::null_mut()
        }
    }
}

/// The `dealloc_mw` op (`ibv_dealloc_mw`): 0 or the kernel's errno.
pub(crate) unsafe extern "C" fn dealloc_mw(m: *mut ibv_mw) -> c_int {
    if m.is_null() {
        return EINVAL;
    }
    // SAFETY: `m` was boxed by `alloc_mw`; the caller gives it up to this
    // call (the C contract), so nothing else reaches it meanwhile.
    let mw = unsafe { &mut *m.cast::<Mw>() };
    if let Err(e) = rverbs::c_support::dealloc_mw_now(&mut mw.inner) {
        return errno::of(&e); // the window stays usable, as with rdma-core
    }
    // SAFETY: the window's PD outlives it (dealloc answers EBUSY while it exists).
    if let Some(pd) = unsafe { pd((*mw.c.get()).pd) } {
        pd.users.fetch_sub(1, Ordering::AcqRel);
    }
    // SAFETY: as above; the kernel MW is gone.
    drop(unsafe { Box::from_raw(m.cast::<Mw>()) });
    0
}

/// The bind of window `m` (its key as the C struct holds it) to what
/// `info` says, giving it `new_rkey`; None for a zero-based bind (EINVAL
/// in rdma-core's rxe).
///
/// # Safety
/// `m` is a live window of ours; `info.mr` is NULL or a live MR.
pub(crate) unsafe fn bind_of(m: *const ibv_mw, new_rkey: u32, info: &ibv_mw_bind_info) -> Option<MwBind> {
    if info.mw_access_flags & ZERO_BASED != 0 || m.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let (mw_rkey, mr_lkey) = unsafe { ((*m).rkey, info.mr.as_ref().map_or(0, |mr| mr.lkey)) };
    Some(MwBind { mw_rkey, new_rkey, mr_lkey, addr: info.addr, length: info.length, access: info.mw_access_flags })
}

/// The `bind_mw` op (`ibv_bind_mw`, a type 1 window; the inline checked
/// the type and the PD): posts one `BIND_MW` with the window's next key
/// and, once posted, stores that key in `mw->rkey` (rdma-core's rxe: the
/// caller undoes it if the completion reports an error). 0 or an errno.
pub(crate) unsafe extern "C" fn bind_mw(p: *mut ibv_qp, m: *mut ibv_mw, b: *mut ibv_mw_bind) -> c_int {
    // SAFETY: the C contract: live objects of ours and the caller's struct.
    let (Some(q), Some(b)) = (unsafe { qp(p) }, unsafe { b.as_ref() }) else { return EINVAL };
    if m.is_null() {
        return EINVAL;
    }
    // SAFETY: `m` is live (the C contract) and was boxed by `alloc_mw`;
    // its C part is reached through the raw `m` only (audit-2 N5).
    let mw = unsafe { &*m.cast::<Mw>() };
    // SAFETY: as above; `bind_info.mr` is the caller's MR or NULL.
    let Some(bind) = (unsafe { bind_of(m, inc_rkey((*m).rkey), &b.bind_info) }) else { return EINVAL };
    let flags = SendFlags::from_bits_truncate(b.send_flags);
    let mut g = q.inner.lock();
    match g.bind_mw(&mw.inner, b.wr_id, bind, flags) {
        Ok(key) => {
            // SAFETY: `m` is live; C reads `rkey` after the call returns.
            unsafe { (*m).rkey = key };
            0
        }
        Err(e) => post_errno(&e.kind),
    }
}
