//! The harness's provider table: per provider of the VM tier, how its
//! guest brings the device up ([`Provider`]: rxe0 always, siw0 with siw.ko
//! and the payload's `RVERBS_SIW`), the device the tests get
//! (`RVERBS_TEST_DEVICE`, `RVERBS_PROVIDER`) and the test binaries that do
//! not apply to it, each with the reason. Every other binary of the
//! workspace runs on every provider; a test inside a binary that does not
//! apply to a device says so itself (`n/a on siw0: ...`) after checking
//! that the device or the API refuses what it would test.

use rverbs_vm::guest::{Provider, TestTier};

/// One row of the table.
pub struct TestProvider {
    pub provider: Provider,
    /// (binary, why it does not run on this provider).
    pub skip: &'static [(&'static str, &'static str)],
}

/// The table. Adding a provider: a [`Provider`] in `rverbs-vm/src/guest.rs`
/// (its device and how `/init` brings it up) and a row here.
pub const TABLE: &[TestProvider] = &[
    TestProvider { provider: Provider::Rxe, skip: &[] },
    TestProvider {
        provider: Provider::Siw,
        skip: &[
            (
                "pingpong",
                "rdma-core's ibv_*_pingpong and rverbs pingpong connect QPs by hand over a TCP side \
                 channel (and UD, SRQ events); an iWARP QP connects only through the CM (cm runs rping)",
            ),
            (
                "endpoint",
                "Endpoint::handshake connects QPs by hand (RTR/RTS with the peer's QPN and PSN), which \
                 iWARP refuses (control_path and faults check the refusal); the CM connects siw QPs",
            ),
            (
                "completion_status",
                "pins rxe's completion statuses on pairs connected by hand, one QP connected to itself \
                 (which no CM connection can make); datapath asserts siw's statuses on CM-connected pairs",
            ),
            (
                "rxe_datapath",
                "rxe's own transports: UC, UD with GRH, multicast groups and the legacy address vector, \
                 which iWARP lacks (siw creates RC QPs only; control_path checks the refusal); the RC data \
                 path (SEND, WRITE, READ, SRQ, inline, errors, flushes, events) runs on siw in datapath",
            ),
        ],
    },
];

/// The row of `p`.
pub fn row(p: Provider) -> &'static TestProvider {
    TABLE.iter().find(|r| r.provider == p).expect("every provider has a row in xtask's provider table")
}

/// The tier of `p` over the workspace's test binaries `names`: the run
/// names get `<provider>:` in front, the environment names the device.
pub fn tier(p: Provider, names: &[String]) -> TestTier {
    let skip = row(p).skip;
    TestTier {
        prefix: prefix(p),
        env: p.env().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        tests: names.iter().filter(|n| !skip.iter().any(|(s, _)| s == n)).cloned().collect(),
    }
}

/// The run-name prefix of `p`'s tier (`siw:`).
pub fn prefix(p: Provider) -> String {
    format!("{}:", p.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_has_a_row_and_each_skip_a_reason() {
        for p in Provider::ALL {
            let r = row(p);
            for (bin, why) in r.skip {
                assert!(!bin.is_empty() && why.len() > 10, "{}: {bin}: say why", p.name());
            }
        }
        assert_eq!(TABLE.len(), Provider::ALL.len());
    }

    #[test]
    fn a_tier_runs_what_its_row_does_not_skip() {
        let names: Vec<String> = ["vm_smoke", "rxe_datapath"].iter().map(|s| s.to_string()).collect();
        let t = tier(Provider::Siw, &names);
        assert_eq!(t.prefix, "siw:");
        assert!(t.env.contains(&("RVERBS_TEST_DEVICE".into(), "siw0".into())));
        assert!(t.env.contains(&("RVERBS_PROVIDER".into(), "siw".into())));
        for (skipped, _) in row(Provider::Siw).skip {
            assert!(!t.tests.iter().any(|n| n == skipped));
        }
        assert!(t.tests.contains(&"vm_smoke".to_string()));
        assert_eq!(tier(Provider::Rxe, &names).tests, names, "rxe runs every binary");
    }
}
