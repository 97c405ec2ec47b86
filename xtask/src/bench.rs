//! `cargo xtask bench`: rverbs and rdma-core side by side, same arguments,
//! same boot, one guest per kernel (see docs/PERFORMANCE.md):
//!
//! * instructions per ping-pong iteration of the client in event mode
//!   (callgrind: (Ir(n=1000) − Ir(n=100)) / 900), 64 B and 4 KiB, and
//!   the inclusive instructions per call of each hot-path verb;
//! * syscalls of a whole `pingpong -n 100` client (polling and `-e`),
//!   doorbells apart from the rest, and of `devinfo -v`;
//! * latency and throughput medians of several runs, RC and UD, polling
//!   and `-e`, 64 B and 4 KiB (UD: 1 KiB, the port's MTU);
//! * perftest between two rdma-core processes, the floor the kernel sets.
//!
//! Plus, on the host, the providers' data path against the mock kernel
//! and the HCA model (`providers/examples/{rxe,mlx5}_bench.rs`).
//!
//! It prints one table and writes it into docs/PERFORMANCE.md. A benchmark,
//! not a test: nothing here fails on a number.
//!
//! The guest prints each result file between `@@BENCH file NAME` and
//! `@@BENCH end NAME`; everything is computed on the host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bench_report::{self, KernelRun, MockCounts};
use crate::console::LineKind;
use crate::guest;
use crate::host_tools::{self, Apt, HostTools, Profile};
use crate::kernel::{self, Kernel, Series};
use crate::project::{self, Workspace};
use crate::runner::{self, Guest, Knobs, Payload};
use crate::util::{self, note, secs, Context, Dirs, Result};
use rverbs_vm::guest::Provider;

/// Options of `cargo xtask bench`.
#[derive(Debug, Clone)]
pub struct BenchArgs {
    /// Kernel series; empty: all.
    pub kernels: Vec<String>,
    /// Runs per latency configuration (medians).
    pub runs: u32,
    /// Which parts run (default: all).
    pub parts: Parts,
    /// Leave docs/PERFORMANCE.md alone.
    pub no_doc: bool,
    /// No guests: report the files the last run kept in `target/vm/bench/`.
    pub reuse: bool,
    pub keep: bool,
    /// `--provider siw`: rping on siw0 instead of the rxe parts
    /// ([`siw_script`]); `rxe` (the default) runs the parts.
    pub provider: Provider,
}

impl Default for BenchArgs {
    fn default() -> Self {
        BenchArgs {
            kernels: Vec::new(),
            runs: DEFAULT_RUNS,
            parts: Parts::all(),
            no_doc: false,
            reuse: false,
            keep: false,
            provider: Provider::Rxe,
        }
    }
}

/// Default runs per latency configuration.
pub const DEFAULT_RUNS: u32 = 15;

/// The parts of the benchmark (`--only instr,syscalls,latency,perftest,capi,scale,mock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub instr: bool,
    pub syscalls: bool,
    pub latency: bool,
    pub perftest: bool,
    /// perftest on rdma-core's `libibverbs.so.1` and on rverbs' (issue #12 §5).
    pub capi: bool,
    /// The scale tables ([`crate::scale`]).
    pub scale: bool,
    pub mock: bool,
}

impl Parts {
    pub fn all() -> Parts {
        Parts { instr: true, syscalls: true, latency: true, perftest: true, capi: true, scale: true, mock: true }
    }

    /// Parses `instr,syscalls,...`.
    pub fn parse(list: &str) -> Result<Parts> {
        let mut p = Parts {
            instr: false,
            syscalls: false,
            latency: false,
            perftest: false,
            capi: false,
            scale: false,
            mock: false,
        };
        for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match w {
                "instr" => p.instr = true,
                "syscalls" => p.syscalls = true,
                "latency" => p.latency = true,
                "perftest" => p.perftest = true,
                "capi" => p.capi = true,
                "scale" => p.scale = true,
                "mock" => p.mock = true,
                _ => return Err(format!("unknown part {w:?} (instr, syscalls, latency, perftest, capi, scale, mock)")),
            }
        }
        Ok(p)
    }

    fn any_guest(&self) -> bool {
        self.instr || self.syscalls || self.latency || self.perftest || self.capi || self.scale
    }
}

/// What the scale part adds to the guest's time limit (unless
/// `RVERBS_VM_TIMEOUT` sets it): its four sections take about 20 minutes
/// of a 2-core host under TCG, more when other guests share it.
const SCALE_EXTRA_TIME: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// The CLI without tracing's callsites, in the guest.
const NOTRACE_BIN: &str = "rverbs-notrace";

/// Marker prefix of the guest script.
const MARK: &str = "@@BENCH";
/// Working directory in the guest.
const DIR: &str = "/tmp/bench";
/// rxe0's IPv4-mapped RoCE v2 GID index in the guest.
const GID: u32 = 1;
/// Message sizes of the instruction counts and the RC timings.
pub const SIZES: [u32; 2] = [64, 4096];
/// UD sizes: a UD message must fit the port's MTU (1024 on rxe over a
/// 1500-byte veth), so 4 KiB cannot be sent.
pub const UD_SIZES: [u32; 2] = [64, 1024];
/// Iteration counts whose difference gives the per-iteration figure.
pub const CG_ITERS: [u32; 2] = [100, 1000];
/// Iterations of the syscall counts.
pub const SYSCALL_ITERS: u32 = 100;
/// Iterations of a timed ping-pong run.
pub const TIMED_ITERS: u32 = 1000;
/// Iterations of a perftest run.
pub const PERFTEST_ITERS: u32 = 1000;
/// vCPUs of the guest, unless `RVERBS_VM_CPUS` says otherwise: with one,
/// two polling processes and rxe's kernel worker take turns at the
/// scheduler's pace (milliseconds per iteration), which times the scheduler.
const BENCH_CPUS: u32 = 2;

/// The two implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Impl {
    RdmaCore,
    Rverbs,
}

impl Impl {
    pub const BOTH: [Impl; 2] = [Impl::RdmaCore, Impl::Rverbs];

    /// The tag in file names.
    pub fn tag(self) -> &'static str {
        match self {
            Impl::RdmaCore => "rdma",
            Impl::Rverbs => "rverbs",
        }
    }

    /// The ping-pong program for `ud` (or RC).
    fn pingpong(self, ud: bool) -> &'static str {
        match (self, ud) {
            (Impl::RdmaCore, false) => "ibv_rc_pingpong",
            (Impl::RdmaCore, true) => "ibv_ud_pingpong",
            (Impl::Rverbs, false) => "rverbs pingpong",
            (Impl::Rverbs, true) => "rverbs pingpong --ud",
        }
    }

    /// The CM ping program (`--provider siw`).
    fn rping(self) -> &'static str {
        match self {
            Impl::RdmaCore => "rping",
            Impl::Rverbs => "rverbs rping",
        }
    }

    fn devinfo(self) -> &'static str {
        match self {
            Impl::RdmaCore => "ibv_devinfo -v",
            Impl::Rverbs => "rverbs devinfo -v",
        }
    }

    /// A run that starts, prints its usage and exits: what the dynamic
    /// loader and the language runtime cost before the program does
    /// anything (`ibv_rc_pingpong` has no `-h`: it prints the usage for
    /// the unknown option).
    fn usage(self, devinfo: bool) -> &'static str {
        match (self, devinfo) {
            (Impl::RdmaCore, false) => "ibv_rc_pingpong -h",
            (Impl::RdmaCore, true) => "ibv_devinfo -h",
            (Impl::Rverbs, false) => "rverbs pingpong --help",
            (Impl::Rverbs, true) => "rverbs devinfo --help",
        }
    }
}

/// The perftest programs run as the floor.
pub const PERFTEST: [&str; 4] = ["ib_send_lat", "ib_write_lat", "ib_read_lat", "ib_write_bw"];

/// The perftest programs timed on both C libraries (issue #12 §5).
pub const CAPI_PERFTEST: [&str; 2] = ["ib_send_lat", "ib_write_bw"];

/// Iteration counts of the C library's callgrind runs (issue #12 §5): a
/// wider gap than the ping-pong's, so that perftest's start-up, which
/// varies from run to run (its handshake, the first polls), weighs less.
/// The clients busy-poll (perftest's default), so the count includes every
/// empty poll and follows the latency; event mode is no way out:
/// `ib_write_bw` refuses `-e` ("Events feature not available on WRITE
/// verb"), and `ib_send_lat -e` on rdma-core's own library overflows its
/// CQ on 6.12's rxe ("rxe_cq_post: queue full") and hangs.
pub const CAPI_CG_ITERS: [u32; 2] = [500, 5000];

/// What selects rverbs' `libibverbs.so.1` for a program in the guest.
const ON_RVERBS: &str = "env LD_LIBRARY_PATH=/opt/rverbs/lib";

/// The command prefix that runs a perftest program on `i`'s library.
fn on_lib(i: Impl) -> String {
    if i == Impl::Rverbs {
        format!("{ON_RVERBS} ")
    } else {
        String::new()
    }
}

/// The order of the two implementations in timed run `run` (1-based):
/// rdma-core first in odd runs, rverbs first in even ones, so that neither
/// always runs first after the other's run (a guest under TCG drifts over
/// seconds; a fixed order would give one side the same neighbour every
/// time).
fn run_order(run: u32) -> [Impl; 2] {
    let [a, b] = Impl::BOTH;
    if run % 2 == 1 {
        [a, b]
    } else {
        [b, a]
    }
}

/// File-name tags of the guest's results (shared with [`bench_report`]).
pub mod tags {
    use super::Impl;

    /// A timed perftest run with both sides on `i`'s `libibverbs.so.1`:
    /// `cp-PROGRAM-SIZE-IMPL-RUN`.
    pub fn capi(program: &str, size: u32, i: Impl, run: u32) -> String {
        format!("cp-{program}-{size}-{}-{run}", i.tag())
    }

    /// Callgrind of a perftest client on `i`'s library: `cc-PROGRAM-IMPL-ITERS`.
    pub fn capi_cg(program: &str, i: Impl, iters: u32) -> String {
        format!("cc-{program}-{}-{iters}", i.tag())
    }

    /// Callgrind run of the client built without tracing's callsites.
    pub const NOTRACE: &str = "cg-notrace-64-1000";

    /// Callgrind run of the client: `cg-IMPL-SIZE-ITERS`.
    pub fn cg(i: Impl, size: u32, iters: u32) -> String {
        format!("cg-{}-{size}-{iters}", i.tag())
    }

    /// strace of a whole client: `st-IMPL-poll` / `st-IMPL-ev`.
    pub fn st(i: Impl, events: bool) -> String {
        format!("st-{}-{}", i.tag(), if events { "ev" } else { "poll" })
    }

    /// strace of `devinfo -v`.
    pub fn devinfo(i: Impl) -> String {
        format!("dv-{}", i.tag())
    }

    /// strace of a run that only prints the usage: the start-up floor of
    /// the ping-pong program (`fl-pp-IMPL`) or of devinfo (`fl-dv-IMPL`).
    pub fn floor(i: Impl, devinfo: bool) -> String {
        format!("fl-{}-{}", if devinfo { "dv" } else { "pp" }, i.tag())
    }

    /// A timed ping-pong: `lat-rc|ud-poll|ev-SIZE-IMPL-RUN`.
    pub fn lat(ud: bool, events: bool, size: u32, i: Impl, run: u32) -> String {
        format!("lat-{}-{}-{size}-{}-{run}", if ud { "ud" } else { "rc" }, if events { "ev" } else { "poll" }, i.tag())
    }

    /// `--provider siw`: callgrind of an rping client, `sc-IMPL-COUNT`.
    pub fn siw_cg(i: Impl, count: u32) -> String {
        format!("sc-{}-{count}", i.tag())
    }

    /// `--provider siw`: strace of an rping pair, `ss-IMPL-COUNT` (the
    /// server's log in `ss-IMPL-COUNT-srv.st`).
    pub fn siw_st(i: Impl, count: u32) -> String {
        format!("ss-{}-{count}", i.tag())
    }

    /// `--provider siw`: a timed rping pair, `sl-IMPL-RUN`.
    pub fn siw_lat(i: Impl, run: u32) -> String {
        format!("sl-{}-{run}", i.tag())
    }

    /// A perftest run: `pt-PROGRAM-SIZE`.
    pub fn perftest(program: &str, size: u32) -> String {
        format!("pt-{program}-{size}")
    }
}

/// The start of every bench guest script: the output folder, the marker
/// functions (`mark`, `send`, `step`), `listening PORT` (a TCP listener on
/// PORT) and `pair TAG PORT SERVER CLIENT`: the server in the background,
/// the client once the server listens; outputs in `TAG.cli` and `TAG.srv`,
/// exit statuses in `TAG.rc` and `TAG.src`, the guest's uptime around the
/// client in `TAG.time`. With two vCPUs or more the server runs on CPU 0
/// and the client on CPU 1 (`taskset`).
fn prelude() -> String {
    format!(
        r#"D={DIR}
mkdir -p $D && cd $D
mark() {{ echo "{MARK} $*"; }}
send() {{ mark file "$1"; cat "$2"; mark end "$1"; }}
step() {{ mark step "$1" $(cut -d' ' -f1 /proc/uptime); }}
listening() {{
    p=$(printf %04X "$1")
    grep -q ":$p [0-9A-F]*:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}}
ON0= ON1=
if [ "$(grep -c ^processor /proc/cpuinfo)" -ge 2 ]; then ON0="taskset -c 0" ON1="taskset -c 1"; fi
# pair TAG PORT SERVER CLIENT
pair() {{
    eval "$ON0 $3" >$D/$1.srv 2>&1 &
    bg=$!
    i=0
    until listening $2; do
        i=$((i + 1))
        [ $i -le 1200 ] || break
        usleep 50000
    done
    if listening $2; then
        t0=$(cut -d' ' -f1 /proc/uptime)
        eval "$ON1 $4" >$D/$1.cli 2>&1
        echo $? >$D/$1.rc
        echo "$t0 $(cut -d' ' -f1 /proc/uptime)" >$D/$1.time
    else
        echo "the server never listened on port $2" >$D/$1.cli
        echo 99 >$D/$1.rc
        kill $bg
    fi
    wait $bg
    echo $? >$D/$1.src
}}
mark cpus $(grep -c ^processor /proc/cpuinfo)
"#
    )
}

/// The end of a bench guest script: every output file but those matching
/// `skip` (a shell pattern: callgrind profiles the report does not read)
/// goes back to the host.
fn send_step(skip: &str) -> String {
    format!("step send\nfor f in *; do\n    case $f in {skip}) continue ;; esac\n    send $f $D/$f\ndone\nstep done\ntrue\n")
}

/// Builds the guest script: every run is a [`prelude`] pair. The server
/// and client are pinned to CPUs 0 and 1 because two
/// busy-polling processes that the scheduler happens to put on one vCPU
/// take turns at its ticks (4 ms), which made whole runs 20-40 times
/// slower at random; pinned, every run of either library sees the same
/// placement.
pub fn script(parts: &Parts, runs: u32) -> String {
    let mut s = prelude();
    let mut port = 19000u32;
    let mut next_port = || {
        port += 1;
        port
    };
    let pp = |i: Impl, ud: bool, args: &str, port: u32| format!("{} -g {GID} {args} -p {port}", i.pingpong(ud));
    if parts.instr {
        s.push_str("step instr\n");
        for size in SIZES {
            for iters in CG_ITERS {
                for i in Impl::BOTH {
                    let p = next_port();
                    let tag = tags::cg(i, size, iters);
                    let args = format!("-e -s {size} -n {iters}");
                    s.push_str(&format!(
                        "pair {tag} {p} \"timeout 900 {srv}\" \"timeout 900 valgrind --tool=callgrind --dump-line=no \
                         --dump-instr=yes --callgrind-out-file=$D/{tag}.out --log-file=$D/{tag}.vg {cli} 127.0.0.1\"\n",
                        srv = pp(i, false, &args, p),
                        cli = pp(i, false, &args, p),
                    ));
                }
            }
        }
    }
    if parts.instr {
        // The same client with tracing compiled out (per-call costs only).
        let p = next_port();
        let args = format!("-e -s {} -n {}", SIZES[0], CG_ITERS[1]);
        let cli = format!("{} -g {GID} {args} -p {p}", Impl::Rverbs.pingpong(false)).replacen("rverbs", NOTRACE_BIN, 1);
        s.push_str(&format!(
            "pair {tag} {p} \"timeout 900 {srv}\" \"timeout 900 valgrind --tool=callgrind --dump-line=no \
             --dump-instr=yes --callgrind-out-file=$D/{tag}.out --log-file=$D/{tag}.vg {cli} 127.0.0.1\"\n",
            tag = tags::NOTRACE,
            srv = pp(Impl::Rverbs, false, &args, p),
        ));
    }
    if parts.syscalls {
        s.push_str("step syscalls\n");
        for events in [false, true] {
            for i in Impl::BOTH {
                let p = next_port();
                let tag = tags::st(i, events);
                let args = format!("{}-s 64 -n {SYSCALL_ITERS}", if events { "-e " } else { "" });
                s.push_str(&format!(
                    "pair {tag} {p} \"timeout 120 {srv}\" \"timeout 120 strace -f -y -o $D/{tag}.st {cli} 127.0.0.1\"\n",
                    srv = pp(i, false, &args, p),
                    cli = pp(i, false, &args, p),
                ));
            }
        }
        for i in Impl::BOTH {
            let tag = tags::devinfo(i);
            s.push_str(&format!(
                "strace -f -y -o $D/{tag}.st {} >$D/{tag}.cli 2>&1; echo $? >$D/{tag}.rc\n",
                i.devinfo()
            ));
            for devinfo in [false, true] {
                // The usage's exit status does not matter.
                let tag = tags::floor(i, devinfo);
                s.push_str(&format!(
                    "strace -f -y -o $D/{tag}.st {} >$D/{tag}.cli 2>&1; echo 0 >$D/{tag}.rc\n",
                    i.usage(devinfo)
                ));
            }
        }
    }
    if parts.latency {
        s.push_str("step latency\n");
        for run in 1..=runs {
            for ud in [false, true] {
                for events in [false, true] {
                    let sizes = if ud { UD_SIZES } else { SIZES };
                    for size in sizes {
                        for i in run_order(run) {
                            let p = next_port();
                            let tag = tags::lat(ud, events, size, i, run);
                            let args = format!("{}-s {size} -n {TIMED_ITERS}", if events { "-e " } else { "" });
                            s.push_str(&format!(
                                "pair {tag} {p} \"timeout 120 {srv}\" \"timeout 120 {cli} 127.0.0.1\"\n",
                                srv = pp(i, ud, &args, p),
                                cli = pp(i, ud, &args, p),
                            ));
                        }
                    }
                }
            }
        }
    }
    if parts.perftest {
        s.push_str("step perftest\n");
        for prog in PERFTEST {
            for size in SIZES {
                let p = next_port();
                let tag = tags::perftest(prog, size);
                let cmd = format!("{prog} -d rxe0 -x {GID} -F -s {size} -n {PERFTEST_ITERS} -p {p}");
                s.push_str(&format!("pair {tag} {p} \"timeout 120 {cmd}\" \"timeout 120 {cmd} 127.0.0.1\"\n"));
            }
        }
    }
    if parts.capi {
        s.push_str("step capi\n");
        // The timed runs: `runs` of each, the two libraries one after the
        // other per run, in alternating order (as the ping-pongs above).
        for run in 1..=runs {
            for prog in CAPI_PERFTEST {
                for size in SIZES {
                    for i in run_order(run) {
                        let p = next_port();
                        let tag = tags::capi(prog, size, i, run);
                        let cmd =
                            format!("{}{prog} -d rxe0 -x {GID} -F -s {size} -n {PERFTEST_ITERS} -p {p}", on_lib(i));
                        s.push_str(&format!("pair {tag} {p} \"timeout 120 {cmd}\" \"timeout 120 {cmd} 127.0.0.1\"\n"));
                    }
                }
            }
        }
        for prog in CAPI_PERFTEST {
            for i in Impl::BOTH {
                let on = on_lib(i);
                for iters in CAPI_CG_ITERS {
                    let p = next_port();
                    let tag = tags::capi_cg(prog, i, iters);
                    let cmd = |on: &str| format!("{on}{prog} -d rxe0 -x {GID} -F -s 64 -n {iters} -p {p}");
                    s.push_str(&format!(
                        "pair {tag} {p} \"timeout 900 {srv}\" \"timeout 900 {on}valgrind --tool=callgrind --dump-line=no \
                         --dump-instr=yes --callgrind-out-file=$D/{tag}.out --log-file=$D/{tag}.vg {cli} 127.0.0.1\"\n",
                        srv = cmd(&on),
                        cli = cmd(""),
                    ));
                }
            }
        }
    }
    if parts.scale {
        crate::scale::script(&mut s);
    }
    s.push_str(&send_step("cg-*-100.out"));
    s
}

/// `--provider siw`: pings of the two callgrind runs of an rping client,
/// whose difference gives the instructions per ping.
pub const SIW_CG_COUNTS: [u32; 2] = [100, 1000];
/// `--provider siw`: pings of the two straced rping pairs.
pub const SIW_ST_COUNTS: [u32; 2] = [10, 100];
/// `--provider siw`: pings of a timed rping pair.
pub const SIW_TIMED: u32 = 1000;
/// `--provider siw`: the message size of every rping run.
pub const SIW_SIZE: u32 = 64;
/// `--provider siw`: timed runs per library unless `--runs` says otherwise
/// (an rping pair connects through the CM and TCP: slower than the
/// hand-connected ping-pongs, so fewer runs than [`DEFAULT_RUNS`]).
pub const SIW_DEFAULT_RUNS: u32 = 5;

/// The `--provider siw` guest script: rdma-core's `rping` (librdmacm,
/// libibverbs, libsiw) and `rverbs rping` on siw0 with the same arguments,
/// pairs as in [`prelude`]: callgrind of the
/// client at two counts, strace of both sides at two counts, then `runs`
/// timed pairs of each, alternating which goes first ([`run_order`]). A
/// pair's client starts once the server's CM listens on siw0's TCP port
/// (iWARP: the kernel marks the id LISTEN before the TCP listener exists);
/// the guest's uptime around the client goes to `TAG.time`.
pub fn siw_script(runs: u32) -> String {
    let ip = guest::SIW_IP.split('/').next().unwrap_or(guest::SIW_IP);
    let mut s = prelude();
    let mut port = 19500u32;
    let mut next_port = || {
        port += 1;
        port
    };
    let srv = |i: Impl, p: u32| format!("{} -s -S {SIW_SIZE} -a {ip} -p {p}", i.rping());
    let cli = |i: Impl, count: u32, p: u32| format!("{} -c -C {count} -S {SIW_SIZE} -a {ip} -p {p}", i.rping());
    s.push_str("step instr\n");
    for count in SIW_CG_COUNTS {
        for i in Impl::BOTH {
            let p = next_port();
            let tag = tags::siw_cg(i, count);
            s.push_str(&format!(
                "pair {tag} {p} \"timeout 900 {srv}\" \"timeout 900 valgrind --tool=callgrind --dump-line=no \
                 --dump-instr=yes --callgrind-out-file=$D/{tag}.out --log-file=$D/{tag}.vg {cli}\"\n",
                srv = srv(i, p),
                cli = cli(i, count, p),
            ));
        }
    }
    s.push_str("step syscalls\n");
    for count in SIW_ST_COUNTS {
        for i in Impl::BOTH {
            let p = next_port();
            let tag = tags::siw_st(i, count);
            s.push_str(&format!(
                "pair {tag} {p} \"timeout 120 strace -f -y -o $D/{tag}-srv.st {srv}\" \
                 \"timeout 120 strace -f -y -o $D/{tag}.st {cli}\"\n",
                srv = srv(i, p),
                cli = cli(i, count, p),
            ));
        }
    }
    s.push_str("step latency\n");
    for run in 1..=runs {
        for i in run_order(run) {
            let p = next_port();
            let tag = tags::siw_lat(i, run);
            s.push_str(&format!(
                "pair {tag} {p} \"timeout 120 {srv}\" \"timeout 120 {cli}\"\n",
                srv = srv(i, p),
                cli = cli(i, SIW_TIMED, p),
            ));
        }
    }
    s.push_str(&send_step("*.out"));
    s
}

/// Host files of valgrind's callgrind that go into the guest:
/// (guest path, host path, is a program whose libraries must come too).
fn valgrind_files() -> Result<Vec<(String, PathBuf, bool)>> {
    const LIB: &str = "/usr/libexec/valgrind";
    let launcher = ["/usr/bin/valgrind.bin", "/usr/bin/valgrind"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file() && !is_script(p))
        .ok_or("valgrind's launcher (/usr/bin/valgrind.bin) not found")?;
    let mut v = vec![("/usr/bin/valgrind".to_owned(), launcher, true)];
    for (f, program) in
        [("callgrind-amd64-linux", true), ("vgpreload_core-amd64-linux.so", true), ("default.supp", false)]
    {
        let p = Path::new(LIB).join(f);
        if !p.is_file() {
            return Err(format!("{} not found (valgrind incomplete?)", p.display()));
        }
        v.push((format!("{LIB}/{f}"), p, program));
    }
    Ok(v)
}

fn is_script(p: &Path) -> bool {
    std::fs::read(p).map(|b| b.starts_with(b"#!")).unwrap_or(false)
}

/// valgrind on the host (the guest's copy comes from it), installed with
/// apt when missing (as root).
fn ensure_valgrind(apt: &mut Apt) -> Result<()> {
    if valgrind_files().is_ok() {
        return Ok(());
    }
    if !util::is_root() || util::which("apt-get").is_none() {
        return Err(
            "valgrind is missing; install it with: sudo apt-get install -y --no-install-recommends valgrind".into()
        );
    }
    apt.install(&["valgrind"])?;
    valgrind_files().map(drop)
}

/// The kernels to run: the named ones, or all.
fn kernels(names: &[String]) -> Result<Vec<Series>> {
    if names.is_empty() {
        return Ok(kernel::SERIES.to_vec());
    }
    names.iter().map(|n| kernel::series(n)).collect()
}

/// Runs the benchmark; returns the exit code.
pub fn run(args: &BenchArgs) -> Result<i32> {
    if args.provider == Provider::Siw {
        return run_siw(args);
    }
    let series = kernels(&args.kernels)?;
    let mut knobs = Knobs::from_env()?;
    if std::env::var_os("RVERBS_VM_CPUS").is_none() {
        knobs.cpus = BENCH_CPUS;
    }
    if args.parts.scale && std::env::var_os("RVERBS_VM_TIMEOUT").is_none() {
        knobs.timeout += SCALE_EXTRA_TIME;
    }
    let ws = project::workspace()?;
    let mut apt = Apt::default();
    let tools = host_tools::ensure(&mut apt, Profile::Project)?;
    ensure_valgrind(&mut apt)?;
    let commit = commit(&ws.root);
    let mut mock = None;
    if args.parts.mock {
        mock = Some(mock_counts(&ws)?);
    }
    let mut runs = Vec::new();
    let notrace =
        if args.parts.instr && !args.reuse { Some(project::build_cli_release_without_tracing(&ws)?) } else { None };
    if args.reuse {
        let dirs = ws.dirs()?;
        for s in &series {
            runs.push(load_run(&dirs, s.name)?);
        }
    } else if args.parts.any_guest() {
        let cli = project::build_cli_release(&ws)?;
        let capi = if args.parts.capi || args.parts.scale { Some(project::build_capi_release(&ws)?) } else { None };
        let scale = if args.parts.scale { crate::scale::guest_files(&ws)? } else { Vec::new() };
        let dirs = ws.dirs()?;
        for s in series {
            let k = kernel::fetch(s, &dirs.cache, &tools, &mut apt)?;
            note(format!("kernel {}: {}", s.name, k.describe()));
            let built = Built {
                cli: cli.clone(),
                notrace: notrace.clone(),
                capi: capi.clone(),
                scale: scale.clone(),
                commit: commit.clone(),
            };
            runs.push(one_kernel(&k, &tools, &dirs, &knobs, &built, args)?);
        }
    }
    let report = bench_report::Report::new(&runs, mock.as_ref(), &commit, args.runs);
    let text = report.render();
    println!("{text}");
    if !args.no_doc && !runs.is_empty() {
        let doc = ws.root.join("docs/PERFORMANCE.md");
        bench_report::write_into_doc(&doc, &text)?;
        note(format!("table written into {}", doc.display()));
    }
    Ok(0)
}

/// `cargo xtask bench --provider siw`: [`siw_script`] in one guest per
/// kernel with siw0, the `siw` section of the report, into
/// docs/PERFORMANCE.md between its own markers (not with `--no-doc`).
fn run_siw(args: &BenchArgs) -> Result<i32> {
    let series = kernels(&args.kernels)?;
    let mut knobs = Knobs::from_env()?;
    if std::env::var_os("RVERBS_VM_CPUS").is_none() {
        knobs.cpus = BENCH_CPUS;
    }
    let ws = project::workspace()?;
    let dirs = ws.dirs()?;
    let commit = commit(&ws.root);
    let keep_of = |s: &str| format!("siw/{s}");
    let mut runs = Vec::new();
    if args.reuse {
        for s in &series {
            let mut r = load_run(&dirs, &keep_of(s.name))?;
            r.series = s.name.to_owned();
            runs.push(r);
        }
    } else {
        let mut apt = Apt::default();
        let tools = host_tools::ensure(&mut apt, Profile::Project)?;
        ensure_valgrind(&mut apt)?;
        let cli = project::build_cli_release(&ws)?;
        let built = Built { cli: cli.clone(), notrace: None, capi: None, scale: Vec::new(), commit: commit.clone() };
        let mut data = Vec::new();
        let mut files = vec![(guest::RVERBS_BIN.to_owned(), cli)];
        for (at, host, program) in valgrind_files()? {
            if program {
                files.push((at, host));
            } else {
                data.push((at, host));
            }
        }
        let payload = Payload {
            files,
            data,
            script: guest::with_siw(&guest::cmd_payload(&[siw_script(args.runs)])),
            label: "bench",
            ..Default::default()
        };
        for s in series {
            let k = kernel::fetch(s, &dirs.cache, &tools, &mut apt)?;
            let k = rverbs_vm::siw_module::with_siw(&k, &dirs.cache, &tools, &mut apt)?;
            note(format!("kernel {}: {} (siw0)", s.name, k.describe()));
            let guest = Guest { kernel: &k, tools: &tools, dirs: &dirs, knobs: &knobs };
            let mut r = boot(&guest, &payload, &built, args, &keep_of(s.name))?;
            r.series = s.name.to_owned();
            runs.push(r);
        }
    }
    let text = bench_report::siw::render(&runs, &commit);
    println!("{text}");
    if !args.no_doc && !runs.is_empty() {
        let doc = ws.root.join("docs/PERFORMANCE.md");
        bench_report::write_siw_into_doc(&doc, &text)?;
        note(format!("wrote the siw table into {}", doc.display()));
    }
    Ok(0)
}

/// What the host built for the bench guest.
struct Built {
    /// The release CLI (static).
    cli: PathBuf,
    /// The CLI without tracing's callsites (`instr`).
    notrace: Option<PathBuf>,
    /// rverbs' release `libibverbs.so` (`capi`, `scale`).
    capi: Option<PathBuf>,
    /// The scale sections' programs: (guest path, host file).
    scale: Vec<(String, PathBuf)>,
    /// `git describe` of the tree built.
    commit: String,
}

/// `git describe --always --dirty` of the tree measured.
fn commit(root: &Path) -> String {
    let out = Command::new("git").current_dir(root).args(["describe", "--always", "--dirty", "--abbrev=7"]).output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        _ => "unknown".into(),
    }
}

/// One guest: the script, its files, parsed.
fn one_kernel(
    k: &Kernel,
    tools: &HostTools,
    dirs: &Dirs,
    knobs: &Knobs,
    built: &Built,
    args: &BenchArgs,
) -> Result<KernelRun> {
    let mut files = vec![(guest::RVERBS_BIN.to_owned(), built.cli.clone())];
    if let Some(n) = &built.notrace {
        files.push((format!("/usr/local/bin/{NOTRACE_BIN}"), n.clone()));
    }
    if let Some(so) = &built.capi {
        files.push((format!("{}/libibverbs.so.1", project::GUEST_LIB_DIR), so.to_path_buf()));
    }
    files.extend(built.scale.iter().cloned());
    let mut data = Vec::new();
    if args.parts.instr || args.parts.capi || args.parts.scale {
        for (at, host, program) in valgrind_files()? {
            if program {
                files.push((at, host));
            } else {
                data.push((at, host));
            }
        }
    }
    let payload = Payload {
        files,
        data,
        script: guest::cmd_payload(&[script(&args.parts, args.runs)]),
        label: "bench",
        ..Default::default()
    };
    boot(&Guest { kernel: k, tools, dirs, knobs }, &payload, built, args, &k.series)
}

/// Boots `guest` with `payload` (booting once more when an SMP guest
/// panicked before `/init`), keeps its files in `target/vm/bench/KEEP/`.
fn boot(guest: &Guest, payload: &Payload, built: &Built, args: &BenchArgs, keep: &str) -> Result<KernelRun> {
    let (k, dirs, knobs) = (guest.kernel, guest.dirs, guest.knobs);
    note(format!("booting the guest ({} vCPUs); the runs take several minutes under TCG", knobs.cpus));
    let verbose = knobs.verbose;
    let mut show = |kind: LineKind, line: &str| {
        if verbose {
            match kind {
                LineKind::Kernel => eprintln!("kernel: {line}"),
                _ => eprintln!("{line}"),
            }
        } else if let Some(step) = line.strip_prefix(MARK).and_then(|r| r.trim().strip_prefix("step ")) {
            let mut w = step.split_whitespace();
            let (step, at) = (w.next().unwrap_or(""), w.next().unwrap_or("?"));
            note(format!("guest at {at} s: {step}"));
        }
    };
    let mut out = runner::run(guest, payload, args.keep, &mut show)?;
    if out.report.release.is_none() && !out.boot.timed_out {
        // SMP guests under TCG now and then panic while the kernel patches
        // its own text at boot (int3 in sched_clock_cpu): boot once more.
        note(format!("the guest never reached /init ({}); booting again", out.kernel_tail(1).join(" ")));
        out = runner::run(guest, payload, args.keep, &mut show)?;
    }
    if let Some(problem) = out.problem() {
        out.tail(40).iter().for_each(|l| eprintln!("{l}"));
        return Err(format!("the bench guest ({}): {problem} (console: {})", k.series, out.log.display()));
    }
    let lines = out.report.runs.first().map(|r| r.log.lines.clone()).unwrap_or_default();
    let cpus = lines
        .iter()
        .find_map(|l| l.strip_prefix(MARK)?.trim().strip_prefix("cpus ")?.trim().parse().ok())
        .unwrap_or(knobs.cpus);
    let files = crate::console_files::collect(&lines, MARK);
    let release = out.report.release.clone().unwrap_or_else(|| k.release.clone());
    let accel = out.accel.describe();
    let meta = vec![release.clone(), accel.clone(), cpus.to_string(), built.commit.clone(), args.runs.to_string()];
    let keep_dir = save_files(dirs, keep, &files, &meta)?;
    note(format!(
        "kernel {}: guest {}, {} result files (in {})",
        k.series,
        secs(out.boot.elapsed),
        files.len(),
        keep_dir.display()
    ));
    Ok(KernelRun {
        series: k.series.clone(),
        release,
        accel,
        cpus,
        commit: built.commit.clone(),
        runs: args.runs,
        files,
    })
}

/// Writes the guest's files into `target/vm/bench/<series>/` (replacing
/// the last run's), for a closer look (`callgrind_annotate` on the
/// profiles, the strace logs).
fn save_files(dirs: &Dirs, series: &str, files: &BTreeMap<String, Vec<String>>, meta: &[String]) -> Result<PathBuf> {
    let dir = dirs.work.join("bench").join(series);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).ctx(format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(META), meta.join("\n") + "\n").ctx("writing the run's description")?;
    for (name, lines) in files {
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(dir.join(name), text).ctx(format!("writing {name}"))?;
    }
    Ok(dir)
}

/// The file of a kept run that says what ran: kernel release, accelerator,
/// vCPUs, the commit the guest measured, timed runs per configuration.
const META: &str = "_guest";

/// A run kept by [`save_files`] (`--reuse`).
fn load_run(dirs: &Dirs, series: &str) -> Result<KernelRun> {
    let dir = dirs.work.join("bench").join(series);
    let meta = std::fs::read_to_string(dir.join(META))
        .ctx(format!("no kept bench run for {series} in {} (run without --reuse first)", dir.display()))?;
    let m: Vec<&str> = meta.lines().collect();
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(&dir).ctx(format!("reading {}", dir.display()))? {
        let e = e.ctx("readdir")?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name != META {
            let text = std::fs::read_to_string(e.path()).ctx(format!("reading {name}"))?;
            files.insert(name, text.lines().map(String::from).collect());
        }
    }
    Ok(KernelRun {
        series: series.to_owned(),
        release: m.first().unwrap_or(&"?").to_string(),
        accel: m.get(1).unwrap_or(&"?").to_string(),
        cpus: m.get(2).and_then(|c| c.parse().ok()).unwrap_or(0),
        commit: m.get(3).unwrap_or(&"unknown").to_string(),
        // Runs kept before the count was written down took the default of
        // then, 9.
        runs: m.get(4).and_then(|c| c.parse().ok()).unwrap_or(9),
        files,
    })
}

/// The mock benches on the host: `(Ir(2N) − Ir(N)) / N` of each case,
/// counted by callgrind inside the benches' never-inlined functions.
fn mock_counts(ws: &Workspace) -> Result<MockCounts> {
    let mut cmd = project::cargo();
    cmd.current_dir(&ws.root).args([
        "build",
        "--release",
        "--quiet",
        "-p",
        "rverbs-providers",
        "--features",
        "mock",
        "--example",
        "rxe_bench",
        "--example",
        "mlx5_bench",
    ]);
    note(util::describe(&cmd));
    util::run(&mut cmd)?;
    let dir = ws.target_dir.join("release/examples");
    let mut out = MockCounts::default();
    const N: u64 = 100_000;
    for (bench, case, toggle) in [
        ("rxe_bench", "post", "rxe_bench::loop_*"),
        ("rxe_bench", "poll16", "rxe_bench::loop_*"),
        ("rxe_bench", "poll16plain", "rxe_bench::loop_*"),
        ("rxe_bench", "poll1", "rxe_bench::loop_*"),
        ("mlx5_bench", "post", "*bench_post*"),
        ("mlx5_bench", "poll16", "*bench_poll*"),
        ("mlx5_bench", "poll1", "*bench_poll*"),
        ("mlx5_bench", "poll_one", "*bench_poll_one*"),
    ] {
        let mut ir = [0u64; 2];
        for (slot, n) in ir.iter_mut().zip([N, 2 * N]) {
            let o = Command::new("valgrind")
                .args(["--tool=callgrind", "--callgrind-out-file=/dev/null", "--collect-atstart=no"])
                .arg(format!("--toggle-collect={toggle}"))
                .arg(dir.join(bench))
                .args(["count", case, &n.to_string()])
                .output()
                .ctx(format!("running valgrind on {bench}"))?;
            let err = String::from_utf8_lossy(&o.stderr);
            *slot = collected(&err).ok_or_else(|| format!("valgrind {bench} count {case} {n}: no count\n{err}"))?;
        }
        let per = (ir[1] - ir[0]) as f64 / N as f64;
        out.counts.push((bench.trim_end_matches("_bench").to_owned(), case.to_owned(), per));
    }
    out.many_qp = crate::mlx5_diff::many_qp_counts(ws)?;
    Ok(out)
}

/// valgrind's `==PID== Collected : N`.
pub fn collected(log: &str) -> Option<u64> {
    log.lines().find_map(|l| l.split_once("Collected :").and_then(|(_, n)| n.trim().replace(',', "").parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_pairs_same_arguments() {
        let s = script(&Parts::all(), 2);
        assert!(s.contains(
            "pair cg-rdma-64-100 19001 \"timeout 900 ibv_rc_pingpong -g 1 -e -s 64 -n 100 -p 19001\" \
             \"timeout 900 valgrind --tool=callgrind --dump-line=no --dump-instr=yes \
             --callgrind-out-file=$D/cg-rdma-64-100.out --log-file=$D/cg-rdma-64-100.vg ibv_rc_pingpong -g 1 -e -s 64 -n 100 -p 19001 127.0.0.1\""
        ));
        assert!(s.contains("-o $D/st-rverbs-poll.st rverbs pingpong -g 1 -s 64 -n 100 -p"));
        assert!(s.contains("strace -f -y -o $D/dv-rdma.st ibv_devinfo -v"));
        assert!(s.contains("pair lat-ud-ev-1024-rverbs-2 "));
        assert!(s.contains("rverbs pingpong --ud -g 1 -e -s 1024 -n 1000 -p"));
        assert!(s.contains("ib_read_lat -d rxe0 -x 1 -F -s 4096 -n 1000 -p"));
        let only = script(&Parts::parse("syscalls").unwrap(), 5);
        assert!(!only.contains("valgrind") && !only.contains("lat-") && only.contains("st-rdma-ev"));
        assert!(Parts::parse("instr,bogus").is_err());
        // The C library part: the same perftest command on each library,
        // rverbs' selected by LD_LIBRARY_PATH on both sides, and callgrind
        // of the client (both runs' profiles are sent back, for
        // annotation and for the per-call table).
        let capi = script(&Parts::parse("capi").unwrap(), 1);
        assert!(capi.contains(
            "\"timeout 120 env LD_LIBRARY_PATH=/opt/rverbs/lib ib_write_bw -d rxe0 -x 1 -F -s 4096 -n 1000 -p"
        ));
        assert!(capi.contains("pair cp-ib_send_lat-64-rdma-1 "));
        // Timed runs alternate which library goes first.
        let two = script(&Parts::parse("capi,latency").unwrap(), 2);
        let at = |t: &str| two.find(&format!("pair {t} ")).unwrap();
        assert!(at("cp-ib_write_bw-4096-rdma-1") < at("cp-ib_write_bw-4096-rverbs-1"));
        assert!(at("cp-ib_write_bw-4096-rverbs-2") < at("cp-ib_write_bw-4096-rdma-2"));
        assert!(at("lat-rc-poll-64-rdma-1") < at("lat-rc-poll-64-rverbs-1"));
        assert!(at("lat-ud-ev-1024-rverbs-2") < at("lat-ud-ev-1024-rdma-2"));
        assert!(capi.contains(
            "\"timeout 900 env LD_LIBRARY_PATH=/opt/rverbs/lib valgrind --tool=callgrind --dump-line=no \
             --dump-instr=yes --callgrind-out-file=$D/cc-ib_send_lat-rverbs-5000.out \
             --log-file=$D/cc-ib_send_lat-rverbs-5000.vg ib_send_lat -d rxe0 -x 1 -F -s 64 -n 5000 -p"
        ));
        assert!(capi.contains("--log-file=$D/cc-ib_write_bw-rdma-500.vg ib_write_bw -d rxe0 -x 1 -F -s 64 -n 500 -p"));
        assert!(capi.contains("cg-*-100.out) continue"));
        assert!(!capi.contains("ibv_rc_pingpong"));
    }

    #[test]
    fn siw_script_runs_both_rpings_alike() {
        let s = siw_script(2);
        for want in [
            "pair sc-rdma-100 19501 \"timeout 900 rping -s -S 64 -a 192.168.79.1 -p 19501\" \"timeout 900 valgrind \
             --tool=callgrind --dump-line=no --dump-instr=yes --callgrind-out-file=$D/sc-rdma-100.out \
             --log-file=$D/sc-rdma-100.vg rping -c -C 100 -S 64 -a 192.168.79.1 -p 19501\"",
            "--log-file=$D/sc-rverbs-1000.vg rverbs rping -c -C 1000 -S 64 -a 192.168.79.1 -p 19504\"",
            "pair ss-rverbs-10 19506 \"timeout 120 strace -f -y -o $D/ss-rverbs-10-srv.st rverbs rping -s -S 64",
            "\"timeout 120 strace -f -y -o $D/ss-rdma-100.st rping -c -C 100 -S 64 -a 192.168.79.1 -p 19507\"",
            "\"timeout 120 rverbs rping -c -C 1000 -S 64 -a 192.168.79.1 -p",
            "eval \"$ON1 $4\" >$D/$1.cli 2>&1",
            "echo \"$t0 $(cut -d' ' -f1 /proc/uptime)\" >$D/$1.time",
            "case $f in *.out) continue ;; esac",
        ] {
            assert!(s.contains(want), "missing {want:?} in\n{s}");
        }
        // Timed runs alternate which library goes first.
        let at = |t: &str| s.find(&format!("pair {t} ")).unwrap();
        assert!(at("sl-rdma-1") < at("sl-rverbs-1") && at("sl-rverbs-2") < at("sl-rdma-2"));
        assert!(!s.contains("sl-rdma-3") && !s.contains("ibv_rc_pingpong"));
    }

    #[test]
    fn reads_valgrinds_count() {
        assert_eq!(collected("==12== Events    : Ir\n==12== Collected : 1234567\n"), Some(1_234_567));
        assert_eq!(collected("nothing"), None);
    }

    #[test]
    fn collects_files() {
        let lines: Vec<String> = ["x", "@@BENCH file a.cli", "1", "2", "@@BENCH end a.cli", "@@BENCH step done 1.0"]
            .map(String::from)
            .to_vec();
        let f = crate::console_files::collect(&lines, MARK);
        assert_eq!(f.get("a.cli").map(Vec::len), Some(2));
    }
}
