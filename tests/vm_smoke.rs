//! Smoke tests of the VM tier: the guest that `cargo xtask test` boots has
//! the device of the tier (`RVERBS_TEST_DEVICE`: soft-RoCE `rxe0`,
//! soft-iWARP `siw0`; `rxe0` when unset) whose port is ACTIVE, and
//! rdma-core sees it.
//!
//! Like every integration test here, these need a device: with
//! `RVERBS_REQUIRE_DEVICE=1` (set inside the test VM) a missing device is a
//! failure; without it and without a device they print why and pass.

use std::path::Path;
use std::process::Command;

const UVERBS0: &str = "/dev/infiniband/uverbs0";

/// The tier's device: `RVERBS_TEST_DEVICE`, else `rxe0`.
fn device() -> String {
    std::env::var("RVERBS_TEST_DEVICE").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| "rxe0".into())
}

fn port1_state() -> String {
    format!("/sys/class/infiniband/{}/ports/1/state", device())
}

/// True when the harness requires a device (`RVERBS_REQUIRE_DEVICE=1`).
fn device_required() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

/// Whether to run a test that needs the VM's device: always when required,
/// otherwise only if it happens to exist. Prints the skip reason.
fn want_device() -> bool {
    if device_required() {
        return true;
    }
    if !Path::new(UVERBS0).exists() {
        println!("skipped: no uverbs device");
        return false;
    }
    if !Path::new(&port1_state()).exists() {
        println!("skipped: no {} device (RVERBS_REQUIRE_DEVICE unset)", device());
        return false;
    }
    true
}

#[test]
fn uverbs_device_present() {
    if !want_device() {
        return;
    }
    assert!(Path::new(UVERBS0).exists(), "{UVERBS0} does not exist");
    let (dev, path) = (device(), port1_state());
    let state = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    assert!(state.contains("ACTIVE"), "{dev} port 1 state is {state:?}, not ACTIVE");
}

#[test]
fn ibv_devices_lists_the_device() {
    if !want_device() {
        return;
    }
    let out = Command::new("ibv_devices").output().unwrap_or_else(|e| panic!("cannot run ibv_devices: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ibv_devices failed ({}): {stdout}{stderr}", out.status);
    assert!(
        stdout.lines().any(|l| l.split_whitespace().next() == Some(device().as_str())),
        "ibv_devices does not list {}:\n{stdout}{stderr}",
        device()
    );
}
