//! Smoke tests of the VM tier: the guest that `cargo xtask test` boots has
//! a soft-RoCE device `rxe0` whose port is ACTIVE, and rdma-core sees it.
//!
//! Like every integration test here, these need a device: with
//! `RVERBS_REQUIRE_DEVICE=1` (set inside the test VM) a missing device is a
//! failure; without it and without a device they print why and pass.

use std::path::Path;
use std::process::Command;

const UVERBS0: &str = "/dev/infiniband/uverbs0";
const RXE0_PORT1_STATE: &str = "/sys/class/infiniband/rxe0/ports/1/state";

/// True when the harness requires a device (`RVERBS_REQUIRE_DEVICE=1`).
fn device_required() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

/// Whether to run a test that needs the VM's rxe0: always when required,
/// otherwise only if rxe0 happens to exist. Prints the skip reason.
fn want_rxe0() -> bool {
    if device_required() {
        return true;
    }
    if !Path::new(UVERBS0).exists() {
        println!("skipped: no uverbs device");
        return false;
    }
    if !Path::new(RXE0_PORT1_STATE).exists() {
        println!("skipped: no rxe0 device (RVERBS_REQUIRE_DEVICE unset)");
        return false;
    }
    true
}

#[test]
fn uverbs_device_present() {
    if !want_rxe0() {
        return;
    }
    assert!(Path::new(UVERBS0).exists(), "{UVERBS0} does not exist");
    let state =
        std::fs::read_to_string(RXE0_PORT1_STATE).unwrap_or_else(|e| panic!("cannot read {RXE0_PORT1_STATE}: {e}"));
    assert!(state.contains("ACTIVE"), "rxe0 port 1 state is {state:?}, not ACTIVE");
}

#[test]
fn ibv_devices_lists_rxe0() {
    if !want_rxe0() {
        return;
    }
    let out = Command::new("ibv_devices").output().unwrap_or_else(|e| panic!("cannot run ibv_devices: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ibv_devices failed ({}): {stdout}{stderr}", out.status);
    assert!(
        stdout.lines().any(|l| l.split_whitespace().next() == Some("rxe0")),
        "ibv_devices does not list rxe0:\n{stdout}{stderr}"
    );
}
