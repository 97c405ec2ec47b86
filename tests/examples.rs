//! The examples of `examples/`, run in the VM so that none can rot: each
//! plays both its server and its client in this process (`--loopback`;
//! `loopback` is one process by design), on the tier's device. On iWARP
//! (siw0) the CM examples run; each other example connects its QPs by hand
//! or needs what iWARP lacks (UD, atomics, memory windows): its test
//! checks that the device or the API refuses that, then says `n/a`.

// Each example brings its own copy of `examples/util/mod.rs`.
#![allow(clippy::duplicate_mod)]

mod common;

use rverbs::{AtomicCap, ConnectOptions, Device, MwType, QpInitAttr, QpType};

// The examples' `main`s are not called here.
#[cfg(feature = "tokio")]
#[allow(dead_code)]
#[path = "../examples/async_clients.rs"]
mod async_clients;
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

/// The tier's device, named to the examples in `RVERBS_DEVICE` (which they
/// read): after a test re-adds rxe0, it is no longer the first device.
fn test_device() -> Option<Device> {
    let dev = common::first_device()?;
    std::env::set_var("RVERBS_DEVICE", dev.name());
    Some(dev)
}

/// Runs an example's server and client against each other.
macro_rules! loopback {
    ($name:ident) => {{
        let role = $name::util::Role::Loopback;
        $name::run(role).unwrap_or_else(|e| panic!("example {}: {e}", stringify!($name)));
    }};
}

/// On iWARP, where QPs connect only through the CM: checks that an RC QP
/// connected by hand (what the TCP endpoint handshake and `connect_pair`
/// do) is refused, then says `example` does not apply. False elsewhere.
fn hand_connect_refused(dev: &Device, example: &str) -> bool {
    if !common::is_iwarp(dev) {
        return false;
    }
    let ctx = dev.open().unwrap();
    let cq = ctx.create_cq(4).unwrap();
    let (a, b) = {
        let pd = ctx.alloc_pd().unwrap();
        let init = QpInitAttr::new(QpType::Rc, &cq);
        (pd.create_qp(&init).unwrap(), pd.create_qp(&init).unwrap())
    };
    let e = a.connect_pair(&b, &ConnectOptions::default()).unwrap_err();
    assert!(e.to_string().contains("connection manager"), "{e}");
    common::not_applicable(dev, &format!("{example} connects QPs by hand; iWARP only through the CM: {e}"));
    true
}

/// On iWARP: checks that creating a UD QP is refused, then says `example`
/// (UD) does not apply. False elsewhere.
fn ud_refused(dev: &Device, example: &str) -> bool {
    if !common::is_iwarp(dev) {
        return false;
    }
    let ctx = dev.open().unwrap();
    let cq = ctx.create_cq(4).unwrap();
    let e = ctx.alloc_pd().unwrap().create_qp(&QpInitAttr::new(QpType::Ud, &cq)).unwrap_err();
    assert!(e.is_unsupported(), "UD QP on iWARP: {e}");
    common::not_applicable(dev, &format!("{example} sends datagrams; iWARP has no UD QPs: {e}"));
    true
}

#[test]
fn loopback_example() {
    let Some(dev) = test_device() else { return };
    if hand_connect_refused(&dev, "loopback") {
        return;
    }
    loopback::run().unwrap_or_else(|e| panic!("example loopback: {e}"));
}

#[test]
fn rc_send_recv_example() {
    let Some(dev) = test_device() else { return };
    if !hand_connect_refused(&dev, "rc_send_recv (cm_connect is its CM form)") {
        loopback!(rc_send_recv)
    }
}

#[test]
fn rdma_write_read_example() {
    let Some(dev) = test_device() else { return };
    if !hand_connect_refused(&dev, "rdma_write_read") {
        loopback!(rdma_write_read)
    }
}

#[test]
fn atomics_example() {
    let Some(dev) = test_device() else { return };
    if common::is_iwarp(&dev) {
        let cap = dev.open().unwrap().query_device().unwrap().atomic_cap;
        assert_eq!(cap, AtomicCap::None, "atomics on iWARP");
        common::not_applicable(&dev, "atomics: the device reports atomic_cap NONE");
        return;
    }
    loopback!(atomics)
}

#[test]
fn cm_connect_example() {
    let Some(_dev) = test_device() else { return };
    loopback!(cm_connect)
}

#[test]
fn memory_window_example() {
    let Some(dev) = test_device() else { return };
    if common::is_iwarp(&dev) {
        let e = dev.open().unwrap().alloc_pd().unwrap().alloc_mw(MwType::Type2).unwrap_err();
        assert!(e.is_unsupported(), "a memory window on iWARP: {e}");
        return common::not_applicable(&dev, &format!("memory windows: {e}"));
    }
    loopback!(memory_window)
}

#[test]
fn ud_send_example() {
    let Some(dev) = test_device() else { return };
    if !ud_refused(&dev, "ud_send") {
        loopback!(ud_send)
    }
}

#[test]
fn multicast_example() {
    let Some(dev) = test_device() else { return };
    if !ud_refused(&dev, "multicast") {
        loopback!(multicast)
    }
}

#[test]
fn srq_example() {
    let Some(dev) = test_device() else { return };
    if !hand_connect_refused(&dev, "srq") {
        loopback!(srq)
    }
}

/// Built only with feature `tokio` (the VM tier builds with it:
/// xtask/src/project.rs's `TEST_FEATURES`).
#[cfg(feature = "tokio")]
#[test]
fn async_echo_example() {
    let Some(_dev) = test_device() else { return };
    loopback!(async_echo)
}

#[cfg(feature = "tokio")]
#[test]
fn async_clients_example() {
    let Some(_dev) = test_device() else { return };
    loopback!(async_clients)
}

/// The VM tier must build this binary with feature `tokio`, or the async
/// examples would silently not run.
#[cfg(not(feature = "tokio"))]
#[test]
fn async_echo_example() {
    assert!(!common::device_required(), "built without feature tokio: the async examples cannot run");
    eprintln!("skipped: built without feature tokio");
}

#[cfg(not(feature = "tokio"))]
#[test]
fn async_clients_example() {
    assert!(!common::device_required(), "built without feature tokio: the async examples cannot run");
    eprintln!("skipped: built without feature tokio");
}
