//! The QEMU harness behind `rverbs-vm` and the project's `cargo xtask`:
//! boot a real Linux kernel with soft-RoCE (`rdma_rxe`, `rxe0` up), run
//! programs in it, read their output and exit codes back.
//!
//! The binary (`rverbs-vm run -- PROGRAM ARGS...`, usable as a cargo
//! runner) is described in docs/VM.md; this library is its core, shared with
//! `xtask` (one harness, not two). Its API serves those two tools and is
//! not stable.
//!
//! Layout: [`host_tools`] (QEMU, busybox, kmod, iproute2...; apt),
//! [`kernel`] (Debian kernels by series, or any kernel by path, cached),
//! [`initramfs`] and [`cpio`] (the guest image), [`guest`] (its `/init`
//! and payload scripts), [`qemu`] (booting, consoles, timeouts),
//! [`console`] (reading results back), [`runner`] (one boot end to end),
//! [`pair`] (two guests on one virtual wire), [`siw_module`]
//! (siw.ko built for Debian's kernels, which lack it), [`run`] (the `run` command),
//! [`util`].
#![forbid(unsafe_code)]

pub mod console;
pub mod cpio;
pub mod elf;
pub mod guest;
pub mod host_tools;
pub mod initramfs;
pub mod kernel;
pub mod pair;
pub mod qemu;
pub mod run;
pub mod runner;
pub mod siw_module;
pub mod util;
