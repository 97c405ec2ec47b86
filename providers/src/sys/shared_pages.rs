//! Memory a provider shares with the kernel: queue pages the kernel
//! created and offered for mmap at a key on the uverbs fd (rxe's queues,
//! siw's rings), or, for host tests, mock kernels and benchmarks, zeroed
//! heap pages playing the kernel's part.
//!
//! The owner keeps the base address ([`SharedPages::base`]) and reaches
//! the memory only through raw pointers and atomics: never a `&[u8]` over
//! it, as the kernel writes it at any time.

use memmap2::MmapRaw;

use super::UverbsFd;

/// Pages shared with the kernel, unmapped (or freed) on drop.
#[derive(Debug)]
pub(crate) struct SharedPages {
    base: *mut u8,
    // Owns the memory `base` points into; reached only through `base`.
    _backing: Backing,
}

#[derive(Debug)]
enum Backing {
    Mapped(#[allow(dead_code)] MmapRaw),
    #[cfg(any(test, feature = "mock"))]
    Heap(#[allow(dead_code)] HeapPages),
}

/// Heap pages owned through the raw pointer `Box::into_raw` returned, so
/// that moving the owner moves no `Box` (which would retag the allocation
/// as unique and invalidate `SharedPages::base`, derived from it: a
/// Stacked Borrows violation Miri reports).
#[cfg(any(test, feature = "mock"))]
#[derive(Debug)]
struct HeapPages(*mut [HeapPage]);

#[cfg(any(test, feature = "mock"))]
impl Drop for HeapPages {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` in `SharedPages::heap`
        // and is turned back into a box once, here, as its owner goes.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// One zeroed page of heap memory: page aligned like the kernel's, so tests
/// and benchmarks see the same slot alignment (and cache-line splits) as a
/// real ring.
#[cfg(any(test, feature = "mock"))]
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct HeapPage([u8; 4096]);

#[cfg(any(test, feature = "mock"))]
impl std::fmt::Debug for HeapPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeapPage")
    }
}

// SAFETY: the memory is owned by this value (a mapping or heap pages) and
// reached only through the raw `base`; moving the owner to another thread
// moves no reference into it.
unsafe impl Send for SharedPages {}
// SAFETY: through `&self` only the raw address is handed out, whose use is
// `unsafe` and its caller's.
unsafe impl Sync for SharedPages {}

impl SharedPages {
    /// Maps `len` bytes the kernel offered at mmap `offset` (a key) on `fd`,
    /// shared and read-write ([`UverbsFd::mmap`]).
    pub fn map(fd: &UverbsFd, offset: u64, len: usize) -> std::io::Result<Self> {
        let map = fd.mmap(offset, len)?;
        Ok(SharedPages { base: map.as_mut_ptr(), _backing: Backing::Mapped(map) })
    }

    /// At least `len` bytes (one page at the least) of zeroed, page-aligned
    /// heap memory, as the kernel's `vmalloc_user` gives it.
    #[cfg(any(test, feature = "mock"))]
    pub fn heap(len: usize) -> Self {
        let pages = len.div_ceil(4096).max(1);
        let mem = HeapPages(Box::into_raw(vec![HeapPage([0; 4096]); pages].into_boxed_slice()));
        SharedPages { base: mem.0.cast::<u8>(), _backing: Backing::Heap(mem) }
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
