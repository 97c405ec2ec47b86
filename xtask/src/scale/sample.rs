//! One result line of a scale program: `SCALE <section> <what> <impl> <n>
//! key=value …`, e.g. `SCALE objects qp-rc rverbs 1000 ns=41233 rss_kib=12`.

use std::collections::BTreeMap;

use crate::bench_report::{median, KernelRun};

/// A parsed result line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub section: String,
    /// What was measured (`pd`, `qp-rc`, `reg-1g`, …).
    pub what: String,
    /// `rdma-core`, `rverbs` or `rverbs-capi` (rverbs' `libibverbs.so.1`).
    pub imp: String,
    pub n: u64,
    pub values: BTreeMap<String, f64>,
}

impl Sample {
    /// Parses one line; `None` unless it is a well-formed result line.
    pub fn parse(line: &str) -> Option<Sample> {
        let mut w = line.split_whitespace();
        if w.next()? != "SCALE" {
            return None;
        }
        let section = w.next()?.to_owned();
        let what = w.next()?.to_owned();
        let imp = w.next()?.to_owned();
        let n = w.next()?.parse().ok()?;
        let mut values = BTreeMap::new();
        for kv in w {
            let (k, v) = kv.split_once('=')?;
            values.insert(k.to_owned(), v.parse().ok()?);
        }
        Some(Sample { section, what, imp, n, values })
    }

    /// The line [`Sample::parse`] reads (the guest programs print it; the
    /// tests round-trip it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn line(&self) -> String {
        let mut s = format!("SCALE {} {} {} {}", self.section, self.what, self.imp, self.n);
        for (k, v) in &self.values {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }

    /// Every result line of `section` in a kernel run's `sc-` files.
    pub fn all(run: &KernelRun, section: &str) -> Vec<Sample> {
        run.files
            .iter()
            .filter(|(name, _)| name.starts_with("sc-"))
            .flat_map(|(_, lines)| lines.iter().filter_map(|l| Sample::parse(l)))
            .filter(|s| s.section == section)
            .collect()
    }

    /// The median of `value` over the samples `keep` selects (a cell's
    /// runs): `None` when none has the value.
    pub fn median_of(
        samples: &[Sample],
        keep: impl Fn(&Sample) -> bool,
        value: impl Fn(&Sample) -> Option<f64>,
    ) -> Option<f64> {
        let v: Vec<f64> = samples.iter().filter(|s| keep(s)).filter_map(value).collect();
        median(&v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let s = Sample::parse("SCALE objects qp-rc rverbs 1000 ns=41233 rss_kib=12.5").unwrap();
        assert_eq!((s.what.as_str(), s.imp.as_str(), s.n), ("qp-rc", "rverbs", 1000));
        assert_eq!(s.values["rss_kib"], 12.5);
        assert_eq!(Sample::parse(&s.line()), Some(s));
        assert_eq!(Sample::parse("SCALE objects qp rverbs many"), None);
        assert_eq!(Sample::parse("SCALE objects qp rverbs 1 ns"), None);
        assert_eq!(Sample::parse("scale x"), None);
    }
}
