//! `DT_NEEDED` of an ELF64 little-endian file (what `readelf -d` lists as
//! NEEDED), without binutils.

use std::path::Path;

use crate::util::{Context, Result};

const PT_DYNAMIC: u32 = 2;
const PT_LOAD: u32 = 1;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;

/// The shared libraries `path` names as NEEDED, in order.
pub fn needed(path: &Path) -> Result<Vec<String>> {
    let b = std::fs::read(path).ctx(format!("reading {}", path.display()))?;
    parse_needed(&b).ok_or_else(|| format!("{}: not an ELF64 little-endian file I can read", path.display()))
}

fn parse_needed(b: &[u8]) -> Option<Vec<String>> {
    if b.get(..4)? != b"\x7fELF" || *b.get(4)? != 2 || *b.get(5)? != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
    let phoff = u64_at(0x20)? as usize;
    let (phentsize, phnum) = (u16_at(0x36)?, u16_at(0x38)?);
    // (type, offset, vaddr, filesz) of each program header.
    let phdrs: Vec<(u32, u64, u64, u64)> = (0..phnum)
        .map(|i| {
            let o = phoff + i * phentsize;
            Some((u32_at(o)?, u64_at(o + 8)?, u64_at(o + 16)?, u64_at(o + 32)?))
        })
        .collect::<Option<_>>()?;
    let Some(&(_, dyn_off, _, dyn_size)) = phdrs.iter().find(|p| p.0 == PT_DYNAMIC) else {
        return Some(Vec::new()); // static: needs nothing
    };
    let mut entries = Vec::new();
    let mut o = dyn_off as usize;
    while o + 16 <= (dyn_off + dyn_size) as usize {
        let (tag, val) = (u64_at(o)?, u64_at(o + 8)?);
        if tag == DT_NULL {
            break;
        }
        entries.push((tag, val));
        o += 16;
    }
    // DT_STRTAB is a virtual address: map it to a file offset via PT_LOAD.
    let strtab_va = entries.iter().find(|e| e.0 == DT_STRTAB)?.1;
    let (_, off, va, _) = phdrs.iter().find(|p| p.0 == PT_LOAD && p.2 <= strtab_va && strtab_va < p.2 + p.3)?;
    let strtab = (strtab_va - va + off) as usize;
    entries
        .iter()
        .filter(|e| e.0 == DT_NEEDED)
        .map(|e| {
            let start = strtab + e.1 as usize;
            let len = b.get(start..)?.iter().position(|&c| c == 0)?;
            Some(String::from_utf8_lossy(&b[start..start + len]).into_owned())
        })
        .collect()
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
        assert!(parse_needed(b"not an elf").is_none());
    }
}
