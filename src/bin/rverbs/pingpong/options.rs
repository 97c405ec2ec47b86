//! The command line: rdma-core's options (`getopt_long` spelling and
//! defaults), parsed into [`Opts`].

use std::time::Duration;

use rverbs::Mtu;

use super::super::getopt::{Getopt, Opt, Parsed};
use super::super::parse_c_int;
use super::MAX_QP;

pub const USAGE: &str = "\
Usage:
  rverbs pingpong [options]              start a server and wait for connection
  rverbs pingpong [options] <host>       connect to server at <host>

Ping-pong SENDs between two QPs, wire-compatible with rdma-core's
ibv_rc_pingpong (default), ibv_ud_pingpong (--ud) and ibv_srq_pingpong
(--srq): either side may be rdma-core's program.

Options:
  -p, --port=<port>      listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default 1)
  -s, --size=<size>      size of message to exchange (default 4096; --ud 1024)
  -m, --mtu=<size>       path MTU (default 1024; not with --ud)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges (default 1000)
  -l, --sl=<sl>          service level value (default 0)
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index (default: none on
                         InfiniBand; on RoCE the port's IPv4-mapped
                         RoCE v2 GID, see 'rverbs devinfo -v')
  -c, --chk              validate received buffer
      --ud               UD QP, like ibv_ud_pingpong
      --srq              RC QPs sharing one SRQ, like ibv_srq_pingpong
  -q, --num-qp=<num>     number of QPs to use with --srq (default 16)
      --timeout=<sec>    give up when the peer does not answer or no
                         completion arrives for <sec> seconds (default 10;
                         a server waits for its client without limit)
  -N, --new_send         accepted for compatibility (one post path here)
  -h, --help             print this help
";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Rc,
    Ud,
    Srq,
}

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opts {
    pub mode: Mode,
    pub tcp_port: u16,
    pub ib_dev: Option<String>,
    pub ib_port: u8,
    pub size: u32,
    pub mtu: Mtu,
    pub rx_depth: u32,
    pub iters: u32,
    pub sl: u8,
    pub events: bool,
    pub gid_idx: Option<u8>,
    pub validate: bool,
    pub num_qp: u32,
    pub timeout: Duration,
    pub server: Option<String>,
    pub help: bool,
}

/// Option names (the long ones without a short form get a key of their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Port,
    Dev,
    IbPort,
    Size,
    Mtu,
    RxDepth,
    Iters,
    Sl,
    Events,
    Gid,
    Chk,
    NumQp,
    Ud,
    Srq,
    Timeout,
    NewSend,
    Help,
    /// rdma-core options rverbs does not do: the text says what they are.
    Unsupported(&'static str),
}

const SPECS: &[Opt<Key>] = &[
    Opt::new(Some('p'), "port", true, Key::Port),
    Opt::new(Some('d'), "ib-dev", true, Key::Dev),
    Opt::new(Some('i'), "ib-port", true, Key::IbPort),
    Opt::new(Some('s'), "size", true, Key::Size),
    Opt::new(Some('m'), "mtu", true, Key::Mtu),
    Opt::new(Some('r'), "rx-depth", true, Key::RxDepth),
    Opt::new(Some('n'), "iters", true, Key::Iters),
    Opt::new(Some('l'), "sl", true, Key::Sl),
    Opt::new(Some('e'), "events", false, Key::Events),
    Opt::new(Some('g'), "gid-idx", true, Key::Gid),
    Opt::new(Some('c'), "chk", false, Key::Chk),
    Opt::new(Some('q'), "num-qp", true, Key::NumQp),
    Opt::new(None, "ud", false, Key::Ud),
    Opt::new(None, "srq", false, Key::Srq),
    Opt::new(None, "timeout", true, Key::Timeout),
    Opt::new(Some('N'), "new_send", false, Key::NewSend),
    Opt::new(Some('h'), "help", false, Key::Help),
    Opt::new(Some('o'), "odp", false, Key::Unsupported("-o/--odp (on-demand paging)")),
    Opt::new(Some('O'), "iodp", false, Key::Unsupported("-O/--iodp (implicit on-demand paging)")),
    Opt::new(Some('P'), "prefetch", false, Key::Unsupported("-P/--prefetch (on-demand paging)")),
    Opt::new(Some('t'), "ts", false, Key::Unsupported("-t/--ts (completion timestamps)")),
    Opt::new(Some('j'), "dm", false, Key::Unsupported("-j/--dm (device memory)")),
];

/// How pingpong parses: operands allowed (the server's host name), no
/// prefix (`cmd_pingpong` adds `rverbs pingpong: `), the hint after each error.
const GETOPT: Getopt = Getopt { prefix: "", hint: "(try 'rverbs pingpong --help')", operands: true };

/// A C-syntax integer (`strtol(s, NULL, 0)`, but all of `s`) in `range`.
fn int_in(s: &str, range: std::ops::RangeInclusive<i64>, what: &str) -> Result<i64, String> {
    match parse_c_int(s) {
        Some(v) if range.contains(&v) => Ok(v),
        _ => Err(format!("invalid {what} '{s}' (expected {}..{})", range.start(), range.end())),
    }
}

pub fn parse_args(args: &[String]) -> Result<Opts, String> {
    let Parsed { opts: found, operands } = GETOPT.parse(args, SPECS)?;
    let mut o = Opts {
        mode: Mode::Rc,
        tcp_port: 18515,
        ib_dev: None,
        ib_port: 1,
        size: 0,
        mtu: Mtu::Mtu1024,
        rx_depth: 500,
        iters: 1000,
        sl: 0,
        events: false,
        gid_idx: None,
        validate: false,
        num_qp: 16,
        timeout: Duration::from_secs(10),
        server: None,
        help: false,
    };
    let (mut size, mut mtu_given, mut num_qp_given, mut ud, mut srq) = (None, false, false, false, false);
    for (key, v) in found {
        let v = v.unwrap_or_default();
        match key {
            Key::Port => o.tcp_port = int_in(&v, 1..=65535, "port")? as u16,
            Key::Dev if v.is_empty() => return Err("invalid IB device name '' (empty)".into()),
            Key::Dev => o.ib_dev = Some(v),
            Key::IbPort => o.ib_port = int_in(&v, 1..=255, "IB port number")? as u8,
            Key::Size => size = Some(int_in(&v, 1..=i64::from(i32::MAX), "message size")? as u32),
            Key::Mtu => {
                o.mtu = parse_c_int(&v)
                    .and_then(|b| u32::try_from(b).ok())
                    .and_then(Mtu::from_bytes)
                    .ok_or_else(|| format!("invalid MTU '{v}' (expected 256, 512, 1024, 2048 or 4096)"))?;
                mtu_given = true;
            }
            Key::RxDepth => o.rx_depth = int_in(&v, 1..=i64::from(i32::MAX), "receive depth")? as u32,
            Key::Iters => o.iters = int_in(&v, 1..=i64::from(i32::MAX), "iteration count")? as u32,
            Key::Sl => o.sl = int_in(&v, 0..=15, "service level")? as u8,
            Key::Events => o.events = true,
            Key::Gid => {
                // Negative means "none", as in rdma-core (-1 is its default).
                let g = int_in(&v, i64::from(i32::MIN)..=255, "GID index")?;
                o.gid_idx = u8::try_from(g).ok();
            }
            Key::Chk => o.validate = true,
            Key::NumQp => {
                o.num_qp = int_in(&v, 1..=(MAX_QP as i64 - 1), "number of QPs")? as u32;
                num_qp_given = true;
            }
            Key::Ud => ud = true,
            Key::Srq => srq = true,
            Key::Timeout => o.timeout = Duration::from_secs(int_in(&v, 1..=86400, "timeout")? as u64),
            Key::NewSend => {}
            Key::Help => o.help = true,
            Key::Unsupported(what) => return Err(format!("{what} is not supported by rverbs")),
        }
    }
    if o.help {
        return Ok(o);
    }
    match operands.as_slice() {
        [] => {}
        [host] => o.server = Some(host.clone()),
        [_, extra, ..] => return Err(GETOPT.error(&format!("unexpected argument '{extra}'"))),
    }
    o.mode = match (ud, srq) {
        (true, true) => return Err("--ud and --srq cannot be combined".into()),
        (true, false) => Mode::Ud,
        (false, true) => Mode::Srq,
        (false, false) => Mode::Rc,
    };
    if o.mode == Mode::Ud && mtu_given {
        return Err("-m/--mtu does not apply to --ud (a UD message must fit in the port's active MTU)".into());
    }
    if o.mode != Mode::Srq && num_qp_given {
        return Err("-q/--num-qp needs --srq".into());
    }
    // ibv_ud_pingpong's usage text says 2048, but its code (and so its wire
    // behaviour) uses 1024; the receive buffers must match, so follow the code.
    o.size = size.unwrap_or(if o.mode == Mode::Ud { 1024 } else { 4096 });
    if o.mode == Mode::Srq && o.num_qp > o.rx_depth {
        return Err(format!(
            "rx_depth {} is too small for {} QPs -- must have at least one receive per QP",
            o.rx_depth, o.num_qp
        ));
    }
    Ok(o)
}

/// `s` as owned arguments: a command line for the tests.
#[cfg(test)]
pub(super) fn args(s: &[&str]) -> Vec<String> {
    s.iter().map(|a| a.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_rdma_core() {
        let o = parse_args(&[]).unwrap();
        assert_eq!(
            (o.mode, o.tcp_port, o.ib_port, o.size, o.mtu, o.rx_depth, o.iters, o.sl, o.events, o.gid_idx),
            (Mode::Rc, 18515, 1, 4096, Mtu::Mtu1024, 500, 1000, 0, false, None)
        );
        assert_eq!((o.validate, o.server, o.timeout), (false, None, Duration::from_secs(10)));
        assert_eq!(parse_args(&args(&["--ud"])).unwrap().size, 1024);
        let s = parse_args(&args(&["--srq"])).unwrap();
        assert_eq!((s.mode, s.size, s.num_qp), (Mode::Srq, 4096, 16));
    }

    #[test]
    fn options_like_getopt_long() {
        let o = parse_args(&args(&[
            "-p",
            "0x4000",
            "-drxe0",
            "-i",
            "1",
            "-s",
            "64",
            "-m",
            "2048",
            "-r",
            "10",
            "-n",
            "50",
            "-l",
            "3",
            "-ec",
            "-g",
            "1",
            "host.example",
            "--timeout=3",
        ]))
        .unwrap();
        assert_eq!(o.tcp_port, 0x4000);
        assert_eq!(o.ib_dev.as_deref(), Some("rxe0"));
        assert_eq!((o.size, o.mtu, o.rx_depth, o.iters, o.sl), (64, Mtu::Mtu2048, 10, 50, 3));
        assert!(o.events && o.validate);
        assert_eq!(o.gid_idx, Some(1));
        assert_eq!(o.server.as_deref(), Some("host.example"));
        assert_eq!(o.timeout, Duration::from_secs(3));
        let o = parse_args(&args(&["10.0.0.1", "--ib-dev", "mlx5_0", "--iters=7", "--gid", "-1", "-N"])).unwrap();
        assert_eq!(
            (o.server.as_deref(), o.ib_dev.as_deref(), o.iters, o.gid_idx),
            (Some("10.0.0.1"), Some("mlx5_0"), 7, None)
        );
        let o = parse_args(&args(&["--srq", "-q", "4", "--", "srv"])).unwrap();
        assert_eq!((o.num_qp, o.server.as_deref()), (4, Some("srv")));
        assert!(parse_args(&args(&["-h"])).unwrap().help);
    }

    #[test]
    fn bad_options_are_one_line_errors() {
        for (a, want) in [
            (&["-x"][..], "invalid option -- 'x'"),
            (&["--frob"][..], "unrecognized option '--frob'"),
            (&["--s"][..], "option '--s' is ambiguous"),
            (&["-p"][..], "option requires an argument -- 'p'"),
            (&["-p", "70000"][..], "invalid port '70000'"),
            (&["-p", "12x"][..], "invalid port '12x'"),
            (&["-m", "1000"][..], "invalid MTU '1000'"),
            (&["-i", "0"][..], "invalid IB port number '0'"),
            (&["-s", "0"][..], "invalid message size '0'"),
            (&["-n", "0"][..], "invalid iteration count '0'"),
            (&["-g", "256"][..], "invalid GID index '256'"),
            (&["-l", "16"][..], "invalid service level '16'"),
            (&["a", "b"][..], "unexpected argument 'b'"),
            (&["--ud", "--srq"][..], "--ud and --srq cannot be combined"),
            (&["--ud", "-m", "1024"][..], "-m/--mtu does not apply to --ud"),
            (&["-q", "2"][..], "-q/--num-qp needs --srq"),
            (&["--srq", "-q", "256"][..], "invalid number of QPs '256'"),
            (&["--srq", "-r", "4"][..], "rx_depth 4 is too small for 16 QPs"),
            (&["-t"][..], "-t/--ts (completion timestamps) is not supported"),
            (&["--events=1"][..], "option '--events' doesn't allow an argument"),
            (&["--timeout", "0"][..], "invalid timeout '0'"),
        ] {
            let e = parse_args(&args(a)).unwrap_err();
            assert!(e.starts_with(want), "{a:?}: {e}");
            assert!(!e.contains('\n'));
        }
        // The whole lines: no command prefix (cmd_pingpong adds it), the hint after.
        assert_eq!(
            parse_args(&args(&["-p"])).unwrap_err(),
            "option requires an argument -- 'p' (try 'rverbs pingpong --help')"
        );
        assert_eq!(
            parse_args(&args(&["a", "--", "b"])).unwrap_err(),
            "unexpected argument 'b' (try 'rverbs pingpong --help')"
        );
        assert_eq!(
            parse_args(&args(&["-m", "-1024"])).unwrap_err(),
            "invalid MTU '-1024' (expected 256, 512, 1024, 2048 or 4096)"
        );
    }
}
