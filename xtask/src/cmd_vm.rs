//! `cargo xtask vm -- COMMAND...`: boot one guest with rxe0 up (and siw0
//! with `--provider siw`), run one command in it, show its output, exit with its exit code.

use std::io::Write;

use crate::console::LineKind;
use crate::guest::{self, Provider};
use crate::host_tools::{self, Apt, Profile};
use crate::kernel;
use crate::project;
use crate::runner::{self, Guest, Knobs, Payload};
use crate::util::{note, secs, Result};

/// Options of `cargo xtask vm`.
#[derive(Debug, Default)]
pub struct VmArgs {
    /// Kernel series (default 6.12).
    pub kernel: Option<String>,
    /// Also copy the integration-test binaries to /tests and the examples
    /// to /examples.
    pub with_tests: bool,
    pub keep: bool,
    /// `--provider` (`--siw`: siw): the command sees its device in
    /// `RVERBS_TEST_DEVICE` and `RVERBS_PROVIDER`; siw also brings up siw0
    /// (soft-iWARP, 192.168.79.1 on `v2`) next to rxe0, siw.ko built for
    /// the kernel once ([`rverbs_vm::siw_module`]).
    pub provider: Option<Provider>,
    /// The command, read by the guest's shell.
    pub command: Vec<String>,
}

/// Default kernel of `cargo xtask vm`.
pub const DEFAULT_KERNEL: &str = "6.12";

/// Runs the command; returns the exit code to leave with.
pub fn run(args: &VmArgs) -> Result<i32> {
    if args.command.is_empty() {
        return Err(
            "usage: cargo xtask vm [--kernel 6.1|6.12] [--tests] [--provider rxe|siw] [--keep] -- COMMAND...".into()
        );
    }
    let s = kernel::series(args.kernel.as_deref().unwrap_or(DEFAULT_KERNEL))?;
    let knobs = Knobs::from_env()?;
    let ws = project::workspace()?;
    let mut apt = Apt::default();
    let tools = host_tools::ensure(&mut apt, Profile::Project)?;
    let payload = payload(&ws, args)?;
    let dirs = ws.dirs()?;
    let mut k = kernel::fetch(s, &dirs.cache, &tools, &mut apt)?;
    if args.provider.is_some_and(Provider::needs_siw) {
        k = rverbs_vm::siw_module::with_siw(&k, &dirs.cache, &tools, &mut apt)?;
    }
    note(format!("kernel {}: {}", s.name, k.describe()));
    let verbose = knobs.verbose;
    // The command's output on stdout; with RVERBS_VM_VERBOSE the rest of
    // both consoles on stderr.
    let mut show = |kind: LineKind, line: &str| match kind {
        LineKind::Program => {
            println!("{line}");
            let _ = std::io::stdout().flush();
        }
        LineKind::Kernel if verbose => eprintln!("kernel: {line}"),
        LineKind::Stderr => eprintln!("{line}"),
        _ if verbose => eprintln!("{line}"),
        _ => {}
    };
    let guest = Guest { kernel: &k, tools: &tools, dirs: &dirs, knobs: &knobs };
    let out = runner::run(&guest, &payload, args.keep, &mut show)?;
    let took = format!("{} (accel {}), console: {}", secs(out.boot.elapsed), out.accel.describe(), out.log.display());
    if let Some(problem) = out.problem() {
        if !verbose {
            eprintln!("---- guest console tail:");
            out.tail(40).iter().for_each(|l| eprintln!("{l}"));
            eprintln!("---- kernel console tail:");
            out.kernel_tail(40).iter().for_each(|l| eprintln!("{l}"));
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
        let built = project::build_integration_tests(ws)?;
        files.extend(project::guest_libs(&built));
        for t in built.tests {
            files.push((format!("{}/{}", guest::TESTS_DIR, t.name), t.path));
        }
        for e in built.examples {
            files.push((format!("{}/{}", guest::EXAMPLES_DIR, e.name), e.path));
        }
    }
    let mut words = args.command.clone();
    if let Some(p) = args.provider {
        let env: Vec<String> = p.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
        words.insert(0, format!("export {}\n", env.join(" ")));
    }
    let mut script = guest::cmd_payload(&words);
    if args.provider.is_some_and(Provider::needs_siw) {
        script = guest::with_siw(&script);
    }
    Ok(Payload { files, script, label: "vm", ..Default::default() })
}
