//! What one guest sent back ([`KernelRun`]) and the figures read from
//! its files: callgrind totals and profiles, strace logs, the timed
//! ping-pongs and perftest's result lines.

use std::collections::BTreeMap;

use crate::bench::{self, tags, Impl, CAPI_CG_ITERS, CG_ITERS, SIZES};
use crate::callgrind::Profile;
use crate::strace::{self, Call};
use crate::twohost;

/// What one guest sent back.
#[derive(Debug, Default)]
pub struct KernelRun {
    pub series: String,
    pub release: String,
    pub accel: String,
    pub cpus: u32,
    /// The commit the guest measured (`git describe`; kept with the run,
    /// so a `--reuse` report says which library its guest figures are of).
    pub commit: String,
    /// Timed runs per configuration (`--runs`; kept with the run).
    pub runs: u32,
    pub files: BTreeMap<String, Vec<String>>,
}

impl KernelRun {
    pub(super) fn file(&self, name: &str) -> &[String] {
        self.files.get(name).map_or(&[], |v| &v[..])
    }

    pub(super) fn exit(&self, tag: &str) -> Option<i32> {
        self.file(&format!("{tag}.rc")).first()?.trim().parse().ok()
    }

    /// Instructions of a callgrind client run (`None` unless it completed).
    pub(super) fn cg_total(&self, i: Impl, size: u32, iters: u32) -> Option<u64> {
        let tag = tags::cg(i, size, iters);
        if self.exit(&tag) != Some(0) {
            return None;
        }
        bench::collected(&self.file(&format!("{tag}.vg")).join("\n"))
    }

    /// (Ir(n=1000) − Ir(n=100)) / 900.
    pub fn per_iteration(&self, i: Impl, size: u32) -> Option<f64> {
        let [a, b] = CG_ITERS;
        let (lo, hi) = (self.cg_total(i, size, a)?, self.cg_total(i, size, b)?);
        Some((hi as f64 - lo as f64) / f64::from(b - a))
    }

    /// The N=1000 profile of the 64-byte client.
    pub(super) fn profile(&self, i: Impl) -> Option<Profile> {
        let f = self.files.get(&format!("{}.out", tags::cg(i, SIZES[0], CG_ITERS[1])))?;
        Some(Profile::parse(&f.join("\n")))
    }

    /// The profile of the client built without tracing's callsites.
    pub(super) fn notrace_profile(&self) -> Option<Profile> {
        let f = self.files.get(&format!("{}.out", tags::NOTRACE))?;
        Some(Profile::parse(&f.join("\n")))
    }

    pub(super) fn strace(&self, tag: &str) -> Option<Vec<Call>> {
        let f = self.files.get(&format!("{tag}.st"))?;
        (self.exit(tag) == Some(0)).then(|| strace::parse(f))
    }

    /// Client (usec/iter, Mbit/s) of every completed run of a configuration.
    pub(super) fn timings(&self, ud: bool, events: bool, size: u32, i: Impl) -> Vec<(f64, f64)> {
        (1..=self.runs).filter_map(|r| self.timing(ud, events, size, i, r)).collect()
    }

    /// Client (usec/iter, Mbit/s) of run `run` of a configuration, if it completed.
    pub(super) fn timing(&self, ud: bool, events: bool, size: u32, i: Impl, run: u32) -> Option<(f64, f64)> {
        let tag = tags::lat(ud, events, size, i, run);
        let side = twohost::Side {
            lines: self.file(&format!("{tag}.cli")).to_vec(),
            exit: self.exit(&tag),
            ..Default::default()
        };
        (side.exit == Some(0) && side.iters() == Some(bench::TIMED_ITERS))
            .then(|| Some((side.usec_per_iter()?, side.mbit()?)))
            .flatten()
    }

    /// Latency run by run: (rdma-core, rverbs) usec/iter of each run in
    /// which both completed (the two sides of a run are neighbours in time).
    pub(super) fn latency_pairs(&self, ud: bool, events: bool, size: u32) -> Vec<(f64, f64)> {
        self.pairs(|i, r| self.timing(ud, events, size, i, r).map(|t| t.0))
    }

    /// `(figure(rdma-core, run), figure(rverbs, run))` of every run in which
    /// both sides have a figure.
    pub(super) fn pairs(&self, figure: impl Fn(Impl, u32) -> Option<f64>) -> Vec<(f64, f64)> {
        (1..=self.runs).filter_map(|r| Some((figure(Impl::RdmaCore, r)?, figure(Impl::Rverbs, r)?))).collect()
    }

    /// perftest with both sides on `i`'s `libibverbs.so.1`: the median of
    /// the runs' figures (the client's, see [`perftest_side`](Self::perftest_side)).
    pub(super) fn capi_perftest(&self, prog: &str, size: u32, i: Impl) -> Option<f64> {
        let figures: Vec<f64> = (1..=self.runs).filter_map(|r| self.capi_figure(prog, size, i, r)).collect();
        median(&figures)
    }

    /// Run `run` of perftest on `i`'s library, if it completed.
    pub(super) fn capi_figure(&self, prog: &str, size: u32, i: Impl, run: u32) -> Option<f64> {
        let tag = tags::capi(prog, size, i, run);
        (self.exit(&tag) == Some(0)).then(|| self.perftest_side(prog, &tag)).flatten()
    }

    /// The C library's perftest run by run: (rdma-core's library, rverbs').
    pub(super) fn capi_pairs(&self, prog: &str, size: u32) -> Vec<(f64, f64)> {
        self.pairs(|i, r| self.capi_figure(prog, size, i, r))
    }

    /// perftest's figure of a pair: the client's, or for a latency test the
    /// server's when the client printed `inf` (perftest's cycle counter
    /// sometimes reads nothing usable under TCG, on either library; both
    /// sides time the same round trips).
    pub(super) fn perftest_side(&self, prog: &str, tag: &str) -> Option<f64> {
        let client = perftest_figure(prog, self.file(&format!("{tag}.cli")));
        match client {
            Some(v) if !v.is_finite() && !prog.ends_with("_bw") => {
                perftest_figure(prog, self.file(&format!("{tag}.srv"))).filter(|v| v.is_finite())
            }
            _ => client.filter(|v| v.is_finite()),
        }
    }

    /// Instructions per operation of a perftest client on `i`'s library,
    /// 64 bytes: (Ir(n=5000) − Ir(n=500)) / 4500, without perftest's clock
    /// calibration ([`capi_calibration_per_op`](Self::capi_calibration_per_op)).
    pub(super) fn capi_per_op(&self, prog: &str, i: Impl) -> Option<f64> {
        let [a, b] = CAPI_CG_ITERS;
        let total = |n| {
            let p = self.capi_profile(prog, i, n)?;
            Some(p.total - p.clock_calibration(|o| o.ends_with(&format!("/{prog}"))))
        };
        let (lo, hi) = (total(a)?, total(b)?);
        Some((hi as f64 - lo as f64) / f64::from(b - a))
    }

    /// What perftest's clock calibration (`sample_get_cpu_mhz`, a fixed
    /// time of spinning on `gettimeofday`, twice per run) adds to the raw
    /// slope of [`capi_per_op`](Self::capi_per_op): its count in the
    /// 5,000-iteration profile minus the 500-iteration one, over 4,500. It
    /// is no operation's cost, and it moves with the guest's speed in
    /// either direction.
    pub(super) fn capi_calibration_per_op(&self, prog: &str, i: Impl) -> Option<f64> {
        let [a, b] = CAPI_CG_ITERS;
        let spin = |n| Some(self.capi_profile(prog, i, n)?.clock_calibration(|o| o.ends_with(&format!("/{prog}"))));
        let (lo, hi) = (spin(a)?, spin(b)?);
        Some((hi as f64 - lo as f64) / f64::from(b - a))
    }

    /// The callgrind profile of a perftest client at `n` iterations, when it exited 0.
    pub(super) fn capi_profile(&self, prog: &str, i: Impl, n: u32) -> Option<Profile> {
        let tag = tags::capi_cg(prog, i, n);
        let f = self.files.get(&format!("{tag}.out"))?;
        (self.exit(&tag) == Some(0)).then(|| Profile::parse(&f.join("\n")))
    }

    /// What the profiled perftest client (`-n 5000`, under callgrind)
    /// printed itself: `t_typical` or the average bandwidth. Its round
    /// trip next to its polls per operation says how long each busy poll
    /// took in the guest, which the instruction count cannot show.
    pub(super) fn capi_profiled_figure(&self, prog: &str, i: Impl) -> Option<f64> {
        let tag = tags::capi_cg(prog, i, CAPI_CG_ITERS[1]);
        if self.exit(&tag) != Some(0) {
            return None;
        }
        perftest_figure(prog, self.files.get(&format!("{tag}.cli"))?)
    }

    /// What a perftest client spent inside the C library per operation:
    /// the program's calls into `libibverbs.so.1` and its provider, with
    /// what they called (the doorbell's `write`, rdma-core's spin lock),
    /// (X(5000) − X(500)) / 4500 like [`capi_per_op`](Self::capi_per_op),
    /// but without perftest's own loop, whose count of turns (empty polls)
    /// follows the wait for the peer.
    pub(super) fn capi_library_per_op(&self, prog: &str, i: Impl) -> Option<f64> {
        let [a, b] = CAPI_CG_ITERS;
        let spent = |n| {
            let p = self.capi_profile(prog, i, n)?;
            Some(p.spent_in(|o| o.contains("/libibverbs.so") || o.contains("/libibverbs/")))
        };
        let (lo, hi) = (spent(a)?, spent(b)?);
        Some((hi as f64 - lo as f64) / f64::from(b - a))
    }

    /// perftest's result line of the client: (typical or average latency
    /// µs, or average bandwidth MB/s).
    pub(super) fn perftest(&self, prog: &str, size: u32) -> Option<f64> {
        let tag = tags::perftest(prog, size);
        if self.exit(&tag) != Some(0) {
            return None;
        }
        self.perftest_side(prog, &tag)
    }
}

/// From perftest's client output: `t_typical` of a latency test (the
/// median), `BW average[MB/sec]` of a bandwidth test.
pub fn perftest_figure(prog: &str, lines: &[String]) -> Option<f64> {
    let header = lines.iter().position(|l| l.trim_start().starts_with("#bytes"))?;
    let cols: Vec<&str> = lines[header].split_whitespace().collect();
    let want = if prog.ends_with("_bw") { "average[MB/sec]" } else { "t_typical[usec]" };
    let idx = cols.iter().position(|c| *c == want)?;
    // "BW peak[MB/sec]" is two words in the header: the data has one value each.
    let shift = cols[..idx].iter().filter(|c| **c == "BW").count();
    lines[header + 1..].iter().find_map(|l| {
        let v: Vec<&str> = l.split_whitespace().collect();
        if v.first()?.parse::<u64>().is_err() {
            return None;
        }
        v.get(idx - shift)?.parse().ok()
    })
}

/// The median (mean of the middle two for an even count).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::super::lines;
    use super::*;

    #[test]
    fn reads_perftest() {
        let lat = lines(
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n 64      1000          10.52          120.31       14.85              16.02         4.11            30.10                  110.20\n",
        );
        assert_eq!(perftest_figure("ib_send_lat", &lat), Some(14.85));
        let bw = lines(
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 4096       1000             41.23              40.10                0.010265\n",
        );
        assert_eq!(perftest_figure("ib_write_bw", &bw), Some(40.10));
        assert_eq!(perftest_figure("ib_write_bw", &lines("nothing")), None);
    }

    #[test]
    fn the_profiled_client_reports_its_own_figure_when_it_exited_0() {
        let hdr = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n";
        let mut k = KernelRun::default();
        k.files.insert(
            "cc-ib_send_lat-rverbs-5000.cli".into(),
            lines(&format!("{hdr} 64  5000  59.01  4572.51  136.91  225.52\n")),
        );
        assert_eq!(k.capi_profiled_figure("ib_send_lat", Impl::Rverbs), None);
        k.files.insert("cc-ib_send_lat-rverbs-5000.rc".into(), lines("0"));
        assert_eq!(k.capi_profiled_figure("ib_send_lat", Impl::Rverbs), Some(136.91));
        assert_eq!(k.capi_profiled_figure("ib_send_lat", Impl::RdmaCore), None);
    }

    #[test]
    fn a_latency_client_that_printed_inf_takes_the_servers_figure() {
        let hdr = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n";
        let mut k = KernelRun { runs: 1, ..Default::default() };
        let put = |k: &mut KernelRun, f: &str, text: String| {
            k.files.insert(f.to_string(), lines(&text));
        };
        put(&mut k, "cp-ib_send_lat-64-rverbs-1.rc", "0".into());
        put(
            &mut k,
            "cp-ib_send_lat-64-rverbs-1.cli",
            format!("{hdr} 64      1000          inf     inf     inf     inf\n"),
        );
        put(
            &mut k,
            "cp-ib_send_lat-64-rverbs-1.srv",
            format!("{hdr} 64      1000          80.1    900.2   96.44   99.0\n"),
        );
        assert_eq!(k.capi_perftest("ib_send_lat", 64, Impl::Rverbs), Some(96.44));
        // Both sides unusable: no figure, not an infinite one.
        put(
            &mut k,
            "cp-ib_send_lat-64-rverbs-1.srv",
            format!("{hdr} 64      1000          inf     inf     inf     inf\n"),
        );
        assert_eq!(k.capi_perftest("ib_send_lat", 64, Impl::Rverbs), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
