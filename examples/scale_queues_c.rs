//! The scale bench's `queues` section through a C library (`cargo xtask
//! bench --only scale`, issue #35): the work of `examples/scale_queues.rs`
//! done as a C program does it, through the `ibv_*` functions of a
//! `libibverbs.so.1` it `dlopen`s. Run plainly it measures rdma-core's
//! library (and its rxe provider); with `LD_LIBRARY_PATH=/opt/rverbs/lib`
//! rverbs' C library. The first argument names the implementation in the
//! output line.
//!
//! ```text
//! scale_queues_c IMPL poll Q ROUNDS    # Q RC QPs whose send queues share one CQ
//! scale_queues_c IMPL events C ROUNDS  # C CQs (one QP each) on one completion channel
//! ```
//!
//! Q (or C) pairs of RC QPs are connected to each other on the first RDMA
//! device (loopback, RoCE GID index 1: `ibv_modify_qp` to INIT, RTR, RTS).
//! Each round posts one signaled 8-byte RDMA WRITE on every sender
//! (`ibv_post_send`), then reaps the round's completions:
//!
//! * `poll`: the senders' one CQ, polled 16 at a time (`ibv_poll_cq`) in
//!   [`reap_poll`], after the same pause as the Rust program's, and again
//!   after a further pause each time a poll finds nothing;
//! * `events`: every sender has its own CQ on the one channel; in
//!   [`reap_events`] each completion is one event: `poll()` on the
//!   channel's fd (a timeout, as the Rust program's `wait_event` has),
//!   `ibv_get_cq_event`, the CQ's index from its `cq_context`,
//!   `ibv_ack_cq_events`, `ibv_req_notify_cq` and `ibv_poll_cq`.
//!
//! `ibv_post_send`, `ibv_poll_cq` and `ibv_req_notify_cq` are `static
//! inline` in `verbs.h`: calls through the context's `ops`, as a compiled C
//! program makes them. The structures and the `dlopen` are
//! [`c_verbs`]'.
//! It prints `SCALE queues poll|events IMPL Q rounds=… completions=…
//! empty=… events=… ns=…`, as `scale_queues` does.

use core::ffi::{c_int, c_uint};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use nix::libc;

mod c_verbs;
use c_verbs::{
    errno, ok, ok0, AhAttr, Devices, GlobalRoute, Library, QpAttr, QpCap, QpInitAttr, Result, SendWr, Sge, Wc, P,
};

/// A completion that never comes fails instead of hanging the bench.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The pause after a poll that found nothing (`poll`), as `scale_queues`'.
const RETRY: Duration = Duration::from_micros(200);

/// Offsets in `struct ibv_context` of `ops.poll_cq`, `ops.req_notify_cq`
/// and `ops.post_send` (`ops` at 8, the functions its 12th, 13th and 26th
/// pointers); in `struct ibv_mr` of `lkey` and `rkey`; in `struct ibv_qp`
/// of `qp_num`; in `struct ibv_comp_channel` of `fd`.
const CTX_POLL_CQ: usize = 96;
const CTX_REQ_NOTIFY_CQ: usize = 104;
const CTX_POST_SEND: usize = 208;
const MR_LKEY: usize = 36;
const MR_RKEY: usize = 40;
const QP_NUM: usize = 52;
const CHANNEL_FD: usize = 8;

const IBV_QPT_RC: u32 = 2;
const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
const IBV_ACCESS_REMOTE_WRITE: c_int = 2;
const IBV_WR_RDMA_WRITE: u32 = 0;
const IBV_SEND_SIGNALED: c_uint = 2;
const IBV_MTU_1024: u32 = 3;
const QPS_INIT: u32 = 1;
const QPS_RTR: u32 = 2;
const QPS_RTS: u32 = 3;
const QP_STATE: c_int = 1;
const QP_ACCESS_FLAGS: c_int = 1 << 3;
const QP_PKEY_INDEX: c_int = 1 << 4;
const QP_PORT: c_int = 1 << 5;
const QP_AV: c_int = 1 << 7;
const QP_PATH_MTU: c_int = 1 << 8;
const QP_TIMEOUT: c_int = 1 << 9;
const QP_RETRY_CNT: c_int = 1 << 10;
const QP_RNR_RETRY: c_int = 1 << 11;
const QP_RQ_PSN: c_int = 1 << 12;
const QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
const QP_MIN_RNR_TIMER: c_int = 1 << 15;
const QP_SQ_PSN: c_int = 1 << 16;
const QP_DEST_QPN: c_int = 1 << 20;
const QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
/// The RoCE v2 GID of the device's IPv4 address (as the bench's `-x 1`).
const GID_INDEX: c_int = 1;

type PollCq = unsafe extern "C" fn(P, c_int, *mut Wc) -> c_int;
type ReqNotifyCq = unsafe extern "C" fn(P, c_int) -> c_int;
type PostSend = unsafe extern "C" fn(P, *mut SendWr, *mut *mut SendWr) -> c_int;

/// The exported `ibv_*` functions used, from the `dlopen`ed library.
struct Lib {
    dev: Devices,
    alloc_pd: unsafe extern "C" fn(P) -> P,
    reg_mr: unsafe extern "C" fn(P, P, usize, c_int) -> P,
    create_comp_channel: unsafe extern "C" fn(P) -> P,
    create_cq: unsafe extern "C" fn(P, c_int, P, P, c_int) -> P,
    create_qp: unsafe extern "C" fn(P, *mut QpInitAttr) -> P,
    modify_qp: unsafe extern "C" fn(P, *mut QpAttr, c_int) -> c_int,
    query_gid: unsafe extern "C" fn(P, u8, c_int, *mut [u8; 16]) -> c_int,
    get_cq_event: unsafe extern "C" fn(P, *mut P, *mut P) -> c_int,
    ack_cq_events: unsafe extern "C" fn(P, c_uint),
}

/// `libibverbs.so.1` as the loader finds it (`LD_LIBRARY_PATH` picks rverbs').
fn load() -> Result<Lib> {
    let h = Library::open()?;
    // SAFETY: each type is that name's C prototype in verbs.h 44.
    unsafe {
        Ok(Lib {
            dev: h.devices()?,
            alloc_pd: h.sym("ibv_alloc_pd")?,
            reg_mr: h.sym("ibv_reg_mr")?,
            create_comp_channel: h.sym("ibv_create_comp_channel")?,
            create_cq: h.sym("ibv_create_cq")?,
            create_qp: h.sym("ibv_create_qp")?,
            modify_qp: h.sym("ibv_modify_qp")?,
            query_gid: h.sym("ibv_query_gid")?,
            get_cq_event: h.sym("ibv_get_cq_event")?,
            ack_cq_events: h.sym("ibv_ack_cq_events")?,
        })
    }
}

/// Reads the `T` at `off` bytes into the C object `p`.
///
/// # Safety
/// `p` points to a live object of the library with a `T` at `off`.
unsafe fn field<T: Copy>(p: P, off: usize) -> T {
    // SAFETY: the caller's contract.
    unsafe { p.cast::<u8>().add(off).cast::<T>().read_unaligned() }
}

/// The inline verbs of `verbs.h`: the context's `ops` functions.
#[derive(Clone, Copy)]
struct Ops {
    poll_cq: PollCq,
    req_notify_cq: ReqNotifyCq,
    post_send: PostSend,
}

impl Ops {
    /// # Safety
    /// `ctx` is an open `struct ibv_context` of the library.
    unsafe fn of(ctx: P) -> Result<Ops> {
        // SAFETY: the caller's contract; the offsets are verbs.h 44's.
        let (a, b, c): (P, P, P) =
            unsafe { (field(ctx, CTX_POLL_CQ), field(ctx, CTX_REQ_NOTIFY_CQ), field(ctx, CTX_POST_SEND)) };
        if a.is_null() || b.is_null() || c.is_null() {
            return Err("the context's ops lack poll_cq, req_notify_cq or post_send".into());
        }
        // SAFETY: non-null function pointers of these C types (verbs.h).
        unsafe {
            Ok(Ops {
                poll_cq: core::mem::transmute::<P, PollCq>(a),
                req_notify_cq: core::mem::transmute::<P, ReqNotifyCq>(b),
                post_send: core::mem::transmute::<P, PostSend>(c),
            })
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let num = |what: &str, v: &str| -> Result<usize> {
        v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| format!("{what} {v:?}: not a positive number"))
    };
    let r = match a.as_slice() {
        [imp, mode @ ("poll" | "events"), n, rounds] => {
            num("N", n).and_then(|n| Ok((n, num("ROUNDS", rounds)?))).and_then(|(n, r)| run(imp, mode, n, r))
        }
        _ => Err("usage: scale_queues_c IMPL poll Q ROUNDS | scale_queues_c IMPL events C ROUNDS".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale_queues_c {}: {e}", a.join(" "));
            ExitCode::FAILURE
        }
    }
}

/// The device, the pairs and what each round posts.
struct Setup {
    ops: Ops,
    senders: Vec<P>,
    src: Vec<u8>,
    src_lkey: u32,
    dst_addr: u64,
    dst_rkey: u32,
}

impl Setup {
    /// One signaled 8-byte WRITE on every sender (`ibv_post_send`).
    fn post_round(&mut self, round: usize) -> Result {
        let base = self.src.as_ptr() as u64;
        for (i, &qp) in self.senders.iter().enumerate() {
            let mut sge = Sge { addr: base + 8 * i as u64, length: 8, lkey: self.src_lkey };
            let mut wr = SendWr {
                wr_id: round as u64,
                next: core::ptr::null_mut(),
                sg_list: &mut sge,
                num_sge: 1,
                opcode: IBV_WR_RDMA_WRITE,
                send_flags: IBV_SEND_SIGNALED,
                imm_data: 0,
                remote_addr: self.dst_addr + 8 * i as u64,
                rkey: self.dst_rkey,
                _pad: 0,
                _rest: [0; 9],
            };
            let mut bad = core::ptr::null_mut();
            // SAFETY: `qp` is a live RC QP in RTS; `wr` and its SGE live
            // across the call; the SGE is inside the registered `src`.
            ok0(unsafe { (self.ops.post_send)(qp, &mut wr, &mut bad) }, "ibv_post_send")?;
        }
        Ok(())
    }
}

/// Moves `qp` to RTS, connected to the QP numbered `dest` on the same port.
fn connect(lib: &Lib, qp: P, dest: u32, gid: [u8; 16]) -> Result {
    let mut a = QpAttr {
        qp_state: QPS_INIT,
        port_num: 1,
        qp_access_flags: (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) as c_uint,
        ..Default::default()
    };
    let mask = QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS;
    // SAFETY: a live QP; `a` is an initialised ibv_qp_attr.
    ok0(unsafe { (lib.modify_qp)(qp, &mut a, mask) }, "ibv_modify_qp to INIT")?;
    let mut a = QpAttr {
        qp_state: QPS_RTR,
        path_mtu: IBV_MTU_1024,
        dest_qp_num: dest,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ah_attr: AhAttr {
            grh: GlobalRoute { dgid: gid, sgid_index: GID_INDEX as u8, hop_limit: 1, ..Default::default() },
            is_global: 1,
            port_num: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let mask = QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER;
    // SAFETY: as above.
    ok0(unsafe { (lib.modify_qp)(qp, &mut a, mask) }, "ibv_modify_qp to RTR")?;
    let mut a =
        QpAttr { qp_state: QPS_RTS, timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 1, ..Default::default() };
    let mask = QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC;
    // SAFETY: as above.
    ok0(unsafe { (lib.modify_qp)(qp, &mut a, mask) }, "ibv_modify_qp to RTS")
}

/// The first device opened, its first PD, `n` connected pairs whose
/// sender `i` completes on `send_cq(i)` and whose receivers on `rcq`, and
/// the two registered buffers. Nothing is destroyed: the process exits.
fn setup(lib: &Lib, ctx: P, n: usize, send_cq: impl Fn(usize) -> P, rcq: P) -> Result<Setup> {
    // SAFETY: `ctx` is an open context.
    let ops = unsafe { Ops::of(ctx)? };
    // SAFETY: as above.
    let pd = ok(unsafe { (lib.alloc_pd)(ctx) }, "ibv_alloc_pd")?;
    let mut gid = [0u8; 16];
    // SAFETY: `gid` is 16 writable bytes (`union ibv_gid`).
    ok0(unsafe { (lib.query_gid)(ctx, 1, GID_INDEX, &mut gid) }, "ibv_query_gid")?;
    let mut src = vec![0u8; 8 * n];
    // The destination lives as long as the process (the MR is never
    // deregistered).
    let dst: &'static mut [u8] = Vec::leak(vec![0u8; 8 * n]);
    // SAFETY: `src` is kept in the returned Setup, `dst` leaked: both
    // outlive their registrations.
    let smr =
        ok(unsafe { (lib.reg_mr)(pd, src.as_mut_ptr().cast(), src.len(), IBV_ACCESS_LOCAL_WRITE) }, "ibv_reg_mr")?;
    let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    // SAFETY: as above.
    let dmr = ok(unsafe { (lib.reg_mr)(pd, dst.as_mut_ptr().cast(), dst.len(), access) }, "ibv_reg_mr")?;
    let mut senders = Vec::with_capacity(n);
    for i in 0..n {
        let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let mut a = QpInitAttr {
            qp_context: core::ptr::null_mut(),
            send_cq: send_cq(i),
            recv_cq: rcq,
            srq: core::ptr::null_mut(),
            cap,
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: `pd` and the CQs are live; `a` is an initialised attr.
        let s = ok(unsafe { (lib.create_qp)(pd, &mut a) }, "ibv_create_qp")?;
        a.send_cq = rcq;
        // SAFETY: as above.
        let r = ok(unsafe { (lib.create_qp)(pd, &mut a) }, "ibv_create_qp")?;
        // SAFETY: live QPs (`qp_num` of `struct ibv_qp`).
        let (sn, rn): (u32, u32) = unsafe { (field(s, QP_NUM), field(r, QP_NUM)) };
        connect(lib, s, rn, gid)?;
        connect(lib, r, sn, gid)?;
        senders.push(s);
    }
    // SAFETY: live MRs (`lkey`/`rkey` of `struct ibv_mr`).
    let (src_lkey, dst_rkey) = unsafe { (field(smr, MR_LKEY), field(dmr, MR_RKEY)) };
    Ok(Setup { ops, senders, src, src_lkey, dst_addr: dst.as_ptr() as u64, dst_rkey })
}

/// The first device, opened.
fn open(lib: &Lib) -> Result<P> {
    lib.dev.open_first()
}

/// A CQ of `cqe` entries on `channel` (or none), its `cq_context` `index`.
fn create_cq(lib: &Lib, ctx: P, cqe: usize, channel: P, index: usize) -> Result<P> {
    let cqe = c_int::try_from(cqe).map_err(|_| format!("{cqe} CQEs"))?;
    // SAFETY: `ctx` is open; `channel` is null or a live channel of it;
    // the context pointer is only handed back.
    ok(unsafe { (lib.create_cq)(ctx, cqe, index as P, channel, 0) }, "ibv_create_cq")
}

/// Same pause as `scale_queues`' `settle`.
fn settle(q: usize) {
    std::thread::sleep(Duration::from_micros(5000 + 100 * q as u64));
}

fn run(imp: &str, mode: &str, n: usize, rounds: usize) -> Result {
    let lib = load()?;
    let ctx = open(&lib)?;
    let rcq = create_cq(&lib, ctx, 16, core::ptr::null_mut(), 0)?;
    let (mut empty, mut done, mut evs, mut spent) = (0u64, 0u64, 0u64, Duration::ZERO);
    if mode == "poll" {
        let cq = create_cq(&lib, ctx, (2 * n).max(16), core::ptr::null_mut(), 0)?;
        let mut s = setup(&lib, ctx, n, |_| cq, rcq)?;
        // As `scale_queues`: the array outside the counted function.
        let mut wc = [Wc::default(); 16];
        for round in 0..rounds {
            s.post_round(round)?;
            settle(n);
            let (start, mut got) = (Instant::now(), 0);
            loop {
                let t = Instant::now();
                let r = reap_poll(s.ops, cq, &mut wc, n - got);
                spent += t.elapsed();
                let (e, c) = r?;
                empty += e;
                got += c;
                if got >= n {
                    break;
                }
                if start.elapsed() > TIMEOUT {
                    return Err(format!("{got} of {n} completions in {TIMEOUT:?}"));
                }
                // As `scale_queues`: wait outside the counted function.
                std::thread::sleep(RETRY);
            }
            done += got as u64;
        }
    } else {
        // SAFETY: `ctx` is open.
        let channel = ok(unsafe { (lib.create_comp_channel)(ctx) }, "ibv_create_comp_channel")?;
        let cqs = (0..n).map(|i| create_cq(&lib, ctx, 4, channel, i)).collect::<Result<Vec<P>>>()?;
        let mut s = setup(&lib, ctx, n, |i| cqs[i], rcq)?;
        for &cq in &cqs {
            // SAFETY: a live CQ on the channel.
            ok0(unsafe { (s.ops.req_notify_cq)(cq, 0) }, "ibv_req_notify_cq")?;
        }
        for round in 0..rounds {
            s.post_round(round)?;
            let t = Instant::now();
            let r = reap_events(&lib, s.ops, channel, &cqs, n);
            spent += t.elapsed();
            let (e, c, v) = r?;
            empty += e;
            done += c as u64;
            evs += v;
        }
    }
    println!(
        "SCALE queues {mode} {imp} {n} rounds={rounds} completions={done} empty={empty} events={evs} ns={}",
        spent.as_nanos()
    );
    Ok(())
}

/// A completion's status, as an error naming it.
fn check(w: &Wc) -> Result {
    if w.status == 0 {
        Ok(())
    } else {
        Err(format!("completion wr_id {} on QP {:#x}: status {}", w.wr_id, w.qp_num, w.status))
    }
}

/// Polls up to `want` successful completions, 16 at a time
/// (`ibv_poll_cq`), until they are in or a poll finds none; returns the
/// empty polls (0 or 1) and the completions.
#[inline(never)]
fn reap_poll(ops: Ops, cq: P, wc: &mut [Wc; 16], want: usize) -> Result<(u64, usize)> {
    let mut done = 0;
    while done < want {
        // SAFETY: a live CQ; `wc` has room for 16 entries.
        let n = unsafe { (ops.poll_cq)(cq, 16, wc.as_mut_ptr()) };
        let n = usize::try_from(n).map_err(|_| format!("ibv_poll_cq failed: {n}"))?;
        if n == 0 {
            return Ok((1, done));
        }
        wc[..n].iter().try_for_each(check)?;
        done += n;
    }
    Ok((0, done))
}

/// Reads events until `want` completions are in: `poll()` on the channel,
/// `ibv_get_cq_event`, the CQ's index from its `cq_context`,
/// `ibv_ack_cq_events`, `ibv_req_notify_cq`, `ibv_poll_cq`. Returns the
/// polls that found nothing, the completions and the events.
#[inline(never)]
fn reap_events(lib: &Lib, ops: Ops, channel: P, cqs: &[P], want: usize) -> Result<(u64, usize, u64)> {
    let mut wc = [Wc::default(); 16];
    let (mut empty, mut done, mut evs) = (0u64, 0, 0u64);
    // SAFETY: a live channel (`fd` of `struct ibv_comp_channel`).
    let fd: c_int = unsafe { field(channel, CHANNEL_FD) };
    while done < want {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd of ours.
        let rc = unsafe { libc::poll(&mut pfd, 1, TIMEOUT.as_millis() as c_int) };
        if rc == 0 {
            return Err(format!("{done} of {want} completions: no event in {TIMEOUT:?}"));
        }
        if rc < 0 {
            return Err(format!("poll() of the completion channel failed: {}", errno()));
        }
        let (mut cq, mut cq_ctx) = (core::ptr::null_mut(), core::ptr::null_mut());
        // SAFETY: a live channel; two out-pointers of ours.
        ok0(unsafe { (lib.get_cq_event)(channel, &mut cq, &mut cq_ctx) }, "ibv_get_cq_event")?;
        evs += 1;
        let i = cq_ctx as usize;
        if cqs.get(i) != Some(&cq) {
            return Err("an event for a CQ this program never made".into());
        }
        // SAFETY: `cq` is ours (checked above), its one event acknowledged
        // once, then re-armed and polled into `wc` (16 entries).
        let n = unsafe {
            (lib.ack_cq_events)(cq, 1);
            ok0((ops.req_notify_cq)(cq, 0), "ibv_req_notify_cq")?;
            (ops.poll_cq)(cq, 16, wc.as_mut_ptr())
        };
        let n = usize::try_from(n).map_err(|_| format!("ibv_poll_cq failed: {n}"))?;
        if n == 0 {
            empty += 1;
        }
        wc[..n].iter().try_for_each(check)?;
        done += n;
    }
    Ok((empty, done, evs))
}
