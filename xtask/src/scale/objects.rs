//! The scale bench's `objects` section: create and destroy N of each kind
//! (PD, MR, CQ, RC and UD QP, SRQ, AH), N = 1 to 10,000, on rdma-core 44,
//! rverbs' Rust API and rverbs' C library, in the same guest.
//!
//! Per object, per implementation:
//! * wall time of the create loop and of the destroy loop (at N = 1 the
//!   medians of [`SINGLE_ROUNDS`] rounds in one process), and the
//!   resident memory the create loop added (the programs' own lines, one
//!   process per kind and N, so that no run inherits another's heap), each
//!   process having created and destroyed one object of the kind before
//!   (the programs' `warm_up`: the figures are of warm objects, not of a
//!   process's first);
//! * syscalls: `strace -f -c` of the whole program at N and at N = 0 (the
//!   same set-up, no objects), `(calls(N) − calls(0)) / N`;
//! * userspace instructions: callgrind counting only inside the two loops
//!   (`--toggle-collect` of `scale_create`/`scale_destroy`), over N, at
//!   [`CG_N`] (valgrind under TCG makes larger N costly).

use std::path::PathBuf;

use super::{
    across, behind_every_round, command, header, pooled, ratio, round_pairs, thousands, triple, Rounds, Sample, IMPLS,
};
use crate::bench_report::KernelRun;
use crate::project::Workspace;
use crate::util::Result;

/// The object kinds, as the programs name them.
pub const KINDS: [&str; 7] = ["pd", "mr", "cq", "qp-rc", "qp-ud", "srq", "ah"];
/// The counts.
pub const NS: [u64; 4] = [1, 100, 1_000, 10_000];
/// The counts strace runs at (at 10,000 a traced run takes minutes under
/// TCG; equal counts at 100 and 1,000 already show none grows with N).
pub const STRACE_NS: [u64; 3] = [1, 100, 1_000];
/// The N callgrind counts at.
pub const CG_N: u64 = 100;
/// Timed runs of every cell: the table shows their medians. One run under
/// TCG scattered from 0.5 to 2.1 times its neighbour's with the same
/// syscalls (issue 35); the whole timed step is about a minute a run.
pub const TIME_RUNS: usize = 5;
/// Rounds of a timed run at N = 1 (the programs' `ROUNDS`: the loops run
/// that many times in one process, the line gives their medians). One
/// round is one object, and one timing of one object under TCG
/// scattered a cell to 1.63× with the same syscalls (issue 35).
pub const SINGLE_ROUNDS: u64 = 25;

/// The timed runs' rounds at `n`: [`SINGLE_ROUNDS`] at N = 1, else one.
fn rounds(n: u64) -> u64 {
    if n == 1 {
        SINGLE_ROUNDS
    } else {
        1
    }
}

/// The section's guest programs: (path in the guest, host file).
pub fn guest_files(ws: &Workspace) -> Result<Vec<(String, PathBuf)>> {
    super::scale_programs(ws)
}

/// strace's summary of a run: `so-KIND-IMPL-N`.
fn strace_tag(kind: &str, imp: &str, n: u64) -> String {
    format!("so-{kind}-{imp}-{n}")
}

/// The counts of an implementation's callgrind run, a line per dump
/// (`sg-rverbs.out.3 part: 3 desc: Trigger: --dump-after=… summary: 1234`):
/// `sg-IMPL`.
fn callgrind_tag(imp: &str) -> String {
    format!("sg-{imp}")
}

/// Appends the section's part of the guest script.
pub fn script(s: &mut String, _port: &mut u32) {
    // `RVERBS_SCALE_OBJECTS=callgrind` or `strace`: those runs alone
    // (development: a profile or syscall counts in minutes instead of the
    // whole section).
    match std::env::var("RVERBS_SCALE_OBJECTS").as_deref() {
        Ok("callgrind") => return callgrind_script(s),
        Ok("strace") => return strace_script(s),
        _ => {}
    }
    s.push_str("step scale-objects-time\n");
    // The timed runs: [`TIME_RUNS`] times every kind at every N, the three
    // implementations in turn, which one goes first rotating (a TCG guest
    // drifts; 28 cells a run, so each run starts the rotation one further).
    let mut turn = 0;
    for _ in 0..TIME_RUNS {
        for n in NS {
            for kind in KINDS {
                for k in 0..IMPLS.len() {
                    let imp = IMPLS[(turn + k) % IMPLS.len()];
                    let cmd = command(imp, "", &format!("objects {kind} {n} {}", rounds(n)));
                    s.push_str(&format!("timeout 900 {cmd} >>$D/sc-objects-{imp} 2>&1\n"));
                }
                turn += 1;
            }
        }
    }
    strace_script(s);
    callgrind_script(s);
}

/// The strace runs' part of the guest script.
fn strace_script(s: &mut String) {
    s.push_str("step scale-objects-strace\n");
    for kind in KINDS {
        for imp in IMPLS {
            for n in std::iter::once(0).chain(STRACE_NS) {
                let st = format!("strace -f -c -o $D/{}", strace_tag(kind, imp, n));
                let cmd = command(imp, &st, &format!("objects {kind} {n}"));
                s.push_str(&format!("timeout 900 {cmd} >/dev/null 2>>$D/se-objects-{imp}\n"));
            }
        }
    }
}

/// The callgrind runs' part of the guest script.
fn callgrind_script(s: &mut String) {
    s.push_str("step scale-objects-callgrind\n");
    // One process per implementation does every kind in turn (`all`);
    // callgrind counts inside the two loops only and dumps its count each
    // time `scale_counted`, called after the destroy loop, returns: dump k
    // is KINDS[k - 1]. (A dump triggered by a toggled function itself
    // stops counting that function: valgrind 3.19 counted no destroy.) The profiles
    // (`sg-IMPL.out.K`, per function) come back too, for callgrind_annotate.
    for imp in IMPLS {
        let out = format!("$D/sg-{imp}.out");
        let vg = format!(
            "valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*::scale_create' \
             --toggle-collect='*::scale_destroy' --dump-after='*::scale_counted' --dump-instr=no --dump-line=yes \
             --callgrind-out-file={out} --log-file=$D/sg-{imp}.vg"
        );
        let cmd = command(imp, &vg, &format!("objects all {CG_N}"));
        s.push_str(&format!(
            "timeout 1800 {cmd} >/dev/null 2>>$D/se-objects-{imp}\n\
             for f in {out}*; do echo \"${{f##*/}} $(grep -E '^(part|summary):|Trigger' $f | tr '\\n' ' ')\"; done >$D/{}\n",
            callgrind_tag(imp)
        ));
    }
}

/// The `calls` total of an `strace -c` summary.
fn strace_total(lines: &[String]) -> Option<u64> {
    lines.iter().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.last() == Some(&"total") && w.len() >= 5 {
            w[3].parse().ok()
        } else {
            None
        }
    })
}

/// Syscalls per object: `(calls(N) − calls(0)) / N`.
fn syscalls(run: &KernelRun, kind: &str, imp: &str, n: u64) -> Option<f64> {
    let total = |n| strace_total(run.files.get(&strace_tag(kind, imp, n))?);
    Some((total(n)? as f64 - total(0)? as f64) / n as f64)
}

/// Instructions per object (create and destroy) at [`CG_N`]: the count
/// of the dump that followed `kind`'s destroy loop, over N.
fn instructions(run: &KernelRun, kind: &str, imp: &str, n: u64) -> Option<f64> {
    let k = KINDS.iter().position(|x| *x == kind)? + 1;
    if n != CG_N {
        return None;
    }
    let ir = run.files.get(&callgrind_tag(imp))?.iter().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let after = |key: &str| w.iter().position(|x| *x == key).and_then(|i| w.get(i + 1));
        let part: usize = after("part:")?.parse().ok()?;
        let dumped = w.iter().any(|x| x.starts_with("--dump-after="));
        (dumped && part == k).then(|| after("summary:")?.parse::<u64>().ok()).flatten()
    })?;
    Some(ir as f64 / n as f64)
}

/// The median over the runs of a figure of the programs' lines.
fn figure(samples: &[Sample], kind: &str, imp: &str, n: u64, f: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    Sample::median_of(samples, |s| s.what == kind && s.imp == imp && s.n == n, f)
}

/// One value of a line.
fn value(key: &str) -> impl Fn(&Sample) -> Option<f64> + '_ {
    move |s| s.values.get(key).copied()
}

/// Create plus destroy, ns per object: the median over the runs.
fn wall(samples: &[Sample], kind: &str, imp: &str, n: u64) -> Option<f64> {
    figure(samples, kind, imp, n, |s| Some(value("create_ns")(s)? + value("destroy_ns")(s)?))
}

/// How many timed runs of `kind` at `n` the lines hold (per implementation,
/// the fewest).
fn time_runs(samples: &[Sample]) -> usize {
    let count =
        |kind: &str, imp: &str, n: u64| samples.iter().filter(|s| s.what == kind && s.imp == imp && s.n == n).count();
    KINDS
        .iter()
        .flat_map(|k| NS.iter().flat_map(move |n| IMPLS.iter().map(move |i| count(k, i, *n))))
        .filter(|c| *c > 0)
        .min()
        .unwrap_or(0)
}

/// The wall times of every cell, (rdma-core, `imp`), for [`pooled`].
fn wall_pairs(samples: &[Sample], imp: &str) -> Vec<(f64, f64)> {
    KINDS
        .iter()
        .flat_map(|k| NS.iter().map(move |n| (*k, *n)))
        .filter_map(|(k, n)| Some((wall(samples, k, "rdma-core", n)?, wall(samples, k, imp, n)?)))
        .collect()
}

/// The section's table (empty: no figures).
pub fn table(runs: &[KernelRun]) -> String {
    let samples: Vec<Vec<Sample>> = runs.iter().map(|r| Sample::all(r, "objects")).collect();
    if samples.iter().all(Vec::is_empty) {
        return String::new();
    }
    let runs_n = samples.iter().map(|s| time_runs(s)).max().unwrap_or(0);
    let runs_text = if runs_n == 1 { "one run".to_owned() } else { format!("the median of {runs_n} runs") };
    let mut t = format!(
        "**Scale: objects.** Create and destroy N objects of each kind, per object, \
         rdma-core 44 / rverbs / rverbs' C library (`a / b / c`), same guest. Syscalls: \
         strace of the whole program at N less at N = 0, over N (exact); instructions: \
         callgrind inside the create and destroy loops, over N, at N = 100 only (valgrind \
         under TCG); RSS: resident bytes the create loop added, over N \
         (`/proc/self/statm`; kernels before 6.2 count RSS per thread and fold it in every \
         64 faults, so 6.1's small-N figures read 0); µs: wall time of \
         create + destroy under TCG, {runs_text} (each process first creates and destroys one \
         object of the kind, untimed; at N = 1 a run is the median of {SINGLE_ROUNDS} rounds of \
         one object), with the ratios to rdma-core (rverbs, C library).\n\n",
    );
    t.push_str(&header(
        "| object | N | syscalls | instructions | RSS bytes |",
        "| --- | --: | --: | --: | --: |",
        runs,
        &["µs", "ratio"],
    ));
    let at = |run: &KernelRun| runs.iter().position(|r| std::ptr::eq(r, run)).unwrap_or(0);
    for kind in KINDS {
        for n in NS {
            let per = |f: &dyn Fn(&KernelRun, &str) -> Option<f64>, show: &dyn Fn(f64) -> String| {
                across(runs, |r| {
                    let v: Vec<Option<f64>> = IMPLS.iter().map(|i| f(r, i)).collect();
                    if v.iter().all(Option::is_none) {
                        "·".to_owned()
                    } else {
                        triple(&v, show)
                    }
                })
            };
            // Exact: as many places as N has digits after the first (two at least).
            let places = (n.max(1).ilog10() as usize).max(2);
            let sys = per(&|r, i| syscalls(r, kind, i, n), &|v| format!("{v:.places$}"));
            let ins = per(&|r, i| instructions(r, kind, i, n), &thousands);
            let rss = per(&|r, i| figure(&samples[at(r)], kind, i, n, value("rss_b")), &thousands);
            t.push_str(&format!("| {kind} | {} | {sys} | {ins} | {rss} |", thousands(n as f64)));
            for s in &samples {
                let w: Vec<Option<f64>> = IMPLS.iter().map(|i| wall(s, kind, i, n)).collect();
                t.push_str(&format!(
                    " {} | {} / {} |",
                    triple(&w, |v| format!("{:.1}", v / 1000.0)),
                    ratio(w[1], w[0]),
                    ratio(w[2], w[0])
                ));
            }
            t.push('\n');
        }
    }
    // A cell's ratio under TCG scatters around the truth even as a median;
    // all cells together say whether a library is ahead.
    t.push_str(&pooled(
        "Wall time, every kind and N pooled (rverbs' median against rdma-core's, cell by cell):",
        runs,
        &samples,
        wall_pairs,
    ));
    t.push_str(&behind_every_round(runs, &samples, wall_rounds));
    t
}

/// Every cell's wall times, (rdma-core, `imp`) round by round, for
/// [`behind_every_round`].
fn wall_rounds(samples: &[Sample], imp: &str) -> Rounds {
    let total = |s: &Sample| Some(value("create_ns")(s)? + value("destroy_ns")(s)?);
    KINDS
        .iter()
        .flat_map(|k| NS.iter().map(move |n| (*k, *n)))
        .map(|(k, n)| {
            let base = |s: &Sample| s.what == k && s.n == n && s.imp == "rdma-core";
            let lib = |s: &Sample| s.what == k && s.n == n && s.imp == imp;
            (format!("{k} {}", thousands(n as f64)), round_pairs(samples, base, lib, total))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(String::from).collect()
    }

    fn strace_c(calls: u64) -> Vec<String> {
        lines(&format!(
            "% time     seconds  usecs/call     calls    errors syscall\n\
             ------ ----------- ----------- --------- --------- ----------------\n \
             60.00    0.000006           3         2           ioctl\n\
             100.00    0.000010           1      {calls}         3 total\n"
        ))
    }

    fn run(series: &str) -> KernelRun {
        let mut files = BTreeMap::new();
        files.insert(
            "sc-objects-rverbs".to_owned(),
            lines(
                "SCALE objects pd rverbs 100 create_ns=2000 destroy_ns=1000 rss_b=40.4\n\
                 scale_objects objects qp-rc 10000: creating qp-rc 9000 of 10000: ENOMEM",
            ),
        );
        files.insert(
            "sc-objects-rdma-core".to_owned(),
            lines("SCALE objects pd rdma-core 100 create_ns=3000 destroy_ns=1000 rss_b=41"),
        );
        files.insert(strace_tag("pd", "rverbs", 0), strace_c(50));
        files.insert(strace_tag("pd", "rverbs", 100), strace_c(250));
        files.insert(strace_tag("pd", "rdma-core", 0), strace_c(90));
        files.insert(strace_tag("pd", "rdma-core", 100), strace_c(290));
        files.insert(
            callgrind_tag("rverbs"),
            lines(
                "sg-rverbs.out part: 8 desc: Trigger: Program termination summary: 0\n\
                 sg-rverbs.out.1 part: 1 desc: Trigger: --dump-after=*::scale_counted summary: 123400\n\
                 sg-rverbs.out.2 part: 2 desc: Trigger: --dump-after=*::scale_counted summary: 555500",
            ),
        );
        KernelRun { series: series.into(), files, ..Default::default() }
    }

    #[test]
    fn reads_strace_summaries() {
        assert_eq!(strace_total(&strace_c(1234)), Some(1234));
        // No errors column in the total line.
        assert_eq!(strace_total(&lines("100.00    0.000017           1        13           total")), Some(13));
        assert_eq!(strace_total(&lines("nothing here")), None);
        let r = run("6.12");
        assert_eq!(syscalls(&r, "pd", "rverbs", 100), Some(2.0));
        assert_eq!(syscalls(&r, "pd", "rverbs", 1000), None);
        assert_eq!(instructions(&r, "pd", "rverbs", 100), Some(1234.0));
        assert_eq!(instructions(&r, "pd", "rverbs", 1), None);
        assert_eq!(instructions(&r, "mr", "rverbs", 100), Some(5555.0));
        assert_eq!(instructions(&r, "cq", "rverbs", 100), None);
        assert_eq!(instructions(&r, "pd", "rdma-core", 100), None);
    }

    #[test]
    fn script_runs_each_kind_n_and_impl() {
        let mut s = String::new();
        script(&mut s, &mut 0);
        assert!(
            s.contains("timeout 900 /usr/local/bin/scale_objects objects qp-ud 10000 1 >>$D/sc-objects-rverbs 2>&1\n")
        );
        // N = 1 runs its rounds in one process.
        assert!(s.contains("timeout 900 /usr/local/bin/scale_c rdma-core objects srq 1 25 >>$D/sc-objects-rdma-core"));
        assert!(s.contains(
            "timeout 900 env LD_LIBRARY_PATH=/opt/rverbs/lib strace -f -c -o $D/so-ah-rverbs-capi-0 \
             /usr/local/bin/scale_c rverbs-capi objects ah 0 >/dev/null"
        ));
        assert!(s.contains("--log-file=$D/sg-rdma-core.vg /usr/local/bin/scale_c rdma-core objects all 100 >/dev/null"));
        assert!(s.contains("--dump-after='*::scale_counted'"));
        assert!(!s.contains("-o $D/so-pd-rverbs-10000"));
        let timed = s.lines().filter(|l| l.contains(">>$D/sc-objects-")).count();
        assert_eq!(timed, TIME_RUNS * KINDS.len() * NS.len() * IMPLS.len());
        // The first implementation rotates.
        let firsts: Vec<&str> = s.lines().filter(|l| l.contains(" objects pd ") && l.contains(">>")).collect();
        assert!(firsts[0].contains("rdma-core") && firsts[1].contains("rverbs") && firsts[2].contains("rverbs-capi"));
    }

    #[test]
    fn table_has_each_figure() {
        let runs = [run("6.1"), run("6.12")];
        let t = table(&runs);
        let row = t.lines().find(|l| l.starts_with("| pd | 100 |")).unwrap();
        assert_eq!(
            row,
            "| pd | 100 | 2.00 / 2.00 / — | — / 1,234 / — | 41 / 40 / — | 4.0 / 3.0 / — | 0.75 / — | 4.0 / 3.0 / — | 0.75 / — |"
        );
        assert!(t.contains("| qp-rc | 10,000 | · | · | · | — / — / — | — / — |"));
        assert_eq!(t.lines().filter(|l| l.starts_with("| ")).count(), 2 + KINDS.len() * NS.len());
        assert!(t.contains("under TCG, one run (each process"), "{t}");
        assert!(
            t.contains("- 6.1 rverbs: ahead in 1 of 1 cells, geometric mean of the ratios 0.75 (sign test p = 0.500)")
        );
        assert!(t.contains("- 6.12 C library: -\n"));
        assert_eq!(table(&[KernelRun::default()]), "");
    }

    #[test]
    fn a_cell_is_the_median_of_its_runs() {
        let line = |ns: u64| {
            Sample::parse(&format!("SCALE objects pd rverbs 100 create_ns={ns} destroy_ns=0 rss_b=1")).unwrap()
        };
        let samples = [
            line(5000),
            line(1000),
            line(3000),
            Sample::parse("SCALE objects pd rdma-core 100 create_ns=4000 destroy_ns=0").unwrap(),
        ];
        assert_eq!(wall(&samples, "pd", "rverbs", 100), Some(3000.0));
        assert_eq!(time_runs(&samples), 1);
        assert_eq!(time_runs(&samples[..3]), 3);
        assert_eq!(wall_pairs(&samples, "rverbs"), [(4000.0, 3000.0)]);
        let run = KernelRun { series: "6.1".into(), ..Default::default() };
        let t = pooled("Pooled:", &[run], &[samples.to_vec()], wall_pairs);
        assert!(t.contains("- 6.1 rverbs: ahead in 1 of 1 cells, geometric mean of the ratios 0.75"), "{t}");
        assert!(t.contains("- 6.1 C library: -\n"), "{t}");
    }

    #[test]
    fn a_cell_behind_in_every_round_is_named() {
        let line = |imp: &str, n: u64, ns: u64| {
            Sample::parse(&format!("SCALE objects pd {imp} {n} create_ns={ns} destroy_ns=100")).unwrap()
        };
        // N = 1: rverbs behind in both rounds; N = 100: behind in one of
        // two (its median is behind too, but it is not named).
        let samples = [
            line("rdma-core", 1, 1000),
            line("rverbs", 1, 1100),
            line("rdma-core", 100, 1000),
            line("rverbs", 100, 900),
            line("rdma-core", 1, 1000),
            line("rverbs", 1, 1001),
            line("rdma-core", 100, 1000),
            line("rverbs", 100, 1500),
        ];
        let rounds = wall_rounds(&samples, "rverbs");
        assert_eq!(rounds[0], ("pd 1".to_owned(), vec![(1100.0, 1200.0), (1100.0, 1101.0)]));
        assert_eq!(rounds[1].1, [(1100.0, 1000.0), (1100.0, 1600.0)]);
        let run = KernelRun { series: "6.12".into(), ..Default::default() };
        let t = behind_every_round(&[run], &[samples.to_vec()], wall_rounds);
        assert!(t.contains("- 6.12 rverbs: 1 of 2 cells (pd 1; by chance about 0.5)\n"), "{t}");
        assert!(t.contains("- 6.12 C library: -\n"), "{t}");
    }
}
