//! `cargo xtask soak --minutes N [--kernel 6.1|6.12]`: boots one guest and
//! runs `examples/soak.rs` in it for N minutes (mixed RC, WRITE, READ,
//! atomics, SRQ, UD, CM and completion-event traffic through the Rust API,
//! and rdma-core's ping-pongs on rverbs' C library, every byte and every
//! completion checked, `rdma resource show` and RSS sampled), then prints
//! its report. `cargo xtask test` runs [`CI_MINUTES`] of it on
//! [`CI_KERNEL`] as a tier of its own.

use crate::console::{Counts, LineKind};
use crate::guest::{self, Program, EXAMPLES_DIR};
use crate::host_tools::{self, Apt, Profile};
use crate::kernel::{self, Series};
use crate::project::{self, Workspace};
use crate::runner::{self, Guest, Knobs, Payload};
use crate::util::{note, secs, Result};

/// The soak `cargo xtask test` runs: minutes, on one kernel.
pub const CI_MINUTES: u64 = 2;
pub const CI_KERNEL: &str = "6.12";

/// The example that is the soak.
const EXAMPLE: &str = "soak";

/// Time the guest gets beyond the soak's own: boot (TCG), the last round,
/// the teardown checks.
const GUEST_MARGIN_S: u64 = 600;

/// Options of `cargo xtask soak`.
#[derive(Debug, PartialEq, Eq)]
pub struct SoakArgs {
    pub minutes: u64,
    /// Kernel series (default [`CI_KERNEL`]).
    pub kernel: String,
    /// Seconds between the soak's sample lines (default: a tenth of the
    /// run, 10 to 60 s).
    pub sample: Option<u64>,
    /// Leave rdma-core's ping-pongs on rverbs' C library out.
    pub no_capi: bool,
    pub keep: bool,
}

/// Reads `--minutes N [--kernel K] [--sample S] [--no-capi] [--keep]`.
pub fn parse(args: &[String]) -> Result<SoakArgs> {
    let mut s = SoakArgs { minutes: 0, kernel: CI_KERNEL.into(), sample: None, no_capi: false, keep: false };
    let mut it = args.iter();
    let count = |opt: &str, v: String| -> Result<u64> {
        v.parse().ok().filter(|&n| n > 0).ok_or_else(|| format!("{opt} {v:?}: not a positive whole number"))
    };
    while let Some(a) = it.next() {
        match a.split('=').next().unwrap_or(a) {
            "--minutes" => s.minutes = count("--minutes", crate::value_of(a, &mut it)?)?,
            "--kernel" => s.kernel = crate::value_of(a, &mut it)?,
            "--sample" => s.sample = Some(count("--sample", crate::value_of(a, &mut it)?)?),
            "--no-capi" => s.no_capi = true,
            "--keep" => s.keep = true,
            _ => return Err(format!("unknown option {a:?}\n{}", crate::USAGE)),
        }
    }
    if s.minutes == 0 {
        return Err("cargo xtask soak needs --minutes N".into());
    }
    kernel::series(&s.kernel)?;
    Ok(s)
}

impl SoakArgs {
    /// The soak program's arguments.
    fn program_args(&self) -> Vec<String> {
        let seconds = self.minutes * 60;
        let sample = self.sample.unwrap_or((seconds / 10).clamp(10, 60));
        let mut a = vec!["--seconds".into(), seconds.to_string(), "--sample".into(), sample.to_string()];
        if self.no_capi {
            a.push("--no-capi".into());
        }
        a
    }
}

/// `cargo xtask soak`: the soak's lines as they come; exit 0 when it passed.
pub fn run(args: &SoakArgs) -> Result<i32> {
    let ws = project::workspace()?;
    let (_, problems) = soak(&ws, args, "")?;
    if problems.is_empty() {
        note(format!("soak on {}: passed", args.kernel));
        Ok(0)
    } else {
        note(format!("soak on {}: FAILED: {}", args.kernel, problems.join("; ")));
        Ok(1)
    }
}

/// The tier of `cargo xtask test`: [`CI_MINUTES`] on [`CI_KERNEL`], one test.
pub fn tier(ws: &Workspace, s: Series) -> (Counts, Vec<String>) {
    let args = SoakArgs { minutes: CI_MINUTES, kernel: s.name.into(), sample: None, no_capi: false, keep: false };
    let problems = match soak(ws, &args, &format!("[soak {}] ", s.name)) {
        Ok((_, p)) => p,
        Err(e) => vec![e],
    };
    let counts = if problems.is_empty() {
        Counts { passed: 1, ..Counts::default() }
    } else {
        Counts { failed: 1, ..Counts::default() }
    };
    (counts, problems)
}

/// Boots the guest, runs the soak, prints its lines with `tag`; returns its
/// output and what went wrong (empty: it passed).
fn soak(ws: &Workspace, args: &SoakArgs, tag: &str) -> Result<(Vec<String>, Vec<String>)> {
    let s = kernel::series(&args.kernel)?;
    let mut knobs = Knobs::from_env()?;
    // The guest's limit must outlast the soak.
    let need = std::time::Duration::from_secs(args.minutes * 60 + GUEST_MARGIN_S);
    knobs.timeout = knobs.timeout.max(need);
    let mut apt = Apt::default();
    let tools = host_tools::ensure(&mut apt, Profile::Project)?;
    let built = project::build_integration_tests(ws)?;
    let example = built
        .examples
        .iter()
        .find(|e| e.name == EXAMPLE)
        .ok_or("cargo test --workspace built no soak example (examples/soak.rs)")?;
    let at = format!("{EXAMPLES_DIR}/{EXAMPLE}");
    let mut files = vec![(at.clone(), example.path.clone())];
    files.extend(project::guest_libs(&built));
    let program = Program { path: at, args: args.program_args(), ..Default::default() };
    let payload = Payload { files, script: guest::run_payload(&program), label: "soak", ..Default::default() };
    let dirs = ws.dirs()?;
    let k = kernel::fetch(s, &dirs.cache, &tools, &mut apt)?;
    note(format!("kernel {}: {}; soak for {} min", s.name, k.describe(), args.minutes));
    let verbose = knobs.verbose;
    let mut lines = Vec::new();
    let mut show = |kind: LineKind, line: &str| match kind {
        LineKind::Program | LineKind::Stderr => {
            println!("{tag}{line}");
            lines.push(line.to_owned());
        }
        LineKind::Kernel if verbose => eprintln!("{tag}kernel: {line}"),
        _ if verbose => eprintln!("{tag}{line}"),
        _ => {}
    };
    let guest = Guest { kernel: &k, tools: &tools, dirs: &dirs, knobs: &knobs };
    let out = runner::run(&guest, &payload, args.keep, &mut show)?;
    note(format!("{} (accel {}), console: {}", secs(out.boot.elapsed), out.accel.describe(), out.log.display()));
    let exit = out.report.runs.first().and_then(|r| r.exit);
    let mut problems = verdict(&lines, exit);
    if let Some(p) = out.problem() {
        out.tail(40).iter().for_each(|l| eprintln!("{tag}console: {l}"));
        problems.insert(0, p);
    }
    Ok((lines, problems))
}

/// What the soak's output and exit code say went wrong.
fn verdict(lines: &[String], exit: Option<i32>) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(why) = lines.iter().find_map(|l| l.strip_prefix("soak: failed: ")) {
        problems.push(why.to_owned());
    }
    if let Some(e) = lines.iter().find_map(|l| l.strip_prefix("soak: FAIL: ")) {
        problems.push(e.to_owned());
    }
    if exit != Some(0) {
        problems.push(format!("the soak exited {}", exit.map_or("without a code".into(), |c| c.to_string())));
    } else if !lines.iter().any(|l| l == "soak: PASS") {
        problems.push("the soak exited 0 without its PASS line".into());
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_soak_options() {
        let a = parse(&s(&["--minutes", "30", "--kernel=6.1"])).unwrap();
        assert_eq!((a.minutes, a.kernel.as_str(), a.no_capi, a.keep), (30, "6.1", false, false));
        assert_eq!(a.program_args(), s(&["--seconds", "1800", "--sample", "60"]));
        let a = parse(&s(&["--minutes=2", "--no-capi", "--sample", "5"])).unwrap();
        assert_eq!(a.kernel, CI_KERNEL);
        assert_eq!(a.program_args(), s(&["--seconds", "120", "--sample", "5", "--no-capi"]));
        assert_eq!(parse(&s(&["--minutes", "2"])).unwrap().program_args()[3], "12");
        assert!(parse(&[]).is_err(), "--minutes is required");
        assert!(parse(&s(&["--minutes", "0"])).is_err());
        assert!(parse(&s(&["--minutes", "x"])).is_err());
        assert!(parse(&s(&["--minutes", "2", "--kernel", "5.10"])).is_err());
        assert!(parse(&s(&["--minutes", "2", "--bogus"])).is_err());
    }

    #[test]
    fn verdict_needs_exit_0_and_pass() {
        let pass = s(&["soak: 120 s on rxe0", "soak: PASS"]);
        assert!(verdict(&pass, Some(0)).is_empty());
        assert_eq!(verdict(&pass[..1], Some(0)), ["the soak exited 0 without its PASS line"]);
        let fail = s(&["soak: failed: 1 lost, 0 duplicated completions", "soak: FAIL"]);
        assert_eq!(verdict(&fail, Some(1)), ["1 lost, 0 duplicated completions", "the soak exited 1"]);
        assert_eq!(verdict(&[], None), ["the soak exited without a code"]);
    }
}
