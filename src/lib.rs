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

mod ah;
pub mod attr;
mod channel;
mod context;
mod cq;
mod device;
mod event;
mod gid;
mod mr;
mod pd;
mod post;
mod qp;
pub mod qp_state;
mod srq;

pub use ah::AddressHandle;
pub use attr::*;
pub use channel::{CompletionChannel, CqEvent};
pub use context::Context;
pub use cq::CompletionQueue;
pub use device::{device_by_name, devices, Device, NodeType, Sysfs, Transport};
pub use event::{AsyncEvent, AsyncEventType, EventObject};
pub use gid::{Gid, GidEntry, GidType, Guid};
pub use mr::{page_size, AccessFlags, MemoryRegion};
pub use pd::ProtectionDomain;
pub use post::{RecvQueue, SendQueue};
pub use qp::{AhAttr, ConnectOptions, GlobalRoute, QpAttr, QpCap, QpInitAttr, QueuePair, RemoteEndpoint};
pub use qp_state::{QpAttrMask, QpState, QpType};
pub use rverbs_providers::driver::DriverId;
pub use rverbs_providers::wr::{
    PostError, PostErrorKind, RecvWr, RemoteAddr, SendFlags, SendOp, SendWr, Sge, UdDest, Wc, WcFlags, WcOpcode,
    WcStatus,
};
pub use rverbs_providers::{Errno, Error, Result};
pub use srq::{SharedReceiveQueue, SrqAttr};
