//! One siw ring (SQ, RQ, SRQ or CQ) mapped from the kernel: `slots`
//! entries of `SLOT` bytes, for a CQ followed by its `siw_cq_ctrl` word.
//!
//! The kernel allocates the memory (`vmalloc_user`, zeroed) at create and
//! answers with an mmap key (an offset on the uverbs fd) and the entry
//! count; the length is ours to compute (rdmacm.md §B.2). The mapping is
//! shared with the kernel, so it is only touched through raw pointers and
//! atomics: never a `&[u8]` over it. There are no index words: ownership
//! of an entry is its `flags` word (`SIW_WQE_VALID`), each side keeping a
//! free-running counter of its own.
//!
//! Crate-internal: a `Ring` hands out raw pointers into memory the kernel
//! writes; only this module's queues, which follow the ownership protocol,
//! hold one.

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use rverbs_uapi::siw_abi::SIW_INVAL_UOBJ_KEY;

use crate::sys::{SharedPages, UverbsFd};
use crate::{Errno, Error, Result};

/// A ring of `SLOT`-byte entries shared with the kernel.
#[derive(Debug)]
pub(crate) struct Ring<const SLOT: usize> {
    base: *mut u8,
    /// `slots - 1`; `slots` is a power of two.
    mask: u32,
    /// Owns the memory `base` points into, shared by every [`share`](Self::share)
    /// of this ring; reached only through `base`.
    mem: Arc<RingMem>,
}

/// A ring's memory, and the counters its producer publishes.
#[derive(Debug)]
struct RingMem {
    _pages: SharedPages,
    posted: Posted,
}

/// What the one producer of a send or receive ring publishes, for whoever
/// flushes the ring once the kernel has stopped reading it
/// ([`super::flush`]): `reserved`, stored before a batch's first entry is
/// written, is the counter the batch may reach; `put`, stored after its
/// last, the counter it did reach, and then `reserved` falls back to it.
/// `reserved != put`: a batch is being written.
#[derive(Debug, Default)]
pub(crate) struct Posted {
    pub reserved: AtomicU32,
    pub put: AtomicU32,
}

// SAFETY: the memory is owned by this value (a mapping or heap pages,
// shared only with other `Ring`s over it) and reached only through `base`;
// the queues that own a `Ring` serialise their side with `&mut self`, and
// a flush takes over entries only through the ownership protocol.
unsafe impl<const SLOT: usize> Send for Ring<SLOT> {}
// SAFETY: through `&self` a ring only hands out raw pointers (`slot`,
// `tail`), whose use is `unsafe` and the caller's.
unsafe impl<const SLOT: usize> Sync for Ring<SLOT> {}

/// The bytes of a ring of `slots` entries of `slot` bytes and `tail` bytes
/// after them, if `slots` is a power of two and the product fits.
fn ring_len(slots: u32, slot: usize, tail: usize) -> Option<usize> {
    if !slots.is_power_of_two() {
        return None;
    }
    (slots as usize).checked_mul(slot)?.checked_add(tail)
}

impl<const SLOT: usize> Ring<SLOT> {
    /// Maps the ring of `slots` entries (and `tail` bytes after them) the
    /// kernel offered under mmap `key` on `fd`, for `verb`; `what` names it
    /// in errors. `EPROTO` for a key or count the kernel could not have
    /// meant; mmap's errno otherwise.
    pub fn map(verb: &'static str, fd: &UverbsFd, key: u64, slots: u32, tail: usize, what: &str) -> Result<Self> {
        if key == SIW_INVAL_UOBJ_KEY {
            return Err(Error::check(verb, Errno::ENOMEM).with_message(format!(
                "the kernel created the {what} but could not offer it for mmap (SIW_INVAL_UOBJ_KEY): \
                 it ran out of memory; free some objects and retry"
            )));
        }
        let len = ring_len(slots, SLOT, tail).filter(|&n| n > 0).ok_or_else(|| {
            Error::check(verb, Errno::EPROTO).with_message(format!(
                "the kernel answered a {what} of {slots} entries, not a power of two that fits memory: \
                 a siw ABI this provider does not know"
            ))
        })?;
        let mem = SharedPages::map(fd, key, len).map_err(|e| {
            let errno = Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32));
            Error::os(verb, errno).with_message(format!(
                "cannot map the {what} the kernel created ({len} bytes at mmap offset {key:#x}; \
                 ENOMEM: RLIMIT_AS or vm.max_map_count)"
            ))
        })?;
        Ok(Ring::over(mem, slots))
    }

    fn over(pages: SharedPages, slots: u32) -> Self {
        let base = pages.base();
        Ring { base, mask: slots - 1, mem: Arc::new(RingMem { _pages: pages, posted: Posted::default() }) }
    }

    /// A zeroed ring in heap memory, as the kernel's `vmalloc_user` gives
    /// it: for host tests, the mock of the kernel side, and benchmarks.
    ///
    /// # Panics
    /// If `slots` is not a power of two (a test's mistake).
    #[cfg(any(test, feature = "mock"))]
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn new_heap(slots: u32, tail: usize) -> Self {
        let bytes = ring_len(slots, SLOT, tail).expect("a power of two of slots");
        Ring::over(SharedPages::heap(bytes), slots)
    }

    /// A second ring over this one's memory, which stays mapped while
    /// either lives: the flush's view of a QP's ring, or a mock kernel's
    /// on another thread (tests).
    pub fn share(&self) -> Self {
        Ring { base: self.base, mask: self.mask, mem: self.mem.clone() }
    }

    /// The counters the ring's producer publishes.
    #[inline(always)]
    pub fn posted(&self) -> &Posted {
        &self.mem.posted
    }

    /// Entries in the ring.
    #[inline]
    pub fn slots(&self) -> u32 {
        self.mask + 1
    }

    /// The entry free-running counter `i` names (`i % slots`).
    #[inline(always)]
    pub fn slot(&self, i: u32) -> *mut u8 {
        let off = ((i & self.mask) as usize) * SLOT;
        // SAFETY: `i & mask < slots`, and the memory holds `slots * SLOT`
        // bytes (`map` and `new_heap` sized it so): in bounds.
        unsafe { self.base.add(off) }
    }

    /// The first byte after the entries (a CQ's `siw_cq_ctrl`); valid only
    /// for a ring made with a `tail`.
    #[inline(always)]
    pub fn tail(&self) -> *mut u8 {
        let off = (self.slots() as usize) * SLOT;
        // SAFETY: one past the last entry: in bounds of (or one past) the
        // memory, which holds `slots * SLOT + tail` bytes.
        unsafe { self.base.add(off) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert_eq!(ring_len(4, 32, 8), Some(136));
        assert_eq!(ring_len(1, 120, 0), Some(120));
        assert_eq!(ring_len(0, 120, 0), None);
        assert_eq!(ring_len(3, 120, 0), None);
        assert_eq!(ring_len(1 << 31, 120, 0), (1usize << 31).checked_mul(120));
    }

    /// The kernel's answers a create can fail on, before and at the mmap.
    #[test]
    #[cfg_attr(miri, ignore = "opens /dev/null")]
    fn map_errors_name_the_verb_and_the_cause() {
        let fd = UverbsFd::open(std::path::Path::new("/dev/null"), 18, None).expect("/dev/null");
        let e = Ring::<32>::map("ibv_create_cq", &fd, SIW_INVAL_UOBJ_KEY, 4, 8, "completion queue").unwrap_err();
        assert_eq!((e.verb(), e.errno()), ("ibv_create_cq", Some(Errno::ENOMEM)));
        assert!(e.to_string().contains("SIW_INVAL_UOBJ_KEY"), "{e}");
        for slots in [0, 3, 6] {
            let e = Ring::<120>::map("ibv_create_qp", &fd, 0, slots, 0, "send queue").unwrap_err();
            assert_eq!(e.errno(), Some(Errno::EPROTO), "{slots} entries");
            assert!(e.to_string().contains("not a power of two"), "{e}");
        }
        // /dev/null cannot be mapped: mmap's errno, with the length asked.
        let e = Ring::<112>::map("ibv_create_srq", &fd, 0x1000, 4, 0, "shared receive queue").unwrap_err();
        assert!(e.errno().is_some_and(|e| e != Errno::EPROTO), "{e}");
        assert!(e.to_string().contains("448 bytes at mmap offset 0x1000"), "{e}");
    }

    #[test]
    fn slots_wrap() {
        let r = Ring::<32>::new_heap(4, 8);
        assert_eq!(r.slots(), 4);
        assert_eq!(r.slot(0), r.slot(4));
        assert_eq!(r.slot(u32::MAX), r.slot(3));
        assert_eq!(r.tail() as usize - r.slot(0) as usize, 128);
    }
}
