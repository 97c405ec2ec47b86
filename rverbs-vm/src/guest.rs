//! What runs inside the guest: the `/init` script (busybox sh) and the
//! payload script that tells it what to run. Both print `@@RVERBS ...`
//! marker lines on the serial console; [`crate::console`] reads them back.

use crate::util::shell_quote;

/// Prefix of every marker line.
pub const MARK: &str = "@@RVERBS";

/// IPv4 address of the rxe0 netdev (`v0`, one end of a veth pair).
pub const GUEST_IP: &str = "192.168.77.1/24";

/// IPv4 address of the siw0 netdev (`v2`, one end of a second veth
/// pair): siw gets its own netdev and subnet, as the kernel picks an
/// iWARP device by the netdev of the address (cma.c `cma_validate_port`).
pub const SIW_IP: &str = "192.168.79.1/24";

/// Payload variable that asks `/init` for siw0 next to rxe0 (see
/// [`with_siw`]); the kernel's module tree must have siw
/// ([`crate::siw_module::with_siw`]).
pub const SIW_VAR: &str = "RVERBS_SIW";

/// A provider a guest brings a device up for: rxe0 (soft-RoCE) always,
/// siw0 (soft-iWARP) when asked ([`with_siw`]). A test run on one names
/// its device in `RVERBS_TEST_DEVICE` and the provider in
/// `RVERBS_PROVIDER` ([`Provider::env`]): the contract with the tests
/// under `tests/` and `capi/tests/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Rxe,
    Siw,
}

impl Provider {
    /// Every provider, in the order test runs take them.
    pub const ALL: [Provider; 2] = [Provider::Rxe, Provider::Siw];

    /// `rxe`, `siw`: the word of `--provider`.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Rxe => "rxe",
            Provider::Siw => "siw",
        }
    }

    /// The device `/init` creates for it.
    pub fn device(self) -> &'static str {
        match self {
            Provider::Rxe => "rxe0",
            Provider::Siw => "siw0",
        }
    }

    /// The guest needs siw.ko ([`crate::siw_module::with_siw`]) and a
    /// payload through [`with_siw`].
    pub fn needs_siw(self) -> bool {
        self == Provider::Siw
    }

    /// The environment of a test run on it.
    pub fn env(self) -> [(&'static str, &'static str); 2] {
        [("RVERBS_TEST_DEVICE", self.device()), ("RVERBS_PROVIDER", self.name())]
    }

    /// `--provider`'s value: one name, or a comma-separated list.
    ///
    /// # Errors
    /// An unknown name, or none.
    pub fn parse_list(v: &str) -> Result<Vec<Provider>, String> {
        let mut out = Vec::new();
        for w in v.split(',').map(str::trim) {
            let p = Provider::ALL
                .into_iter()
                .find(|p| p.name() == w)
                .ok_or_else(|| format!("--provider {w:?}: not a provider (rxe, siw)"))?;
            if !out.contains(&p) {
                out.push(p);
            }
        }
        Ok(out)
    }
}

/// Modules `/init` loads: soft-RoCE, the veth pair it sits on, and the
/// RDMA connection manager's userspace interface (`/dev/infiniband/rdma_cm`).
pub const LOAD_MODULES: &str = "rdma_rxe veth rdma_ucm";

/// Loaded after [`LOAD_MODULES`] when the kernel has it: rxe computes its
/// ICRC with the crypto API's "crc32", which Debian builds as a module
/// (`crc32_generic`) that nothing in modules.dep pulls in: without it `rdma
/// link add` fails with ENOENT. Kernels whose rxe does not need it may not
/// have it at all.
pub const CRC32_MODULE: &str = "crc32_generic";

/// Modules `/init` also loads in two-host runs: the virtio NIC (`virtio_pci`
/// is built into 6.12 but a module in 6.1).
pub const NET_MODULES: &str = "virtio_pci virtio_net";

/// Guest path of the project's CLI.
pub const RVERBS_BIN: &str = "/usr/local/bin/rverbs";

/// Guest directory holding the integration-test binaries.
pub const TESTS_DIR: &str = "/tests";

/// Guest directory holding the workspace's example binaries.
pub const EXAMPLES_DIR: &str = "/examples";

/// The serial port a program's stderr goes to when the payload has its own
/// port for it ([`crate::runner::Payload::separate_stderr`]).
pub const STDERR_TTY: &str = "/dev/ttyS2";

/// Guest path of the payload script that `/init` sources.
pub const PAYLOAD: &str = "etc/rverbs/payload.sh";

/// Guest path of this boot's marker nonce: `/init` reads it into a shell
/// variable that is never exported and deletes the file before anything
/// else runs, then prints every marker as `@@RVERBS:<nonce> …`, so a
/// program under test cannot print a verdict the host would believe
/// ([`crate::console::GuestReport::with_nonce`]).
pub const NONCE_FILE: &str = "etc/rverbs/nonce";

/// The `/init` script: mounts, loads rxe, brings up `rxe0` on a veth
/// pair, waits for port 1 to be ACTIVE, runs the payload with markers,
/// prints the dmesg tail on failure, powers off.
///
/// busybox sh runs its own applets before anything in `$PATH` (its `ip`
/// cannot make veth pairs, its `modprobe` cannot read `.ko.xz`), so
/// iproute2 and kmod are always called by full path.
pub fn init_script() -> String {
    let siw_modules = crate::siw_module::GUEST_MODULES.join(" ");
    format!(
        r#"#!/bin/sh
# Generated by rverbs-vm (rverbs-vm/src/guest.rs).
export PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin
export HOME=/root
RVERBS_NONCE=$(cat /{NONCE_FILE} 2>/dev/null)
rm -f /{NONCE_FILE}
mark() {{ echo "{MARK}${{RVERBS_NONCE:+:$RVERBS_NONCE}} $*"; }}
dmesg_tail() {{ mark dmesg-begin; dmesg | tail -n 80; mark dmesg-end; }}
die() {{ mark setup-failed "$*"; dmesg_tail; mark done; poweroff -f; sleep 10; }}
# port_active DEV: waits up to 30 s for DEV's port 1 to be ACTIVE.
port_active() {{
    state=/sys/class/infiniband/$1/ports/1/state
    i=0
    until grep -q ACTIVE $state 2>/dev/null; do
        i=$((i + 1))
        [ $i -le 300 ] || die "$1 port 1 not ACTIVE after 30 s: $(cat $state 2>&1)"
        usleep 100000
    done
}}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# A fresh tmpfs on /tmp, unless the payload put files there (a program or
# --copy under the host's /tmp keeps its path in the guest): the initramfs
# root is writable, so that /tmp serves as it is.
if [ -z "$(ls -A /tmp 2>/dev/null)" ]; then
    mount -t tmpfs tmpfs /tmp
else
    chmod 1777 /tmp
fi
# The kernel keeps ttyS0; with rverbs.console=ttyS1 on the command line (see
# qemu.rs) our output goes there, so kernel messages cannot split a line.
for word in $(cat /proc/cmdline); do
    case $word in rverbs.console=*) exec </dev/null >"/dev/${{word#rverbs.console=}}" 2>&1 ;; esac
done
mark uname "$(uname -r)"

# The payload only sets variables and defines rverbs_cmd (or
# rverbs_tests); read it first because RVERBS_NETDEV (two-host runs) and
# {SIW_VAR} change the network setup.
RVERBS_MODE=none
RVERBS_NETDEV=
{SIW_VAR}=
rverbs_examples() {{ :; }}
rverbs_tests() {{ run_tests "" "$RVERBS_TESTS"; }}
. /{PAYLOAD}

/usr/sbin/modprobe -a {LOAD_MODULES} || die "modprobe {LOAD_MODULES} failed"
if /usr/sbin/modprobe -n -q {CRC32_MODULE}; then
    /usr/sbin/modprobe {CRC32_MODULE} || die "modprobe {CRC32_MODULE} failed"
fi
/usr/bin/ip link set lo up
if [ -n "$RVERBS_NETDEV" ]; then
    # Two hosts: rxe0 on the virtio NIC that QEMU's stream network joins
    # to the other VM (RVERBS_IP is this VM's address in the shared /24).
    /usr/sbin/modprobe -a {NET_MODULES} || die "modprobe {NET_MODULES} failed"
    i=0
    until [ -e /sys/class/net/$RVERBS_NETDEV ]; do
        i=$((i + 1))
        [ $i -le 100 ] || die "no network interface $RVERBS_NETDEV (virtio-net) after 10 s"
        usleep 100000
    done
    /usr/bin/ip addr add $RVERBS_IP dev $RVERBS_NETDEV || die "cannot set the address of $RVERBS_NETDEV"
    /usr/bin/ip link set $RVERBS_NETDEV up || die "cannot bring $RVERBS_NETDEV up"
    /usr/bin/rdma link add rxe0 type rxe netdev $RVERBS_NETDEV || die "rdma link add rxe0 (on $RVERBS_NETDEV) failed"
else
/usr/bin/ip link add v0 type veth peer name v1 || die "cannot create veth pair v0/v1"
/usr/bin/ip addr add {GUEST_IP} dev v0 || die "cannot set the address of v0"
/usr/bin/ip link set v0 up && /usr/bin/ip link set v1 up || die "cannot bring v0/v1 up"
/usr/bin/rdma link add rxe0 type rxe netdev v0 || die "rdma link add rxe0 failed"
fi
port_active rxe0
[ -e /dev/infiniband/uverbs0 ] || die "rxe0 is ACTIVE but /dev/infiniband/uverbs0 is missing"
[ -e /dev/infiniband/rdma_cm ] || die "rdma_ucm is loaded but /dev/infiniband/rdma_cm is missing"
if [ -n "${SIW_VAR}" ]; then
    # siw0 (soft-iWARP) on its own veth pair and subnet, after rxe0 so
    # that rxe0 keeps uverbs0.
    /usr/sbin/modprobe -a {siw_modules} || die "modprobe {siw_modules} failed (the harness adds siw.ko: --siw)"
    /usr/bin/ip link add v2 type veth peer name v3 || die "cannot create veth pair v2/v3"
    /usr/bin/ip addr add {SIW_IP} dev v2 || die "cannot set the address of v2"
    /usr/bin/ip link set v2 up && /usr/bin/ip link set v3 up || die "cannot bring v2/v3 up"
    /usr/bin/rdma link add siw0 type siw netdev v2 || die "rdma link add siw0 failed"
    port_active siw0
fi
mark ready

export RVERBS_REQUIRE_DEVICE=1 RVERBS_BIN={RVERBS_BIN} RUST_BACKTRACE=1
failed=0
cd /tmp
run_example() {{
    name=$1
    shift
    mark begin "example:$name"
    "{EXAMPLES_DIR}/$name" "$@"
    rc=$?
    mark end "example:$name" $rc
    [ $rc = 0 ] || failed=1
}}
# run_tests PREFIX 'NAMES' [VAR=VALUE...]: each binary of {TESTS_DIR} with
# the variables exported, as the run PREFIXNAME (a tier per provider).
run_tests() {{
    prefix=$1
    names=$2
    shift 2
    for t in $names; do
        mark begin "$prefix$t"
        ( for kv in "$@"; do export "$kv"; done; exec "{TESTS_DIR}/$t" --test-threads=1 )
        rc=$?
        mark end "$prefix$t" $rc
        [ $rc = 0 ] || failed=1
    done
}}
case "$RVERBS_MODE" in
test)
    rverbs_tests
    rverbs_examples ;;
cmd)
    mark begin cmd
    ( rverbs_cmd )
    rc=$?
    mark end cmd $rc
    [ $rc = 0 ] || failed=1 ;;
*)
    die "unknown payload mode $RVERBS_MODE" ;;
esac
[ $failed = 0 ] || dmesg_tail
mark done
poweroff -f
sleep 10
"#
    )
}

/// `payload` that also asks `/init` for siw0 (address [`SIW_IP`] on
/// `v2`) next to rxe0.
pub fn with_siw(payload: &str) -> String {
    format!("{SIW_VAR}=1\n{payload}")
}

/// Payload that runs each named binary of `/tests` serially.
pub fn test_payload(tests: &[String]) -> String {
    format!("RVERBS_MODE=test\nRVERBS_TESTS='{}'\n", tests.join(" "))
}

/// The test binaries of one tier: run as `<prefix><name>` with `env`
/// exported ([`test_payload_tiers`]).
#[derive(Debug, Clone, Default)]
pub struct TestTier {
    /// Run-name prefix (`rxe:`), so the host tells the tiers apart.
    pub prefix: String,
    pub env: Vec<(String, String)>,
    pub tests: Vec<String>,
}

/// Payload that runs each tier's binaries of `/tests` in turn, tier after
/// tier, then `examples` as [`test_payload_with_examples`] does.
pub fn test_payload_tiers(tiers: &[TestTier], examples: &[(String, Vec<String>)]) -> String {
    let mut all: Vec<String> = Vec::new();
    for t in tiers.iter().flat_map(|t| &t.tests) {
        if !all.contains(t) {
            all.push(t.clone());
        }
    }
    let mut s = test_payload_with_examples(&all, examples);
    s.push_str("rverbs_tests() {\n");
    for t in tiers {
        let mut words = vec![shell_quote(&t.prefix), shell_quote(&t.tests.join(" "))];
        words.extend(t.env.iter().map(|(k, v)| shell_quote(&format!("{k}={v}"))));
        s.push_str(&format!("    run_tests {}\n", words.join(" ")));
    }
    s.push_str("}\n");
    s
}

/// [`test_payload`] that then runs examples of `/examples`, each with its
/// arguments; each is one run named `example:<name>` (it passes when it
/// exits 0).
pub fn test_payload_with_examples(tests: &[String], examples: &[(String, Vec<String>)]) -> String {
    let mut s = test_payload(tests);
    if !examples.is_empty() {
        s.push_str("rverbs_examples() {\n");
        for (name, args) in examples {
            let words: Vec<String> =
                std::iter::once(name.as_str()).chain(args.iter().map(String::as_str)).map(shell_quote).collect();
            s.push_str(&format!("    run_example {}\n", words.join(" ")));
        }
        s.push_str("}\n");
    }
    s
}

/// One program for [`run_payload`]: argv exactly as given (each word
/// quoted), its environment and working directory.
#[derive(Debug, Clone, Default)]
pub struct Program {
    /// Guest path of the program, or a name the guest's `PATH` finds.
    pub path: String,
    pub args: Vec<String>,
    /// Exported before it starts (after the guest's own
    /// `RVERBS_REQUIRE_DEVICE=1 RUST_BACKTRACE=1`, so these win).
    pub env: Vec<(String, String)>,
    /// Guest working directory (`/tmp` when it is missing).
    pub cwd: Option<String>,
    /// Send its stderr to [`STDERR_TTY`].
    pub stderr_tty: bool,
}

impl Program {
    /// The shell lines that run it (the body of `rverbs_cmd`).
    pub fn script(&self) -> String {
        let mut s = String::from("unset RVERBS_BIN\n");
        for (k, v) in &self.env {
            s.push_str(&format!("export {k}={}\n", shell_quote(v)));
        }
        if let Some(d) = &self.cwd {
            s.push_str(&format!("cd {} 2>/dev/null || cd /tmp\n", shell_quote(d)));
        }
        let words: Vec<String> =
            std::iter::once(self.path.as_str()).chain(self.args.iter().map(String::as_str)).map(shell_quote).collect();
        s.push_str(&format!("exec {}", words.join(" ")));
        if self.stderr_tty {
            s.push_str(&format!(" 2>{STDERR_TTY}"));
        }
        s
    }
}

/// Payload that runs one program with its argv preserved word for word
/// (unlike [`cmd_payload`], which hands a command line to the shell).
pub fn run_payload(p: &Program) -> String {
    cmd_payload(&[p.script()])
}

/// Payload that runs one command line. The words are joined with spaces
/// and read by the guest's shell, like `ssh host words...` does, so pipes
/// and redirections work when quoted on the host.
pub fn cmd_payload(words: &[String]) -> String {
    format!("RVERBS_MODE=cmd\nrverbs_cmd() {{\n{}\n}}\n", words.join(" "))
}

/// Payload for one VM of a two-host run: `/init` puts rxe0 on `netdev`
/// (the virtio NIC) with address `ip` instead of on a veth pair, then runs
/// `script` like [`cmd_payload`].
pub fn net_payload(netdev: &str, ip: &str, script: &str) -> String {
    format!("RVERBS_NETDEV={netdev}\nRVERBS_IP={ip}\n{}", cmd_payload(&[script.to_owned()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_mention_the_essentials() {
        let init = init_script();
        assert!(init.starts_with("#!/bin/sh\n"));
        assert!(init.contains("/usr/bin/rdma link add rxe0 type rxe netdev v0"));
        assert!(init.contains("poweroff -f"));
        assert!(init.contains("modprobe -a rdma_rxe veth rdma_ucm"), "the CM's module is loaded in every guest");
        assert!(init.contains("/dev/infiniband/rdma_cm"));
        assert!(init.contains("rdma link add rxe0 type rxe netdev $RVERBS_NETDEV"));
        assert!(
            init.find(". /etc/rverbs/payload.sh").unwrap() < init.find("modprobe").unwrap(),
            "the payload is read before the network is set up"
        );
        let p = net_payload("eth0", "192.168.78.1/24", "echo hi");
        assert!(p.starts_with("RVERBS_NETDEV=eth0\nRVERBS_IP=192.168.78.1/24\nRVERBS_MODE=cmd\n"));
        assert_eq!(test_payload(&["a".into(), "b".into()]), "RVERBS_MODE=test\nRVERBS_TESTS='a b'\n");
        assert!(cmd_payload(&["rverbs".into(), "devinfo".into(), "-v".into()]).contains("\nrverbs devinfo -v\n"));
        assert!(init.find("rverbs_examples() { :; }").unwrap() < init.find(". /etc/rverbs/payload.sh").unwrap());
    }

    #[test]
    fn siw_only_when_the_payload_asks() {
        let init = init_script();
        let payload = init.find(". /etc/rverbs/payload.sh").unwrap();
        assert!(init.find("RVERBS_SIW=\n").unwrap() < payload, "off unless the payload sets it");
        let siw = init.find("if [ -n \"$RVERBS_SIW\" ]; then").unwrap();
        assert!(init.find("rdma link add rxe0 type rxe netdev v0").unwrap() < siw, "rxe0 first: it keeps uverbs0");
        assert!(init.contains("modprobe -a crc32c_generic siw ||"), "crc32c_generic before siw");
        assert!(init.contains("ip addr add 192.168.79.1/24 dev v2"));
        assert!(init.contains("/usr/bin/rdma link add siw0 type siw netdev v2"));
        // siw0's port 1 is waited for, as rxe0's.
        assert!(init.contains("state=/sys/class/infiniband/$1/ports/1/state"));
        assert!(init.contains("    port_active siw0\n") && init.contains("\nport_active rxe0\n"));
        assert!(siw < init.find("mark ready").unwrap());
        assert_eq!(with_siw("RVERBS_MODE=cmd\n"), "RVERBS_SIW=1\nRVERBS_MODE=cmd\n");
    }

    #[test]
    fn tiers_run_with_their_environment() {
        let tier = |p: Provider, tests: &[&str]| TestTier {
            prefix: format!("{}:", p.name()),
            env: p.env().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            tests: tests.iter().map(|t| t.to_string()).collect(),
        };
        let s = test_payload_tiers(&[tier(Provider::Rxe, &["a", "b"]), tier(Provider::Siw, &["b"])], &[]);
        assert!(s.starts_with("RVERBS_MODE=test\nRVERBS_TESTS='a b'\n"), "{s}");
        assert!(s.contains("    run_tests rxe: 'a b' RVERBS_TEST_DEVICE=rxe0 RVERBS_PROVIDER=rxe\n"), "{s}");
        assert!(s.ends_with("    run_tests siw: b RVERBS_TEST_DEVICE=siw0 RVERBS_PROVIDER=siw\n}\n"), "{s}");
        let init = init_script();
        // The default runs RVERBS_TESTS unprefixed; the payload may override it.
        assert!(
            init.find("rverbs_tests() { run_tests \"\" \"$RVERBS_TESTS\"; }").unwrap()
                < init.find(". /etc/rverbs/payload.sh").unwrap()
        );
        assert!(init.contains("( for kv in \"$@\"; do export \"$kv\"; done; exec \"/tests/$t\" --test-threads=1 )"));
        assert!(init.contains("mark begin \"$prefix$t\"") && init.contains("mark end \"$prefix$t\" $rc"));
    }

    #[test]
    fn providers_parse_and_name_their_device() {
        assert_eq!(Provider::parse_list("siw").unwrap(), [Provider::Siw]);
        assert_eq!(Provider::parse_list("rxe,siw,rxe").unwrap(), Provider::ALL);
        assert!(Provider::parse_list("mlx5").is_err() && Provider::parse_list("").is_err());
        assert_eq!(Provider::Siw.env(), [("RVERBS_TEST_DEVICE", "siw0"), ("RVERBS_PROVIDER", "siw")]);
        assert!(Provider::Siw.needs_siw() && !Provider::Rxe.needs_siw());
    }

    #[test]
    fn run_payload_keeps_every_word() {
        let p = Program {
            path: "/w/target/debug/deps/rdma-1234".into(),
            args: vec!["some filter".into(), "--nocapture".into(), "it's".into()],
            env: vec![("RVERBS_VM_PEER".into(), "192.168.78.2".into())],
            cwd: Some("/w/my crate".into()),
            stderr_tty: true,
        };
        let s = run_payload(&p);
        assert!(s.starts_with("RVERBS_MODE=cmd\nrverbs_cmd() {\nunset RVERBS_BIN\n"), "{s}");
        assert!(s.contains("\nexport RVERBS_VM_PEER=192.168.78.2\n"), "{s}");
        assert!(s.contains("\ncd '/w/my crate' 2>/dev/null || cd /tmp\n"), "{s}");
        assert!(
            s.contains("\nexec /w/target/debug/deps/rdma-1234 'some filter' --nocapture 'it'\\''s' 2>/dev/ttyS2\n}"),
            "{s}"
        );
        let t = test_payload_with_examples(&["a".into()], &[("ex".into(), vec!["-n".into(), "1 2".into()])]);
        assert!(t.ends_with("rverbs_examples() {\n    run_example ex -n '1 2'\n}\n"), "{t}");
    }
}
