//! Booting a guest under QEMU: choosing KVM or TCG, streaming the serial
//! console line by line, and enforcing a wall-clock limit.
//!
//! [`Vm`] is one running QEMU; two-VM runs start two of them with extra
//! arguments (`-netdev stream,...`) and read both consoles.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::util::{self, note, Context, Result};

/// How QEMU runs the guest's CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accel {
    /// KVM with this `-cpu` model.
    Kvm(String),
    /// Plain emulation (`-cpu max`).
    Tcg,
}

impl Accel {
    /// QEMU arguments selecting the accelerator and CPU model.
    fn args(&self) -> Vec<String> {
        let (accel, cpu) = match self {
            Accel::Kvm(cpu) => ("kvm", cpu.as_str()),
            Accel::Tcg => ("tcg", "max"),
        };
        vec!["-accel".into(), accel.into(), "-cpu".into(), cpu.into()]
    }

    /// `kvm (-cpu X)` or `tcg`.
    pub fn describe(&self) -> String {
        match self {
            Accel::Kvm(cpu) => format!("kvm (-cpu {cpu})"),
            Accel::Tcg => "tcg".into(),
        }
    }
}

static ACCEL: Mutex<Option<Accel>> = Mutex::new(None);

/// The accelerator for this run: `RVERBS_VM_ACCEL=kvm|tcg` forces one;
/// otherwise KVM when a probe guest starts, else TCG. Probed once per
/// process; [`demote_to_tcg`] overrides it.
pub fn accel(qemu: &Path) -> Accel {
    let mut a = ACCEL.lock().unwrap_or_else(|e| e.into_inner());
    a.get_or_insert_with(|| {
        let chosen = choose_accel(qemu);
        note(format!("accelerator: {}", chosen.describe()));
        chosen
    })
    .clone()
}

/// True when `RVERBS_VM_ACCEL` names the accelerator.
pub fn accel_forced() -> bool {
    std::env::var("RVERBS_VM_ACCEL").is_ok_and(|v| matches!(v.trim(), "kvm" | "tcg"))
}

/// Switches the rest of the run to TCG (after a KVM guest failed to come up).
pub fn demote_to_tcg() {
    *ACCEL.lock().unwrap_or_else(|e| e.into_inner()) = Some(Accel::Tcg);
}

fn choose_accel(qemu: &Path) -> Accel {
    match std::env::var("RVERBS_VM_ACCEL").as_deref().map(str::trim) {
        Ok("tcg") => return Accel::Tcg,
        Ok("kvm") => return Accel::Kvm("max".into()),
        _ => {}
    }
    let kvm_usable = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok();
    if !kvm_usable {
        return Accel::Tcg;
    }
    // On some nested hosts KVM refuses `-cpu max` (`failed to set MSR
    // 0x10a`) and QEMU aborts; dropping arch-capabilities gets past that
    // but the guest then hangs, so only plain `max` is tried.
    if probe_kvm(qemu, "max") {
        Accel::Kvm("max".into())
    } else {
        Accel::Tcg
    }
}

/// Starts a paused KVM guest with `-cpu cpu` and quits it from the
/// monitor: true when QEMU exits cleanly (it aborts when KVM refuses).
fn probe_kvm(qemu: &Path, cpu: &str) -> bool {
    let child = Command::new(qemu)
        .args(["-accel", "kvm", "-machine", "q35", "-cpu", cpu, "-m", "128M"])
        .args(["-nodefaults", "-display", "none", "-S", "-monitor", "stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else { return false };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"quit\n");
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// What to boot.
#[derive(Debug, Clone)]
pub struct BootSpec {
    pub qemu: PathBuf,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// Extra kernel command-line words (after the console/panic settings).
    pub cmdline: String,
    pub memory: String,
    /// vCPUs (`-smp`).
    pub cpus: u32,
    /// Extra QEMU arguments (networking for two-VM runs).
    pub extra_args: Vec<String>,
    pub accel: Accel,
    /// Where the kernel console (ttyS0) goes. When set, the guest's own
    /// console is ttyS1 (`/init` switches to it) and only that reaches
    /// stdout, so kernel messages never break a line of test output. When
    /// `None`, both share ttyS0 on stdout.
    pub kernel_log: Option<PathBuf>,
    /// With `kernel_log`: a third port, ttyS2, written to this file and
    /// read back as [`Stream::Stderr`] (a program's stderr, kept apart
    /// from its stdout on ttyS1).
    pub stderr_log: Option<PathBuf>,
}

impl BootSpec {
    /// The kernel command line. `no_timer_check`: under TCG on a busy
    /// host the kernel's check that the 8254 timer ticks through the
    /// IO-APIC can miss its ticks and panic at boot ("IO-APIC + timer
    /// doesn't work"); a virtual machine's timer needs no such check.
    fn append(&self) -> String {
        let mut a = String::from("console=ttyS0 quiet panic=-1 no_timer_check");
        if self.kernel_log.is_some() {
            a.push_str(" rverbs.console=ttyS1");
        }
        if !self.cmdline.is_empty() {
            a.push(' ');
            a.push_str(&self.cmdline);
        }
        a
    }

    /// The full QEMU command.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.qemu);
        c.args(["-machine", "q35"])
            .args(self.accel.args())
            .args(["-m", &self.memory, "-smp", &self.cpus.to_string(), "-nographic", "-no-reboot", "-nic", "none"])
            .arg("-kernel")
            .arg(&self.kernel)
            .arg("-initrd")
            .arg(&self.initrd)
            .arg("-append")
            .arg(self.append());
        if let Some(log) = &self.kernel_log {
            c.args(["-monitor", "none", "-serial"]).arg(format!("file:{}", log.display())).args(["-serial", "stdio"]);
            if let Some(err) = &self.stderr_log {
                c.arg("-serial").arg(format!("file:{}", err.display()));
            }
        }
        c.args(&self.extra_args);
        c
    }
}

/// Which serial port a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// ttyS1 (or the only console): `/init` and the programs it runs.
    Guest,
    /// ttyS0: the kernel's console, tailed from its log file.
    Kernel,
    /// ttyS2 (with [`BootSpec::stderr_log`]): a program's stderr.
    Stderr,
}

/// One console event.
pub enum Event {
    Line(Stream, String),
    /// QEMU closed its stdout (it exited).
    Eof,
    /// The deadline passed.
    Timeout,
}

/// What the reader threads send.
enum Msg {
    Line(Stream, String),
    StdoutClosed,
}

/// A running QEMU whose serial consoles are read line by line.
pub struct Vm {
    child: Child,
    lines: Receiver<Msg>,
    stderr: Option<JoinHandle<String>>,
    tailers: Vec<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Vm {
    /// Starts QEMU (stdin closed, guest console on stdout, kernel console
    /// into `spec.kernel_log` when set).
    pub fn start(spec: &BootSpec) -> Result<Vm> {
        let mut cmd = spec.command();
        if util::env_flag("RVERBS_VM_VERBOSE") {
            note(format!("running {}", util::describe(&cmd)));
        }
        let files: Vec<(Stream, PathBuf)> = [(Stream::Kernel, &spec.kernel_log), (Stream::Stderr, &spec.stderr_log)]
            .into_iter()
            .filter_map(|(s, p)| p.clone().map(|p| (s, p)))
            .filter(|(s, _)| *s == Stream::Kernel || spec.kernel_log.is_some())
            .collect();
        for (_, log) in &files {
            // QEMU creates it; a stale one must not be read meanwhile.
            let _ = std::fs::remove_file(log);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .ctx(format!("starting {}", spec.qemu.display()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        let tailers = files
            .into_iter()
            .map(|(stream, log)| {
                let stop = Arc::new(AtomicBool::new(false));
                let (tx, stop2) = (tx.clone(), stop.clone());
                (stop, thread::spawn(move || tail_file(&log, stream, &tx, &stop2)))
            })
            .collect();
        thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n').map_while(|l| l.ok()) {
                if tx.send(Msg::Line(Stream::Guest, clean(&line))).is_err() {
                    return;
                }
            }
            let _ = tx.send(Msg::StdoutClosed);
        });
        let stderr = thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Ok(Vm { child, lines, stderr: Some(stderr), tailers })
    }

    /// The next console line, or end of output, or the deadline.
    pub fn next(&mut self, deadline: Instant) -> Event {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(Msg::Line(s, l)) => Event::Line(s, l),
            Ok(Msg::StdoutClosed) | Err(RecvTimeoutError::Disconnected) => Event::Eof,
            Err(RecvTimeoutError::Timeout) => Event::Timeout,
        }
    }

    /// Kills QEMU (after a timeout).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Waits for QEMU to exit; returns its status, its stderr, and the
    /// kernel-console and program-stderr lines not yet returned by
    /// [`Vm::next`].
    pub fn finish(mut self) -> (Option<ExitStatus>, String, Vec<(Stream, String)>) {
        let status = self.child.wait().ok();
        for (stop, handle) in self.tailers.drain(..) {
            stop.store(true, Ordering::Release);
            let _ = handle.join();
        }
        let rest = self
            .lines
            .try_iter()
            .filter_map(|m| match m {
                Msg::Line(s @ (Stream::Kernel | Stream::Stderr), l) => Some((s, l)),
                _ => None,
            })
            .collect();
        let stderr = self.stderr.take().and_then(|h| h.join().ok()).unwrap_or_default();
        (status, stderr, rest)
    }
}

/// A console line as text, without the tty's `\r` and without terminal
/// escape sequences (SeaBIOS clears the screen).
fn clean(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.trim_end_matches(['\r', '\n']).chars();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Skips the rest of an escape sequence: `ESC [ params final` or `ESC x`.
fn skip_escape(chars: &mut std::str::Chars) {
    if chars.next() == Some('[') {
        for c in chars.by_ref() {
            if ('@'..='~').contains(&c) {
                break;
            }
        }
    }
}

/// Follows `path` (written by QEMU) and sends its lines as `stream` until
/// `stop` is set, then sends what is left.
fn tail_file(path: &Path, stream: Stream, tx: &Sender<Msg>, stop: &AtomicBool) {
    let mut file: Option<File> = None;
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if file.is_none() {
            file = File::open(path).ok();
        }
        let mut got = false;
        while let Some(Ok(n @ 1..)) = file.as_mut().map(|f| f.read(&mut buf)) {
            pending.extend_from_slice(&buf[..n]);
            got = true;
        }
        while let Some(i) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=i).collect();
            let _ = tx.send(Msg::Line(stream, clean(&line)));
        }
        if stopping && !got {
            if !pending.is_empty() {
                let _ = tx.send(Msg::Line(stream, clean(&pending)));
            }
            return;
        }
        if !got {
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// How a boot ended.
#[derive(Debug)]
pub struct BootEnd {
    /// Every line of the guest console (ttyS1).
    pub console: Vec<String>,
    /// Every line of the kernel console (ttyS0), when it was separate.
    pub kernel: Vec<String>,
    /// Every line of the program's stderr (ttyS2), when it was separate.
    pub program_stderr: Vec<String>,
    pub timed_out: bool,
    /// Killed because the guest showed no sign of life in time.
    pub stalled: bool,
    pub status: Option<ExitStatus>,
    pub stderr: String,
    pub elapsed: Duration,
}

/// A liveness check: the grace period and the guest line that proves life.
pub type Alive<'a> = (Duration, &'a dyn Fn(&str) -> bool);

/// Boots `spec`, handing each console line to `on_line` as it arrives,
/// and kills QEMU after `timeout`. With `alive = Some((grace, seen))`, QEMU
/// is also killed (`stalled`) when no guest line satisfies `seen` within
/// `grace`: a KVM guest that hangs is caught early that way.
pub fn boot(
    spec: &BootSpec,
    timeout: Duration,
    alive: Option<Alive<'_>>,
    on_line: &mut dyn FnMut(Stream, &str),
) -> Result<BootEnd> {
    let start = Instant::now();
    let deadline = start + timeout;
    let mut alive_by = alive.map(|(grace, _)| start + grace.min(timeout));
    let mut vm = Vm::start(spec)?;
    let mut end = BootEnd {
        console: Vec::new(),
        kernel: Vec::new(),
        program_stderr: Vec::new(),
        timed_out: false,
        stalled: false,
        status: None,
        stderr: String::new(),
        elapsed: Duration::ZERO,
    };
    loop {
        match vm.next(alive_by.unwrap_or(deadline)) {
            Event::Line(Stream::Guest, l) => {
                if alive.is_some_and(|(_, seen)| seen(&l)) {
                    alive_by = None;
                }
                on_line(Stream::Guest, &l);
                end.console.push(l);
            }
            Event::Line(s, l) => end.other_line(s, l, on_line),
            Event::Eof => break,
            Event::Timeout => {
                end.stalled = alive_by.is_some();
                end.timed_out = !end.stalled;
                vm.kill();
                break;
            }
        }
    }
    let rest;
    (end.status, end.stderr, rest) = vm.finish();
    for (s, l) in rest {
        end.other_line(s, l, on_line);
    }
    end.elapsed = start.elapsed();
    Ok(end)
}

impl BootEnd {
    /// Records and hands on a line of the kernel console or the program's stderr.
    fn other_line(&mut self, s: Stream, l: String, on_line: &mut dyn FnMut(Stream, &str)) {
        on_line(s, &l);
        match s {
            Stream::Stderr => self.program_stderr.push(l),
            _ => self.kernel.push(l),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn cleans_console_lines() {
        assert_eq!(clean(b"\x1bc\x1b[?7l\x1b[2JSeaBIOS (x)\r\n"), "SeaBIOS (x)");
        assert_eq!(clean(b"test a ... ok\r"), "test a ... ok");
    }
}
