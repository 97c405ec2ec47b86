//! Instructions per call of each verb, from callgrind profiles: rverbs'
//! by function name, rdma-core's stripped librxe by what its entry points
//! do; and the tables of them (which function each figure is of, the C
//! library's per-call costs, `tracing`'s callsites on and compiled out).

use crate::bench::{Impl, CAPI_CG_ITERS, CAPI_PERFTEST, CG_ITERS};
use crate::callgrind::{FnCost, Profile};

use super::report::{fmt, ratio, Report, BOTH_AND_RATIO};

/// A verb of the per-call table and where each implementation's cost of
/// it is read.
#[derive(Debug, Clone, Copy)]
pub struct Verb {
    pub name: &'static str,
    /// rverbs: function names (substrings), the first found wins.
    pub rverbs: &'static [&'static str],
}

/// The hot-path verbs. rverbs' are the CLI's never-inlined entry points
/// (module `pingpong::hot`, `src/bin/rverbs/pingpong/hot.rs`), so each
/// figure is the whole call as the program makes it.
pub const VERBS: &[Verb] = &[
    Verb { name: "post_send", rverbs: &["pingpong::hot::post_send"] },
    Verb { name: "post_recv", rverbs: &["pingpong::hot::post_recv"] },
    Verb { name: "poll_cq", rverbs: &["pingpong::hot::poll"] },
    Verb { name: "req_notify_cq", rverbs: &["pingpong::hot::req_notify"] },
    Verb { name: "get_cq_event + ack", rverbs: &["pingpong::hot::get_cq_event"] },
];

/// One verb's cost: the function measured, its calls, instructions per call.
#[derive(Debug, Clone, PartialEq)]
pub struct PerCall {
    pub function: String,
    pub calls: u64,
    pub per_call: f64,
}

fn per_call(f: &FnCost) -> Option<PerCall> {
    Some(PerCall { function: short_name(&f.name), calls: f.calls, per_call: f.per_call()? })
}

/// `rverbs::bin::x::y::h1234` -> the last three path segments, no hash.
fn short_name(n: &str) -> String {
    let n = n.split('<').next().unwrap_or(n);
    let parts: Vec<&str> = n.split("::").filter(|p| !(p.starts_with('h') && p.len() == 17)).collect();
    parts[parts.len().saturating_sub(3)..].join("::")
}

/// rverbs' cost of `verb`.
pub fn rverbs_call(p: &Profile, verb: &Verb) -> Option<PerCall> {
    verb.rverbs.iter().find_map(|n| p.containing(n)).and_then(per_call)
}

/// rdma-core's cost of `verb`: `ibv_post_send` & co. are inline functions
/// of `verbs.h` that call the provider through its ops table, and Debian's
/// librxe is stripped, so its entry points (functions called from outside
/// librxe, at least once per two iterations) are told apart by what they
/// do: the one that calls `write` is `rxe_post_send` (the doorbell); the
/// one that some caller calls exactly as often as it calls
/// `ibv_get_cq_event` is `rxe_poll_cq` (one poll per event in
/// `ibv_rc_pingpong -e`); the remaining one is `rxe_post_recv`. The
/// exported functions go by name.
pub fn rdma_core_call(p: &Profile, verb: &Verb, iters: u64) -> Option<PerCall> {
    let named = |n: &str| p.named(n).and_then(per_call);
    match verb.name {
        "req_notify_cq" => named("ibv_cmd_req_notify_cq"),
        "get_cq_event + ack" => {
            let g = p.named("ibv_get_cq_event")?;
            let mut c = per_call(g)?;
            if let Some(a) = p.named("ibv_ack_cq_events") {
                // ibv_rc_pingpong acknowledges all events in one call at the end.
                c.per_call += a.inclusive() as f64 / g.calls.max(1) as f64;
                c.function.push_str(" + ibv_ack_cq_events");
            }
            Some(c)
        }
        name => {
            let entries = librxe_entries(p, iters / 2);
            let post_send = entries.iter().copied().find(|f| p.calls_any(f, &["write"]));
            let event_callers: Vec<(usize, u64)> =
                p.named("ibv_get_cq_event").map_or(Vec::new(), |g| g.callers.clone());
            let poll = entries
                .iter()
                .copied()
                .filter(|f| Some(*f) != post_send)
                .find(|f| f.callers.iter().any(|c| event_callers.contains(c)));
            let post_recv = entries.iter().copied().find(|f| Some(*f) != post_send && Some(*f) != poll);
            let f = match name {
                "post_send" => post_send,
                "post_recv" => post_recv,
                "poll_cq" => poll,
                _ => None,
            }?;
            let mut c = per_call(f)?;
            c.function =
                format!("librxe {} ({})", f.name.trim_start_matches("0x").trim_start_matches('0'), name_of(name));
            Some(c)
        }
    }
}

/// The data-path verbs of a perftest client, per call (issue #12 §5): what
/// the instructions per operation are made of, free of the timing that
/// decides how often a busy-polling client polls.
pub const CAPI_VERBS: &[&str] = &["post_send", "post_recv", "poll_cq"];

/// A perftest client's cost of `verb` on one library (n = 5000 profile):
/// rverbs' by its exported function (`ibverbs::qp::post_send`, ...);
/// rdma-core's librxe is stripped, so its entry points (functions called
/// from outside librxe, at least once per ten operations: `ib_write_bw`
/// polls once per several) are told apart by
/// what they do: the one that calls `write` (the doorbell) posts sends, the
/// most called of the others polls, and the remaining one posts receives.
pub fn capi_call(p: &Profile, i: Impl, verb: &str, iters: u64) -> Option<PerCall> {
    if i == Impl::Rverbs {
        let name = match verb {
            "post_send" => "ibverbs::qp::post_send",
            "post_recv" => "ibverbs::qp::post_recv",
            _ => "ibverbs::cq::poll_cq",
        };
        return p.named(name).and_then(per_call);
    }
    let mut entries = librxe_entries(p, iters / 10);
    let post_send = entries.iter().position(|f| p.calls_any(f, &["write"])).map(|i| entries.remove(i));
    entries.sort_by_key(|f| std::cmp::Reverse(f.calls));
    let f = match verb {
        "post_send" => post_send,
        "poll_cq" => entries.first().copied(),
        _ => entries.get(1).copied(),
    }?;
    let mut c = per_call(f)?;
    c.function = format!("librxe {} ({})", f.name.trim_start_matches("0x").trim_start_matches('0'), name_of(verb));
    Some(c)
}

/// librxe's entry points in `p`: its functions called only from outside
/// librxe, at least `min_calls` times (stripped, so named by address).
fn librxe_entries(p: &Profile, min_calls: u64) -> Vec<&FnCost> {
    let in_rxe = |f: &FnCost| f.object.contains("librxe");
    p.funcs
        .iter()
        .filter(|f| in_rxe(f) && f.calls >= min_calls)
        .filter(|f| f.callers.iter().all(|(c, _)| !in_rxe(&p.funcs[*c])))
        .collect()
}

/// Completion events per iteration in the n=1000 profile.
pub(super) fn events_per_iter(p: &Profile, names: &[&str]) -> Option<f64> {
    let f = names.iter().find_map(|n| p.containing(n))?;
    Some(f.calls as f64 / f64::from(CG_ITERS[1]))
}

fn name_of(verb: &str) -> &'static str {
    match verb {
        "post_send" => "rxe_post_send",
        "post_recv" => "rxe_post_recv",
        _ => "rxe_poll_cq",
    }
}

impl Report<'_> {
    /// Which function each per-call figure is of (first kernel).
    pub(super) fn functions(&self) -> String {
        let Some(k) = self.runs.first() else { return String::new() };
        let (r, v) = (k.profile(Impl::RdmaCore), k.profile(Impl::Rverbs));
        let mut s = format!(
            "Per-call figures are callgrind's inclusive instructions of the function divided by its calls, client \
             of `-e -s 64 -n {}` ({}):\n\n| verb | rdma-core function | calls | rverbs function | calls |\n| --- | --- \
             | ---: | --- | ---: |\n",
            CG_ITERS[1], k.series
        );
        for verb in VERBS {
            let a = r.as_ref().and_then(|p| rdma_core_call(p, verb, u64::from(CG_ITERS[1])));
            let b = v.as_ref().and_then(|p| rverbs_call(p, verb));
            let cell = |c: &Option<PerCall>| {
                c.as_ref()
                    .map_or(("-".to_owned(), "-".to_owned()), |c| (format!("`{}`", c.function), c.calls.to_string()))
            };
            let ((af, ac), (bf, bc)) = (cell(&a), cell(&b));
            s.push_str(&format!("| {} | {af} | {ac} | {bf} | {bc} |\n", verb.name));
        }
        s
    }

    /// The C library's per-call costs in the perftest clients, and how many
    /// polls an operation took (a busy-polling client's instructions per
    /// operation follow its polls, which the wait for the peer decides).
    pub(super) fn capi_calls_table(&self) -> String {
        let iters = u64::from(CAPI_CG_ITERS[1]);
        let mut s = format!(
            "The C library per call: callgrind's inclusive instructions of each verb divided by its calls, perftest \
             client, 64 B, `-n {iters}`, both sides on each libibverbs (an empty poll is most polls of a \
             busy-polling client; how many it makes per operation is the wait for the peer, not the \
             library):\n\n"
        );
        s.push_str(&self.header("client, verb", &BOTH_AND_RATIO, &[]));
        for prog in CAPI_PERFTEST {
            let profiles: Vec<(Option<Profile>, Option<Profile>)> = self
                .runs
                .iter()
                .map(|k| {
                    (
                        k.capi_profile(prog, Impl::RdmaCore, CAPI_CG_ITERS[1]),
                        k.capi_profile(prog, Impl::Rverbs, CAPI_CG_ITERS[1]),
                    )
                })
                .collect();
            let call = |p: &Option<Profile>, i, verb| p.as_ref().and_then(|p| capi_call(p, i, verb, iters));
            for verb in CAPI_VERBS {
                let cells: Vec<(Option<f64>, Option<f64>)> = profiles
                    .iter()
                    .map(|(a, b)| {
                        (
                            call(a, Impl::RdmaCore, verb).map(|c| c.per_call),
                            call(b, Impl::Rverbs, verb).map(|c| c.per_call),
                        )
                    })
                    .collect();
                if cells.iter().all(|(a, b)| a.is_none() && b.is_none()) {
                    continue;
                }
                s.push_str(&format!("| `{prog}` {verb} |"));
                for (a, b) in &cells {
                    s.push_str(&format!(" {} | {} | {} |", fmt(*a, 1), fmt(*b, 1), fmt(ratio(*a, *b), 2)));
                }
                s.push('\n');
            }
            s.push_str(&format!("| `{prog}` polls per operation |"));
            for (a, b) in &profiles {
                let per_op = |p: &Option<Profile>, i| call(p, i, "poll_cq").map(|c| c.calls as f64 / iters as f64);
                let (a, b) = (per_op(a, Impl::RdmaCore), per_op(b, Impl::Rverbs));
                s.push_str(&format!(" {} | {} | {} |", fmt(a, 2), fmt(b, 2), fmt(ratio(a, b), 2)));
            }
            s.push('\n');
            // Only a latency client busy-polls for its peer (and under
            // callgrind ib_write_bw's bandwidth can print as 0.00: its
            // clock calibration runs slowed down too).
            if prog.ends_with("_bw") {
                continue;
            }
            s.push_str(&format!("| `{prog}` usec typical of this profiled client (under callgrind) |"));
            for k in self.runs {
                let (a, b) = (k.capi_profiled_figure(prog, Impl::RdmaCore), k.capi_profiled_figure(prog, Impl::Rverbs));
                s.push_str(&format!(" {} | {} | {} |", fmt(a, 2), fmt(b, 2), fmt(ratio(a, b), 2)));
            }
            s.push('\n');
        }
        s
    }

    /// rverbs' per-call costs with its `tracing` callsites (disabled at run
    /// time, as in every other run) and with them compiled out.
    pub(super) fn tracing_table(&self) -> String {
        let mut s = String::from(
            "A disabled `tracing` callsite costs nothing measurable: rverbs' instructions per call with the \
             callsites in the build but disabled (every run above) and compiled out (`--features \
             tracing/release_max_level_off`), same client, same boot:\n\n",
        );
        s.push_str(&self.header("verb", &["callsites disabled", "compiled out"], &[]));
        let profiles: Vec<(Option<Profile>, Option<Profile>)> =
            self.runs.iter().map(|k| (k.profile(Impl::Rverbs), k.notrace_profile())).collect();
        for verb in VERBS {
            s.push_str(&format!("| {} |", verb.name));
            for (on, off) in &profiles {
                let f = |p: &Option<Profile>| {
                    p.as_ref().and_then(|p| rverbs_call(p, verb)).map_or("-".into(), |c| format!("{:.1}", c.per_call))
                };
                s.push_str(&format!(" {} | {} |", f(on), f(off)));
            }
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of an `ibv_rc_pingpong -e` profile: main calls
    /// `ibv_get_cq_event` and the provider's poll once per event, a helper
    /// posts sends (the one that calls `write`), and receives come from
    /// main and from the completion handler.
    #[test]
    fn tells_librxe_entry_points_apart() {
        let text = "events: Ir
ob=(1) /usr/bin/ibv_rc_pingpong
fn=(1) 0x0000000000002450
0 100
cob=(2) /usr/lib/x86_64-linux-gnu/libibverbs.so.1
cfn=(2) ibv_get_cq_event
calls=1500 0
0 60000
cob=(3) /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cfn=(3) 0x0000000000002ca0
calls=1500 0
0 100500
cob=(3)
cfn=(4) 0x0000000000004550
calls=500 0
0 61000
cfn=(5) 0x00000000000048b0
calls=2000 0
0 500000
fn=(5)
0 100000
cfn=(6) 0x0000000000004500
calls=1000 0
0 257000
cob=(3)
cfn=(4)
calls=1000 0
0 122000
fn=(6)
0 58000
cob=(3)
cfn=(7) 0x0000000000003cc0
calls=1000 0
0 199000
ob=(3)
fn=(7)
0 175000
cob=(4) /usr/lib/x86_64-linux-gnu/libc.so.6
cfn=(8) write
calls=1000 0
0 24000
fn=(4)
0 183000
fn=(3)
0 100500
ob=(2)
fn=(2)
0 60000
";
        let p = Profile::parse(text);
        let call = |name: &str| {
            let v = VERBS.iter().find(|v| v.name == name).unwrap();
            rdma_core_call(&p, v, 1000).unwrap()
        };
        assert_eq!((call("post_send").per_call, call("post_send").calls), (199.0, 1000));
        assert!(call("post_send").function.contains("3cc0 (rxe_post_send)"));
        assert_eq!((call("poll_cq").per_call, call("poll_cq").calls), (67.0, 1500));
        assert!(call("poll_cq").function.contains("2ca0"));
        assert_eq!((call("post_recv").per_call, call("post_recv").calls), (122.0, 1500));
        assert!(call("post_recv").function.contains("4550"));
        assert_eq!(call("get_cq_event + ack").per_call, 40.0);
    }

    /// The shape of a perftest `ib_send_lat` client: its loop calls librxe's
    /// poll (most often), post_send (which calls `write`) and post_recv;
    /// rverbs' library by its exported names. A function called once (set-up)
    /// is no entry point.
    #[test]
    fn capi_calls_by_shape_and_name() {
        let text = "events: Ir
ob=(1) /usr/bin/ib_send_lat
fn=(1) 0x0000000000023100
0 100
cob=(3) /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cfn=(3) 0x0000000000002ca0
calls=20000 0
0 840000
cob=(3)
cfn=(4) 0x0000000000004550
calls=900 0
0 109800
cob=(3)
cfn=(7) 0x0000000000003cc0
calls=1000 0
0 199000
cob=(3)
cfn=(9) 0x0000000000001000
calls=1 0
0 5000
ob=(3)
fn=(7)
0 175000
cob=(4) /usr/lib/x86_64-linux-gnu/libc.so.6
cfn=(8) write
calls=1000 0
0 24000
fn=(4)
0 109800
fn=(3)
0 840000
fn=(9)
0 5000
";
        let p = Profile::parse(text);
        let rdma = |verb| capi_call(&p, Impl::RdmaCore, verb, 1000).unwrap();
        assert_eq!((rdma("post_send").per_call, rdma("post_send").calls), (199.0, 1000));
        assert_eq!((rdma("poll_cq").per_call, rdma("poll_cq").calls), (42.0, 20000));
        assert!(rdma("poll_cq").function.contains("2ca0 (rxe_poll_cq)"));
        assert_eq!((rdma("post_recv").per_call, rdma("post_recv").calls), (122.0, 900));
        let text = "events: Ir
ob=(1) /usr/bin/ib_send_lat
fn=(1) 0x0000000000023100
0 100
cob=(2) /opt/rverbs/lib/libibverbs.so.1
cfn=(2) ibverbs::cq::poll_cq
calls=40000 0
0 1200000
ob=(2)
fn=(2)
0 1200000
";
        let p = Profile::parse(text);
        let c = capi_call(&p, Impl::Rverbs, "poll_cq", 1000).unwrap();
        assert_eq!((c.per_call, c.calls), (30.0, 40000));
        assert!(capi_call(&p, Impl::Rverbs, "post_send", 1000).is_none());
    }

    #[test]
    fn short_names() {
        assert_eq!(short_name("rverbs::pingpong::hot::post_send::h0123456789abcdef"), "pingpong::hot::post_send");
    }
}
