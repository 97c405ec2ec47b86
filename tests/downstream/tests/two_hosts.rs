//! Two guests joined by a virtual wire (`rverbs-vm run --two-hosts`): the
//! same test runs on both. Each side learns the other's QP over TCP, then
//! B SENDs to A and A RDMA WRITEs into B's region, as RoCE v2 packets
//! between two kernels. rverbs-vm sets `RVERBS_VM_HOST` (`A` or `B`) and
//! `RVERBS_VM_PEER` (the other guest's address).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use common::{open_device, Side};
use rverbs::{ConnectOptions, Gid, RecvWr, RemoteAddr, RemoteEndpoint, SendFlags, SendOp, SendWr, WcOpcode};

const PORT: u16 = 18600;
const HELLO: &[u8] = b"hello from host B";

/// What one side tells the other: GID, QPN, PSN, region address and rkey.
fn encode(ep: &RemoteEndpoint, remote: RemoteAddr) -> [u8; 36] {
    let mut b = [0u8; 36];
    b[..16].copy_from_slice(&ep.gid.0);
    b[16..20].copy_from_slice(&ep.qpn.to_be_bytes());
    b[20..24].copy_from_slice(&ep.psn.to_be_bytes());
    b[24..32].copy_from_slice(&remote.addr.to_be_bytes());
    b[32..36].copy_from_slice(&remote.rkey.to_be_bytes());
    b
}

fn decode(b: &[u8; 36]) -> (RemoteEndpoint, RemoteAddr) {
    let u32_at = |o: usize| u32::from_be_bytes(b[o..o + 4].try_into().unwrap());
    let gid = Gid(b[..16].try_into().unwrap());
    let addr = u64::from_be_bytes(b[24..32].try_into().unwrap());
    (RemoteEndpoint { lid: 0, qpn: u32_at(16), psn: u32_at(20), gid }, RemoteAddr { addr, rkey: u32_at(32) })
}

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
    tcp.write_all(&encode(&me.endpoint(&ctx, psn), me.mr.remote(0))).unwrap();
    let mut buf = [0u8; 36];
    tcp.read_exact(&mut buf).unwrap();
    let (them, their_mr) = decode(&buf);
    assert!(them.gid.to_ipv4().is_some_and(|ip| ip.to_string() == peer), "peer GID {} is not {peer}", them.gid);
    me.qp.connect(&them, psn, &ConnectOptions::default()).expect("connect");
    if host == "A" {
        me.qp.post_recv(&[RecvWr { wr_id: 1, sgl: &[me.mr.sge(0, 256).unwrap()] }]).unwrap();
    }
    tcp.write_all(b"r").unwrap(); // connected, and A's receive is posted
    tcp.read_exact(&mut buf[..1]).unwrap();

    let data: Vec<u8> = (0..2000u32).map(|i| (i * 13) as u8).collect();
    if host == "B" {
        me.mr.write_at(0, HELLO).unwrap();
        let sgl = [me.mr.sge(0, HELLO.len() as u32).unwrap()];
        me.qp
            .post_send(&[SendWr { wr_id: 2, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sgl, ud: None }])
            .unwrap();
        assert_eq!(me.poll_one().opcode, WcOpcode::SEND);
        // A writes into our region, then says so.
        tcp.read_exact(&mut buf[..1]).unwrap();
        assert_eq!(me.read(data.len()), data, "A's RDMA WRITE did not land");
        println!("host B: got A's {}-byte RDMA WRITE", data.len());
    } else {
        let wc = me.poll_one();
        assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::RECV, HELLO.len() as u32));
        assert_eq!(me.read(HELLO.len()), HELLO);
        me.mr.write_at(0, &data).unwrap();
        let sgl = [me.mr.sge(0, data.len() as u32).unwrap()];
        let op = SendOp::RdmaWrite(their_mr);
        me.qp.post_send(&[SendWr { wr_id: 3, op, flags: SendFlags::SIGNALED, sgl: &sgl, ud: None }]).unwrap();
        assert_eq!(me.poll_one().opcode, WcOpcode::RDMA_WRITE);
        tcp.write_all(b"w").unwrap();
        println!("host A: got B's SEND, wrote {} bytes into B's region", data.len());
    }
}
