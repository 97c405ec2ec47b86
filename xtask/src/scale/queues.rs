//! The scale bench's `queues` section: one CQ shared by 1, 16, 256 QPs
//! and 1, 16, 256 CQs on one completion channel (rverbs' Rust API,
//! `examples/scale_queues.rs`): instructions (callgrind, the reaping
//! function alone, the difference of two round counts), wall ns and, for
//! events, syscalls per completion; and perftest's `ib_write_bw -q 1/4/16`
//! (one CQ under every QP) on rdma-core's `libibverbs.so.1` and rverbs'.

use std::path::PathBuf;

use super::{header, ratio, thousands, Sample};
use crate::bench::collected;
use crate::bench_report::KernelRun;
use crate::project::{self, Workspace};
use crate::util::Result;

/// Queues sharing the CQ (`poll`) or CQs sharing the channel (`events`).
pub const NS: [u64; 3] = [1, 16, 256];
/// The two modes of the example.
const MODES: [&str; 2] = ["poll", "events"];
/// perftest's `-q`.
pub const PERFTEST_QS: [u64; 3] = [1, 4, 16];
/// perftest's `-n` (per QP) of the timed runs and of the two callgrind runs.
const PERFTEST_ITERS: u64 = 1000;
const PERFTEST_CG: [u64; 2] = [100, 300];
/// Where the guest finds the example.
const PROGRAM: &str = "/usr/local/bin/scale_queues";
/// The C libraries, as the lines name them, and the tag in file names.
const LIBS: [&str; 2] = ["rdma-core", "rverbs-capi"];

/// The section's guest programs: (path in the guest, host file).
pub fn guest_files(ws: &Workspace) -> Result<Vec<(String, PathBuf)>> {
    Ok(vec![(PROGRAM.to_owned(), super::connections::build_example(ws, "scale_queues")?)])
}

/// Rounds of a timed run: about 1,000 completions.
fn timed_rounds(n: u64) -> u64 {
    1000u64.div_ceil(n)
}

/// Rounds of the two counted runs: about 100 and 500 completions (every
/// run under callgrind in a TCG guest takes tens of seconds).
fn counted_rounds(n: u64) -> [u64; 2] {
    let r1 = 100u64.div_ceil(n).max(2);
    [r1, r1 + 400u64.div_ceil(n).max(2)]
}

fn cg_tag(mode: &str, n: u64, rounds: u64) -> String {
    format!("sq-cg-{mode}-{n}-{rounds}")
}

fn st_tag(n: u64, rounds: u64) -> String {
    format!("sq-st-events-{n}-{rounds}")
}

fn wbw_tag(lib: &str, q: u64) -> String {
    format!("sq-wbw-{lib}-{q}")
}

fn wbw_cg_tag(lib: &str, q: u64, iters: u64) -> String {
    format!("sq-wbw-cg-{lib}-{q}-{iters}")
}

/// The command prefix that puts a perftest program on `lib`.
fn on(lib: &str) -> String {
    if lib == "rverbs-capi" {
        format!("env LD_LIBRARY_PATH={} ", project::GUEST_LIB_DIR)
    } else {
        String::new()
    }
}

/// Appends the section's part of the guest script.
pub fn script(s: &mut String, port: &mut u32) {
    s.push_str("step scale-queues\n");
    for mode in MODES {
        for n in NS {
            s.push_str(&format!("timeout 300 {PROGRAM} {mode} {n} {} >>$D/sc-queues-time 2>&1\n", timed_rounds(n)));
            for r in counted_rounds(n) {
                s.push_str(&format!(
                    "timeout 900 valgrind --tool=callgrind --callgrind-out-file=/dev/null --collect-atstart=no \
                     '--toggle-collect=*scale_queues::reap*' {PROGRAM} {mode} {n} {r} >$D/{} 2>&1\n",
                    cg_tag(mode, n, r)
                ));
                if mode == "events" {
                    s.push_str(&format!(
                        "timeout 300 strace -f -c -o $D/{} {PROGRAM} {mode} {n} {r} >/dev/null 2>&1\n",
                        st_tag(n, r)
                    ));
                }
            }
        }
    }
    s.push_str("step scale-queues-perftest\n");
    for q in PERFTEST_QS {
        for lib in LIBS {
            *port += 1;
            let cmd = format!("{}ib_write_bw -d rxe0 -x 1 -F -q {q} -s 64 -n {PERFTEST_ITERS} -p {port}", on(lib));
            s.push_str(&format!(
                "pair {} {port} \"timeout 120 {cmd}\" \"timeout 120 {cmd} 127.0.0.1\"\n",
                wbw_tag(lib, q)
            ));
        }
        for lib in LIBS {
            for iters in PERFTEST_CG {
                *port += 1;
                let args = format!("-d rxe0 -x 1 -F -q {q} -s 64 -n {iters} -p {port}");
                let o = on(lib);
                s.push_str(&format!(
                    "pair {tag} {port} \"timeout 900 {o}ib_write_bw {args}\" \"timeout 900 {o}valgrind \
                     --tool=callgrind --callgrind-out-file=/dev/null --log-file=$D/{tag}.vg ib_write_bw {args} \
                     127.0.0.1\"\n",
                    tag = wbw_cg_tag(lib, q, iters)
                ));
            }
        }
    }
}

/// Figures of one mode at one N in one kernel.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Figures {
    instr: Option<f64>,
    ns: Option<f64>,
    empty: Option<f64>,
    syscalls: Option<f64>,
    /// Events per completion.
    events: Option<f64>,
}

/// The one result line of a file.
fn line_of(run: &KernelRun, file: &str) -> Option<Sample> {
    run.files.get(file)?.iter().find_map(|l| Sample::parse(l))
}

/// The `calls` total of an `strace -c` summary.
fn strace_total(lines: &[String]) -> Option<u64> {
    lines.iter().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.last() == Some(&"total") && w.len() >= 5).then(|| w[3].parse().ok()).flatten()
    })
}

fn figures(run: &KernelRun, timed: &[Sample], mode: &str, n: u64) -> Figures {
    let mut f = Figures::default();
    if let Some(t) = timed.iter().find(|s| s.what == mode && s.n == n) {
        let v = |k: &str| t.values.get(k).copied();
        if let (Some(ns), Some(c)) = (v("ns"), v("completions")) {
            if c > 0.0 {
                f.ns = Some(ns / c);
                f.empty = v("empty").map(|e| e / c);
                f.events = v("events").filter(|_| mode == "events").map(|e| e / c);
            }
        }
    }
    let [r1, r2] = counted_rounds(n);
    let counted = |r: u64| -> Option<(u64, f64)> {
        let file = cg_tag(mode, n, r);
        let ir = collected(&run.files.get(&file)?.join("\n"))?;
        Some((ir, *line_of(run, &file)?.values.get("completions")?))
    };
    if let (Some((i1, c1)), Some((i2, c2))) = (counted(r1), counted(r2)) {
        if c2 > c1 {
            f.instr = Some((i2 as f64 - i1 as f64) / (c2 - c1));
        }
    }
    if mode == "events" {
        let calls = |r: u64| strace_total(run.files.get(&st_tag(n, r))?);
        if let (Some(a), Some(b)) = (calls(r1), calls(r2)) {
            f.syscalls = Some((b as f64 - a as f64) / ((r2 - r1) * n) as f64);
        }
    }
    f
}

/// perftest's `BW average[MB/sec]` and `MsgRate[Mpps]` of a client's output.
fn bw_figures(lines: &[String]) -> Option<(f64, f64)> {
    let header = lines.iter().position(|l| l.trim_start().starts_with("#bytes"))?;
    lines[header + 1..].iter().find_map(|l| {
        let v: Vec<f64> = l.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        // #bytes #iterations BW-peak BW-average MsgRate
        (v.len() >= 5).then(|| (v[3], v[4]))
    })
}

/// Whole-client instructions per message of `ib_write_bw -q q` on `lib`.
fn wbw_instr(run: &KernelRun, lib: &str, q: u64) -> Option<f64> {
    let ir = |iters: u64| -> Option<u64> {
        let tag = wbw_cg_tag(lib, q, iters);
        if run.files.get(&format!("{tag}.rc"))?.first()?.trim() != "0" {
            return None;
        }
        collected(&run.files.get(&format!("{tag}.vg"))?.join("\n"))
    };
    let [a, b] = PERFTEST_CG;
    Some((ir(b)? as f64 - ir(a)? as f64) / ((b - a) * q) as f64)
}

fn wbw_bw(run: &KernelRun, lib: &str, q: u64) -> Option<(f64, f64)> {
    let tag = wbw_tag(lib, q);
    if run.files.get(&format!("{tag}.rc"))?.first()?.trim() != "0" {
        return None;
    }
    bw_figures(run.files.get(&format!("{tag}.cli"))?)
}

fn num(v: Option<f64>, places: usize) -> String {
    v.map_or("—".into(), |x| if x >= 1000.0 { thousands(x) } else { format!("{x:.places$}") })
}

/// `a / b` of the two libraries' figures (`—` where one is missing).
fn pair(v: &[Option<f64>], show: impl Fn(f64) -> String) -> String {
    v.iter().map(|x| x.map_or("—".to_owned(), &show)).collect::<Vec<_>>().join(" / ")
}

/// The section's table (empty: no figures).
pub fn table(runs: &[KernelRun]) -> String {
    let timed: Vec<Vec<Sample>> = runs.iter().map(|r| Sample::all(r, "queues")).collect();
    let has_wbw = runs.iter().any(|r| r.files.keys().any(|k| k.starts_with("sq-wbw-")));
    if timed.iter().all(Vec::is_empty) && !has_wbw {
        return String::new();
    }
    let mut t = String::from(
        "**Scale: many queues.** rverbs' Rust API (`examples/scale_queues.rs`), per completion: `poll`, one CQ \
         under N RC QPs, each round one signaled WRITE per QP, polled 16 at a time once the device has written \
         them; `events`, N CQs on one completion channel, each completion an event read, its CQ looked up, \
         acknowledged, re-armed and polled. Instructions: callgrind of the reaping function alone, difference \
         of two runs; ns: time in it (events: including the wait); syscalls: the whole program's, difference \
         of two runs (a post's doorbell `write` is one of them); empty: polls that found nothing.\n\n",
    );
    t.push_str(&header("| mode | N |", "| --- | --: |", runs, &["instr", "ns", "syscalls", "empty"]));
    for mode in MODES {
        for n in NS {
            t.push_str(&format!("| {mode} | {n} |"));
            for (r, s) in runs.iter().zip(&timed) {
                let f = figures(r, s, mode, n);
                t.push_str(&format!(
                    " {} | {} | {} | {} |",
                    num(f.instr, 0),
                    num(f.ns, 0),
                    num(f.syscalls, 2),
                    num(f.empty, 2)
                ));
            }
            t.push('\n');
        }
    }
    t.push_str(
        "\n`ib_write_bw -s 64 -n 1000 -q Q` (one send CQ under the Q QPs) with both sides on rdma-core's \
         `libibverbs.so.1` / on rverbs' (`a / b`): average MB/s, and the client's whole-program instructions \
         per message (callgrind, `-n 300` minus `-n 100`, busy polls included); ×: rverbs' over rdma-core's.\n\n",
    );
    t.push_str(&header("| Q |", "| --: |", runs, &["MB/s", "instr/msg", "×"]));
    for q in PERFTEST_QS {
        t.push_str(&format!("| {q} |"));
        for r in runs {
            let bw: Vec<Option<f64>> = LIBS.iter().map(|l| wbw_bw(r, l, q).map(|b| b.0)).collect();
            let ir: Vec<Option<f64>> = LIBS.iter().map(|l| wbw_instr(r, l, q)).collect();
            t.push_str(&format!(
                " {} | {} | {} |",
                pair(&bw, |x| format!("{x:.2}")),
                pair(&ir, thousands),
                ratio(ir[1], ir[0])
            ));
        }
        t.push('\n');
    }
    t
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn rounds_and_script() {
        assert_eq!(counted_rounds(1), [100, 500]);
        assert_eq!(counted_rounds(256), [2, 4]);
        assert_eq!(timed_rounds(16), 63);
        let mut s = String::new();
        let mut port = 30100;
        script(&mut s, &mut port);
        assert!(s.contains("timeout 300 /usr/local/bin/scale_queues poll 16 63 >>$D/sc-queues-time 2>&1\n"));
        assert!(s.contains(
            "'--toggle-collect=*scale_queues::reap*' /usr/local/bin/scale_queues events 256 4 \
             >$D/sq-cg-events-256-4 2>&1\n"
        ));
        assert!(s.contains("strace -f -c -o $D/sq-st-events-1-100 /usr/local/bin/scale_queues events 1 100"));
        assert!(!s.contains("sq-st-poll"));
        assert!(s.contains(
            "pair sq-wbw-rverbs-capi-4 30108 \"timeout 120 env LD_LIBRARY_PATH=/opt/rverbs/lib ib_write_bw -d rxe0 \
             -x 1 -F -q 4 -s 64 -n 1000 -p 30108\""
        ));
        assert!(
            s.contains("--log-file=$D/sq-wbw-cg-rdma-core-16-300.vg ib_write_bw -d rxe0 -x 1 -F -q 16 -s 64 -n 300")
        );
        assert_eq!(port, 30100 + 3 * 6);
    }

    #[test]
    fn table_from_sample_files() {
        let mut files = BTreeMap::new();
        let put = |f: &mut BTreeMap<String, Vec<String>>, k: &str, v: &[&str]| {
            f.insert(k.to_owned(), strings(v));
        };
        put(
            &mut files,
            "sc-queues-time",
            &["SCALE queues poll rverbs 16 rounds=125 completions=2000 empty=20 events=0 ns=4000000"],
        );
        let a = "SCALE queues poll rverbs 16 rounds=7 completions=112 empty=0 events=0 ns=1";
        let b = "SCALE queues poll rverbs 16 rounds=32 completions=512 empty=0 events=0 ns=1";
        put(&mut files, "sq-cg-poll-16-7", &["==1== Collected : 10000", a]);
        put(&mut files, "sq-cg-poll-16-32", &["==1== Collected : 50000", b]);
        put(&mut files, "sq-st-events-16-7", &["100.00 0.1 1 800 3 total"]);
        put(&mut files, "sq-st-events-16-32", &["100.00 0.1 1 4000 3 total"]);
        put(&mut files, "sq-wbw-rdma-core-4.rc", &["0"]);
        put(
            &mut files,
            "sq-wbw-rdma-core-4.cli",
            &[
                " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
                " 64         4000             5.12               4.80                 0.078000",
            ],
        );
        for (lib, iters, ir) in
            [("rdma-core", 100, 1_000_000), ("rdma-core", 300, 1_800_000), ("rverbs-capi", 100, 900_000)]
        {
            let tag = wbw_cg_tag(lib, 4, iters);
            put(&mut files, &format!("{tag}.rc"), &["0"]);
            put(&mut files, &format!("{tag}.vg"), &[&format!("==2== Collected : {ir}")]);
        }
        let run = KernelRun {
            series: "6.12".into(),
            release: "r".into(),
            accel: "tcg".into(),
            cpus: 2,
            commit: "c".into(),
            runs: 1,
            files,
        };
        let timed = Sample::all(&run, "queues");
        let f = figures(&run, &timed, "poll", 16);
        assert_eq!((f.instr, f.ns, f.empty), (Some(100.0), Some(2000.0), Some(0.01)));
        assert_eq!(figures(&run, &timed, "events", 16).syscalls, Some(8.0));
        assert_eq!(wbw_bw(&run, "rdma-core", 4), Some((4.8, 0.078)));
        assert_eq!(wbw_instr(&run, "rdma-core", 4), Some(1000.0));
        assert_eq!(wbw_instr(&run, "rverbs-capi", 4), None);
        let t = table(&[run]);
        assert!(t.contains("| poll | 16 | 100 | 2,000 | — | 0.01 |"), "{t}");
        assert!(t.contains("| events | 16 | — | — | 8.00 | — |"), "{t}");
        assert!(t.contains("| 4 | 4.80 / — | 1,000 / — | — |"), "{t}");
    }
}
