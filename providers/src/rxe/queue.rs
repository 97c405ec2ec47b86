//! One rxe queue (SQ, RQ, SRQ or CQ) mapped from the kernel: the
//! `struct rxe_queue_buf` header, then the element array.
//!
//! The kernel allocates the buffer and hands us `{offset, size}` (`mminfo`);
//! we map it once (a second mmap of the same offset fails). The mapping is
//! shared with the kernel, so it is only ever touched through raw pointers:
//! never a `&[u8]` over it. Index protocol (`uverbs-abi.md`, providers.md
//! §A.2): indices are masked; for the queue we produce into we read our
//! index plainly and the kernel's with Acquire, and publish ours with
//! Release. See docs/MEMORY_ORDERING.md.
//!
//! Crate-internal: `publish_producer` / `publish_consumer` store index
//! words the kernel acts on, and a `Queue` can map any queue the kernel
//! described, so only the rings of this crate (which publish exactly what
//! they wrote or read) get one.

use std::sync::atomic::{AtomicU32, Ordering};

use rverbs_uapi::rdma_user_rxe::{mminfo, rxe_queue_buf};

use crate::sys::{SharedPages, UverbsFd};
use crate::Errno;

/// Byte offset of `producer_index` in `rxe_queue_buf`.
const PRODUCER: usize = core::mem::offset_of!(rxe_queue_buf, producer_index);
/// Byte offset of `consumer_index` in `rxe_queue_buf`.
const CONSUMER: usize = core::mem::offset_of!(rxe_queue_buf, consumer_index);
/// Byte offset of the element array.
const DATA: usize = size_of::<rxe_queue_buf>();

/// A mapped rxe queue.
#[derive(Debug)]
pub(crate) struct Queue {
    /// The mapping (its `base` is the header), reached only through raw
    /// pointers from [`SharedPages::base`].
    mem: SharedPages,
    log2_elem_size: u32,
    index_mask: u32,
}

// SAFETY: the mapping is plain shared memory owned by this value; all access
// goes through atomics or raw pointer copies, and the rings that own a
// `Queue` serialise their side with `&mut self`.
unsafe impl Send for Queue {}
// SAFETY: through `&self` the header's index words are only loaded and
// stored atomically (`producer_*`, `consumer_*`, `publish_*`: the kernel
// accesses them atomically too), the element array is only reached as raw
// pointers (`elem_ptr`), whose use is `unsafe` and the caller's, and the
// rest are plain fields set at creation.
unsafe impl Sync for Queue {}

impl Queue {
    /// Maps the queue the kernel described in `mi` and checks its header.
    pub fn map(fd: &UverbsFd, mi: &mminfo) -> Result<Queue, Errno> {
        let size = mi.size as usize;
        if size < DATA {
            return Err(Errno::EINVAL);
        }
        let mem = SharedPages::map(fd, mi.offset, size).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(5)))?;
        let base = mem.base();
        // The kernel writes the two header words once, before the create command returns.
        // SAFETY: the mapping is at least `DATA` bytes (checked above) and page
        // aligned, so the two u32 header words are in bounds and aligned.
        let header = unsafe { (base.cast::<u32>().read_volatile(), base.add(4).cast::<u32>().read_volatile()) };
        let (log2_elem_size, index_mask) = header;
        let q = Queue { mem, log2_elem_size, index_mask };
        let slots = usize::try_from(index_mask).unwrap_or(usize::MAX).saturating_add(1);
        let need = slots.checked_shl(log2_elem_size).and_then(|b| b.checked_add(DATA));
        if log2_elem_size >= 16 || !slots.is_power_of_two() || need.map_or(true, |n| n > size) {
            return Err(Errno::EPROTO);
        }
        Ok(q)
    }

    /// A queue in heap memory with `slots` elements of `1 << log2_elem_size`
    /// bytes and the header filled in as the kernel would: for host tests,
    /// mocks of the kernel side, and benchmarks.
    #[cfg(any(test, feature = "mock"))]
    pub fn new_heap(slots: u32, log2_elem_size: u32) -> Queue {
        assert!(slots.is_power_of_two() && slots >= 2 && log2_elem_size < 16);
        let bytes = DATA + ((slots as usize) << log2_elem_size);
        let mem = SharedPages::heap(bytes);
        let base = mem.base();
        // SAFETY: `mem` is at least DATA bytes, page aligned; we write the
        // two header words the kernel would have written.
        unsafe {
            base.cast::<u32>().write(log2_elem_size);
            base.add(4).cast::<u32>().write(slots - 1);
        }
        Queue { mem, log2_elem_size, index_mask: slots - 1 }
    }

    /// Bytes per element: `1 << log2_elem_size`, from the kernel, never a Rust size.
    pub fn elem_size(&self) -> usize {
        1 << self.log2_elem_size
    }

    /// Index mask (`slots - 1`).
    pub fn index_mask(&self) -> u32 {
        self.index_mask
    }

    /// Usable entries: one slot always stays empty.
    #[cfg(any(test, feature = "mock"))]
    pub fn capacity(&self) -> u32 {
        self.index_mask
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // The kernel, too, only ever accesses it atomically (smp_load_acquire/smp_store_release).
        // SAFETY: `offset` is PRODUCER or CONSUMER: inside the header (length checked in
        // `map`), 4-aligned in a page-aligned mapping; accessed only atomically; lives as
        // long as `self.mem`.
        unsafe { &*self.mem.base().add(offset).cast::<AtomicU32>() }
    }

    /// The producer index, loaded with Acquire: for a queue the kernel
    /// produces into (CQ), before reading the entries it wrote.
    #[inline]
    pub fn producer_acquire(&self) -> u32 {
        self.index(PRODUCER).load(Ordering::Acquire)
    }

    /// The producer index of a queue we produce into (SQ/RQ/SRQ): only we
    /// write it, so a relaxed load sees our last store.
    #[inline]
    pub fn producer_own(&self) -> u32 {
        self.index(PRODUCER).load(Ordering::Relaxed)
    }

    /// Publishes our producer index with Release: every WQE written before
    /// is visible to the kernel once it sees the new index.
    #[inline]
    pub fn publish_producer(&self, v: u32) {
        self.index(PRODUCER).store(v & self.index_mask, Ordering::Release)
    }

    /// The consumer index, loaded with Acquire: for a queue the kernel
    /// consumes (SQ/RQ/SRQ), before reusing the slots it released.
    #[inline]
    pub fn consumer_acquire(&self) -> u32 {
        self.index(CONSUMER).load(Ordering::Acquire)
    }

    /// The consumer index of a queue we consume (CQ): only we write it.
    #[inline]
    pub fn consumer_own(&self) -> u32 {
        self.index(CONSUMER).load(Ordering::Relaxed)
    }

    /// Publishes our consumer index with Release: we copied the entries out
    /// before the kernel may overwrite them.
    #[inline]
    pub fn publish_consumer(&self, v: u32) {
        self.index(CONSUMER).store(v & self.index_mask, Ordering::Release)
    }

    /// Number of free slots for a producer at `prod` (one slot always stays empty).
    #[inline]
    pub fn free_slots(&self, prod: u32) -> u32 {
        // Acquire: the kernel's reads of the slots it released happen before our rewrites.
        let cons = self.consumer_acquire();
        self.index_mask - (prod.wrapping_sub(cons) & self.index_mask)
    }

    /// Pointer to element `i` (masked).
    #[inline]
    pub fn elem_ptr(&self, i: u32) -> *mut u8 {
        let off = DATA + (((i & self.index_mask) as usize) << self.log2_elem_size);
        // SAFETY: `map`/`new_heap` checked that DATA + slots << log2_elem_size fits.
        unsafe { self.mem.base().add(off) }
    }
}
