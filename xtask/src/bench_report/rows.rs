//! The main table: each measure's figures on every kernel, its goal and
//! whether the goal was met.

use crate::bench::{self, tags, Impl, CAPI_PERFTEST, CG_ITERS, PERFTEST, SIZES, UD_SIZES};
use crate::callgrind::Profile;

use super::kernel_run::{median, KernelRun};
use super::per_call::{events_per_iter, rdma_core_call, rverbs_call, VERBS};
use super::report::{fmt, fmt_int, ratio, size_text, Report, BOTH_AND_RATIO};
use super::syscalls::Syscalls;

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

impl Report<'_> {
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
        // A poll call's cost follows how many completions it returns, and
        // the calls per completion follow the events (one poll per event on
        // both sides): the schedule decides both. Both clients reap the same
        // two completions an iteration, a send's and a receive's.
        let poll = VERBS.iter().find(|v| v.name == "poll_cq");
        let completions = 2.0 * f64::from(CG_ITERS[1]);
        let all_calls = |c: Option<super::per_call::PerCall>| c.map(|c| c.per_call * c.calls as f64 / completions);
        rows.push(Row {
            what: "instructions per completion: poll_cq, all its calls over the 2 completions an iteration".into(),
            cells: profiles
                .iter()
                .map(|(r, v)| {
                    (
                        all_calls(
                            r.as_ref().zip(poll).and_then(|(p, verb)| rdma_core_call(p, verb, u64::from(CG_ITERS[1]))),
                        ),
                        all_calls(v.as_ref().zip(poll).and_then(|(p, verb)| rverbs_call(p, verb))),
                    )
                })
                .collect(),
            digits: 1,
            goal: Goal::None,
            ratio: true,
        });
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

    pub(super) fn table(&self) -> String {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals() {
        assert!(Goal::RatioAtMost(0.5).met(Some(1000.0), Some(480.0)).unwrap());
        assert!(!Goal::AtMost(60.0).met(None, Some(61.0)).unwrap());
    }
}
