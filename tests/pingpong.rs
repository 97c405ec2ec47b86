//! `rverbs pingpong` against rdma-core's ibv_rc_pingpong, ibv_ud_pingpong
//! and ibv_srq_pingpong (VM tier, rxe0; not on siw0: these connect QPs by
//! hand, iWARP only through the CM): both directions, polling and
//! `-e`, ours with ours, and the failure cases (bad arguments, unknown
//! device, empty GID index, port in use, no server, peers that send
//! garbage or vanish) must end with one clear line on stderr, a non-zero
//! exit and no hang.
//!
//! Every child runs under a deadline; a test fails if one had to be killed.

mod common;

use common::child::*;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

/// The longest any ping-pong of this file may take (TCG guests are slow).
const DEADLINE: Duration = Duration::from_secs(90);
/// Iterations per run: enough to exercise the loop, short in the VM.
const ITERS: u32 = 50;

fn rverbs() -> String {
    common::rverbs_bin()
}

/// An rdma-core example program from $PATH, or `None` (test skipped) on a
/// host without it; in the VM it must be there.
fn oracle(name: &str) -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_default();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let p = std::path::Path::new(dir).join(name);
        if p.is_file() {
            return Some(p.display().to_string());
        }
    }
    if common::device_required() {
        panic!("RVERBS_REQUIRE_DEVICE=1 but {name} is not in PATH ({path})");
    }
    eprintln!("skipped: {name} not installed");
    None
}

/// The IPv4-mapped RoCE v2 GID index of port 1, for rdma-core's `-g`.
fn gid_index(dev: &rverbs::Device) -> u8 {
    dev.open().expect("open").default_sgid_index(1).expect("default_sgid_index")
}

/// Port 1's GID at that index, as rdma-core's wire format writes it.
fn wire_gid(dev: &rverbs::Device) -> String {
    let ctx = dev.open().expect("open");
    let idx = ctx.default_sgid_index(1).unwrap();
    let gid = ctx.query_gid(1, idx.into()).unwrap().expect("the default GID exists").gid;
    gid.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// `N` of `N bytes in ...`.
fn bytes_line(out: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.strip_suffix("Mbit/sec").and(l.split_once(" bytes in ")).and_then(|(n, _)| n.parse().ok()))
}

/// The `LID ..., QPN ..., PSN ..., GID ...` parts of the address lines with
/// `label` (ibv_ud_pingpong's local line has `PSN 0x..: GID`).
fn addresses(out: &str, label: &str) -> Vec<String> {
    out.lines().filter_map(|l| l.strip_prefix(label)).map(|rest| rest.trim_start().replace(": GID", ", GID")).collect()
}

/// Runs `server`, waits until it listens on `port`, runs `client`; both
/// must succeed, report `expect_bytes`, and have exchanged the addresses
/// each printed.
fn pingpong_pair(port: u16, server: (&str, Vec<String>), client: (&str, Vec<String>), expect_bytes: u64) {
    let mut s = Proc::spawn(server.0, &server.1, None);
    wait_listening(port, &mut s);
    let c = Proc::spawn(client.0, &client.1, None).finish(DEADLINE);
    let s = s.finish(if c.code == Some(0) { DEADLINE } else { Duration::from_secs(5) });
    let both = format!("{}\n{}", s.describe(), c.describe());
    for r in [&s, &c] {
        assert!(!r.killed, "a side had to be killed:\n{both}");
        assert_eq!(r.code, Some(0), "a side failed:\n{both}");
        assert_eq!(bytes_line(&r.stdout), Some(expect_bytes), "byte count:\n{both}");
        assert!(r.stdout.contains(&format!("{ITERS} iters in ")), "iters line:\n{both}");
        assert!(!r.stdout.contains("invalid data"), "-c found bad data:\n{both}");
    }
    let (s_local, s_remote) = (addresses(&s.stdout, "  local address:"), addresses(&s.stdout, "  remote address:"));
    let (c_local, c_remote) = (addresses(&c.stdout, "  local address:"), addresses(&c.stdout, "  remote address:"));
    assert!(!s_local.is_empty() && s_local.iter().all(|a| a.starts_with("LID 0x")), "{both}");
    assert_eq!(s_local, c_remote, "the client printed other addresses than the server's:\n{both}");
    assert_eq!(c_local, s_remote, "the server printed other addresses than the client's:\n{both}");
    let ip = common::device_ipv4(&common::first_device().expect("the pair ran on a device"));
    assert!(s_local[0].ends_with(&format!("GID ::ffff:{ip}")), "{both}");
}

/// rdma-core's program for a mode.
fn oracle_for(mode: &str) -> &'static str {
    match mode {
        "--ud" => "ibv_ud_pingpong",
        "--srq" => "ibv_srq_pingpong",
        _ => "ibv_rc_pingpong",
    }
}

fn bytes_for(mode: &str) -> u64 {
    let size = if mode == "--ud" { 1024 } else { 4096 };
    size * u64::from(ITERS) * 2
}

/// Our server and rdma-core's client, or the other way round.
fn interop(mode: &str, ours_is_server: bool, events: bool, port: u16) {
    let dev = require_device!();
    let Some(theirs) = oracle(oracle_for(mode)) else { return };
    let g = gid_index(&dev).to_string();
    let (p, n) = (port.to_string(), ITERS.to_string());
    // The device by name on both sides: with siw0 in the guest too,
    // rdma-core's first device is not always rxe0.
    let mut ours = strings(&["pingpong", "-d", dev.name(), "-n", &n, "-p", &p, "-c"]);
    if !mode.is_empty() {
        ours.push(mode.to_string());
    }
    let mut rdma = strings(&["-d", dev.name(), "-n", &n, "-p", &p, "-g", &g, "-c"]);
    if events {
        ours.push("-e".into());
        rdma.push("-e".into());
    }
    let bin = rverbs();
    if ours_is_server {
        rdma.push("127.0.0.1".into());
        pingpong_pair(port, (&bin, ours), (&theirs, rdma), bytes_for(mode));
    } else {
        ours.push("127.0.0.1".into());
        pingpong_pair(port, (&theirs, rdma), (&bin, ours), bytes_for(mode));
    }
}

#[test]
fn rc_ours_server_rdma_core_client() {
    interop("", true, false, 19511);
}

#[test]
fn rc_rdma_core_server_ours_client() {
    interop("", false, false, 19512);
}

#[test]
fn rc_events_ours_server_rdma_core_client() {
    interop("", true, true, 19513);
}

#[test]
fn rc_events_rdma_core_server_ours_client() {
    interop("", false, true, 19514);
}

#[test]
fn ud_ours_server_rdma_core_client() {
    interop("--ud", true, false, 19521);
}

#[test]
fn ud_rdma_core_server_ours_client() {
    interop("--ud", false, false, 19522);
}

#[test]
fn ud_events_ours_server_rdma_core_client() {
    interop("--ud", true, true, 19523);
}

#[test]
fn ud_events_rdma_core_server_ours_client() {
    interop("--ud", false, true, 19524);
}

#[test]
fn srq_ours_server_rdma_core_client() {
    interop("--srq", true, false, 19531);
}

#[test]
fn srq_events_rdma_core_server_ours_client() {
    interop("--srq", false, true, 19532);
}

/// Ours with ours: default GID choice on both sides, one polling and one
/// sleeping on events, through the guest's RoCE address.
fn ours_with_ours(mode: &str, port: u16) {
    let dev = require_device!();
    let (p, n, ip) = (port.to_string(), ITERS.to_string(), common::device_ipv4(&dev).to_string());
    let mut server = strings(&["pingpong", "-d", dev.name(), "-n", &n, "-p", &p, "-c", "-e"]);
    let mut client = strings(&["pingpong", "-d", dev.name(), "-n", &n, "-p", &p, "-c", &ip]);
    if !mode.is_empty() {
        server.push(mode.into());
        client.push(mode.into());
    }
    let bin = rverbs();
    pingpong_pair(port, (&bin, server), (&bin, client), bytes_for(mode));
}

#[test]
fn rc_ours_with_ours() {
    ours_with_ours("", 19541);
}

#[test]
fn ud_ours_with_ours() {
    ours_with_ours("--ud", 19542);
}

#[test]
fn srq_ours_with_ours() {
    ours_with_ours("--srq", 19543);
}

/// Non-zero exit, one line `rverbs pingpong: ...` on stderr containing
/// every `want`, no kill.
fn assert_clean_failure(r: &Ended, want: &[&str]) {
    let d = r.describe();
    assert!(!r.killed, "had to be killed:\n{d}");
    assert!(r.code.is_some_and(|c| c != 0), "should have failed:\n{d}");
    let err = r.stderr.trim_end();
    assert!(err.starts_with("rverbs pingpong: "), "stderr is not 'rverbs pingpong: ...':\n{d}");
    assert!(!err.contains('\n'), "stderr is not one line:\n{d}");
    for w in want {
        assert!(err.contains(w), "stderr lacks {w:?}:\n{d}");
    }
}

fn run_ours(args: &[&str], limit: Duration) -> Ended {
    Proc::spawn(rverbs(), &on_test_device(args), None).finish(limit)
}

/// `rverbs pingpong` args with `-d <RVERBS_TEST_DEVICE>` when the harness
/// names a device and the args name none: the first device of a guest with
/// rxe0 and siw0 may be either.
fn on_test_device(args: &[&str]) -> Vec<String> {
    let mut v = strings(args);
    if let Some(dev) = common::test_device_name().filter(|_| args.first() == Some(&"pingpong") && !args.contains(&"-d"))
    {
        v.splice(1..1, ["-d".to_owned(), dev]);
    }
    v
}

#[test]
fn bad_arguments_fail_cleanly() {
    // No device needed: these fail before any device is opened.
    for (args, want) in [
        (&["pingpong", "-m", "1000"][..], "invalid MTU '1000'"),
        (&["pingpong", "-x"][..], "invalid option -- 'x'"),
        (&["pingpong", "--ud", "--srq"][..], "cannot be combined"),
        (&["pingpong", "--ud", "-m", "2048"][..], "does not apply to --ud"),
        (&["pingpong", "-p", "65536"][..], "invalid port '65536'"),
        (&["pingpong", "-n", "many"][..], "invalid iteration count 'many'"),
        (&["pingpong", "-g", "1000"][..], "invalid GID index '1000'"),
        (&["pingpong", "host1", "host2"][..], "unexpected argument 'host2'"),
        (&["pingpong", "--srq", "-q", "32", "-r", "8"][..], "rx_depth 8 is too small for 32 QPs"),
        (&["pingpong", "-j"][..], "device memory) is not supported"),
    ] {
        assert_clean_failure(&run_ours(args, Duration::from_secs(30)), &[want]);
    }
    let help = run_ours(&["pingpong", "--help"], Duration::from_secs(30));
    assert_eq!(help.code, Some(0), "{}", help.describe());
    assert!(help.stdout.contains("-p, --port=<port>") && help.stdout.contains("--ud"), "{}", help.describe());
}

#[test]
fn unknown_device_fails_cleanly() {
    // Runs anywhere: with or without devices, 'nosuch' is not one of them.
    let r = run_ours(&["pingpong", "-d", "nosuch", "-p", "19551"], Duration::from_secs(30));
    assert_clean_failure(&r, &["IB device nosuch not found"]);
    let r = run_ours(&["pingpong", "-d", "nosuch", "-p", "19551", "127.0.0.1"], Duration::from_secs(30));
    assert_clean_failure(&r, &["IB device nosuch not found"]);
}

#[test]
fn empty_gid_index_fails_cleanly() {
    let _dev = require_device!();
    for extra in [&[][..], &["127.0.0.1"][..], &["--ud"][..]] {
        let mut a = vec!["pingpong", "-g", "200", "-p", "19552"];
        a.extend_from_slice(extra);
        assert_clean_failure(&run_ours(&a, Duration::from_secs(30)), &["index 200"]);
    }
}

#[test]
fn port_in_use_fails_cleanly() {
    let _dev = require_device!();
    let port = 19553;
    let _busy = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).expect("bind the busy port");
    let r = run_ours(&["pingpong", "-n", "5", "-p", "19553"], Duration::from_secs(30));
    assert_clean_failure(&r, &["port 19553", "in use"]);
}

#[test]
fn no_server_fails_cleanly() {
    let _dev = require_device!();
    assert!(!listening(19554));
    let r = run_ours(&["pingpong", "-p", "19554", "127.0.0.1"], Duration::from_secs(30));
    assert_clean_failure(&r, &["Couldn't connect to 127.0.0.1:19554"]);
}

/// A fake server on `port`: accepts one client, reads its address, then
/// `answer`s (and closes).
fn fake_server(port: u16, answer: impl FnOnce(&mut TcpStream) + Send + 'static) -> JoinHandle<()> {
    let l = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).expect("bind the fake server");
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        drop(l);
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut m = [0u8; 52];
        let _ = s.read_exact(&mut m);
        answer(&mut s);
    })
}

/// A valid-looking address of a QP that does not exist.
fn ghost_address(dev: &rverbs::Device) -> Vec<u8> {
    let mut m = format!("0000:abcdef:123456:{}", wire_gid(dev)).into_bytes();
    m.push(0);
    assert_eq!(m.len(), 52);
    m
}

#[test]
fn server_that_sends_garbage() {
    let _dev = require_device!();
    let t = fake_server(19555, |s| {
        let _ = s.write_all(&[b'?'; 52]);
    });
    let r = run_ours(&["pingpong", "-p", "19555", "--timeout", "5", "127.0.0.1"], Duration::from_secs(30));
    t.join().unwrap();
    assert_clean_failure(&r, &["malformed address", "server"]);
}

#[test]
fn server_that_closes_at_once() {
    let _dev = require_device!();
    let t = fake_server(19556, |_| {});
    let r = run_ours(&["pingpong", "-p", "19556", "--timeout", "5", "127.0.0.1"], Duration::from_secs(30));
    t.join().unwrap();
    assert_clean_failure(&r, &["server closed the connection"]);
}

#[test]
fn rc_server_that_vanishes_after_its_address() {
    let dev = require_device!();
    let ghost = ghost_address(&dev);
    let t = fake_server(19557, move |s| {
        let _ = s.write_all(&ghost);
    });
    // The send to a QP nobody answers for ends in a retry-exceeded error
    // (or, at the latest, the completion timeout).
    let r = run_ours(&["pingpong", "-n", "5", "-p", "19557", "--timeout", "5", "127.0.0.1"], Duration::from_secs(40));
    t.join().unwrap();
    assert_clean_failure(&r, &[]);
    assert!(r.stdout.contains("remote address: LID 0x0000, QPN 0xabcdef, PSN 0x123456"), "{}", r.describe());
}

#[test]
fn ud_server_that_vanishes_after_its_address() {
    let dev = require_device!();
    let ghost = ghost_address(&dev);
    let t = fake_server(19558, move |s| {
        let _ = s.write_all(&ghost);
    });
    let r = run_ours(
        &["pingpong", "--ud", "-e", "-n", "5", "-p", "19558", "--timeout", "3", "127.0.0.1"],
        Duration::from_secs(40),
    );
    t.join().unwrap();
    assert_clean_failure(&r, &["no completion event for 3 s"]);
}

/// Our server on `port`, and a fake client that connects and then does `talk`.
fn with_fake_client(port: u16, extra: &[&str], talk: impl FnOnce(&mut TcpStream)) -> Ended {
    let p = port.to_string();
    let mut args = vec!["pingpong", "-n", "5", "-p", &p, "--timeout", "5"];
    args.extend_from_slice(extra);
    let mut server = Proc::spawn(rverbs(), &on_test_device(&args), None);
    wait_listening(port, &mut server);
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect to our server");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    talk(&mut s);
    let r = server.finish(Duration::from_secs(40));
    drop(s);
    r
}

#[test]
fn client_that_sends_garbage() {
    let _dev = require_device!();
    let r = with_fake_client(19559, &[], |s| {
        let _ = s.write_all(b"hello, this is not a ping-pong address at all......\n");
    });
    assert_clean_failure(&r, &["client sent a malformed address"]);
}

#[test]
fn client_that_vanishes_before_done() {
    let dev = require_device!();
    let ghost = ghost_address(&dev);
    let r = with_fake_client(19560, &[], |s| {
        s.write_all(&ghost).unwrap();
        let mut m = [0u8; 52];
        let _ = s.read_exact(&mut m);
        let _ = s.shutdown(std::net::Shutdown::Both);
    });
    assert_clean_failure(&r, &["client closed the connection", "'done'"]);
}

#[test]
fn client_that_stops_after_done() {
    // A well-behaved exchange, then silence: the server waits for a first
    // receive that never comes and gives up at --timeout.
    let dev = require_device!();
    let ghost = ghost_address(&dev);
    let r = with_fake_client(19561, &["--srq", "-q", "1"], |s| {
        s.write_all(&ghost).unwrap();
        for _ in 1..256 {
            s.write_all(&[b"0000:000000:000000:", &[b'0'; 32][..], b"\0"].concat()).unwrap();
        }
        let mut m = vec![0u8; 52 * 256];
        s.read_exact(&mut m).unwrap();
        s.write_all(b"done\0").unwrap();
    });
    assert_clean_failure(&r, &["no completion for 5 s", "0 of 5 receives"]);
}
