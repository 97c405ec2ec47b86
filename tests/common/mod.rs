//! Shared helpers of the integration tests (tier b: run inside the rxe VM by
//! `cargo xtask test`).
#![allow(dead_code)]

use std::process::{Command, Output};

pub mod child;
pub mod stall;

/// True when the harness promised a device (`RVERBS_REQUIRE_DEVICE=1`):
/// then a test that would skip must fail instead.
pub fn device_required() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

/// The device the harness names in `RVERBS_TEST_DEVICE` (`rxe0`, `siw0`:
/// one tier per provider), else the first RDMA device; `None` after
/// printing `skipped: ...` when there is none and none is required.
/// Panics when a device is required but absent, or when the named one is.
pub fn first_device() -> Option<rverbs::Device> {
    let devs = rverbs::devices().expect("listing devices must not fail");
    if let Some(name) = test_device_name() {
        let names: Vec<&str> = devs.iter().map(|d| d.name()).collect();
        return match devs.iter().find(|d| d.name() == name) {
            Some(d) => Some(d.clone()),
            None => panic!("RVERBS_TEST_DEVICE={name} but there is no such device (devices: {names:?})"),
        };
    }
    match devs.into_iter().next() {
        Some(d) => Some(d),
        None if device_required() => panic!("RVERBS_REQUIRE_DEVICE=1 but no uverbs device was found"),
        None => {
            eprintln!("skipped: no uverbs device");
            None
        }
    }
}

/// `RVERBS_TEST_DEVICE`, the device the harness wants the tests on (unset
/// or empty: none named).
pub fn test_device_name() -> Option<String> {
    std::env::var("RVERBS_TEST_DEVICE").ok().filter(|n| !n.trim().is_empty()).map(|n| n.trim().to_owned())
}

/// True when `dev` is an iWARP device (siw): RC only, QPs connected only
/// through the CM (iw_cm), no atomics, UD, AHs or immediate data.
pub fn is_iwarp(dev: &rverbs::Device) -> bool {
    dev.transport() == rverbs::Transport::Iwarp
}

/// Prints why a test does not apply to `dev` (`n/a on siw0: <reason>`);
/// the caller has checked that the device or the API says so.
pub fn not_applicable(dev: &rverbs::Device, reason: &str) {
    println!("n/a on {}: {reason}", dev.name());
}

/// The netdev under `dev`: [`rverbs::Device::netdev`] (rxe: its parent),
/// else what iproute2's `rdma link show DEV/1` names (siw0 has no `parent`
/// file, and on 6.1 no netdev on its GIDs either: it sits on `v2`).
pub fn netdev_of(dev: &rverbs::Device) -> Option<String> {
    if let Some(n) = dev.netdev() {
        return Some(n.to_owned());
    }
    // `link siw0/1 state ACTIVE physical_state LINK_UP netdev v2`
    let out = run("/usr/bin/rdma", &["link", "show", &format!("{}/1", dev.name())]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace().skip_while(|w| *w != "netdev").nth(1).map(str::to_owned)
}

/// What QUERY_QP reports on `dev` for a QP in state `s`: `s` on IB and
/// RoCE; on siw, RESET on 6.1 whatever the state (its query leaves the
/// state at 0), and on 6.12 the state, IDLE (new) reported as INIT.
pub fn reported_state(dev: &rverbs::Device, s: rverbs::QpState) -> rverbs::QpState {
    if !is_iwarp(dev) {
        s
    } else if s == rverbs::QpState::Reset {
        iwarp_idle_state()
    } else if kernel_version() < (6, 12) {
        rverbs::QpState::Reset
    } else {
        s
    }
}

/// The state siw reports for a QP it holds IDLE (new, or moved to INIT):
/// RESET on 6.1, INIT on 6.12 (siw has no RESET state of its own).
pub fn iwarp_idle_state() -> rverbs::QpState {
    if kernel_version() >= (6, 12) {
        rverbs::QpState::Init
    } else {
        rverbs::QpState::Reset
    }
}

/// The IPv4 address of `dev`'s netdev (rxe0: 192.168.77.1 on `v0`; siw0:
/// 192.168.79.1 on `v2`), from iproute2: the address the CM tests connect
/// to on that device.
pub fn device_ipv4(dev: &rverbs::Device) -> std::net::Ipv4Addr {
    let netdev = netdev_of(dev).unwrap_or_else(|| panic!("{} has no netdev", dev.name()));
    let out = run("/usr/bin/ip", &["-4", "-o", "addr", "show", "dev", &netdev]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // `4: v0    inet 192.168.77.1/24 brd ... scope global v0 ...`
    let addr = text.split_whitespace().skip_while(|w| *w != "inet").nth(1);
    addr.and_then(|a| a.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no IPv4 address on {netdev} (under {}): {text:?}", dev.name()))
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

/// Two QPs of one type on one device, connected to each other over the
/// device's loopback path, each with its own CQ.
pub struct Loopback {
    pub ctx: rverbs::Context,
    pub pd: rverbs::ProtectionDomain,
    pub cq_a: rverbs::CompletionQueue,
    pub cq_b: rverbs::CompletionQueue,
    pub a: rverbs::QueuePair,
    pub b: rverbs::QueuePair,
    /// On iWARP: the CM ids that connected `a` and `b` (kept: destroying
    /// a connected id disconnects). Empty on IB/RoCE.
    pub cm_ids: Vec<rverbs::cm::CmId>,
}

/// Builds a connected loopback pair (RC/UC connected; UD readied), or
/// `None` when the test should skip.
pub fn loopback(qp_type: rverbs::QpType, cap: rverbs::QpCap, cqe: u32) -> Option<Loopback> {
    let dev = first_device()?;
    let ctx = dev.open().expect("open");
    let pd = ctx.alloc_pd().unwrap();
    let cq_a = ctx.create_cq(cqe).unwrap();
    let cq_b = ctx.create_cq(cqe).unwrap();
    let mk = |cq: &rverbs::CompletionQueue| {
        let mut init = rverbs::QpInitAttr::new(qp_type, cq);
        init.cap = cap;
        pd.create_qp(&init).unwrap()
    };
    let a = mk(&cq_a);
    let b = mk(&cq_b);
    let cm_ids = connect_pair(&ctx, &a, &b, &rverbs::ConnectOptions::default());
    Some(Loopback { ctx, pd, cq_a, cq_b, a, b, cm_ids })
}

/// Connects `a` and `b` to each other. IB/RoCE: by hand with `opts` (PSNs
/// 100 and 200), with the endpoints [`rverbs::QueuePair::local_endpoint`]
/// describes; returns no ids. iWARP (siw): through the RDMA CM
/// ([`cm_connect_pair`], `opts` unused); returns the CM ids, which the
/// caller keeps as long as the QPs (destroying a connected id
/// disconnects). `ctx` is the QPs' context (kept for the callers).
#[must_use = "on iWARP, dropping the CM ids disconnects the QPs"]
pub fn connect_pair(
    ctx: &rverbs::Context,
    a: &rverbs::QueuePair,
    b: &rverbs::QueuePair,
    opts: &rverbs::ConnectOptions,
) -> Vec<rverbs::cm::CmId> {
    assert!(a.context().same_as(ctx) && b.context().same_as(ctx));
    if is_iwarp(ctx.device()) {
        return cm_connect_pair(ctx.device(), a, b);
    }
    let ea = a.local_endpoint(100, opts).unwrap();
    let eb = b.local_endpoint(200, opts).unwrap();
    a.connect(&ea, &eb, opts).unwrap();
    b.connect(&eb, &ea, opts).unwrap();
    Vec::new()
}

/// Connects RC QPs `a` (active) and `b` (passive) of `dev` to each other
/// through the RDMA CM over `dev`'s own address, as an iWARP device
/// requires: `rdma_listen`, `rdma_resolve_addr`/`route`, `rdma_connect`,
/// `rdma_get_request`, `rdma_accept`, ESTABLISHED on both ids (the
/// kernel's iw_cm moves both QPs to RTS). Returns the two ids.
pub fn cm_connect_pair(dev: &rverbs::Device, a: &rverbs::QueuePair, b: &rverbs::QueuePair) -> Vec<rverbs::cm::CmId> {
    use rverbs::cm::{self, ConnParam, EventKind};
    use std::time::Duration;
    // Port 0: the kernel picks a free one, so pairs alive at once (a test
    // may hold 64, beside its binary's other tests) never collide.
    let any = std::net::SocketAddr::from((device_ipv4(dev), 0));
    let listener = cm::Listener::bind(any).unwrap_or_else(|e| panic!("rdma_listen on {any}: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|| panic!("no address for the listener on {any}"));
    assert_ne!(addr.port(), 0, "rdma_bind_addr on port 0 chose no port");
    let timeout = Duration::from_secs(30);
    let active = cm::resolve(addr, timeout).unwrap_or_else(|e| panic!("rdma_resolve_addr/route {addr}: {e}"));
    active.attach_qp(a).expect("rdma_create_qp (active)");
    active.connect(&ConnParam::default()).expect("rdma_connect");
    let req = listener.get_request(Some(timeout)).expect("rdma_get_request");
    let passive = req.id().clone();
    passive.attach_qp(b).expect("rdma_create_qp (passive)");
    passive.accept(&ConnParam::default()).expect("rdma_accept");
    for id in [&active, &passive] {
        let ev = id.channel().get_event_timeout(timeout).expect("rdma_get_cm_event");
        let ev = ev.unwrap_or_else(|| panic!("no ESTABLISHED within {timeout:?} (hang detector)"));
        assert_eq!(ev.kind(), EventKind::Established, "{ev:?}");
    }
    vec![active, passive]
}

/// Polls `cq` until `n` completions arrived (yielding while empty), or
/// panics after a generous bound so a lost completion fails instead of hanging,
/// with a [`stall::report`] of the rings in the message.
pub fn poll_n(cq: &mut rverbs::CompletionQueue, n: usize) -> Vec<rverbs::Wc> {
    let mut out = Vec::with_capacity(n);
    let mut buf = [rverbs::Wc::default(); 32];
    let start = std::time::Instant::now();
    while out.len() < n {
        let want = (n - out.len()).min(buf.len());
        let got = cq.poll(&mut buf[..want]);
        out.extend_from_slice(&buf[..got]);
        if got == 0 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(120),
                "only {} of {n} completions after 120 s: {out:?}\n{}",
                out.len(),
                stall::report()
            );
            std::thread::yield_now();
        }
    }
    out
}

/// Asserts that no completion arrives for a short while.
pub fn assert_no_more(cq: &mut rverbs::CompletionQueue) {
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut buf = [rverbs::Wc::default(); 4];
    let n = cq.poll(&mut buf);
    assert_eq!(n, 0, "unexpected completions: {:?}", &buf[..n]);
}

/// Counts of kernel objects on `dev` from iproute2's `rdma resource show`,
/// e.g. `0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 1 srq 0`.
pub fn resource_counts(dev: &str) -> Vec<(String, u64)> {
    let out = run("/usr/bin/rdma", &["resource", "show"]);
    assert!(out.status.success(), "rdma resource show: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.contains(&format!(" {dev}:"))).unwrap_or_else(|| panic!("{dev} not in {text}"));
    let words: Vec<&str> = line.split_whitespace().skip(2).collect();
    words.chunks(2).filter_map(|c| Some((c[0].to_owned(), c.get(1)?.parse().ok()?))).collect()
}

/// Waits until no kernel object count on `dev` is above `before`, panicking
/// after a generous bound with both counts: the objects leaked. Counts
/// below `before` pass, and the retries keep kernel-side teardown that ends
/// late from failing a test (not seen on rxe so far). The baseline is not
/// zero: the kernel's own GSI QP (QP1) holds a PD, a CQ and a QP
/// (`pd 1 cq 1 qp 1 ... ctx 0`).
pub fn assert_no_growth(dev: &str, before: &[(String, u64)]) {
    let start = std::time::Instant::now();
    loop {
        let now = resource_counts(dev);
        let grown: Vec<_> =
            now.iter().filter(|(k, v)| before.iter().find(|(bk, _)| bk == k).map_or(true, |(_, bv)| v > bv)).collect();
        if grown.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "kernel objects leaked on {dev}: {grown:?} (before: {before:?}, now: {now:?})"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The lines of iproute2's `rdma resource show <kind>` (`qp`, `mr`, `cq`,
/// `pd`) owned by the calling thread (`... pid 123 comm x`: the kernel
/// records the id of the thread that created the object, and each test runs
/// on a thread of its own).
pub fn resources_of(kind: &str) -> Vec<String> {
    let out = run("/usr/bin/rdma", &["resource", "show", kind]);
    assert!(out.status.success(), "rdma resource show {kind}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let tid = nix::unistd::gettid().to_string();
    text.lines()
        .filter(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.windows(2).any(|p| p[0] == "pid" && p[1] == tid)
        })
        .map(str::to_owned)
        .collect()
}

/// The running kernel's `(major, minor)` from `/proc/sys/kernel/osrelease`
/// (`6.1.0-57-amd64` -> `(6, 1)`), for pinning behaviour that differs
/// between the kernels the VM tier boots.
pub fn kernel_version() -> (u32, u32) {
    let rel = sysfs("/proc/sys/kernel/osrelease");
    let mut it = rel.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>());
    match (it.next(), it.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor),
        _ => panic!("cannot read a version from osrelease {rel:?}"),
    }
}

/// `len` pseudo-random bytes from `seed` (xorshift): a payload whose
/// corruption or misplacement a comparison shows.
pub fn pattern(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// `len` bytes of `mr` at `off`, copied out.
pub fn read(mr: &rverbs::MemoryRegion, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    mr.read_at(off, &mut v).unwrap();
    v
}

/// A signaled send work request of `op` over `sgl`.
pub fn send_wr<'a>(wr_id: u64, op: rverbs::SendOp, sgl: &'a [rverbs::Sge]) -> rverbs::SendWr<'a> {
    rverbs::SendWr { wr_id, op, flags: rverbs::SendFlags::SIGNALED, sgl, ud: None }
}

/// The next completion of `cq`: SUCCESS, of `wr_id` and `opcode`.
pub fn ok_one(cq: &mut rverbs::CompletionQueue, wr_id: u64, opcode: rverbs::WcOpcode) -> rverbs::Wc {
    let wc = poll_n(cq, 1)[0];
    assert_eq!(wc.status, rverbs::WcStatus::SUCCESS, "{wc:?}");
    assert_eq!((wc.wr_id, wc.opcode), (wr_id, opcode), "{wc:?}");
    wc
}
