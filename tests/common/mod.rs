//! Shared helpers of the integration tests (tier b: run inside the rxe VM by
//! `cargo xtask test`).
#![allow(dead_code)]

use std::process::{Command, Output};

/// True when the harness promised a device (`RVERBS_REQUIRE_DEVICE=1`):
/// then a test that would skip must fail instead.
pub fn device_required() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

/// The first RDMA device, or `None` after printing `skipped: ...` when there
/// is none and none is required. Panics when a device is required but absent.
pub fn first_device() -> Option<rverbs::Device> {
    let devs = rverbs::devices().expect("listing devices must not fail");
    match devs.into_iter().next() {
        Some(d) => Some(d),
        None if device_required() => panic!("RVERBS_REQUIRE_DEVICE=1 but no uverbs device was found"),
        None => {
            eprintln!("skipped: no uverbs device");
            None
        }
    }
}

/// Skips (returns) the test when there is no device and none is required.
#[macro_export]
macro_rules! require_device {
    () => {
        match common::first_device() {
            Some(d) => d,
            None => return,
        }
    };
}

/// The `rverbs` binary: `RVERBS_BIN` inside the VM, cargo's build otherwise.
pub fn rverbs_bin() -> String {
    std::env::var("RVERBS_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rverbs").to_owned())
}

/// Runs a command, panicking with a readable message if it cannot start.
pub fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("cannot run {cmd} {args:?}: {e}"))
}

/// Reads a sysfs file, trimmed.
pub fn sysfs(path: impl AsRef<std::path::Path>) -> String {
    let p = path.as_ref();
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())).trim().to_owned()
}
