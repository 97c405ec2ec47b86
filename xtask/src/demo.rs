//! `cargo xtask demo`: boots one guest, runs an `rverbs pingpong` server
//! and client on rxe0 under `strace -f`, and prints a short report that
//! checks what rverbs claims (see docs/DEMO.md):
//!
//! 1. no libibverbs or provider library is involved (the binary's ELF
//!    dependencies, the running server's `/proc/PID/maps`);
//! 2. the control path is `RDMA_VERBS_IOCTL` commands, named from the
//!    library's own `RVERBS_LOG=trace` events, plus `mmap` of the rings;
//! 3. the data path makes one doorbell `write()` per post and nothing
//!    else while polling; with `-e`, the completion channel's `read()`s and
//!    one `REQ_NOTIFY_CQ` arm per event;
//! 4. latency and throughput, next to rdma-core's `ibv_rc_pingpong` run in
//!    the same boot with the same arguments.
//!
//! Between 2 and 3, `rverbs rping` (connected by the RDMA connection
//! manager) runs under `strace -f` too: every `write()` on
//! `/dev/infiniband/rdma_cm` is a CM command, named from the library's
//! trace events, and counted per command.
//!
//! The exit status is 1 when any check fails.
//!
//! `cargo xtask demo --two-hosts` instead boots two guests joined by a
//! QEMU stream network and runs RC and UD ping-pongs across it, then
//! `rverbs rping` on rxe0 and on siw0 (iWARP over the guests' TCP)
//! ([`crate::twohost`]).
//!
//! `cargo xtask demo --provider siw` runs the data path on siw0
//! (soft-iWARP) instead, where QPs connect only through the RDMA CM: `rverbs
//! rping` and rdma-core's `rping` (librdmacm, libibverbs and libsiw), each
//! pair under `strace -f` and then timed, in the same boot ([`siw_host`]).
//!
//! The guest prints each file the report needs between `@@DEMO file NAME`
//! and `@@DEMO end NAME`; everything is analysed here, on the host.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::Path;

use crate::console::LineKind;
use crate::elf;
use crate::guest;
use crate::host_tools::{self, Apt, HostTools, Profile};
use crate::kernel::{self, Kernel};
use crate::names::Names;
use crate::project;
use crate::runner::{self, Guest, Knobs, Payload};
use crate::strace::{self, Call};
use crate::twohost;
use crate::util::{note, secs, Dirs, Result};

/// Options of `cargo xtask demo`.
#[derive(Debug, Default)]
pub struct DemoArgs {
    /// Kernel series (default 6.12).
    pub kernel: Option<String>,
    pub two_hosts: bool,
    pub keep: bool,
    /// `--provider siw`: the data path on siw0 against rdma-core's libsiw.
    pub siw: bool,
}

/// Iterations of the timed runs (no strace, no logging), polling and `-e`.
const TIMED_ITERS: u32 = 500;
/// Iterations of the straced polling run.
const TRACED_ITERS: u32 = 200;
/// Iterations of the straced `-e` run.
const EVENT_ITERS: u32 = 100;
/// Message size (rdma-core's default for RC).
const SIZE: u32 = 4096;
/// rxe0's IPv4-mapped RoCE v2 GID in the guest.
const GID_INDEX: u32 = 1;
/// What the marker stats look for (`RVERBS_PINGPONG_MARK`).
const MARK_DIR: &str = "/rverbs-demo-mark";
/// Marker prefix of the demo script.
const DEMO: &str = "@@DEMO";
/// Working directory in the guest.
const DIR: &str = "/tmp/demo";
/// Port and pings of the straced `rverbs rping` pair.
const RPING_PORT: u32 = 18523;
const RPING_COUNT: u32 = 10;
/// The RDMA CM's node.
const RDMA_CM: &str = "/dev/infiniband/rdma_cm";

/// Library names that must not appear in an rverbs process.
const FORBIDDEN: &[&str] = &["ibverbs", "rdmav", "rdmacm", "librxe", "mlx4", "mlx5", "libefa"];
/// Libraries a Rust program may need (the C runtime and the unwinder).
const RUNTIME: &[&str] = &[
    "libc.so.6",
    "libgcc_s.so.1",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
    "linux-vdso.so.1",
];

/// Runs the demo; returns the exit code.
pub fn run(args: &DemoArgs) -> Result<i32> {
    let s = kernel::series(args.kernel.as_deref().unwrap_or(crate::cmd_vm::DEFAULT_KERNEL))?;
    let knobs = Knobs::from_env()?;
    let ws = project::workspace()?;
    let mut apt = Apt::default();
    let tools = host_tools::ensure(&mut apt, Profile::Project)?;
    let cli = project::build_cli_release(&ws)?;
    let dirs = ws.dirs()?;
    let k = kernel::fetch(s, &dirs.cache, &tools, &mut apt)?;
    note(format!("kernel {}: {}", s.name, k.describe()));
    if args.two_hosts {
        return two_hosts(&k, &tools, &mut apt, &dirs, &knobs, &cli);
    }
    if args.siw {
        let k = rverbs_vm::siw_module::with_siw(&k, &dirs.cache, &tools, &mut apt)?;
        return siw_host(&k, &tools, &dirs, &knobs, &cli, args.keep);
    }
    let names = Names::load(&ws.root)?;
    one_host(&k, &tools, &dirs, &knobs, &cli, &names, args.keep)
}

/// `--two-hosts`: the pair, its report, exit 1 unless every mode passed.
fn two_hosts(k: &Kernel, tools: &HostTools, apt: &mut Apt, dirs: &Dirs, knobs: &Knobs, cli: &Path) -> Result<i32> {
    note("booting two guests joined by a QEMU stream network (RC and UD ping-pong, rping on rxe0 then siw0)");
    let show = twohost::progress(knobs.verbose);
    let pair = twohost::run(k, tools, apt, dirs, knobs, cli, &twohost::PairSpec::default(), &show)?;
    println!("==> rverbs pingpong and rping between two hosts");
    for l in pair.report("  ") {
        println!("{l}");
    }
    let (counts, problems) = pair.counts();
    if !problems.is_empty() {
        for l in pair.failure_tails() {
            println!("  {l}");
        }
        println!("FAILED: {}", problems.join("; "));
        return Ok(1);
    }
    println!("==> {} of {} modes passed", counts.passed, counts.passed + counts.failed);
    Ok(0)
}

/// The guest's script: the runs, then every file the report needs.
fn script() -> String {
    let pp = |port: u32, extra: &str| format!("rverbs pingpong -g {GID_INDEX} -s {SIZE} -p {port} {extra}");
    let traced = |tag: &str, side: &str, port: u32, extra: &str, host: &str| {
        format!(
            "RVERBS_LOG=trace RVERBS_LOG_FILE={DIR}/{tag}-{side}.log RVERBS_PINGPONG_MARK={MARK_DIR} \
             timeout 60 strace -f -y -s 64 -o {DIR}/{tag}-{side}.st {}{host}",
            pp(port, extra)
        )
    };
    let traced_ibv = |tag: &str, side: &str, port: u32, extra: &str, host: &str| {
        format!(
            "timeout 60 strace -f -y -s 64 -o {DIR}/{tag}-{side}.st ibv_rc_pingpong -g {GID_INDEX} -s {SIZE} -p {port} \
             {extra}{host}"
        )
    };
    let ip = guest::GUEST_IP.split('/').next().unwrap_or(guest::GUEST_IP);
    let rping = |side: &str, args: &str| {
        format!(
            "RVERBS_LOG=trace RVERBS_LOG_FILE={DIR}/c-{side}.log timeout 60 strace -f -y -s 64 -o {DIR}/c-{side}.st \
             rverbs rping {args} -a {ip} -p {RPING_PORT}"
        )
    };
    let c_srv = rping("server", &format!("-s -S {SIZE}"));
    let c_cli = rping("client", &format!("-c -C {RPING_COUNT} -S {SIZE} -V"));
    let t_args = format!("-n {TRACED_ITERS}");
    let e_args = format!("-e -n {EVENT_ITERS}");
    let n_args = format!("-g {GID_INDEX} -s {SIZE} -n {TIMED_ITERS}");
    format!(
        r#"D={DIR}
mkdir -p $D && cd $D
mark() {{ echo "{DEMO} $*"; }}
send() {{ mark file "$1"; cat "$2"; mark end "$1"; }}
listening() {{
    p=$(printf %04X "$1")
    grep -q ":$p [0-9A-F]*:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}}
# pair TAG PORT PROGRAM SERVER CLIENT: the server in the background, its
# /proc/PID/maps once it listens, then the client; exit codes into files.
pair() {{
    mark step "$1" $(cut -d' ' -f1 /proc/uptime)
    eval "$4" >$D/$1-server.out 2>&1 &
    bg=$!
    i=0
    until listening $2; do
        i=$((i + 1))
        [ $i -le 1200 ] || break
        usleep 50000
    done
    if listening $2; then
        pid=$(pidof $3)
        cat /proc/${{pid%% *}}/maps >$D/$1-server.maps 2>&1
        eval "$5" >$D/$1-client.out 2>&1
        echo $? >$D/$1-client.rc
    else
        echo "the server never listened on port $2" >$D/$1-client.out
        echo 99 >$D/$1-client.rc
        kill $bg
    fi
    wait $bg
    echo $? >$D/$1-server.rc
}}
# cmpair TAG PORT SERVER CLIENT: the same for the RDMA CM, whose listener
# shows in `rdma resource show cm_id`.
cmpair() {{
    mark step "$1" $(cut -d' ' -f1 /proc/uptime)
    eval "$3" >$D/$1-server.out 2>&1 &
    bg=$!
    i=0
    until rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q -e ":$2 " -e ":$2\$"; do
        i=$((i + 1))
        [ $i -le 1200 ] || break
        usleep 50000
    done
    eval "$4" >$D/$1-client.out 2>&1
    echo $? >$D/$1-client.rc
    wait $bg
    echo $? >$D/$1-server.rc
}}
/usr/lib64/ld-linux-x86-64.so.2 --list {bin} >$D/ldd.txt 2>&1
pair t 18515 rverbs "{t_srv}" "{t_cli}"
pair e 18516 rverbs "{e_srv}" "{e_cli}"
pair ti 18521 ibv_rc_pingpong "{ti_srv}" "{ti_cli}"
pair ei 18522 ibv_rc_pingpong "{ei_srv}" "{ei_cli}"
cmpair c {RPING_PORT} "{c_srv}" "{c_cli}"
pair r 18517 rverbs "timeout 60 rverbs pingpong {n_args} -p 18517" "timeout 60 rverbs pingpong {n_args} -p 18517 127.0.0.1"
pair i 18518 ibv_rc_pingpong "timeout 60 ibv_rc_pingpong {n_args} -p 18518" "timeout 60 ibv_rc_pingpong {n_args} -p 18518 127.0.0.1"
pair re 18519 rverbs "timeout 60 rverbs pingpong -e {n_args} -p 18519" "timeout 60 rverbs pingpong -e {n_args} -p 18519 127.0.0.1"
pair ie 18520 ibv_rc_pingpong "timeout 60 ibv_rc_pingpong -e {n_args} -p 18520" "timeout 60 ibv_rc_pingpong -e {n_args} -p 18520 127.0.0.1"
mark step send $(cut -d' ' -f1 /proc/uptime)
cd $D
rm -f [!ti]-server.maps [!t]?-server.maps t?-server.maps
for f in *; do send $f $D/$f; done
mark step done $(cut -d' ' -f1 /proc/uptime)
true
"#,
        bin = guest::RVERBS_BIN,
        t_srv = traced("t", "server", 18515, &t_args, ""),
        t_cli = traced("t", "client", 18515, &t_args, " 127.0.0.1"),
        e_srv = traced("e", "server", 18516, &e_args, ""),
        e_cli = traced("e", "client", 18516, &e_args, " 127.0.0.1"),
        ti_srv = traced_ibv("ti", "server", 18521, &t_args, ""),
        ti_cli = traced_ibv("ti", "client", 18521, &t_args, " 127.0.0.1"),
        ei_srv = traced_ibv("ei", "server", 18522, &e_args, ""),
        ei_cli = traced_ibv("ei", "client", 18522, &e_args, " 127.0.0.1"),
    )
}

fn one_host(
    k: &Kernel,
    tools: &HostTools,
    dirs: &Dirs,
    knobs: &Knobs,
    cli: &Path,
    names: &Names,
    keep: bool,
) -> Result<i32> {
    let payload = Payload {
        files: vec![(guest::RVERBS_BIN.to_owned(), cli.to_path_buf())],
        script: guest::cmd_payload(&[script()]),
        label: "demo",
        ..Default::default()
    };
    note("booting the guest; strace'd and timed ping-pongs follow (about a minute under TCG)");
    let Some(GuestFiles { files, release, accel, boot, log }) =
        run_guest(&Guest { kernel: k, tools, dirs, knobs }, &payload, keep, |step| {
            match step {
                "t" => format!("strace'd rverbs pingpong, polling, -n {TRACED_ITERS}"),
                "e" => format!("strace'd rverbs pingpong -e, -n {EVENT_ITERS}"),
                "ti" => format!("strace'd ibv_rc_pingpong, polling, -n {TRACED_ITERS}"),
                "ei" => format!("strace'd ibv_rc_pingpong -e, -n {EVENT_ITERS}"),
                "c" => format!("strace'd rverbs rping over the RDMA CM, -C {RPING_COUNT}"),
                "r" => format!("timed rverbs pingpong, -n {TIMED_ITERS}"),
                "i" => format!("timed ibv_rc_pingpong, -n {TIMED_ITERS}"),
                "re" => format!("timed rverbs pingpong -e, -n {TIMED_ITERS}"),
                "ie" => format!("timed ibv_rc_pingpong -e, -n {TIMED_ITERS}"),
                _ => return None,
            }
            .into()
        })?
    else {
        return Ok(1);
    };
    let mut r = Report::default();
    r.header(&release, &accel, cli);
    r.no_libibverbs(cli, &files);
    let t = [Traced::new(&files, "t", "server", names), Traced::new(&files, "t", "client", names)];
    let e = [Traced::new(&files, "e", "server", names), Traced::new(&files, "e", "client", names)];
    let ti = [Traced::rdma_core(&files, "ti", "server"), Traced::rdma_core(&files, "ti", "client")];
    let ei = [Traced::rdma_core(&files, "ei", "server"), Traced::rdma_core(&files, "ei", "client")];
    r.control_path(&t, &ti);
    let c = [CmTraced::new(&files, "server"), CmTraced::new(&files, "client")];
    r.cm_path(&c);
    r.data_path(&t, &e, &ti, &ei);
    r.timings(&files);
    r.summary(&boot, &log);
    let mut stdout = std::io::stdout().lock();
    for l in &r.lines {
        let _ = writeln!(stdout, "{l}");
    }
    Ok(i32::from(r.failed > 0))
}

/// Pings of the straced `rping` pairs on siw0 (`--provider siw`).
const SIW_TRACED: u32 = 100;
/// Pings of the timed pairs on siw0.
const SIW_TIMED: u32 = 500;
/// First port of the siw0 pairs (one each).
const SIW_PORT: u32 = 18531;

/// What a demo guest left: its console files, kernel release,
/// accelerator, boot time and console log.
struct GuestFiles {
    files: BTreeMap<String, Vec<String>>,
    release: String,
    accel: String,
    boot: String,
    log: std::path::PathBuf,
}

/// Boots `guest` with `payload`, streaming the console when
/// `RVERBS_VM_VERBOSE` is set and otherwise a note per `step` line,
/// worded by `what` (`None`: "done"). `None` after printing why the guest
/// failed (console tails).
fn run_guest(
    guest: &Guest,
    payload: &Payload,
    keep: bool,
    what: impl Fn(&str) -> Option<String>,
) -> Result<Option<GuestFiles>> {
    let verbose = guest.knobs.verbose;
    let mut show = |kind: LineKind, line: &str| {
        if verbose {
            match kind {
                LineKind::Kernel => eprintln!("kernel: {line}"),
                _ => eprintln!("{line}"),
            }
        } else if let Some(step) = line.strip_prefix(DEMO).and_then(|r| r.trim().strip_prefix("step ")) {
            let mut w = step.split_whitespace();
            let (step, at) = (w.next().unwrap_or(""), w.next().unwrap_or("?"));
            let what = match step {
                "send" => "sending the traces back over the serial console".into(),
                s => what(s).unwrap_or_else(|| "done".into()),
            };
            note(format!("guest at {at} s: {what}"));
        }
    };
    let out = runner::run(guest, payload, keep, &mut show)?;
    if let Some(problem) = out.problem() {
        println!("---- guest console tail:");
        out.tail(40).iter().for_each(|l| println!("{l}"));
        println!("---- kernel console tail:");
        out.kernel_tail(40).iter().for_each(|l| println!("{l}"));
        println!("FAILED: the demo guest: {problem} (console: {})", out.log.display());
        return Ok(None);
    }
    let lines = out.report.runs.first().map(|r| r.log.lines.clone()).unwrap_or_default();
    let files = crate::console_files::collect(&lines, DEMO);
    let release = out.report.release.clone().unwrap_or_else(|| guest.kernel.release.clone());
    Ok(Some(GuestFiles { files, release, accel: out.accel.describe(), boot: secs(out.boot.elapsed), log: out.log }))
}

/// The `--provider siw` guest script: `rverbs rping` and rdma-core's
/// `rping` on siw0, each pair straced, then each timed by the guest's
/// uptime around the client; then every file the report needs.
fn siw_script() -> String {
    let ip = guest::SIW_IP.split('/').next().unwrap_or(guest::SIW_IP);
    let run = |prog: &str, side: &str, port: u32, count: u32| match side {
        "server" => format!("{prog} -s -S {SIZE} -a {ip} -p {port}"),
        _ => format!("{prog} -c -C {count} -S {SIZE} -V -a {ip} -p {port}"),
    };
    let traced = |tag: &str, prog: &str, side: &str, port: u32| {
        format!("timeout 120 strace -f -y -s 64 -o {DIR}/{tag}-{side}.st {}", run(prog, side, port, SIW_TRACED))
    };
    let timed = |prog: &str, side: &str, port: u32| format!("timeout 120 {}", run(prog, side, port, SIW_TIMED));
    let (p0, p1, p2, p3) = (SIW_PORT, SIW_PORT + 1, SIW_PORT + 2, SIW_PORT + 3);
    format!(
        r#"D={DIR}
mkdir -p $D && cd $D
mark() {{ echo "{DEMO} $*"; }}
send() {{ mark file "$1"; cat "$2"; mark end "$1"; }}
# cmpair TAG PORT PROGRAM SERVER CLIENT: the server in the background; once
# its CM id listens, the client, between two reads of /proc/uptime; exit
# codes into files.
cmpair() {{
    mark step "$1" $(cut -d' ' -f1 /proc/uptime)
    eval "$4" >$D/$1-server.out 2>&1 &
    bg=$!
    i=0
    until rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q -e ":$2 " -e ":$2\$"; do
        i=$((i + 1))
        [ $i -le 1200 ] || break
        usleep 50000
    done
    pid=$(pidof $3)
    pid=${{pid%% *}}
    t0=$(cut -d' ' -f1 /proc/uptime)
    eval "$5" >$D/$1-client.out 2>&1 &
    cl=$!
    # The traced pairs: the server's maps once it has the device open (a
    # CM server opens it when the connection request comes).
    case $1 in s|si)
        i=0
        until grep -q /dev/infiniband/uverbs /proc/$pid/maps 2>/dev/null; do
            i=$((i + 1))
            [ $i -le 1000 ] || break
            usleep 20000
        done
        cat /proc/$pid/maps >$D/$1-server.maps 2>&1
    esac
    wait $cl
    echo $? >$D/$1-client.rc
    echo "$t0 $(cut -d' ' -f1 /proc/uptime)" >$D/$1-client.time
    wait $bg
    echo $? >$D/$1-server.rc
}}
/usr/lib64/ld-linux-x86-64.so.2 --list {bin} >$D/ldd.txt 2>&1
cmpair s {p0} rverbs "{s_srv}" "{s_cli}"
cmpair si {p1} rping "{si_srv}" "{si_cli}"
cmpair r {p2} rverbs "{r_srv}" "{r_cli}"
cmpair i {p3} rping "{i_srv}" "{i_cli}"
mark step send $(cut -d' ' -f1 /proc/uptime)
rm -f $D/r-server.maps
for f in *; do send $f $D/$f; done
mark step done $(cut -d' ' -f1 /proc/uptime)
true
"#,
        bin = guest::RVERBS_BIN,
        s_srv = traced("s", "rverbs rping", "server", p0),
        s_cli = traced("s", "rverbs rping", "client", p0),
        si_srv = traced("si", "rping", "server", p1),
        si_cli = traced("si", "rping", "client", p1),
        r_srv = timed("rverbs rping", "server", p2),
        r_cli = timed("rverbs rping", "client", p2),
        i_srv = timed("rping", "server", p3),
        i_cli = timed("rping", "client", p3),
    )
}

/// `--provider siw`: one guest with siw0, [`siw_script`], the report.
fn siw_host(k: &Kernel, tools: &HostTools, dirs: &Dirs, knobs: &Knobs, cli: &Path, keep: bool) -> Result<i32> {
    let payload = Payload {
        files: vec![(guest::RVERBS_BIN.to_owned(), cli.to_path_buf())],
        script: guest::with_siw(&guest::cmd_payload(&[siw_script()])),
        label: "demo",
        ..Default::default()
    };
    note("booting the guest with siw0; strace'd and timed rping pairs follow");
    let Some(GuestFiles { files, release, accel, boot, log }) =
        run_guest(&Guest { kernel: k, tools, dirs, knobs }, &payload, keep, |step| {
            match step {
                "s" => format!("strace'd rverbs rping on siw0, -C {SIW_TRACED}"),
                "si" => format!("strace'd rping (rdma-core, libsiw) on siw0, -C {SIW_TRACED}"),
                "r" => format!("timed rverbs rping, -C {SIW_TIMED}"),
                "i" => format!("timed rping (rdma-core), -C {SIW_TIMED}"),
                _ => return None,
            }
            .into()
        })?
    else {
        return Ok(1);
    };
    let mut r = Report::default();
    r.siw_header(&release, &accel, cli);
    r.no_libibverbs_of(cli, &files, ["s-server.maps", "si-server.maps"], "rping", ["uverbs1", "the siw rings"]);
    let ours = [Traced::siw(&files, "s", "server"), Traced::siw(&files, "s", "client")];
    let theirs = [Traced::siw(&files, "si", "server"), Traced::siw(&files, "si", "client")];
    r.siw_data_path(&ours, &theirs);
    r.siw_timings(&files);
    r.summary(&boot, &log);
    let mut stdout = std::io::stdout().lock();
    for l in &r.lines {
        let _ = writeln!(stdout, "{l}");
    }
    Ok(i32::from(r.failed > 0))
}

/// A row of the siw data-path table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Siw {
    Doorbell,
    ReadEvent,
    ReadEmpty,
    Poll,
    Ioctl,
    CmWrite,
    CmPoll,
    Futex,
    Other(String),
}

/// Every call inside `t`'s exchange as a [`Siw`] row.
fn siw_rows(t: &Traced) -> Vec<Siw> {
    t.inside()
        .iter()
        .map(|c| {
            let fd = c.fd_path().unwrap_or("");
            match c.name.as_str() {
                "write" if is_uverbs(fd) => Siw::Doorbell,
                "write" if fd == RDMA_CM => Siw::CmWrite,
                "ioctl" if c.args.contains("RDMA_VERBS_IOCTL") => Siw::Ioctl,
                "read" if is_event_fd(fd) && c.errno() == Some("EAGAIN") => Siw::ReadEmpty,
                "read" if is_event_fd(fd) && !c.failed() => Siw::ReadEvent,
                "poll" | "ppoll" if c.mentions_fd(is_event_fd) => Siw::Poll,
                "poll" | "ppoll" if c.mentions_fd(|p| p == RDMA_CM) => Siw::CmPoll,
                "futex" => Siw::Futex,
                _ => Siw::Other(c.name.clone()),
            }
        })
        .collect()
}

/// Whether a straced or timed `rping` run (either program) completed: exit
/// 0, or Debian's rping's teardown race after its last ping (see
/// `tests/common/child.rs`); and no data mismatch under `-V`.
fn rping_completed(exit: Option<i32>, out: &[String]) -> bool {
    let race = exit == Some(255) && out.iter().any(|l| l.contains("rdma_get_cm_event: Bad file descriptor"));
    (exit == Some(0) || race) && !out.iter().any(|l| l.contains("mismatch"))
}

/// One straced process: its calls, its log, the exchange window.
struct Traced {
    side: &'static str,
    calls: Vec<Call>,
    /// Index of the `data-path-begin` / `-end` stat in `calls` (for a
    /// run without markers, of the calls just before and after the
    /// exchange, which then belong to the control path).
    window: Option<(usize, usize)>,
    /// The window's ends are marker stats (not part of either path).
    marked: bool,
    /// `calls` index of each RDMA_VERBS_IOCTL -> its name.
    ioctl_names: BTreeMap<usize, String>,
    /// RDMA_VERBS_IOCTL calls and ioctl events of the log.
    ioctls: usize,
    events: usize,
    log_path: String,
    /// The kernel's count of completion events read (`CQ destroyed comp_events=`).
    comp_events: Option<u64>,
    exit: Option<i32>,
    /// The program's own output.
    out: Vec<String>,
}

/// The ioctl outcome lines of `RVERBS_LOG=trace` (providers/src/sys/mod.rs):
/// one per `RDMA_VERBS_IOCTL`, written right after it returns.
fn ioctl_event(line: &str, names: &Names) -> Option<String> {
    let field =
        |k: &str| line.split_whitespace().find_map(|w| w.strip_prefix(k)?.strip_prefix('=')).map(|v| v.to_owned());
    let ok = line.contains("uverbs command ok") && line.contains("path=Ioctl");
    let failed = line.contains("uverbs ioctl failed");
    let unsupported = line.contains("method not supported");
    if line.contains("uverbs ioctl: ENOTTY") {
        return Some("(no ioctl support: ENOTTY)".into());
    }
    if !(ok || failed || unsupported) {
        return None;
    }
    let object: u16 = field("object")?.parse().ok()?;
    let method: u16 = field("method")?.parse().ok()?;
    let mut name = format!("{:<11} {}", names.object(object), names.method(object, method));
    if let Some(cmd) = field("write_cmd").and_then(|c| c.parse::<u64>().ok()) {
        name.push_str(&format!(": {}", names.write_cmd(cmd)));
    }
    if failed {
        name.push_str(&format!(" (failed: {})", field("errno").unwrap_or_default()));
    } else if unsupported {
        name.push_str(" (not supported)");
    }
    Some(name)
}

impl Traced {
    fn new(files: &BTreeMap<String, Vec<String>>, tag: &str, side: &'static str, names: &Names) -> Self {
        let empty = Vec::new();
        let get = |ext: &str| files.get(&format!("{tag}-{side}.{ext}")).unwrap_or(&empty);
        let calls = strace::parse(get("st"));
        let log = get("log");
        let at = |what: &str| calls.iter().position(|c| c.quoted().is_some_and(|q| q == format!("{MARK_DIR}/{what}")));
        let window = match (at("data-path-begin"), at("data-path-end")) {
            (Some(b), Some(e)) if b < e => Some((b, e)),
            _ => None,
        };
        let events: Vec<String> = log.iter().filter_map(|l| ioctl_event(l, names)).collect();
        let ioctl_idx: Vec<usize> = calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name == "ioctl" && c.args.contains("RDMA_VERBS_IOCTL"))
            .map(|(i, _)| i)
            .collect();
        let ioctl_names = if events.len() == ioctl_idx.len() {
            ioctl_idx.iter().copied().zip(events.iter().cloned()).collect()
        } else {
            BTreeMap::new()
        };
        let comp_events = log
            .iter()
            .filter(|l| l.contains("CQ destroyed"))
            .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("comp_events=")?.parse().ok()));
        Traced {
            side,
            marked: true,
            ioctls: ioctl_idx.len(),
            events: events.len(),
            calls,
            window,
            ioctl_names,
            log_path: format!("{DIR}/{tag}-{side}.log"),
            comp_events,
            exit: get("rc").first().and_then(|l| l.trim().parse().ok()),
            out: get("out").clone(),
        }
    }

    /// A straced `ibv_rc_pingpong`: no markers and no log, so its exchange
    /// is taken to run from its first doorbell to its last completion
    /// event read (and the arm right after it), or to its last doorbell
    /// when polling; its ioctls stay unnamed.
    fn rdma_core(files: &BTreeMap<String, Vec<String>>, tag: &str, side: &'static str) -> Self {
        let empty = Vec::new();
        let get = |ext: &str| files.get(&format!("{tag}-{side}.{ext}")).unwrap_or(&empty);
        let calls = strace::parse(get("st"));
        let doorbell = |c: &Call| c.name == "write" && c.fd_path().is_some_and(is_dev);
        let event_read = |c: &Call| c.name == "read" && c.fd_path().is_some_and(is_event_fd);
        let first = calls.iter().position(doorbell);
        let last = calls.iter().rposition(|c| doorbell(c) || event_read(c)).map(|i| {
            let arm = calls.get(i + 1).is_some_and(|c| event_read(&calls[i]) && c.name == "ioctl");
            i + usize::from(arm)
        });
        let window = match (first, last) {
            (Some(b), Some(e)) if b > 0 && b <= e => Some((b - 1, e + 1)),
            _ => None,
        };
        let ioctls = calls.iter().filter(|c| c.name == "ioctl" && c.args.contains("RDMA_VERBS_IOCTL")).count();
        Traced {
            side,
            marked: false,
            ioctls,
            events: 0,
            calls,
            window,
            ioctl_names: BTreeMap::new(),
            // No log: a path no call can name.
            log_path: "<no log>".into(),
            comp_events: None,
            exit: get("rc").first().and_then(|l| l.trim().parse().ok()),
            out: get("out").clone(),
        }
    }

    /// A straced `rping` on siw0 (either program): no markers, so the
    /// exchange runs from its first doorbell (a `write()` on the uverbs
    /// node, not the CM's) to its last doorbell or completion event read.
    fn siw(files: &BTreeMap<String, Vec<String>>, tag: &str, side: &'static str) -> Self {
        let mut t = Traced::rdma_core(files, tag, side);
        let doorbell = |c: &Call| c.name == "write" && c.fd_path().is_some_and(is_uverbs);
        let event_read = |c: &Call| c.name == "read" && c.fd_path().is_some_and(is_event_fd);
        let first = t.calls.iter().position(doorbell);
        let last = t.calls.iter().rposition(|c| doorbell(c) || event_read(c));
        t.window = match (first, last) {
            (Some(b), Some(e)) if b > 0 && b <= e => Some((b - 1, e + 1)),
            _ => None,
        };
        t
    }

    fn outside(&self, i: usize) -> bool {
        match self.window {
            Some((b, e)) if self.marked => !(b <= i && i <= e),
            Some((b, e)) => !(b < i && i < e),
            None => true,
        }
    }

    fn inside(&self) -> &[Call] {
        match self.window {
            Some((b, e)) => &self.calls[b + 1..e],
            None => &[],
        }
    }

    fn ioctl_name(&self, i: usize) -> String {
        self.ioctl_names.get(&i).cloned().unwrap_or_else(|| "(unnamed)".into())
    }
}

/// One straced `rverbs rping` process: its calls on the CM's node and the
/// CM commands its trace log names.
struct CmTraced {
    side: &'static str,
    /// `openat` of the node.
    opens: usize,
    /// `write()`s on the node: one per CM command.
    writes: usize,
    /// `poll`/`ppoll` naming the node (waiting for an event).
    polls: usize,
    /// The commands of the trace log, in order (`GET_EVENT`, `CONNECT`...).
    cmds: Vec<String>,
    exit: Option<i32>,
    out: Vec<String>,
}

/// The command a line of the trace log names (`providers/src/cm/mod.rs`:
/// one `rdma_cm command` event per `write()`, done, failed or EAGAIN).
fn cm_command(line: &str) -> Option<String> {
    if !line.contains("rdma_cm command") {
        return None;
    }
    let cmd = line.split_whitespace().find_map(|w| w.strip_prefix("cmd="))?;
    let mut name = cmd.to_owned();
    if line.contains("no event (EAGAIN)") {
        name.push_str(" (EAGAIN)");
    } else if line.contains("rdma_cm command failed") {
        name.push_str(" (failed)");
    }
    Some(name)
}

impl CmTraced {
    fn new(files: &BTreeMap<String, Vec<String>>, side: &'static str) -> Self {
        let empty = Vec::new();
        let get = |ext: &str| files.get(&format!("c-{side}.{ext}")).unwrap_or(&empty);
        let calls = strace::parse(get("st"));
        let on_cm = |c: &Call| c.fd_path() == Some(RDMA_CM);
        CmTraced {
            side,
            opens: calls.iter().filter(|c| c.name.starts_with("open") && c.quoted() == Some(RDMA_CM)).count(),
            writes: calls.iter().filter(|c| c.name == "write" && on_cm(c)).count(),
            polls: calls
                .iter()
                .filter(|c| matches!(c.name.as_str(), "poll" | "ppoll") && c.mentions_fd(|p| p == RDMA_CM))
                .count(),
            cmds: get("log").iter().filter_map(|l| cm_command(l)).collect(),
            exit: get("rc").first().and_then(|l| l.trim().parse().ok()),
            out: get("out").clone(),
        }
    }
}

/// A table row's key: where the call goes in the control-path table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Ctl {
    Open,
    Ioctl(String),
    Mmap,
    Munmap,
    Write,
    Close,
    OtherDevice,
    Sysfs,
    Netlink,
    Tcp,
    Stdio,
    Log,
    Runtime,
}

fn is_dev(p: &str) -> bool {
    p.starts_with("/dev/infiniband/")
}

fn is_uverbs(p: &str) -> bool {
    p.starts_with("/dev/infiniband/uverbs")
}

fn is_event_fd(p: &str) -> bool {
    p.starts_with("anon_inode:[infiniband")
}

/// Sorts every call outside the exchange into a [`Ctl`] row.
fn control_rows(t: &Traced) -> Vec<Ctl> {
    let mut rings: HashSet<String> = HashSet::new();
    let mut netlink: HashSet<String> = HashSet::new();
    let mut rows = Vec::new();
    for (i, c) in t.calls.iter().enumerate() {
        if !t.outside(i) {
            continue;
        }
        let fd = c.fd_path().unwrap_or("");
        let row = match c.name.as_str() {
            "openat" | "open" if c.quoted().is_some_and(is_dev) => Ctl::Open,
            "ioctl" if c.args.contains("RDMA_VERBS_IOCTL") => Ctl::Ioctl(t.ioctl_name(i)),
            "mmap" if c.mentions_fd(is_dev) => {
                rings.insert(c.ret.clone());
                Ctl::Mmap
            }
            "munmap" if c.arg(0).is_some_and(|a| rings.contains(a)) => Ctl::Munmap,
            "write" if is_dev(fd) => Ctl::Write,
            "close" if is_dev(fd) => Ctl::Close,
            _ if is_dev(fd) || is_event_fd(fd) => Ctl::OtherDevice,
            "socket" if c.args.contains("AF_NETLINK") => {
                if let Some(p) = c.ret_path() {
                    netlink.insert(p.to_owned());
                }
                Ctl::Netlink
            }
            _ if netlink.contains(fd) => Ctl::Netlink,
            "socket" => Ctl::Tcp,
            _ if fd.starts_with("socket:[") => Ctl::Tcp,
            _ if fd == t.log_path || c.quoted() == Some(t.log_path.as_str()) => Ctl::Log,
            _ if fd.starts_with("/sys/") || c.quoted().is_some_and(|q| q.starts_with("/sys/")) => Ctl::Sysfs,
            "write" if c.args.starts_with("1<") || c.args.starts_with("2<") => Ctl::Stdio,
            _ => Ctl::Runtime,
        };
        rows.push(row);
    }
    rows
}

/// A row of the data-path table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Dat {
    Doorbell,
    Ioctl(String),
    ReadEvent,
    ReadEmpty,
    Poll,
    Log,
    Other(String),
}

fn data_rows(t: &Traced) -> Vec<Dat> {
    let Some((b, _)) = t.window else { return Vec::new() };
    t.inside()
        .iter()
        .enumerate()
        .map(|(j, c)| {
            let fd = c.fd_path().unwrap_or("");
            match c.name.as_str() {
                "write" if is_dev(fd) => Dat::Doorbell,
                "ioctl" if c.args.contains("RDMA_VERBS_IOCTL") => Dat::Ioctl(t.ioctl_name(b + 1 + j)),
                "read" if is_event_fd(fd) && c.errno() == Some("EAGAIN") => Dat::ReadEmpty,
                "read" if is_event_fd(fd) && !c.failed() => Dat::ReadEvent,
                "poll" | "ppoll" if c.mentions_fd(is_event_fd) => Dat::Poll,
                "write" if fd == t.log_path => Dat::Log,
                _ => Dat::Other(c.name.clone()),
            }
        })
        .collect()
}

#[derive(Default)]
struct Report {
    lines: Vec<String>,
    checks: usize,
    failed: usize,
    failures: Vec<String>,
}

/// Width of a table's label column.
const LABEL: usize = 52;

impl Report {
    fn say(&mut self, s: impl Into<String>) {
        self.lines.push(s.into());
    }

    /// Records a check; returns the verdict word for the row.
    fn check(&mut self, ok: bool, what: impl Into<String>) -> &'static str {
        self.checks += 1;
        if ok {
            "ok"
        } else {
            self.failed += 1;
            self.failures.push(what.into());
            "FAIL"
        }
    }

    /// `  label ....  verdict value`.
    fn row(&mut self, label: &str, value: &str, verdict: &str) {
        let line = format!("  {label:<44} {verdict:<4} {value}");
        self.say(line.trim_end());
    }

    /// `  label ....  a b  note`: server and client.
    fn row2(&mut self, label: &str, a: impl ToString, b: impl ToString, note: &str) {
        let line = format!("  {label:<LABEL$} {:>7} {:>7}  {note}", a.to_string(), b.to_string());
        self.say(line.trim_end());
    }

    /// `  label ....  a b c d  note`: rverbs' server and client, rdma-core's.
    fn row4(&mut self, label: &str, v: [String; 4], note: &str) {
        let line = format!("  {label:<LABEL$} {:>7} {:>7}  {:>9} {:>7}  {note}", v[0], v[1], v[2], v[3]);
        self.say(line.trim_end());
    }

    fn header(&mut self, release: &str, accel: &str, cli: &Path) {
        let profile = if cli.components().any(|c| c.as_os_str() == "release") { "release" } else { "debug" };
        self.say(format!(
            "rverbs demo: Linux {release} under QEMU ({accel}, 1 vCPU); rxe0 on veth v0, {}",
            guest::GUEST_IP
        ));
        self.say(format!(
            "rverbs pingpong ({profile} build) server and client on rxe0, GID index {GID_INDEX} (RoCE v2), {SIZE}-byte SENDs"
        ));
    }

    fn no_libibverbs(&mut self, cli: &Path, files: &BTreeMap<String, Vec<String>>) {
        self.no_libibverbs_of(
            cli,
            files,
            ["t-server.maps", "i-server.maps"],
            "ibv_rc_pingpong",
            ["uverbs0", "the rxe rings"],
        );
    }

    /// [`Self::no_libibverbs`] with the maps of `maps[0]` (the running
    /// rverbs server) against `maps[1]` (rdma-core's program `theirs`).
    fn no_libibverbs_of(
        &mut self,
        cli: &Path,
        files: &BTreeMap<String, Vec<String>>,
        maps: [&str; 2],
        theirs_name: &str,
        [node, rings]: [&str; 2],
    ) {
        self.say("");
        self.say("1. No libibverbs, no provider library");
        let bad = |s: &str| FORBIDDEN.iter().any(|f| s.contains(f));
        // The binary's DT_NEEDED.
        let (value, ok) = match elf::needed(cli) {
            Ok(n) => (n.join(" "), n.iter().all(|l| RUNTIME.contains(&l.as_str()) && !bad(l))),
            Err(e) => (e, false),
        };
        let v = self.check(ok, "rverbs needs a library besides the C runtime");
        self.row("rverbs' ELF NEEDED (host, like readelf -d)", &value, v);
        // What the guest's loader resolves.
        let ldd = files.get("ldd.txt").cloned().unwrap_or_default();
        let (ok, shown) = loader_verdict(&ldd);
        let v = self.check(ok, "the guest's loader maps more than the C runtime for rverbs");
        self.row("what the guest's ld.so loads for it", &shown, v);
        // The running server's mappings.
        let (paths, uverbs) = mapped(files.get(maps[0]));
        let ok = !paths.is_empty() && !paths.iter().any(|p| bad(p)) && uverbs > 0;
        let v = self.check(ok, "the rverbs server maps a verbs library (or no uverbs rings)");
        let shown: Vec<String> = paths.iter().map(|p| p.rsplit('/').next().unwrap_or(p).to_owned()).collect();
        self.row("the running rverbs server's /proc/PID/maps", &shown.join(" "), v);
        self.row("", &format!("     + /dev/infiniband/{node} x{uverbs} ({rings})"), "");
        // The contrast: rdma-core's program maps exactly what we look for.
        let (ibv, _) = mapped(files.get(maps[1]));
        let theirs: Vec<String> =
            ibv.iter().filter(|p| bad(p)).map(|p| p.rsplit('/').next().unwrap_or(p).to_owned()).collect();
        let v = self
            .check(!theirs.is_empty(), format!("{theirs_name}'s maps show no verbs library: the check sees nothing"));
        self.row(&format!("for contrast: {theirs_name}'s maps have"), &theirs.join(" "), v);
    }

    fn control_path(&mut self, t: &[Traced; 2], ibv: &[Traced; 2]) {
        self.say("");
        self.say("2. Control path: every syscall outside the exchange (strace -f -y; names from RVERBS_LOG=trace)");
        self.row4("", ["rverbs", "", "rdma-core", ""].map(String::from), "");
        self.row4("", ["server", "client", "server", "client"].map(String::from), "");
        let rows = [control_rows(&t[0]), control_rows(&t[1]), control_rows(&ibv[0]), control_rows(&ibv[1])];
        let count = |f: &dyn Fn(&Ctl) -> bool| rows.each_ref().map(|r| r.iter().filter(|x| f(x)).count().to_string());
        self.row4("openat  /dev/infiniband/uverbs0", count(&|r| *r == Ctl::Open), "");
        self.row4("ioctl   RDMA_VERBS_IOCTL on uverbs0, of which", count(&|r| matches!(r, Ctl::Ioctl(_))), "");
        // Named rows (rverbs' own trace events) in the order the server made them.
        let mut order: Vec<String> = Vec::new();
        for r in rows[0].iter().chain(rows[1].iter()) {
            if let Ctl::Ioctl(n) = r {
                if !order.contains(n) {
                    order.push(n.clone());
                }
            }
        }
        for n in &order {
            let mut c = count(&|r| *r == Ctl::Ioctl(n.clone()));
            c[2].clear();
            c[3].clear();
            self.row4(&format!("          {n}"), c, "");
        }
        self.row4("mmap    uverbs0: the rxe CQ, SQ and RQ rings", count(&|r| *r == Ctl::Mmap), "");
        self.row4("munmap  those rings", count(&|r| *r == Ctl::Munmap), "");
        self.row4("write   uverbs0 (legacy write() commands)", count(&|r| *r == Ctl::Write), "");
        self.row4("close   uverbs0", count(&|r| *r == Ctl::Close), "");
        self.row4("statx, fcntl, close on uverbs0 / event fds", count(&|r| *r == Ctl::OtherDevice), "");
        for (what, key) in [
            ("sysfs", Ctl::Sysfs),
            ("RDMA netlink", Ctl::Netlink),
            ("TCP (the address exchange)", Ctl::Tcp),
            ("stdout", Ctl::Stdio),
            ("RVERBS_LOG (the demo's tracing)", Ctl::Log),
            ("start-up, libraries, exit", Ctl::Runtime),
        ] {
            self.row4(&format!("other: {what}"), count(&|r| *r == key), "");
        }
        let all = rows.each_ref().map(|r| r.len().to_string());
        self.row4("all syscalls outside the exchange", all, "");
        for x in t {
            let ok = x.ioctls > 0 && x.ioctls == x.events && x.window.is_some() && x.exit == Some(0);
            let what = format!(
                "{}: {} RDMA_VERBS_IOCTLs, {} named by the library's trace events{}{}",
                x.side,
                x.ioctls,
                x.events,
                if x.window.is_some() { "" } else { ", no exchange markers" },
                if x.exit == Some(0) { String::new() } else { format!(", exit {:?}", x.exit) }
            );
            let v = self.check(ok, what.clone());
            if x.exit != Some(0) {
                let tail: Vec<String> = x.out.iter().rev().take(4).rev().cloned().collect();
                self.say(format!("  {} exited {:?}: {}", x.side, x.exit, tail.join(" | ")));
            }
            self.row(
                &format!("rverbs {}: every ioctl named by a trace event", x.side),
                &format!("{}/{}", x.events, x.ioctls),
                v,
            );
        }
        let ok = ibv.iter().all(|x| x.exit == Some(0) && x.window.is_some());
        let v = self.check(ok, "the straced ibv_rc_pingpong runs did not complete");
        self.row("rdma-core's straced runs completed", "", v);
    }

    fn cm_path(&mut self, c: &[CmTraced; 2]) {
        self.say("");
        self.say(format!(
            "2b. Connection manager: rverbs rping -C {RPING_COUNT} -S {SIZE} -V, every syscall on {RDMA_CM} (names from RVERBS_LOG=trace)"
        ));
        self.row2("", "server", "client", "");
        self.row2(&format!("openat  {RDMA_CM}"), c[0].opens, c[1].opens, "");
        self.row2("write   rdma_cm: one per CM command, of which", c[0].writes, c[1].writes, "");
        let mut order: Vec<String> = Vec::new();
        for n in c[0].cmds.iter().chain(c[1].cmds.iter()) {
            if !order.contains(n) {
                order.push(n.clone());
            }
        }
        for n in &order {
            let count = |x: &CmTraced| x.cmds.iter().filter(|m| *m == n).count();
            self.row2(&format!("          {n}"), count(&c[0]), count(&c[1]), "");
        }
        self.row2("poll    rdma_cm (waiting for an event)", c[0].polls, c[1].polls, "");
        for x in c {
            let has = |cmd: &str| x.cmds.iter().any(|m| m == cmd);
            let role_cmds = if x.side == "server" {
                ["BIND", "LISTEN", "ACCEPT"]
            } else {
                ["RESOLVE_ADDR", "RESOLVE_ROUTE", "CONNECT"]
            };
            let ok = x.exit == Some(0) && x.writes > 0 && x.writes == x.cmds.len() && role_cmds.iter().all(|m| has(m));
            let what = format!(
                "{}: {} rdma_cm writes, {} named by the library's trace events{}",
                x.side,
                x.writes,
                x.cmds.len(),
                if x.exit == Some(0) { String::new() } else { format!(", exit {:?}", x.exit) }
            );
            let v = self.check(ok, what);
            if x.exit != Some(0) {
                let tail: Vec<String> = x.out.iter().rev().take(4).rev().cloned().collect();
                self.say(format!("  {} exited {:?}: {}", x.side, x.exit, tail.join(" | ")));
            }
            self.row(
                &format!("{}: every CM command named ({})", x.side, role_cmds.join(", ")),
                &format!("{}/{}", x.cmds.len(), x.writes),
                v,
            );
        }
    }

    fn data_path(&mut self, t: &[Traced; 2], e: &[Traced; 2], ti: &[Traced; 2], ei: &[Traced; 2]) {
        self.say("");
        self.say("3. Data path: every syscall of the exchange loop (rverbs: between the marker stats;");
        self.say("   rdma-core: from its first doorbell to its last completion event)");
        self.say(format!("  polling, -n {TRACED_ITERS} (each side posts {TRACED_ITERS} sends):"));
        self.row4("", ["rverbs", "", "rdma-core", ""].map(String::from), "");
        self.row4("", ["server", "client", "server", "client"].map(String::from), "");
        let rows = [data_rows(&t[0]), data_rows(&t[1]), data_rows(&ti[0]), data_rows(&ti[1])];
        let count =
            |rows: &[Vec<Dat>; 4], f: &dyn Fn(&Dat) -> bool| rows.each_ref().map(|r| r.iter().filter(|x| f(x)).count());
        let text = |c: [usize; 4]| c.map(|n| n.to_string());
        let c = count(&rows, &|r| *r == Dat::Doorbell);
        let ok = t.iter().all(|x| x.window.is_some()) && c[0] == TRACED_ITERS as usize && c[1] == c[0];
        let v = self.check(ok, format!("polling: {}/{} doorbell writes for {TRACED_ITERS} posts per side", c[0], c[1]));
        self.row4("write  uverbs0: rxe doorbell (POST_SEND, 0 WRs)", text(c), &format!("= posts  {v}"));
        let c = count(&rows, &|r| *r != Dat::Doorbell);
        let ours = [rows[0].clone(), rows[1].clone()];
        let v = self.check(c[0] + c[1] == 0, format!("polling: other syscalls in the loop: {}", other_names(&ours)));
        self.row4("anything else (poll, read, clock_gettime...)", text(c), &format!("         {v}"));

        self.say(format!("  completion events (-e), -n {EVENT_ITERS}:"));
        let rows = [data_rows(&e[0]), data_rows(&e[1]), data_rows(&ei[0]), data_rows(&ei[1])];
        let c = count(&rows, &|r| *r == Dat::Doorbell);
        let ok =
            e.iter().all(|x| x.window.is_some() && x.exit == Some(0)) && c[0] == EVENT_ITERS as usize && c[1] == c[0];
        let v = self.check(ok, format!("-e: {}/{} doorbell writes for {EVENT_ITERS} posts per side", c[0], c[1]));
        self.row4("write  uverbs0: rxe doorbell", text(c), &format!("= posts  {v}"));
        let reads = count(&rows, &|r| *r == Dat::ReadEvent);
        self.row4("read   completion channel: one event", text(reads), "");
        self.row4("read   completion channel: EAGAIN (none yet)", text(count(&rows, &|r| *r == Dat::ReadEmpty)), "");
        self.row4("poll   completion channel (sleep until one)", text(count(&rows, &|r| *r == Dat::Poll)), "");
        // rdma-core's ioctls in its loop are its arms (it names none).
        let arm =
            |r: &Dat| matches!(r, Dat::Ioctl(n) if n.ends_with("INVOKE_WRITE: REQ_NOTIFY_CQ") || n == "(unnamed)");
        let arms = count(&rows, &arm);
        let v = self.check(
            arms[0] == reads[0] && arms[1] == reads[1] && arms[0] > 0,
            format!("-e: {}/{} REQ_NOTIFY_CQ arms for {}/{} events", arms[0], arms[1], reads[0], reads[1]),
        );
        self.row4("ioctl  INVOKE_WRITE: REQ_NOTIFY_CQ (re-arm)", text(arms), &format!("= events {v}"));
        let kernel: Vec<String> = e.iter().map(|x| x.comp_events.map_or("?".into(), |c| c.to_string())).collect();
        let ok = e[0].comp_events == Some(reads[0] as u64) && e[1].comp_events == Some(reads[1] as u64);
        let v = self.check(ok, "-e: the kernel's count of events read differs from the reads seen");
        self.row4(
            "kernel's count of events read (CQ destroy)",
            [kernel[0].clone(), kernel[1].clone(), String::new(), String::new()],
            &format!("= events {v}"),
        );
        self.row4("write  RVERBS_LOG's own lines (the demo's)", text(count(&rows, &|r| *r == Dat::Log)), "");
        let rest = |r: &Dat| matches!(r, Dat::Other(_)) || (matches!(r, Dat::Ioctl(_)) && !arm(r));
        let c = count(&rows, &rest);
        let ours = [rows[0].clone(), rows[1].clone()];
        let v = self.check(c[0] + c[1] == 0, format!("-e: other syscalls in the loop: {}", other_names(&ours)));
        self.row4("anything else", text(c), &format!("         {v}"));
        let all = rows.each_ref().map(|r| (r.len() - r.iter().filter(|x| **x == Dat::Log).count()).to_string());
        self.row4("all, without the log's lines", all, "");
    }

    fn timings(&mut self, files: &BTreeMap<String, Vec<String>>) {
        self.say("");
        self.say(format!(
            "4. Latency and throughput, same boot, same arguments (-n {TIMED_ITERS} -s {SIZE} -g {GID_INDEX}), no strace, no logging"
        ));
        self.say(format!("  {:<27} {:>17}   {:>17}", "", "usec/iter", "Mbit/sec"));
        self.say(format!("  {:<27} {:>8} {:>8}   {:>8} {:>8}", "", "server", "client", "server", "client"));
        let mut all_ok = true;
        for (tag, mode, prog) in [
            ("r", "polling", "rverbs pingpong"),
            ("i", "", "ibv_rc_pingpong"),
            ("re", "-e", "rverbs pingpong"),
            ("ie", "", "ibv_rc_pingpong"),
        ] {
            let side = |s: &str| twohost::Side {
                lines: files.get(&format!("{tag}-{s}.out")).cloned().unwrap_or_default(),
                exit: files.get(&format!("{tag}-{s}.rc")).and_then(|v| v.first()?.trim().parse().ok()),
                ..Default::default()
            };
            let (srv, cli) = (side("server"), side("client"));
            let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.1}"));
            let ok = srv.exit == Some(0)
                && cli.exit == Some(0)
                && srv.iters() == Some(TIMED_ITERS)
                && cli.iters() == Some(TIMED_ITERS);
            all_ok &= ok;
            self.say(format!(
                "  {mode:<8} {prog:<18} {:>8} {:>8}   {:>8} {:>8}",
                f(srv.usec_per_iter()),
                f(cli.usec_per_iter()),
                f(srv.mbit()),
                f(cli.mbit())
            ));
            if !ok {
                let why: Vec<String> = srv.lines.iter().chain(cli.lines.iter()).rev().take(3).cloned().collect();
                self.say(format!("    exit {:?}/{:?}: {}", srv.exit, cli.exit, why.join(" | ")));
            }
        }
        let v = self.check(all_ok, "a timed run failed");
        self.row("all four pairs completed every iteration", "", v);
        self.say("  (one emulated vCPU: a polling side keeps the CPU until the scheduler hands it to the");
        self.say("  other side and to rxe's kernel worker, so polling times the scheduler; -e times the stack)");
    }

    fn siw_header(&mut self, release: &str, accel: &str, cli: &Path) {
        let profile = if cli.components().any(|c| c.as_os_str() == "release") { "release" } else { "debug" };
        self.say(format!(
            "rverbs demo on siw: Linux {release} under QEMU ({accel}, 1 vCPU); siw0 (soft-iWARP) on veth v2, {}",
            guest::SIW_IP
        ));
        self.say(format!(
            "rverbs rping ({profile} build) and rdma-core's rping (librdmacm, libibverbs, libsiw), -S {SIZE} -V, \
             server and client on siw0"
        ));
    }

    /// The exchange of the straced `rping` pairs on siw0, rverbs' next to
    /// rdma-core's: every syscall from the first doorbell to the last
    /// doorbell or completion event, per run and per ping.
    fn siw_data_path(&mut self, ours: &[Traced; 2], theirs: &[Traced; 2]) {
        self.say("");
        self.say(format!(
            "2. Data path on siw0: every syscall of rping's loop, -C {SIW_TRACED} (strace -f: all threads; from the first"
        ));
        self.say("   doorbell to the last doorbell or completion event)");
        self.row4("", ["rverbs", "", "rdma-core", ""].map(String::from), "");
        self.row4("", ["server", "client", "server", "client"].map(String::from), "");
        let all4 = [&ours[0], &ours[1], &theirs[0], &theirs[1]];
        let rows = all4.map(siw_rows);
        let count = |f: &dyn Fn(&Siw) -> bool| rows.each_ref().map(|r| r.iter().filter(|x| f(x)).count());
        let text = |c: [usize; 4]| c.map(|n| n.to_string());
        let doorbells = count(&|r| *r == Siw::Doorbell);
        self.row4("write  uverbs: siw doorbell (when the SQ was idle)", text(doorbells), "");
        let reads = count(&|r| *r == Siw::ReadEvent);
        self.row4("read   completion channel: one event", text(reads), "");
        self.row4("read   completion channel: EAGAIN (none yet)", text(count(&|r| *r == Siw::ReadEmpty)), "");
        self.row4("poll   completion channel (sleep until one)", text(count(&|r| *r == Siw::Poll)), "");
        let ioctls = count(&|r| *r == Siw::Ioctl);
        self.row4("ioctl  RDMA_VERBS_IOCTL (siw arms the CQ by a store)", text(ioctls), "");
        self.row4("write  rdma_cm: CM commands (the CM thread)", text(count(&|r| *r == Siw::CmWrite)), "");
        self.row4("poll   rdma_cm (the CM thread waiting)", text(count(&|r| *r == Siw::CmPoll)), "");
        self.row4("futex  (threads handing over)", text(count(&|r| *r == Siw::Futex)), "");
        self.row4("anything else", text(count(&|r| matches!(r, Siw::Other(_)))), "");
        let all = rows.each_ref().map(|r| r.len());
        self.row4("all", text(all), "");
        self.row4("all, per ping", all.map(|n| format!("{:.1}", n as f64 / f64::from(SIW_TRACED))), "");
        self.row4("doorbells per ping", doorbells.map(|n| format!("{:.2}", n as f64 / f64::from(SIW_TRACED))), "");
        for (i, x) in all4.iter().enumerate() {
            let mut other: BTreeMap<&str, usize> = BTreeMap::new();
            for r in &rows[i] {
                if let Siw::Other(n) = r {
                    *other.entry(n.as_str()).or_default() += 1;
                }
            }
            if !other.is_empty() {
                let names: Vec<String> = other.iter().map(|(n, c)| format!("{n} x{c}")).collect();
                let who = if i < 2 { "rverbs" } else { "rdma-core" };
                self.say(format!("  {who} {}: anything else: {}", x.side, names.join(", ")));
            }
        }
        for (who, pair) in [("rverbs rping", ours), ("rdma-core's rping", theirs)] {
            let ok = pair.iter().all(|x| x.window.is_some() && rping_completed(x.exit, &x.out));
            let exits: Vec<String> = pair.iter().map(|x| format!("{:?}", x.exit)).collect();
            let v = self.check(ok, format!("siw: the straced {who} pair did not complete (exit {})", exits.join("/")));
            if !ok {
                for x in pair {
                    let tail: Vec<String> = x.out.iter().rev().take(4).rev().cloned().collect();
                    self.say(format!("  {who} {} exited {:?}: {}", x.side, x.exit, tail.join(" | ")));
                }
            }
            self.row(&format!("{who}: both sides completed {SIW_TRACED} pings"), "", v);
        }
        // siw's CQ is armed by a store to its shared control word, the
        // libsiw way: no syscall per event.
        let ok = (0..2).all(|i| ioctls[i] == 0 && reads[i] > 0);
        let v = self.check(ok, format!("siw: rverbs made {}/{} ioctls in the loop", ioctls[0], ioctls[1]));
        self.row("rverbs: no ioctl in the loop (arming is a store)", &format!("{}/{}", ioctls[0], ioctls[1]), v);
        // libsiw rings the doorbell only when the SQ entry before the new
        // one is no longer valid (the kernel is idle): rverbs' siw provider
        // has the same rule, so it rings no more often.
        let ok = (0..2).all(|i| doorbells[i] > 0 && doorbells[i] <= doorbells[i + 2]);
        let v = self.check(
            ok,
            format!(
                "siw: rverbs rang {}/{} doorbells, rdma-core's libsiw {}/{}",
                doorbells[0], doorbells[1], doorbells[2], doorbells[3]
            ),
        );
        self.row("rverbs rings no more doorbells than libsiw", "", v);
    }

    fn siw_timings(&mut self, files: &BTreeMap<String, Vec<String>>) {
        self.say("");
        self.say(format!(
            "3. Latency, same boot, same arguments (-C {SIW_TIMED} -S {SIZE} -V), no strace: the client's run by /proc/uptime"
        ));
        let mut all_ok = true;
        for (tag, prog) in [("r", "rverbs rping"), ("i", "rping (rdma-core)")] {
            let get = |k: &str| files.get(&format!("{tag}-{k}")).cloned().unwrap_or_default();
            let exit = |k: &str| get(k).first().and_then(|l| l.trim().parse::<i32>().ok());
            let (srv, cli) = (exit("server.rc"), exit("client.rc"));
            let ok = rping_completed(srv, &get("server.out")) && rping_completed(cli, &get("client.out"));
            all_ok &= ok;
            let t: Vec<f64> = get("client.time")
                .first()
                .map(|l| l.split_whitespace().filter_map(|w| w.parse().ok()).collect())
                .unwrap_or_default();
            let us = match t[..] {
                [a, b] if b >= a => format!("{:.0} us/ping ({:.2} s)", (b - a) * 1e6 / f64::from(SIW_TIMED), b - a),
                _ => "-".into(),
            };
            self.say(format!("  {prog:<20} {us}"));
            if !ok {
                let why: Vec<String> = get("client.out").iter().rev().take(3).cloned().collect();
                self.say(format!("    exit {srv:?}/{cli:?}: {}", why.join(" | ")));
            }
        }
        let v = self.check(all_ok, "siw: a timed rping pair failed");
        self.row("both timed pairs completed", "", v);
        self.say("  (the client's whole run, connection set-up and teardown included; 10 ms clock)");
    }

    fn summary(&mut self, guest_time: &str, log: &Path) {
        self.say("");
        if self.failed == 0 {
            self.say(format!("all {} checks hold; guest {guest_time}, console {}", self.checks, log.display()));
        } else {
            let f = self.failures.clone();
            self.say(format!("FAILED: {} of {} checks: {}", self.failed, self.checks, f.join("; ")));
            self.say(format!("guest {guest_time}, console {}", log.display()));
        }
    }
}

/// `name xN` of the unexpected calls in data-path rows, for messages.
fn other_names(rows: &[Vec<Dat>; 2]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows.iter().flatten() {
        if let Dat::Other(n) = r {
            *counts.entry(n.clone()).or_default() += 1;
        } else if let Dat::Ioctl(n) = r {
            if !n.ends_with("REQ_NOTIFY_CQ") {
                *counts.entry(format!("ioctl {n}")).or_default() += 1;
            }
        }
    }
    if counts.is_empty() {
        return "none".into();
    }
    counts.iter().map(|(n, c)| format!("{n} x{c}")).collect::<Vec<_>>().join(", ")
}

/// The distinct files a maps dump names (in order) and how many mappings
/// are of a uverbs device.
fn mapped(maps: Option<&Vec<String>>) -> (Vec<String>, usize) {
    let mut paths: Vec<String> = Vec::new();
    let mut uverbs = 0;
    for l in maps.map(|v| &v[..]).unwrap_or(&[]) {
        let Some(p) = l.split_whitespace().nth(5) else { continue };
        if is_dev(p) {
            uverbs += 1;
        } else if p.starts_with('/') && !paths.iter().any(|x| x == p) {
            paths.push(p.to_owned());
        }
    }
    (paths, uverbs)
}

/// What `ld.so --list` printed for rverbs: whether it loads only the C
/// runtime (or nothing: a static CLI, `project::STATIC_CLI`, for which the
/// loader says "statically linked"), and the libraries to show.
fn loader_verdict(ldd: &[String]) -> (bool, String) {
    let bad = |s: &str| FORBIDDEN.iter().any(|f| s.contains(f));
    let libs: Vec<String> = ldd
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|l| l.contains(".so"))
        .map(|l| l.rsplit('/').next().unwrap_or(l).to_owned())
        .collect();
    if libs.is_empty() && ldd.iter().any(|l| l.trim() == "statically linked") {
        return (true, "nothing (statically linked)".into());
    }
    let ok = !libs.is_empty() && libs.iter().all(|l| RUNTIME.contains(&l.as_str()) && !bad(l));
    (ok, libs.join(" "))
}

#[cfg(test)]
mod tests {
    use super::loader_verdict;

    #[test]
    fn loader_verdicts() {
        let lines = |t: &str| t.lines().map(String::from).collect::<Vec<_>>();
        assert_eq!(loader_verdict(&lines("\tstatically linked\n")), (true, "nothing (statically linked)".into()));
        let dynamic = "\tlinux-vdso.so.1 (0x1)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x2)\n";
        assert!(loader_verdict(&lines(dynamic)).0);
        let ibv = "\tlibibverbs.so.1 => /usr/lib/x86_64-linux-gnu/libibverbs.so.1 (0x3)\n\tlibc.so.6 => x (0x2)\n";
        assert!(!loader_verdict(&lines(ibv)).0);
        assert!(!loader_verdict(&lines("ld.so: cannot open\n")).0, "nothing read is no pass");
    }

    use super::*;

    fn names() -> Names {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        Names::load(root).unwrap()
    }

    #[test]
    fn names_ioctl_events() {
        let n = names();
        let ev = |l: &str| ioctl_event(l, &n);
        assert_eq!(
            ev("+0.9 TRACE rverbs_providers::sys: ibv_alloc_pd: uverbs command ok object=0 method=0 path=Ioctl write_cmd=3").as_deref(),
            Some("DEVICE      INVOKE_WRITE: ALLOC_PD")
        );
        assert_eq!(
            ev("+1.0 TRACE rverbs_providers::sys: uverbs command ok object=3 method=0 path=Ioctl").as_deref(),
            Some("CQ          CQ_CREATE")
        );
        assert_eq!(
            ev("+1.0 DEBUG rverbs_providers::sys: uverbs ioctl failed object=4 method=0 errno=EINVAL").as_deref(),
            Some("QP          QP_CREATE (failed: EINVAL)")
        );
        assert_eq!(ev("+1.1 DEBUG rverbs_providers::cmd: uverbs command verb=ibv_create_cq path=Ioctl"), None);
        assert_eq!(ev("+1.1 TRACE rverbs_providers::sys: uverbs command ok command=3 ex=false path=Write"), None);
    }

    #[test]
    fn finds_files_and_sorts_calls() {
        let console: Vec<String> = format!(
            "{DEMO} step t\n{DEMO} file t-server.st\n\
161   openat(AT_FDCWD</tmp>, \"/dev/infiniband/uverbs0\", O_RDWR|O_CLOEXEC) = 4</dev/infiniband/uverbs0>\n\
161   write(3</tmp/demo/t-server.log>, \"\"..., 77) = 77\n\
161   ioctl(4</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x7ffd) = 0\n\
161   write(3</tmp/demo/t-server.log>, \"\"..., 77) = 77\n\
161   mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_SHARED, 4</dev/infiniband/uverbs0>, 0x12000) = 0x7f1c5b58c000\n\
161   socket(AF_NETLINK, SOCK_RAW|SOCK_CLOEXEC, NETLINK_RDMA) = 5<socket:[392]>\n\
161   sendto(5<socket:[392]>, \"\"..., 16, 0, NULL, 0) = 16\n\
161   accept4(6<socket:[400]>, NULL, NULL, SOCK_CLOEXEC) = 7<socket:[404]>\n\
161   statx(AT_FDCWD</tmp>, \"{MARK_DIR}/data-path-begin\", AT_STATX_SYNC_AS_STAT, STATX_ALL, 0x7ffd) = -1 ENOENT (No such file or directory)\n\
161   write(4</dev/infiniband/uverbs0>, \"\"..., 32) = 32\n\
161   write(4</dev/infiniband/uverbs0>, \"\"..., 32) = 32\n\
161   statx(AT_FDCWD</tmp>, \"{MARK_DIR}/data-path-end\", AT_STATX_SYNC_AS_STAT, STATX_ALL, 0x7ffd) = -1 ENOENT (No such file or directory)\n\
161   munmap(0x7f1c5b58c000, 4096)      = 0\n\
161   write(1</tmp/demo/t-server.out>, \"\"..., 91) = 91\n\
161   exit_group(0)                     = ?\n\
{DEMO} end t-server.st\n{DEMO} file t-server.log\n\
+0.9 TRACE rverbs_providers::sys: uverbs command ok object=0 method=3 path=Ioctl\n\
+0.9 DEBUG rverbs::cq: CQ destroyed handle=2 comp_events=7 async_events=0\n\
{DEMO} end t-server.log\n{DEMO} file t-server.rc\n0\n{DEMO} end t-server.rc\n"
        )
        .lines()
        .map(String::from)
        .collect();
        let files = crate::console_files::collect(&console, DEMO);
        assert_eq!(files.len(), 3);
        let n = names();
        let t = Traced::new(&files, "t", "server", &n);
        assert_eq!((t.ioctls, t.events, t.exit, t.comp_events), (1, 1, Some(0), Some(7)));
        assert_eq!(t.window, Some((8, 11)));
        let rows = control_rows(&t);
        assert_eq!(
            rows,
            vec![
                Ctl::Open,
                Ctl::Log,
                Ctl::Ioctl("DEVICE      GET_CONTEXT".into()),
                Ctl::Log,
                Ctl::Mmap,
                Ctl::Netlink,
                Ctl::Netlink,
                Ctl::Tcp,
                Ctl::Munmap,
                Ctl::Stdio,
                Ctl::Runtime,
            ]
        );
        assert_eq!(data_rows(&t), vec![Dat::Doorbell, Dat::Doorbell]);
    }

    /// rdma-core's exchange: from its first doorbell to its last event read
    /// and the arm right after it.
    #[test]
    fn finds_rdma_cores_exchange() {
        let st = "9 openat(AT_FDCWD</tmp>, \"/dev/infiniband/uverbs0\", O_RDWR|O_CLOEXEC) = 3</dev/infiniband/uverbs0>
9 ioctl(3</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x1) = 0
9 write(3</dev/infiniband/uverbs0>, \"\"..., 32) = 32
9 read(4<anon_inode:[infinibandevent]>, \"\"..., 16) = 16
9 ioctl(3</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x1) = 0
9 write(3</dev/infiniband/uverbs0>, \"\"..., 32) = 32
9 read(4<anon_inode:[infinibandevent]>, \"\"..., 16) = 16
9 ioctl(3</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x1) = 0
9 ioctl(3</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x1) = 0
9 close(3</dev/infiniband/uverbs0>) = 0";
        let mut files = BTreeMap::new();
        files.insert("ei-client.st".to_string(), st.lines().map(String::from).collect::<Vec<_>>());
        files.insert("ei-client.rc".to_string(), vec!["0".to_string()]);
        let t = Traced::rdma_core(&files, "ei", "client");
        assert_eq!(t.window, Some((1, 8)));
        assert_eq!(t.exit, Some(0));
        let rows = data_rows(&t);
        assert_eq!(rows.iter().filter(|r| **r == Dat::Doorbell).count(), 2);
        assert_eq!(rows.iter().filter(|r| **r == Dat::ReadEvent).count(), 2);
        assert_eq!(rows.iter().filter(|r| matches!(r, Dat::Ioctl(_))).count(), 2);
        // Outside: the open, the first ioctl, the destroy and the close.
        assert_eq!(control_rows(&t).len(), 4);
    }

    #[test]
    fn reads_maps() {
        let maps: Vec<String> = [
            "55686f88b000-55686f8f8000 r--p 00000000 00:02 380   /usr/local/bin/rverbs",
            "7f1c5b583000-7f1c5b58c000 rw-s 00013000 00:06 102   /dev/infiniband/uverbs0",
            "7f1c5b58c000-7f1c5b58d000 rw-s 00012000 00:06 102   /dev/infiniband/uverbs0",
            "7f1c5b5a5000-7f1c5b5cb000 r--p 00000000 00:02 279   /usr/lib/x86_64-linux-gnu/libc.so.6",
            "7f1c5b5cb000-7f1c5b721000 r-xp 00026000 00:02 279   /usr/lib/x86_64-linux-gnu/libc.so.6",
            "7ffd74a24000-7ffd74a45000 rw-p 00000000 00:00 0     [stack]",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (paths, uverbs) = mapped(Some(&maps));
        assert_eq!(paths, vec!["/usr/local/bin/rverbs", "/usr/lib/x86_64-linux-gnu/libc.so.6"]);
        assert_eq!(uverbs, 2);
    }

    #[test]
    fn script_runs_the_four_pairs() {
        let s = script();
        for want in [
            "pair t 18515 rverbs",
            "strace -f -y -s 64 -o /tmp/demo/t-server.st rverbs pingpong -g 1 -s 4096 -p 18515 -n 200",
            "-o /tmp/demo/e-client.st rverbs pingpong -g 1 -s 4096 -p 18516 -e -n 100 127.0.0.1",
            "RVERBS_LOG=trace RVERBS_LOG_FILE=/tmp/demo/t-client.log RVERBS_PINGPONG_MARK=/rverbs-demo-mark",
            "timeout 60 ibv_rc_pingpong -g 1 -s 4096 -n 500 -p 18518 127.0.0.1",
            "pair ie 18520 ibv_rc_pingpong \"timeout 60 ibv_rc_pingpong -e -g 1",
            "ld-linux-x86-64.so.2 --list /usr/local/bin/rverbs",
            "pair ti 18521 ibv_rc_pingpong \"timeout 60 strace -f -y -s 64 -o /tmp/demo/ti-server.st ibv_rc_pingpong -g 1 -s 4096 -p 18521 -n 200\"",
            "-o /tmp/demo/ei-client.st ibv_rc_pingpong -g 1 -s 4096 -p 18522 -e -n 100 127.0.0.1",
            "cmpair c 18523 \"RVERBS_LOG=trace RVERBS_LOG_FILE=/tmp/demo/c-server.log timeout 60 strace -f -y",
            "-o /tmp/demo/c-server.st rverbs rping -s -S 4096 -a 192.168.77.1 -p 18523\"",
            "-o /tmp/demo/c-client.st rverbs rping -c -C 10 -S 4096 -V -a 192.168.77.1 -p 18523\"",
            "grep LISTEN | grep -q -e \":$2 \" -e \":$2\\$\"",
        ] {
            assert!(s.contains(want), "missing {want:?} in\n{s}");
        }
    }

    #[test]
    fn siw_script_runs_both_rpings_on_siw0() {
        let s = siw_script();
        for want in [
            "cmpair s 18531 rverbs \"timeout 120 strace -f -y -s 64 -o /tmp/demo/s-server.st rverbs rping -s -S 4096 -a 192.168.79.1 -p 18531\"",
            "-o /tmp/demo/s-client.st rverbs rping -c -C 100 -S 4096 -V -a 192.168.79.1 -p 18531\"",
            "cmpair si 18532 rping \"timeout 120 strace -f -y -s 64 -o /tmp/demo/si-server.st rping -s -S 4096",
            "cmpair r 18533 rverbs \"timeout 120 rverbs rping -s -S 4096 -a 192.168.79.1 -p 18533\"",
            "\"timeout 120 rping -c -C 500 -S 4096 -V -a 192.168.79.1 -p 18534\"",
            "ld-linux-x86-64.so.2 --list /usr/local/bin/rverbs",
        ] {
            assert!(s.contains(want), "missing {want:?} in\n{s}");
        }
        let race = vec!["rdma_get_cm_event: Bad file descriptor".to_string()];
        assert!(rping_completed(Some(0), &[]) && rping_completed(Some(255), &race));
        assert!(!rping_completed(Some(255), &[]) && !rping_completed(None, &[]));
        assert!(!rping_completed(Some(0), &["data mismatch".to_string()]));
    }

    #[test]
    fn siw_window_starts_at_the_uverbs_doorbell_not_the_cm() {
        let st: Vec<String> = [
            "7 ioctl(4</dev/infiniband/uverbs1>, RDMA_VERBS_IOCTL, 0x1) = 0",
            "7 write(5</dev/infiniband/rdma_cm>, \"\\x00\", 24) = 24",
            "7 write(4</dev/infiniband/uverbs1>, \"\\x1c\", 32) = 32",
            "8 poll([{fd=6<anon_inode:[infinibandevent]>, events=POLLIN}], 1, 100) = 1",
            "8 read(6<anon_inode:[infinibandevent]>, \"\", 16) = 16",
            "9 write(5</dev/infiniband/rdma_cm>, \"\\x00\", 24) = 24",
            "7 write(4</dev/infiniband/uverbs1>, \"\\x1c\", 32) = 32",
            "7 ioctl(4</dev/infiniband/uverbs1>, RDMA_VERBS_IOCTL, 0x2) = 0",
        ]
        .iter()
        .map(|l| l.to_string())
        .collect();
        let files: BTreeMap<String, Vec<String>> = [("s-server.st".to_string(), st)].into_iter().collect();
        let t = Traced::siw(&files, "s", "server");
        assert_eq!(t.window, Some((1, 7)));
        let rows = siw_rows(&t);
        assert_eq!(rows, vec![Siw::Doorbell, Siw::Poll, Siw::ReadEvent, Siw::CmWrite, Siw::Doorbell]);
    }

    #[test]
    fn names_cm_commands_and_counts_their_syscalls() {
        let c = |l: &str| cm_command(l);
        assert_eq!(
            c("+0.1 DEBUG rverbs_providers::cm: rdma_cm command cmd=CONNECT verb=rdma_connect id=3").as_deref(),
            Some("CONNECT")
        );
        assert_eq!(
            c("+0.1 TRACE rverbs_providers::cm::id: rdma_cm command: no event (EAGAIN) cmd=GET_EVENT verb=rdma_get_cm_event")
                .as_deref(),
            Some("GET_EVENT (EAGAIN)")
        );
        assert_eq!(
            c("+0.1 DEBUG rverbs_providers::cm: rdma_cm command failed cmd=DISCONNECT verb=rdma_disconnect id=3 errno=EINVAL")
                .as_deref(),
            Some("DISCONNECT (failed)")
        );
        assert_eq!(c("+0.1 DEBUG rverbs_providers::sys::ucma: rdma_cm event channel opened path=/dev"), None);
        let lines: Vec<String> = [
            "7 openat(AT_FDCWD</>, \"/dev/infiniband/rdma_cm\", O_RDWR|O_CLOEXEC) = 5</dev/infiniband/rdma_cm>",
            "7 write(5</dev/infiniband/rdma_cm>, \"\\x00\", 24) = 24",
            "8 poll([{fd=5</dev/infiniband/rdma_cm>, events=POLLIN}], 1, 100) = 0 (Timeout)",
            "8 write(5</dev/infiniband/rdma_cm>, \"\\x0c\", 16) = -1 EAGAIN (Resource temporarily unavailable)",
            "7 write(1</dev/console>, \"x\", 1) = 1",
        ]
        .iter()
        .map(|l| l.to_string())
        .collect();
        let log = vec![
            "+0 DEBUG rverbs_providers::cm: rdma_cm command cmd=CREATE_ID verb=rdma_create_id id=0".to_string(),
            "+0 TRACE rverbs_providers::cm::id: rdma_cm command: no event (EAGAIN) cmd=GET_EVENT verb=x".to_string(),
        ];
        let files: BTreeMap<String, Vec<String>> = [
            ("c-client.st".to_string(), lines),
            ("c-client.log".to_string(), log),
            ("c-client.rc".to_string(), vec!["0".to_string()]),
        ]
        .into_iter()
        .collect();
        let t = CmTraced::new(&files, "client");
        assert_eq!((t.opens, t.writes, t.polls, t.exit), (1, 2, 1, Some(0)));
        assert_eq!(t.cmds, vec!["CREATE_ID".to_string(), "GET_EVENT (EAGAIN)".to_string()]);
    }
}
