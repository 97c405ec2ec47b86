//! Small helpers shared by every module: errors, progress lines, running
//! commands, paths, a stable hash for cache keys.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Every fallible function of the harness returns a human-readable message.
pub type Result<T, E = String> = std::result::Result<T, E>;

/// Adds "what we were doing" to an error.
pub trait Context<T> {
    /// Maps the error to `"{what}: {error}"`.
    fn ctx(self, what: impl Display) -> Result<T>;
}

impl<T, E: Display> Context<T> for std::result::Result<T, E> {
    fn ctx(self, what: impl Display) -> Result<T> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

static PROGRAM: OnceLock<&'static str> = OnceLock::new();
static QUIET: AtomicBool = AtomicBool::new(false);

/// Names the program in front of every [`note`] (`xtask`, `rverbs-vm`);
/// the first call wins.
pub fn set_program_name(name: &'static str) {
    let _ = PROGRAM.set(name);
}

/// Silences [`note`] (errors are still reported by the caller).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Prints a progress line of the harness on stderr (prefixed so it stands
/// out from cargo's and the guest's output; stdout is left to results and
/// to the output of the program run in the guest).
pub fn note(msg: impl Display) {
    if !QUIET.load(Ordering::Relaxed) {
        eprintln!("{}: {msg}", PROGRAM.get().copied().unwrap_or("rverbs-vm"));
    }
}

/// Renders a command line for messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` with inherited stdio; fails unless it exits 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    let what = describe(cmd);
    let status = cmd.status().ctx(format!("cannot run `{what}`"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{what}` failed ({status})"))
    }
}

/// Runs `cmd` and returns its stdout; stderr is inherited. Fails unless it
/// exits 0.
pub fn capture(cmd: &mut Command) -> Result<String> {
    let what = describe(cmd);
    let out = cmd.stdin(Stdio::null()).stderr(Stdio::inherit()).output().ctx(format!("cannot run `{what}`"))?;
    if !out.status.success() {
        return Err(format!("`{what}` failed ({})", out.status));
    }
    String::from_utf8(out.stdout).ctx(format!("`{what}` printed non-UTF-8"))
}

/// Like [`capture`] but also returns stdout (and stderr) of a failing run
/// instead of an error; `None` when the program cannot be started.
pub fn capture_lenient(cmd: &mut Command) -> Option<(bool, String, String)> {
    let out = cmd.stdin(Stdio::null()).output().ok()?;
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Finds an executable in `$PATH` or, failing that, in the sbin
/// directories (a non-root `$PATH` often lacks them).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"];
    std::env::split_paths(&path).chain(extra.iter().map(PathBuf::from)).map(|d| d.join(name)).find(|p| is_executable(p))
}

/// True for an existing regular file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first of `candidates` that exists.
pub fn first_existing(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// True when the effective user is root (read from /proc, std only).
pub fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .is_some_and(|euid| euid == "0")
}

/// Reads an environment variable as a number, with a default.
pub fn env_u64(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse().ctx(format!("{name}={v:?}")),
        _ => Ok(default),
    }
}

/// True when an environment variable is set to something other than
/// empty, `0` or `false`.
pub fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
}

/// Where the harness keeps what it downloads and builds once (Debian
/// kernels, unpacked kernels, initramfs bases): `$RVERBS_VM_CACHE`, else
/// `$XDG_CACHE_HOME/rverbs-vm`, else `$HOME/.cache/rverbs-vm` (the XDG
/// base-directory rule). Created on first use.
pub fn cache_dir() -> Result<PathBuf> {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = var("RVERBS_VM_CACHE") {
        return Ok(d);
    }
    if let Some(d) = var("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
        return Ok(d.join("rverbs-vm"));
    }
    var("HOME")
        .map(|h| h.join(".cache").join("rverbs-vm"))
        .ok_or_else(|| "no cache directory: set RVERBS_VM_CACHE, XDG_CACHE_HOME or HOME".into())
}

/// The directories one run uses.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// Shared, long-lived: `debs/`, `kernels/`, `modtrees/`, `initramfs/`
    /// (see [`cache_dir`]).
    pub cache: PathBuf,
    /// This project's or this run's: `logs/` (consoles) and `run/` (initrds
    /// of running guests).
    pub work: PathBuf,
}

impl Dirs {
    /// `work/logs`, created.
    pub fn logs(&self) -> Result<PathBuf> {
        mkdir(self.work.join("logs"))
    }

    /// `work/run`, created.
    pub fn run(&self) -> Result<PathBuf> {
        mkdir(self.work.join("run"))
    }
}

/// `create_dir_all`, returning the path.
pub fn mkdir(dir: PathBuf) -> Result<PathBuf> {
    std::fs::create_dir_all(&dir).ctx(format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// 16 random hex digits from `/dev/urandom`.
pub fn random_hex() -> Result<String> {
    use std::io::Read;
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).ctx("reading /dev/urandom")?;
    Ok(format!("{:016x}", u64::from_ne_bytes(b)))
}

/// A new directory `<parent>/<prefix><random>`, mode 0700, that did not
/// exist before: `mkdir(2)` fails on anything already at the path, a
/// symlink included, so a name another user guessed or planted is never
/// used (the harness runs as root; `mkdtemp`'s contract, with std only).
pub fn private_dir(parent: &Path, prefix: &str) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::create_dir_all(parent).ctx(format!("creating {}", parent.display()))?;
    for _ in 0..16 {
        let dir = parent.join(format!("{prefix}{}", random_hex()?));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("creating {}: {e}", dir.display())),
        }
    }
    Err(format!("no free name for a directory {prefix}* in {}", parent.display()))
}

/// Creates `path` as a new file for writing, replacing what was there:
/// the old entry is unlinked (a symlink itself, never its target) and the
/// new one made with `O_EXCL`, which never follows a symlink: one planted
/// in between fails the call instead of redirecting a root-owned write
/// (paths in a cache or work directory that may be shared).
pub fn create_fresh(path: &Path) -> Result<std::fs::File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("removing {}: {e}", path.display())),
    }
    std::fs::File::options().write(true).create_new(true).open(path).ctx(format!("creating {}", path.display()))
}

/// Makes a [`private_dir`] readable by all (0755) before it is renamed
/// into a shared cache, where it used to be.
pub fn publish_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).ctx(format!("chmod {}", dir.display()))
}

/// Quotes `s` for a POSIX shell (single quotes; `'` becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b)) {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// 64-bit FNV-1a: a stable (across Rust versions) hash for cache keys.
#[derive(Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv::new()
    }
}

impl Fnv {
    /// A fresh hasher.
    pub fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    /// Feeds bytes, followed by a separator so that `("ab","c")` and
    /// `("a","bc")` differ.
    pub fn add(&mut self, bytes: impl AsRef<[u8]>) -> &mut Self {
        for &b in bytes.as_ref().iter().chain(&[0xff]) {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        self
    }

    /// The hash as 16 hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// Formats a duration as seconds with one decimal.
pub fn secs(d: std::time::Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    /// A symlink planted where a file is written is replaced, never
    /// followed: its target keeps its contents.
    #[test]
    fn create_fresh_never_writes_through_a_symlink() {
        use std::io::Write;
        let dir = super::private_dir(&std::env::temp_dir(), "rverbs-vm-fresh-").unwrap();
        let (target, link) = (dir.join("target"), dir.join("initrd"));
        std::fs::write(&target, "precious").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        super::create_fresh(&link).unwrap().write_all(b"initrd").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "initrd");
        assert!(!std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn private_dirs_are_new_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let parent = super::private_dir(&std::env::temp_dir(), "rverbs-vm-test-").unwrap();
        let a = super::private_dir(&parent, "x-").unwrap();
        let b = super::private_dir(&parent, "x-").unwrap();
        assert_ne!(a, b);
        assert_eq!(std::fs::metadata(&a).unwrap().permissions().mode() & 0o777, 0o700);
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("x-"));
        std::fs::remove_dir_all(&parent).unwrap();
    }

    use super::*;

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(shell_quote("--nocapture"), "--nocapture");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("$HOME;rm"), "'$HOME;rm'");
    }
}
