//! Many queues on one CQ or one completion channel, the scale bench's
//! `queues` section (`cargo xtask bench --only scale`, issue #35): does
//! a completion cost more to poll, or an event more to handle, as the
//! queues sharing them grow in number?
//!
//! ```text
//! scale_queues poll Q ROUNDS    # Q RC QPs whose send queues share one CQ
//! scale_queues events C ROUNDS  # C CQs (one QP each) on one completion channel
//! ```
//!
//! Q (or C) pairs of RC QPs are connected to each other on the first RDMA
//! device (loopback). Each round posts one signaled 8-byte RDMA WRITE on
//! every sender, then reaps the round's Q completions:
//!
//! * `poll`: the senders' one CQ, polled 16 at a time (`ibv_poll_cq`)
//!   in [`reap_poll`], after a pause long enough for the device to have
//!   written the completions, so that the count is of polls that find
//!   work. A poll that finds none ends the call: the program pauses
//!   200 µs outside it and calls again, so a late device adds one empty
//!   poll to the count per pause, not thousands of spins (the empty ones
//!   are counted and printed: `empty`);
//! * `events`: every sender has its own CQ on the one channel; in
//!   [`reap_events`] each completion is one event read from the channel
//!   (`ibv_get_cq_event`), looked up by its CQ's handle, acknowledged
//!   (`ibv_ack_cq_events`), the CQ re-armed (`ibv_req_notify_cq`) and
//!   polled, as rdma-core's examples do.
//!
//! The bench counts the instructions of the `reap_*` functions alone with
//! callgrind (`--toggle-collect=*scale_queues::reap*`) at two round counts:
//! the difference divided by the difference in completions is what one
//! completion costs, the posts and pauses left out. It prints
//! `SCALE queues poll|events rverbs Q rounds=… completions=… empty=…
//! events=… ns=…` (`ns`: time spent in the `reap_*` calls).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rverbs::{
    AccessFlags, CompletionChannel, CompletionQueue, ConnectOptions, CqInitAttr, MemoryRegion, QpInitAttr, QpType,
    QueuePair, RemoteMemory, SendWr, Wc,
};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A completion that never comes fails instead of hanging the bench.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The pause after a poll that found nothing (`poll`).
const RETRY: Duration = Duration::from_micros(200);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("scale_queues: {e}");
        std::process::exit(1);
    }
}

fn run(args: &[String]) -> Result {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let num = |what: &str, v: &str| -> Result<usize> {
        v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| format!("{what} {v:?}: not a positive number").into())
    };
    match a.as_slice() {
        ["poll", q, rounds] => poll(num("Q", q)?, num("ROUNDS", rounds)?),
        ["events", c, rounds] => events(num("C", c)?, num("ROUNDS", rounds)?),
        _ => Err(format!("usage: scale_queues poll Q ROUNDS | events C ROUNDS (got {args:?})").into()),
    }
}

/// What each round posts on: the senders, the receivers they write into
/// (kept alive), the regions.
struct Pairs {
    senders: Vec<QueuePair>,
    _receivers: Vec<QueuePair>,
    src: MemoryRegion,
    dst: MemoryRegion,
}

/// `q` connected pairs; sender `i` completes on `send_cq(i)`, every
/// receiver on `rcq` (an RDMA WRITE completes nothing there).
fn pairs<'a>(
    ctx: &rverbs::Context,
    q: usize,
    send_cq: impl Fn(usize) -> &'a CompletionQueue,
    rcq: &CompletionQueue,
) -> Result<Pairs> {
    let pd = ctx.alloc_pd()?;
    let src = pd.alloc_mr(8 * q, AccessFlags::LOCAL_WRITE)?;
    let dst = pd.alloc_mr(8 * q, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    let opts = ConnectOptions::default();
    let (mut senders, mut receivers) = (Vec::with_capacity(q), Vec::with_capacity(q));
    for i in 0..q {
        let mut init = QpInitAttr::new(QpType::Rc, send_cq(i));
        init.recv_cq = rcq;
        init.cap.max_send_wr = 4;
        let a = pd.create_qp(&init)?;
        let b = pd.create_qp(&QpInitAttr::new(QpType::Rc, rcq))?;
        a.connect_pair(&b, &opts)?;
        senders.push(a);
        receivers.push(b);
    }
    Ok(Pairs { senders, _receivers: receivers, src, dst })
}

impl Pairs {
    /// One signaled 8-byte WRITE on every sender.
    fn post_round(&mut self, round: usize) -> Result {
        for (i, qp) in self.senders.iter_mut().enumerate() {
            let to = RemoteMemory::of(&self.dst).at(8 * i as u64, 8)?;
            qp.post_send(&[SendWr::write(round as u64, &[self.src.sge(8 * i, 8)?], to).signaled()])?;
        }
        Ok(())
    }
}

fn first_context() -> Result<rverbs::Context> {
    Ok(rverbs::devices()?.into_iter().next().ok_or("no RDMA device")?.open()?)
}

/// A pause in which the device writes a round's `q` completions: rxe's
/// kernel worker wakes in a few ms under TCG and does a WRITE in about
/// 100 µs (1.1 ms left 56,000 empty polls a completion at one QP).
fn settle(q: usize) {
    std::thread::sleep(Duration::from_micros(5000 + 100 * q as u64));
}

/// `poll`: see the file's docs.
fn poll(q: usize, rounds: usize) -> Result {
    let ctx = first_context()?;
    let cqe = (2 * q).max(16) as u32;
    let cq = ctx.create_cq_with(&CqInitAttr { cqe, ..Default::default() })?;
    let rcq = ctx.create_cq(16)?;
    let mut p = pairs(&ctx, q, |_| &cq, &rcq)?;
    let mut cq = cq;
    let (mut empty, mut done, mut spent) = (0u64, 0u64, Duration::ZERO);
    // The completions' array, outside the counted function: a call's
    // count is its polls'.
    let mut wc = [Wc::default(); 16];
    for round in 0..rounds {
        p.post_round(round)?;
        settle(q);
        let (start, mut got) = (Instant::now(), 0);
        loop {
            let t = Instant::now();
            let r = reap_poll(&mut cq, &mut wc, q - got);
            spent += t.elapsed();
            let (e, n) = r?;
            empty += e;
            got += n;
            if got >= q {
                break;
            }
            if start.elapsed() > TIMEOUT {
                return Err(format!("{got} of {q} completions in {TIMEOUT:?}").into());
            }
            // The device is late: wait outside the counted function
            // rather than spin in it.
            std::thread::sleep(RETRY);
        }
        done += got as u64;
    }
    println!(
        "SCALE queues poll rverbs {q} rounds={rounds} completions={done} empty={empty} events=0 ns={}",
        spent.as_nanos()
    );
    Ok(())
}

/// Polls up to `want` successful completions, 16 at a time, until they
/// are in or a poll finds none; returns the empty polls (0 or 1) and the
/// completions.
#[inline(never)]
fn reap_poll(cq: &mut CompletionQueue, wc: &mut [Wc; 16], want: usize) -> Result<(u64, usize)> {
    let mut done = 0;
    while done < want {
        let n = cq.poll(wc);
        if n == 0 {
            return Ok((1, done));
        }
        for w in &wc[..n] {
            w.ok()?;
        }
        done += n;
    }
    Ok((0, done))
}

/// `events`: see the file's docs.
fn events(c: usize, rounds: usize) -> Result {
    let ctx = first_context()?;
    let channel = ctx.create_comp_channel()?;
    let mut cqs = Vec::with_capacity(c);
    for _ in 0..c {
        cqs.push(ctx.create_cq_with(&CqInitAttr { cqe: 4, channel: Some(&channel), ..Default::default() })?);
    }
    let rcq = ctx.create_cq(16)?;
    let mut p = pairs(&ctx, c, |i| &cqs[i], &rcq)?;
    // The application's map from an event's CQ handle to its CQ (what
    // rdma-core's `cq_context` pointer gives a C program).
    let by_handle: HashMap<u64, usize> = cqs.iter().enumerate().map(|(i, cq)| (cq.user_handle(), i)).collect();
    for cq in &mut cqs {
        cq.req_notify(false)?;
    }
    let (mut empty, mut done, mut evs, mut spent) = (0u64, 0u64, 0u64, Duration::ZERO);
    for round in 0..rounds {
        p.post_round(round)?;
        let t = Instant::now();
        let r = reap_events(&channel, &mut cqs, &by_handle, c);
        spent += t.elapsed();
        let (e, n, v) = r?;
        empty += e;
        done += n as u64;
        evs += v;
    }
    for cq in &cqs {
        // Every event read was acknowledged in reap_events.
        debug_assert!(cq.events_acked() as u64 <= evs);
    }
    println!(
        "SCALE queues events rverbs {c} rounds={rounds} completions={done} empty={empty} events={evs} ns={}",
        spent.as_nanos()
    );
    Ok(())
}

/// Reads events until `want` completions are in: each event's CQ is
/// found by its handle, acknowledged, re-armed and polled. Returns the
/// polls that found nothing, the completions and the events.
#[inline(never)]
fn reap_events(
    channel: &CompletionChannel,
    cqs: &mut [CompletionQueue],
    by_handle: &HashMap<u64, usize>,
    want: usize,
) -> Result<(u64, usize, u64)> {
    let mut wc = [Wc::default(); 16];
    let (mut empty, mut done, mut evs) = (0u64, 0, 0u64);
    while done < want {
        let ev = channel.wait_event(Some(TIMEOUT))?.ok_or_else(|| format!("{done} of {want} completions: no event"))?;
        evs += 1;
        let i = *by_handle.get(&ev.cq_user_handle).ok_or("an event for a CQ this program never made")?;
        let cq = &mut cqs[i];
        cq.ack_events(1);
        cq.req_notify(false)?;
        let n = cq.poll(&mut wc);
        if n == 0 {
            empty += 1;
        }
        for w in &wc[..n] {
            w.ok()?;
        }
        done += n;
    }
    Ok((empty, done, evs))
}
