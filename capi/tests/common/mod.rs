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

/// The device the tests run on: `RVERBS_TEST_DEVICE` (the harness's
/// `rxe0` or `siw0`), or the first device listed. A named device that is
/// missing, or one whose transport is not `RVERBS_PROVIDER`'s (`rxe`:
/// InfiniBand/RoCE, `siw`: iWARP), fails the test.
pub fn test_device() -> Option<rverbs::Device> {
    let all = rverbs::devices().ok()?;
    let dev = match std::env::var("RVERBS_TEST_DEVICE") {
        Ok(name) if !name.is_empty() => {
            let names: Vec<String> = all.iter().map(|d| d.name().to_owned()).collect();
            let d = all.into_iter().find(|d| d.name() == name);
            assert!(d.is_some(), "RVERBS_TEST_DEVICE={name} is not among the devices {names:?}");
            d
        }
        _ => all.into_iter().next(),
    }?;
    if let Some(p) = provider() {
        let want = match p.as_str() {
            "siw" => rverbs::Transport::Iwarp,
            "rxe" => rverbs::Transport::Ib,
            other => panic!("RVERBS_PROVIDER={other}: rxe or siw"),
        };
        assert_eq!(dev.transport(), want, "RVERBS_PROVIDER={p} but {} has another transport", dev.name());
    }
    Some(dev)
}

/// `RVERBS_PROVIDER` (`rxe` or `siw`), when set.
pub fn provider() -> Option<String> {
    std::env::var("RVERBS_PROVIDER").ok().filter(|p| !p.is_empty())
}

/// Whether `dev` is an iWARP device (siw): RC only, connected through the CM.
pub fn is_iwarp(dev: &rverbs::Device) -> bool {
    dev.transport() == rverbs::Transport::Iwarp
}

/// For a test that does not apply to an iWARP device: on one, checks
/// what makes it so (the device's transport, and `check`, which asserts
/// what the device reports), prints `n/a on <dev>: <reason>` and returns
/// true; on any other device returns false and the test runs.
pub fn not_on_iwarp(dev: &rverbs::Device, reason: &str, check: impl FnOnce(&rverbs::Device)) -> bool {
    if !is_iwarp(dev) {
        return false;
    }
    assert_eq!(dev.node_type(), rverbs::NodeType::Rnic, "{}: an iWARP device is an RNIC", dev.name());
    check(dev);
    println!("n/a on {}: {reason}", dev.name());
    true
}

/// Asserts that `dev` reports no atomics (`atomic_cap` `IBV_ATOMIC_NONE`).
pub fn reports_no_atomics(dev: &rverbs::Device) {
    let attr = dev.open().expect("open").query_device().expect("query_device");
    assert_eq!(attr.atomic_cap, rverbs::AtomicCap::None, "{} is iWARP but reports atomics", dev.name());
}

/// Asserts that `dev` refuses a UD QP (`EOPNOTSUPP` at create, as the
/// kernel's siw does): iWARP has RC only.
pub fn refuses_ud(dev: &rverbs::Device) {
    let ctx = dev.open().expect("open");
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let cq = ctx.create_cq(4).expect("create_cq");
    let init = rverbs::QpInitAttr::new(rverbs::QpType::Ud, &cq);
    let e = pd.create_qp(&init).err().unwrap_or_else(|| panic!("{} is iWARP but made a UD QP", dev.name()));
    assert_eq!(e.errno(), Some(rverbs::Errno::EOPNOTSUPP), "{}: UD QP refused with {e}", dev.name());
}

/// Asserts that `dev` refuses to move an RC QP to RTR by hand (iWARP: only
/// the kernel's iw_cm connects a QP).
pub fn refuses_rc_by_hand(dev: &rverbs::Device) {
    let ctx = dev.open().expect("open");
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let cq = ctx.create_cq(4).expect("create_cq");
    let qp = pd.create_qp(&rverbs::QpInitAttr::new(rverbs::QpType::Rc, &cq)).expect("an RC QP");
    let r = qp.connect_pair(&qp, &rverbs::ConnectOptions::default());
    assert!(r.is_err(), "{}: an iWARP RC QP connected to itself by hand", dev.name());
}

/// The netdev `dev` sits on: [`rverbs::Device::netdev`] (sysfs), else
/// what `rdma link show DEV/1` names (`... netdev v2`): siw0's sysfs
/// directory has no `parent` link to its netdev.
pub fn netdev_of(dev: &rverbs::Device) -> Option<String> {
    if let Some(n) = dev.netdev() {
        return Some(n.to_owned());
    }
    let out = Command::new("/usr/bin/rdma").args(["link", "show", &format!("{}/1", dev.name())]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    words.find(|w| *w == "netdev")?;
    words.next().map(str::to_owned)
}

/// The IPv4 address of `dev`'s netdev (`ip -4 -o addr show dev NETDEV`):
/// where the CM tools listen and connect (192.168.77.1 on rxe0's `v0`,
/// 192.168.79.1 on siw0's `v2` in the VM).
pub fn device_ip(dev: &rverbs::Device) -> Option<String> {
    let netdev = netdev_of(dev)?;
    let out = Command::new("/usr/bin/ip").args(["-4", "-o", "addr", "show", "dev", &netdev]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    words.find(|w| *w == "inet")?;
    Some(words.next()?.split('/').next()?.to_owned())
}

/// The device, the tool and the library, or `None` after a permitted skip.
pub fn setup(name: &str) -> Option<(rverbs::Device, PathBuf, PathBuf)> {
    let dev = test_device();
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
