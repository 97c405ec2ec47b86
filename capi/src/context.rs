//! `ibv_open_device` / `ibv_close_device`: one [`Ctx`] per open, the C
//! `verbs_context` (648 bytes) first, its embedded `ibv_context` (offset
//! 320) being the pointer applications hold; every op slot filled with the
//! implementation or an EOPNOTSUPP dummy, as rdma-core's
//! `verbs_set_ops(&verbs_dummy_ops)` does.

use core::ffi::{c_int, c_void};
use core::mem::offset_of;
use std::os::fd::AsRawFd;

use crate::abi::{ibv_context, ibv_context_ops, ibv_device, verbs_context, PthreadMutex, Slot};
use crate::device::dev;
use crate::errno::{self, set_errno, EINVAL};
use crate::export::symver;
use crate::spin::SpinLock;
use crate::stubs::{dummy_int, dummy_null};

/// An open device: the C `verbs_context`, then rverbs' context.
#[repr(C)]
pub(crate) struct Ctx {
    pub vctx: verbs_context,
    pub inner: rverbs::Context,
    /// Held while a completion channel's `refcnt` changes (a CQ created
    /// on it or destroyed). The CQs', QPs' and SRQs' events need no table:
    /// their `user_handle` is the C object's address, as in rdma-core
    /// (`rverbs::c_support::create_cq_with_handle`).
    pub refcnts: SpinLock<()>,
}

/// The `Ctx` behind an `ibv_context *` this library returned.
///
/// # Safety
/// `c` is NULL or a context `ibv_open_device` returned and
/// `ibv_close_device` has not closed.
pub(crate) unsafe fn ctx<'a>(c: *const ibv_context) -> Option<&'a Ctx> {
    if c.is_null() {
        return None;
    }
    let off = offset_of!(Ctx, vctx) + offset_of!(verbs_context, context);
    // SAFETY: by the contract `c` is `&ctx.vctx.context` of a live `Ctx`
    // (boxed by `open_device`), so stepping back `off` bytes stays inside it.
    unsafe { c.byte_sub(off).cast::<Ctx>().as_ref() }
}

/// The op slots of `ibv_context_ops`, dummies where nothing is implemented.
fn context_ops() -> ibv_context_ops {
    let int = dummy_int as Slot;
    let null = dummy_null as Slot;
    ibv_context_ops {
        _compat0: [int, int, null, null, null, null, null],
        alloc_mw: crate::mw::alloc_mw as Slot,
        bind_mw: crate::mw::bind_mw as Slot,
        dealloc_mw: crate::mw::dealloc_mw as Slot,
        _compat_create_cq: null,
        poll_cq: crate::cq::poll_cq as Slot,
        req_notify_cq: crate::cq::req_notify_cq as Slot,
        _compat1: [null; 7],
        post_srq_recv: crate::srq::post_srq_recv as Slot,
        _compat2: [null; 4],
        post_send: crate::qp::post_send as Slot,
        post_recv: crate::qp::post_recv as Slot,
        _compat3: [null; 5],
    }
}

/// `verbs_context` ops 8..200 (`advise_mr` … `create_cq_ex`): pointer
/// returners get the NULL dummy, the others the errno dummy.
fn ops_a() -> [Slot; 25] {
    let int = dummy_int as Slot;
    let null = dummy_null as Slot;
    [
        int,  // advise_mr
        null, // alloc_null_mr
        int,  // read_counters
        int,  // attach_counters_point_flow
        null, // create_counters
        int,  // destroy_counters
        null, // reg_dm_mr
        null, // alloc_dm
        int,  // free_dm
        int,  // modify_flow_action_esp
        int,  // destroy_flow_action
        null, // create_flow_action_esp
        int,  // modify_qp_rate_limit
        null, // alloc_parent_domain
        int,  // dealloc_td
        null, // alloc_td
        int,  // modify_cq
        int,  // post_srq_ops
        int,  // destroy_rwq_ind_table
        null, // create_rwq_ind_table
        int,  // destroy_wq
        int,  // modify_wq
        null, // create_wq
        int,  // query_rt_values
        crate::cq_ex::create_cq_ex as Slot,
    ]
}

/// `verbs_context` ops 256..296 (`open_qp` … `close_xrcd`).
fn ops_b() -> [Slot; 6] {
    let int = dummy_int as Slot;
    let null = dummy_null as Slot;
    [
        null, /* open_qp */
        crate::qp_ex::create_qp_ex as Slot,
        int,  /* get_srq_num */
        null, /* create_srq_ex */
        null, /* open_xrcd */
        int,  /* close_xrcd */
    ]
}

/// `struct ibv_context *ibv_open_device(struct ibv_device *device)`.
unsafe extern "C" fn open_device(device: *mut ibv_device) -> *mut ibv_context {
    // SAFETY: the C contract: `device` is NULL or from our device list.
    let Some(d) = (unsafe { dev(device) }) else {
        set_errno(EINVAL);
        return core::ptr::null_mut();
    };
    let inner = match d.dev.open().and_then(|c| rverbs::c_support::make_async_fd_blocking(&c).map(|()| c)) {
        Ok(c) => c,
        Err(e) => {
            set_errno(errno::of(&e));
            return core::ptr::null_mut();
        }
    };
    let int = dummy_int as Slot;
    let null = dummy_null as Slot;
    let context = ibv_context {
        device,
        ops: context_ops(),
        cmd_fd: inner.cmd_fd().as_raw_fd(),
        async_fd: inner.async_fd().map_or(-1, |f| f.as_raw_fd()),
        num_comp_vectors: inner.num_comp_vectors() as c_int,
        mutex: PthreadMutex([0; 40]),
        abi_compat: usize::MAX as *mut c_void,
    };
    let vctx = verbs_context {
        query_port: Some(crate::query::query_port_ex),
        ops_a: ops_a(),
        priv_: core::ptr::null_mut(),
        query_device_ex: Some(crate::query::query_device_ex),
        ibv_destroy_flow: int,
        abi_placeholder2: null,
        ibv_create_flow: null,
        abi_placeholder1: null,
        ops_b: ops_b(),
        abi_placeholder3: 0,
        sz: core::mem::size_of::<verbs_context>(),
        context,
    };
    let ctx = Box::into_raw(Box::new(Ctx { vctx, inner, refcnts: SpinLock::new(()) }));
    // SAFETY: `ctx` was just boxed; the pointer handed out is to a field of it.
    unsafe { &raw mut (*ctx).vctx.context }
}
symver!(open_device, ibv_open_device, "IBVERBS_1.1");

/// `int ibv_close_device(struct ibv_context *context)`: 0. The device's
/// objects must be gone (rverbs' objects keep the context alive, so the
/// kernel context closes with the last of them).
unsafe extern "C" fn close_device(context: *mut ibv_context) -> c_int {
    // SAFETY: the C contract: `context` is NULL or one we opened.
    if unsafe { ctx(context) }.is_none() {
        return EINVAL;
    }
    let off = offset_of!(Ctx, vctx) + offset_of!(verbs_context, context);
    // SAFETY: `context` is `&ctx.vctx.context` of a `Ctx` boxed by
    // `open_device`; the caller gives it up with this call.
    drop(unsafe { Box::from_raw(context.byte_sub(off).cast::<Ctx>()) });
    0
}
symver!(close_device, ibv_close_device, "IBVERBS_1.1");
