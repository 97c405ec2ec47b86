//! The string helpers (`ibv_wc_status_str`, `ibv_event_type_str`,
//! `ibv_node_type_str`, `ibv_port_state_str`) and fork support
//! (`ibv_fork_init`, `ibv_is_fork_initialized`, `ibv_dofork_range`,
//! `ibv_dontfork_range`).

use core::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

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

/// `ibv_fork_init` succeeded (on a kernel that copies pinned pages on fork).
static FORK_INIT: AtomicBool = AtomicBool::new(false);

/// Whether the kernel copies pinned pages on `fork()`, asked once over
/// RDMA netlink as libibverbs asks it (no answer: no).
fn copy_on_fork() -> bool {
    static COPY_ON_FORK: OnceLock<bool> = OnceLock::new();
    *COPY_ON_FORK.get_or_init(|| rverbs::c_support::copy_on_fork().unwrap_or(false))
}

/// `ibv_fork_init`'s answer: 0 where the kernel copies pinned pages on
/// fork (5.13 and later), as rdma-core's; ENOSYS before, where rdma-core
/// would `MADV_DONTFORK` every registration, which rverbs does not do: a
/// program that needs that protection learns it at once instead of
/// losing DMA to a copied page after a fork.
fn fork_init_answer(copy_on_fork: bool) -> c_int {
    if copy_on_fork {
        0
    } else {
        nix::libc::ENOSYS
    }
}

/// `enum ibv_fork_status` as rdma-core 44 computes it: `IBV_FORK_UNNEEDED`
/// (2) where the kernel copies on fork, else `IBV_FORK_ENABLED` (1) after
/// a successful `ibv_fork_init` or `IBV_FORK_DISABLED` (0).
fn fork_status(copy_on_fork: bool, initialized: bool) -> u32 {
    match (copy_on_fork, initialized) {
        (true, _) => 2,
        (false, true) => 1,
        (false, false) => 0,
    }
}

/// `int ibv_fork_init(void)`: 0, or ENOSYS on a kernel without
/// copy-on-fork ([`fork_init_answer`]).
unsafe extern "C" fn fork_init() -> c_int {
    let r = fork_init_answer(copy_on_fork());
    if r == 0 {
        FORK_INIT.store(true, Ordering::Relaxed);
    }
    r
}
symver!(fork_init, ibv_fork_init, "IBVERBS_1.1");

/// `enum ibv_fork_status ibv_is_fork_initialized(void)` ([`fork_status`]).
unsafe extern "C" fn is_fork_initialized() -> u32 {
    fork_status(copy_on_fork(), FORK_INIT.load(Ordering::Relaxed))
}
symver!(is_fork_initialized, ibv_is_fork_initialized, "IBVERBS_1.13");

/// `int ibv_dofork_range(void *base, size_t size)`: 0 (rverbs advises no
/// range; see `ibv_fork_init`).
unsafe extern "C" fn dofork_range(_base: *mut core::ffi::c_void, _size: usize) -> c_int {
    0
}
symver!(dofork_range, ibv_dofork_range, "IBVERBS_1.1");

/// `int ibv_dontfork_range(void *base, size_t size)`: 0 (see `ibv_fork_init`).
unsafe extern "C" fn dontfork_range(_base: *mut core::ffi::c_void, _size: usize) -> c_int {
    0
}
symver!(dontfork_range, ibv_dontfork_range, "IBVERBS_1.1");

/// `enum ibv_rate` values with their multiple of 2.5 Gb/s (0: none) and
/// their Mb/s: (rate, mult, mbps).
const RATES: [(u32, i32, i32); 24] = [
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, 0, 14062),
    (12, 0, 56250),
    (13, 0, 112500),
    (14, 0, 168750),
    (15, 0, 25781),
    (16, 0, 103125),
    (17, 0, 206250),
    (18, 0, 309375),
    (19, 11, 28125),
    (20, 20, 53125),
    (21, 160, 425000),
    (22, 240, 637500),
    (23, 320, 850000),
    (24, 480, 1275000),
    (0, 0, 0),
];

/// `int ibv_rate_to_mult(enum ibv_rate)`: -1 for a rate that is no multiple of 2.5 Gb/s.
unsafe extern "C" fn rate_to_mult(rate: u32) -> c_int {
    RATES.iter().find(|r| r.0 == rate && r.1 != 0).map_or(-1, |r| r.1)
}
symver!(rate_to_mult, ibv_rate_to_mult, "IBVERBS_1.0");

/// `enum ibv_rate mult_to_ibv_rate(int)`: `IBV_RATE_MAX` (0) when unknown.
unsafe extern "C" fn mult_to_rate(mult: c_int) -> u32 {
    RATES.iter().find(|r| r.1 == mult && mult != 0).map_or(0, |r| r.0)
}
symver!(mult_to_rate, mult_to_ibv_rate, "IBVERBS_1.0");

/// `int ibv_rate_to_mbps(enum ibv_rate)`: -1 when unknown.
unsafe extern "C" fn rate_to_mbps(rate: u32) -> c_int {
    RATES.iter().find(|r| r.0 == rate && r.2 != 0).map_or(-1, |r| r.2)
}
symver!(rate_to_mbps, ibv_rate_to_mbps, "IBVERBS_1.1");

/// `enum ibv_rate mbps_to_ibv_rate(int)`: `IBV_RATE_MAX` (0) when unknown.
unsafe extern "C" fn mbps_to_rate(mbps: c_int) -> u32 {
    RATES.iter().find(|r| r.2 == mbps && mbps != 0).map_or(0, |r| r.0)
}
symver!(mbps_to_rate, mbps_to_ibv_rate, "IBVERBS_1.1");

#[cfg(test)]
mod tests {
    use super::*;

    /// rdma-core 44's answers on both kinds of kernel: copy-on-fork makes
    /// a fork "unneeded"; without it rverbs refuses `ibv_fork_init`
    /// (ENOSYS) and so reports it disabled, where rverbs 0.1 answered
    /// "unneeded" on every kernel.
    #[test]
    fn fork_answers_follow_the_kernels_copy_on_fork() {
        assert_eq!((fork_init_answer(true), fork_status(true, false), fork_status(true, true)), (0, 2, 2));
        assert_eq!((fork_init_answer(false), fork_status(false, false)), (nix::libc::ENOSYS, 0));
        assert_eq!(fork_status(false, true), 1, "rdma-core's ENABLED, unreachable here");
    }

    #[test]
    fn rates_convert_both_ways_as_rdma_core() {
        // SAFETY: the functions only read their integer arguments.
        unsafe {
            assert_eq!(rate_to_mult(3), 4); // IBV_RATE_10_GBPS
            assert_eq!(rate_to_mult(11), -1); // 14 Gb/s is no multiple
            assert_eq!(mult_to_rate(480), 24);
            assert_eq!(mult_to_rate(0), 0);
            assert_eq!(rate_to_mbps(16), 103125);
            assert_eq!(rate_to_mbps(99), -1);
            assert_eq!(mbps_to_rate(25781), 15);
            assert_eq!(mbps_to_rate(1), 0);
            for &(rate, _, mbps) in RATES.iter().filter(|r| r.0 != 0) {
                assert_eq!(mbps_to_rate(rate_to_mbps(rate)), rate);
                assert_eq!(mbps, rate_to_mbps(rate));
            }
        }
    }

    #[test]
    fn strings_are_rdma_core_44s() {
        // SAFETY: the returned pointers are 'static NUL-terminated strings.
        let s = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned();
        // SAFETY: plain integer arguments.
        unsafe {
            assert_eq!(s(wc_status_str(5)), "Work Request Flushed Error");
            assert_eq!(s(wc_status_str(24)), "unknown");
            assert_eq!(s(event_type_str(9)), "port active");
            assert_eq!(s(node_type_str(0)), "unknown");
            assert_eq!(s(node_type_str(1)), "InfiniBand channel adapter");
            assert_eq!(s(port_state_str(4)), "active");
        }
    }
}
