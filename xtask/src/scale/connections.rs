//! The scale bench's `connections` section: N = 1, 100, 1,000 RDMA CM
//! connections to one listener, every pairing of rdma-core's `ucmatose`
//! and rverbs' `examples/scale_connections.rs` (which speaks ucmatose's
//! protocol) as server and client. The example's `drive` mode times each
//! pair: the client's wall time (connections per second) and the span
//! from the client's start to the server's exit, in which the listener
//! handles three CM events per connection (request, established,
//! disconnected): events per second. rverbs' async listener also reports
//! its own spans.

use std::path::PathBuf;

use super::{header, ratio, thousands, Sample};
use crate::bench_report::KernelRun;
use crate::guest;
use crate::project::{self, Workspace};
use crate::util::{self, note, Result};

/// Connections per run.
pub const NS: [u64; 3] = [1, 100, 1000];
/// Messages each way per connection, and their size (ucmatose's `-C`,
/// `-S`): one exchange, so that the figure is the connection's.
const MESSAGES: u32 = 1;
const SIZE: u32 = 64;
/// Where the guest finds the example.
const PROGRAM: &str = "/usr/local/bin/scale_connections";
/// The two sides, as the lines name them.
const IMPLS: [&str; 2] = ["rdma-core", "rverbs"];
/// (server, client) pairings, rdma-core's own first (the baseline).
const PAIRS: [(&str, &str); 4] =
    [("rdma-core", "rdma-core"), ("rverbs", "rdma-core"), ("rdma-core", "rverbs"), ("rverbs", "rverbs")];

/// The section's guest programs: (path in the guest, host file).
pub fn guest_files(ws: &Workspace) -> Result<Vec<(String, PathBuf)>> {
    Ok(vec![(PROGRAM.to_owned(), build_example(ws, "scale_connections")?)])
}

/// `cargo build --release -p rverbs --features tokio --example NAME`.
pub fn build_example(ws: &Workspace, example: &str) -> Result<PathBuf> {
    let mut cmd = project::cargo();
    cmd.current_dir(&ws.root).args([
        "build",
        "--release",
        "--quiet",
        "-p",
        "rverbs",
        "--features",
        "tokio",
        "--example",
        example,
    ]);
    note(util::describe(&cmd));
    util::run(&mut cmd)?;
    let host = ws.target_dir.join("release/examples").join(example);
    if !host.is_file() {
        return Err(format!("cargo built no {}", host.display()));
    }
    Ok(host)
}

/// The server's command of `imp` for `n` connections on `port`.
fn server(imp: &str, peer: &str, n: u64, port: u32) -> String {
    match imp {
        "rverbs" => format!("{PROGRAM} server {port} {n} {MESSAGES} {SIZE} {peer}"),
        _ => format!("ucmatose -p {port} -c {n} -C {MESSAGES} -S {SIZE}"),
    }
}

/// The client's command of `imp`.
fn client(imp: &str, peer: &str, n: u64, port: u32) -> String {
    let ip = guest::GUEST_IP.split('/').next().unwrap_or(guest::GUEST_IP);
    match imp {
        "rverbs" => format!("{PROGRAM} client {ip} {port} {n} {MESSAGES} {SIZE} {peer}"),
        _ => format!("ucmatose -s {ip} -p {port} -c {n} -C {MESSAGES} -S {SIZE}"),
    }
}

/// Appends the section's part of the guest script: every pairing at
/// every N, the server on CPU 0 and the client on CPU 1 (as the bench's
/// pairs), the result lines into `sc-connections`.
pub fn script(s: &mut String, port: &mut u32) {
    s.push_str("step scale-connections\n");
    // Room for an fd per connection: the example's ids share one event
    // channel per side, but `AsyncCmId::resolve` alone opens one per id.
    s.push_str("ulimit -n 65536 2>/dev/null || ulimit -n 8192 2>/dev/null || true\n");
    for n in NS {
        for (srv, cli) in PAIRS {
            *port += 1;
            let p = *port;
            s.push_str(&format!(
                "{PROGRAM} drive {srv}:{cli} {n} {p} $D/cx-{n}-{srv}-{cli} \"$ON0 timeout 300 {}\" \
                 \"$ON1 timeout 300 {}\" >>$D/sc-connections 2>&1\n",
                server(srv, cli, n, p),
                client(cli, srv, n, p)
            ));
        }
    }
    strace_script(s, port);
}

/// The N of the straced runs: syscalls per connection are the difference
/// of their totals over the difference of N (each process's start and
/// exit cancel out).
const STRACE_NS: [u64; 2] = [1, 100];

/// Appends the straced runs (after the timed ones, which they would
/// slow): each library with itself at [`STRACE_NS`], both sides under
/// `strace -f -c`, the totals as `SCALE connections syscalls` lines.
fn strace_script(s: &mut String, port: &mut u32) {
    for n in STRACE_NS {
        for imp in IMPLS {
            *port += 1;
            let p = *port;
            let f = format!("$D/st-{n}-{imp}");
            let st = |side: &str| format!("strace -f -qq -c -o {f}.{side}");
            s.push_str(&format!(
                "{PROGRAM} drive {imp}:{imp} {n} {p} $D/cs-{n}-{imp} \"$ON0 timeout 300 {} {}\" \
                 \"$ON1 timeout 300 {} {}\" >$D/cs-{n}-{imp}.drive 2>&1\n\
                 {PROGRAM} syscalls {imp}:{imp} {n} {f}.srv {f}.cli >>$D/sc-connections 2>&1\n",
                st("srv"),
                server(imp, imp, n, p),
                st("cli"),
                client(imp, imp, n, p)
            ));
        }
    }
}

/// Syscalls per connection of `imp`'s (listener, client), from the
/// straced runs' totals.
fn per_connection(samples: &[Sample], imp: &str) -> (Option<f64>, Option<f64>) {
    let pair = format!("{imp}:{imp}");
    let [lo, hi] = STRACE_NS;
    let get = |n: u64, k: &str| {
        samples
            .iter()
            .find(|s| s.what == "syscalls" && s.imp == pair && s.n == n)
            .and_then(|s| s.values.get(k).copied())
    };
    let per = |k: &str| Some((get(hi, k)? - get(lo, k)?) / (hi - lo) as f64);
    (per("srv"), per("cli"))
}

/// One pairing's figures in one kernel.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Cell {
    /// Connections per second (client's wall time).
    conn_s: Option<f64>,
    /// Listener events per second (client start to server exit).
    ev_s: Option<f64>,
    /// rverbs' listener's own events per second (its event spans).
    own_ev_s: Option<f64>,
    /// Both exited 0.
    ok: bool,
}

fn cell(samples: &[Sample], pair: &str, n: u64) -> Cell {
    let find = |what: &str| samples.iter().find(|s| s.what == what && s.imp == pair && s.n == n);
    let Some(w) = find("wall") else {
        return Cell::default();
    };
    let ok = w.values.get("rc") == Some(&0.0) && w.values.get("src") == Some(&0.0);
    let per_s = |count: f64, ns: Option<&f64>| ns.filter(|&&ns| ns > 0.0).map(|ns| count * 1e9 / ns);
    let own = find("listener").and_then(|l| {
        let ns = l.values.get("conn_ns")? + l.values.get("disc_ns")?;
        per_s(*l.values.get("events")?, Some(&ns))
    });
    Cell {
        conn_s: per_s(n as f64, w.values.get("cli_ns")).filter(|_| ok),
        ev_s: per_s(3.0 * n as f64, w.values.get("srv_ns")).filter(|_| ok),
        own_ev_s: own.filter(|_| ok),
        ok,
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or("—".into(), |x| if x >= 100.0 { thousands(x) } else { format!("{x:.1}") })
}

/// The section's table (empty: no figures).
pub fn table(runs: &[KernelRun]) -> String {
    let samples: Vec<Vec<Sample>> = runs.iter().map(|r| Sample::all(r, "connections")).collect();
    if samples.iter().all(Vec::is_empty) {
        return String::new();
    }
    let mut t = String::from(
        "**Scale: connections.** N RDMA CM connections to one listener, one 64-byte SEND each way per \
         connection, then the server disconnects them all (ucmatose's protocol, `-C 1 -S 64`); rdma-core 44's \
         `ucmatose` and rverbs' `examples/scale_connections.rs` (async listener on tokio, one task per \
         connection) in every pairing, same guest. conn/s: N over the client's wall time (process start to \
         exit); events/s: the listener's 3 CM events per connection over the span from the client's start \
         to the server's exit (rverbs' listener's own count over its event spans in brackets); ×: conn/s \
         and events/s over rdma-core's own pair's in the same boot (`conn / events`).\n\n",
    );
    t.push_str(&header("| N | server ← client |", "| --: | --- |", runs, &["conn/s", "events/s", "×"]));
    for n in NS {
        for (srv, cli) in PAIRS {
            let pair = format!("{srv}:{cli}");
            t.push_str(&format!("| {} | {srv} ← {cli} |", thousands(n as f64)));
            for s in &samples {
                let c = cell(s, &pair, n);
                let base = cell(s, &format!("{0}:{0}", IMPLS[0]), n);
                if !c.ok && s.iter().any(|x| x.what == "wall" && x.imp == pair && x.n == n) {
                    t.push_str(" failed | — | — / — |");
                    continue;
                }
                let ev = match c.own_ev_s {
                    Some(o) => format!("{} ({})", num(c.ev_s), num(Some(o))),
                    None => num(c.ev_s),
                };
                t.push_str(&format!(
                    " {} | {ev} | {} / {} |",
                    num(c.conn_s),
                    ratio(c.conn_s, base.conn_s),
                    ratio(c.ev_s, base.ev_s)
                ));
            }
            t.push('\n');
        }
    }
    if samples.iter().any(|s| s.iter().any(|x| x.what == "syscalls")) {
        t.push_str(
            "\nSyscalls per connection (`strace -f -c` of each side, each library with itself, \
             (total at N = 100 − total at N = 1) / 99):\n\n",
        );
        t.push_str(&header("| library |", "| --- |", runs, &["listener", "client"]));
        for imp in IMPLS {
            t.push_str(&format!("| {imp} |"));
            for s in &samples {
                let (srv, cli) = per_connection(s, imp);
                let f = |v: Option<f64>| v.map_or("—".into(), |x| format!("{x:.1}"));
                t.push_str(&format!(" {} | {} |", f(srv), f(cli)));
            }
            t.push('\n');
        }
        t.push_str("| ×, rverbs over rdma-core |");
        for s in &samples {
            let ((a, b), (c, d)) = (per_connection(s, IMPLS[0]), per_connection(s, IMPLS[1]));
            t.push_str(&format!(" {} | {} |", ratio(c, a), ratio(d, b)));
        }
        t.push('\n');
    }
    t
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn run(series: &str, lines: &[&str]) -> KernelRun {
        let mut files = BTreeMap::new();
        files.insert("sc-connections".to_owned(), lines.iter().map(|l| l.to_string()).collect());
        KernelRun {
            series: series.into(),
            release: "r".into(),
            accel: "tcg".into(),
            cpus: 2,
            commit: "c".into(),
            runs: 1,
            files,
        }
    }

    #[test]
    fn script_runs_every_pairing() {
        let mut s = String::new();
        let mut port = 30000;
        script(&mut s, &mut port);
        assert_eq!(port, 30000 + 16);
        assert!(s.contains(
            "/usr/local/bin/scale_connections drive rverbs:rdma-core 1000 30010 $D/cx-1000-rverbs-rdma-core \
             \"$ON0 timeout 300 /usr/local/bin/scale_connections server 30010 1000 1 64 rdma-core\" \
             \"$ON1 timeout 300 ucmatose -s 192.168.77.1 -p 30010 -c 1000 -C 1 -S 64\" >>$D/sc-connections 2>&1"
        ));
        assert!(s.contains("\"$ON0 timeout 300 ucmatose -p 30011 -c 1000 -C 1 -S 64\""));
        assert!(s.contains("scale_connections client 192.168.77.1 30011 1000 1 64 rdma-core\""));
        assert!(s.contains("ulimit -n"));
        assert!(s.contains(
            "/usr/local/bin/scale_connections drive rverbs:rverbs 100 30016 $D/cs-100-rverbs \
             \"$ON0 timeout 300 strace -f -qq -c -o $D/st-100-rverbs.srv /usr/local/bin/scale_connections \
             server 30016 100 1 64 rverbs\""
        ));
        assert!(s.contains(
            "/usr/local/bin/scale_connections syscalls rdma-core:rdma-core 1 $D/st-1-rdma-core.srv \
             $D/st-1-rdma-core.cli >>$D/sc-connections 2>&1\n"
        ));
    }

    #[test]
    fn table_reads_the_drivers_lines() {
        let k = run(
            "6.12",
            &[
                "SCALE connections wall rdma-core:rdma-core 100 cli_ns=1000000000 srv_ns=1500000000 rc=0 src=0",
                "SCALE connections wall rverbs:rdma-core 100 cli_ns=500000000 srv_ns=600000000 rc=0 src=0",
                "SCALE connections listener rverbs:rdma-core 100 conn_ns=100000000 disc_ns=50000000 events=300",
                "SCALE connections wall rdma-core:rverbs 100 cli_ns=500000000 srv_ns=600000000 rc=1 src=0",
                "# $D/cx-100-rdma-core-rverbs.cli: scale_connections: rdma_connect: nothing in 120s",
            ],
        );
        let s = Sample::all(&k, "connections");
        let base = cell(&s, "rdma-core:rdma-core", 100);
        assert_eq!((base.conn_s, base.ev_s, base.ok), (Some(100.0), Some(200.0), true));
        let rv = cell(&s, "rverbs:rdma-core", 100);
        assert_eq!((rv.conn_s, rv.own_ev_s), (Some(200.0), Some(2000.0)));
        assert!(!cell(&s, "rdma-core:rverbs", 100).ok);
        assert_eq!(cell(&s, "rverbs:rverbs", 100), Cell::default());
        let t = table(&[k]);
        assert!(t.contains("| 100 | rdma-core ← rdma-core | 100 | 200 | 1.00 / 1.00 |"), "{t}");
        assert!(t.contains("| 100 | rverbs ← rdma-core | 200 | 500 (2,000) | 2.00 / 2.50 |"), "{t}");
        assert!(t.contains("| 100 | rdma-core ← rverbs | failed | — | — / — |"), "{t}");
        assert!(t.contains("| 100 | rverbs ← rverbs | — | — | — / — |"), "{t}");
        assert!(table(&[run("6.1", &["nothing"])]).is_empty());
        assert!(!t.contains("Syscalls per connection"), "{t}");
        let k = run(
            "6.12",
            &[
                "SCALE connections syscalls rdma-core:rdma-core 1 srv=200 cli=250",
                "SCALE connections syscalls rdma-core:rdma-core 100 srv=4160 cli=4408",
                "SCALE connections syscalls rverbs:rverbs 1 srv=300",
                "SCALE connections syscalls rverbs:rverbs 100 srv=4656",
            ],
        );
        let s = Sample::all(&k, "connections");
        assert_eq!(per_connection(&s, "rdma-core"), (Some(40.0), Some(42.0)));
        assert_eq!(per_connection(&s, "rverbs"), (Some(44.0), None));
        let t = table(&[k]);
        assert!(t.contains("| rdma-core | 40.0 | 42.0 |"), "{t}");
        assert!(t.contains("| rverbs | 44.0 | — |"), "{t}");
        assert!(t.contains("| ×, rverbs over rdma-core | 1.10 | — |"), "{t}");
    }
}
