//! The dynamic section of an ELF64 little-endian file, without binutils,
//! and the shared libraries a program loads, found the way the loader
//! finds them: what the guest's initramfs must carry, read from the files
//! alone (`ldd` would run the program's own loader, as root, on the host).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::util::{Context, Result};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
/// `e_machine` of x86-64.
const EM_X86_64: u16 = 62;

/// What the loader reads from a file's program headers and dynamic
/// section.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dynamic {
    /// `PT_INTERP`: the program's loader.
    pub interp: Option<String>,
    /// `DT_NEEDED`, in order.
    pub needed: Vec<String>,
    /// `DT_RPATH` and `DT_RUNPATH`, split at `:`.
    pub rpath: Vec<String>,
    pub runpath: Vec<String>,
    /// `e_machine`.
    pub machine: u16,
}

/// The shared libraries `path` names as NEEDED, in order (`readelf -d`).
pub fn needed(path: &Path) -> Result<Vec<String>> {
    Ok(dynamic(path)?.needed)
}

/// Reads `path`'s [`Dynamic`].
pub fn dynamic(path: &Path) -> Result<Dynamic> {
    let b = std::fs::read(path).ctx(format!("reading {}", path.display()))?;
    parse(&b).ok_or_else(|| format!("{}: not an ELF64 little-endian file I can read", path.display()))
}

fn parse(b: &[u8]) -> Option<Dynamic> {
    if b.get(..4)? != b"\x7fELF" || *b.get(4)? != 2 || *b.get(5)? != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o.checked_add(2)?)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o.checked_add(4)?)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o.checked_add(8)?)?.try_into().ok()?));
    let c_str = |start: usize| {
        let s = b.get(start..)?;
        let len = s.iter().position(|&c| c == 0)?;
        Some(String::from_utf8_lossy(&s[..len]).into_owned())
    };
    let mut d = Dynamic { machine: u16_at(0x12)?, ..Dynamic::default() };
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let (phentsize, phnum) = (usize::from(u16_at(0x36)?), usize::from(u16_at(0x38)?));
    // (type, offset, vaddr, filesz) of each program header.
    let phdrs: Vec<(u32, u64, u64, u64)> = (0..phnum)
        .map(|i| {
            let o = phoff.checked_add(i.checked_mul(phentsize)?)?;
            Some((u32_at(o)?, u64_at(o.checked_add(8)?)?, u64_at(o.checked_add(16)?)?, u64_at(o.checked_add(32)?)?))
        })
        .collect::<Option<_>>()?;
    if let Some(&(_, off, _, _)) = phdrs.iter().find(|p| p.0 == PT_INTERP) {
        d.interp = Some(c_str(usize::try_from(off).ok()?)?);
    }
    let Some(&(_, dyn_off, _, dyn_size)) = phdrs.iter().find(|p| p.0 == PT_DYNAMIC) else {
        return Some(d); // static: needs nothing
    };
    let mut entries = Vec::new();
    let end = dyn_off.checked_add(dyn_size)?;
    let mut o = dyn_off;
    while o.checked_add(16)? <= end {
        let at = usize::try_from(o).ok()?;
        let (tag, val) = (u64_at(at)?, u64_at(at.checked_add(8)?)?);
        if tag == DT_NULL {
            break;
        }
        entries.push((tag, val));
        o += 16;
    }
    // DT_STRTAB is a virtual address: map it to a file offset via PT_LOAD.
    let strtab_va = entries.iter().find(|e| e.0 == DT_STRTAB)?.1;
    let (_, off, va, _) = phdrs.iter().find(|p| p.0 == PT_LOAD && p.2 <= strtab_va && strtab_va - p.2 < p.3)?;
    let strtab = usize::try_from(strtab_va - va).ok()?.checked_add(usize::try_from(*off).ok()?)?;
    for &(tag, val) in &entries {
        let s = || c_str(strtab.checked_add(usize::try_from(val).ok()?)?);
        match tag {
            DT_NEEDED => d.needed.push(s()?),
            DT_RPATH => d.rpath.extend(s()?.split(':').map(String::from)),
            DT_RUNPATH => d.runpath.extend(s()?.split(':').map(String::from)),
            _ => {}
        }
    }
    Some(d)
}

/// The loader's default directories on Debian's x86-64, after
/// `/etc/ld.so.conf`'s.
const DEFAULT_DIRS: [&str; 6] =
    ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"];

/// The directories `/etc/ld.so.conf` lists (one level of `include` globs
/// of the form `DIR/*.conf`, as Debian ships it).
fn conf_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let read = |text: &str, dirs: &mut Vec<PathBuf>, includes: &mut Vec<String>| {
        for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
            match line.strip_prefix("include") {
                Some(g) => includes.push(g.trim().to_owned()),
                None => dirs.push(PathBuf::from(line)),
            }
        }
    };
    let mut includes = Vec::new();
    read(&std::fs::read_to_string("/etc/ld.so.conf").unwrap_or_default(), &mut dirs, &mut includes);
    for g in includes {
        let Some(dir) = g.strip_suffix("/*.conf") else { continue };
        let mut confs: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "conf")).collect())
            .unwrap_or_default();
        confs.sort();
        for c in confs {
            read(&std::fs::read_to_string(&c).unwrap_or_default(), &mut dirs, &mut Vec::new());
        }
    }
    dirs
}

/// Every shared library `path` loads, the loader (`PT_INTERP`) included,
/// with the paths the host's loader would resolve them to: `DT_RPATH`
/// (when there is no `DT_RUNPATH`), `LD_LIBRARY_PATH`, `DT_RUNPATH`
/// (`$ORIGIN` expanded), `/etc/ld.so.conf`, then the default directories;
/// a candidate counts only if it is an x86-64 ELF64 file, as the loader
/// skips others. Empty for a static program. A NEEDED library found
/// nowhere is an error that names it.
pub fn libraries(path: &Path) -> Result<Vec<PathBuf>> {
    let conf = conf_dirs();
    let env: Vec<PathBuf> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect();
    let mut found: Vec<PathBuf> = Vec::new();
    let mut seen_names = BTreeSet::new();
    let mut queue = vec![(path.to_path_buf(), dynamic(path)?)];
    if let Some(i) = &queue[0].1.interp {
        found.push(PathBuf::from(i));
    }
    while let Some((file, d)) = queue.pop() {
        let origin = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let expand = |p: &String| PathBuf::from(p.replace("$ORIGIN", &origin.to_string_lossy()));
        let mut dirs: Vec<PathBuf> = Vec::new();
        if d.runpath.is_empty() {
            dirs.extend(d.rpath.iter().map(expand));
        }
        dirs.extend(env.iter().cloned());
        dirs.extend(d.runpath.iter().map(expand));
        dirs.extend(conf.iter().cloned());
        dirs.extend(DEFAULT_DIRS.iter().map(PathBuf::from));
        for name in &d.needed {
            if !seen_names.insert(name.clone()) {
                continue;
            }
            let hit = if name.contains('/') {
                Some(PathBuf::from(name)).filter(|p| p.is_file())
            } else {
                dirs.iter()
                    .map(|dir| dir.join(name))
                    .find(|p| p.is_file() && dynamic(p).is_ok_and(|l| l.machine == EM_X86_64))
            };
            let lib = hit.ok_or_else(|| format!("{}: library {name} not found", path.display()))?;
            let ld = dynamic(&lib)?;
            if !found.contains(&lib) {
                found.push(lib.clone());
            }
            queue.push((lib, ld));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_needed() {
        // The test binary itself is a dynamically linked Rust program.
        let me = std::env::current_exe().unwrap();
        let n = needed(&me).unwrap();
        assert!(n.iter().any(|l| l.starts_with("libc.so")), "{n:?}");
        assert!(parse(b"not an elf").is_none());
        assert!(parse(b"\x7fELF\x02\x01").is_none());
    }

    /// The same set `ldd` prints for a few host programs (when `ldd` is
    /// there to compare with).
    #[test]
    fn libraries_match_ldd() {
        let Some(ldd) = crate::util::which("ldd") else { return };
        let mut progs = vec![std::env::current_exe().unwrap()];
        for p in [
            "/bin/sh",
            "/usr/bin/python3",
            "/usr/bin/rping",
            "/usr/bin/ib_write_bw",
            "/usr/bin/rdma",
            "/usr/bin/qemu-img",
        ] {
            progs.push(PathBuf::from(p));
        }
        progs.extend(
            std::fs::read_dir("/usr/lib/x86_64-linux-gnu/libibverbs")
                .map(|r| r.flatten().map(|e| e.path()).collect::<Vec<_>>())
                .unwrap_or_default(),
        );
        for prog in progs {
            if !prog.is_file() {
                continue;
            }
            let out = std::process::Command::new(&ldd).arg(&prog).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            let want: BTreeSet<PathBuf> = text
                .lines()
                .filter_map(|l| {
                    let t = l.split_once("=>").map_or(l, |(_, t)| t).trim();
                    t.split_whitespace().next().filter(|p| p.starts_with('/')).map(|p| canon(Path::new(p)))
                })
                .collect();
            let got: BTreeSet<PathBuf> = libraries(&prog).unwrap().iter().map(|p| canon(p)).collect();
            assert_eq!(got, want, "{}", prog.display());
        }
    }

    #[test]
    fn a_static_program_loads_nothing() {
        let busybox = Path::new("/bin/busybox");
        if busybox.is_file() && dynamic(busybox).unwrap().interp.is_none() {
            assert!(libraries(busybox).unwrap().is_empty());
        }
    }
}
