//! A fake mlx5 uverbs kernel: the kernel's and the HCA's side of a
//! ConnectX-5 (`mlx5_9`, `/dev/infiniband/uverbs9`), in Rust, for hosts
//! without RDMA. rdma-core's unmodified libibverbs + libmlx5 and rverbs
//! both run on it (through the `LD_PRELOAD` library in `preload/`), so the
//! differential test (`mlx5-diff/`) can compare what each library hands the
//! kernel and the HCA.
//!
//! What it is:
//! - [`kernel`]: the uverbs device node, as one of two kernels
//!   ([`ioctl::Mode`]): a 5.7+ kernel with the ioctl framework and dynamic
//!   UARs ([`ioctl`]), or one without it, where every `RDMA_VERBS_IOCTL` gets
//!   `ENOTTY` and both libraries fall back to the legacy `write()` commands
//!   (rdma-core's `cmd_fallback.c` rule, which rverbs shares); with mlx5_ib's
//!   driver data in and out of GET_CONTEXT (static or dynamic UARs), QUERY_DEVICE(_EX),
//!   QUERY_PORT, ALLOC_PD, REG_MR, CREATE/RESIZE/DESTROY_CQ,
//!   CREATE/MODIFY/QUERY/DESTROY_QP, CREATE/MODIFY/QUERY/DESTROY_SRQ,
//!   CREATE_AH and the UAR mmaps. Every command is recorded
//!   ([`record::Command`]) with its core and driver bytes.
//! - [`sysfs`]: the sysfs tree (`SYSFS_PATH`) that makes libibverbs' device
//!   scan and rverbs' [`Sysfs::at`](../rverbs/device/struct.Sysfs.html)
//!   find the device.
//! - [`hca`]: the HCA's side of the queues: reading WQEs out of the send
//!   ring and writing CQEs into a CQ buffer, from the layouts in the PRM
//!   (independently of rverbs' `mlx5` module).
//!
//! Values are those of a ConnectX-5 (`MT4119`) on a RoCE port, as mlx5_ib
//! reports them; the numbers the kernel assigns (handles, QPNs, CQNs, keys)
//! restart in every opened context, so two libraries that do the same work
//! get the same numbers.
#![allow(unsafe_code)]

pub mod attrs;
pub mod hca;
pub mod ioctl;
pub mod kernel;
pub mod launch;
pub mod record;
pub mod sysfs;
mod user;

/// The fake device's kernel name.
pub const IBDEV: &str = "mlx5_9";
/// Its uverbs node name.
pub const UVERBS: &str = "uverbs9";
/// The path of its device node (served by the preload library; no node
/// exists on disk).
pub const DEV_PATH: &str = "/dev/infiniband/uverbs9";
/// `dev_t` of the node: uverbs' major 231, minor 192 + 9.
pub const DEV_MAJOR: u32 = 231;
pub const DEV_MINOR: u32 = 201;
/// Environment: the JSON record's file (appended at every close of the fake
/// device), for programs that cannot ask the preload library directly.
pub const ENV_RECORD: &str = "RVERBS_FAKE_MLX5_RECORD";
/// Environment: `1` prints every command to stderr.
pub const ENV_DEBUG: &str = "RVERBS_FAKE_MLX5_DEBUG";
