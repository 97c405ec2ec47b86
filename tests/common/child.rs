//! Child processes of the VM tests: a program run with its output collected,
//! waited for with a deadline (a stuck child is killed, never waited on
//! forever), and killed when the test panics. Shared by the root crate's
//! tests (`tests/common/mod.rs`) and the C library's (`capi/tests/common`,
//! through `#[path]`).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How much of each stream [`Ended::describe`] shows (its end).
const SHOWN: usize = 6000;

/// A running child whose output is collected by two threads.
pub struct Proc {
    pub what: String,
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// How a child ended.
pub struct Ended {
    pub what: String,
    pub code: Option<i32>,
    pub killed: bool,
    pub secs: f64,
    pub stdout: String,
    pub stderr: String,
}

impl Ended {
    /// The command, how it ended and the end of both streams, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "{}: exit {:?}{} after {:.1} s\n--- stdout ---\n{}--- stderr ---\n{}",
            self.what,
            self.code,
            if self.killed { " (KILLED at the deadline)" } else { "" },
            self.secs,
            tail(&self.stdout, SHOWN),
            tail(&self.stderr, SHOWN)
        )
    }
}

/// The last `n` bytes of `s` (whole characters).
pub fn tail(s: &str, n: usize) -> &str {
    let mut i = s.len().saturating_sub(n);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

/// Reads `r` to its end on a thread of its own.
pub fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    })
}

impl Proc {
    /// Runs `prog args` with stdin closed. `lib` names a directory holding a
    /// `libibverbs.so.1` to load instead of the system's (rverbs' C library:
    /// it becomes the child's `LD_LIBRARY_PATH`); with `None` the child gets
    /// no `LD_LIBRARY_PATH` at all.
    pub fn spawn(prog: impl AsRef<OsStr>, args: &[String], lib: Option<&Path>) -> Proc {
        Proc::spawn_with(prog.as_ref(), args, lib, false)
    }

    /// [`spawn`](Self::spawn) with the child's stdout line-buffered, as
    /// `stdbuf -oL` does (coreutils' `libstdbuf` preloaded, where the guest
    /// has it): a C tool killed at a deadline then leaves every line it
    /// printed, which shows how far it got, instead of a lost block buffer.
    pub fn spawn_line_buffered(prog: impl AsRef<OsStr>, args: &[String], lib: Option<&Path>) -> Proc {
        Proc::spawn_with(prog.as_ref(), args, lib, true)
    }

    fn spawn_with(prog: &OsStr, args: &[String], lib: Option<&Path>, line_buffered: bool) -> Proc {
        let mut what = format!("{} {}", prog.to_string_lossy(), args.join(" "));
        let mut cmd = Command::new(prog);
        cmd.env_remove("LD_LIBRARY_PATH");
        if let Some(l) = lib {
            cmd.env("LD_LIBRARY_PATH", l);
            what = format!("[LD_LIBRARY_PATH={}] {what}", l.display());
        }
        let stdbuf = Path::new("/usr/libexec/coreutils/libstdbuf.so");
        if line_buffered && stdbuf.exists() {
            cmd.env("LD_PRELOAD", stdbuf).env("_STDBUF_O", "L");
        }
        cmd.args(args);
        Proc::start(what, &mut cmd)
    }

    /// Starts `cmd` (its stdout and stderr collected, stdin closed), named `what` in messages.
    pub fn start(what: String, cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        let out = Some(collect(child.stdout.take().expect("piped stdout")));
        let err = Some(collect(child.stderr.take().expect("piped stderr")));
        Proc { what, child, out, err }
    }

    /// True once the child has exited.
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
            stdout: self.out.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default(),
            stderr: self.err.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default(),
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

/// Waits for the server to listen on TCP `port`; panics with its output when
/// it exits first or does not listen within a minute.
pub fn wait_listening(port: u16, server: &mut Proc) {
    let start = Instant::now();
    while !listening(port) {
        if server.exited() || start.elapsed() > Duration::from_secs(60) {
            panic!("server never listened on port {port}:\n{}", server.finish(Duration::ZERO).describe());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until an RDMA CM id listens on `port` (iproute2's `rdma resource
/// show cm_id` lists listeners with their address); panics with the
/// server's output when it exits first or does not listen within a minute.
pub fn wait_cm_listening(port: u16, server: &mut Proc) {
    let start = Instant::now();
    let here = |l: &str| l.contains(&format!(":{port} ")) || l.trim_end().ends_with(&format!(":{port}"));
    // A wildcard listener gets a LISTEN id per device (`link rxe0/- ...`,
    // `link siw0/- ...`), each made after the last: wait for the tier's.
    let dev = std::env::var("RVERBS_TEST_DEVICE").unwrap_or_default();
    let on_dev = |l: &str| dev.is_empty() || l.trim_start().starts_with(&format!("link {dev}/"));
    loop {
        let out = Command::new("rdma").args(["resource", "show", "cm_id"]).output();
        let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        // iWARP: the kernel marks the id LISTEN before the device's TCP
        // listener exists (`rdma_listen` sets the state, then
        // `cma_iw_listen`); a connect in between is refused.
        if text.lines().any(|l| l.contains("LISTEN") && here(l) && on_dev(l))
            && (!tested_device_is_iwarp() || listening(port))
        {
            return;
        }
        if server.exited() || start.elapsed() > Duration::from_secs(60) {
            panic!("the server never listened on {port}:\n{text}\n{}", server.finish(Duration::ZERO).describe());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True when the tier's device (`RVERBS_TEST_DEVICE`) is an iWARP RNIC
/// (sysfs `node_type` "4: RNIC"), whose CM listens on a TCP socket.
pub fn tested_device_is_iwarp() -> bool {
    std::env::var("RVERBS_TEST_DEVICE").is_ok_and(|d| {
        std::fs::read_to_string(format!("/sys/class/infiniband/{d}/node_type")).is_ok_and(|t| t.starts_with("4:"))
    })
}

/// `a` as owned strings (argument lists).
pub fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// True when `r` is Debian's `rping` (rdma-core 44) ending with status 255
/// and `rdma_get_cm_event: Bad file descriptor` after its run: its CM
/// thread may still read the event channel while the main thread tears the
/// connection down (upstream rdma-core later made the main thread stop and
/// join that thread first, through an eventfd, before destroying the
/// channel). It happens now and then with either library and either peer;
/// the caller still checks every ping.
pub fn rping_teardown_race(r: &Ended) -> bool {
    let prog = r.what.split_whitespace().find(|w| !w.starts_with('[')).unwrap_or("");
    prog.ends_with("/rping") && r.code == Some(255) && r.stderr.contains("rdma_get_cm_event: Bad file descriptor")
}
