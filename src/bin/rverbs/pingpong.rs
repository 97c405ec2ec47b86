//! `rverbs pingpong`: the ping-pong of rdma-core's `ibv_rc_pingpong`,
//! `ibv_ud_pingpong` (`--ud`) and `ibv_srq_pingpong` (`--srq`), with their
//! options, defaults and output, and their TCP exchange byte for byte, so
//! either side can be rdma-core's program.
//!
//! The out-of-band exchange, as rdma-core's examples do it:
//!
//! * each QP is described by a 52-byte message: `printf("%04x:%06x:%06x:%s")`
//!   of LID, QPN, PSN and the *wire GID* (the GID's 16 bytes in memory order
//!   as 32 lowercase hex digits), then the terminating NUL;
//! * the client connects and writes its message(s) (`--srq`: always 256,
//!   the unused ones all zero), reads the server's, writes `done\0` (5
//!   bytes) and closes;
//! * the server accepts one connection (then closes its listener), reads
//!   the client's message(s), connects its QPs, writes its own, reads the
//!   `done`.
//!
//! The data path: `rx-depth` receives posted up front (refilled when the
//! number posted drops to 1, `--srq`: to the number of QPs), the client
//! posts the first send, and each side posts its next send once both its
//! last send and a receive have completed (work request ids 1 = receive,
//! 2 = send; every send signaled). The run ends when both `iters` sends and
//! `iters` receives have completed.
//!
//! Where rverbs differs on purpose: on RoCE ports `-g` defaults to the
//! port's IPv4-mapped RoCE v2 GID (rdma-core sends the zero GID and fails
//! there); every wait is bounded (`--timeout`); errors are one line on
//! stderr; `-c` finding bad data makes the exit status 1.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use rverbs::{
    AccessFlags, AddressHandle, CompletionChannel, CompletionQueue, ConnectOptions, Context, Endpoint, Gid, LinkLayer,
    MemoryRegion, Mtu, PostError, ProtectionDomain, QpCap, QpInitAttr, QpType, QueuePair, RecvWr, SendFlags, SendOp,
    SendWr, SharedReceiveQueue, UdDest, Wc, WcStatus,
};

use rverbs_providers::sys::event::{start_wait_interrupts, stop_wait_interrupts};

use super::getopt::{Getopt, Opt, Parsed};
use super::{parse_c_int, CliResult, Fail};

const USAGE: &str = "\
Usage:
  rverbs pingpong [options]              start a server and wait for connection
  rverbs pingpong [options] <host>       connect to server at <host>

Ping-pong SENDs between two QPs, wire-compatible with rdma-core's
ibv_rc_pingpong (default), ibv_ud_pingpong (--ud) and ibv_srq_pingpong
(--srq): either side may be rdma-core's program.

Options:
  -p, --port=<port>      listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default 1)
  -s, --size=<size>      size of message to exchange (default 4096; --ud 1024)
  -m, --mtu=<size>       path MTU (default 1024; not with --ud)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges (default 1000)
  -l, --sl=<sl>          service level value (default 0)
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index (default: none on
                         InfiniBand; on RoCE the port's IPv4-mapped
                         RoCE v2 GID, see 'rverbs devinfo -v')
  -c, --chk              validate received buffer
      --ud               UD QP, like ibv_ud_pingpong
      --srq              RC QPs sharing one SRQ, like ibv_srq_pingpong
  -q, --num-qp=<num>     number of QPs to use with --srq (default 16)
      --timeout=<sec>    give up when the peer does not answer or no
                         completion arrives for <sec> seconds (default 10;
                         a server waits for its client without limit)
  -N, --new_send         accepted for compatibility (one post path here)
  -h, --help             print this help
";

/// Work request id of receives (`PINGPONG_RECV_WRID`).
const RECV_WRID: u64 = 1;
/// Work request id of sends (`PINGPONG_SEND_WRID`).
const SEND_WRID: u64 = 2;
/// ibv_srq_pingpong always exchanges this many addresses (`MAX_QP`).
const MAX_QP: usize = 256;
/// The Q_Key both UD sides use.
const UD_QKEY: u32 = 0x1111_1111;
/// The GRH in front of every UD receive.
const GRH_LEN: usize = 40;
/// One address message: `"0000:000000:000000:" + 32 hex digits + NUL`
/// ([`Endpoint::to_text`]).
const MSG_LEN: usize = Endpoint::TEXT_LEN;
/// What the client sends after it has the server's address.
const DONE: &[u8; 5] = b"done\0";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Rc,
    Ud,
    Srq,
}

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Opts {
    mode: Mode,
    tcp_port: u16,
    ib_dev: Option<String>,
    ib_port: u8,
    size: u32,
    mtu: Mtu,
    rx_depth: u32,
    iters: u32,
    sl: u8,
    events: bool,
    gid_idx: Option<u8>,
    validate: bool,
    num_qp: u32,
    timeout: Duration,
    server: Option<String>,
    help: bool,
}

/// Option names (the long ones without a short form get a key of their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Port,
    Dev,
    IbPort,
    Size,
    Mtu,
    RxDepth,
    Iters,
    Sl,
    Events,
    Gid,
    Chk,
    NumQp,
    Ud,
    Srq,
    Timeout,
    NewSend,
    Help,
    /// rdma-core options rverbs does not do: the text says what they are.
    Unsupported(&'static str),
}

const SPECS: &[Opt<Key>] = &[
    Opt::new(Some('p'), "port", true, Key::Port),
    Opt::new(Some('d'), "ib-dev", true, Key::Dev),
    Opt::new(Some('i'), "ib-port", true, Key::IbPort),
    Opt::new(Some('s'), "size", true, Key::Size),
    Opt::new(Some('m'), "mtu", true, Key::Mtu),
    Opt::new(Some('r'), "rx-depth", true, Key::RxDepth),
    Opt::new(Some('n'), "iters", true, Key::Iters),
    Opt::new(Some('l'), "sl", true, Key::Sl),
    Opt::new(Some('e'), "events", false, Key::Events),
    Opt::new(Some('g'), "gid-idx", true, Key::Gid),
    Opt::new(Some('c'), "chk", false, Key::Chk),
    Opt::new(Some('q'), "num-qp", true, Key::NumQp),
    Opt::new(None, "ud", false, Key::Ud),
    Opt::new(None, "srq", false, Key::Srq),
    Opt::new(None, "timeout", true, Key::Timeout),
    Opt::new(Some('N'), "new_send", false, Key::NewSend),
    Opt::new(Some('h'), "help", false, Key::Help),
    Opt::new(Some('o'), "odp", false, Key::Unsupported("-o/--odp (on-demand paging)")),
    Opt::new(Some('O'), "iodp", false, Key::Unsupported("-O/--iodp (implicit on-demand paging)")),
    Opt::new(Some('P'), "prefetch", false, Key::Unsupported("-P/--prefetch (on-demand paging)")),
    Opt::new(Some('t'), "ts", false, Key::Unsupported("-t/--ts (completion timestamps)")),
    Opt::new(Some('j'), "dm", false, Key::Unsupported("-j/--dm (device memory)")),
];

/// How pingpong parses: operands allowed (the server's host name), no
/// prefix (`cmd_pingpong` adds `rverbs pingpong: `), the hint after each error.
const GETOPT: Getopt = Getopt { prefix: "", hint: "(try 'rverbs pingpong --help')", operands: true };

/// A C-syntax integer (`strtol(s, NULL, 0)`, but all of `s`) in `range`.
fn int_in(s: &str, range: std::ops::RangeInclusive<i64>, what: &str) -> Result<i64, String> {
    match parse_c_int(s) {
        Some(v) if range.contains(&v) => Ok(v),
        _ => Err(format!("invalid {what} '{s}' (expected {}..{})", range.start(), range.end())),
    }
}

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let Parsed { opts: found, operands } = GETOPT.parse(args, SPECS)?;
    let mut o = Opts {
        mode: Mode::Rc,
        tcp_port: 18515,
        ib_dev: None,
        ib_port: 1,
        size: 0,
        mtu: Mtu::Mtu1024,
        rx_depth: 500,
        iters: 1000,
        sl: 0,
        events: false,
        gid_idx: None,
        validate: false,
        num_qp: 16,
        timeout: Duration::from_secs(10),
        server: None,
        help: false,
    };
    let (mut size, mut mtu_given, mut num_qp_given, mut ud, mut srq) = (None, false, false, false, false);
    for (key, v) in found {
        let v = v.unwrap_or_default();
        match key {
            Key::Port => o.tcp_port = int_in(&v, 1..=65535, "port")? as u16,
            Key::Dev if v.is_empty() => return Err("invalid IB device name '' (empty)".into()),
            Key::Dev => o.ib_dev = Some(v),
            Key::IbPort => o.ib_port = int_in(&v, 1..=255, "IB port number")? as u8,
            Key::Size => size = Some(int_in(&v, 1..=i64::from(i32::MAX), "message size")? as u32),
            Key::Mtu => {
                o.mtu = parse_c_int(&v)
                    .and_then(|b| u32::try_from(b).ok())
                    .and_then(Mtu::from_bytes)
                    .ok_or_else(|| format!("invalid MTU '{v}' (expected 256, 512, 1024, 2048 or 4096)"))?;
                mtu_given = true;
            }
            Key::RxDepth => o.rx_depth = int_in(&v, 1..=i64::from(i32::MAX), "receive depth")? as u32,
            Key::Iters => o.iters = int_in(&v, 1..=i64::from(i32::MAX), "iteration count")? as u32,
            Key::Sl => o.sl = int_in(&v, 0..=15, "service level")? as u8,
            Key::Events => o.events = true,
            Key::Gid => {
                // Negative means "none", as in rdma-core (-1 is its default).
                let g = int_in(&v, i64::from(i32::MIN)..=255, "GID index")?;
                o.gid_idx = u8::try_from(g).ok();
            }
            Key::Chk => o.validate = true,
            Key::NumQp => {
                o.num_qp = int_in(&v, 1..=(MAX_QP as i64 - 1), "number of QPs")? as u32;
                num_qp_given = true;
            }
            Key::Ud => ud = true,
            Key::Srq => srq = true,
            Key::Timeout => o.timeout = Duration::from_secs(int_in(&v, 1..=86400, "timeout")? as u64),
            Key::NewSend => {}
            Key::Help => o.help = true,
            Key::Unsupported(what) => return Err(format!("{what} is not supported by rverbs")),
        }
    }
    if o.help {
        return Ok(o);
    }
    match operands.as_slice() {
        [] => {}
        [host] => o.server = Some(host.clone()),
        [_, extra, ..] => return Err(GETOPT.error(&format!("unexpected argument '{extra}'"))),
    }
    o.mode = match (ud, srq) {
        (true, true) => return Err("--ud and --srq cannot be combined".into()),
        (true, false) => Mode::Ud,
        (false, true) => Mode::Srq,
        (false, false) => Mode::Rc,
    };
    if o.mode == Mode::Ud && mtu_given {
        return Err("-m/--mtu does not apply to --ud (a UD message must fit in the port's active MTU)".into());
    }
    if o.mode != Mode::Srq && num_qp_given {
        return Err("-q/--num-qp needs --srq".into());
    }
    // ibv_ud_pingpong's usage text says 2048, but its code (and so its wire
    // behaviour) uses 1024; the receive buffers must match, so follow the code.
    o.size = size.unwrap_or(if o.mode == Mode::Ud { 1024 } else { 4096 });
    if o.mode == Mode::Srq && o.num_qp > o.rx_depth {
        return Err(format!(
            "rx_depth {} is too small for {} QPs -- must have at least one receive per QP",
            o.rx_depth, o.num_qp
        ));
    }
    Ok(o)
}

/// The QP attributes of rdma-core's examples, as [`ConnectOptions`]
/// (`pp_init_ctx()` and `pp_connect_ctx()` of `ibv_rc_pingpong`,
/// `ibv_ud_pingpong` and `ibv_srq_pingpong`):
///
/// * INIT: P_Key index 0, our port, and `qp_access_flags` 0 (RC) or Q_Key
///   `0x11111111` (UD);
/// * RTR (RC): `-m`'s path MTU, `max_dest_rd_atomic` 1, `min_rnr_timer` 12,
///   `-l`'s SL, and a GRH with hop limit 1 when the peer gave a GID;
///   (UD): the state only;
/// * RTS (RC): `timeout` 14, `retry_cnt` 7, `rnr_retry` 7, `max_rd_atomic` 1;
///   (UD): the state and the PSN;
/// * the UD address handle: `-l`'s SL and a GRH with hop limit 64 when the
///   peer gave a GID.
///
/// The GID index: `-g`, else on RoCE the port's default (rdma-core sends
/// none and fails there), else none.
fn connect_options(o: &Opts) -> ConnectOptions {
    ConnectOptions {
        port: o.ib_port,
        sgid_index: o.gid_idx,
        access: AccessFlags::empty(),
        path_mtu: Some(o.mtu),
        sl: o.sl,
        traffic_class: 0,
        hop_limit: if o.mode == Mode::Ud { 64 } else { 1 },
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        pkey_index: 0,
        qkey: UD_QKEY,
    }
}

/// `  local address:  LID 0x0000, QPN 0x000011, PSN 0x6a5e4c, GID ::ffff:192.168.77.1`
/// (ibv_ud_pingpong writes `PSN 0x......: GID` there, and so does `--ud`).
fn address_line(label: &str, d: &Endpoint, psn_sep: char) -> String {
    format!(
        "  {label} LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{psn_sep} GID {}\n",
        d.lid,
        d.qpn,
        d.psn,
        d.gid.to_inet_string()
    )
}

/// The two summary lines, computed like rdma-core (a `float` of
/// microseconds, `size * iters * 2` bytes).
fn summary(size: u32, iters: u32, elapsed: Duration) -> String {
    let usec = elapsed.as_micros() as f32;
    let bytes = u64::from(size) * u64::from(iters) * 2;
    let secs = f64::from(usec) / 1_000_000.0;
    let mbit = bytes as f64 * 8.0 / f64::from(usec);
    let per_iter = f64::from(usec / iters as f32);
    format!(
        "{bytes} bytes in {} seconds = {} Mbit/sec\n{iters} iters in {} seconds = {} usec/iter\n",
        c_fixed2(secs),
        c_fixed2(mbit),
        c_fixed2(secs),
        c_fixed2(per_iter)
    )
}

/// `printf("%.2f")`, including its `inf`/`nan`.
fn c_fixed2(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:.2}")
    }
}

/// Writes to stdout as the program goes (ignoring a closed stdout, as
/// rdma-core does).
fn say(s: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
}

/// `rverbs pingpong ...`. Errors are printed here as one line,
/// `rverbs pingpong: <what>`.
pub fn cmd_pingpong(args: &[String]) -> CliResult<()> {
    let result = parse_args(args).and_then(|o| {
        if o.help {
            say(USAGE);
            Ok(())
        } else {
            run(&o)
        }
    });
    match result {
        Ok(()) => Ok(()),
        Err(m) => {
            let _ = io::stdout().flush();
            eprintln!("rverbs pingpong: {}", m.replace('\n', " "));
            Err(Fail::Quiet)
        }
    }
}

/// Everything one side holds.
struct PingPong {
    mode: Mode,
    size: u32,
    rx_depth: u32,
    /// Where the payload sits in the buffer (after the GRH for UD).
    payload_off: usize,
    /// Length of each receive (payload + GRH for UD).
    recv_len: u32,
    /// Copy the payload into the WQE (the QP's `max_inline_data` >= size).
    inline: bool,
    ib_port: u8,
    link_layer: LinkLayer,
    /// rdma-core's QP attributes ([`connect_options`]).
    opts: ConnectOptions,
    dev_name: String,
    /// The UD destination: the number of `ah`, which lives as long as this.
    ud: Option<UdDest<'static>>,
    // Dropped in this order: AH, QPs, SRQ, MR, PD, context.
    ah: Option<AddressHandle>,
    qps: Vec<QueuePair>,
    srq: Option<SharedReceiveQueue>,
    mr: MemoryRegion,
    pd: ProtectionDomain,
    ctx: Context,
}

fn lib_err(what: &str) -> impl Fn(rverbs::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Posts `wr` `n` times, one per call, to the SRQ or QP 0's receive
/// queue; returns how many went in.
fn post_recvs(qps: &mut [QueuePair], srq: &mut Option<SharedReceiveQueue>, wr: &RecvWr<'_>, n: u32) -> u32 {
    for i in 0..n {
        let r = match srq {
            Some(srq) => hot::post_srq_recv(srq, wr),
            None => hot::post_recv(&mut qps[0], wr),
        };
        if r.is_err() {
            return i;
        }
    }
    n
}

/// [`post_recvs`] without an SRQ: `n` receives on `qp`, without testing
/// for the SRQ at every post.
#[inline(always)]
fn post_recvs_rq(qp: &mut QueuePair, wr: &RecvWr<'_>, n: u32) -> u32 {
    for i in 0..n {
        if hot::post_recv(qp, wr).is_err() {
            return i;
        }
    }
    n
}

/// The data path, one never-inlined function per verb: each is the
/// library call and nothing else, so a profile shows what each verb costs
/// per call as this program makes it (`cargo xtask bench`, docs/PERFORMANCE.md).
/// The work requests are built once, before the loop.
mod hot {

    use rverbs::{
        CompletionChannel, CompletionQueue, CqEvent, PostError, QueuePair, RecvWr, SendWr, SharedReceiveQueue, Wc,
    };

    /// One send (`ibv_post_send`): the WQE and rxe's doorbell.
    #[inline(never)]
    pub fn post_send(qp: &mut QueuePair, wr: &SendWr<'_>) -> Result<(), PostError> {
        qp.post_send(std::slice::from_ref(wr))
    }

    /// One receive (`ibv_post_recv`).
    #[inline(never)]
    pub fn post_recv(qp: &mut QueuePair, wr: &RecvWr<'_>) -> Result<(), PostError> {
        qp.post_recv(std::slice::from_ref(wr))
    }

    /// One receive into the SRQ (`ibv_post_srq_recv`).
    #[inline(never)]
    pub fn post_srq_recv(srq: &mut SharedReceiveQueue, wr: &RecvWr<'_>) -> Result<(), PostError> {
        srq.post_recv(std::slice::from_ref(wr))
    }

    /// `ibv_poll_cq`.
    #[inline(never)]
    pub fn poll(cq: &mut CompletionQueue, wcs: &mut [Wc]) -> usize {
        cq.poll(wcs)
    }

    /// `ibv_req_notify_cq`.
    #[inline(never)]
    pub fn req_notify(cq: &mut CompletionQueue) -> rverbs::Result<()> {
        cq.req_notify(false)
    }

    /// `ibv_get_cq_event`: one `read()` of the blocking channel, `EINTR`
    /// when the stall alarm interrupted it (the acknowledgement is one call
    /// at the end, as in rdma-core's examples).
    #[inline(never)]
    pub fn get_cq_event(ch: &CompletionChannel) -> rverbs::Result<Option<CqEvent>> {
        ch.read_cq_event()
    }
}

/// Posts the send `wr` on `qp`: as it is, or with its payload (at `off`
/// in `mr`) copied into the WQE when `inline` (through `scratch`).
#[inline(always)]
fn send_on(
    qp: &mut QueuePair,
    wr: &SendWr<'_>,
    inline: bool,
    mr: &MemoryRegion,
    off: usize,
    scratch: &mut [u8],
) -> Result<(), String> {
    if !inline {
        return hot::post_send(qp, wr).map_err(send_failed);
    }
    post_send(qp, wr, Some((mr, off, scratch)))
}

#[cold]
fn send_failed(e: PostError) -> String {
    format!("Couldn't post send: {e}")
}

/// Posts the send `wr` on `qp` (its payload copied into the WQE when
/// `inline` holds it: `scratch` takes the bytes).
fn post_send(
    qp: &mut QueuePair,
    wr: &SendWr<'_>,
    inline: Option<(&MemoryRegion, usize, &mut [u8])>,
) -> Result<(), String> {
    let r = match inline {
        None => hot::post_send(qp, wr),
        Some((mr, off, scratch)) => {
            mr.read_at(off, scratch).map_err(lib_err("Couldn't post send"))?;
            qp.post_send_inline(wr.wr_id, wr.op, wr.flags, scratch, wr.ud)
        }
    };
    r.map_err(|e| format!("Couldn't post send: {e}"))
}

impl PingPong {
    /// The receive half of the posting pattern: `n` receives of the whole
    /// buffer, wr_id 1, one per call (as rdma-core's examples post them).
    /// Returns how many were posted.
    fn post_recv(&mut self, n: u32) -> u32 {
        let Ok(sge) = self.mr.sge(0, self.recv_len) else { return 0 };
        let sgl = [sge];
        let wr = RecvWr { wr_id: RECV_WRID, sgl: &sgl };
        post_recvs(&mut self.qps, &mut self.srq, &wr, n)
    }

    /// The local descriptions: QPN, a random PSN, our LID and GID
    /// ([`QueuePair::local_endpoint`]).
    fn local_endpoints(&self) -> Result<Vec<Endpoint>, String> {
        self.qps
            .iter()
            .map(|qp| {
                qp.local_endpoint(Endpoint::random_psn(), &self.opts).map_err(lib_err("Couldn't get local address"))
            })
            .collect()
    }

    /// The peer's address as rdma-core uses it: a GID only when its
    /// interface id is not zero (rdma-core's test for a GRH), which RoCE
    /// requires. Also the options towards it: without a GID no GRH, even
    /// with `-g` (as rdma-core).
    fn towards(&self, remote: &Endpoint) -> Result<(Endpoint, ConnectOptions), String> {
        if remote.gid.0[8..].iter().any(|&b| b != 0) {
            return Ok((*remote, self.opts));
        }
        if self.link_layer == LinkLayer::Ethernet {
            return Err(format!(
                "the peer sent no GID ({}), but port {} of {} is RoCE, where the GID is the address: \
                 give the peer -g <GID index> (its IPv4-mapped RoCE v2 GID, see 'rverbs devinfo -v')",
                remote.gid.to_inet_string(),
                self.ib_port,
                self.dev_name
            ));
        }
        Ok((Endpoint { gid: Gid::default(), ..*remote }, ConnectOptions { sgid_index: None, ..self.opts }))
    }

    /// `pp_connect_ctx()`: RTR and RTS towards the peer's QP(s)
    /// ([`QueuePair::to_rtr`], [`QueuePair::to_rts`]); for UD also the
    /// address handle ([`Endpoint::ah_attr`]).
    fn connect(&mut self, mine: &[Endpoint], remote: &[Endpoint]) -> Result<(), String> {
        if self.mode == Mode::Ud {
            let (peer, opts) = self.towards(&remote[0])?;
            let qp = &self.qps[0];
            qp.to_rtr(&peer, &opts).map_err(lib_err("Failed to modify QP to RTR"))?;
            qp.to_rts(mine[0].psn, &opts).map_err(lib_err("Failed to modify QP to RTS"))?;
            let av = peer.ah_attr(&self.ctx, &opts).map_err(lib_err("Failed to create AH"))?;
            let ah = self.pd.create_ah(&av).map_err(lib_err("Failed to create AH"))?;
            self.ud = Some(UdDest::new(ah.ah_num(), peer.qpn, opts.qkey));
            self.ah = Some(ah);
            return Ok(());
        }
        for (i, (qp, (me, peer))) in self.qps.iter().zip(mine.iter().zip(remote)).enumerate() {
            let label = if self.mode == Mode::Srq { format!("QP[{i}]") } else { "QP".to_string() };
            if peer.qpn == 0 {
                return Err(format!(
                    "the peer sent no address for {label}: it uses fewer QPs (give both sides the same -q)"
                ));
            }
            let (peer, opts) = self.towards(peer)?;
            qp.to_rtr(&peer, &opts).map_err(|e| format!("Failed to modify {label} to RTR: {e}"))?;
            qp.to_rts(me.psn, &opts).map_err(|e| format!("Failed to modify {label} to RTS: {e}"))?;
        }
        Ok(())
    }
}

/// What `-d` names, or the first device.
fn pick_device(name: Option<&str>) -> Result<rverbs::Device, String> {
    let devs = rverbs::devices().map_err(|e| format!("Failed to get IB devices list: {e}"))?;
    match name {
        None => devs.into_iter().next().ok_or_else(|| "No IB devices found".to_string()),
        Some(n) => {
            let names: Vec<String> = devs.iter().map(|d| d.name().to_string()).collect();
            devs.into_iter().find(|d| d.name() == n).ok_or_else(|| {
                if names.is_empty() {
                    format!("IB device {n} not found (there are no RDMA devices)")
                } else {
                    format!("IB device {n} not found (devices: {})", names.join(", "))
                }
            })
        }
    }
}

/// Builds the context, PD, buffer, CQ, SRQ and QPs, and moves the QPs to INIT
/// (`pp_init_ctx()`). Returns the object, the CQ and the channel.
fn init(o: &Opts) -> Result<(PingPong, CompletionQueue, Option<CompletionChannel>, rverbs::PortAttr), String> {
    let dev = pick_device(o.ib_dev.as_deref())?;
    let name = dev.name().to_string();
    let ctx = dev.open().map_err(|e| format!("Couldn't get context for {name}: {e}"))?;
    let port = ctx
        .query_port(o.ib_port)
        .map_err(|e| format!("Unable to query port info for port {} of {name}: {e}", o.ib_port))?;
    if o.mode == Mode::Ud {
        if let Some(mtu) = port.active_mtu.bytes() {
            if o.size > mtu {
                return Err(format!("Requested size larger than port MTU ({mtu})"));
            }
        }
    }
    let channel = if o.events {
        Some(ctx.create_comp_channel().map_err(lib_err("Couldn't create completion channel"))?)
    } else {
        None
    };
    let pd = ctx.alloc_pd().map_err(lib_err("Couldn't allocate PD"))?;
    let extra = if o.mode == Mode::Ud { GRH_LEN } else { 0 };
    let buf_len = o.size as usize + extra;
    let mr = pd.alloc_mr(buf_len, AccessFlags::LOCAL_WRITE).map_err(lib_err("Couldn't register MR"))?;
    // rdma-core fills the RC and UD buffers with 0x7b; srq_pingpong zeroes its own.
    if o.mode != Mode::Srq {
        mr.write_at(0, &vec![0x7b; buf_len]).map_err(lib_err("Couldn't fill the buffer"))?;
    }
    let nqp = if o.mode == Mode::Srq { o.num_qp } else { 1 };
    let cqe = if o.mode == Mode::Srq { o.rx_depth + o.num_qp } else { o.rx_depth + 1 };
    let cq = ctx
        .create_cq_with(&rverbs::CqInitAttr { cqe, channel: channel.as_ref(), comp_vector: 0 })
        .map_err(lib_err("Couldn't create CQ"))?;
    let srq = if o.mode == Mode::Srq {
        Some(
            pd.create_srq(&rverbs::SrqAttr { max_wr: o.rx_depth, max_sge: 1, srq_limit: 0 })
                .map_err(lib_err("Couldn't create SRQ"))?,
        )
    } else {
        None
    };
    let mut opts = connect_options(o);
    // Resolve RoCE's default GID index once, not in every endpoint and transition.
    if opts.sgid_index.is_none() && port.link_layer == LinkLayer::Ethernet {
        opts.sgid_index = Some(ctx.default_sgid_index(o.ib_port).map_err(lib_err("cannot pick a GID index"))?);
    }
    let mut qps = Vec::with_capacity(nqp as usize);
    let mut inline = false;
    for i in 0..nqp {
        let mut init = QpInitAttr::new(if o.mode == Mode::Ud { QpType::Ud } else { QpType::Rc }, &cq);
        init.srq = srq.as_ref();
        init.cap = QpCap {
            max_send_wr: 1,
            max_recv_wr: if srq.is_some() { 0 } else { o.rx_depth },
            max_send_sge: 1,
            max_recv_sge: if srq.is_some() { 0 } else { 1 },
            max_inline_data: 0,
        };
        let qp = pd.create_qp(&init).map_err(|e| {
            if o.mode == Mode::Srq {
                format!("Couldn't create QP[{i}]: {e}")
            } else {
                format!("Couldn't create QP: {e}")
            }
        })?;
        if qp.cap().max_inline_data >= o.size {
            inline = true;
        }
        qp.to_init(&opts).map_err(lib_err("Failed to modify QP to INIT"))?;
        qps.push(qp);
    }
    let pp = PingPong {
        mode: o.mode,
        size: o.size,
        rx_depth: o.rx_depth,
        payload_off: extra,
        recv_len: o.size + extra as u32,
        inline,
        ib_port: o.ib_port,
        link_layer: port.link_layer,
        opts,
        dev_name: name,
        ud: None,
        ah: None,
        qps,
        srq,
        mr,
        pd,
        ctx,
    };
    Ok((pp, cq, channel, port))
}

/// Which end of the TCP connection we talk to, for messages.
#[derive(Clone, Copy)]
enum Peer {
    Server,
    Client,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Server => "server",
            Peer::Client => "client",
        }
    }
}

fn read_exact_from(s: &mut TcpStream, buf: &mut [u8], peer: Peer, what: &str, timeout: Duration) -> Result<(), String> {
    let mut n = 0;
    while n < buf.len() {
        match s.read(&mut buf[n..]) {
            Ok(0) => {
                return Err(format!(
                    "the {} closed the connection after {n} of the {} bytes of {what}",
                    peer.name(),
                    buf.len()
                ))
            }
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(format!(
                    "no {what} from the {} within {} s (got {n} of {} bytes)",
                    peer.name(),
                    timeout.as_secs(),
                    buf.len()
                ))
            }
            Err(e) => return Err(format!("cannot read {what} from the {}: {e}", peer.name())),
        }
    }
    Ok(())
}

fn write_to(s: &mut TcpStream, buf: &[u8], peer: Peer, what: &str) -> Result<(), String> {
    s.write_all(buf).map_err(|e| format!("cannot send {what} to the {}: {e}", peer.name()))
}

/// Messages on the wire: one per QP, 256 with `--srq` (unused ones zero).
fn encode_all(mode: Mode, mine: &[Endpoint]) -> Result<Vec<u8>, String> {
    let count = if mode == Mode::Srq { MAX_QP } else { 1 };
    let mut v = Vec::with_capacity(count * MSG_LEN);
    for i in 0..count {
        let text = mine.get(i).copied().unwrap_or_default().to_text();
        v.extend_from_slice(&text.map_err(lib_err("Couldn't encode our address"))?);
    }
    Ok(v)
}

fn read_all(s: &mut TcpStream, mode: Mode, peer: Peer, timeout: Duration) -> Result<Vec<Endpoint>, String> {
    let count = if mode == Mode::Srq { MAX_QP } else { 1 };
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let mut m = [0u8; MSG_LEN];
        let what = if count == 1 { "its address".to_string() } else { format!("its address [{i}]") };
        read_exact_from(s, &mut m, peer, &what, timeout)?;
        out.push(Endpoint::from_text(&m).map_err(|e| format!("the {} sent a {}", peer.name(), e.message()))?);
    }
    Ok(out)
}

/// A read of the exchange gives up after `timeout` (`SO_RCVTIMEO`). Writes
/// need no limit (one message of at most a few hundred bytes into a fresh
/// connection's buffer never blocks), nor `TCP_NODELAY` (each side sends
/// only after it has read the other's, so Nagle never holds a segment
/// back): each would be one more syscall per side.
fn set_read_timeout(s: &TcpStream, timeout: Duration) -> Result<(), String> {
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())
}

/// `pp_client_exch_dest()`.
fn client_exchange(
    host: &str,
    port: u16,
    timeout: Duration,
    mode: Mode,
    mine: &[Endpoint],
) -> Result<Vec<Endpoint>, String> {
    let addrs: Vec<SocketAddr> =
        (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve {host}: {e}"))?.collect();
    let mut last = None;
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let Some(mut s) = stream else {
        return Err(match last {
            Some(e) => format!("Couldn't connect to {host}:{port}: {e}"),
            None => format!("Couldn't connect to {host}:{port}: the name has no address"),
        });
    };
    set_read_timeout(&s, timeout)?;
    write_to(&mut s, &encode_all(mode, mine)?, Peer::Server, "our address")?;
    let remote = read_all(&mut s, mode, Peer::Server, timeout).map_err(|e| {
        if e.contains("closed the connection after 0 of") {
            format!(
                "{e} (it gave up on our address: same mode (--ud/--srq, -q) on both sides? \
                 an rdma-core server on RoCE needs -g)"
            )
        } else {
            e
        }
    })?;
    write_to(&mut s, DONE, Peer::Server, "'done'")?;
    Ok(remote)
}

/// Listens on every address of `port` (IPv6 and IPv4 where the kernel
/// has a dual stack), with `SO_REUSEADDR` as rdma-core sets it.
fn listen(port: u16) -> Result<TcpListener, String> {
    let v6 = TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)));
    match v6 {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(format!("Couldn't listen to port {port}: {e}")),
        Err(_) => TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            .map_err(|e| format!("Couldn't listen to port {port}: {e}")),
    }
}

/// `pp_server_exch_dest()`: accept one client, read its address(es),
/// connect, answer with ours, wait for its `done`.
fn server_exchange(
    pp: &mut PingPong,
    port: u16,
    timeout: Duration,
    mine: &[Endpoint],
) -> Result<Vec<Endpoint>, String> {
    let listener = listen(port)?;
    let (mut s, _) = loop {
        match listener.accept() {
            Ok(c) => break c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("accept() failed: {e}")),
        }
    };
    drop(listener);
    set_read_timeout(&s, timeout)?;
    let remote = read_all(&mut s, pp.mode, Peer::Client, timeout)?;
    pp.connect(mine, &remote).map_err(|e| format!("Couldn't connect to remote QP: {e}"))?;
    write_to(&mut s, &encode_all(pp.mode, mine)?, Peer::Client, "our address")?;
    let mut done = [0u8; DONE.len()];
    read_exact_from(&mut s, &mut done, Peer::Client, "'done'", timeout)?;
    if &done != DONE {
        return Err(format!("the client sent \"{}\" instead of 'done'", done.escape_ascii()));
    }
    Ok(remote)
}

fn run(o: &Opts) -> Result<(), String> {
    let (mut pp, mut cq, channel, port) = init(o)?;
    let nqp = pp.qps.len();

    let routs = i64::from(pp.post_recv(pp.rx_depth));
    if routs < i64::from(pp.rx_depth) {
        return Err(format!("Couldn't post receive ({routs})"));
    }
    if channel.is_some() {
        cq.req_notify(false).map_err(lib_err("Couldn't request CQ notification"))?;
    }

    // Our address (QueuePair::local_endpoint): the LID (InfiniBand) and the
    // GID of -g, or on RoCE the default RoCE v2 GID.
    if port.link_layer != LinkLayer::Ethernet && port.lid == 0 {
        return Err(format!(
            "Couldn't get local LID (port {} of {} has none: is a subnet manager running?)",
            o.ib_port, pp.dev_name
        ));
    }
    let mine = pp.local_endpoints()?;
    let psn_sep = if o.mode == Mode::Ud { ':' } else { ',' };
    for d in &mine {
        say(&address_line("local address: ", d, psn_sep));
    }

    let remote = match &o.server {
        Some(host) => client_exchange(host, o.tcp_port, o.timeout, o.mode, &mine)?,
        None => server_exchange(&mut pp, o.tcp_port, o.timeout, &mine)?,
    };
    for d in remote.iter().take(nqp) {
        say(&address_line("remote address:", d, ','));
    }
    if o.server.is_some() {
        pp.connect(&mine, &remote)?;
    }

    let page = rverbs::page_size();
    let mut pending = vec![RECV_WRID; nqp];
    // The work requests of the loop, built once.
    let send_sgl = [pp.mr.sge(pp.payload_off, pp.size).map_err(lib_err("Couldn't post send"))?];
    let send_wr = SendWr { wr_id: SEND_WRID, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &send_sgl, ud: pp.ud };
    let recv_sgl = [pp.mr.sge(0, pp.recv_len).map_err(lib_err("Couldn't post receive"))?];
    let recv_wr = RecvWr { wr_id: RECV_WRID, sgl: &recv_sgl };
    let mut scratch = vec![0; if pp.inline { o.size as usize } else { 0 }];
    if let Some(ch) = &channel {
        // A wait is then one read() that sleeps, as in rdma-core's loop
        // (not a ppoll() and a read()), and the stall limit an alarm every
        // quarter of --timeout that interrupts it: no syscall per wait.
        ch.set_blocking(true).map_err(lib_err("Couldn't make the completion channel blocking"))?;
        start_wait_interrupts(o.timeout / STALL_ALARMS).map_err(|e| format!("Couldn't set the stall alarm: {e}"))?;
    }
    // RVERBS_PINGPONG_MARK=DIR: a failing stat of DIR/data-path-begin and
    // DIR/data-path-end brackets the exchange, for `strace` (`cargo xtask demo`).
    let mark =
        std::env::var("RVERBS_PINGPONG_MARK").ok().map(|d| [d.clone() + "/data-path-begin", d + "/data-path-end"]);
    if let Some(m) = &mark {
        let _ = std::fs::metadata(&m[0]);
    }
    if o.server.is_some() {
        if o.validate {
            // rdma-core marks the first byte of every page with
            // `i / page_size % sizeof(char)`, which is always 0.
            for i in (0..o.size as usize).step_by(page) {
                pp.mr.write_at(pp.payload_off + i, &[0]).map_err(lib_err("Couldn't mark the buffer"))?;
            }
        }
        for (i, p) in pending.iter_mut().enumerate() {
            send_on(&mut pp.qps[i], &send_wr, pp.inline, &pp.mr, pp.payload_off, &mut scratch)?;
            *p |= SEND_WRID;
        }
    }

    let wcs_len = if o.mode == Mode::Srq { nqp + o.rx_depth as usize } else { 2 };
    let mut wcs = vec![Wc::default(); wcs_len];
    let mut dp = DataPath {
        qps: &mut pp.qps,
        srq: &mut pp.srq,
        mr: &pp.mr,
        payload_off: pp.payload_off,
        inline: pp.inline,
        rx_depth: pp.rx_depth,
        cq: &mut cq,
        o,
        send_wr: &send_wr,
        recv_wr: &recv_wr,
        scratch: &mut scratch,
        pending: &mut pending,
        wcs: &mut wcs,
        routs,
    };
    let start = Instant::now();
    // One copy of the loop per mode, each without the other modes' tests.
    let ran = match (&channel, o.mode == Mode::Srq) {
        (Some(ch), false) => dp.run::<true, false>(Some(ch)),
        (Some(ch), true) => dp.run::<true, true>(Some(ch)),
        (None, false) => dp.run::<false, false>(None),
        (None, true) => dp.run::<false, true>(None),
    };
    let elapsed = start.elapsed();
    if let Some(m) = &mark {
        let _ = std::fs::metadata(&m[1]);
    }
    if channel.is_some() {
        stop_wait_interrupts().map_err(|e| format!("Couldn't stop the stall alarm: {e}"))?;
    }
    let num_events = ran?;
    say(&summary(o.size, o.iters, elapsed));

    let mut bad_pages = 0;
    if o.server.is_none() && o.validate {
        for i in (0..o.size as usize).step_by(page) {
            let mut b = [0u8];
            pp.mr.read_at(pp.payload_off + i, &mut b).map_err(lib_err("Couldn't read the buffer"))?;
            if b[0] != 0 {
                say(&format!("invalid data in page {}\n", i / page));
                bad_pages += 1;
            }
        }
    }
    cq.ack_events(num_events);
    drop(pp);
    drop(cq);
    if bad_pages > 0 {
        return Err(format!("-c: the received data is wrong in {bad_pages} page(s)"));
    }
    Ok(())
}

/// The exchange's state (rdma-core's loop variables), borrowed from
/// [`run`]: the data loop lives in [`DataPath::run`], one copy per mode.
struct DataPath<'a, 'w> {
    qps: &'a mut [QueuePair],
    srq: &'a mut Option<SharedReceiveQueue>,
    mr: &'a MemoryRegion,
    payload_off: usize,
    inline: bool,
    rx_depth: u32,
    cq: &'a mut CompletionQueue,
    o: &'a Opts,
    send_wr: &'a SendWr<'w>,
    recv_wr: &'a RecvWr<'w>,
    scratch: &'a mut [u8],
    /// Per QP: the work requests (send, receive) still to complete before
    /// the next send.
    pending: &'a mut [u64],
    wcs: &'a mut [Wc],
    /// Receives posted and not yet completed.
    routs: i64,
}

impl DataPath<'_, '_> {
    /// rdma-core's `while (rcnt < iters || scnt < iters)`: completions
    /// (after an event when `EVENTS`), a refill of the receives when they
    /// run low, the next send once a QP's send and receive both completed.
    /// `SRQ`: several QPs on one SRQ (the completion names its QP).
    /// Returns how many events it read (to acknowledge).
    #[inline(never)]
    fn run<const EVENTS: bool, const SRQ: bool>(&mut self, channel: Option<&CompletionChannel>) -> Result<u32, String> {
        let o = self.o;
        let iters = u64::from(o.iters);
        let nqp = self.qps.len();
        let refill_at = if SRQ { nqp as i64 } else { 1 };
        let rx_depth = i64::from(self.rx_depth);
        let cq_handle = self.cq.user_handle();
        // Event mode: the stall alarm's last look at the counts, and how
        // many alarms in a row found them unchanged.
        let (mut seen, mut quiet) = (0u64, 0u32);
        let (mut rcnt, mut scnt, mut num_events) = (0u64, 0u64, 0u32);
        // The loop's state in locals, not behind `self`: LLVM reloaded the
        // slices' lengths and stored `routs` through the pointer per CQE.
        let (qps, pending, wcs) = (&mut *self.qps, &mut *self.pending, &mut *self.wcs);
        // Without an SRQ there is one QP: its pending bits in a local, not
        // loaded and stored through the slice per completion.
        let mut pending0 = pending[0];
        let mut routs = self.routs;
        while rcnt < iters || scnt < iters {
            let ne = if let (true, Some(ch)) = (EVENTS, channel) {
                // One test for an event; a failure and a stall sorted out
                // of line.
                let ev = match hot::get_cq_event(ch) {
                    Ok(Some(ev)) => ev,
                    Err(e) if e.errno() == Some(rverbs::Errno::EINTR) => {
                        // The stall alarm (every quarter of --timeout) cut
                        // the wait short: four in a row with no completion
                        // in between are a stall.
                        (seen, quiet) = stall_check(o, (seen, quiet), rcnt + scnt, rcnt, scnt)?;
                        continue;
                    }
                    other => return Err(no_event(other)),
                };
                num_events += 1;
                if ev.cq_user_handle != cq_handle {
                    return Err(unknown_cq(ev));
                }
                hot::req_notify(self.cq).map_err(lib_err("Couldn't request CQ notification"))?;
                hot::poll(self.cq, wcs)
            } else {
                let mut n = hot::poll(self.cq, wcs);
                if n == 0 {
                    // The stall limit's clock is read once every 2^20 empty polls
                    // (an empty poll takes nanoseconds, also in a TCG guest: some
                    // milliseconds) and starts at the first such read: a wait
                    // shorter than that reads no clock, which in a guest without
                    // a vDSO clock (6.1's under TCG) is a syscall; every 2^16th
                    // poll made 182 clock_gettime syscalls in a -n 100 run there.
                    // A stall is reported at most one interval after the limit.
                    let mut since = None;
                    let mut spins = 0u32;
                    while n == 0 {
                        spins = spins.wrapping_add(1);
                        if spins % (1 << 20) == 0 && since.get_or_insert_with(Instant::now).elapsed() >= o.timeout {
                            return Err(stalled(o, rcnt, scnt, "completion"));
                        }
                        n = hot::poll(self.cq, wcs);
                    }
                }
                n
            };
            // One bounds check per poll, none per completion.
            for wc in &wcs[..ne] {
                if wc.status != WcStatus::SUCCESS {
                    return Err(failed_wc(wc));
                }
                let (wr_id, qp_num) = (wc.wr_id, wc.qp_num);
                let q = if SRQ {
                    qps.iter()
                        .position(|qp| qp.qp_num() == qp_num)
                        .ok_or_else(|| format!("Couldn't find QPN {qp_num:06x}"))?
                } else {
                    0
                };
                match wr_id {
                    SEND_WRID => scnt += 1,
                    RECV_WRID => {
                        routs -= 1;
                        if routs <= refill_at {
                            let n = (rx_depth - routs) as u32;
                            let posted = if SRQ {
                                post_recvs(qps, self.srq, self.recv_wr, n)
                            } else {
                                post_recvs_rq(&mut qps[0], self.recv_wr, n)
                            };
                            routs += i64::from(posted);
                            if routs < rx_depth {
                                return Err(format!("Couldn't post receive ({routs})"));
                            }
                        }
                        rcnt += 1;
                    }
                    other => return Err(format!("Completion for unknown wr_id {other}")),
                }
                let p = if SRQ { &mut pending[q] } else { &mut pending0 };
                *p &= !wr_id;
                if scnt < iters && *p == 0 {
                    *p = RECV_WRID | SEND_WRID;
                    send_on(&mut qps[q], self.send_wr, self.inline, self.mr, self.payload_off, self.scratch)?;
                }
            }
        }
        if !SRQ {
            pending[0] = pending0;
        }
        self.routs = routs;
        Ok(num_events)
    }
}

/// The error for a wait on the (blocking) channel that gave no event and
/// was not the stall alarm's.
#[cold]
fn no_event(got: rverbs::Result<Option<rverbs::CqEvent>>) -> String {
    match got {
        Err(e) => lib_err("Failed to get cq_event")(e),
        _ => "Failed to get cq_event: the channel is non-blocking".into(),
    }
}

/// How many stall alarms in event mode, with no completion in between,
/// make `--timeout`: the alarm comes every quarter of it.
const STALL_ALARMS: u32 = 4;

/// Event mode's stall alarm interrupted a wait: `(seen, quiet)`, the count
/// of completions at the last alarm and the alarms in a row that found it
/// unchanged, become the next pair, or the stall's error once `--timeout`
/// has passed with none (reported at most a quarter of it late).
#[cold]
fn stall_check(o: &Opts, (seen, quiet): (u64, u32), done: u64, rcnt: u64, scnt: u64) -> Result<(u64, u32), String> {
    if done != seen {
        return Ok((done, 0));
    }
    if quiet + 1 >= STALL_ALARMS {
        return Err(stalled(o, rcnt, scnt, "completion event"));
    }
    Ok((seen, quiet + 1))
}

#[cold]
fn unknown_cq(ev: rverbs::CqEvent) -> String {
    format!("CQ event for unknown CQ {:#x}", ev.cq_user_handle)
}

/// The error for a completion that failed, with a hint where the cause is usual.
#[cold]
fn failed_wc(wc: &Wc) -> String {
    let hint = match (wc.status, wc.wr_id) {
        (WcStatus::RETRY_EXC_ERR, _) => " (the peer's QP does not answer: is it still running?)",
        (WcStatus::RNR_RETRY_EXC_ERR, _) => " (the peer has no receive posted)",
        // rxe reports an oversized message as a QP operation error.
        (WcStatus::LOC_LEN_ERR | WcStatus::LOC_QP_OP_ERR, RECV_WRID) => {
            " (did the peer send more than -s bytes? give both sides the same -s)"
        }
        _ => "",
    };
    format!("Failed status {} ({}) for wr_id {}{hint}", wc.status, wc.status.0, wc.wr_id)
}

fn stalled(o: &Opts, rcnt: u64, scnt: u64, what: &str) -> String {
    format!(
        "no {what} for {} s after {scnt} of {} sends and {rcnt} of {} receives (is the peer still running? \
         --timeout sets the limit)",
        o.timeout.as_secs(),
        o.iters,
        o.iters
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    /// Event mode's stall alarm: four alarms in a row with no completion
    /// in between are a stall; any completion starts the count over.
    #[test]
    fn stall_alarms_count_quiet_quarters() {
        let o = parse_args(&args(&["--timeout", "8"])).unwrap();
        let mut st = (0, 0);
        for _ in 0..3 {
            st = stall_check(&o, st, 0, 0, 0).unwrap();
        }
        assert_eq!(st, (0, 3));
        let e = stall_check(&o, st, 0, 0, 0).unwrap_err();
        assert!(e.contains("no completion event for 8 s after 0 of 1000 sends"), "{e}");
        // Progress at the fourth alarm: not a stall, and three more quiet
        // ones are not either.
        st = stall_check(&o, st, 5, 3, 2).unwrap();
        assert_eq!(st, (5, 0));
        for _ in 0..3 {
            st = stall_check(&o, st, 5, 3, 2).unwrap();
        }
        assert!(stall_check(&o, st, 5, 3, 2).is_err());
    }

    #[test]
    fn defaults_match_rdma_core() {
        let o = parse_args(&[]).unwrap();
        assert_eq!(
            (o.mode, o.tcp_port, o.ib_port, o.size, o.mtu, o.rx_depth, o.iters, o.sl, o.events, o.gid_idx),
            (Mode::Rc, 18515, 1, 4096, Mtu::Mtu1024, 500, 1000, 0, false, None)
        );
        assert_eq!((o.validate, o.server, o.timeout), (false, None, Duration::from_secs(10)));
        assert_eq!(parse_args(&args(&["--ud"])).unwrap().size, 1024);
        let s = parse_args(&args(&["--srq"])).unwrap();
        assert_eq!((s.mode, s.size, s.num_qp), (Mode::Srq, 4096, 16));
    }

    #[test]
    fn options_like_getopt_long() {
        let o = parse_args(&args(&[
            "-p",
            "0x4000",
            "-drxe0",
            "-i",
            "1",
            "-s",
            "64",
            "-m",
            "2048",
            "-r",
            "10",
            "-n",
            "50",
            "-l",
            "3",
            "-ec",
            "-g",
            "1",
            "host.example",
            "--timeout=3",
        ]))
        .unwrap();
        assert_eq!(o.tcp_port, 0x4000);
        assert_eq!(o.ib_dev.as_deref(), Some("rxe0"));
        assert_eq!((o.size, o.mtu, o.rx_depth, o.iters, o.sl), (64, Mtu::Mtu2048, 10, 50, 3));
        assert!(o.events && o.validate);
        assert_eq!(o.gid_idx, Some(1));
        assert_eq!(o.server.as_deref(), Some("host.example"));
        assert_eq!(o.timeout, Duration::from_secs(3));
        let o = parse_args(&args(&["10.0.0.1", "--ib-dev", "mlx5_0", "--iters=7", "--gid", "-1", "-N"])).unwrap();
        assert_eq!(
            (o.server.as_deref(), o.ib_dev.as_deref(), o.iters, o.gid_idx),
            (Some("10.0.0.1"), Some("mlx5_0"), 7, None)
        );
        let o = parse_args(&args(&["--srq", "-q", "4", "--", "srv"])).unwrap();
        assert_eq!((o.num_qp, o.server.as_deref()), (4, Some("srv")));
        assert!(parse_args(&args(&["-h"])).unwrap().help);
    }

    #[test]
    fn bad_options_are_one_line_errors() {
        for (a, want) in [
            (&["-x"][..], "invalid option -- 'x'"),
            (&["--frob"][..], "unrecognized option '--frob'"),
            (&["--s"][..], "option '--s' is ambiguous"),
            (&["-p"][..], "option requires an argument -- 'p'"),
            (&["-p", "70000"][..], "invalid port '70000'"),
            (&["-p", "12x"][..], "invalid port '12x'"),
            (&["-m", "1000"][..], "invalid MTU '1000'"),
            (&["-i", "0"][..], "invalid IB port number '0'"),
            (&["-s", "0"][..], "invalid message size '0'"),
            (&["-n", "0"][..], "invalid iteration count '0'"),
            (&["-g", "256"][..], "invalid GID index '256'"),
            (&["-l", "16"][..], "invalid service level '16'"),
            (&["a", "b"][..], "unexpected argument 'b'"),
            (&["--ud", "--srq"][..], "--ud and --srq cannot be combined"),
            (&["--ud", "-m", "1024"][..], "-m/--mtu does not apply to --ud"),
            (&["-q", "2"][..], "-q/--num-qp needs --srq"),
            (&["--srq", "-q", "256"][..], "invalid number of QPs '256'"),
            (&["--srq", "-r", "4"][..], "rx_depth 4 is too small for 16 QPs"),
            (&["-t"][..], "-t/--ts (completion timestamps) is not supported"),
            (&["--events=1"][..], "option '--events' doesn't allow an argument"),
            (&["--timeout", "0"][..], "invalid timeout '0'"),
        ] {
            let e = parse_args(&args(a)).unwrap_err();
            assert!(e.starts_with(want), "{a:?}: {e}");
            assert!(!e.contains('\n'));
        }
        // The whole lines: no command prefix (cmd_pingpong adds it), the hint after.
        assert_eq!(
            parse_args(&args(&["-p"])).unwrap_err(),
            "option requires an argument -- 'p' (try 'rverbs pingpong --help')"
        );
        assert_eq!(
            parse_args(&args(&["a", "--", "b"])).unwrap_err(),
            "unexpected argument 'b' (try 'rverbs pingpong --help')"
        );
        assert_eq!(
            parse_args(&args(&["-m", "-1024"])).unwrap_err(),
            "invalid MTU '-1024' (expected 256, 512, 1024, 2048 or 4096)"
        );
    }

    /// The attributes of rdma-core's examples, spelled out (so a change of
    /// `ConnectOptions::default()` cannot silently change them).
    #[test]
    fn qp_attributes_are_rdma_cores() {
        let rc = connect_options(&parse_args(&args(&["-i", "2", "-m", "2048", "-l", "3", "-g", "1"])).unwrap());
        assert_eq!(
            (rc.port, rc.sgid_index, rc.access, rc.path_mtu, rc.sl),
            (2, Some(1), AccessFlags::empty(), Some(Mtu::Mtu2048), 3)
        );
        assert_eq!((rc.hop_limit, rc.traffic_class, rc.pkey_index), (1, 0, 0));
        assert_eq!((rc.timeout, rc.retry_cnt, rc.rnr_retry, rc.max_rd_atomic), (14, 7, 7, 1));
        assert_eq!((rc.min_rnr_timer, rc.max_dest_rd_atomic), (12, 1));
        let ud = connect_options(&parse_args(&args(&["--ud"])).unwrap());
        assert_eq!((ud.qkey, ud.hop_limit, ud.sgid_index), (0x1111_1111, 64, None));
    }

    #[test]
    fn garbage_from_the_peer_reads_as_before() {
        // The wording the interop tests (and users' scripts) look for.
        let e = Endpoint::from_text(&[b'?'; MSG_LEN]).unwrap_err();
        assert!(format!("the server sent a {}", e.message()).starts_with("the server sent a malformed address \"???"));
    }

    #[test]
    fn address_and_summary_lines() {
        let d = Endpoint {
            lid: 0,
            qpn: 0x11,
            psn: 0x6a5e4c,
            gid: Gid::parse("::ffff:192.168.77.1").unwrap(),
            memory: None,
        };
        assert_eq!(
            address_line("local address: ", &d, ','),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0x6a5e4c, GID ::ffff:192.168.77.1\n"
        );
        assert_eq!(
            address_line("remote address:", &d, ':'),
            "  remote address: LID 0x0000, QPN 0x000011, PSN 0x6a5e4c: GID ::ffff:192.168.77.1\n"
        );
        assert_eq!(
            summary(4096, 1000, Duration::from_micros(120_000)),
            "8192000 bytes in 0.12 seconds = 546.13 Mbit/sec\n1000 iters in 0.12 seconds = 120.00 usec/iter\n"
        );
        assert!(summary(1, 1, Duration::ZERO).contains("= inf Mbit/sec"));
    }

    #[test]
    fn srq_exchanges_256_messages() {
        let mine = [Endpoint { lid: 0, qpn: 0x20, psn: 1, ..Endpoint::default() }];
        let v = encode_all(Mode::Srq, &mine).unwrap();
        assert_eq!(v.len(), 256 * MSG_LEN);
        assert_eq!(&v[..11], b"0000:000020");
        assert_eq!(&v[MSG_LEN..MSG_LEN + 11], b"0000:000000");
        assert_eq!(encode_all(Mode::Rc, &mine).unwrap().len(), MSG_LEN);
    }
}
