//! Helpers of the C-library tests: children with collected output, the
//! library's directory, skip-or-fail, the loader's choice.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest one ping-pong may take before it is killed (TCG guests are slow).
pub const DEADLINE: Duration = Duration::from_secs(90);
/// Iterations per run: enough to exercise the loop, short in the VM.
pub const ITERS: u32 = 50;
const GUEST_LIB_DIR: &str = "/opt/rverbs/lib";
const SONAME: &str = "libibverbs.so.1";

/// A running child whose output is collected by two threads.
pub struct Proc {
    pub what: String,
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// How a child ended.
pub struct Ended {
    what: String,
    pub code: Option<i32>,
    pub killed: bool,
    pub secs: f64,
    pub stdout: String,
    pub stderr: String,
}

impl Ended {
    pub fn describe(&self) -> String {
        format!(
            "{}: exit {:?}{} after {:.1} s\n--- stdout ---\n{}--- stderr ---\n{}",
            self.what,
            self.code,
            if self.killed { " (KILLED at the deadline)" } else { "" },
            self.secs,
            self.stdout,
            self.stderr
        )
    }
}

pub fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    })
}

impl Proc {
    /// Runs `prog args`, on rverbs' `libibverbs.so.1` when `lib` names its directory.
    pub fn spawn(prog: &Path, args: &[String], lib: Option<&Path>) -> Proc {
        let on = if lib.is_some() { "rverbs" } else { "rdma-core" };
        let what = format!("[{on}] {} {}", prog.display(), args.join(" "));
        let mut cmd = Command::new(prog);
        cmd.env_remove("LD_LIBRARY_PATH");
        if let Some(l) = lib {
            cmd.env("LD_LIBRARY_PATH", l);
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        let out = Some(collect(child.stdout.take().unwrap()));
        let err = Some(collect(child.stderr.take().unwrap()));
        Proc { what, child, out, err }
    }

    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits until the child exits or `limit` passed (then kills it).
    pub fn finish(&mut self, limit: Duration) -> Ended {
        let start = Instant::now();
        let mut killed = false;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st;
            }
            if start.elapsed() >= limit {
                killed = true;
                let _ = self.child.kill();
                break self.child.wait().expect("wait after kill");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ended {
            what: self.what.clone(),
            code: status.code(),
            killed,
            secs: start.elapsed().as_secs_f64(),
            stdout: self.out.take().unwrap().join().unwrap(),
            stderr: self.err.take().unwrap().join().unwrap(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A panicking test must not leave a server behind for the next one.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// True when a socket listens on TCP `port` (any address, v4 or v6).
pub fn listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).unwrap_or_default().lines().skip(1).any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() > 3
                && cols[3] == "0A"
                && cols[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok()) == Some(port)
        })
    })
}

/// Waits for the server to listen (it prints its address first, then binds).
pub fn wait_listening(port: u16, server: &mut Proc) {
    let start = Instant::now();
    while !listening(port) {
        if server.exited() || start.elapsed() > Duration::from_secs(60) {
            panic!("server never listened on port {port}:\n{}", server.finish(Duration::ZERO).describe());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn require_device() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

/// Skips (false) or panics, when something the test needs is missing.
pub fn need(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(!require_device(), "RVERBS_REQUIRE_DEVICE=1 but {what}");
        println!("skipped: {what}");
    }
    ok
}

/// The directory holding rverbs' `libibverbs.so.1` (see `c_tools.rs`).
pub fn lib_dir() -> Option<PathBuf> {
    if Path::new(GUEST_LIB_DIR).join(SONAME).is_file() {
        return Some(PathBuf::from(GUEST_LIB_DIR));
    }
    let exe = std::env::current_exe().ok()?;
    let built = exe.parent()?.parent()?.join("libibverbs.so");
    if !built.is_file() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("rverbs-capi-pp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let link = dir.join(SONAME);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&built, &link).ok()?;
    Some(dir)
}

/// The device, the tool and the library, or `None` after a permitted skip.
pub fn setup(name: &str) -> Option<(rverbs::Device, PathBuf, PathBuf)> {
    let dev = rverbs::devices().ok().and_then(|d| d.into_iter().next());
    if !need(dev.is_some(), "no uverbs device") {
        return None;
    }
    let lib = lib_dir();
    if !need(lib.is_some(), "rverbs' libibverbs.so.1 was not built or installed") {
        return None;
    }
    let tool = ["/usr/bin", "/usr/local/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file());
    if !need(tool.is_some(), &format!("rdma-core's {name} is not installed (Debian: ibverbs-utils, perftest)")) {
        return None;
    }
    let (lib, tool) = (lib?, tool?);
    assert_eq!(loaded_libibverbs(&tool, &lib), lib.join(SONAME), "LD_LIBRARY_PATH did not select rverbs' library");
    Some((dev?, lib, tool))
}

/// The `libibverbs.so.1` the loader picks for `prog` with `LD_LIBRARY_PATH=lib`.
pub fn loaded_libibverbs(prog: &Path, lib: &Path) -> PathBuf {
    let out = Command::new(prog)
        .env("LD_LIBRARY_PATH", lib)
        .env("LD_TRACE_LOADED_OBJECTS", "1")
        .output()
        .expect("runs under the loader's trace");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let found = text
        .lines()
        .find(|l| l.trim_start().starts_with(SONAME))
        .and_then(|l| l.split("=>").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{} does not load {SONAME}:\n{text}", prog.display()));
    PathBuf::from(found)
}
