//! One guest boot from start to end: initrd = cached base + this run's
//! payload, boot under QEMU, parse the console, keep a log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::console::{GuestReport, LineKind};
use crate::guest::{MARK, PAYLOAD};
use crate::host_tools::HostTools;
use crate::initramfs::{self, Manifest};
use crate::kernel::Kernel;
use crate::qemu::{self, Accel, BootEnd, BootSpec, Stream};
use crate::util::{self, note, Context, Result};

/// Default wall-clock limit of one boot (`RVERBS_VM_TIMEOUT`, seconds).
pub const DEFAULT_TIMEOUT_S: u64 = 20 * 60;

/// How long a KVM guest may take to reach `/init` before KVM is given up.
const KVM_GRACE: Duration = Duration::from_secs(60);

/// What to put in the guest besides the base image.
pub struct Payload {
    /// (guest path, host file) of the project's binaries.
    pub files: Vec<(String, PathBuf)>,
    /// The payload script `/init` sources (see [`crate::guest`]).
    pub script: String,
    /// A short name for file names and logs (`test`, `vm`, `demo`,
    /// `two-hosts-a`...).
    pub label: &'static str,
    /// Extra QEMU arguments (the two-host network).
    pub qemu_args: Vec<String>,
}

/// A finished boot.
pub struct Outcome {
    pub report: GuestReport,
    pub boot: BootEnd,
    pub accel: Accel,
    pub timeout: Duration,
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
pub struct Knobs {
    pub timeout: Duration,
    pub memory: String,
    pub verbose: bool,
}

impl Knobs {
    /// `RVERBS_VM_TIMEOUT`, `RVERBS_VM_MEMORY`, `RVERBS_VM_VERBOSE`.
    pub fn from_env() -> Result<Knobs> {
        Ok(Knobs {
            timeout: Duration::from_secs(util::env_u64("RVERBS_VM_TIMEOUT", DEFAULT_TIMEOUT_S)?),
            memory: std::env::var("RVERBS_VM_MEMORY")
                .ok()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| "2G".into()),
            verbose: util::env_flag("RVERBS_VM_VERBOSE"),
        })
    }
}

/// What one boot needs besides its payload.
pub struct Guest<'a> {
    pub kernel: &'a Kernel,
    pub tools: &'a HostTools,
    /// `target/vm`.
    pub vm_dir: &'a Path,
    pub knobs: &'a Knobs,
}

/// Builds the initrd, boots the guest, and hands each console line (with
/// what it was) to `show`. Falls back to TCG once if a KVM guest never
/// reaches `/init`. Keeps the initrd only with `keep`.
pub fn run(g: &Guest, payload: &Payload, keep: bool, show: &mut dyn FnMut(LineKind, &str)) -> Result<Outcome> {
    let initrd = build_initrd(g.kernel, g.tools, g.vm_dir, payload)?;
    let accel = qemu::accel(&g.tools.qemu);
    let mut outcome = boot_once(g, payload, &initrd, &accel, show)?;
    let kvm_failed = outcome.report.release.is_none() && !outcome.boot.timed_out;
    if matches!(accel, Accel::Kvm(_)) && kvm_failed {
        // KVM passed the probe but did not get the guest to /init.
        let why = exit_text(&outcome.boot);
        note(format!("KVM guest did not start ({why}); retrying under TCG"));
        qemu::demote_to_tcg();
        outcome = boot_once(g, payload, &initrd, &Accel::Tcg, show)?;
    }
    outcome.log = save_log(g.vm_dir, g.kernel, payload.label, &outcome.boot.console)?;
    if keep {
        note(format!("kept {}", initrd.display()));
    } else {
        let _ = std::fs::remove_file(&initrd);
    }
    Ok(outcome)
}

/// base archive (cached) + payload -> `target/vm/run/<release>-<label>-<pid>.initrd`.
fn build_initrd(k: &Kernel, tools: &HostTools, vm_dir: &Path, payload: &Payload) -> Result<PathBuf> {
    let (base, base_manifest) = initramfs::base_archive(k, tools, vm_dir)?;
    let mut m = Manifest::default();
    for (at, host) in &payload.files {
        m.program_over(at, host, &base_manifest)?;
    }
    m.bytes(PAYLOAD, 0o644, payload.script.clone());
    let dir = vm_dir.join("run");
    std::fs::create_dir_all(&dir).ctx(format!("creating {}", dir.display()))?;
    remove_stale_initrds(&dir);
    let initrd = dir.join(format!("{}-{}-{}.initrd", k.release, payload.label, std::process::id()));
    initramfs::concat_initrd(&base, &mut m, &initrd)?;
    Ok(initrd)
}

/// Removes initrds left by runs that were killed (their pid is gone).
fn remove_stale_initrds(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.strip_suffix(".initrd").and_then(|n| n.rsplit('-').next()).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn boot_once(
    g: &Guest,
    payload: &Payload,
    initrd: &Path,
    accel: &Accel,
    show: &mut dyn FnMut(LineKind, &str),
) -> Result<Outcome> {
    let spec = BootSpec {
        qemu: g.tools.qemu.clone(),
        kernel: g.kernel.vmlinuz.clone(),
        initrd: initrd.to_path_buf(),
        cmdline: String::new(),
        memory: g.knobs.memory.clone(),
        extra_args: payload.qemu_args.clone(),
        accel: accel.clone(),
        kernel_log: Some(log_path(g.vm_dir, g.kernel, payload.label, "kernel.log")?),
    };
    let mut report = GuestReport::default();
    // Under KVM /init starts within seconds; waiting longer means KVM is
    // not working here, and the caller falls back to TCG.
    let started = |l: &str| l.contains(MARK);
    let alive: Option<qemu::Alive> = matches!(accel, Accel::Kvm(_)).then_some((KVM_GRACE, &started));
    let boot = qemu::boot(&spec, g.knobs.timeout, alive, &mut |stream, line| {
        let kind = match stream {
            Stream::Guest => report.push(line),
            Stream::Kernel => LineKind::Kernel,
        };
        show(kind, line);
    })?;
    Ok(Outcome { report, boot, accel: accel.clone(), timeout: g.knobs.timeout, log: PathBuf::new() })
}

/// `target/vm/logs/<series>-<label>.<suffix>` (directory created).
fn log_path(vm_dir: &Path, k: &Kernel, label: &str, suffix: &str) -> Result<PathBuf> {
    let dir = vm_dir.join("logs");
    std::fs::create_dir_all(&dir).ctx(format!("creating {}", dir.display()))?;
    Ok(dir.join(format!("{}-{label}.{suffix}", k.series)))
}

/// Writes the guest console to `target/vm/logs/<series>-<label>.log` (the
/// kernel's is next to it, `.kernel.log`, written by QEMU itself).
fn save_log(vm_dir: &Path, k: &Kernel, label: &str, console: &[String]) -> Result<PathBuf> {
    let path = log_path(vm_dir, k, label, "log")?;
    let mut text = console.join("\n");
    text.push('\n');
    std::fs::write(&path, text).ctx(format!("writing {}", path.display()))?;
    Ok(path)
}
