//! Faults on the real kernel (VM tier, issue 32 item 2), through the Rust
//! API: a process SIGKILLed while it holds every kind of object leaks
//! nothing; too small an `RLIMIT_MEMLOCK`, an exhausted `RLIMIT_NOFILE` and
//! an mmap that `RLIMIT_AS` refuses give errors that name the limit and leave
//! no object in the kernel; a peer SIGKILLed mid-stream ends an RC stream
//! with `RETRY_EXC_ERR` within the time its timeout and retry count give,
//! and a CM connection with DISCONNECTED; a QP moved to ERR by another
//! thread while a poster runs completes every posted request exactly once.
//!
//! The processes that are killed, or that lower their own limits, are
//! copies of this test binary running [`child_main`] (`RVERBS_FAULTS_CHILD`
//! names what they do); the harness itself is never killed. They report on
//! stdout, one `@@tag value` line per fact, and die with this process
//! (`PR_SET_PDEATHSIG`).

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::libc;
use rverbs::cm::{self, ConnParam, Listener};
use rverbs::{
    AccessFlags, ConnectOptions, CqInitAttr, Endpoint, MwType, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType,
    RecvWr, SendWr, SrqAttr, WcStatus,
};

/// The tests that count the device's kernel objects or change its state
/// take this first: libtest runs the tests of a binary on threads.
static DEVICE_STATE: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    DEVICE_STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The variable that makes a copy of this binary a child (its value: what it does).
const CHILD: &str = "RVERBS_FAULTS_CHILD";
/// How long a child may take to report (a TCG guest is slow).
const REPORT: Duration = Duration::from_secs(60);
const ALL: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

/// `port` at the address of the test device's netdev in the VM (rxe0:
/// 192.168.77.1; siw0: 192.168.79.1).
fn at(port: u16) -> SocketAddr {
    let dev = common::first_device().expect("a CM test runs on a device");
    SocketAddr::from((common::device_ipv4(&dev), port))
}

/// A copy of this binary running one child mode, its stdout lines delivered as they come.
struct Kid {
    what: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    err: Option<JoinHandle<String>>,
}

impl Kid {
    fn spawn(mode: &str, env: &[(&str, String)]) -> Kid {
        let exe = std::env::current_exe().expect("this test binary");
        let mut cmd = Command::new(&exe);
        cmd.args(["child_main", "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, mode);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} as {mode}: {e}", exe.display()));
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let err = Some(common::child::collect(child.stderr.take().unwrap()));
        Kid { what: format!("child {mode}"), child, lines, seen: Vec::new(), err }
    }

    /// The value of the child's next `@@tag value` line; panics with its
    /// output when it exits first or stays silent past `within`.
    fn expect(&mut self, tag: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        let prefix = format!("@@{tag}");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    // libtest's `test child_main ... ` may start the line.
                    if let Some(rest) = l.find(&prefix).map(|i| &l[i + prefix.len()..]) {
                        if rest.is_empty() || rest.starts_with(' ') {
                            return rest.trim_start().to_owned();
                        }
                    }
                }
                Err(_) => {
                    self.kill();
                    let err = self.err.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
                    panic!(
                        "{}: no `{prefix}` line within {within:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                        self.what,
                        self.seen.join("\n"),
                        common::child::tail(&err, 6000)
                    );
                }
            }
        }
    }

    /// SIGKILL, then reap: once `wait` returns, the kernel has closed the
    /// child's files (the uverbs and rdma_cm fds among them).
    fn kill(&mut self) {
        // SAFETY: a signal to our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// The device's kernel object counts (`rdma resource show`), by name.
fn count(counts: &[(String, u64)], kind: &str) -> u64 {
    counts.iter().find(|(k, _)| k == kind).map_or(0, |(_, v)| *v)
}

// ---------------------------------------------------------------------------
// The children.

/// What a child runs, chosen by `RVERBS_FAULTS_CHILD`; a no-op test otherwise.
#[test]
fn child_main() {
    let Ok(mode) = std::env::var(CHILD) else { return };
    // Die with the test that started us, even if it is killed itself.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    match mode.as_str() {
        "hold_all" => hold_all(),
        "memlock" => memlock(),
        "nofile" => nofile(),
        "mmap" => mmap(),
        "rc_peer" => rc_peer(),
        "cm_peer" => cm_peer(),
        m => panic!("unknown child mode {m}"),
    }
    println!("@@ready");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The test device (`RVERBS_TEST_DEVICE`, else the first), opened.
fn open_first() -> rverbs::Context {
    common::first_device().expect("a device").open().unwrap()
}

/// Every kind of object, and each in use: a comp channel with an armed CQ,
/// regions allocated and registered, an SRQ with receives, two RC QPs
/// connected to each other (a SEND went through, receives are posted), a
/// UD QP and an AH, a memory window, and the CM: a listener and a connected
/// pair. Everything is leaked on purpose: the process is killed with it.
fn hold_all() {
    let ctx = open_first();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let mut cq = ctx.create_cq_with(&CqInitAttr { cqe: 64, channel: Some(&ch), ..Default::default() }).unwrap();
    let cq2 = ctx.create_cq(64).unwrap();
    let mr = pd.alloc_mr(1 << 16, ALL).unwrap();
    let buf: &'static mut [u8] = Vec::leak(vec![0u8; 8192]);
    // SAFETY: leaked memory, never freed, never referenced while registered.
    let umr = unsafe { pd.reg_mr(buf.as_mut_ptr(), buf.len(), AccessFlags::LOCAL_WRITE) }.unwrap();
    let mut srq = pd.create_srq(&SrqAttr { max_wr: 16, max_sge: 1, srq_limit: 0 }).unwrap();
    for i in 0..4 {
        srq.post_recv(&[RecvWr::new(i, &[mr.sge(i as usize * 64, 64).unwrap()])]).unwrap();
    }
    let mut a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let mut init = QpInitAttr::new(QpType::Rc, &cq2);
    init.srq = Some(&srq);
    let b = pd.create_qp(&init).unwrap();
    let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
    a.post_recv(&[RecvWr::new(9, &[umr.sge(0, 64).unwrap()])]).unwrap();
    a.post_send(&[SendWr::send(1, &[mr.sge(4096, 8).unwrap()]).signaled()]).unwrap();
    let wc = common::poll_n(&mut cq, 1)[0];
    assert_eq!(wc.status, WcStatus::SUCCESS, "{wc:?}");
    cq.req_notify(false).unwrap();
    // A UD QP, an AH and a memory window where the device has them (not
    // iWARP: RC only, no AHs, no windows).
    let (ud, ah, mw) = if common::is_iwarp(ctx.device()) {
        (None, None, None)
    } else {
        let ud = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq2)).unwrap();
        let opts = ConnectOptions::default();
        let ep = ud.local_endpoint(0, &opts).unwrap();
        let ah = pd.create_ah(&ep.ah_attr(&ctx, &opts).unwrap()).unwrap();
        (Some(ud), Some(ah), Some(pd.alloc_mw(MwType::Type2).unwrap()))
    };
    let port: u16 = std::env::var("RVERBS_FAULTS_PORT").unwrap().parse().unwrap();
    let listener = Listener::bind(at(port)).unwrap();
    let server = std::thread::spawn(move || {
        let req = listener.get_request(Some(REPORT)).unwrap();
        let ctx = req.context().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16).unwrap();
        let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
        let conn = req.accept(qp, &ConnParam::default(), REPORT).unwrap();
        std::mem::forget((conn, cq, pd, listener));
    });
    let id = cm::resolve(at(port), Duration::from_secs(5)).unwrap();
    let cctx = id.context().unwrap();
    let cpd = cctx.alloc_pd().unwrap();
    let ccq = cctx.create_cq(16).unwrap();
    let cqp = cpd.create_qp(&QpInitAttr::new(QpType::Rc, &ccq)).unwrap();
    let conn = id.connect_qp(cqp, &ConnParam::default(), REPORT).unwrap();
    server.join().unwrap();
    std::mem::forget((ctx, pd, ch, cq, cq2, mr, umr, srq, a, b, ud, ah, mw, conn, ccq, cpd));
}

fn set_limit(res: libc::__rlimit_resource_t, soft: u64) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid resource and out-pointer.
    assert_eq!(unsafe { libc::getrlimit(res, &mut r) }, 0);
    r.rlim_cur = soft;
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setrlimit(res, &r) }, 0, "setrlimit {res} {soft}");
}

fn report<T>(tag: &str, r: rverbs::Result<T>) {
    match r {
        Ok(_) => println!("@@{tag} ok"),
        Err(e) => println!("@@{tag} {:?} {e}", e.errno()),
    }
}

/// A 64 KiB `RLIMIT_MEMLOCK`, as a user without `CAP_IPC_LOCK` (root's
/// capability lifts the limit): a 1 MiB `alloc_mr` and `reg_mr` fail; a
/// 4 KiB region still fits, so the failures pinned nothing.
fn memlock() {
    set_limit(libc::RLIMIT_MEMLOCK, 64 << 10);
    // SAFETY: plain syscalls; nobody drops every capability.
    unsafe {
        assert_eq!(libc::setgid(65534), 0);
        assert_eq!(libc::setuid(65534), 0);
    }
    let ctx = open_first();
    let pd = ctx.alloc_pd().unwrap();
    report("alloc_mr", pd.alloc_mr(1 << 20, AccessFlags::LOCAL_WRITE));
    let buf: &'static mut [u8] = Vec::leak(vec![0u8; 1 << 20]);
    // SAFETY: leaked memory; the registration fails or is leaked.
    report("reg_mr", unsafe { pd.reg_mr(buf.as_mut_ptr(), buf.len(), AccessFlags::LOCAL_WRITE) });
    let small = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    std::mem::forget((ctx, pd, small));
}

/// The lowest free descriptor number: an `RLIMIT_NOFILE` of it leaves no
/// room for one more file.
fn lowest_free_fd() -> u64 {
    // SAFETY: dup and close of our own descriptors.
    unsafe {
        let fd = libc::dup(0);
        assert!(fd >= 0);
        libc::close(fd);
        fd as u64
    }
}

/// `RLIMIT_NOFILE` at the descriptors already open (and at one more): a
/// second `open`, a completion channel and a CM event channel fail.
fn nofile() {
    let dev = common::first_device().expect("a device");
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let free = lowest_free_fd();
    set_limit(libc::RLIMIT_NOFILE, free + 1);
    report("open1", dev.open());
    set_limit(libc::RLIMIT_NOFILE, free);
    report("open0", dev.open());
    report("channel", ctx.create_comp_channel());
    report("cm", cm::EventChannel::new());
    std::mem::forget((ctx, pd));
}

/// This process's address space in bytes (`VmSize`).
fn vm_size() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap();
    kb << 10
}

/// `RLIMIT_AS` 1 MiB above what the process maps: the mapping of a CQ of
/// the device's largest size (2 MiB and more on rxe) fails after the
/// kernel created the CQ, and so does a QP's send queue.
fn mmap() {
    let ctx = open_first();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let max_cqe = ctx.query_device().unwrap().max_cqe;
    let max_wr = ctx.query_device().unwrap().max_qp_wr;
    drop(ctx.create_cq(16).unwrap());
    set_limit(libc::RLIMIT_AS, vm_size() + (1 << 20));
    report("cq", ctx.create_cq(max_cqe));
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.cap = QpCap { max_send_wr: max_wr, ..QpCap::default() };
    report("qp", pd.create_qp(&init));
    std::mem::forget((ctx, pd, cq));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The RC options of the peer-killed test: a 16.8 ms local ACK timeout
/// (4.096 µs · 2^12), two retries.
fn short_retry() -> ConnectOptions {
    ConnectOptions { timeout: 12, retry_cnt: 2, ..ConnectOptions::default() }
}

/// An RC QP with 64 KiB of writable memory, connected to the endpoint in
/// `RVERBS_FAULTS_EP`; reports its own (`@@ep`).
fn rc_peer() {
    let ctx = open_first();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let mr = pd.alloc_mr(1 << 16, ALL).unwrap();
    let theirs = Endpoint::from_bytes(&unhex(&std::env::var("RVERBS_FAULTS_EP").unwrap())).unwrap();
    let opts = short_retry();
    let me = qp.local_endpoint(200, &opts).unwrap().with_memory(&mr);
    qp.connect(&me, &theirs, &opts).unwrap();
    println!("@@ep {}", hex(&me.to_bytes().unwrap()));
    std::mem::forget((ctx, pd, cq, qp, mr));
}

/// Connects through the CM to the listener at `RVERBS_FAULTS_PORT`.
fn cm_peer() {
    let port: u16 = std::env::var("RVERBS_FAULTS_PORT").unwrap().parse().unwrap();
    let id = cm::resolve(at(port), Duration::from_secs(5)).unwrap();
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let conn = id.connect_qp(qp, &ConnParam::default(), REPORT).unwrap();
    println!("@@connected");
    std::mem::forget((conn, cq, pd, ctx));
}

// ---------------------------------------------------------------------------
// The tests.

/// A process SIGKILLed while it holds every kind of object (see
/// [`hold_all`]): while it lives `rdma resource show` counts its objects;
/// once it is reaped every count is back where it was, and this process
/// opens the device and moves data through it.
#[test]
fn sigkilled_holding_every_object_leaks_nothing() {
    let Some(dev) = common::first_device() else { return };
    let _g = lock();
    let before = common::resource_counts(dev.name());
    let mut kid = Kid::spawn("hold_all", &[("RVERBS_FAULTS_PORT", "20311".into())]);
    kid.expect("ready", REPORT);
    let during = common::resource_counts(dev.name());
    for kind in ["ctx", "pd", "cq", "qp", "mr", "srq", "cm_id"] {
        assert!(count(&during, kind) > count(&before, kind), "the child holds a {kind}: {before:?} -> {during:?}");
    }
    kid.kill();
    common::assert_no_growth(dev.name(), &before);
    eprintln!(
        "counts before {before:?}, child alive {during:?}, after the kill {:?}",
        common::resource_counts(dev.name())
    );
    let mut lb = common::loopback(QpType::Rc, QpCap::default(), 16).unwrap();
    let mr = lb.pd.alloc_mr(4096, ALL).unwrap();
    lb.b.post_recv(&[RecvWr::new(2, &[mr.sge(0, 64).unwrap()])]).unwrap();
    lb.a.post_send(&[SendWr::send(1, &[mr.sge(64, 8).unwrap()]).signaled()]).unwrap();
    assert_eq!(common::poll_n(&mut lb.cq_a, 1)[0].status, WcStatus::SUCCESS);
    assert_eq!(common::poll_n(&mut lb.cq_b, 1)[0].status, WcStatus::SUCCESS);
}

/// Asserts that a child's `@@tag` line is an error with `errno` whose text names `limit`.
fn assert_names(kid: &mut Kid, tag: &str, errno: &str, limit: &str) {
    let line = kid.expect(tag, REPORT);
    assert!(line.starts_with(&format!("Some({errno})")) && line.contains(limit), "{tag}: {line}");
    eprintln!("{tag}: {line}");
}

#[test]
fn memlock_too_small_names_the_limit_and_leaves_no_region() {
    let Some(dev) = common::first_device() else { return };
    let _g = lock();
    let before = common::resource_counts(dev.name());
    let mut kid = Kid::spawn("memlock", &[]);
    assert_names(&mut kid, "alloc_mr", "ENOMEM", "RLIMIT_MEMLOCK is 65536 bytes");
    assert_names(&mut kid, "reg_mr", "ENOMEM", "RLIMIT_MEMLOCK is 65536 bytes");
    kid.expect("ready", REPORT);
    let during = common::resource_counts(dev.name());
    assert_eq!(count(&during, "pd"), count(&before, "pd") + 1, "{before:?} -> {during:?}");
    assert_eq!(count(&during, "mr"), count(&before, "mr") + 1, "only the 4 KiB region: {before:?} -> {during:?}");
    kid.kill();
    common::assert_no_growth(dev.name(), &before);
}

#[test]
fn nofile_exhausted_names_the_limit_and_leaves_no_context() {
    let Some(dev) = common::first_device() else { return };
    let _g = lock();
    let before = common::resource_counts(dev.name());
    let mut kid = Kid::spawn("nofile", &[]);
    for tag in ["open1", "open0", "channel", "cm"] {
        assert_names(&mut kid, tag, "EMFILE", "RLIMIT_NOFILE");
    }
    kid.expect("ready", REPORT);
    let during = common::resource_counts(dev.name());
    assert_eq!(count(&during, "ctx"), count(&before, "ctx") + 1, "only the first context: {before:?} -> {during:?}");
    assert_eq!(count(&during, "cm_id"), count(&before, "cm_id"), "{before:?} -> {during:?}");
    kid.kill();
    common::assert_no_growth(dev.name(), &before);
}

#[test]
fn mmap_refused_names_the_limit_and_destroys_the_kernel_object() {
    let Some(dev) = common::first_device() else { return };
    let _g = lock();
    let before = common::resource_counts(dev.name());
    let mut kid = Kid::spawn("mmap", &[]);
    assert_names(&mut kid, "cq", "ENOMEM", "RLIMIT_AS");
    assert_names(&mut kid, "qp", "ENOMEM", "RLIMIT_AS");
    kid.expect("ready", REPORT);
    let during = common::resource_counts(dev.name());
    assert_eq!(count(&during, "cq"), count(&before, "cq") + 1, "only the small CQ: {before:?} -> {during:?}");
    assert_eq!(count(&during, "qp"), count(&before, "qp"), "{before:?} -> {during:?}");
    kid.kill();
    common::assert_no_growth(dev.name(), &before);
}

/// RDMA WRITEs stream to a QP of a child process, which is SIGKILLed after
/// 64 of them completed. The kernel destroys its QP and rxe drops what
/// arrives for it; our QP retransmits `retry_cnt` times, one local ACK
/// timeout apart, then completes the oldest request with RETRY_EXC_ERR and
/// flushes the rest. Every request posted completes exactly once.
#[test]
fn peer_sigkilled_mid_stream_ends_in_retry_exceeded() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(256).unwrap();
    let mut init = QpInitAttr::new(QpType::Rc, &cq);
    init.cap = QpCap { max_send_wr: 32, ..QpCap::default() };
    let mut qp = pd.create_qp(&init).unwrap();
    let mr = pd.alloc_mr(4096, ALL).unwrap();
    let opts = short_retry();
    let me = qp.local_endpoint(100, &opts).unwrap();
    if common::is_iwarp(&dev) {
        let e = qp.connect(&me, &me, &opts).unwrap_err();
        assert!(e.to_string().contains("connection manager"), "{e}");
        return common::not_applicable(&dev, &format!("a peer connected by hand; iWARP connects through the CM: {e}"));
    }
    let mut kid = Kid::spawn("rc_peer", &[("RVERBS_FAULTS_EP", hex(&me.to_bytes().unwrap()))]);
    let theirs = Endpoint::from_bytes(&unhex(&kid.expect("ep", REPORT))).unwrap();
    qp.connect(&me, &theirs, &opts).unwrap();
    let remote = theirs.memory.unwrap().at(0, 64).unwrap();
    let sge = [mr.sge(0, 64).unwrap()];

    let (mut posted, mut done) = (0u64, Vec::new());
    let mut killed_at = None;
    let mut first_error = None;
    let mut buf = [rverbs::Wc::default(); 32];
    let start = Instant::now();
    while first_error.is_none() {
        // A hang detector only: the stream must end long before this.
        assert!(start.elapsed() < Duration::from_secs(120), "no error completion: {done:?}");
        if posted - (done.len() as u64) < 16 && qp.post_send(&[SendWr::write(posted, &sge, remote).signaled()]).is_ok()
        {
            posted += 1;
        }
        let n = cq.poll(&mut buf);
        for w in &buf[..n] {
            done.push((w.wr_id, w.status));
            if w.status != WcStatus::SUCCESS && first_error.is_none() {
                first_error = Some((w.status, killed_at.map(|t: Instant| t.elapsed())));
            }
        }
        if killed_at.is_none() && done.len() >= 64 {
            kid.kill();
            killed_at = Some(Instant::now());
        }
    }
    let (status, after_kill) = first_error.unwrap();
    let after_kill = after_kill.expect("an error before the peer was killed");
    assert_eq!(status, WcStatus::RETRY_EXC_ERR, "{done:?}");
    // The computed time: 4.096 µs · 2^12 · (retry_cnt + 1) = 50 ms. rxe
    // arms its retransmit timer in jiffies (4 ms at HZ=250), and a TCG guest
    // runs its timers late, so the bound below is a hang detector (rxe with
    // timeout 0 would retry forever), not a performance limit.
    let computed = Duration::from_nanos(4096 << opts.timeout) * (opts.retry_cnt as u32 + 1);
    assert!(after_kill < computed + Duration::from_secs(20), "RETRY_EXC_ERR {after_kill:?} after the kill");
    let rest = common::poll_n(&mut cq, (posted - done.len() as u64) as usize);
    done.extend(rest.iter().map(|w| (w.wr_id, w.status)));
    common::assert_no_more(&mut cq);
    let err_at = done.iter().position(|d| d.1 != WcStatus::SUCCESS).unwrap();
    assert!(done[err_at + 1..].iter().all(|d| d.1 == WcStatus::WR_FLUSH_ERR), "{done:?}");
    let mut ids: Vec<u64> = done.iter().map(|d| d.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..posted).collect::<Vec<_>>(), "each posted request completes once");
    eprintln!(
        "{posted} posted, {} succeeded, RETRY_EXC_ERR {after_kill:?} after the kill (computed {computed:?}), {} flushed",
        err_at,
        posted as usize - err_at - 1
    );
}

/// A CM connection whose peer process is SIGKILLed: the kernel destroys the
/// peer's id, which sends a DREQ; our side sees DISCONNECTED and its QP is
/// in ERR.
#[test]
fn cm_peer_sigkilled_disconnects() {
    let Some(_dev) = common::first_device() else { return };
    let listener = Listener::bind(at(20321)).unwrap();
    let mut kid = Kid::spawn("cm_peer", &[("RVERBS_FAULTS_PORT", "20321".into())]);
    let req = listener.get_request(Some(REPORT)).unwrap();
    let ctx = req.context().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(16).unwrap();
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let mr = pd.alloc_mr(4096, ALL).unwrap();
    req.id().attach_qp(&qp).unwrap();
    qp.post_recv(&[RecvWr::new(5, &[mr.sge(0, 64).unwrap()])]).unwrap();
    let conn = req.accept(qp, &ConnParam::default(), REPORT).unwrap();
    kid.expect("connected", REPORT);
    let t = Instant::now();
    kid.kill();
    // A hang detector: the DREQ goes out when the peer's fd is closed.
    assert!(conn.wait_disconnected(Duration::from_secs(30)).unwrap(), "DISCONNECTED after the peer was killed");
    let took = t.elapsed();
    assert_eq!(conn.state(), QpState::Err);
    let wc = common::poll_n(&mut cq, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (5, WcStatus::WR_FLUSH_ERR));
    eprintln!("DISCONNECTED {took:?} after the kill");
}

/// One thread streams RDMA WRITEs (polling its CQ between posts) while
/// another moves the QP to ERR. Every request a post accepted completes
/// exactly once, SUCCESS before the error and WR_FLUSH_ERR after it; the
/// posts after it are accepted and flushed, or refused, never lost.
#[test]
fn qp_moved_to_err_by_another_thread_while_a_poster_runs() {
    let cap = QpCap { max_send_wr: 64, ..QpCap::default() };
    let Some(mut lb) = common::loopback(QpType::Rc, cap, 256) else { return };
    let mr = lb.pd.alloc_mr(1 << 16, ALL).unwrap();
    let remote = mr.remote(4096).unwrap();
    let sge = [mr.sge(0, 64).unwrap()];
    let control = lb.a.control().clone();
    // iWARP: the CM id moves the QP (rdma_disconnect: ERR, and the kernel
    // flushes); elsewhere a plain modify to ERR.
    let id = lb.cm_ids.first().cloned();
    let moved = Arc::new(AtomicBool::new(false));
    let m2 = moved.clone();
    let other = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        match id {
            Some(id) => id.disconnect().unwrap(),
            None => control.modify(&QpAttr { qp_state: QpState::Err, ..QpAttr::default() }, QpAttrMask::STATE).unwrap(),
        }
        m2.store(true, Ordering::Release);
    });
    let (mut posted, mut refused, mut after) = (0u64, 0u64, 0u32);
    let mut done: Vec<(u64, WcStatus)> = Vec::new();
    let mut buf = [rverbs::Wc::default(); 32];
    let start = Instant::now();
    while after < 200 {
        assert!(start.elapsed() < Duration::from_secs(120), "hang detector: {posted} posted");
        if moved.load(Ordering::Acquire) {
            after += 1;
        }
        if posted - (done.len() as u64) < 48 {
            match lb.a.post_send(&[SendWr::write(posted, &sge, remote).signaled()]) {
                Ok(()) => posted += 1,
                // Index 1: it went in, only the doorbell failed (siw's
                // ENOTCONN while it closes); it completes all the same.
                Err(e) if e.index == 1 => posted += 1,
                Err(_) => refused += 1,
            }
        }
        let n = lb.cq_a.poll(&mut buf);
        done.extend(buf[..n].iter().map(|w| (w.wr_id, w.status)));
    }
    other.join().unwrap();
    let rest = common::poll_n(&mut lb.cq_a, (posted - done.len() as u64) as usize);
    done.extend(rest.iter().map(|w| (w.wr_id, w.status)));
    common::assert_no_more(&mut lb.cq_a);
    let ok = done.iter().take_while(|d| d.1 == WcStatus::SUCCESS).count();
    // After the prefix, flushes; siw may first fail the one request its
    // transmitter had in hand when the connection dropped (LOC_QP_OP_ERR).
    let other = done[ok..].iter().filter(|d| d.1 != WcStatus::WR_FLUSH_ERR).count();
    let in_hand = usize::from(!lb.cm_ids.is_empty());
    assert!(other <= in_hand && done[ok..].iter().all(|d| d.1 != WcStatus::SUCCESS), "{done:?}");
    let mut ids: Vec<u64> = done.iter().map(|d| d.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..posted).collect::<Vec<_>>(), "each posted request completes once");
    assert!(ok > 0, "the stream ran before the error");
    eprintln!("{posted} posted: {ok} succeeded, {} flushed; {refused} posts refused", posted as usize - ok);
}

/// After `rdma_disconnect` returns, a request posted to the QP completes
/// with `WR_FLUSH_ERR` without anyone reading the CM's events. siw's
/// graceful close (SQD) leaves its queues dead but unflushed; rverbs
/// flushes them once the QP is in ERR, which `disconnect` now reaches on
/// iWARP too. RoCE: ERR at once, as before.
#[test]
fn a_request_posted_after_disconnect_is_flushed_without_reading_events() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let (mut cq_a, cq_b) = (ctx.create_cq(16).unwrap(), ctx.create_cq(16).unwrap());
    let mk = |cq| pd.create_qp(&QpInitAttr::new(QpType::Rc, cq)).unwrap();
    let (mut a, b) = (mk(&cq_a), mk(&cq_b));
    let ids = common::cm_connect_pair(&dev, &a, &b);
    let mr = pd.alloc_mr(4096, ALL).unwrap();
    let sge = [mr.sge(0, 64).unwrap()];
    ids[0].disconnect().unwrap();
    assert_eq!(a.state(), QpState::Err, "disconnect leaves the QP in ERR");
    match a.post_send(&[SendWr::send(7, &sge).signaled()]) {
        Ok(()) => {}
        Err(e) => assert_eq!(e.index, 1, "the request went in: {e}"),
    }
    let wc = common::poll_n(&mut cq_a, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (7, WcStatus::WR_FLUSH_ERR));
    common::assert_no_more(&mut cq_a);
}

/// Waits for `child` to exit within `within` (a hang detector, not a time
/// limit): its status, or `None` if it is still running.
fn exits_within(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if start.elapsed() >= within {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Port 1 of `name` is ACTIVE with a RoCE GID again (after a link change),
/// within a hang detector's bound.
fn wait_usable(name: &str) -> rverbs::Device {
    let start = Instant::now();
    loop {
        let dev = rverbs::devices().unwrap().into_iter().find(|d| d.name() == name);
        if let Some(dev) = dev {
            let active = common::sysfs(dev.sysfs_path().join("ports/1/state")).contains("ACTIVE");
            if active && dev.open().and_then(|c| c.default_sgid_index(1)).is_ok() {
                return dev;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{name} did not come back");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One RDMA WRITE between two fresh QPs of `dev`, completed.
fn one_write_works(dev: &rverbs::Device) {
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let (mut cq_a, cq_b) = (ctx.create_cq(8).unwrap(), ctx.create_cq(8).unwrap());
    let mut a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a)).unwrap();
    let b = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_b)).unwrap();
    let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
    let mr = pd.alloc_mr(8192, ALL).unwrap();
    let sge = [mr.sge(0, 64).unwrap()];
    a.post_send(&[SendWr::write(7, &sge, mr.remote(4096).unwrap()).signaled()]).unwrap();
    let wc = common::poll_n(&mut cq_a, 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (7, WcStatus::SUCCESS));
}

/// The netdev under rxe taken down and up: PORT_ERR, then PORT_ACTIVE
/// (GID changes may come between), and then connecting and moving data
/// works again, on new QPs of the context opened before the flap.
#[test]
fn netdev_down_and_up_then_a_reconnect_works() {
    let _g = lock();
    let Some(dev) = common::first_device() else { return };
    let Some(netdev) = common::netdev_of(&dev) else {
        assert!(
            !common::device_required() || !(dev.name().starts_with("rxe") || common::is_iwarp(&dev)),
            "rxe and siw have a netdev"
        );
        return;
    };
    let ctx = dev.open().unwrap();
    let ip = |up: &str| {
        let out = common::run("/usr/bin/ip", &["link", "set", &netdev, up]);
        assert!(out.status.success(), "ip link set {up}: {}", String::from_utf8_lossy(&out.stderr));
    };
    ip("down");
    let ev = ctx.get_async_event_timeout(30_000).unwrap().expect("PORT_ERR (hang detector: 30 s)");
    ip("up");
    assert_eq!(ev.event_type, rverbs::AsyncEventType::PortErr, "{ev:?}");
    let start = Instant::now();
    loop {
        let left = Duration::from_secs(30).saturating_sub(start.elapsed()).as_millis() as i32;
        let ev = ctx.get_async_event_timeout(left).unwrap().expect("PORT_ACTIVE (hang detector: 30 s)");
        if ev.event_type == rverbs::AsyncEventType::PortActive {
            break;
        }
        assert_eq!(ev.event_type, rverbs::AsyncEventType::GidChange, "{ev:?}");
    }
    let dev = wait_usable(dev.name());
    one_write_works(&dev);
}

/// Device removal: rxe cannot disassociate a context, so `rdma link
/// delete` waits until every process has closed the device. Here it is
/// started while this process holds connected QPs, an armed CQ on a
/// channel and a bound CM id: the CM id gets DEVICE_REMOVAL, the delete
/// waits, and it completes once these objects are dropped (nothing of the
/// library keeps an fd, a mapping or a kernel object). The device re-added
/// with the same name then works in this same process.
#[test]
fn link_delete_waits_for_the_objects_and_a_readded_device_works() {
    let _g = lock();
    let Some(dev) = common::first_device() else { return };
    let Some(netdev) = common::netdev_of(&dev) else {
        assert!(
            !common::device_required() || !(dev.name().starts_with("rxe") || common::is_iwarp(&dev)),
            "rxe and siw have a netdev"
        );
        return;
    };
    let name = dev.name().to_owned();
    // `rdma link add`'s type: the software device this is (siw0 or rxe0).
    let kind = if common::is_iwarp(&dev) { "siw" } else { "rxe" };
    // Whatever happens below, the next tests of this boot find the device.
    struct ReAdd(String, String, &'static str);
    impl Drop for ReAdd {
        fn drop(&mut self) {
            if rverbs::devices().map(|d| d.iter().all(|d| d.name() != self.0)).unwrap_or(false) {
                common::run("/usr/bin/rdma", &["link", "add", &self.0, "type", self.2, "netdev", &self.1]);
            }
        }
    }
    let _readd = ReAdd(name.clone(), netdev.clone(), kind);
    let mut del = {
        let Some(mut lb) = common::loopback(QpType::Rc, QpCap::default(), 16) else { return };
        let ch = lb.ctx.create_comp_channel().unwrap();
        let mut armed = lb.ctx.create_cq_with(&CqInitAttr { cqe: 8, channel: Some(&ch), comp_vector: 0 }).unwrap();
        armed.req_notify(false).unwrap();
        let events = cm::EventChannel::new().unwrap();
        let id = events.create_id(cm::PortSpace::Tcp).unwrap();
        id.bind_addr(at(7471)).unwrap();
        let mr = lb.pd.alloc_mr(4096, ALL).unwrap();
        let sge = [mr.sge(0, 8).unwrap()];
        lb.a.post_send(&[SendWr::write(1, &sge, mr.remote(64).unwrap()).signaled()]).unwrap();
        common::poll_n(&mut lb.cq_a, 1);
        let mut del = Command::new("/usr/bin/rdma").args(["link", "delete", &name]).spawn().unwrap();
        let ev = events.get_event_timeout(Duration::from_secs(30)).unwrap().expect("DEVICE_REMOVAL (hang detector)");
        assert_eq!(ev.kind(), cm::EventKind::DeviceRemoval, "{ev:?}");
        assert!(ev.id().same_as(&id));
        drop(ev);
        assert!(exits_within(&mut del, Duration::from_secs(1)).is_none(), "the delete returned while objects lived");
        drop((id, events, armed, ch, mr, lb));
        del
    };
    let status =
        exits_within(&mut del, Duration::from_secs(60)).expect("rdma link delete still waits (hang detector: 60 s)");
    assert!(status.success(), "rdma link delete: {status}");
    assert!(rverbs::devices().unwrap().iter().all(|d| d.name() != name), "{name} is gone");
    let out = common::run("/usr/bin/rdma", &["link", "add", &name, "type", kind, "netdev", &netdev]);
    assert!(out.status.success(), "rdma link add: {}", String::from_utf8_lossy(&out.stderr));
    one_write_works(&wait_usable(&name));
}
