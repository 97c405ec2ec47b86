//! Two hosts: two guests joined by a QEMU stream network, each with rxe0
//! on its own virtio NIC, run `rverbs pingpong` across that wire (RoCE v2
//! in UDP between two kernels), RC and UD, with completion events (`-e`:
//! with one vCPU per guest on a 2-core host, busy polling starves rxe),
//! and `rverbs rping` (RC connected by the RDMA connection manager, RDMA
//! READ and WRITE, validated) between the two kernels' CMs. Then each host
//! deletes rxe0 and puts siw0 (soft-iWARP) on the same `eth0`, and `rverbs
//! rping` runs again, as iWARP (MPA over the kernels' TCP) across the wire
//! ([`Mode::CmSiw`]): two iWARP devices on one netdev would leave the CM's
//! choice of device for an address ambiguous, so siw0 takes rxe0's place in
//! the same boot (no third boot); the kernel gets siw.ko from
//! [`rverbs_vm::siw_module::with_siw`] (built once on a fresh machine).
//!
//! Host A (`192.168.78.1`) is the server and is started first, listening
//! on a unix socket in a private directory ([`rverbs_vm::pair::Wire`]);
//! once QEMU listens, host B (`192.168.78.2`, the client) connects to it. B's script retries
//! each client run while the server is not listening yet ("Couldn't
//! connect"; rping: REJECTED, "nobody listens", or an address that does
//! not answer yet). Both scripts print each run between `@@PAIR begin MODE` and
//! `@@PAIR end MODE EXIT tx N rx N tcpout N tcpin N tries N [cs N]` (packets
//! counted on eth0, TCP segments from `/proc/net/snmp`, the client's last
//! try in centiseconds of `/proc/uptime`).
//!
//! Used by `cargo xtask demo --two-hosts` and by `cargo xtask test` (the
//! two-host tier: RC, UD, CM and CM-siw count as one test each per kernel).

use std::path::Path;
use std::time::{Duration, Instant};

use rverbs_vm::pair::{self, Wire, NET, NETDEV};

use crate::console::{Counts, LineKind};
use crate::guest;
use crate::host_tools::{Apt, HostTools};
use crate::kernel::Kernel;
use crate::runner::{Guest, Knobs, Outcome, Payload};
use crate::util::{note, secs, Dirs, Result};

/// Marker prefix of the pair scripts.
const PAIR: &str = "@@PAIR";
/// Seconds one pingpong may run in the guest (`timeout`), and the
/// pingpong's own `--timeout` for a silent peer.
const RUN_LIMIT_S: u32 = 240;
const PEER_TIMEOUT_S: u32 = 60;
/// Seconds the client keeps retrying while the server is not listening
/// (its VM still booting, or its previous run still finishing).
const CONNECT_WINDOW_S: u32 = 150;

/// One ping-pong mode of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Rc,
    Ud,
    /// `rverbs rping` over the connection manager.
    Cm,
    /// `rverbs rping` over siw0 (iWARP), which replaces rxe0 on `eth0`
    /// first: run after the rxe modes ([`script`] orders them so).
    CmSiw,
}

/// rping's pings in [`Mode::Cm`] and their size (rdma-core's interop
/// arguments, `-C 100 -S 4096 -V`).
const RPING_SIZE: u32 = 4096;

impl Mode {
    /// Every mode, in the order the hosts run them.
    pub const ALL: [Mode; 4] = [Mode::Rc, Mode::Ud, Mode::Cm, Mode::CmSiw];

    fn name(self) -> &'static str {
        match self {
            Mode::Rc => "rc",
            Mode::Ud => "ud",
            Mode::Cm => "cm",
            Mode::CmSiw => "cm-siw",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Mode::Rc | Mode::Cm | Mode::CmSiw => "",
            Mode::Ud => " --ud",
        }
    }

    fn port(self) -> u16 {
        match self {
            Mode::Rc => 18515,
            Mode::Ud => 18516,
            Mode::Cm => 18517,
            Mode::CmSiw => 18518,
        }
    }

    /// `RC` / `UD` / `CM` / `CM-siw`.
    pub fn upper(self) -> &'static str {
        match self {
            Mode::Rc => "RC",
            Mode::Ud => "UD",
            Mode::Cm => "CM",
            Mode::CmSiw => "CM-siw",
        }
    }

    /// Runs on siw0 (the kernel needs siw.ko), not rxe0.
    pub fn siw(self) -> bool {
        self == Mode::CmSiw
    }

    /// `rverbs rping`, validated by its DISCONNECT lines, not a summary.
    fn rping(self) -> bool {
        matches!(self, Mode::Cm | Mode::CmSiw)
    }

    /// The mode named `name` (`cm-siw`).
    fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The server's and the client's command lines (the client's without
    /// the server's address, which goes last).
    fn commands(self, iters: u32) -> (String, String, &'static [&'static str]) {
        match self {
            Mode::Cm | Mode::CmSiw => {
                let srv = format!("rverbs rping -s -S {RPING_SIZE} -a {NET}.1 -p {}", self.port());
                let cli = format!("rverbs rping -c -C {iters} -S {RPING_SIZE} -V -p {} -a", self.port());
                // REJECTED (nobody listens yet; on iWARP the TCP port's
                // refusal) or no ARP answer (the VM is not up).
                (srv, cli, &["nobody listens", "did not answer"])
            }
            _ => {
                let common = format!(
                    "rverbs pingpong{} -e -n {iters} -p {} --timeout {PEER_TIMEOUT_S}",
                    self.flag(),
                    self.port()
                );
                (common.clone(), common, &["Couldn't connect"])
            }
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct PairSpec {
    pub iters: u32,
    pub modes: Vec<Mode>,
}

impl Default for PairSpec {
    fn default() -> Self {
        PairSpec { iters: 100, modes: Mode::ALL.to_vec() }
    }
}

/// One side of one mode, as the guest reported it.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// The program's output (stdout and stderr).
    pub lines: Vec<String>,
    pub exit: Option<i32>,
    pub tx: Option<u64>,
    pub rx: Option<u64>,
    /// TCP segments the guest's kernel sent and received during the run
    /// (`/proc/net/snmp` `OutSegs`, `InSegs`): iWARP's carrier.
    pub tcp_out: Option<u64>,
    pub tcp_in: Option<u64>,
    /// Client only: connection attempts before the server answered.
    pub tries: Option<u32>,
    /// Client only: the last (connected) try's wall time, centiseconds.
    pub centis: Option<u64>,
}

impl Side {
    /// `usec/iter` from the summary line.
    pub fn usec_per_iter(&self) -> Option<f64> {
        self.lines.iter().find_map(|l| {
            let (_, rest) = l.split_once(" seconds = ")?;
            rest.strip_suffix(" usec/iter")?.trim().parse().ok()
        })
    }

    /// `Mbit/sec` from the summary line.
    pub fn mbit(&self) -> Option<f64> {
        self.lines.iter().find_map(|l| {
            let (_, rest) = l.split_once(" seconds = ")?;
            rest.strip_suffix(" Mbit/sec")?.trim().parse().ok()
        })
    }

    /// `iters` from `N iters in ...`.
    pub fn iters(&self) -> Option<u32> {
        self.lines.iter().find_map(|l| {
            let (n, rest) = l.trim().split_once(' ')?;
            rest.starts_with("iters in ").then(|| n.parse().ok())?
        })
    }

    /// Microseconds per ping of `iters` pings, from the client's wall
    /// time ([`Side::centis`]: the whole run, CM setup included).
    pub fn usec_per_ping(&self, iters: u32) -> Option<f64> {
        let cs = self.centis?;
        (iters > 0).then(|| cs as f64 * 10_000.0 / f64::from(iters))
    }

    /// The GID of the `remote address:` line.
    pub fn remote_gid(&self) -> Option<&str> {
        self.lines.iter().find_map(|l| {
            l.trim().strip_prefix("remote address:").and_then(|r| r.rsplit_once("GID ")).map(|(_, g)| g.trim())
        })
    }
}

/// Parses the `@@PAIR` sections of one guest's output.
pub fn parse_sides(lines: &[String]) -> Vec<(String, Side)> {
    let mut out: Vec<(String, Side)> = Vec::new();
    let mut open: Option<(String, Side)> = None;
    for l in lines {
        if let Some(m) = l.trim().strip_prefix(PAIR) {
            let w: Vec<&str> = m.split_whitespace().collect();
            match w.as_slice() {
                ["begin", mode, ..] => open = Some((mode.to_string(), Side::default())),
                ["end", mode, rest @ ..] => {
                    let (name, mut side) = open.take().unwrap_or_else(|| (mode.to_string(), Side::default()));
                    side.exit = rest.first().and_then(|c| c.parse().ok());
                    let field = |k: &str| {
                        rest.iter()
                            .position(|x| *x == k)
                            .and_then(|i| rest.get(i + 1))
                            .and_then(|v| v.parse::<u64>().ok())
                    };
                    side.tx = field("tx");
                    side.rx = field("rx");
                    side.tcp_out = field("tcpout");
                    side.tcp_in = field("tcpin");
                    side.tries = field("tries").and_then(|t| u32::try_from(t).ok());
                    side.centis = field("cs");
                    out.push((name, side));
                }
                _ => {}
            }
        } else if let Some((_, side)) = open.as_mut() {
            side.lines.push(l.clone());
        }
    }
    out
}

/// The guest script of host A (server) or B (client). The rxe modes run
/// first, then the siw modes, after `siw_up` has replaced rxe0 by siw0 on
/// [`NETDEV`]. A siw mode whose `siw_up` failed ends with its exit code
/// and the reason in its section.
fn script(server: bool, spec: &PairSpec) -> String {
    let mut s = String::new();
    s.push_str(&format!("pkts() {{ cat /sys/class/net/{NETDEV}/statistics/$1_packets; }}\n"));
    // InSegs and OutSegs: the 10th and 11th values of the `Tcp:` line.
    s.push_str("tcp() { set -- $1 $(grep '^Tcp: [0-9]' /proc/net/snmp); if [ $1 = in ]; then echo ${12}; else echo ${13}; fi; }\n");
    // Centiseconds since boot (the fraction has two digits; `1$f - 100`
    // keeps a leading 0 from reading as octal).
    s.push_str("cs() { read up idle </proc/uptime; f=${up#*.}; echo $((${up%.*} * 100 + 1$f - 100)); }\n");
    let mut modes: Vec<Mode> = spec.modes.iter().copied().filter(|m| !m.siw()).collect();
    modes.extend(spec.modes.iter().copied().filter(|m| m.siw()));
    if modes.iter().any(|m| m.siw()) {
        s.push_str(&siw_up());
    }
    let mut siw_ready = false;
    for m in modes {
        let (srv, cli, retry) = m.commands(spec.iters);
        let retry: String = retry.iter().map(|p| format!(" -e \"{p}\"")).collect();
        s.push_str(&format!("echo \"{PAIR} begin {mode}\"\n", mode = m.name()));
        let mut indent = "";
        if m.siw() {
            if !siw_ready {
                s.push_str("siw_up 2>&1\nsiw=$?\n");
                siw_ready = true;
            }
            s.push_str("rc=$siw\ntries=0\ncs=\ntx0=$(pkts tx); rx0=$(pkts rx); to0=$(tcp out); ti0=$(tcp in)\nif [ $siw = 0 ]; then\n");
            indent = "    ";
        } else {
            s.push_str("cs=\ntx0=$(pkts tx); rx0=$(pkts rx); to0=$(tcp out); ti0=$(tcp in)\n");
        }
        let mut body = String::new();
        if server {
            body.push_str(&format!("timeout {RUN_LIMIT_S} {srv} 2>&1\nrc=$?\ntries=0\n"));
        } else {
            // Retry while the server VM or its listener is not up yet;
            // any other failure ends the attempts.
            body.push_str(&format!(
                "tries=0\nuntil0=$(($(cut -d. -f1 /proc/uptime) + {CONNECT_WINDOW_S}))\nwhile :; do\n    tries=$((tries + 1))\n    \
                 t0=$(cs)\n    \
                 timeout {RUN_LIMIT_S} {cli} {NET}.1 >/tmp/pp.out 2>&1\n    rc=$?\n    \
                 cs=$(($(cs) - t0))\n    \
                 if [ $rc != 0 ] && [ $(cut -d. -f1 /proc/uptime) -lt $until0 ] && grep -q{retry} /tmp/pp.out; then\n        \
                 sleep 1\n        continue\n    fi\n    break\ndone\ncat /tmp/pp.out\n"
            ));
        }
        for l in body.lines() {
            s.push_str(&format!("{indent}{l}\n"));
        }
        if m.siw() {
            s.push_str("fi\n");
        }
        s.push_str(&format!(
            "echo \"{PAIR} end {mode} $rc tx $(($(pkts tx) - tx0)) rx $(($(pkts rx) - rx0)) \
             tcpout $(($(tcp out) - to0)) tcpin $(($(tcp in) - ti0)) tries $tries${{cs:+ cs $cs}}\"\n",
            mode = m.name()
        ));
    }
    s
}

/// The shell function `siw_up`: rxe0 out, siw0 on [`NETDEV`] in its
/// place (the CM picks a device by the netdev of the address: with both
/// on `eth0` the choice would be the kernel's list order), its port
/// ACTIVE, then `rdma link` to show what is left. Each failure says which
/// step and returns non-zero.
fn siw_up() -> String {
    let modules = rverbs_vm::siw_module::GUEST_MODULES.join(" ");
    format!(
        r#"siw_up() {{
    fail() {{ echo "rverbs two hosts: $* (siw0 on {NETDEV} not up)"; return 1; }}
    /usr/bin/rdma link delete rxe0 || {{ fail "rdma link delete rxe0 failed"; return 1; }}
    /usr/sbin/modprobe -a {modules} || {{ fail "modprobe {modules} failed: the kernel needs siw.ko (rverbs_vm::siw_module)"; return 1; }}
    /usr/bin/rdma link add siw0 type siw netdev {NETDEV} || {{ fail "rdma link add siw0 type siw netdev {NETDEV} failed"; return 1; }}
    i=0
    until grep -q ACTIVE /sys/class/infiniband/siw0/ports/1/state 2>/dev/null; do
        i=$((i + 1))
        [ $i -le 300 ] || {{ fail "siw0 port 1 not ACTIVE after 30 s"; return 1; }}
        usleep 100000
    done
    /usr/bin/rdma link show
}}
"#
    )
}

/// The finished pair.
pub struct PairRun {
    pub spec: PairSpec,
    /// The wire between the two QEMUs ([`Wire::describe`]).
    pub wire: String,
    /// (host name, IP, its boot) for A then B; `Err` when the boot could
    /// not be made at all.
    pub hosts: Vec<(&'static str, String, Result<Outcome>)>,
    pub elapsed: Duration,
    /// Why the siw modes did not run (siw.ko could not be had for the
    /// kernel); the rxe modes ran without them.
    pub siw_error: Option<String>,
}

/// Boots both guests of kernel `k` and runs the pair. When `spec` has a
/// siw mode, `k` gets siw.ko first ([`rverbs_vm::siw_module::with_siw`]:
/// built and cached on a fresh machine, through `apt`); if that fails the
/// rxe modes still run and the siw modes fail with the reason. `show`
/// gets every console line with the host's name (`A`/`B`).
#[allow(clippy::too_many_arguments)]
pub fn run(
    k: &Kernel,
    tools: &HostTools,
    apt: &mut Apt,
    dirs: &Dirs,
    knobs: &Knobs,
    cli: &Path,
    spec: &PairSpec,
    show: &(dyn Fn(&str, LineKind, &str) + Sync),
) -> Result<PairRun> {
    let start = Instant::now();
    let mut k = k.clone();
    let mut siw_error = None;
    let mut to_run = spec.clone();
    if spec.modes.iter().any(|m| m.siw()) {
        let siw_start = Instant::now();
        match rverbs_vm::siw_module::with_siw(&k, &dirs.cache, tools, apt) {
            Ok(with) => {
                k = with;
                note(format!("two hosts: siw.ko for {} ready in {}", k.release, secs(siw_start.elapsed())));
            }
            Err(e) => {
                to_run.modes.retain(|m| !m.siw());
                siw_error = Some(e);
            }
        }
    }
    let wire = Wire::new()?;
    let payload = |i: usize| -> Payload {
        Payload {
            files: vec![(guest::RVERBS_BIN.to_owned(), cli.to_path_buf())],
            script: guest::net_payload(NETDEV, &format!("{}/24", pair::host_ip(i)), &script(i == 0, &to_run)),
            label: ["two-hosts-a", "two-hosts-b"][i],
            qemu_args: wire.qemu_args(i),
            ..Default::default()
        }
    };
    let (pa, pb) = (payload(0), payload(1));
    let guest = Guest { kernel: &k, tools, dirs, knobs };
    let [a, b] = pair::boot(&guest, &wire, [&pa, &pb], show);
    Ok(PairRun {
        spec: spec.clone(),
        wire: wire.describe(),
        hosts: vec![("A", pair::host_ip(0), a), ("B", pair::host_ip(1), b)],
        elapsed: start.elapsed(),
        siw_error,
    })
}

/// One mode's verdict.
pub struct ModeResult {
    pub mode: Mode,
    /// (host, its side) for A and B; `None` when the host never got to it.
    pub sides: Vec<(&'static str, Option<Side>)>,
    /// Why it failed; empty when it passed.
    pub problems: Vec<String>,
}

impl PairRun {
    /// The console lines of the command run on `host` (empty if none).
    fn lines(&self, i: usize) -> &[String] {
        match &self.hosts[i].2 {
            Ok(o) => o.report.runs.first().map_or(&[], |r| &r.log.lines[..]),
            Err(_) => &[],
        }
    }

    /// Boot-level problems of either host (not counting failed runs).
    pub fn boot_problems(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (name, _, o) in &self.hosts {
            match o {
                Err(e) => v.push(format!("host {name}: {e}")),
                Ok(o) => {
                    if let Some(p) = o.problem() {
                        v.push(format!("host {name}: {p} (console: {})", o.log.display()));
                    }
                }
            }
        }
        v
    }

    /// Checks each mode: both sides exited 0, ran all iterations, saw the
    /// other host's GID and moved packets on eth0.
    pub fn results(&self) -> Vec<ModeResult> {
        let parsed: Vec<Vec<(String, Side)>> = (0..self.hosts.len()).map(|i| parse_sides(self.lines(i))).collect();
        self.judge(&parsed)
    }

    /// [`results`](Self::results) from each host's parsed sections.
    fn judge(&self, parsed: &[Vec<(String, Side)>]) -> Vec<ModeResult> {
        let mut out = Vec::new();
        for &mode in &self.spec.modes {
            let mut problems = Vec::new();
            let mut sides = Vec::new();
            for (i, (name, _, _)) in self.hosts.iter().enumerate() {
                let side = parsed[i].iter().find(|(m, _)| m == mode.name()).map(|(_, s)| s.clone());
                let peer_ip = &self.hosts[1 - i].1;
                match &side {
                    None if mode.siw() && self.siw_error.is_some() => {
                        if i == 0 {
                            problems.push(format!("not run: {}", self.siw_error.as_deref().unwrap_or_default()));
                        }
                    }
                    None => problems.push(format!("host {name}: the {} run did not happen", mode.upper())),
                    Some(s) => {
                        if s.exit != Some(0) {
                            let why = s.lines.iter().rev().find(|l| l.contains("rverbs")).cloned().unwrap_or_default();
                            problems.push(format!("host {name}: exit {:?} {why}", s.exit));
                        } else if mode.rping() {
                            // rping -V exits 1 on a mismatch; both sides
                            // see the client's disconnect as rping prints it.
                            let role = if i == 0 { "server" } else { "client" };
                            if !s.lines.iter().any(|l| l.contains(&format!("{role} DISCONNECT EVENT..."))) {
                                problems.push(format!("host {name}: no \"{role} DISCONNECT EVENT...\" line"));
                            }
                        } else if s.iters() != Some(self.spec.iters) {
                            problems.push(format!("host {name}: no summary for {} iterations", self.spec.iters));
                        }
                        let gid_ok = s.remote_gid().is_some_and(|g| g.ends_with(peer_ip.as_str()));
                        if s.exit == Some(0) && !mode.rping() && !gid_ok {
                            problems.push(format!(
                                "host {name}: the remote GID is {:?}, not host {}'s {peer_ip}",
                                s.remote_gid(),
                                self.hosts[1 - i].0
                            ));
                        }
                        // rping: at least two SENDs, a READ and a WRITE per ping.
                        let per = if mode.rping() { 4 } else { 1 };
                        let moved = |v: Option<u64>| v.unwrap_or(0) >= per * u64::from(self.spec.iters);
                        if s.exit == Some(0) && !(moved(s.tx) && moved(s.rx)) {
                            problems
                                .push(format!("host {name}: eth0 moved only {:?} packets out, {:?} in", s.tx, s.rx));
                        }
                        // iWARP rides the kernels' TCP: as many segments.
                        if s.exit == Some(0) && mode.siw() && !(moved(s.tcp_out) && moved(s.tcp_in)) {
                            problems.push(format!(
                                "host {name}: TCP sent only {:?} segments and received {:?}: not iWARP over the wire",
                                s.tcp_out, s.tcp_in
                            ));
                        }
                    }
                }
                sides.push((*name, side));
            }
            out.push(ModeResult { mode, sides, problems });
        }
        out
    }

    /// Test counts for `cargo xtask test`: one per mode, plus one failure
    /// for a boot problem that failed no mode.
    pub fn counts(&self) -> (Counts, Vec<String>) {
        let mut c = Counts::default();
        let mut problems = Vec::new();
        for r in self.results() {
            if r.problems.is_empty() {
                c.passed += 1;
            } else {
                c.failed += 1;
                problems.push(format!("{}: {}", r.mode.upper(), r.problems.join("; ")));
            }
        }
        problems.extend(self.boot_problems());
        if !problems.is_empty() && c.failed == 0 {
            c.failed = 1;
        }
        (c, problems)
    }

    /// The human-readable report: both sides' output per mode, the
    /// packets each NIC moved, the verdicts. Every line starts with `indent`.
    pub fn report(&self, indent: &str) -> Vec<String> {
        let mut out = Vec::new();
        let accel = self
            .hosts
            .iter()
            .find_map(|(_, _, o)| o.as_ref().ok().map(|o| o.accel.describe()))
            .unwrap_or_else(|| "?".into());
        let release = self
            .hosts
            .iter()
            .find_map(|(_, _, o)| o.as_ref().ok().and_then(|o| o.report.release.clone()))
            .unwrap_or_else(|| "?".into());
        out.push(format!(
            "{indent}two guests of Linux {release} (QEMU {accel}, 1 vCPU each), virtio-net joined by {}",
            self.wire
        ));
        out.push(format!(
            "{indent}host A {NET}.1 (server) <-> host B {NET}.2 (client); rxe0 on each eth0; rverbs pingpong -e -n {n}, rverbs rping -C {n}",
            n = self.spec.iters
        ));
        if self.spec.modes.iter().any(|m| m.siw()) {
            out.push(format!("{indent}then siw0 in rxe0's place on each eth0 (rdma link delete rxe0; rdma link add siw0 type siw netdev eth0)"));
        }
        for r in self.results() {
            out.push(String::new());
            let what = match r.mode {
                Mode::Rc => "reliable connected, 4096-byte SENDs".to_owned(),
                Mode::Ud => "unreliable datagram, 1024-byte SENDs + GRH".to_owned(),
                Mode::Cm => format!(
                    "rverbs rping: RC connected by the RDMA CM, {RPING_SIZE}-byte RDMA READs and WRITEs, validated"
                ),
                Mode::CmSiw => format!(
                    "rverbs rping on siw0: iWARP (MPA over TCP) between the two kernels, {RPING_SIZE}-byte RDMA READs and WRITEs, validated"
                ),
            };
            out.push(format!("{indent}{} ({what}):", r.mode.upper()));
            for (name, side) in &r.sides {
                let Some(s) = side else {
                    out.push(format!("{indent}  {name}  (no run)"));
                    continue;
                };
                for (j, l) in s.lines.iter().filter(|l| !l.trim().is_empty()).enumerate() {
                    let tag = if j == 0 { format!("{name}:") } else { String::new() };
                    out.push(format!("{indent}  {tag:<3} {}", l.trim()));
                }
                let tries = match s.tries {
                    Some(t) if t > 1 => format!(", connected at try {t}"),
                    _ => String::new(),
                };
                let opt = |v: Option<u64>| v.map_or("?".into(), |v| v.to_string());
                let tcp = if r.mode.siw() {
                    format!(", TCP segments out {} / in {}", opt(s.tcp_out), opt(s.tcp_in))
                } else {
                    String::new()
                };
                let timed = match (r.mode.rping(), s.centis, s.usec_per_ping(self.spec.iters)) {
                    (true, Some(cs), Some(us)) => {
                        format!(", {} pings in {}.{:02} s = {us:.0} usec/ping", self.spec.iters, cs / 100, cs % 100)
                    }
                    _ => String::new(),
                };
                out.push(format!(
                    "{indent}      exit {}, eth0 packets out {} / in {}{tcp}{tries}{timed}",
                    s.exit.map_or("?".into(), |e| e.to_string()),
                    opt(s.tx),
                    opt(s.rx),
                ));
            }
            if r.problems.is_empty() {
                out.push(format!("{indent}  ok: both sides ran {} iterations across the wire", self.spec.iters));
            } else {
                for p in &r.problems {
                    out.push(format!("{indent}  FAIL: {p}"));
                }
            }
        }
        for p in self.boot_problems() {
            out.push(format!("{indent}FAIL: {p}"));
        }
        let consoles: Vec<String> = self
            .hosts
            .iter()
            .filter_map(|(n, _, o)| o.as_ref().ok().map(|o| format!("{n} {}", o.log.display())))
            .collect();
        out.push(format!("{indent}took {}; consoles: {}", secs(self.elapsed), consoles.join(", ")));
        out
    }

    /// The console tails of failed hosts, for diagnosis.
    pub fn failure_tails(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, _, o) in &self.hosts {
            if let Ok(o) = o {
                if o.problem().is_some() || o.report.runs.first().is_some_and(|r| r.exit != Some(0)) {
                    out.push(format!("---- host {name}: guest console tail"));
                    out.extend(o.tail(30).iter().cloned());
                    out.push(format!("---- host {name}: kernel console tail"));
                    out.extend(o.kernel_tail(20).iter().cloned());
                    if !o.report.dmesg.is_empty() {
                        out.push(format!("---- host {name}: dmesg tail"));
                        out.extend(o.report.dmesg.iter().rev().take(30).rev().cloned());
                    }
                }
            }
        }
        out
    }
}

/// Progress printer for both consoles: verbose streams everything, else
/// only the end of each run.
pub fn progress(verbose: bool) -> impl Fn(&str, LineKind, &str) + Sync {
    move |host: &str, kind: LineKind, line: &str| {
        if verbose {
            match kind {
                LineKind::Kernel => eprintln!("[{host}] kernel: {line}"),
                _ => eprintln!("[{host}] {line}"),
            }
        } else if let Some(rest) = line.trim().strip_prefix(PAIR).and_then(|r| r.trim().strip_prefix("end ")) {
            let w: Vec<&str> = rest.split_whitespace().collect();
            if let [mode, rc, ..] = w.as_slice() {
                let mode = Mode::from_name(mode).map_or_else(|| mode.to_uppercase(), |m| m.upper().to_owned());
                note(format!("host {host}: {mode} run finished, exit {rc}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pair_sections() {
        let lines: Vec<String> = "\
noise
@@PAIR begin rc
  local address:  LID 0x0000, QPN 0x000011, PSN 0x1, GID ::ffff:192.168.78.2
  remote address: LID 0x0000, QPN 0x000011, PSN 0x2, GID ::ffff:192.168.78.1
819200 bytes in 4.00 seconds = 1.64 Mbit/sec
100 iters in 4.00 seconds = 40000.00 usec/iter
@@PAIR end rc 0 tx 450 rx 440 tries 3
@@PAIR begin ud
rverbs pingpong: boom
@@PAIR end ud 1 tx 0 rx 0 tries 1
@@PAIR begin cm-siw
link siw0/1 state ACTIVE physical_state LINK_UP netdev eth0
client DISCONNECT EVENT...
@@PAIR end cm-siw 0 tx 1210 rx 1190 tcpout 1210 tcpin 1190 tries 2 cs 1234"
            .lines()
            .map(String::from)
            .collect();
        let v = parse_sides(&lines);
        assert_eq!(v.len(), 3);
        let rc = &v[0].1;
        assert_eq!((rc.exit, rc.tx, rc.rx, rc.tries), (Some(0), Some(450), Some(440), Some(3)));
        assert_eq!(rc.iters(), Some(100));
        assert_eq!(rc.usec_per_iter(), Some(40000.0));
        assert_eq!(rc.mbit(), Some(1.64));
        assert_eq!(rc.remote_gid(), Some("::ffff:192.168.78.1"));
        assert_eq!(v[1].1.exit, Some(1));
        assert_eq!(v[1].1.lines, vec!["rverbs pingpong: boom".to_string()]);
        assert_eq!((rc.tcp_out, rc.centis), (None, None), "older guests' lines still parse");
        let (name, siw) = &v[2];
        assert_eq!(name, "cm-siw");
        assert_eq!((siw.tcp_out, siw.tcp_in, siw.tries, siw.centis), (Some(1210), Some(1190), Some(2), Some(1234)));
        assert_eq!(siw.usec_per_ping(100), Some(123_400.0));
        assert_eq!(siw.usec_per_ping(0), None);
        assert_eq!(Mode::from_name("cm-siw"), Some(Mode::CmSiw));
    }

    #[test]
    fn scripts() {
        let spec = PairSpec::default();
        let a = script(true, &spec);
        assert!(a.contains("timeout 240 rverbs pingpong -e -n 100 -p 18515 --timeout 60 2>&1"));
        assert!(a.contains("rverbs pingpong --ud -e -n 100 -p 18516"));
        let b = script(false, &spec);
        assert!(b.contains("-n 100 -p 18515 --timeout 60 192.168.78.1 >/tmp/pp.out"));
        assert!(b.contains("grep -q -e \"Couldn't connect\" /tmp/pp.out"));
        assert!(a.contains("timeout 240 rverbs rping -s -S 4096 -a 192.168.78.1 -p 18517 2>&1"));
        assert!(b.contains("rverbs rping -c -C 100 -S 4096 -V -p 18517 -a 192.168.78.1 >/tmp/pp.out"));
        assert!(b.contains("grep -q -e \"nobody listens\" -e \"did not answer\" /tmp/pp.out"));
        // Every run counts eth0's packets and the kernel's TCP segments;
        // the client times its last try.
        assert!(a.contains("tcpout $(($(tcp out) - to0)) tcpin $(($(tcp in) - ti0)) tries $tries${cs:+ cs $cs}\"\n"));
        assert!(b.contains("    t0=$(cs)\n    timeout 240 rverbs rping -c"));
        assert!(b.contains("    cs=$(($(cs) - t0))\n"));
    }

    #[test]
    fn siw_replaces_rxe_after_the_rxe_modes() {
        // Listed first, run last: siw_up deletes rxe0.
        let spec = PairSpec { iters: 100, modes: vec![Mode::CmSiw, Mode::Rc, Mode::Cm] };
        for server in [true, false] {
            let s = script(server, &spec);
            let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle:?} not in {s}"));
            assert!(at("@@PAIR begin rc") < at("@@PAIR begin cm\"\n"));
            assert!(at("@@PAIR end cm ") < at("@@PAIR begin cm-siw"));
            assert!(at("@@PAIR begin cm-siw\"\nsiw_up 2>&1\nsiw=$?\nrc=$siw\n") < at("if [ $siw = 0 ]; then\n"));
            assert_eq!(s.matches("siw_up 2>&1").count(), 1);
            // The function: rxe0 out, siw0 on eth0, its port ACTIVE.
            let def = at("siw_up() {");
            assert!(def < at("@@PAIR begin rc"));
            let f = &s[def..];
            let step = |needle: &str| f.find(needle).unwrap_or_else(|| panic!("{needle:?} not in {f}"));
            assert!(step("/usr/bin/rdma link delete rxe0 ||") < step("/usr/sbin/modprobe -a crc32c_generic siw ||"));
            assert!(
                step("modprobe -a crc32c_generic siw ||") < step("/usr/bin/rdma link add siw0 type siw netdev eth0 ||")
            );
            assert!(step("netdev eth0 ||") < step("grep -q ACTIVE /sys/class/infiniband/siw0/ports/1/state"));
            assert!(f.contains("siw0 port 1 not ACTIVE after 30 s"));
            assert!(s.ends_with("fi\necho \"@@PAIR end cm-siw $rc tx $(($(pkts tx) - tx0)) rx $(($(pkts rx) - rx0)) tcpout $(($(tcp out) - to0)) tcpin $(($(tcp in) - ti0)) tries $tries${cs:+ cs $cs}\"\n"), "{s}");
        }
        let a = script(true, &spec);
        assert!(a.contains(
            "if [ $siw = 0 ]; then\n    timeout 240 rverbs rping -s -S 4096 -a 192.168.78.1 -p 18518 2>&1\n    rc=$?\n"
        ));
        let b = script(false, &spec);
        assert!(
            b.contains("        timeout 240 rverbs rping -c -C 100 -S 4096 -V -p 18518 -a 192.168.78.1 >/tmp/pp.out")
        );
        assert!(b.contains("    while :; do\n"), "the client's retries sit inside the if");
        // Without a siw mode, no siw_up at all.
        let rxe = script(false, &PairSpec { iters: 10, modes: vec![Mode::Rc] });
        assert!(!rxe.contains("siw"), "{rxe}");
        assert_eq!(PairSpec::default().modes, Mode::ALL);
    }

    /// A's and B's CM-siw sections, `tcp` segments each way.
    fn siw_sides(tcp: u64, disconnect: bool) -> Vec<Vec<(String, Side)>> {
        ["server", "client"]
            .iter()
            .map(|role| {
                let mut lines = vec!["link siw0/1 state ACTIVE physical_state LINK_UP netdev eth0".to_owned()];
                if disconnect {
                    lines.push(format!("{role} DISCONNECT EVENT..."));
                }
                let side = Side {
                    lines,
                    exit: Some(0),
                    tx: Some(900),
                    rx: Some(900),
                    tcp_out: Some(tcp),
                    tcp_in: Some(tcp),
                    ..Default::default()
                };
                vec![("cm-siw".to_owned(), side)]
            })
            .collect()
    }

    fn siw_pair(siw_error: Option<&str>) -> PairRun {
        let host = |n: &'static str, i: usize| (n, pair::host_ip(i), Err("not booted in this test".to_owned()));
        PairRun {
            spec: PairSpec { iters: 100, modes: vec![Mode::CmSiw] },
            wire: String::new(),
            hosts: vec![host("A", 0), host("B", 1)],
            elapsed: Duration::ZERO,
            siw_error: siw_error.map(str::to_owned),
        }
    }

    #[test]
    fn siw_passes_only_over_tcp() {
        let pair = siw_pair(None);
        let ok = pair.judge(&siw_sides(870, true));
        assert!(ok[0].problems.is_empty(), "{:?}", ok[0].problems);
        // eth0 busy but hardly any TCP: the CM took another device.
        let rxe = pair.judge(&siw_sides(3, true));
        assert_eq!(rxe[0].problems.len(), 2, "{:?}", rxe[0].problems);
        assert!(rxe[0].problems[0].contains("TCP sent only Some(3) segments"), "{:?}", rxe[0].problems);
        let quiet = pair.judge(&siw_sides(870, false));
        assert!(quiet[0].problems[1].contains("no \"client DISCONNECT EVENT...\" line"), "{:?}", quiet[0].problems);
        let missing = pair.judge(&[vec![], vec![]]);
        assert!(missing[0].problems[0].contains("the CM-siw run did not happen"), "{:?}", missing[0].problems);
    }

    #[test]
    fn siw_without_its_module_fails_with_the_reason() {
        let pair = siw_pair(Some("siw for 6.1.0-57-amd64: apt-get download failed"));
        let r = pair.judge(&[vec![], vec![]]);
        assert_eq!(r[0].problems, ["not run: siw for 6.1.0-57-amd64: apt-get download failed"]);
        let (c, problems) = pair.counts();
        assert_eq!((c.passed, c.failed), (0, 1));
        assert!(problems[0].starts_with("CM-siw: not run: siw for"), "{problems:?}");
    }

    /// The script's shell helpers, run by the host's `sh` on this host's
    /// /proc: `tcp` reads the counters, `cs` counts up.
    #[test]
    fn shell_helpers_read_proc() {
        let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap();
        let tcp: Vec<u64> = snmp
            .lines()
            .filter(|l| l.starts_with("Tcp: ") && l.as_bytes()[5].is_ascii_digit())
            .flat_map(|l| l.split_whitespace().skip(1).map(|w| w.parse::<i64>().unwrap_or(0) as u64))
            .collect();
        let uptime_cs = || -> u64 {
            let t = std::fs::read_to_string("/proc/uptime").unwrap();
            let (s, f) = t.split_whitespace().next().unwrap().split_once('.').unwrap();
            s.parse::<u64>().unwrap() * 100 + f.parse::<u64>().unwrap()
        };
        let up0 = uptime_cs();
        let spec = PairSpec { iters: 1, modes: vec![] };
        let helpers = script(true, &spec);
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{helpers}echo $(tcp in) $(tcp out) $(cs)"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<u64> = text.split_whitespace().map(|w| w.parse().unwrap()).collect();
        assert_eq!(v.len(), 3, "{text}");
        // InSegs, OutSegs: read before the shell's run, so no more than it.
        assert!(tcp[9] <= v[0] && tcp[10] <= v[1], "{tcp:?} vs {v:?}");
        let up1 = uptime_cs();
        assert!(up0 <= v[2] && v[2] <= up1, "cs {} not between the uptimes {up0} and {up1}", v[2]);
    }
}
