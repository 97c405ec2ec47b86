//! `Endpoint` and `QueuePair::handshake` against the real kernel (VM tier):
//! two sides in one guest, each with its own context, talking TCP over
//! 127.0.0.1 and RDMA over rxe's loopback; and handshakes against peers that
//! misbehave (garbage, a hang-up mid-message, silence, a failed peer), which
//! must end in clear errors, never a panic or a hang, and leak nothing.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use rverbs::{
    AccessFlags, ConnectOptions, Endpoint, Errno, Gid, MemoryRegion, QpInitAttr, QpState, QpType, RecvWr, RemoteMemory,
    SendFlags, SendOp, SendWr, WcOpcode,
};

/// The stream's read timeout: the handshake's only clock.
const TIMEOUT: Duration = Duration::from_secs(30);

fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn accept(l: TcpListener) -> TcpStream {
    let (s, _) = l.accept().expect("accept");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

/// The final "done" barrier, so neither side tears down under the other.
fn barrier(s: &mut TcpStream) {
    s.write_all(b"d").unwrap();
    let mut b = [0u8];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"d");
}

/// What one side saw: its own endpoint and the peer's.
struct Seen {
    mine: Endpoint,
    peer: Endpoint,
}

const ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE.union(AccessFlags::REMOTE_WRITE);

/// One RC side: a QP in INIT with a receive posted, a handshake with
/// memory, then (`sender`) a WRITE into the peer's memory and a SEND, or
/// (receiver) the SEND's completion and a check of both payloads.
fn rc_side(dev: rverbs::Device, mut tcp: TcpStream, sender: bool) -> Seen {
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(16).unwrap();
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let mr = pd.alloc_mr(8192, ACCESS).unwrap();
    let opts = ConnectOptions::default();
    qp.to_init(&opts).unwrap();
    // Posted before the handshake: the peer may SEND as soon as it returns.
    qp.post_recv(&[RecvWr { wr_id: 1, sgl: &[mr.sge(0, 64).unwrap()] }]).unwrap();
    let mine = qp.local_endpoint(Endpoint::random_psn(), &opts).unwrap().with_memory(&mr);
    let peer = qp.handshake(&mut tcp, &mine, &opts).unwrap();
    assert_eq!(qp.state(), QpState::Rts);
    assert_eq!(qp.query(rverbs::QpAttrMask::STATE).unwrap().qp_state, QpState::Rts);
    if sender {
        mr.write_at(4096, b"written by RDMA WRITE").unwrap();
        mr.write_at(5000, b"sent by SEND").unwrap();
        let target = peer.memory.expect("the peer advertised memory").at(2048, 21).unwrap();
        let (w, s) = ([mr.sge(4096, 21).unwrap()], [mr.sge(5000, 12).unwrap()]);
        qp.post_send(&[
            SendWr { wr_id: 10, op: SendOp::RdmaWrite(target), flags: SendFlags::SIGNALED, sgl: &w, ud: None },
            SendWr { wr_id: 11, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &s, ud: None },
        ])
        .unwrap();
        let wcs = common::poll_n(&mut cq, 2);
        assert!(wcs.iter().all(|w| w.is_success()), "{wcs:?}");
        assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [10, 11]);
    } else {
        let wcs = common::poll_n(&mut cq, 1);
        assert!(wcs[0].is_success(), "{wcs:?}");
        assert_eq!((wcs[0].wr_id, wcs[0].opcode, wcs[0].byte_len), (1, WcOpcode::RECV, 12));
        let mut got = [0u8; 12];
        mr.read_at(0, &mut got).unwrap();
        assert_eq!(&got, b"sent by SEND");
        // RC delivers in order: the WRITE posted before the SEND has landed.
        let mut got = [0u8; 21];
        mr.read_at(2048, &mut got).unwrap();
        assert_eq!(&got, b"written by RDMA WRITE");
    }
    barrier(&mut tcp);
    Seen { mine, peer }
}

#[test]
fn rc_handshake_then_send_and_write() {
    let dev = require_device!();
    let (l, port) = listener();
    let d = dev.clone();
    let server: JoinHandle<Seen> = std::thread::spawn(move || rc_side(d, accept(l), false));
    let client = rc_side(dev, connect(port), true);
    let server = server.join().expect("server side");
    assert_eq!(client.peer, server.mine, "the client got the server's endpoint, memory included");
    assert_eq!(server.peer, client.mine);
    assert!(client.mine.memory.is_some() && !client.mine.gid.is_zero());
    assert_ne!(client.mine.qpn, server.mine.qpn);
}

/// One UD side. The receiver posts before the handshake (from INIT); the
/// sender hands the handshake a QP in RESET and sends through an address
/// handle built from the peer's endpoint.
fn ud_side(dev: rverbs::Device, mut tcp: TcpStream, sender: bool) -> Endpoint {
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(16).unwrap();
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq)).unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let opts = ConnectOptions::default();
    if !sender {
        qp.to_init(&opts).unwrap();
        qp.post_recv(&[RecvWr { wr_id: 1, sgl: &[mr.sge(0, 40 + 64).unwrap()] }]).unwrap();
    }
    assert_eq!(qp.state(), if sender { QpState::Reset } else { QpState::Init });
    let mine = qp.local_endpoint(Endpoint::random_psn(), &opts).unwrap();
    let peer = qp.handshake(&mut tcp, &mine, &opts).unwrap();
    assert_eq!(qp.state(), QpState::Rts);
    assert_eq!(peer.memory, None);
    if sender {
        let ah = pd.create_ah(&peer.ah_attr(&ctx, &opts).unwrap()).unwrap();
        mr.write_at(0, b"datagram").unwrap();
        let sgl = [mr.sge(0, 8).unwrap()];
        let ud = Some(ah.ud_dest(peer.qpn, opts.qkey));
        qp.post_send(&[SendWr { wr_id: 7, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sgl, ud }]).unwrap();
        let wcs = common::poll_n(&mut cq, 1);
        assert!(wcs[0].is_success(), "{wcs:?}");
    } else {
        let wcs = common::poll_n(&mut cq, 1);
        assert!(wcs[0].is_success(), "{wcs:?}");
        assert_eq!(wcs[0].byte_len, 40 + 8, "GRH + payload");
        let mut got = [0u8; 8];
        mr.read_at(40, &mut got).unwrap();
        assert_eq!(&got, b"datagram");
    }
    barrier(&mut tcp);
    peer
}

#[test]
fn ud_handshake_readies_both_sides() {
    let dev = require_device!();
    let (l, port) = listener();
    let d = dev.clone();
    let receiver = std::thread::spawn(move || ud_side(d, accept(l), false));
    let peer_of_sender = ud_side(dev, connect(port), true);
    let peer_of_receiver = receiver.join().expect("receiver side");
    assert_ne!(peer_of_sender.qpn, peer_of_receiver.qpn);
}

/// A fake peer on a fresh port: accepts, reads our 52-byte endpoint, then
/// does `act`; returns what it read after that (our failure byte, say).
fn fake_peer(act: impl FnOnce(&mut TcpStream) + Send + 'static) -> (u16, JoinHandle<Vec<u8>>) {
    let (l, port) = listener();
    let t = std::thread::spawn(move || {
        let mut s = accept(l);
        let mut theirs = [0u8; Endpoint::WIRE_LEN];
        s.read_exact(&mut theirs).expect("the handshake sends its endpoint first");
        Endpoint::from_bytes(&theirs).expect("a valid endpoint");
        act(&mut s);
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        rest
    });
    (port, t)
}

/// A valid endpoint of a QP that does not exist.
fn ghost(gid: Gid) -> Endpoint {
    Endpoint { lid: 0, qpn: 0xabcdef, psn: 0x123456, gid, memory: Some(RemoteMemory { addr: 0x1000, rkey: 1, len: 8 }) }
}

/// Runs our RC side's handshake against `act`, with `read_timeout` on our
/// stream; returns the error, our QP's state afterwards and the bytes the
/// fake peer read after our endpoint.
fn against_with(
    dev: &rverbs::Device,
    read_timeout: Duration,
    act: impl FnOnce(&mut TcpStream) + Send + 'static,
) -> (rverbs::Error, QpState, Vec<u8>) {
    let (port, t) = fake_peer(act);
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(4).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let mr: MemoryRegion = pd.alloc_mr(4096, ACCESS).unwrap();
    let opts = ConnectOptions::default();
    let mine = qp.local_endpoint(1, &opts).unwrap().with_memory(&mr);
    let mut tcp = connect(port);
    tcp.set_read_timeout(Some(read_timeout)).unwrap();
    let e = qp.handshake(&mut tcp, &mine, &opts).expect_err("the handshake must fail");
    let state = qp.query(rverbs::QpAttrMask::STATE).unwrap().qp_state;
    drop(tcp);
    (e, state, t.join().expect("fake peer"))
}

fn against(
    dev: &rverbs::Device,
    act: impl FnOnce(&mut TcpStream) + Send + 'static,
) -> (rverbs::Error, QpState, Vec<u8>) {
    against_with(dev, TIMEOUT, act)
}

fn our_gid(dev: &rverbs::Device) -> Gid {
    let ctx = dev.open().unwrap();
    let idx = ctx.default_sgid_index(1).unwrap();
    ctx.query_gid(1, idx.into()).unwrap().unwrap().gid
}

#[test]
fn misbehaving_peers_give_clear_errors_and_leak_nothing() {
    let dev = require_device!();
    let before = common::resource_counts(dev.name());

    let (e, state, rest) = against(&dev, |s| s.write_all(&[b'?'; 52]).unwrap());
    assert_eq!(e.verb(), "Endpoint::exchange", "{e}");
    assert!(e.message().contains("the peer sent an invalid endpoint: not an rverbs endpoint message"), "{e}");
    assert_eq!(state, QpState::Init, "RESET -> INIT happened, nothing after");
    assert_eq!(rest, [b'X'], "we told the peer we failed");

    // An rdma-core ping-pong peer.
    let (e, _, _) = against(&dev, |s| {
        s.write_all(&Endpoint { memory: None, ..ghost(Gid::default()) }.to_text().unwrap()).unwrap();
    });
    assert!(e.message().contains("rdma-core's ping-pong text"), "{e}");

    let (e, state, _) = against(&dev, |s| {
        s.write_all(&ghost(Gid::default()).to_bytes().unwrap()[..30]).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
    });
    assert!(
        e.message().contains("the peer closed the connection after 30 of the 52 bytes of the peer's endpoint"),
        "{e}"
    );
    assert_eq!(state, QpState::Init);

    // Silence: our read timeout (1 s) fires; the peer stays quiet for longer.
    let (e, _, _) = against_with(&dev, Duration::from_secs(1), |_| std::thread::sleep(Duration::from_secs(3)));
    assert_eq!(e.errno(), Some(Errno::ETIMEDOUT), "{e}");
    assert!(
        e.message()
            .contains("timed out waiting for the peer's endpoint (the stream's read timeout; got 0 of 52 bytes)"),
        "{e}"
    );

    // A peer whose endpoint is fine but whose own transition failed.
    let gid = our_gid(&dev);
    let (e, state, _) = against(&dev, move |s| {
        s.write_all(&ghost(gid).to_bytes().unwrap()).unwrap();
        s.write_all(b"X").unwrap();
    });
    assert_eq!(e.verb(), "QueuePair::handshake", "{e}");
    assert!(e.message().contains("the peer (QP 0xabcdef) failed its side of the handshake"), "{e}");
    assert_eq!(state, QpState::Rts, "our side got to RTS before the barrier");

    // ... or that hangs up instead of sending its ready byte.
    let (e, _, rest) = against(&dev, move |s| {
        s.write_all(&ghost(gid).to_bytes().unwrap()).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
    });
    assert!(e.message().contains("closed the connection instead of sending its ready byte"), "{e}");
    assert_eq!(rest, [b'R'], "we sent our ready byte");

    // A transition that fails on our side: a peer with the zero GID on RoCE.
    let (e, state, rest) = against(&dev, |s| {
        s.write_all(&ghost(Gid::default()).to_bytes().unwrap()).unwrap();
    });
    assert_eq!(e.verb(), "ibv_modify_qp", "{e}");
    assert!(e.message().starts_with("during the handshake, INIT -> RTR towards QP 0xabcdef: "), "{e}");
    assert_eq!(state, QpState::Init);
    assert_eq!(rest, [b'X']);

    common::assert_no_growth(dev.name(), &before);
}

#[test]
fn handshake_refuses_before_sending_anything() {
    let dev = require_device!();
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(4).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let other = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let opts = ConnectOptions::default();
    let (l, port) = listener();
    let t = std::thread::spawn(move || {
        let mut s = accept(l);
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        got
    });
    let mut tcp = connect(port);
    // Someone else's endpoint.
    let e = qp.handshake(&mut tcp, &other.local_endpoint(1, &opts).unwrap(), &opts).unwrap_err();
    assert!(e.message().contains("not this QP's"), "{e}");
    assert_eq!(qp.state(), QpState::Reset);
    // A QP past INIT.
    let me = qp.local_endpoint(1, &opts).unwrap();
    qp.connect(&me, &me, &opts).unwrap();
    let e = qp.handshake(&mut tcp, &me, &opts).unwrap_err();
    assert!(e.message().contains("is in RTS: the handshake starts from RESET or INIT"), "{e}");
    // An out-of-range PSN.
    let e = other.local_endpoint(1 << 24, &opts).unwrap_err();
    assert!(e.message().contains("does not fit in 24 bits"), "{e}");
    drop(tcp);
    assert_eq!(t.join().unwrap(), b"", "nothing was sent");
}
