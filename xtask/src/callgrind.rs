//! Reading callgrind's output files (`callgrind.out.*`, format version 1,
//! one event: `Ir`): the total, and for every function its exclusive and
//! inclusive instruction counts and how often it was called.
//!
//! What `callgrind_annotate --inclusive=yes` prints, without Perl (the
//! guest has none, and the host may lack it): a function's inclusive cost
//! is its own cost plus the cost of every call it made (the line after a
//! `calls=` line). Functions are keyed by object and name, because a
//! stripped library's functions are named by address (`0x000000000000abcd`)
//! and two objects may have the same one.

use std::collections::HashMap;

/// One function's costs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FnCost {
    /// The object (`ob=`) it lives in.
    pub object: String,
    pub name: String,
    /// Instructions executed in the function itself.
    pub self_ir: u64,
    /// Instructions of the calls it made (their inclusive cost).
    pub callee_ir: u64,
    /// How often it was called (all callers).
    pub calls: u64,
    /// (callee key, calls, inclusive cost) of its calls.
    pub callees: Vec<(usize, u64, u64)>,
    /// (caller key, calls) of the calls made to it.
    pub callers: Vec<(usize, u64)>,
}

impl FnCost {
    /// Self plus callees.
    pub fn inclusive(&self) -> u64 {
        self.self_ir + self.callee_ir
    }

    /// Inclusive instructions per call (`None` when never called).
    pub fn per_call(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.inclusive() as f64 / self.calls as f64)
    }
}

/// A parsed profile.
#[derive(Debug, Default)]
pub struct Profile {
    /// `summary:` / `totals:` (all instructions of the run).
    pub total: u64,
    pub funcs: Vec<FnCost>,
    index: HashMap<(String, String), usize>,
}

/// Name compression of callgrind: `fn=(12) name` defines id 12, `fn=(12)` reuses it.
#[derive(Default)]
struct Names(HashMap<String, String>);

impl Names {
    fn resolve(&mut self, v: &str) -> String {
        let v = v.trim();
        if let Some(rest) = v.strip_prefix('(') {
            if let Some((id, name)) = rest.split_once(')') {
                let name = name.trim();
                if name.is_empty() {
                    return self.0.get(id).cloned().unwrap_or_else(|| format!("({id})"));
                }
                self.0.insert(id.to_owned(), name.to_owned());
                return name.to_owned();
            }
        }
        v.to_owned()
    }
}

impl Profile {
    /// Parses the text of a callgrind output file.
    pub fn parse(text: &str) -> Profile {
        let mut p = Profile::default();
        let (mut obs, mut fns) = (Names::default(), Names::default());
        let mut ob = String::new();
        let mut cur: Option<usize> = None;
        let mut cob: Option<String> = None;
        let mut cfn: Option<String> = None;
        // After `calls=`: the next cost line is the call's inclusive cost.
        let mut call: Option<(usize, u64)> = None;
        for line in text.lines() {
            let line = line.trim_end();
            if let Some(v) = line.strip_prefix("ob=") {
                ob = obs.resolve(v);
            } else if let Some(v) = line.strip_prefix("cob=") {
                cob = Some(obs.resolve(v));
            } else if let Some(v) = line.strip_prefix("fn=") {
                let name = fns.resolve(v);
                cur = Some(p.key(&ob, &name));
                cob = None;
            } else if let Some(v) = line.strip_prefix("cfn=") {
                cfn = Some(fns.resolve(v));
            } else if let Some(v) = line.strip_prefix("calls=") {
                let n = v.split_whitespace().next().and_then(|c| c.parse().ok()).unwrap_or(0);
                let target_ob = cob.clone().unwrap_or_else(|| ob.clone());
                let callee = cfn.clone().map(|f| p.key(&target_ob, &f));
                call = callee.map(|c| (c, n));
            } else if let Some(v) = line.strip_prefix("summary:").or_else(|| line.strip_prefix("totals:")) {
                p.total = v.trim().parse().unwrap_or(p.total);
            } else if line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*')) {
                let ir: u64 = line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
                let Some(f) = cur else { continue };
                match call.take() {
                    Some((callee, n)) => {
                        p.funcs[f].callee_ir += ir;
                        p.funcs[f].callees.push((callee, n, ir));
                        p.funcs[callee].calls += n;
                        p.funcs[callee].callers.push((f, n));
                        // cob/cfn hold for one call only.
                        cob = None;
                        cfn = None;
                    }
                    None => p.funcs[f].self_ir += ir,
                }
            }
        }
        p
    }

    fn key(&mut self, object: &str, name: &str) -> usize {
        let k = (object.to_owned(), name.to_owned());
        if let Some(&i) = self.index.get(&k) {
            return i;
        }
        self.funcs.push(FnCost { object: k.0.clone(), name: k.1.clone(), ..Default::default() });
        self.index.insert(k, self.funcs.len() - 1);
        self.funcs.len() - 1
    }

    /// The function whose name is `name` exactly (in any object).
    pub fn named(&self, name: &str) -> Option<&FnCost> {
        self.funcs.iter().filter(|f| f.name == name).max_by_key(|f| f.calls)
    }

    /// The most called function whose name contains `part`.
    pub fn containing(&self, part: &str) -> Option<&FnCost> {
        self.funcs.iter().filter(|f| f.name.contains(part)).max_by_key(|f| f.calls)
    }

    /// Inclusive instructions of the calls made from functions outside the
    /// objects `inside` selects (by path) into functions inside them: what
    /// a program spent in a library, with what the library called in turn.
    pub fn spent_in(&self, inside: impl Fn(&str) -> bool) -> u64 {
        self.funcs
            .iter()
            .filter(|f| !inside(&f.object))
            .flat_map(|f| f.callees.iter())
            .filter(|(c, _, _)| inside(&self.funcs[*c].object))
            .map(|&(_, _, ir)| ir)
            .sum()
    }

    /// Inclusive instructions of a program's clock calibration: the
    /// functions of the objects `program` selects that are called at most
    /// twice and call one function of libc that calls nothing (a system
    /// call stub) at least 1,000 times. In perftest that is
    /// `sample_get_cpu_mhz` (its `get_clock.c`), called twice per run: 200
    /// measurements, each a loop on `gettimeofday` until 10·i µs have
    /// passed (valgrind hides the vDSO, so each turn is libc's syscall
    /// stub). How many turns it makes follows how fast the guest runs, not
    /// how many operations the program does, so it is taken out of a
    /// per-operation slope.
    pub fn clock_calibration(&self, program: impl Fn(&str) -> bool) -> u64 {
        let spins = |f: &FnCost| {
            f.callees.iter().any(|&(c, n, _)| {
                let callee = &self.funcs[c];
                n >= 1_000 && callee.object.contains("/libc.so") && callee.callees.is_empty()
            })
        };
        self.funcs
            .iter()
            .filter(|f| program(&f.object) && (1..=2).contains(&f.calls) && spins(f))
            .map(FnCost::inclusive)
            .sum()
    }

    /// True when `f` (directly) calls a function whose name contains one of `parts`.
    pub fn calls_any(&self, f: &FnCost, parts: &[&str]) -> bool {
        f.callees.iter().any(|(c, _, _)| parts.iter().any(|p| self.funcs[*c].name.contains(p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# callgrind format
version: 1
positions: line
events: Ir
summary: 1000

ob=(1) /bin/app
fl=(1) ???
fn=(1) main
0 10
cob=(2) /lib/libx.so
cfi=(2) ???
cfn=(2) 0x0000000000001000
calls=3 0
0 300
cfn=(3) helper
calls=2 0
0 40
0 5

ob=(2)
fl=(2)
fn=(2)
0 240
cfn=(4) write
calls=3 0
0 60

ob=(1)
fl=(1)
fn=(3)
0 40
";

    #[test]
    fn inclusive_costs_and_calls() {
        let p = Profile::parse(SAMPLE);
        assert_eq!(p.total, 1000);
        let main = p.named("main").unwrap();
        assert_eq!((main.self_ir, main.callee_ir, main.calls), (15, 340, 0));
        let lib = p.named("0x0000000000001000").unwrap();
        assert_eq!(lib.object, "/lib/libx.so");
        assert_eq!((lib.inclusive(), lib.calls), (300, 3));
        assert_eq!(lib.per_call(), Some(100.0));
        assert!(p.calls_any(lib, &["write"]));
        assert!(!p.calls_any(main, &["write"]));
        // `helper` is called from main in /bin/app (cob was reset after the first call).
        let h = p.named("helper").unwrap();
        assert_eq!((h.object.as_str(), h.calls, h.self_ir), ("/bin/app", 2, 40));
        let w = p.containing("wri").unwrap();
        assert_eq!((w.object.as_str(), w.calls), ("/lib/libx.so", 3));
    }

    #[test]
    fn clock_calibration_is_a_spin_on_a_libc_stub() {
        // perftest's shape: main calls the calibration twice, which spins
        // on libc's gettimeofday stub; the measured loop calls the library
        // and libc's rand (which calls on) many times.
        let text = "version: 1
events: Ir
summary: 100000

ob=(1) /usr/bin/ib_send_lat
fn=(1) main
0 10
cfn=(2) 0x28fc0
calls=2 0
0 40000
cfn=(3) 0x23100
calls=1 0
0 50000
cfn=(6) 0x1c200
calls=1 0
0 9000

fn=(2)
0 10000
cob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6
cfn=(4) 0x00000000000c4150
calls=3000 0
0 30000

fn=(3)
0 20000
cob=(3) /opt/rverbs/lib/libibverbs.so.1
cfn=(5) ibverbs::cq::poll_cq
calls=3000 0
0 30000

fn=(6)
0 1000
cob=(2)
cfn=(7) rand
calls=2000 0
0 8000

ob=(2)
fn=(4)
0 30000
fn=(7)
0 4000
cfn=(8) random
calls=2000 0
0 4000
fn=(8)
0 4000

ob=(3)
fn=(5)
0 30000
";
        let p = Profile::parse(text);
        assert_eq!(p.clock_calibration(|o| o.ends_with("/ib_send_lat")), 40000);
        assert_eq!(p.clock_calibration(|o| o.ends_with("/ib_write_bw")), 0);
    }

    #[test]
    fn spent_in_a_library_counts_calls_into_it_once() {
        let p = Profile::parse(SAMPLE);
        // main's call into libx (300, with libx's own call to write), not
        // libx's calls inside itself again, nor main's call to helper.
        assert_eq!(p.spent_in(|o| o == "/lib/libx.so"), 300);
        assert_eq!(p.spent_in(|o| o == "/lib/none.so"), 0);
    }
}
