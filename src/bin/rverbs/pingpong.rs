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
//!
//! The modules, in the order a run goes through them: [`options`] (the
//! command line), [`setup`] (the device, buffer, CQ, SRQ and QPs, and their
//! states), [`exchange`] (the TCP exchange), [`post`] and [`hot`] (posting,
//! and the data path's verbs, one never-inlined function each),
//! [`datapath`] (the loop), [`output`] (what it prints).

use std::io::{self, Write};
use std::time::Instant;

use rverbs::{LinkLayer, RecvWr, SendFlags, SendOp, SendWr, Wc};

use rverbs_providers::sys::event::{start_wait_interrupts, stop_wait_interrupts};

use super::{CliResult, Fail};

mod datapath;
mod exchange;
mod hot;
mod options;
mod output;
mod post;
mod setup;

use datapath::{DataPath, STALL_ALARMS};
use exchange::{client_exchange, server_exchange};
use options::{parse_args, Mode, Opts, USAGE};
use output::{address_line, say, summary};
use post::send_on;
use setup::init;

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

fn lib_err(what: &str) -> impl Fn(rverbs::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
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
