//! `rverbs devices`/`rverbs devinfo` against rdma-core's `ibv_devices`/
//! `ibv_devinfo` on a real uverbs device.
//!
//! Run by the VM harness (rxe0 on a veth, rdma-core's tools installed) with
//! `RVERBS_REQUIRE_DEVICE=1` and `RVERBS_BIN=/usr/local/bin/rverbs`. Without
//! a uverbs device the tests print `skipped: no uverbs device` and pass,
//! unless `RVERBS_REQUIRE_DEVICE=1` is set: then they fail, and so they do
//! when rdma-core's tools are missing.
//!
//! Comparisons strip nothing but trailing whitespace at the ends of lines
//! and of the output. On a mismatch the test prints both outputs and a line
//! diff.
//!
//! Fields we knowingly cannot match are listed in [`EXCLUDED_FIELDS`] (by
//! `ibv_devinfo` field name) and dropped from both sides in the `-v` test
//! only; it is empty today: for rxe every field `ibv_devinfo -v` prints
//! comes from data rverbs reads too (the mlx5-only driver-data fields
//! `tso_caps`, `packet_pacing_caps`, `rx_hash_*` are 0 on rxe on both sides).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `ibv_devinfo -v` fields excluded from the `-v` comparison, with why.
const EXCLUDED_FIELDS: &[(&str, &str)] = &[];

/// The first line of the rverbs-only part of `devinfo -v` (the GID table).
const EXTRAS_MARKER: &str = "DEV\tPORT\tINDEX\tGID";

fn require_device() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

/// Is there any uverbs device on this machine?
fn have_device() -> bool {
    let any_entry = |dir: &str| {
        std::fs::read_dir(dir)
            .map(|rd| rd.flatten().any(|e| e.file_name().to_string_lossy().starts_with("uverbs")))
            .unwrap_or(false)
    };
    any_entry("/dev/infiniband") && any_entry("/sys/class/infiniband_verbs")
}

/// Returns false (after printing why) when the test should be skipped;
/// panics when skipping is not allowed.
fn device_or_skip() -> bool {
    if have_device() {
        return true;
    }
    assert!(
        !require_device(),
        "RVERBS_REQUIRE_DEVICE=1 but there is no uverbs device (/dev/infiniband/uverbs*, \
         /sys/class/infiniband_verbs/uverbs*)"
    );
    println!("skipped: no uverbs device");
    false
}

fn rverbs_bin() -> PathBuf {
    if let Ok(p) = std::env::var("RVERBS_BIN") {
        return PathBuf::from(p);
    }
    match option_env!("CARGO_BIN_EXE_rverbs") {
        Some(p) => PathBuf::from(p),
        None => panic!("set RVERBS_BIN: this build has no rverbs binary (feature `cli` off?)"),
    }
}

/// Finds an rdma-core tool on PATH (or in the usual places).
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/local/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The rdma-core tool, or `None` (skip) when it is missing and a device is
/// not required; missing with `RVERBS_REQUIRE_DEVICE=1` is a failure.
fn tool_or_skip(name: &str) -> Option<PathBuf> {
    let t = find_tool(name);
    if t.is_none() {
        assert!(!require_device(), "RVERBS_REQUIRE_DEVICE=1 but rdma-core's {name} is not installed");
        println!("skipped: {name} not installed");
    }
    t
}

fn run(prog: &Path, args: &[&str]) -> Output {
    Command::new(prog)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()))
}

fn stdout_ok(prog: &Path, args: &[&str]) -> String {
    let out = run(prog, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{stderr}",
        prog.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "{} {args:?} panicked:\n{stderr}", prog.display());
    String::from_utf8(out.stdout).expect("output is UTF-8")
}

/// Lines with trailing whitespace removed, trailing empty lines dropped.
fn lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(|l| l.trim_end().to_string()).collect();
    while v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

/// A line diff (longest common subsequence) in `-`/`+`/` ` form.
fn diff(expected: &[String], actual: &[String]) -> String {
    let (n, m) = (expected.len(), actual.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if expected[i] == actual[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < n || j < m {
        if i < n && j < m && expected[i] == actual[j] {
            out += &format!("  {}\n", expected[i]);
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out += &format!("- {}\n", expected[i]);
            i += 1;
        } else {
            out += &format!("+ {}\n", actual[j]);
            j += 1;
        }
    }
    out
}

fn assert_lines_eq(what: &str, ibv: &[String], ours: &[String]) {
    if ibv != ours {
        panic!(
            "{what}: rverbs output differs from rdma-core's\n\
             ===== rdma-core =====\n{}\n===== rverbs =====\n{}\n===== diff (- rdma-core, + rverbs) =====\n{}",
            ibv.join("\n"),
            ours.join("\n"),
            diff(ibv, ours)
        );
    }
}

/// Sanity check that a comparison compares something real.
fn assert_substantial(what: &str, l: &[String], min_lines: usize, must_contain: &str) {
    assert!(
        l.len() >= min_lines && l.iter().any(|x| x.contains(must_contain)),
        "{what}: rdma-core printed too little to compare (expected >= {min_lines} lines containing {must_contain:?}):\n{}",
        l.join("\n")
    );
}

/// The device the single-device tests use: the harness's
/// `RVERBS_TEST_DEVICE` (rxe0, siw0), which `ibv_devices` must list, else
/// the first one it lists.
fn test_device(ibv_devices_out: &str) -> String {
    let names: Vec<&str> = ibv_devices_out.lines().skip(2).filter_map(|l| l.split_whitespace().next()).collect();
    assert!(!names.is_empty(), "ibv_devices lists no device:\n{ibv_devices_out}");
    match std::env::var("RVERBS_TEST_DEVICE").ok().filter(|n| !n.is_empty()) {
        Some(want) => {
            assert!(names.contains(&want.as_str()), "ibv_devices does not list {want}:\n{ibv_devices_out}");
            want
        }
        None => names[0].to_string(),
    }
}

#[test]
fn devices_matches_ibv_devices() {
    if !device_or_skip() {
        return;
    }
    let Some(ibv) = tool_or_skip("ibv_devices") else {
        return;
    };
    let theirs = lines(&stdout_ok(&ibv, &[]));
    let ours = lines(&stdout_ok(&rverbs_bin(), &["devices"]));
    assert_substantial("devices", &theirs, 3, "node GUID");
    assert_lines_eq("rverbs devices", &theirs, &ours);
}

#[test]
fn devinfo_matches_ibv_devinfo() {
    if !device_or_skip() {
        return;
    }
    let Some(ibv) = tool_or_skip("ibv_devinfo") else {
        return;
    };
    let theirs = lines(&stdout_ok(&ibv, &[]));
    let ours = lines(&stdout_ok(&rverbs_bin(), &["devinfo"]));
    assert_substantial("devinfo", &theirs, 10, "link_layer:");
    assert_lines_eq("rverbs devinfo", &theirs, &ours);
}

/// Field name of an `ibv_devinfo` line (`max_qp` for `\tmax_qp:\t\t\t\t...`).
fn field_name(line: &str) -> &str {
    line.trim_start().split(':').next().unwrap_or("")
}

fn drop_excluded(v: &[String]) -> Vec<String> {
    v.iter().filter(|l| !EXCLUDED_FIELDS.iter().any(|(f, _)| field_name(l) == *f)).cloned().collect()
}

#[test]
fn devinfo_verbose_contains_every_ibv_devinfo_line() {
    if !device_or_skip() {
        return;
    }
    let Some(ibv) = tool_or_skip("ibv_devinfo") else {
        return;
    };
    let theirs_raw = stdout_ok(&ibv, &["-v"]);
    let ours_raw = stdout_ok(&rverbs_bin(), &["devinfo", "-v"]);
    let theirs = lines(&theirs_raw);
    let ours_all = lines(&ours_raw);
    assert_substantial("devinfo -v", &theirs, 40, "max_qp:");

    // Our output = the ibv_devinfo-compatible part, then the extras.
    let split = ours_all
        .iter()
        .position(|l| l.starts_with(EXTRAS_MARKER))
        .unwrap_or_else(|| panic!("rverbs devinfo -v has no GID table section ({EXTRAS_MARKER:?}):\n{ours_raw}"));
    let (common, extras) = ours_all.split_at(split);
    let mut common = common.to_vec();
    while common.last().is_some_and(|l| l.is_empty()) {
        common.pop();
    }

    // Field by field, in order: the common part must be exactly what
    // ibv_devinfo -v printed (minus knowingly excluded fields).
    assert_lines_eq(
        "rverbs devinfo -v (ibv_devinfo-compatible part)",
        &drop_excluded(&theirs),
        &drop_excluded(&common),
    );
    for l in &theirs {
        if !EXCLUDED_FIELDS.iter().any(|(f, _)| field_name(l) == *f) {
            assert!(common.contains(l), "line {l:?} of ibv_devinfo -v is missing from rverbs devinfo -v");
        }
    }

    // The GID table lists every GID ibv_devinfo printed, by index.
    let gid_lines: Vec<&String> = theirs.iter().filter(|l| l.trim_start().starts_with("GID[")).collect();
    assert!(!gid_lines.is_empty(), "ibv_devinfo -v printed no GID: nothing to check the GID table against");
    let n_found = extras
        .iter()
        .find_map(|l| l.strip_prefix("n_gids_found="))
        .unwrap_or_else(|| panic!("no n_gids_found= line in:\n{}", extras.join("\n")));
    let n_found: usize = n_found.parse().expect("n_gids_found is a number");
    assert!(n_found >= 1, "GID table is empty although ibv_devinfo printed {} GIDs", gid_lines.len());
    for l in gid_lines {
        let index = l.trim_start().trim_start_matches("GID[").split(']').next().unwrap().trim();
        assert!(
            extras.iter().any(|r| r.split('\t').nth(2) == Some(index)),
            "GID index {index} ({l:?}) is missing from the GID table:\n{}",
            extras.join("\n")
        );
    }
}

#[test]
fn devinfo_one_device_one_port_matches() {
    if !device_or_skip() {
        return;
    }
    let Some(ibv_devices) = tool_or_skip("ibv_devices") else {
        return;
    };
    let Some(ibv) = tool_or_skip("ibv_devinfo") else {
        return;
    };
    let dev = test_device(&stdout_ok(&ibv_devices, &[]));
    let theirs = lines(&stdout_ok(&ibv, &["-d", &dev, "-i", "1"]));
    let ours = lines(&stdout_ok(&rverbs_bin(), &["devinfo", "-d", &dev, "-i", "1"]));
    assert_substantial("devinfo -d -i 1", &theirs, 10, "port:\t1");
    assert_lines_eq(&format!("rverbs devinfo -d {dev} -i 1"), &theirs, &ours);
}

#[test]
fn devinfo_unknown_device_fails_cleanly() {
    // Runs with or without a device: the error path needs none.
    let out = run(&rverbs_bin(), &["devinfo", "-d", "nosuchdev"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "rverbs devinfo -d nosuchdev succeeded:\n{}", String::from_utf8_lossy(&out.stdout));
    assert!(!stderr.contains("panicked"), "rverbs panicked:\n{stderr}");
    assert!(stderr.starts_with("rverbs: "), "error is not 'rverbs: <message>':\n{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "error is not one line:\n{stderr}");
    if have_device() {
        assert!(
            stderr.contains("IB device 'nosuchdev' wasn't found"),
            "expected ibv_devinfo's message \"IB device 'nosuchdev' wasn't found\", got:\n{stderr}"
        );
    } else if require_device() {
        panic!("RVERBS_REQUIRE_DEVICE=1 but there is no uverbs device");
    } else {
        println!("skipped (partly): no uverbs device, only the error shape was checked");
    }
}

#[test]
fn help_and_bad_flags() {
    // No device needed.
    let bin = rverbs_bin();
    for args in [&["--help"][..], &["-h"][..], &["devinfo", "--help"][..], &["devices", "-h"][..]] {
        let out = stdout_ok(&bin, args);
        assert!(out.starts_with("Usage: rverbs"), "{args:?} printed:\n{out}");
    }
    for args in
        [&["devinfo", "--bogus"][..], &["devinfo", "-z"][..], &["devinfo", "-i", "0"][..], &["bogus"][..], &[][..]]
    {
        let out = run(&bin, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: exit status {:?}, stderr:\n{stderr}", out.status);
        assert!(stderr.starts_with("rverbs: "), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: error is not one line:\n{stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: printed to stdout");
    }
}

#[test]
fn diff_helper_marks_changes() {
    let a: Vec<String> = ["x", "y", "z"].map(String::from).to_vec();
    let b: Vec<String> = ["x", "Y", "z", "w"].map(String::from).to_vec();
    assert_eq!(diff(&a, &b), "  x\n- y\n+ Y\n  z\n+ w\n");
    assert_eq!(lines("a \t\nb\n\n\n"), vec!["a".to_string(), "b".to_string()]);
}
