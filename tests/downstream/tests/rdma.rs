//! Two RC QPs on one rxe device, connected over its loopback path: a SEND
//! into a posted receive, then an RDMA WRITE into the peer's region.

mod common;

use common::{open_device, Side};
use rverbs::{ConnectOptions, RecvWr, SendWr, WcOpcode};

#[test]
fn rc_send_and_rdma_write() {
    let Some(ctx) = open_device() else { return };
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let (mut a, mut b) = (Side::new(&ctx, &pd), Side::new(&ctx, &pd));
    let opts = ConnectOptions::default();
    a.qp.connect(&a.endpoint(100), &b.endpoint(200), &opts).expect("connect a");
    b.qp.connect(&b.endpoint(200), &a.endpoint(100), &opts).expect("connect b");

    // SEND: A's region into the receive B posted.
    let msg = b"hello over rxe from a downstream crate";
    a.mr.write_at(0, msg).unwrap();
    b.qp.post_recv(&[RecvWr::new(1, &[b.mr.sge(0, 256).unwrap()])]).unwrap();
    let sgl = [a.mr.sge(0, msg.len() as u32).unwrap()];
    a.qp.post_send(&[SendWr::send(2, &sgl).signaled()]).unwrap();
    assert_eq!(a.poll_one().opcode, WcOpcode::SEND);
    let wc = b.poll_one();
    assert_eq!((wc.wr_id, wc.opcode, wc.byte_len), (1, WcOpcode::RECV, msg.len() as u32));
    assert_eq!(b.read(msg.len()), msg);

    // RDMA WRITE: A's bytes land in B's region, B's CPU sees no completion.
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    a.mr.write_at(0, &data).unwrap();
    let sgl = [a.mr.sge(0, data.len() as u32).unwrap()];
    a.qp.post_send(&[SendWr::write(3, &sgl, b.mr.remote(0).unwrap()).signaled()]).unwrap();
    let wc = a.poll_one();
    assert_eq!((wc.wr_id, wc.opcode), (3, WcOpcode::RDMA_WRITE));
    assert_eq!(b.read(data.len()), data);
}
