//! rdma-core's own tools, unmodified, through rverbs' `libibverbs.so.1`:
//! `ibv_devices`, `ibv_devinfo`, `ibv_devinfo -v` (and per port) must print
//! exactly what they print through rdma-core's library, with the same exit
//! status. Only `LD_LIBRARY_PATH` selects rverbs' library; each run first
//! checks (with the loader's `LD_TRACE_LOADED_OBJECTS`) that it really is
//! ours that gets loaded, so a harness that lost the library fails instead
//! of comparing rdma-core with itself.
//!
//! In the VM the harness installs the library as
//! `/opt/rverbs/lib/libibverbs.so.1` (xtask's `GUEST_LIB_DIR`); on the host
//! the test links `target/<profile>/libibverbs.so` under that name in a
//! temporary directory. Without a uverbs device the tests print
//! `skipped: ...` and pass, unless `RVERBS_REQUIRE_DEVICE=1`: then a missing
//! device, tool or library fails them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GUEST_LIB_DIR: &str = "/opt/rverbs/lib";
const SONAME: &str = "libibverbs.so.1";

fn require_device() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

fn have_device() -> bool {
    std::fs::read_dir("/dev/infiniband")
        .map(|rd| rd.flatten().any(|e| e.file_name().to_string_lossy().starts_with("uverbs")))
        .unwrap_or(false)
}

/// Skips (false) or panics, when something the test needs is missing.
fn need(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(!require_device(), "RVERBS_REQUIRE_DEVICE=1 but {what}");
        println!("skipped: {what}");
    }
    ok
}

/// The directory holding rverbs' `libibverbs.so.1`.
fn lib_dir() -> Option<PathBuf> {
    if Path::new(GUEST_LIB_DIR).join(SONAME).is_file() {
        return Some(PathBuf::from(GUEST_LIB_DIR));
    }
    // Host: target/<profile>/deps/<this test> -> target/<profile>/libibverbs.so.
    let exe = std::env::current_exe().ok()?;
    let built = exe.parent()?.parent()?.join("libibverbs.so");
    if !built.is_file() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("rverbs-capi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let link = dir.join(SONAME);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&built, &link).ok()?;
    Some(dir)
}

fn tool(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/local/bin", "/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

/// Everything the comparison needs, or `None` after a permitted skip.
fn setup(name: &str) -> Option<(PathBuf, PathBuf)> {
    let lib = lib_dir();
    if !need(lib.is_some(), "rverbs' libibverbs.so.1 was not built or installed (cargo test -p rverbs-capi builds it)")
    {
        return None;
    }
    let t = tool(name);
    if !need(t.is_some(), &format!("rdma-core's {name} is not installed (Debian: ibverbs-utils)")) {
        return None;
    }
    Some((lib?, t?))
}

fn run(prog: &Path, args: &[&str], lib: Option<&Path>) -> Output {
    let mut cmd = Command::new(prog);
    cmd.args(args).env_remove("LD_LIBRARY_PATH").env("RUST_BACKTRACE", "1");
    if let Some(l) = lib {
        cmd.env("LD_LIBRARY_PATH", l);
    }
    cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()))
}

/// The `libibverbs.so.1` the loader picks for `prog` (`ldd`'s answer).
fn loaded_libibverbs(prog: &Path, lib: Option<&Path>) -> String {
    let mut cmd = Command::new(prog);
    cmd.env_remove("LD_LIBRARY_PATH").env("LD_TRACE_LOADED_OBJECTS", "1");
    if let Some(l) = lib {
        cmd.env("LD_LIBRARY_PATH", l);
    }
    let out = cmd.output().expect("runs under the loader's trace");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.trim_start().starts_with(SONAME))
        .and_then(|l| l.split("=>").nth(1))
        .map(|r| r.split_whitespace().next().unwrap_or("").to_owned())
        .unwrap_or_else(|| panic!("{} does not load {SONAME}:\n{text}", prog.display()))
}

/// Runs `prog args` through both libraries and asserts identical output.
fn same_through_both(name: &str, args: &[&str]) {
    if !need(have_device(), "no uverbs device") {
        return;
    }
    let Some((lib, prog)) = setup(name) else { return };
    let ours = loaded_libibverbs(&prog, Some(&lib));
    let theirs = loaded_libibverbs(&prog, None);
    let canon = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
    assert_eq!(
        canon(&ours),
        canon(&lib.join(SONAME).to_string_lossy()),
        "LD_LIBRARY_PATH did not select rverbs' library"
    );
    assert_ne!(canon(&ours), canon(&theirs), "rdma-core's run loads rverbs' library too");

    let a = run(&prog, args, None);
    let b = run(&prog, args, Some(&lib));
    let (sa, sb) = (String::from_utf8_lossy(&a.stdout), String::from_utf8_lossy(&b.stdout));
    let eb = String::from_utf8_lossy(&b.stderr);
    let ea = String::from_utf8_lossy(&a.stderr);
    assert!(
        !sa.trim().is_empty() || !ea.trim().is_empty(),
        "{name} {args:?} printed nothing through rdma-core's library"
    );
    // A failing run says why on stderr: compare that too.
    let stderr_differs = !a.status.success() && ea != eb;
    if sa != sb || a.status.code() != b.status.code() || stderr_differs {
        panic!(
            "{name} {args:?} differs.\n--- rdma-core ({}):\n{sa}\n--- rverbs ({}):\n{sb}\n--- rdma-core stderr:\n{ea}\n--- rverbs stderr:\n{eb}\n--- diff:\n{}",
            a.status,
            b.status,
            diff(&sa, &sb)
        );
    }
    assert!(!eb.contains("panicked"), "{name} through rverbs panicked:\n{eb}");
    println!("{name} {args:?}: {} identical lines", sa.lines().count());
}

/// The lines that differ, `-` rdma-core, `+` rverbs (same position only: enough to see why).
fn diff(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i).copied(), lb.get(i).copied());
        if x != y {
            out += &format!("{i:4} - {}\n{i:4} + {}\n", x.unwrap_or("<none>"), y.unwrap_or("<none>"));
        }
    }
    out
}

#[test]
fn ibv_devices_prints_the_same() {
    same_through_both("ibv_devices", &[]);
}

#[test]
fn ibv_devinfo_prints_the_same() {
    same_through_both("ibv_devinfo", &[]);
}

#[test]
fn ibv_devinfo_verbose_prints_the_same() {
    same_through_both("ibv_devinfo", &["-v"]);
}

#[test]
fn ibv_devinfo_of_one_device_and_port_prints_the_same() {
    // The test device (`RVERBS_TEST_DEVICE`: rxe0, siw0), or the first.
    let Some(dev) = common::test_device() else {
        need(false, "no uverbs device");
        return;
    };
    same_through_both("ibv_devinfo", &["-d", dev.name(), "-i", "1", "-v"]);
}

#[test]
fn ibv_devinfo_of_a_missing_device_fails_the_same() {
    same_through_both("ibv_devinfo", &["-d", "nosuchdev0"]);
}
