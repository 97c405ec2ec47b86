//! `include/uapi/rdma/rdma_user_ioctl.h`: ioctl request numbers on RDMA
//! character devices.
//!
//! Synced from rdma-core `kernel-headers/rdma/rdma_user_ioctl.h` at commit
//! `691953d8d502`.
//!
//! The header itself only defines the MAD (`/dev/infiniband/umadN`) and hfi1
//! ioctls; `RDMA_VERBS_IOCTL` lives in `rdma_user_ioctl_cmds.h` and is
//! re-exported here because this is where users look for ioctl numbers.
//! The `_IOWR(...)` values were evaluated with gcc on x86_64. The hfi1
//! ioctls (`HFI1_IOCTL_*`, for the Omni-Path `hfi1` character device) are
//! not mirrored: rverbs never opens that device.
#![allow(missing_docs)]

pub use crate::rdma_user_ioctl_cmds::{RDMA_IOCTL_MAGIC, RDMA_VERBS_IOCTL};

/// `IB_IOCTL_MAGIC`: legacy name of [`RDMA_IOCTL_MAGIC`].
pub const IB_IOCTL_MAGIC: u32 = RDMA_IOCTL_MAGIC;

/// `_IOWR(RDMA_IOCTL_MAGIC, 0x01, struct ib_user_mad_reg_req)`.
pub const IB_USER_MAD_REGISTER_AGENT: u32 = 0xC01C_1B01;
/// `_IOW(RDMA_IOCTL_MAGIC, 0x02, __u32)`.
pub const IB_USER_MAD_UNREGISTER_AGENT: u32 = 0x4004_1B02;
/// `_IO(RDMA_IOCTL_MAGIC, 0x03)`.
pub const IB_USER_MAD_ENABLE_PKEY: u32 = 0x0000_1B03;
/// `_IOWR(RDMA_IOCTL_MAGIC, 0x04, struct ib_user_mad_reg_req2)`.
pub const IB_USER_MAD_REGISTER_AGENT2: u32 = 0xC028_1B04;
