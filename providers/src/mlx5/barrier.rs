//! The DMA and MMIO barriers of the mlx5 fast path, named for what they
//! order, one definition per architecture (rdma-core `util/udma_barrier.h`).
//!
//! Unsafe code: this file uses `core::arch::asm!` (allowed below) because
//! Rust's `fence`s emit the inner-shareable `dmb ish*` forms on aarch64 and
//! nothing at all for device memory ordering on x86_64, while the HCA needs
//! rdma-core's instructions: `dmb oshst`, `dmb oshld`, `dsb st`,
//! `sfence` (not its x86_64 `lfence`: see [`from_device`]). An `asm!`
//! block without `nomem` is also a compiler barrier: no memory access
//! moves across it.
//!
//! Providers call these and never `fence`/`asm!` directly, so a grep for
//! `barrier::` finds every DMA ordering point of the mlx5 provider.
//!
//! | function | rdma-core | x86_64 | aarch64 | orders |
//! |---|---|---|---|---|
//! | [`to_device`] | `udma_to_device_barrier` | compiler barrier | `dmb oshst` | WQE / dbrec stores before the next store the device may act on |
//! | [`from_device`] | `udma_from_device_barrier` | compiler barrier (rdma-core: `lfence`) | `dmb oshld` | the CQE owner byte load before the loads of the rest of the CQE |
//! | [`wc_start`] | `mmio_wc_start` | `sfence` | `dsb st` | the dbrec store before the UAR / BlueFlame store |
//! | [`mmio_flush_writes`] | `mmio_flush_writes` | `sfence` | `dsb st` | pushes write-combined UAR stores out of the CPU |
//! | [`cqe_reads_done`] | (none; see its docs) | compiler barrier | `dmb oshld` | CQE loads before the consumer-index store that frees the slots |
//!
//! Other architectures get `core::sync::atomic::fence(SeqCst)`, a best
//! effort that rdma-core's per-arch choices were not checked against. So
//! does Miri (`cfg(miri)`), which cannot run `asm!`: the host tests of the
//! HCA model then run under it.
#![allow(unsafe_code)]

/// `udma_to_device_barrier()`: memory the device reads by DMA (WQEs, the
/// doorbell record) written before this point is visible to the device
/// before any store after it. x86_64 stores are ordered (TSO), so a
/// compiler barrier suffices; aarch64 needs `dmb oshst`.
#[inline(always)]
pub fn to_device() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction; no operands, no memory of ours touched.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// `udma_from_device_barrier()`: loads after this point see device writes
/// at least as new as what the loads before it saw. Used between the CQE
/// ownership check and reading the CQE body.
///
/// x86_64: a compiler barrier, as the kernel's `dma_rmb()` (and DPDK's
/// `rte_io_rmb()`, which its mlx5 driver uses at the same point). The CQ
/// buffer is ordinary write-back memory the HCA writes by coherent DMA,
/// and x86 never lets a load pass an earlier load to write-back memory
/// (Intel SDM vol. 3, 8.2.2); the HCA writes the CQE body no later than
/// its owner byte (one ordered PCIe write). So once the owner load saw the
/// new entry, the body loads after it see it too; only the compiler must
/// not hoist them. rdma-core's `lfence` orders nothing more here (it
/// matters for weakly ordered, write-combining loads, which the CQ is not)
/// and was the costliest instruction of a one-entry poll.
#[inline(always)]
pub fn from_device() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction; no operands.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// `mmio_flush_writes()`: write-combined stores issued before this point
/// leave the CPU (as whole TLPs) before any later store. After every
/// UAR / BlueFlame write.
#[inline(always)]
pub fn mmio_flush_writes() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a barrier instruction; no operands.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags))
    };
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction; no operands.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags))
    };
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// `mmio_wc_start()`: the doorbell-record store (ordinary memory) is
/// ordered before the write-combined / uncached UAR store that follows.
/// rdma-core defines it as [`mmio_flush_writes`].
#[inline(always)]
pub fn wc_start() {
    mmio_flush_writes()
}

/// Before publishing a CQ consumer index (`CQ_SET_CI`): the loads of the
/// CQEs being retired complete before the store that lets the HCA reuse
/// their slots.
///
/// rdma-core has no barrier here. x86_64 never reorders a load after a
/// later store, so this is a compiler barrier there; aarch64 may, so this is
/// `dmb oshld` (earlier loads before later loads *and stores*). An addition
/// of ours, following the recommendation in providers.md §B.8.
#[inline(always)]
pub fn cqe_reads_done() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction; no operands.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}
