//! Running a program on the fake device: its sysfs tree and the preload
//! library, as environment variables for a child process.

use std::path::{Path, PathBuf};
use std::process::Command;

/// File name of the preload library (`rverbs-fake-uverbs`'s cdylib).
pub const PRELOAD_LIB: &str = "librverbs_fake_uverbs.so";

/// A sysfs tree made for one run (removed on drop) and the preload
/// library's path.
#[derive(Debug)]
pub struct Env {
    pub sysfs: PathBuf,
    pub preload: PathBuf,
}

impl Env {
    /// A fresh tree, and the preload library next to this executable (or
    /// one directory up: cargo puts test binaries in `deps/`).
    pub fn new() -> Result<Env, String> {
        let preload = find_preload()?;
        let sysfs = crate::sysfs::temp_root().map_err(|e| format!("cannot make a sysfs directory: {e}"))?;
        crate::sysfs::build(&sysfs).map_err(|e| format!("cannot write the sysfs tree in {}: {e}", sysfs.display()))?;
        Ok(Env { sysfs, preload })
    }

    /// Sets `SYSFS_PATH` and `LD_PRELOAD` for `cmd`.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env("SYSFS_PATH", &self.sysfs).env("LD_PRELOAD", &self.preload);
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.sysfs);
    }
}

fn find_preload() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for d in [dir, dir.parent().unwrap_or(dir)] {
        let p = d.join(PRELOAD_LIB);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(format!("{PRELOAD_LIB} is not next to {} (build it: cargo build -p rverbs-fake-uverbs)", exe.display()))
}
