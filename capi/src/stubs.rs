//! Exports that are not implemented (yet), answering like rdma-core does
//! for an operation a device does not support, and the dummies that fill
//! unused op slots.
//!
//! Every stub takes no arguments: on x86_64 (System V) a caller's arguments
//! sit in registers and on the caller's stack, which the caller cleans up,
//! so a function that ignores them is safe to call with any of them. The
//! return type is what matters, one kind per C signature:
//!
//! | kind | returns | for |
//! | --- | --- | --- |
//! | `int` | `EOPNOTSUPP`, errno `EOPNOTSUPP` | `int` verbs returning an errno (destroy, modify, `ibv_cmd_*`) |
//! | `null` | `NULL`, errno `EOPNOTSUPP` | constructors returning a pointer |
//! | `minus1` | `-1`, errno `EOPNOTSUPP` | `int` functions that return -1 and set errno |
//! | `zero` | 0 | `void` functions (also: `verbs_register_driver_34`, a silent no-op) and "nothing to do" |
//!
//! The provider-only exports (`ibv_cmd_*`, `verbs_*`, `execute_ioctl`, ...:
//! rdma-core's private ABI, imported by libmlx5 and libefa, which perftest
//! and pyverbs load) are never called for an rverbs device: they only have
//! to exist.

use core::ffi::{c_int, c_void};

use crate::errno::{set_errno, EOPNOTSUPP};
use crate::export::symver;

/// An op slot's dummy for ops returning an errno (`int`).
pub unsafe extern "C" fn dummy_int() -> c_int {
    set_errno(EOPNOTSUPP);
    EOPNOTSUPP
}

/// An op slot's dummy for ops returning a pointer.
pub unsafe extern "C" fn dummy_null() -> *mut c_void {
    set_errno(EOPNOTSUPP);
    core::ptr::null_mut()
}

macro_rules! stub_fn {
    (int) => {
        pub(super) unsafe extern "C" fn f() -> c_int {
            set_errno(EOPNOTSUPP);
            EOPNOTSUPP
        }
    };
    (null) => {
        pub(super) unsafe extern "C" fn f() -> *mut c_void {
            set_errno(EOPNOTSUPP);
            core::ptr::null_mut()
        }
    };
    (minus1) => {
        pub(super) unsafe extern "C" fn f() -> c_int {
            set_errno(EOPNOTSUPP);
            -1
        }
    };
    (zero) => {
        pub(super) unsafe extern "C" fn f() -> c_int {
            0
        }
    };
}

/// `stubs! { kind name @ "NODE"; ... }`: one function per export (each
/// `.symver` needs its own symbol), in a module named after the export.
macro_rules! stubs {
    ($($kind:ident $name:ident @ $node:literal;)*) => {
        $(
            #[allow(non_snake_case, unused_imports)]
            mod $name {
                use super::*;
                stub_fn!($kind);
                symver!(f, $name, $node);
            }
        )*
    };
}

stubs! {
    // ---- IBVERBS_1.0 ----
    // ---- IBVERBS_1.1 ----
    int ibv_resolve_eth_l2_from_gid @ "IBVERBS_1.1";
    // ---- IBVERBS_1.6 … 1.14 ----
    null ibv_import_device @ "IBVERBS_1.10";
    null ibv_import_mr @ "IBVERBS_1.10";
    null ibv_import_pd @ "IBVERBS_1.10";
    int ibv_query_ece @ "IBVERBS_1.10";
    int ibv_set_ece @ "IBVERBS_1.10";
    zero ibv_unimport_mr @ "IBVERBS_1.10";
    zero ibv_unimport_pd @ "IBVERBS_1.10";
    null ibv_reg_dmabuf_mr @ "IBVERBS_1.12";
    null ibv_import_dm @ "IBVERBS_1.13";
    zero ibv_unimport_dm @ "IBVERBS_1.13";
    zero ibv_query_qp_data_in_order @ "IBVERBS_1.14";
    // ---- IBVERBS_PRIVATE_34: the provider ABI (libmlx5, libefa) ----
    zero __verbs_log @ "IBVERBS_PRIVATE_34";
    zero __ioctl_final_num_attrs @ "IBVERBS_PRIVATE_34";
    null _verbs_init_and_alloc_context @ "IBVERBS_PRIVATE_34";
    int execute_ioctl @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_advise_mr @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_alloc_dm @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_alloc_mw @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_alloc_pd @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_attach_mcast @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_close_xrcd @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_ah @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_counters @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_cq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_cq_ex @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_flow @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_flow_action_esp @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_qp @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_qp_ex @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_qp_ex2 @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_rwq_ind_table @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_srq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_srq_ex @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_create_wq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_dealloc_mw @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_dealloc_pd @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_dereg_mr @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_ah @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_counters @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_cq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_flow @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_flow_action @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_qp @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_rwq_ind_table @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_srq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_destroy_wq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_detach_mcast @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_free_dm @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_get_context @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_modify_cq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_modify_flow_action_esp @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_modify_qp @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_modify_qp_ex @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_modify_srq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_modify_wq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_open_qp @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_open_xrcd @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_poll_cq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_post_recv @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_post_send @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_post_srq_recv @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_query_context @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_query_device_any @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_query_mr @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_query_port @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_query_qp @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_query_srq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_read_counters @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_reg_dm_mr @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_reg_dmabuf_mr @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_reg_mr @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_req_notify_cq @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_rereg_mr @ "IBVERBS_PRIVATE_34";
    int ibv_cmd_resize_cq @ "IBVERBS_PRIVATE_34";
    minus1 ibv_read_ibdev_sysfs_file @ "IBVERBS_PRIVATE_34";
    zero verbs_init_cq @ "IBVERBS_PRIVATE_34";
    null verbs_open_device @ "IBVERBS_PRIVATE_34";
    zero verbs_register_driver_34 @ "IBVERBS_PRIVATE_34";
    zero verbs_set_ops @ "IBVERBS_PRIVATE_34";
    zero verbs_uninit_context @ "IBVERBS_PRIVATE_34";
}

/// `bool verbs_allow_disassociate_destroy` (a 1-byte data object libmlx5
/// reads): false, writable like rdma-core's.
#[allow(non_upper_case_globals)]
static verbs_allow_disassociate_destroy: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
symver!(verbs_allow_disassociate_destroy, verbs_allow_disassociate_destroy, "IBVERBS_PRIVATE_34");
