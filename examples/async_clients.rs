//! Many RDMA CM clients on one event channel, on tokio (feature `tokio`).
//! The clients' ids share one `AsyncCmChannel` (`AsyncCmId::resolve_on`):
//! one fd, one reactor registration and one task that reads every
//! client's CM events and hands each to its id, as librdmacm programs
//! share one `rdma_create_event_channel`. The server's `AsyncListener`
//! keeps the ids it accepts on its own channel the same way. Each client
//! SENDs its name; the server answers, waits until the answer is
//! delivered (its send completion) and disconnects; the client checks the
//! answer and awaits DISCONNECTED. (`async_echo`'s clients each open a
//! channel of their own.)
//!
//! ```text
//! cargo run --features tokio --example async_clients                # server, on RDMA CM port 18515
//! cargo run --features tokio --example async_clients -- HOST        # 8 clients (HOST: an address of the server's RDMA netdev)
//! cargo run --features tokio --example async_clients -- --loopback  # both, in one process
//! ```

// `pub(crate)`: tests/examples.rs runs this file too. Only `Role`, `PORT`,
// `Result`, `TIMEOUT` and `device_ipv4` are used here.
#[allow(dead_code)]
#[path = "util/mod.rs"]
pub(crate) mod util;

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};

use rverbs::asynch::{AsyncCmChannel, AsyncCmId, AsyncConnectRequest, AsyncCq, AsyncListener, TokioReadiness};
use rverbs::cm::{CmId, ConnParam};
use rverbs::{AccessFlags, Context, CqInitAttr, MemoryRegion, QpInitAttr, QpType, QueuePair, RecvWr, SendWr, WcOpcode};
use util::{Result, Role, TIMEOUT};

/// Clients a `--loopback` or client run starts at once.
const CLIENTS: usize = 8;
/// Bytes a message may have.
const MSG: u32 = 64;

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
                // IPv4 address of the RDMA device's netdev.
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

/// `CLIENTS` clients at once against `addr`, their ids on one channel.
async fn clients(addr: SocketAddr) -> Result {
    let channel = AsyncCmChannel::new()?; // rdma_create_event_channel, once
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let channel = channel.clone(); // a handle: the same fd and task
        tasks.spawn(async move { client(&channel, addr, c).await.map_err(|e| format!("client {c}: {e}")) });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| format!("a client task: {e}"))??;
    }
    println!("clients: {CLIENTS} clients on one CM event channel, each answered");
    Ok(())
}

async fn client(channel: &AsyncCmChannel, addr: SocketAddr, c: usize) -> Result {
    // Address and route on the shared channel (the CM picks the device),
    // then a QP there.
    let id = AsyncCmId::resolve_on(channel, addr, TIMEOUT).await?;
    let (qp, mut side) = Side::new(&id.context()?, id.id())?;
    let mut conn = within("ESTABLISHED", id.connect_qp(qp, &ConnParam::default())).await?;
    let name = format!("client {c}");
    side.send(&mut conn, name.as_bytes())?;
    let answer = side.complete(2).await?.ok_or("the server sent no answer")?; // our send, its answer
    if answer != format!("hello, {name}").as_bytes() {
        return Err(format!("unexpected answer {:?}", String::from_utf8_lossy(&answer)).into());
    }
    within("DISCONNECTED", conn.disconnected()).await // the server hangs up
}

/// Accepts clients (`limit` of them, or forever), each answered by a task
/// of its own; returns when the last of `limit` is done.
async fn serve(mut listener: AsyncListener, limit: Option<usize>) -> Result {
    let mut sessions = tokio::task::JoinSet::new();
    for _ in 0..limit.unwrap_or(usize::MAX) {
        let req = listener.accept().await?; // its id stays on the listener's channel
        println!("server: connection request from {:?}", req.peer_addr());
        sessions.spawn(answer(req));
    }
    while let Some(done) = sessions.join_next().await {
        done.map_err(|e| format!("a server task: {e}"))??;
    }
    Ok(())
}

/// The server's side of one client: accept, answer its name, hang up.
async fn answer(req: AsyncConnectRequest) -> Result {
    let (qp, mut side) = Side::new(&req.context()?, req.id())?;
    let mut conn = within("ESTABLISHED", req.accept(qp, &ConnParam::default())).await?;
    let name = side.complete(1).await?.ok_or("no message came")?;
    side.send(&mut conn, format!("hello, {}", String::from_utf8_lossy(&name)).as_bytes())?;
    side.complete(1).await?; // the answer is delivered: hang up
    conn.disconnect()?;
    within("DISCONNECTED", conn.disconnected()).await
}

/// A connection's CQ and region: bytes `0..MSG` receive, `MSG..2*MSG` send.
struct Side {
    cq: AsyncCq<TokioReadiness>,
    mr: MemoryRegion,
}

impl Side {
    /// An RC QP on `ctx` attached to `id` (INIT) with a receive posted,
    /// its CQ on a completion channel of its own.
    fn new(ctx: &Context, id: &CmId) -> Result<(QueuePair, Side)> {
        let pd = ctx.alloc_pd()?;
        let channel = ctx.create_comp_channel()?;
        let cq = ctx.create_cq_with(&CqInitAttr { cqe: 4, channel: Some(&channel), ..Default::default() })?;
        let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
        let mr = pd.alloc_mr(2 * MSG as usize, AccessFlags::LOCAL_WRITE)?;
        id.attach_qp(&qp)?;
        qp.post_recv(&[RecvWr::new(0, &[mr.sge(0, MSG)?])])?;
        Ok((qp, Side { cq: AsyncCq::new(cq)?, mr }))
    }

    /// SENDs `msg` from the send half of the region.
    fn send(&self, qp: &mut QueuePair, msg: &[u8]) -> Result {
        self.mr.write_at(MSG as usize, msg)?;
        let sgl = [self.mr.sge(MSG as usize, msg.len() as u32)?];
        Ok(qp.post_send(&[SendWr::send(1, &sgl).signaled()])?)
    }

    /// Awaits `n` completions, each successful; returns the bytes of the
    /// receive among them.
    async fn complete(&mut self, n: usize) -> Result<Option<Vec<u8>>> {
        let mut got = None;
        for _ in 0..n {
            let wc = within("completion", self.cq.next()).await?.ok()?;
            if wc.opcode == WcOpcode::RECV {
                let mut msg = vec![0u8; wc.byte_len as usize];
                self.mr.read_at(0, &mut msg)?;
                got = Some(msg);
            }
        }
        Ok(got)
    }
}

/// `fut`'s result, or an error after [`TIMEOUT`]: a peer that stops
/// answering fails the example instead of hanging it.
async fn within<T>(what: &str, fut: impl Future<Output = rverbs::Result<T>>) -> Result<T> {
    let r = tokio::time::timeout(TIMEOUT, fut).await.map_err(|_| format!("no {what} within {TIMEOUT:?}"))?;
    Ok(r?)
}
