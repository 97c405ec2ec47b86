//! The option parser every command shares: GNU `getopt_long` style.
//!
//! * short options cluster (`-lv`), and one that takes an argument takes
//!   the rest of its word or else the next word (`-drxe0`, `-d rxe0`);
//! * long options take `--name=VALUE` or `--name VALUE`, and any
//!   unambiguous prefix of a long name does (`--verb`); an exact name wins
//!   over longer names it is a prefix of;
//! * `--` ends the options;
//! * operands (arguments that are not options, `-` included) are collected
//!   in order from anywhere on the line (glibc's permutation) when the
//!   command takes them, and refused at once, as `unexpected argument`,
//!   when it does not.
//!
//! Errors are one line: glibc's wording, with the command's prefix before
//! it and its hint after it (see [`Getopt`]).

/// One option a command accepts; `key` is what [`Getopt::parse`] reports
/// for it.
#[derive(Clone, Copy, Debug)]
pub struct Opt<K> {
    /// The short name (`'d'` for `-d`), if it has one.
    pub short: Option<char>,
    /// The long name without its dashes (`"ib-dev"` for `--ib-dev`).
    pub long: &'static str,
    /// Whether the option takes an argument (required, never optional).
    pub has_arg: bool,
    /// What the option is reported as.
    pub key: K,
}

impl<K> Opt<K> {
    /// An option with an optional short name, a long name, whether it takes
    /// an argument and its key.
    pub const fn new(short: Option<char>, long: &'static str, has_arg: bool, key: K) -> Self {
        Opt { short, long, has_arg, key }
    }
}

/// How one command parses: the text around its error messages and whether
/// it takes operands. An error reads `{prefix}{what} {hint}`.
#[derive(Clone, Copy, Debug)]
pub struct Getopt<'a> {
    /// Before each message: `"devinfo: "`, or `""` where the caller adds
    /// its own prefix.
    pub prefix: &'a str,
    /// After each message, after a space: `"(try 'rverbs devinfo --help')"`.
    pub hint: &'a str,
    /// Whether operands are collected (else the first is an error).
    pub operands: bool,
}

/// What [`Getopt::parse`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed<K> {
    /// The options in command-line order, each with its argument (`None`
    /// for an option that takes none).
    pub opts: Vec<(K, Option<String>)>,
    /// The operands in command-line order (always empty when the command
    /// takes none).
    pub operands: Vec<String>,
}

impl Getopt<'_> {
    /// `what` as this command words an error: `{prefix}{what} {hint}`.
    pub fn error(&self, what: &str) -> String {
        format!("{}{what} {}", self.prefix, self.hint)
    }

    /// An operand: kept, or refused when the command takes none.
    fn operand(&self, arg: &str, operands: &mut Vec<String>) -> Result<(), String> {
        if !self.operands {
            return Err(self.error(&format!("unexpected argument '{arg}'")));
        }
        operands.push(arg.to_string());
        Ok(())
    }

    /// Parses `args` (the words after the command name) against `specs`.
    pub fn parse<K: Copy>(&self, args: &[String], specs: &[Opt<K>]) -> Result<Parsed<K>, String> {
        let mut opts = Vec::new();
        let mut operands = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            if arg == "--" {
                for rest in &args[i..] {
                    self.operand(rest, &mut operands)?;
                }
                break;
            }
            if let Some(body) = arg.strip_prefix("--") {
                let (name, inline) = match body.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (body, None),
                };
                let spec = match specs.iter().find(|s| s.long == name) {
                    Some(s) => s,
                    None => {
                        let matches: Vec<&Opt<K>> = specs.iter().filter(|s| s.long.starts_with(name)).collect();
                        match matches.as_slice() {
                            [one] if !name.is_empty() => *one,
                            [] | [_] => return Err(self.error(&format!("unrecognized option '--{name}'"))),
                            _ => return Err(self.error(&format!("option '--{name}' is ambiguous"))),
                        }
                    }
                };
                let value = match (spec.has_arg, inline) {
                    (true, Some(v)) => Some(v),
                    (true, None) => {
                        let Some(v) = args.get(i) else {
                            return Err(self.error(&format!("option '--{}' requires an argument", spec.long)));
                        };
                        i += 1;
                        Some(v.clone())
                    }
                    (false, Some(_)) => {
                        return Err(self.error(&format!("option '--{}' doesn't allow an argument", spec.long)))
                    }
                    (false, None) => None,
                };
                opts.push((spec.key, value));
            } else if arg.len() > 1 && arg.starts_with('-') {
                for (pos, c) in arg[1..].char_indices() {
                    let Some(spec) = specs.iter().find(|s| s.short == Some(c)) else {
                        return Err(self.error(&format!("invalid option -- '{c}'")));
                    };
                    if spec.has_arg {
                        let attached = &arg[1 + pos + c.len_utf8()..];
                        let value = if !attached.is_empty() {
                            attached.to_string()
                        } else if let Some(v) = args.get(i) {
                            i += 1;
                            v.clone()
                        } else {
                            return Err(self.error(&format!("option requires an argument -- '{c}'")));
                        };
                        opts.push((spec.key, Some(value)));
                        break;
                    }
                    opts.push((spec.key, None));
                }
            } else {
                self.operand(arg, &mut operands)?;
            }
        }
        Ok(Parsed { opts, operands })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    const SPECS: &[Opt<char>] = &[
        Opt::new(Some('d'), "ib-dev", true, 'd'),
        Opt::new(Some('i'), "ib-port", true, 'i'),
        Opt::new(Some('v'), "verbose", false, 'v'),
        Opt::new(Some('s'), "size", true, 's'),
        Opt::new(None, "sl", true, 'L'),
        Opt::new(None, "slow", false, 'W'),
        Opt::new(Some('é'), "accent", true, 'e'),
    ];

    const STRICT: Getopt = Getopt { prefix: "cmd: ", hint: "(try 'rverbs cmd --help')", operands: false };
    const LOOSE: Getopt = Getopt { prefix: "", hint: "(see --help)", operands: true };

    fn opts(g: &Getopt, a: &[&str]) -> Vec<(char, Option<String>)> {
        g.parse(&args(a), SPECS).unwrap().opts
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn short_options_cluster_and_take_arguments() {
        assert_eq!(opts(&STRICT, &["-v"]), [('v', None)]);
        assert_eq!(opts(&STRICT, &["-vdrxe0"]), [('v', None), ('d', some("rxe0"))]);
        assert_eq!(opts(&STRICT, &["-vd", "rxe0", "-v"]), [('v', None), ('d', some("rxe0")), ('v', None)]);
        // The next word is the argument even when it looks like an option.
        assert_eq!(opts(&STRICT, &["-d", "-v"]), [('d', some("-v"))]);
        assert_eq!(opts(&STRICT, &["-d", ""]), [('d', some(""))]);
        assert_eq!(opts(&STRICT, &["-éx", "-é", "y"]), [('e', some("x")), ('e', some("y"))]);
    }

    #[test]
    fn long_options_take_arguments_and_prefixes() {
        assert_eq!(opts(&STRICT, &["--ib-dev=a=b", "--ib-port", "2"]), [('d', some("a=b")), ('i', some("2"))]);
        assert_eq!(opts(&STRICT, &["--ib-dev="]), [('d', some(""))]);
        assert_eq!(opts(&STRICT, &["--verb", "--ib-d", "x"]), [('v', None), ('d', some("x"))]);
        // An exact name wins over the longer name it starts.
        assert_eq!(opts(&STRICT, &["--sl", "3", "--slo", "--si=9"]), [('L', some("3")), ('W', None), ('s', some("9"))]);
        assert_eq!(opts(&STRICT, &["--accent", "é"]), [('e', some("é"))]);
    }

    #[test]
    fn operands_and_double_dash() {
        let p = LOOSE.parse(&args(&["a", "-v", "-", "--size", "1", "b", "--", "-d", "--verbose"]), SPECS).unwrap();
        assert_eq!(p.opts, [('v', None), ('s', some("1"))]);
        assert_eq!(p.operands, ["a", "-", "b", "-d", "--verbose"]);
        let p = STRICT.parse(&args(&["-v", "--"]), SPECS).unwrap();
        assert_eq!(p, Parsed { opts: vec![('v', None)], operands: vec![] });
        assert_eq!(STRICT.parse(&args(&[]), SPECS).unwrap(), Parsed { opts: vec![], operands: vec![] });
    }

    #[test]
    fn errors_have_prefix_and_hint() {
        for (g, a, want) in [
            (&STRICT, &["-x"][..], "cmd: invalid option -- 'x' (try 'rverbs cmd --help')"),
            (&STRICT, &["-vx"][..], "cmd: invalid option -- 'x' (try 'rverbs cmd --help')"),
            (&STRICT, &["-v", "-d"][..], "cmd: option requires an argument -- 'd' (try 'rverbs cmd --help')"),
            (&STRICT, &["--frob"][..], "cmd: unrecognized option '--frob' (try 'rverbs cmd --help')"),
            (&STRICT, &["--frob=1"][..], "cmd: unrecognized option '--frob' (try 'rverbs cmd --help')"),
            (&STRICT, &["--=1"][..], "cmd: option '--' is ambiguous (try 'rverbs cmd --help')"),
            (&STRICT, &["--ib"][..], "cmd: option '--ib' is ambiguous (try 'rverbs cmd --help')"),
            (&STRICT, &["--s"][..], "cmd: option '--s' is ambiguous (try 'rverbs cmd --help')"),
            (&STRICT, &["--ib-p"][..], "cmd: option '--ib-port' requires an argument (try 'rverbs cmd --help')"),
            (&STRICT, &["--verb=1"][..], "cmd: option '--verbose' doesn't allow an argument (try 'rverbs cmd --help')"),
            (&STRICT, &["x", "-q"][..], "cmd: unexpected argument 'x' (try 'rverbs cmd --help')"),
            (&STRICT, &["-"][..], "cmd: unexpected argument '-' (try 'rverbs cmd --help')"),
            (&STRICT, &["--", "x", "y"][..], "cmd: unexpected argument 'x' (try 'rverbs cmd --help')"),
            (&LOOSE, &["x", "-q"][..], "invalid option -- 'q' (see --help)"),
            (&LOOSE, &["--size"][..], "option '--size' requires an argument (see --help)"),
        ] {
            assert_eq!(g.parse(&args(a), SPECS).unwrap_err(), want, "{a:?}");
        }
        assert_eq!(LOOSE.error("unexpected argument 'b'"), "unexpected argument 'b' (see --help)");
    }
}
