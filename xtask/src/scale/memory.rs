//! The scale bench's `memory` section: registering 4 KiB, 1 MiB, 64 MiB and
//! 1 GiB (and 64 MiB of 2 MiB huge pages), changing the region's access
//! (`ibv_rereg_mr`) and deregistering it, on rdma-core 44, rverbs' Rust
//! API and rverbs' C library in the same guest. Each program maps the
//! buffer and writes every page first, so the times are of pinning and
//! the kernel's work, not of page faults; it prints the median of its
//! repetitions.

use std::path::PathBuf;

use super::{command, header, ratio, Sample, IMPLS};
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
    for (k, (size, _, reps, huge)) in SIZES.into_iter().enumerate() {
        for j in 0..IMPLS.len() {
            let imp = IMPLS[(k + j) % IMPLS.len()];
            let args = format!("memory {size} {reps}{}", if huge { " huge" } else { "" });
            s.push_str(&format!("timeout 900 {} >>$D/sc-memory-{imp} 2>&1\n", command(imp, "", &args)));
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
         changed (`ibv_rereg_mr`, IBV_REREG_MR_CHANGE_ACCESS) and deregistered, the median \
         of the repetitions, every page written before; rdma-core 44 / rverbs / rverbs' C \
         library (`a / b / c`) and the ratios to rdma-core, same guest under TCG. \
         Registration in ms per GiB, rereg and dereg in µs per call. n/a: the verb fails with \
         EOPNOTSUPP (rdma-core 44's rxe provider has no `rereg_mr`; nor has rxe in kernel 6.1).\n\n",
    );
    t.push_str(&header("| verb | size |", "| --- | --: |", runs, &["", "ratio"]));
    for (verb, key) in [("reg_mr", "reg_ns"), ("rereg_mr", "rereg_ns"), ("dereg_mr", "dereg_ns")] {
        for (size, bytes, _, huge) in SIZES {
            let w = what(size, huge);
            let label = format!(
                "{} {}",
                size.replace('k', " KiB").replace('m', " MiB").replace('g', " GiB"),
                if huge { "(2 MiB pages)" } else { "" }
            );
            t.push_str(&format!("| {verb} | {} |", label.trim()));
            for s in &samples {
                let one = |imp: &str| s.iter().find(|x| x.what == w && x.imp == imp);
                let v: Vec<Option<f64>> = IMPLS.iter().map(|i| one(i)?.values.get(key).copied()).collect();
                let na: Vec<bool> =
                    IMPLS.iter().map(|i| one(i).is_some_and(|x| x.values.contains_key("rereg_errno"))).collect();
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
    t
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
        assert_eq!(s.lines().filter(|l| l.contains(" memory ")).count(), SIZES.len() * IMPLS.len());

        let mut files = BTreeMap::new();
        let l = |s: &str| s.lines().map(String::from).collect::<Vec<_>>();
        files.insert(
            "sc-memory-rdma-core".into(),
            l("SCALE memory 1g rdma-core 3 reg_ns=2000000000 rereg_errno=95 dereg_ns=500000"),
        );
        files.insert(
            "sc-memory-rverbs".into(),
            l("SCALE memory 1g rverbs 3 reg_ns=1000000000 rereg_ns=30000 dereg_ns=400000"),
        );
        let run = KernelRun { series: "6.12".into(), files, ..Default::default() };
        let t = table(&[run]);
        assert!(t.contains("| reg_mr | 1 GiB | 2000.0 / 1000.0 / — | 0.50 / — |"), "{t}");
        assert!(t.contains("| rereg_mr | 1 GiB | n/a / 30.0 / — | — / — |"), "{t}");
        assert!(t.contains("| dereg_mr | 1 GiB | 500.0 / 400.0 / — | 0.80 / — |"), "{t}");
        assert!(t.contains("| reg_mr | 64 MiB (2 MiB pages) | — / — / — |"), "{t}");
        assert_eq!(table(&[KernelRun::default()]), "");
    }
}
