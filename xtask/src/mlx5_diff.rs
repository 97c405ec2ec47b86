//! The mlx5 differential tier (host, no VM): rdma-core 44's libibverbs +
//! libmlx5 and rverbs on one fake ConnectX-5 kernel (`mlx5-fake/`),
//! compared by `mlx5-diff` (`mlx5-diff/`); plus rdma-core's `ibv_devices`
//! and `ibv_devinfo -v` against `rverbs devices` and `rverbs devinfo -v`
//! on the fake device. `cargo xtask mlx5-diff --cases N` runs it alone.

use std::path::Path;
use std::process::Command;

use crate::console::Counts;
use crate::host_tools::Apt;
use crate::project::{cargo, Workspace};
use crate::util::{note, Result};

/// Random cases in `cargo xtask test` (plus the named ones).
pub const CI_CASES: u64 = 10_000;

/// rdma-core's pieces the tier runs: the library, the mlx5 provider, the tools.
const NEEDS: &[(&str, &str)] = &[
    ("/usr/lib/x86_64-linux-gnu/libibverbs.so.1", "libibverbs1"),
    ("/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so", "ibverbs-providers"),
    ("/usr/bin/ibv_devinfo", "ibverbs-utils"),
];

fn ensure_packages() -> Result<()> {
    let missing: Vec<&str> = NEEDS.iter().filter(|(p, _)| !Path::new(p).exists()).map(|(_, pkg)| *pkg).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Apt::default().install(&missing)
}

fn build(ws: &Workspace) -> Result<()> {
    // Two builds: with `--bin` filters cargo builds no library, and the
    // preload library is one (a fresh checkout has no other copy of it),
    // as is rverbs' C library the many-QP check loads.
    let preload: &[&str] = &["build", "-p", "rverbs-fake-uverbs", "-p", "rverbs-capi", "--lib"];
    let bins: &[&str] = &[
        "build",
        "-p",
        "rverbs-mlx5-fake",
        "-p",
        "rverbs-mlx5-diff",
        "-p",
        "rverbs",
        "--bin",
        "mlx5-diff",
        "--bin",
        "fake-mlx5",
        "--bin",
        "rverbs",
    ];
    for args in [preload, bins] {
        let mut cmd = cargo();
        cmd.current_dir(&ws.root).args(args);
        note(crate::util::describe(&cmd));
        let status = cmd.status().map_err(|e| format!("cargo build: {e}"))?;
        if !status.success() {
            return Err(format!("building the mlx5 differential tier failed ({status})"));
        }
    }
    let lib = ws.target_dir.join("debug").join(rverbs_mlx5_fake_preload());
    if !lib.is_file() {
        return Err(format!("cargo built no {}", lib.display()));
    }
    Ok(())
}

/// The preload library's file name (`rverbs_mlx5_fake::launch::PRELOAD_LIB`).
fn rverbs_mlx5_fake_preload() -> &'static str {
    "librverbs_fake_uverbs.so"
}

/// `N passed, M failed` from the last such line of `out`.
fn counts_of(out: &str) -> Option<Counts> {
    let line = out.lines().rev().find(|l| l.contains(" passed, ") && l.contains(" failed"))?;
    let mut it = line.rsplit(": ").next()?.split(", ");
    let passed = it.next()?.strip_suffix(" passed")?.parse().ok()?;
    let failed = it.next()?.strip_suffix(" failed")?.parse().ok()?;
    Some(Counts { passed, failed, skipped: 0 })
}

fn output(cmd: &mut Command) -> Result<(bool, String)> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

/// rdma-core's tool and rverbs' on the fake device: `ibv_devices` and
/// `rverbs devices` print the same; `rverbs devinfo -v` starts with
/// exactly what `ibv_devinfo -v` prints (then rverbs' own GID table).
fn tools(bin: &Path, problems: &mut Vec<String>) -> Result<Counts> {
    let mut c = Counts::default();
    for kernel in ["ioctl", "write"] {
        c += tools_on(bin, kernel, problems)?;
    }
    Ok(c)
}

/// [`tools`] on one kind of fake kernel.
fn tools_on(bin: &Path, kernel: &str, problems: &mut Vec<String>) -> Result<Counts> {
    let fake = bin.join("fake-mlx5");
    let rverbs = bin.join("rverbs");
    let mut c = Counts::default();
    let fake_cmd = || {
        let mut cmd = Command::new(&fake);
        cmd.env("RVERBS_FAKE_MLX5_KERNEL", kernel);
        cmd
    };
    let mut one = |what: &str, ok: bool, detail: String| {
        if ok {
            c.passed += 1;
        } else {
            c.failed += 1;
            problems.push(format!("{what}: {detail}"));
        }
    };
    let (a_ok, a) = output(fake_cmd().args(["--", "ibv_devices"]))?;
    let (b_ok, b) = output(fake_cmd().arg("--").arg(&rverbs).arg("devices"))?;
    one(
        "devices on the fake mlx5",
        a_ok && b_ok && a == b && a.contains(rverbs_mlx5_name()),
        format!("ibv_devices:\n{a}\nrverbs devices:\n{b}"),
    );
    let (a_ok, a) = output(fake_cmd().args(["--", "ibv_devinfo", "-v"]))?;
    let (b_ok, b) = output(fake_cmd().arg("--").arg(&rverbs).args(["devinfo", "-v"]))?;
    one(
        &format!("devinfo -v on the fake mlx5 ({kernel} kernel)"),
        a_ok && b_ok && a.contains("vendor_part_id:\t\t\t4119") && b.starts_with(&a),
        format!("ibv_devinfo -v:\n{a}\nrverbs devinfo -v:\n{b}"),
    );
    println!(
        "mlx5-diff tools ({kernel} kernel): {} passed, {} failed (ibv_devices = rverbs devices; ibv_devinfo -v, {} lines, \
         starts rverbs devinfo -v)",
        c.passed,
        c.failed,
        a.lines().count()
    );
    Ok(c)
}

fn rverbs_mlx5_name() -> &'static str {
    "mlx5_9"
}

/// Builds and runs the tier; the counts and what went wrong.
pub fn tier(ws: &Workspace, cases: u64) -> Result<(Counts, Vec<String>)> {
    ensure_packages()?;
    build(ws)?;
    let bin = ws.target_dir.join("debug");
    let mut problems = Vec::new();
    let mut counts = tools(&bin, &mut problems)?;
    let mut cmd = Command::new(bin.join("mlx5-diff"));
    cmd.args(["--cases", &cases.to_string()]);
    note(crate::util::describe(&cmd));
    let (ok, out) = output(&mut cmd)?;
    print!("{out}");
    match counts_of(&out) {
        Some(c) => {
            if !ok && c.failed == 0 {
                problems.push("mlx5-diff exited non-zero without a failing case".into());
            }
            counts += c;
        }
        None => problems.push("mlx5-diff printed no 'N passed, M failed' line".into()),
    }
    // The bench's many-QP poll as a check: each library (rdma-core's,
    // rverbs' Rust API, rverbs' C library) takes every completion of 1, 16
    // and 256 QPs on one CQ, in order, 16 a call and one, with CQE versions
    // 1 and 0 (resource numbers: user indices, QPNs).
    let capi = bin.join("libibverbs.so");
    for (batch, qps) in many_qp_cases() {
        for (side, lib) in [("c", None), ("r", None), ("c", Some(&capi))] {
            let mut cmd = Command::new(bin.join("mlx5-diff"));
            cmd.args(["--many-qp", &format!("{side},{qps},8192,{batch}"), "--kernel", "ioctl,write-cqe0"]);
            if let Some(lib) = lib {
                cmd.arg("--lib").arg(lib);
            }
            let (ok, out) = output(&mut cmd)?;
            match counts_of(&out) {
                Some(c) if ok || c.failed != 0 => counts += c,
                _ => problems.push(format!("{}: no verdict\n{out}", crate::util::describe(&cmd))),
            }
            if !ok {
                print!("{out}");
            }
        }
    }
    Ok((counts, problems))
}

/// `cargo xtask mlx5-diff [--cases N]`.
pub fn run(args: &[String]) -> Result<i32> {
    let mut cases = CI_CASES;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--cases" => {
                cases = it.next().ok_or("--cases needs a value")?.parse().map_err(|e| format!("--cases: {e}"))?;
            }
            other => return Err(format!("unknown option {other:?} (cargo xtask mlx5-diff [--cases N])")),
        }
    }
    let ws = crate::project::workspace()?;
    let (c, problems) = tier(&ws, cases)?;
    for p in &problems {
        eprintln!("mlx5-diff: {p}");
    }
    println!("mlx5 differential tier: {} passed, {} failed", c.passed, c.failed);
    Ok(if problems.is_empty() && c.failed == 0 { 0 } else { 1 })
}

/// The QP counts of the many-QP poll (`mlx5-diff --many-qp`).
pub const MANY_QP_COUNTS: [u32; 3] = [1, 16, 256];

/// The batches the many-QP poll asks for: 16 completions a call, and one.
pub const MANY_QP_BATCHES: [usize; 2] = [16, 1];

/// Every (completions a call, QPs) of the many-QP poll.
fn many_qp_cases() -> impl Iterator<Item = (usize, u32)> {
    MANY_QP_BATCHES.into_iter().flat_map(|b| MANY_QP_COUNTS.map(|q| (b, q)))
}

/// The scale bench's many-QP poll on the fake ConnectX, side by side:
/// for each of [`MANY_QP_BATCHES`] and [`MANY_QP_COUNTS`], the
/// instructions a CQE costs ((Ir(2N) − Ir(N)) / N under callgrind,
/// N = 40,960) in rdma-core 44's libmlx5, in rverbs' Rust API and in
/// rverbs' C library, each driven by `mlx5-diff --many-qp` in release
/// builds.
pub fn many_qp_counts(ws: &Workspace) -> Result<Vec<(usize, u32, [f64; 3])>> {
    ensure_packages()?;
    let preload: &[&str] = &["build", "--release", "--quiet", "-p", "rverbs-fake-uverbs", "--lib"];
    let bin: &[&str] = &["build", "--release", "--quiet", "-p", "rverbs-mlx5-diff", "--bin", "mlx5-diff"];
    for args in [preload, bin] {
        let mut cmd = cargo();
        cmd.current_dir(&ws.root).args(args);
        note(crate::util::describe(&cmd));
        crate::util::run(&mut cmd)?;
    }
    let capi = crate::project::build_capi_release(ws)?;
    let exe = ws.target_dir.join("release/mlx5-diff");
    let logs = ws.target_dir.join("many-qp-logs");
    const N: u64 = 40_960;
    let mut out = Vec::new();
    for (batch, qps) in many_qp_cases() {
        let mut per = [0f64; 3];
        for (slot, (side, lib)) in per.iter_mut().zip([("c", None), ("r", None), ("c", Some(&capi))]) {
            let mut ir = [0u64; 2];
            for (v, n) in ir.iter_mut().zip([N, 2 * N]) {
                // The child under the fake kernel is the one measured; its
                // log goes to a file (the parent keeps its stderr).
                let _ = std::fs::remove_dir_all(&logs);
                std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
                let mut cmd = Command::new("valgrind");
                cmd.args(["--tool=callgrind", "--trace-children=yes", "--callgrind-out-file=/dev/null"])
                    .arg(format!("--log-file={}/vg.%p", logs.display()))
                    .args(["--collect-atstart=no", &format!("--toggle-collect=*bench_poll_{side}*")])
                    .arg(&exe)
                    .args(["--many-qp", &format!("{side},{qps},{n},{batch}")]);
                if let Some(lib) = lib {
                    cmd.arg("--lib").arg(lib);
                }
                let o = cmd.output().map_err(|e| format!("running valgrind on mlx5-diff: {e}"))?;
                let text = String::from_utf8_lossy(&o.stdout);
                if !o.status.success() || !text.contains(": 1 passed, 0 failed") {
                    return Err(format!("mlx5-diff --many-qp {side},{qps},{n} failed ({}):\n{text}", o.status));
                }
                let mut best = 0;
                for e in std::fs::read_dir(&logs).map_err(|e| format!("{}: {e}", logs.display()))? {
                    let path = e.map_err(|e| e.to_string())?.path();
                    let log = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                    best = best.max(crate::bench::collected(&log).unwrap_or(0));
                }
                if best == 0 {
                    return Err(format!("mlx5-diff --many-qp {side},{qps},{n}: callgrind counted nothing"));
                }
                *v = best;
            }
            *slot = (ir[1] - ir[0]) as f64 / N as f64;
        }
        out.push((batch, qps, per));
    }
    Ok(out)
}
