//! RC connected by the RDMA connection manager, blocking: the client finds
//! the server by IP address (`cm::resolve`: address, then route), the
//! server takes its request (`Listener::get_request`), each side makes its
//! QP on the device the CM chose and posts a receive before connecting
//! (`CmId::attach_qp` puts the QP in INIT), then `connect_qp` / `accept`
//! bring both QPs to RTS. The client's private data rides in the request;
//! the client SENDs a greeting, the server answers, the client disconnects
//! and the server sees it (`wait_disconnected`). No TCP side channel: what
//! `rdma_connect`/`rdma_accept` do for librdmacm users.
//!
//! ```text
//! cargo run --example cm_connect                # server, on RDMA CM port 18515
//! cargo run --example cm_connect -- HOST        # client (HOST: an address of the server's RDMA netdev)
//! cargo run --example cm_connect -- --loopback  # both, in one process
//! ```

// `pub(crate)`: tests/examples.rs runs this file too. Only `Role`, `PORT`,
// `Result`, `TIMEOUT`, `next_wc` and `device_ipv4` are used here.
#[allow(dead_code)]
#[path = "util/mod.rs"]
pub(crate) mod util;

use std::net::{SocketAddr, ToSocketAddrs};

use rverbs::cm::{self, ConnParam, Connection, Listener};
use rverbs::{
    AccessFlags, CompletionQueue, Context, MemoryRegion, QpInitAttr, QpType, QueuePair, RecvWr, SendWr, WcOpcode,
};
use util::{Result, Role, TIMEOUT};
/// What the client says in its connection request.
const HELLO: &[u8] = b"cm_connect client";

fn main() -> Result {
    run(Role::from_args())
}

/// Plays `role` (see the file's docs).
pub fn run(role: Role) -> Result {
    match role {
        Role::Server => server(Listener::bind(SocketAddr::new([0, 0, 0, 0].into(), util::PORT))?),
        Role::Client(host) => {
            client((host.as_str(), util::PORT).to_socket_addrs()?.next().ok_or("no address for the host")?)
        }
        Role::Loopback => {
            // Port 0: the CM picks one; the client connects to the IPv4
            // address of the first RDMA device's netdev.
            let listener = Listener::bind(SocketAddr::new([0, 0, 0, 0].into(), 0))?;
            let port = listener.local_addr().ok_or("the listener has no address")?.port();
            let addr = SocketAddr::new(util::device_ipv4()?, port);
            let server = std::thread::spawn(move || server(listener));
            let c = client(addr);
            let s = server.join().map_err(|_| "the server thread panicked")?;
            c.and(s)
        }
    }
}

/// One side's objects: made on the device the CM resolved to.
struct Side {
    cq: CompletionQueue,
    mr: MemoryRegion,
}

/// A CQ, an RC QP and a registered region (bytes 0..64 receive, 64..128 send) on `ctx`.
fn side_on(ctx: Context) -> Result<(Side, QueuePair)> {
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16)?;
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    Ok((Side { cq, mr }, qp))
}

fn server(listener: Listener) -> Result {
    let req = listener.get_request(Some(TIMEOUT))?; // a client's CONNECT_REQUEST
    let said = req.private_data(); // zero-padded to the transport's size
    let said = &said[..said.iter().position(|&b| b == 0).unwrap_or(said.len())];
    println!("server: request from {:?}: \"{}\"", req.peer_addr(), String::from_utf8_lossy(said));
    let (mut side, mut qp) = side_on(req.context()?)?;
    req.id().attach_qp(&qp)?; // INIT: receives may be posted now
    qp.post_recv(&[RecvWr::new(1, &[side.mr.sge(0, 64)?])])?;
    let mut conn = req.accept(qp, &ConnParam::default(), TIMEOUT)?; // RTR, RTS, ESTABLISHED
    let got = side.exchange(&mut conn, "server", false)?;
    println!("server: received \"{got}\"");
    if !conn.wait_disconnected(TIMEOUT)? {
        return Err("server: the client did not disconnect".into());
    }
    println!("server: the client disconnected");
    Ok(())
}

fn client(addr: SocketAddr) -> Result {
    let id = cm::resolve(addr, TIMEOUT)?; // ADDR_RESOLVED, then ROUTE_RESOLVED
    let (mut side, mut qp) = side_on(id.context()?)?;
    id.attach_qp(&qp)?;
    qp.post_recv(&[RecvWr::new(1, &[side.mr.sge(0, 64)?])])?;
    let param = ConnParam { private_data: HELLO.to_vec(), ..ConnParam::default() };
    let mut conn = id.connect_qp(qp, &param, TIMEOUT)?; // the reply, RTR, RTS, ready-to-use
    println!("client: connected to {addr}");
    let got = side.exchange(&mut conn, "client", true)?;
    println!("client: received \"{got}\"");
    conn.disconnect()?; // the QP goes to ERR; the server gets DISCONNECTED
    Ok(())
}

impl Side {
    /// Sends a greeting (first when `first`, else after the peer's) and
    /// returns the peer's, once both our completions (receive, send) came.
    fn exchange(&mut self, conn: &mut Connection, me: &str, first: bool) -> Result<String> {
        let text = format!("hello from the {me}");
        self.mr.write_at(64, text.as_bytes())?;
        let sgl = [self.mr.sge(64, text.len() as u32)?];
        let send = SendWr::send(2, &sgl).signaled();
        if first {
            conn.qp_mut().post_send(&[send])?;
        }
        // Two completions, in either order: our receive and our send.
        let mut got = None;
        for _ in 0..2 {
            let wc = util::next_wc(&mut self.cq)?.ok()?; // an error status names itself and the work request
            if wc.opcode == WcOpcode::RECV {
                let mut msg = vec![0u8; wc.byte_len as usize];
                self.mr.read_at(0, &mut msg)?;
                got = Some(String::from_utf8_lossy(&msg).into_owned());
                if !first {
                    conn.qp_mut().post_send(&[send])?; // answer
                }
            }
        }
        got.ok_or_else(|| format!("{me}: no message came").into())
    }
}
