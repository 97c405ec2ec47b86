//! The examples of `examples/`, run in the VM so that none can rot: each
//! plays both its server and its client in this process (`--loopback`;
//! `loopback` is one process by design).

// Each example brings its own copy of `examples/util/mod.rs`.
#![allow(clippy::duplicate_mod)]

mod common;

// The examples' `main`s are not called here.
#[cfg(feature = "tokio")]
#[allow(dead_code)]
#[path = "../examples/async_echo.rs"]
mod async_echo;
#[allow(dead_code)]
#[path = "../examples/atomics.rs"]
mod atomics;
#[allow(dead_code)]
#[path = "../examples/cm_connect.rs"]
mod cm_connect;
#[allow(dead_code)]
#[path = "../examples/loopback.rs"]
mod loopback;
#[allow(dead_code)]
#[path = "../examples/memory_window.rs"]
mod memory_window;
#[allow(dead_code)]
#[path = "../examples/multicast.rs"]
mod multicast;
#[allow(dead_code)]
#[path = "../examples/rc_send_recv.rs"]
mod rc_send_recv;
#[allow(dead_code)]
#[path = "../examples/rdma_write_read.rs"]
mod rdma_write_read;
#[allow(dead_code)]
#[path = "../examples/srq.rs"]
mod srq;
#[allow(dead_code)]
#[path = "../examples/ud_send.rs"]
mod ud_send;

/// The tier's device for the examples (`RVERBS_DEVICE`, which they read):
/// after a test re-adds rxe0, it is no longer the first device.
fn use_test_device() -> bool {
    let Some(dev) = common::first_device() else { return false };
    std::env::set_var("RVERBS_DEVICE", dev.name());
    true
}

/// Runs an example's server and client against each other.
macro_rules! loopback {
    ($name:ident) => {{
        if !use_test_device() {
            return;
        }
        let role = $name::util::Role::Loopback;
        $name::run(role).unwrap_or_else(|e| panic!("example {}: {e}", stringify!($name)));
    }};
}

#[test]
fn loopback_example() {
    if !use_test_device() {
        return;
    }
    loopback::run().unwrap_or_else(|e| panic!("example loopback: {e}"));
}

#[test]
fn rc_send_recv_example() {
    loopback!(rc_send_recv)
}

#[test]
fn rdma_write_read_example() {
    loopback!(rdma_write_read)
}

#[test]
fn atomics_example() {
    loopback!(atomics)
}

#[test]
fn cm_connect_example() {
    loopback!(cm_connect)
}

#[test]
fn memory_window_example() {
    loopback!(memory_window)
}

#[test]
fn ud_send_example() {
    loopback!(ud_send)
}

#[test]
fn multicast_example() {
    loopback!(multicast)
}

#[test]
fn srq_example() {
    loopback!(srq)
}

/// Built only with feature `tokio` (the VM tier builds with it:
/// xtask/src/project.rs's `TEST_FEATURES`).
#[cfg(feature = "tokio")]
#[test]
fn async_echo_example() {
    loopback!(async_echo)
}

/// The VM tier must build this binary with feature `tokio`, or the async
/// example would silently not run.
#[cfg(not(feature = "tokio"))]
#[test]
fn async_echo_example() {
    assert!(!common::device_required(), "built without feature tokio: the async example cannot run");
    eprintln!("skipped: built without feature tokio");
}
