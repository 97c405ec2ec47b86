//! Two guests joined by a virtual wire (`rverbs-vm run --two-hosts`): the
//! same test runs on both. Each side learns the other's QP over TCP, then
//! B SENDs to A and A RDMA WRITEs into B's region, as RoCE v2 packets
//! between two kernels. rverbs-vm sets `RVERBS_VM_HOST` (`A` or `B`) and
//! `RVERBS_VM_PEER` (the other guest's address).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::{open_device, Side};
use rverbs::{ConnectOptions, RecvWr, SendWr, WcOpcode};

const PORT: u16 = 18600;
const HELLO: &[u8] = b"hello from host B";

/// A listens, B connects (retrying while A's guest is still booting).
fn connect(host: &str, peer: &str) -> TcpStream {
    if host == "A" {
        let l = TcpListener::bind(("0.0.0.0", PORT)).expect("listen");
        return l.accept().expect("accept").0;
    }
    for _ in 0..600 {
        match TcpStream::connect((peer, PORT)) {
            Ok(s) => return s,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(250)),
        }
    }
    panic!("host A ({peer}:{PORT}) never answered");
}

#[test]
fn rc_across_the_wire() {
    let (Ok(host), Ok(peer)) = (std::env::var("RVERBS_VM_HOST"), std::env::var("RVERBS_VM_PEER")) else {
        // Not a two-host run: nothing to talk to (this target is run only
        // with `rverbs-vm run --two-hosts`).
        panic!("RVERBS_VM_HOST/RVERBS_VM_PEER unset: run with `rverbs-vm run --two-hosts --`");
    };
    let ctx = open_device().expect("RVERBS_VM_HOST is set, so there must be a device");
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let mut me = Side::new(&ctx, &pd);
    let psn = if host == "A" { 100 } else { 200 };
    let mut tcp = connect(&host, &peer);
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // A posts its receive before the handshake brings the QPs to RTS.
    let opts = ConnectOptions::default();
    me.qp.to_init(&opts).expect("RESET -> INIT");
    if host == "A" {
        me.qp.post_recv(&[RecvWr::new(1, &[me.mr.sge(0, 256).unwrap()])]).unwrap();
    }
    let them = me.qp.handshake(&mut tcp, &me.endpoint(psn), &opts).expect("handshake");
    assert!(them.gid.to_ipv4().is_some_and(|ip| ip.to_string() == peer), "peer GID {} is not {peer}", them.gid);
    let their_mr = them.memory.expect("the peer's region");
    let mut buf = [0u8; 1];

    let data: Vec<u8> = (0..2000u32).map(|i| (i * 13) as u8).collect();
    if host == "B" {
        me.mr.write_at(0, HELLO).unwrap();
        let sgl = [me.mr.sge(0, HELLO.len() as u32).unwrap()];
        me.qp.post_send(&[SendWr::send(2, &sgl).signaled()]).unwrap();
        assert_eq!(me.poll_one().opcode, WcOpcode::SEND);
        // A writes into our region, then says so.
        tcp.read_exact(&mut buf).unwrap();
        assert_eq!(me.read(data.len()), data, "A's RDMA WRITE did not land");
        println!("host B: got A's {}-byte RDMA WRITE", data.len());
    } else {
        let wc = me.poll_one();
        assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::RECV, HELLO.len() as u32));
        assert_eq!(me.read(HELLO.len()), HELLO);
        me.mr.write_at(0, &data).unwrap();
        let sgl = [me.mr.sge(0, data.len() as u32).unwrap()];
        let target = their_mr.at(0, data.len() as u64).unwrap();
        me.qp.post_send(&[SendWr::write(3, &sgl, target).signaled()]).unwrap();
        assert_eq!(me.poll_one().opcode, WcOpcode::RDMA_WRITE);
        tcp.write_all(b"w").unwrap();
        println!("host A: got B's SEND, wrote {} bytes into B's region", data.len());
    }
}
