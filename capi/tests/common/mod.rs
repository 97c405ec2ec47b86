//! Helpers of the C-library tests: children with collected output, the
//! library's directory, skip-or-fail, the loader's choice.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The longest one ping-pong may take before it is killed (TCG guests are slow).
pub const DEADLINE: Duration = Duration::from_secs(90);
/// Iterations per run: enough to exercise the loop, short in the VM.
pub const ITERS: u32 = 50;
const GUEST_LIB_DIR: &str = "/opt/rverbs/lib";
const SONAME: &str = "libibverbs.so.1";

#[path = "../../../tests/common/child.rs"]
mod child;
#[allow(unused_imports)] // not every test binary runs children
pub use child::*;

pub fn require_device() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

/// Skips (false) or panics, when something the test needs is missing.
pub fn need(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(!require_device(), "RVERBS_REQUIRE_DEVICE=1 but {what}");
        println!("skipped: {what}");
    }
    ok
}

/// The directory holding rverbs' `libibverbs.so.1` (see `c_tools.rs`).
pub fn lib_dir() -> Option<PathBuf> {
    if Path::new(GUEST_LIB_DIR).join(SONAME).is_file() {
        return Some(PathBuf::from(GUEST_LIB_DIR));
    }
    let exe = std::env::current_exe().ok()?;
    let built = exe.parent()?.parent()?.join("libibverbs.so");
    if !built.is_file() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("rverbs-capi-pp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let link = dir.join(SONAME);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&built, &link).ok()?;
    Some(dir)
}

/// The device, the tool and the library, or `None` after a permitted skip.
pub fn setup(name: &str) -> Option<(rverbs::Device, PathBuf, PathBuf)> {
    let dev = rverbs::devices().ok().and_then(|d| d.into_iter().next());
    if !need(dev.is_some(), "no uverbs device") {
        return None;
    }
    let lib = lib_dir();
    if !need(lib.is_some(), "rverbs' libibverbs.so.1 was not built or installed") {
        return None;
    }
    let tool = ["/usr/bin", "/usr/local/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file());
    if !need(tool.is_some(), &format!("rdma-core's {name} is not installed (Debian: ibverbs-utils, perftest)")) {
        return None;
    }
    let (lib, tool) = (lib?, tool?);
    assert_eq!(loaded_libibverbs(&tool, &lib), lib.join(SONAME), "LD_LIBRARY_PATH did not select rverbs' library");
    Some((dev?, lib, tool))
}

/// The `libibverbs.so.1` the loader picks for `prog` with `LD_LIBRARY_PATH=lib`.
pub fn loaded_libibverbs(prog: &Path, lib: &Path) -> PathBuf {
    let out = Command::new(prog)
        .env("LD_LIBRARY_PATH", lib)
        .env("LD_TRACE_LOADED_OBJECTS", "1")
        .output()
        .expect("runs under the loader's trace");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let found = text
        .lines()
        .find(|l| l.trim_start().starts_with(SONAME))
        .and_then(|l| l.split("=>").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{} does not load {SONAME}:\n{text}", prog.display()));
    PathBuf::from(found)
}
