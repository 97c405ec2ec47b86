//! Reading results back: libtest's output (`test NAME ... ok`, `test
//! result: ...`) and the guest's `@@RVERBS` marker lines.

use std::ops::AddAssign;
use std::time::{Duration, Instant};

use crate::guest::MARK;

/// Test counts; `skipped` is libtest's "ignored".
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
}

impl AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.passed += o.passed;
        self.failed += o.failed;
        self.skipped += o.skipped;
    }
}

impl Counts {
    /// `N passed, M failed, K skipped`.
    pub fn describe(&self) -> String {
        format!("{} passed, {} failed, {} skipped", self.passed, self.failed, self.skipped)
    }
}

/// Outcome of one libtest test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    Ignored,
}

/// `test NAME ... ok|FAILED|ignored[, reason]` -> name and outcome.
pub fn parse_test_line(line: &str) -> Option<(String, Outcome)> {
    let rest = line.trim_end().strip_prefix("test ")?;
    let (name, result) = rest.rsplit_once(" ... ")?;
    let outcome = match result {
        "ok" => Outcome::Ok,
        "FAILED" => Outcome::Failed,
        r if r == "ignored" || r.starts_with("ignored, ") => Outcome::Ignored,
        _ => return None,
    };
    Some((name.to_owned(), outcome))
}

/// `test result: ok. 3 passed; 0 failed; 1 ignored; ...` -> counts.
pub fn parse_summary(line: &str) -> Option<Counts> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (_, fields) = rest.split_once(". ")?;
    let mut c = Counts::default();
    for f in fields.split(';') {
        let mut w = f.split_whitespace();
        let (Some(n), Some(what)) = (w.next(), w.next()) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        match what {
            "passed" => c.passed = n,
            "failed" => c.failed = n,
            "ignored" => c.skipped = n,
            _ => {}
        }
    }
    Some(c)
}

/// libtest results gathered from a stream of lines.
#[derive(Debug, Default, Clone)]
pub struct LibtestLog {
    /// Sum of the `test result:` lines.
    pub counts: Counts,
    pub summaries: usize,
    /// Names of the tests reported FAILED.
    pub failed: Vec<String>,
    /// Every line seen, for extracting failure output.
    pub lines: Vec<String>,
}

impl LibtestLog {
    /// Feeds one line.
    pub fn push(&mut self, line: &str) {
        if let Some((name, Outcome::Failed)) = parse_test_line(line) {
            self.failed.push(name);
        }
        if let Some(c) = parse_summary(line) {
            self.counts += c;
            self.summaries += 1;
        }
        self.lines.push(line.to_owned());
    }

    /// The captured output libtest printed for a failed test
    /// (`---- NAME stdout ----` up to the next section).
    pub fn failure_output(&self, name: &str) -> Vec<String> {
        let head = format!("---- {name} stdout ----");
        let Some(start) = self.lines.iter().position(|l| l.trim() == head) else {
            return Vec::new();
        };
        self.lines[start + 1..]
            .iter()
            .take_while(|l| !l.starts_with("---- ") && l.trim() != "failures:")
            .cloned()
            .collect()
    }
}

/// One program run inside the guest (a test binary, or the `vm` command).
#[derive(Debug, Default, Clone)]
pub struct GuestRun {
    pub name: String,
    /// Exit code; `None` when the end marker never came.
    pub exit: Option<i32>,
    pub log: LibtestLog,
    /// From its begin marker to its end marker, as the host saw them
    /// (`None` until the end marker came): per-binary time, for finding
    /// what makes a tier slow.
    pub took: Option<Duration>,
}

impl GuestRun {
    /// True for an example run (`example:<name>`, see
    /// [`crate::guest::test_payload_with_examples`]): one test, passed when
    /// it exits 0.
    pub fn is_example(&self) -> bool {
        self.name.starts_with("example:")
    }

    /// Counts for a test binary: its summaries, plus one failure when it
    /// exited non-zero (or never ended) without any test reported FAILED.
    /// An example counts as one test.
    pub fn counts(&self) -> Counts {
        if self.is_example() {
            let ok = self.exit == Some(0);
            return Counts { passed: u64::from(ok), failed: u64::from(!ok), skipped: 0 };
        }
        let mut c = self.log.counts;
        if self.exit != Some(0) && c.failed == 0 {
            c.failed += 1;
        }
        c
    }

    /// Why the binary failed when no test says so, if it did.
    pub fn crash_reason(&self) -> Option<String> {
        match self.exit {
            Some(0) => None,
            Some(rc) if self.is_example() => Some(format!("{} exited with {rc}", self.name)),
            _ if self.log.counts.failed > 0 => None,
            Some(rc) => {
                Some(format!("{} exited with {rc} without a failing test (crash or panic outside a test?)", self.name))
            }
            None => Some(format!("{} did not finish", self.name)),
        }
    }
}

/// Everything the guest reported, parsed incrementally from its console.
#[derive(Debug, Default, Clone)]
pub struct GuestReport {
    /// `uname -r` of the guest.
    pub release: Option<String>,
    /// rxe0 came up.
    pub ready: bool,
    pub setup_error: Option<String>,
    pub runs: Vec<GuestRun>,
    /// The payload finished (the guest was about to power off).
    pub done: bool,
    pub dmesg: Vec<String>,
    in_run: bool,
    in_dmesg: bool,
    /// When the open run's begin marker came.
    began: Option<Instant>,
    /// This boot's nonce ([`crate::guest::NONCE_FILE`]); empty: plain
    /// `@@RVERBS ` markers.
    nonce: String,
}

/// What a console line was, for whoever shows progress.
#[derive(Debug, PartialEq, Eq)]
pub enum LineKind {
    /// A marker (not for display).
    Marker,
    /// Output of the program currently running.
    Program,
    /// Part of the dmesg tail.
    Dmesg,
    /// Anything else on the guest console (setup output).
    Other,
    /// A line of the kernel console.
    Kernel,
    /// A line the program wrote to its stderr, when it has its own port
    /// ([`crate::runner::Payload::separate_stderr`]).
    Stderr,
}

impl GuestReport {
    /// A report that believes only markers carrying `nonce`
    /// (`@@RVERBS:<nonce> …`); any other `@@RVERBS` line is the program's
    /// output.
    pub fn with_nonce(nonce: &str) -> GuestReport {
        GuestReport { nonce: nonce.to_owned(), ..GuestReport::default() }
    }

    /// The prefix of a marker this report believes.
    fn prefix(&self) -> String {
        if self.nonce.is_empty() {
            format!("{MARK} ")
        } else {
            format!("{MARK}:{} ", self.nonce)
        }
    }

    /// Feeds one console line and says what it was. A marker may follow
    /// output that did not end its line, so it is found anywhere in it.
    pub fn push(&mut self, line: &str) -> LineKind {
        let prefix = self.prefix();
        if let Some(at) = line.find(&prefix) {
            self.marker(line[at + prefix.len()..].trim());
            return LineKind::Marker;
        }
        if self.in_dmesg {
            self.dmesg.push(line.to_owned());
            LineKind::Dmesg
        } else if self.in_run {
            self.runs.last_mut().expect("a run is open").log.push(line);
            LineKind::Program
        } else {
            LineKind::Other
        }
    }

    fn marker(&mut self, m: &str) {
        let (word, rest) = m.split_once(' ').unwrap_or((m, ""));
        match word {
            "uname" => self.release = Some(rest.trim().to_owned()),
            "ready" => self.ready = true,
            "setup-failed" => self.setup_error = Some(rest.trim().to_owned()),
            "begin" => {
                self.runs.push(GuestRun { name: rest.trim().to_owned(), ..Default::default() });
                self.in_run = true;
                self.began = Some(Instant::now());
            }
            "end" => {
                let code = rest.rsplit(' ').next().and_then(|c| c.trim().parse().ok());
                let took = self.began.take().map(|b| b.elapsed());
                if let Some(r) = self.runs.last_mut() {
                    r.exit = code;
                    r.took = took;
                }
                self.in_run = false;
            }
            "dmesg-begin" => self.in_dmesg = true,
            "dmesg-end" => self.in_dmesg = false,
            "done" => self.done = true,
            _ => {}
        }
    }

    /// Counts over every binary run.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in &self.runs {
            c += r.counts();
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libtest_lines() {
        assert_eq!(parse_test_line("test a::b ... ok"), Some(("a::b".into(), Outcome::Ok)));
        assert_eq!(parse_test_line("test x ... FAILED"), Some(("x".into(), Outcome::Failed)));
        assert_eq!(parse_test_line("test y ... ignored, needs hw"), Some(("y".into(), Outcome::Ignored)));
        assert_eq!(parse_test_line("test result: ok. 1 passed"), None);
        let c = parse_summary(
            "test result: FAILED. 3 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.01s",
        )
        .unwrap();
        assert_eq!(c, Counts { passed: 3, failed: 1, skipped: 2 });
    }

    #[test]
    fn follows_markers() {
        let console = "\
boot noise
@@RVERBS uname 6.1.0-57-amd64
@@RVERBS ready
@@RVERBS begin vm_smoke

running 2 tests
test a ... ok
test b ... FAILED

failures:

---- b stdout ----
thread 'b' panicked at tests/x.rs:1:1:
boom

failures:
    b

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
@@RVERBS end vm_smoke 101
@@RVERBS begin crashes
@@RVERBS end crashes 139
@@RVERBS dmesg-begin
[    1.0] rxe
@@RVERBS dmesg-end
@@RVERBS done";
        let mut r = GuestReport::default();
        for l in console.lines() {
            r.push(l);
        }
        assert_eq!(r.release.as_deref(), Some("6.1.0-57-amd64"));
        assert!(r.ready && r.done);
        assert_eq!(r.runs.len(), 2);
        assert_eq!(r.runs[0].exit, Some(101));
        assert!(r.runs.iter().all(|run| run.took.is_some()), "each ended run is timed");
        assert_eq!(r.runs[0].log.failed, vec!["b".to_owned()]);
        assert_eq!(r.runs[0].log.failure_output("b"), vec!["thread 'b' panicked at tests/x.rs:1:1:", "boom", ""]);
        assert!(r.runs[1].crash_reason().is_some());
        assert_eq!(r.counts(), Counts { passed: 1, failed: 2, skipped: 0 });
        assert_eq!(r.dmesg, vec!["[    1.0] rxe"]);
    }

    #[test]
    fn only_markers_with_the_nonce_count() {
        let mut r = GuestReport::with_nonce("00ff");
        for l in [
            "@@RVERBS:00ff ready",
            "@@RVERBS:00ff begin t",
            "@@RVERBS end t 0",
            "faked @@RVERBS:0000 end t 0",
            "no newline@@RVERBS:00ff end t 101",
            "@@RVERBS:00ff done",
        ] {
            r.push(l);
        }
        assert!(r.ready && r.done);
        assert_eq!(r.runs.len(), 1);
        assert_eq!(r.runs[0].exit, Some(101));
        assert_eq!(r.runs[0].log.lines, vec!["@@RVERBS end t 0", "faked @@RVERBS:0000 end t 0"]);
    }
}
