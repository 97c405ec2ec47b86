//! The timings run by run: each run's (rdma-core, rverbs) pair, how
//! often rverbs was ahead, the geometric mean of the ratios and a sign
//! test.

use crate::bench::{CAPI_PERFTEST, SIZES, UD_SIZES};

use super::report::{fmt, size_text, Report};

/// Runs compared pairwise: (rdma-core, rverbs) figures of the same run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pairs {
    /// Pairs compared.
    pub n: usize,
    /// Pairs in which rverbs was ahead (lower, or higher for a bandwidth).
    pub wins: usize,
    /// Pairs with equal figures (left out of the sign test).
    pub ties: usize,
    /// Geometric mean of rverbs / rdma-core over the pairs.
    pub geo_mean: Option<f64>,
}

impl Pairs {
    pub(crate) fn of(pairs: &[(f64, f64)], lower_is_better: bool) -> Pairs {
        let ok: Vec<(f64, f64)> = pairs.iter().copied().filter(|(a, b)| *a > 0.0 && *b > 0.0).collect();
        let ahead = |(a, b): &(f64, f64)| if lower_is_better { b < a } else { b > a };
        let n = ok.len();
        let geo_mean = (n > 0).then(|| (ok.iter().map(|(a, b)| (b / a).ln()).sum::<f64>() / n as f64).exp());
        Pairs {
            n,
            wins: ok.iter().filter(|p| ahead(p)).count(),
            ties: ok.iter().filter(|(a, b)| a == b).count(),
            geo_mean,
        }
    }

    /// The one-sided sign test's p of the wins (ties left out).
    pub(crate) fn p(&self) -> f64 {
        sign_test(self.wins, self.n - self.ties)
    }

    fn wins_text(&self, with_p: bool) -> String {
        if self.n == 0 {
            return "-".into();
        }
        let mut t = format!("{} of {}", self.wins, self.n);
        if with_p {
            t.push_str(&format!(" (p = {})", p_text(self.p())));
        }
        t
    }
}

/// One-sided sign test: the chance of at least `wins` heads in `n` fair
/// coin tosses, P(X ≥ wins) for X ~ Binomial(n, 1/2).
fn sign_test(wins: usize, n: usize) -> f64 {
    if wins == 0 {
        return 1.0;
    }
    // ln P(X = k), stepped from k = 0: ln C(n, k+1) = ln C(n, k) + ln((n-k)/(k+1)).
    let mut ln_p = -(n as f64) * std::f64::consts::LN_2;
    let mut tail = 0.0;
    for k in 0..=n {
        if k >= wins {
            tail += ln_p.exp();
        }
        if k < n {
            ln_p += ((n - k) as f64 / (k + 1) as f64).ln();
        }
    }
    tail.min(1.0)
}

pub(crate) fn p_text(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else {
        format!("{p:.3}")
    }
}

impl Report<'_> {
    /// The timings run by run: in how many runs rverbs came out ahead of
    /// its neighbour in time, the geometric mean of the runs' ratios, and
    /// per mode all configurations together with a sign test (how likely
    /// that many wins would be if neither side were faster).
    pub(super) fn pairs_table(&self) -> String {
        let mut s = String::from(
            "Run by run (each run times both sides one right after the other, so a run's two figures share \
             the guest's state of the moment): in how many runs rverbs was ahead, the geometric mean of the \
             runs' ratios (rverbs / rdma-core), and each mode's configurations pooled, with a one-sided sign \
             test: p is the chance of at least that many wins if neither side were faster.\n\n",
        );
        s.push_str(&self.header("timings, run by run", &["rverbs ahead", "ratio (geometric mean)"], &[]));
        let mut line = |what: String, cells: &[Pairs], pooled: bool| {
            s.push_str(&format!("| {what} |"));
            for c in cells {
                s.push_str(&format!(" {} | {} |", c.wins_text(pooled), fmt(c.geo_mean, 2)));
            }
            s.push('\n');
        };
        let mut every: Vec<Vec<(f64, f64)>> = vec![Vec::new(); self.runs.len()];
        for events in [false, true] {
            let mode = if events { "-e" } else { "polling" };
            let mut pooled: Vec<Vec<(f64, f64)>> = vec![Vec::new(); self.runs.len()];
            for ud in [false, true] {
                for size in if ud { UD_SIZES } else { SIZES } {
                    let pairs: Vec<Vec<(f64, f64)>> =
                        self.runs.iter().map(|k| k.latency_pairs(ud, events, size)).collect();
                    let cells: Vec<Pairs> = pairs.iter().map(|p| Pairs::of(p, true)).collect();
                    let qp = if ud { "UD" } else { "RC" };
                    line(format!("latency, {qp} {mode} {}", size_text(size)), &cells, false);
                    for (all, p) in pooled.iter_mut().zip(pairs) {
                        all.extend(p);
                    }
                }
            }
            let cells: Vec<Pairs> = pooled.iter().map(|p| Pairs::of(p, true)).collect();
            line(format!("latency, all four {mode} configurations"), &cells, true);
            for (all, p) in every.iter_mut().zip(pooled) {
                all.extend(p);
            }
        }
        let cells: Vec<Pairs> = every.iter().map(|p| Pairs::of(p, true)).collect();
        line("latency, all eight configurations".into(), &cells, true);
        for prog in CAPI_PERFTEST {
            let bw = prog.ends_with("_bw");
            for size in SIZES {
                let cells: Vec<Pairs> = self.runs.iter().map(|k| Pairs::of(&k.capi_pairs(prog, size), !bw)).collect();
                let what = if bw { "bandwidth" } else { "latency" };
                line(format!("C library: perftest {prog} {}, {what}", size_text(size)), &cells, false);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_the_sign_test() {
        // Latency: rverbs ahead when lower; equal figures are ties.
        let p = Pairs::of(&[(10.0, 5.0), (10.0, 20.0), (4.0, 4.0), (8.0, 2.0)], true);
        assert_eq!((p.n, p.wins, p.ties), (4, 2, 1));
        let g = p.geo_mean.unwrap();
        assert!((g - (0.5f64 * 2.0 * 1.0 * 0.25).powf(0.25)).abs() < 1e-12, "{g}");
        // Bandwidth: ahead when higher; a zero figure is not a run.
        let p = Pairs::of(&[(10.0, 5.0), (10.0, 20.0), (0.0, 3.0)], false);
        assert_eq!((p.n, p.wins), (2, 1));
        assert_eq!(Pairs::of(&[], true).wins_text(true), "-");
        // P(X >= k), X ~ B(n, 1/2).
        assert_eq!(sign_test(0, 9), 1.0);
        assert!((sign_test(9, 9) - 1.0 / 512.0).abs() < 1e-15);
        assert!((sign_test(8, 9) - 10.0 / 512.0).abs() < 1e-15);
        assert!((sign_test(5, 9) - 0.5).abs() < 1e-12);
        // Large n stays finite: 91 wins of 144 is about 0.0009.
        let p = sign_test(91, 144);
        assert!(p > 0.0005 && p < 0.0015, "{p}");
        assert_eq!(p_text(p), "< 0.001");
        assert_eq!(p_text(0.0196), "0.020");
        assert_eq!(Pairs::of(&[(2.0, 1.0)], true).wins_text(true), "1 of 1 (p = 0.500)");
    }
}
