//! One guest boot from start to end: initrd = cached base + this run's
//! payload, boot under QEMU, parse the console, keep a log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::console::{GuestReport, LineKind};
use crate::guest::{MARK, NONCE_FILE, PAYLOAD};
use crate::host_tools::HostTools;
use crate::initramfs::{self, Manifest};
use crate::kernel::Kernel;
use crate::qemu::{self, Accel, BootEnd, BootSpec, Stream};
use crate::util::{self, note, Context, Dirs, Result};

/// Default wall-clock limit of one boot (`RVERBS_VM_TIMEOUT`, seconds).
pub const DEFAULT_TIMEOUT_S: u64 = 20 * 60;

/// How long a KVM guest may take to reach `/init` before KVM is given up.
const KVM_GRACE: Duration = Duration::from_secs(60);

/// What to put in the guest besides the base image.
#[derive(Debug, Clone, Default)]
pub struct Payload {
    /// (guest path, host file) of programs: each is copied with the shared
    /// libraries it loads that the base lacks.
    pub files: Vec<(String, PathBuf)>,
    /// (guest path, host file) copied as they are.
    pub data: Vec<(String, PathBuf)>,
    /// Guest directories to create (empty unless something is copied in).
    pub dirs: Vec<String>,
    /// The payload script `/init` sources (see [`crate::guest`]).
    pub script: String,
    /// A short name for file names and logs (`test`, `vm`, `demo`,
    /// `two-hosts-a`, `run`...).
    pub label: &'static str,
    /// Extra QEMU arguments (the two-host network).
    pub qemu_args: Vec<String>,
    /// Give the guest a third serial port, `/dev/ttyS2`, whose lines come
    /// back as [`LineKind::Stderr`] (the script sends a program's stderr
    /// there).
    pub separate_stderr: bool,
}

/// A finished boot.
pub struct Outcome {
    pub report: GuestReport,
    pub boot: BootEnd,
    pub accel: Accel,
    pub timeout: Duration,
    /// The guest's memory (`-m`), for the unpacking error.
    pub memory: String,
    /// The full console, saved.
    pub log: PathBuf,
}

impl Outcome {
    /// The last `n` lines of the guest console.
    pub fn tail(&self, n: usize) -> &[String] {
        let c = &self.boot.console;
        &c[c.len().saturating_sub(n)..]
    }

    /// The last `n` lines of the kernel console.
    pub fn kernel_tail(&self, n: usize) -> &[String] {
        let c = &self.boot.kernel;
        &c[c.len().saturating_sub(n)..]
    }

    /// Why the boot as a whole went wrong (not counting failing tests),
    /// if it did.
    pub fn problem(&self) -> Option<String> {
        let r = &self.report;
        if let Some(l) = self.boot.kernel.iter().find(|l| l.contains("Initramfs unpacking failed")) {
            // The guest then runs with part of its files: every program
            // may fail to load. The usual cause is a payload larger than
            // the guest's RAM can hold twice (packed and unpacked).
            return Some(format!(
                "the kernel could not unpack the initramfs ({}): give the guest more memory (RVERBS_VM_MEMORY, now {})",
                l.trim(),
                self.memory
            ));
        }
        if self.boot.stalled {
            Some("the guest showed no sign of life (stalled)".into())
        } else if self.boot.timed_out {
            Some(format!("timeout after {} s (RVERBS_VM_TIMEOUT)", self.timeout.as_secs()))
        } else if let Some(e) = &r.setup_error {
            Some(format!("guest setup failed: {e}"))
        } else if r.release.is_none() {
            Some(format!("the guest never ran /init (QEMU: {})", exit_text(&self.boot)))
        } else if !r.ready {
            Some("the guest stopped before rxe0 was up".into())
        } else if !r.done {
            Some(format!("the guest stopped before finishing (QEMU: {})", exit_text(&self.boot)))
        } else {
            None
        }
    }
}

fn exit_text(b: &BootEnd) -> String {
    let status = b.status.map_or("killed".into(), |s| s.to_string());
    let err = b.stderr.trim();
    if err.is_empty() {
        status
    } else {
        format!("{status}; {}", err.lines().last().unwrap_or(err))
    }
}

/// Boot settings read from the environment.
#[derive(Debug, Clone)]
pub struct Knobs {
    pub timeout: Duration,
    pub memory: String,
    /// vCPUs per guest.
    pub cpus: u32,
    pub verbose: bool,
}

/// Guest memory unless `RVERBS_VM_MEMORY` says otherwise. The initramfs
/// holds every test binary and example and is in RAM twice while the
/// kernel unpacks it: with full debug info (25-45 MB a binary, ~700 MB in
/// all for 22 test binaries) 2G and even 4G were not enough (the kernel's
/// "Initramfs unpacking failed: write error", then every program missing
/// libraries). The workspace's debug builds now carry line tables only
/// (about half the size), and 4G leaves room to grow.
pub const DEFAULT_MEMORY: &str = "4G";

impl Knobs {
    /// `RVERBS_VM_TIMEOUT`, `RVERBS_VM_MEMORY`, `RVERBS_VM_CPUS`, `RVERBS_VM_VERBOSE`.
    pub fn from_env() -> Result<Knobs> {
        let cpus = util::env_u64("RVERBS_VM_CPUS", 1)?;
        Ok(Knobs {
            timeout: Duration::from_secs(util::env_u64("RVERBS_VM_TIMEOUT", DEFAULT_TIMEOUT_S)?),
            memory: std::env::var("RVERBS_VM_MEMORY")
                .ok()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_MEMORY.into()),
            cpus: u32::try_from(cpus)
                .ok()
                .filter(|&c| c > 0)
                .ok_or(format!("RVERBS_VM_CPUS={cpus}: not a vCPU count"))?,
            verbose: util::env_flag("RVERBS_VM_VERBOSE"),
        })
    }
}

/// What one boot needs besides its payload.
pub struct Guest<'a> {
    pub kernel: &'a Kernel,
    pub tools: &'a HostTools,
    /// The cache (kernels, initramfs bases) and where logs and initrds go.
    pub dirs: &'a Dirs,
    pub knobs: &'a Knobs,
}

/// Builds the initrd, boots the guest, and hands each console line (with
/// what it was) to `show`. Falls back to TCG once if a KVM guest never
/// reaches `/init`. Keeps the initrd only with `keep`.
pub fn run(g: &Guest, payload: &Payload, keep: bool, show: &mut dyn FnMut(LineKind, &str)) -> Result<Outcome> {
    let (initrd, nonce) = build_initrd(g, payload)?;
    let verdict = kvm_verdict_file(g);
    let accel = if !qemu::accel_forced() && verdict.is_file() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            note(format!(
            "accelerator: tcg (KVM did not boot this kernel on this host before, {}; RVERBS_VM_ACCEL=kvm tries again)",
            verdict.display()
        ))
        });
        Accel::Tcg
    } else {
        qemu::accel(&g.tools.qemu)
    };
    let mut outcome = boot_once(g, payload, &initrd, &nonce, &accel, show)?;
    let kvm_failed = outcome.report.release.is_none() && !outcome.boot.timed_out;
    if matches!(accel, Accel::Kvm(_)) && kvm_failed {
        // KVM passed the probe but did not get the guest to /init.
        let why = exit_text(&outcome.boot);
        note(format!("KVM guest did not start ({why}); retrying under TCG"));
        qemu::demote_to_tcg();
        outcome = boot_once(g, payload, &initrd, &nonce, &Accel::Tcg, show)?;
        if outcome.report.release.is_some() {
            // TCG got there, so KVM was the problem: later processes (a cargo
            // runner starts one per test binary) skip the failing attempt,
            // which can cost the whole grace period.
            let _ = std::fs::write(&verdict, format!("{why}\n"));
        }
    }
    outcome.log = save_log(g.dirs, g.kernel, payload.label, &outcome.boot.console)?;
    if keep {
        note(format!("kept {}", initrd.display()));
    } else {
        let _ = std::fs::remove_file(&initrd);
    }
    Ok(outcome)
}

/// `cache/kvm-failed/<key>`: present when a KVM guest of this kernel did
/// not reach `/init` with this host kernel and this QEMU.
fn kvm_verdict_file(g: &Guest) -> PathBuf {
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let qemu = std::fs::metadata(&g.tools.qemu).ok().and_then(|m| m.modified().ok());
    let key = util::Fnv::new()
        .add(host.trim())
        .add(g.tools.qemu.as_os_str().as_encoded_bytes())
        .add(format!("{qemu:?}"))
        .add(&g.kernel.release)
        .hex();
    let dir = g.dirs.cache.join("kvm-failed");
    let _ = std::fs::create_dir_all(&dir);
    dir.join(format!("{}-{key}", g.kernel.release))
}

/// base archive (cached) + payload -> `work/run/<release>-<label>-<pid>.initrd`,
/// and the boot's marker nonce it holds.
fn build_initrd(g: &Guest, payload: &Payload) -> Result<(PathBuf, String)> {
    let k = g.kernel;
    let (base, base_manifest) = initramfs::base_archive(k, g.tools, &g.dirs.cache)?;
    let mut m = Manifest::default();
    for (at, host) in &payload.files {
        m.program_over(at, host, &base_manifest)?;
    }
    for (at, host) in &payload.data {
        m.host_file(at, host)?;
    }
    for d in &payload.dirs {
        m.dir(d);
    }
    m.bytes(PAYLOAD, 0o644, payload.script.clone());
    let nonce = util::random_hex()?;
    m.bytes(NONCE_FILE, 0o600, nonce.clone());
    let dir = g.dirs.run()?;
    remove_stale_files(&dir);
    let initrd = run_file(g, payload, "initrd")?;
    initramfs::concat_initrd(&base, &mut m, &initrd)?;
    Ok((initrd, nonce))
}

/// `work/run/<release>-<label>-<pid>.<suffix>`: a file of this run only.
fn run_file(g: &Guest, payload: &Payload, suffix: &str) -> Result<PathBuf> {
    let name = format!("{}-{}-{}.{suffix}", g.kernel.release, payload.label, std::process::id());
    Ok(g.dirs.run()?.join(name))
}

/// Removes initrds and stderr files left by runs that were killed (their
/// pid is gone).
fn remove_stale_files(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let stem = name.strip_suffix(".initrd").or_else(|| name.strip_suffix(".stderr"));
        let pid = stem.and_then(|n| n.rsplit('-').next()).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn boot_once(
    g: &Guest,
    payload: &Payload,
    initrd: &Path,
    nonce: &str,
    accel: &Accel,
    show: &mut dyn FnMut(LineKind, &str),
) -> Result<Outcome> {
    let spec = BootSpec {
        qemu: g.tools.qemu.clone(),
        kernel: g.kernel.vmlinuz.clone(),
        initrd: initrd.to_path_buf(),
        cmdline: String::new(),
        memory: g.knobs.memory.clone(),
        cpus: g.knobs.cpus,
        extra_args: payload.qemu_args.clone(),
        accel: accel.clone(),
        kernel_log: Some(log_path(g.dirs, g.kernel, payload.label, "kernel.log")?),
        stderr_log: payload.separate_stderr.then(|| run_file(g, payload, "stderr")).transpose()?,
    };
    let mut report = GuestReport::with_nonce(nonce);
    // Under KVM /init starts within seconds; waiting longer means KVM is
    // not working here, and the caller falls back to TCG.
    let started = |l: &str| l.contains(MARK);
    let alive: Option<qemu::Alive> = matches!(accel, Accel::Kvm(_)).then_some((KVM_GRACE, &started));
    let boot = qemu::boot(&spec, g.knobs.timeout, alive, &mut |stream, line| {
        let kind = match stream {
            Stream::Guest => report.push(line),
            Stream::Kernel => LineKind::Kernel,
            Stream::Stderr => LineKind::Stderr,
        };
        show(kind, line);
    })?;
    if let Some(f) = &spec.stderr_log {
        let _ = std::fs::remove_file(f);
    }
    Ok(Outcome {
        report,
        boot,
        accel: accel.clone(),
        timeout: g.knobs.timeout,
        memory: g.knobs.memory.clone(),
        log: PathBuf::new(),
    })
}

/// `work/logs/<series>-<label>.<suffix>` (directory created).
fn log_path(dirs: &Dirs, k: &Kernel, label: &str, suffix: &str) -> Result<PathBuf> {
    Ok(dirs.logs()?.join(format!("{}-{label}.{suffix}", k.series)))
}

/// Writes the guest console to `work/logs/<series>-<label>.log` (the
/// kernel's is next to it, `.kernel.log`, written by QEMU itself).
fn save_log(dirs: &Dirs, k: &Kernel, label: &str, console: &[String]) -> Result<PathBuf> {
    let path = log_path(dirs, k, label, "log")?;
    let mut text = console.join("\n");
    text.push('\n');
    std::fs::write(&path, text).ctx(format!("writing {}", path.display()))?;
    Ok(path)
}
