//! `cargo xtask`: the project's test harness.
//!
//! * `cargo xtask demo` boots a guest with soft-RoCE (rxe), runs an
//!   `rverbs pingpong` server and client under strace and prints a report
//!   that checks what rverbs claims (no libibverbs, the control path's
//!   ioctls, one doorbell per post, timings next to rdma-core's);
//!   `--two-hosts` runs the ping-pong between two guests instead.
//! * `cargo xtask test` runs the host tier (`cargo test --workspace`, no
//!   device), the integration tests inside QEMU guests that boot real
//!   Debian kernels with rxe, one per kernel of the matrix, and the
//!   two-host tier (ping-pong between two guests) per kernel.
//! * `cargo xtask vm -- COMMAND...` boots one such guest and runs a command.
//!
//! The harness itself (host tools, kernels, the guest image and its
//! `/init`, QEMU, reading consoles back, two guests on one wire) is the
//! `rverbs_vm` library, the core of the `rverbs-vm` tool: one harness for
//! the project and for its users. Here: [`project`] (cargo builds, host
//! tier), [`twohost`] (the ping-pong across the wire and its verdict),
//! [`downstream`] (the downstream crate through the cargo runner),
//! [`strace`], [`names`] and [`elf`] (what the demo reads), and one module
//! per subcommand. See docs/TESTING.md, docs/DEMO.md and docs/VM.md.

mod bench;
mod bench_report;
mod callgrind;
mod cmd_test;
mod cmd_vm;
mod console_files;
mod demo;
mod downstream;
mod fuzz;
mod miri;
mod mlx5_diff;
mod names;
mod project;
mod providers;
mod scale;
mod soak;
mod strace;
mod twohost;

use rverbs_vm::guest::Provider;
use rverbs_vm::{console, elf, guest, host_tools, kernel, runner, util};

use bench::BenchArgs;
use cmd_test::TestArgs;
use cmd_vm::VmArgs;
use demo::DemoArgs;

const USAGE: &str = "\
usage:
  cargo xtask demo [--kernel 6.1|6.12] [--two-hosts] [--provider rxe|siw] [--keep]
      boot a guest (default kernel 6.12), run rverbs pingpong on rxe0 under
      strace and report: no libibverbs, the control path's ioctls, the
      data path's syscalls, timings next to ibv_rc_pingpong; exit 1 if a
      check fails. --two-hosts: RC and UD ping-pong, rping on rxe0 then on
      siw0, between two guests joined by a QEMU stream network instead;
      --provider siw: rverbs rping next to rdma-core's rping (libsiw) on
      siw0, straced and timed
  cargo xtask test [--kernel 6.1|6.12]... [--host-only | --vm-only |
                   --two-hosts-only | --downstream-only] [--no-two-hosts]
                   [--no-downstream] [--provider rxe|siw]... [--keep]
      host tier (cargo test --workspace), then the integration tests in a
      QEMU guest for each kernel (default: all of them), one tier per
      provider (default rxe and siw, one boot: rxe0 and siw0; the tests get
      RVERBS_TEST_DEVICE and RVERBS_PROVIDER; xtask/src/providers.rs says
      which binaries a provider skips and why), then
      the two-host tier for each kernel, then tests/downstream's cargo test
      through rverbs-vm, then a 2-minute soak on 6.12 (cargo xtask soak)
      (--vm-only runs all four VM tiers)
  cargo xtask bench [--kernel 6.1|6.12]... [--runs N] [--only PARTS] [--no-doc] [--reuse] [--keep]
                    [--provider rxe|siw]
      rverbs next to rdma-core in one guest per kernel (default: all):
      instructions per iteration and per verb (callgrind), syscalls,
      latency and throughput medians, perftest as the floor, perftest on
      rdma-core's and rverbs' libibverbs.so.1 (capi), the cost of
      objects, connections, memory and queues as N grows (scale), plus the
      providers against the mock kernel and the HCA model on the host;
      prints one table and writes it into docs/PERFORMANCE.md (not with
      --no-doc). PARTS: instr,syscalls,latency,perftest,capi,scale,mock (default all); N:
      timed runs per configuration, medians (default 15);
      --reuse: no guests, the report of the files the last run kept in
      target/vm/bench/<kernel>/; --provider siw: instead, rverbs rping next
      to rdma-core's rping (libsiw) on siw0: instructions, syscalls and
      doorbells per ping, time per ping (N default 5), its own section
  cargo xtask mlx5-diff [--cases N]
      host only: rdma-core 44's libibverbs + libmlx5 and rverbs on one fake
      ConnectX-5 kernel, compared byte for byte (commands, WQEs, doorbells,
      UAR stores, decoded completions) over the named scenarios and N
      random ones (default 10000; part of cargo xtask test's host tier),
      and ibv_devinfo -v next to rverbs devinfo -v on the fake device
  cargo xtask miri
      host only: the unit tests that exercise unsafe code (rxe rings, the
      mlx5 model's queues, CM and netlink, MemoryRegion bytes, the C
      library's marshalling) under Miri; one line and exit 0 when rustup's
      nightly lacks the miri and rust-src components
  cargo xtask fuzz --minutes N [--cases N] [--seed S]
      host only: the property tests of every decoder of peer, kernel and
      HCA bytes (the workspace's proptests modules; 10000 cases from a
      fixed seed in cargo xtask test) in rounds of N cases per property
      (default 50000), each with a new random seed, until N minutes have
      passed; a failing round stops the run and prints its seed and the
      command that replays it (--seed S: the first round's seed)
  cargo xtask soak --minutes N [--kernel 6.1|6.12] [--sample S] [--no-capi] [--keep]
      boot one guest (default kernel 6.12) and run examples/soak.rs for N
      minutes: RC SEND/RECV, WRITE, READ, atomics, SRQ, UD, CM connects,
      CQ events and rdma-core's ping-pongs on rverbs' libibverbs.so.1, every
      byte and completion checked, rdma resource show and RSS sampled every
      S s; exit 1 on an error, a lost or duplicated completion, or growth
      (cargo xtask test runs 2 minutes on 6.12)
  cargo xtask vm [--kernel 6.1|6.12] [--tests] [--provider rxe|siw] [--keep] -- COMMAND...
      boot one guest (default kernel 6.12) with rxe0 up, run COMMAND there
      (read by the guest's shell, like ssh), exit with its exit code;
      --tests also copies the integration tests to /tests; --provider:
      COMMAND gets RVERBS_TEST_DEVICE and RVERBS_PROVIDER of rxe0 or siw0;
      siw also brings up siw0 (soft-iWARP, 192.168.79.1), building siw.ko
      once (--siw: --provider siw)

environment: RVERBS_VM_TIMEOUT (s, default 1200), RVERBS_VM_ACCEL (kvm|tcg),
  RVERBS_VM_MEMORY (default 4G), RVERBS_VM_VERBOSE=1 (show the whole console),
  RVERBS_VM_SERIAL=1 (test's VM tier: one kernel at a time, not side by side)
see docs/TESTING.md";

fn main() {
    util::set_program_name("xtask");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match dispatch(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn dispatch(args: &[String]) -> Result<i32, String> {
    match args.first().map(String::as_str) {
        Some("test") => cmd_test::run(&parse_test(&args[1..])?),
        Some("vm") => cmd_vm::run(&parse_vm(&args[1..])?),
        Some("demo") => demo::run(&parse_demo(&args[1..])?),
        Some("bench") => bench::run(&parse_bench(&args[1..])?),
        Some("mlx5-diff") => mlx5_diff::run(&args[1..]),
        Some("fuzz") => fuzz::run(&fuzz::parse(&args[1..])?),
        Some("soak") => soak::run(&soak::parse(&args[1..])?),
        Some("miri") => miri::run(&args[1..]),
        Some("help" | "-h" | "--help") | None => {
            println!("{USAGE}");
            Ok(0)
        }
        Some(other) => Err(format!("unknown command {other:?}\n{USAGE}")),
    }
}

/// Splits `--name=value` or takes the value from the next argument.
fn value_of(arg: &str, rest: &mut std::slice::Iter<'_, String>) -> Result<String, String> {
    match arg.split_once('=') {
        Some((_, v)) => Ok(v.to_owned()),
        None => rest.next().cloned().ok_or_else(|| format!("{arg} needs a value")),
    }
}

fn parse_test(args: &[String]) -> Result<TestArgs, String> {
    let mut t = TestArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.split('=').next().unwrap_or(a) {
            "--kernel" => t.kernels.push(value_of(a, &mut it)?),
            "--host-only" => t.host_only = true,
            "--vm-only" => t.vm_only = true,
            "--two-hosts-only" => t.two_hosts_only = true,
            "--no-two-hosts" => t.no_two_hosts = true,
            "--downstream-only" => t.downstream_only = true,
            "--no-downstream" => t.no_downstream = true,
            "--keep" => t.keep = true,
            "--provider" => {
                for p in Provider::parse_list(&value_of(a, &mut it)?)? {
                    if !t.providers.contains(&p) {
                        t.providers.push(p);
                    }
                }
            }
            _ => return Err(format!("unknown option {a:?}\n{USAGE}")),
        }
    }
    Ok(t)
}

fn parse_demo(args: &[String]) -> Result<DemoArgs, String> {
    let mut d = DemoArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.split('=').next().unwrap_or(a) {
            "--kernel" => d.kernel = Some(value_of(a, &mut it)?),
            "--two-hosts" => d.two_hosts = true,
            "--keep" => d.keep = true,
            "--provider" => match value_of(a, &mut it)?.as_str() {
                "rxe" => d.siw = false,
                "siw" => d.siw = true,
                p => return Err(format!("demo: --provider {p:?}: rxe or siw")),
            },
            _ => return Err(format!("unknown option {a:?}\n{USAGE}")),
        }
    }
    if d.siw && d.two_hosts {
        return Err("demo: --two-hosts runs rxe0 and then siw0 by itself; leave out --provider".into());
    }
    Ok(d)
}

fn parse_bench(args: &[String]) -> Result<BenchArgs, String> {
    let mut b = BenchArgs::default();
    let mut it = args.iter();
    let mut runs = None;
    while let Some(a) = it.next() {
        match a.split('=').next().unwrap_or(a) {
            "--kernel" => b.kernels.push(value_of(a, &mut it)?),
            "--runs" => {
                let v = value_of(a, &mut it)?;
                runs = Some(v.parse().ok().filter(|&n| n > 0).ok_or_else(|| format!("--runs {v:?}: not a count"))?);
            }
            "--provider" => match Provider::parse_list(&value_of(a, &mut it)?)?.as_slice() {
                [p] => b.provider = *p,
                _ => return Err("bench: --provider takes one provider (rxe or siw)".into()),
            },
            "--only" => b.parts = bench::Parts::parse(&value_of(a, &mut it)?)?,
            "--no-doc" => b.no_doc = true,
            "--reuse" => b.reuse = true,
            "--keep" => b.keep = true,
            _ => return Err(format!("unknown option {a:?}\n{USAGE}")),
        }
    }
    let siw = b.provider == Provider::Siw;
    if siw && b.parts != bench::Parts::all() {
        return Err("bench: --only picks parts of the rxe bench; --provider siw runs its own set".into());
    }
    b.runs = runs.unwrap_or(if siw { bench::SIW_DEFAULT_RUNS } else { bench::DEFAULT_RUNS });
    Ok(b)
}

fn parse_vm(args: &[String]) -> Result<VmArgs, String> {
    let mut v = VmArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.split('=').next().unwrap_or(a) {
            "--" => {
                v.command = it.by_ref().cloned().collect();
                break;
            }
            "--kernel" => v.kernel = Some(value_of(a, &mut it)?),
            "--tests" => v.with_tests = true,
            "--siw" => v.provider = Some(Provider::Siw),
            "--provider" => match Provider::parse_list(&value_of(a, &mut it)?)?.as_slice() {
                [p] => v.provider = Some(*p),
                _ => return Err("vm: --provider takes one provider (rxe or siw)".into()),
            },
            "--keep" => v.keep = true,
            _ if !a.starts_with('-') => {
                // `cargo xtask vm rverbs devinfo` without `--` also works.
                v.command = std::iter::once(a.clone()).chain(it.by_ref().cloned()).collect();
                break;
            }
            _ => return Err(format!("unknown option {a:?}\n{USAGE}")),
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_test_options() {
        let t = parse_test(&s(&["--kernel", "6.1", "--kernel=6.12", "--vm-only", "--keep", "--no-two-hosts"])).unwrap();
        assert!(t.no_two_hosts && !t.two_hosts_only);
        assert_eq!(t.kernels, s(&["6.1", "6.12"]));
        assert!(t.vm_only && t.keep && !t.host_only);
        assert!(parse_test(&s(&["--bogus"])).is_err());
        let t = parse_test(&s(&["--downstream-only"])).unwrap();
        assert!(t.downstream_only && !t.no_downstream);
        assert!(parse_test(&s(&["--no-downstream"])).unwrap().no_downstream);
        assert!(parse_test(&[]).unwrap().providers.is_empty(), "empty: every provider");
        let t = parse_test(&s(&["--provider", "siw", "--provider=rxe,siw"])).unwrap();
        assert_eq!(t.providers, [Provider::Siw, Provider::Rxe]);
        assert!(parse_test(&s(&["--provider", "iwarp"])).is_err());
    }

    #[test]
    fn parses_demo_options() {
        let d = parse_demo(&s(&["--kernel=6.1", "--two-hosts"])).unwrap();
        assert_eq!(d.kernel.as_deref(), Some("6.1"));
        assert!(d.two_hosts && !d.keep);
        assert!(parse_demo(&s(&["--frob"])).is_err());
        assert!(parse_demo(&s(&["--provider", "siw"])).unwrap().siw);
        assert!(!parse_demo(&s(&["--provider=rxe"])).unwrap().siw);
        assert!(parse_demo(&s(&["--provider", "mlx5"])).is_err());
        assert!(parse_demo(&s(&["--provider", "siw", "--two-hosts"])).is_err());
    }

    #[test]
    fn parses_bench_options() {
        let b = parse_bench(&s(&["--kernel", "6.1", "--runs=3", "--only", "instr,mock", "--no-doc"])).unwrap();
        assert_eq!((b.kernels, b.runs, b.no_doc), (s(&["6.1"]), 3, true));
        assert!(b.parts.instr && b.parts.mock && !b.parts.latency);
        assert_eq!(parse_bench(&[]).unwrap().runs, bench::DEFAULT_RUNS);
        assert!(parse_bench(&s(&["--runs", "0"])).is_err());
        assert_eq!(parse_bench(&[]).unwrap().provider, Provider::Rxe);
        let siw = parse_bench(&s(&["--provider", "siw", "--kernel=6.1"])).unwrap();
        assert_eq!((siw.provider, siw.runs), (Provider::Siw, bench::SIW_DEFAULT_RUNS));
        assert_eq!(parse_bench(&s(&["--runs=3", "--provider=siw"])).unwrap().runs, 3);
        assert!(parse_bench(&s(&["--provider", "rxe,siw"])).is_err());
        assert!(parse_bench(&s(&["--provider", "mlx5"])).is_err());
        assert!(parse_bench(&s(&["--provider", "siw", "--only", "instr"])).is_err());
    }

    #[test]
    fn parses_vm_command() {
        let v = parse_vm(&s(&["--kernel", "6.1", "--", "rverbs", "devinfo", "-v"])).unwrap();
        assert_eq!(v.kernel.as_deref(), Some("6.1"));
        assert_eq!(v.command, s(&["rverbs", "devinfo", "-v"]));
        let v = parse_vm(&s(&["ibv_devinfo", "-v"])).unwrap();
        assert_eq!(v.command, s(&["ibv_devinfo", "-v"]));
        assert!(v.provider.is_none());
        let v = parse_vm(&s(&["--siw", "--kernel=6.1", "--", "ibv_devices"])).unwrap();
        assert!(v.provider == Some(Provider::Siw) && v.command == s(&["ibv_devices"]));
        let v = parse_vm(&s(&["--provider", "rxe", "--", "x"])).unwrap();
        assert_eq!(v.provider, Some(Provider::Rxe));
        assert!(parse_vm(&s(&["--provider", "rxe,siw", "--", "x"])).is_err());
    }
}
