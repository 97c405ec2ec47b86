//! The doorbell seam: every store the provider makes to a UAR page goes
//! through [`Mmio`], so host tests and the HCA model can record what a
//! real device would receive (providers.md §C.4).
//!
//! [`UarMmio`] is the real one: volatile stores into a mapped UAR page.
//! Posting and arming are generic over `M: Mmio` (static dispatch, no `dyn`).
//!
//! Unsafe code (allowed below): [`UarMmio`] writes device memory through a
//! raw pointer with `write_volatile` only; never a reference.
#![allow(unsafe_code)]

use std::sync::Arc;

use crate::mlx5::barrier;
use crate::mlx5::uar::UarPage;

/// Stores to one doorbell / BlueFlame register window (a QP's register,
/// or a UAR page for the CQ arm register at +0x20). Offsets are bytes from
/// the start of the window: for a QP's register `0..2 * max(bf_half, 8)`
/// (its two BlueFlame halves, [`RegInfo`](crate::mlx5::uar::RegInfo)), for
/// a CQ's arm page `0..UAR_SIZE`.
///
/// The stores are `unsafe`: the real implementation ([`UarMmio`]) writes
/// device memory at `offset` and checks it only with a `debug_assert!`
/// (the data path's offsets are in the window by construction; a release
/// build pays no check). Implementations that store nothing real (the HCA
/// model, `NoopMmio`) are safe code implementing the same contract.
///
/// ```compile_fail,E0133
/// // A store to device memory needs `unsafe` and its contract.
/// fn ring<M: rverbs_providers::mlx5::Mmio>(m: &M) {
///     m.write64(0, 0);
/// }
/// ```
pub trait Mmio {
    /// One 64-bit store of `val` at `offset`. The device receives `val`'s
    /// in-memory bytes, so callers pass `u64::from_ne_bytes(big_endian_bytes)`
    /// (`mmio_write64_be`).
    ///
    /// # Safety
    /// `offset` is a multiple of 8 and `offset + 8` lies inside the window
    /// this value was made for (see the trait documentation).
    unsafe fn write64(&self, offset: usize, val: u64);
    /// One 64-byte BlueFlame block at `offset`: eight ordered 64-bit
    /// stores in ascending address order (`mmio_memcpy_x64`), the bytes of
    /// `block` as they lie in memory.
    ///
    /// # Safety
    /// `offset` is a multiple of 64 and `offset + 64` lies inside the
    /// window this value was made for.
    unsafe fn bf_copy(&self, offset: usize, block: &[u64; 8]);
    /// `mmio_wc_start()`: orders the doorbell-record store before the
    /// register store(s) that follow.
    fn wc_start(&self);
    /// `mmio_flush_writes()`: after the register store(s).
    fn flush(&self);
}

/// A register window in a mapped UAR page: the real [`Mmio`].
#[derive(Debug)]
pub struct UarMmio {
    base: *mut u8,
    len: usize,
    // Keeps the mapping alive as long as the window.
    _page: Arc<UarPage>,
}

// SAFETY: the window points into a mapping owned by `_page` (kept alive
// here); the only accesses are volatile stores to device memory, made by
// `unsafe` calls whose callers keep them inside the window. Per-QP
// registers are written only by their queue's `post(&mut self)`; the CQ arm
// page and the shared NC register only take single 64-bit stores, which
// are single bus writes. Device memory is outside the Rust memory model:
// nothing of ours reads it back.
unsafe impl Send for UarMmio {}
// SAFETY: as above.
unsafe impl Sync for UarMmio {}

impl UarMmio {
    /// The window of `len` bytes at byte `offset` of `page`.
    pub(crate) fn new(page: &Arc<UarPage>, offset: usize, len: usize) -> UarMmio {
        assert!(offset + len <= page.len(), "register window outside its UAR page");
        // SAFETY: in bounds of the mapping (asserted above).
        let base = unsafe { page.base().add(offset) };
        UarMmio { base, len, _page: page.clone() }
    }
}

impl Mmio for UarMmio {
    #[inline(always)]
    unsafe fn write64(&self, offset: usize, val: u64) {
        debug_assert!(offset + 8 <= self.len && offset % 8 == 0);
        // The callers' offsets are the register's two halves or the arm
        // register; one volatile 64-bit store is one bus write.
        // SAFETY: inside the `len`-byte window (contract) and 8-aligned
        // (the window starts 8-aligned in a page-aligned mapping, and the
        // offset is a multiple of 8).
        unsafe { self.base.add(offset).cast::<u64>().write_volatile(val) }
    }

    #[inline(always)]
    unsafe fn bf_copy(&self, offset: usize, block: &[u64; 8]) {
        debug_assert!(offset + 64 <= self.len && offset % 64 == 0);
        // SAFETY: as in `write64`, for the 64 bytes at `offset` (contract);
        // eight volatile stores stay in program order, ascending addresses.
        unsafe {
            let dst = self.base.add(offset).cast::<u64>();
            for (i, w) in block.iter().enumerate() {
                dst.add(i).write_volatile(*w);
            }
        }
    }

    #[inline(always)]
    fn wc_start(&self) {
        barrier::wc_start()
    }

    #[inline(always)]
    fn flush(&self) {
        barrier::mmio_flush_writes()
    }
}

/// An [`Mmio`] that stores nothing: to measure the post path without the
/// doorbell store (benchmarks), or to post into a ring nobody executes.
#[cfg(any(test, feature = "mock"))]
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopMmio;

#[cfg(any(test, feature = "mock"))]
impl Mmio for NoopMmio {
    #[inline(always)]
    unsafe fn write64(&self, _offset: usize, _val: u64) {}
    #[inline(always)]
    unsafe fn bf_copy(&self, _offset: usize, _block: &[u64; 8]) {}
    #[inline(always)]
    fn wc_start(&self) {}
    #[inline(always)]
    fn flush(&self) {}
}
