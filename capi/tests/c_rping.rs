//! rdma-core's `rping` (Debian's librdmacm, unmodified) over rverbs'
//! `libibverbs.so.1` (selected by `LD_LIBRARY_PATH` only): librdmacm's
//! verbs calls (`ibv_get_device_list`, `ibv_open_device`, the
//! `ibv_copy_*_from_kern` helpers, QP/CQ/MR/channel objects, post and
//! poll) all land in rverbs, against a peer on rdma-core's library, both
//! roles, and with both sides on rverbs; `-V` checks every ping's data.
//! `ucmatose` (4 RC connections on one event channel, 10 messages each
//! way) likewise. Both run on the test device (`RVERBS_TEST_DEVICE`:
//! rxe0, or siw0 where the kernel's iw_cm connects the QPs), at its
//! netdev's address.
//!
//! Without a uverbs device, `rping` or the CM node the tests print
//! `skipped: ...` and pass, unless `RVERBS_REQUIRE_DEVICE=1`.

mod common;

use common::*;
use std::time::Duration;

/// The test device's address (its netdev's IPv4 address), or `None`
/// after a permitted skip.
fn address() -> Option<String> {
    let dev = test_device()?;
    let ip = device_ip(&dev);
    if !need(ip.is_some(), &format!("{}'s netdev {:?} has no IPv4 address", dev.name(), netdev_of(&dev))) {
        return None;
    }
    ip
}

/// `rping -s` and `rping -c -C count -S size -V -v`, each on rverbs'
/// library (`true`) or rdma-core's.
fn rping(port: u16, count: u32, size: u32, server_lib: bool, client_lib: bool) {
    let Some((_dev, lib, tool)) = setup("rping") else { return };
    if !need(std::path::Path::new("/dev/infiniband/rdma_cm").exists(), "no /dev/infiniband/rdma_cm (rdma_ucm)") {
        return;
    }
    let Some(ip) = address() else { return };
    let ip = ip.as_str();
    let (p, c, s) = (port.to_string(), count.to_string(), size.to_string());
    let strs = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let srv = strs(&["-s", "-a", ip, "-p", &p, "-S", &s, "-v"]);
    let cli = strs(&["-c", "-a", ip, "-p", &p, "-C", &c, "-S", &s, "-V", "-v"]);
    let pick = |ours: bool| ours.then_some(lib.as_path());
    let mut sp = Proc::spawn_line_buffered(&tool, &srv, pick(server_lib));
    wait_cm_listening(port, &mut sp);
    let c_out = Proc::spawn_line_buffered(&tool, &cli, pick(client_lib)).finish(DEADLINE);
    let s_out = sp.finish(if c_out.code == Some(0) { DEADLINE } else { Duration::from_secs(5) });
    let both = format!("{}\n{}", s_out.describe(), c_out.describe());
    for r in [&s_out, &c_out] {
        assert!(!r.killed, "a side had to be killed:\n{both}");
        assert!(r.code == Some(0) || rping_teardown_race(r), "a side failed:\n{both}");
        assert!(!r.stderr.contains("panicked"), "a side panicked:\n{both}");
    }
    let pings: Vec<&str> = c_out.stdout.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).collect();
    let served: Vec<&str> = s_out.stdout.lines().filter(|l| l.starts_with("server ping data: rdma-ping-")).collect();
    assert_eq!(pings.len(), count as usize, "{both}");
    assert_eq!(served.len(), count as usize, "{both}");
    for (i, (p, s)) in pings.iter().zip(&served).enumerate() {
        assert!(p.starts_with(&format!("ping data: rdma-ping-{i}: ")), "{both}");
        assert_eq!(p.len(), "ping data: ".len() + size as usize - 1, "a ping is S - 1 characters: {p}");
        assert_eq!(&p["ping data: ".len()..], &s["server ping data: ".len()..], "{both}");
    }
    assert!(!c_out.stderr.contains("data mismatch"), "{both}");
    assert!(s_out.stderr.contains("server DISCONNECT EVENT..."), "{both}");
}

#[test]
fn rping_rverbs_server_rdma_core_client() {
    rping(20301, 20, 4096, true, false);
}

#[test]
fn rping_rdma_core_server_rverbs_client() {
    rping(20302, 20, 4096, false, true);
}

/// rdma-core's library on both sides, in the same boot: the baseline the
/// runs above stand beside.
#[test]
fn rping_both_on_rdma_core() {
    rping(20306, 20, 4096, false, false);
}

#[test]
fn rping_both_on_rverbs_and_other_sizes() {
    rping(20303, 20, 4096, true, true);
    rping(20304, 5, 26, true, false);
    rping(20305, 5, 65535, false, true);
}

/// `ucmatose -b IP` (server) and `ucmatose -s IP` (client), 4 connections
/// of 10 messages of 100 bytes each way, each side on rverbs' library
/// (`true`) or rdma-core's.
fn ucmatose(port: u16, server_lib: bool, client_lib: bool) {
    let Some((_dev, lib, tool)) = setup("ucmatose") else { return };
    if !need(std::path::Path::new("/dev/infiniband/rdma_cm").exists(), "no /dev/infiniband/rdma_cm (rdma_ucm)") {
        return;
    }
    let Some(ip) = address() else { return };
    let p = port.to_string();
    let args = |role: &str| strings(&[role, &ip, "-p", &p, "-c", "4", "-C", "10", "-S", "100"]);
    let pick = |ours: bool| ours.then_some(lib.as_path());
    let mut sp = Proc::spawn_line_buffered(&tool, &args("-b"), pick(server_lib));
    wait_cm_listening(port, &mut sp);
    let c = Proc::spawn_line_buffered(&tool, &args("-s"), pick(client_lib)).finish(DEADLINE);
    let s = sp.finish(if c.code == Some(0) { DEADLINE } else { Duration::from_secs(5) });
    let both = format!("{}\n{}", s.describe(), c.describe());
    for r in [&s, &c] {
        assert!(!r.killed, "a side had to be killed:\n{both}");
        assert_eq!(r.code, Some(0), "a side failed:\n{both}");
        assert!(!r.stderr.contains("panicked"), "a side panicked:\n{both}");
        assert!(r.stdout.contains("data transfers complete"), "{both}");
    }
    assert!(c.stdout.contains("return status 0"), "{both}");
    assert!(s.stdout.contains("disconnected"), "{both}");
}

#[test]
fn ucmatose_rverbs_server_rdma_core_client() {
    ucmatose(20311, true, false);
}

#[test]
fn ucmatose_rdma_core_server_rverbs_client() {
    ucmatose(20312, false, true);
}

#[test]
fn ucmatose_both_on_rverbs() {
    ucmatose(20313, true, true);
}

/// The baseline: rdma-core's library on both sides, same boot.
#[test]
fn ucmatose_both_on_rdma_core() {
    ucmatose(20314, false, false);
}
