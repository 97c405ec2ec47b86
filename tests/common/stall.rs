//! What a test that waited in vain leaves in its log: the queues this
//! process shares with the kernel as the kernel left them, and where its
//! threads (and siw's TX threads) sleep in the kernel.
//!
//! On rxe and siw the send, receive and completion rings are mappings of
//! `/dev/infiniband/uverbsN`, so a stalled send queue shows whether its
//! entries were taken (siw: `flags` 0) or never were (`SIW_WQE_VALID`),
//! and a completion ring whether entries wait that were not polled. On
//! mlx5 only the doorbell pages are such mappings (the rings are the
//! library's memory), and those cannot be read this way.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};

/// Non-zero 16-byte lines shown of one mapping at most.
const LINES_PER_MAPPING: usize = 96;
/// Mappings shown at most.
const MAPPINGS: usize = 48;
/// Bytes read of one mapping at most.
const MAPPING_BYTES: u64 = 1 << 20;

/// The report: each uverbs mapping of this process (its range and mmap
/// offset, the provider's key for the queue) with its non-zero 16-byte
/// lines, copied through `/proc/self/mem` into our own buffer (never a
/// reference into memory the kernel writes); then the kernel stack of
/// each of our threads and of each siw kernel thread (readable as root).
pub fn report() -> String {
    let mut r = String::from("---- stall report: uverbs mappings of this process\n");
    let maps = fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let uverbs: Vec<&str> = maps.lines().filter(|l| l.contains("/dev/infiniband/uverbs")).collect();
    let _ = writeln!(r, "{} mappings", uverbs.len());
    let mut mem = File::open("/proc/self/mem").ok();
    for line in uverbs.iter().take(MAPPINGS) {
        mapping(&mut r, line, mem.as_mut());
    }
    r.push_str("---- kernel stacks\n");
    for task in dir_names("/proc/self/task") {
        stack(&mut r, &format!("/proc/self/task/{task}"));
    }
    for pid in dir_names("/proc").into_iter().filter(|p| p.bytes().all(|b| b.is_ascii_digit())) {
        if fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("siw")) {
            stack(&mut r, &format!("/proc/{pid}"));
        }
    }
    r
}

/// One `/proc/self/maps` line and its non-zero lines.
fn mapping(r: &mut String, line: &str, mem: Option<&mut File>) {
    let f: Vec<&str> = line.split_whitespace().collect();
    let (Some(range), Some(key)) = (f.first(), f.get(2)) else { return };
    let _ = writeln!(r, "-- {range} key {key}");
    let Some((start, end)) = range.split_once('-') else { return };
    let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16)) else { return };
    let mut buf = vec![0u8; end.saturating_sub(start).min(MAPPING_BYTES) as usize];
    let read = match mem {
        Some(m) => m.seek(SeekFrom::Start(start)).and_then(|_| m.read_exact(&mut buf)),
        None => Err(io::Error::from(io::ErrorKind::NotFound)),
    };
    if let Err(e) = read {
        let _ = writeln!(r, "   not readable: {e}");
        return;
    }
    let lines = buf.chunks(16).enumerate().filter(|(_, c)| c.iter().any(|&b| b != 0));
    for (i, chunk) in lines.take(LINES_PER_MAPPING) {
        let _ = writeln!(r, "   {:06x} {}", i * 16, hex(chunk));
    }
}

/// `bytes` as the report writes them: two hex digits each, spaced.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

/// A thread's name and kernel stack.
fn stack(r: &mut String, dir: &str) {
    let comm = fs::read_to_string(format!("{dir}/comm")).unwrap_or_default();
    let _ = writeln!(r, "-- {dir} {}", comm.trim());
    match fs::read_to_string(format!("{dir}/stack")) {
        Ok(s) => r.push_str(&s),
        Err(e) => {
            let _ = writeln!(r, "   stack not readable: {e}");
        }
    }
}

/// The entries of a directory, by name.
fn dir_names(dir: &str) -> Vec<String> {
    let Ok(rd) = fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<String> = rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    v.sort();
    v
}
