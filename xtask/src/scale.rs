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

#[allow(unused_imports)]
pub use sample::Sample;

use crate::bench_report::KernelRun;
use crate::project::Workspace;
use crate::util::Result;

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
    objects::script(s, &mut port);
    memory::script(s, &mut port);
    connections::script(s, &mut port);
    queues::script(s, &mut port);
}

/// The scale tables, one per section that has figures.
pub fn tables(runs: &[KernelRun]) -> String {
    let parts = [objects::table(runs), memory::table(runs), connections::table(runs), queues::table(runs)];
    parts.into_iter().filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n")
}
