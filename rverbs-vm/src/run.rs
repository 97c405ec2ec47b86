//! `rverbs-vm run`: copy a program (with the shared libraries it needs, and
//! whatever `--copy` names) into a guest with rxe0 up, run it there with its
//! arguments word for word, stream its stdout and stderr, and exit with its
//! exit code. With `--two-hosts` the same program runs on two guests joined
//! by a virtual wire ([`crate::pair`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::console::LineKind;
use crate::guest::{self, Program};
use crate::host_tools::{self, Apt, HostTools, Profile};
use crate::initramfs::{self, guest_path, Manifest};
use crate::kernel::{self, Kernel};
use crate::pair::{self, Wire};
use crate::runner::{self, Guest, Knobs, Outcome, Payload};
use crate::util::{self, note, secs, Context, Dirs, Result};

/// Exit code when the guest ran past its time limit (like `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code when the harness itself failed: no QEMU, no kernel, a guest
/// that did not boot or could not set rxe0 up.
pub const EXIT_HARNESS: i32 = 125;

/// Default kernel series (`--kernel`, `RVERBS_VM_KERNEL`).
pub const DEFAULT_SERIES: &str = "6.12";

/// Host variables that are passed on when set, besides `--env`: the ones
/// a Rust test or program commonly reads.
pub const FORWARDED: &[&str] = &[
    "RUST_BACKTRACE",
    "RUST_LIB_BACKTRACE",
    "RUST_LOG",
    "RUST_TEST_THREADS",
    "RUST_TEST_NOCAPTURE",
    "RUST_MIN_STACK",
    "RVERBS_LOG",
    "CARGO_MANIFEST_DIR",
    "CARGO_PKG_NAME",
    "CARGO_CRATE_NAME",
];

/// Where the kernel comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelChoice {
    /// A Debian series (`6.1`, `6.12`).
    Series(String),
    /// An image and its module tree.
    Paths { image: PathBuf, modules: PathBuf },
}

/// Options of `rverbs-vm run`.
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    /// `None`: `RVERBS_VM_KERNEL_IMAGE`/`RVERBS_VM_MODULES_DIR`, else
    /// `RVERBS_VM_KERNEL`, else [`DEFAULT_SERIES`].
    pub kernel: Option<String>,
    pub kernel_image: Option<PathBuf>,
    pub modules_dir: Option<PathBuf>,
    pub two_hosts: bool,
    /// Also siw0 (soft-iWARP, [`guest::SIW_IP`] on `v2`) next to rxe0;
    /// siw.ko is built for a Debian kernel once ([`crate::siw_module`]).
    pub siw: bool,
    /// `SRC[:DST]`.
    pub copies: Vec<String>,
    /// `NAME` or `NAME=VALUE`.
    pub env: Vec<String>,
    pub timeout: Option<u64>,
    pub memory: Option<String>,
    pub cpus: Option<u32>,
    pub keep: bool,
    pub verbose: bool,
    /// PROGRAM ARGS...
    pub command: Vec<String>,
}

impl RunArgs {
    /// The kernel to boot, from the options and then the environment.
    pub fn kernel_choice(&self) -> Result<KernelChoice> {
        let env_path = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty()).map(PathBuf::from);
        let (image, modules) = match (&self.kernel_image, &self.modules_dir) {
            (None, None) if self.kernel.is_none() => {
                (env_path("RVERBS_VM_KERNEL_IMAGE"), env_path("RVERBS_VM_MODULES_DIR"))
            }
            (i, m) => (i.clone(), m.clone()),
        };
        match (image, modules) {
            (Some(image), Some(modules)) if self.kernel.is_none() => Ok(KernelChoice::Paths { image, modules }),
            (Some(_), Some(_)) => Err("--kernel and --kernel-image exclude each other".into()),
            (Some(_), None) | (None, Some(_)) => {
                Err("--kernel-image and --modules-dir go together (the image and its lib/modules/RELEASE)".into())
            }
            (None, None) => {
                let from_env = std::env::var("RVERBS_VM_KERNEL").ok().filter(|k| !k.trim().is_empty());
                let name = self.kernel.clone().or(from_env).unwrap_or_else(|| DEFAULT_SERIES.to_owned());
                kernel::series(name.trim())?;
                Ok(KernelChoice::Series(name.trim().to_owned()))
            }
        }
    }
}

/// The directories of a `rverbs-vm` run: the cache, and logs under
/// `RVERBS_VM_WORK_DIR` (default: the cache too).
pub fn dirs() -> Result<Dirs> {
    let cache = util::cache_dir()?;
    let work = std::env::var_os("RVERBS_VM_WORK_DIR").filter(|v| !v.is_empty()).map_or(cache.clone(), PathBuf::from);
    Ok(Dirs { cache, work })
}

/// Resolves, downloads if needed, and prepares the kernel.
pub fn kernel(choice: &KernelChoice, dirs: &Dirs, tools: &HostTools) -> Result<Kernel> {
    match choice {
        KernelChoice::Series(s) => kernel::fetch(kernel::series(s)?, &dirs.cache, tools, &mut Apt::read_only()),
        KernelChoice::Paths { image, modules } => kernel::from_paths(image, modules, &dirs.cache, tools),
    }
}

/// Runs the command; returns the exit code to leave with (the program's,
/// [`EXIT_TIMEOUT`] or [`EXIT_HARNESS`]).
pub fn run(args: &RunArgs) -> i32 {
    match prepare_and_run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rverbs-vm: {e}");
            EXIT_HARNESS
        }
    }
}

fn prepare_and_run(args: &RunArgs) -> Result<i32> {
    if args.command.is_empty() {
        return Err("run: no program given (rverbs-vm run [OPTIONS] -- PROGRAM ARGS...)".into());
    }
    let choice = args.kernel_choice()?;
    let knobs = knobs(args)?;
    let tools = host_tools::ensure(&mut Apt::read_only(), Profile::Run)?;
    let dirs = dirs()?;
    let mut k = kernel(&choice, &dirs, &tools)?;
    if args.siw {
        if args.two_hosts {
            return Err("--siw with --two-hosts: not yet (rxe0 holds each guest's eth0)".into());
        }
        k = crate::siw_module::with_siw(&k, &dirs.cache, &tools, &mut Apt::read_only())?;
    }
    let base = initramfs::base_manifest(&k, &tools)?;
    let mut payload = Payload { separate_stderr: true, label: "run", ..Default::default() };
    let program = place_program(&args.command[0], &base, &mut payload)?;
    for c in &args.copies {
        add_copy(c, &base, &mut payload)?;
    }
    let cwd = guest_cwd(&base, &mut payload);
    let env = environment(&args.env)?;
    let prog = Program { path: program, args: args.command[1..].to_vec(), env, cwd, stderr_tty: true };
    let guest = Guest { kernel: &k, tools: &tools, dirs: &dirs, knobs: &knobs };
    note(format!("kernel {}; {} in the guest", k.describe(), prog.path));
    if args.two_hosts {
        two_hosts(&guest, &prog, &payload)
    } else {
        one_host(&guest, &prog, payload, args.keep, args.siw)
    }
}

/// Environment knobs, overridden by the options.
fn knobs(args: &RunArgs) -> Result<Knobs> {
    let mut k = Knobs::from_env()?;
    if let Some(t) = args.timeout {
        k.timeout = Duration::from_secs(t);
    }
    if let Some(m) = &args.memory {
        k.memory = m.clone();
    }
    if let Some(c) = args.cpus {
        k.cpus = c;
    }
    k.verbose |= args.verbose;
    Ok(k)
}

/// Puts the program into the payload (unless the guest already has it) and
/// returns the path or name the guest runs. A name without `/` is the
/// guest's own program when the image has one (`ibv_devinfo`, `sh`),
/// else the host's from `$PATH`.
fn place_program(name: &str, base: &Manifest, payload: &mut Payload) -> Result<String> {
    if !name.contains('/') {
        let in_guest = ["usr/local/bin", "usr/bin", "usr/sbin"].iter().any(|d| base.contains(&format!("{d}/{name}")));
        if in_guest {
            return Ok(name.to_owned());
        }
    }
    let host = if name.contains('/') {
        PathBuf::from(name)
    } else {
        util::which(name).ok_or_else(|| format!("{name}: not in the guest image and not found in $PATH"))?
    };
    let host = std::fs::canonicalize(&host).ctx(format!("program {}", host.display()))?;
    if !util::is_executable(&host) {
        return Err(format!("program {}: not an executable file", host.display()));
    }
    let at = guest_path(&host);
    if !base.contains(&at) {
        payload.files.push((at.clone(), host));
    }
    Ok(format!("/{at}"))
}

/// `--copy SRC[:DST]`: a file (a dynamically linked program brings its
/// libraries) or a directory, recursively; DST defaults to SRC's absolute
/// path. Paths the base image has are not replaced.
fn add_copy(spec: &str, base: &Manifest, payload: &mut Payload) -> Result<()> {
    let (src, dst) = match spec.split_once(':') {
        Some((s, d)) => (s, Some(d)),
        None => (spec, None),
    };
    let src = std::fs::canonicalize(src).ctx(format!("--copy {spec}"))?;
    let dst = match dst.filter(|d| !d.is_empty()) {
        Some(d) if !d.starts_with('/') => return Err(format!("--copy {spec}: the guest path must be absolute")),
        Some(d) => d.trim_end_matches('/').to_owned(),
        None => src.to_string_lossy().into_owned(),
    };
    copy_tree(&src, dst.trim_start_matches('/'), base, payload)
}

fn copy_tree(src: &Path, at: &str, base: &Manifest, payload: &mut Payload) -> Result<()> {
    if base.contains(at) && !src.is_dir() {
        return Err(format!("--copy: the guest image already has /{at}"));
    }
    if src.is_dir() {
        payload.dirs.push(at.to_owned());
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(src).ctx(format!("reading {}", src.display()))?.flatten().map(|e| e.path()).collect();
        entries.sort();
        for e in entries {
            let name = e.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            // Follows links, like the copy of a file does.
            copy_tree(&e, &format!("{at}/{name}"), base, payload)?;
        }
    } else if is_dynamic_elf(src) {
        payload.files.push((at.to_owned(), src.to_path_buf()));
    } else {
        payload.data.push((at.to_owned(), src.to_path_buf()));
    }
    Ok(())
}

/// True for an ELF file with a program interpreter (it needs libraries).
fn is_dynamic_elf(p: &Path) -> bool {
    let mut head = [0u8; 4];
    let is_elf = std::fs::File::open(p).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)).is_ok()
        && &head == b"\x7fELF";
    is_elf && !host_tools::is_static_elf(p)
}

/// The host's working directory, made (empty) in the guest, unless the
/// image has it already.
fn guest_cwd(base: &Manifest, payload: &mut Payload) -> Option<String> {
    let cwd = std::env::current_dir().ok()?;
    let at = guest_path(&cwd);
    if !at.is_empty() && !base.contains(&at) {
        payload.dirs.push(at.clone());
    }
    Some(format!("/{at}"))
}

/// What the program finds in its environment besides the guest's own
/// (`RVERBS_REQUIRE_DEVICE=1`, `RUST_BACKTRACE=1`, `PATH`, `HOME`): the
/// [`FORWARDED`] variables that are set here, the names in
/// `RVERBS_VM_ENV` (space-separated) and the `--env` ones.
pub fn environment(opts: &[String]) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: String| {
        out.retain(|(n, _)| n != k);
        out.push((k.to_owned(), v));
    };
    let listed = std::env::var("RVERBS_VM_ENV").unwrap_or_default();
    let names = FORWARDED.iter().map(|s| s.to_string()).chain(listed.split_whitespace().map(str::to_owned));
    for spec in names.chain(opts.iter().cloned()) {
        let (name, value) = match spec.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (spec.clone(), None),
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!("--env {spec}: not a variable name"));
        }
        if let Some(v) = value.or_else(|| std::env::var(&name).ok()) {
            set(&name, v);
        }
    }
    set("RVERBS_REQUIRE_DEVICE", "1".into());
    Ok(out)
}

/// The program's output: stdout lines on stdout, stderr lines on stderr,
/// the rest (setup, kernel) only when verbose, on stderr. `prefix` tags
/// each line (two hosts).
fn show_line(verbose: bool, prefix: &str, kind: LineKind, line: &str) {
    match kind {
        LineKind::Program => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{prefix}{line}");
            let _ = out.flush();
        }
        LineKind::Stderr => eprintln!("{prefix}{line}"),
        LineKind::Kernel if verbose => eprintln!("{prefix}kernel: {line}"),
        LineKind::Kernel | LineKind::Marker => {}
        _ if verbose => eprintln!("{prefix}{line}"),
        _ => {}
    }
}

fn one_host(g: &Guest, prog: &Program, mut payload: Payload, keep: bool, siw: bool) -> Result<i32> {
    payload.script = guest::run_payload(prog);
    if siw {
        payload.script = guest::with_siw(&payload.script);
    }
    let verbose = g.knobs.verbose;
    let out = runner::run(g, &payload, keep, &mut |kind, line| show_line(verbose, "", kind, line))?;
    Ok(verdict(&out, "", verbose))
}

/// The exit code for one guest, after saying what went wrong (if anything).
fn verdict(out: &Outcome, who: &str, verbose: bool) -> i32 {
    let took = format!("{} on {}, console {}", secs(out.boot.elapsed), out.accel.describe(), out.log.display());
    if let Some(problem) = out.problem() {
        if !verbose {
            eprintln!("---- {who}guest console tail:");
            out.tail(30).iter().for_each(|l| eprintln!("{l}"));
            eprintln!("---- {who}kernel console tail:");
            out.kernel_tail(30).iter().for_each(|l| eprintln!("{l}"));
        }
        eprintln!("rverbs-vm: {who}{problem}; {took}");
        return if out.boot.timed_out { EXIT_TIMEOUT } else { EXIT_HARNESS };
    }
    let code = out.report.runs.first().and_then(|r| r.exit).unwrap_or(EXIT_HARNESS);
    note(format!("{who}exit {code}; Linux {}, {took}", out.report.release.as_deref().unwrap_or("?")));
    code
}

/// Both guests run the program; each gets `RVERBS_VM_HOST` (`A` or `B`),
/// `RVERBS_VM_SELF` and `RVERBS_VM_PEER` (IPv4 addresses). The exit code is
/// A's when it failed, else B's.
fn two_hosts(g: &Guest, prog: &Program, payload: &Payload) -> Result<i32> {
    let wire = Wire::new()?;
    let payloads: Vec<Payload> = (0..2)
        .map(|i| {
            let mut p = prog.clone();
            let me = pair::host_ip(i);
            p.env.push(("RVERBS_VM_HOST".into(), pair::HOSTS[i].into()));
            p.env.push(("RVERBS_VM_SELF".into(), me.clone()));
            p.env.push(("RVERBS_VM_PEER".into(), pair::host_ip(1 - i)));
            Payload {
                script: guest::net_payload(pair::NETDEV, &format!("{me}/24"), &p.script()),
                label: ["run-a", "run-b"][i],
                qemu_args: wire.qemu_args(i),
                ..payload.clone()
            }
        })
        .collect();
    let verbose = g.knobs.verbose;
    let show = move |host: &str, kind: LineKind, line: &str| show_line(verbose, &format!("[{host}] "), kind, line);
    let outs = pair::boot(g, &wire, [&payloads[0], &payloads[1]], &show);
    let mut codes = Vec::new();
    for (i, o) in outs.iter().enumerate() {
        let who = format!("host {}: ", pair::HOSTS[i]);
        codes.push(match o {
            Ok(o) => verdict(o, &who, verbose),
            Err(e) => {
                eprintln!("rverbs-vm: {who}{e}");
                EXIT_HARNESS
            }
        });
    }
    Ok(codes.iter().copied().find(|&c| c != 0).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_forwards_and_sets() {
        let env = environment(&["A_B=1".into(), "PATH".into(), "X=a b".into(), "A_B=2".into()]).unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("A_B"), Some("2"));
        assert_eq!(get("X"), Some("a b"));
        assert!(get("PATH").is_some());
        assert_eq!(get("RVERBS_REQUIRE_DEVICE"), Some("1"));
        assert!(environment(&["1X".into()]).is_err());
        assert!(environment(&["A-B".into()]).is_err());
    }

    #[test]
    fn kernel_choices() {
        let a = RunArgs { kernel: Some("6.1".into()), ..Default::default() };
        assert_eq!(a.kernel_choice().unwrap(), KernelChoice::Series("6.1".into()));
        let a = RunArgs { kernel: Some("5.4".into()), ..Default::default() };
        assert!(a.kernel_choice().is_err());
        let a = RunArgs { kernel_image: Some("/k".into()), ..Default::default() };
        assert!(a.kernel_choice().is_err());
        let a = RunArgs { kernel_image: Some("/k".into()), modules_dir: Some("/m".into()), ..Default::default() };
        assert_eq!(a.kernel_choice().unwrap(), KernelChoice::Paths { image: "/k".into(), modules: "/m".into() });
    }

    #[test]
    fn copies_keep_the_base() {
        let mut base = Manifest::default();
        base.dir("usr/bin");
        base.bytes("usr/bin/sh", 0o755, "x");
        let mut p = Payload::default();
        assert_eq!(place_program("sh", &base, &mut p).unwrap(), "sh");
        assert!(p.files.is_empty());
        let me = std::env::current_exe().unwrap();
        let at = place_program(&me.to_string_lossy(), &base, &mut p).unwrap();
        assert_eq!(at, format!("/{}", guest_path(&std::fs::canonicalize(&me).unwrap())));
        assert_eq!(p.files.len(), 1);
        assert!(add_copy("/nonexistent-rverbs-vm:/x", &base, &mut p).is_err());
        assert!(add_copy(&format!("{}:rel", me.display()), &base, &mut p).is_err());
        add_copy(&format!("{}:/opt/t", me.display()), &base, &mut p).unwrap();
        assert_eq!(p.files.last().unwrap().0, "opt/t");
    }
}
