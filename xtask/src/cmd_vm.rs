//! `cargo xtask vm -- COMMAND...`: boot one guest with rxe0 up, run one
//! command in it, show its output, exit with its exit code.

use std::io::Write;

use crate::console::LineKind;
use crate::guest;
use crate::host_tools::{self, Apt};
use crate::kernel;
use crate::project;
use crate::runner::{self, Knobs, Payload};
use crate::util::{note, secs, Result};

/// Options of `cargo xtask vm`.
#[derive(Debug, Default)]
pub struct VmArgs {
    /// Kernel series (default 6.12).
    pub kernel: Option<String>,
    /// Also copy the integration-test binaries to /tests.
    pub with_tests: bool,
    pub keep: bool,
    /// The command, read by the guest's shell.
    pub command: Vec<String>,
}

/// Default kernel of `cargo xtask vm`.
pub const DEFAULT_KERNEL: &str = "6.12";

/// Runs the command; returns the exit code to leave with.
pub fn run(args: &VmArgs) -> Result<i32> {
    if args.command.is_empty() {
        return Err(
            "usage: cargo xtask vm [--kernel 6.1|6.12] [--tests] [--keep] -- COMMAND...".into(),
        );
    }
    let s = kernel::series(args.kernel.as_deref().unwrap_or(DEFAULT_KERNEL))?;
    let knobs = Knobs::from_env()?;
    let ws = project::workspace()?;
    let mut apt = Apt::default();
    let tools = host_tools::ensure(&mut apt)?;
    let payload = payload(&ws, args)?;
    let k = kernel::fetch(s, &ws.vm_dir(), &tools, &mut apt)?;
    note(format!("kernel {}: {}", s.name, k.describe()));
    let verbose = knobs.verbose;
    let mut show = |kind: LineKind, line: &str| {
        if verbose || kind == LineKind::Program {
            println!("{line}");
            let _ = std::io::stdout().flush();
        }
    };
    let out = runner::run(
        &k,
        &tools,
        &ws.vm_dir(),
        &payload,
        &knobs,
        args.keep,
        &mut show,
    )?;
    let took = format!(
        "{} (accel {}), console: {}",
        secs(out.boot.elapsed),
        out.accel.describe(),
        out.log.display()
    );
    if let Some(problem) = out.problem() {
        if !verbose {
            eprintln!("---- console tail:");
            out.tail(60).iter().for_each(|l| eprintln!("{l}"));
        }
        note(format!("kernel {}: {problem}; {took}", s.name));
        return Ok(if out.boot.timed_out { 124 } else { 1 });
    }
    let code = out.report.runs.first().and_then(|r| r.exit).unwrap_or(1);
    note(format!("exit {code}; kernel {}; {took}", k.release));
    Ok(code)
}

/// The CLI (and, with `--tests`, the integration tests) plus the command.
fn payload(ws: &project::Workspace, args: &VmArgs) -> Result<Payload> {
    let mut files = vec![(guest::RVERBS_BIN.to_owned(), project::build_cli(ws)?)];
    if args.with_tests {
        for t in project::build_integration_tests(ws)? {
            files.push((format!("{}/{}", guest::TESTS_DIR, t.name), t.path));
        }
    }
    Ok(Payload {
        files,
        script: guest::cmd_payload(&args.command),
        label: "vm",
    })
}
