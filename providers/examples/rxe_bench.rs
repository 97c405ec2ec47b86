//! Fast-path microbenchmark of the rxe provider against the mock kernel
//! (`--features mock`). Not a test: it prints numbers. See
//! docs/PERFORMANCE.md for the method and the results.
//!
//! ```text
//! cargo run --release -p rverbs-providers --example rxe_bench --features mock
//! rxe_bench                 # ns/op for every case
//! rxe_bench count CASE N    # N operations of CASE, untimed (for callgrind)
//! ```
//!
//! Cases: `post` (one `SendRing::post` of one 1-SGE SEND per call),
//! `poll16` and `poll1` (`CqRing::poll` with room for 16 or 1 CQEs, each
//! with immediate data: the decode's longest path), `poll16plain`,
//! `poll1plain` and `poll2plain` (room for 16, 1 or 2, receives without
//! immediate data: the usual CQE, copied as it is). The
//! rings and the mock kernel come as the fixtures of
//! `rverbs_providers::rxe::bench`, which own both sides.
//!
//! Each case runs inside one never-inlined `loop_*` function, which calls
//! the ring method as an application's event loop would; the mock kernel's
//! work (consuming WQEs, producing CQEs) happens outside it, so
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='rxe_bench::loop_*'`
//! counts exactly the fast path plus a few instructions of loop.
//! `--toggle-collect` on the ring methods themselves
//! (`*SendRing*::post`, `*CqRing::poll`) counts only them, as long as
//! LLVM keeps them out of line.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rverbs_providers::rxe::bench::{recv_cqe, CqBench, SendBench};
use rverbs_providers::rxe::{Doorbell, SendLimits, Transport};
use rverbs_providers::wr::{SendWr, Sge, Wc};
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
    fn ring(&self, _qp_handle: u32) -> Result<(), Errno> {
        Ok(())
    }
}

/// `n` calls of `SendRing::post` with `wr` (a fresh wr_id each).
#[inline(never)]
fn loop_post(s: &mut SendBench<NoopDoorbell>, wr: &mut SendWr<'_>, n: u64) {
    for _ in 0..n {
        wr.wr_id += 1;
        // SAFETY: the request is not INLINE, so post reads no buffer.
        unsafe { s.post(std::slice::from_ref(wr)) }.expect("post");
    }
}

/// Calls `CqRing::poll` until `n` CQEs came back.
#[inline(never)]
fn loop_poll(c: &mut CqBench, out: &mut [Wc], n: u64) {
    let mut got = 0;
    while got < n {
        got += c.poll(out) as u64;
        black_box(&mut *out);
    }
}

/// Posts `n` one-SGE SENDs; the mock empties the ring whenever it fills.
/// Returns the time spent inside the loop (the mock's work excluded).
fn run_post(n: u64) -> Duration {
    let lim = SendLimits { transport: Transport::Rc, max_sge: 4, max_inline: 64 };
    let mut s = SendBench::new(SQ_SLOTS, SQ_LOG2, lim, NoopDoorbell);
    let sge = [Sge::new(0x7f00_0000_1000, 64, 0x1234)];
    // The builders are `const fn`s that fill the struct in place: the request
    // is the literal it replaced, byte for byte.
    let mut wr = SendWr::send(0, &sge).signaled();
    let cap = u64::from(s.capacity());
    let mut spent = Duration::ZERO;
    let mut done = 0;
    while done < n {
        s.consume_all();
        let batch = cap.min(n - done);
        let t = Instant::now();
        loop_post(&mut s, &mut wr, batch);
        spent += t.elapsed();
        done += batch;
    }
    spent
}

/// Polls `n` CQEs in calls of `batch`; the mock refills the CQ outside
/// the timed region. Returns the time spent inside the loop.
fn run_poll(n: u64, batch: usize) -> Duration {
    run_poll_of(n, batch, true)
}

/// [`run_poll`] of CQEs with immediate data (`imm`: the decode's longest
/// path) or without (an RC receive: the copy alone).
fn run_poll_of(n: u64, batch: usize, imm: bool) -> Duration {
    let mut c = CqBench::new(CQ_SLOTS, CQ_LOG2);
    let mut out = vec![Wc::default(); batch];
    let cap = u64::from(c.capacity());
    let mut spent = Duration::ZERO;
    let mut done = 0;
    let mut id = 0;
    while done < n {
        let fill = cap.min(n - done);
        for _ in 0..fill {
            id += 1;
            // A receive completion, with immediate data or without.
            assert!(c.produce(&recv_cqe(id, 1, 64, imm.then_some(id as u32))));
        }
        let t = Instant::now();
        loop_poll(&mut c, &mut out, fill);
        spent += t.elapsed();
        done += fill;
    }
    spent
}

fn run(case: &str, n: u64) -> Option<Duration> {
    Some(match case {
        "post" => run_post(n),
        "poll16" => run_poll(n, 16),
        "poll1" => run_poll(n, 1),
        "poll16plain" => run_poll_of(n, 16, false),
        "poll1plain" => run_poll_of(n, 1, false),
        "poll2plain" => run_poll_of(n, 2, false),
        _ => return None,
    })
}

const CASES: [(&str, &str, &str, u32); 6] = [
    ("post", "post, one 1-SGE SEND", "ns/post", 50),
    ("poll16", "poll, batches of 16", "ns/CQE ", 20),
    ("poll1", "poll, batches of 1", "ns/CQE ", 20),
    ("poll16plain", "poll, batches of 16, no immediate", "ns/CQE ", 20),
    ("poll1plain", "poll, batches of 1, no immediate", "ns/CQE ", 20),
    ("poll2plain", "poll, batches of 2, no immediate", "ns/CQE ", 20),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("count") {
        let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
        if run(args.get(1).map_or("", String::as_str), n).is_none() {
            eprintln!("usage: rxe_bench count post|poll16|poll16plain|poll1|poll1plain|poll2plain N");
            std::process::exit(2);
        }
        return;
    }
    const N: u64 = 2_000_000;
    const REPS: usize = 7;
    // Warm up (page faults, frequency).
    run_post(N / 4);
    run_poll(N / 4, 16);
    println!("rxe fast path on the mock kernel, no-op doorbell (best of {REPS} x {N} ops)");
    for (case, what, unit, target) in CASES {
        let ns = (0..REPS).map(|_| run(case, N).unwrap().as_nanos() as f64 / N as f64).fold(f64::INFINITY, f64::min);
        println!("  {what:24} {ns:6.2} {unit} (target <= {target})");
    }
}
