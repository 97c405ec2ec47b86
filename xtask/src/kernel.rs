//! Debian kernels for the guests: which package a series means today,
//! downloading it (`apt-get download`), unpacking it (`dpkg-deb -x`) and
//! indexing its modules (`depmod -b`). Everything is cached under
//! `target/vm/` so a second run downloads nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::host_tools::{Apt, HostTools};
use crate::util::{self, note, Context, Result};

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
        format!("unknown kernel {name:?} (known: {})", known.join(", "))
    })
}

/// An unpacked kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub series: &'static str,
    /// The image package, e.g. `linux-image-6.1.0-57-amd64`.
    pub package: String,
    /// The package's Debian version, e.g. `6.1.158-1`.
    pub deb_version: String,
    /// `uname -r` of the kernel, e.g. `6.1.0-57-amd64`.
    pub release: String,
    pub vmlinuz: PathBuf,
    /// `lib/modules/<release>` of the unpacked package (with depmod's indexes).
    pub modules: PathBuf,
}

impl Kernel {
    /// One line naming exactly what runs.
    pub fn describe(&self) -> String {
        format!("{} ({}, Debian {})", self.package, self.release, self.deb_version)
    }
}

/// Resolves, downloads (if needed) and unpacks the current kernel of `s`.
pub fn fetch(s: Series, vm_dir: &Path, tools: &HostTools, apt: &mut Apt) -> Result<Kernel> {
    let (package, deb_version) = match resolve(s, apt) {
        Ok(found) => found,
        Err(e) => return cached_fallback(s, vm_dir, &e),
    };
    let unpacked = vm_dir.join("kernels").join(&package);
    if let Some(k) = load_stamp(s, &unpacked).filter(|k| k.deb_version == deb_version) {
        return Ok(k);
    }
    let deb = download(&package, &deb_version, &vm_dir.join("cache"))?;
    unpack(s, &deb, &unpacked, &package, &deb_version, tools)
}

/// The image package the meta-package depends on, and its candidate version.
fn resolve(s: Series, apt: &mut Apt) -> Result<(String, String)> {
    let first = depends_image(s.meta_package);
    let package = match first {
        Some(p) => p,
        None if util::is_root() && !apt.has_updated() => {
            apt.update()?;
            depends_image(s.meta_package)
                .ok_or_else(|| format!("`apt-cache depends {}` names no linux-image package", s.meta_package))?
        }
        None => {
            return Err(format!(
                "`apt-cache depends {}` names no linux-image package (apt-get update?)",
                s.meta_package
            ))
        }
    };
    let version = candidate_version(&package)?;
    Ok((package, version))
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
fn candidate_version(package: &str) -> Result<String> {
    let out = util::capture(Command::new("apt-cache").args(["show", "--no-all-versions", package]))?;
    out.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| format!("`apt-cache show {package}` has no Version"))
}

/// When apt cannot resolve the series (no package lists, offline), use the
/// newest kernel of that series already unpacked in the cache.
fn cached_fallback(s: Series, vm_dir: &Path, why: &str) -> Result<Kernel> {
    let dir = vm_dir.join("kernels");
    let mut found: Vec<Kernel> =
        std::fs::read_dir(&dir).into_iter().flatten().flatten().filter_map(|e| load_stamp(s, &e.path())).collect();
    found.sort_by(|a, b| a.deb_version.cmp(&b.deb_version));
    let k = found.pop().ok_or_else(|| format!("kernel {}: {why}; nothing cached either", s.name))?;
    note(format!("kernel {}: {why}; using the cached {}", s.name, k.package));
    Ok(k)
}

/// `apt-get download` into `cache` unless the .deb is already there.
fn download(package: &str, version: &str, cache: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(cache).ctx(format!("creating {}", cache.display()))?;
    let file = format!("{package}_{}_amd64.deb", version.replace(':', "%3a"));
    let deb = cache.join(&file);
    if deb.exists() {
        return Ok(deb);
    }
    note(format!("downloading {package} {version}"));
    let mut cmd = Command::new("apt-get");
    if util::is_root() {
        // As root apt downloads as `_apt`, which cannot write to target/.
        cmd.args(["-o", "APT::Sandbox::User=root"]);
    }
    util::run(cmd.args(["download", "-q", &format!("{package}={version}")]).current_dir(cache))?;
    if !deb.exists() {
        return Err(format!("apt-get download did not produce {}", deb.display()));
    }
    Ok(deb)
}

/// Unpacks `deb` into `dest/root`, runs depmod and writes the stamp that
/// marks the directory complete. Works in a temporary directory renamed
/// into place at the end, so an interrupted or concurrent run never leaves
/// (or sees) a half-unpacked kernel.
fn unpack(s: Series, deb: &Path, dest: &Path, package: &str, version: &str, tools: &HostTools) -> Result<Kernel> {
    note(format!("unpacking {}", deb.display()));
    let tmp = dest.with_file_name(format!(".{package}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
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
        series: s.name,
        package: package.to_owned(),
        deb_version: deb_version.to_owned(),
        release: release.to_owned(),
        vmlinuz,
        modules,
    })
}
