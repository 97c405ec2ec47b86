//! Kernels for the guests.
//!
//! * By Debian series (`6.1`, `6.12`): which package the series means today
//!   (`apt-cache depends` of its meta-package), downloading it (`apt-get
//!   download`, no root needed), unpacking it (`dpkg-deb -x`) and indexing
//!   its modules (`depmod -b`). Everything lands in the user's cache
//!   directory ([`crate::util::cache_dir`]), so a second run downloads
//!   nothing and a run without network uses what is cached.
//! * By path ([`from_paths`]): any kernel image plus its module tree (an
//!   unpacked Ubuntu `linux-image-*` + `linux-modules-extra-*`, a self-built
//!   kernel). A tree without `modules.dep` is indexed in a shadow copy made
//!   of symbolic links, so the user's directory is only read.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::host_tools::{Apt, HostTools};
use crate::util::{self, note, Context, Fnv, Result};

/// A kernel series of the test matrix and the Debian meta-package that
/// depends on its current image package.
#[derive(Debug, Clone, Copy)]
pub struct Series {
    pub name: &'static str,
    pub meta_package: &'static str,
}

/// The matrix: Debian 12's stock kernel and the 6.12 one it also ships.
pub const SERIES: &[Series] = &[
    Series { name: "6.1", meta_package: "linux-image-amd64" },
    Series { name: "6.12", meta_package: "linux-image-6.12-amd64" },
];

/// Looks a series up by name (`6.1`, `6.12`).
pub fn series(name: &str) -> Result<Series> {
    SERIES.iter().copied().find(|s| s.name == name).ok_or_else(|| {
        let known: Vec<_> = SERIES.iter().map(|s| s.name).collect();
        format!(
            "unknown kernel {name:?} (known: {}; any other by path: --kernel-image, --modules-dir)",
            known.join(", ")
        )
    })
}

/// An unpacked kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The series (`6.1`, `6.12`) or, for a kernel given by path, its
    /// release. Names the log files.
    pub series: String,
    /// The image package, e.g. `linux-image-6.1.0-57-amd64`, or the image's
    /// path for a kernel given by path.
    pub package: String,
    /// The package's Debian version, e.g. `6.1.158-1`; empty for a kernel
    /// given by path.
    pub deb_version: String,
    /// `uname -r` of the kernel, e.g. `6.1.0-57-amd64`.
    pub release: String,
    pub vmlinuz: PathBuf,
    /// `lib/modules/<release>` with depmod's indexes.
    pub modules: PathBuf,
    /// `modules` has siw (soft-iWARP): the guest then loads it and adds
    /// siw0 when a payload asks ([`crate::siw_module::with_siw`]).
    pub siw: bool,
}

impl Kernel {
    /// One line naming exactly what runs.
    pub fn describe(&self) -> String {
        if self.deb_version.is_empty() {
            format!("{} ({}, modules {})", self.package, self.release, self.modules.display())
        } else {
            format!("{} ({}, Debian {})", self.package, self.release, self.deb_version)
        }
    }
}

/// Resolves, downloads (if needed) and unpacks the current kernel of `s`
/// under `cache`. Without apt's lists or without network, the newest kernel
/// of the series already in the cache is used.
pub fn fetch(s: Series, cache: &Path, tools: &HostTools, apt: &mut Apt) -> Result<Kernel> {
    let (package, deb_version) = match resolve(s, apt) {
        Ok(found) => found,
        Err(e) => return cached_fallback(s, cache, &e),
    };
    let unpacked = cache.join("kernels").join(&package);
    if let Some(k) = load_stamp(s, &unpacked).filter(|k| k.deb_version == deb_version) {
        return Ok(k);
    }
    let deb = match download(&package, &deb_version, &cache.join("debs")) {
        Ok(deb) => deb,
        Err(e) => return cached_fallback(s, cache, &e),
    };
    unpack(s, &deb, &unpacked, &package, &deb_version, tools)
}

/// The image package the meta-package depends on, and its candidate version.
fn resolve(s: Series, apt: &mut Apt) -> Result<(String, String)> {
    if util::which("apt-cache").is_none() {
        return Err(format!(
            "kernel {}: Debian's kernels by series need apt (a Debian or Ubuntu host); \
             elsewhere give one by path with --kernel-image and --modules-dir",
            s.name
        ));
    }
    let first = depends_image(s.meta_package);
    let package = match first {
        Some(p) => p,
        None if apt.may_update() => {
            apt.update()?;
            depends_image(s.meta_package).ok_or_else(|| no_package(s))?
        }
        None => return Err(no_package(s)),
    };
    let version = candidate_version(&package)?;
    Ok((package, version))
}

/// Why apt cannot find a series, and what to do.
fn no_package(s: Series) -> String {
    format!(
        "apt knows no {} (kernel {}): on Debian 12 run `apt-get update` as root; on another distribution \
         give a kernel by path with --kernel-image and --modules-dir (docs/VM.md)",
        s.meta_package, s.name
    )
}

/// The `linux-image-*` package that `apt-cache depends META` lists.
fn depends_image(meta: &str) -> Option<String> {
    let (ok, out, _) = util::capture_lenient(Command::new("apt-cache").args(["depends", meta]))?;
    if !ok {
        return None;
    }
    out.lines()
        .filter_map(|l| l.trim().trim_start_matches('|').strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-") && !p.starts_with('<'))
        .map(str::to_owned)
}

/// The version apt would download for `package`.
pub(crate) fn candidate_version(package: &str) -> Result<String> {
    let out = util::capture(Command::new("apt-cache").args(["show", "--no-all-versions", package]))?;
    out.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| format!("`apt-cache show {package}` has no Version"))
}

/// When apt cannot resolve or download the series (no package lists,
/// offline), use the newest kernel of that series already unpacked in the
/// cache.
fn cached_fallback(s: Series, cache: &Path, why: &str) -> Result<Kernel> {
    let dir = cache.join("kernels");
    let mut found: Vec<Kernel> =
        std::fs::read_dir(&dir).into_iter().flatten().flatten().filter_map(|e| load_stamp(s, &e.path())).collect();
    found.sort_by(|a, b| a.deb_version.cmp(&b.deb_version));
    let k = found.pop().ok_or_else(|| format!("kernel {}: {why}; nothing cached either", s.name))?;
    note(format!("kernel {}: {why}; using the cached {}", s.name, k.package));
    Ok(k)
}

/// `apt-get download` into `debs` unless the .deb is already there (for
/// amd64 or, like `linux-source-*`, for all architectures). apt writes
/// into a directory of this process first, so a concurrent run never sees
/// a partial file.
pub(crate) fn download(package: &str, version: &str, debs: &Path) -> Result<PathBuf> {
    let name = |arch: &str| format!("{package}_{}_{arch}.deb", version.replace(':', "%3a"));
    if let Some(deb) = ["amd64", "all"].iter().map(|a| debs.join(name(a))).find(|d| d.exists()) {
        return Ok(deb);
    }
    let tmp = util::private_dir(debs, ".download-")?;
    note(format!("downloading {package} {version}"));
    let mut cmd = Command::new("apt-get");
    if util::is_root() {
        // As root apt downloads as `_apt`, which cannot write to our cache.
        cmd.args(["-o", "APT::Sandbox::User=root"]);
    }
    let got = util::run(cmd.args(["download", "-q", &format!("{package}={version}")]).current_dir(&tmp));
    let moved = got.and_then(|()| {
        let file = ["amd64", "all"]
            .iter()
            .map(|a| name(a))
            .find(|f| tmp.join(f).is_file())
            .ok_or_else(|| format!("apt-get download {package}={version} left no {}", name("amd64")))?;
        let deb = debs.join(&file);
        std::fs::rename(tmp.join(&file), &deb).ctx(format!("apt-get download: {file}"))?;
        Ok(deb)
    });
    let _ = std::fs::remove_dir_all(&tmp);
    moved
}

/// Unpacks `deb` into `dest/root`, runs depmod and writes the stamp that
/// marks the directory complete. Works in a temporary directory renamed
/// into place at the end, so an interrupted or concurrent run never leaves
/// (or sees) a half-unpacked kernel.
fn unpack(s: Series, deb: &Path, dest: &Path, package: &str, version: &str, tools: &HostTools) -> Result<Kernel> {
    note(format!("unpacking {}", deb.display()));
    let tmp = util::private_dir(dest.parent().unwrap_or(Path::new(".")), &format!(".{package}.tmp-"))?;
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).ctx(format!("creating {}", root.display()))?;
    util::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root))?;
    let release = find_release(&root)?;
    let base = depmod_base(&root, &release)?;
    util::run(Command::new(&tools.depmod).arg("-b").arg(&base).arg(&release))?;
    let stamp = format!("{}\n{package}\n{version}\n{release}\n", s.name);
    std::fs::write(tmp.join("ready"), stamp).ctx("writing the kernel stamp")?;
    if dest.exists() {
        // Stale (other version) or just finished by a concurrent run.
        match load_stamp(s, dest) {
            Some(k) if k.deb_version == version => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Ok(k);
            }
            _ => std::fs::remove_dir_all(dest).ctx(format!("removing {}", dest.display()))?,
        }
    }
    util::publish_dir(&tmp)?;
    std::fs::rename(&tmp, dest).ctx(format!("renaming to {}", dest.display()))?;
    load_stamp(s, dest).ok_or_else(|| format!("unpacked {package} is incomplete"))
}

/// The kernel release: the one directory under `lib/modules`.
fn find_release(root: &Path) -> Result<String> {
    let dir = modules_parent(root).ok_or_else(|| format!("no lib/modules in {}", root.display()))?;
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .ctx(format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!("expected one kernel in {}, found {names:?}", dir.display())),
    }
}

/// `lib/modules` or, for a package built for a merged /usr, `usr/lib/modules`.
fn modules_parent(root: &Path) -> Option<PathBuf> {
    ["lib/modules", "usr/lib/modules"].iter().map(|d| root.join(d)).find(|d| d.is_dir())
}

/// The `-b` directory for depmod, which looks for `BASE/lib/modules`.
fn depmod_base(root: &Path, release: &str) -> Result<PathBuf> {
    if root.join("lib/modules").join(release).is_dir() {
        return Ok(root.to_path_buf());
    }
    // usr/lib/modules only: depmod (kmod 30) still wants lib/modules.
    std::os::unix::fs::symlink("usr/lib", root.join("lib")).ctx("linking lib -> usr/lib")?;
    Ok(root.to_path_buf())
}

/// Reads `dir/ready`; `None` unless it is a complete unpack of series `s`.
fn load_stamp(s: Series, dir: &Path) -> Option<Kernel> {
    let text = std::fs::read_to_string(dir.join("ready")).ok()?;
    let mut l = text.lines();
    let (series, package, deb_version, release) = (l.next()?, l.next()?, l.next()?, l.next()?);
    if series != s.name {
        return None;
    }
    let root = dir.join("root");
    let modules = modules_parent(&root)?.join(release);
    let vmlinuz = root.join("boot").join(format!("vmlinuz-{release}"));
    (vmlinuz.is_file() && modules.join("modules.dep").is_file()).then(|| Kernel {
        series: s.name.to_owned(),
        package: package.to_owned(),
        deb_version: deb_version.to_owned(),
        release: release.to_owned(),
        vmlinuz,
        modules,
        siw: false,
    })
}

/// A kernel given by path: `image` (a bzImage such as `/boot/vmlinuz-X`)
/// and `modules`, its module tree (`lib/modules/X`, or the `lib/modules`
/// above it). The release is the tree's directory name, checked against the
/// version string in the image when it has one. A tree without
/// `modules.dep` (as packages ship it) is indexed in a shadow tree of
/// symbolic links under `cache/modtrees/`.
pub fn from_paths(image: &Path, modules: &Path, cache: &Path, tools: &HostTools) -> Result<Kernel> {
    let image = std::fs::canonicalize(image).ctx(format!("kernel image {}", image.display()))?;
    std::fs::File::open(&image).ctx(format!(
        "cannot read the kernel image {} (Ubuntu's /boot/vmlinuz-* is readable by root only: \
         unpack the package instead, docs/VM.md)",
        image.display()
    ))?;
    let in_image = image_release(&image);
    let modules = std::fs::canonicalize(modules).ctx(format!("modules directory {}", modules.display()))?;
    let tree = release_dir(&modules, in_image.as_deref())?;
    let release = tree.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if let Some(r) = in_image.as_deref().filter(|r| *r != release) {
        return Err(format!(
            "the kernel image {} is release {r} but the modules in {} are for {release}",
            image.display(),
            tree.display()
        ));
    }
    let modules =
        if tree.join("modules.dep").is_file() { tree } else { indexed_shadow(&tree, &release, cache, tools)? };
    Ok(Kernel {
        series: release.clone(),
        package: image.display().to_string(),
        deb_version: String::new(),
        release,
        vmlinuz: image,
        modules,
        siw: false,
    })
}

/// The release directory: `modules` itself when it holds modules, else
/// its subdirectory named `release` (from the image) or its only one.
fn release_dir(modules: &Path, release: Option<&str>) -> Result<PathBuf> {
    let holds_modules = |d: &Path| d.join("modules.dep").is_file() || d.join("kernel").is_dir();
    if holds_modules(modules) {
        return Ok(modules.to_path_buf());
    }
    if let Some(d) = release.map(|r| modules.join(r)).filter(|d| holds_modules(d)) {
        return Ok(d);
    }
    let subdirs: Vec<PathBuf> = std::fs::read_dir(modules)
        .ctx(format!("reading {}", modules.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|d| holds_modules(d))
        .collect();
    match subdirs.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "{} is not a module tree (no kernel/ or modules.dep; give lib/modules/RELEASE)",
            modules.display()
        )),
    }
}

/// The release in a bzImage's setup header (`kernel_version`, the first
/// word of e.g. `6.12.57+deb12-amd64 (debian-kernel@...) #1 SMP ...`).
pub fn image_release(image: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(image).ok()?;
    let mut hdr = [0u8; 0x210];
    f.read_exact(&mut hdr).ok()?;
    if &hdr[0x202..0x206] != b"HdrS" {
        return None;
    }
    let at = u64::from(u16::from_le_bytes([hdr[0x20e], hdr[0x20f]])) + 0x200;
    let mut text = [0u8; 256];
    f.seek(SeekFrom::Start(at)).ok()?;
    let n = f.read(&mut text).ok()?;
    let s = String::from_utf8_lossy(&text[..n]);
    let word = s.split(|c: char| c == '\0' || c.is_whitespace()).next()?;
    (!word.is_empty()).then(|| word.to_owned())
}

/// A copy of `tree` made of symbolic links to its entries, with depmod's
/// indexes built in it: `cache/modtrees/<release>-<key>/lib/modules/<release>`.
/// Rebuilt when the tree's path or mtime changes.
fn indexed_shadow(tree: &Path, release: &str, cache: &Path, tools: &HostTools) -> Result<PathBuf> {
    let mtime = std::fs::metadata(tree).and_then(|m| m.modified()).ok();
    let key = Fnv::new().add(tree.as_os_str().as_encoded_bytes()).add(format!("{mtime:?}")).hex();
    let dest = cache.join("modtrees").join(format!("{release}-{key}"));
    let modules = |root: &Path| root.join("lib/modules").join(release);
    if modules(&dest).join("modules.dep").is_file() {
        return Ok(modules(&dest));
    }
    note(format!("indexing the modules of {} (depmod, in {})", tree.display(), dest.display()));
    let tmp = util::private_dir(dest.parent().unwrap_or(Path::new(".")), &format!(".{release}-{key}.tmp-"))?;
    let shadow = util::mkdir(modules(&tmp))?;
    for e in std::fs::read_dir(tree).ctx(format!("reading {}", tree.display()))?.flatten() {
        let name = e.file_name();
        if name.to_string_lossy().starts_with("modules.") && !is_source_index(&name.to_string_lossy()) {
            continue; // depmod writes its own
        }
        std::os::unix::fs::symlink(e.path(), shadow.join(&name)).ctx("linking the module tree")?;
    }
    util::run(Command::new(&tools.depmod).arg("-b").arg(&tmp).arg(release))?;
    util::publish_dir(&tmp)?;
    match std::fs::rename(&tmp, &dest) {
        Ok(()) => {}
        // A concurrent run finished first.
        Err(_) if modules(&dest).join("modules.dep").is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        Err(e) => return Err(format!("renaming to {}: {e}", dest.display())),
    }
    Ok(modules(&dest))
}

/// The `modules.*` files that are inputs of depmod (kept), not its outputs.
pub(crate) fn is_source_index(name: &str) -> bool {
    matches!(name, "modules.order" | "modules.builtin" | "modules.builtin.modinfo" | "modules.builtin.ranges")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_dir_accepts_the_tree_or_its_parent() {
        let d = crate::util::private_dir(&std::env::temp_dir(), "rverbs-vm-reltest-").unwrap();
        let tree = d.join("lib/modules/6.9.0-test");
        std::fs::create_dir_all(tree.join("kernel")).unwrap();
        assert_eq!(release_dir(&tree, None).unwrap(), tree);
        assert_eq!(release_dir(&d.join("lib/modules"), None).unwrap(), tree);
        assert_eq!(release_dir(&d.join("lib/modules"), Some("6.9.0-test")).unwrap(), tree);
        assert!(release_dir(&d, None).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn reads_no_release_from_a_non_image() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(image_release(&me), None);
    }
}
