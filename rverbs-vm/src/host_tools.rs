//! The host programs the harness needs (QEMU, and everything that goes into
//! the guest), and installing the missing ones with apt.
//!
//! Two profiles: [`Profile::Run`] (what `rverbs-vm run` needs: QEMU, a static
//! busybox, kmod, iproute2; the other tools go into the guest when the host
//! has them) and [`Profile::Project`] (the project's own tests and demo also
//! need strace, rdma-core's tools (ibverbs-utils, and rdmacm-utils' rping,
//! ucmatose, udaddy and mckey), perftest and rdma-core's pyverbs test suite
//! (python3-pyverbs, with python3) as oracles).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{self, first_existing, note, Context, Result};

const MULTIARCH_LIB: &str = "/usr/lib/x86_64-linux-gnu";

/// Paths of the host tools, as found after [`ensure`].
#[derive(Debug, Clone)]
pub struct HostTools {
    pub qemu: PathBuf,
    /// A statically linked busybox.
    pub busybox: PathBuf,
    /// kmod's multi-call binary (modprobe, depmod, insmod, ...).
    pub kmod: PathBuf,
    pub depmod: PathBuf,
    /// `gzip`, when present; the initramfs stays uncompressed otherwise.
    pub gzip: Option<PathBuf>,
    /// Dynamically linked programs copied into the guest at the same path
    /// (iproute2, strace, rdma-core's, rdmacm-utils' and perftest's tools).
    pub guest_programs: Vec<PathBuf>,
    /// libibverbs provider plugins for rxe and their `.driver` files.
    pub verbs_providers: Vec<PathBuf>,
    /// rdma-core's siw plugin and `siw.driver` (from ibverbs-providers),
    /// put in guests whose kernel has siw ([`crate::kernel::Kernel::siw`]).
    pub siw_provider: Vec<PathBuf>,
    /// Python and rdma-core's pyverbs suite, when the host has them.
    pub pyverbs: Option<Pyverbs>,
}

/// The host's Python 3 and rdma-core's pyverbs (Debian's `python3-pyverbs`):
/// what the guest needs to run rdma-core's own test suite.
#[derive(Debug, Clone)]
pub struct Pyverbs {
    /// The interpreter binary (`/usr/bin/python3.11`).
    pub python: PathBuf,
    /// Its standard library (`/usr/lib/python3.11`).
    pub stdlib: PathBuf,
    /// The `pyverbs` package (`/usr/lib/python3/dist-packages/pyverbs`).
    pub package: PathBuf,
    /// rdma-core's tests as Debian ships them (`/usr/share/doc/rdma-core/tests`,
    /// most files gzip'd).
    pub tests: PathBuf,
}

/// Which tools must be there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Booting a guest with rxe0 and running a program: QEMU, busybox, kmod,
    /// iproute2. strace, rdma-core's and perftest's tools are copied into
    /// the guest only when the host has them.
    Run,
    /// The project's tests and demo: everything.
    Project,
}

/// How one tool is looked for, and which Debian package brings it.
struct Need {
    what: &'static str,
    paths: &'static [&'static str],
    package: &'static str,
    /// Needed by [`Profile::Run`] too.
    always: bool,
}

const fn need(what: &'static str, paths: &'static [&'static str], package: &'static str) -> Need {
    Need { what, paths, package, always: false }
}

const fn base(what: &'static str, paths: &'static [&'static str], package: &'static str) -> Need {
    Need { what, paths, package, always: true }
}

/// Tools the guest and the harness need. Several paths: either layout of
/// a merged or unmerged /usr.
const NEEDS: &[Need] = &[
    base("qemu-system-x86_64", &["/usr/bin/qemu-system-x86_64"], "qemu-system-x86"),
    need("strace", &["/usr/bin/strace"], "strace"),
    base("ip", &["/usr/bin/ip", "/bin/ip", "/usr/sbin/ip", "/sbin/ip"], "iproute2"),
    base("rdma", &["/usr/bin/rdma", "/bin/rdma", "/usr/sbin/rdma", "/sbin/rdma"], "iproute2"),
    need("ibv_devinfo", &["/usr/bin/ibv_devinfo"], "ibverbs-utils"),
    need("ibv_devices", &["/usr/bin/ibv_devices"], "ibverbs-utils"),
    need("ibv_rc_pingpong", &["/usr/bin/ibv_rc_pingpong"], "ibverbs-utils"),
    need("ibv_ud_pingpong", &["/usr/bin/ibv_ud_pingpong"], "ibverbs-utils"),
    need("ibv_srq_pingpong", &["/usr/bin/ibv_srq_pingpong"], "ibverbs-utils"),
    need("ib_send_lat", &["/usr/bin/ib_send_lat"], "perftest"),
    need("rping", &["/usr/bin/rping"], "rdmacm-utils"),
    need("ucmatose", &["/usr/bin/ucmatose"], "rdmacm-utils"),
    need("udaddy", &["/usr/bin/udaddy"], "rdmacm-utils"),
    need("mckey", &["/usr/bin/mckey"], "rdmacm-utils"),
    need("pyverbs", PYVERBS_FILES, "python3-pyverbs"),
    need(
        "rxe provider",
        &["/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", "/etc/libibverbs.d/rxe.driver"],
        "ibverbs-providers",
    ),
    base("kmod", &["/usr/bin/kmod", "/bin/kmod"], "kmod"),
    base("depmod", &["/usr/sbin/depmod", "/sbin/depmod"], "kmod"),
    base("modprobe", &["/usr/sbin/modprobe", "/sbin/modprobe"], "kmod"),
];

/// What [`Pyverbs`] is made of: all must exist (python3-pyverbs depends
/// on python3 and rdma-core, whose doc directory holds the tests).
const PYVERBS_FILES: &[&str] = &[
    "/usr/bin/python3.11",
    "/usr/lib/python3.11/os.py",
    "/usr/lib/python3/dist-packages/pyverbs/__init__.py",
    "/usr/share/doc/rdma-core/tests/run_tests.py",
];

/// rdma-core's siw provider: the plugin and the file naming it.
const SIW_PROVIDER: &[&str] =
    &["/usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so", "/etc/libibverbs.d/siw.driver"];

/// Optional extra perftest programs, copied when present.
const OPTIONAL_PROGRAMS: &[&str] = &[
    "/usr/bin/ibv_uc_pingpong",
    "/usr/bin/ibv_asyncwatch",
    "/usr/bin/ib_send_bw",
    "/usr/bin/ib_write_lat",
    "/usr/bin/ib_write_bw",
    "/usr/bin/ib_read_lat",
    "/usr/bin/ib_read_bw",
    "/usr/bin/ib_atomic_lat",
    "/usr/bin/ib_atomic_bw",
];

/// apt, run at most one `apt-get update` per process, and only when allowed.
#[derive(Default)]
pub struct Apt {
    updated: bool,
    /// Never update or install, only say what to run (`rverbs-vm`).
    read_only: bool,
}

impl Apt {
    /// An apt that never changes the host: missing packages give the command
    /// to run instead.
    pub fn read_only() -> Apt {
        Apt { updated: false, read_only: true }
    }

    /// True when [`Apt::update`] may run now: as root, allowed, not yet done.
    pub fn may_update(&self) -> bool {
        !self.read_only && !self.updated && util::is_root()
    }

    /// `apt-get update`, once.
    pub fn update(&mut self) -> Result<()> {
        if !self.updated {
            note("apt-get update");
            util::run(Command::new("apt-get").arg("update").arg("-q"))?;
            self.updated = true;
        }
        Ok(())
    }

    /// True once `update` ran in this process.
    pub fn has_updated(&self) -> bool {
        self.updated
    }

    /// `apt-get install -y` (non-interactive, no recommends).
    pub fn install(&mut self, packages: &[&str]) -> Result<()> {
        self.update()?;
        note(format!("apt-get install {}", packages.join(" ")));
        let mut cmd = Command::new("apt-get");
        cmd.env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(packages);
        util::run(&mut cmd)
    }
}

/// Debian packages whose tools `profile` lacks (deduplicated, in order).
fn missing_packages(profile: Profile) -> Vec<&'static str> {
    let mut pkgs: Vec<&str> = Vec::new();
    let mut add = |p: &'static str| {
        if !pkgs.contains(&p) {
            pkgs.push(p);
        }
    };
    for n in NEEDS.iter().filter(|n| n.always || profile == Profile::Project) {
        let all_present = if n.what == "rxe provider" || n.what == "pyverbs" {
            n.paths.iter().all(|p| Path::new(p).exists())
        } else {
            first_existing(n.paths).is_some()
        };
        if !all_present {
            add(n.package);
        }
    }
    if static_busybox().is_none() {
        add("busybox-static");
    }
    pkgs
}

/// /bin/busybox when it is statically linked (the `busybox` package's is not).
fn static_busybox() -> Option<PathBuf> {
    let p = first_existing(&["/bin/busybox", "/usr/bin/busybox"])?;
    is_static_elf(&p).then_some(p)
}

/// Installs what is missing (as root, unless `apt` is read-only) or says
/// what to run (otherwise), then returns the tools' paths.
pub fn ensure(apt: &mut Apt, profile: Profile) -> Result<HostTools> {
    let missing = missing_packages(profile);
    if !missing.is_empty() {
        if apt.read_only || !util::is_root() || util::which("apt-get").is_none() {
            return Err(missing_line(&missing));
        }
        apt.install(&missing)?;
        let still = missing_packages(profile);
        if !still.is_empty() {
            return Err(format!("still missing after apt-get install: {}", still.join(" ")));
        }
    }
    locate()
}

/// Installs `missing` Debian packages (as root, unless `apt` is read-only)
/// or fails with one line saying what to run (nothing to do when empty).
pub fn install_or_say(apt: &mut Apt, missing: &[&str]) -> Result<()> {
    if missing.is_empty() {
        return Ok(());
    }
    if apt.read_only || !util::is_root() || util::which("apt-get").is_none() {
        return Err(missing_line(missing));
    }
    apt.install(missing)
}

/// One line: what is missing and the command that installs it.
fn missing_line(missing: &[&str]) -> String {
    if util::which("apt-get").is_some() {
        let sudo = if util::is_root() { "" } else { "sudo " };
        format!(
            "missing host packages {}; install them with: {sudo}apt-get install -y --no-install-recommends {}",
            missing.join(" "),
            missing.join(" ")
        )
    } else {
        format!(
            "missing host tools (Debian names: {}): install QEMU for x86_64, a statically linked busybox, kmod and iproute2",
            missing.join(" ")
        )
    }
}

/// Resolves every tool's path (all are known to exist).
fn locate() -> Result<HostTools> {
    let find = |what: &str| -> Result<PathBuf> {
        let n = NEEDS.iter().find(|n| n.what == what).expect("known tool");
        first_existing(n.paths).ok_or_else(|| format!("{what} not found"))
    };
    // iproute2 always; the rest when present (all of it with Profile::Project).
    let mut guest_programs = vec![find("ip")?, find("rdma")?];
    for what in [
        "strace",
        "ibv_devinfo",
        "ibv_devices",
        "ibv_rc_pingpong",
        "ibv_ud_pingpong",
        "ibv_srq_pingpong",
        "ib_send_lat",
        "rping",
        "ucmatose",
        "udaddy",
        "mckey",
    ] {
        guest_programs.extend(find(what).ok());
    }
    guest_programs.extend(OPTIONAL_PROGRAMS.iter().map(PathBuf::from).filter(|p| p.exists()));
    Ok(HostTools {
        qemu: find("qemu-system-x86_64")?,
        busybox: static_busybox().ok_or("static busybox not found")?,
        kmod: find("kmod")?,
        depmod: find("depmod")?,
        gzip: util::which("gzip"),
        guest_programs,
        verbs_providers: rxe_provider_files()?,
        siw_provider: SIW_PROVIDER.iter().map(PathBuf::from).filter(|p| p.is_file()).collect(),
        pyverbs: pyverbs(),
    })
}

/// Python and pyverbs, when every file of [`PYVERBS_FILES`] is there.
fn pyverbs() -> Option<Pyverbs> {
    if !PYVERBS_FILES.iter().all(|p| Path::new(p).is_file()) {
        return None;
    }
    let parent = |p: &str| Path::new(p).parent().map(Path::to_path_buf);
    Some(Pyverbs {
        python: PathBuf::from(PYVERBS_FILES[0]),
        stdlib: parent(PYVERBS_FILES[1])?,
        package: parent(PYVERBS_FILES[2])?,
        tests: parent(PYVERBS_FILES[3])?,
    })
}

/// The rxe plugin(s) of libibverbs and the `.driver` file naming them
/// (none when the host has no ibverbs-providers: rverbs needs neither).
fn rxe_provider_files() -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let dir = Path::new(MULTIARCH_LIB).join("libibverbs");
    let driver = Path::new("/etc/libibverbs.d/rxe.driver");
    if !dir.is_dir() || !driver.is_file() {
        return Ok(files);
    }
    for e in std::fs::read_dir(&dir).ctx(format!("reading {}", dir.display()))? {
        let p = e.ctx("readdir")?.path();
        if p.file_name().is_some_and(|n| n.to_string_lossy().contains("rxe")) {
            files.push(p);
        }
    }
    files.push(driver.to_path_buf());
    files.sort();
    Ok(files)
}

/// True for an ELF file without a program interpreter (PT_INTERP),
/// i.e. one that runs without a dynamic loader.
pub fn is_static_elf(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).all(|i| {
        let o = phoff + i * phentsize;
        b.get(o..o + 4).is_some_and(|t| u32::from_le_bytes(t.try_into().unwrap()) != 3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tools_give_one_line_to_run() {
        let l = missing_line(&["qemu-system-x86", "busybox-static"]);
        assert!(!l.contains('\n'), "{l}");
        assert!(l.contains("qemu-system-x86 busybox-static"), "{l}");
        if util::which("apt-get").is_some() {
            assert!(l.contains("apt-get install -y --no-install-recommends qemu-system-x86 busybox-static"), "{l}");
        }
    }

    #[test]
    fn the_run_profile_needs_less() {
        let run: Vec<&str> = NEEDS.iter().filter(|n| n.always).map(|n| n.package).collect();
        assert!(run.contains(&"qemu-system-x86") && run.contains(&"kmod") && run.contains(&"iproute2"));
        assert!(!run.contains(&"strace") && !run.contains(&"ibverbs-utils") && !run.contains(&"perftest"));
        assert!(!run.contains(&"rdmacm-utils"));
        assert!(NEEDS.iter().any(|n| n.what == "rping" && n.package == "rdmacm-utils"), "the project's oracles");
        assert!(!run.contains(&"python3-pyverbs"));
        assert!(NEEDS.iter().any(|n| n.what == "pyverbs" && n.package == "python3-pyverbs"));
    }
}
