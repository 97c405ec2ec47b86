//! The scale bench's `memory` section: registering 4 KiB, 1 MiB, 64 MiB and
//! 1 GiB (and 64 MiB of 2 MiB huge pages), changing the region's access
//! (`ibv_rereg_mr`) and deregistering it, on rdma-core 44, rverbs' Rust
//! API and rverbs' C library in the same guest. Each program maps the
//! buffer and writes every page first, so the times are of pinning and
//! the kernel's work, not of page faults; it prints the median of its
//! repetitions. Each cell runs [`RUNS`] processes, the implementations in
//! turn, and the table shows the median of their medians.

use std::path::PathBuf;

use super::{behind_every_round, command, header, pooled, ratio, round_pairs, Rounds, Sample, IMPLS};
use crate::bench_report::KernelRun;
use crate::project::Workspace;
use crate::util::Result;

/// (size as the programs name it, bytes, repetitions, huge pages).
pub const SIZES: [(&str, u64, u32, bool); 5] = [
    ("4k", 4 << 10, 200, false),
    ("1m", 1 << 20, 50, false),
    ("64m", 64 << 20, 5, false),
    ("1g", 1 << 30, 3, false),
    ("64m", 64 << 20, 5, true),
];

/// The verbs timed: (name in the table, key of the programs' lines).
const VERBS: [(&str, &str); 3] = [("reg_mr", "reg_ns"), ("rereg_mr", "rereg_ns"), ("dereg_mr", "dereg_ns")];

/// Processes per cell. One process a cell put whole columns at 1.5 to
/// 1.95 times rdma-core's in one run and at 0.5 in another with the same
/// code (issue 35): a process's buffer lands on different pages each
/// time, and its repetitions share them.
pub const RUNS: usize = 5;

/// 2 MiB huge pages the guest reserves for the huge-page row (64 MiB and
/// some to spare).
const HUGE_PAGES: u32 = 40;

/// The section's guest programs: (path in the guest, host file).
pub fn guest_files(ws: &Workspace) -> Result<Vec<(String, PathBuf)>> {
    super::scale_programs(ws)
}

/// The name of a row's size in the programs' lines (`64m-huge`).
fn what(size: &str, huge: bool) -> String {
    if huge {
        format!("{size}-huge")
    } else {
        size.to_owned()
    }
}

/// Appends the section's part of the guest script.
pub fn script(s: &mut String, _port: &mut u32) {
    s.push_str("step scale-memory\n");
    s.push_str(&format!("echo {HUGE_PAGES} >/proc/sys/vm/nr_hugepages 2>/dev/null\n"));
    s.push_str("grep -i huge /proc/meminfo >$D/sm-meminfo 2>&1\n");
    // Which implementation goes first rotates from cell to cell (a TCG
    // guest drifts).
    let mut turn = 0;
    for _ in 0..RUNS {
        for (size, _, reps, huge) in SIZES {
            for j in 0..IMPLS.len() {
                let imp = IMPLS[(turn + j) % IMPLS.len()];
                let args = format!("memory {size} {reps}{}", if huge { " huge" } else { "" });
                s.push_str(&format!("timeout 900 {} >>$D/sc-memory-{imp} 2>&1\n", command(imp, "", &args)));
            }
            turn += 1;
        }
    }
    s.push_str("echo 0 >/proc/sys/vm/nr_hugepages 2>/dev/null\n");
}

/// The section's table (empty: no figures).
pub fn table(runs: &[KernelRun]) -> String {
    let samples: Vec<Vec<Sample>> = runs.iter().map(|r| Sample::all(r, "memory")).collect();
    if samples.iter().all(Vec::is_empty) {
        return String::new();
    }
    let mut t = String::from(
        "**Scale: memory.** One buffer registered (`ibv_reg_mr`, LOCAL_WRITE), its access \
         changed (`ibv_rereg_mr`, IBV_REREG_MR_CHANGE_ACCESS) and deregistered, every page \
         written before; each process prints the median of its repetitions, and a cell is \
         the median of its processes' (`RUNS` in xtask/src/scale/memory.rs); rdma-core 44 / \
         rverbs / rverbs' C library (`a / b / c`) and the ratios to rdma-core, same guest \
         under TCG. Registration in ms per GiB, rereg and dereg in µs per call. n/a: the verb \
         fails with EOPNOTSUPP (rdma-core 44's rxe provider has no `rereg_mr`; nor has rxe in \
         kernel 6.1).\n\n",
    );
    t.push_str(&header("| verb | size |", "| --- | --: |", runs, &["", "ratio"]));
    for (verb, key) in VERBS {
        for (size, bytes, _, huge) in SIZES {
            let w = what(size, huge);
            let label = format!(
                "{} {}",
                size.replace('k', " KiB").replace('m', " MiB").replace('g', " GiB"),
                if huge { "(2 MiB pages)" } else { "" }
            );
            t.push_str(&format!("| {verb} | {} |", label.trim()));
            for s in &samples {
                let v: Vec<Option<f64>> = IMPLS.iter().map(|i| cell(s, &w, i, key)).collect();
                let na: Vec<bool> = IMPLS
                    .iter()
                    .map(|i| s.iter().any(|x| x.what == w && x.imp == *i && x.values.contains_key("rereg_errno")))
                    .collect();
                let cells: Vec<String> = v
                    .iter()
                    .zip(&na)
                    .map(|(x, &na)| match x {
                        Some(ns) if verb == "reg_mr" => format!("{:.1}", ns / 1e6 * (1u64 << 30) as f64 / bytes as f64),
                        Some(ns) => format!("{:.1}", ns / 1e3),
                        None if na && key == "rereg_ns" => "n/a".into(),
                        None => "—".into(),
                    })
                    .collect();
                t.push_str(&format!(" {} | {} / {} |", cells.join(" / "), ratio(v[1], v[0]), ratio(v[2], v[0])));
            }
            t.push('\n');
        }
    }
    t.push_str(&pooled(
        "Memory, every verb and size pooled (each library's cell against rdma-core's):",
        runs,
        &samples,
        cell_pairs,
    ));
    t.push_str(&behind_every_round(runs, &samples, cell_rounds));
    t
}

/// Every cell's processes, (rdma-core, `imp`) round by round, for
/// [`behind_every_round`].
fn cell_rounds(samples: &[Sample], imp: &str) -> Rounds {
    let mut cells = Vec::new();
    for (verb, key) in VERBS {
        for (size, _, _, huge) in SIZES {
            let w = what(size, huge);
            let pairs = round_pairs(
                samples,
                |x| x.what == w && x.imp == "rdma-core",
                |x| x.what == w && x.imp == imp,
                |x| x.values.get(key).copied(),
            );
            cells.push((format!("{verb} {w}"), pairs));
        }
    }
    cells
}

/// A cell: the median over the processes of `key` for `imp` at `what`.
fn cell(samples: &[Sample], what: &str, imp: &str, key: &str) -> Option<f64> {
    Sample::median_of(samples, |x| x.what == what && x.imp == imp, |x| x.values.get(key).copied())
}

/// Every cell rdma-core and `imp` both have, (rdma-core, `imp`), for
/// [`pooled`].
fn cell_pairs(samples: &[Sample], imp: &str) -> Vec<(f64, f64)> {
    let mut pairs = Vec::new();
    for (_, key) in VERBS {
        for (size, _, _, huge) in SIZES {
            let w = what(size, huge);
            if let (Some(a), Some(b)) = (cell(samples, &w, "rdma-core", key), cell(samples, &w, imp, key)) {
                pairs.push((a, b));
            }
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn script_and_table() {
        let mut s = String::new();
        script(&mut s, &mut 0);
        assert!(s.contains("timeout 900 /usr/local/bin/scale_objects memory 1g 3 >>$D/sc-memory-rverbs 2>&1\n"));
        assert!(s.contains(
            "env LD_LIBRARY_PATH=/opt/rverbs/lib /usr/local/bin/scale_c rverbs-capi memory 64m 5 huge >>$D/sc-memory-rverbs-capi"
        ));
        assert_eq!(s.lines().filter(|l| l.contains(" memory ")).count(), RUNS * SIZES.len() * IMPLS.len());
        // The first cell of the second round starts with the implementation
        // after the one that started the last cell of the first.
        let firsts: Vec<&str> = s.lines().filter(|l| l.contains(" memory ")).step_by(IMPLS.len()).collect();
        assert_ne!(firsts[SIZES.len() - 1].split(">>").nth(1), firsts[SIZES.len()].split(">>").nth(1));

        let mut files = BTreeMap::new();
        let l = |s: &str| s.lines().map(String::from).collect::<Vec<_>>();
        files.insert(
            "sc-memory-rdma-core".into(),
            l("SCALE memory 1g rdma-core 3 reg_ns=2000000000 rereg_errno=95 dereg_ns=500000"),
        );
        files.insert(
            "sc-memory-rverbs".into(),
            l("SCALE memory 1g rverbs 3 reg_ns=9000000000 rereg_ns=10000 dereg_ns=300000\n\
               SCALE memory 1g rverbs 3 reg_ns=1000000000 rereg_ns=30000 dereg_ns=400000\n\
               SCALE memory 1g rverbs 3 reg_ns=900000000 rereg_ns=50000 dereg_ns=900000"),
        );
        let run = KernelRun { series: "6.12".into(), files, ..Default::default() };
        let t = table(&[run]);
        assert!(t.contains("| reg_mr | 1 GiB | 2000.0 / 1000.0 / — | 0.50 / — |"), "{t}");
        assert!(t.contains("| rereg_mr | 1 GiB | n/a / 30.0 / — | — / — |"), "{t}");
        assert!(t.contains("| dereg_mr | 1 GiB | 500.0 / 400.0 / — | 0.80 / — |"), "{t}");
        assert!(t.contains("| reg_mr | 64 MiB (2 MiB pages) | — / — / — |"), "{t}");
        // reg and dereg both lower than rdma-core's; rereg has no pair.
        assert!(t.contains("- 6.12 rverbs: ahead in 2 of 2 cells, geometric mean of the ratios 0.63"), "{t}");
        assert!(t.contains("- 6.12 C library: -\n"), "{t}");
        // One rdma-core process: no cell has two rounds.
        assert!(t.contains("- 6.12 rverbs: -\n"), "{t}");
        assert_eq!(table(&[KernelRun::default()]), "");
    }
}
