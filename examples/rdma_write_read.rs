//! One-sided RDMA: the server offers a region in the handshake and does
//! nothing else; the client RDMA WRITEs into it, READs the bytes back into a
//! region of its own and checks them. The server then finds the client's
//! bytes in its memory without having posted anything.
//!
//! ```text
//! cargo run --example rdma_write_read                # server, on TCP port 18515
//! cargo run --example rdma_write_read -- HOST        # client
//! cargo run --example rdma_write_read -- --loopback  # both, in one process
//! ```

#[path = "util/mod.rs"]
pub(crate) mod util; // `pub(crate)`: tests/examples.rs runs this file too

use std::net::TcpStream;

use rverbs::{AccessFlags, CompletionQueue, ConnectOptions, Endpoint, QpInitAttr, QpType, QueuePair, SendWr};
use util::{Result, Role};

const MESSAGE: &[u8] = b"written by the client, read back by the client";

fn main() -> Result {
    run(Role::from_args())
}

/// Plays `role` (see the file's docs).
pub fn run(role: Role) -> Result {
    util::run(role, server, client)
}

/// A connected RC QP; `access` is what the peer may do to our memory.
fn connect(
    tcp: &mut TcpStream,
    access: AccessFlags,
) -> Result<(CompletionQueue, QueuePair, rverbs::MemoryRegion, Endpoint)> {
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16)?;
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    let mr = pd.alloc_mr(4096, access)?;
    let opts = ConnectOptions::default();
    // Our endpoint carries the region's address, rkey and length.
    let me = qp.local_endpoint(Endpoint::random_psn(), &opts)?.with_memory(&mr);
    let peer = qp.handshake(tcp, &me, &opts)?;
    Ok((cq, qp, mr, peer))
}

fn server(mut tcp: TcpStream) -> Result {
    // The client may write and read this region; the server's CPU and QP
    // take no part in what follows.
    let (_cq, _qp, mr, _) =
        connect(&mut tcp, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ)?;
    util::barrier(&mut tcp)?; // the client is done
    let mut found = vec![0u8; MESSAGE.len()];
    mr.read_at(0, &mut found)?;
    println!("server: my memory now holds \"{}\"", String::from_utf8_lossy(&found));
    assert_eq!(found, MESSAGE);
    Ok(())
}

fn client(mut tcp: TcpStream) -> Result {
    let (mut cq, mut qp, mr, peer) = connect(&mut tcp, AccessFlags::LOCAL_WRITE)?;
    let remote = peer.memory.ok_or("the server offered no memory")?;
    let len = MESSAGE.len() as u32;
    mr.write_at(0, MESSAGE)?;
    let src = [mr.sge(0, len)?];
    let dst = [mr.sge(1024, len)?];
    // WRITE our bytes 0.. to the server's 0.., then READ them back into our
    // 1024..; a QP executes them in order.
    qp.post_send(&[
        SendWr::write(1, &src, remote.at(0, len.into())?).signaled(),
        SendWr::read(2, &dst, remote.at(0, len.into())?).signaled(),
    ])?;
    for _ in 0..2 {
        let wc = util::next_wc(&mut cq)?.ok()?;
        println!("client: work request {} done ({:?})", wc.wr_id, wc.opcode);
    }
    let mut back = vec![0u8; MESSAGE.len()];
    mr.read_at(1024, &mut back)?;
    assert_eq!(back, MESSAGE, "the READ brought back what the WRITE put there");
    println!("client: read back \"{}\"", String::from_utf8_lossy(&back));
    util::barrier(&mut tcp)
}
