//! `cargo xtask miri`: the host tests that exercise unsafe code, under
//! Miri (`cargo +nightly miri test`), which checks them for undefined
//! behaviour: out-of-bounds and uninitialised reads, aliasing (Stacked
//! Borrows) and data races between test threads.
//!
//! Miri is nightly's `miri` component (with `rust-src`). Without it the
//! subcommand says so on one line and exits 0: it installs nothing (CI
//! runs it where the toolchain is there). Miri interprets, ~100x slower
//! than a debug build, so it runs a chosen set, [`SUITES`], sized to a few
//! minutes on two cores: the rings, queues and models (rxe and siw
//! against their mock kernels, the mlx5 HCA model, the CM and netlink codecs), the
//! memory region's byte access and the C library's marshalling, plus the
//! property tests that feed hostile bytes to the rings and queues, 16
//! cases each (`PROPTEST_CASES`, forwarded through Miri). A test of
//! those modules that needs a syscall Miri has no shim for (`poll`,
//! `/proc`) carries `#[cfg_attr(miri, ignore = "...")]`, with its pure
//! part tested on its own or behind a seam. docs/TESTING.md, "Miri".

use std::process::Command;
use std::time::Instant;

use crate::project::workspace;
use crate::util::{describe, note, secs, Result};

/// The toolchain whose Miri runs the tests.
const TOOLCHAIN: &str = "nightly";

/// One `cargo miri test -p PACKAGE --lib -- FILTERS... --skip SKIP...`: a
/// package's unit tests whose names contain one of the filters.
#[derive(Debug)]
pub struct Suite {
    pub package: &'static str,
    pub filters: &'static [&'static str],
    /// Tests the filters match that are too slow interpreted (each with
    /// why in [`SUITES`]).
    pub skip: &'static [&'static str],
    /// What it covers, for the report.
    pub what: &'static str,
}

/// What runs under Miri, in this order: ~200 tests, under 3 minutes on
/// two cores (Miri's sysroot, built once per toolchain, aside).
pub const SUITES: &[Suite] = &[
    Suite {
        package: "rverbs-providers",
        filters: &[
            "rxe::tests::",
            "rxe::tests_av::",
            "mlx5::tests::",
            "mlx5::mem::",
            "siw::",
            // The HCA model end to end: each of its tests takes ~10 s
            // interpreted, the 10,000-operation ones most of an hour.
            "mlx5::tests_model::bad_lkey_then_flush_of_everything_outstanding",
            "mlx5::tests_model::deferred_clean_runs_at_the_next_poll_and_holds_the_user_index",
            "mlx5::tests_model::destroy_cleans_the_cq_and_unregisters",
            // The CQ's table of QPs: pointers into its `Arc`s, switched
            // to in place (20 rounds under Miri).
            "mlx5::tests_model::runs_switch_qps_in_place_and_retire_each",
            // Hostile indices, CQEs and kernel answers into the rings and
            // queues, PROPTEST_CASES of each (the netlink and CM address
            // decoders are safe code, and slow here).
            "rxe::proptests::",
            "mlx5::proptests::any_",
            "cm::tests::",
            "sys::netlink::tests::",
            "sys::ioctl::",
            "sys::write::",
            "sys::shared_pages::",
            "cmd::",
            "provider::",
            "wr::",
            // The pooled handle (`PoolArc`) on a static pool; the tests of
            // a pool of their own leak its chunks (a pool never frees
            // them), which Miri reports.
            "pool::tests::a_pool_arc",
            "pool::tests::pool_arcs",
        ],
        // 65,539 posts to wrap a 16-bit counter: hours under Miri.
        skip: &["srq_doorbell_counter_is_masked_to_16_bits"],
        what: "rxe and siw rings on their mock kernels, mlx5 queues on the HCA model, CM and netlink codecs, PoolArc",
    },
    Suite {
        package: "rverbs",
        filters: &["mr::", "post::", "cm::tests::", "cq::tests::", "channel::tests::"],
        skip: &[],
        what: "MemoryRegion's bytes, batched posts, the CM on the ucma model",
    },
    Suite {
        package: "rverbs-capi",
        filters: &["marshall::", "acks::", "spin::", "misc::", "qp::proptests::"],
        skip: &[],
        what: "the C library's marshalling, acknowledgement counters, spin lock, hostile request lists",
    },
];

/// Extra Miri flags. Permissive provenance: the HCA model and the mock
/// kernel read buffer addresses back out of WQEs and SGEs, as a device
/// does (integer-to-pointer casts, which Miri otherwise warns about).
/// `PROPTEST_CASES` goes through Miri's isolation to the property tests.
const MIRIFLAGS: &str = "-Zmiri-permissive-provenance -Zmiri-env-forward=PROPTEST_CASES";

/// Cases per property test under Miri (CI's 10,000 run natively in the
/// host tier), unless `PROPTEST_CASES` says otherwise.
const PROPTEST_CASES: &str = "16";

pub fn run(args: &[String]) -> Result<i32> {
    if let Some(a) = args.first() {
        return Err(format!("cargo xtask miri takes no options, not {a:?}"));
    }
    if let Err(why) = available() {
        println!("miri: not run: {why}");
        return Ok(0);
    }
    let ws = workspace()?;
    let start = Instant::now();
    let mut failed = Vec::new();
    for s in SUITES {
        let mut cmd = command(s);
        cmd.current_dir(&ws.root);
        note(format!("{} ({})", describe(&cmd), s.what));
        let t = Instant::now();
        let status = cmd.status().map_err(|e| format!("cannot run `{}`: {e}", describe(&cmd)))?;
        note(format!("{}: {} in {}", s.package, if status.success() { "ok" } else { "FAILED" }, secs(t.elapsed())));
        if !status.success() {
            failed.push(s.package);
        }
    }
    note(format!("miri: {} suites in {}", SUITES.len(), secs(start.elapsed())));
    if failed.is_empty() {
        Ok(0)
    } else {
        eprintln!("miri: failed: {}", failed.join(", "));
        Ok(1)
    }
}

/// `rustup run nightly cargo miri test -p PACKAGE --lib -- FILTERS...`.
fn command(s: &Suite) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", TOOLCHAIN, "cargo", "miri", "test", "-p", s.package, "--lib", "--"]);
    cmd.args(s.filters);
    for k in s.skip {
        cmd.args(["--skip", k]);
    }
    // `cargo xtask` runs us with the stable cargo in $CARGO, which
    // cargo-miri would otherwise call.
    cmd.env_remove("CARGO").env_remove("RUSTC").env_remove("RUSTDOC");
    let flags = std::env::var("MIRIFLAGS").unwrap_or_default();
    cmd.env("MIRIFLAGS", format!("{MIRIFLAGS} {flags}").trim_end());
    if std::env::var_os("PROPTEST_CASES").is_none() {
        cmd.env("PROPTEST_CASES", PROPTEST_CASES);
    }
    cmd
}

/// Whether rustup has the toolchain with `miri` and `rust-src`; why not.
fn available() -> Result<(), String> {
    let out = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", TOOLCHAIN])
        .output()
        .map_err(|e| format!("no rustup ({e})"))?;
    if !out.status.success() {
        return Err(format!("no {TOOLCHAIN} toolchain (rustup toolchain install {TOOLCHAIN} --profile minimal)"));
    }
    missing(&String::from_utf8_lossy(&out.stdout))
}

/// The components of `rustup component list --installed` that Miri needs
/// and the list lacks.
fn missing(installed: &str) -> Result<(), String> {
    let has = |c: &str| installed.lines().any(|l| l.trim() == c || l.trim().starts_with(&format!("{c}-")));
    let lack: Vec<&str> = ["miri", "rust-src"].into_iter().filter(|c| !has(c)).collect();
    if lack.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the {TOOLCHAIN} toolchain lacks {} (rustup component add --toolchain {TOOLCHAIN} miri rust-src)",
        lack.join(" and ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_read_from_rustups_list() {
        let all =
            "cargo-x86_64-unknown-linux-gnu\nmiri-x86_64-unknown-linux-gnu\nrust-src\nrustc-x86_64-unknown-linux-gnu\n";
        assert!(missing(all).is_ok());
        let e = missing("cargo-x86_64-unknown-linux-gnu\nrust-src\n").unwrap_err();
        assert!(e.contains("lacks miri (") && !e.contains("rust-src ("), "{e}");
        let e = missing("").unwrap_err();
        assert!(e.contains("lacks miri and rust-src"), "{e}");
    }

    #[test]
    fn suites_name_workspace_packages_and_filters() {
        for s in SUITES {
            assert!(["rverbs", "rverbs-providers", "rverbs-capi"].contains(&s.package), "{s:?}");
            assert!(!s.filters.is_empty() && s.filters.iter().all(|f| !f.is_empty()), "{s:?}");
        }
        let cmd = command(&SUITES[0]);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[..9], ["run", "nightly", "cargo", "miri", "test", "-p", "rverbs-providers", "--lib", "--"]);
    }
}
