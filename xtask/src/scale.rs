//! `cargo xtask bench --only scale`: what an object, a connection, a
//! registered byte and a shared queue cost as the work grows, rverbs next
//! to rdma-core 44 in the same boot (see docs/PERFORMANCE.md, "Scale").
//!
//! Four sections, each a module with the same three functions:
//! [`objects`] (create/destroy N of each kind), [`connections`] (N RDMA CM
//! connections to one listener), [`memory`] (registering 4 KiB to 1 GiB),
//! [`queues`] (one CQ under many QPs, many CQs on one channel).
//!
//! * `guest_files`: the programs a section runs, built on the host, with
//!   their paths in the guest;
//! * `script`: the section's part of the bench guest's script. Its results
//!   go into files named `sc-…` in the bench directory, which the script's
//!   last step sends back with every other file;
//! * `table`: the section's Markdown table from the files of each kernel.
//!
//! A result line anywhere in an `sc-` file reads
//! `SCALE <section> <what> <impl> <n> key=value …` ([`Sample`]), so that
//! the figures a section computes in the guest reach its table parsed once.

mod connections;
mod memory;
mod objects;
mod queues;
mod sample;

use std::path::PathBuf;

pub use sample::Sample;

use crate::bench_report::{p_text, KernelRun, Pairs};
use crate::project::{self, Workspace};
use crate::util::{self, note, Result};

/// The first TCP port the sections' pairs use (the rest of the bench
/// counts up from 19000).
pub const FIRST_PORT: u32 = 30000;

/// Every section's guest programs: (path in the guest, host file).
pub fn guest_files(ws: &Workspace) -> Result<Vec<(String, PathBuf)>> {
    let mut v = objects::guest_files(ws)?;
    v.extend(memory::guest_files(ws)?);
    v.extend(connections::guest_files(ws)?);
    v.extend(queues::guest_files(ws)?);
    v.sort();
    v.dedup();
    Ok(v)
}

/// Appends every section's script; `port` is the next free TCP port.
pub fn script(s: &mut String) {
    let mut port = FIRST_PORT;
    s.push_str("step scale\n");
    // `RVERBS_SCALE_SECTIONS=connections,queues`: only those (development).
    let only = std::env::var("RVERBS_SCALE_SECTIONS").ok();
    let on = |name: &str| only.as_deref().is_none_or(|l| l.split(',').any(|w| w.trim() == name));
    if on("objects") {
        objects::script(s, &mut port);
    }
    if on("memory") {
        memory::script(s, &mut port);
    }
    if on("connections") {
        connections::script(s, &mut port);
    }
    if on("queues") {
        queues::script(s, &mut port);
    }
}

/// The scale tables, one per section that has figures.
pub fn tables(runs: &[KernelRun]) -> String {
    let parts = [objects::table(runs), memory::table(runs), connections::table(runs), queues::table(runs)];
    parts.into_iter().filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n")
}

/// The three implementations a section compares, as its lines name them.
pub const IMPLS: [&str; 3] = ["rdma-core", "rverbs", "rverbs-capi"];

/// Where the guest finds the `objects` and `memory` programs.
pub const SCALE_OBJECTS: &str = "/usr/local/bin/scale_objects";
pub const SCALE_C: &str = "/usr/local/bin/scale_c";

/// The command that does `args` (`objects pd 100`, `memory 1g 2`) with
/// implementation `imp`: rverbs' Rust API (`examples/scale_objects.rs`), or
/// `capi/examples/scale_c.rs` on rdma-core's `libibverbs.so.1` or, through
/// `LD_LIBRARY_PATH`, on rverbs'. `wrap` (strace, valgrind) goes right
/// before the program, after the environment.
pub fn command(imp: &str, wrap: &str, args: &str) -> String {
    let wrap = if wrap.is_empty() { String::new() } else { format!("{wrap} ") };
    match imp {
        "rverbs" => format!("{wrap}{SCALE_OBJECTS} {args}"),
        "rverbs-capi" => format!("env LD_LIBRARY_PATH={} {wrap}{SCALE_C} {imp} {args}", project::GUEST_LIB_DIR),
        _ => format!("{wrap}{SCALE_C} {imp} {args}"),
    }
}

/// The `objects`/`memory` programs, release builds (the figures are of
/// optimised code on every side, as rdma-core's are): (guest path, host file).
fn scale_programs(ws: &Workspace) -> Result<Vec<(String, PathBuf)>> {
    let mut v = Vec::new();
    for (package, example, at) in [("rverbs", "scale_objects", SCALE_OBJECTS), ("rverbs-capi", "scale_c", SCALE_C)] {
        let mut cmd = project::cargo();
        cmd.current_dir(&ws.root).args(["build", "--release", "--quiet", "-p", package, "--example", example]);
        note(util::describe(&cmd));
        util::run(&mut cmd)?;
        let host = ws.target_dir.join("release/examples").join(example);
        if !host.is_file() {
            return Err(format!("cargo built no {} (examples of {package})", host.display()));
        }
        v.push((at.to_owned(), host));
    }
    Ok(v)
}

/// Grouped thousands: `12345` → `12,345`.
pub fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 && out != "0" {
        out.insert(0, '-');
    }
    out
}

/// `a / b / c` of the three implementations' figures (`—` where one is missing).
pub fn triple(v: &[Option<f64>], show: impl Fn(f64) -> String) -> String {
    v.iter().map(|x| x.map_or("—".to_owned(), &show)).collect::<Vec<_>>().join(" / ")
}

/// The same cell from every kernel: once when they agree, else per kernel
/// (`6.1: …; 6.12: …`).
pub fn across(runs: &[KernelRun], cell: impl Fn(&KernelRun) -> String) -> String {
    let cells: Vec<String> = runs.iter().map(&cell).collect();
    if cells.windows(2).all(|w| w[0] == w[1]) {
        cells.into_iter().next().unwrap_or_default()
    } else {
        runs.iter().zip(cells).map(|(r, c)| format!("{}: {c}", r.series)).collect::<Vec<_>>().join("; ")
    }
}

/// `x/base` to two places, `—` without both.
pub fn ratio(x: Option<f64>, base: Option<f64>) -> String {
    match (x, base) {
        (Some(x), Some(b)) if b > 0.0 => format!("{:.2}", x / b),
        _ => "—".into(),
    }
}

/// rverbs' two libraries: (implementation, name in the text).
const LIBRARIES: [(&str, &str); 2] = [("rverbs", "rverbs"), ("rverbs-capi", "C library")];

/// A section's cells, each its name and its rounds: (rdma-core, library)
/// figures paired round by round ([`round_pairs`]).
pub type Rounds = Vec<(String, Vec<(f64, f64)>)>;

/// `value` of the r-th sample `base` keeps paired with that of the r-th
/// `lib` keeps: a cell's rounds, as the script runs them (a round runs
/// every implementation once, back to back, and a file's lines come in
/// the script's order).
pub fn round_pairs(
    samples: &[Sample],
    base: impl Fn(&Sample) -> bool,
    lib: impl Fn(&Sample) -> bool,
    value: impl Fn(&Sample) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let of = |keep: &dyn Fn(&Sample) -> bool| samples.iter().filter(|s| keep(s)).map(&value).collect::<Vec<_>>();
    of(&base).into_iter().zip(of(&lib)).filter_map(|(a, b)| Some((a?, b?))).collect()
}

/// Below the pooled lines: for each kernel and library, the cells where
/// the library was slower than rdma-core in every one of the cell's
/// rounds, and how many cells would be so by chance were the costs equal
/// (a round a coin toss: 2^-k for a cell of k rounds, summed). A cell
/// whose ratio reads above 1 but that is not listed lost some round.
pub fn behind_every_round(
    runs: &[KernelRun],
    samples: &[Vec<Sample>],
    rounds: impl Fn(&[Sample], &str) -> Rounds,
) -> String {
    let mut t = String::from(
        "\nCells where a library was slower than rdma-core in every round (a round runs the three \
         implementations back to back; with equal costs a cell of k rounds is so with chance 2^-k):\n\n",
    );
    for (run, s) in runs.iter().zip(samples) {
        if s.is_empty() {
            continue;
        }
        for (imp, name) in LIBRARIES {
            let cells: Rounds = rounds(s, imp).into_iter().filter(|(_, r)| r.len() >= 2).collect();
            if cells.is_empty() {
                t.push_str(&format!("- {} {name}: -\n", run.series));
                continue;
            }
            let chance = cells.iter().fold(0.0, |sum, (_, r)| sum + 0.5f64.powi(r.len() as i32));
            let behind: Vec<&str> =
                cells.iter().filter(|(_, r)| r.iter().all(|(a, b)| b > a)).map(|(c, _)| c.as_str()).collect();
            let list = if behind.is_empty() { "none".to_owned() } else { behind.join(", ") };
            t.push_str(&format!(
                "- {} {name}: {} of {} cells ({list}; by chance about {chance:.1})\n",
                run.series,
                behind.len(),
                cells.len()
            ));
        }
    }
    t
}

/// Below a section's table: for each kernel and each of rverbs' two
/// libraries, the section's cells against rdma-core's (`pairs`: the
/// (rdma-core, library) figures of every cell both have), pooled as cells
/// ahead, the geometric mean of the ratios and the sign test.
pub fn pooled(
    title: &str,
    runs: &[KernelRun],
    samples: &[Vec<Sample>],
    pairs: impl Fn(&[Sample], &str) -> Vec<(f64, f64)>,
) -> String {
    let mut t = format!("\n{title}\n\n");
    for (run, s) in runs.iter().zip(samples) {
        if s.is_empty() {
            continue;
        }
        for (imp, name) in LIBRARIES {
            let text = pooled_text(&Pairs::of(&pairs(s, imp), true), "cells");
            t.push_str(&format!("- {} {name}: {text}\n", run.series));
        }
    }
    t
}

/// A pooled line's words: `ahead in W of N UNIT, geometric mean of the
/// ratios G (sign test p = P)`, `-` without pairs.
pub fn pooled_text(p: &Pairs, unit: &str) -> String {
    match p.geo_mean {
        Some(geo) => format!(
            "ahead in {} of {} {unit}, geometric mean of the ratios {geo:.2} (sign test p = {})",
            p.wins,
            p.n,
            p_text(p.p())
        ),
        None => "-".into(),
    }
}

/// A table's header and alignment rows: the leading columns `lead`
/// (`"| N | pair |"`) aligned as `lead_align` (`"| --: | --- |"`), then for
/// each kernel run the columns `cols`, each named after the run's series
/// (`6.12 conn/s`; an empty name: the series alone) and right-aligned.
pub fn header(lead: &str, lead_align: &str, runs: &[KernelRun], cols: &[&str]) -> String {
    let mut t = lead.to_owned();
    for r in runs {
        for c in cols {
            let sep = if c.is_empty() { "" } else { " " };
            t.push_str(&format!(" {}{sep}{c} |", r.series));
        }
    }
    t.push('\n');
    t.push_str(lead_align);
    t.push_str(&" --: |".repeat(cols.len() * runs.len()));
    t.push('\n');
    t
}
