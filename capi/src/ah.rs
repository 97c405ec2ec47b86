//! Address handles: `ibv_create_ah`, `ibv_destroy_ah`.

use core::ffi::c_int;
use std::sync::atomic::Ordering;

use crate::abi::{ibv_ah, ibv_ah_attr, ibv_pd};
use crate::errno::{self, set_errno, EINVAL};
use crate::export::symver;
use crate::pd::pd;
use crate::qp::ah_from_c;

/// An AH: the C `ibv_ah`, then rverbs' address handle.
#[repr(C)]
pub(crate) struct Ah {
    pub c: ibv_ah,
    pub inner: rverbs::AddressHandle,
}

/// # Safety
/// `p` is NULL or an AH `ibv_create_ah` returned and not yet destroyed.
pub(crate) unsafe fn ah<'a>(p: *const ibv_ah) -> Option<&'a Ah> {
    // SAFETY: by the contract, the `ibv_ah` is the first field of a live `Ah`.
    unsafe { p.cast::<Ah>().as_ref() }
}

/// `struct ibv_ah *ibv_create_ah(struct ibv_pd *, struct ibv_ah_attr *)`.
unsafe extern "C" fn create_ah(p: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: the C contract: a live PD of ours and the caller's attributes.
    let (Some(pd), Some(a)) = (unsafe { pd(p) }, unsafe { attr.as_ref() }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    match pd.inner.create_ah(&ah_from_c(a)) {
        Ok(inner) => {
            pd.users.fetch_add(1, Ordering::AcqRel);
            let c = ibv_ah { context: pd.c.context, pd: p, handle: inner.handle() };
            Box::into_raw(Box::new(Ah { c, inner })).cast()
        }
        Err(e) => {
            set_errno(errno::of(&e));
            core::ptr::null_mut()
        }
    }
}
symver!(create_ah, ibv_create_ah, "IBVERBS_1.1");

/// `int ibv_destroy_ah(struct ibv_ah *)`: 0 or an errno.
unsafe extern "C" fn destroy_ah(p: *mut ibv_ah) -> c_int {
    if p.is_null() {
        return EINVAL;
    }
    // SAFETY: boxed by `create_ah`; the caller gives it up here.
    let b = unsafe { Box::from_raw(p.cast::<Ah>()) };
    let r = b.inner.destroy();
    // SAFETY: an AH's PD outlives it (dealloc answers EBUSY before).
    if let Some(pd) = unsafe { pd(b.c.pd) } {
        pd.users.fetch_sub(1, Ordering::AcqRel);
    }
    match r {
        Ok(()) => 0,
        Err(e) => errno::of(&e),
    }
}
symver!(destroy_ah, ibv_destroy_ah, "IBVERBS_1.1");
