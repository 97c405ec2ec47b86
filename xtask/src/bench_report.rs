//! `cargo xtask bench`'s figures: what the guest's files say, the goals of
//! issue #11 next to them, one Markdown table, and its place in
//! docs/PERFORMANCE.md.

use std::collections::BTreeMap;
use std::path::Path;

use crate::bench::{self, tags, Impl, CAPI_CG_ITERS, CAPI_PERFTEST, CG_ITERS, PERFTEST, SIZES, UD_SIZES};
use crate::callgrind::{FnCost, Profile};
use crate::strace::{self, Call};
use crate::twohost;
use crate::util::{Context, Result};

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

/// The host's mock benches: (provider, case, instructions per operation).
#[derive(Debug, Default)]
pub struct MockCounts {
    pub counts: Vec<(String, String, f64)>,
}

impl KernelRun {
    fn file(&self, name: &str) -> &[String] {
        self.files.get(name).map_or(&[], |v| &v[..])
    }

    fn exit(&self, tag: &str) -> Option<i32> {
        self.file(&format!("{tag}.rc")).first()?.trim().parse().ok()
    }

    /// Instructions of a callgrind client run (`None` unless it completed).
    fn cg_total(&self, i: Impl, size: u32, iters: u32) -> Option<u64> {
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
    fn profile(&self, i: Impl) -> Option<Profile> {
        let f = self.files.get(&format!("{}.out", tags::cg(i, SIZES[0], CG_ITERS[1])))?;
        Some(Profile::parse(&f.join("\n")))
    }

    /// The profile of the client built without tracing's callsites.
    fn notrace_profile(&self) -> Option<Profile> {
        let f = self.files.get(&format!("{}.out", tags::NOTRACE))?;
        Some(Profile::parse(&f.join("\n")))
    }

    fn strace(&self, tag: &str) -> Option<Vec<Call>> {
        let f = self.files.get(&format!("{tag}.st"))?;
        (self.exit(tag) == Some(0)).then(|| strace::parse(f))
    }

    /// Client (usec/iter, Mbit/s) of every completed run of a configuration.
    fn timings(&self, ud: bool, events: bool, size: u32, i: Impl) -> Vec<(f64, f64)> {
        (1..=self.runs).filter_map(|r| self.timing(ud, events, size, i, r)).collect()
    }

    /// Client (usec/iter, Mbit/s) of run `run` of a configuration, if it completed.
    fn timing(&self, ud: bool, events: bool, size: u32, i: Impl, run: u32) -> Option<(f64, f64)> {
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
    fn latency_pairs(&self, ud: bool, events: bool, size: u32) -> Vec<(f64, f64)> {
        self.pairs(|i, r| self.timing(ud, events, size, i, r).map(|t| t.0))
    }

    /// `(figure(rdma-core, run), figure(rverbs, run))` of every run in which
    /// both sides have a figure.
    fn pairs(&self, figure: impl Fn(Impl, u32) -> Option<f64>) -> Vec<(f64, f64)> {
        (1..=self.runs).filter_map(|r| Some((figure(Impl::RdmaCore, r)?, figure(Impl::Rverbs, r)?))).collect()
    }

    /// perftest with both sides on `i`'s `libibverbs.so.1`: the median of
    /// the runs' figures (the client's, see [`perftest_side`](Self::perftest_side)).
    fn capi_perftest(&self, prog: &str, size: u32, i: Impl) -> Option<f64> {
        let figures: Vec<f64> = (1..=self.runs).filter_map(|r| self.capi_figure(prog, size, i, r)).collect();
        median(&figures)
    }

    /// Run `run` of perftest on `i`'s library, if it completed.
    fn capi_figure(&self, prog: &str, size: u32, i: Impl, run: u32) -> Option<f64> {
        let tag = tags::capi(prog, size, i, run);
        (self.exit(&tag) == Some(0)).then(|| self.perftest_side(prog, &tag)).flatten()
    }

    /// The C library's perftest run by run: (rdma-core's library, rverbs').
    fn capi_pairs(&self, prog: &str, size: u32) -> Vec<(f64, f64)> {
        self.pairs(|i, r| self.capi_figure(prog, size, i, r))
    }

    /// perftest's figure of a pair: the client's, or for a latency test the
    /// server's when the client printed `inf` (perftest's cycle counter
    /// sometimes reads nothing usable under TCG, on either library; both
    /// sides time the same round trips).
    fn perftest_side(&self, prog: &str, tag: &str) -> Option<f64> {
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
    fn capi_per_op(&self, prog: &str, i: Impl) -> Option<f64> {
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
    fn capi_calibration_per_op(&self, prog: &str, i: Impl) -> Option<f64> {
        let [a, b] = CAPI_CG_ITERS;
        let spin = |n| Some(self.capi_profile(prog, i, n)?.clock_calibration(|o| o.ends_with(&format!("/{prog}"))));
        let (lo, hi) = (spin(a)?, spin(b)?);
        Some((hi as f64 - lo as f64) / f64::from(b - a))
    }

    /// The callgrind profile of a perftest client at `n` iterations, when it exited 0.
    fn capi_profile(&self, prog: &str, i: Impl, n: u32) -> Option<Profile> {
        let tag = tags::capi_cg(prog, i, n);
        let f = self.files.get(&format!("{tag}.out"))?;
        (self.exit(&tag) == Some(0)).then(|| Profile::parse(&f.join("\n")))
    }

    /// What the profiled perftest client (`-n 5000`, under callgrind)
    /// printed itself: `t_typical` or the average bandwidth. Its round
    /// trip next to its polls per operation says how long each busy poll
    /// took in the guest, which the instruction count cannot show.
    fn capi_profiled_figure(&self, prog: &str, i: Impl) -> Option<f64> {
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
    fn capi_library_per_op(&self, prog: &str, i: Impl) -> Option<f64> {
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
    fn perftest(&self, prog: &str, size: u32) -> Option<f64> {
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

/// Syscalls of one straced run: all, the rxe doorbells (`write()` on the
/// uverbs fd), and the rest by kind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Syscalls {
    pub total: usize,
    pub doorbells: usize,
    pub by_name: BTreeMap<String, usize>,
}

impl Syscalls {
    pub fn of(calls: &[Call]) -> Syscalls {
        let mut s = Syscalls { total: calls.len(), ..Default::default() };
        for c in calls {
            let dev = c.fd_path().is_some_and(|p| p.starts_with("/dev/infiniband/"));
            if c.name == "write" && dev {
                s.doorbells += 1;
            } else {
                *s.by_name.entry(c.name.clone()).or_default() += 1;
            }
        }
        s
    }

    pub fn others(&self) -> usize {
        self.total - self.doorbells
    }
}

/// A verb of the per-call table and where each implementation's cost of
/// it is read.
#[derive(Debug, Clone, Copy)]
pub struct Verb {
    pub name: &'static str,
    /// rverbs: function names (substrings), the first found wins.
    pub rverbs: &'static [&'static str],
}

/// The hot-path verbs. rverbs' are the CLI's never-inlined entry points
/// (`src/bin/rverbs/pingpong.rs`, module `hot`), so each figure is the
/// whole call as the program makes it.
pub const VERBS: &[Verb] = &[
    Verb { name: "post_send", rverbs: &["pingpong::hot::post_send"] },
    Verb { name: "post_recv", rverbs: &["pingpong::hot::post_recv"] },
    Verb { name: "poll_cq", rverbs: &["pingpong::hot::poll"] },
    Verb { name: "req_notify_cq", rverbs: &["pingpong::hot::req_notify"] },
    Verb { name: "get_cq_event + ack", rverbs: &["pingpong::hot::get_cq_event"] },
];

/// One verb's cost: the function measured, its calls, instructions per call.
#[derive(Debug, Clone, PartialEq)]
pub struct PerCall {
    pub function: String,
    pub calls: u64,
    pub per_call: f64,
}

fn per_call(f: &FnCost) -> Option<PerCall> {
    Some(PerCall { function: short_name(&f.name), calls: f.calls, per_call: f.per_call()? })
}

/// `rverbs::bin::x::y::h1234` -> the last three path segments, no hash.
fn short_name(n: &str) -> String {
    let n = n.split('<').next().unwrap_or(n);
    let parts: Vec<&str> = n.split("::").filter(|p| !(p.starts_with('h') && p.len() == 17)).collect();
    parts[parts.len().saturating_sub(3)..].join("::")
}

/// rverbs' cost of `verb`.
pub fn rverbs_call(p: &Profile, verb: &Verb) -> Option<PerCall> {
    verb.rverbs.iter().find_map(|n| p.containing(n)).and_then(per_call)
}

/// rdma-core's cost of `verb`: `ibv_post_send` & co. are inline functions
/// of `verbs.h` that call the provider through its ops table, and Debian's
/// librxe is stripped, so its entry points (functions called from outside
/// librxe, at least once per two iterations) are told apart by what they
/// do: the one that calls `write` is `rxe_post_send` (the doorbell); the
/// one that some caller calls exactly as often as it calls
/// `ibv_get_cq_event` is `rxe_poll_cq` (one poll per event in
/// `ibv_rc_pingpong -e`); the remaining one is `rxe_post_recv`. The
/// exported functions go by name.
pub fn rdma_core_call(p: &Profile, verb: &Verb, iters: u64) -> Option<PerCall> {
    let named = |n: &str| p.named(n).and_then(per_call);
    match verb.name {
        "req_notify_cq" => named("ibv_cmd_req_notify_cq"),
        "get_cq_event + ack" => {
            let g = p.named("ibv_get_cq_event")?;
            let mut c = per_call(g)?;
            if let Some(a) = p.named("ibv_ack_cq_events") {
                // ibv_rc_pingpong acknowledges all events in one call at the end.
                c.per_call += a.inclusive() as f64 / g.calls.max(1) as f64;
                c.function.push_str(" + ibv_ack_cq_events");
            }
            Some(c)
        }
        name => {
            let entries = librxe_entries(p, iters / 2);
            let post_send = entries.iter().copied().find(|f| p.calls_any(f, &["write"]));
            let event_callers: Vec<(usize, u64)> =
                p.named("ibv_get_cq_event").map_or(Vec::new(), |g| g.callers.clone());
            let poll = entries
                .iter()
                .copied()
                .filter(|f| Some(*f) != post_send)
                .find(|f| f.callers.iter().any(|c| event_callers.contains(c)));
            let post_recv = entries.iter().copied().find(|f| Some(*f) != post_send && Some(*f) != poll);
            let f = match name {
                "post_send" => post_send,
                "post_recv" => post_recv,
                "poll_cq" => poll,
                _ => None,
            }?;
            let mut c = per_call(f)?;
            c.function =
                format!("librxe {} ({})", f.name.trim_start_matches("0x").trim_start_matches('0'), name_of(name));
            Some(c)
        }
    }
}

/// The data-path verbs of a perftest client, per call (issue #12 §5): what
/// the instructions per operation are made of, free of the timing that
/// decides how often a busy-polling client polls.
pub const CAPI_VERBS: &[&str] = &["post_send", "post_recv", "poll_cq"];

/// A perftest client's cost of `verb` on one library (n = 5000 profile):
/// rverbs' by its exported function (`ibverbs::qp::post_send`, ...);
/// rdma-core's librxe is stripped, so its entry points (functions called
/// from outside librxe, at least once per ten operations: `ib_write_bw`
/// polls once per several) are told apart by
/// what they do: the one that calls `write` (the doorbell) posts sends, the
/// most called of the others polls, and the remaining one posts receives.
pub fn capi_call(p: &Profile, i: Impl, verb: &str, iters: u64) -> Option<PerCall> {
    if i == Impl::Rverbs {
        let name = match verb {
            "post_send" => "ibverbs::qp::post_send",
            "post_recv" => "ibverbs::qp::post_recv",
            _ => "ibverbs::cq::poll_cq",
        };
        return p.named(name).and_then(per_call);
    }
    let mut entries = librxe_entries(p, iters / 10);
    let post_send = entries.iter().position(|f| p.calls_any(f, &["write"])).map(|i| entries.remove(i));
    entries.sort_by_key(|f| std::cmp::Reverse(f.calls));
    let f = match verb {
        "post_send" => post_send,
        "poll_cq" => entries.first().copied(),
        _ => entries.get(1).copied(),
    }?;
    let mut c = per_call(f)?;
    c.function = format!("librxe {} ({})", f.name.trim_start_matches("0x").trim_start_matches('0'), name_of(verb));
    Some(c)
}

/// librxe's entry points in `p`: its functions called only from outside
/// librxe, at least `min_calls` times (stripped, so named by address).
fn librxe_entries(p: &Profile, min_calls: u64) -> Vec<&FnCost> {
    let in_rxe = |f: &FnCost| f.object.contains("librxe");
    p.funcs
        .iter()
        .filter(|f| in_rxe(f) && f.calls >= min_calls)
        .filter(|f| f.callers.iter().all(|(c, _)| !in_rxe(&p.funcs[*c])))
        .collect()
}

/// Completion events per iteration in the n=1000 profile.
fn events_per_iter(p: &Profile, names: &[&str]) -> Option<f64> {
    let f = names.iter().find_map(|n| p.containing(n))?;
    Some(f.calls as f64 / f64::from(CG_ITERS[1]))
}

fn name_of(verb: &str) -> &'static str {
    match verb {
        "post_send" => "rxe_post_send",
        "post_recv" => "rxe_post_recv",
        _ => "rxe_poll_cq",
    }
}

/// Everything the table shows.
pub struct Report<'a> {
    runs: &'a [KernelRun],
    mock: Option<&'a MockCounts>,
    commit: String,
    timed_runs: u32,
    date: String,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(r), Some(v)) if r > 0.0 => Some(v / r),
        _ => None,
    }
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn fmt_int(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| group(x.round() as i64))
}

/// `12,345`.
fn group(v: i64) -> String {
    let s = v.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// The per-kernel columns of a side-by-side table.
const BOTH_AND_RATIO: [&str; 3] = ["rdma-core", "rverbs", "ratio"];

/// A goal: a verdict per kernel.
#[derive(Clone, Copy)]
enum Goal {
    /// rverbs / rdma-core ≤ this.
    RatioAtMost(f64),
    /// rverbs / rdma-core ≥ this (bandwidth).
    RatioAtLeast(f64),
    /// rverbs' figure ≤ this.
    AtMost(f64),
    None,
}

impl Goal {
    fn text(self) -> String {
        match self {
            Goal::RatioAtMost(r) => format!("≤ {r}×"),
            Goal::RatioAtLeast(r) => format!("≥ {r}×"),
            Goal::AtMost(v) => format!("≤ {v}"),
            Goal::None => String::new(),
        }
    }

    fn met(self, rdma: Option<f64>, rverbs: Option<f64>) -> Option<bool> {
        match self {
            Goal::RatioAtMost(r) => ratio(rdma, rverbs).map(|x| x <= r + 1e-9),
            Goal::RatioAtLeast(r) => ratio(rdma, rverbs).map(|x| x >= r - 1e-9),
            Goal::AtMost(v) => rverbs.map(|x| x <= v + 1e-9),
            Goal::None => None,
        }
    }
}

/// A row's figures on one kernel: (rdma-core, rverbs).
type Cell = (Option<f64>, Option<f64>);

/// One row: a figure of both implementations on every kernel.
struct Row {
    what: String,
    /// Per kernel: (rdma-core, rverbs), as numbers (for ratios and goals)
    /// and as text.
    cells: Vec<Cell>,
    digits: usize,
    goal: Goal,
    /// Show the ratio column.
    ratio: bool,
}

impl<'a> Report<'a> {
    pub fn new(runs: &'a [KernelRun], mock: Option<&'a MockCounts>, commit: &str, timed_runs: u32) -> Report<'a> {
        Report { runs, mock, commit: commit.to_owned(), timed_runs, date: today() }
    }

    fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let per_kernel = |f: &dyn Fn(&KernelRun) -> Cell| -> Vec<Cell> { self.runs.iter().map(f).collect() };
        // Instructions per iteration.
        for size in SIZES {
            rows.push(Row {
                what: format!("instructions per iteration, client, -e, {}", size_text(size)),
                cells: per_kernel(&|k| (k.per_iteration(Impl::RdmaCore, size), k.per_iteration(Impl::Rverbs, size))),
                digits: 0,
                goal: Goal::RatioAtMost(0.5),
                ratio: true,
            });
        }
        // Instructions per call.
        let profiles: Vec<(Option<Profile>, Option<Profile>)> =
            self.runs.iter().map(|k| (k.profile(Impl::RdmaCore), k.profile(Impl::Rverbs))).collect();
        for verb in VERBS {
            let cells = profiles
                .iter()
                .map(|(r, v)| {
                    (
                        r.as_ref().and_then(|p| rdma_core_call(p, verb, u64::from(CG_ITERS[1]))).map(|c| c.per_call),
                        v.as_ref().and_then(|p| rverbs_call(p, verb)).map(|c| c.per_call),
                    )
                })
                .collect();
            rows.push(Row {
                what: format!("instructions per call: {}", verb.name),
                cells,
                digits: 0,
                goal: Goal::None,
                ratio: true,
            });
        }
        rows.push(Row {
            what: "completion events per iteration (n = 1000 profile; each costs a read, an arm and a poll)".into(),
            cells: profiles
                .iter()
                .map(|(r, v)| {
                    (
                        r.as_ref().and_then(|p| events_per_iter(p, &["ibv_get_cq_event"])),
                        v.as_ref().and_then(|p| events_per_iter(p, &["pingpong::hot::get_cq_event"])),
                    )
                })
                .collect(),
            digits: 2,
            goal: Goal::None,
            ratio: true,
        });
        // Syscalls.
        for events in [false, true] {
            let sys = |k: &KernelRun, i: Impl| k.strace(&tags::st(i, events)).map(|c| Syscalls::of(&c));
            let mode = if events { "-e" } else { "polling" };
            rows.push(Row {
                what: format!("syscalls, pingpong -n {} client, {mode}: doorbells", bench::SYSCALL_ITERS),
                cells: per_kernel(&|k| {
                    let f = |i| sys(k, i).map(|s| s.doorbells as f64);
                    (f(Impl::RdmaCore), f(Impl::Rverbs))
                }),
                digits: 0,
                goal: Goal::None,
                ratio: false,
            });
            rows.push(Row {
                what: format!("syscalls, pingpong -n {} client, {mode}: all others", bench::SYSCALL_ITERS),
                cells: per_kernel(&|k| {
                    let f = |i| sys(k, i).map(|s| s.others() as f64);
                    (f(Impl::RdmaCore), f(Impl::Rverbs))
                }),
                digits: 0,
                goal: if events { Goal::None } else { Goal::RatioAtMost(0.5) },
                ratio: true,
            });
        }
        let floor = |k: &KernelRun, i: Impl, devinfo: bool| k.strace(&tags::floor(i, devinfo)).map(|c| c.len() as f64);
        rows.push(Row {
            what: "syscalls, start-up floor: pingpong's usage (loader, runtime, usage text)".into(),
            cells: per_kernel(&|k| (floor(k, Impl::RdmaCore, false), floor(k, Impl::Rverbs, false))),
            digits: 0,
            goal: Goal::None,
            ratio: true,
        });
        rows.push(Row {
            what: format!("syscalls, pingpong -n {} client, polling: all others above the floor", bench::SYSCALL_ITERS),
            cells: per_kernel(&|k| {
                let f = |i| {
                    let s = k.strace(&tags::st(i, false)).map(|c| Syscalls::of(&c).others() as f64)?;
                    Some(s - floor(k, i, false)?)
                };
                (f(Impl::RdmaCore), f(Impl::Rverbs))
            }),
            digits: 0,
            goal: Goal::RatioAtMost(0.5),
            ratio: true,
        });
        rows.push(Row {
            what: "syscalls, start-up floor: devinfo's usage".into(),
            cells: per_kernel(&|k| (floor(k, Impl::RdmaCore, true), floor(k, Impl::Rverbs, true))),
            digits: 0,
            goal: Goal::None,
            ratio: true,
        });
        rows.push(Row {
            what: "syscalls, devinfo -v".into(),
            cells: per_kernel(&|k| {
                let f = |i| k.strace(&tags::devinfo(i)).map(|c| c.len() as f64);
                (f(Impl::RdmaCore), f(Impl::Rverbs))
            }),
            digits: 0,
            goal: Goal::AtMost(60.0),
            ratio: true,
        });
        rows.push(Row {
            what: "syscalls, devinfo -v above the floor".into(),
            cells: per_kernel(&|k| {
                let f = |i| Some(k.strace(&tags::devinfo(i))?.len() as f64 - floor(k, i, true)?);
                (f(Impl::RdmaCore), f(Impl::Rverbs))
            }),
            digits: 0,
            goal: Goal::AtMost(60.0),
            ratio: true,
        });
        // Latency and throughput.
        for ud in [false, true] {
            for events in [false, true] {
                for size in if ud { UD_SIZES } else { SIZES } {
                    let med = |k: &KernelRun, i: Impl, pick: fn(&(f64, f64)) -> f64| {
                        median(&k.timings(ud, events, size, i).iter().map(pick).collect::<Vec<_>>())
                    };
                    let what = format!(
                        "{} {} {}",
                        if ud { "UD" } else { "RC" },
                        if events { "-e" } else { "polling" },
                        size_text(size)
                    );
                    rows.push(Row {
                        what: format!("latency, usec/iter, {what}"),
                        cells: per_kernel(&|k| (med(k, Impl::RdmaCore, |t| t.0), med(k, Impl::Rverbs, |t| t.0))),
                        digits: 1,
                        goal: Goal::RatioAtMost(1.0),
                        ratio: true,
                    });
                    rows.push(Row {
                        what: format!("throughput, Mbit/s, {what}"),
                        cells: per_kernel(&|k| (med(k, Impl::RdmaCore, |t| t.1), med(k, Impl::Rverbs, |t| t.1))),
                        digits: 1,
                        goal: Goal::None,
                        ratio: true,
                    });
                }
            }
        }
        // rdma-core's perftest on each C library (issue #12 §5).
        for prog in CAPI_PERFTEST {
            let bw = prog.ends_with("_bw");
            for size in SIZES {
                let unit = if bw { "MB/s average" } else { "usec typical" };
                rows.push(Row {
                    what: format!(
                        "C library: perftest {prog}, {}, {unit}, both sides on each libibverbs (median)",
                        size_text(size)
                    ),
                    cells: per_kernel(&|k| {
                        (k.capi_perftest(prog, size, Impl::RdmaCore), k.capi_perftest(prog, size, Impl::Rverbs))
                    }),
                    digits: 2,
                    goal: if bw { Goal::RatioAtLeast(1.0) } else { Goal::RatioAtMost(1.0) },
                    ratio: true,
                });
            }
            rows.push(Row {
                what: format!(
                    "C library: instructions per operation, {prog} client, 64 B (callgrind, without perftest's \
                     clock calibration)"
                ),
                cells: per_kernel(&|k| (k.capi_per_op(prog, Impl::RdmaCore), k.capi_per_op(prog, Impl::Rverbs))),
                digits: 0,
                goal: Goal::RatioAtMost(1.0),
                ratio: true,
            });
            rows.push(Row {
                what: format!(
                    "C library: what perftest's clock calibration (a fixed time spinning on gettimeofday) added \
                     to that slope, {prog} client"
                ),
                cells: per_kernel(&|k| {
                    (k.capi_calibration_per_op(prog, Impl::RdmaCore), k.capi_calibration_per_op(prog, Impl::Rverbs))
                }),
                digits: 0,
                goal: Goal::None,
                ratio: false,
            });
            rows.push(Row {
                what: format!(
                    "C library: instructions per operation inside the library (libibverbs + provider), {prog} \
                     client, 64 B (callgrind)"
                ),
                cells: per_kernel(&|k| {
                    (k.capi_library_per_op(prog, Impl::RdmaCore), k.capi_library_per_op(prog, Impl::Rverbs))
                }),
                digits: 0,
                goal: Goal::None,
                ratio: true,
            });
        }
        // perftest, rdma-core only.
        for prog in PERFTEST {
            for size in SIZES {
                let unit = if prog.ends_with("_bw") { "MB/s average" } else { "usec typical" };
                rows.push(Row {
                    what: format!("perftest {prog}, {}, {unit} (floor)", size_text(size)),
                    cells: per_kernel(&|k| (k.perftest(prog, size), None)),
                    digits: 2,
                    goal: Goal::None,
                    ratio: false,
                });
            }
        }
        rows
    }

    /// The Markdown text: heading lines, the table, the per-call functions.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("Measured {} at commit `{}` by `cargo xtask bench`", self.date, self.commit));
        let kept: Vec<&str> = self.runs.iter().map(|k| k.commit.as_str()).filter(|c| *c != self.commit).collect();
        if let Some(first) = kept.first() {
            s.push_str(&format!(
                " (the host's provider benches; the guest figures are a kept run (`--reuse`) of commit `{first}`)"
            ));
        }
        if !self.runs.is_empty() {
            let k: Vec<String> = self
                .runs
                .iter()
                .map(|k| format!("{} = Linux {} ({}, {} vCPUs)", k.series, k.release, k.accel, k.cpus))
                .collect();
            s.push_str(&format!("; guests: {}", k.join("; ")));
        }
        s.push_str(&format!(
            ". rdma-core is Debian's {} (`ibv_rc_pingpong`, `ibv_ud_pingpong`, librxe), run with the same \
             arguments in the same boot; latency, throughput and the C library's perftest timings are medians of {} \
             runs, the two sides of each run one after the other, rdma-core first in odd runs and rverbs in even \
             ones.\n\n",
            rdma_core_version(),
            self.runs_text()
        ));
        if !self.runs.is_empty() {
            s.push_str(&self.table());
            s.push('\n');
            s.push_str(&self.pairs_table());
            s.push('\n');
            s.push_str(&self.functions());
            s.push('\n');
            s.push_str(&self.tracing_table());
            s.push('\n');
            s.push_str(&self.capi_calls_table());
        }
        if let Some(m) = self.mock {
            s.push('\n');
            s.push_str(&mock_table(m));
        }
        s
    }

    /// How many timed runs each kernel's medians are of.
    fn runs_text(&self) -> String {
        let mut n: Vec<u32> = self.runs.iter().map(|k| k.runs).collect();
        n.dedup();
        match n.as_slice() {
            [] => self.timed_runs.to_string(),
            [one] => one.to_string(),
            _ => self.runs.iter().map(|k| format!("{} ({})", k.runs, k.series)).collect::<Vec<_>>().join(" and "),
        }
    }

    /// The timings run by run: in how many runs rverbs came out ahead of
    /// its neighbour in time, the geometric mean of the runs' ratios, and
    /// per mode all configurations together with a sign test (how likely
    /// that many wins would be if neither side were faster).
    fn pairs_table(&self) -> String {
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

    /// A table's two header lines: `first`, then each kernel's `per_kernel`
    /// columns (named after its series, right-aligned), then `tail`'s.
    fn header(&self, first: &str, per_kernel: &[&str], tail: &[&str]) -> String {
        let mut names = format!("| {first} |");
        let mut sep = String::from("| --- |");
        for k in self.runs {
            for c in per_kernel {
                names.push_str(&format!(" {} {c} |", k.series));
                sep.push_str(" ---: |");
            }
        }
        for c in tail {
            names.push_str(&format!(" {c} |"));
            sep.push_str(" --- |");
        }
        format!("{names}\n{sep}\n")
    }

    fn table(&self) -> String {
        let mut s = self.header("measure", &BOTH_AND_RATIO, &["goal", "met"]);
        // Rows of parts that did not run have no figure at all.
        for r in self.rows().into_iter().filter(|r| r.cells.iter().any(|(a, b)| a.is_some() || b.is_some())) {
            s.push_str(&format!("| {} |", r.what));
            let mut verdicts = Vec::new();
            for (a, b) in &r.cells {
                let f = |v: Option<f64>| if r.digits == 0 { fmt_int(v) } else { fmt(v, r.digits) };
                let rt = if r.ratio { fmt(ratio(*a, *b), 2) } else { String::new() };
                s.push_str(&format!(" {} | {} | {rt} |", f(*a), f(*b)));
                verdicts.push(r.goal.met(*a, *b));
            }
            let met = match r.goal {
                Goal::None => String::new(),
                _ if verdicts.iter().all(|v| *v == Some(true)) => "yes".into(),
                _ if verdicts.contains(&None) => "?".into(),
                _ => {
                    let which: Vec<&str> = self
                        .runs
                        .iter()
                        .zip(&verdicts)
                        .filter(|(_, v)| **v == Some(false))
                        .map(|(k, _)| k.series.as_str())
                        .collect();
                    format!("**no** ({})", which.join(", "))
                }
            };
            s.push_str(&format!(" {} | {met} |\n", r.goal.text()));
        }
        s
    }

    /// Which function each per-call figure is of (first kernel).
    fn functions(&self) -> String {
        let Some(k) = self.runs.first() else { return String::new() };
        let (r, v) = (k.profile(Impl::RdmaCore), k.profile(Impl::Rverbs));
        let mut s = format!(
            "Per-call figures are callgrind's inclusive instructions of the function divided by its calls, client \
             of `-e -s 64 -n {}` ({}):\n\n| verb | rdma-core function | calls | rverbs function | calls |\n| --- | --- \
             | ---: | --- | ---: |\n",
            CG_ITERS[1], k.series
        );
        for verb in VERBS {
            let a = r.as_ref().and_then(|p| rdma_core_call(p, verb, u64::from(CG_ITERS[1])));
            let b = v.as_ref().and_then(|p| rverbs_call(p, verb));
            let cell = |c: &Option<PerCall>| {
                c.as_ref()
                    .map_or(("-".to_owned(), "-".to_owned()), |c| (format!("`{}`", c.function), c.calls.to_string()))
            };
            let ((af, ac), (bf, bc)) = (cell(&a), cell(&b));
            s.push_str(&format!("| {} | {af} | {ac} | {bf} | {bc} |\n", verb.name));
        }
        s
    }
}

impl Report<'_> {
    /// The C library's per-call costs in the perftest clients, and how many
    /// polls an operation took (a busy-polling client's instructions per
    /// operation follow its polls, which the wait for the peer decides).
    fn capi_calls_table(&self) -> String {
        let iters = u64::from(CAPI_CG_ITERS[1]);
        let mut s = format!(
            "The C library per call: callgrind's inclusive instructions of each verb divided by its calls, perftest \
             client, 64 B, `-n {iters}`, both sides on each libibverbs (an empty poll is most polls of a \
             busy-polling client; how many it makes per operation is the wait for the peer, not the \
             library):\n\n"
        );
        s.push_str(&self.header("client, verb", &BOTH_AND_RATIO, &[]));
        for prog in CAPI_PERFTEST {
            let profiles: Vec<(Option<Profile>, Option<Profile>)> = self
                .runs
                .iter()
                .map(|k| {
                    (
                        k.capi_profile(prog, Impl::RdmaCore, CAPI_CG_ITERS[1]),
                        k.capi_profile(prog, Impl::Rverbs, CAPI_CG_ITERS[1]),
                    )
                })
                .collect();
            let call = |p: &Option<Profile>, i, verb| p.as_ref().and_then(|p| capi_call(p, i, verb, iters));
            for verb in CAPI_VERBS {
                let cells: Vec<(Option<f64>, Option<f64>)> = profiles
                    .iter()
                    .map(|(a, b)| {
                        (
                            call(a, Impl::RdmaCore, verb).map(|c| c.per_call),
                            call(b, Impl::Rverbs, verb).map(|c| c.per_call),
                        )
                    })
                    .collect();
                if cells.iter().all(|(a, b)| a.is_none() && b.is_none()) {
                    continue;
                }
                s.push_str(&format!("| `{prog}` {verb} |"));
                for (a, b) in &cells {
                    s.push_str(&format!(" {} | {} | {} |", fmt(*a, 1), fmt(*b, 1), fmt(ratio(*a, *b), 2)));
                }
                s.push('\n');
            }
            s.push_str(&format!("| `{prog}` polls per operation |"));
            for (a, b) in &profiles {
                let per_op = |p: &Option<Profile>, i| call(p, i, "poll_cq").map(|c| c.calls as f64 / iters as f64);
                let (a, b) = (per_op(a, Impl::RdmaCore), per_op(b, Impl::Rverbs));
                s.push_str(&format!(" {} | {} | {} |", fmt(a, 2), fmt(b, 2), fmt(ratio(a, b), 2)));
            }
            s.push('\n');
            // Only a latency client busy-polls for its peer (and under
            // callgrind ib_write_bw's bandwidth can print as 0.00: its
            // clock calibration runs slowed down too).
            if prog.ends_with("_bw") {
                continue;
            }
            s.push_str(&format!("| `{prog}` usec typical of this profiled client (under callgrind) |"));
            for k in self.runs {
                let (a, b) = (k.capi_profiled_figure(prog, Impl::RdmaCore), k.capi_profiled_figure(prog, Impl::Rverbs));
                s.push_str(&format!(" {} | {} | {} |", fmt(a, 2), fmt(b, 2), fmt(ratio(a, b), 2)));
            }
            s.push('\n');
        }
        s
    }

    /// rverbs' per-call costs with its `tracing` callsites (disabled at run
    /// time, as in every other run) and with them compiled out.
    fn tracing_table(&self) -> String {
        let mut s = String::from(
            "A disabled `tracing` callsite costs nothing measurable: rverbs' instructions per call with the \
             callsites in the build but disabled (every run above) and compiled out (`--features \
             tracing/release_max_level_off`), same client, same boot:\n\n",
        );
        s.push_str(&self.header("verb", &["callsites disabled", "compiled out"], &[]));
        let profiles: Vec<(Option<Profile>, Option<Profile>)> =
            self.runs.iter().map(|k| (k.profile(Impl::Rverbs), k.notrace_profile())).collect();
        for verb in VERBS {
            s.push_str(&format!("| {} |", verb.name));
            for (on, off) in &profiles {
                let f = |p: &Option<Profile>| {
                    p.as_ref().and_then(|p| rverbs_call(p, verb)).map_or("-".into(), |c| format!("{:.1}", c.per_call))
                };
                s.push_str(&format!(" {} | {} |", f(on), f(off)));
            }
            s.push('\n');
        }
        s
    }
}

/// Runs compared pairwise: (rdma-core, rverbs) figures of the same run.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pairs {
    /// Pairs compared.
    n: usize,
    /// Pairs in which rverbs was ahead (lower, or higher for a bandwidth).
    wins: usize,
    /// Pairs with equal figures (left out of the sign test).
    ties: usize,
    /// Geometric mean of rverbs / rdma-core over the pairs.
    geo_mean: Option<f64>,
}

impl Pairs {
    fn of(pairs: &[(f64, f64)], lower_is_better: bool) -> Pairs {
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

    fn wins_text(&self, with_p: bool) -> String {
        if self.n == 0 {
            return "-".into();
        }
        let mut t = format!("{} of {}", self.wins, self.n);
        if with_p {
            t.push_str(&format!(" (p = {})", p_text(sign_test(self.wins, self.n - self.ties))));
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

fn p_text(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else {
        format!("{p:.3}")
    }
}

fn size_text(size: u32) -> String {
    if size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

/// The targets of the mock benches (docs/PERFORMANCE.md, docs/MLX5.md).
fn mock_goal(provider: &str, case: &str) -> f64 {
    match (provider, case) {
        ("rxe", "post") => 150.0,
        ("rxe", _) => 60.0,
        ("mlx5", "post") => 60.0,
        _ => 40.0,
    }
}

fn mock_table(m: &MockCounts) -> String {
    let mut s = String::from(
        "Providers against the mock kernel (rxe) and the HCA model (mlx5), on the host, instructions per \
         operation ((Ir(2N) − Ir(N)) / N, N = 100,000):\n\n| provider | operation | instructions | goal | met |\n| --- \
         | --- | ---: | --- | --- |\n",
    );
    for (p, case, v) in &m.counts {
        let what = match case.as_str() {
            "post" => "post of one WR",
            "poll16" => "poll, batches of 16, per CQE",
            "poll_one" => "poll_one call that returns one CQE",
            _ => "poll call that returns one CQE",
        };
        let goal = mock_goal(p, case);
        let met = if *v <= goal + 1e-9 { "yes" } else { "**no**" };
        s.push_str(&format!("| {p} | {what} | {v:.1} | ≤ {goal} | {met} |\n"));
    }
    s
}

/// `dpkg-query` of libibverbs1 on the host (the guest's copy comes from it).
fn rdma_core_version() -> String {
    std::process::Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "libibverbs1"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| format!("rdma-core {}", String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_else(|| "rdma-core".into())
}

/// Today's date (UTC), `YYYY-MM-DD`, from the system clock.
fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Markers around the generated part of docs/PERFORMANCE.md.
pub const DOC_BEGIN: &str = "<!-- cargo xtask bench: begin (generated, do not edit by hand) -->";
pub const DOC_END: &str = "<!-- cargo xtask bench: end -->";

/// Replaces the text between the markers (appends a section when they are missing).
pub fn write_into_doc(doc: &Path, table: &str) -> Result<()> {
    let old = std::fs::read_to_string(doc).ctx(format!("reading {}", doc.display()))?;
    let new = splice(&old, table);
    std::fs::write(doc, new).ctx(format!("writing {}", doc.display()))
}

fn splice(old: &str, table: &str) -> String {
    let block = format!("{DOC_BEGIN}\n{}\n{DOC_END}", table.trim_end());
    match (old.find(DOC_BEGIN), old.find(DOC_END)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &old[..b], &old[e + DOC_END.len()..]),
        _ => format!("{}\n\n## End to end against rdma-core (`cargo xtask bench`)\n\n{block}\n", old.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(String::from).collect()
    }

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

    #[test]
    fn medians_and_numbers() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(group(1234567), "1,234,567");
        assert_eq!(group(999), "999");
        assert_eq!(size_text(4096), "4 KiB");
        assert_eq!(short_name("rverbs::pingpong::hot::post_send::h0123456789abcdef"), "pingpong::hot::post_send");
        assert!(Goal::RatioAtMost(0.5).met(Some(1000.0), Some(480.0)).unwrap());
        assert!(!Goal::AtMost(60.0).met(None, Some(61.0)).unwrap());
    }

    #[test]
    fn counts_doorbells_apart() {
        let calls = strace::parse(&lines(
            "1 write(4</dev/infiniband/uverbs0>, \"\"..., 32) = 32\n1 write(1</dev/pts/0>, \"x\", 1) = 1\n1 ioctl(4</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x1) = 0\n",
        ));
        let s = Syscalls::of(&calls);
        assert_eq!((s.total, s.doorbells, s.others()), (3, 1, 2));
        assert_eq!(s.by_name.get("ioctl"), Some(&1));
    }

    #[test]
    fn splices_between_markers() {
        let doc = format!("# P\n\nbefore\n{DOC_BEGIN}\nold\n{DOC_END}\nafter\n");
        let out = splice(&doc, "new table\n");
        assert_eq!(out, format!("# P\n\nbefore\n{DOC_BEGIN}\nnew table\n{DOC_END}\nafter\n"));
        let appended = splice("# P\n", "t");
        assert!(appended.ends_with(&format!("{DOC_BEGIN}\nt\n{DOC_END}\n")));
    }

    /// The shape of an `ibv_rc_pingpong -e` profile: main calls
    /// `ibv_get_cq_event` and the provider's poll once per event, a helper
    /// posts sends (the one that calls `write`), and receives come from
    /// main and from the completion handler.
    #[test]
    fn tells_librxe_entry_points_apart() {
        let text = "events: Ir
ob=(1) /usr/bin/ibv_rc_pingpong
fn=(1) 0x0000000000002450
0 100
cob=(2) /usr/lib/x86_64-linux-gnu/libibverbs.so.1
cfn=(2) ibv_get_cq_event
calls=1500 0
0 60000
cob=(3) /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cfn=(3) 0x0000000000002ca0
calls=1500 0
0 100500
cob=(3)
cfn=(4) 0x0000000000004550
calls=500 0
0 61000
cfn=(5) 0x00000000000048b0
calls=2000 0
0 500000
fn=(5)
0 100000
cfn=(6) 0x0000000000004500
calls=1000 0
0 257000
cob=(3)
cfn=(4)
calls=1000 0
0 122000
fn=(6)
0 58000
cob=(3)
cfn=(7) 0x0000000000003cc0
calls=1000 0
0 199000
ob=(3)
fn=(7)
0 175000
cob=(4) /usr/lib/x86_64-linux-gnu/libc.so.6
cfn=(8) write
calls=1000 0
0 24000
fn=(4)
0 183000
fn=(3)
0 100500
ob=(2)
fn=(2)
0 60000
";
        let p = Profile::parse(text);
        let call = |name: &str| {
            let v = VERBS.iter().find(|v| v.name == name).unwrap();
            rdma_core_call(&p, v, 1000).unwrap()
        };
        assert_eq!((call("post_send").per_call, call("post_send").calls), (199.0, 1000));
        assert!(call("post_send").function.contains("3cc0 (rxe_post_send)"));
        assert_eq!((call("poll_cq").per_call, call("poll_cq").calls), (67.0, 1500));
        assert!(call("poll_cq").function.contains("2ca0"));
        assert_eq!((call("post_recv").per_call, call("post_recv").calls), (122.0, 1500));
        assert!(call("post_recv").function.contains("4550"));
        assert_eq!(call("get_cq_event + ack").per_call, 40.0);
    }

    /// The shape of a perftest `ib_send_lat` client: its loop calls librxe's
    /// poll (most often), post_send (which calls `write`) and post_recv;
    /// rverbs' library by its exported names. A function called once (set-up)
    /// is no entry point.
    #[test]
    fn capi_calls_by_shape_and_name() {
        let text = "events: Ir
ob=(1) /usr/bin/ib_send_lat
fn=(1) 0x0000000000023100
0 100
cob=(3) /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cfn=(3) 0x0000000000002ca0
calls=20000 0
0 840000
cob=(3)
cfn=(4) 0x0000000000004550
calls=900 0
0 109800
cob=(3)
cfn=(7) 0x0000000000003cc0
calls=1000 0
0 199000
cob=(3)
cfn=(9) 0x0000000000001000
calls=1 0
0 5000
ob=(3)
fn=(7)
0 175000
cob=(4) /usr/lib/x86_64-linux-gnu/libc.so.6
cfn=(8) write
calls=1000 0
0 24000
fn=(4)
0 109800
fn=(3)
0 840000
fn=(9)
0 5000
";
        let p = Profile::parse(text);
        let rdma = |verb| capi_call(&p, Impl::RdmaCore, verb, 1000).unwrap();
        assert_eq!((rdma("post_send").per_call, rdma("post_send").calls), (199.0, 1000));
        assert_eq!((rdma("poll_cq").per_call, rdma("poll_cq").calls), (42.0, 20000));
        assert!(rdma("poll_cq").function.contains("2ca0 (rxe_poll_cq)"));
        assert_eq!((rdma("post_recv").per_call, rdma("post_recv").calls), (122.0, 900));
        let text = "events: Ir
ob=(1) /usr/bin/ib_send_lat
fn=(1) 0x0000000000023100
0 100
cob=(2) /opt/rverbs/lib/libibverbs.so.1
cfn=(2) ibverbs::cq::poll_cq
calls=40000 0
0 1200000
ob=(2)
fn=(2)
0 1200000
";
        let p = Profile::parse(text);
        let c = capi_call(&p, Impl::Rverbs, "poll_cq", 1000).unwrap();
        assert_eq!((c.per_call, c.calls), (30.0, 40000));
        assert!(capi_call(&p, Impl::Rverbs, "post_send", 1000).is_none());
    }

    #[test]
    fn dates() {
        assert_eq!(today().len(), 10);
    }
}
