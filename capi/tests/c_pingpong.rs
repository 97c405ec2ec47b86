//! rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong`, `ibv_ud_pingpong` and
//! `ibv_srq_pingpong`, unmodified, through rverbs' `libibverbs.so.1`
//! (selected by `LD_LIBRARY_PATH` only) against a peer on rdma-core's
//! library, both roles, polling and `-e`, and with both sides on rverbs. Each run checks the byte count, `-c`'s data check and that
//! each side printed the addresses the other one sent.
//!
//! Without a uverbs device the tests print `skipped: ...` and pass, unless
//! `RVERBS_REQUIRE_DEVICE=1`: then a missing device, tool or library fails.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest one ping-pong may take before it is killed (TCG guests are slow).
const DEADLINE: Duration = Duration::from_secs(90);
/// Iterations per run: enough to exercise the loop, short in the VM.
const ITERS: u32 = 50;
const GUEST_LIB_DIR: &str = "/opt/rverbs/lib";
const SONAME: &str = "libibverbs.so.1";

/// A running child whose output is collected by two threads.
struct Proc {
    what: String,
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// How a child ended.
struct Ended {
    what: String,
    code: Option<i32>,
    killed: bool,
    secs: f64,
    stdout: String,
    stderr: String,
}

impl Ended {
    fn describe(&self) -> String {
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

fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    })
}

impl Proc {
    /// Runs `prog args`, on rverbs' `libibverbs.so.1` when `lib` names its directory.
    fn spawn(prog: &Path, args: &[String], lib: Option<&Path>) -> Proc {
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

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits until the child exits or `limit` passed (then kills it).
    fn finish(&mut self, limit: Duration) -> Ended {
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
fn listening(port: u16) -> bool {
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
fn wait_listening(port: u16, server: &mut Proc) {
    let start = Instant::now();
    while !listening(port) {
        if server.exited() || start.elapsed() > Duration::from_secs(60) {
            panic!("server never listened on port {port}:\n{}", server.finish(Duration::ZERO).describe());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn require_device() -> bool {
    std::env::var("RVERBS_REQUIRE_DEVICE").is_ok_and(|v| v == "1")
}

/// Skips (false) or panics, when something the test needs is missing.
fn need(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(!require_device(), "RVERBS_REQUIRE_DEVICE=1 but {what}");
        println!("skipped: {what}");
    }
    ok
}

/// The directory holding rverbs' `libibverbs.so.1` (see `c_tools.rs`).
fn lib_dir() -> Option<PathBuf> {
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
fn setup(name: &str) -> Option<(rverbs::Device, PathBuf, PathBuf)> {
    let dev = rverbs::devices().ok().and_then(|d| d.into_iter().next());
    if !need(dev.is_some(), "no uverbs device") {
        return None;
    }
    let lib = lib_dir();
    if !need(lib.is_some(), "rverbs' libibverbs.so.1 was not built or installed") {
        return None;
    }
    let tool = ["/usr/bin", "/usr/local/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file());
    if !need(tool.is_some(), &format!("rdma-core's {name} is not installed (Debian: ibverbs-utils)")) {
        return None;
    }
    let (lib, tool) = (lib?, tool?);
    assert_eq!(loaded_libibverbs(&tool, &lib), lib.join(SONAME), "LD_LIBRARY_PATH did not select rverbs' library");
    Some((dev?, lib, tool))
}

/// The `libibverbs.so.1` the loader picks for `prog` with `LD_LIBRARY_PATH=lib`.
fn loaded_libibverbs(prog: &Path, lib: &Path) -> PathBuf {
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

/// `N` of `N bytes in ...`.
fn bytes_line(out: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.strip_suffix("Mbit/sec").and(l.split_once(" bytes in ")).and_then(|(n, _)| n.parse().ok()))
}

/// The `LID ..., QPN ..., PSN ..., GID ...` parts of the address lines with `label`.
fn addresses(out: &str, label: &str) -> Vec<String> {
    // ibv_ud_pingpong's local line has `PSN 0x..: GID`.
    out.lines().filter_map(|l| l.strip_prefix(label)).map(|rest| rest.trim_start().replace(": GID", ", GID")).collect()
}

/// `name` (`ibv_rc_pingpong`, ...) as server and client, each on rverbs'
/// library (`true`) or rdma-core's.
fn pingpong(name: &str, port: u16, events: bool, server_lib: bool, client_lib: bool) {
    let Some((dev, lib, tool)) = setup(name) else { return };
    let size: u64 = if name == "ibv_ud_pingpong" { 1024 } else { 4096 };
    let g = dev.open().expect("open").default_sgid_index(1).expect("a RoCE GID").to_string();
    let (p, n) = (port.to_string(), ITERS.to_string());
    let mut args: Vec<String> =
        ["-d", dev.name(), "-n", &n, "-p", &p, "-g", &g, "-c"].iter().map(|s| s.to_string()).collect();
    if events {
        args.push("-e".into());
    }
    let pick = |ours: bool| ours.then_some(lib.as_path());
    let mut s = Proc::spawn(&tool, &args, pick(server_lib));
    wait_listening(port, &mut s);
    args.push("127.0.0.1".into());
    let c = Proc::spawn(&tool, &args, pick(client_lib)).finish(DEADLINE);
    let s = s.finish(if c.code == Some(0) { DEADLINE } else { Duration::from_secs(5) });
    let both = format!("{}\n{}", s.describe(), c.describe());
    for r in [&s, &c] {
        assert!(!r.killed, "a side had to be killed:\n{both}");
        assert_eq!(r.code, Some(0), "a side failed:\n{both}");
        assert_eq!(bytes_line(&r.stdout), Some(size * u64::from(ITERS) * 2), "byte count:\n{both}");
        assert!(r.stdout.contains(&format!("{ITERS} iters in ")), "iters line:\n{both}");
        assert!(!r.stdout.contains("invalid data"), "-c found bad data:\n{both}");
        assert!(!r.stderr.contains("panicked"), "a side panicked:\n{both}");
    }
    let (s_local, s_remote) = (addresses(&s.stdout, "  local address:"), addresses(&s.stdout, "  remote address:"));
    let (c_local, c_remote) = (addresses(&c.stdout, "  local address:"), addresses(&c.stdout, "  remote address:"));
    assert!(!s_local.is_empty(), "{both}");
    assert_eq!(s_local, c_remote, "the client printed other addresses than the server's:\n{both}");
    assert_eq!(c_local, s_remote, "the server printed other addresses than the client's:\n{both}");
}

#[test]
fn rc_rverbs_server_rdma_core_client() {
    pingpong("ibv_rc_pingpong", 19611, false, true, false);
}

#[test]
fn rc_rdma_core_server_rverbs_client() {
    pingpong("ibv_rc_pingpong", 19612, false, false, true);
}

#[test]
fn rc_events_rverbs_server_rdma_core_client() {
    pingpong("ibv_rc_pingpong", 19613, true, true, false);
}

#[test]
fn rc_events_rdma_core_server_rverbs_client() {
    pingpong("ibv_rc_pingpong", 19614, true, false, true);
}

#[test]
fn rc_both_on_rverbs_polling_and_events() {
    pingpong("ibv_rc_pingpong", 19615, false, true, true);
    pingpong("ibv_rc_pingpong", 19616, true, true, true);
}

#[test]
fn uc_rverbs_server_rdma_core_client() {
    pingpong("ibv_uc_pingpong", 19617, false, true, false);
}

#[test]
fn uc_rdma_core_server_rverbs_client() {
    pingpong("ibv_uc_pingpong", 19618, false, false, true);
}

#[test]
fn uc_events_rverbs_server_rdma_core_client() {
    pingpong("ibv_uc_pingpong", 19619, true, true, false);
}

#[test]
fn uc_events_rdma_core_server_rverbs_client() {
    pingpong("ibv_uc_pingpong", 19620, true, false, true);
}

#[test]
fn uc_both_on_rverbs_polling_and_events() {
    pingpong("ibv_uc_pingpong", 19621, false, true, true);
    pingpong("ibv_uc_pingpong", 19622, true, true, true);
}

#[test]
fn ud_rverbs_server_rdma_core_client() {
    pingpong("ibv_ud_pingpong", 19623, false, true, false);
}

#[test]
fn ud_rdma_core_server_rverbs_client() {
    pingpong("ibv_ud_pingpong", 19624, false, false, true);
}

#[test]
fn ud_events_rverbs_server_rdma_core_client() {
    pingpong("ibv_ud_pingpong", 19625, true, true, false);
}

#[test]
fn ud_events_rdma_core_server_rverbs_client() {
    pingpong("ibv_ud_pingpong", 19626, true, false, true);
}

#[test]
fn ud_both_on_rverbs_polling_and_events() {
    pingpong("ibv_ud_pingpong", 19627, false, true, true);
    pingpong("ibv_ud_pingpong", 19628, true, true, true);
}

#[test]
fn srq_rverbs_server_rdma_core_client() {
    pingpong("ibv_srq_pingpong", 19629, false, true, false);
}

#[test]
fn srq_rdma_core_server_rverbs_client() {
    pingpong("ibv_srq_pingpong", 19630, false, false, true);
}

#[test]
fn srq_events_rverbs_server_rdma_core_client() {
    pingpong("ibv_srq_pingpong", 19631, true, true, false);
}

#[test]
fn srq_events_rdma_core_server_rverbs_client() {
    pingpong("ibv_srq_pingpong", 19632, true, false, true);
}

#[test]
fn srq_both_on_rverbs_polling_and_events() {
    pingpong("ibv_srq_pingpong", 19633, false, true, true);
    pingpong("ibv_srq_pingpong", 19634, true, true, true);
}
