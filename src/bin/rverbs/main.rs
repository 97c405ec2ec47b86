//! `rverbs`: inspect RDMA devices without libibverbs.
//!
//! ```text
//! rverbs devices                      like ibv_devices
//! rverbs devinfo [-d DEV] [-i PORT] [-l] [-v]
//!                                     like ibv_devinfo; -v adds a GID table
//! rverbs pingpong [--ud|--srq] [options] [server]
//!                                     like ibv_rc/ud/srq_pingpong, wire-compatible
//! rverbs rping -s|-c [-vVd] [-S size] [-C count] [-a addr] [-p port]
//!                                     like librdmacm's rping, wire-compatible
//! ```
//!
//! Argument parsing is hand-written, one getopt_long-style parser for all
//! commands (see the `getopt` module: clustered short options,
//! `-dVALUE`/`-d VALUE`, `--long=VALUE`/`--long VALUE`, unambiguous long
//! prefixes, `--` ends options). Errors print one line, `rverbs: <error>`,
//! on stderr and exit with status 1.
//!
//! # Start-up
//! The program has no Rust `main`: glibc's `__libc_start_main` calls
//! [`main`] below directly (`#![no_main]`). Rust's runtime set-up, which
//! `fn main` would run first, is 19 syscalls that a command-line tool does
//! not need (checking fds 0-2 with `poll`, ignoring `SIGPIPE`, reading
//! `/proc/self/maps` for the main thread's stack guard, `sched_getaffinity`,
//! and an alternate signal stack with `SIGSEGV`/`SIGBUS` handlers that
//! print "has overflowed its stack"), a quarter of a ping-pong client's
//! non-doorbell syscalls; `cargo xtask bench` counts them. What changes: `SIGPIPE`
//! keeps its default, so writing into a closed pipe ends the program as it
//! ends rdma-core's tools (`rverbs devinfo -v | head -1`); a stack
//! overflow is a plain `SIGSEGV`; a panic still prints its message and
//! exits with status 101. `std::env::args` works without the runtime
//! (glibc passes `argc`/`argv` to std's `.init_array` hook), and stdout is
//! flushed before returning.
#![cfg_attr(not(test), no_main)]

mod devices;
mod devinfo;
mod getopt;
mod gids;
mod log;
mod pingpong;
mod rping;

// The property tests' configuration, the library's (issue 32).
#[cfg(test)]
#[path = "../../proptest_config.rs"]
mod proptest_config;

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;

use getopt::{Getopt, Opt};
use rverbs::{Context, Device, GidEntry, PortAttr};

const USAGE: &str = "\
Usage: rverbs <command> [options]

Inspect RDMA (InfiniBand/RoCE) devices through /dev/infiniband/uverbsN,
without libibverbs.

Commands:
  devices               list the RDMA devices and their node GUIDs (like ibv_devices)
  devinfo [options]     print device and port attributes (like ibv_devinfo)
  pingpong [options] [server]
                        ping-pong SENDs with a peer (like ibv_rc_pingpong;
                        --ud, --srq like ibv_ud_pingpong, ibv_srq_pingpong)
  rping -s|-c [options] RDMA READ/WRITE ping-pong connected through the RDMA
                        connection manager (like librdmacm's rping; -h for options)
  help                  print this help

Options:
  -h, --help            print this help
  -V, --version         print the version

Run 'rverbs <command> --help' for the options of a command.
";

const DEVICES_USAGE: &str = "\
Usage: rverbs devices           print the RDMA devices and their node GUIDs

The output matches rdma-core's ibv_devices.

Options:
  -h, --help             print this help
";

const DEVINFO_USAGE: &str = "\
Usage: rverbs devinfo [options] print the ca attributes

The output matches rdma-core's ibv_devinfo field for field. With -v, a GID
table (like the show_gids script) and the names of the port capability
bits follow the ibv_devinfo-compatible part.

Options:
  -d, --ib-dev=<dev>     use IB device <dev> (default all devices)
  -i, --ib-port=<port>   use port <port> of IB device (default all ports)
  -l, --list             print only the IB devices names
  -v, --verbose          print all the attributes of the IB device(s)
  -h, --help             print this help
";

/// Why a command stopped.
#[derive(Debug)]
enum Fail {
    /// Print `rverbs: <msg>` and exit 1.
    Msg(String),
    /// Errors were already reported (or stdout went away): just exit 1.
    Quiet,
}

impl From<String> for Fail {
    fn from(s: String) -> Self {
        Fail::Msg(s)
    }
}

type CliResult<T> = Result<T, Fail>;

/// The C entry point (see "Start-up" above): [`cli_main`], with a panic
/// turned into status 101 as Rust's runtime would (a panic must not
/// unwind out of an `extern "C"` function).
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(_argc: std::ffi::c_int, _argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    let code = std::panic::catch_unwind(cli_main).unwrap_or(101);
    let _ = io::stdout().flush();
    code
}

/// Runs the command line; the exit status.
#[cfg_attr(test, allow(dead_code))]
fn cli_main() -> std::ffi::c_int {
    log::init(); // RVERBS_LOG=debug|trace [RVERBS_LOG_FILE=path]
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let result = args
        .into_iter()
        .map(|a| a.into_string().map_err(|a| format!("argument is not valid UTF-8: {}", a.to_string_lossy())))
        .collect::<Result<Vec<String>, String>>()
        .map_err(Fail::Msg)
        .and_then(|args| run(&args));
    match result {
        Ok(()) => 0,
        Err(Fail::Msg(m)) => {
            let _ = io::stdout().flush();
            eprintln!("rverbs: {m}");
            1
        }
        Err(Fail::Quiet) => 1,
    }
}

fn run(args: &[String]) -> CliResult<()> {
    let Some(cmd) = args.first() else {
        return Err(Fail::Msg("missing command (try 'rverbs --help')".into()));
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "-h" | "--help" | "help" => emit(USAGE),
        "-V" | "--version" => emit(&format!("rverbs {}\n", env!("CARGO_PKG_VERSION"))),
        "devices" => cmd_devices(rest),
        "devinfo" => cmd_devinfo(rest),
        "pingpong" => pingpong::cmd_pingpong(rest),
        "rping" => rping::cmd_rping(rest),
        s if s.starts_with('-') => Err(Fail::Msg(format!("unrecognized option '{s}' (try 'rverbs --help')"))),
        s => Err(Fail::Msg(format!("unknown command '{s}' (try 'rverbs --help')"))),
    }
}

/// Writes to stdout; a closed pipe ends the program quietly.
fn emit(s: &str) -> CliResult<()> {
    let mut out = io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Fail::Quiet),
        Err(e) => Err(Fail::Msg(format!("cannot write output: {e}"))),
    }
}

/// getopt_long-style parsing of `args` for `cmd` (no operands allowed):
/// the options in command-line order as `(short name, argument)`. Errors
/// read `{cmd}: <what> (try 'rverbs {cmd} --help')`.
fn parse_options(cmd: &str, args: &[String], specs: &[Opt<char>]) -> Result<Vec<(char, Option<String>)>, String> {
    let prefix = format!("{cmd}: ");
    let hint = format!("(try 'rverbs {cmd} --help')");
    let parser = Getopt { prefix: &prefix, hint: &hint, operands: false };
    Ok(parser.parse(args, specs)?.opts)
}

const HELP_OPT: Opt<char> = Opt::new(Some('h'), "help", false, 'h');

fn cmd_devices(args: &[String]) -> CliResult<()> {
    for (opt, _) in parse_options("devices", args, &[HELP_OPT])? {
        if opt == 'h' {
            return emit(DEVICES_USAGE);
        }
    }
    let devs = rverbs::devices().map_err(|e| format!("Failed to get IB devices list: {e}"))?;
    let rows: Vec<(&str, u64)> = devs.iter().map(|d| (d.name(), d.node_guid().as_u64())).collect();
    let mut s = String::new();
    devices::write_devices(&mut s, &rows);
    emit(&s)
}

/// Parsed `devinfo` options.
#[derive(Debug, Default, PartialEq, Eq)]
struct DevinfoOpts {
    dev: Option<String>,
    port: Option<u8>,
    list: bool,
    verbose: bool,
    help: bool,
}

/// C `strtol(s, NULL, 0)` syntax (decimal, `0x` hex, leading-`0` octal), but
/// the whole string must be a number.
fn parse_c_int(s: &str) -> Option<i64> {
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

fn parse_devinfo_args(args: &[String]) -> Result<DevinfoOpts, String> {
    let specs = [
        Opt::new(Some('d'), "ib-dev", true, 'd'),
        Opt::new(Some('i'), "ib-port", true, 'i'),
        Opt::new(Some('l'), "list", false, 'l'),
        Opt::new(Some('v'), "verbose", false, 'v'),
        HELP_OPT,
    ];
    let mut o = DevinfoOpts::default();
    for (opt, val) in parse_options("devinfo", args, &specs)? {
        let val = val.unwrap_or_default();
        match opt {
            'd' => o.dev = Some(val),
            'i' => match parse_c_int(&val) {
                Some(p @ 1..=255) => o.port = Some(p as u8),
                _ => return Err(format!("devinfo: invalid port number '{val}' (expected 1..255)")),
            },
            'l' => o.list = true,
            'v' => o.verbose = true,
            'h' => o.help = true,
            _ => unreachable!("parse_options returns only listed options"),
        }
    }
    Ok(o)
}

fn cmd_devinfo(args: &[String]) -> CliResult<()> {
    let opts = parse_devinfo_args(args)?;
    if opts.help {
        return emit(DEVINFO_USAGE);
    }
    let devs = rverbs::devices().map_err(|e| format!("Failed to get IB devices list: {e}"))?;
    if opts.list {
        let names: Vec<&str> = devs.iter().map(Device::name).collect();
        let mut s = String::new();
        devinfo::write_list(&mut s, &names);
        return emit(&s);
    }
    let selected: Vec<&Device> = match &opts.dev {
        Some(name) => match devs.iter().find(|d| d.name() == name) {
            Some(d) => vec![d],
            None => return Err(Fail::Msg(format!("IB device '{name}' wasn't found"))),
        },
        None if devs.is_empty() => return Err(Fail::Msg("No IB devices found".into())),
        None => devs.iter().collect(),
    };

    let mut extras = Extras::default();
    let mut failed = false;
    for (pos, dev) in selected.iter().enumerate() {
        match show_device(dev, pos, &opts, &mut extras) {
            Ok(()) => {}
            Err(Fail::Quiet) => return Err(Fail::Quiet),
            Err(Fail::Msg(m)) => {
                let _ = io::stdout().flush();
                eprintln!("rverbs: {m}");
                failed = true;
            }
        }
    }
    if opts.verbose {
        emit(&extras.render())?;
    }
    if failed {
        Err(Fail::Quiet)
    } else {
        Ok(())
    }
}

/// What `-v` prints after the ibv_devinfo-compatible part.
#[derive(Default)]
struct Extras {
    /// `(device position, device name, entry)` for the GID table.
    gids: Vec<(usize, String, GidEntry)>,
    /// `(device name, port, attributes)` for the capability names.
    ports: Vec<(String, u8, PortAttr)>,
}

impl Extras {
    fn render(&mut self) -> String {
        self.gids.sort_by_key(|(d, _, e)| (*d, e.port, e.index));
        let rows: Vec<(&str, &GidEntry)> = self.gids.iter().map(|(_, n, e)| (n.as_str(), e)).collect();
        let mut s = String::new();
        gids::write_gid_table(&mut s, &rows);
        for (dev, port, attr) in &self.ports {
            s.push('\n');
            devinfo::write_port_cap_names(&mut s, dev, *port, attr);
        }
        s
    }
}

/// `ibv_read_sysfs_file()`: at most 255 bytes, one trailing newline removed,
/// `None` when missing or empty.
fn read_sysfs_attr(dir: &Path, name: &str) -> Option<String> {
    let mut b = std::fs::read(dir.join(name)).ok()?;
    b.truncate(255);
    if let Some(nul) = b.iter().position(|&c| c == 0) {
        b.truncate(nul);
    }
    if b.last() == Some(&b'\n') {
        b.pop();
    }
    (!b.is_empty()).then(|| String::from_utf8_lossy(&b).into_owned())
}

/// Prints one device (and its ports) as `print_hca_cap()` does, collecting
/// the `-v` extras on the way. Output is written as it is produced, so a
/// failure part-way leaves the same partial output rdma-core would.
fn show_device(dev: &Device, pos: usize, opts: &DevinfoOpts, extras: &mut Extras) -> CliResult<()> {
    let name = dev.name();
    let ctx: Context = dev.open().map_err(|e| format!("Failed to open device {name}: {e}"))?;
    let attr = ctx.query_device().map_err(|e| format!("Failed to query device props of {name}: {e}"))?;
    if let Some(p) = opts.port {
        if p > attr.phys_port_cnt {
            return Err(Fail::Msg(format!(
                "Invalid port requested for device {name} (port {p}, device has {})",
                attr.phys_port_cnt
            )));
        }
    }
    let board_id = read_sysfs_attr(dev.sysfs_path(), "board_id");
    let transport = dev.transport();
    let info = devinfo::DeviceInfo {
        name,
        transport,
        board_id: board_id.as_deref(),
        num_comp_vectors: if opts.verbose { ctx.num_comp_vectors() } else { 0 },
    };
    let mut s = String::new();
    devinfo::write_device(&mut s, &info, &attr, opts.verbose);
    emit(&s)?;

    // One GID table query for all ports; per-entry queries if it fails.
    let table = if opts.verbose { ctx.query_gid_table().ok() } else { None };
    for port in 1..=attr.phys_port_cnt {
        if opts.port.is_some_and(|p| p != port) {
            continue;
        }
        let pattr = ctx.query_port(port).map_err(|e| format!("Failed to query port {port} props of {name}: {e}"))?;
        let gids = if opts.verbose { port_gids(&ctx, table.as_deref(), port, &pattr)? } else { Vec::new() };
        let mut s = String::new();
        devinfo::write_port(&mut s, port, &pattr, transport, &gids, opts.verbose);
        emit(&s)?;
        if opts.verbose {
            extras.gids.extend(gids.into_iter().map(|e| (pos, name.to_string(), e)));
            extras.ports.push((name.to_string(), port, pattr));
        }
    }
    Ok(())
}

/// The valid GID entries of `port`.
fn port_gids(ctx: &Context, table: Option<&[GidEntry]>, port: u8, pattr: &PortAttr) -> CliResult<Vec<GidEntry>> {
    if let Some(t) = table {
        return Ok(t.iter().filter(|e| e.port == u32::from(port)).cloned().collect());
    }
    let mut v = Vec::new();
    for index in 0..pattr.gid_tbl_len {
        match ctx.query_gid(port, index) {
            Ok(Some(e)) => v.push(e),
            Ok(None) => {}
            Err(e) => {
                return Err(Fail::Msg(format!("Failed to query gid to port {port}, index {index}: {e}")));
            }
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn devinfo_options() {
        let o = parse_devinfo_args(&args(&["-d", "rxe0", "-i", "1", "-v"])).unwrap();
        assert_eq!(o, DevinfoOpts { dev: Some("rxe0".into()), port: Some(1), verbose: true, ..Default::default() });
        let o = parse_devinfo_args(&args(&["-vdrxe0", "-i0x2"])).unwrap();
        assert_eq!(o, DevinfoOpts { dev: Some("rxe0".into()), port: Some(2), verbose: true, ..Default::default() });
        let o = parse_devinfo_args(&args(&["--ib-dev=mlx5_0", "--ib-port", "010", "--list", "--verb"])).unwrap();
        assert_eq!(
            o,
            DevinfoOpts { dev: Some("mlx5_0".into()), port: Some(8), list: true, verbose: true, help: false }
        );
        let o = parse_devinfo_args(&args(&["-lh"])).unwrap();
        assert!(o.list && o.help);
        assert_eq!(parse_devinfo_args(&args(&[])).unwrap(), DevinfoOpts::default());
        assert!(parse_devinfo_args(&args(&["--"])).is_ok());
    }

    #[test]
    fn devinfo_option_errors_are_one_line() {
        for (a, want) in [
            (&["-x"][..], "devinfo: invalid option -- 'x'"),
            (&["--foo"][..], "devinfo: unrecognized option '--foo'"),
            (&["-d"][..], "devinfo: option requires an argument -- 'd'"),
            (&["--ib-dev"][..], "devinfo: option '--ib-dev' requires an argument"),
            (&["--list=3"][..], "devinfo: option '--list' doesn't allow an argument"),
            (&["--ib"][..], "devinfo: option '--ib' is ambiguous"),
            (&["-i", "0"][..], "devinfo: invalid port number '0'"),
            (&["-i", "256"][..], "devinfo: invalid port number '256'"),
            (&["-i", "-1"][..], "devinfo: invalid port number '-1'"),
            (&["-i", "1x"][..], "devinfo: invalid port number '1x'"),
            (&["-i", ""][..], "devinfo: invalid port number ''"),
            (&["rxe0"][..], "devinfo: unexpected argument 'rxe0'"),
            (&["--", "rxe0"][..], "devinfo: unexpected argument 'rxe0'"),
        ] {
            let e = parse_devinfo_args(&args(a)).unwrap_err();
            assert!(e.starts_with(want), "{a:?}: {e}");
            assert!(!e.contains('\n'));
        }
        // The whole line, hint included.
        assert_eq!(
            parse_devinfo_args(&args(&["-d"])).unwrap_err(),
            "devinfo: option requires an argument -- 'd' (try 'rverbs devinfo --help')"
        );
        assert_eq!(
            parse_devinfo_args(&args(&["-v", "--", "a", "b"])).unwrap_err(),
            "devinfo: unexpected argument 'a' (try 'rverbs devinfo --help')"
        );
        assert!(matches!(
            cmd_devices(&args(&["extra"])),
            Err(Fail::Msg(m)) if m == "devices: unexpected argument 'extra' (try 'rverbs devices --help')"
        ));
    }

    #[test]
    fn c_int_syntax() {
        assert_eq!(parse_c_int("1"), Some(1));
        assert_eq!(parse_c_int(" 12 "), Some(12));
        assert_eq!(parse_c_int("0x1f"), Some(31));
        assert_eq!(parse_c_int("0X1F"), Some(31));
        assert_eq!(parse_c_int("017"), Some(15));
        assert_eq!(parse_c_int("0"), Some(0));
        assert_eq!(parse_c_int("-3"), Some(-3));
        assert_eq!(parse_c_int("+3"), Some(3));
        assert_eq!(parse_c_int("08"), None);
        assert_eq!(parse_c_int("--3"), None);
        assert_eq!(parse_c_int("0x"), None);
        assert_eq!(parse_c_int("abc"), None);
    }

    #[test]
    fn top_level_errors() {
        assert!(matches!(run(&args(&[])), Err(Fail::Msg(m)) if m.contains("missing command")));
        assert!(matches!(run(&args(&["frob"])), Err(Fail::Msg(m)) if m.starts_with("unknown command 'frob'")));
        assert!(matches!(run(&args(&["--frob"])), Err(Fail::Msg(m)) if m.starts_with("unrecognized option '--frob'")));
        assert!(
            matches!(run(&args(&["devices", "-x"])), Err(Fail::Msg(m)) if m.starts_with("devices: invalid option -- 'x'"))
        );
    }

    #[test]
    fn sysfs_attr_reading() {
        let dir = std::env::temp_dir().join(format!("rverbs-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("board_id"), "MT_0000000838\n").unwrap();
        std::fs::write(dir.join("empty"), "\n").unwrap();
        assert_eq!(read_sysfs_attr(&dir, "board_id").as_deref(), Some("MT_0000000838"));
        assert_eq!(read_sysfs_attr(&dir, "empty"), None);
        assert_eq!(read_sysfs_attr(&dir, "missing"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
