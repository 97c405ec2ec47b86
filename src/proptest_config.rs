//! The configuration of this crate's property tests (issue 32, hostile
//! bytes): every decoder of bytes from a peer, the kernel or the HCA gets
//! [`CASES`] cases from the fixed [`SEED`], so a run in CI is
//! reproducible. The environment overrides both: `PROPTEST_CASES=N`, and
//! `PROPTEST_RNG_SEED=S` (a `u64`), which `cargo xtask fuzz` sets to a new
//! random seed per round and prints when a round fails. No failure file is
//! written into the source tree: the seed replays a failure.

use proptest::test_runner::{Config, RngSeed};

/// Cases per property in CI.
pub const CASES: u32 = 10_000;

/// The seed in CI ("rverbs" in ASCII).
pub const SEED: u64 = 0x7276_6572_6273;

/// [`CASES`] cases from [`SEED`], unless `PROPTEST_CASES` or
/// `PROPTEST_RNG_SEED` say otherwise (proptest's other `PROPTEST_*`
/// variables apply as usual).
pub fn config() -> Config {
    let set = |k: &str| std::env::var_os(k).is_some();
    // `Config::default()` has already read the environment.
    let d = Config::default();
    Config {
        cases: if set("PROPTEST_CASES") { d.cases } else { CASES },
        rng_seed: if set("PROPTEST_RNG_SEED") { d.rng_seed } else { RngSeed::Fixed(SEED) },
        failure_persistence: None,
        ..d
    }
}
