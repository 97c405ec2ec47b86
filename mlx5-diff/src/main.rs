//! `mlx5-diff [--cases N] [--seed S] [--only NAME] [-v]`: the same verbs
//! through rdma-core 44's libibverbs + libmlx5 and through rverbs, on one
//! fake ConnectX-5 kernel (`rverbs-mlx5-fake`), compared byte for byte:
//! every command's driver data and attributes, every WQE byte and doorbell
//! record after each post, every UAR page store, and each completion the
//! fake HCA writes as both libraries decode it.
//!
//! It runs the named scenarios, then N random ones (seeds S, S+1, ...), on
//! each fake kernel (`--kernel`, default all: `ioctl`, a 5.7+ one with the
//! ioctl framework and dynamic UARs; `write`, one with only the legacy
//! `write()` commands and static bfregs; each of them with
//! `MLX5_SHUT_UP_BF=1` (`-nobf`); and `write-cqe0`, a kernel that grants
//! CQE version 0); each failure prints its name or seed and a hex diff. The last
//! line is `mlx5-diff: N passed, M failed`. `--many-qp SIDE,QPS,N[,BATCH]` runs
//! the scale bench's many-QP poll instead, one library at a time
//! ([`many_qp`]). The program re-executes itself
//! under the fake kernel's preload library (next to this executable) with a
//! fresh sysfs tree; rdma-core's libraries come from Debian's `libibverbs1`
//! and `ibverbs-providers`.

mod check;
mod hca_side;
mod ibv;
mod many_qp;
mod scenario;
mod sides;

use std::process::{Command, ExitCode};

use crate::ibv::Ibverbs;

/// The fake kernels (and library settings) a run covers, by name: the
/// kernel mode, the CQE version it grants, and `MLX5_SHUT_UP_BF` for both
/// libraries.
const KERNELS: &[(&str, &str, &str, bool)] = &[
    ("ioctl", "ioctl", "1", false),
    ("write", "write", "1", false),
    ("ioctl-nobf", "ioctl", "1", true),
    ("write-nobf", "write", "1", true),
    ("write-cqe0", "write", "0", false),
];

/// Set in the re-executed child: the sysfs root.
const CHILD_ENV: &str = "RVERBS_MLX5_DIFF_SYSFS";

struct Args {
    cases: u64,
    seed: u64,
    only: Option<String>,
    verbose: bool,
    /// The fake kernels to run on (`rverbs_mlx5_fake::ioctl::ENV_MODE`).
    kernels: Vec<String>,
    /// `--many-qp SIDE,QPS,N`: the scale bench's many-QP poll instead of
    /// the cases (on the `ioctl` kernel unless `--kernel` names others).
    many_qp: Option<many_qp::ManyQp>,
    /// `--lib PATH`: the `libibverbs.so.1` the `c` side of `--many-qp`
    /// loads (rverbs' C library), instead of the loader's.
    lib: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        cases: 10_000,
        seed: 1,
        only: None,
        verbose: false,
        kernels: KERNELS.iter().map(|k| k.0.into()).collect(),
        many_qp: None,
        lib: None,
    };
    let mut kernels_named = false;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--cases" => a.cases = val("--cases")?.parse().map_err(|e| format!("--cases: {e}"))?,
            "--seed" => a.seed = val("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--only" => a.only = Some(val("--only")?),
            "-v" | "--verbose" => a.verbose = true,
            "--lib" => a.lib = Some(val("--lib")?),
            "--many-qp" => a.many_qp = Some(many_qp::ManyQp::parse(&val("--many-qp")?)?),
            "--kernel" => {
                kernels_named = true;
                a.kernels = val("--kernel")?.split(',').map(str::to_owned).collect();
                if let Some(k) = a.kernels.iter().find(|k| !KERNELS.iter().any(|(n, ..)| n == k)) {
                    let names: Vec<&str> = KERNELS.iter().map(|k| k.0).collect();
                    return Err(format!("--kernel {k}: not one of {}", names.join(",")));
                }
            }
            "-h" | "--help" => {
                return Err(
                    "usage: mlx5-diff [--cases N] [--seed S] [--only NAME|seed:S] [--kernel ioctl,write] [-v]\n       \
                     mlx5-diff --many-qp c|r,QPS,N[,BATCH] [--lib libibverbs.so.1] [--kernel K]"
                        .into(),
                );
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.many_qp.is_some() && !kernels_named {
        a.kernels = vec!["ioctl".into()];
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match std::env::var_os(CHILD_ENV) {
        None => relaunch(&args),
        Some(sysfs) => match run(&args, std::path::Path::new(&sysfs)) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("mlx5-diff: {e}");
                ExitCode::from(2)
            }
        },
    }
}

/// Runs this program again under the fake kernel, once per kernel mode,
/// and sums their verdicts into the last line.
fn relaunch(args: &Args) -> ExitCode {
    let env = match rverbs_mlx5_fake::launch::Env::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("mlx5-diff: {e}");
            return ExitCode::from(2);
        }
    };
    let exe = std::env::current_exe().expect("this executable's path");
    let (mut passed, mut failed, mut worst) = (0u64, 0u64, 0u8);
    for kernel in &args.kernels {
        let &(_, mode, cqe, no_bf) = KERNELS.iter().find(|k| k.0 == kernel).expect("checked in parse_args");
        let mut cmd = Command::new(&exe);
        cmd.args(std::env::args_os().skip(1))
            .env(CHILD_ENV, &env.sysfs)
            .env(rverbs_mlx5_fake::ioctl::ENV_MODE, mode)
            .env(rverbs_mlx5_fake::kernel::ENV_CQE_VERSION, cqe)
            .stdout(std::process::Stdio::piped());
        if no_bf {
            cmd.env("MLX5_SHUT_UP_BF", "1");
        } else {
            cmd.env_remove("MLX5_SHUT_UP_BF");
        }
        env.apply(&mut cmd);
        let out = match cmd.output() {
            Ok(o) => o,
            Err(e) => {
                eprintln!("mlx5-diff: cannot run myself under the fake kernel: {e}");
                return ExitCode::from(2);
            }
        };
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines() {
            match line.strip_prefix("mlx5-diff: ") {
                Some(rest) => println!("mlx5-diff [{kernel} kernel]: {rest}"),
                None => println!("{line}"),
            }
        }
        match counts(&text) {
            Some((p, f)) => {
                passed += p;
                failed += f;
            }
            None => failed += 1,
        }
        worst = worst.max(out.status.code().map_or(1, |c| c as u8));
    }
    println!("mlx5-diff: {passed} passed, {failed} failed");
    ExitCode::from(if failed > 0 { worst.max(1) } else { worst })
}

/// `N passed, M failed` of a child's last line.
fn counts(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().rev().find(|l| l.starts_with("mlx5-diff: ") && l.ends_with(" failed"))?;
    let mut it = line.trim_start_matches("mlx5-diff: ").split(", ");
    let p = it.next()?.strip_suffix(" passed")?.parse().ok()?;
    let f = it.next()?.strip_suffix(" failed")?.parse().ok()?;
    Some((p, f))
}

fn run(args: &Args, sysfs: &std::path::Path) -> Result<bool, String> {
    if let Some(m) = args.many_qp {
        return many_qp::run(m, args.lib.as_deref(), sysfs);
    }
    let ibv = Ibverbs::load()?;
    let fake = check::FakeLog::find()?;
    let mut shared = sides::Shared::new();
    let mut cases: Vec<scenario::Scenario> = scenario::fixed();
    cases.extend((0..args.cases).map(|i| scenario::random(args.seed + i)));
    if let Some(only) = &args.only {
        cases = match only.strip_prefix("seed:") {
            Some(s) => vec![scenario::random(s.parse().map_err(|e| format!("--only seed: {e}"))?)],
            None => cases.into_iter().filter(|c| c.name.contains(only.as_str())).collect(),
        };
    }
    let (mut passed, mut failed, mut known) = (0u64, 0u64, 0u64);
    let start = std::time::Instant::now();
    for sc in &cases {
        let outcome = check::run_case(&ibv, &fake, sysfs, &mut shared, sc);
        match (outcome, scenario::known_difference(&sc.name)) {
            (Ok(()), None) => {
                passed += 1;
                if args.verbose {
                    println!("ok   {}", sc.name);
                }
            }
            (Err(report), Some(why)) => {
                known += 1;
                if args.verbose {
                    println!("known {} ({why})\n{report}", sc.name);
                }
            }
            (Ok(()), Some(why)) => {
                failed += 1;
                println!("FAIL {}: now the same in both libraries; take it off the known list ({why})", sc.name);
            }
            (Err(report), None) => {
                failed += 1;
                if failed <= 20 {
                    println!("FAIL {}\n{report}", sc.name);
                }
            }
        }
    }
    println!("mlx5-diff: {known} known differences (docs/MLX5.md; -v shows them), each still differing");
    println!(
        "mlx5-diff: {} named and {} random cases in {:.1} s (seeds {}..{})",
        cases.len() as u64 - args.cases.min(cases.len() as u64),
        args.cases.min(cases.len() as u64),
        start.elapsed().as_secs_f64(),
        args.seed,
        args.seed + args.cases
    );
    println!("mlx5-diff: {passed} passed, {failed} failed");
    Ok(failed == 0)
}
