//! `cargo xtask fuzz --minutes N`: the property tests of the decoders of
//! peer, kernel and HCA bytes (every `proptests` module of the workspace,
//! issue 32) run again and again, each round with a new random seed and
//! more cases than CI's 10,000, until N minutes have passed. The first
//! failing round stops the run and prints its seed and case count with
//! the command that replays it (proptest then shrinks to the minimal
//! input, as in CI). Host only, no device.
//!
//! The seed and case count reach the tests as `PROPTEST_RNG_SEED` and
//! `PROPTEST_CASES`, which each crate's `proptest_config::config()` honours
//! over its fixed CI seed.

use std::hash::{BuildHasher, RandomState};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::project::{cargo, workspace, TEST_FEATURES};
use crate::util::{note, Result};

/// Cases per property per round unless `--cases` says otherwise.
pub const DEFAULT_CASES: u32 = 50_000;

/// The test-name filter that selects the property tests.
const FILTER: &str = "proptests";

#[derive(Debug, Clone, PartialEq)]
pub struct FuzzArgs {
    /// How long to keep starting rounds.
    pub minutes: f64,
    /// Cases per property per round.
    pub cases: u32,
    /// The first round's seed (`--seed`): replays one round, then goes on
    /// with random ones.
    pub seed: Option<u64>,
}

/// `--minutes N [--cases N] [--seed S]`.
pub fn parse(args: &[String]) -> Result<FuzzArgs> {
    let mut minutes = None;
    let mut f = FuzzArgs { minutes: 0.0, cases: DEFAULT_CASES, seed: None };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let name = a.split('=').next().unwrap_or(a);
        let mut value = || crate::value_of(a, &mut it);
        match name {
            "--minutes" => {
                let v = value()?;
                let m: f64 = v.parse().map_err(|_| format!("--minutes {v:?}: not a number"))?;
                if !(m > 0.0 && m.is_finite()) {
                    return Err(format!("--minutes {v:?}: must be more than 0"));
                }
                minutes = Some(m);
            }
            "--cases" => {
                let v = value()?;
                f.cases = v.parse().ok().filter(|&n| n > 0).ok_or_else(|| format!("--cases {v:?}: not a count"))?;
            }
            "--seed" => {
                let v = value()?;
                f.seed = Some(v.parse().map_err(|_| format!("--seed {v:?}: not a u64"))?);
            }
            _ => return Err(format!("unknown option {a:?}\n{}", crate::USAGE)),
        }
    }
    f.minutes = minutes.ok_or("cargo xtask fuzz needs --minutes N")?;
    Ok(f)
}

/// A seed nobody chose: std's randomly keyed hasher over the time and
/// the round (no `rand` dependency).
fn random_seed(round: u32) -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    RandomState::new().hash_one((now, round, std::process::id()))
}

/// `cargo test` of the property tests (unit tests of the libraries and
/// binaries: where every `proptests` module is), with the features the
/// host tier builds, so both share one build.
fn test_command(seed: u64, cases: u32) -> Command {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--features", TEST_FEATURES, "--lib", "--bins", "--no-fail-fast", "--", FILTER])
        .env("PROPTEST_RNG_SEED", seed.to_string())
        .env("PROPTEST_CASES", cases.to_string());
    cmd
}

/// The line that replays a round.
fn replay(seed: u64, cases: u32) -> String {
    format!(
        "PROPTEST_RNG_SEED={seed} PROPTEST_CASES={cases} cargo test --workspace --features {TEST_FEATURES} \
         --lib --bins -- {FILTER}"
    )
}

pub fn run(a: &FuzzArgs) -> Result<i32> {
    let ws = workspace()?;
    let deadline = Duration::from_secs_f64(a.minutes * 60.0);
    let start = Instant::now();
    let mut round = 0u32;
    while round == 0 || start.elapsed() < deadline {
        let seed = match (round, a.seed) {
            (0, Some(s)) => s,
            _ => random_seed(round),
        };
        round += 1;
        note(format!("fuzz round {round}: seed {seed}, {} cases per property", a.cases));
        let mut cmd = test_command(seed, a.cases);
        cmd.current_dir(&ws.root);
        let status = cmd.status().map_err(|e| format!("starting cargo test: {e}"))?;
        if !status.success() {
            eprintln!("xtask fuzz: round {round} FAILED ({status}): seed {seed}, {} cases", a.cases);
            eprintln!("xtask fuzz: replay it with\n  {}", replay(seed, a.cases));
            return Ok(1);
        }
    }
    let m = start.elapsed().as_secs_f64() / 60.0;
    println!("xtask fuzz: {round} round(s) of {} cases per property passed in {m:.1} min", a.cases);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_fuzz_options() {
        let f = parse(&s(&["--minutes", "2.5", "--cases=1000", "--seed", "42"])).unwrap();
        assert_eq!(f, FuzzArgs { minutes: 2.5, cases: 1000, seed: Some(42) });
        let f = parse(&s(&["--minutes=1"])).unwrap();
        assert_eq!((f.cases, f.seed), (DEFAULT_CASES, None));
        for bad in [&[][..], &["--cases", "5"], &["--minutes", "0"], &["--minutes", "x"], &["--minutes", "-1"]] {
            assert!(parse(&s(bad)).is_err(), "{bad:?}");
        }
        assert!(parse(&s(&["--minutes", "1", "--cases", "0"])).is_err());
        assert!(parse(&s(&["--minutes", "1", "--seed", "-3"])).is_err());
        assert!(parse(&s(&["--minutes", "1", "--frob"])).is_err());
        assert!(parse(&s(&["--minutes"])).is_err(), "a value is needed");
    }

    #[test]
    fn rounds_get_the_seed_and_cases_and_say_how_to_replay() {
        let cmd = test_command(7, 123);
        let env: Vec<_> = cmd.get_envs().map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned()))).collect();
        assert!(env.contains(&("PROPTEST_RNG_SEED".into(), Some("7".into()))));
        assert!(env.contains(&("PROPTEST_CASES".into(), Some("123".into()))));
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args.last().map(String::as_str), Some(FILTER));
        assert!(replay(7, 123).starts_with("PROPTEST_RNG_SEED=7 PROPTEST_CASES=123 cargo test"));
        assert_ne!(random_seed(0), random_seed(0), "a new seed each time");
    }
}
