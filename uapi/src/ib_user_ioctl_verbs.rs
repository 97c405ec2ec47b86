//! `include/uapi/rdma/ib_user_ioctl_verbs.h`: enums and structs used by the
//! uverbs ioctl methods (access flags, QP types, driver ids, GID entries).
//!
//! Synced from rdma-core `kernel-headers/rdma/ib_user_ioctl_verbs.h` at
//! commit `691953d8d502`.
//!
//! Kernel availability: `IB_UVERBS_ACCESS_FLUSH_*` 6.2; `RDMA_DRIVER_MANA`
//! 6.2, `RDMA_DRIVER_IONIC` ≈6.18; `IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA`
//! ≈7.1; `ib_uverbs_buffer_desc` and the `COMP_CNTR` enums ≤7.2/7.3.
#![allow(missing_docs)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::ib_user_verbs::ib_uverbs_query_port_resp;

pub const IB_UVERBS_ACCESS_OPTIONAL_FIRST: u32 = 0x100000;
pub const IB_UVERBS_ACCESS_OPTIONAL_LAST: u32 = 0x20000000;

// enum ib_uverbs_core_support
pub const IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS: u32 = 1;
pub const IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA: u32 = 2;

// enum ib_uverbs_access_flags
pub const IB_UVERBS_ACCESS_LOCAL_WRITE: u32 = 1;
pub const IB_UVERBS_ACCESS_REMOTE_WRITE: u32 = 2;
pub const IB_UVERBS_ACCESS_REMOTE_READ: u32 = 4;
pub const IB_UVERBS_ACCESS_REMOTE_ATOMIC: u32 = 8;
pub const IB_UVERBS_ACCESS_MW_BIND: u32 = 0x10;
pub const IB_UVERBS_ACCESS_ZERO_BASED: u32 = 0x20;
pub const IB_UVERBS_ACCESS_ON_DEMAND: u32 = 0x40;
pub const IB_UVERBS_ACCESS_HUGETLB: u32 = 0x80;
pub const IB_UVERBS_ACCESS_FLUSH_GLOBAL: u32 = 0x100;
pub const IB_UVERBS_ACCESS_FLUSH_PERSISTENT: u32 = 0x200;
pub const IB_UVERBS_ACCESS_RELAXED_ORDERING: u32 = 0x100000;
pub const IB_UVERBS_ACCESS_OPTIONAL_RANGE: u32 = 0x3ff00000;

// enum ib_uverbs_srq_type
pub const IB_UVERBS_SRQT_BASIC: u32 = 0;
pub const IB_UVERBS_SRQT_XRC: u32 = 1;
pub const IB_UVERBS_SRQT_TM: u32 = 2;

// enum ib_uverbs_wq_type
pub const IB_UVERBS_WQT_RQ: u32 = 0;

// enum ib_uverbs_wq_flags
pub const IB_UVERBS_WQ_FLAGS_CVLAN_STRIPPING: u32 = 1;
pub const IB_UVERBS_WQ_FLAGS_SCATTER_FCS: u32 = 2;
pub const IB_UVERBS_WQ_FLAGS_DELAY_DROP: u32 = 4;
pub const IB_UVERBS_WQ_FLAGS_PCI_WRITE_END_PADDING: u32 = 8;

// enum ib_uverbs_qp_type
pub const IB_UVERBS_QPT_RC: u32 = 2;
pub const IB_UVERBS_QPT_UC: u32 = 3;
pub const IB_UVERBS_QPT_UD: u32 = 4;
pub const IB_UVERBS_QPT_RAW_PACKET: u32 = 8;
pub const IB_UVERBS_QPT_XRC_INI: u32 = 9;
pub const IB_UVERBS_QPT_XRC_TGT: u32 = 10;
pub const IB_UVERBS_QPT_DRIVER: u32 = 0xff;

// enum ib_uverbs_qp_create_flags
pub const IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK: u32 = 2;
pub const IB_UVERBS_QP_CREATE_SCATTER_FCS: u32 = 0x100;
pub const IB_UVERBS_QP_CREATE_CVLAN_STRIPPING: u32 = 0x200;
pub const IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING: u32 = 0x800;
pub const IB_UVERBS_QP_CREATE_SQ_SIG_ALL: u32 = 0x1000;

// enum ib_uverbs_query_port_cap_flags
pub const IB_UVERBS_PCF_SM: u32 = 2;
pub const IB_UVERBS_PCF_NOTICE_SUP: u32 = 4;
pub const IB_UVERBS_PCF_TRAP_SUP: u32 = 8;
pub const IB_UVERBS_PCF_OPT_IPD_SUP: u32 = 0x10;
pub const IB_UVERBS_PCF_AUTO_MIGR_SUP: u32 = 0x20;
pub const IB_UVERBS_PCF_SL_MAP_SUP: u32 = 0x40;
pub const IB_UVERBS_PCF_MKEY_NVRAM: u32 = 0x80;
pub const IB_UVERBS_PCF_PKEY_NVRAM: u32 = 0x100;
pub const IB_UVERBS_PCF_LED_INFO_SUP: u32 = 0x200;
pub const IB_UVERBS_PCF_SM_DISABLED: u32 = 0x400;
pub const IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP: u32 = 0x800;
pub const IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP: u32 = 0x1000;
pub const IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP: u32 = 0x4000;
pub const IB_UVERBS_PCF_CM_SUP: u32 = 0x10000;
pub const IB_UVERBS_PCF_SNMP_TUNNEL_SUP: u32 = 0x20000;
pub const IB_UVERBS_PCF_REINIT_SUP: u32 = 0x40000;
pub const IB_UVERBS_PCF_DEVICE_MGMT_SUP: u32 = 0x80000;
pub const IB_UVERBS_PCF_VENDOR_CLASS_SUP: u32 = 0x100000;
pub const IB_UVERBS_PCF_DR_NOTICE_SUP: u32 = 0x200000;
pub const IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP: u32 = 0x400000;
pub const IB_UVERBS_PCF_BOOT_MGMT_SUP: u32 = 0x800000;
pub const IB_UVERBS_PCF_LINK_LATENCY_SUP: u32 = 0x1000000;
pub const IB_UVERBS_PCF_CLIENT_REG_SUP: u32 = 0x2000000;
pub const IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP: u32 = 0x8000000;
pub const IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP: u32 = 0x10000000;
pub const IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP: u32 = 0x20000000;
pub const IB_UVERBS_PCF_MCAST_FDB_TOP_SUP: u32 = 0x40000000;
pub const IB_UVERBS_PCF_HIERARCHY_INFO_SUP: u32 = 0x80000000;
pub const IB_UVERBS_PCF_IP_BASED_GIDS: u32 = 0x4000000;

// enum ib_uverbs_query_port_flags
pub const IB_UVERBS_QPF_GRH_REQUIRED: u32 = 1;

// enum ib_uverbs_flow_action_esp_keymat
pub const IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM: u32 = 0;

// enum ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo
pub const IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ: u32 = 0;

// enum ib_uverbs_flow_action_esp_replay
pub const IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE: u32 = 0;
pub const IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP: u32 = 1;

// enum ib_uverbs_flow_action_esp_flags
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO: u32 = 0;
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD: u32 = 1;
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL: u32 = 0;
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT: u32 = 2;
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT: u32 = 0;
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT: u32 = 4;
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW: u32 = 8;

// enum ib_uverbs_read_counters_flags
pub const IB_UVERBS_READ_COUNTERS_PREFER_CACHED: u32 = 1;

// enum ib_uverbs_advise_mr_advice
pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH: u32 = 0;
pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE: u32 = 1;
pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT: u32 = 2;

// enum ib_uverbs_advise_mr_flag
pub const IB_UVERBS_ADVISE_MR_FLAG_FLUSH: u32 = 1;

// enum rdma_driver_id: `ib_uverbs_ioctl_hdr.driver_id` and netlink
// `RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID`.
pub const RDMA_DRIVER_UNKNOWN: u32 = 0;
/// ConnectX-4 and later (`mlx5_ib`).
pub const RDMA_DRIVER_MLX5: u32 = 1;
pub const RDMA_DRIVER_MLX4: u32 = 2;
pub const RDMA_DRIVER_CXGB3: u32 = 3;
pub const RDMA_DRIVER_CXGB4: u32 = 4;
pub const RDMA_DRIVER_MTHCA: u32 = 5;
pub const RDMA_DRIVER_BNXT_RE: u32 = 6;
pub const RDMA_DRIVER_OCRDMA: u32 = 7;
pub const RDMA_DRIVER_NES: u32 = 8;
pub const RDMA_DRIVER_I40IW: u32 = 9;
pub const RDMA_DRIVER_IRDMA: u32 = 9;
pub const RDMA_DRIVER_VMW_PVRDMA: u32 = 10;
pub const RDMA_DRIVER_QEDR: u32 = 11;
pub const RDMA_DRIVER_HNS: u32 = 12;
pub const RDMA_DRIVER_USNIC: u32 = 13;
/// Soft-RoCE (`rdma_rxe`).
pub const RDMA_DRIVER_RXE: u32 = 14;
pub const RDMA_DRIVER_HFI1: u32 = 15;
pub const RDMA_DRIVER_QIB: u32 = 16;
pub const RDMA_DRIVER_EFA: u32 = 17;
pub const RDMA_DRIVER_SIW: u32 = 18;
pub const RDMA_DRIVER_ERDMA: u32 = 19;
pub const RDMA_DRIVER_MANA: u32 = 20;
pub const RDMA_DRIVER_IONIC: u32 = 21;

// enum ib_uverbs_gid_type
pub const IB_UVERBS_GID_TYPE_IB: u32 = 0;
pub const IB_UVERBS_GID_TYPE_ROCE_V1: u32 = 1;
pub const IB_UVERBS_GID_TYPE_ROCE_V2: u32 = 2;

// enum ib_uverbs_buffer_type
pub const IB_UVERBS_BUFFER_TYPE_DMABUF: u32 = 0;
pub const IB_UVERBS_BUFFER_TYPE_VA: u32 = 1;

// enum ib_uverbs_comp_cntr_entry
pub const IB_UVERBS_COMP_CNTR_ENTRY_COMP: u32 = 0;
pub const IB_UVERBS_COMP_CNTR_ENTRY_ERR: u32 = 1;

// enum ib_uverbs_comp_cntr_modify_op
pub const IB_UVERBS_COMP_CNTR_MODIFY_OP_SET: u32 = 0;
pub const IB_UVERBS_COMP_CNTR_MODIFY_OP_INC: u32 = 1;

// enum ib_uverbs_qp_attach_comp_cntr_op
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND: u32 = 1;
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV: u32 = 2;
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ: u32 = 4;
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ: u32 = 8;
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE: u32 = 0x10;
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE: u32 = 0x20;

/// `struct ib_uverbs_flow_action_esp_keymat_aes_gcm`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_flow_action_esp_keymat_aes_gcm {
    pub iv: u64,
    pub iv_algo: u32,
    pub salt: u32,
    pub icv_len: u32,
    pub key_len: u32,
    pub aes_key: [u32; 8],
}
assert_layout!(
    ib_uverbs_flow_action_esp_keymat_aes_gcm,
    size = 56,
    align = 8,
    iv = 0,
    iv_algo = 8,
    salt = 12,
    icv_len = 16,
    key_len = 20,
    aes_key = 24
);

/// `struct ib_uverbs_flow_action_esp_replay_bmp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_flow_action_esp_replay_bmp {
    pub size: u32,
}
assert_layout!(ib_uverbs_flow_action_esp_replay_bmp, size = 4, align = 4, size = 0);

/// `struct ib_uverbs_flow_action_esp_encap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_flow_action_esp_encap {
    pub val_ptr: u64,
    pub next_ptr: u64,
    pub len: u16,
    pub r#type: u16,
    /// Implicit trailing padding in C.
    pub _pad0: [u8; 4],
}
assert_layout!(
    ib_uverbs_flow_action_esp_encap,
    size = 24,
    align = 8,
    val_ptr = 0,
    next_ptr = 8,
    len = 16,
    r#type = 18,
    _pad0 = 20
);

/// `struct ib_uverbs_flow_action_esp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_flow_action_esp {
    pub spi: u32,
    pub seq: u32,
    pub tfc_pad: u32,
    pub flags: u32,
    pub hard_limit_pkts: u64,
}
assert_layout!(
    ib_uverbs_flow_action_esp,
    size = 24,
    align = 8,
    spi = 0,
    seq = 4,
    tfc_pad = 8,
    flags = 12,
    hard_limit_pkts = 16
);

/// `struct ib_uverbs_query_port_resp_ex` (48 bytes): the `UVERBS_METHOD_QUERY_PORT` response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_port_resp_ex {
    pub legacy_resp: ib_uverbs_query_port_resp,
    pub port_cap_flags2: u16,
    pub reserved: [u8; 2],
    /// Kernel 6.7+; these bytes were `reserved` (and read as 0) before.
    pub active_speed_ex: u32,
}
assert_layout!(
    ib_uverbs_query_port_resp_ex,
    size = 48,
    align = 4,
    legacy_resp = 0,
    port_cap_flags2 = 40,
    reserved = 42,
    active_speed_ex = 44
);

/// `struct ib_uverbs_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}
assert_layout!(
    ib_uverbs_qp_cap,
    size = 20,
    align = 4,
    max_send_wr = 0,
    max_recv_wr = 4,
    max_send_sge = 8,
    max_recv_sge = 12,
    max_inline_data = 16
);

/// `struct ib_uverbs_gid_entry` (32 bytes): one entry of `QUERY_GID_TABLE`
/// / `QUERY_GID_ENTRY`.
///
/// The kernel declares `gid` as `__aligned_u64 gid[2]`; it holds the raw
/// 16-byte GID in network order, so it is `[u8; 16]` here and the struct
/// carries the 8-byte alignment explicitly.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_gid_entry {
    pub gid: [u8; 16],
    pub gid_index: u32,
    pub port_num: u32,
    /// `IB_UVERBS_GID_TYPE_*`.
    pub gid_type: u32,
    /// 0 if no netdev is associated with the entry.
    pub netdev_ifindex: u32,
}
assert_layout!(
    ib_uverbs_gid_entry,
    size = 32,
    align = 8,
    gid = 0,
    gid_index = 16,
    port_num = 20,
    gid_type = 24,
    netdev_ifindex = 28
);

/// `struct ib_uverbs_buffer_desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_buffer_desc {
    pub r#type: u32,
    pub fd: i32,
    pub flags: u32,
    pub optional_flags: u32,
    pub addr: u64,
    pub length: u64,
}
assert_layout!(
    ib_uverbs_buffer_desc,
    size = 32,
    align = 8,
    r#type = 0,
    fd = 4,
    flags = 8,
    optional_flags = 12,
    addr = 16,
    length = 24
);
