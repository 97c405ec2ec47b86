//! rdma-core's `ibv_asyncwatch`, unmodified, on rverbs' `libibverbs.so.1`
//! and on rdma-core's at the same time: taking rxe0's netdev down and up
//! must make both print the same events (`IBV_EVENT_PORT_ERR`, GID changes,
//! `IBV_EVENT_PORT_ACTIVE`, with the port number: `ibv_get_async_event`'s
//! `event_type` and `element.port_num`), acknowledging each with
//! `ibv_ack_async_event`.
//!
//! Each program gets a pty as stdout, so its `printf`s are line-buffered
//! and every line arrives as the event does (in the VM guest the test
//! first mounts devpts, which the guest's `/init` does not).
//!
//! Without a uverbs device the test prints `skipped: ...` and passes, unless
//! `RVERBS_REQUIRE_DEVICE=1`: then a missing device, program or library fails.

mod common;

use common::*;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A child writing to a pty; its output lines as they come.
struct Watch {
    child: Child,
    out: Arc<Mutex<String>>,
}

/// Makes ptys available: the VM guest mounts devtmpfs but no devpts, and
/// `/dev/ptmx` answers ENOENT until a devpts is mounted on `/dev/pts`
/// (busybox `mount`).
fn ensure_ptys() {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    if mounts.lines().any(|l| l.split_whitespace().nth(2) == Some("devpts")) {
        return;
    }
    std::fs::create_dir_all("/dev/pts").expect("mkdir /dev/pts");
    let st = Command::new("mount").args(["-t", "devpts", "devpts", "/dev/pts"]).status();
    assert!(st.is_ok_and(|s| s.success()), "cannot mount devpts on /dev/pts");
    if !Path::new("/dev/ptmx").exists() {
        std::os::unix::fs::symlink("pts/ptmx", "/dev/ptmx").expect("link /dev/ptmx");
    }
}

impl Watch {
    fn spawn(prog: &Path, args: &[&str], lib: Option<&Path>) -> Watch {
        ensure_ptys();
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let mut cmd = Command::new(prog);
        cmd.args(args).env_remove("LD_LIBRARY_PATH").stdin(Stdio::null()).stderr(Stdio::piped());
        if let Some(l) = lib {
            cmd.env("LD_LIBRARY_PATH", l);
        }
        let child = cmd.stdout(Stdio::from(pty.slave)).spawn().expect("spawn ibv_asyncwatch");
        let out = Arc::new(Mutex::new(String::new()));
        let sink = out.clone();
        let mut master = std::fs::File::from(pty.master);
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            // Ends with EIO once the child is gone and the slave closed.
            while let Ok(n @ 1..) = master.read(&mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]).replace('\r', ""));
            }
        });
        Watch { child, out }
    }

    fn text(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// The event lines (`  event_type ...`).
    fn events(&self) -> Vec<String> {
        self.text().lines().filter(|l| l.trim_start().starts_with("event_type")).map(str::to_owned).collect()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ip(args: &[&str]) {
    let st = Command::new("/usr/bin/ip").args(args).status().expect("run /usr/bin/ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// Brings the netdev back up when dropped, also when the test fails.
struct LinkUp(String);

impl Drop for LinkUp {
    fn drop(&mut self) {
        ip(&["link", "set", &self.0, "up"]);
    }
}

/// Waits until `cond` holds for both watchers or the deadline passes.
fn wait_for(a: &Watch, b: &Watch, what: &str, cond: impl Fn(&Watch) -> bool) {
    let start = Instant::now();
    while !(cond(a) && cond(b)) {
        assert!(
            start.elapsed() < DEADLINE,
            "{what} did not come:\n--- rdma-core ---\n{}\n--- rverbs ---\n{}",
            a.text(),
            b.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn port_events_print_the_same_through_both_libraries() {
    let Some((dev, lib, tool)) = setup("ibv_asyncwatch") else { return };
    let netdev = netdev_of(&dev).unwrap_or_else(|| panic!("{} sits on no netdev", dev.name()));
    let theirs = Watch::spawn(&tool, &["-d", dev.name()], None);
    let ours = Watch::spawn(&tool, &["-d", dev.name()], Some(&lib));
    wait_for(&theirs, &ours, "the `async event FD` line", |w| w.text().contains("async event FD"));
    let up = LinkUp(netdev.clone());
    ip(&["link", "set", &netdev, "down"]);
    wait_for(&theirs, &ours, "the port error event", |w| w.text().contains("IBV_EVENT_PORT_ERR"));
    drop(up);
    wait_for(&theirs, &ours, "the port active event", |w| w.text().contains("IBV_EVENT_PORT_ACTIVE"));
    // The next tests need the port ACTIVE with its RoCE v2 GID back; trailing
    // events (GID changes) arrive at both meanwhile.
    let start = Instant::now();
    let state = dev.sysfs_path().join("ports/1/state");
    while !(std::fs::read_to_string(&state).unwrap_or_default().contains("ACTIVE")
        && dev.open().and_then(|c| c.default_sgid_index(1)).is_ok())
    {
        assert!(start.elapsed() < DEADLINE, "port 1 of {} did not come back", dev.name());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let (a, b) = (theirs.events(), ours.events());
    assert!(a.iter().any(|l| l.contains("IBV_EVENT_PORT_ERR (10), port 1")), "{a:?}");
    assert_eq!(a, b, "\n--- rdma-core ---\n{}\n--- rverbs ---\n{}", theirs.text(), ours.text());
    println!("{} identical event lines: {a:?}", a.len());
}
