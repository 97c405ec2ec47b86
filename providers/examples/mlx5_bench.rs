//! Fast-path microbenchmark of the mlx5 provider against the HCA model
//! (`--features mock`). Not a test: it prints numbers.
//!
//! ```text
//! cargo run --release -p rverbs-providers --example mlx5_bench --features mock
//! mlx5_bench                   # ns/op for post, poll-16, poll-1, poll_one
//! mlx5_bench count post N      # N posts, untimed (for callgrind / perf)
//! mlx5_bench count poll16 N    # N CQEs polled in batches of 16
//! mlx5_bench count poll1 N     # N CQEs polled one at a time (`poll`, 1-entry slice)
//! mlx5_bench count poll_one N  # N CQEs polled one at a time (`poll_one`)
//! ```
//!
//! The measured functions are `bench_post` and `bench_poll` (never
//! inlined): `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect='*bench_post*'` counts exactly their instructions. The
//! queues and the HCA model come as the fixtures of
//! `rverbs_providers::mlx5::bench`, which own both sides.
//!
//! - `bench_post`: one `SendQueue::post` of one RC SEND with one SGE,
//!   signaled, through `NoopMmio`: the UAR store (BlueFlame copy or 8-byte
//!   doorbell) and its two `sfence`s compile away; the doorbell *record*
//!   store and the BlueFlame-half flip are counted. Requests are retired
//!   outside the measured function.
//! - `bench_poll`: one `Cq::poll` into a slice; the CQEs (RDMA WRITE
//!   completions) are produced by the model outside the measured function.
//! - `bench_poll_one`: one `Cq::poll_one` into one `Wc`, CQEs as above.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rverbs_providers::mlx5::bench::{PollBench, PostBench};
use rverbs_providers::wr::{PostError, SendWr, Sge, Wc};

/// Send queue depth (requests; one WQEBB each) and CQ depth.
const SQ_WR: u32 = 256;
const CQ_DEPTH: u32 = 255;

/// One `SendQueue::post` of one request: the measured unit.
#[inline(never)]
fn bench_post(qp: &mut PostBench, wr: &SendWr<'_>) -> Result<(), PostError> {
    // SAFETY: the request is not INLINE, so post reads no buffer.
    unsafe { qp.post(std::slice::from_ref(wr)) }
}

/// One `Cq::poll` into `out`: the measured unit.
#[inline(never)]
fn bench_poll(cq: &mut PollBench, out: &mut [Wc]) -> usize {
    cq.poll(out)
}

/// One `Cq::poll_one` into `w`: the measured unit.
#[inline(never)]
fn bench_poll_one(cq: &mut PollBench, w: &mut Wc) -> bool {
    cq.poll_one(w)
}

/// Posts `n` one-SGE SENDs; retires them whenever the queue fills.
/// Returns the time spent inside `bench_post`.
fn run_post(n: u64) -> Duration {
    let mut qp = PostBench::new(SQ_WR, CQ_DEPTH);
    let sge = [Sge::new(0x7f00_0000_1000, 64, 0x1234)];
    // Built once, as the literal it replaced (the builders are `const fn`s).
    let mut wr = SendWr::send(0, &sge).signaled();
    let cap = u64::from(qp.max_post());
    let mut spent = Duration::ZERO;
    let mut done = 0;
    while done < n {
        qp.retire_all();
        let batch = cap.min(n - done);
        let t = Instant::now();
        for _ in 0..batch {
            wr.wr_id += 1;
            black_box(bench_post(&mut qp, black_box(&wr))).expect("post");
        }
        spent += t.elapsed();
        done += batch;
    }
    spent
}

/// Polls `n` CQEs in calls of `batch` (0: `poll_one`); the model produces
/// them (RDMA WRITE completions) outside the timed region.
fn run_poll(n: u64, batch: usize) -> Duration {
    let mut cq = PollBench::new(SQ_WR, CQ_DEPTH);
    let mut out = vec![Wc::default(); batch.max(1)];
    let fill_max = cq.fill_max();
    let mut spent = Duration::ZERO;
    let mut done = 0;
    while done < n {
        let fill = fill_max.min(n - done);
        cq.fill(done, fill);
        let mut got = 0;
        let t = Instant::now();
        if batch == 0 {
            // `poll_one`.
            while got < fill {
                got += u64::from(black_box(bench_poll_one(&mut cq, black_box(&mut out[0]))));
            }
        }
        while got < fill {
            got += black_box(bench_poll(&mut cq, black_box(&mut out))) as u64;
        }
        spent += t.elapsed();
        done += fill;
    }
    cq.assert_clean();
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
            Some("poll_one") => drop(run_poll(n, 0)),
            _ => eprintln!("usage: mlx5_bench count post|poll16|poll1|poll_one N"),
        }
        return;
    }
    const N: u64 = 1_000_000;
    const REPS: usize = 5;
    run_post(N / 4);
    run_poll(N / 8, 16);
    let post = best(REPS, N, run_post);
    let poll16 = best(REPS, N / 4, |n| run_poll(n, 16));
    let poll1 = best(REPS, N / 4, |n| run_poll(n, 1));
    let poll_one = best(REPS, N / 4, |n| run_poll(n, 0));
    println!("mlx5 fast path on the HCA model (best of {REPS})");
    println!("  post, 1 SGE SEND, no UAR store : {post:6.2} ns/op");
    println!("  poll, batches of 16            : {poll16:6.2} ns/CQE");
    println!("  poll, batches of 1             : {poll1:6.2} ns/CQE");
    println!("  poll_one                       : {poll_one:6.2} ns/CQE");
    println!("instruction counts: valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*bench_post*' ...");
}
