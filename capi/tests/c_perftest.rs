//! perftest (`ib_send_lat`, `ib_write_lat`, `ib_read_lat`,
//! `ib_atomic_lat`, `ib_send_bw`, `ib_write_bw`, `ib_read_bw`,
//! `ib_atomic_bw`; RC, `-x <RoCE v2 GID>`, 5 iterations), unmodified, with
//! both sides on rverbs' `libibverbs.so.1`, and each side on rverbs against
//! the other on rdma-core's library. perftest loads libmlx5, libefa and
//! librdmacm as well (it is linked to them): they load on rverbs' library
//! too, through its private-ABI exports.
//!
//! Each run checks that both sides exit 0 and that the client prints its
//! result table (the `#bytes` header and a row for the message size).
//! Timings are not compared here (TCG guests), and `-F` keeps perftest's
//! own check of its cycle counter out of it: on a loaded TCG host its
//! calibration fails ("Correlation coefficient r^2: 0.67 < 0.9") and the
//! client exits 1, whatever library it runs on.
//!
//! Without a uverbs device the tests print `skipped: ...` and pass, unless
//! `RVERBS_REQUIRE_DEVICE=1`: then a missing device, program or library fails.

mod common;

use common::*;
use std::time::Duration;

/// One perftest program, server and client each on rverbs (`true`) or rdma-core.
fn perftest(name: &str, port: u16, server_lib: bool, client_lib: bool) {
    let Some((dev, lib, tool)) = setup(name) else { return };
    let g = dev.open().expect("open").default_sgid_index(1).expect("a RoCE GID").to_string();
    let p = port.to_string();
    let mut args: Vec<String> =
        ["-d", dev.name(), "-x", &g, "-F", "-n", "5", "-p", &p].iter().map(|s| s.to_string()).collect();
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
        assert!(!r.stderr.contains("panicked"), "a side panicked:\n{both}");
    }
    let table = c.stdout.lines().skip_while(|l| !l.trim_start().starts_with("#bytes")).nth(1).unwrap_or("");
    let row: Vec<&str> = table.split_whitespace().collect();
    assert!(row.len() >= 3 && row[1] == "5", "no result row for 5 iterations:\n{both}");
}

/// Both on rverbs, then rverbs server with rdma-core client, then the other way round.
fn all_pairs(name: &str, port: u16) {
    perftest(name, port, true, true);
    perftest(name, port + 1, true, false);
    perftest(name, port + 2, false, true);
}

#[test]
fn ib_send_lat() {
    all_pairs("ib_send_lat", 19700);
}

#[test]
fn ib_write_lat() {
    all_pairs("ib_write_lat", 19710);
}

#[test]
fn ib_read_lat() {
    all_pairs("ib_read_lat", 19720);
}

#[test]
fn ib_atomic_lat() {
    all_pairs("ib_atomic_lat", 19730);
}

#[test]
fn ib_send_bw() {
    all_pairs("ib_send_bw", 19740);
}

#[test]
fn ib_write_bw() {
    all_pairs("ib_write_bw", 19750);
}

#[test]
fn ib_read_bw() {
    all_pairs("ib_read_bw", 19760);
}

#[test]
fn ib_atomic_bw() {
    all_pairs("ib_atomic_bw", 19770);
}
