//! `cargo xtask bench`'s figures: what the guest's files say, the goals of
//! issue #11 next to them, one Markdown table, and its place in
//! docs/PERFORMANCE.md.
//!
//! The modules: [`kernel_run`] (what a guest sent back, and the figures in
//! its files), [`syscalls`] (strace counts), [`per_call`] (callgrind's
//! instructions per verb call, and their tables), [`rows`] (the main table,
//! its goals), [`pairs`] (the timings run by run, with a sign test),
//! [`mock`] (the host's provider benches), [`report`] (the heading and
//! the order of the tables), [`doc`] (its place in the doc).

mod doc;
mod kernel_run;
mod mock;
mod pairs;
mod per_call;
mod report;
mod rows;
pub mod siw;
mod syscalls;

pub use doc::{write_into_doc, write_siw_into_doc};
pub(crate) use kernel_run::median;
pub use kernel_run::KernelRun;
pub use mock::MockCounts;
pub(crate) use pairs::{p_text, Pairs};
pub use report::Report;

/// `s` as owned lines, as a guest's file arrives (for the tests).
#[cfg(test)]
fn lines(s: &str) -> Vec<String> {
    s.lines().map(String::from).collect()
}
