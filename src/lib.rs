//! # rverbs: RDMA verbs in pure Rust
//!
//! rverbs talks straight to the kernel's uverbs ABI on
//! `/dev/infiniband/uverbsN`: ioctl commands for the control path, mmapped
//! queues and doorbells for the fast path, with its own rxe and mlx5
//! providers. No libibverbs, no rdma-core, no C.
//!
//! ```no_run
//! for dev in rverbs::devices()? {
//!     let ctx = dev.open()?;
//!     let attr = ctx.query_device()?;
//!     println!("{} fw {} ports {}", dev.name(), attr.fw_ver, attr.phys_port_cnt);
//! }
//! # Ok::<(), rverbs::Error>(())
//! ```
//!
//! # Errors compose with `?`
//! Every verb returns [`Result`]; a refused post ([`PostError`]) and a
//! completion with an error status ([`WcError`], from [`Wc::ok`]) convert
//! into [`Error`], so one helper can post, poll and check:
//!
//! ```no_run
//! use std::time::Duration;
//! use rverbs::{CompletionQueue, Errno, Error, QueuePair, SendWr, Wc};
//!
//! fn send_and_wait(qp: &mut QueuePair, cq: &mut CompletionQueue, wr: &[SendWr<'_>]) -> rverbs::Result<Wc> {
//!     qp.post_send(wr)?; // PostError -> Error (ErrorKind::Post)
//!     let mut wc = [Wc::default(); 1];
//!     // At least one completion, or none after the deadline.
//!     if cq.wait_any(&mut wc, Some(Duration::from_secs(5)))? == 0 {
//!         return Err(Error::check("send_and_wait", Errno::ETIMEDOUT));
//!     }
//!     Ok(wc[0].ok()?) // WcError -> Error (ErrorKind::Completion)
//! }
//! ```
//!
//! # fork
//! A child made by `fork()` must not use the RDMA objects it inherited (as
//! with libibverbs): posting would write the parent's queues. Dropping them
//! in the child is harmless: destroy commands are skipped in any process
//! other than the one that opened the device, so the parent's kernel
//! objects stay, and memory from [`ProtectionDomain::alloc_mr`] is
//! `MADV_DONTFORK` (the child does not get it; the parent's pinned pages
//! stay where the device writes). The child may open the device again for
//! objects of its own. `fork()` is `unsafe` in Rust (`nix::unistd::fork`):
//! this contract is part of what its caller promises.
#![deny(unsafe_code)]

/// The span of a control-path verb, `debug_span!(...).entered()`, made
/// only when DEBUG is enabled: otherwise nothing is built, moved or
/// dropped (about 20 instructions a verb, issue #35). A [`VerbSpan`].
macro_rules! verb_span {
    ($($field:tt)*) => {
        $crate::VerbSpan::new(
            tracing::level_enabled!(tracing::Level::DEBUG).then(|| tracing::debug_span!($($field)*).entered()),
        )
    };
}

/// An entered verb span, or none ([`verb_span!`]). Its drop is one inline
/// test: an `Option<EnteredSpan>` dropped in place calls out-of-line drop
/// glue even when empty (about 10 instructions a verb).
pub(crate) struct VerbSpan(std::mem::ManuallyDrop<Option<tracing::span::EnteredSpan>>);

impl VerbSpan {
    #[inline]
    pub(crate) fn new(span: Option<tracing::span::EnteredSpan>) -> Self {
        VerbSpan(std::mem::ManuallyDrop::new(span))
    }

    /// Exits and drops the span, leaving `None` (which needs no drop).
    #[cold]
    #[inline(never)]
    fn exit(&mut self) {
        drop(self.0.take());
    }
}

impl Drop for VerbSpan {
    #[inline]
    fn drop(&mut self) {
        if self.0.is_some() {
            self.exit();
        }
    }
}

mod address;
mod ah;
pub mod asynch;
mod attr;
#[doc(hidden)]
pub mod c_support;
mod channel;
pub mod cm;
mod context;
mod cq;
mod device;
mod endpoint;
mod event;
mod gid;
mod mr;
mod mw;
mod pd;
mod post;
mod qp;
mod srq;

#[cfg(test)]
mod proptest_config;

pub use address::{AhAttr, GlobalRoute, GRH_LEN};
pub use ah::AddressHandle;
pub use attr::*;
pub use channel::{CompletionChannel, CqEvent};
pub use context::Context;
pub use cq::{CompletionQueue, CqInitAttr, Drain};
pub use device::{device_by_name, devices, Device, NodeType, Sysfs, Transport};
pub use endpoint::{Endpoint, RemoteMemory};
pub use event::{AsyncEvent, AsyncEventType, EventObject};
pub use gid::{Gid, GidEntry, GidType, Guid};
pub use mr::{page_size, AccessFlags, MemoryRegion};
pub use mw::{MemoryWindow, MwType};
pub use pd::ProtectionDomain;
pub use post::{RecvQueue, SendQueue};
pub use qp::{ConnectOptions, QpAttr, QpCap, QpControl, QpInitAttr, QueuePair};
pub use rverbs_providers::cmd::mr::MrQuery;
pub use rverbs_providers::driver::{DriverId, Provider};
pub use rverbs_providers::qp_state::{optional_bits, required_bits, QpAttrMask, QpState, QpType, TransitionError};
pub use rverbs_providers::sys::CmdPath;
pub use rverbs_providers::wr::{
    inc_rkey, MwBind, PostError, PostErrorKind, RecvWr, RemoteAddr, SendFlags, SendOp, SendWr, Sge, UdDest, Wc,
    WcError, WcFlags, WcOpcode, WcStatus,
};
pub use rverbs_providers::{Errno, Error, ErrorKind, Result};
pub use srq::{SharedReceiveQueue, SrqAttr, SrqControl};

/// The lifetime contracts, as compile-fail tests (`tests/ui/`): an SGE
/// cannot outlive its memory region, a borrowed half cannot outlive its QP,
/// a UD destination cannot outlive its address handle. Each `.stderr` pins
/// the borrow error, so a snippet that fails for another reason fails the
/// test. Host only (it runs cargo): a unit test, not an integration test
/// the VM harness would pick up.
#[cfg(test)]
mod compile_fail {
    #[test]
    fn lifetime_contracts() {
        trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
    }
}

/// The README's code blocks, compiled as doc tests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
