//! RC send and receive between two processes. Each side posts a receive,
//! connects its QP to the peer's with the endpoint handshake over TCP; the
//! client SENDs a greeting, the server answers with one of its own. Both
//! sleep on a completion channel until their completions arrive
//! (`CompletionQueue::wait_any`, through `util::next_wc`).
//!
//! ```text
//! cargo run --example rc_send_recv                # server, on TCP port 18515
//! cargo run --example rc_send_recv -- HOST        # client
//! cargo run --example rc_send_recv -- --loopback  # both, in one process
//! ```

#[path = "util/mod.rs"]
pub(crate) mod util; // `pub(crate)`: tests/examples.rs runs this file too

use std::net::TcpStream;

use rverbs::{AccessFlags, ConnectOptions, CqInitAttr, Endpoint, QpInitAttr, QpType, RecvWr, SendWr, WcOpcode};
use util::{Result, Role};

fn main() -> Result {
    run(Role::from_args())
}

/// Plays `role` (see the file's docs).
pub fn run(role: Role) -> Result {
    util::run(role, |tcp| side(tcp, "server"), |tcp| side(tcp, "client"))
}

fn side(mut tcp: TcpStream, me: &str) -> Result {
    // The first RDMA device; a CQ that reports to a completion channel.
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let channel = ctx.create_comp_channel()?;
    let mut cq = ctx.create_cq_with(&CqInitAttr { cqe: 16, channel: Some(&channel), ..Default::default() })?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    // One registered region: bytes 0..64 receive, 64..128 send.
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;

    // RESET -> INIT first, so that our receive is posted before the peer
    // can send; the handshake then does INIT -> RTR -> RTS.
    let opts = ConnectOptions::default();
    qp.to_init(&opts)?;
    qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, 64)?])])?;
    let me_ep = qp.local_endpoint(Endpoint::random_psn(), &opts)?;
    let peer = qp.handshake(&mut tcp, &me_ep, &opts)?;
    println!("{me}: connected to {peer}");

    let text = format!("hello from the {me}");
    mr.write_at(64, text.as_bytes())?;
    let sgl = [mr.sge(64, text.len() as u32)?];
    let send = SendWr::send(2, &sgl).signaled();
    if me == "client" {
        qp.post_send(&[send])?; // the client speaks first
    }
    // Two completions each, in either order: our receive and our send.
    for _ in 0..2 {
        let wc = util::next_wc(&mut cq)?.ok()?; // an error status names itself and the work request
        if wc.opcode == WcOpcode::RECV {
            let mut msg = vec![0u8; wc.byte_len as usize];
            mr.read_at(0, &mut msg)?;
            println!("{me}: received \"{}\"", String::from_utf8_lossy(&msg));
            if me == "server" {
                qp.post_send(&[send])?; // answer
            }
        }
    }
    // Neither side destroys its QP while the other may still need it.
    util::barrier(&mut tcp)
}
