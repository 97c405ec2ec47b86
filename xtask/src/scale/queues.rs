//! The scale bench's `queues` section: one CQ shared by 1, 16, 256 QPs
//! and 1, 16, 256 CQs on one completion channel, the same work on
//! rdma-core 44's `libibverbs.so.1`, rverbs' Rust API and rverbs' C
//! library (`examples/scale_queues_c.rs` on each C library by `dlopen`,
//! `examples/scale_queues.rs` on the Rust API): instructions (callgrind,
//! the reaping function alone, the difference of two round counts),
//! syscalls (the whole program's, the difference of two round counts) and
//! wall ns per completion; and perftest's `ib_write_bw -q 1/4/16` (one CQ
//! under every QP) on rdma-core's `libibverbs.so.1` and rverbs': MB/s, and
//! the instructions spent inside the library per message.

use std::path::PathBuf;

use super::{across, header, ratio, thousands, triple, Sample, IMPLS};
use crate::bench::collected;
use crate::bench_report::KernelRun;
use crate::callgrind::Profile;
use crate::project::{self, Workspace};
use crate::util::Result;

/// Queues sharing the CQ (`poll`) or CQs sharing the channel (`events`).
pub const NS: [u64; 3] = [1, 16, 256];
/// The two modes of the programs.
const MODES: [&str; 2] = ["poll", "events"];
/// perftest's `-q`.
pub const PERFTEST_QS: [u64; 3] = [1, 4, 16];
/// perftest's `-n` (per QP) of the timed runs and of the callgrind run.
const PERFTEST_ITERS: u64 = 1000;
const PERFTEST_CG: u64 = 500;
/// Where the guest finds the programs: rverbs' Rust API, and the one that
/// drives either `libibverbs.so.1`.
const PROGRAM: &str = "/usr/local/bin/scale_queues";
const PROGRAM_C: &str = "/usr/local/bin/scale_queues_c";
/// The C libraries, as the lines name them, and the tag in file names.
const LIBS: [&str; 2] = ["rdma-core", "rverbs-capi"];

/// The section's guest programs: (path in the guest, host file).
pub fn guest_files(ws: &Workspace) -> Result<Vec<(String, PathBuf)>> {
    Ok(vec![
        (PROGRAM.to_owned(), super::connections::build_example(ws, "scale_queues")?),
        (PROGRAM_C.to_owned(), super::connections::build_example(ws, "scale_queues_c")?),
    ])
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

fn cg_tag(imp: &str, mode: &str, n: u64, rounds: u64) -> String {
    format!("sq-cg-{imp}-{mode}-{n}-{rounds}")
}

fn st_tag(imp: &str, mode: &str, n: u64, rounds: u64) -> String {
    format!("sq-st-{imp}-{mode}-{n}-{rounds}")
}

fn wbw_tag(lib: &str, q: u64) -> String {
    format!("sq-wbw-{lib}-{q}")
}

fn wbw_cg_tag(lib: &str, q: u64) -> String {
    format!("sq-wbw-cg-{lib}-{q}-{PERFTEST_CG}")
}

/// The command prefix that puts a program on `lib`.
fn on(lib: &str) -> String {
    if lib == "rverbs-capi" {
        format!("env LD_LIBRARY_PATH={} ", project::GUEST_LIB_DIR)
    } else {
        String::new()
    }
}

/// `imp`'s program with `wrap` (valgrind, strace) before it and its
/// arguments `mode n rounds`.
fn command(imp: &str, wrap: &str, mode: &str, n: u64, rounds: u64) -> String {
    let wrap = if wrap.is_empty() { String::new() } else { format!("{wrap} ") };
    match imp {
        "rverbs" => format!("{wrap}{PROGRAM} {mode} {n} {rounds}"),
        _ => format!("{}{wrap}{PROGRAM_C} {imp} {mode} {n} {rounds}", on(imp)),
    }
}

/// callgrind's `--toggle-collect` of `imp`'s reaping functions.
fn reap_pattern(imp: &str) -> &'static str {
    if imp == "rverbs" {
        "*scale_queues::reap*"
    } else {
        "*scale_queues_c::reap*"
    }
}

/// Appends the section's part of the guest script.
pub fn script(s: &mut String, port: &mut u32) {
    if std::env::var("RVERBS_SCALE_QUEUES").as_deref() == Ok("profiles") {
        return profiles_script(s);
    }
    s.push_str("step scale-queues\n");
    let mut turn = 0;
    for mode in MODES {
        for n in NS {
            // Timed: the implementations in turn, the first rotating (a
            // TCG guest drifts).
            for k in 0..IMPLS.len() {
                let imp = IMPLS[(turn + k) % IMPLS.len()];
                let cmd = command(imp, "", mode, n, timed_rounds(n));
                s.push_str(&format!("timeout 300 {cmd} >>$D/sc-queues-time 2>&1\n"));
            }
            turn += 1;
            for imp in IMPLS {
                for r in counted_rounds(n) {
                    let vg = format!(
                        "valgrind --tool=callgrind --callgrind-out-file=/dev/null --collect-atstart=no \
                         '--toggle-collect={}'",
                        reap_pattern(imp)
                    );
                    // Up to 3 tries for a run in which no poll found
                    // nothing (a late device adds empty polls to the count).
                    let tag = cg_tag(imp, mode, n, r);
                    s.push_str(&format!(
                        "for t in 1 2 3; do timeout 900 {} >$D/{tag} 2>&1; grep -q ' empty=0 ' $D/{tag} && break; \
                         done\n",
                        command(imp, &vg, mode, n, r)
                    ));
                    let st = format!("strace -f -c -o $D/{}", st_tag(imp, mode, n, r));
                    s.push_str(&format!("timeout 300 {} >/dev/null 2>&1\n", command(imp, &st, mode, n, r)));
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
            *port += 1;
            let args = format!("-d rxe0 -x 1 -F -q {q} -s 64 -n {PERFTEST_CG} -p {port}");
            let o = on(lib);
            s.push_str(&format!(
                "pair {tag} {port} \"timeout 900 {o}ib_write_bw {args}\" \"timeout 900 {o}valgrind \
                 --tool=callgrind --dump-line=no --dump-instr=yes --callgrind-out-file=$D/{tag}.out \
                 --log-file=$D/{tag}.vg ib_write_bw {args} 127.0.0.1\"\n",
                tag = wbw_cg_tag(lib, q)
            ));
        }
    }
}

/// Development: the counted runs of `poll` alone, their profiles kept
/// per instruction (`sq-cg-IMPL-poll-N-ROUNDS.out`), for callgrind_annotate.
fn profiles_script(s: &mut String) {
    s.push_str("step scale-queues-profiles\n");
    for n in NS {
        for imp in IMPLS {
            for r in counted_rounds(n) {
                let tag = cg_tag(imp, "poll", n, r);
                let vg = format!(
                    "valgrind --tool=callgrind --callgrind-out-file=$D/{tag}.out --dump-instr=yes --dump-line=yes \
                     --collect-atstart=no '--toggle-collect={}'",
                    reap_pattern(imp)
                );
                s.push_str(&format!(
                    "for t in 1 2 3; do timeout 900 {} >$D/{tag} 2>&1; grep -q ' empty=0 ' $D/{tag} && break; \
                     done\n",
                    command(imp, &vg, "poll", n, r)
                ));
            }
        }
    }
}

/// Figures of one implementation in one mode at one N in one kernel.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Figures {
    instr: Option<f64>,
    ns: Option<f64>,
    empty: Option<f64>,
    syscalls: Option<f64>,
    /// Events per completion.
    events: Option<f64>,
    /// Polls that found nothing in the counted runs (in the count).
    counted_empty: f64,
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

fn figures(run: &KernelRun, timed: &[Sample], imp: &str, mode: &str, n: u64) -> Figures {
    let mut f = Figures::default();
    if let Some(t) = timed.iter().find(|s| s.what == mode && s.imp == imp && s.n == n) {
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
    let counted = |r: u64| -> Option<(u64, f64, f64)> {
        let file = cg_tag(imp, mode, n, r);
        let ir = collected(&run.files.get(&file)?.join("\n"))?;
        let v = line_of(run, &file)?.values;
        Some((ir, *v.get("completions")?, v.get("empty").copied().unwrap_or(0.0)))
    };
    if let (Some((i1, c1, e1)), Some((i2, c2, e2))) = (counted(r1), counted(r2)) {
        if c2 > c1 {
            f.instr = Some((i2 as f64 - i1 as f64) / (c2 - c1));
            f.counted_empty = e1 + e2;
        }
    }
    let calls = |r: u64| strace_total(run.files.get(&st_tag(imp, mode, n, r))?);
    if let (Some(a), Some(b)) = (calls(r1), calls(r2)) {
        f.syscalls = Some((b as f64 - a as f64) / ((r2 - r1) * n) as f64);
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

/// What a perftest client's send loop spent inside the C library
/// (`libibverbs.so.1` and its provider, with what they call in turn), from
/// one run's profile: the calls into the library from the function that
/// makes the most of them (perftest's send loop), whose callee called
/// once per message is `ibv_post_send` and whose others are `ibv_poll_cq`.
/// One run's sums, no difference of two runs: the set-up (device list, QP
/// creation, made from other functions) stays out and no figure can come
/// out negative.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SendLoop {
    /// Inclusive instructions of `ibv_post_send` per call (= per message).
    post: Option<f64>,
    /// `ibv_poll_cq`'s calls and their inclusive instructions.
    polls: u64,
    poll_ir: u64,
    /// Every call of the loop into the library, inclusive, per message.
    per_message: f64,
}

impl SendLoop {
    fn of(p: &Profile, messages: u64) -> Option<SendLoop> {
        if messages == 0 {
            return None;
        }
        let inside = |o: &str| o.contains("/libibverbs.so") || o.contains("/libibverbs/");
        // (caller, callee) → (calls, inclusive instructions), over call sites.
        let mut edges: Vec<((usize, usize), (u64, u64))> = Vec::new();
        for (i, f) in p.funcs.iter().enumerate().filter(|(_, f)| !inside(&f.object)) {
            for &(c, n, ir) in f.callees.iter().filter(|(c, _, _)| inside(&p.funcs[*c].object)) {
                match edges.iter_mut().find(|e| e.0 == (i, c)) {
                    Some(e) => {
                        e.1 .0 += n;
                        e.1 .1 += ir;
                    }
                    None => edges.push(((i, c), (n, ir))),
                }
            }
        }
        let calls_of = |caller: usize| edges.iter().filter(|e| e.0 .0 == caller).map(|e| e.1 .0).sum::<u64>();
        let caller = edges.iter().map(|e| e.0 .0).max_by_key(|&i| calls_of(i))?;
        let mine: Vec<(u64, u64)> = edges.iter().filter(|e| e.0 .0 == caller).map(|e| e.1).collect();
        let post = mine.iter().find(|e| e.0 == messages).map(|e| e.1 as f64 / messages as f64);
        let (mut polls, mut poll_ir) = (0, 0);
        let mut skipped_post = false;
        for &(n, ir) in &mine {
            if n == messages && !skipped_post {
                skipped_post = true;
            } else {
                polls += n;
                poll_ir += ir;
            }
        }
        let total: u64 = mine.iter().map(|e| e.1).sum();
        Some(SendLoop { post, polls, poll_ir, per_message: total as f64 / messages as f64 })
    }
}

/// The send loop of `ib_write_bw -q q` on `lib` under callgrind.
fn wbw_loop(run: &KernelRun, lib: &str, q: u64) -> Option<SendLoop> {
    let tag = wbw_cg_tag(lib, q);
    if run.files.get(&format!("{tag}.rc"))?.first()?.trim() != "0" {
        return None;
    }
    let p = Profile::parse(&run.files.get(&format!("{tag}.out"))?.join("\n"));
    SendLoop::of(&p, PERFTEST_CG * q)
}

fn wbw_bw(run: &KernelRun, lib: &str, q: u64) -> Option<(f64, f64)> {
    let tag = wbw_tag(lib, q);
    if run.files.get(&format!("{tag}.rc"))?.first()?.trim() != "0" {
        return None;
    }
    bw_figures(run.files.get(&format!("{tag}.cli"))?)
}

fn num(x: f64, places: usize) -> String {
    if x >= 1000.0 {
        thousands(x)
    } else {
        format!("{x:.places$}")
    }
}

/// `a / b / c` of every implementation's figure (`·`: none has one).
fn cell(v: &[Option<f64>], places: usize) -> String {
    if v.iter().all(Option::is_none) {
        "·".to_owned()
    } else {
        triple(v, |x| num(x, places))
    }
}

/// `b/a / c/a` of the three implementations' figures.
fn ratios(v: &[Option<f64>]) -> String {
    if v.iter().all(Option::is_none) {
        "·".to_owned()
    } else {
        format!("{} / {}", ratio(v[1], v[0]), ratio(v[2], v[0]))
    }
}

/// The section's table (empty: no figures).
pub fn table(runs: &[KernelRun]) -> String {
    let timed: Vec<Vec<Sample>> = runs.iter().map(|r| Sample::all(r, "queues")).collect();
    let has_wbw = runs.iter().any(|r| r.files.keys().any(|k| k.starts_with("sq-wbw-")));
    if timed.iter().all(Vec::is_empty) && !has_wbw {
        return String::new();
    }
    let mut t = String::from(
        "**Scale: many queues.** The same work on rdma-core 44 / rverbs' Rust API / rverbs' C library \
         (`a / b / c`; the C side `examples/scale_queues_c.rs` on each `libibverbs.so.1` by `dlopen`, the \
         Rust side `examples/scale_queues.rs`), per completion: `poll`, one CQ under N RC QPs, each round one \
         signaled WRITE per QP, polled 16 at a time once the device has written them; `events`, N CQs on one \
         completion channel, each completion an event waited for (`poll`/`ppoll`) and read, its CQ found, \
         acknowledged, re-armed and polled. Instructions: callgrind of the reaping function alone (library \
         calls included), difference of two runs, each tried up to 3 times for one in which no poll found \
         nothing (`*`: some did, and are in the count); ×: rverbs' and its C library's over rdma-core's; \
         syscalls: the whole program's, difference of two runs (each post's doorbell `write` is one, and \
         in `poll` a round's pause; where the guest's clock has no vDSO, as 6.1's under TCG, each \
         `clock_gettime` too); ns: time in the reaping function (events: including the wait), TCG.\n\n",
    );
    t.push_str(&header("| mode | N | instructions | × | syscalls |", "| --- | --: | --: | --: | --: |", runs, &["ns"]));
    let at = |run: &KernelRun| runs.iter().position(|r| std::ptr::eq(r, run)).unwrap_or(0);
    for mode in MODES {
        for n in NS {
            let figs = |r: &KernelRun| -> Vec<Figures> {
                IMPLS.iter().map(|i| figures(r, &timed[at(r)], i, mode, n)).collect()
            };
            let pick =
                |r: &KernelRun, f: fn(&Figures) -> Option<f64>| -> Vec<Option<f64>> { figs(r).iter().map(f).collect() };
            let ins = across(runs, |r| {
                let f = figs(r);
                let v: Vec<Option<f64>> = f.iter().map(|f| f.instr).collect();
                if v.iter().all(Option::is_none) {
                    return "·".to_owned();
                }
                let shown: Vec<String> = f
                    .iter()
                    .map(|f| match f.instr {
                        None => "—".to_owned(),
                        Some(x) if f.counted_empty > 0.0 => format!("{}*", num(x, 0)),
                        Some(x) => num(x, 0),
                    })
                    .collect();
                shown.join(" / ")
            });
            let x = across(runs, |r| ratios(&pick(r, |f| f.instr)));
            let sys = across(runs, |r| cell(&pick(r, |f| f.syscalls), 2));
            t.push_str(&format!("| {mode} | {n} | {ins} | {x} | {sys} |"));
            for r in runs {
                t.push_str(&format!(" {} |", cell(&pick(r, |f| f.ns), 0)));
            }
            t.push('\n');
        }
    }
    t.push_str(
        "\n`ib_write_bw -s 64 -q Q` (one send CQ under the Q QPs) with both sides on rdma-core's \
         `libibverbs.so.1` / on rverbs' (`a / b`, rverbs' over rdma-core's in brackets): the instructions \
         inside the library (libibverbs + provider, with what they call) of the client's send loop, from \
         one run under callgrind at `-n 500`: `ibv_post_send` per message, the `ibv_poll_cq` calls per \
         message (most find nothing: the loop polls while its send queue is full, as often as the device's \
         pace allows, so they follow the timing) and the loop's whole library count per message; average \
         MB/s at `-n 1000`.\n\n",
    );
    t.push_str(&header(
        "| Q | post_send / message |",
        "| --: | --: |",
        runs,
        &["polls / message", "library / message", "MB/s"],
    ));
    let with_ratio = |v: [Option<f64>; 2], show: fn(f64) -> String| -> String {
        if v.iter().all(Option::is_none) {
            return "·".into();
        }
        format!("{} ({})", triple(&v, show), ratio(v[1], v[0]))
    };
    for q in PERFTEST_QS {
        let loops = |r: &KernelRun| -> [Option<SendLoop>; 2] { LIBS.map(|l| wbw_loop(r, l, q)) };
        let int = |x: f64| thousands(x);
        let post = across(runs, |r| with_ratio(loops(r).map(|l| l.and_then(|l| l.post)), int));
        t.push_str(&format!("| {q} | {post} |"));
        for r in runs {
            let l = loops(r);
            let polls = l.map(|l| l.map(|l| l.polls as f64 / (PERFTEST_CG * q) as f64));
            let lib = l.map(|l| l.map(|l| l.per_message));
            let bw: Vec<Option<f64>> = LIBS.iter().map(|l| wbw_bw(r, l, q).map(|b| b.0)).collect();
            t.push_str(&format!(
                " {} | {} | {} |",
                triple(&polls, |x| format!("{x:.2}")),
                with_ratio(lib, int),
                triple(&bw, |x| format!("{x:.2}"))
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
            "timeout 300 env LD_LIBRARY_PATH=/opt/rverbs/lib /usr/local/bin/scale_queues_c rverbs-capi poll 16 63 \
             >>$D/sc-queues-time 2>&1\n"
        ));
        assert!(
            s.contains("timeout 300 /usr/local/bin/scale_queues_c rdma-core events 256 4 >>$D/sc-queues-time 2>&1\n")
        );
        assert!(s.contains(
            "'--toggle-collect=*scale_queues::reap*' /usr/local/bin/scale_queues events 256 4 \
             >$D/sq-cg-rverbs-events-256-4 2>&1; grep -q ' empty=0 ' $D/sq-cg-rverbs-events-256-4 && break; done\n"
        ));
        // The C library's program: the environment before valgrind, which
        // counts the C program's reaping functions.
        assert!(s.contains(
            "timeout 900 env LD_LIBRARY_PATH=/opt/rverbs/lib valgrind --tool=callgrind \
             --callgrind-out-file=/dev/null --collect-atstart=no '--toggle-collect=*scale_queues_c::reap*' \
             /usr/local/bin/scale_queues_c rverbs-capi poll 1 100 >$D/sq-cg-rverbs-capi-poll-1-100 2>&1; grep"
        ));
        assert!(s.contains(
            "strace -f -c -o $D/sq-st-rdma-core-poll-16-7 /usr/local/bin/scale_queues_c rdma-core poll 16 7"
        ));
        assert!(s.contains("strace -f -c -o $D/sq-st-rverbs-events-1-100 /usr/local/bin/scale_queues events 1 100"));
        let timed = s.lines().filter(|l| l.contains(">>$D/sc-queues-time")).count();
        assert_eq!(timed, MODES.len() * NS.len() * IMPLS.len());
        assert!(s.contains(
            "pair sq-wbw-rverbs-capi-4 30106 \"timeout 120 env LD_LIBRARY_PATH=/opt/rverbs/lib ib_write_bw -d rxe0 \
             -x 1 -F -q 4 -s 64 -n 1000 -p 30106\""
        ));
        assert!(s.contains(
            "--callgrind-out-file=$D/sq-wbw-cg-rdma-core-16-500.out --log-file=$D/sq-wbw-cg-rdma-core-16-500.vg \
             ib_write_bw -d rxe0 -x 1 -F -q 16 -s 64 -n 500"
        ));
        assert_eq!(port, 30100 + 3 * 4);
    }

    /// A callgrind profile of a client whose send loop (`0x1ea90`) posts
    /// 1,000 times into the provider and polls 10 times, and whose set-up
    /// (`0x1aa10`) lists the devices once, at great cost.
    const CLIENT: &str = "# callgrind format
version: 1
events: Ir
summary: 9999999
ob=(1) /usr/bin/ib_write_bw
fn=(1) 0x1ea90
0 5000
cob=(2) /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cfn=(2) 0x3cc0
calls=1000 0
0 200000
cob=(2)
cfn=(3) 0x2ca0
calls=10 0
0 700
fn=(4) 0x1aa10
cob=(3) /usr/lib/x86_64-linux-gnu/libibverbs.so.1
cfn=(5) ibv_get_device_list
calls=1 0
0 250000
ob=(2)
fn=(2)
0 200000
fn=(3)
0 700
ob=(3)
fn=(5)
0 250000
";

    #[test]
    fn library_instructions_of_the_send_loop_alone() {
        let p = Profile::parse(CLIENT);
        let l = SendLoop::of(&p, 1000).unwrap();
        assert_eq!(l, SendLoop { post: Some(200.0), polls: 10, poll_ir: 700, per_message: 200.7 });
        // No callee called once a message: no post figure, every call a poll.
        let l = SendLoop::of(&p, 999).unwrap();
        assert_eq!((l.post, l.polls, l.poll_ir), (None, 1010, 200_700));
        assert_eq!(SendLoop::of(&p, 0), None);
        assert_eq!(SendLoop::of(&Profile::parse("events: Ir\n"), 10), None);
    }

    fn run(series: &str) -> KernelRun {
        let mut files = BTreeMap::new();
        let put = |f: &mut BTreeMap<String, Vec<String>>, k: &str, v: &[&str]| {
            f.insert(k.to_owned(), strings(v));
        };
        put(
            &mut files,
            "sc-queues-time",
            &[
                "SCALE queues poll rverbs 16 rounds=125 completions=2000 empty=20 events=0 ns=4000000",
                "SCALE queues poll rdma-core 16 rounds=125 completions=2000 empty=0 events=0 ns=6000000",
            ],
        );
        for (imp, ir, more) in
            [("rverbs", 10_000, 40_000), ("rdma-core", 20_000, 20_000), ("rverbs-capi", 15_000, 60_000)]
        {
            let a = format!("SCALE queues poll {imp} 16 rounds=7 completions=112 empty=0 events=0 ns=1");
            // rverbs' C library's longer run had polls that found nothing.
            let e = if imp == "rverbs-capi" { 3 } else { 0 };
            let b = format!("SCALE queues poll {imp} 16 rounds=32 completions=512 empty={e} events=0 ns=1");
            put(&mut files, &cg_tag(imp, "poll", 16, 7), &[&format!("==1== Collected : {ir}"), &a]);
            put(&mut files, &cg_tag(imp, "poll", 16, 32), &[&format!("==1== Collected : {}", ir + more), &b]);
        }
        put(&mut files, &st_tag("rverbs", "events", 16, 7), &["100.00 0.1 1 800 3 total"]);
        put(&mut files, &st_tag("rverbs", "events", 16, 32), &["100.00 0.1 1 4000 3 total"]);
        put(&mut files, "sq-wbw-rdma-core-4.rc", &["0"]);
        put(
            &mut files,
            "sq-wbw-rdma-core-4.cli",
            &[
                " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
                " 64         4000             5.12               4.80                 0.078000",
            ],
        );
        // 4 QPs at -n 500: 2,000 messages; rdma-core's 200.7 a message,
        // rverbs' profile from a run that failed.
        let tag = wbw_cg_tag("rdma-core", 4);
        put(&mut files, &format!("{tag}.rc"), &["0"]);
        files.insert(
            format!("{tag}.out"),
            CLIENT.replace("calls=1000", "calls=2000").lines().map(String::from).collect(),
        );
        let tag = wbw_cg_tag("rverbs-capi", 4);
        put(&mut files, &format!("{tag}.rc"), &["1"]);
        files.insert(format!("{tag}.out"), CLIENT.lines().map(String::from).collect());
        KernelRun { series: series.into(), files, ..Default::default() }
    }

    #[test]
    fn table_from_sample_files() {
        let run = run("6.12");
        let timed = Sample::all(&run, "queues");
        let f = figures(&run, &timed, "rverbs", "poll", 16);
        assert_eq!((f.instr, f.ns, f.empty), (Some(100.0), Some(2000.0), Some(0.01)));
        assert_eq!(figures(&run, &timed, "rdma-core", "poll", 16).ns, Some(3000.0));
        assert_eq!(figures(&run, &timed, "rverbs", "events", 16).syscalls, Some(8.0));
        assert_eq!(figures(&run, &timed, "rdma-core", "events", 16).syscalls, None);
        assert_eq!(wbw_bw(&run, "rdma-core", 4), Some((4.8, 0.078)));
        assert_eq!(wbw_loop(&run, "rdma-core", 4).map(|l| (l.post, l.per_message)), Some((Some(100.0), 100.35)));
        assert_eq!(wbw_loop(&run, "rverbs-capi", 4), None);
        let t = table(&[run]);
        assert!(t.contains("| mode | N | instructions | × | syscalls | 6.12 ns |"), "{t}");
        assert!(t.contains("| poll | 16 | 50 / 100 / 150* | 2.00 / 3.00 | · | 3,000 / 2,000 / — |"), "{t}");
        assert!(t.contains("| events | 16 | · | · | — / 8.00 / — | · |"), "{t}");
        assert!(t.contains("| Q | post_send / message | 6.12 polls / message |"), "{t}");
        assert!(t.contains("| 4 | 100 / — (—) | 0.01 / — | 100 / — (—) | 4.80 / — |"), "{t}");
        assert!(t.contains("| 16 | · | — / — | · | — / — |"), "{t}");
        // Two kernels: equal counts once, different ones per kernel.
        let mut other = super::tests::run("6.1");
        other.files.insert(st_tag("rverbs", "events", 16, 32), strings(&["100.00 0.1 1 4400 3 total"]));
        let t = table(&[other, super::tests::run("6.12")]);
        assert!(
            t.contains("| poll | 16 | 50 / 100 / 150* | 2.00 / 3.00 | · | 3,000 / 2,000 / — | 3,000 / 2,000 / — |"),
            "{t}"
        );
        assert!(t.contains("| events | 16 | · | · | 6.1: — / 9.00 / —; 6.12: — / 8.00 / — | · | · |"), "{t}");
    }
}
