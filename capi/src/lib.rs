//! rverbs as `libibverbs.so.1`: rdma-core 44's C ABI (its 146 default
//! symbols at their version nodes, `IBVERBS_1.0` … `IBVERBS_1.14` and
//! `IBVERBS_PRIVATE_34`), implemented on rverbs' public API, so that C
//! programs built against rdma-core (`ibv_devinfo`, perftest, pyverbs,
//! librdmacm) run on rverbs when `LD_LIBRARY_PATH` points at this library.
//! No provider library is loaded and no C is compiled.
//!
//! What is implemented and what answers EOPNOTSUPP: docs/CAPI.md.
//!
//! Layout: [`abi`] mirrors the C structs (checked at compile time against
//! gcc's offsets for the 44 headers); `export` turns a Rust function into
//! `NAME@@NODE`; one module per object (`device`, `context`, `query`,
//! `event`), `misc` (strings, fork), and `stubs` (EOPNOTSUPP answers and
//! rdma-core's private provider ABI). All `unsafe` of the C boundary lives
//! in this crate; rverbs itself stays `#![deny(unsafe_code)]`.

#![allow(non_camel_case_types)]

pub mod abi;
mod acks;
mod ah;
mod context;
mod cq;
mod cq_ex;
mod device;
mod event;
mod export;
mod marshall;
mod misc;
mod mw;
mod pd;
mod qp;
mod qp_ex;
mod query;
use rverbs_providers::pool;
use rverbs_providers::spin;
mod srq;
mod stubs;
#[cfg(test)]
mod symbol_map;

/// errno, through nix (no libc binding of our own).
mod errno {
    pub use nix::libc::{EINVAL, ENODATA, ENOMEM, ENOSPC, EOPNOTSUPP};

    /// Sets the calling thread's `errno`.
    pub fn set_errno(e: i32) {
        nix::errno::Errno::set_raw(e);
    }

    /// The errno of an rverbs error (EIO when it has none).
    pub fn of(e: &rverbs::Error) -> i32 {
        e.errno().map_or(nix::libc::EIO, |e| e as i32)
    }
}
