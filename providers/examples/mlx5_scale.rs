//! The scale bench's many-QP case on the HCA model (`--features mock`,
//! issue #35): one mlx5 CQ under 1, 16, 256 RC QPs whose completions
//! alternate between the QPs, so that every CQE's QP is looked up in the
//! context's registry (the CQ's cached last QP misses). Not a test: it
//! prints numbers.
//!
//! ```text
//! cargo run --release -p rverbs-providers --example mlx5_scale --features mock
//! mlx5_scale                 # ns/CQE at 1, 16, 256 QPs, batches of 16
//! mlx5_scale count QPS N     # N CQEs polled from QPS QPs, untimed (callgrind)
//! ```
//!
//! The measured function is `bench_poll_many` (never inlined): `valgrind
//! --tool=callgrind --collect-atstart=no --toggle-collect='*bench_poll_many*'
//! mlx5_scale count 256 200000` minus the same at 100000, over 100000, is
//! one CQE's instructions.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rverbs_providers::mlx5::bench::ManyQpPollBench;
use rverbs_providers::wr::Wc;

/// Rounds (completions per QP) one fill leaves in the CQ.
const ROUNDS: u32 = 16;
/// The QP counts measured.
const QPS: [u32; 3] = [1, 16, 256];

/// One `Cq::poll` into `out`: the measured unit.
#[inline(never)]
fn bench_poll_many(cq: &mut ManyQpPollBench, out: &mut [Wc]) -> usize {
    cq.poll(out)
}

/// Polls `n` CQEs from `qps` QPs in batches of 16; the model produces
/// them outside the timed region. Returns the time spent polling.
fn run(qps: u32, n: u64) -> Duration {
    let rounds = ROUNDS.min(u32::try_from(n.div_ceil(u64::from(qps))).unwrap_or(ROUNDS)).max(1);
    let mut cq = ManyQpPollBench::new(qps, rounds);
    let mut out = [Wc::default(); 16];
    let mut spent = Duration::ZERO;
    let (mut done, mut first) = (0u64, 0u64);
    while done < n {
        cq.fill(first, rounds);
        first += u64::from(rounds);
        let fill = u64::from(rounds) * u64::from(qps);
        let mut got = 0;
        let t = Instant::now();
        while got < fill {
            got += black_box(bench_poll_many(&mut cq, black_box(&mut out))) as u64;
        }
        spent += t.elapsed();
        done += fill;
    }
    cq.assert_clean();
    spent
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("count") {
        let qps = args.get(1).and_then(|s| s.parse::<u32>().ok()).filter(|&q| q > 0);
        let n = args.get(2).and_then(|s| s.parse::<u64>().ok());
        match (qps, n) {
            (Some(q), Some(n)) => drop(run(q, n)),
            _ => {
                eprintln!("usage: mlx5_scale count QPS N (QPS at least 1)");
                std::process::exit(2);
            }
        }
        return;
    }
    const N: u64 = 1 << 20;
    println!("mlx5 poll on the HCA model, one CQ under many RC QPs (best of 3, batches of 16)");
    for q in QPS {
        let ns = (0..3).map(|_| run(q, N).as_nanos() as f64 / N as f64).fold(f64::INFINITY, f64::min);
        println!("  {q:3} QPs : {ns:6.2} ns/CQE");
    }
    println!(
        "instruction counts: valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*bench_poll_many*' ..."
    );
}
