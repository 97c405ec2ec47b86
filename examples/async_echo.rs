//! An RC echo server and its clients on tokio (feature `tokio`), connected
//! by the RDMA connection manager: the server awaits connection requests
//! (`AsyncListener::accept`) and serves many clients at once, one task
//! each, every client's CQ waiting through the server's one completion
//! channel (one reactor registration for all of them). A client connects
//! by IP address (`AsyncCmId::resolve(addr).await`, then `connect_qp`),
//! SENDs messages and awaits each echo; an empty message ends the session,
//! and the client disconnects.
//!
//! ```text
//! cargo run --features tokio --example async_echo                # server, on RDMA CM port 18515
//! cargo run --features tokio --example async_echo -- HOST        # 8 clients (HOST: an address of the server's RDMA netdev)
//! cargo run --features tokio --example async_echo -- --loopback  # both, in one process
//! ```

// `pub(crate)`: tests/examples.rs runs this file too. Only `Role`, `PORT`,
// `Result` and `device_ipv4` are used here.
#[allow(dead_code)]
#[path = "util/mod.rs"]
pub(crate) mod util;

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use rverbs::asynch::{AsyncChannel, AsyncCmId, AsyncConnection, AsyncCq, AsyncListener, TokioReadiness};
use rverbs::cm::{CmId, ConnParam};
use rverbs::{
    AccessFlags, Context, CqInitAttr, MemoryRegion, QpCap, QpInitAttr, QpType, QueuePair, RecvWr, SendWr, WcOpcode,
};
use util::{Result, Role};

/// Clients a `--loopback` or client run starts at once.
const CLIENTS: usize = 8;
/// Messages each client sends (and gets back).
const MESSAGES: usize = 32;
/// Bytes a message may have.
const MSG: u32 = 64;
/// A peer that stops answering fails instead of hanging.
const TIMEOUT: Duration = Duration::from_secs(30);

fn main() -> Result {
    run(Role::from_args())
}

/// Plays `role` (see the file's docs) on a multi-threaded tokio runtime.
pub fn run(role: Role) -> Result {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        match role {
            Role::Server => serve(AsyncListener::bind(SocketAddr::new([0, 0, 0, 0].into(), util::PORT))?, None).await,
            Role::Client(host) => {
                let addr = (host.as_str(), util::PORT).to_socket_addrs()?.next().ok_or("no address for the host")?;
                clients(addr).await
            }
            Role::Loopback => {
                // Port 0: the CM picks one. The clients connect to the
                // IPv4 address of the first RDMA device's netdev.
                let listener = AsyncListener::bind(SocketAddr::new([0, 0, 0, 0].into(), 0))?;
                let port = listener.local_addr().ok_or("the listener has no address")?.port();
                let addr = SocketAddr::new(util::device_ipv4()?, port);
                let server = tokio::spawn(serve(listener, Some(CLIENTS)));
                let c = clients(addr).await;
                let s = server.await.map_err(|e| format!("the server task: {e}"))?;
                c.and(s)
            }
        }
    })
}

/// Accepts clients (`limit` of them, or forever), each served by a task
/// of its own; returns when the last of `limit` is done.
async fn serve(mut listener: AsyncListener, limit: Option<usize>) -> Result {
    // One completion channel, registered with tokio once, on the device of
    // the first request; each client's CQ on that device attaches to it.
    let mut channel: Option<(Context, AsyncChannel<TokioReadiness>)> = None;
    let mut sessions = tokio::task::JoinSet::new();
    let mut accepted = 0;
    while limit.map_or(true, |n| accepted < n) {
        let req = listener.accept().await?;
        accepted += 1;
        println!("server: connection request from {:?}", req.peer_addr());
        let ctx = req.context()?;
        let ch = match &channel {
            Some((c, ch)) if c.device().name() == ctx.device().name() => ch.clone(),
            _ => {
                let ch = AsyncChannel::new(ctx.create_comp_channel()?)?;
                channel = Some((ctx.clone(), ch.clone()));
                ch
            }
        };
        sessions.spawn(async move {
            let (qp, mut s) = side(req.id(), &ctx, &ch)?;
            let conn = req.accept(qp, &ConnParam::default());
            let conn = tokio::time::timeout(TIMEOUT, conn).await.map_err(|_| "no ESTABLISHED in 30 s")??;
            echo(conn, &mut s).await
        });
    }
    while let Some(done) = sessions.join_next().await {
        done.map_err(|e| format!("a session task: {e}"))??;
    }
    Ok(())
}

/// A connection's CQ (on `channel`) and region: bytes `0..MSG` receive,
/// `MSG..2*MSG` send.
struct Side {
    cq: AsyncCq<TokioReadiness>,
    mr: MemoryRegion,
}

/// A QP on `ctx` attached to `id` (INIT) with a receive posted, and its [`Side`].
fn side(id: &CmId, ctx: &Context, channel: &AsyncChannel<TokioReadiness>) -> Result<(QueuePair, Side)> {
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq_with(&CqInitAttr { cqe: 8, channel: Some(channel.channel()), ..Default::default() })?;
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.cap = QpCap { max_send_wr: 2, max_recv_wr: 2, ..QpCap::default() };
    let mut qp = pd.create_qp(&init)?;
    let mr = pd.alloc_mr(2 * MSG as usize, AccessFlags::LOCAL_WRITE)?;
    id.attach_qp(&qp)?;
    let s = Side { cq: channel.attach(cq)?, mr };
    s.post_recv(&mut qp)?;
    Ok((qp, s))
}

impl Side {
    fn post_recv(&self, qp: &mut QueuePair) -> Result {
        Ok(qp.post_recv(&[RecvWr::new(0, &[self.mr.sge(0, MSG)?])])?)
    }

    /// SENDs `msg` from the send half of the region.
    fn send(&self, qp: &mut QueuePair, msg: &[u8]) -> Result {
        self.mr.write_at(MSG as usize, msg)?;
        let sgl = [self.mr.sge(MSG as usize, msg.len() as u32)?];
        Ok(qp.post_send(&[SendWr::send(1, &sgl).signaled()])?)
    }

    /// Awaits the next receive (send completions pass by) and returns its
    /// bytes, with the receive posted again.
    async fn recv(&mut self, qp: &mut QueuePair) -> Result<Vec<u8>> {
        loop {
            let wc = tokio::time::timeout(TIMEOUT, self.cq.next()).await.map_err(|_| "no completion in 30 s")??;
            let wc = wc.ok()?;
            if wc.opcode == WcOpcode::RECV {
                let mut msg = vec![0u8; wc.byte_len as usize];
                self.mr.read_at(0, &mut msg)?;
                self.post_recv(qp)?;
                return Ok(msg);
            }
        }
    }
}

/// The server's side of one client: echo every message until an empty
/// one, then wait for the client's disconnect.
async fn echo(mut conn: AsyncConnection, s: &mut Side) -> Result {
    loop {
        let msg = s.recv(&mut conn).await?;
        s.send(&mut conn, &msg)?;
        if msg.is_empty() {
            break;
        }
    }
    tokio::time::timeout(TIMEOUT, conn.disconnected()).await.map_err(|_| "no DISCONNECTED in 30 s")??;
    Ok(())
}

/// `CLIENTS` clients at once against `addr`.
async fn clients(addr: SocketAddr) -> Result {
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        tasks.spawn(async move { client(addr, c).await.map_err(|e| format!("client {c}: {e}")) });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| format!("a client task: {e}"))??;
    }
    println!("clients: {CLIENTS} clients, {MESSAGES} messages each, all echoed");
    Ok(())
}

async fn client(addr: SocketAddr, c: usize) -> Result {
    // Address and route (the CM picks the device), then a QP there whose
    // CQ has a channel of its own.
    let id = AsyncCmId::resolve(addr, Duration::from_secs(2)).await?;
    let ctx = id.context()?;
    let channel = AsyncChannel::new(ctx.create_comp_channel()?)?;
    let (qp, mut s) = side(id.id(), &ctx, &channel)?;
    let conn = id.connect_qp(qp, &ConnParam::default());
    let mut conn = tokio::time::timeout(TIMEOUT, conn).await.map_err(|_| "no ESTABLISHED in 30 s")??;
    for i in 0..MESSAGES {
        let msg = format!("client {c} message {i}");
        s.send(&mut conn, msg.as_bytes())?;
        let back = s.recv(&mut conn).await?;
        if back != msg.as_bytes() {
            return Err(format!("sent {msg:?}, got back {:?}", String::from_utf8_lossy(&back)).into());
        }
    }
    s.send(&mut conn, b"")?;
    s.recv(&mut conn).await?;
    conn.disconnect()?;
    tokio::time::timeout(TIMEOUT, conn.disconnected()).await.map_err(|_| "no DISCONNECTED in 30 s")??;
    Ok(())
}
