//! Unreliable datagrams: UD QPs have no connection, so after the handshake
//! (which only exchanges endpoints and readies both QPs) each side builds an
//! address handle towards the other. The client sends a datagram; the server
//! answers to the QP number it learnt from the client's endpoint.
//!
//! A UD receive buffer starts with 40 bytes of room for the GRH, which the
//! device fills in; the payload follows.
//!
//! ```text
//! cargo run --example ud_send                # server, on TCP port 18515
//! cargo run --example ud_send -- HOST        # client
//! cargo run --example ud_send -- --loopback  # both, in one process
//! ```

#[path = "util/mod.rs"]
pub(crate) mod util; // `pub(crate)`: tests/examples.rs runs this file too

use std::net::TcpStream;

use rverbs::{AccessFlags, ConnectOptions, Endpoint, QpInitAttr, QpType, RecvWr, SendWr, WcOpcode};
use util::{Result, Role};

/// Room the device writes the Global Route Header into.
const GRH: usize = 40;

fn main() -> Result {
    run(Role::from_args())
}

/// Plays `role` (see the file's docs).
pub fn run(role: Role) -> Result {
    util::run(role, |tcp| side(tcp, "server"), |tcp| side(tcp, "client"))
}

fn side(mut tcp: TcpStream, me: &str) -> Result {
    let ctx = util::open_device()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(16)?;
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq))?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let opts = ConnectOptions::default(); // its qkey is the one both sides use

    qp.to_init(&opts)?;
    qp.post_recv(&[RecvWr::new(1, &[mr.sge(0, (GRH + 256) as u32)?])])?;
    let peer = qp.handshake(&mut tcp, &qp.local_endpoint(Endpoint::random_psn(), &opts)?, &opts)?;
    // Where our datagrams go: an AH towards the peer's GID/LID, and its QPN.
    let ah = pd.create_ah(&peer.ah_attr(&ctx, &opts)?)?;
    let to_peer = ah.ud_dest(peer.qpn, opts.qkey);

    let text = format!("datagram from the {me}");
    mr.write_at(1024, text.as_bytes())?;
    let sgl = [mr.sge(1024, text.len() as u32)?];
    let send = SendWr::send(2, &sgl).to(to_peer).signaled();
    if me == "client" {
        qp.post_send(&[send])?;
    }
    // Two completions each, in either order: our receive and our send.
    for _ in 0..2 {
        let wc = util::next_wc(&mut cq)?.ok()?;
        if wc.opcode == WcOpcode::RECV {
            let mut msg = vec![0u8; wc.byte_len as usize - GRH];
            mr.read_at(GRH, &mut msg)?;
            println!("{me}: from QP {:#x}: \"{}\"", wc.src_qp, String::from_utf8_lossy(&msg));
            if me == "server" {
                qp.post_send(&[send])?; // answer
            }
        }
    }
    util::barrier(&mut tcp)
}
