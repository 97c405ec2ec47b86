//! Memory the HCA reaches by DMA and that this provider allocates: queue
//! buffers ([`DmaBuf`]) and doorbell records ([`DbRec`], carved out of
//! shared pages by [`DbRecPool`]).
//!
//! Unsafe code (allowed below): the HCA writes CQ buffers and may read or
//! write every byte of these allocations at any time while the kernel
//! object exists, so they are only reached through raw pointers; never a
//! `&[u8]`/`&mut [u8]`. Doorbell records are written with single atomic
//! 32-bit stores (the HCA reads them as big-endian words): the poster, the
//! poller and the control path (`QpShared::on_state_change`) may store
//! the same record from different threads, and only atomics make that no
//! data race. A Relaxed atomic store is the same `mov` as a volatile one
//! on x86_64 (and `str` on aarch64); the ordering against the queue
//! memory comes from the explicit `barrier::` calls before each store.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::MmapRaw;

use crate::sys::event::{anon_pages, page_size};
use crate::{Errno, Error, Result};

/// A page-aligned, zeroed buffer of anonymous memory handed to the HCA
/// (its address goes into the create command's driver data, the kernel
/// pins it). Dropping it unmaps it: only drop after the kernel object that
/// uses it is destroyed.
#[derive(Debug)]
pub struct DmaBuf {
    map: std::mem::ManuallyDrop<MmapRaw>,
    len: usize,
    /// The process that mapped it: in a forked child the pages are absent
    /// (`MADV_DONTFORK`), and the address may hold a mapping of the child's
    /// own by the time this drops, so the child forgets instead of unmapping.
    owner: u32,
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        if std::process::id() == self.owner {
            // SAFETY: dropped once, here; `map` is not used after this.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.map) };
        }
    }
}

impl DmaBuf {
    /// `len` bytes rounded up to whole pages (at least one page), zeroed.
    pub fn new(verb: &'static str, len: usize) -> Result<DmaBuf> {
        let ps = page_size();
        let len = len.max(1).div_ceil(ps) * ps;
        let map = anon_pages(len).map_err(|e| {
            Error::os(verb, Errno::from_raw(e.raw_os_error().unwrap_or(Errno::ENOMEM as i32)))
                .with_message(format!("cannot allocate {len} bytes of queue memory"))
        })?;
        dont_fork(&map).map_err(|e| {
            Error::os(verb, e).with_message(format!("cannot exclude {len} bytes of queue memory from fork()"))
        })?;
        Ok(DmaBuf { map: std::mem::ManuallyDrop::new(map), len, owner: std::process::id() })
    }

    /// The start (page aligned).
    #[inline(always)]
    pub fn ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// The start as the address the kernel is given.
    pub fn addr(&self) -> u64 {
        self.ptr() as u64
    }

    /// Length in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }
}

/// `madvise(MADV_DONTFORK)` on a fresh mapping, as rdma-core's
/// `ibv_fork_init` / `ibv_dontfork_range` does for all memory the HCA
/// reaches: a child of `fork()` gets no copy of it, so the parent's next
/// write never copy-on-writes its page away from the one the kernel pinned
/// for the device (kernels before 5.13 pin without fork-safe COW). The
/// child could not use these queues anyway.
fn dont_fork(map: &MmapRaw) -> Result<(), Errno> {
    // Miri runs the host tests but has no `madvise`; nothing forks there.
    if cfg!(miri) {
        return Ok(());
    }
    let Some(addr) = core::ptr::NonNull::new(map.as_mut_ptr().cast::<core::ffi::c_void>()) else {
        return Err(Errno::EINVAL);
    };
    // SAFETY: `addr..addr + len` is exactly the mapping `map` owns (page
    // aligned, whole pages); MADV_DONTFORK only changes what `fork()`
    // copies, not the contents or the mapping of this process.
    unsafe { nix::sys::mman::madvise(addr, map.len(), nix::sys::mman::MmapAdvise::MADV_DONTFORK) }
}

/// One page of doorbell records.
#[derive(Debug)]
struct DbPage {
    buf: DmaBuf,
    free: Vec<u16>,
}

/// Doorbell-record pages, shared by the CQs, QPs and SRQs of a context, one
/// `cache_line_size` slot per record (rdma-core `dbrec.c`). The kernel pins
/// the whole page containing a record (once per page, refcounted), so a
/// record never crosses a page. Pages stay until the pool goes (the pool
/// lives as long as any record of it).
///
/// The HCA reads the first 8 bytes of a slot (the record's two words). A CQ
/// keeps its poll gate (`Gate`) in bytes 8..12 of its own slot, which the
/// HCA never reads: slots are therefore at least 16 bytes apart.
#[derive(Debug)]
pub struct DbRecPool {
    stride: usize,
    pages: Mutex<Vec<DbPage>>,
}

impl DbRecPool {
    /// A pool handing out records `stride` bytes apart (the context's
    /// `cache_line_size`; at least 16, a power of two, at most a page).
    pub fn new(stride: usize) -> Arc<DbRecPool> {
        let stride = stride.clamp(16, page_size()).next_power_of_two();
        Arc::new(DbRecPool { stride, pages: Mutex::new(Vec::new()) })
    }

    /// A zeroed record (both 32-bit words 0).
    pub fn alloc(self: &Arc<Self>, verb: &'static str) -> Result<DbRec> {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        let found = pages.iter().position(|p| !p.free.is_empty());
        let page = match found {
            Some(i) => i,
            None => {
                let buf = DmaBuf::new(verb, page_size())?;
                let n = (buf.len() / self.stride) as u16;
                pages.push(DbPage { buf, free: (0..n).rev().collect() });
                pages.len() - 1
            }
        };
        let p = &mut pages[page];
        let slot = p.free.pop().expect("page with a free slot") as usize;
        // SAFETY: `slot * stride + 16 <= page length` (slots were counted
        // from the length, stride >= 16); the page lives as long as the pool,
        // which the record keeps alive.
        let ptr = unsafe { p.buf.ptr().add(slot * self.stride) }.cast::<u32>();
        let rec = DbRec { pool: self.clone(), page, slot, ptr };
        rec.store(0, 0);
        rec.store(1, 0);
        rec.gate().close();
        Ok(rec)
    }

    fn release(&self, page: usize, slot: usize) {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        pages[page].free.push(slot as u16);
    }
}

/// One doorbell record: two big-endian 32-bit words the HCA reads (QP:
/// `[0]` receive counter, `[1]` send counter; CQ: `[0]` consumer index,
/// `[1]` arm word; SRQ: `[0]` counter). Returned to its pool on drop.
#[derive(Debug)]
pub struct DbRec {
    pool: Arc<DbRecPool>,
    page: usize,
    slot: usize,
    ptr: *mut u32,
}

// SAFETY: the record points into a page owned by `pool`, which this value
// keeps alive; its words are only accessed with atomic loads and stores
// (here, and through `word_ptr` in `SendQueue::ring` and `Cq::set_ci`), so
// stores from several threads (the poster's, the control path's
// `on_state_change`) are not a data race.
unsafe impl Send for DbRec {}
// SAFETY: as above: `&self` gives only whole-word atomic accesses.
unsafe impl Sync for DbRec {}

impl DbRec {
    /// The address given to the kernel (`db_addr`).
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Pointer to word `i` (0 or 1), for a data path that caches it. Only
    /// ever access it atomically (`store_word`, `AtomicU32::from_ptr`).
    #[inline(always)]
    pub fn word_ptr(&self, i: usize) -> *mut u32 {
        debug_assert!(i < 2);
        // SAFETY: the record has two words (8 bytes) inside its page.
        unsafe { self.ptr.add(i & 1) }
    }

    /// Stores `v` big-endian into word `i` with one 32-bit atomic store.
    /// The caller puts the barrier in front that the location needs.
    #[inline(always)]
    pub fn store(&self, i: usize, v: u32) {
        // SAFETY: a word of our record, alive as long as `self`.
        unsafe { store_word(self.word_ptr(i), v) }
    }

    /// The poll gate in bytes 8..12 of this record's slot (not read by the
    /// HCA): see [`Gate`].
    #[inline(always)]
    pub(crate) fn gate(&self) -> Gate {
        // SAFETY: bytes 8..12 of the record's slot (`stride >= 16`), inside
        // its page, 4-aligned.
        Gate { _pool: self.pool.clone(), ptr: unsafe { self.ptr.add(GATE_WORD) } }
    }

    /// Loads word `i` (host order) with one atomic load.
    #[cfg(test)]
    #[inline(always)]
    pub fn load(&self, i: usize) -> u32 {
        // SAFETY: a word of our record (see `store_word`): 4-aligned, only
        // ever accessed atomically, alive as long as `self`.
        u32::from_be(unsafe { AtomicU32::from_ptr(self.word_ptr(i)) }.load(Ordering::Relaxed))
    }
}

/// Stores `v` big-endian into the doorbell-record word at `p` with one
/// Relaxed 32-bit atomic store (the same instruction as a volatile store;
/// no data race with another thread's store to the same record).
///
/// # Safety
/// `p` is a word of a live [`DbRec`] ([`DbRec::word_ptr`]): 4-aligned
/// (records are `stride >= 8`-aligned in a page-aligned page), and only ever
/// accessed atomically, as every access in this crate is.
#[inline(always)]
pub(crate) unsafe fn store_word(p: *mut u32, v: u32) {
    // SAFETY: forwarded; `from_ptr` needs alignment and atomic-only access
    // for the reference's (this statement's) lifetime.
    unsafe { AtomicU32::from_ptr(p) }.store(v.to_be(), Ordering::Relaxed)
}

/// Where in a record's slot (in 32-bit words) its [`Gate`] lies.
pub(crate) const GATE_WORD: usize = 2;

/// A CQ's poll gate: one 32-bit word in its doorbell record's slot (bytes
/// 8..12, which the HCA never reads), holding the owner bit the entry at
/// the consumer index has when it is software's (0 or 1: open), or
/// [`Gate::CLOSED`]. The CQ's one-entry fast path compares the owner byte
/// with it (`op_own == gate`), so a closed gate sends it to the path
/// that checks the registry's generation: every generation bump closes
/// every gate of the context ([`Registry`](crate::mlx5::table::Registry)),
/// and only the CQ's poller opens its own, after checking the generation.
///
/// A handle keeps the pool (so the page) alive; the word is only ever
/// accessed atomically. A handle that outlives its CQ (never, as the CQ
/// removes it from the registry when it drops) could only close the gate
/// word of a later record in the same slot, which costs that CQ one slow
/// poll and nothing else.
#[derive(Debug)]
pub(crate) struct Gate {
    /// Keeps the page alive.
    _pool: Arc<DbRecPool>,
    ptr: *mut u32,
}

// SAFETY: `ptr` points into a page of `pool`, which this handle keeps
// alive; the word is only accessed with atomic operations.
unsafe impl Send for Gate {}
// SAFETY: as above: `&self` gives only atomic accesses.
unsafe impl Sync for Gate {}

impl Gate {
    /// No owner byte equals it.
    pub(crate) const CLOSED: u32 = 0x100;

    #[inline(always)]
    fn word(&self) -> &AtomicU32 {
        // SAFETY: a 4-aligned word of a live page (the pool is held), only
        // ever accessed atomically.
        unsafe { AtomicU32::from_ptr(self.ptr) }
    }
    /// Closes the gate (SeqCst: see `Cq::set_gate`).
    pub(crate) fn close(&self) {
        self.word().store(Self::CLOSED, Ordering::SeqCst);
    }
    /// The word's address, which identifies the record.
    pub(crate) fn id(&self) -> usize {
        self.ptr as usize
    }
}

impl Drop for DbRec {
    fn drop(&mut self) {
        self.pool.release(self.page, self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dbrecs_are_zeroed_aligned_reused_and_never_cross_a_page() {
        let pool = DbRecPool::new(64);
        let a = pool.alloc("t").unwrap();
        let b = pool.alloc("t").unwrap();
        assert_eq!(a.addr() % 64, 0);
        assert_eq!(b.addr() - a.addr(), 64);
        a.store(0, 0x1234);
        a.store(1, 0xabcd_ef01);
        assert_eq!(a.load(0), 0x1234);
        // Big-endian in memory: the stored word's first byte.
        // SAFETY: a word of our own record, accessed atomically.
        let raw = unsafe { AtomicU32::from_ptr(a.word_ptr(1)) }.load(Ordering::Relaxed);
        assert_eq!(raw.to_ne_bytes()[0], 0xab);
        let addr = a.addr();
        drop(a);
        let c = pool.alloc("t").unwrap();
        assert_eq!(c.addr(), addr, "freed slot reused");
        assert_eq!((c.load(0), c.load(1)), (0, 0), "reused slot zeroed");
        let ps = page_size() as u64;
        let all: Vec<DbRec> = (0..(ps / 64) * 2).map(|_| pool.alloc("t").unwrap()).collect();
        for r in &all {
            assert_eq!(r.addr() / ps, (r.addr() + 7) / ps);
        }
    }

    /// The `VmFlags` of the mapping of this process that contains `addr`
    /// (`/proc/self/smaps`).
    fn vm_flags(addr: u64) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16)) {
                        inside = (lo..hi).contains(&addr);
                        continue;
                    }
                }
            }
            if let (true, Some(f)) = (inside, line.strip_prefix("VmFlags:")) {
                return f.split_whitespace().map(str::to_owned).collect();
            }
        }
        panic!("no mapping contains {addr:#x}");
    }

    /// Queue buffers and doorbell-record pages are not copied into a child
    /// of `fork()` (`dc`: `VM_DONTCOPY`), as with rdma-core's `ibv_fork_init`.
    #[test]
    #[cfg_attr(miri, ignore = "reads /proc/self/smaps; Miri runs no madvise (dont_fork) and the layout tests")]
    fn dma_memory_is_madvised_dontfork() {
        let b = DmaBuf::new("t", 3 * page_size()).unwrap();
        for off in [0, b.len() as u64 - 1] {
            assert!(vm_flags(b.addr() + off).iter().any(|f| f == "dc"), "{:?}", vm_flags(b.addr() + off));
        }
        let pool = DbRecPool::new(64);
        let rec = pool.alloc("t").unwrap();
        assert!(vm_flags(rec.addr()).iter().any(|f| f == "dc"));
        // Plain anonymous memory is not: the flag comes from DmaBuf.
        let plain = anon_pages(page_size()).unwrap();
        assert!(!vm_flags(plain.as_ptr() as u64).iter().any(|f| f == "dc"));
    }

    #[test]
    fn dma_buf_is_page_aligned_whole_pages() {
        let b = DmaBuf::new("t", 100).unwrap();
        assert_eq!(b.addr() % page_size() as u64, 0);
        assert_eq!(b.len(), page_size());
    }
}
