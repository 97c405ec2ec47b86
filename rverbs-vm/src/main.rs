//! `rverbs-vm`: run RDMA programs, and `cargo test` as a cargo runner, on
//! soft-RoCE (rxe) inside QEMU guests that boot real Linux kernels.
//! See docs/VM.md.

use std::io::Write;
use std::path::PathBuf;

use rverbs_vm::guest::Provider;
use rverbs_vm::host_tools::{self, Apt, Profile};
use rverbs_vm::run::{self, KernelChoice, RunArgs, EXIT_HARNESS};
use rverbs_vm::{kernel, util};

const USAGE: &str = "\
usage:
  rverbs-vm run [OPTIONS] [--] PROGRAM [ARGS...]
      boot a guest with soft-RoCE (rxe0 up, /dev/infiniband/uverbs0), copy
      PROGRAM and the shared libraries it needs into it, run it there with
      ARGS word for word and RVERBS_REQUIRE_DEVICE=1, stream its stdout and
      stderr, exit with its exit code (124: guest timeout; 125: the VM could
      not be set up). As a cargo runner:
        CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=\"rverbs-vm run --\" cargo test
    --kernel 6.1|6.12     Debian's kernel of that series (default $RVERBS_VM_KERNEL,
                          else 6.12), downloaded once into the cache
    --kernel-image PATH   boot this kernel image instead (bzImage, /boot/vmlinuz-*),
    --modules-dir PATH      with its module tree (lib/modules/RELEASE); also
                            $RVERBS_VM_KERNEL_IMAGE and $RVERBS_VM_MODULES_DIR
    --two-hosts           run PROGRAM on two guests joined by a virtual wire (rxe0
                          on each eth0); each gets RVERBS_VM_HOST (A or B),
                          RVERBS_VM_SELF and RVERBS_VM_PEER (IPv4 addresses)
    --provider rxe|siw    the device PROGRAM sees in RVERBS_TEST_DEVICE and
                          RVERBS_PROVIDER (rxe0, siw0); siw also brings up siw0
                          (soft-iWARP, 192.168.79.1 on v2) next to rxe0, siw.ko
                          built once per Debian kernel (apt-get download, make)
    --siw                 --provider siw
    --copy SRC[:DST]      also copy a host file or directory (DST: guest path,
                          default SRC's absolute path); repeatable
    --env NAME[=VALUE]    set NAME in the guest (default: its value here);
                          repeatable; also $RVERBS_VM_ENV=\"NAME NAME...\"
    --timeout SECS        guest time limit (default $RVERBS_VM_TIMEOUT, else 1200)
    --memory SIZE         guest memory (default $RVERBS_VM_MEMORY, else 4G)
    --cpus N              vCPUs per guest (default $RVERBS_VM_CPUS, else 1)
    --keep                keep the initrd (in the cache's run/)
    -v, --verbose         also show the guest's setup and kernel console
    -q, --quiet           no progress lines
  rverbs-vm fetch [--kernel 6.1|6.12]...
      download and unpack Debian's kernels into the cache (default: both)
  rverbs-vm help | --version

cache: $RVERBS_VM_CACHE, else $XDG_CACHE_HOME/rverbs-vm, else ~/.cache/rverbs-vm
see docs/VM.md";

fn main() {
    util::set_program_name("rverbs-vm");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("run") => match parse_run(&args[1..]) {
            Ok(a) => run::run(&a),
            Err(e) => usage_error(&e),
        },
        Some("fetch") => match parse_fetch(&args[1..]) {
            Ok(series) => fetch(&series),
            Err(e) => usage_error(&e),
        },
        Some("help" | "-h" | "--help") => {
            let _ = writeln!(std::io::stdout(), "{USAGE}");
            0
        }
        Some("-V" | "--version") => {
            println!("rverbs-vm {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some(other) => usage_error(&format!("unknown command {other:?}")),
        None => usage_error("no command"),
    };
    std::process::exit(code);
}

fn usage_error(e: &str) -> i32 {
    eprintln!("rverbs-vm: {e} (`rverbs-vm help` for the usage)");
    2
}

/// Splits `--name=value` or takes the value from the next argument.
fn value_of(arg: &str, rest: &mut std::slice::Iter<'_, String>) -> Result<String, String> {
    match arg.split_once('=') {
        Some((_, v)) => Ok(v.to_owned()),
        None => rest.next().cloned().ok_or_else(|| format!("{arg} needs a value")),
    }
}

fn number<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T, String> {
    v.trim().parse().map_err(|_| format!("{opt} {v:?}: not a number"))
}

/// Options up to `--` or the first word that is not one; the rest is the
/// program and its arguments, untouched.
fn parse_run(args: &[String]) -> Result<RunArgs, String> {
    let mut r = RunArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let name = if a.starts_with("--") { a.split('=').next().unwrap_or(a) } else { a.as_str() };
        match name {
            "--" => break,
            "--kernel" => r.kernel = Some(value_of(a, &mut it)?),
            "--kernel-image" => r.kernel_image = Some(PathBuf::from(value_of(a, &mut it)?)),
            "--modules-dir" => r.modules_dir = Some(PathBuf::from(value_of(a, &mut it)?)),
            "--two-hosts" => r.two_hosts = true,
            "--siw" => use_provider(&mut r, Provider::Siw),
            "--provider" => match Provider::parse_list(&value_of(a, &mut it)?)?.as_slice() {
                [p] => use_provider(&mut r, *p),
                _ => return Err("run: --provider takes one provider (rxe or siw)".into()),
            },
            "--copy" => r.copies.push(value_of(a, &mut it)?),
            "--env" => r.env.push(value_of(a, &mut it)?),
            "--timeout" => r.timeout = Some(number(a, &value_of(a, &mut it)?)?),
            "--memory" => r.memory = Some(value_of(a, &mut it)?),
            "--cpus" => r.cpus = Some(number(a, &value_of(a, &mut it)?)?).filter(|&c| c > 0),
            "--keep" => r.keep = true,
            "-v" | "--verbose" => r.verbose = true,
            "-q" | "--quiet" => util::set_quiet(true),
            _ if a.starts_with('-') => return Err(format!("run: unknown option {a:?}")),
            _ => {
                r.command.push(a.clone());
                break;
            }
        }
    }
    r.command.extend(it.cloned());
    if r.command.is_empty() {
        return Err("run: no program given".into());
    }
    r.kernel_choice()?;
    Ok(r)
}

/// `--provider P` (`--siw`: `--provider siw`): the guest brings P's
/// device up and the program sees it in `RVERBS_TEST_DEVICE` and
/// `RVERBS_PROVIDER`, as `cargo xtask test`'s runs do.
fn use_provider(r: &mut RunArgs, p: Provider) {
    r.siw |= p.needs_siw();
    r.env.retain(|e| !p.env().iter().any(|(k, _)| e.split('=').next() == Some(*k)));
    r.env.extend(p.env().iter().map(|(k, v)| format!("{k}={v}")));
}

fn parse_fetch(args: &[String]) -> Result<Vec<String>, String> {
    let mut series = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.split('=').next().unwrap_or(a) {
            "--kernel" => series.push(value_of(a, &mut it)?),
            "-q" | "--quiet" => util::set_quiet(true),
            _ => return Err(format!("fetch: unknown option {a:?}")),
        }
    }
    if series.is_empty() {
        series = kernel::SERIES.iter().map(|s| s.name.to_owned()).collect();
    }
    for s in &series {
        kernel::series(s)?;
    }
    Ok(series)
}

/// `rverbs-vm fetch`: each series into the cache, one line each.
fn fetch(series: &[String]) -> i32 {
    let prepared = (|| -> Result<_, String> {
        let tools = host_tools::ensure(&mut Apt::read_only(), Profile::Run)?;
        Ok((tools, run::dirs()?))
    })();
    let (tools, dirs) = match prepared {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rverbs-vm: {e}");
            return EXIT_HARNESS;
        }
    };
    let mut code = 0;
    for s in series {
        match run::kernel(&KernelChoice::Series(s.clone()), &dirs, &tools) {
            Ok(k) => println!("{s}: {} in {}", k.describe(), dirs.cache.display()),
            Err(e) => {
                eprintln!("rverbs-vm: kernel {s}: {e}");
                code = EXIT_HARNESS;
            }
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn run_passes_the_program_through() {
        let r = parse_run(&s(&["--kernel", "6.1", "--env", "A", "--copy=x:/y", "--", "/t/bin", "--nocapture", "--"]))
            .unwrap();
        assert_eq!(r.kernel.as_deref(), Some("6.1"));
        assert_eq!((r.env, r.copies), (s(&["A"]), s(&["x:/y"])));
        assert_eq!(r.command, s(&["/t/bin", "--nocapture", "--"]));
        let r = parse_run(&s(&["--two-hosts", "prog", "--kernel", "x"])).unwrap();
        assert!(r.two_hosts && !r.siw);
        assert!(parse_run(&s(&["--siw", "ibv_devices"])).unwrap().siw);
        let siw = parse_run(&s(&["--provider", "siw", "--", "p"])).unwrap();
        assert!(siw.siw && siw.env == s(&["RVERBS_TEST_DEVICE=siw0", "RVERBS_PROVIDER=siw"]));
        let rxe = parse_run(&s(&["--provider=rxe", "p"])).unwrap();
        assert!(!rxe.siw && rxe.env == s(&["RVERBS_TEST_DEVICE=rxe0", "RVERBS_PROVIDER=rxe"]));
        assert!(parse_run(&s(&["--provider", "rxe,siw", "p"])).is_err());
        assert!(parse_run(&s(&["--provider", "ib", "p"])).is_err());
        assert_eq!(r.command, s(&["prog", "--kernel", "x"]), "options after the program are its own");
        assert!(parse_run(&s(&["--bogus", "--", "p"])).is_err());
        assert!(parse_run(&s(&["--kernel", "6.1"])).is_err());
        assert!(parse_run(&s(&["--timeout", "soon", "p"])).is_err());
        assert!(parse_run(&s(&["--kernel", "4.19", "p"])).is_err());
    }

    #[test]
    fn fetch_defaults_to_every_series() {
        assert_eq!(parse_fetch(&[]).unwrap(), s(&["6.1", "6.12"]));
        assert!(parse_fetch(&s(&["--kernel", "5.10"])).is_err());
    }
}
