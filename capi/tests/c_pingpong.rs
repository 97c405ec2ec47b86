//! rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong`, `ibv_ud_pingpong` and
//! `ibv_srq_pingpong`, unmodified, through rverbs' `libibverbs.so.1`
//! (selected by `LD_LIBRARY_PATH` only) against a peer on rdma-core's
//! library, both roles, polling and `-e`, and with both sides on rverbs.
//! Each run checks the byte count, `-c`'s data check and that
//! each side printed the addresses the other one sent.
//!
//! The ping-pongs connect their QPs by hand (an address exchanged over TCP,
//! then `ibv_modify_qp` to RTR and RTS): on an iWARP device (siw0), where
//! only the kernel's iw_cm connects a QP and UD does not exist, each test
//! checks that the device refuses both, and prints `n/a on siw0: ...`.
//!
//! Without a uverbs device the tests print `skipped: ...` and pass, unless
//! `RVERBS_REQUIRE_DEVICE=1`: then a missing device, tool or library fails.

mod common;

use common::*;
use std::time::Duration;

/// `N` of `N bytes in ...`.
fn bytes_line(out: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.strip_suffix("Mbit/sec").and(l.split_once(" bytes in ")).and_then(|(n, _)| n.parse().ok()))
}

/// The `LID ..., QPN ..., PSN ..., GID ...` parts of the address lines with `label`.
fn addresses(out: &str, label: &str) -> Vec<String> {
    // ibv_ud_pingpong's local line has `PSN 0x..: GID`.
    out.lines().filter_map(|l| l.strip_prefix(label)).map(|rest| rest.trim_start().replace(": GID", ", GID")).collect()
}

/// `name` (`ibv_rc_pingpong`, ...) as server and client, each on rverbs'
/// library (`true`) or rdma-core's.
fn pingpong(name: &str, port: u16, events: bool, server_lib: bool, client_lib: bool) {
    pingpong_with(name, port, if events { &["-e"] } else { &[] }, server_lib, client_lib)
}

/// [`pingpong`] with `extra` options on both sides.
fn pingpong_with(name: &str, port: u16, extra: &[&str], server_lib: bool, client_lib: bool) {
    let Some((dev, lib, tool)) = setup(name) else { return };
    let why = "ibv_*_pingpong connects QPs by hand; iWARP QPs connect through the CM only (c_rping, c_perftest's _cm)";
    if name == "ibv_ud_pingpong" && not_on_iwarp(&dev, "no UD on iWARP", refuses_ud) {
        return;
    }
    if not_on_iwarp(&dev, why, refuses_rc_by_hand) {
        return;
    }
    let size: u64 = if name == "ibv_ud_pingpong" { 1024 } else { 4096 };
    let g = dev.open().expect("open").default_sgid_index(1).expect("a RoCE GID").to_string();
    let (p, n) = (port.to_string(), ITERS.to_string());
    let mut args: Vec<String> =
        ["-d", dev.name(), "-n", &n, "-p", &p, "-g", &g, "-c"].iter().map(|s| s.to_string()).collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let pick = |ours: bool| ours.then_some(lib.as_path());
    let mut s = Proc::spawn(&tool, &args, pick(server_lib));
    wait_listening(port, &mut s);
    args.push("127.0.0.1".into());
    let c = Proc::spawn(&tool, &args, pick(client_lib)).finish(DEADLINE);
    let s = s.finish(if c.code == Some(0) { DEADLINE } else { Duration::from_secs(5) });
    let both = format!("{}\n{}", s.describe(), c.describe());
    for r in [&s, &c] {
        assert!(!r.killed, "a side had to be killed:\n{both}");
        assert_eq!(r.code, Some(0), "a side failed:\n{both}");
        assert_eq!(bytes_line(&r.stdout), Some(size * u64::from(ITERS) * 2), "byte count:\n{both}");
        assert!(r.stdout.contains(&format!("{ITERS} iters in ")), "iters line:\n{both}");
        assert!(!r.stdout.contains("invalid data"), "-c found bad data:\n{both}");
        assert!(!r.stderr.contains("panicked"), "a side panicked:\n{both}");
    }
    let (s_local, s_remote) = (addresses(&s.stdout, "  local address:"), addresses(&s.stdout, "  remote address:"));
    let (c_local, c_remote) = (addresses(&c.stdout, "  local address:"), addresses(&c.stdout, "  remote address:"));
    assert!(!s_local.is_empty(), "{both}");
    assert_eq!(s_local, c_remote, "the client printed other addresses than the server's:\n{both}");
    assert_eq!(c_local, s_remote, "the server printed other addresses than the client's:\n{both}");
}

#[test]
fn rc_rverbs_server_rdma_core_client() {
    pingpong("ibv_rc_pingpong", 19611, false, true, false);
}

#[test]
fn rc_rdma_core_server_rverbs_client() {
    pingpong("ibv_rc_pingpong", 19612, false, false, true);
}

#[test]
fn rc_events_rverbs_server_rdma_core_client() {
    pingpong("ibv_rc_pingpong", 19613, true, true, false);
}

#[test]
fn rc_events_rdma_core_server_rverbs_client() {
    pingpong("ibv_rc_pingpong", 19614, true, false, true);
}

#[test]
fn rc_both_on_rverbs_polling_and_events() {
    pingpong("ibv_rc_pingpong", 19615, false, true, true);
    pingpong("ibv_rc_pingpong", 19616, true, true, true);
}

#[test]
fn uc_rverbs_server_rdma_core_client() {
    pingpong("ibv_uc_pingpong", 19617, false, true, false);
}

#[test]
fn uc_rdma_core_server_rverbs_client() {
    pingpong("ibv_uc_pingpong", 19618, false, false, true);
}

#[test]
fn uc_events_rverbs_server_rdma_core_client() {
    pingpong("ibv_uc_pingpong", 19619, true, true, false);
}

#[test]
fn uc_events_rdma_core_server_rverbs_client() {
    pingpong("ibv_uc_pingpong", 19620, true, false, true);
}

#[test]
fn uc_both_on_rverbs_polling_and_events() {
    pingpong("ibv_uc_pingpong", 19621, false, true, true);
    pingpong("ibv_uc_pingpong", 19622, true, true, true);
}

#[test]
fn ud_rverbs_server_rdma_core_client() {
    pingpong("ibv_ud_pingpong", 19623, false, true, false);
}

#[test]
fn ud_rdma_core_server_rverbs_client() {
    pingpong("ibv_ud_pingpong", 19624, false, false, true);
}

#[test]
fn ud_events_rverbs_server_rdma_core_client() {
    pingpong("ibv_ud_pingpong", 19625, true, true, false);
}

#[test]
fn ud_events_rdma_core_server_rverbs_client() {
    pingpong("ibv_ud_pingpong", 19626, true, false, true);
}

#[test]
fn ud_both_on_rverbs_polling_and_events() {
    pingpong("ibv_ud_pingpong", 19627, false, true, true);
    pingpong("ibv_ud_pingpong", 19628, true, true, true);
}

#[test]
fn srq_rverbs_server_rdma_core_client() {
    pingpong("ibv_srq_pingpong", 19629, false, true, false);
}

#[test]
fn srq_rdma_core_server_rverbs_client() {
    pingpong("ibv_srq_pingpong", 19630, false, false, true);
}

#[test]
fn srq_events_rverbs_server_rdma_core_client() {
    pingpong("ibv_srq_pingpong", 19631, true, true, false);
}

#[test]
fn srq_events_rdma_core_server_rverbs_client() {
    pingpong("ibv_srq_pingpong", 19632, true, false, true);
}

#[test]
fn srq_both_on_rverbs_polling_and_events() {
    pingpong("ibv_srq_pingpong", 19633, false, true, true);
    pingpong("ibv_srq_pingpong", 19634, true, true, true);
}

#[test]
fn rc_new_send_api_rverbs_server_rdma_core_client() {
    pingpong_with("ibv_rc_pingpong", 19635, &["-N"], true, false);
}

#[test]
fn rc_new_send_api_rdma_core_server_rverbs_client() {
    pingpong_with("ibv_rc_pingpong", 19636, &["-N"], false, true);
}

#[test]
fn rc_new_send_api_both_on_rverbs_polling_and_events() {
    pingpong_with("ibv_rc_pingpong", 19637, &["-N"], true, true);
    pingpong_with("ibv_rc_pingpong", 19638, &["-N", "-e"], true, true);
}
