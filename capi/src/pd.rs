//! Protection domains and memory regions: `ibv_alloc_pd`, `ibv_dealloc_pd`,
//! `ibv_reg_mr`, `ibv_reg_mr_iova2` (iova = addr only), `ibv_rereg_mr`
//! (access changes only), `ibv_dereg_mr`.

use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{ibv_context, ibv_mr, ibv_pd};
use crate::context::ctx;
use crate::errno::{self, set_errno, EINVAL, EOPNOTSUPP};
use crate::export::symver;
use crate::pool::Pool;

/// A PD: the C `ibv_pd`, then rverbs' PD and the number of C objects
/// (MRs, QPs) made in it, so that `ibv_dealloc_pd` can answer EBUSY and
/// leave the PD usable, as rdma-core does (rverbs' `dealloc` consumes it).
#[repr(C)]
pub(crate) struct Pd {
    pub c: ibv_pd,
    pub inner: rverbs::ProtectionDomain,
    pub users: AtomicU32,
}

/// The PDs' memory.
static PDS: Pool<Pd> = Pool::new();
/// The MRs' memory.
static MRS: Pool<Mr> = Pool::new();

/// # Safety
/// `p` is NULL or a PD `ibv_alloc_pd` returned and not yet deallocated.
pub(crate) unsafe fn pd<'a>(p: *const ibv_pd) -> Option<&'a Pd> {
    // SAFETY: by the contract, the `ibv_pd` is the first field of a live `Pd`.
    unsafe { p.cast::<Pd>().as_ref() }
}

/// `struct ibv_pd *ibv_alloc_pd(struct ibv_context *)`.
unsafe extern "C" fn alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: the C contract: `context` is one we opened.
    let Some(c) = (unsafe { ctx(context) }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    match c.inner.alloc_pd() {
        Ok(inner) => {
            let c = ibv_pd { context, handle: inner.handle() };
            PDS.alloc(Pd { c, inner, users: AtomicU32::new(0) }).cast()
        }
        Err(e) => {
            set_errno(errno::of(&e));
            core::ptr::null_mut()
        }
    }
}
symver!(alloc_pd, ibv_alloc_pd, "IBVERBS_1.1");

/// `int ibv_dealloc_pd(struct ibv_pd *)`: 0, EBUSY while MRs or QPs of it
/// exist (the PD stays usable), or the kernel's errno.
unsafe extern "C" fn dealloc_pd(p: *mut ibv_pd) -> c_int {
    // SAFETY: the C contract: `p` is a live PD of ours.
    let Some(pd) = (unsafe { pd(p) }) else { return EINVAL };
    if pd.users.load(Ordering::Acquire) != 0 {
        return nix::libc::EBUSY;
    }
    // SAFETY: `p` was made by `alloc_pd` (from `PDS`); the caller gives it up to this
    // call (the C contract), so nothing else reaches it meanwhile.
    let pd = unsafe { &mut *p.cast::<Pd>() };
    if let Err(e) = rverbs::c_support::dealloc_pd_now(&mut pd.inner) {
        return errno::of(&e); // the PD stays usable, as with rdma-core
    }
    // SAFETY: as above; the kernel PD is gone.
    unsafe { PDS.free(p.cast::<Pd>()) };
    0
}
symver!(dealloc_pd, ibv_dealloc_pd, "IBVERBS_1.1");

/// An MR: the C `ibv_mr` alone, which holds the kernel's handle and keys
/// and the PD whose rverbs half deregisters it. (An rverbs
/// `MemoryRegion`, 88 bytes more, would add a view of memory the C caller
/// owns, a second count on the PD and a copy of the keys: 136 heap bytes
/// an MR to rdma-core's 64.)
#[repr(C)]
struct Mr {
    c: ibv_mr,
}

/// `IBV_ACCESS_OPTIONAL_RANGE`: access bits a device may ignore.
const ACCESS_OPTIONAL: u32 = 0x3ff0_0000;

fn reg(p: *mut ibv_pd, addr: *mut c_void, length: usize, iova: u64, access: c_int) -> *mut ibv_mr {
    // SAFETY: the C contract: `p` is a live PD of ours.
    let Some(pd) = (unsafe { pd(p) }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    if iova != addr as u64 {
        set_errno(EOPNOTSUPP);
        return core::ptr::null_mut();
    }
    let Some(flags) = rverbs::AccessFlags::from_bits(access as u32 & !ACCESS_OPTIONAL) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    // SAFETY: the C caller's contract for `ibv_reg_mr`: `addr..addr+length`
    // is its memory, mapped until `ibv_dereg_mr`, which the device may read
    // and write as the access flags allow.
    let keys = match unsafe { pd.inner.reg_mr_keys(addr.cast(), length, flags) } {
        Ok(k) => k,
        Err(e) => {
            set_errno(errno::of(&e));
            return core::ptr::null_mut();
        }
    };
    pd.users.fetch_add(1, Ordering::AcqRel);
    let c =
        ibv_mr { context: pd.c.context, pd: p, addr, length, handle: keys.handle, lkey: keys.lkey, rkey: keys.rkey };
    MRS.alloc(Mr { c }).cast()
}

/// `struct ibv_mr *ibv_reg_mr(struct ibv_pd *, void *addr, size_t length, int access)`.
unsafe extern "C" fn reg_mr(p: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut ibv_mr {
    reg(p, addr, length, addr as u64, access)
}
symver!(reg_mr, ibv_reg_mr, "IBVERBS_1.1");

/// `ibv_reg_mr_iova2(pd, addr, length, iova, unsigned access)`: only
/// `iova == addr` (EOPNOTSUPP otherwise: rverbs registers at the address).
unsafe extern "C" fn reg_mr_iova2(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    reg(p, addr, length, iova, access as c_int)
}
symver!(reg_mr_iova2, ibv_reg_mr_iova2, "IBVERBS_1.8");

/// `ibv_reg_mr_iova(pd, addr, length, iova, int access)`.
unsafe extern "C" fn reg_mr_iova(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    reg(p, addr, length, iova, access)
}
symver!(reg_mr_iova, ibv_reg_mr_iova, "IBVERBS_1.7");

/// `IBV_REREG_MR_CHANGE_TRANSLATION`, `_PD`, `_ACCESS`.
const REREG_TRANSLATION: c_int = 1 << 0;
const REREG_PD: c_int = 1 << 1;
const REREG_ACCESS: c_int = 1 << 2;
/// `IBV_REREG_MR_ERR_INPUT`: bad arguments, nothing asked of the kernel.
const REREG_ERR_INPUT: c_int = -1;
/// `IBV_REREG_MR_ERR_CMD`: the change was refused.
const REREG_ERR_CMD: c_int = -4;

/// `int ibv_rereg_mr(struct ibv_mr *, int flags, struct ibv_pd *, void
/// *addr, size_t length, int access)`: 0, or rdma-core 44's negative
/// `IBV_REREG_MR_ERR_*` with errno: `ERR_INPUT` + EINVAL for unknown flags,
/// a translation change without an address or length, or access bits
/// without `CHANGE_ACCESS` (rdma-core's checks); `ERR_CMD` + the errno of
/// the refusal otherwise. Only an access change is carried out (rverbs'
/// `MemoryRegion::rereg_access`, `IB_USER_VERBS_CMD_REREG_MR`); a
/// translation or PD change answers `ERR_CMD` + EOPNOTSUPP, as rdma-core 44
/// does on rxe (whose provider has no `rereg_mr`). On success the keys in
/// the `ibv_mr` are the new ones.
unsafe extern "C" fn rereg_mr(
    m: *mut ibv_mr,
    flags: c_int,
    _pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let input = |e| {
        set_errno(e);
        REREG_ERR_INPUT
    };
    if m.is_null() || flags & !(REREG_TRANSLATION | REREG_PD | REREG_ACCESS) != 0 {
        return input(EINVAL);
    }
    if flags & REREG_TRANSLATION != 0 && (length == 0 || addr.is_null()) {
        return input(EINVAL);
    }
    if access != 0 && flags & REREG_ACCESS == 0 {
        return input(EINVAL);
    }
    let refused = |e| {
        set_errno(e);
        REREG_ERR_CMD
    };
    if flags & (REREG_TRANSLATION | REREG_PD) != 0 {
        return refused(EOPNOTSUPP);
    }
    if flags == 0 {
        return 0;
    }
    let Some(a) = rverbs::AccessFlags::from_bits(access as u32 & !ACCESS_OPTIONAL) else { return refused(EINVAL) };
    // SAFETY: `m` was made by `reg` (from `MRS`) and is live (the C contract); the
    // caller does not use it concurrently with its rereg (rdma-core's
    // contract too).
    let mr = unsafe { &mut *m.cast::<Mr>() };
    // SAFETY: an MR's PD outlives it (dealloc answers EBUSY while it exists).
    let Some(pd) = (unsafe { pd(mr.c.pd) }) else { return refused(EINVAL) };
    match rverbs::c_support::rereg_mr_access(&pd.inner, mr.c.handle, a) {
        Ok(keys) => {
            mr.c.lkey = keys.lkey;
            mr.c.rkey = keys.rkey;
            0
        }
        Err(e) => refused(errno::of(&e)),
    }
}
symver!(rereg_mr, ibv_rereg_mr, "IBVERBS_1.1");

/// `int ibv_dereg_mr(struct ibv_mr *)`: 0 or an errno.
unsafe extern "C" fn dereg_mr(m: *mut ibv_mr) -> c_int {
    if m.is_null() {
        return EINVAL;
    }
    // SAFETY: `m` was made by `reg` (from `MRS`); the caller gives it up to this call
    // (the C contract), so nothing else reaches it meanwhile.
    let mr = unsafe { &*m.cast::<Mr>() };
    // SAFETY: the MR's PD outlives it (dealloc answers EBUSY while it exists).
    let Some(pd) = (unsafe { pd(mr.c.pd) }) else { return EINVAL };
    if let Err(e) = rverbs::c_support::dereg_mr_handle(&pd.inner, mr.c.handle) {
        return errno::of(&e); // the MR stays usable, as with rdma-core
    }
    pd.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: as above; the kernel MR is gone.
    unsafe { MRS.free(m.cast::<Mr>()) };
    0
}
symver!(dereg_mr, ibv_dereg_mr, "IBVERBS_1.1");
