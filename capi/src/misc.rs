//! The string helpers (`ibv_wc_status_str`, `ibv_event_type_str`,
//! `ibv_node_type_str`, `ibv_port_state_str`) and fork support
//! (`ibv_fork_init`, `ibv_is_fork_initialized`, `ibv_dofork_range`,
//! `ibv_dontfork_range`).

use core::ffi::{c_char, c_int, CStr};

use crate::export::symver;

/// `tbl[v]`, or "unknown" (rdma-core's answer out of range).
fn lookup(tbl: &[&'static CStr], v: u32) -> *const c_char {
    tbl.get(v as usize).copied().unwrap_or(c"unknown").as_ptr()
}

/// `enum ibv_wc_status` 0..=23, in order.
const WC_STATUS: [&CStr; 24] = [
    c"success",
    c"local length error",
    c"local QP operation error",
    c"local EE context operation error",
    c"local protection error",
    c"Work Request Flushed Error",
    c"memory management operation error",
    c"bad response error",
    c"local access error",
    c"remote invalid request error",
    c"remote access error",
    c"remote operation error",
    c"transport retry counter exceeded",
    c"RNR retry counter exceeded",
    c"local RDD violation error",
    c"remote invalid RD request",
    c"aborted error",
    c"invalid EE context number",
    c"invalid EE context state",
    c"fatal error",
    c"response timeout error",
    c"general error",
    c"TM error",
    c"TM software rendezvous",
];

/// `const char *ibv_wc_status_str(enum ibv_wc_status)`.
unsafe extern "C" fn wc_status_str(status: u32) -> *const c_char {
    lookup(&WC_STATUS, status)
}
symver!(wc_status_str, ibv_wc_status_str, "IBVERBS_1.1");

/// `enum ibv_event_type` 0..=19, in order.
const EVENT_TYPE: [&CStr; 20] = [
    c"CQ error",
    c"local work queue catastrophic error",
    c"invalid request local work queue error",
    c"local access violation work queue error",
    c"communication established",
    c"send queue drained",
    c"path migrated",
    c"path migration request error",
    c"local catastrophic error",
    c"port active",
    c"port error",
    c"LID change",
    c"P_Key change",
    c"SM change",
    c"SRQ catastrophic error",
    c"SRQ limit reached",
    c"last WQE reached",
    c"client reregistration",
    c"GID table change",
    c"WQ fatal",
];

/// `const char *ibv_event_type_str(enum ibv_event_type)`.
unsafe extern "C" fn event_type_str(event: u32) -> *const c_char {
    lookup(&EVENT_TYPE, event)
}
symver!(event_type_str, ibv_event_type_str, "IBVERBS_1.1");

/// `enum ibv_node_type` 1..=7 (index 0 is not a node type).
const NODE_TYPE: [&CStr; 8] = [
    c"unknown",
    c"InfiniBand channel adapter",
    c"InfiniBand switch",
    c"InfiniBand router",
    c"iWARP NIC",
    c"usNIC",
    c"usNIC UDP",
    c"unspecified",
];

/// `const char *ibv_node_type_str(enum ibv_node_type)`.
unsafe extern "C" fn node_type_str(t: u32) -> *const c_char {
    lookup(&NODE_TYPE, t)
}
symver!(node_type_str, ibv_node_type_str, "IBVERBS_1.1");

/// `enum ibv_port_state` 0..=5.
const PORT_STATE: [&CStr; 6] = [c"no state change (NOP)", c"down", c"init", c"armed", c"active", c"active defer"];

/// `const char *ibv_port_state_str(enum ibv_port_state)`.
unsafe extern "C" fn port_state_str(s: u32) -> *const c_char {
    lookup(&PORT_STATE, s)
}
symver!(port_state_str, ibv_port_state_str, "IBVERBS_1.1");

/// `int ibv_fork_init(void)`: 0. Nothing to do: rverbs does not
/// `MADV_DONTFORK` user memory, and the kernels it runs on (6.1, 6.12) copy
/// pinned pages on fork (`RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`).
unsafe extern "C" fn fork_init() -> c_int {
    0
}
symver!(fork_init, ibv_fork_init, "IBVERBS_1.1");

/// `enum ibv_fork_status ibv_is_fork_initialized(void)`:
/// `IBV_FORK_UNNEEDED` (2), for the reason of `ibv_fork_init`.
unsafe extern "C" fn is_fork_initialized() -> u32 {
    2
}
symver!(is_fork_initialized, ibv_is_fork_initialized, "IBVERBS_1.13");

/// `int ibv_dofork_range(void *base, size_t size)`: 0 (see `ibv_fork_init`).
unsafe extern "C" fn dofork_range(_base: *mut core::ffi::c_void, _size: usize) -> c_int {
    0
}
symver!(dofork_range, ibv_dofork_range, "IBVERBS_1.1");

/// `int ibv_dontfork_range(void *base, size_t size)`: 0 (see `ibv_fork_init`).
unsafe extern "C" fn dontfork_range(_base: *mut core::ffi::c_void, _size: usize) -> c_int {
    0
}
symver!(dontfork_range, ibv_dontfork_range, "IBVERBS_1.1");
