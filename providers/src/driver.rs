//! Which kernel driver a device has, and what each provider needs at open:
//! the driver ABI range it accepts, its `GET_CONTEXT` driver data, how it
//! formats the firmware version.
//!
//! Driver ids are `enum rdma_driver_id` (`include/uapi/rdma/ib_user_ioctl_verbs.h`).

use std::fmt;

use rverbs_uapi::ib_user_ioctl_verbs::{RDMA_DRIVER_MLX5, RDMA_DRIVER_RXE, RDMA_DRIVER_SIW, RDMA_DRIVER_UNKNOWN};

/// A kernel RDMA driver id (`RDMA_DRIVER_*`), as reported by RDMA netlink.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DriverId(pub u32);

impl DriverId {
    /// `RDMA_DRIVER_UNKNOWN`: netlink could not tell and sysfs gave no hint.
    pub const UNKNOWN: DriverId = DriverId(RDMA_DRIVER_UNKNOWN);
    /// `RDMA_DRIVER_MLX5`: NVIDIA ConnectX-4 and later.
    pub const MLX5: DriverId = DriverId(RDMA_DRIVER_MLX5);
    /// `RDMA_DRIVER_RXE`: soft-RoCE.
    pub const RXE: DriverId = DriverId(RDMA_DRIVER_RXE);
    /// `RDMA_DRIVER_SIW`: soft-iWARP.
    pub const SIW: DriverId = DriverId(RDMA_DRIVER_SIW);

    /// The kernel driver's name (`mlx5`, `rxe`, ...), `unknown` for ids we
    /// have no name for.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 22] = [
            "unknown",
            "mlx5",
            "mlx4",
            "cxgb3",
            "cxgb4",
            "mthca",
            "bnxt_re",
            "ocrdma",
            "nes",
            "irdma",
            "vmw_pvrdma",
            "qedr",
            "hns",
            "usnic",
            "rxe",
            "hfi1",
            "qib",
            "efa",
            "siw",
            "erdma",
            "mana",
            "ionic",
        ];
        NAMES.get(self.0 as usize).copied().unwrap_or("unknown")
    }

    /// The provider rverbs has for this driver, if any.
    pub fn provider(self) -> Option<Provider> {
        match self {
            DriverId::RXE => Some(Provider::Rxe),
            DriverId::MLX5 => Some(Provider::Mlx5),
            DriverId::SIW => Some(Provider::Siw),
            _ => None,
        }
    }
}

impl fmt::Debug for DriverId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DriverId({}: {})", self.0, self.name())
    }
}

impl fmt::Display for DriverId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The userspace providers rverbs has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// Soft-RoCE: queues shared with the kernel through mmap.
    Rxe,
    /// NVIDIA ConnectX: queues in user memory, doorbells through UAR pages.
    Mlx5,
    /// Soft-iWARP: RC queues shared with the kernel through mmap, each
    /// entry owned through its flags; connected only through the CM.
    Siw,
}

impl Provider {
    /// The driver ABI versions (`/sys/class/infiniband_verbs/uverbsN/abi_version`)
    /// this provider understands; the same ranges rdma-core's providers accept
    /// on 64-bit hosts.
    pub fn abi_range(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Provider::Rxe => 1..=2,
            Provider::Mlx5 => 1..=1,
            Provider::Siw => 1..=1,
        }
    }

    /// The driver id this provider serves.
    pub fn driver_id(self) -> DriverId {
        match self {
            Provider::Rxe => DriverId::RXE,
            Provider::Mlx5 => DriverId::MLX5,
            Provider::Siw => DriverId::SIW,
        }
    }
}

/// Formats the raw `fw_ver` of `QUERY_DEVICE` as the device's provider does
/// in `ibv_query_device` (rxe and most providers: `major.minor.sub`; mlx5:
/// `major.minor.%04d`). Drivers without a provider of ours use the generic form.
pub fn format_fw_ver(driver: DriverId, raw: u64) -> String {
    let major = (raw >> 32) & 0xffff;
    let minor = (raw >> 16) & 0xffff;
    let sub = raw & 0xffff;
    match driver {
        DriverId::MLX5 => format!("{major}.{minor}.{sub:04}"),
        _ => format!("{major}.{minor}.{sub}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_fw() {
        assert_eq!(DriverId(14).name(), "rxe");
        assert_eq!(DriverId(1).name(), "mlx5");
        assert_eq!(DriverId(18).name(), "siw");
        assert_eq!(DriverId::SIW.provider(), Some(Provider::Siw));
        assert_eq!((Provider::Siw.driver_id(), Provider::Siw.abi_range()), (DriverId::SIW, 1..=1));
        assert_eq!((Provider::Siw.reg_mr_udata_len(), Provider::Rxe.reg_mr_udata_len()), (8, 0));
        assert!(Provider::Siw.reg_mr_udata_len() <= crate::cmd::mr::REG_MR_UDATA_MAX);
        assert_eq!(DriverId(99).name(), "unknown");
        assert_eq!(format_fw_ver(DriverId::RXE, 0), "0.0.0");
        assert_eq!(format_fw_ver(DriverId::MLX5, (16u64 << 32) | (35 << 16) | 2000), "16.35.2000");
        assert_eq!(format_fw_ver(DriverId::MLX5, (16u64 << 32) | (35 << 16) | 12), "16.35.0012");
    }
}
