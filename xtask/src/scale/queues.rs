//! The scale bench's `queues` section (to do).

use std::path::PathBuf;

use crate::bench_report::KernelRun;
use crate::project::Workspace;
use crate::util::Result;

/// The section's guest programs: (path in the guest, host file).
pub fn guest_files(_ws: &Workspace) -> Result<Vec<(String, PathBuf)>> {
    Ok(Vec::new())
}

/// Appends the section's part of the guest script.
pub fn script(_s: &mut String, _port: &mut u32) {}

/// The section's table (empty: no figures).
pub fn table(_runs: &[KernelRun]) -> String {
    String::new()
}
