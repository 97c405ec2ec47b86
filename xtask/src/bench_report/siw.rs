//! `cargo xtask bench --provider siw`: rverbs' `rping` next to rdma-core's
//! (librdmacm, libibverbs, libsiw) on siw0, from the files of
//! [`crate::bench::siw_script`]'s guests: instructions, syscalls and
//! doorbells per ping, time per ping.

use std::collections::BTreeMap;

use super::kernel_run::{median, KernelRun};
use super::report::{fmt, fmt_int, ratio, rdma_core_version, today};
use crate::bench::{self, tags, Impl, SIW_CG_COUNTS, SIW_SIZE, SIW_ST_COUNTS, SIW_TIMED};
use crate::strace::{self, Call};

/// Whether an rping run completed: exit 0, or Debian's rping's teardown
/// race after its last ping (exit 255 with "rdma_get_cm_event: Bad file
/// descriptor", see tests/common/child.rs); never a data mismatch.
fn completed(exit: Option<i32>, out: &[String]) -> bool {
    let race = exit == Some(255) && out.iter().any(|l| l.contains("rdma_get_cm_event: Bad file descriptor"));
    (exit == Some(0) || race) && !out.iter().any(|l| l.contains("mismatch"))
}

/// The client (or, with `server`, the server) of pair `tag` completed.
fn done(k: &KernelRun, tag: &str, server: bool) -> bool {
    let (rc, out) = if server { ("src", "srv") } else { ("rc", "cli") };
    let exit = k.file(&format!("{tag}.{rc}")).first().and_then(|l| l.trim().parse().ok());
    completed(exit, k.file(&format!("{tag}.{out}")))
}

/// Syscalls of one straced process: all, the doorbells (`write()` on a
/// uverbs node; the CM's `write()`s on rdma_cm are commands, counted with
/// the rest), the rest by name.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts {
    pub total: f64,
    pub doorbells: f64,
    pub by_name: BTreeMap<String, f64>,
}

impl Counts {
    pub fn of(calls: &[Call]) -> Counts {
        let mut c = Counts { total: calls.len() as f64, ..Default::default() };
        for call in calls {
            if call.name == "write" && call.fd_path().is_some_and(|p| p.starts_with("/dev/infiniband/uverbs")) {
                c.doorbells += 1.0;
            } else {
                *c.by_name.entry(call.name.clone()).or_default() += 1.0;
            }
        }
        c
    }

    /// `(self − lo) / n`, per name too (names only in one run count 0 in
    /// the other).
    fn per(&self, lo: &Counts, n: f64) -> Counts {
        let mut by_name = BTreeMap::new();
        for name in self.by_name.keys().chain(lo.by_name.keys()) {
            let d = self.by_name.get(name).unwrap_or(&0.0) - lo.by_name.get(name).unwrap_or(&0.0);
            by_name.insert(name.clone(), d / n);
        }
        Counts { total: (self.total - lo.total) / n, doorbells: (self.doorbells - lo.doorbells) / n, by_name }
    }
}

/// One kernel's figures for one library.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Figures {
    /// Client instructions per ping (callgrind).
    pub instr: Option<f64>,
    /// Client and server syscalls per ping (strace).
    pub client: Option<Counts>,
    pub server: Option<Counts>,
    /// Client syscalls of a whole straced run at the larger count.
    pub client_run: Option<f64>,
    /// Median µs per ping of the timed runs, and how many completed.
    pub usec: Option<f64>,
    pub timed: usize,
}

/// Instructions of a callgrind client run, if it completed.
fn cg_total(k: &KernelRun, i: Impl, count: u32) -> Option<u64> {
    let tag = tags::siw_cg(i, count);
    done(k, &tag, false).then_some(())?;
    bench::collected(&k.file(&format!("{tag}.vg")).join("\n"))
}

/// The straced calls of a side, if the pair completed.
fn traced(k: &KernelRun, i: Impl, count: u32, server: bool) -> Option<Vec<Call>> {
    let tag = tags::siw_st(i, count);
    if !(done(k, &tag, false) && done(k, &tag, server)) {
        return None;
    }
    let st = if server { format!("{tag}-srv.st") } else { format!("{tag}.st") };
    let f = k.files.get(&st)?;
    Some(strace::parse(f))
}

/// µs per ping of timed run `run`: the client's time (guest uptime, 10 ms
/// ticks) over its pings.
fn usec(k: &KernelRun, i: Impl, run: u32) -> Option<f64> {
    let tag = tags::siw_lat(i, run);
    done(k, &tag, false).then_some(())?;
    let t = k.file(&format!("{tag}.time")).first()?.clone();
    let mut w = t.split_whitespace().map(|x| x.parse::<f64>().ok());
    let (t0, t1) = (w.next()??, w.next()??);
    (t1 > t0).then(|| (t1 - t0) * 1e6 / f64::from(SIW_TIMED))
}

impl Figures {
    pub fn of(k: &KernelRun, i: Impl) -> Figures {
        let [clo, chi] = SIW_CG_COUNTS;
        let instr = match (cg_total(k, i, clo), cg_total(k, i, chi)) {
            (Some(a), Some(b)) => Some((b as f64 - a as f64) / f64::from(chi - clo)),
            _ => None,
        };
        let [slo, shi] = SIW_ST_COUNTS;
        let n = f64::from(shi - slo);
        let side = |server: bool| {
            let lo = Counts::of(&traced(k, i, slo, server)?);
            Some(Counts::of(&traced(k, i, shi, server)?).per(&lo, n))
        };
        let client_run = traced(k, i, shi, false).map(|c| c.len() as f64);
        let times: Vec<f64> = (1..=k.runs).filter_map(|r| usec(k, i, r)).collect();
        Figures { instr, client: side(false), server: side(true), client_run, usec: median(&times), timed: times.len() }
    }
}

/// `write(uverbs) 2.0, futex 3.0, ...` of the calls per ping, the largest
/// first (those under 0.05 per ping left out).
fn kinds(c: Option<&Counts>) -> String {
    let Some(c) = c else { return "-".into() };
    let mut v: Vec<(String, f64)> = vec![("doorbell".into(), c.doorbells)];
    v.extend(c.by_name.iter().map(|(n, x)| (n.clone(), *x)));
    v.retain(|(_, x)| x.abs() >= 0.05);
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.iter().map(|(n, x)| format!("{n} {x:.1}")).collect::<Vec<_>>().join(", ")
}

/// The section's Markdown: a heading paragraph, the table, the calls per
/// ping by kind.
/// `commit` is the tree's; a kept run (`--reuse`) names the commit its
/// guest measured.
pub fn render(runs: &[KernelRun], commit: &str) -> String {
    let measured = runs.first().map_or(commit, |k| k.commit.as_str());
    let mut s = format!("Measured {} at commit `{measured}` by `cargo xtask bench --provider siw`", today());
    if measured != commit {
        s.push_str(&format!(" (a kept run, `--reuse`; the tree is at `{commit}`)"));
    }
    if !runs.is_empty() {
        let k: Vec<String> = runs
            .iter()
            .map(|k| format!("{} = Linux {} ({}, {} vCPUs)", k.series, k.release, k.accel, k.cpus))
            .collect();
        s.push_str(&format!("; guests: {}", k.join("; ")));
    }
    let [clo, chi] = SIW_CG_COUNTS;
    let [slo, shi] = SIW_ST_COUNTS;
    s.push_str(&format!(
        ". On siw0 (soft-iWARP, whose QPs connect only through the RDMA CM), `rverbs rping` next to {}'s `rping` \
         (librdmacm, libibverbs, libsiw), same arguments (`-S {SIW_SIZE}`), same boot, server on CPU 0 and client \
         on CPU 1. Instructions per ping: the client under callgrind, (Ir(`-C {chi}`) − Ir(`-C {clo}`)) / {}. \
         Syscalls per ping: `strace -f` of each side, (calls(`-C {shi}`) − calls(`-C {slo}`)) / {}; a doorbell is a \
         `write()` on the uverbs node (the CM's `write()`s are commands, counted with the rest). Time per ping: a \
         client's `-C {SIW_TIMED}` by the guest's uptime (10 ms ticks, connection set-up included) over its pings, \
         median of the runs, the two libraries one after the other, rdma-core first in odd runs; under TCG a \
         same-boot ratio, not a latency. A ratio is rverbs / rdma-core.\n\n",
        rdma_core_version(),
        chi - clo,
        shi - slo,
    ));
    if runs.is_empty() {
        return s;
    }
    let figs: Vec<[Figures; 2]> = runs.iter().map(|k| Impl::BOTH.map(|i| Figures::of(k, i))).collect();
    let mut names = String::from("| siw: rverbs rping next to rdma-core's rping |");
    let mut sep = String::from("| --- |");
    for k in runs {
        for c in ["rdma-core", "rverbs", "ratio"] {
            names.push_str(&format!(" {} {c} |", k.series));
            sep.push_str(" ---: |");
        }
    }
    s.push_str(&format!("{names}\n{sep}\n"));
    type Pick = fn(&Figures) -> Option<f64>;
    let rows: [(String, Pick, bool); 8] = [
        ("instructions per ping, client".into(), |f| f.instr, true),
        ("syscalls per ping, client".into(), |f| f.client.as_ref().map(|c| c.total), false),
        ("doorbells per ping, client".into(), |f| f.client.as_ref().map(|c| c.doorbells), false),
        ("syscalls per ping, server".into(), |f| f.server.as_ref().map(|c| c.total), false),
        ("doorbells per ping, server".into(), |f| f.server.as_ref().map(|c| c.doorbells), false),
        (format!("syscalls of a whole `-C {shi}` client"), |f| f.client_run, true),
        ("µs per ping (median, TCG)".into(), |f| f.usec, false),
        ("timed runs completed".into(), |f| Some(f.timed as f64), true),
    ];
    for (label, pick, int) in rows {
        s.push_str(&format!("| {label} |"));
        for [rdma, ours] in &figs {
            let (a, b) = (pick(rdma), pick(ours));
            let cell = |v| if int { fmt_int(v) } else { fmt(v, 1) };
            let r = if label.starts_with("timed") { "".into() } else { fmt(ratio(a, b), 2) };
            s.push_str(&format!(" {} | {} | {r} |", cell(a), cell(b)));
        }
        s.push('\n');
    }
    s.push_str("\nSyscalls per ping by kind (client; server):\n\n");
    for (k, [rdma, ours]) in runs.iter().zip(&figs) {
        for (name, f) in [("rdma-core", rdma), ("rverbs", ours)] {
            s.push_str(&format!("- {} {name}: {}; {}\n", k.series, kinds(f.client.as_ref()), kinds(f.server.as_ref())));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::lines;
    use super::*;

    /// A strace log of `n` pings: per ping, a doorbell, an event read, an
    /// arm and a futex (rdma-core's threads); plus a CM write and a close.
    fn st(n: usize) -> Vec<String> {
        let mut l = vec![
            "5 openat(AT_FDCWD</>, \"/dev/infiniband/rdma_cm\", O_RDWR|O_CLOEXEC) = 3</dev/infiniband/rdma_cm>"
                .to_string(),
            "5 write(3</dev/infiniband/rdma_cm>, \"\\x00\", 24) = 24".to_string(),
        ];
        for _ in 0..n {
            l.push("6 write(4</dev/infiniband/uverbs1>, \"\\x1c\", 32) = 32".into());
            l.push("6 read(5<anon_inode:[infinibandevent]>, \"\", 16) = 16".into());
            l.push("6 ioctl(4</dev/infiniband/uverbs1>, RDMA_VERBS_IOCTL, 0x1) = 0".into());
            l.push("7 futex(0x7f, FUTEX_WAKE_PRIVATE, 1) = 1".into());
        }
        l.push("5 close(3</dev/infiniband/rdma_cm>) = 0".into());
        l
    }

    /// What a guest sends back for one library, `per` calls per ping.
    fn sample(files: &mut BTreeMap<String, Vec<String>>, i: Impl, ir: [u64; 2], secs: &[(f64, f64)]) {
        for (count, ir) in SIW_CG_COUNTS.into_iter().zip(ir) {
            let tag = tags::siw_cg(i, count);
            files.insert(format!("{tag}.vg"), lines(&format!("==9== Events    : Ir\n==9== Collected : {ir}\n")));
            files.insert(format!("{tag}.rc"), lines("0"));
        }
        for count in SIW_ST_COUNTS {
            let tag = tags::siw_st(i, count);
            files.insert(format!("{tag}.st"), st(count as usize));
            files.insert(format!("{tag}-srv.st"), st(2 * count as usize));
            files.insert(format!("{tag}.rc"), lines("0"));
            files.insert(format!("{tag}.src"), lines("0"));
        }
        for (run, (t0, t1)) in (1..).zip(secs) {
            let tag = tags::siw_lat(i, run);
            files.insert(format!("{tag}.time"), lines(&format!("{t0} {t1}")));
            files.insert(format!("{tag}.rc"), lines("0"));
        }
    }

    fn run() -> KernelRun {
        let mut files = BTreeMap::new();
        sample(&mut files, Impl::RdmaCore, [1_000_000, 10_000_000], &[(10.0, 12.0), (20.0, 21.0), (30.0, 33.0)]);
        sample(&mut files, Impl::Rverbs, [500_000, 5_000_000], &[(11.0, 12.0), (22.0, 22.5), (33.0, 33.8)]);
        // rdma-core's third timed client hit the teardown race: it counts.
        let race = tags::siw_lat(Impl::RdmaCore, 3);
        files.insert(format!("{race}.rc"), lines("255"));
        files.insert(format!("{race}.cli"), lines("rdma_get_cm_event: Bad file descriptor"));
        // rverbs' third one failed: it does not.
        files.insert(format!("{}.rc", tags::siw_lat(Impl::Rverbs, 3)), lines("1"));
        KernelRun {
            series: "6.12".into(),
            release: "6.12.1".into(),
            accel: "tcg".into(),
            cpus: 2,
            commit: "abc".into(),
            runs: 3,
            files,
        }
    }

    #[test]
    fn figures_from_the_guests_files() {
        let k = run();
        let rdma = Figures::of(&k, Impl::RdmaCore);
        assert_eq!(rdma.instr, Some(10_000.0));
        let c = rdma.client.as_ref().unwrap();
        assert_eq!((c.total, c.doorbells), (4.0, 1.0));
        assert_eq!(c.by_name.get("futex"), Some(&1.0));
        assert_eq!(c.by_name.get("close"), Some(&0.0));
        assert_eq!(rdma.server.as_ref().map(|c| c.total), Some(8.0));
        assert_eq!(rdma.client_run, Some(403.0));
        // Runs of 2, 1 and 3 s over 1000 pings: median 2 ms.
        assert_eq!((rdma.usec, rdma.timed), (Some(2000.0), 3));
        let ours = Figures::of(&k, Impl::Rverbs);
        assert_eq!(ours.instr, Some(5_000.0));
        assert_eq!((ours.usec, ours.timed), (Some(750.0), 2));
        assert_eq!(kinds(Some(c)), "doorbell 1.0, futex 1.0, ioctl 1.0, read 1.0");
    }

    #[test]
    fn a_failed_run_gives_no_figure() {
        let mut k = run();
        k.files.insert(format!("{}.rc", tags::siw_cg(Impl::Rverbs, SIW_CG_COUNTS[0])), lines("1"));
        k.files.insert(format!("{}.src", tags::siw_st(Impl::Rverbs, SIW_ST_COUNTS[1])), lines("1"));
        k.files.insert(format!("{}.cli", tags::siw_st(Impl::RdmaCore, SIW_ST_COUNTS[0])), lines("data mismatch"));
        let ours = Figures::of(&k, Impl::Rverbs);
        assert_eq!(ours.instr, None);
        assert!(ours.server.is_none() && ours.client.is_some());
        assert!(Figures::of(&k, Impl::RdmaCore).client.is_none());
    }

    #[test]
    fn renders_the_table() {
        let text = render(&[run()], "abc");
        for want in [
            "by `cargo xtask bench --provider siw`; guests: 6.12 = Linux 6.12.1 (tcg, 2 vCPUs)",
            "| siw: rverbs rping next to rdma-core's rping | 6.12 rdma-core | 6.12 rverbs | 6.12 ratio |",
            "| instructions per ping, client | 10,000 | 5,000 | 0.50 |",
            "| syscalls per ping, client | 4.0 | 4.0 | 1.00 |",
            "| doorbells per ping, server | 2.0 | 2.0 | 1.00 |",
            "| syscalls of a whole `-C 100` client | 403 | 403 | 1.00 |",
            "| µs per ping (median, TCG) | 2000.0 | 750.0 | 0.38 |",
            "| timed runs completed | 3 | 2 |  |",
            "- 6.12 rverbs: doorbell 1.0, futex 1.0, ioctl 1.0, read 1.0; doorbell 2.0, futex 2.0",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(!render(&[], "abc").contains('|'));
        let kept = render(&[run()], "def");
        assert!(kept.contains(
            "at commit `abc` by `cargo xtask bench --provider siw` (a kept run, `--reuse`; the tree is at `def`)"
        ));
    }
}
