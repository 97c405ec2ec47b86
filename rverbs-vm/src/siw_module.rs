//! siw (soft-iWARP) for kernels that do not ship it.
//!
//! Debian builds its kernels without `CONFIG_RDMA_SIW`, but the driver
//! builds out of tree from the same upload's `linux-source-X` against its
//! `linux-headers-<release>`. [`with_siw`] does that once per kernel
//! release and Debian version, on a fresh Debian 12 host:
//!
//! 1. `apt-get download` of `linux-source-<series>`,
//!    `linux-headers-<release>` and the packages its headers need
//!    (`linux-headers-*-common`, `linux-kbuild-*`), into a private
//!    directory; nothing is installed (an apt install of the 6.12 headers
//!    would pull the 6.12 image onto the host);
//! 2. `dpkg-deb -x` of the headers, whose one-line `Makefile` is pointed at
//!    the private copy of `-common` (the other links are relative), and of
//!    the source, from whose tarball only `drivers/infiniband/sw/siw/` is
//!    taken, its `Makefile` used as `Kbuild`;
//! 3. `make -C <headers> M=<dir> CONFIG_RDMA_SIW=m
//!    CONFIG_DEBUG_INFO_BTF_MODULES= modules` with the kernel's own
//!    compiler (`CONFIG_CC_VERSION_TEXT`, gcc-12 on Debian 12; installed
//!    with make, binutils and xz through apt when missing);
//! 4. the module is stripped of debug info (as Debian's are), its
//!    `vermagic` is checked against the release, and the kernel's module
//!    tree is copied as symbolic links with `extra/siw.ko` added and
//!    depmod's indexes rebuilt.
//!
//! The result lives in `cache/siw/<release>/` (`ready` names the Debian
//! version it was built for), so a second run downloads and builds nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::host_tools::{self, Apt, HostTools};
use crate::kernel::{self, Kernel};
use crate::util::{self, note, Context, Result};

/// Modules the guest loads for siw, in order: libcrc32c (a dependency of
/// siw) needs the crypto API's "crc32c" at init, which Debian builds as a
/// module (`crc32c_generic`) that nothing in modules.dep pulls in, the
/// same trap as rxe's `crc32_generic`.
pub const GUEST_MODULES: &[&str] = &["crc32c_generic", "siw"];

/// Bumped whenever the build recipe changes, so cached modules are rebuilt.
const RECIPE: &str = "siw-recipe-2";

/// Where siw.ko goes in the module tree (modules.dep names it so).
const MODULE_PATH: &str = "extra/siw.ko";

/// The driver's directory in a kernel source tree.
const SIW_DIR: &str = "drivers/infiniband/sw/siw";

/// `k` with siw in its module tree ([`Kernel::siw`] set): a tree that
/// already has it (a kernel given by path that ships siw) is used as it is;
/// a Debian kernel gets the module built (once) as the module doc says.
/// Every error is one line naming the step that failed.
pub fn with_siw(k: &Kernel, cache: &Path, tools: &HostTools, apt: &mut Apt) -> Result<Kernel> {
    if has_module(&k.modules, "siw") {
        return Ok(Kernel { siw: true, ..k.clone() });
    }
    if k.deb_version.is_empty() {
        return Err(format!(
            "siw for {}: its module tree has no siw.ko, and siw is built only for Debian's kernels \
             (--kernel 6.1|6.12); build the kernel with CONFIG_RDMA_SIW=m",
            k.release
        ));
    }
    let dest = cache.join("siw").join(&k.release);
    if let Some(tree) = load_stamp(&dest, k) {
        return Ok(Kernel { modules: tree, siw: true, ..k.clone() });
    }
    build(k, &dest, tools, apt).map_err(|e| format!("siw for {}: {e}", k.release))
}

/// True when `modules.dep` in `tree` lists module `name`.
fn has_module(tree: &Path, name: &str) -> bool {
    let dep = std::fs::read_to_string(tree.join("modules.dep")).unwrap_or_default();
    dep.lines().filter_map(|l| l.split_once(':')).any(|(file, _)| module_stem(file) == name)
}

/// `kernel/x/siw.ko.xz` -> `siw`.
fn module_stem(file: &str) -> &str {
    let base = file.rsplit('/').next().unwrap_or(file);
    base.split(".ko").next().unwrap_or(base)
}

/// What `ready` holds: the recipe, the kernel's release and Debian version.
fn stamp_text(k: &Kernel) -> String {
    format!("{RECIPE}\n{}\n{}\n", k.release, k.deb_version)
}

/// The module tree in `dest` when its stamp matches `k` and it is complete.
fn load_stamp(dest: &Path, k: &Kernel) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dest.join("ready")).ok()?;
    let tree = dest.join("root/lib/modules").join(&k.release);
    (text == stamp_text(k) && tree.join(MODULE_PATH).is_file() && tree.join("modules.dep").is_file()).then_some(tree)
}

/// Downloads, builds, checks and publishes; see the module doc.
fn build(k: &Kernel, dest: &Path, tools: &HostTools, apt: &mut Apt) -> Result<Kernel> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    let work = util::private_dir(parent, ".build-")?;
    let result = build_in(k, &work, tools, apt);
    let done = result.and_then(|out| publish(k, &out, dest));
    let _ = std::fs::remove_dir_all(&work);
    done
}

/// Steps 1-4 in the private directory `work`; returns the directory to
/// publish (`work/out`, holding `root/lib/modules/<release>` and `ready`).
fn build_in(k: &Kernel, work: &Path, tools: &HostTools, apt: &mut Apt) -> Result<PathBuf> {
    if work.to_string_lossy().contains(char::is_whitespace) {
        return Err(format!("make cannot build in {} (a path with blanks): set RVERBS_VM_CACHE", work.display()));
    }
    let series = series_of(k)?;
    let headers = format!("linux-headers-{}", k.release);
    let debs = util::mkdir(work.join("debs"))?;
    let mut packages = vec![(headers.clone(), k.deb_version.clone())];
    packages.extend(header_dependencies(&headers, &k.deb_version)?);
    packages.push((format!("linux-source-{series}"), k.deb_version.clone()));
    note(format!(
        "siw for {}: downloading {} (about 150 MB)",
        k.release,
        packages.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>().join(" ")
    ));
    let mut files = Vec::new();
    for (p, v) in &packages {
        files.push(kernel::download(p, v, &debs).ctx(format!("downloading {p} {v}"))?);
    }
    let (source_deb, header_debs) = files.split_last().expect("at least the source");

    let hroot = util::mkdir(work.join("headers"))?;
    for d in header_debs {
        util::run(Command::new("dpkg-deb").arg("-x").arg(d).arg(&hroot))?;
    }
    let hdir = hroot.join("usr/src").join(&headers);
    let makefile = hdir.join("Makefile");
    let text = std::fs::read_to_string(&makefile).ctx(format!("reading {}", makefile.display()))?;
    std::fs::write(&makefile, rewrite_include(&text, &hroot)?).ctx(format!("writing {}", makefile.display()))?;
    let config = std::fs::read_to_string(hdir.join(".config")).ctx("reading the headers' .config")?;
    let compiler =
        compiler_of(&config).ok_or_else(|| format!("no CONFIG_CC_VERSION_TEXT in {}/.config", hdir.display()))?;
    ensure_build_tools(&compiler, apt)?;

    note(format!("siw for {}: extracting {SIW_DIR} from {}", k.release, file_name(source_deb)));
    let sroot = util::mkdir(work.join("source"))?;
    util::run(Command::new("dpkg-deb").arg("-x").arg(source_deb).arg(&sroot))?;
    let _ = std::fs::remove_file(source_deb);
    let tarball = find_tarball(&sroot.join("usr/src"))?;
    let top = file_name(&tarball).trim_end_matches(".tar.xz").to_owned();
    let mdir = util::mkdir(work.join("siw"))?;
    let depth = SIW_DIR.split('/').count() + 1;
    util::run(
        Command::new("tar")
            .arg("-xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(&mdir)
            .arg(format!("--strip-components={depth}"))
            .arg(format!("{top}/{SIW_DIR}")),
    )?;
    let _ = std::fs::remove_dir_all(&sroot);
    let mk = std::fs::read_to_string(mdir.join("Makefile")).ctx(format!("{top} has no {SIW_DIR}/Makefile"))?;
    std::fs::write(mdir.join("Kbuild"), kbuild(&mk)?).ctx("writing Kbuild")?;
    std::fs::remove_file(mdir.join("Makefile")).ctx("removing the siw Makefile")?;

    note(format!("siw for {}: building siw.ko with {compiler}", k.release));
    let log_path = work.join("make.log");
    let log = util::create_fresh(&log_path)?;
    let err = log.try_clone().ctx("duplicating the log file")?;
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(&hdir)
        .arg(format!("M={}", mdir.display()))
        .args(["-j2", "CONFIG_RDMA_SIW=m", "CONFIG_DEBUG_INFO_BTF_MODULES=", "modules"])
        .stdout(log)
        .stderr(err);
    if let Err(e) = util::run(&mut make) {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(format!("{e}: {}", tail.join(" | ")));
    }
    let ko = mdir.join("siw.ko");
    if !ko.is_file() {
        return Err("make succeeded but left no siw.ko".into());
    }
    // Like Debian's own modules: 5.3 MB with debug info, 0.3 MB without,
    // which the guests' initramfs carries and unpacks at every boot.
    util::run(Command::new("strip").arg("--strip-debug").arg(&ko))?;
    let bytes = std::fs::read(&ko).ctx(format!("reading {}", ko.display()))?;
    check_vermagic(&bytes, &k.release)?;

    let out = util::mkdir(work.join("out"))?;
    let tree = util::mkdir(out.join("root/lib/modules").join(&k.release))?;
    link_tree(&k.modules, &tree)?;
    util::mkdir(tree.join("extra"))?;
    std::fs::copy(&ko, tree.join(MODULE_PATH)).ctx("copying siw.ko")?;
    util::run(Command::new(&tools.depmod).arg("-b").arg(out.join("root")).arg(&k.release))?;
    if !has_module(&tree, "siw") {
        return Err(format!("depmod did not index {MODULE_PATH} in {}", tree.display()));
    }
    std::fs::write(out.join("ready"), stamp_text(k)).ctx("writing the siw stamp")?;
    Ok(out)
}

/// Moves the finished `out` to `dest` (replacing a stale one; a concurrent
/// run that finished first wins) and returns the kernel with it.
fn publish(k: &Kernel, out: &Path, dest: &Path) -> Result<Kernel> {
    if load_stamp(dest, k).is_none() && dest.exists() {
        std::fs::remove_dir_all(dest).ctx(format!("removing {}", dest.display()))?;
    }
    if !dest.exists() {
        util::publish_dir(out)?;
        std::fs::rename(out, dest).ctx(format!("renaming to {}", dest.display()))?;
    }
    let tree = load_stamp(dest, k).ok_or_else(|| format!("{} is incomplete", dest.display()))?;
    note(format!("siw for {}: built {}", k.release, tree.join(MODULE_PATH).display()));
    Ok(Kernel { modules: tree, siw: true, ..k.clone() })
}

/// The series whose `linux-source-<series>` matches `k` (`6.1`, `6.12`).
fn series_of(k: &Kernel) -> Result<&str> {
    kernel::SERIES
        .iter()
        .map(|s| s.name)
        .find(|s| *s == k.series)
        .ok_or_else(|| format!("no Debian source package known for series {:?}", k.series))
}

/// The packages `linux-headers-<release>` depends on that hold its build
/// tree (`linux-headers-*-common`, `linux-kbuild-*`), each with the version
/// it pins (`(= V)`) or else apt's candidate.
fn header_dependencies(headers: &str, version: &str) -> Result<Vec<(String, String)>> {
    let out = util::capture(Command::new("apt-cache").args(["show", &format!("{headers}={version}")]))
        .ctx(format!("apt knows no {headers} {version} (run apt-get update as root)"))?;
    let depends = out.lines().find_map(|l| l.strip_prefix("Depends:")).unwrap_or("");
    let mut found = Vec::new();
    for (name, pinned) in build_dependencies(depends) {
        let v = match pinned {
            Some(v) => v,
            None => kernel::candidate_version(&name)?,
        };
        found.push((name, v));
    }
    if !found.iter().any(|(n, _)| n.ends_with("-common")) {
        return Err(format!("{headers} {version} depends on no linux-headers-*-common package: {depends}"));
    }
    Ok(found)
}

/// From a `Depends:` field: the `linux-headers-*` and `linux-kbuild-*`
/// packages with their pinned version (`(= V)`), if any. Alternatives
/// (`a | b`) take their first package.
fn build_dependencies(depends: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for item in depends.split(',') {
        let first = item.split('|').next().unwrap_or("").trim();
        let name = first.split_whitespace().next().unwrap_or("");
        if !(name.starts_with("linux-headers-") || name.starts_with("linux-kbuild-")) {
            continue;
        }
        let pinned = first
            .split_once('(')
            .and_then(|(_, r)| r.trim_end_matches(')').trim().strip_prefix('='))
            .map(|v| v.trim().to_owned());
        out.push((name.to_owned(), pinned));
    }
    out
}

/// The headers' `Makefile` is one line, `include
/// /usr/src/linux-headers-X-common/Makefile`: points it at the copy under
/// `root` (the private unpack).
fn rewrite_include(makefile: &str, root: &Path) -> Result<String> {
    let mut out = String::new();
    let mut changed = 0;
    for line in makefile.lines() {
        match line.strip_prefix("include /usr/src/") {
            Some(rest) => {
                out.push_str(&format!("include {}/usr/src/{rest}\n", root.display()));
                changed += 1;
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    if changed != 1 {
        return Err(format!("expected one `include /usr/src/...` line in the headers' Makefile, found {changed}"));
    }
    Ok(out)
}

/// The compiler the kernel was built with: the first word of
/// `CONFIG_CC_VERSION_TEXT` (`gcc-12` on 6.1, `x86_64-linux-gnu-gcc-12`
/// on 6.12), without the target prefix: Debian's package name.
fn compiler_of(config: &str) -> Option<String> {
    let text = config.lines().find_map(|l| l.strip_prefix("CONFIG_CC_VERSION_TEXT="))?;
    let word = text.trim_matches('"').split_whitespace().next()?;
    let word = word.strip_prefix("x86_64-linux-gnu-").unwrap_or(word);
    word.starts_with("gcc").then(|| word.to_owned())
}

/// The siw `Makefile` as `Kbuild`: it must build `siw.o` from
/// `CONFIG_RDMA_SIW` (set to `m` on make's command line).
fn kbuild(makefile: &str) -> Result<String> {
    let ok = makefile.lines().any(|l| {
        let l = l.replace(' ', "");
        l.starts_with("obj-$(CONFIG_RDMA_SIW)+=siw.o")
    });
    if !ok {
        return Err("the siw Makefile does not build siw.o from CONFIG_RDMA_SIW".into());
    }
    Ok(makefile.to_owned())
}

/// Checks that `ko`'s `vermagic=` (in `.modinfo`) starts with `release`:
/// the kernel refuses any other.
fn check_vermagic(ko: &[u8], release: &str) -> Result<()> {
    let vermagic = modinfo(ko, "vermagic").ok_or("siw.ko has no vermagic")?;
    if vermagic.split_whitespace().next() != Some(release) {
        return Err(format!("siw.ko has vermagic {vermagic:?}, the kernel is {release}"));
    }
    Ok(())
}

/// A `key=value` string of a module's `.modinfo` (NUL-separated).
fn modinfo(ko: &[u8], key: &str) -> Option<String> {
    let needle = format!("{key}=");
    ko.split(|&b| b == 0)
        .find_map(|s| s.strip_prefix(needle.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Links every entry of the module tree `from` into `to`, except depmod's
/// outputs (`modules.dep` and its indexes), which depmod rewrites.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    for e in std::fs::read_dir(from).ctx(format!("reading {}", from.display()))? {
        let e = e.ctx("readdir")?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "extra" {
            return Err(format!("{} already has an extra/ directory", from.display()));
        }
        if name.starts_with("modules.") && !kernel::is_source_index(&name) {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), to.join(&name)).ctx("linking the module tree")?;
    }
    Ok(())
}

/// The one `linux-source-*.tar.xz` in `dir`.
fn find_tarball(dir: &Path) -> Result<PathBuf> {
    std::fs::read_dir(dir)
        .ctx(format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| file_name(p).starts_with("linux-source-") && file_name(p).ends_with(".tar.xz"))
        .ok_or_else(|| format!("no linux-source-*.tar.xz in {}", dir.display()))
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Host programs the build runs, with the Debian package of each:
/// `compiler` (`gcc-12`, package of the same name, which also has the
/// target-prefixed name 6.12's headers use with
/// `CROSS_COMPILE=x86_64-linux-gnu-`), make, the binutils, xz for the
/// source tarball, dpkg-deb.
fn build_needs(compiler: &str) -> Vec<(String, String)> {
    let pair = |p: &str, k: &str| (p.to_owned(), k.to_owned());
    vec![
        pair(compiler, compiler),
        pair(&format!("x86_64-linux-gnu-{compiler}"), compiler),
        pair("make", "make"),
        pair("ld", "binutils"),
        pair("x86_64-linux-gnu-ld", "binutils"),
        pair("strip", "binutils"),
        pair("xz", "xz-utils"),
        pair("tar", "tar"),
        pair("dpkg-deb", "dpkg"),
    ]
}

/// The kbuild tools (modpost, fixdep...) load libelf (iproute2 brings it
/// too).
const LIBELF: &str = "/usr/lib/x86_64-linux-gnu/libelf.so.1";

/// Installs what the build lacks through `apt` (as root), or fails with
/// the line to run.
fn ensure_build_tools(compiler: &str, apt: &mut Apt) -> Result<()> {
    let mut missing: Vec<String> = Vec::new();
    for (program, package) in build_needs(compiler) {
        if util::which(&program).is_none() && !missing.contains(&package) {
            missing.push(package);
        }
    }
    if !Path::new(LIBELF).exists() {
        missing.push("libelf1".into());
    }
    let missing: Vec<&str> = missing.iter().map(String::as_str).collect();
    host_tools::install_or_say(apt, &missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(release: &str, version: &str) -> Kernel {
        Kernel {
            series: "6.1".into(),
            package: format!("linux-image-{release}"),
            deb_version: version.into(),
            release: release.into(),
            vmlinuz: PathBuf::from("/nonexistent/vmlinuz"),
            modules: PathBuf::from("/nonexistent/modules"),
            siw: false,
        }
    }

    #[test]
    fn points_the_headers_at_the_private_copy() {
        let mk = "include /usr/src/linux-headers-6.1.0-57-common/Makefile\n";
        let out = rewrite_include(mk, Path::new("/c/siw/.build-1/headers")).unwrap();
        assert_eq!(out, "include /c/siw/.build-1/headers/usr/src/linux-headers-6.1.0-57-common/Makefile\n");
        assert!(rewrite_include("all:\n\ttrue\n", Path::new("/x")).is_err(), "no include line");
        assert!(rewrite_include(&format!("{mk}{mk}"), Path::new("/x")).is_err(), "two include lines");
    }

    #[test]
    fn kbuild_needs_the_siw_object() {
        let mk = "# SPDX\nobj-$(CONFIG_RDMA_SIW) += siw.o\n\nsiw-y := \\\n\tsiw_cm.o \\\n\tsiw_cq.o\n";
        assert_eq!(kbuild(mk).unwrap(), mk);
        assert!(kbuild("obj-$(CONFIG_RDMA_RXE) += rdma_rxe.o\n").is_err());
    }

    #[test]
    fn vermagic_must_name_the_release() {
        let mut ko = b"\x7fELF....\0license=Dual BSD/GPL\0depends=ib_core,libcrc32c\0".to_vec();
        ko.extend_from_slice(b"vermagic=6.1.0-57-amd64 SMP preempt mod_unload modversions \0name=siw\0");
        check_vermagic(&ko, "6.1.0-57-amd64").unwrap();
        let e = check_vermagic(&ko, "6.12.118+deb12-amd64").unwrap_err();
        assert!(e.contains("6.1.0-57-amd64 SMP") && e.contains("6.12.118+deb12-amd64"), "{e}");
        assert!(check_vermagic(&ko, "6.1.0-57").is_err(), "a prefix of the release is not the release");
        assert!(check_vermagic(b"no modinfo here", "6.1.0-57-amd64").is_err());
        assert_eq!(modinfo(&ko, "depends").as_deref(), Some("ib_core,libcrc32c"));
    }

    #[test]
    fn reads_the_compiler_and_the_header_packages() {
        let config = "CONFIG_CC_VERSION_TEXT=\"gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0\"\nCONFIG_CC_IS_GCC=y\n";
        assert_eq!(compiler_of(config).as_deref(), Some("gcc-12"));
        assert_eq!(compiler_of("CONFIG_CC_VERSION_TEXT=\"clang 16\"\n"), None);
        let c612 = "CONFIG_CC_VERSION_TEXT=\"x86_64-linux-gnu-gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0\"\n";
        assert_eq!(compiler_of(c612).as_deref(), Some("gcc-12"));
        let d61 = "linux-headers-6.1.0-57-common (= 6.1.192-3), linux-kbuild-6.1 (>= 6.1.192-3), \
                   linux-compiler-gcc-12-x86";
        assert_eq!(
            build_dependencies(d61),
            vec![
                ("linux-headers-6.1.0-57-common".to_owned(), Some("6.1.192-3".to_owned())),
                ("linux-kbuild-6.1".to_owned(), None),
            ]
        );
        let d612 = "linux-base (>= 4.12~), linux-headers-6.12.118+deb12-common (= 6.12.118-1~deb12u1), \
                    linux-image-6.12.118+deb12-amd64 (= 6.12.118-1~deb12u1) | linux-image-6.12.118+deb12-amd64-unsigned \
                    (= 6.12.118-1~deb12u1), linux-kbuild-6.12.118+deb12, gcc-12";
        let b = build_dependencies(d612);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!(b[0], ("linux-headers-6.12.118+deb12-common".into(), Some("6.12.118-1~deb12u1".into())));
        assert_eq!(b[1], ("linux-kbuild-6.12.118+deb12".into(), None));
    }

    /// The cache is keyed by release (the directory) and Debian version
    /// (the stamp): another upload of the same release is rebuilt.
    #[test]
    fn the_cache_is_keyed_by_release_and_version() {
        let dir = util::private_dir(&std::env::temp_dir(), "rverbs-vm-siwtest-").unwrap();
        let k = kernel("6.1.0-57-amd64", "6.1.192-3");
        let dest = dir.join("siw").join(&k.release);
        let tree = dest.join("root/lib/modules").join(&k.release);
        std::fs::create_dir_all(tree.join("extra")).unwrap();
        std::fs::write(tree.join(MODULE_PATH), "ko").unwrap();
        std::fs::write(tree.join("modules.dep"), "extra/siw.ko:\n").unwrap();
        assert_eq!(load_stamp(&dest, &k), None, "no stamp, no cache");
        std::fs::write(dest.join("ready"), stamp_text(&k)).unwrap();
        assert_eq!(load_stamp(&dest, &k), Some(tree.clone()));
        assert!(has_module(&tree, "siw"));
        assert_eq!(load_stamp(&dest, &kernel("6.1.0-57-amd64", "6.1.192-4")), None, "a new upload");
        std::fs::remove_file(tree.join(MODULE_PATH)).unwrap();
        assert_eq!(load_stamp(&dest, &k), None, "an incomplete tree");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_kernel_by_path_without_siw_says_so() {
        let dir = util::private_dir(&std::env::temp_dir(), "rverbs-vm-siwpath-").unwrap();
        std::fs::write(dir.join("modules.dep"), "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko:\n").unwrap();
        let mut k = kernel("6.9.0-test", "");
        k.modules = dir.clone();
        let tools = HostTools {
            qemu: "/q".into(),
            busybox: "/b".into(),
            kmod: "/k".into(),
            depmod: "/d".into(),
            gzip: None,
            guest_programs: Vec::new(),
            verbs_providers: Vec::new(),
            siw_provider: Vec::new(),
            pyverbs: None,
        };
        let e = with_siw(&k, &dir, &tools, &mut Apt::read_only()).unwrap_err();
        assert!(e.contains("siw for 6.9.0-test") && e.contains("CONFIG_RDMA_SIW=m") && !e.contains('\n'), "{e}");
        std::fs::write(dir.join("modules.dep"), "kernel/drivers/infiniband/sw/siw/siw.ko.xz: x\n").unwrap();
        let with = with_siw(&k, &dir, &tools, &mut Apt::read_only()).unwrap();
        assert!(with.siw && with.modules == dir);
        assert!(build_needs("gcc-12").iter().any(|(p, k)| p == "x86_64-linux-gnu-gcc-12" && k == "gcc-12"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
