//! Memory a provider shares with the kernel: queue pages the kernel
//! created and offered for mmap at a key on the uverbs fd (rxe's queues,
//! siw's rings), or, for host tests, mock kernels and benchmarks, zeroed
//! heap pages playing the kernel's part.
//!
//! The owner keeps the base address ([`SharedPages::base`]) and reaches
//! the memory only through raw pointers and atomics: never a `&[u8]` over
//! it, as the kernel writes it at any time.

use std::os::fd::{AsFd, AsRawFd};

use nix::libc;

use super::UverbsFd;

/// Pages shared with the kernel, unmapped (or freed) on drop.
///
/// One address and one length, nothing else (16 bytes): a queue embeds
/// this and reaches its memory through [`base`](Self::base), so the CQ
/// that holds the queue stays small enough to move inline.
#[derive(Debug)]
pub(crate) struct SharedPages {
    /// A mapping `mmap` returned, or the pointer `Box::into_raw` gave for
    /// heap pages (kept raw, so that moving the owner moves no `Box`,
    /// which would retag the allocation as unique and invalidate every
    /// address derived from it: a Stacked Borrows violation Miri reports).
    base: *mut u8,
    /// Bytes mapped; for heap pages, the page count with [`HEAP`] set (a
    /// flag of its own would make mock builds' queues, which the provider
    /// benchmarks measure, larger than real ones).
    len: usize,
}

/// [`SharedPages::len`]'s mark of heap pages: no mapping is that long.
#[cfg(any(test, feature = "mock"))]
const HEAP: usize = 1 << (usize::BITS - 1);

impl Drop for SharedPages {
    fn drop(&mut self) {
        #[cfg(any(test, feature = "mock"))]
        if self.len & HEAP != 0 {
            let pages = std::ptr::slice_from_raw_parts_mut(self.base.cast::<HeapPage>(), self.len & !HEAP);
            // SAFETY: `base` and the page count are what `Box::into_raw`
            // gave in `SharedPages::heap`, turned back into a box once,
            // here, as the owner goes.
            drop(unsafe { Box::from_raw(pages) });
            return;
        }
        // SAFETY: `base` and `len` are a mapping `mmap` returned
        // (`SharedPages::map`), unmapped once, here, as its owner goes;
        // nothing reaches it afterwards (the owner held the only address).
        // munmap of a valid mapping does not fail.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// One zeroed page of heap memory: page aligned like the kernel's, so tests
/// and benchmarks see the same slot alignment (and cache-line splits) as a
/// real ring.
#[cfg(any(test, feature = "mock"))]
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct HeapPage([u8; 4096]);

// SAFETY: the memory is owned by this value (a mapping or heap pages) and
// reached only through the raw `base`; moving the owner to another thread
// moves no reference into it.
unsafe impl Send for SharedPages {}
// SAFETY: through `&self` only the raw address is handed out, whose use is
// `unsafe` and its caller's.
unsafe impl Sync for SharedPages {}

impl SharedPages {
    /// Maps `len` bytes the kernel offered at mmap `offset` (a key, a
    /// multiple of the page size) on `fd`, shared and read-write, as
    /// [`UverbsFd::mmap`] does (see there why not `MADV_DONTFORK`), with one
    /// `mmap(2)` (memmap2's general path cost about 110 instructions a map
    /// and 40 an unmap, twice per QP). `EINVAL` for an empty length or an
    /// offset that `off_t` cannot hold, as mmap answers.
    pub fn map(fd: &UverbsFd, offset: u64, len: usize) -> std::io::Result<Self> {
        let einval = || std::io::Error::from_raw_os_error(libc::EINVAL);
        let off = libc::off_t::try_from(offset).map_err(|_| einval())?;
        if len == 0 {
            return Err(einval());
        }
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a new mapping at an address the kernel picks (no hint, no
        // MAP_FIXED), so no existing memory is touched; the fd is open for
        // the call (`fd` borrows it).
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_fd().as_raw_fd(), off) };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(SharedPages { base: p.cast::<u8>(), len })
    }

    /// At least `len` bytes (one page at the least) of zeroed, page-aligned
    /// heap memory, as the kernel's `vmalloc_user` gives it.
    #[cfg(any(test, feature = "mock"))]
    pub fn heap(len: usize) -> Self {
        let pages = len.div_ceil(4096).max(1);
        let mem = Box::into_raw(vec![HeapPage([0; 4096]); pages].into_boxed_slice());
        SharedPages { base: mem.cast::<u8>(), len: pages | HEAP }
    }

    /// The first byte.
    #[inline(always)]
    pub fn base(&self) -> *mut u8 {
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test and mock builds (which the provider benchmarks measure) have
    /// the layout real ones have: an address and a length.
    #[test]
    fn an_address_and_a_length() {
        assert_eq!(size_of::<SharedPages>(), 2 * size_of::<usize>());
    }

    #[test]
    fn heap_pages_are_zeroed_page_aligned_and_at_least_one_page() {
        for len in [0, 1, 4096, 4097] {
            let p = SharedPages::heap(len);
            assert_eq!(p.base() as usize % 4096, 0);
            let bytes = len.div_ceil(4096).max(1) * 4096;
            // SAFETY: `heap` allocated `bytes` zeroed bytes at `base`, which
            // nothing else reaches while `p` lives.
            let all_zero = (0..bytes).all(|i| unsafe { p.base().add(i).read() } == 0);
            assert!(all_zero, "{len} bytes");
        }
    }
}
