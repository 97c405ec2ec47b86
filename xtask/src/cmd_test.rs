//! `cargo xtask test`: the host tier, then every kernel of the matrix in a
//! VM, then one summary line.

use std::time::{Duration, Instant};

use crate::console::{Counts, LineKind};
use crate::downstream;
use crate::guest::{Provider, EXAMPLES_DIR, TESTS_DIR};
use crate::host_tools::{self, Apt, HostTools, Profile};
use crate::kernel::{self, Series};
use crate::project::{self, GuestBinaries, Workspace};
use crate::runner::{self, Guest, Knobs, Payload};
use crate::twohost;
use crate::util::{note, secs, Result};

/// Options of `cargo xtask test`.
#[derive(Debug, Default)]
pub struct TestArgs {
    /// Kernel series to boot; empty means all.
    pub kernels: Vec<String>,
    pub host_only: bool,
    pub vm_only: bool,
    /// Only the two-host tier.
    pub two_hosts_only: bool,
    /// Skip the two-host tier.
    pub no_two_hosts: bool,
    /// Only the downstream crate's tests (through `rverbs-vm run`).
    pub downstream_only: bool,
    /// Skip them.
    pub no_downstream: bool,
    pub keep: bool,
    /// Providers of the VM tier (`--provider`); empty means all.
    pub providers: Vec<Provider>,
}

/// Examples of the workspace that the VM tier runs after the integration
/// tests, each with its arguments; each counts as one test that passes when
/// the example exits 0. Every example `cargo test --workspace` builds is in
/// the guest as `/examples/<name>` (also for integration tests to run);
/// only those listed here run by themselves.
pub const VM_EXAMPLES: &[(&str, &[&str])] = &[];

/// One row of the final table.
struct Row {
    what: String,
    counts: Counts,
    note: String,
}

/// The whole run's tally.
#[derive(Default)]
struct Tally {
    rows: Vec<Row>,
    total: Counts,
    reasons: Vec<String>,
}

impl Tally {
    /// Records one tier (see [`with_problems`]).
    fn add(&mut self, what: String, counts: Counts, problems: Vec<String>, note: String) {
        let counts = with_problems(counts, &problems);
        self.reasons.extend(problems.into_iter().map(|p| format!("{what}: {p}")));
        self.total += counts;
        self.rows.push(Row { what, counts, note });
    }
}

/// A problem with no failing test still counts as one failure, so that
/// "0 failed" never goes with a non-zero exit.
fn with_problems(mut counts: Counts, problems: &[String]) -> Counts {
    if !problems.is_empty() && counts.failed == 0 {
        counts.failed = 1;
    }
    counts
}

/// Runs the tiers; returns the process exit code.
pub fn run(args: &TestArgs) -> Result<i32> {
    let only = [args.host_only, args.vm_only, args.two_hosts_only, args.downstream_only];
    if only.iter().filter(|&&o| o).count() > 1 {
        return Err("--host-only, --vm-only, --two-hosts-only and --downstream-only exclude each other".into());
    }
    if args.two_hosts_only && args.no_two_hosts {
        return Err("--two-hosts-only and --no-two-hosts exclude each other".into());
    }
    if args.downstream_only && args.no_downstream {
        return Err("--downstream-only and --no-downstream exclude each other".into());
    }
    let some_only = only.iter().any(|&o| o);
    let series = selected_series(&args.kernels)?;
    let ws = project::workspace()?;
    let mut tally = Tally::default();
    if !some_only || args.host_only {
        host_tier(&ws, &mut tally)?;
    }
    if !some_only || args.vm_only {
        let providers = if args.providers.is_empty() { Provider::ALL.to_vec() } else { args.providers.clone() };
        vm_tiers(&ws, &series, &providers, args.keep, &mut tally);
    }
    if (!some_only || args.vm_only || args.two_hosts_only) && !args.no_two_hosts {
        two_host_tiers(&ws, &series, &mut tally);
    }
    if (!some_only || args.vm_only || args.downstream_only) && !args.no_downstream {
        downstream_tiers(&ws, &series, &mut tally);
    }
    if !some_only || args.vm_only {
        soak_tier(&ws, &series, &mut tally);
    }
    Ok(print_summary(&tally))
}

/// The series named by `--kernel`, or the whole matrix.
fn selected_series(names: &[String]) -> Result<Vec<Series>> {
    if names.is_empty() {
        return Ok(kernel::SERIES.to_vec());
    }
    names.iter().map(|n| kernel::series(n)).collect()
}

fn host_tier(ws: &Workspace, tally: &mut Tally) -> Result<()> {
    println!("==> host tier: cargo test --workspace (no device)");
    let start = Instant::now();
    let host = project::host_tier(ws)?;
    let mut problems: Vec<String> = host.error.into_iter().collect();
    if !host.log.failed.is_empty() {
        problems.push(format!("failed: {}", host.log.failed.join(", ")));
    }
    println!("host: {} in {}", host.log.counts.describe(), secs(start.elapsed()));
    tally.add("host".into(), host.log.counts, problems, secs(start.elapsed()));
    println!("==> mlx5 differential tier: rdma-core's libmlx5 and rverbs on one fake ConnectX-5 (host)");
    let start = Instant::now();
    match crate::mlx5_diff::tier(ws, crate::mlx5_diff::CI_CASES) {
        Ok((counts, problems)) => {
            println!("mlx5-diff: {} in {}", counts.describe(), secs(start.elapsed()));
            tally.add("mlx5-diff".into(), counts, problems, secs(start.elapsed()));
        }
        Err(e) => tally.add("mlx5-diff".into(), Counts::default(), vec![e], String::new()),
    }
    Ok(())
}

/// Everything the VM tiers share: tools and the project's binaries.
struct Prepared {
    tools: HostTools,
    apt: Apt,
    payload: Payload,
}

fn prepare(ws: &Workspace, providers: &[Provider]) -> Result<Prepared> {
    let mut apt = Apt::default();
    let tools = host_tools::ensure(&mut apt, Profile::Project)?;
    let cli = project::build_cli(ws)?;
    let built = project::build_integration_tests(ws)?;
    let names: Vec<String> = built.tests.iter().map(|t| t.name.clone()).collect();
    note(format!(
        "integration tests for the guest: {}",
        if names.is_empty() { "none".into() } else { names.join(" ") }
    ));
    if !VM_EXAMPLES.is_empty() {
        let listed: Vec<&str> = VM_EXAMPLES.iter().map(|(n, _)| *n).collect();
        note(format!("examples run in the guest: {}", listed.join(" ")));
    }
    for &p in providers {
        for (bin, why) in crate::providers::row(p).skip {
            note(format!("not on {}: {bin} ({why})", p.device()));
        }
    }
    Ok(Prepared { tools, apt, payload: test_payload(cli, &built, VM_EXAMPLES, providers)? })
}

/// The test payload: every provider's tier in one boot (siw0 up next to
/// rxe0 when siw is among them), then the examples.
fn test_payload(
    cli: std::path::PathBuf,
    built: &GuestBinaries,
    run: &[(&str, &[&str])],
    providers: &[Provider],
) -> Result<Payload> {
    let mut files = vec![(crate::guest::RVERBS_BIN.to_owned(), cli)];
    files.extend(built.tests.iter().map(|t| (format!("{TESTS_DIR}/{}", t.name), t.path.clone())));
    files.extend(built.examples.iter().map(|e| (format!("{EXAMPLES_DIR}/{}", e.name), e.path.clone())));
    files.extend(project::guest_libs(built));
    let names: Vec<String> = built.tests.iter().map(|t| t.name.clone()).collect();
    let mut examples = Vec::new();
    for (name, args) in run {
        if !built.examples.iter().any(|e| e.name == *name) {
            return Err(format!("VM_EXAMPLES lists {name}, which `cargo test --workspace` does not build"));
        }
        examples.push((name.to_string(), args.iter().map(|a| a.to_string()).collect()));
    }
    let tiers: Vec<_> = providers.iter().map(|&p| crate::providers::tier(p, &names)).collect();
    let mut script = crate::guest::test_payload_tiers(&tiers, &examples);
    if providers.iter().any(|p| p.needs_siw()) {
        script = crate::guest::with_siw(&script);
    }
    Ok(Payload { files, script, label: "test", ..Default::default() })
}

fn vm_tiers(ws: &Workspace, series: &[Series], providers: &[Provider], keep: bool, tally: &mut Tally) {
    let knobs = match Knobs::from_env() {
        Ok(k) => k,
        Err(e) => return tally.add("vm".into(), Counts::default(), vec![e], String::new()),
    };
    let mut prep = match prepare(ws, providers) {
        Ok(p) => p,
        Err(e) => return tally.add("vm".into(), Counts::default(), vec![e], String::new()),
    };
    // Kernels (and siw.ko) one after another (they share the apt state),
    // then the boots.
    let mut ready = Vec::new();
    for &s in series {
        match kernel_ready(ws, s, providers, &mut prep) {
            Ok(r) => ready.push(r),
            Err((what, e)) => tally.add(what, Counts::default(), vec![e], String::new()),
        }
    }
    let knobs = &boot_knobs(&knobs, providers.len());
    // Each boot's outcome and the kernel's time (fetch and boot).
    let boot = |r: &ReadyKernel| {
        let start = Instant::now();
        let tag = format!("[{}]", r.series.name);
        let mut show = |kind: LineKind, line: &str| show_line(&tag, knobs.verbose, kind, line);
        let guest = Guest { kernel: &r.kernel, tools: &prep.tools, dirs: &r.dirs, knobs };
        (runner::run(&guest, &prep.payload, keep, &mut show), r.fetched + start.elapsed())
    };
    let outcomes: Vec<(Result<runner::Outcome>, Duration)> = if side_by_side(ready.len(), knobs) {
        note(format!(
            "{} guests boot side by side (one vCPU each; RVERBS_VM_SERIAL=1 boots one at a time)",
            ready.len()
        ));
        std::thread::scope(|sc| {
            let running: Vec<_> = ready.iter().map(|r| sc.spawn(move || boot(r))).collect();
            let joined = running.into_iter().map(|h| h.join());
            joined.map(|j| j.unwrap_or_else(|_| (Err("the boot's thread panicked".into()), Duration::ZERO))).collect()
        })
    } else {
        ready.iter().map(boot).collect()
    };
    for (r, (out, took)) in ready.iter().zip(outcomes) {
        report_kernel(r, providers, out, took, tally);
    }
}

/// Whether the `n` guests of the VM tier boot side by side: a TCG guest
/// keeps one host core busy per vCPU, so with a core free for each, the
/// tier takes as long as its slowest kernel instead of their sum (on CI's
/// two cores: 633 s for both, against 911 s and 1,025 s one after the
/// other). Memory: each guest has `RVERBS_VM_MEMORY` (4G by default).
fn side_by_side(n: usize, knobs: &Knobs) -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let serial = std::env::var("RVERBS_VM_SERIAL").is_ok_and(|v| v.trim() == "1");
    n > 1 && !serial && cores >= n * knobs.cpus as usize
}

/// A kernel of the matrix fetched (with siw.ko where a tier needs it),
/// ready to boot.
struct ReadyKernel {
    series: Series,
    what: String,
    kernel: kernel::Kernel,
    dirs: rverbs_vm::util::Dirs,
    /// What the fetch (and siw.ko) took.
    fetched: Duration,
}

fn kernel_ready(
    ws: &Workspace,
    s: Series,
    providers: &[Provider],
    prep: &mut Prepared,
) -> std::result::Result<ReadyKernel, (String, String)> {
    let names: Vec<&str> = providers.iter().map(|p| p.name()).collect();
    let what = format!("kernel {} {}", s.name, names.join("+"));
    println!("==> {what} ({})", s.meta_package);
    let start = Instant::now();
    let dirs = ws.dirs().map_err(|e| (what.clone(), e))?;
    let mut k = kernel::fetch(s, &dirs.cache, &prep.tools, &mut prep.apt).map_err(|e| (what.clone(), e))?;
    if providers.iter().any(|p| p.needs_siw()) {
        let siw_start = Instant::now();
        k = rverbs_vm::siw_module::with_siw(&k, &dirs.cache, &prep.tools, &mut prep.apt)
            .map_err(|e| (what.clone(), e))?;
        println!("{what}: siw.ko ready in {}", secs(siw_start.elapsed()));
    }
    println!("{what}: {}", k.describe());
    Ok(ReadyKernel { series: s, what, kernel: k, dirs, fetched: start.elapsed() })
}

/// One kernel's boot (every provider's tier in it: a second boot under
/// TCG would cost minutes) as one row per tier, "kernel 6.12 rxe",
/// "kernel 6.12 siw".
fn report_kernel(
    r: &ReadyKernel,
    providers: &[Provider],
    out: Result<runner::Outcome>,
    took: Duration,
    tally: &mut Tally,
) {
    let (s, k, tag) = (r.series, &r.kernel, format!("[{}]", r.series.name));
    let out = match out {
        Ok(o) => o,
        Err(e) => return tally.add(r.what.clone(), Counts::default(), vec![e], String::new()),
    };
    let release = out.report.release.clone().unwrap_or_else(|| k.release.clone());
    let boot_problem = out.problem();
    if boot_problem.is_some() {
        print_boot_tails(&tag, &out);
    }
    // One row per tier; a boot problem fails each; examples count with the first.
    for (i, &p) in providers.iter().enumerate() {
        let prefix = crate::providers::prefix(p);
        let mine = |r: &crate::console::GuestRun| r.name.starts_with(&prefix) || (i == 0 && r.is_example());
        let counts = out.report.runs.iter().filter(|r| mine(r)).fold(Counts::default(), |mut c, r| {
            c += r.counts();
            c
        });
        let mut problems: Vec<String> = boot_problem.iter().cloned().collect();
        report_failures(&tag, &out, &mine, &mut problems);
        let what = format!("kernel {} {}", s.name, p.name());
        println!(
            "{what} ({release}, {}): {} in {} for all tiers (boot {}); console: {}",
            out.accel.describe(),
            with_problems(counts, &problems).describe(),
            secs(took),
            secs(out.boot.elapsed),
            out.log.display()
        );
        println!("{what}: {}", binary_times(out.report.runs.iter().filter(|r| mine(r))));
        tally.add(what, counts, problems, format!("{} ({}), {}", k.package, release, secs(took)));
    }
    if !out.report.dmesg.is_empty() {
        println!("{tag} ---- dmesg | tail -n 80:");
        for l in &out.report.dmesg {
            println!("{tag}   {l}");
        }
    }
}

/// `N binaries in T: NAME S s, ...`, slowest first (prefixes dropped):
/// where a tier's time goes, for keeping CI's run short. A binary that
/// never ended shows `?`.
fn binary_times<'a>(runs: impl Iterator<Item = &'a crate::console::GuestRun>) -> String {
    let mut runs: Vec<_> = runs.collect();
    runs.sort_by_key(|r| std::cmp::Reverse(r.took));
    let total: std::time::Duration = runs.iter().filter_map(|r| r.took).sum();
    let each: Vec<String> = runs
        .iter()
        .map(|r| {
            let name = r.name.split_once(':').map_or(r.name.as_str(), |(_, n)| n);
            r.took.map_or(format!("{name} ?"), |t| format!("{name} {:.0} s", t.as_secs_f64()))
        })
        .collect();
    format!("{} binaries in {}: {}", runs.len(), secs(total), each.join(", "))
}

/// The boot's limit (a hang guard): the default holds one tier; each
/// further tier in the same boot adds [`TIER_TIMEOUT`] unless
/// `RVERBS_VM_TIMEOUT` sets it.
fn boot_knobs(knobs: &Knobs, tiers: usize) -> Knobs {
    let mut k = knobs.clone();
    if std::env::var_os("RVERBS_VM_TIMEOUT").is_none() {
        k.timeout += TIER_TIMEOUT * u32::try_from(tiers.saturating_sub(1)).unwrap_or(u32::MAX);
    }
    k
}

/// What a further tier adds to the boot's limit: the siw tier takes about
/// 5 minutes under TCG.
const TIER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The two-host tier: per kernel, two guests joined by a QEMU stream
/// network run `rverbs pingpong -e` across it, RC and UD, `rverbs rping`
/// on rxe0, then on siw0 in rxe0's place (one test each; siw.ko is built
/// and cached for the kernel when missing, [`twohost::run`]).
fn two_host_tiers(ws: &Workspace, series: &[Series], tally: &mut Tally) {
    let fail = |tally: &mut Tally, e: String| tally.add("two hosts".into(), Counts::default(), vec![e], String::new());
    let knobs = match Knobs::from_env() {
        Ok(k) => k,
        Err(e) => return fail(tally, e),
    };
    let mut apt = Apt::default();
    let dirs = match ws.dirs() {
        Ok(d) => d,
        Err(e) => return fail(tally, e),
    };
    let tools = match host_tools::ensure(&mut apt, Profile::Project) {
        Ok(t) => t,
        Err(e) => return fail(tally, e),
    };
    let cli = match project::build_cli(ws) {
        Ok(c) => c,
        Err(e) => return fail(tally, e),
    };
    let spec = twohost::PairSpec::default();
    for &s in series {
        let what = format!("two hosts {}", s.name);
        println!(
            "==> {what}: rverbs pingpong -e -n {n} (RC, UD) and rverbs rping -C {n} (rxe0, then siw0) between two guests on a QEMU stream network",
            n = spec.iters
        );
        let start = Instant::now();
        let k = match kernel::fetch(s, &dirs.cache, &tools, &mut apt) {
            Ok(k) => k,
            Err(e) => {
                tally.add(what, Counts::default(), vec![e], String::new());
                continue;
            }
        };
        let show = twohost::progress(knobs.verbose);
        let pair = match twohost::run(&k, &tools, &mut apt, &dirs, &knobs, &cli, &spec, &show) {
            Ok(p) => p,
            Err(e) => {
                tally.add(what, Counts::default(), vec![e], String::new());
                continue;
            }
        };
        let tag = format!("[2h {}]", s.name);
        for l in pair.report("") {
            println!("{tag} {l}");
        }
        let (counts, problems) = pair.counts();
        if !problems.is_empty() {
            for l in pair.failure_tails() {
                println!("{tag}   {l}");
            }
        }
        println!("{what}: {} in {}", counts.describe(), secs(start.elapsed()));
        tally.add(what, counts, problems, format!("{} ({}), {}", k.package, k.release, secs(start.elapsed())));
    }
}

/// The downstream crate (`tests/downstream`) through `rverbs-vm run` as its
/// cargo runner, per kernel: its tests, the test that fails on purpose, and
/// the two-host test (one test each besides the crate's own).
fn downstream_tiers(ws: &Workspace, series: &[Series], tally: &mut Tally) {
    let bin = match downstream::prepare(ws, series) {
        Ok(b) => b,
        Err(e) => return tally.add("downstream".into(), Counts::default(), vec![e], String::new()),
    };
    for &s in series {
        let what = format!("downstream {}", s.name);
        println!("==> {what}: tests/downstream's cargo test with rverbs-vm as its cargo runner");
        let start = Instant::now();
        let (counts, problems) = downstream::run(ws, &bin, s.name);
        println!("{what}: {} in {}", with_problems(counts, &problems).describe(), secs(start.elapsed()));
        tally.add(what, counts, problems, secs(start.elapsed()));
    }
}

/// The soak (`cargo xtask soak`): `soak::CI_MINUTES` on `soak::CI_KERNEL`
/// when the run boots that kernel; one test, failed by any error, lost or
/// duplicated completion, or growth it reports.
fn soak_tier(ws: &Workspace, series: &[Series], tally: &mut Tally) {
    let Some(&s) = series.iter().find(|s| s.name == crate::soak::CI_KERNEL) else { return };
    let what = format!("soak {}", s.name);
    println!(
        "==> {what}: examples/soak.rs for {} min, mixed traffic, every byte and completion checked",
        crate::soak::CI_MINUTES
    );
    let start = Instant::now();
    let (counts, problems) = crate::soak::tier(ws, s);
    println!("{what}: {} in {}", with_problems(counts, &problems).describe(), secs(start.elapsed()));
    tally.add(what, counts, problems, secs(start.elapsed()));
}

/// Progress: libtest result lines (both consoles with RVERBS_VM_VERBOSE;
/// kernel lines tagged `kernel`).
fn show_line(tag: &str, verbose: bool, kind: LineKind, line: &str) {
    let interesting = kind == LineKind::Program && crate::console::parse_test_line(line).is_some();
    if kind == LineKind::Kernel {
        if verbose {
            println!("{tag} kernel: {line}");
        }
    } else if verbose || interesting {
        println!("{tag} {line}");
    }
}

/// Prints each failing test's output and crash reasons of the runs `mine`
/// selects; adds the reasons to `problems`.
fn report_failures(
    tag: &str,
    out: &runner::Outcome,
    mine: &dyn Fn(&crate::console::GuestRun) -> bool,
    problems: &mut Vec<String>,
) {
    for run in out.report.runs.iter().filter(|r| mine(r)) {
        for name in &run.log.failed {
            println!("{tag} ---- {}: {name} FAILED; its output:", run.name);
            for l in run.log.failure_output(name) {
                println!("{tag}   {l}");
            }
        }
        if !run.log.failed.is_empty() {
            problems.push(format!("{} failed: {}", run.name, run.log.failed.join(", ")));
        }
        if let Some(why) = run.crash_reason() {
            println!("{tag} ---- {why}; last lines of its output:");
            let lines = &run.log.lines;
            for l in &lines[lines.len().saturating_sub(40)..] {
                println!("{tag}   {l}");
            }
            problems.push(why);
        }
    }
}

/// For a boot problem: both consoles' tails.
fn print_boot_tails(tag: &str, out: &runner::Outcome) {
    println!("{tag} ---- guest console tail:");
    for l in out.tail(40) {
        println!("{tag}   {l}");
    }
    println!("{tag} ---- kernel console tail:");
    for l in out.kernel_tail(40) {
        println!("{tag}   {l}");
    }
}

/// The table, the reasons (if any) and the final `N passed, M failed, K
/// skipped` line; returns the exit code.
fn print_summary(t: &Tally) -> i32 {
    println!("==> summary");
    for row in &t.rows {
        println!("  {:<15} {:<40} {}", row.what, row.counts.describe(), row.note);
    }
    let failed = t.total.failed > 0 || !t.reasons.is_empty();
    if failed {
        println!("FAILED: {}", t.reasons.join("; "));
    }
    println!("{}", t.total.describe());
    i32::from(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::Artifact;

    #[test]
    fn binary_times_list_the_slowest_first() {
        use crate::console::GuestRun;
        let run = |name: &str, s: Option<u64>| GuestRun {
            name: name.into(),
            took: s.map(std::time::Duration::from_secs),
            ..Default::default()
        };
        let runs = [run("siw:fast", Some(2)), run("siw:slow", Some(90)), run("siw:hung", None)];
        assert_eq!(binary_times(runs.iter()), "3 binaries in 92.0 s: slow 90 s, fast 2 s, hung ?");
    }

    #[test]
    fn examples_go_to_the_guest_and_listed_ones_run() {
        let art = |name: &str| Artifact { name: name.into(), package: "p".into(), path: format!("/t/{name}").into() };
        let lib = Artifact { name: "ibverbs".into(), package: "rverbs-capi".into(), path: "/t/libibverbs.so".into() };
        let built =
            GuestBinaries { tests: vec![art("vm_smoke")], examples: vec![art("ex_a"), art("ex_b")], libs: vec![lib] };
        let p = test_payload("/t/rverbs".into(), &built, &[("ex_b", &["-n", "3"])], &[Provider::Rxe]).unwrap();
        let at: Vec<&str> = p.files.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(
            at,
            [
                "/usr/local/bin/rverbs",
                "/tests/vm_smoke",
                "/examples/ex_a",
                "/examples/ex_b",
                "/opt/rverbs/lib/libibverbs.so.1"
            ]
        );
        assert!(p.script.starts_with("RVERBS_MODE=test\nRVERBS_TESTS='vm_smoke'\n"), "{}", p.script);
        assert!(p.script.contains("    run_example ex_b -n 3\n"), "{}", p.script);
        assert!(!p.script.contains("ex_a"));
        assert!(p.script.contains("    run_tests rxe: vm_smoke RVERBS_TEST_DEVICE=rxe0 RVERBS_PROVIDER=rxe\n"));
        assert!(!p.script.contains("RVERBS_SIW"), "no siw0 unless a siw tier runs");
        let both = test_payload("/t/rverbs".into(), &built, &[], &Provider::ALL).unwrap();
        assert!(both.script.starts_with("RVERBS_SIW=1\n"), "{}", both.script);
        assert!(both.script.contains("    run_tests siw: vm_smoke RVERBS_TEST_DEVICE=siw0 RVERBS_PROVIDER=siw\n"));
        assert!(test_payload("/t/rverbs".into(), &built, &[("missing", &[])], &[Provider::Rxe]).is_err());
    }
}
