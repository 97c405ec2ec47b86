//! Assembling the guest's initramfs: what goes in (busybox, kmod, iproute2,
//! rdma-core tools, libibverbs' rxe provider, Python with rdma-core's
//! pyverbs and its test suite, kernel modules, the project's binaries, with
//! every shared library they load, read from their ELF headers) and writing
//! it as cpio.
//!
//! The guest uses a merged /usr: `/bin`, `/sbin`, `/lib`, `/lib64` are
//! links into `/usr`, and every host path is placed under `/usr`
//! accordingly, so a program finds its loader and libraries at the paths
//! the host's loader would resolve ([`crate::elf::libraries`]).
//!
//! An initrd is two archives back to back, which the kernel unpacks in
//! order: a gzip'd *base* that depends only on the kernel and the host's
//! tools (cached under `target/vm/initramfs/`), and an uncompressed
//! *payload* with this run's binaries and the script saying what to run.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cpio::CpioWriter;
use crate::guest;
use crate::host_tools::{HostTools, Pyverbs};
use crate::kernel::Kernel;
use crate::util::{self, Context, Fnv, Result};

/// Kernel modules copied into the guest (with their dependencies): those
/// `/init` loads ([`guest::LOAD_MODULES`]: rxe, veth, and `rdma_ucm`, the
/// RDMA connection manager's `/dev/infiniband/rdma_cm`, which pulls in
/// `rdma_cm`, `iw_cm`, `ib_cm` and `configfs`) and virtio-net for two-VM
/// runs ([`guest::NET_MODULES`]). Each must be a module or built in.
pub const MODULES: &[&str] = &["rdma_rxe", "veth", "rdma_ucm", "virtio_net"];

/// Copied when the kernel has them ([`guest::CRC32_MODULE`], and the
/// virtio pieces some kernels build in).
pub const OPTIONAL_MODULES: &[&str] = &["crc32_generic", "virtio_pci", "net_failover", "failover"];

/// The unwinder library glibc loads at run time ([`base_userland`]).
const LIBGCC_S: &str = "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1";

/// Where one guest file comes from.
#[derive(Debug, Clone)]
enum Source {
    Dir,
    /// A host file's contents (symlinks followed).
    Host(PathBuf),
    Bytes(Vec<u8>),
    Symlink(String),
    CharDev(u32, u32),
}

#[derive(Debug, Clone)]
struct Entry {
    source: Source,
    perm: u32,
}

/// The files of one archive, by guest path (no leading `/`). Sorted, so
/// parents always come before their children.
#[derive(Debug, Default, Clone)]
pub struct Manifest {
    entries: BTreeMap<String, Entry>,
    ldd_cache: HashMap<PathBuf, Vec<PathBuf>>,
}

/// Maps a host path to the guest's merged-/usr layout, without the
/// leading `/`: `/lib/x/libc.so.6` -> `usr/lib/x/libc.so.6`.
pub fn guest_path(host: &Path) -> String {
    let s = host.to_string_lossy();
    let s = s.trim_start_matches('/');
    let first = s.split('/').next().unwrap_or("");
    if matches!(first, "bin" | "sbin" | "lib" | "lib64") {
        format!("usr/{s}")
    } else {
        s.to_owned()
    }
}

impl Manifest {
    /// True when the archive has `path`.
    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(path.trim_start_matches('/'))
    }

    fn put(&mut self, path: &str, source: Source, perm: u32) {
        let path = path.trim_start_matches('/').to_owned();
        self.entries.insert(path, Entry { source, perm });
    }

    /// Adds a directory.
    pub fn dir(&mut self, path: &str) {
        self.put(path, Source::Dir, 0o755);
    }

    /// Adds a file with fixed contents.
    pub fn bytes(&mut self, path: &str, perm: u32, data: impl Into<Vec<u8>>) {
        self.put(path, Source::Bytes(data.into()), perm);
    }

    /// Adds a symbolic link.
    pub fn symlink(&mut self, path: &str, target: &str) {
        self.put(path, Source::Symlink(target.to_owned()), 0o777);
    }

    /// Adds a host file at `path`, keeping its permission bits.
    pub fn host_file(&mut self, path: &str, host: &Path) -> Result<()> {
        let meta = std::fs::metadata(host).ctx(format!("{}", host.display()))?;
        self.put(path, Source::Host(host.to_path_buf()), meta.mode() & 0o7777);
        Ok(())
    }

    /// Adds a host program (or shared object) at its mapped path, with
    /// every library it loads.
    pub fn program(&mut self, host: &Path) -> Result<()> {
        self.program_at(&guest_path(host), host)
    }

    /// Adds a host program at `path` with its libraries.
    pub fn program_at(&mut self, path: &str, host: &Path) -> Result<()> {
        self.host_file(path, host)?;
        self.libraries_of(host)
    }

    /// Adds the libraries of `host` that are not in the archive or in
    /// `skip` (another archive that will be unpacked too).
    fn libraries_of(&mut self, host: &Path) -> Result<()> {
        self.libraries_except(host, None)
    }

    fn libraries_except(&mut self, host: &Path, skip: Option<&Manifest>) -> Result<()> {
        let libs = match self.ldd_cache.get(host) {
            Some(l) => l.clone(),
            None => {
                let l = crate::elf::libraries(host)?;
                self.ldd_cache.insert(host.to_path_buf(), l.clone());
                l
            }
        };
        for lib in libs {
            let at = guest_path(&lib);
            if !self.contains(&at) && !skip.is_some_and(|m| m.contains(&at)) {
                self.host_file(&at, &lib)?;
            }
        }
        Ok(())
    }

    /// Adds a program at `path` with those of its libraries that `base`
    /// lacks (for a payload unpacked on top of `base`).
    pub fn program_over(&mut self, path: &str, host: &Path, base: &Manifest) -> Result<()> {
        self.host_file(path, host)?;
        self.libraries_except(host, Some(base))
    }

    /// Adds the missing parent directories of every entry.
    fn add_parents(&mut self) {
        let mut parents = BTreeSet::new();
        for path in self.entries.keys() {
            let mut p = Path::new(path).parent();
            while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
                parents.insert(d.to_string_lossy().into_owned());
                p = d.parent();
            }
        }
        for d in parents {
            if !self.entries.contains_key(&d) {
                self.dir(&d);
            }
        }
    }

    /// A key that changes whenever the archive's contents would: paths,
    /// kinds, and the size and mtime of host files.
    pub fn cache_key(&self) -> String {
        let mut h = Fnv::new();
        for (path, e) in &self.entries {
            h.add(path).add(format!("{:o}", e.perm));
            match &e.source {
                Source::Dir => h.add("dir"),
                Source::Host(p) => {
                    let m = std::fs::metadata(p).ok();
                    let (size, mtime) = m.map_or((0, 0), |m| (m.size(), m.mtime()));
                    h.add(p.as_os_str().as_encoded_bytes()).add(format!("{size} {mtime}"))
                }
                Source::Bytes(b) => h.add(b),
                Source::Symlink(t) => h.add(t),
                Source::CharDev(a, b) => h.add(format!("{a}:{b}")),
            };
        }
        h.hex()
    }

    /// Writes the archive as newc cpio.
    pub fn write_cpio(&mut self, out: impl Write) -> Result<()> {
        self.add_parents();
        let mut w = CpioWriter::new(out);
        for (path, e) in &self.entries {
            let r = match &e.source {
                Source::Dir => w.dir(path, e.perm),
                Source::Bytes(b) => w.bytes(path, e.perm, b),
                Source::Symlink(t) => w.symlink(path, t),
                Source::CharDev(a, b) => w.char_dev(path, e.perm, *a, *b),
                Source::Host(p) => copy_into(&mut w, path, e.perm, p),
            };
            r.ctx(format!("archiving {path}"))?;
        }
        w.finish().ctx("finishing the cpio archive")?;
        Ok(())
    }
}

fn copy_into<W: Write>(w: &mut CpioWriter<W>, path: &str, perm: u32, host: &Path) -> io::Result<()> {
    let mut f = File::open(host)?;
    let size = f.metadata()?.len();
    w.file(path, perm, size, &mut f)
}

/// The kernel-independent part of the guest: layout, busybox, kmod, the
/// host tools, libibverbs' rxe provider, `/init`.
fn base_userland(tools: &HostTools) -> Result<Manifest> {
    let mut m = Manifest::default();
    for d in [
        "usr/bin",
        "usr/sbin",
        "usr/lib",
        "usr/lib64",
        "usr/local/bin",
        "proc",
        "sys",
        "dev",
        "tmp",
        "run",
        "root",
        "tests",
        "examples",
        "etc/rverbs",
    ] {
        m.dir(d);
    }
    for top in ["bin", "sbin", "lib", "lib64"] {
        m.symlink(top, &format!("usr/{top}"));
    }
    m.put("dev/console", Source::CharDev(5, 1), 0o600);
    m.put("dev/null", Source::CharDev(1, 3), 0o666);
    m.bytes("init", 0o755, guest::init_script());
    m.bytes("etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\n");
    m.bytes("etc/group", 0o644, "root:x:0:\n");
    // kmod: one binary, the tools are links to it.
    m.program_at("usr/bin/kmod", &tools.kmod)?;
    for t in ["modprobe", "depmod", "insmod", "rmmod", "lsmod", "modinfo"] {
        m.symlink(&format!("usr/sbin/{t}"), "../bin/kmod");
    }
    for p in &tools.guest_programs {
        m.program(p)?;
    }
    // glibc loads libgcc_s with dlopen for pthread_exit and pthread_cancel,
    // so no ELF header names it: without it rping (which ends its threads
    // so) aborts when it finishes ("libgcc_s.so.1 must be installed").
    if let Some(gcc_s) = util::first_existing(&[LIBGCC_S]) {
        m.program(&gcc_s)?;
    }
    for p in &tools.verbs_providers {
        if p.extension().is_some_and(|e| e == "so") {
            m.program(p)?;
        } else {
            m.host_file(&guest_path(p), p)?;
        }
    }
    if let Some(py) = &tools.pyverbs {
        add_pyverbs(&mut m, py)?;
    }
    add_busybox(&mut m, &tools.busybox)?;
    Ok(m)
}

/// Directories of the standard library the guest does not need: tests,
/// GUI, packaging, and the 25 MB static library of `config-*`.
const STDLIB_SKIP: &[&str] =
    &["test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "distutils", "__pycache__"];

/// Where rdma-core's tests are unpacked in the guest (where Debian keeps
/// them, without the `.gz`).
pub const PYVERBS_TESTS: &str = "/usr/share/doc/rdma-core/tests";

/// Python (binary, standard library without [`STDLIB_SKIP`] and `config-*`,
/// its extension modules with their libraries), the `pyverbs` package with
/// the libraries of its extension modules (libibverbs, librdmacm, libmlx5,
/// libefa), and rdma-core's tests unpacked at [`PYVERBS_TESTS`]. Compiled
/// bytecode is left out: Python writes it into the guest's RAM at first use.
fn add_pyverbs(m: &mut Manifest, py: &Pyverbs) -> Result<()> {
    m.program(&py.python)?;
    if let Some(name) = py.python.file_name() {
        m.symlink("usr/bin/python3", &name.to_string_lossy());
    }
    let skip = |p: &Path| {
        let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        STDLIB_SKIP.contains(&n.as_str()) || n.starts_with("config-") || n.ends_with(".pyc")
    };
    add_tree(m, &py.stdlib, &skip)?;
    add_tree(m, &py.package, &skip)?;
    for e in std::fs::read_dir(&py.tests).ctx(format!("reading {}", py.tests.display()))? {
        let p = e.ctx("readdir")?.path();
        let name = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if !p.is_file() {
            continue;
        }
        match name.strip_suffix(".gz") {
            Some(plain) => {
                let out = Command::new("gzip").arg("-dc").arg(&p).output().ctx("running gzip -dc")?;
                if !out.status.success() {
                    return Err(format!("gzip -dc {} failed", p.display()));
                }
                m.bytes(&format!("{PYVERBS_TESTS}/{plain}"), 0o644, out.stdout);
            }
            None => m.host_file(&format!("{PYVERBS_TESTS}/{name}"), &p)?,
        }
    }
    Ok(())
}

/// Adds the files under the host directory `dir` at their mapped paths,
/// leaving out what `skip` names; each shared object (`.so`) comes with its
/// libraries (an extension module whose libraries the host lacks is left out).
fn add_tree(m: &mut Manifest, dir: &Path, skip: &dyn Fn(&Path) -> bool) -> Result<()> {
    for e in std::fs::read_dir(dir).ctx(format!("reading {}", dir.display()))? {
        let p = e.ctx("readdir")?.path();
        if skip(&p) {
            continue;
        }
        if p.is_dir() {
            add_tree(m, &p, skip)?;
        } else if p.is_file() {
            if p.extension().is_some_and(|x| x == "so") {
                if let Err(e) = m.program(&p) {
                    util::note(format!("left out of the guest: {e}"));
                }
            } else {
                m.host_file(&guest_path(&p), &p)?;
            }
        }
    }
    Ok(())
}

/// busybox and a link for each applet whose path is still free.
fn add_busybox(m: &mut Manifest, busybox: &Path) -> Result<()> {
    m.host_file("usr/bin/busybox", busybox)?;
    let list = util::capture(Command::new(busybox).arg("--list-full"))?;
    for applet in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let at = guest_path(Path::new(&format!("/{applet}")));
        if !m.contains(&at) {
            m.symlink(&at, "/usr/bin/busybox");
        }
    }
    Ok(())
}

/// Adds [`MODULES`] and their dependencies (from `modules.dep`) plus the
/// `modules.*` index files, under `/lib/modules/<release>`.
fn add_modules(m: &mut Manifest, k: &Kernel) -> Result<()> {
    let dest = format!("usr/lib/modules/{}", k.release);
    let wanted = wanted_modules(k);
    for rel in module_closure(&k.modules, &wanted, OPTIONAL_MODULES)? {
        m.host_file(&format!("{dest}/{rel}"), &k.modules.join(&rel))?;
    }
    for e in std::fs::read_dir(&k.modules).ctx(format!("reading {}", k.modules.display()))? {
        let e = e.ctx("readdir")?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("modules.") && e.path().is_file() {
            m.host_file(&format!("{dest}/{name}"), &e.path())?;
        }
    }
    Ok(())
}

/// [`MODULES`], plus siw's ([`crate::siw_module::GUEST_MODULES`]) when
/// the kernel has siw: default guests stay as they were.
fn wanted_modules(k: &Kernel) -> Vec<&'static str> {
    let siw: &[&str] = if k.siw { crate::siw_module::GUEST_MODULES } else { &[] };
    MODULES.iter().chain(siw).copied().collect()
}

/// A module's name from its file: `kernel/x/ip6_udp_tunnel.ko.xz` ->
/// `ip6_udp_tunnel` (dashes read as underscores, like kmod does).
fn module_name(file: &str) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    let stem = base.split(".ko").next().unwrap_or(base);
    stem.replace('-', "_")
}

/// The files (relative to the modules dir) of `wanted` and `optional` and
/// everything they depend on. Built-in modules need no file; an unknown
/// wanted one is an error, an unknown optional one is left out.
pub fn module_closure(modules_dir: &Path, wanted: &[&str], optional: &[&str]) -> Result<BTreeSet<String>> {
    let dep_text = std::fs::read_to_string(modules_dir.join("modules.dep")).ctx("reading modules.dep")?;
    let builtin = std::fs::read_to_string(modules_dir.join("modules.builtin")).unwrap_or_default();
    let builtin: BTreeSet<String> = builtin.lines().map(module_name).collect();
    let mut deps: HashMap<String, (String, Vec<String>)> = HashMap::new();
    for line in dep_text.lines() {
        if let Some((file, rest)) = line.split_once(':') {
            let d = rest.split_whitespace().map(str::to_owned).collect();
            deps.insert(module_name(file), (file.to_owned(), d));
        }
    }
    let mut files = BTreeSet::new();
    for (name, required) in wanted.iter().map(|n| (n, true)).chain(optional.iter().map(|n| (n, false))) {
        let name = name.replace('-', "_");
        match deps.get(&name) {
            Some((file, d)) => {
                files.insert(file.clone());
                files.extend(d.iter().cloned());
            }
            None if builtin.contains(&name) || !required => {}
            None => {
                return Err(format!(
                    "kernel module {name} is neither in {}/modules.dep nor built in{}",
                    modules_dir.display(),
                    if name == "rdma_rxe" { " (Ubuntu ships it in linux-modules-extra-RELEASE)" } else { "" }
                ))
            }
        }
    }
    Ok(files)
}

/// The full base manifest for kernel `k`.
pub fn base_manifest(k: &Kernel, tools: &HostTools) -> Result<Manifest> {
    let mut m = base_userland(tools)?;
    add_modules(&mut m, k)?;
    if k.siw {
        // rdma-core's libsiw, so its tools (the oracles) see siw0.
        for p in &tools.siw_provider {
            if p.extension().is_some_and(|e| e == "so") {
                m.program(p)?;
            } else {
                m.host_file(&guest_path(p), p)?;
            }
        }
    }
    Ok(m)
}

/// Returns the cached base archive for `k` (under `cache/initramfs/<release>/`),
/// building it when no archive with these contents exists yet. Also
/// returns the manifest, for building payloads. The file is named after its
/// contents' key and written under a temporary name first, so concurrent
/// runs never read a partial one; the few most recently used are kept
/// (several checkouts or tools may share the cache).
pub fn base_archive(k: &Kernel, tools: &HostTools, cache: &Path) -> Result<(PathBuf, Manifest)> {
    let mut m = base_manifest(k, tools)?;
    let ext = if tools.gzip.is_some() { "cpio.gz" } else { "cpio" };
    let dir = cache.join("initramfs").join(&k.release);
    let file = dir.join(format!("base-{}.{ext}", m.cache_key()));
    if let Ok(f) = File::options().append(true).open(&file) {
        let _ = f.set_modified(std::time::SystemTime::now()); // most recently used
        return Ok((file, m));
    }
    util::note(format!("building the initramfs for {}", k.release));
    std::fs::create_dir_all(&dir).ctx(format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".base-{}.tmp", std::process::id()));
    match &tools.gzip {
        Some(gzip) => write_gzipped(&mut m, gzip, &tmp)?,
        None => m.write_cpio(BufWriter::new(util::create_fresh(&tmp)?))?,
    }
    std::fs::rename(&tmp, &file).ctx(format!("renaming to {}", file.display()))?;
    remove_old_bases(&dir, KEEP_BASES);
    Ok((file, m))
}

/// Base archives kept per kernel release.
const KEEP_BASES: usize = 4;

/// Deletes all but the `keep` most recently used base archives.
fn remove_old_bases(dir: &Path, keep: usize) {
    let mut bases: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("base-"))
        .map(|e| (e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH), e.path()))
        .collect();
    bases.sort_by_key(|b| std::cmp::Reverse(b.0));
    for (_, p) in bases.into_iter().skip(keep) {
        let _ = std::fs::remove_file(p);
    }
}

/// Streams the archive through `gzip -n -6` into `dest`.
fn write_gzipped(m: &mut Manifest, gzip: &Path, dest: &Path) -> Result<()> {
    let out = util::create_fresh(dest)?;
    let mut child =
        Command::new(gzip).args(["-n", "-6", "-c"]).stdin(Stdio::piped()).stdout(out).spawn().ctx("starting gzip")?;
    let stdin = child.stdin.take().expect("piped stdin");
    let written = m.write_cpio(BufWriter::new(stdin));
    let status = child.wait().ctx("waiting for gzip")?;
    written?;
    if !status.success() {
        return Err(format!("gzip failed ({status})"));
    }
    Ok(())
}

/// Writes `base` followed by `payload` (padded to 4 bytes in between, as
/// the kernel expects the next archive's header on a 4-byte boundary).
pub fn concat_initrd(base: &Path, payload: &mut Manifest, dest: &Path) -> Result<()> {
    let mut out = BufWriter::new(util::create_fresh(dest)?);
    let mut b = File::open(base).ctx(format!("opening {}", base.display()))?;
    let n = io::copy(&mut b, &mut out).ctx("copying the base archive")?;
    out.write_all(&[0u8; 3][..((4 - n % 4) % 4) as usize]).ctx("padding")?;
    payload.write_cpio(&mut out)?;
    out.flush().ctx("writing the initrd")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_to_merged_usr() {
        assert_eq!(guest_path(Path::new("/lib/x86_64-linux-gnu/libc.so.6")), "usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(guest_path(Path::new("/lib64/ld-linux-x86-64.so.2")), "usr/lib64/ld-linux-x86-64.so.2");
        assert_eq!(guest_path(Path::new("/usr/bin/ip")), "usr/bin/ip");
        assert_eq!(guest_path(Path::new("/sbin/modprobe")), "usr/sbin/modprobe");
        assert_eq!(guest_path(Path::new("/etc/libibverbs.d/rxe.driver")), "etc/libibverbs.d/rxe.driver");
    }

    #[test]
    fn module_names() {
        assert_eq!(module_name("kernel/net/ipv6/ip6_udp_tunnel.ko.xz"), "ip6_udp_tunnel");
        assert_eq!(module_name("kernel/drivers/net/veth.ko"), "veth");
        assert_eq!(module_name("kernel/x/crc32-pclmul.ko.zst"), "crc32_pclmul");
    }

    #[test]
    fn resolves_module_closure() {
        let dir = util::private_dir(&std::env::temp_dir(), "rverbs-vm-modtest-").unwrap();
        std::fs::write(dir.join("modules.dep"), "kernel/a/rdma_rxe.ko: kernel/b/ib_uverbs.ko kernel/c/ib_core.ko\nkernel/b/ib_uverbs.ko: kernel/c/ib_core.ko\nkernel/c/ib_core.ko:\n").unwrap();
        std::fs::write(dir.join("modules.builtin"), "kernel/d/veth.ko\n").unwrap();
        let c = module_closure(&dir, &["rdma_rxe", "veth"], &["absent"]).unwrap();
        assert_eq!(c.len(), 3);
        assert!(c.contains("kernel/b/ib_uverbs.ko"));
        assert!(module_closure(&dir, &["nope"], &[]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
