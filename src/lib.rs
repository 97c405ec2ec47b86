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
#![deny(unsafe_code)]

pub mod attr;
mod context;
mod device;
mod gid;

pub use attr::*;
pub use context::Context;
pub use device::{device_by_name, devices, Device, NodeType, Sysfs, Transport};
pub use gid::{Gid, GidEntry, GidType, Guid};
pub use rverbs_providers::driver::DriverId;
pub use rverbs_providers::{Errno, Error, Result};
