//! An RC echo server and its clients on tokio (feature `tokio`). The
//! server serves many clients at once, one task each: every client's CQ
//! waits through the server's one completion channel (one reactor
//! registration for all of them). A client connects its QP over TCP with
//! the endpoint handshake, SENDs messages and awaits each echo; an empty
//! message ends the session.
//!
//! The handshake is `QpControl::handshake`, which blocks: it runs on a
//! blocking thread (`spawn_blocking`) over the TCP stream turned into a
//! `std::net::TcpStream` for the while.
//!
//! ```text
//! cargo run --features tokio --example async_echo                # server, on TCP port 18515
//! cargo run --features tokio --example async_echo -- HOST        # 8 clients
//! cargo run --features tokio --example async_echo -- --loopback  # both, in one process
//! ```

// `pub(crate)`: tests/examples.rs runs this file too. Only `Role`, `PORT`
// and `Result` are used here.
#[allow(dead_code)]
#[path = "util/mod.rs"]
pub(crate) mod util;

use std::time::Duration;

use rverbs::asynch::{AsyncChannel, AsyncCq, TokioReadiness};
use rverbs::{
    AccessFlags, ConnectOptions, Context, CqInitAttr, Endpoint, MemoryRegion, QpCap, QpInitAttr, QpType, QueuePair,
    RecvWr, SendWr, WcOpcode,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
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
            Role::Server => serve(TcpListener::bind(("0.0.0.0", util::PORT)).await?, None).await,
            Role::Client(host) => clients(&host, util::PORT).await,
            Role::Loopback => {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let port = listener.local_addr()?.port();
                let server = tokio::spawn(serve(listener, Some(CLIENTS)));
                let c = clients("127.0.0.1", port).await;
                let s = server.await.map_err(|e| format!("the server task: {e}"))?;
                c.and(s)
            }
        }
    })
}

/// The first RDMA device, opened.
fn open() -> Result<Context> {
    Ok(rverbs::devices()?.into_iter().next().ok_or("no RDMA device")?.open()?)
}

/// Accepts clients (`limit` of them, or forever), each served by a task
/// of its own; returns when the last of `limit` is done.
async fn serve(listener: TcpListener, limit: Option<usize>) -> Result {
    let ctx = open()?;
    // One channel, registered with tokio once; each client's CQ attaches.
    let channel = AsyncChannel::new(ctx.create_comp_channel()?)?;
    let mut sessions = tokio::task::JoinSet::new();
    let mut accepted = 0;
    while limit.map_or(true, |n| accepted < n) {
        let (tcp, peer) = listener.accept().await?;
        accepted += 1;
        println!("server: client {peer} connected");
        let (ctx, channel) = (ctx.clone(), channel.clone());
        sessions.spawn(async move { echo(ctx, channel, tcp).await.map_err(|e| format!("client {peer}: {e}")) });
    }
    while let Some(done) = sessions.join_next().await {
        done.map_err(|e| format!("a session task: {e}"))??;
    }
    Ok(())
}

/// One QP with its CQ on `channel` and a region: bytes `0..MSG` receive,
/// `MSG..2*MSG` send.
struct Side {
    qp: QueuePair,
    cq: AsyncCq<TokioReadiness>,
    mr: MemoryRegion,
}

fn side(ctx: &Context, channel: &AsyncChannel<TokioReadiness>) -> Result<Side> {
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq_with(&CqInitAttr { cqe: 8, channel: Some(channel.channel()), ..Default::default() })?;
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.cap = QpCap { max_send_wr: 2, max_recv_wr: 2, ..QpCap::default() };
    let qp = pd.create_qp(&init)?;
    let mr = pd.alloc_mr(2 * MSG as usize, AccessFlags::LOCAL_WRITE)?;
    Ok(Side { qp, cq: channel.attach(cq)?, mr })
}

impl Side {
    /// RESET → INIT, a receive posted, then the handshake over `tcp` on a
    /// blocking thread.
    async fn connect(&mut self, tcp: TcpStream) -> Result<TcpStream> {
        let opts = ConnectOptions::default();
        self.qp.to_init(&opts)?;
        self.post_recv()?;
        let me = self.qp.local_endpoint(Endpoint::random_psn(), &opts)?;
        let control = self.qp.control().clone();
        let tcp = tcp.into_std()?;
        tcp.set_nonblocking(false)?;
        tcp.set_read_timeout(Some(TIMEOUT))?;
        let (tcp, peer) = tokio::task::spawn_blocking(move || {
            let mut tcp = tcp;
            let peer = control.handshake(&mut tcp, &me, &opts);
            (tcp, peer)
        })
        .await?;
        peer?;
        tcp.set_nonblocking(true)?;
        Ok(TcpStream::from_std(tcp)?)
    }

    fn post_recv(&mut self) -> Result {
        Ok(self.qp.post_recv(&[RecvWr::new(0, &[self.mr.sge(0, MSG)?])])?)
    }

    /// SENDs `msg` from the send half of the region.
    fn send(&mut self, msg: &[u8]) -> Result {
        self.mr.write_at(MSG as usize, msg)?;
        let sgl = [self.mr.sge(MSG as usize, msg.len() as u32)?];
        Ok(self.qp.post_send(&[SendWr::send(1, &sgl).signaled()])?)
    }

    /// Awaits the next receive (send completions pass by) and returns its
    /// bytes, with the receive posted again.
    async fn recv(&mut self) -> Result<Vec<u8>> {
        loop {
            let wc = tokio::time::timeout(TIMEOUT, self.cq.next()).await.map_err(|_| "no completion in 30 s")??;
            let wc = wc.ok()?;
            if wc.opcode == WcOpcode::RECV {
                let mut msg = vec![0u8; wc.byte_len as usize];
                self.mr.read_at(0, &mut msg)?;
                self.post_recv()?;
                return Ok(msg);
            }
        }
    }
}

/// One byte each way over TCP: neither side tears its QP down before the
/// other is done with it.
async fn barrier(tcp: &mut TcpStream) -> Result {
    tcp.write_all(b"B").await?;
    let mut b = [0u8];
    tokio::time::timeout(TIMEOUT, tcp.read_exact(&mut b)).await.map_err(|_| "the peer's barrier byte")??;
    Ok(())
}

/// The server's side of one client: echo every message until an empty one.
async fn echo(ctx: Context, channel: AsyncChannel<TokioReadiness>, tcp: TcpStream) -> Result {
    let mut s = side(&ctx, &channel)?;
    let mut tcp = s.connect(tcp).await?;
    loop {
        let msg = s.recv().await?;
        s.send(&msg)?;
        if msg.is_empty() {
            break;
        }
    }
    barrier(&mut tcp).await
}

/// `CLIENTS` clients at once against `host:port`.
async fn clients(host: &str, port: u16) -> Result {
    let ctx = open()?;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let (ctx, addr) = (ctx.clone(), format!("{host}:{port}"));
        tasks.spawn(async move { client(ctx, &addr, c).await.map_err(|e| format!("client {c}: {e}")) });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| format!("a client task: {e}"))??;
    }
    println!("clients: {CLIENTS} clients, {MESSAGES} messages each, all echoed");
    Ok(())
}

async fn client(ctx: Context, addr: &str, c: usize) -> Result {
    // A channel of its own (a CQ with its channel: `AsyncCq::new` would
    // do the same for a CQ made first).
    let channel = AsyncChannel::new(ctx.create_comp_channel()?)?;
    let mut s = side(&ctx, &channel)?;
    let tcp = tokio::time::timeout(TIMEOUT, TcpStream::connect(addr)).await.map_err(|_| "connect timed out")??;
    let mut tcp = s.connect(tcp).await?;
    for i in 0..MESSAGES {
        let msg = format!("client {c} message {i}");
        s.send(msg.as_bytes())?;
        let back = s.recv().await?;
        if back != msg.as_bytes() {
            return Err(format!("sent {msg:?}, got back {:?}", String::from_utf8_lossy(&back)).into());
        }
    }
    s.send(b"")?;
    s.recv().await?;
    barrier(&mut tcp).await
}
