//! The scale bench's `connections` section: N = 1, 100, 1,000 RDMA CM
//! connections to one listener, every pairing of rdma-core's `ucmatose`
//! and rverbs' `examples/scale_connections.rs` (which speaks ucmatose's
//! protocol) as server and client. The example's `drive` mode times each
//! pair: the client's wall time (connections per second) and the span
//! from the client's start to the server's exit, in which the listener
//! handles three CM events per connection (request, established,
//! disconnected): events per second. rverbs' async listener also reports
//! its own spans. Every pairing runs [`ROUNDS`] times; a cell is the
//! median of its rounds. Per connection, exact: each library's syscalls
//! (strace) and userspace instructions (callgrind) on each side.

use std::path::PathBuf;

use super::{header, pooled_text, ratio, thousands, Sample};
use crate::bench_report::{median, KernelRun, Pairs};
use crate::guest;
use crate::project::{self, Workspace};
use crate::util::{self, note, Result};

/// Connections per run.
pub const NS: [u64; 3] = [1, 100, 1000];
/// Timed rounds: each runs every N and every pairing once. One run of a
/// pair varied by up to 1.5x between rounds of one boot under TCG.
pub const ROUNDS: usize = 5;
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

/// Appends the section's part of the guest script: [`ROUNDS`] rounds of
/// every pairing at every N (which pairing goes first rotates, as a TCG
/// guest drifts), the server on CPU 0 and the client on CPU 1 (as the
/// bench's pairs), the result lines into `sc-connections`; then the
/// straced and the profiled runs.
pub fn script(s: &mut String, port: &mut u32) {
    s.push_str("step scale-connections\n");
    // Room for an fd per connection: the example's ids share one event
    // channel per side, but `AsyncCmId::resolve` alone opens one per id.
    s.push_str("ulimit -n 65536 2>/dev/null || ulimit -n 8192 2>/dev/null || true\n");
    for round in 0..ROUNDS {
        for n in NS {
            for k in 0..PAIRS.len() {
                let (srv, cli) = PAIRS[(round + k) % PAIRS.len()];
                *port += 1;
                let out = format!("$D/cx-{n}-{srv}-{cli}");
                drive(s, (srv, cli), n, *port, ["", ""], &out, ">>$D/sc-connections");
            }
        }
    }
    strace_script(s, port);
    callgrind_script(s, port);
}

/// One run of `srv` ← `cli` with `n` connections on `port`: the
/// example's `drive`, each side's command after its wrapper (`strace …`,
/// `valgrind …` with a trailing space, or nothing), the sides' outputs in
/// `out.srv` and `out.cli`, the driver's lines redirected by `to`.
fn drive(s: &mut String, (srv, cli): (&str, &str), n: u64, port: u32, wrap: [&str; 2], out: &str, to: &str) {
    let [on_srv, on_cli] = wrap;
    s.push_str(&format!(
        "{PROGRAM} drive {srv}:{cli} {n} {port} {out} \"$ON0 timeout 300 {on_srv}{}\" \
         \"$ON1 timeout 300 {on_cli}{}\" {to} 2>&1\n",
        server(srv, cli, n, port),
        client(cli, srv, n, port)
    ));
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
            let f = format!("$D/st-{n}-{imp}");
            let st = |side: &str| format!("strace -f -qq -c -o {f}.{side} ");
            let out = format!("$D/cs-{n}-{imp}");
            drive(s, (imp, imp), n, *port, [&st("srv"), &st("cli")], &out, &format!(">{out}.drive"));
            s.push_str(&format!("{PROGRAM} syscalls {imp}:{imp} {n} {f}.srv {f}.cli >>$D/sc-connections 2>&1\n"));
        }
    }
}

/// Appends the profiled runs: each library with itself at
/// [`STRACE_NS`], one side under callgrind at a time with its peer not
/// under valgrind, the totals as `SCALE connections instructions` lines.
fn callgrind_script(s: &mut String, port: &mut u32) {
    for n in STRACE_NS {
        for imp in IMPLS {
            let f = format!("$D/cg-{n}-{imp}");
            for side in ["srv", "cli"] {
                *port += 1;
                let vg = format!("valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file={f}.{side} ");
                let wrap = if side == "srv" { [vg.as_str(), ""] } else { ["", vg.as_str()] };
                let out = format!("$D/cc-{n}-{imp}-{side}");
                drive(s, (imp, imp), n, *port, wrap, &out, &format!(">{out}.drive"));
            }
            s.push_str(&format!("{PROGRAM} instructions {imp}:{imp} {n} {f}.srv {f}.cli >>$D/sc-connections 2>&1\n"));
        }
    }
}

/// `what` (`syscalls`, `instructions`) per connection of `imp`'s
/// (listener, client), from the totals at the two [`STRACE_NS`].
fn per_connection(samples: &[Sample], what: &str, imp: &str) -> (Option<f64>, Option<f64>) {
    let pair = format!("{imp}:{imp}");
    let [lo, hi] = STRACE_NS;
    let get = |n: u64, k: &str| {
        samples.iter().find(|s| s.what == what && s.imp == pair && s.n == n).and_then(|s| s.values.get(k).copied())
    };
    let per = |k: &str| Some((get(hi, k)? - get(lo, k)?) / (hi - lo) as f64);
    (per("srv"), per("cli"))
}

/// One round of a pairing, both sides exited 0: connections per second
/// (the client's wall time), the listener's events per second (client
/// start to server exit), rverbs' listener's own events per second (its
/// event spans).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Round {
    conn_s: f64,
    ev_s: f64,
    own_ev_s: Option<f64>,
}

/// `count` per second over `ns` (`None` without a positive span).
fn per_s(count: f64, ns: Option<f64>) -> Option<f64> {
    ns.filter(|&ns| ns > 0.0).map(|ns| count * 1e9 / ns)
}

/// The rounds of `pair` at `n` in the script's order, `None` for one in
/// which a side failed. A round is a `wall` line and the lines its run
/// printed after it (the listener's).
fn rounds(samples: &[Sample], pair: &str, n: u64) -> Vec<Option<Round>> {
    let mut out: Vec<Option<Round>> = Vec::new();
    for s in samples.iter().filter(|s| s.imp == pair && s.n == n) {
        let v = |k: &str| s.values.get(k).copied();
        match s.what.as_str() {
            "wall" => {
                let ok = v("rc") == Some(0.0) && v("src") == Some(0.0);
                let conn_s = per_s(n as f64, v("cli_ns")).filter(|_| ok);
                let ev_s = per_s(3.0 * n as f64, v("srv_ns"));
                out.push(conn_s.zip(ev_s).map(|(conn_s, ev_s)| Round { conn_s, ev_s, own_ev_s: None }));
            }
            "listener" => {
                if let (Some(Some(r)), Some(events)) = (out.last_mut(), v("events")) {
                    r.own_ev_s = per_s(events, v("conn_ns").zip(v("disc_ns")).map(|(c, d)| c + d));
                }
            }
            _ => {}
        }
    }
    out
}

/// A cell: the medians of its rounds, and how many rounds failed.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Cell {
    conn_s: Option<f64>,
    ev_s: Option<f64>,
    own_ev_s: Option<f64>,
    rounds: usize,
    failed: usize,
}

fn cell(samples: &[Sample], pair: &str, n: u64) -> Cell {
    let r = rounds(samples, pair, n);
    let ok: Vec<Round> = r.iter().flatten().copied().collect();
    let med = |f: fn(&Round) -> Option<f64>| median(&ok.iter().filter_map(f).collect::<Vec<_>>());
    Cell {
        conn_s: med(|r| Some(r.conn_s)),
        ev_s: med(|r| Some(r.ev_s)),
        own_ev_s: med(|r| r.own_ev_s),
        rounds: r.len(),
        failed: r.len() - ok.len(),
    }
}

/// rdma-core's own pair's and `pair`'s connections per second, round by
/// round (both sides' runs of a round succeeded).
fn conn_pairs(samples: &[Sample], pair: &str, n: u64) -> Vec<(f64, f64)> {
    let base = rounds(samples, &format!("{0}:{0}", IMPLS[0]), n);
    base.iter().zip(rounds(samples, pair, n)).filter_map(|(a, b)| Some((a.as_ref()?.conn_s, b?.conn_s))).collect()
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
         connection) in every pairing, same guest, each pairing timed in every round (which one goes first \
         rotates) and a cell the median of its rounds. conn/s: N over the client's wall time (process start \
         to exit); events/s: the listener's 3 CM events per connection over the span from the client's start \
         to the server's exit (rverbs' listener's own count over its event spans in brackets); ×: conn/s \
         and events/s over rdma-core's own pair's in the same boot (`conn / events`); ahead: the rounds in \
         which the pairing's conn/s beat rdma-core's own pair's of the same round.\n\n",
    );
    t.push_str(&header("| N | server ← client |", "| --: | --- |", runs, &["conn/s", "events/s", "×", "ahead"]));
    for n in NS {
        for (srv, cli) in PAIRS {
            let pair = format!("{srv}:{cli}");
            t.push_str(&format!("| {} | {srv} ← {cli} |", thousands(n as f64)));
            for s in &samples {
                t.push_str(&row(s, &pair, n));
            }
            t.push('\n');
        }
    }
    t.push_str(&pooled_rounds(runs, &samples));
    t.push_str(&per_connection_table(runs, &samples));
    t
}

/// One kernel's four columns of `pair` at `n`.
fn row(s: &[Sample], pair: &str, n: u64) -> String {
    let c = cell(s, pair, n);
    if c.failed > 0 {
        return format!(" failed in {} of {} rounds | — | — / — | — |", c.failed, c.rounds);
    }
    let base = cell(s, &format!("{0}:{0}", IMPLS[0]), n);
    let ev = match c.own_ev_s {
        Some(o) => format!("{} ({})", num(c.ev_s), num(Some(o))),
        None => num(c.ev_s),
    };
    let ahead = if pair == format!("{0}:{0}", IMPLS[0]) {
        "—".to_owned()
    } else {
        let a = Pairs::of(&conn_pairs(s, pair, n), false);
        if a.n == 0 {
            "—".to_owned()
        } else {
            format!("{}/{}", a.wins, a.n)
        }
    };
    format!(" {} | {ev} | {} / {} | {ahead} |", num(c.conn_s), ratio(c.conn_s, base.conn_s), ratio(c.ev_s, base.ev_s))
}

/// Below the table: each pairing with rverbs on a side against
/// rdma-core's own, every N's rounds pooled.
fn pooled_rounds(runs: &[KernelRun], samples: &[Vec<Sample>]) -> String {
    let mut t = String::from(
        "\nConnections per second, every N's rounds pooled (each pairing against rdma-core's own pair of \
         the same round):\n\n",
    );
    for (run, s) in runs.iter().zip(samples) {
        if s.is_empty() {
            continue;
        }
        for (srv, cli) in &PAIRS[1..] {
            let p: Vec<(f64, f64)> = NS.iter().flat_map(|&n| conn_pairs(s, &format!("{srv}:{cli}"), n)).collect();
            let text = pooled_text(&Pairs::of(&p, false), "rounds");
            t.push_str(&format!("- {} {srv} ← {cli}: {text}\n", run.series));
        }
    }
    t
}

/// Syscalls and instructions per connection of each library, each side.
fn per_connection_table(runs: &[KernelRun], samples: &[Vec<Sample>]) -> String {
    let has = |w: &str| samples.iter().any(|s| s.iter().any(|x| x.what == w));
    if !has("syscalls") && !has("instructions") {
        return String::new();
    }
    let mut t = String::from(
        "\nPer connection, each library with itself, (total at N = 100 − total at N = 1) / 99: syscalls \
         (`strace -f -c` of both sides) and userspace instructions (callgrind of one side, its peer not \
         under valgrind; libraries and runtime included):\n\n",
    );
    let cols = ["listener syscalls", "client syscalls", "listener instructions", "client instructions"];
    t.push_str(&header("| library |", "| --- |", runs, &cols));
    let fig = |s: &[Sample], imp: &str| {
        let (a, b) = per_connection(s, "syscalls", imp);
        let (c, d) = per_connection(s, "instructions", imp);
        [a, b, c, d]
    };
    for imp in IMPLS {
        t.push_str(&format!("| {imp} |"));
        for s in samples {
            let v = fig(s, imp);
            let f = |i: usize, x: Option<f64>| {
                x.map_or("—".into(), |x| if i < 2 { format!("{x:.1}") } else { thousands(x) })
            };
            for (i, x) in v.into_iter().enumerate() {
                t.push_str(&format!(" {} |", f(i, x)));
            }
        }
        t.push('\n');
    }
    t.push_str("| ×, rverbs over rdma-core |");
    for s in samples {
        let (a, b) = (fig(s, IMPLS[0]), fig(s, IMPLS[1]));
        for i in 0..4 {
            t.push_str(&format!(" {} |", ratio(b[i], a[i])));
        }
    }
    t.push('\n');
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
    fn script_runs_every_pairing_each_round() {
        let mut s = String::new();
        let mut port = 30000;
        script(&mut s, &mut port);
        let timed = ROUNDS * NS.len() * PAIRS.len();
        assert_eq!(port as usize, 30000 + timed + 2 * 2 + 2 * 2 * 2);
        assert_eq!(s.matches(">>$D/sc-connections").count(), timed + 2 * 2 + 2 * 2);
        // Round 0 starts with rdma-core's pair, round 1 with the next.
        assert!(s.contains(
            "/usr/local/bin/scale_connections drive rdma-core:rdma-core 1 30001 $D/cx-1-rdma-core-rdma-core \
             \"$ON0 timeout 300 ucmatose -p 30001 -c 1 -C 1 -S 64\" \
             \"$ON1 timeout 300 ucmatose -s 192.168.77.1 -p 30001 -c 1 -C 1 -S 64\" >>$D/sc-connections 2>&1"
        ));
        assert!(s.contains("drive rverbs:rdma-core 1 30013 "), "{s}");
        assert!(s.contains(
            "\"$ON0 timeout 300 /usr/local/bin/scale_connections server 30013 1 1 64 rdma-core\" \
             \"$ON1 timeout 300 ucmatose -s 192.168.77.1 -p 30013 -c 1 -C 1 -S 64\""
        ));
        assert!(s.contains("scale_connections client 192.168.77.1 30011 1000 1 64 rdma-core\""));
        assert!(s.contains("ulimit -n"));
        assert!(s.contains(
            "/usr/local/bin/scale_connections drive rverbs:rverbs 100 30064 $D/cs-100-rverbs \
             \"$ON0 timeout 300 strace -f -qq -c -o $D/st-100-rverbs.srv /usr/local/bin/scale_connections \
             server 30064 100 1 64 rverbs\""
        ));
        assert!(s.contains(
            "/usr/local/bin/scale_connections syscalls rdma-core:rdma-core 1 $D/st-1-rdma-core.srv \
             $D/st-1-rdma-core.cli >>$D/sc-connections 2>&1\n"
        ));
        // One side under callgrind at a time.
        assert!(
            s.contains(
                "drive rverbs:rverbs 1 30067 $D/cc-1-rverbs-srv \"$ON0 timeout 300 valgrind --tool=callgrind \
             --callgrind-out-file=/dev/null --log-file=$D/cg-1-rverbs.srv /usr/local/bin/scale_connections \
             server 30067 1 1 64 rverbs\" \"$ON1 timeout 300 /usr/local/bin/scale_connections client"
            ),
            "{s}"
        );
        assert!(
            s.contains(
                "\"$ON1 timeout 300 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
             --log-file=$D/cg-100-rdma-core.cli ucmatose -s 192.168.77.1 -p 30070"
            ),
            "{s}"
        );
        assert!(s.contains(
            "/usr/local/bin/scale_connections instructions rverbs:rverbs 100 $D/cg-100-rverbs.srv \
             $D/cg-100-rverbs.cli >>$D/sc-connections 2>&1\n"
        ));
    }

    fn wall(pair: &str, n: u64, cli_ms: u64, srv_ms: u64, rc: u32) -> String {
        format!(
            "SCALE connections wall {pair} {n} cli_ns={} srv_ns={} rc={rc} src=0",
            cli_ms * 1_000_000,
            srv_ms * 1_000_000
        )
    }

    #[test]
    fn a_cell_is_the_median_of_its_rounds() {
        let mut lines = Vec::new();
        for (base, rv, own) in [(1000, 500, 100), (900, 1000, 200), (1100, 400, 300)] {
            lines.push(wall("rdma-core:rdma-core", 100, base, base + 500, 0));
            lines.push(wall("rverbs:rdma-core", 100, rv, rv + 100, 0));
            lines.push(format!(
                "SCALE connections listener rverbs:rdma-core 100 conn_ns={} disc_ns=0 events=300",
                own * 1_000_000
            ));
        }
        lines.push(wall("rdma-core:rverbs", 100, 500, 600, 1));
        lines.push(wall("rdma-core:rverbs", 100, 500, 600, 0));
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let k = run("6.12", &lines);
        let s = Sample::all(&k, "connections");
        let base = cell(&s, "rdma-core:rdma-core", 100);
        assert_eq!((base.conn_s, base.ev_s, base.rounds, base.failed), (Some(100.0), Some(200.0), 3, 0));
        let rv = cell(&s, "rverbs:rdma-core", 100);
        // Medians: 500 ms (200 conn/s), 600 ms (500 ev/s), 200 ms (1,500 own ev/s).
        assert_eq!((rv.conn_s, rv.ev_s, rv.own_ev_s), (Some(200.0), Some(500.0), Some(1500.0)));
        assert_eq!(conn_pairs(&s, "rverbs:rdma-core", 100).len(), 3);
        let t = table(&[k]);
        assert!(t.contains("| 100 | rdma-core ← rdma-core | 100 | 200 | 1.00 / 1.00 | — |"), "{t}");
        // Ahead in rounds 1 and 3 (500 < 1000 ms, 400 < 1100 ms), behind in 2.
        assert!(t.contains("| 100 | rverbs ← rdma-core | 200 | 500 (1,500) | 2.00 / 2.50 | 2/3 |"), "{t}");
        assert!(t.contains("| 100 | rdma-core ← rverbs | failed in 1 of 2 rounds | — | — / — | — |"), "{t}");
        assert!(t.contains("| 100 | rverbs ← rverbs | — | — | — / — | — |"), "{t}");
        assert!(t.contains("- 6.12 rverbs ← rdma-core: ahead in 2 of 3 rounds, geometric mean of the ratios"), "{t}");
        assert!(t.contains("- 6.12 rverbs ← rverbs: -"), "{t}");
        assert!(table(&[run("6.1", &["nothing"])]).is_empty());
        assert!(!t.contains("Per connection"), "{t}");
    }

    #[test]
    fn per_connection_reads_the_totals() {
        let k = run(
            "6.12",
            &[
                "SCALE connections syscalls rdma-core:rdma-core 1 srv=200 cli=250",
                "SCALE connections syscalls rdma-core:rdma-core 100 srv=4160 cli=4408",
                "SCALE connections syscalls rverbs:rverbs 1 srv=300",
                "SCALE connections syscalls rverbs:rverbs 100 srv=4656",
                "SCALE connections instructions rdma-core:rdma-core 1 srv=787090 cli=783828",
                "SCALE connections instructions rdma-core:rdma-core 100 srv=2055180 cli=2188393",
                "SCALE connections instructions rverbs:rverbs 1 srv=562219 cli=562465",
                "SCALE connections instructions rverbs:rverbs 100 srv=3520438 cli=3886390",
            ],
        );
        let s = Sample::all(&k, "connections");
        assert_eq!(per_connection(&s, "syscalls", "rdma-core"), (Some(40.0), Some(42.0)));
        assert_eq!(per_connection(&s, "syscalls", "rverbs"), (Some(44.0), None));
        assert_eq!(per_connection(&s, "instructions", "rverbs"), (Some(29_881.0), Some(33_575.0)));
        let t = table(&[k]);
        assert!(t.contains("| rdma-core | 40.0 | 42.0 | 12,809 | 14,188 |"), "{t}");
        assert!(t.contains("| rverbs | 44.0 | — | 29,881 | 33,575 |"), "{t}");
        assert!(t.contains("| ×, rverbs over rdma-core | 1.10 | — | 2.33 | 2.37 |"), "{t}");
    }
}
