//! N RDMA CM connections to one listener, the scale bench's `connections`
//! section (`cargo xtask bench --only scale`, issue #35). It speaks
//! rdma-core's `ucmatose` protocol (librdmacm/examples/cmatose.c), so
//! either side can be ucmatose:
//!
//! * each connection has a PD, a send CQ and a receive CQ of
//!   `max(M, 1)` entries, an RC QP signalling every send, and (M > 0) an
//!   S-byte region with M receives posted before CONNECT / ACCEPT; no
//!   private data; the client asks for responder resources 1, initiator
//!   depth 1, retry count 5;
//! * once every connection is ESTABLISHED the server SENDs M messages on
//!   each, the client receives them and SENDs M back;
//! * the server then disconnects every connection and waits for each
//!   DISCONNECTED; the client answers each DISCONNECTED with its own
//!   disconnect.
//!
//! ```text
//! scale_connections server PORT N M S LABEL       # the async listener (tokio)
//! scale_connections client ADDR PORT N M S LABEL  # N async clients at once, one channel
//! scale_connections drive LABEL N PORT OUT SERVER_CMD CLIENT_CMD
//! scale_connections syscalls LABEL N SRV_FILE CLI_FILE  # two `strace -c` totals
//! scale_connections instructions LABEL N SRV_LOG CLI_LOG  # two callgrind totals
//! ```
//!
//! `server` and `client` print one result line each (`SCALE connections
//! listener|client rverbs:PEER N …`): the listener's span from the first
//! CONNECT_REQUEST to the last ESTABLISHED (`conn_ns`), from its first
//! disconnect to the last DISCONNECTED (`disc_ns`), and the CM events it
//! handled in those spans (`events`, 3 per connection); the client's span
//! from its start to the last ESTABLISHED.
//!
//! `drive` times a pair of any two programs the same way for both
//! libraries: it starts `SERVER_CMD` (`sh -c`), waits until an RDMA CM id
//! listens on PORT (`rdma resource show cm_id`), runs `CLIENT_CMD`, and
//! prints `SCALE connections wall LABEL N cli_ns=… srv_ns=… rc=… src=…`:
//! the client's wall time and the time from the client's start to the
//! server's exit (the listener's whole span, every event included), with
//! both exit statuses; then every result line the two printed. Their
//! outputs go to `OUT.srv` and `OUT.cli`. (busybox's `date` has no
//! nanoseconds, hence a driver.)

use std::future::Future;
use std::mem::ManuallyDrop;
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use rverbs::asynch::{AsyncCmChannel, AsyncCmId, AsyncConnection, AsyncListener};
use rverbs::cm::{CmId, ConnParam};
use rverbs::{
    AccessFlags, CompletionQueue, Context, CqInitAttr, MemoryRegion, ProtectionDomain, QpCap, QpInitAttr, QpType,
    QueuePair, RecvWr, SendWr,
};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A run that never ends fails instead of hanging the bench: a watchdog
/// thread ends the process, rather than tokio timers (a timer makes the
/// runtime read the clock at every wait, a syscall where the guest's
/// clock has no vDSO, as 6.1's under TCG).
const TIMEOUT: Duration = Duration::from_secs(280);
/// ucmatose's address and route resolution timeout (ms).
const RESOLVE: Duration = Duration::from_millis(2000);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("scale_connections: {e}");
        std::process::exit(1);
    }
}

fn run(args: &[String]) -> Result {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["server", port, n, m, s, label] => {
            let shape = Shape::parse(n, m, s)?;
            let port = port.parse().map_err(|_| format!("port {port:?}: not a number"))?;
            watchdog("the listener");
            on_runtime(serve(port, shape, label.to_string()))
        }
        ["client", addr, port, n, m, s, label] => {
            let shape = Shape::parse(n, m, s)?;
            let ip: IpAddr = addr.parse().map_err(|_| format!("address {addr:?}: not a numeric IP address"))?;
            let port = port.parse().map_err(|_| format!("port {port:?}: not a number"))?;
            watchdog("the clients");
            on_runtime(clients(SocketAddr::new(ip, port), shape, label.to_string()))
        }
        ["drive", label, n, port, out, server, client] => drive(label, n, port, out, server, client),
        ["syscalls", label, n, srv, cli] => {
            totals("syscalls", label, n, [srv, cli], strace_total);
            Ok(())
        }
        ["instructions", label, n, srv, cli] => {
            totals("instructions", label, n, [srv, cli], callgrind_total);
            Ok(())
        }
        _ => Err(format!(
            "usage: scale_connections server PORT N M S LABEL | client ADDR PORT N M S LABEL | \
             drive LABEL N PORT OUT SERVER_CMD CLIENT_CMD | syscalls LABEL N SRV_FILE CLI_FILE | \
             instructions LABEL N SRV_LOG CLI_LOG (got {args:?})"
        )
        .into()),
    }
}

/// Runs `main` on one thread (the listener's events are handled one after
/// the other, as ucmatose's loop does; IO only, no timers: see
/// [`TIMEOUT`]), as a task of its own: a task that the per-connection
/// tasks' ends wake is queued on the thread, whereas waking `block_on`'s
/// own future makes tokio unpark the driver (an eventfd write, then an
/// `epoll_wait` that returns it), two syscalls per connection.
fn on_runtime(main: impl Future<Output = Result> + Send + 'static) -> Result {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
    rt.block_on(async { tokio::spawn(main).await.map_err(|e| format!("the main task: {e}"))? })
}

/// Ends the process (status 1) if it still runs after [`TIMEOUT`].
fn watchdog(what: &'static str) {
    std::thread::spawn(move || {
        std::thread::sleep(TIMEOUT);
        eprintln!("scale_connections: {what} did not finish in {TIMEOUT:?}");
        std::process::exit(1);
    });
}

/// Connections, messages per connection and message size.
#[derive(Debug, Clone, Copy)]
struct Shape {
    n: usize,
    m: usize,
    size: usize,
}

impl Shape {
    fn parse(n: &str, m: &str, s: &str) -> Result<Shape> {
        let num = |what: &str, v: &str| v.parse::<usize>().map_err(|_| format!("{what} {v:?}: not a whole number"));
        let shape = Shape { n: num("N", n)?, m: num("M", m)?, size: num("S", s)? };
        if shape.n == 0 || (shape.m > 0 && shape.size == 0) {
            return Err(format!("N must be at least 1 and S at least 1 when M > 0 (got {shape:?})").into());
        }
        Ok(shape)
    }
}

/// A connection's objects besides its QP and id, as cmatose's node.
struct Node {
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    msg: Option<Message>,
    _pd: ProtectionDomain,
}

/// The message buffer as ucmatose's: `S` bytes of heap memory registered
/// where they are (`malloc`, then `ibv_reg_mr`), freed after the region.
/// [`ProtectionDomain::alloc_mr`] would map pages of its own instead and
/// advise them `MADV_DONTFORK` (rverbs' fork safety), three syscalls more
/// per connection (mmap, madvise, munmap) than ucmatose's region.
struct Message {
    mr: ManuallyDrop<MemoryRegion>,
    /// From `Box::into_raw`; reached only through `mr` while it exists.
    mem: NonNull<[u8]>,
}

// SAFETY: `mem` is a heap allocation that only this value frees, and its
// bytes are reached only through `mr` (atomics, `Send + Sync`), so moving
// the value to another thread moves nothing shared with this one.
unsafe impl Send for Message {}

impl Message {
    fn new(pd: &ProtectionDomain, size: usize) -> Result<Message> {
        let mem = NonNull::from(Box::leak(vec![0u8; size].into_boxed_slice()));
        // SAFETY: `mem` is `size` bytes of this process's heap, written and
        // read only through the region, and freed in `Drop` after it.
        match unsafe { pd.reg_mr(mem.as_ptr().cast(), size, AccessFlags::LOCAL_WRITE) } {
            Ok(mr) => Ok(Message { mr: ManuallyDrop::new(mr), mem }),
            Err(e) => {
                // SAFETY: from `Box::leak` above, and no region holds it.
                drop(unsafe { Box::from_raw(mem.as_ptr()) });
                Err(e.into())
            }
        }
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        // SAFETY: `mr` is dropped here only, and never used after.
        unsafe { ManuallyDrop::drop(&mut self.mr) };
        // SAFETY: from `Box::leak` in `new`; its region is deregistered, so
        // nothing else reaches the memory now.
        drop(unsafe { Box::from_raw(self.mem.as_ptr()) });
    }
}

impl Node {
    /// PD, the two CQs, the QP (attached to `id`, so in INIT), the region
    /// and `m` receives posted. The node is boxed: it lives in a task's
    /// future and then its output, and a pointer moves where its 400 bytes
    /// would be copied (tokio moves a task's future into the task, and its
    /// output out of it).
    fn new(ctx: &Context, id: &CmId, shape: Shape) -> Result<(QueuePair, Box<Node>)> {
        let pd = ctx.alloc_pd()?;
        let cqe = shape.m.max(1) as u32;
        let send_cq = ctx.create_cq_with(&CqInitAttr { cqe, ..Default::default() })?;
        let recv_cq = ctx.create_cq_with(&CqInitAttr { cqe, ..Default::default() })?;
        let mut init = QpInitAttr::new(QpType::Rc, &send_cq);
        init.recv_cq = &recv_cq;
        init.cap = QpCap { max_send_wr: cqe, max_recv_wr: cqe, max_send_sge: 1, max_recv_sge: 1, ..QpCap::default() };
        init.sq_sig_all = true;
        let mut qp = pd.create_qp(&init)?;
        id.attach_qp(&qp)?;
        let msg = if shape.m > 0 { Some(Message::new(&pd, shape.size)?) } else { None };
        if let Some(Message { mr, .. }) = &msg {
            let sge = [mr.sge(0, shape.size as u32)?];
            for i in 0..shape.m {
                qp.post_recv(&[RecvWr::new(i as u64, &sge)])?;
            }
        }
        Ok((qp, Box::new(Node { send_cq, recv_cq, msg, _pd: pd })))
    }

    /// SENDs `m` messages of the region.
    fn send(&self, qp: &mut QueuePair, shape: Shape) -> Result {
        if let Some(Message { mr, .. }) = &self.msg {
            let sge = [mr.sge(0, shape.size as u32)?];
            for i in 0..shape.m {
                qp.post_send(&[SendWr::send(i as u64, &sge).signaled()])?;
            }
        }
        Ok(())
    }

    /// Polls `m` successful completions from the send or the receive CQ,
    /// spinning as ucmatose's `poll_cqs` does: no clock (a read is a
    /// syscall where the guest's clock has no vDSO, as 6.1's under TCG);
    /// the [`watchdog`] ends a peer that stopped.
    fn complete(&mut self, recv: bool, m: usize) -> Result {
        let cq = if recv { &mut self.recv_cq } else { &mut self.send_cq };
        let mut done = 0;
        while done < m {
            if let Some(w) = cq.poll_one() {
                w.ok()?;
                done += 1;
            } else {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }
}

/// The listener: accepts `shape.n` requests (each accept waits for its
/// ESTABLISHED in a task of its own), exchanges the messages, disconnects
/// every connection and waits for each DISCONNECTED.
async fn serve(port: u16, shape: Shape, label: String) -> Result {
    let mut listener = AsyncListener::bind(SocketAddr::new([0, 0, 0, 0].into(), port))?;
    let mut pending = tokio::task::JoinSet::new();
    let mut first = None;
    for _ in 0..shape.n {
        let req = listener.accept().await?;
        first.get_or_insert_with(Instant::now);
        let ctx = req.context()?;
        let (qp, node) = Node::new(&ctx, req.id(), shape)?;
        let accepted = req.accept(qp, &ConnParam::default());
        pending.spawn(async move { accepted.await.map(|c| (c, node)) });
    }
    let mut conns: Vec<(AsyncConnection, Box<Node>)> = Vec::with_capacity(shape.n);
    while let Some(done) = pending.join_next().await {
        conns.push(done.map_err(|e| format!("an accept task: {e}"))??);
    }
    let established = Instant::now();
    for (c, node) in &mut conns {
        node.send(c, shape)?;
    }
    for (_, node) in &mut conns {
        node.complete(false, shape.m)?;
    }
    for (_, node) in &mut conns {
        node.complete(true, shape.m)?;
    }
    let disc = Instant::now();
    for (c, _) in &conns {
        c.disconnect()?;
    }
    let closed = closing(conns, |_| Ok(())).await?;
    let end = Instant::now();
    // Every connection's objects after its last event, as ucmatose's
    // `destroy_nodes`.
    drop(closed);
    let first = first.unwrap_or(established);
    println!(
        "SCALE connections listener rverbs:{label} {} conn_ns={} disc_ns={} events={}",
        shape.n,
        (established - first).as_nanos(),
        (end - disc).as_nanos(),
        3 * shape.n
    );
    Ok(())
}

/// `shape.n` clients at once, as ucmatose's: resolve, connect, receive
/// the server's messages, answer them, then answer its disconnect.
async fn clients(addr: SocketAddr, shape: Shape, label: String) -> Result {
    let start = Instant::now();
    // One event channel for every connection, as ucmatose's.
    let channel = AsyncCmChannel::new()?;
    let mut pending = tokio::task::JoinSet::new();
    for _ in 0..shape.n {
        let channel = channel.clone();
        pending.spawn(async move {
            let id = AsyncCmId::resolve_on(&channel, addr, RESOLVE).await?;
            let ctx = id.context()?;
            let (qp, node) = Node::new(&ctx, id.id(), shape)?;
            let param = ConnParam { responder_resources: 1, initiator_depth: 1, retry_count: 5, ..Default::default() };
            let c = id.connect_qp(qp, &param).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((c, node))
        });
    }
    let mut conns: Vec<(AsyncConnection, Box<Node>)> = Vec::with_capacity(shape.n);
    while let Some(done) = pending.join_next().await {
        conns.push(done.map_err(|e| format!("a connect task: {e}"))??);
    }
    let established = Instant::now();
    for (_, node) in &mut conns {
        node.complete(true, shape.m)?;
    }
    for (c, node) in &mut conns {
        node.send(c, shape)?;
    }
    for (_, node) in &mut conns {
        node.complete(false, shape.m)?;
    }
    // Answering the peer's disconnect may find the id gone to TIMEWAIT
    // already (cmatose ignores the result too).
    let closed = closing(conns, |c| {
        let _ = c.disconnect();
        Ok(())
    })
    .await?;
    drop(closed);
    println!("SCALE connections client {label}:rverbs {} conn_ns={}", shape.n, (established - start).as_nanos());
    Ok(())
}

/// Waits for every connection's DISCONNECTED, each in a task of its own
/// that then runs `answer` (the client's disconnect), and hands the
/// connections back: their objects are destroyed after the last event, as
/// ucmatose's are. Destroying each one at its DISCONNECTED (a QP, two
/// CQs, a region, a PD and an id: a dozen syscalls and rxe's cleanup)
/// would delay the answers to the events read after it, and a peer whose
/// DREQ goes unanswered for long enough resends it.
async fn closing(
    conns: Vec<(AsyncConnection, Box<Node>)>,
    answer: fn(&AsyncConnection) -> Result,
) -> Result<Vec<(AsyncConnection, Box<Node>)>> {
    let mut tasks = tokio::task::JoinSet::new();
    for (mut c, node) in conns {
        tasks.spawn(async move {
            c.disconnected().await?;
            answer(&c)?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((c, node))
        });
    }
    let mut closed = Vec::with_capacity(tasks.len());
    while let Some(done) = tasks.join_next().await {
        closed.push(done.map_err(|e| format!("a disconnect task: {e}"))??);
    }
    Ok(closed)
}

/// `drive`: see the file's docs.
fn drive(label: &str, n: &str, port: &str, out: &str, server: &str, client: &str) -> Result {
    let n: u64 = n.parse().map_err(|_| format!("N {n:?}: not a whole number"))?;
    let sh = |cmd: &str, to: &str| -> Result<Child> {
        let f = std::fs::File::create(to).map_err(|e| format!("creating {to}: {e}"))?;
        let f2 = f.try_clone()?;
        Ok(Command::new("sh").args(["-c", cmd]).stdin(Stdio::null()).stdout(f).stderr(f2).spawn()?)
    };
    let (srv_out, cli_out) = (format!("{out}.srv"), format!("{out}.cli"));
    let mut srv = sh(server, &srv_out)?;
    let listening = wait_cm_listening(port, &mut srv);
    let t0 = Instant::now();
    let (cli_rc, t1) = if listening {
        let rc = sh(client, &cli_out)?.wait()?;
        (code(rc), Instant::now())
    } else {
        let _ = srv.kill();
        std::fs::write(&cli_out, format!("the server never listened on port {port}\n"))?;
        (99, Instant::now())
    };
    let srv_rc = code(srv.wait()?);
    let t2 = Instant::now();
    println!(
        "SCALE connections wall {label} {n} cli_ns={} srv_ns={} rc={cli_rc} src={srv_rc}",
        (t1 - t0).as_nanos(),
        (t2 - t0).as_nanos()
    );
    for f in [&srv_out, &cli_out] {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        text.lines().filter(|l| l.starts_with("SCALE ")).for_each(|l| println!("{l}"));
        if cli_rc != 0 || srv_rc != 0 {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(5)..].iter().for_each(|l| println!("# {f}: {l}"));
        }
    }
    Ok(())
}

/// `syscalls` and `instructions`: the totals `total` reads from the
/// server's and the client's file (`strace -c` summaries, callgrind
/// logs), as `SCALE connections WHAT LABEL N srv=… cli=…` (a side whose
/// file has no total is left out).
fn totals(what: &str, label: &str, n: &str, files: [&str; 2], total: fn(&str) -> Option<u64>) {
    let mut out = format!("SCALE connections {what} {label} {n}");
    for (k, f) in ["srv", "cli"].into_iter().zip(files) {
        match std::fs::read_to_string(f).ok().as_deref().and_then(total) {
            Some(t) => out.push_str(&format!(" {k}={t}")),
            None => println!("# {f}: no {what} total"),
        }
    }
    println!("{out}");
}

/// `100.00    0.610460   138   4412   49 total`: calls is the fourth column.
fn strace_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.split_whitespace().last() == Some("total"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// `==850== Collected : 783,828`: the instructions callgrind counted.
fn callgrind_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains("Collected :"))?;
    line.rsplit(':').next()?.trim().replace(',', "").parse().ok()
}

fn code(s: ExitStatus) -> i32 {
    s.code().unwrap_or(128)
}

/// True once an RDMA CM id listens on `port`; false when the server exits
/// first or nothing listens within a minute.
fn wait_cm_listening(port: &str, server: &mut Child) -> bool {
    let start = Instant::now();
    let (mid, end) = (format!(":{port} "), format!(":{port}"));
    loop {
        let out = Command::new("rdma").args(["resource", "show", "cm_id"]).output();
        let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        if text.lines().any(|l| l.contains("LISTEN") && (l.contains(&mid) || l.trim_end().ends_with(&end))) {
            return true;
        }
        if !matches!(server.try_wait(), Ok(None)) || start.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
