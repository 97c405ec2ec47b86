//! `rverbs rping`: rdma-core's `rping` (librdmacm's example) on
//! `rverbs::cm`, with its flags, its wire format and its output, so either
//! side can be rdma-core's program.
//!
//! The wire, as `rping.c` has it (`shared/reference/rdmacm.md` §A.10):
//!
//! * RC over the CM in `RDMA_PS_TCP`, port 7174 by default; the server
//!   listens with backlog 3, accepts with librdmacm's defaults; the client
//!   connects with responder resources 1, initiator depth 1, 7 retries, 7
//!   RNR retries;
//! * a QP of 16 sends and 2 receives (one SGE each) on one 32-entry CQ;
//!   each side keeps one 16-byte receive posted and reposts it after each
//!   completion;
//! * messages are `struct rping_rdma_info { __be64 buf; __be32 rkey;
//!   __be32 size; }`, 16 bytes, big-endian; any other length is "bogus";
//! * one ping: the client fills its `start_buf` with `"rdma-ping-%d: "`
//!   and the letters A..z from a rotating start, advertises it; the server
//!   RDMA READs it, sends a go-ahead; the client advertises its `rdma_buf`;
//!   the server RDMA WRITEs what it read (up to and including its NUL),
//!   sends a go-ahead; the client compares (`-V`) and prints (`-v`);
//! * after `-C` pings the client disconnects; the server's loop ends with
//!   `wait for RDMA_READ_ADV state 10` and both print `... DISCONNECT EVENT...`.
//!
//! One thread per connection where rping has three (main, `cq_thread`,
//! `cm_thread`, handing over through a semaphore): a wait is one `poll()`
//! on the CQ's completion channel and the connection's CM channel
//! together; whichever fd is readable is read (`ibv_get_cq_event`, or
//! `rdma_get_cm_event` and what rping's `cm_thread` does with the event).
//! A peer's DISCONNECTED (or a CM error) thus ends a wait for a
//! completion at once, and a peer that dies ends the run too: its kernel
//! closes the connection, which queues DISCONNECTED here (and siw's kernel
//! flushes the QP). The data path reads no clock: a `poll()` that saw
//! nothing for a second (the kernel counts it) only polls the CQ again.
//!
//! Where rverbs differs on purpose: every wait is bounded (a peer silent
//! for 30 s ends the run with an error; 30 s for each set-up CM event,
//! 10 s for DISCONNECTED at the end); a failure ends with one
//! `rverbs rping: ...` line and exit status 1; a server whose `-S` is
//! smaller than the client's caps the READ at its buffer instead of
//! overrunning it.

use std::ffi::c_int;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use rverbs::cm::{CmId, ConnParam, Event, EventChannel, EventKind, PortSpace};
use rverbs::{
    AccessFlags, CompletionChannel, CompletionQueue, CqInitAttr, MemoryRegion, ProtectionDomain, QpCap, QpInitAttr,
    QpType, QueuePair, RecvWr, RemoteAddr, SendWr, Wc, WcOpcode, WcStatus,
};
use rverbs_providers::sys::event::wait_readable_either;

use super::getopt::{Getopt, Opt, Parsed};
use super::{CliResult, Fail};

const USAGE: &str = "\
rverbs rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]
rverbs rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
\t-c\t\tclient side
\t-I\t\tSource address to bind to for client.
\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0
\t-v\t\tdisplay ping data to stdout
\t-V\t\tvalidate ping data
\t-d\t\tdebug printfs
\t-S size \tping data size
\t-C count\tping count times
\t-a addr\t\taddress
\t-p port\t\tport
\t-P\t\tpersistent server mode allowing multiple connections
\t-q\t\tuse self-created, self-modified QP
";

/// `RPING_MIN_BUFSIZE`: `sizeof("2147483647") + sizeof("rdma-ping-%d: ")`.
const MIN_SIZE: u32 = 26;
/// `RPING_BUFSIZE - 1`.
const MAX_SIZE: u32 = 64 * 1024 - 1;
/// `RPING_SQ_DEPTH`.
const SQ_DEPTH: u32 = 16;
/// `sizeof(struct rping_rdma_info)`.
const INFO_LEN: usize = 16;
/// The CM's resolve timeouts rping uses.
const RESOLVE_MS: u64 = 2000;
/// How long a set-up step may wait for its CM event (rping waits forever).
const PEER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the client waits for its DISCONNECTED after disconnecting.
const END_TIMEOUT: Duration = Duration::from_secs(10);
/// A wait's `poll()` that saw no event for this long polls the CQ again
/// and re-arms it: a completion whose event never came is found then, not
/// never. No clock is read (the kernel counts), and a wait whose event
/// comes in time costs nothing more.
const IDLE_CHECK_MS: c_int = 1000;
/// Idle re-checks in a row after which a wait gives up: the peer did
/// nothing for 30 s.
const IDLE_LIMIT: u32 = 30;
/// The same once the QP was flushed, when the CM's DISCONNECTED is due.
const FLUSHED_IDLE_LIMIT: u32 = 10;

/// rping's `enum test_state`, numbered as its messages print them (the
/// CM states are waited for as events here, so some are never entered).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum State {
    Idle = 1,
    ConnectRequest,
    AddrResolved,
    RouteResolved,
    Connected,
    RdmaReadAdv,
    RdmaReadComplete,
    RdmaWriteAdv,
    RdmaWriteComplete,
    Disconnected,
    Error,
}

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Opts {
    server: bool,
    addr: Option<IpAddr>,
    src: Option<IpAddr>,
    port: u16,
    count: u32,
    size: u32,
    verbose: bool,
    validate: bool,
    debug: bool,
    persistent: bool,
    self_qp: bool,
}

const SPECS: &[Opt<char>] = &[
    Opt::new(Some('a'), "addr", true, 'a'),
    Opt::new(Some('I'), "source", true, 'I'),
    Opt::new(Some('P'), "persistent", false, 'P'),
    Opt::new(Some('p'), "port", true, 'p'),
    Opt::new(Some('C'), "count", true, 'C'),
    Opt::new(Some('S'), "size", true, 'S'),
    Opt::new(Some('s'), "server", false, 's'),
    Opt::new(Some('c'), "client", false, 'c'),
    Opt::new(Some('v'), "verbose", false, 'v'),
    Opt::new(Some('V'), "validate", false, 'V'),
    Opt::new(Some('d'), "debug", false, 'd'),
    Opt::new(Some('q'), "self-qp", false, 'q'),
    Opt::new(Some('h'), "help", false, 'h'),
    // In rping's getopt string but handled nowhere: the usage.
    Opt::new(Some('t'), "tos", true, 't'),
];

const GETOPT: Getopt = Getopt { prefix: "", hint: "(try 'rverbs rping -h')", operands: false };

/// `getaddrinfo(dst)`: a literal address or a host name.
fn resolve_host(s: &str) -> Result<IpAddr, String> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(ip);
    }
    (s, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| format!("getaddrinfo failed - invalid hostname or IP address '{s}'"))
}

/// C `atoi`: leading blanks, an optional sign, digits; 0 when there are none.
fn atoi(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let digits: String = t.chars().take_while(char::is_ascii_digit).take(18).collect();
    let v = digits.parse::<i64>().unwrap_or(0);
    if neg {
        -v
    } else {
        v
    }
}

/// `Ok(None)`: print the usage (rping does so for `-h`, `-t` and unknown
/// options).
fn parse_args(args: &[String]) -> Result<Option<Opts>, String> {
    let Parsed { opts: found, .. } = GETOPT.parse(args, SPECS)?;
    let mut o = Opts {
        server: false,
        addr: None,
        src: None,
        port: 7174,
        count: 0,
        size: 64,
        verbose: false,
        validate: false,
        debug: false,
        persistent: false,
        self_qp: false,
    };
    let mut role = None;
    for (k, v) in found {
        let v = v.unwrap_or_default();
        match k {
            'a' => o.addr = Some(resolve_host(&v)?),
            'I' => o.src = Some(resolve_host(&v)?),
            'P' => o.persistent = true,
            'p' => o.port = atoi(&v) as u16,
            'C' => {
                let c = atoi(&v);
                if c < 0 {
                    return Err(format!("Invalid count {c}"));
                }
                o.count = u32::try_from(c).unwrap_or(u32::MAX);
            }
            'S' => {
                let s = atoi(&v);
                if s < i64::from(MIN_SIZE) || s > i64::from(MAX_SIZE) {
                    return Err(format!("Invalid size {s} (valid range is {MIN_SIZE} to {})", MAX_SIZE + 1));
                }
                o.size = s as u32;
            }
            's' => role = Some(true),
            'c' => role = Some(false),
            'v' => o.verbose = true,
            'V' => o.validate = true,
            'd' => o.debug = true,
            'q' => o.self_qp = true,
            _ => return Ok(None),
        }
    }
    match role {
        None => Ok(None),
        Some(server) => {
            o.server = server;
            if !server && o.addr.is_none() {
                return Err("the client needs the server's address (-a addr)".into());
            }
            Ok(Some(o))
        }
    }
}

/// `rverbs rping ...`.
pub fn cmd_rping(args: &[String]) -> CliResult<()> {
    let result = parse_args(args).and_then(|o| match o {
        None => {
            print!("{USAGE}");
            let _ = io::stdout().flush();
            Err(String::new())
        }
        Some(o) if o.server => run_server(&o),
        Some(o) => run_client(&o),
    });
    match result {
        Ok(()) => Ok(()),
        Err(m) if m.is_empty() => Err(Fail::Quiet),
        Err(m) => {
            let _ = io::stdout().flush();
            eprintln!("rverbs rping: {}", m.replace('\n', " "));
            Err(Fail::Quiet)
        }
    }
}

macro_rules! debug_log {
    ($o:expr, $($t:tt)*) => {
        if $o.debug {
            println!($($t)*);
        }
    };
}

/// One connection's verbs objects (rping's `rping_cb`). Field order is the
/// drop order: QP, then the regions, the CQ, the channel, the PD.
struct Conn {
    qp: QueuePair,
    recv_mr: MemoryRegion,
    send_mr: MemoryRegion,
    rdma_mr: MemoryRegion,
    start_mr: Option<MemoryRegion>,
    cq: CompletionQueue,
    channel: CompletionChannel,
    _pd: ProtectionDomain,
    /// The connection's CM events (the id's channel).
    cm: EventChannel,
    /// The CQ is armed and no event was read since.
    armed: bool,
    /// A completion came flushed: the QP is in ERR, the connection over.
    flushed: bool,
    size: u32,
    server: bool,
    state: State,
    remote: (u64, u32, u32),
    failure: Option<String>,
    debug: bool,
    /// The ping buffer built or read per ping, allocated once.
    scratch: Vec<u8>,
}

/// `rping_setup_qp` and `rping_setup_buffers` on the id's device.
fn setup(id: &CmId, o: &Opts) -> Result<Conn, String> {
    let ctx = id.context().map_err(|e| format!("setup_qp failed: {e}"))?;
    let pd = ctx.alloc_pd().map_err(|e| format!("ibv_alloc_pd failed: {e}"))?;
    let channel = ctx.create_comp_channel().map_err(|e| format!("ibv_create_comp_channel failed: {e}"))?;
    let mut cq = ctx
        .create_cq_with(&CqInitAttr { cqe: SQ_DEPTH * 2, channel: Some(&channel), ..Default::default() })
        .map_err(|e| format!("ibv_create_cq failed: {e}"))?;
    cq.req_notify(false).map_err(|e| format!("ibv_req_notify_cq failed: {e}"))?;
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.cap = QpCap { max_send_wr: SQ_DEPTH, max_recv_wr: 2, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = pd.create_qp(&init).map_err(|e| format!("rdma_create_qp: {e}"))?;
    if o.self_qp {
        // rping -q: INIT by hand (P_Key index 0, the id's port, no access).
        let attr = rverbs::QpAttr {
            qp_state: rverbs::QpState::Init,
            pkey_index: 0,
            port_num: id.port_num().unwrap_or(1),
            ..Default::default()
        };
        use rverbs::QpAttrMask as M;
        qp.modify(&attr, M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS)
            .map_err(|e| format!("ibv_modify_qp: {e}"))?;
    } else {
        id.attach_qp(&qp).map_err(|e| format!("rdma_create_qp: {e}"))?;
    }
    debug_log!(o, "created pd, channel, cq and qp {:#x}", qp.qp_num());
    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    let reg = |len: usize, access: AccessFlags, what: &str| {
        pd.alloc_mr(len, access).map_err(|e| format!("{what} reg_mr failed: {e}"))
    };
    let recv_mr = reg(INFO_LEN, AccessFlags::LOCAL_WRITE, "recv_buf")?;
    let send_mr = reg(INFO_LEN, AccessFlags::empty(), "send_buf")?;
    let rdma_mr = reg(o.size as usize, rw, "rdma_buf")?;
    let start_mr = if o.server { None } else { Some(reg(o.size as usize, rw, "start_buf")?) };
    debug_log!(o, "allocated & registered buffers...");
    Ok(Conn {
        qp,
        recv_mr,
        send_mr,
        rdma_mr,
        start_mr,
        cq,
        channel,
        _pd: pd,
        cm: id.channel(),
        armed: true,
        flushed: false,
        size: o.size,
        server: o.server,
        state: State::Idle,
        remote: (0, 0, 0),
        failure: None,
        debug: o.debug,
        scratch: Vec::with_capacity(o.size as usize),
    })
}

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
const RDMA_WRID: u64 = 3;

impl Conn {
    fn post_recv(&mut self) -> Result<(), String> {
        let sge = [self.recv_mr.sge(0, INFO_LEN as u32).map_err(|e| e.to_string())?];
        self.qp.post_recv(&[RecvWr::new(RECV_WRID, &sge)]).map_err(|e| format!("post recv error: {e}"))
    }

    /// `rping_format_send` and the post: advertises `buf` (ours) or, for
    /// the server's go-ahead, the never-filled zeros.
    fn send_info(&mut self, info: Option<(u64, u32)>) -> Result<(), String> {
        if let Some((addr, rkey)) = info {
            let m = encode_ad(addr, rkey, self.size);
            self.send_mr.write_at(0, &m).map_err(|e| e.to_string())?;
            if self.debug {
                println!("RDMA addr {addr:x} rkey {rkey:x} len {}", self.size);
            }
        }
        let sge = [self.send_mr.sge(0, INFO_LEN as u32).map_err(|e| e.to_string())?];
        self.qp.post_send(&[SendWr::send(SEND_WRID, &sge).signaled()]).map_err(|e| format!("post send error {e}"))
    }

    fn rdma(&mut self, read: bool, len: u32) -> Result<(), String> {
        let (addr, rkey, _) = self.remote;
        let sge = [self.rdma_mr.sge(0, len).map_err(|e| e.to_string())?];
        let remote = RemoteAddr { addr, rkey };
        let wr = if read { SendWr::read(RDMA_WRID, &sge, remote) } else { SendWr::write(RDMA_WRID, &sge, remote) };
        self.qp.post_send(&[wr.signaled()]).map_err(|e| format!("post send error {e}"))
    }

    /// One completion, as `rping_cq_event_handler` treats it; `true` when
    /// rping would post its semaphore.
    fn handle(&mut self, wc: &Wc) -> Result<bool, String> {
        if wc.status != WcStatus::SUCCESS {
            if wc.status == WcStatus::WR_FLUSH_ERR {
                self.flushed = true;
                return Ok(false);
            }
            eprintln!("cq completion failed status {}", wc.status.0);
            self.state = State::Error;
            return Err(format!("cq completion failed: {wc:?}"));
        }
        match wc.opcode {
            WcOpcode::SEND => {
                if self.debug {
                    println!("send completion");
                }
                Ok(false)
            }
            WcOpcode::RDMA_WRITE => {
                self.state = State::RdmaWriteComplete;
                Ok(true)
            }
            WcOpcode::RDMA_READ => {
                self.state = State::RdmaReadComplete;
                Ok(true)
            }
            WcOpcode::RECV => {
                if let Err(e) = check_ad_len(wc.byte_len) {
                    eprintln!("Received bogus data, size {}", wc.byte_len);
                    self.state = State::Error;
                    return Err(e);
                }
                if self.server {
                    let mut m = [0u8; INFO_LEN];
                    self.recv_mr.read_at(0, &mut m).map_err(|e| e.to_string())?;
                    let (addr, rkey, len) = decode_ad(&m);
                    self.remote = (addr, rkey, len);
                    if self.debug {
                        println!("Received rkey {rkey:x} addr {addr:x} len {len} from peer");
                    }
                    self.state = if self.state <= State::Connected || self.state == State::RdmaWriteComplete {
                        State::RdmaReadAdv
                    } else {
                        State::RdmaWriteAdv
                    };
                } else {
                    self.state =
                        if self.state == State::RdmaReadAdv { State::RdmaWriteAdv } else { State::RdmaWriteComplete };
                }
                self.post_recv()?;
                Ok(true)
            }
            o => {
                self.state = State::Error;
                Err(format!("unknown completion opcode {o:?}"))
            }
        }
    }

    /// rping's `sem_wait`: until one completion or CM event that would
    /// post the semaphore. Completions first: the CQ is polled, armed
    /// (`ibv_req_notify_cq`) and polled again before each sleep, and a
    /// completion event read goes back to polling before any CM event is
    /// taken, so a completion the peer caused before it disconnected is
    /// never lost to the disconnect. The sleep is one `poll()` on both
    /// channels; after [`IDLE_CHECK_MS`] without an event it polls the CQ
    /// again, and after [`IDLE_LIMIT`] such checks in a row it gives up.
    fn wait(&mut self) {
        let mut wc = [Wc::default()];
        let mut idle = 0;
        loop {
            if self.cq.poll(&mut wc) == 1 {
                if idle > 0 {
                    self.found_idle();
                    idle = 0;
                }
                match self.handle(&wc[0]) {
                    Ok(true) => return,
                    Ok(false) => continue,
                    Err(m) => return self.fail(m),
                }
            }
            if !self.armed {
                if let Err(e) = self.cq.req_notify(false) {
                    return self.fail(format!("ibv_req_notify_cq failed: {e}"));
                }
                self.armed = true;
                continue; // poll again: a completion before the arm raised no event
            }
            let (cq_ready, cm_ready) = match wait_readable(self.channel.as_fd(), self.cm.as_fd(), IDLE_CHECK_MS) {
                Ok(r) => r,
                Err(e) => return self.fail(format!("poll of the completion and CM channels failed: {e}")),
            };
            if cq_ready || cm_ready {
                idle = 0;
            }
            if cq_ready {
                match self.channel.try_get_cq_event() {
                    Ok(Some(_)) => {
                        self.cq.ack_events(1);
                        self.armed = false;
                    }
                    Ok(None) => {}
                    Err(e) => return self.fail(format!("ibv_get_cq_event failed: {e}")),
                }
            } else if cm_ready {
                if self.cm_events() {
                    return;
                }
            } else {
                // Idle: poll and re-arm before sleeping again. Flushed,
                // the QP is in ERR and the CM's DISCONNECTED (or an error)
                // is due; else the peer's next message.
                idle += 1;
                let limit = if self.flushed { FLUSHED_IDLE_LIMIT } else { IDLE_LIMIT };
                if idle >= limit {
                    return self.fail(if self.flushed {
                        format!("the QP was flushed and no DISCONNECTED came within {limit} s")
                    } else {
                        format!("the peer did nothing for {limit} s")
                    });
                }
                self.armed = false;
            }
        }
    }

    /// A completion polled after an idle `poll()`: its event, if it is
    /// queued by now, is taken; if none is, the kernel raised none for an
    /// armed CQ, which is said (the idle re-check is what found it).
    fn found_idle(&mut self) {
        match self.channel.try_get_cq_event() {
            Ok(Some(_)) => {
                self.cq.ack_events(1);
                self.armed = false;
            }
            _ => {
                eprintln!("rverbs rping: a completion without a completion event, found after {IDLE_CHECK_MS} ms idle")
            }
        }
    }

    fn fail(&mut self, m: String) {
        self.state = State::Error;
        self.failure = Some(m);
    }

    /// Takes the connection's queued CM events (`rdma_get_cm_event`);
    /// `true` when one ends the wait.
    fn cm_events(&mut self) -> bool {
        loop {
            match self.cm.try_get_event() {
                Ok(Some(ev)) => {
                    if self.cm_event(&ev) {
                        return true;
                    }
                }
                Ok(None) => return false,
                Err(e) => {
                    self.fail(format!("rdma_get_cm_event failed: {e}"));
                    return true;
                }
            }
        }
    }

    /// What rping's `cm_thread` does with an event of the connection: prints
    /// what it prints; `true` (and the state) for the ones that post its
    /// semaphore once connected: DISCONNECTED, device removal, errors.
    fn cm_event(&mut self, ev: &Event) -> bool {
        if self.debug {
            println!(
                "cma_event type {} cma_id {} ({})",
                ev.kind(),
                ev.id().kernel_id(),
                if self.server { "child" } else { "parent" }
            );
        }
        match ev.kind() {
            EventKind::Disconnected => {
                eprintln!("{} DISCONNECT EVENT...", if self.server { "server" } else { "client" });
                self.state = State::Disconnected;
                true
            }
            EventKind::DeviceRemoval => {
                eprintln!("cma detected device removal!!!!");
                self.fail("the RDMA device was removed".into());
                true
            }
            k if k.is_error() => {
                eprintln!("cma event {k}, error {}", ev.status());
                self.fail(ev.error().map_or_else(|| k.to_string(), |e| e.to_string()));
                true
            }
            EventKind::TimewaitExit | EventKind::Established => false,
            k => {
                eprintln!("unhandled event: {k}, ignoring");
                false
            }
        }
    }

    fn expect(&self, want: State) -> Result<(), String> {
        if self.state == want {
            return Ok(());
        }
        eprintln!("wait for {} state {}", state_name(want), self.state as u32);
        Err(self.failure.clone().unwrap_or_else(|| format!("the connection ended waiting for {}", state_name(want))))
    }

    /// `rping_test_server`.
    fn test_server(&mut self, verbose: bool) -> Result<(), String> {
        loop {
            self.wait();
            if self.state != State::RdmaReadAdv {
                let r = self.expect(State::RdmaReadAdv);
                return if self.state == State::Disconnected { Ok(()) } else { r };
            }
            if self.debug {
                println!("server received sink adv");
            }
            let want = self.remote.2;
            if want > self.size {
                eprintln!("client advertised {want} bytes, more than -S {}: reading {}", self.size, self.size);
            }
            self.rdma(true, want.min(self.size))?;
            self.wait();
            self.expect(State::RdmaReadComplete)?;
            let len = self.rdma_text()?;
            if verbose {
                println!("server ping data: {}", String::from_utf8_lossy(&self.scratch[..len]));
            }
            self.send_info(None)?;
            self.wait();
            self.expect(State::RdmaWriteAdv)?;
            self.rdma(false, (len as u32 + 1).min(self.size))?;
            self.wait();
            self.expect(State::RdmaWriteComplete)?;
            self.send_info(None)?;
        }
    }

    /// `strlen(rdma_buf)`: `rdma_buf` read into the scratch buffer, and
    /// the length of the C string it starts with.
    fn rdma_text(&mut self) -> Result<usize, String> {
        self.scratch.resize(self.size as usize, 0);
        self.rdma_mr.read_at(0, &mut self.scratch).map_err(|e| e.to_string())?;
        Ok(self.scratch.iter().position(|&c| c == 0).unwrap_or(self.scratch.len()))
    }

    /// `rping_test_client`.
    fn test_client(&mut self, count: u32, verbose: bool, validate: bool) -> Result<(), String> {
        let size = self.size as usize;
        let mut start: u8 = 65;
        let mut ping: u32 = 0;
        // What came back, read only for -V and -v (as rping reads it).
        let mut got = Vec::new();
        while count == 0 || ping < count {
            self.state = State::RdmaReadAdv;
            let buf = &mut self.scratch;
            buf.clear();
            write!(buf, "rdma-ping-{ping}: ").map_err(|e| e.to_string())?;
            buf.truncate(size - 1);
            let mut c = start;
            while buf.len() < size {
                buf.push(c);
                c += 1;
                if c > 122 {
                    c = 65;
                }
            }
            start += 1;
            if start > 122 {
                start = 65;
            }
            buf[size - 1] = 0;
            let (addr, rkey) = {
                let m = self.start_mr.as_ref().ok_or("the client has no start_buf")?;
                m.write_at(0, &self.scratch).map_err(|e| e.to_string())?;
                (m.addr(), m.rkey())
            };
            self.send_info(Some((addr, rkey)))?;
            self.wait();
            self.expect(State::RdmaWriteAdv)?;
            let (addr, rkey) = (self.rdma_mr.addr(), self.rdma_mr.rkey());
            self.send_info(Some((addr, rkey)))?;
            self.wait();
            self.expect(State::RdmaWriteComplete)?;
            if !(validate || verbose) {
                ping += 1;
                continue;
            }
            got.resize(size, 0);
            self.rdma_mr.read_at(0, &mut got).map_err(|e| e.to_string())?;
            if validate && got != self.scratch {
                eprintln!("data mismatch!");
                return Err(format!("ping {ping}: the data written back differs from the data read"));
            }
            if verbose {
                let n = got.iter().position(|&c| c == 0).unwrap_or(got.len());
                println!("ping data: {}", String::from_utf8_lossy(&got[..n]));
            }
            ping += 1;
        }
        Ok(())
    }

    /// After the client's disconnect: its DISCONNECTED (bounded), as
    /// rping's `cm_thread` prints it.
    fn wait_disconnected(&mut self) {
        let deadline = Instant::now() + END_TIMEOUT;
        while self.state != State::Disconnected {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.cm.get_event_timeout(left) {
                Ok(Some(ev)) => {
                    if self.cm_event(&ev) {
                        return;
                    }
                }
                _ => return,
            }
        }
    }
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Connected => "CONNECTED",
        State::RdmaReadAdv => "RDMA_READ_ADV",
        State::RdmaReadComplete => "RDMA_READ_COMPLETE",
        State::RdmaWriteAdv => "RDMA_WRITE_ADV",
        State::RdmaWriteComplete => "RDMA_WRITE_COMPLETE",
        State::ConnectRequest => "CONNECT_REQUEST",
        State::RouteResolved => "ROUTE_RESOLVED",
        _ => "state",
    }
}

/// Sleeps until the completion channel `cq` or the CM channel `cm` is
/// readable (or failed, which their reads then report), or `timeout_ms`
/// passes (`-1`: no limit): one `poll()` on both fds. Returns whether each
/// one woke it (both `false`: the time passed).
fn wait_readable(cq: BorrowedFd<'_>, cm: BorrowedFd<'_>, timeout_ms: c_int) -> io::Result<(bool, bool)> {
    wait_readable_either(cq, cm, timeout_ms).map_err(|e| io::Error::from_raw_os_error(e as i32))
}

/// `rping_self_modify_qp`: INIT, RTR, RTS with the CM's attributes, for `-q`.
fn self_modify(id: &CmId, qp: &QueuePair) -> Result<(), String> {
    for s in [rverbs::QpState::Init, rverbs::QpState::Rtr, rverbs::QpState::Rts] {
        let (attr, mask) = id.init_qp_attr(s).map_err(|e| e.to_string())?;
        qp.modify(&attr, mask).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `rping_init_conn_param`.
fn conn_param(o: &Opts, qp: &QueuePair) -> ConnParam {
    ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: o.self_qp.then(|| qp.qp_num()),
        ..ConnParam::default()
    }
}

/// Waits for `want` on `ch` (rping's `sem_wait` after an asynchronous CM
/// call), printing what rping prints for errors.
fn cm_wait(ch: &EventChannel, want: EventKind, o: &Opts) -> Result<rverbs::cm::Event, String> {
    let ev = ch
        .get_event_timeout(PEER_TIMEOUT)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no {want} within {} s", PEER_TIMEOUT.as_secs()))?;
    debug_log!(
        o,
        "cma_event type {} cma_id {} ({})",
        ev.kind(),
        ev.id().kernel_id(),
        if o.server { "child" } else { "parent" }
    );
    if ev.kind() == want {
        return Ok(ev);
    }
    if ev.kind().is_error() {
        eprintln!("cma event {}, error {}", ev.kind(), ev.status());
    }
    Err(ev.error().map_or_else(|| format!("waiting for {want}, got {}", ev.kind()), |e| e.to_string()))
}

fn run_client(o: &Opts) -> Result<(), String> {
    let dst = SocketAddr::new(o.addr.expect("checked"), o.port);
    let ch = EventChannel::new().map_err(|e| e.to_string())?;
    let id = ch.create_id(PortSpace::Tcp).map_err(|e| format!("rdma_create_id: {e}"))?;
    debug_log!(o, "created cm_id {}", id.kernel_id());
    let src = o.src.map(|ip| SocketAddr::new(ip, 0));
    id.resolve_addr(src, dst, Duration::from_millis(RESOLVE_MS)).map_err(|e| format!("rdma_resolve_addr: {e}"))?;
    cm_wait(&ch, EventKind::AddrResolved, o)?;
    id.resolve_route(Duration::from_millis(RESOLVE_MS)).map_err(|e| format!("rdma_resolve_route: {e}"))?;
    cm_wait(&ch, EventKind::RouteResolved, o)?;
    debug_log!(o, "rdma_resolve_addr - rdma_resolve_route successful");
    let mut c = setup(&id, o)?;
    c.post_recv().map_err(|e| format!("ibv_post_recv failed: {e}"))?;
    id.connect(&conn_param(o, &c.qp)).map_err(|e| format!("rdma_connect: {e}"))?;
    if o.self_qp {
        cm_wait(&ch, EventKind::ConnectResponse, o).map_err(|e| format!("connect error: {e}"))?;
        self_modify(&id, &c.qp).map_err(|e| format!("rping_modify_qp: {e}"))?;
        id.establish().map_err(|e| format!("rdma_establish: {e}"))?;
    } else {
        cm_wait(&ch, EventKind::Established, o).map_err(|e| format!("connect error: {e}"))?;
    }
    c.state = State::Connected;
    debug_log!(o, "rdma_connect successful");
    let r = c.test_client(o.count, o.verbose, o.validate);
    if o.self_qp {
        let _ = c.qp.modify(
            &rverbs::QpAttr { qp_state: rverbs::QpState::Err, ..Default::default() },
            rverbs::QpAttrMask::STATE,
        );
    }
    let _ = id.disconnect();
    c.wait_disconnected();
    r.map_err(|e| format!("rping client failed: {e}"))
}

fn run_server(o: &Opts) -> Result<(), String> {
    let ip = o.addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let ch = EventChannel::new().map_err(|e| e.to_string())?;
    let listen = ch.create_id(PortSpace::Tcp).map_err(|e| format!("rdma_create_id: {e}"))?;
    listen.bind_addr(SocketAddr::new(ip, o.port)).map_err(|e| format!("rdma_bind_addr: {e}"))?;
    debug_log!(o, "rdma_bind_addr successful");
    debug_log!(o, "rdma_listen");
    listen.listen(3).map_err(|e| format!("rdma_listen: {e}"))?;
    loop {
        // The listener waits for its clients without limit.
        let ev = ch.get_event().map_err(|e| format!("rdma_get_cm_event: {e}"))?;
        debug_log!(o, "cma_event type {} cma_id {} (parent)", ev.kind(), ev.listen_id().map_or(0, |l| l.kernel_id()));
        if ev.kind() != EventKind::ConnectRequest {
            eprintln!("wait for CONNECT_REQUEST state {}", State::Idle as u32);
            return Err(format!("the listener got {} instead of a connection request", ev.kind()));
        }
        let child = ev.id().clone();
        drop(ev);
        debug_log!(o, "child cma {}", child.kernel_id());
        // The connection's events on a channel of its own (rping shares
        // one channel and one cm_thread; the output is the same).
        child.migrate(&EventChannel::new().map_err(|e| e.to_string())?).map_err(|e| format!("rdma_migrate_id: {e}"))?;
        if o.persistent {
            let o = o.clone();
            std::thread::spawn(move || {
                if let Err(e) = serve(&child, &o) {
                    let _ = io::stdout().flush();
                    eprintln!("rverbs rping: {e}");
                }
            });
            continue;
        }
        return serve(&child, o);
    }
}

/// One connection of the server (`rping_run_server` after the request).
fn serve(child: &CmId, o: &Opts) -> Result<(), String> {
    let mut c = setup(child, o)?;
    c.post_recv().map_err(|e| format!("ibv_post_recv failed: {e}"))?;
    debug_log!(o, "accepting client connection request");
    if o.self_qp {
        self_modify(child, &c.qp).map_err(|e| format!("rdma_accept: {e}"))?;
    }
    let p = if o.self_qp { conn_param(o, &c.qp) } else { ConnParam::default() };
    child.accept(&p).map_err(|e| format!("rdma_accept: {e}"))?;
    cm_wait(&child.channel(), EventKind::Established, o).map_err(|e| format!("connect error: {e}"))?;
    if o.self_qp && c.qp.context().device().transport() == rverbs::Transport::Iwarp {
        // iw_cm moved the QP (not attached to the id) to RTS at the accept,
        // unseen: this move, the kernel's no-op, records it for the posts.
        let rts = rverbs::QpAttr { qp_state: rverbs::QpState::Rts, ..Default::default() };
        c.qp.modify(&rts, rverbs::QpAttrMask::STATE).map_err(|e| format!("ibv_modify_qp: {e}"))?;
    }
    let r = c.test_server(o.verbose);
    if o.self_qp {
        let _ = c.qp.modify(
            &rverbs::QpAttr { qp_state: rverbs::QpState::Err, ..Default::default() },
            rverbs::QpAttrMask::STATE,
        );
    }
    let _ = child.disconnect();
    r.map_err(|e| format!("rping server failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn options_as_rping_reads_them() {
        let o = parse_args(&args(&["-s"])).unwrap().unwrap();
        assert!(o.server && o.addr.is_none());
        assert_eq!((o.port, o.count, o.size), (7174, 0, 64));
        let o = parse_args(&args(&["-c", "-a", "192.168.77.1", "-C", "100", "-S", "4096", "-vVd", "-p", "9000"]))
            .unwrap()
            .unwrap();
        assert!(!o.server && o.verbose && o.validate && o.debug);
        assert_eq!((o.addr, o.count, o.size, o.port), ("192.168.77.1".parse().ok(), 100, 4096, 9000));
        let o = parse_args(&args(&["-sPq", "-a", "::0"])).unwrap().unwrap();
        assert!(o.persistent && o.self_qp && o.addr == Some("::".parse().unwrap()));
        // rping prints its usage for no role, -t (in its getopt string but
        // unhandled) and unknown options.
        assert_eq!(parse_args(&args(&[])).unwrap(), None);
        assert_eq!(parse_args(&args(&["-h"])).unwrap(), None);
        assert_eq!(parse_args(&args(&["-s", "-t", "1"])).unwrap(), None);
        assert!(parse_args(&args(&["-s", "-x"])).is_err());
        assert!(parse_args(&args(&["-S", "25", "-s"]))
            .unwrap_err()
            .contains("Invalid size 25 (valid range is 26 to 65536)"));
        assert!(parse_args(&args(&["-S", "65536", "-s"])).is_err());
        assert!(parse_args(&args(&["-s", "-S", "65535"])).is_ok());
        assert!(parse_args(&args(&["-C", "-1", "-s"])).unwrap_err().contains("Invalid count -1"));
        assert!(parse_args(&args(&["-c"])).unwrap_err().contains("-a addr"));
        assert_eq!(atoi(" 12x"), 12);
        assert_eq!(atoi("x"), 0);
    }

    /// The wait's `poll()` says which of its two fds woke it, and times out
    /// with neither.
    #[test]
    fn wait_readable_names_the_fd_that_woke_it() {
        use std::io::Read;
        use std::os::unix::net::UnixStream;
        let (mut cq, cq_end) = UnixStream::pair().unwrap();
        let (mut cm, cm_end) = UnixStream::pair().unwrap();
        let wait = |t| wait_readable(cq_end.as_fd(), cm_end.as_fd(), t).unwrap();
        assert_eq!(wait(0), (false, false));
        cm.write_all(b"x").unwrap();
        assert_eq!(wait(-1), (false, true));
        cq.write_all(b"x").unwrap();
        assert_eq!(wait(-1), (true, true));
        let mut byte = [0u8];
        (&cq_end).read_exact(&mut byte).unwrap();
        (&cm_end).read_exact(&mut byte).unwrap();
        assert_eq!(wait(0), (false, false));
        // A hang-up (POLLHUP) wakes it too: the read then says why.
        drop(cm);
        assert_eq!(wait(-1), (false, true));
    }
}

/// rping's buffer advertisement (`struct rping_rdma_info`): address, rkey
/// and length, big-endian, 16 bytes.
fn encode_ad(addr: u64, rkey: u32, len: u32) -> [u8; INFO_LEN] {
    let mut m = [0u8; INFO_LEN];
    m[..8].copy_from_slice(&addr.to_be_bytes());
    m[8..12].copy_from_slice(&rkey.to_be_bytes());
    m[12..].copy_from_slice(&len.to_be_bytes());
    m
}

/// The peer's advertisement: any 16 bytes are one (what they name is the
/// peer's to get right; a bad address or key fails the RDMA op, not us).
fn decode_ad(m: &[u8; INFO_LEN]) -> (u64, u32, u32) {
    let [a0, a1, a2, a3, a4, a5, a6, a7, k0, k1, k2, k3, l0, l1, l2, l3] = *m;
    (
        u64::from_be_bytes([a0, a1, a2, a3, a4, a5, a6, a7]),
        u32::from_be_bytes([k0, k1, k2, k3]),
        u32::from_be_bytes([l0, l1, l2, l3]),
    )
}

/// A received message must be exactly one advertisement, as rping checks.
fn check_ad_len(byte_len: u32) -> Result<(), String> {
    if byte_len as usize == INFO_LEN {
        Ok(())
    } else {
        Err(format!("received {byte_len} bytes, not a 16-byte buffer advertisement"))
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::*;
    use crate::proptest_config::config;

    proptest! {
        #![proptest_config(config())]

        /// Any 16 bytes from the peer decode, and what we send decodes
        /// back to what we meant; any other length is refused.
        #[test]
        fn advertisements_decode_whatever_the_peer_sends(
            m in any::<[u8; INFO_LEN]>(),
            (addr, rkey, len) in any::<(u64, u32, u32)>(),
            byte_len in any::<u32>(),
        ) {
            let (a, k, l) = decode_ad(&m);
            prop_assert_eq!(encode_ad(a, k, l), m);
            prop_assert_eq!(decode_ad(&encode_ad(addr, rkey, len)), (addr, rkey, len));
            prop_assert_eq!(check_ad_len(byte_len).is_ok(), byte_len == 16);
        }
    }
}
