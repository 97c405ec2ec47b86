//! Device and port attributes: what `QUERY_DEVICE` and `QUERY_PORT` report.
//!
//! [`DeviceAttr`] mirrors libibverbs' `struct ibv_device_attr_ex` and
//! [`PortAttr`] mirrors `struct ibv_port_attr`, field for field where the
//! kernel ABI carries the value. Both are plain data: the values are copied
//! out of the kernel's response structs (`ib_uverbs_ex_query_device_resp`,
//! `ib_uverbs_query_port_resp_ex`) the way rdma-core's
//! `ibv_cmd_query_device_any()` and `ibv_cmd_query_port()` copy them, so a
//! program that prints them sees the numbers `ibv_devinfo` sees.
//!
//! Small closed sets (port state, MTU, link layer, atomic capability,
//! physical port state) are enums that keep unknown values
//! (`Unknown(raw)`), because a newer kernel may report values this crate
//! does not know. Bit masks stay plain integers; the `IBV_*`/`IB_UVERBS_*`
//! constant each bit corresponds to is named in the field docs.

use core::fmt;
use core::mem::{offset_of, size_of};

use rverbs_uapi::ib_user_ioctl_verbs::ib_uverbs_query_port_resp_ex;
use rverbs_uapi::ib_user_verbs::{
    ib_uverbs_cq_moderation_caps, ib_uverbs_ex_query_device_resp, ib_uverbs_odp_caps, ib_uverbs_query_device_resp,
    ib_uverbs_rss_caps, ib_uverbs_tm_caps,
};

use crate::gid::Guid;

/// How much of `ibv_device_attr.atomic_cap` the device supports
/// (`enum ibv_atomic_cap`, kernel `enum ib_atomic_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum AtomicCap {
    /// `IBV_ATOMIC_NONE` (0): no atomic operations.
    #[default]
    None,
    /// `IBV_ATOMIC_HCA` (1): atomic with respect to other operations on this device.
    Hca,
    /// `IBV_ATOMIC_GLOB` (2): atomic with respect to the device and the CPUs.
    Glob,
    /// A value this library does not know.
    Unknown(u32),
}

impl AtomicCap {
    /// From the kernel's `atomic_cap` value.
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => AtomicCap::None,
            1 => AtomicCap::Hca,
            2 => AtomicCap::Glob,
            o => AtomicCap::Unknown(o),
        }
    }

    /// The numeric value (`enum ibv_atomic_cap`).
    pub fn raw(self) -> u32 {
        match self {
            AtomicCap::None => 0,
            AtomicCap::Hca => 1,
            AtomicCap::Glob => 2,
            AtomicCap::Unknown(o) => o,
        }
    }
}

/// `ATOMIC_NONE`, `ATOMIC_HCA`, `ATOMIC_GLOB` (the `IBV_` constant names
/// without the prefix), `invalid atomic capability` otherwise: exactly what
/// `ibv_devinfo -v` prints (`atomic_cap_str()` of rdma-core's `devinfo.c`).
impl fmt::Display for AtomicCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AtomicCap::None => "ATOMIC_NONE",
            AtomicCap::Hca => "ATOMIC_HCA",
            AtomicCap::Glob => "ATOMIC_GLOB",
            AtomicCap::Unknown(_) => "invalid atomic capability",
        })
    }
}

/// On-demand-paging capabilities (`struct ibv_odp_caps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OdpCaps {
    /// `IBV_ODP_SUPPORT` (bit 0), `IBV_ODP_SUPPORT_IMPLICIT` (bit 1).
    pub general_caps: u64,
    /// RC operations that may use ODP memory: `IBV_ODP_SUPPORT_SEND` (bit 0),
    /// `_RECV` (1), `_WRITE` (2), `_READ` (3), `_ATOMIC` (4), `_SRQ_RECV` (5),
    /// `_FLUSH` (6), `_ATOMIC_WRITE` (7).
    pub rc_odp_caps: u32,
    /// Same bits, for UC.
    pub uc_odp_caps: u32,
    /// Same bits, for UD.
    pub ud_odp_caps: u32,
}

/// Receive-side-scaling capabilities (`struct ibv_rss_caps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RssCaps {
    /// Bit `1 << qp_type` for each QP type that supports RSS
    /// (`IBV_QPT_RAW_PACKET` = 8, `IBV_QPT_UD` = 4).
    pub supported_qpts: u32,
    /// Maximum number of receive work queue indirection tables.
    pub max_rwq_indirection_tables: u32,
    /// Maximum size of one indirection table.
    pub max_rwq_indirection_table_size: u32,
    /// Supported hash functions (`IBV_RX_HASH_FUNC_*`). **Not in the core
    /// kernel response**: only a provider's driver data carries it (mlx5's
    /// `mlx5_ib_query_device_resp.rss_caps`); 0 otherwise.
    pub rx_hash_function: u32,
    /// Supported hash fields (`IBV_RX_HASH_*`). Driver data only, like
    /// [`rx_hash_function`](Self::rx_hash_function).
    pub rx_hash_fields_mask: u64,
}

/// Tag-matching capabilities (`struct ibv_tm_caps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TmCaps {
    /// Maximum size of a rendezvous header.
    pub max_rndv_hdr_size: u32,
    /// Maximum number of tags; 0 means tag matching is not supported.
    pub max_num_tags: u32,
    /// `IBV_TM_CAP_RC` (bit 0): tag matching on RC QPs.
    pub flags: u32,
    /// Maximum number of outstanding list operations.
    pub max_ops: u32,
    /// Maximum number of SGEs in a tagged buffer.
    pub max_sge: u32,
}

/// CQ moderation capabilities (`struct ibv_cq_moderation_caps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CqModerationCaps {
    /// Maximum number of completions per moderation event.
    pub max_cq_count: u16,
    /// Maximum moderation period, in microseconds.
    pub max_cq_period: u16,
}

/// TCP segmentation offload capabilities (`struct ibv_tso_caps`).
///
/// **Not in the core kernel response**: only a provider's driver data
/// carries it (mlx5's `mlx5_ib_query_device_resp.tso_caps`). All zero unless
/// a provider fills it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TsoCaps {
    /// Maximum TSO payload in bytes; 0 means no TSO.
    pub max_tso: u32,
    /// Bit `1 << qp_type` for each QP type that supports TSO.
    pub supported_qpts: u32,
}

/// Packet-pacing (rate limit) capabilities (`struct ibv_packet_pacing_caps`).
///
/// **Not in the core kernel response**: driver data only (mlx5's
/// `mlx5_ib_query_device_resp.packet_pacing_caps`). All zero unless a
/// provider fills it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PacketPacingCaps {
    /// Minimum rate limit, kbit/s.
    pub qp_rate_limit_min: u32,
    /// Maximum rate limit, kbit/s; 0 means no packet pacing.
    pub qp_rate_limit_max: u32,
    /// Bit `1 << qp_type` for each QP type that supports pacing.
    pub supported_qpts: u32,
}

/// Everything `QUERY_DEVICE` (extended form) reports about a device:
/// libibverbs' `struct ibv_device_attr_ex`, with the base
/// `struct ibv_device_attr` fields flattened in.
///
/// Fields of the extended part that the kernel did not fill (its
/// `response_length` stops before them, or it only answered the legacy
/// 176-byte command) are 0, as in libibverbs.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DeviceAttr {
    /// Firmware version text. The kernel reports a raw `u64`
    /// ([`fw_ver_raw`](Self::fw_ver_raw)); each provider formats it its own
    /// way (rxe `%d.%d.%d` of bits 47..32, 31..16, 15..0; mlx5 pads the last
    /// number to 4 digits). Empty when the provider does not.
    pub fw_ver: String,
    /// The raw firmware version number, as the kernel reported it.
    pub fw_ver_raw: u64,
    /// Node GUID.
    pub node_guid: Guid,
    /// System image GUID.
    pub sys_image_guid: Guid,
    /// Largest registrable memory region, bytes.
    pub max_mr_size: u64,
    /// Supported page sizes: bit `n` set means `2^n` bytes.
    pub page_size_cap: u64,
    /// IEEE OUI of the vendor (0x15b3 for Mellanox/NVIDIA; 0xffffff for rxe).
    pub vendor_id: u32,
    /// Vendor's part number.
    pub vendor_part_id: u32,
    /// Hardware revision.
    pub hw_ver: u32,
    /// Maximum number of QPs.
    pub max_qp: u32,
    /// Maximum outstanding work requests per queue.
    pub max_qp_wr: u32,
    /// The legacy 32-bit capability mask (`enum ibv_device_cap_flags`:
    /// `IBV_DEVICE_RESIZE_MAX_WR` = bit 0 ... `IBV_DEVICE_MANAGED_FLOW_STEERING`
    /// = bit 29). Equal to the low 32 bits of
    /// [`device_cap_flags_ex`](Self::device_cap_flags_ex) when the extended
    /// response was available.
    pub device_cap_flags: u32,
    /// Maximum scatter/gather entries per send/receive WR.
    pub max_sge: u32,
    /// Maximum SGEs per RDMA read WR.
    pub max_sge_rd: u32,
    /// Maximum number of CQs.
    pub max_cq: u32,
    /// Maximum entries per CQ.
    pub max_cqe: u32,
    /// Maximum number of MRs.
    pub max_mr: u32,
    /// Maximum number of PDs.
    pub max_pd: u32,
    /// Maximum outstanding RDMA read/atomic operations per QP as target.
    pub max_qp_rd_atom: u32,
    /// Same, per EE context (unused).
    pub max_ee_rd_atom: u32,
    /// Total outstanding RDMA read/atomic resources as target.
    pub max_res_rd_atom: u32,
    /// Maximum outstanding RDMA read/atomic operations per QP as initiator.
    pub max_qp_init_rd_atom: u32,
    /// Same, per EE context (unused).
    pub max_ee_init_rd_atom: u32,
    /// Atomic operation guarantee.
    pub atomic_cap: AtomicCap,
    /// Maximum EE contexts (unused).
    pub max_ee: u32,
    /// Maximum RD domains (unused).
    pub max_rdd: u32,
    /// Maximum memory windows.
    pub max_mw: u32,
    /// Maximum raw IPv6 datagram QPs.
    pub max_raw_ipv6_qp: u32,
    /// Maximum raw Ethertype datagram QPs.
    pub max_raw_ethy_qp: u32,
    /// Maximum multicast groups.
    pub max_mcast_grp: u32,
    /// Maximum QPs attached to one multicast group.
    pub max_mcast_qp_attach: u32,
    /// Maximum QP attachments over all multicast groups.
    pub max_total_mcast_qp_attach: u32,
    /// Maximum address handles.
    pub max_ah: u32,
    /// Maximum fast memory regions (obsolete, 0 on current kernels).
    pub max_fmr: u32,
    /// Maximum remaps per FMR.
    pub max_map_per_fmr: u32,
    /// Maximum shared receive queues.
    pub max_srq: u32,
    /// Maximum work requests per SRQ.
    pub max_srq_wr: u32,
    /// Maximum SGEs per SRQ work request.
    pub max_srq_sge: u32,
    /// P_Key table size.
    pub max_pkeys: u16,
    /// Local CA ack delay (IBA 4.096 µs * 2^n).
    pub local_ca_ack_delay: u8,
    /// Number of physical ports.
    pub phys_port_cnt: u8,

    /// The extended response's `comp_mask` (reserved, 0 today).
    pub comp_mask: u32,
    /// How many bytes of `ib_uverbs_ex_query_device_resp` the kernel filled
    /// (its `response_length`; 176 when only the legacy command answered).
    pub response_length: u32,
    /// On-demand paging capabilities.
    pub odp_caps: OdpCaps,
    /// Mask of the valid bits of completion timestamps; 0 = no timestamps.
    pub completion_timestamp_mask: u64,
    /// Frequency of the completion timestamp clock, kHz; 0 = unknown.
    pub hca_core_clock: u64,
    /// The full 64-bit capability mask (`IB_UVERBS_DEVICE_*`); the low 32
    /// bits are [`device_cap_flags`](Self::device_cap_flags), the upper ones
    /// include `IBV_DEVICE_RAW_SCATTER_FCS` (bit 34),
    /// `IBV_DEVICE_PCI_WRITE_END_PADDING` (bit 36) and, on 6.2+ kernels,
    /// `FLUSH_GLOBAL` (38), `FLUSH_PERSISTENT` (39), `ATOMIC_WRITE` (40).
    pub device_cap_flags_ex: u64,
    /// Receive-side scaling capabilities.
    pub rss_caps: RssCaps,
    /// Maximum number of receive work queues (`IBV_WQT_RQ`).
    pub max_wq_type_rq: u32,
    /// Raw packet QP offloads: `IBV_RAW_PACKET_CAP_CVLAN_STRIPPING` (bit 0),
    /// `_SCATTER_FCS` (1), `_IP_CSUM` (2), `_DELAY_DROP` (3).
    pub raw_packet_caps: u32,
    /// Tag matching capabilities.
    pub tm_caps: TmCaps,
    /// CQ moderation capabilities.
    pub cq_mod_caps: CqModerationCaps,
    /// Device memory available for `ibv_alloc_dm`, bytes.
    pub max_dm_size: u64,
    /// ODP capabilities for XRC (same bits as [`OdpCaps::rc_odp_caps`]).
    pub xrc_odp_caps: u32,
    /// TSO capabilities (driver data only; see [`TsoCaps`]).
    pub tso_caps: TsoCaps,
    /// Packet pacing capabilities (driver data only; see [`PacketPacingCaps`]).
    pub packet_pacing_caps: PacketPacingCaps,
}

/// Does a response of `resp_len` valid bytes cover the field that starts at
/// `offset` and is `size` bytes long? (libibverbs' `CAN_COPY`, which uses
/// `offsetofend`.)
const fn covers(resp_len: usize, offset: usize, size: usize) -> bool {
    resp_len >= offset + size
}

impl DeviceAttr {
    /// Builds the attributes from the kernel's extended `QUERY_DEVICE`
    /// response.
    ///
    /// `resp_len` is the number of valid bytes: the kernel's
    /// `response_length` for the extended command, or 176 (`size_of` the
    /// base) when only the legacy command could be used. Each extended field
    /// is taken only when `resp_len` reaches its end, otherwise it reads as
    /// 0, exactly as libibverbs' `ibv_cmd_query_device_any()` does.
    /// `fw_ver` is the provider-formatted firmware version.
    ///
    /// The driver-data-only fields ([`tso_caps`](Self::tso_caps),
    /// [`packet_pacing_caps`](Self::packet_pacing_caps),
    /// `rss_caps.rx_hash_*`) are left 0 for the provider to fill in.
    pub(crate) fn from_kernel(resp: &ib_uverbs_ex_query_device_resp, resp_len: usize, fw_ver: String) -> DeviceAttr {
        let b: &ib_uverbs_query_device_resp = &resp.base;
        let mut a = DeviceAttr {
            fw_ver,
            fw_ver_raw: b.fw_ver,
            node_guid: Guid::from_raw_be(b.node_guid),
            sys_image_guid: Guid::from_raw_be(b.sys_image_guid),
            max_mr_size: b.max_mr_size,
            page_size_cap: b.page_size_cap,
            vendor_id: b.vendor_id,
            vendor_part_id: b.vendor_part_id,
            hw_ver: b.hw_ver,
            max_qp: b.max_qp,
            max_qp_wr: b.max_qp_wr,
            device_cap_flags: b.device_cap_flags,
            max_sge: b.max_sge,
            max_sge_rd: b.max_sge_rd,
            max_cq: b.max_cq,
            max_cqe: b.max_cqe,
            max_mr: b.max_mr,
            max_pd: b.max_pd,
            max_qp_rd_atom: b.max_qp_rd_atom,
            max_ee_rd_atom: b.max_ee_rd_atom,
            max_res_rd_atom: b.max_res_rd_atom,
            max_qp_init_rd_atom: b.max_qp_init_rd_atom,
            max_ee_init_rd_atom: b.max_ee_init_rd_atom,
            atomic_cap: AtomicCap::from_raw(b.atomic_cap),
            max_ee: b.max_ee,
            max_rdd: b.max_rdd,
            max_mw: b.max_mw,
            max_raw_ipv6_qp: b.max_raw_ipv6_qp,
            max_raw_ethy_qp: b.max_raw_ethy_qp,
            max_mcast_grp: b.max_mcast_grp,
            max_mcast_qp_attach: b.max_mcast_qp_attach,
            max_total_mcast_qp_attach: b.max_total_mcast_qp_attach,
            max_ah: b.max_ah,
            max_fmr: b.max_fmr,
            max_map_per_fmr: b.max_map_per_fmr,
            max_srq: b.max_srq,
            max_srq_wr: b.max_srq_wr,
            max_srq_sge: b.max_srq_sge,
            max_pkeys: b.max_pkeys,
            local_ca_ack_delay: b.local_ca_ack_delay,
            phys_port_cnt: b.phys_port_cnt,
            response_length: size_of::<ib_uverbs_query_device_resp>() as u32,
            ..DeviceAttr::default()
        };

        type R = ib_uverbs_ex_query_device_resp;
        let len = resp_len.min(size_of::<R>());
        if covers(len, offset_of!(R, response_length), 4) {
            a.comp_mask = resp.comp_mask;
            a.response_length = len as u32;
        }
        if covers(len, offset_of!(R, odp_caps), size_of::<ib_uverbs_odp_caps>()) {
            let o = &resp.odp_caps;
            a.odp_caps = OdpCaps {
                general_caps: o.general_caps,
                rc_odp_caps: o.per_transport_caps.rc_odp_caps,
                uc_odp_caps: o.per_transport_caps.uc_odp_caps,
                ud_odp_caps: o.per_transport_caps.ud_odp_caps,
            };
        }
        if covers(len, offset_of!(R, timestamp_mask), 8) {
            a.completion_timestamp_mask = resp.timestamp_mask;
        }
        if covers(len, offset_of!(R, hca_core_clock), 8) {
            a.hca_core_clock = resp.hca_core_clock;
        }
        if covers(len, offset_of!(R, device_cap_flags_ex), 8) {
            a.device_cap_flags_ex = resp.device_cap_flags_ex;
        }
        if covers(len, offset_of!(R, rss_caps), size_of::<ib_uverbs_rss_caps>()) {
            let r = &resp.rss_caps;
            a.rss_caps.supported_qpts = r.supported_qpts;
            a.rss_caps.max_rwq_indirection_tables = r.max_rwq_indirection_tables;
            a.rss_caps.max_rwq_indirection_table_size = r.max_rwq_indirection_table_size;
        }
        if covers(len, offset_of!(R, max_wq_type_rq), 4) {
            a.max_wq_type_rq = resp.max_wq_type_rq;
        }
        if covers(len, offset_of!(R, raw_packet_caps), 4) {
            a.raw_packet_caps = resp.raw_packet_caps;
        }
        if covers(len, offset_of!(R, tm_caps), size_of::<ib_uverbs_tm_caps>()) {
            let t = &resp.tm_caps;
            a.tm_caps = TmCaps {
                max_rndv_hdr_size: t.max_rndv_hdr_size,
                max_num_tags: t.max_num_tags,
                flags: t.flags,
                max_ops: t.max_ops,
                max_sge: t.max_sge,
            };
        }
        if covers(len, offset_of!(R, cq_moderation_caps), size_of::<ib_uverbs_cq_moderation_caps>()) {
            let c = &resp.cq_moderation_caps;
            a.cq_mod_caps =
                CqModerationCaps { max_cq_count: c.max_cq_moderation_count, max_cq_period: c.max_cq_moderation_period };
        }
        if covers(len, offset_of!(R, max_dm_size), 8) {
            a.max_dm_size = resp.max_dm_size;
        }
        if covers(len, offset_of!(R, xrc_odp_caps), 4) {
            a.xrc_odp_caps = resp.xrc_odp_caps;
        }
        a
    }
}

/// Logical port state (`enum ibv_port_state`, kernel `enum ib_port_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum PortState {
    /// `IBV_PORT_NOP` (0): no state change.
    #[default]
    Nop,
    /// `IBV_PORT_DOWN` (1): the link is down.
    Down,
    /// `IBV_PORT_INIT` (2): link up, not yet configured by the subnet manager.
    Init,
    /// `IBV_PORT_ARMED` (3): configured, waiting to become active.
    Armed,
    /// `IBV_PORT_ACTIVE` (4): usable.
    Active,
    /// `IBV_PORT_ACTIVE_DEFER` (5): active, deferring transitions.
    ActiveDefer,
    /// A value this library does not know.
    Unknown(u8),
}

impl PortState {
    /// From the kernel's `state` byte.
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => PortState::Nop,
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            5 => PortState::ActiveDefer,
            o => PortState::Unknown(o),
        }
    }

    /// The numeric value.
    pub fn raw(self) -> u8 {
        match self {
            PortState::Nop => 0,
            PortState::Down => 1,
            PortState::Init => 2,
            PortState::Armed => 3,
            PortState::Active => 4,
            PortState::ActiveDefer => 5,
            PortState::Unknown(o) => o,
        }
    }

    /// The lower-case description libibverbs' `ibv_port_state_str()` returns
    /// ("down", "active", ...; "unknown" for other values).
    pub fn description(self) -> &'static str {
        match self {
            PortState::Nop => "no state change (NOP)",
            PortState::Down => "down",
            PortState::Init => "init",
            PortState::Armed => "armed",
            PortState::Active => "active",
            PortState::ActiveDefer => "active defer",
            PortState::Unknown(_) => "unknown",
        }
    }
}

/// What `ibv_devinfo` prints (`port_state_str()` of rdma-core's
/// `devinfo.c`): the `IBV_PORT_*` constant name without `IBV_` for the four
/// IBA states (`PORT_DOWN`, `PORT_INIT`, `PORT_ARMED`, `PORT_ACTIVE`), and
/// `invalid state` for every other value, `NOP` and `ACTIVE_DEFER` included
/// ([`raw`](Self::raw) tells those apart; [`description`](Self::description)
/// names them).
impl fmt::Display for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PortState::Down => "PORT_DOWN",
            PortState::Init => "PORT_INIT",
            PortState::Armed => "PORT_ARMED",
            PortState::Active => "PORT_ACTIVE",
            PortState::Nop | PortState::ActiveDefer | PortState::Unknown(_) => "invalid state",
        })
    }
}

/// Path MTU (`enum ibv_mtu`, kernel `enum ib_mtu`): the IB payload size,
/// independent of the Ethernet MTU under RoCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Mtu {
    /// `IBV_MTU_256` (1).
    Mtu256,
    /// `IBV_MTU_512` (2).
    Mtu512,
    /// `IBV_MTU_1024` (3).
    Mtu1024,
    /// `IBV_MTU_2048` (4).
    Mtu2048,
    /// `IBV_MTU_4096` (5).
    Mtu4096,
    /// A value this library does not know (0 or above 5).
    Unknown(u8),
}

impl Mtu {
    /// From the kernel's `max_mtu`/`active_mtu` byte.
    pub fn from_raw(v: u8) -> Self {
        match v {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            5 => Mtu::Mtu4096,
            o => Mtu::Unknown(o),
        }
    }

    /// The numeric `enum ibv_mtu` value (what `ibv_devinfo` prints in parentheses).
    pub fn raw(self) -> u8 {
        match self {
            Mtu::Mtu256 => 1,
            Mtu::Mtu512 => 2,
            Mtu::Mtu1024 => 3,
            Mtu::Mtu2048 => 4,
            Mtu::Mtu4096 => 5,
            Mtu::Unknown(o) => o,
        }
    }

    /// From a size in bytes (256, 512, 1024, 2048 or 4096; the
    /// `pp_mtu_to_enum()` of rdma-core's examples), `None` for any other.
    pub fn from_bytes(bytes: u32) -> Option<Mtu> {
        match bytes {
            256 => Some(Mtu::Mtu256),
            512 => Some(Mtu::Mtu512),
            1024 => Some(Mtu::Mtu1024),
            2048 => Some(Mtu::Mtu2048),
            4096 => Some(Mtu::Mtu4096),
            _ => None,
        }
    }

    /// The size in bytes (`ibv_mtu_to_num()`), `None` for an unknown value.
    pub fn bytes(self) -> Option<u32> {
        match self {
            Mtu::Mtu256 => Some(256),
            Mtu::Mtu512 => Some(512),
            Mtu::Mtu1024 => Some(1024),
            Mtu::Mtu2048 => Some(2048),
            Mtu::Mtu4096 => Some(4096),
            Mtu::Unknown(_) => None,
        }
    }
}

/// The size in bytes (`4096`), as `ibv_devinfo` prints it; `invalid MTU`
/// for an unknown value.
impl fmt::Display for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bytes() {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("invalid MTU"),
        }
    }
}

/// The protocol under the port (`IBV_LINK_LAYER_*`; the kernel's
/// `IB_LINK_LAYER_*` have the same values and libibverbs copies the byte
/// unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LinkLayer {
    /// `IBV_LINK_LAYER_UNSPECIFIED` (0): treated as InfiniBand.
    #[default]
    Unspecified,
    /// `IBV_LINK_LAYER_INFINIBAND` (1).
    Infiniband,
    /// `IBV_LINK_LAYER_ETHERNET` (2): RoCE.
    Ethernet,
    /// A value this library does not know.
    Unknown(u8),
}

impl LinkLayer {
    /// From the kernel's `link_layer` byte.
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => LinkLayer::Unspecified,
            1 => LinkLayer::Infiniband,
            2 => LinkLayer::Ethernet,
            o => LinkLayer::Unknown(o),
        }
    }

    /// The numeric value.
    pub fn raw(self) -> u8 {
        match self {
            LinkLayer::Unspecified => 0,
            LinkLayer::Infiniband => 1,
            LinkLayer::Ethernet => 2,
            LinkLayer::Unknown(o) => o,
        }
    }
}

/// `Unspecified`, `InfiniBand`, `Ethernet`, `Unknown`: the strings
/// `ibv_devinfo` prints.
impl fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkLayer::Unspecified => "Unspecified",
            LinkLayer::Infiniband => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
            LinkLayer::Unknown(_) => "Unknown",
        })
    }
}

/// Physical port state (kernel `enum ib_port_phys_state`; IBA PortPhysicalState).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PhysState {
    /// 1: `IB_PORT_PHYS_STATE_SLEEP`.
    Sleep,
    /// 2: `IB_PORT_PHYS_STATE_POLLING`.
    Polling,
    /// 3: `IB_PORT_PHYS_STATE_DISABLED`.
    Disabled,
    /// 4: `IB_PORT_PHYS_STATE_PORT_CONFIGURATION_TRAINING`.
    PortConfigurationTraining,
    /// 5: `IB_PORT_PHYS_STATE_LINK_UP`.
    LinkUp,
    /// 6: `IB_PORT_PHYS_STATE_LINK_ERROR_RECOVERY`.
    LinkErrorRecovery,
    /// 7: `IB_PORT_PHYS_STATE_PHY_TEST`.
    PhyTest,
    /// Any other value (0 = no state change).
    Unknown(u8),
}

impl PhysState {
    /// From the kernel's `phys_state` byte.
    pub fn from_raw(v: u8) -> Self {
        match v {
            1 => PhysState::Sleep,
            2 => PhysState::Polling,
            3 => PhysState::Disabled,
            4 => PhysState::PortConfigurationTraining,
            5 => PhysState::LinkUp,
            6 => PhysState::LinkErrorRecovery,
            7 => PhysState::PhyTest,
            o => PhysState::Unknown(o),
        }
    }

    /// The numeric value.
    pub fn raw(self) -> u8 {
        match self {
            PhysState::Sleep => 1,
            PhysState::Polling => 2,
            PhysState::Disabled => 3,
            PhysState::PortConfigurationTraining => 4,
            PhysState::LinkUp => 5,
            PhysState::LinkErrorRecovery => 6,
            PhysState::PhyTest => 7,
            PhysState::Unknown(o) => o,
        }
    }
}

/// The strings `ibv_devinfo -v` prints (`LINK_UP`, `POLLING`, and its
/// historical spelling `PORT_CONFIGURATION TRAINNING`); `invalid physical
/// state` otherwise.
impl fmt::Display for PhysState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PhysState::Sleep => "SLEEP",
            PhysState::Polling => "POLLING",
            PhysState::Disabled => "DISABLED",
            PhysState::PortConfigurationTraining => "PORT_CONFIGURATION TRAINNING",
            PhysState::LinkUp => "LINK_UP",
            PhysState::LinkErrorRecovery => "LINK_ERROR_RECOVERY",
            PhysState::PhyTest => "PHY TEST",
            PhysState::Unknown(_) => "invalid physical state",
        })
    }
}

/// Everything `QUERY_PORT` reports about one port: libibverbs'
/// `struct ibv_port_attr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// Logical port state.
    pub state: PortState,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// MTU currently in use (for RoCE: derived from the netdev MTU).
    pub active_mtu: Mtu,
    /// Length of the GID table.
    pub gid_tbl_len: u32,
    /// Port capability mask (`enum ibv_port_cap_flags`: `IBV_PORT_SM` = bit 1
    /// ... `IBV_PORT_CM_SUP` = bit 16 ... `IBV_PORT_IP_BASED_GIDS` = bit 26).
    pub port_cap_flags: u32,
    /// Largest message size, bytes.
    pub max_msg_sz: u32,
    /// Bad P_Key counter.
    pub bad_pkey_cntr: u32,
    /// Q_Key violation counter.
    pub qkey_viol_cntr: u32,
    /// Length of the P_Key table.
    pub pkey_tbl_len: u16,
    /// Base LID (0 under RoCE).
    pub lid: u16,
    /// LID of the subnet manager.
    pub sm_lid: u16,
    /// LID mask control.
    pub lmc: u8,
    /// Maximum number of virtual lanes, encoded (1 = 1 VL, 2 = 2, 3 = 4,
    /// 4 = 8, 5 = 15).
    pub max_vl_num: u8,
    /// Service level of the subnet manager.
    pub sm_sl: u8,
    /// Subnet propagation delay (4.096 µs * 2^n).
    pub subnet_timeout: u8,
    /// InitTypeReply from the subnet manager.
    pub init_type_reply: u8,
    /// Active link width bit: 1 = 1X, 2 = 4X, 4 = 8X, 8 = 12X, 16 = 2X.
    pub active_width: u8,
    /// Active per-lane speed (`enum ibv_port_speed`): 1 = SDR 2.5 Gb/s,
    /// 2 = DDR 5.0, 4 = QDR 10.0, 8 = FDR10 10.0, 16 = FDR 14.0, 32 = EDR 25.0,
    /// 64 = HDR 50.0, 128 = NDR 100.0.
    pub active_speed: u8,
    /// Extended active speed (kernel 6.7+; 256 = XDR 200 Gb/s). 0 when the
    /// kernel does not report it (6.1 always; then use
    /// [`active_speed`](Self::active_speed)).
    pub active_speed_ex: u32,
    /// Physical port state.
    pub phys_state: PhysState,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// `IBV_QPF_GRH_REQUIRED` (bit 0): address handles need a GRH.
    pub flags: u8,
    /// Second capability mask (`enum ibv_port_cap_flags2`:
    /// `IBV_PORT_SET_NODE_DESC_SUP` = bit 0 ... `IBV_PORT_LINK_SPEED_XDR_SUP`
    /// = bit 12).
    pub port_cap_flags2: u16,
}

impl PortAttr {
    /// Builds the attributes from the kernel's `QUERY_PORT` ioctl response,
    /// as libibverbs' `ibv_cmd_query_port()` copies it.
    pub(crate) fn from_kernel(resp: &ib_uverbs_query_port_resp_ex) -> PortAttr {
        let l = &resp.legacy_resp;
        PortAttr {
            state: PortState::from_raw(l.state),
            max_mtu: Mtu::from_raw(l.max_mtu),
            active_mtu: Mtu::from_raw(l.active_mtu),
            gid_tbl_len: l.gid_tbl_len,
            port_cap_flags: l.port_cap_flags,
            max_msg_sz: l.max_msg_sz,
            bad_pkey_cntr: l.bad_pkey_cntr,
            qkey_viol_cntr: l.qkey_viol_cntr,
            pkey_tbl_len: l.pkey_tbl_len,
            lid: l.lid,
            sm_lid: l.sm_lid,
            lmc: l.lmc,
            max_vl_num: l.max_vl_num,
            sm_sl: l.sm_sl,
            subnet_timeout: l.subnet_timeout,
            init_type_reply: l.init_type_reply,
            active_width: l.active_width,
            active_speed: l.active_speed,
            active_speed_ex: resp.active_speed_ex,
            phys_state: PhysState::from_raw(l.phys_state),
            link_layer: LinkLayer::from_raw(l.link_layer),
            flags: l.flags,
            port_cap_flags2: resp.port_cap_flags2,
        }
    }

    /// The active speed code: [`active_speed_ex`](Self::active_speed_ex)
    /// when the kernel reported one, else [`active_speed`](Self::active_speed)
    /// (what rdma-core 49+ `ibv_devinfo` prints).
    pub fn effective_speed_code(&self) -> u32 {
        if self.active_speed_ex != 0 {
            self.active_speed_ex
        } else {
            u32::from(self.active_speed)
        }
    }

    /// Per-lane signalling rate in units of 100 Mb/s for a speed code
    /// (`25` = 2.5 Gb/s), `None` for an unknown code.
    pub fn lane_rate_100mbps(speed: u32) -> Option<u32> {
        Some(match speed {
            1 => 25,
            2 => 50,
            4 | 8 => 100,
            16 => 140,
            32 => 250,
            64 => 500,
            128 => 1000,
            256 => 2000,
            _ => return None,
        })
    }

    /// Number of virtual lanes for an encoded `max_vl_num` (1 = 1, 2 = 2,
    /// 3 = 4, 4 = 8, 5 = 15), `None` for any other value.
    pub fn vl_count(vl_num: u8) -> Option<u32> {
        Some(match vl_num {
            1 => 1,
            2 => 2,
            3 => 4,
            4 => 8,
            5 => 15,
            _ => return None,
        })
    }

    /// Number of lanes for an `active_width` bit, `None` if unknown.
    pub fn width_lanes(width: u8) -> Option<u32> {
        Some(match width {
            1 => 1,
            2 => 4,
            4 => 8,
            8 => 12,
            16 => 2,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base_resp() -> ib_uverbs_ex_query_device_resp {
        let mut r = ib_uverbs_ex_query_device_resp::default();
        r.base.fw_ver = 0x0010_001b_0fa0;
        r.base.node_guid = u64::from_ne_bytes([0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56]);
        r.base.sys_image_guid = r.base.node_guid;
        r.base.max_mr_size = u64::MAX;
        r.base.vendor_id = 0xffffff;
        r.base.max_qp = 1 << 16;
        r.base.device_cap_flags = 0x0000_3c76;
        r.base.atomic_cap = 1;
        r.base.max_pkeys = 64;
        r.base.phys_port_cnt = 1;
        r.comp_mask = 0;
        r.response_length = size_of::<ib_uverbs_ex_query_device_resp>() as u32;
        r.odp_caps.general_caps = 3;
        r.odp_caps.per_transport_caps.rc_odp_caps = 0x3f;
        r.timestamp_mask = 0xffff;
        r.hca_core_clock = 156250;
        r.device_cap_flags_ex = 0x0000_0004_0000_3c76;
        r.rss_caps.supported_qpts = 1 << 8;
        r.max_wq_type_rq = 7;
        r.raw_packet_caps = 0xf;
        r.tm_caps.max_num_tags = 9;
        r.cq_moderation_caps.max_cq_moderation_count = 100;
        r.cq_moderation_caps.max_cq_moderation_period = 200;
        r.max_dm_size = 4096;
        r.xrc_odp_caps = 0x21;
        r
    }

    #[test]
    fn full_ex_response_copies_everything() {
        let r = base_resp();
        let a = DeviceAttr::from_kernel(&r, 304, "16.27.4000".into());
        assert_eq!(a.fw_ver, "16.27.4000");
        assert_eq!(a.node_guid.to_string(), "5054:00ff:fe12:3456");
        assert_eq!(a.sys_image_guid, a.node_guid);
        assert_eq!(a.max_mr_size, u64::MAX);
        assert_eq!(a.vendor_id, 0xffffff);
        assert_eq!(a.device_cap_flags, 0x3c76);
        assert_eq!(a.atomic_cap, AtomicCap::Hca);
        assert_eq!(a.phys_port_cnt, 1);
        assert_eq!(a.response_length, 304);
        assert_eq!(a.odp_caps.general_caps, 3);
        assert_eq!(a.odp_caps.rc_odp_caps, 0x3f);
        assert_eq!(a.completion_timestamp_mask, 0xffff);
        assert_eq!(a.hca_core_clock, 156250);
        assert_eq!(a.device_cap_flags_ex, 0x4_0000_3c76);
        assert_eq!(a.rss_caps.supported_qpts, 1 << 8);
        assert_eq!(a.max_wq_type_rq, 7);
        assert_eq!(a.raw_packet_caps, 0xf);
        assert_eq!(a.tm_caps.max_num_tags, 9);
        assert_eq!(a.cq_mod_caps, CqModerationCaps { max_cq_count: 100, max_cq_period: 200 });
        assert_eq!(a.max_dm_size, 4096);
        assert_eq!(a.xrc_odp_caps, 0x21);
        assert_eq!(a.tso_caps, TsoCaps::default());
    }

    #[test]
    fn short_responses_zero_the_tail() {
        let r = base_resp();
        // Legacy command only: nothing of the extension.
        let a = DeviceAttr::from_kernel(&r, 176, String::new());
        assert_eq!(a.max_qp, 1 << 16);
        assert_eq!(a.response_length, 176);
        assert_eq!(a.odp_caps, OdpCaps::default());
        assert_eq!(a.device_cap_flags_ex, 0);
        assert_eq!(a.xrc_odp_caps, 0);
        // The kernel's minimum (184): comp_mask + response_length only.
        let a = DeviceAttr::from_kernel(&r, 184, String::new());
        assert_eq!(a.response_length, 184);
        assert_eq!(a.odp_caps, OdpCaps::default());
        // Up to and including device_cap_flags_ex (232): rss and later are 0.
        let a = DeviceAttr::from_kernel(&r, 232, String::new());
        assert_eq!(a.odp_caps.general_caps, 3);
        assert_eq!(a.hca_core_clock, 156250);
        assert_eq!(a.device_cap_flags_ex, 0x4_0000_3c76);
        assert_eq!(a.rss_caps, RssCaps::default());
        assert_eq!(a.max_dm_size, 0);
        // A field only partly covered is not copied.
        let a = DeviceAttr::from_kernel(&r, 236, String::new());
        assert_eq!(a.rss_caps, RssCaps::default());
        // Up to max_dm_size (296): xrc_odp_caps still 0.
        let a = DeviceAttr::from_kernel(&r, 296, String::new());
        assert_eq!(a.max_dm_size, 4096);
        assert_eq!(a.xrc_odp_caps, 0);
        // Claims beyond the struct are clamped.
        let a = DeviceAttr::from_kernel(&r, 4096, String::new());
        assert_eq!(a.response_length, 304);
        assert_eq!(a.xrc_odp_caps, 0x21);
    }

    #[test]
    fn port_from_kernel() {
        let mut r = ib_uverbs_query_port_resp_ex::default();
        r.legacy_resp.state = 4;
        r.legacy_resp.max_mtu = 5;
        r.legacy_resp.active_mtu = 3;
        r.legacy_resp.gid_tbl_len = 1024;
        r.legacy_resp.port_cap_flags = 0x0401_0000;
        r.legacy_resp.max_msg_sz = 0x800000;
        r.legacy_resp.pkey_tbl_len = 1;
        r.legacy_resp.active_width = 1;
        r.legacy_resp.active_speed = 8;
        r.legacy_resp.phys_state = 5;
        r.legacy_resp.link_layer = 2;
        r.port_cap_flags2 = 0x20;
        let p = PortAttr::from_kernel(&r);
        assert_eq!(p.state, PortState::Active);
        assert_eq!(p.state.to_string(), "PORT_ACTIVE");
        assert_eq!(p.state.description(), "active");
        assert_eq!(p.max_mtu, Mtu::Mtu4096);
        assert_eq!(p.active_mtu.to_string(), "1024");
        assert_eq!(p.active_mtu.raw(), 3);
        assert_eq!(p.gid_tbl_len, 1024);
        assert_eq!(p.link_layer, LinkLayer::Ethernet);
        assert_eq!(p.link_layer.to_string(), "Ethernet");
        assert_eq!(p.phys_state, PhysState::LinkUp);
        assert_eq!(p.phys_state.to_string(), "LINK_UP");
        assert_eq!(p.port_cap_flags2, 0x20);
        assert_eq!(p.active_speed_ex, 0);
        assert_eq!(p.effective_speed_code(), 8);
        r.active_speed_ex = 256;
        assert_eq!(PortAttr::from_kernel(&r).effective_speed_code(), 256);
    }

    #[test]
    fn mtu_from_bytes() {
        for m in [Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096] {
            assert_eq!(Mtu::from_bytes(m.bytes().unwrap()), Some(m));
        }
        assert_eq!(Mtu::from_bytes(1024), Some(Mtu::Mtu1024));
        for b in [0, 1, 255, 1000, 1500, 8192, 9000, u32::MAX] {
            assert_eq!(Mtu::from_bytes(b), None, "{b}");
        }
    }

    #[test]
    fn enum_round_trips_and_strings() {
        for v in 0..=255u8 {
            assert_eq!(PortState::from_raw(v).raw(), v);
            assert_eq!(Mtu::from_raw(v).raw(), v);
            assert_eq!(LinkLayer::from_raw(v).raw(), v);
            assert_eq!(PhysState::from_raw(v).raw(), v);
        }
        for v in 0..10u32 {
            assert_eq!(AtomicCap::from_raw(v).raw(), v);
        }
        assert_eq!(Mtu::from_raw(0).to_string(), "invalid MTU");
        assert_eq!(Mtu::from_raw(1).bytes(), Some(256));
        assert_eq!(LinkLayer::from_raw(0).to_string(), "Unspecified");
        assert_eq!(LinkLayer::from_raw(1).to_string(), "InfiniBand");
        assert_eq!(LinkLayer::from_raw(9).to_string(), "Unknown");
        assert_eq!(PortState::from_raw(1).to_string(), "PORT_DOWN");
        assert_eq!(PortState::from_raw(4).to_string(), "PORT_ACTIVE");
        for v in [0, 5, 6, 255] {
            assert_eq!(PortState::from_raw(v).to_string(), "invalid state", "{v}");
        }
        assert_eq!(PortState::from_raw(5).description(), "active defer");
        assert_eq!(PhysState::from_raw(4).to_string(), "PORT_CONFIGURATION TRAINNING");
        assert_eq!(AtomicCap::Glob.to_string(), "ATOMIC_GLOB");
        assert_eq!(AtomicCap::from_raw(0).to_string(), "ATOMIC_NONE");
        assert_eq!(AtomicCap::from_raw(1).to_string(), "ATOMIC_HCA");
        assert_eq!(AtomicCap::from_raw(7).to_string(), "invalid atomic capability");
        assert_eq!(Mtu::from_raw(3).to_string(), "1024");
        assert_eq!(Mtu::from_raw(5).to_string(), "4096");
        assert_eq!(Mtu::from_raw(6).to_string(), "invalid MTU");
        assert_eq!(LinkLayer::from_raw(2).to_string(), "Ethernet");
        assert_eq!(PhysState::from_raw(5).to_string(), "LINK_UP");
        assert_eq!(PhysState::from_raw(0).to_string(), "invalid physical state");
        assert_eq!(PortAttr::vl_count(5), Some(15));
        assert_eq!(PortAttr::vl_count(0), None);
        assert_eq!(PortAttr::lane_rate_100mbps(8), Some(100));
        assert_eq!(PortAttr::lane_rate_100mbps(3), None);
        assert_eq!(PortAttr::width_lanes(16), Some(2));
    }
}
