//! The report: its heading (date, commit, kernels, rdma-core's version),
//! the order of its tables, and the number formats they share.

use super::kernel_run::KernelRun;
use super::mock::{mock_table, MockCounts};

/// Everything the table shows.
pub struct Report<'a> {
    pub(super) runs: &'a [KernelRun],
    pub(super) mock: Option<&'a MockCounts>,
    pub(super) commit: String,
    pub(super) timed_runs: u32,
    pub(super) date: String,
}

pub(super) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(r), Some(v)) if r > 0.0 => Some(v / r),
        _ => None,
    }
}

pub(super) fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

pub(super) fn fmt_int(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| group(x.round() as i64))
}

/// `12,345`.
fn group(v: i64) -> String {
    let s = v.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// The per-kernel columns of a side-by-side table.
pub(super) const BOTH_AND_RATIO: [&str; 3] = ["rdma-core", "rverbs", "ratio"];

impl<'a> Report<'a> {
    pub fn new(runs: &'a [KernelRun], mock: Option<&'a MockCounts>, commit: &str, timed_runs: u32) -> Report<'a> {
        Report { runs, mock, commit: commit.to_owned(), timed_runs, date: today() }
    }

    /// The Markdown text: heading lines, the table, the per-call functions.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("Measured {} at commit `{}` by `cargo xtask bench`", self.date, self.commit));
        let kept: Vec<&str> = self.runs.iter().map(|k| k.commit.as_str()).filter(|c| *c != self.commit).collect();
        if let Some(first) = kept.first() {
            s.push_str(&format!(
                " (the host's provider benches; the guest figures are a kept run (`--reuse`) of commit `{first}`)"
            ));
        }
        if !self.runs.is_empty() {
            let k: Vec<String> = self
                .runs
                .iter()
                .map(|k| format!("{} = Linux {} ({}, {} vCPUs)", k.series, k.release, k.accel, k.cpus))
                .collect();
            s.push_str(&format!("; guests: {}", k.join("; ")));
        }
        s.push_str(&format!(
            ". rdma-core is Debian's {} (`ibv_rc_pingpong`, `ibv_ud_pingpong`, librxe), run with the same \
             arguments in the same boot; latency, throughput and the C library's perftest timings are medians of {} \
             runs, the two sides of each run one after the other, rdma-core first in odd runs and rverbs in even \
             ones.\n\n",
            rdma_core_version(),
            self.runs_text()
        ));
        if !self.runs.is_empty() {
            s.push_str(&self.table());
            s.push('\n');
            s.push_str(&self.pairs_table());
            s.push('\n');
            s.push_str(&self.functions());
            s.push('\n');
            s.push_str(&self.tracing_table());
            s.push('\n');
            s.push_str(&self.capi_calls_table());
            let scale = crate::scale::tables(self.runs);
            if !scale.is_empty() {
                s.push('\n');
                s.push_str(&scale);
            }
        }
        if let Some(m) = self.mock {
            s.push('\n');
            s.push_str(&mock_table(m));
        }
        s
    }

    /// How many timed runs each kernel's medians are of.
    fn runs_text(&self) -> String {
        let mut n: Vec<u32> = self.runs.iter().map(|k| k.runs).collect();
        n.dedup();
        match n.as_slice() {
            [] => self.timed_runs.to_string(),
            [one] => one.to_string(),
            _ => self.runs.iter().map(|k| format!("{} ({})", k.runs, k.series)).collect::<Vec<_>>().join(" and "),
        }
    }

    /// A table's two header lines: `first`, then each kernel's `per_kernel`
    /// columns (named after its series, right-aligned), then `tail`'s.
    pub(super) fn header(&self, first: &str, per_kernel: &[&str], tail: &[&str]) -> String {
        let mut names = format!("| {first} |");
        let mut sep = String::from("| --- |");
        for k in self.runs {
            for c in per_kernel {
                names.push_str(&format!(" {} {c} |", k.series));
                sep.push_str(" ---: |");
            }
        }
        for c in tail {
            names.push_str(&format!(" {c} |"));
            sep.push_str(" --- |");
        }
        format!("{names}\n{sep}\n")
    }
}

pub(super) fn size_text(size: u32) -> String {
    if size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

/// `dpkg-query` of libibverbs1 on the host (the guest's copy comes from it).
pub(super) fn rdma_core_version() -> String {
    std::process::Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "libibverbs1"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| format!("rdma-core {}", String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_else(|| "rdma-core".into())
}

/// Today's date (UTC), `YYYY-MM-DD`, from the system clock.
pub(super) fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(group(1234567), "1,234,567");
        assert_eq!(group(999), "999");
        assert_eq!(size_text(4096), "4 KiB");
    }

    #[test]
    fn dates() {
        assert_eq!(today().len(), 10);
    }
}
