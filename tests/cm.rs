//! The RDMA connection manager (`rverbs::cm`, `rverbs rping`) against the
//! real kernel CM on the tier's device (VM tier, 6.1 and 6.12; rxe0 and
//! siw0), and against rdma-core's `rping`, `ucmatose` and `udaddy` in both
//! roles.
//!
//! Every connection goes to the address of the device the harness names
//! in `RVERBS_TEST_DEVICE` ([`common::device_ipv4`]: rxe0 192.168.77.1,
//! siw0 192.168.79.1): both ends on that device, through its loopback.
//! Each test uses ports of its own. Every child program runs under a
//! deadline; every wait in the library has a timeout, so a hang fails the
//! test instead of the tier.
//!
//! On iWARP (siw0) the kernel's CM differs where the tests say so and
//! assert what it does there: a connect nobody listens to fails in the
//! CONNECT command itself, private data arrives at the length sent (MPA),
//! a reject reads as `-ECONNRESET`, and there is no UD (udaddy's tests
//! check the refusal, then print `n/a on siw0: ...`).

mod common;

use common::child::*;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use rverbs::cm::{self, CmId, ConnParam, EventChannel, EventKind, Listener, PortSpace, PrivateDataIn};
use rverbs::{
    AccessFlags, CompletionQueue, Errno, ErrorKind, MemoryRegion, QpAttrMask, QpCap, QpInitAttr, QpType, QueuePair,
    RecvWr, SendWr, Transport, Wc, WcOpcode, WcStatus,
};

/// The longest a child program of this file may run (TCG guests are slow).
const DEADLINE: Duration = Duration::from_secs(120);
const T: Duration = Duration::from_secs(30);

/// What the tests need of the tier's device, read once.
struct Tier {
    /// `rxe0`, `siw0`.
    name: String,
    /// Its netdev (`v0`, `v2`).
    netdev: String,
    /// Its netdev's IPv4 address: every connection's.
    ip: Ipv4Addr,
    transport: Transport,
}

static TIER: OnceLock<Tier> = OnceLock::new();

/// The tier's device ([`common::first_device`]); call after [`cm_ready`].
fn tier() -> &'static Tier {
    TIER.get_or_init(|| {
        let dev = common::first_device().expect("cm_ready checked that there is a device");
        let netdev = common::netdev_of(&dev).unwrap_or_else(|| panic!("{} has no netdev", dev.name()));
        Tier { name: dev.name().to_owned(), netdev, ip: common::device_ipv4(&dev), transport: dev.transport() }
    })
}

/// True on an iWARP device (siw0).
fn iwarp() -> bool {
    tier().transport == Transport::Iwarp
}

/// The device's address as a program argument.
fn ip() -> String {
    tier().ip.to_string()
}

fn at(port: u16) -> SocketAddr {
    SocketAddr::from((tier().ip, port))
}

/// The most private data `what` carries on the tier's device (RC).
fn pd_limit(what: PrivateDataIn) -> usize {
    cm::private_data_limit(PortSpace::Tcp, tier().transport, what)
}

/// The device, and the CM's node: skipped without them, failed in the VM.
fn cm_ready() -> bool {
    if common::first_device().is_none() {
        return false;
    }
    tier();
    if !std::path::Path::new("/dev/infiniband/rdma_cm").exists() {
        assert!(!common::device_required(), "RVERBS_REQUIRE_DEVICE=1 but /dev/infiniband/rdma_cm is missing");
        eprintln!("skipped: no /dev/infiniband/rdma_cm (rdma_ucm not loaded)");
        return false;
    }
    true
}

macro_rules! require_cm {
    () => {
        if !cm_ready() {
            return;
        }
    };
}

/// One side's verbs objects for a connection.
struct Side {
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: Option<QueuePair>,
}

/// A PD, a CQ, an RC or UD QP and a 4 KiB region on `id`'s device.
fn side(id: &CmId, qp_type: QpType, recv_depth: u32) -> Side {
    let ctx = id.context().expect("the id's device");
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64).unwrap();
    let mut init = QpInitAttr::new(qp_type, &cq);
    init.cap = QpCap { max_send_wr: 16, max_recv_wr: recv_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = pd.create_qp(&init).unwrap();
    let mr =
        pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE).unwrap();
    Side { cq, mr, qp: Some(qp) }
}

fn post_recv(qp: &mut QueuePair, mr: &MemoryRegion, wr_id: u64, off: usize, len: u32) {
    qp.post_recv(&[RecvWr::new(wr_id, &[mr.sge(off, len).unwrap()])]).unwrap();
}

fn one(cq: &mut CompletionQueue) -> Wc {
    let wc = common::poll_n(cq, 1)[0];
    assert_eq!(wc.status, WcStatus::SUCCESS, "{wc:?}");
    wc
}

/// RC through the convenience calls, both ends in this process; the
/// server (passive side) RDMA READs and WRITEs the client's memory, which
/// rxe allows only if the client's QP went through INIT a second time
/// after the connect response (its access flags come from that INIT).
/// iWARP: private data arrives at the length sent (MPA carries its
/// length; the IB CM's messages are fixed-size), and siw's QUERY_QP
/// reports a fixed LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ.
#[test]
fn rc_connect_accept_and_the_passive_side_reads_and_writes() {
    require_cm!();
    let listener = Listener::bind(at(20001)).unwrap();
    assert_eq!(listener.local_addr(), Some(at(20001)));
    let server = std::thread::spawn(move || {
        let req = listener.get_request(Some(T)).unwrap();
        if iwarp() {
            assert_eq!(req.private_data().len(), 6, "iWARP: a request's private data at the length sent");
        } else {
            assert_eq!(req.private_data().len(), 56, "a request's private data at its full capacity");
        }
        assert_eq!(&req.private_data()[..6], b"client");
        let mut s = side(req.id(), QpType::Rc, 4);
        let mut qp = s.qp.take().unwrap();
        req.id().attach_qp(&qp).unwrap(); // INIT: receives can go in before the accept
        post_recv(&mut qp, &s.mr, 1, 0, 64);
        let param = ConnParam { private_data: b"server".to_vec(), ..ConnParam::default() };
        let mut conn = req.accept(qp, &param, T).unwrap();
        // The client's advertisement: its region's address and rkey.
        let wc = one(&mut s.cq);
        assert_eq!((wc.wr_id, wc.byte_len), (1, 12));
        let mut adv = [0u8; 12];
        s.mr.read_at(0, &mut adv).unwrap();
        let remote = rverbs::RemoteAddr {
            addr: u64::from_be_bytes(adv[..8].try_into().unwrap()),
            rkey: u32::from_be_bytes(adv[8..].try_into().unwrap()),
        };
        conn.post_send(&[SendWr::read(2, &[s.mr.sge(100, 5).unwrap()], remote).signaled()]).unwrap();
        assert_eq!(one(&mut s.cq).opcode, WcOpcode::RDMA_READ);
        let mut got = [0u8; 5];
        s.mr.read_at(100, &mut got).unwrap();
        assert_eq!(&got, b"hello");
        s.mr.write_at(200, b"pong").unwrap();
        let remote64 = rverbs::RemoteAddr { addr: remote.addr + 64, rkey: remote.rkey };
        conn.post_send(&[SendWr::write(3, &[s.mr.sge(200, 4).unwrap()], remote64).signaled()]).unwrap();
        assert_eq!(one(&mut s.cq).opcode, WcOpcode::RDMA_WRITE);
        conn.post_send(&[SendWr::send(4, &[s.mr.sge(200, 4).unwrap()]).signaled()]).unwrap();
        assert_eq!(one(&mut s.cq).opcode, WcOpcode::SEND);
        assert!(conn.wait_disconnected(T).unwrap(), "the client's disconnect");
    });

    let id = cm::resolve(at(20001), Duration::from_secs(2)).unwrap();
    assert_eq!(id.port_num(), Some(1));
    let mut c = side(&id, QpType::Rc, 4);
    let mut qp = c.qp.take().unwrap();
    id.attach_qp(&qp).unwrap();
    post_recv(&mut qp, &c.mr, 9, 512, 64);
    let param = ConnParam { private_data: b"client".to_vec(), ..ConnParam::default() };
    let mut conn = id.connect_qp(qp, &param, T).unwrap();
    if iwarp() {
        assert_eq!(conn.private_data().len(), 6, "iWARP: a reply's private data at the length sent");
    } else {
        assert_eq!(conn.private_data().len(), 196, "a reply's private data at its full capacity");
    }
    assert_eq!(&conn.private_data()[..6], b"server");
    // The second INIT's access (and 6.12 rxe's FLUSH bits, kept); siw
    // reports the same three flags whatever the QP was given.
    let a = conn.query(QpAttrMask::ACCESS_FLAGS).unwrap().qp_access_flags;
    assert!(a.contains(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ), "{a:?}");
    if iwarp() {
        assert_eq!(a, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ, "siw: {a:?}");
    } else if common::kernel_version() >= (6, 2) {
        assert!(a.contains(AccessFlags::FLUSH_GLOBAL | AccessFlags::FLUSH_PERSISTENT), "6.12's rxe: {a:?}");
    }
    c.mr.write_at(0, b"hello").unwrap();
    let mut adv = [0u8; 12];
    adv[..8].copy_from_slice(&c.mr.addr().to_be_bytes());
    adv[8..].copy_from_slice(&c.mr.rkey().to_be_bytes());
    c.mr.write_at(300, &adv).unwrap();
    conn.post_send(&[SendWr::send(10, &[c.mr.sge(300, 12).unwrap()]).signaled()]).unwrap();
    let mut wcs = common::poll_n(&mut c.cq, 2);
    wcs.sort_by_key(|w| w.wr_id);
    assert_eq!((wcs[0].wr_id, wcs[0].status, wcs[1].wr_id), (9, WcStatus::SUCCESS, 10));
    let mut pong = [0u8; 4];
    c.mr.read_at(64, &mut pong).unwrap();
    assert_eq!(&pong, b"pong", "the server's RDMA WRITE landed");
    conn.disconnect().unwrap();
    assert!(conn.wait_disconnected(T).unwrap());
    server.join().unwrap();
}

/// IB/RoCE: the peer's CM answers with REJECTED, reason 8. iWARP: the
/// CONNECT command itself fails with `ECONNREFUSED` (iw_cm opens the TCP
/// connection inside it), no event follows and the QP stays in INIT.
#[test]
fn no_listener_is_rejected_with_reason_8_naming_the_address() {
    require_cm!();
    let id = cm::resolve(at(20011), Duration::from_secs(2)).unwrap();
    let mut c = side(&id, QpType::Rc, 1);
    let e = id.connect_qp(c.qp.take().unwrap(), &ConnParam::default(), T).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::ECONNREFUSED), "{e}");
    assert!(e.to_string().contains(&format!("nobody listens at {}", at(20011))), "{e}");
    if iwarp() {
        assert!(e.to_string().contains("its TCP port refused the connection"), "{e}");
    } else {
        assert!(e.to_string().contains("reason 8"), "{e}");
    }

    // The raw event: REJECTED with the IB CM's reason 8, and the QP in ERR
    // (iWARP: CONNECT's own ECONNREFUSED, no event, the QP in INIT).
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(None, at(20011), Duration::from_secs(2)).unwrap();
    assert_eq!(ch.get_event_timeout(T).unwrap().unwrap().kind(), EventKind::AddrResolved);
    id.resolve_route(Duration::from_secs(2)).unwrap();
    assert_eq!(ch.get_event_timeout(T).unwrap().unwrap().kind(), EventKind::RouteResolved);
    let c = side(&id, QpType::Rc, 1);
    let qp = c.qp.unwrap();
    id.attach_qp(&qp).unwrap();
    if iwarp() {
        let e = id.connect(&ConnParam::default()).unwrap_err();
        assert_eq!(e.errno(), Some(Errno::ECONNREFUSED), "{e}");
        assert!(e.to_string().contains(&format!("nobody listens at {}", at(20011))), "{e}");
        let ev = ch.get_event_timeout(Duration::from_millis(500)).unwrap();
        assert!(ev.is_none(), "no event after a CONNECT that failed: {ev:?}");
        assert_eq!(qp.state(), rverbs::QpState::Init);
        return;
    }
    id.connect(&ConnParam::default()).unwrap();
    let ev = ch.get_event_timeout(T).unwrap().unwrap();
    assert_eq!((ev.kind(), ev.status()), (EventKind::Rejected, 8));
    assert_eq!(qp.state(), rverbs::QpState::Err);
}

/// An address on the device's subnet (its /24, host 99) that nobody has:
/// the address resolution (ARP) gets no answer.
#[test]
fn an_address_nobody_answers_is_an_addr_error_naming_it() {
    require_cm!();
    let [a, b, c, d] = tier().ip.octets();
    let nobody = SocketAddr::from((Ipv4Addr::new(a, b, c, if d == 99 { 98 } else { 99 }), 20021));
    let t = Instant::now();
    let e = cm::resolve(nobody, Duration::from_millis(500)).unwrap_err();
    eprintln!("{e} after {:?}", t.elapsed());
    assert!(e.to_string().contains(&nobody.to_string()), "{e}");
    assert!(e.is_os(), "{e}");
}

/// The other end of the veth pair `netdev` sits on (`v0` -> `v1`, `v2` ->
/// `v3`), from iproute2's `N: v0@v1: ...`.
fn veth_peer(netdev: &str) -> String {
    let out = common::run("/usr/bin/ip", &["-o", "link", "show", "dev", netdev]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let name = text.split_whitespace().nth(1).unwrap_or_default().trim_end_matches(':');
    match name.split_once('@') {
        Some((me, peer)) if me == netdev && !peer.is_empty() => peer.to_owned(),
        _ => panic!("{netdev} is not one end of a veth pair: {text:?}"),
    }
}

/// An address of this host on a netdev without an RDMA device (the veth
/// peer of the device's netdev: v1 under rxe0, v3 under siw0): the CM
/// resolves it but finds no device for it.
#[test]
fn an_address_without_an_rdma_device_is_an_addr_error() {
    require_cm!();
    let peer = veth_peer(&tier().netdev);
    let ip = |args: &[&str]| common::run("/usr/bin/ip", args);
    let out = ip(&["addr", "add", "10.77.0.1/24", "dev", &peer]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = cm::resolve("10.77.0.1:20031".parse().unwrap(), Duration::from_millis(500));
    ip(&["addr", "del", "10.77.0.1/24", "dev", &peer]);
    let e = r.unwrap_err();
    eprintln!("{} (address on {peer}): {e}", tier().name);
    assert!(e.to_string().contains("10.77.0.1:20031"), "{e}");
    assert_eq!(e.errno(), Some(Errno::ENODEV), "{e}");
    assert!(e.to_string().contains("no RDMA device"), "{e}");
}

/// A consumer reject with private data. IB/RoCE: REJECTED with reason 28
/// and the data padded to the REJ's 148 bytes. iWARP: an MPA reply with
/// the reject bit, which iw_cm reports as REJECTED with `-ECONNRESET` and
/// the data at the length sent, or none (siw races the reject against the
/// TCP close after it); the limits are MPA's (248).
#[test]
fn reject_with_private_data_reaches_the_client() {
    require_cm!();
    let listener = Listener::bind(at(20041)).unwrap();
    let (max_rej, max_req) = (pd_limit(PrivateDataIn::Reject), pd_limit(PrivateDataIn::Connect));
    let server = std::thread::spawn(move || {
        let req = listener.get_request(Some(T)).unwrap();
        let e = req.id().reject(&vec![0; max_rej + 1]).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Check, "{e}");
        assert!(e.to_string().contains(&format!("at most {max_rej}")), "{e}");
        req.reject(b"go away").unwrap();
    });
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(None, at(20041), Duration::from_secs(2)).unwrap();
    ch.get_event_timeout(T).unwrap().unwrap().into_result().unwrap();
    id.resolve_route(Duration::from_secs(2)).unwrap();
    ch.get_event_timeout(T).unwrap().unwrap().into_result().unwrap();
    let c = side(&id, QpType::Rc, 1);
    id.attach_qp(c.qp.as_ref().unwrap()).unwrap();
    let long = ConnParam { private_data: vec![1; max_req + 1], ..ConnParam::default() };
    let e = id.connect(&long).unwrap_err();
    let (over, limit) = (format!("{} bytes of private data", max_req + 1), format!("at most {max_req}"));
    assert!(e.to_string().contains(&over) && e.to_string().contains(&limit), "{e}");
    id.connect(&ConnParam { private_data: vec![2; max_req], ..ConnParam::default() }).unwrap();
    let ev = ch.get_event_timeout(T).unwrap().unwrap();
    let e = ev.error().unwrap();
    if iwarp() {
        let reset = -(Errno::ECONNRESET as i32);
        assert_eq!((ev.kind(), ev.status()), (EventKind::Rejected, reset), "iWARP: an MPA reject");
        // siw closes the TCP connection right after the MPA reject: when
        // the active side handles the close first, REJECTED comes without
        // the reject's private data (seen on 6.12).
        let pd = ev.private_data();
        eprintln!("iWARP reject: {} bytes of private data", pd.len());
        assert!(pd == b"go away" || pd.is_empty(), "iWARP: a reject's private data, at the length sent: {pd:?}");
        assert_eq!(e.errno(), Some(Errno::ECONNRESET), "{e}");
        assert!(e.to_string().contains(&format!("{} refused the connection", at(20041))), "{e}");
    } else {
        assert_eq!((ev.kind(), ev.status()), (EventKind::Rejected, 28), "a consumer reject");
        assert_eq!(ev.private_data().len(), 148, "a reject's private data at its full capacity");
        assert_eq!(&ev.private_data()[..7], b"go away");
        assert!(e.to_string().contains("rejected the connection"), "{e}");
    }
    server.join().unwrap();
}

/// The peer disconnects while receives are posted: DISCONNECTED, the QP
/// in ERR, each receive completes once, flushed.
#[test]
fn disconnect_by_the_peer_flushes_every_posted_receive_once() {
    require_cm!();
    const N: u64 = 8;
    let listener = Listener::bind(at(20051)).unwrap();
    let server = std::thread::spawn(move || {
        let req = listener.get_request(Some(T)).unwrap();
        let mut s = side(req.id(), QpType::Rc, N as u32);
        let mut qp = s.qp.take().unwrap();
        req.id().attach_qp(&qp).unwrap();
        for i in 0..N {
            post_recv(&mut qp, &s.mr, 100 + i, 64 * i as usize, 64);
        }
        let conn = req.accept(qp, &ConnParam::default(), T).unwrap();
        assert!(conn.wait_disconnected(T).unwrap(), "DISCONNECTED from the peer's disconnect");
        assert_eq!(conn.state(), rverbs::QpState::Err, "the CM moved the QP to ERR");
        let mut wcs = common::poll_n(&mut s.cq, N as usize);
        assert!(wcs.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR), "{wcs:?}");
        wcs.sort_by_key(|w| w.wr_id);
        assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), (100..100 + N).collect::<Vec<_>>());
        common::assert_no_more(&mut s.cq);
    });
    let id = cm::resolve(at(20051), Duration::from_secs(2)).unwrap();
    let mut c = side(&id, QpType::Rc, 2);
    let mut qp = c.qp.take().unwrap();
    id.attach_qp(&qp).unwrap();
    post_recv(&mut qp, &c.mr, 7, 0, 64);
    let conn = id.connect_qp(qp, &ConnParam::default(), T).unwrap();
    conn.disconnect().unwrap();
    let wc = common::poll_n(&mut c.cq, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (7, WcStatus::WR_FLUSH_ERR));
    server.join().unwrap();
    assert!(conn.wait_disconnected(T).unwrap());
}

/// librdmacm's `rdma_destroy_id` waits for every reported event to be
/// acked; here events are kept and the destroy returns at once, and the
/// kernel's CM ids are all gone afterwards.
#[test]
fn destroy_with_kept_and_unread_events_does_not_wait() {
    require_cm!();
    let dev = common::first_device().unwrap();
    let before = common::resource_counts(dev.name());
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(None, at(20061), Duration::from_secs(2)).unwrap();
    let kept = ch.get_event_timeout(T).unwrap().unwrap();
    assert_eq!(kept.kind(), EventKind::AddrResolved);
    id.resolve_route(Duration::from_secs(2)).unwrap();
    // ROUTE_RESOLVED stays unread in the kernel.
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    assert_eq!(id.clone().destroy().unwrap(), 1, "the kernel reported one event of it");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(ch.try_get_event().unwrap().is_none(), "the destroyed id's unread event went with it");
    assert_eq!(kept.id().resolve_route(Duration::from_secs(1)).unwrap_err().errno(), Some(Errno::ENOENT));
    drop((kept, id));

    // A listener with a request it never read: destroyed, and so is the
    // request's id; the client is rejected or times out, nothing hangs.
    let listener = ch.create_id(PortSpace::Tcp).unwrap();
    listener.bind_addr(at(20062)).unwrap();
    listener.listen(1).unwrap();
    let client = std::thread::spawn(|| {
        let id = cm::resolve(at(20062), Duration::from_secs(2)).unwrap();
        let mut c = side(&id, QpType::Rc, 1);
        id.connect_qp(c.qp.take().unwrap(), &ConnParam::default(), T).map(|_| ())
    });
    let t = Instant::now();
    while rverbs_listener_has_no_request(&ch) && t.elapsed() < T {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(listener);
    assert!(client.join().unwrap().is_err());
    common::assert_no_growth(dev.name(), &before);
}

/// Whether the channel's fd is still empty (the request not queued yet).
fn rverbs_listener_has_no_request(ch: &EventChannel) -> bool {
    use std::os::fd::AsFd;
    !rverbs_providers::sys::event::wait_readable(ch.as_fd(), 0).unwrap()
}

// ---- rdma-core's programs ----

/// rdma-core's program `name`, or `None` (skipped) on a host without it.
fn oracle(name: &str) -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_default();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let p = std::path::Path::new(dir).join(name);
        if p.is_file() {
            return Some(p.display().to_string());
        }
    }
    assert!(!common::device_required(), "RVERBS_REQUIRE_DEVICE=1 but {name} is not in PATH ({path})");
    eprintln!("skipped: {name} not installed");
    None
}

/// Runs `server` until it listens on `port`, then `client`; both must
/// exit 0. Returns both outputs.
fn pair(port: u16, server: (&str, Vec<String>), client: (&str, Vec<String>)) -> (Ended, Ended) {
    let mut s = Proc::spawn(server.0, &server.1, None);
    wait_cm_listening(port, &mut s);
    let c = Proc::spawn(client.0, &client.1, None).finish(DEADLINE);
    let s = s.finish(if c.code == Some(0) { DEADLINE } else { Duration::from_secs(10) });
    let both = format!("{}\n{}", s.describe(), c.describe());
    for r in [&s, &c] {
        assert!(!r.killed, "a side had to be killed:\n{both}");
        assert!(r.code == Some(0) || rping_teardown_race(r), "a side failed:\n{both}");
    }
    (s, c)
}

/// `rping -s` / `rping -c` with `-C count -S size -V -v` between ours and
/// rdma-core's; checks the data lines and the end of both sides.
fn rping(ours_server: bool, ours_client: bool, port: u16, count: u32, size: u32) {
    rping_with(ours_server, ours_client, port, count, size, &[]);
}

/// The program and arguments of an rping side: ours (`rverbs rping`) or
/// rdma-core's.
fn rping_side(ours: bool, theirs: &str, mut args: Vec<String>) -> (String, Vec<String>) {
    if ours {
        args.insert(0, "rping".into());
        (common::rverbs_bin(), args)
    } else {
        (theirs.to_owned(), args)
    }
}

/// [`rping`] with `extra` arguments on both sides.
fn rping_with(ours_server: bool, ours_client: bool, port: u16, count: u32, size: u32, extra: &[&str]) {
    rping_sides(ours_server, ours_client, port, count, size, (extra, extra));
}

/// [`rping`] with `extra.0` arguments on the server, `extra.1` on the client.
fn rping_sides(ours_server: bool, ours_client: bool, port: u16, count: u32, size: u32, extra: (&[&str], &[&str])) {
    require_cm!();
    let Some(theirs) = oracle("rping") else { return };
    let (p, c, s, ip) = (port.to_string(), count.to_string(), size.to_string(), ip());
    let mut srv = strings(&["-s", "-a", &ip, "-p", &p, "-S", &s, "-v"]);
    let mut cli = strings(&["-c", "-a", &ip, "-p", &p, "-C", &c, "-S", &s, "-V", "-v"]);
    srv.extend(strings(extra.0));
    cli.extend(strings(extra.1));
    let (sp, srv) = rping_side(ours_server, &theirs, srv);
    let (cp, cli) = rping_side(ours_client, &theirs, cli);
    let (s_out, c_out) = pair(port, (&sp, srv), (&cp, cli));
    let both = format!("{}\n{}", s_out.describe(), c_out.describe());
    let pings: Vec<&str> = c_out.stdout.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).collect();
    let served: Vec<&str> = s_out.stdout.lines().filter(|l| l.starts_with("server ping data: rdma-ping-")).collect();
    assert_eq!(pings.len(), count as usize, "{both}");
    assert_eq!(served.len(), count as usize, "{both}");
    for (i, (p, s)) in pings.iter().zip(&served).enumerate() {
        assert!(p.starts_with(&format!("ping data: rdma-ping-{i}: ")), "{both}");
        assert_eq!(p.len(), "ping data: ".len() + size as usize - 1, "a ping is S - 1 characters: {p}");
        assert_eq!(&p["ping data: ".len()..], &s["server ping data: ".len()..], "{both}");
    }
    // The same characters rping writes: after the prefix, letters from a
    // start that moves on by one each ping.
    let first = &pings[0]["ping data: rdma-ping-0: ".len()..];
    assert!(first.starts_with("ABCDEF"), "{first}");
    assert!(!c_out.stderr.contains("data mismatch"), "{both}");
    assert!(s_out.stderr.contains("server DISCONNECT EVENT..."), "{both}");
    if ours_client {
        // rdma-core's client may exit before its DISCONNECTED arrives.
        assert!(c_out.stderr.contains("client DISCONNECT EVENT..."), "{both}");
    }
    assert!(s_out.stderr.contains("wait for RDMA_READ_ADV state 10"), "{both}");
}

#[test]
fn rping_ours_server_rdma_core_client() {
    rping(true, false, 20101, 100, 4096);
}

#[test]
fn rping_rdma_core_server_ours_client() {
    rping(false, true, 20102, 100, 4096);
}

#[test]
fn rping_ours_both_sides() {
    rping(true, true, 20103, 100, 4096);
}

#[test]
fn rping_other_sizes_both_ways() {
    rping(true, false, 20104, 10, 26);
    rping(false, true, 20105, 10, 26);
    rping(true, false, 20106, 5, 65535);
    rping(false, true, 20107, 5, 65535);
    rping(true, true, 20108, 20, 64);
}

/// `-q`: the QP is created and moved through INIT, RTR and RTS by the
/// program itself (with the CM's attributes), both roles against rdma-core.
///
/// iWARP: a server's own QP works (its INIT by hand; iw_cm takes it to RTS
/// at the accept), each server against the other's plain client. A `-q`
/// client cannot: iWARP has no CONNECT_RESPONSE (iw_cm moves the QP to RTS
/// and reports ESTABLISHED), so rdma-core's `rdma_establish` after it is
/// refused with `EINVAL`, and ours, which waits for CONNECT_RESPONSE as
/// rdma-core's does, stops at the ESTABLISHED. Both clients fail, neither
/// side hangs.
#[test]
fn rping_self_modified_qp_both_ways() {
    require_cm!();
    if !iwarp() {
        rping_with(true, false, 20109, 10, 4096, &["-q"]);
        rping_with(false, true, 20110, 10, 4096, &["-q"]);
        return;
    }
    let Some(theirs) = oracle("rping") else { return };
    // The -q clients first: each side's outcome is printed before any check.
    let ip = ip();
    for (ours_client, port) in [(false, 20112u16), (true, 20113)] {
        let p = port.to_string();
        let (sp, srv) = rping_side(!ours_client, &theirs, strings(&["-s", "-a", &ip, "-p", &p, "-q"]));
        let (cp, cli) = rping_side(ours_client, &theirs, strings(&["-c", "-a", &ip, "-p", &p, "-C", "1", "-q"]));
        let mut s = Proc::spawn(&sp, &srv, None);
        wait_cm_listening(port, &mut s);
        let c = Proc::spawn(&cp, &cli, None).finish(DEADLINE);
        let s = s.finish(DEADLINE);
        let both = format!("{}\n{}", s.describe(), c.describe());
        eprintln!("-q client on {}:\n{both}", tier().name);
        assert!(!s.killed && !c.killed, "a side had to be killed:\n{both}");
        assert!(c.code.is_some_and(|c| c != 0), "a -q client on iWARP fails:\n{both}");
        if ours_client {
            assert!(c.stderr.contains("connect error"), "{both}");
        } else {
            assert!(c.stderr.contains("rdma_establish: Invalid argument"), "{both}");
        }
        assert!(!c.stdout.contains("ping data:"), "no ping went through:\n{both}");
    }
    rping_sides(false, true, 20110, 10, 4096, (&["-q"], &[]));
    rping_sides(true, false, 20109, 10, 4096, (&["-q"], &[]));
}

/// `-P`: our persistent server serves rdma-core's clients one after the
/// other (and two at once), and keeps listening.
#[test]
fn rping_persistent_server_serves_several_clients() {
    require_cm!();
    let Some(theirs) = oracle("rping") else { return };
    let (ours, ip) = (common::rverbs_bin(), ip());
    let mut s = Proc::spawn(&ours, &strings(&["rping", "-s", "-P", "-a", &ip, "-p", "20111", "-S", "1024"]), None);
    wait_cm_listening(20111, &mut s);
    let cli = strings(&["-c", "-a", &ip, "-p", "20111", "-C", "5", "-S", "1024", "-V"]);
    for _ in 0..2 {
        let c = Proc::spawn(&theirs, &cli, None).finish(DEADLINE);
        assert_eq!(c.code, Some(0), "{}", c.describe());
    }
    let mut two: Vec<Proc> = (0..2).map(|_| Proc::spawn(&theirs, &cli, None)).collect();
    for c in &mut two {
        let c = c.finish(DEADLINE);
        assert_eq!(c.code, Some(0), "{}", c.describe());
    }
    assert!(!s.exited(), "the persistent server ended: {}", s.finish(Duration::ZERO).describe());
    let s = s.finish(Duration::ZERO);
    assert_eq!(s.stderr.matches("server DISCONNECT EVENT...").count(), 4, "{}", s.describe());
}

// ---- ucmatose's flow: many RC connections on one event channel ----

/// One connection of the ucmatose-like flows.
struct Node {
    id: CmId,
    qp: Option<QueuePair>,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    mr: MemoryRegion,
    pd: rverbs::ProtectionDomain,
    connected: bool,
    ah: Option<rverbs::AddressHandle>,
    remote: Option<(u32, u32)>,
}

/// `init_node` of cmatose.c / udaddy.c: a PD, CQs, a QP attached to `id`
/// (INIT; UD: RTS), a region of `size` (+ GRH for UD), `count` receives.
fn init_node(id: &CmId, qp_type: QpType, count: u32, size: usize) -> Node {
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cqe = if qp_type == QpType::Ud { count * 2 } else { count };
    let send_cq = ctx.create_cq(cqe).unwrap();
    let recv_cq = ctx.create_cq(cqe).unwrap();
    let mut init = QpInitAttr::new(qp_type, &send_cq);
    init.recv_cq = &recv_cq;
    init.cap = QpCap { max_send_wr: count, max_recv_wr: count, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    init.sq_sig_all = qp_type == QpType::Rc;
    let mut qp = pd.create_qp(&init).unwrap();
    let grh = if qp_type == QpType::Ud { rverbs::GRH_LEN } else { 0 };
    let mr = pd.alloc_mr((size + grh) * count as usize, AccessFlags::LOCAL_WRITE).unwrap();
    id.attach_qp(&qp).unwrap();
    for i in 0..count as usize {
        post_recv(&mut qp, &mr, i as u64, i * (size + grh), (size + grh) as u32);
    }
    Node { id: id.clone(), qp: Some(qp), send_cq, recv_cq, mr, pd, connected: false, ah: None, remote: None }
}

fn poll_ok(cq: &mut CompletionQueue, n: usize) -> Vec<Wc> {
    let wcs = common::poll_n(cq, n);
    assert!(wcs.iter().all(|w| w.status == WcStatus::SUCCESS), "{wcs:?}");
    wcs
}

/// `count` SENDs of `size` bytes on `node` (UD: with immediate data = our
/// QPN, to the peer's AH).
fn post_sends(node: &mut Node, count: u32, size: u32, signaled: bool) {
    let qp = node.qp.as_mut().unwrap();
    let qpn = qp.qp_num();
    for _ in 0..count {
        let sge = [node.mr.sge(0, size).unwrap()];
        let mut wr = SendWr::send(1, &sge);
        if signaled {
            wr = wr.signaled();
        }
        if let (Some(ah), Some((rqpn, rqkey))) = (&node.ah, node.remote) {
            wr = wr.imm(qpn).to(ah.ud_dest(rqpn, rqkey));
        }
        qp.post_send(&[wr]).unwrap();
    }
}

/// How a ucmatose exchange ended early: a connection dropped (what each
/// side saw). On siw that can be its MPA race ([`retry_mpa_race`]).
type Flow = Result<(), String>;

/// The data phase's poll: `n` completions from `cq`, reading `ch` while
/// the CQ is empty. A `DISCONNECTED` read then moves its id's QP to ERR
/// (as librdmacm does), so what a dropped connection leaves posted comes
/// back as `WR_FLUSH_ERR` instead of never (siw processes nothing posted
/// to a QP in ERROR: docs/SIW.md): any status but SUCCESS is an `Err`
/// naming it and the events read. `events` collects the kinds read (the
/// disconnect phase counts them).
fn poll_data(
    cq: &mut CompletionQueue,
    n: usize,
    ch: &EventChannel,
    events: &mut Vec<EventKind>,
) -> Result<Vec<Wc>, String> {
    let mut out = Vec::with_capacity(n);
    let start = Instant::now();
    while out.len() < n {
        // One at a time: an `Err` takes exactly one completion.
        let mut wc = [Wc::default()];
        if cq.poll(&mut wc) == 1 {
            if wc[0].status != WcStatus::SUCCESS {
                let seen: Vec<String> = events.iter().map(|k| k.to_string()).collect();
                return Err(format!(
                    "{:?} after {} of {n} completions; CM events read: {seen:?}",
                    wc[0].status,
                    out.len()
                ));
            }
            out.push(wc[0]);
        } else if let Some(ev) = ch.get_event_timeout(Duration::ZERO).unwrap() {
            events.push(ev.kind());
        } else {
            let waited = start.elapsed() < Duration::from_secs(120);
            assert!(waited, "only {} of {n} completions after 120 s: {out:?}\n{}", out.len(), common::stall::report());
            std::thread::yield_now();
        }
    }
    Ok(out)
}

/// The CM event `ev` where the flow expected another: the text a dropped
/// connection's `Err` carries, in cmatose's words for error events
/// (`RDMA_CM_EVENT_CONNECT_ERROR, error: -22`).
fn unexpected(who: &str, ev: &cm::Event) -> String {
    format!("{who}: event: {}, error: {}", ev.kind(), ev.status())
}

/// Waits on `ch` for the DISCONNECTED of `conns` connections, less those
/// read while the data phase polled (`events`); `answer`: disconnect each
/// in reply, as cmatose's event handler does. Another event is a drop.
fn disconnects(ch: &EventChannel, conns: usize, events: &[EventKind], who: &str, answer: bool) -> Flow {
    let mut left = conns - events.iter().filter(|k| **k == EventKind::Disconnected).count();
    while left > 0 {
        let ev = ch.get_event_timeout(DEADLINE).unwrap().expect("DISCONNECTED");
        match ev.kind() {
            EventKind::Disconnected => {
                if answer {
                    ev.id().disconnect().unwrap_or(());
                }
                left -= 1;
            }
            EventKind::TimewaitExit => {}
            _ => return Err(unexpected(who, &ev)),
        }
    }
    Ok(())
}

/// ucmatose's server: one listener, `conns` connections accepted on one
/// channel, `count` messages out on each, `count` in, then disconnect.
/// Says on `listening` when it listens (on iWARP a request that comes
/// earlier is refused): `rdma_listen` on an address has made the device's
/// listener (siw's TCP socket) when it returns. A connection that drops
/// (an event other than the flow's, a flushed request) ends it with `Err`.
fn ucmatose_server(port: u16, conns: usize, count: u32, size: u32, listening: mpsc::Sender<()>) -> Flow {
    let ch = EventChannel::new().unwrap();
    let listen = ch.create_id(PortSpace::Tcp).unwrap();
    listen.bind_addr(at(port)).unwrap();
    listen.listen(0).unwrap();
    listening.send(()).unwrap();
    let mut nodes: Vec<Node> = Vec::new();
    while nodes.iter().filter(|n| n.connected).count() < conns {
        let ev = ch.get_event_timeout(DEADLINE).unwrap().expect("a CM event");
        match ev.kind() {
            EventKind::ConnectRequest => {
                assert!(ev.listen_id().unwrap().same_as(&listen));
                let node = init_node(ev.id(), QpType::Rc, count, size as usize);
                node.id.accept(&ConnParam::default()).unwrap();
                nodes.push(node);
            }
            EventKind::Established => {
                nodes.iter_mut().find(|n| n.id.same_as(ev.id())).expect("a node's id").connected = true;
            }
            _ => return Err(unexpected("ucmatose server, connecting", &ev)),
        }
    }
    for n in &mut nodes {
        post_sends(n, count, size, true);
    }
    let mut events = Vec::new();
    for n in &mut nodes {
        poll_data(&mut n.send_cq, count as usize, &ch, &mut events)
            .map_err(|e| format!("ucmatose server, sends: {e}"))?;
    }
    for n in &mut nodes {
        let wcs = poll_data(&mut n.recv_cq, count as usize, &ch, &mut events)
            .map_err(|e| format!("ucmatose server, receives: {e}"))?;
        assert!(wcs.iter().all(|w| w.byte_len == size), "{wcs:?}");
    }
    for n in &nodes {
        n.id.disconnect().unwrap();
    }
    disconnects(&ch, conns, &events, "ucmatose server, disconnecting", false)
}

/// ucmatose's client: `conns` ids on one channel resolving and connecting
/// at once, `count` messages in on each, `count` replies out, then the
/// server's disconnect. A connection that drops ends it with `Err`.
fn ucmatose_client(port: u16, conns: usize, count: u32, size: u32) -> Flow {
    let ch = EventChannel::new().unwrap();
    let ids: Vec<CmId> = (0..conns).map(|_| ch.create_id(PortSpace::Tcp).unwrap()).collect();
    for id in &ids {
        id.resolve_addr(None, at(port), Duration::from_secs(2)).unwrap();
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut established = 0;
    while established < conns {
        let ev = ch.get_event_timeout(DEADLINE).unwrap().expect("a CM event");
        match ev.kind() {
            EventKind::AddrResolved => ev.id().resolve_route(Duration::from_secs(2)).unwrap(),
            EventKind::RouteResolved => {
                let node = init_node(ev.id(), QpType::Rc, count, size as usize);
                // cmatose.c: responder resources 1, initiator depth 1, 5 retries, no RNR retry.
                let p = ConnParam {
                    responder_resources: 1,
                    initiator_depth: 1,
                    retry_count: 5,
                    rnr_retry_count: 0,
                    ..ConnParam::default()
                };
                node.id.connect(&p).unwrap();
                nodes.push(node);
            }
            EventKind::Established => {
                nodes.iter_mut().find(|n| n.id.same_as(ev.id())).unwrap().connected = true;
                established += 1;
            }
            _ => return Err(unexpected("ucmatose client, connecting", &ev)),
        }
    }
    let mut events = Vec::new();
    for n in &mut nodes {
        let wcs = poll_data(&mut n.recv_cq, count as usize, &ch, &mut events)
            .map_err(|e| format!("ucmatose client, receives: {e}"))?;
        assert!(wcs.iter().all(|w| w.byte_len == size), "{wcs:?}");
    }
    for n in &mut nodes {
        post_sends(n, count, size, true);
    }
    // The server disconnects once it has every reply.
    disconnects(&ch, conns, &events, "ucmatose client, waiting for the disconnect", true)?;
    for n in &mut nodes {
        // The replies were sent (sq_sig_all): each completed once, or was
        // flushed by the disconnect.
        let wcs = common::poll_n(&mut n.send_cq, count as usize);
        assert!(wcs.iter().all(|w| matches!(w.status, WcStatus::SUCCESS | WcStatus::WR_FLUSH_ERR)), "{wcs:?}");
    }
    Ok(())
}

/// Runs `exchange` on `ports.0`. When it ends with a dropped connection
/// whose initiator saw `RDMA_CM_EVENT_CONNECT_ERROR, error: -22` on siw,
/// that is siw's MPA race (docs/SIW.md: a responder that sends as soon as
/// it is ESTABLISHED, as ucmatose's server does): it says so and runs the
/// exchange once more on `ports.1`. Any other drop, on any device, or a
/// second one fails the test with what both sides saw.
fn retry_mpa_race(ports: (u16, u16), exchange: impl Fn(u16) -> Flow) {
    let Err(why) = exchange(ports.0) else { return };
    let race = iwarp() && why.contains("RDMA_CM_EVENT_CONNECT_ERROR, error: -22");
    assert!(race, "a connection dropped:\n{why}");
    // Straight to stderr, past libtest's capture of a passing test's
    // output: the tier's log shows every retry.
    let notice = format!("siw's MPA race dropped a connection (docs/SIW.md); once more on port {}:\n{why}\n", ports.1);
    std::io::Write::write_all(&mut std::io::stderr(), notice.as_bytes()).unwrap();
    if let Err(again) = exchange(ports.1) {
        panic!("a connection dropped again:\n{again}\n--- the first time ---\n{why}");
    }
}

/// Our server and our client in one process, `conns` connections.
fn ucmatose_ours_both(port: u16, conns: usize) -> Flow {
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || ucmatose_server(port, conns, 10, 100, tx));
    // The server listens before the client resolves (or the first request is rejected).
    rx.recv_timeout(T).expect("the server listens");
    let client = ucmatose_client(port, conns, 10, 100);
    // A client that failed has dropped its ids: the server reads their
    // DISCONNECTED and ends too.
    let server = server.join().unwrap();
    match (server, client) {
        (Ok(()), Ok(())) => Ok(()),
        (s, c) => Err(format!("our server: {s:?}\nour client: {c:?}")),
    }
}

#[test]
fn ucmatose_four_connections_to_one_listener_ours_both_sides() {
    require_cm!();
    retry_mpa_race((20201, 20211), |port| ucmatose_ours_both(port, 4));
}

/// The next event on `ch`, which must be `kind`.
fn next_event(ch: &EventChannel, kind: EventKind) -> cm::Event {
    let ev = ch.get_event_timeout(T).unwrap().unwrap_or_else(|| panic!("no {kind} in {T:?}"));
    assert_eq!(ev.kind(), kind, "{:?}", ev.error());
    ev
}

/// The stalled ucmatose server's case, made on purpose: the peer leaves
/// (disconnects, or destroys its id) in our data phase; on siw that takes
/// our QP to ERROR (siw flushes the receives it holds then), and sends are
/// posted after that, before the DISCONNECTED is read: siw neither
/// processes nor flushes them (without the event read the poll stalls,
/// checked). The data phase's poll reads the DISCONNECTED, whose move to
/// ERR makes them `WR_FLUSH_ERR`: every send completes once. On rxe the
/// test reads the DISCONNECTED first (without it 6.1's QP stays in RTS and
/// its receives never flush), so the sends go to a QP in ERR.
fn sends_posted_as_the_peer_leaves(port: u16, destroy: bool) {
    require_cm!();
    let sch = EventChannel::new().unwrap();
    let listen = sch.create_id(PortSpace::Tcp).unwrap();
    listen.bind_addr(at(port)).unwrap();
    listen.listen(0).unwrap();
    let cch = EventChannel::new().unwrap();
    let cid = cch.create_id(PortSpace::Tcp).unwrap();
    cid.resolve_addr(None, at(port), Duration::from_secs(2)).unwrap();
    next_event(&cch, EventKind::AddrResolved);
    cid.resolve_route(Duration::from_secs(2)).unwrap();
    next_event(&cch, EventKind::RouteResolved);
    let client = init_node(&cid, QpType::Rc, 10, 100);
    cid.connect(&ConnParam::default()).unwrap();
    let req = next_event(&sch, EventKind::ConnectRequest);
    let mut server = init_node(req.id(), QpType::Rc, 10, 100);
    server.id.accept(&ConnParam::default()).unwrap();
    next_event(&cch, EventKind::Established);
    next_event(&sch, EventKind::Established);
    if destroy {
        drop(client);
        cid.destroy().unwrap();
    } else {
        cid.disconnect().unwrap();
    }
    if !iwarp() {
        // Without it 6.1's QP stays in RTS: the receives never flush.
        next_event(&sch, EventKind::Disconnected);
    }
    let wcs = common::poll_n(&mut server.recv_cq, 10);
    assert!(wcs.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR), "{wcs:?}");
    post_sends(&mut server, 10, 100, true);
    let mut events = Vec::new();
    let why = poll_data(&mut server.send_cq, 10, &sch, &mut events).expect_err("sends to a peer that left");
    assert!(why.starts_with("WR_FLUSH_ERR after 0 of 10 completions"), "{why}");
    if iwarp() {
        assert_eq!(events, [EventKind::Disconnected], "siw flushes them only after the DISCONNECTED: {why}");
    }
    let wcs = common::poll_n(&mut server.send_cq, 9);
    assert!(wcs.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR), "{wcs:?}");
    common::assert_no_more(&mut server.send_cq);
}

#[test]
fn sends_posted_as_the_peer_disconnects_complete_once() {
    sends_posted_as_the_peer_leaves(20204, false);
}

#[test]
fn sends_posted_as_the_peer_destroys_its_id_complete_once() {
    sends_posted_as_the_peer_leaves(20205, true);
}

fn ucmatose_args(server: bool, port: u16) -> Vec<String> {
    let p = port.to_string();
    strings(&[if server { "-b" } else { "-s" }, &ip(), "-p", &p, "-c", "4", "-C", "10", "-S", "100"])
}

#[test]
fn ucmatose_ours_server_rdma_core_client() {
    require_cm!();
    let Some(theirs) = oracle("ucmatose") else { return };
    retry_mpa_race((20202, 20212), |port| {
        let (tx, rx) = mpsc::channel();
        let server = std::thread::spawn(move || ucmatose_server(port, 4, 10, 100, tx));
        rx.recv_timeout(T).expect("the server listens");
        // A client whose connect failed waits for the others' disconnect:
        // our server, ending on the drop, drops them.
        let c = Proc::spawn(&theirs, &ucmatose_args(false, port), None).finish(DEADLINE);
        let done = c.stdout.contains("data transfers complete") && c.stdout.contains("return status 0");
        match server.join().unwrap() {
            Ok(()) if c.code == Some(0) && done => Ok(()),
            s => Err(format!("our server: {s:?}\n{}", c.describe())),
        }
    });
}

#[test]
fn ucmatose_rdma_core_server_ours_client() {
    require_cm!();
    let Some(theirs) = oracle("ucmatose") else { return };
    retry_mpa_race((20203, 20213), |port| {
        let mut s = Proc::spawn(&theirs, &ucmatose_args(true, port), None);
        wait_cm_listening(port, &mut s);
        let client = ucmatose_client(port, 4, 10, 100);
        // After a drop their server waits on a CQ that siw never completes.
        let s = s.finish(if client.is_ok() { DEADLINE } else { Duration::from_secs(10) });
        let done = s.stdout.contains("data transfers complete") && s.stdout.contains("disconnected");
        match client {
            Ok(()) if s.code == Some(0) && done => Ok(()),
            c => Err(format!("our client: {c:?}\n{}", s.describe())),
        }
    });
}

// ---- udaddy's flow: UD over the CM (SIDR) ----

/// udaddy's port: not an option of udaddy (its `-p` is the port space).
const UDADDY_PORT: u16 = 7174;

/// udaddy's server: `conns` UD requests accepted with our QPN; `count`
/// messages in on each; replies through an AH made from the first
/// completion and its GRH, to the QPN in its immediate data. Says on
/// `listening` when it listens.
fn udaddy_server(conns: usize, count: u32, size: u32, listening: mpsc::Sender<()>) {
    let ch = EventChannel::new().unwrap();
    let listen = ch.create_id(PortSpace::Udp).unwrap();
    listen.bind_addr(at(UDADDY_PORT)).unwrap();
    listen.listen(0).unwrap();
    listening.send(()).unwrap();
    let mut nodes: Vec<Node> = Vec::new();
    while nodes.len() < conns {
        let ev = ch.get_event_timeout(DEADLINE).unwrap().expect("a CM event");
        assert_eq!(ev.kind(), EventKind::ConnectRequest, "{:?}", ev.error());
        let mut node = init_node(ev.id(), QpType::Ud, count, size as usize);
        node.id.accept(&ConnParam::default()).unwrap();
        node.connected = true;
        nodes.push(node);
    }
    for n in &mut nodes {
        let wcs = poll_ok(&mut n.recv_cq, count as usize);
        let wc = wcs[0];
        assert!(wc.wc_flags.contains(rverbs::WcFlags::WITH_IMM | rverbs::WcFlags::GRH), "{wc:?}");
        assert_eq!(wc.byte_len, size + rverbs::GRH_LEN as u32);
        let mut grh = [0u8; rverbs::GRH_LEN];
        n.mr.read_at(wc.wr_id as usize * (size as usize + rverbs::GRH_LEN), &mut grh).unwrap();
        let ctx = n.id.context().unwrap();
        let attr = rverbs::AhAttr::from_wc(&ctx, n.id.port_num().unwrap(), &wc, &grh).unwrap();
        n.ah = Some(n.pd.create_ah(&attr).unwrap());
        let qkey = n.qp.as_ref().unwrap().query(QpAttrMask::QKEY).unwrap().qkey;
        assert_eq!(qkey, cm::UDP_QKEY);
        n.remote = Some((wc.imm_data, qkey));
    }
    for n in &mut nodes {
        post_sends(n, count, size, true);
        poll_ok(&mut n.send_cq, count as usize);
    }
}

/// udaddy's client: `conns` UD ids resolving and connecting (SIDR) on one
/// channel; ESTABLISHED gives the peer's QPN, Q_Key and address; `count`
/// messages out (immediate data = our QPN), `count` replies in.
fn udaddy_client(conns: usize, count: u32, size: u32) {
    let ch = EventChannel::new().unwrap();
    let ids: Vec<CmId> = (0..conns).map(|_| ch.create_id(PortSpace::Udp).unwrap()).collect();
    for id in &ids {
        id.resolve_addr(None, at(UDADDY_PORT), Duration::from_secs(2)).unwrap();
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut connected = 0;
    while connected < conns {
        let ev = ch.get_event_timeout(DEADLINE).unwrap().expect("a CM event");
        match ev.kind() {
            EventKind::AddrResolved => ev.id().resolve_route(Duration::from_secs(2)).unwrap(),
            EventKind::RouteResolved => {
                let node = init_node(ev.id(), QpType::Ud, count, size as usize);
                node.id.connect(&ConnParam::default()).unwrap();
                nodes.push(node);
            }
            EventKind::Established => {
                let ud = *ev.ud_param().expect("a UD peer");
                assert_eq!(ud.qkey, cm::UDP_QKEY);
                let n = nodes.iter_mut().find(|n| n.id.same_as(ev.id())).unwrap();
                n.ah = Some(n.pd.create_ah(&ud.ah_attr).unwrap());
                n.remote = Some((ud.qp_num, ud.qkey));
                n.connected = true;
                connected += 1;
            }
            k => panic!("udaddy client: {k}: {:?}", ev.error()),
        }
    }
    for n in &mut nodes {
        post_sends(n, count, size, false);
    }
    for n in &mut nodes {
        let wcs = poll_ok(&mut n.recv_cq, count as usize);
        assert!(wcs.iter().all(|w| w.byte_len == size + rverbs::GRH_LEN as u32), "{wcs:?}");
    }
}

/// On an iWARP device (siw0), which has no UD: checks that it refuses
/// udaddy's flow, prints `n/a on siw0: ...` and returns true. A UDP
/// port-space id resolves to the device, but the UD QP is refused with
/// `EOPNOTSUPP`: by rverbs' siw provider before the kernel, and, with
/// rdma-core's udaddy (`theirs`, over libsiw), by the kernel's
/// `siw_create_qp` itself, which udaddy's client prints.
fn ud_not_applicable(theirs: Option<&str>) -> bool {
    if !iwarp() {
        return false;
    }
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Udp).unwrap();
    id.resolve_addr(None, at(UDADDY_PORT), Duration::from_secs(2)).unwrap();
    let ev = ch.get_event_timeout(T).unwrap().expect("ADDR_RESOLVED (hang detector)");
    assert_eq!(ev.kind(), EventKind::AddrResolved, "{:?}", ev.error());
    let ctx = id.context().expect("a resolved id has a device");
    assert_eq!(ctx.device().name(), tier().name, "the UDP id resolved to another device");
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(4).unwrap();
    let mut init = QpInitAttr::new(QpType::Ud, &cq);
    init.cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let e = pd.create_qp(&init).map(|_| ()).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EOPNOTSUPP), "{e}");
    assert!(e.to_string().contains("RC QPs only"), "{e}");
    if let Some(theirs) = theirs {
        let c = Proc::spawn(theirs, &strings(&["-s", &ip()]), None).finish(DEADLINE);
        assert!(!c.killed && c.code != Some(0), "udaddy's client on {}: {}", tier().name, c.describe());
        let refused = "udaddy: unable to create QP: Operation not supported";
        assert!(c.stderr.contains(refused) || c.stdout.contains(refused), "{}", c.describe());
    }
    let dev = common::first_device().unwrap();
    common::not_applicable(&dev, "udaddy is UD over the CM (SIDR); iWARP has no UD: a UD QP is refused (EOPNOTSUPP)");
    true
}

#[test]
fn udaddy_ours_both_sides() {
    require_cm!();
    if ud_not_applicable(None) {
        return;
    }
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || udaddy_server(2, 10, 100, tx));
    rx.recv_timeout(T).expect("the server listens");
    udaddy_client(2, 10, 100);
    server.join().unwrap();
}

#[test]
fn udaddy_ours_server_rdma_core_client() {
    require_cm!();
    let Some(theirs) = oracle("udaddy") else { return };
    if ud_not_applicable(Some(&theirs)) {
        return;
    }
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || udaddy_server(1, 10, 100, tx));
    rx.recv_timeout(T).expect("the server listens");
    let c = Proc::spawn(&theirs, &strings(&["-s", &ip()]), None).finish(DEADLINE);
    assert_eq!(c.code, Some(0), "{}", c.describe());
    assert!(c.stdout.contains("data transfers complete") && c.stdout.contains("return status 0"), "{}", c.describe());
    server.join().unwrap();
}

#[test]
fn udaddy_rdma_core_server_ours_client() {
    require_cm!();
    let Some(theirs) = oracle("udaddy") else { return };
    if ud_not_applicable(Some(&theirs)) {
        return;
    }
    let mut s = Proc::spawn(&theirs, &strings(&["-b", &ip()]), None);
    wait_cm_listening(UDADDY_PORT, &mut s);
    udaddy_client(1, 10, 100);
    let s = s.finish(DEADLINE);
    assert_eq!(s.code, Some(0), "{}", s.describe());
    assert!(s.stdout.contains("data transfers complete"), "{}", s.describe());
}
