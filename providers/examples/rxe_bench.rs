//! Fast-path microbenchmark of the rxe provider against the mock kernel
//! (`--features mock`). Not a test: it prints numbers.
//!
//! ```text
//! cargo run --release -p rverbs-providers --example rxe_bench --features mock
//! rxe_bench                  # ns/op for post, poll-16, poll-1
//! rxe_bench count post N     # N posts, untimed (for callgrind / perf)
//! rxe_bench count poll16 N   # N CQEs polled in batches of 16
//! rxe_bench count poll1 N    # N CQEs polled one at a time
//! ```
//!
//! The measured functions are `bench_post`, `bench_poll` (never inlined):
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect=<fn>`
//! counts exactly their instructions. The mock kernel's work (consuming
//! WQEs, producing CQEs) happens outside them.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rverbs_providers::rxe::mock::{recv_cqe, MockKernel};
use rverbs_providers::rxe::{CqRing, Doorbell, Queue, SendLimits, SendRing, Transport};
use rverbs_providers::wr::{PostError, SendFlags, SendOp, SendWr, Sge, Wc};
use rverbs_providers::Errno;

/// SQ depth (slots; one stays empty) and slot size: 512 bytes is what rxe
/// allocates for 4 SGEs / 64 inline bytes.
const SQ_SLOTS: u32 = 256;
const SQ_LOG2: u32 = 9;
/// CQ depth and slot size (128: `rxe_cqe` on 64-bit kernels).
const CQ_SLOTS: u32 = 256;
const CQ_LOG2: u32 = 7;

/// The doorbell is excluded from the targets: it does nothing here.
struct NoopDoorbell;

impl Doorbell for NoopDoorbell {
    #[inline(always)]
    fn ring(&self) -> Result<(), Errno> {
        Ok(())
    }
}

/// One `SendRing::post` of one request: the measured unit.
#[inline(never)]
fn bench_post(s: &mut SendRing<NoopDoorbell>, wr: &SendWr<'_>) -> Result<(), PostError> {
    // SAFETY: the request is not INLINE, so post reads no buffer.
    unsafe { s.post(std::slice::from_ref(wr)) }
}

/// One `CqRing::poll` into `out`: the measured unit.
#[inline(never)]
fn bench_poll(c: &mut CqRing, out: &mut [Wc]) -> usize {
    c.poll(out)
}

fn send_ring() -> SendRing<NoopDoorbell> {
    let lim = SendLimits { transport: Transport::Rc, max_sge: 4, max_inline: 64 };
    SendRing::new(Queue::new_heap(SQ_SLOTS, SQ_LOG2), lim, NoopDoorbell)
}

/// Posts `n` one-SGE SENDs; the mock empties the ring whenever it fills.
/// Returns the time spent inside `bench_post` (the mock's work excluded).
fn run_post(n: u64) -> Duration {
    let mut s = send_ring();
    let mut k = MockKernel::new(Transport::Rc);
    let sge = [Sge { addr: 0x7f00_0000_1000, length: 64, lkey: 0x1234 }];
    let mut wr = SendWr { wr_id: 0, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None };
    let cap = u64::from(s.queue().capacity());
    let mut spent = Duration::ZERO;
    let mut done = 0;
    while done < n {
        k.discard_send(s.queue(), u32::MAX);
        let batch = cap.min(n - done);
        let t = Instant::now();
        for _ in 0..batch {
            wr.wr_id += 1;
            black_box(bench_post(&mut s, black_box(&wr))).expect("post");
        }
        spent += t.elapsed();
        done += batch;
    }
    spent
}

/// Polls `n` CQEs in calls of `batch`; the mock refills the CQ outside
/// the timed region. Returns the time spent inside `bench_poll`.
fn run_poll(n: u64, batch: usize) -> Duration {
    let mut c = CqRing::new(Queue::new_heap(CQ_SLOTS, CQ_LOG2));
    let mut k = MockKernel::new(Transport::Rc);
    let mut out = vec![Wc::default(); batch];
    let cap = u64::from(c.queue().capacity());
    let mut spent = Duration::ZERO;
    let mut done = 0;
    let mut id = 0;
    while done < n {
        let fill = cap.min(n - done);
        for _ in 0..fill {
            id += 1;
            assert!(k.produce_cqe(c.queue(), &recv_cqe(id, 1, 64, Some(id as u32))));
        }
        let mut got = 0;
        let t = Instant::now();
        while got < fill {
            got += black_box(bench_poll(&mut c, black_box(&mut out))) as u64;
        }
        spent += t.elapsed();
        done += fill;
    }
    spent
}

/// Best of `reps` runs of `n` operations, in ns per operation.
fn best(reps: usize, n: u64, f: impl Fn(u64) -> Duration) -> f64 {
    (0..reps).map(|_| f(n).as_nanos() as f64 / n as f64).fold(f64::INFINITY, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("count") {
        let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
        match args.get(1).map(String::as_str) {
            Some("post") => drop(run_post(n)),
            Some("poll16") => drop(run_poll(n, 16)),
            Some("poll1") => drop(run_poll(n, 1)),
            _ => eprintln!("usage: rxe_bench count post|poll16|poll1 N"),
        }
        return;
    }
    const N: u64 = 2_000_000;
    const REPS: usize = 7;
    // Warm up (page faults, frequency).
    run_post(N / 4);
    run_poll(N / 4, 16);
    let post = best(REPS, N, run_post);
    let poll16 = best(REPS, N, |n| run_poll(n, 16));
    let poll1 = best(REPS, N, |n| run_poll(n, 1));
    println!("rxe fast path on the mock kernel (best of {REPS} x {N} ops)");
    println!("  post, 1 SGE SEND, no-op doorbell : {post:6.2} ns/op   (target <= 50)");
    println!("  poll, batches of 16              : {poll16:6.2} ns/CQE  (target <= 20)");
    println!("  poll, batches of 1               : {poll1:6.2} ns/CQE  (target <= 20)");
}
