//! `include/uapi/rdma/ib_user_verbs.h`: the legacy `write()` command set on
//! `/dev/infiniband/uverbsN` and the core structs it carries (also used as
//! `CORE_IN`/`CORE_OUT` of the ioctl `UVERBS_METHOD_INVOKE_WRITE`).
//!
//! Synced from rdma-core `kernel-headers/rdma/ib_user_verbs.h` at commit
//! `691953d8d502`. Sizes and offsets match `shared/reference/uverbs-abi.md`
//! §3 (identical on kernels 6.1, 6.12 and 7.3).
//!
//! Framing reminder (kernel `uverbs_main.c:ib_uverbs_write`): a non-EX
//! command is `ib_uverbs_cmd_hdr | core request | driver request`, with
//! `in_words` counting 4-byte words *including* the header; an EX command
//! (`command | IB_USER_VERBS_CMD_FLAG_EXTENDED`) is
//! `ib_uverbs_cmd_hdr | ib_uverbs_ex_cmd_hdr | core | driver`, with words of
//! 8 bytes that exclude the headers. Driver data starts exactly at
//! `size_of` the core struct; the `driver_data: [_; 0]` fields mark that spot.
//!
//! Not mirrored: the flow-steering structs (`ib_uverbs_flow_*`,
//! `ib_uverbs_create_flow`, `ib_uverbs_destroy_flow`); rverbs does not
//! implement flow steering. Their command numbers are kept.
//!
//! Values the ABI carries but this header does not define (QP attribute
//! mask bits, QP states, MTUs, event types, work-completion status) are in
//! [`crate::ib_verbs_values`].
#![allow(missing_docs)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The `IB_UVERBS_ACCESS_*` MR/QP access flags (`ib_uverbs_reg_mr.access_flags`,
/// `ib_uverbs_modify_qp.qp_access_flags`, ...). The kernel defines them in
/// `ib_user_ioctl_verbs.h`; they are re-exported here for convenience.
pub use crate::ib_user_ioctl_verbs::{
    IB_UVERBS_ACCESS_FLUSH_GLOBAL, IB_UVERBS_ACCESS_FLUSH_PERSISTENT, IB_UVERBS_ACCESS_HUGETLB,
    IB_UVERBS_ACCESS_LOCAL_WRITE, IB_UVERBS_ACCESS_MW_BIND, IB_UVERBS_ACCESS_ON_DEMAND,
    IB_UVERBS_ACCESS_OPTIONAL_FIRST, IB_UVERBS_ACCESS_OPTIONAL_LAST, IB_UVERBS_ACCESS_OPTIONAL_RANGE,
    IB_UVERBS_ACCESS_RELAXED_ORDERING, IB_UVERBS_ACCESS_REMOTE_ATOMIC, IB_UVERBS_ACCESS_REMOTE_READ,
    IB_UVERBS_ACCESS_REMOTE_WRITE, IB_UVERBS_ACCESS_ZERO_BASED,
};

/// `IB_USER_VERBS_ABI_VERSION`: the core uverbs ABI, also readable from
/// `/sys/class/infiniband_verbs/abi_version`.
pub const IB_USER_VERBS_ABI_VERSION: u32 = 6;
pub const IB_USER_VERBS_CMD_THRESHOLD: u32 = 50;
/// `IB_USER_VERBS_CMD_COMMAND_MASK`: command number bits of `ib_uverbs_cmd_hdr.command`.
pub const IB_USER_VERBS_CMD_COMMAND_MASK: u32 = 0xff;
/// `IB_USER_VERBS_CMD_FLAG_EXTENDED`: OR'd into `ib_uverbs_cmd_hdr.command`
/// for EX commands (`IB_USER_VERBS_EX_CMD_*`); also the flag for
/// `UVERBS_ATTR_WRITE_CMD` of `INVOKE_WRITE`.
pub const IB_USER_VERBS_CMD_FLAG_EXTENDED: u32 = 0x80000000;
pub const IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE: u32 = 13;
pub const IB_DEVICE_NAME_MAX: u32 = 64;

// enum ib_uverbs_write_cmds
pub const IB_USER_VERBS_CMD_GET_CONTEXT: u32 = 0;
pub const IB_USER_VERBS_CMD_QUERY_DEVICE: u32 = 1;
pub const IB_USER_VERBS_CMD_QUERY_PORT: u32 = 2;
pub const IB_USER_VERBS_CMD_ALLOC_PD: u32 = 3;
pub const IB_USER_VERBS_CMD_DEALLOC_PD: u32 = 4;
pub const IB_USER_VERBS_CMD_CREATE_AH: u32 = 5;
/// Not implemented by the kernel.
pub const IB_USER_VERBS_CMD_MODIFY_AH: u32 = 6;
/// Not implemented by the kernel.
pub const IB_USER_VERBS_CMD_QUERY_AH: u32 = 7;
pub const IB_USER_VERBS_CMD_DESTROY_AH: u32 = 8;
pub const IB_USER_VERBS_CMD_REG_MR: u32 = 9;
/// Not implemented by the kernel.
pub const IB_USER_VERBS_CMD_REG_SMR: u32 = 10;
pub const IB_USER_VERBS_CMD_REREG_MR: u32 = 11;
/// Not implemented by the kernel.
pub const IB_USER_VERBS_CMD_QUERY_MR: u32 = 12;
pub const IB_USER_VERBS_CMD_DEREG_MR: u32 = 13;
pub const IB_USER_VERBS_CMD_ALLOC_MW: u32 = 14;
/// Not implemented by the kernel.
pub const IB_USER_VERBS_CMD_BIND_MW: u32 = 15;
pub const IB_USER_VERBS_CMD_DEALLOC_MW: u32 = 16;
pub const IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: u32 = 17;
pub const IB_USER_VERBS_CMD_CREATE_CQ: u32 = 18;
pub const IB_USER_VERBS_CMD_RESIZE_CQ: u32 = 19;
pub const IB_USER_VERBS_CMD_DESTROY_CQ: u32 = 20;
pub const IB_USER_VERBS_CMD_POLL_CQ: u32 = 21;
/// Not implemented by the kernel.
pub const IB_USER_VERBS_CMD_PEEK_CQ: u32 = 22;
pub const IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: u32 = 23;
pub const IB_USER_VERBS_CMD_CREATE_QP: u32 = 24;
pub const IB_USER_VERBS_CMD_QUERY_QP: u32 = 25;
pub const IB_USER_VERBS_CMD_MODIFY_QP: u32 = 26;
pub const IB_USER_VERBS_CMD_DESTROY_QP: u32 = 27;
pub const IB_USER_VERBS_CMD_POST_SEND: u32 = 28;
pub const IB_USER_VERBS_CMD_POST_RECV: u32 = 29;
pub const IB_USER_VERBS_CMD_ATTACH_MCAST: u32 = 30;
pub const IB_USER_VERBS_CMD_DETACH_MCAST: u32 = 31;
pub const IB_USER_VERBS_CMD_CREATE_SRQ: u32 = 32;
pub const IB_USER_VERBS_CMD_MODIFY_SRQ: u32 = 33;
pub const IB_USER_VERBS_CMD_QUERY_SRQ: u32 = 34;
pub const IB_USER_VERBS_CMD_DESTROY_SRQ: u32 = 35;
pub const IB_USER_VERBS_CMD_POST_SRQ_RECV: u32 = 36;
pub const IB_USER_VERBS_CMD_OPEN_XRCD: u32 = 37;
pub const IB_USER_VERBS_CMD_CLOSE_XRCD: u32 = 38;
pub const IB_USER_VERBS_CMD_CREATE_XSRQ: u32 = 39;
pub const IB_USER_VERBS_CMD_OPEN_QP: u32 = 40;

// anonymous enum
pub const IB_USER_VERBS_EX_CMD_QUERY_DEVICE: u32 = 1;
pub const IB_USER_VERBS_EX_CMD_CREATE_CQ: u32 = 18;
pub const IB_USER_VERBS_EX_CMD_CREATE_QP: u32 = 24;
pub const IB_USER_VERBS_EX_CMD_MODIFY_QP: u32 = 26;
pub const IB_USER_VERBS_EX_CMD_CREATE_FLOW: u32 = 50;
pub const IB_USER_VERBS_EX_CMD_DESTROY_FLOW: u32 = 51;
pub const IB_USER_VERBS_EX_CMD_CREATE_WQ: u32 = 52;
pub const IB_USER_VERBS_EX_CMD_MODIFY_WQ: u32 = 53;
pub const IB_USER_VERBS_EX_CMD_DESTROY_WQ: u32 = 54;
pub const IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL: u32 = 55;
pub const IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL: u32 = 56;
pub const IB_USER_VERBS_EX_CMD_MODIFY_CQ: u32 = 57;

// enum ib_placement_type
pub const IB_FLUSH_GLOBAL: u32 = 1;
pub const IB_FLUSH_PERSISTENT: u32 = 2;

// enum ib_selectivity_level
pub const IB_FLUSH_RANGE: u32 = 0;
pub const IB_FLUSH_MR: u32 = 1;

// enum ib_uverbs_odp_general_cap_bits
pub const IB_UVERBS_ODP_SUPPORT: u32 = 1;
pub const IB_UVERBS_ODP_SUPPORT_IMPLICIT: u32 = 2;

// enum ib_uverbs_odp_transport_cap_bits
pub const IB_UVERBS_ODP_SUPPORT_SEND: u32 = 1;
pub const IB_UVERBS_ODP_SUPPORT_RECV: u32 = 2;
pub const IB_UVERBS_ODP_SUPPORT_WRITE: u32 = 4;
pub const IB_UVERBS_ODP_SUPPORT_READ: u32 = 8;
pub const IB_UVERBS_ODP_SUPPORT_ATOMIC: u32 = 0x10;
pub const IB_UVERBS_ODP_SUPPORT_SRQ_RECV: u32 = 0x20;
pub const IB_UVERBS_ODP_SUPPORT_FLUSH: u32 = 0x40;
pub const IB_UVERBS_ODP_SUPPORT_ATOMIC_WRITE: u32 = 0x80;

// enum ib_uverbs_ex_create_cq_flags
pub const IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION: u32 = 1;
pub const IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN: u32 = 2;

// enum ib_uverbs_wc_opcode
pub const IB_UVERBS_WC_SEND: u32 = 0;
pub const IB_UVERBS_WC_RDMA_WRITE: u32 = 1;
pub const IB_UVERBS_WC_RDMA_READ: u32 = 2;
pub const IB_UVERBS_WC_COMP_SWAP: u32 = 3;
pub const IB_UVERBS_WC_FETCH_ADD: u32 = 4;
pub const IB_UVERBS_WC_BIND_MW: u32 = 5;
pub const IB_UVERBS_WC_LOCAL_INV: u32 = 6;
pub const IB_UVERBS_WC_TSO: u32 = 7;
pub const IB_UVERBS_WC_FLUSH: u32 = 8;
pub const IB_UVERBS_WC_ATOMIC_WRITE: u32 = 9;

// enum ib_uverbs_create_qp_mask
pub const IB_UVERBS_CREATE_QP_MASK_IND_TABLE: u32 = 1;

// anonymous enum
pub const IB_UVERBS_CREATE_QP_SUP_COMP_MASK: u32 = 1;

// enum ib_uverbs_wr_opcode
pub const IB_UVERBS_WR_RDMA_WRITE: u32 = 0;
pub const IB_UVERBS_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const IB_UVERBS_WR_SEND: u32 = 2;
pub const IB_UVERBS_WR_SEND_WITH_IMM: u32 = 3;
pub const IB_UVERBS_WR_RDMA_READ: u32 = 4;
pub const IB_UVERBS_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
pub const IB_UVERBS_WR_LOCAL_INV: u32 = 7;
pub const IB_UVERBS_WR_BIND_MW: u32 = 8;
pub const IB_UVERBS_WR_SEND_WITH_INV: u32 = 9;
pub const IB_UVERBS_WR_TSO: u32 = 10;
pub const IB_UVERBS_WR_RDMA_READ_WITH_INV: u32 = 11;
pub const IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP: u32 = 12;
pub const IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD: u32 = 13;
pub const IB_UVERBS_WR_FLUSH: u32 = 14;
pub const IB_UVERBS_WR_ATOMIC_WRITE: u32 = 15;

// enum ib_uverbs_device_cap_flags: bits of `ib_uverbs_ex_query_device_resp.device_cap_flags_ex`
// (the low 32 bits also appear in `ib_uverbs_query_device_resp.device_cap_flags`).
pub const IB_UVERBS_DEVICE_RESIZE_MAX_WR: u64 = 1;
pub const IB_UVERBS_DEVICE_BAD_PKEY_CNTR: u64 = 2;
pub const IB_UVERBS_DEVICE_BAD_QKEY_CNTR: u64 = 4;
pub const IB_UVERBS_DEVICE_RAW_MULTI: u64 = 8;
pub const IB_UVERBS_DEVICE_AUTO_PATH_MIG: u64 = 0x10;
pub const IB_UVERBS_DEVICE_CHANGE_PHY_PORT: u64 = 0x20;
pub const IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE: u64 = 0x40;
pub const IB_UVERBS_DEVICE_CURR_QP_STATE_MOD: u64 = 0x80;
pub const IB_UVERBS_DEVICE_SHUTDOWN_PORT: u64 = 0x100;
pub const IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT: u64 = 0x400;
pub const IB_UVERBS_DEVICE_SYS_IMAGE_GUID: u64 = 0x800;
pub const IB_UVERBS_DEVICE_RC_RNR_NAK_GEN: u64 = 0x1000;
pub const IB_UVERBS_DEVICE_SRQ_RESIZE: u64 = 0x2000;
pub const IB_UVERBS_DEVICE_N_NOTIFY_CQ: u64 = 0x4000;
pub const IB_UVERBS_DEVICE_MEM_WINDOW: u64 = 0x20000;
pub const IB_UVERBS_DEVICE_UD_IP_CSUM: u64 = 0x40000;
pub const IB_UVERBS_DEVICE_XRC: u64 = 0x100000;
pub const IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS: u64 = 0x200000;
pub const IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A: u64 = 0x800000;
pub const IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B: u64 = 0x1000000;
pub const IB_UVERBS_DEVICE_RC_IP_CSUM: u64 = 0x2000000;
pub const IB_UVERBS_DEVICE_RAW_IP_CSUM: u64 = 0x4000000;
pub const IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING: u64 = 0x20000000;
pub const IB_UVERBS_DEVICE_RAW_SCATTER_FCS: u64 = 0x400000000;
pub const IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING: u64 = 0x1000000000;
pub const IB_UVERBS_DEVICE_FLUSH_GLOBAL: u64 = 0x4000000000;
pub const IB_UVERBS_DEVICE_FLUSH_PERSISTENT: u64 = 0x8000000000;
pub const IB_UVERBS_DEVICE_ATOMIC_WRITE: u64 = 0x10000000000;
pub const IB_UVERBS_DEVICE_CC_DMA_BOUNCE: u64 = 0x20000000000;

// enum ib_uverbs_raw_packet_caps
pub const IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING: u32 = 1;
pub const IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS: u32 = 2;
pub const IB_UVERBS_RAW_PACKET_CAP_IP_CSUM: u32 = 4;
pub const IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP: u32 = 8;

/// `struct ib_uverbs_async_event_desc` (16 bytes): one `read()` from the async event fd.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_async_event_desc {
    /// The object's `user_handle` (CQ/QP/SRQ/WQ events) or the port number.
    pub element: u64,
    /// `enum ib_event_type`: `IB_EVENT_*` in [`crate::ib_verbs_values`].
    pub event_type: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_async_event_desc, size = 16, align = 8, element = 0, event_type = 8, reserved = 12);

/// `struct ib_uverbs_comp_event_desc` (8 bytes): one `read()` from a completion channel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_comp_event_desc {
    /// The CQ's `user_handle`.
    pub cq_handle: u64,
}
assert_layout!(ib_uverbs_comp_event_desc, size = 8, align = 8, cq_handle = 0);

/// `struct ib_uverbs_cq_moderation_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_cq_moderation_caps {
    pub max_cq_moderation_count: u16,
    pub max_cq_moderation_period: u16,
    pub reserved: u32,
}
assert_layout!(
    ib_uverbs_cq_moderation_caps,
    size = 8,
    align = 4,
    max_cq_moderation_count = 0,
    max_cq_moderation_period = 2,
    reserved = 4
);

/// `struct ib_uverbs_cmd_hdr` (8 bytes): starts every `write()` command.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_cmd_hdr {
    pub command: u32,
    pub in_words: u16,
    pub out_words: u16,
}
assert_layout!(ib_uverbs_cmd_hdr, size = 8, align = 4, command = 0, in_words = 4, out_words = 6);

/// `struct ib_uverbs_ex_cmd_hdr` (16 bytes): follows [`ib_uverbs_cmd_hdr`] in EX commands.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_cmd_hdr {
    pub response: u64,
    pub provider_in_words: u16,
    pub provider_out_words: u16,
    pub cmd_hdr_reserved: u32,
}
assert_layout!(
    ib_uverbs_ex_cmd_hdr,
    size = 16,
    align = 8,
    response = 0,
    provider_in_words = 8,
    provider_out_words = 10,
    cmd_hdr_reserved = 12
);

/// `struct ib_uverbs_get_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_get_context {
    pub response: u64,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_get_context, size = 8, align = 8, response = 0, driver_data = 8);

/// `struct ib_uverbs_get_context_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_get_context_resp {
    pub async_fd: u32,
    pub num_comp_vectors: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_get_context_resp, size = 8, align = 8, async_fd = 0, num_comp_vectors = 4, driver_data = 8);

/// `struct ib_uverbs_query_device`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_device {
    pub response: u64,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_query_device, size = 8, align = 8, response = 0, driver_data = 8);

/// `struct ib_uverbs_query_device_resp` (176 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_device_resp {
    pub fw_ver: u64,
    /// `__be64`: big-endian; raw wire bytes (use `u64::from_be`).
    pub node_guid: u64,
    /// `__be64`: big-endian; raw wire bytes (use `u64::from_be`).
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: u32,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_ee_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_ee_init_rd_atom: u32,
    pub atomic_cap: u32,
    pub max_ee: u32,
    pub max_rdd: u32,
    pub max_mw: u32,
    pub max_raw_ipv6_qp: u32,
    pub max_raw_ethy_qp: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_fmr: u32,
    pub max_map_per_fmr: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
    pub reserved: [u8; 4],
}
assert_layout!(
    ib_uverbs_query_device_resp,
    size = 176,
    align = 8,
    fw_ver = 0,
    node_guid = 8,
    sys_image_guid = 16,
    max_mr_size = 24,
    page_size_cap = 32,
    vendor_id = 40,
    vendor_part_id = 44,
    hw_ver = 48,
    max_qp = 52,
    max_qp_wr = 56,
    device_cap_flags = 60,
    max_sge = 64,
    max_sge_rd = 68,
    max_cq = 72,
    max_cqe = 76,
    max_mr = 80,
    max_pd = 84,
    max_qp_rd_atom = 88,
    max_ee_rd_atom = 92,
    max_res_rd_atom = 96,
    max_qp_init_rd_atom = 100,
    max_ee_init_rd_atom = 104,
    atomic_cap = 108,
    max_ee = 112,
    max_rdd = 116,
    max_mw = 120,
    max_raw_ipv6_qp = 124,
    max_raw_ethy_qp = 128,
    max_mcast_grp = 132,
    max_mcast_qp_attach = 136,
    max_total_mcast_qp_attach = 140,
    max_ah = 144,
    max_fmr = 148,
    max_map_per_fmr = 152,
    max_srq = 156,
    max_srq_wr = 160,
    max_srq_sge = 164,
    max_pkeys = 168,
    local_ca_ack_delay = 170,
    phys_port_cnt = 171,
    reserved = 172
);

/// `struct ib_uverbs_ex_query_device`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_query_device {
    pub comp_mask: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_ex_query_device, size = 8, align = 4, comp_mask = 0, reserved = 4);

/// The anonymous `per_transport_caps` struct of [`ib_uverbs_odp_caps`]
/// (`IB_UVERBS_ODP_SUPPORT_*` transport bits per QP type). Not a kernel name:
/// C declares it inline.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_odp_caps_per_transport_caps {
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}
assert_layout!(
    ib_uverbs_odp_caps_per_transport_caps,
    size = 12,
    align = 4,
    rc_odp_caps = 0,
    uc_odp_caps = 4,
    ud_odp_caps = 8
);

/// `struct ib_uverbs_odp_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_odp_caps {
    /// `IB_UVERBS_ODP_SUPPORT*` general bits.
    pub general_caps: u64,
    pub per_transport_caps: ib_uverbs_odp_caps_per_transport_caps,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_odp_caps, size = 24, align = 8, general_caps = 0, per_transport_caps = 8, reserved = 20);

/// `struct ib_uverbs_rss_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub reserved: u32,
}
assert_layout!(
    ib_uverbs_rss_caps,
    size = 16,
    align = 4,
    supported_qpts = 0,
    max_rwq_indirection_tables = 4,
    max_rwq_indirection_table_size = 8,
    reserved = 12
);

/// `struct ib_uverbs_tm_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
    pub reserved: u32,
}
assert_layout!(
    ib_uverbs_tm_caps,
    size = 24,
    align = 4,
    max_rndv_hdr_size = 0,
    max_num_tags = 4,
    flags = 8,
    max_ops = 12,
    max_sge = 16,
    reserved = 20
);

/// `struct ib_uverbs_ex_query_device_resp` (304 bytes). The kernel requires at
/// least 184 bytes (through `response_length`) and reports in
/// `response_length` how much it filled.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_query_device_resp {
    pub base: ib_uverbs_query_device_resp,
    pub comp_mask: u32,
    pub response_length: u32,
    pub odp_caps: ib_uverbs_odp_caps,
    pub timestamp_mask: u64,
    /// In kHz.
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub rss_caps: ib_uverbs_rss_caps,
    pub max_wq_type_rq: u32,
    pub raw_packet_caps: u32,
    pub tm_caps: ib_uverbs_tm_caps,
    pub cq_moderation_caps: ib_uverbs_cq_moderation_caps,
    pub max_dm_size: u64,
    pub xrc_odp_caps: u32,
    pub reserved: u32,
}
assert_layout!(
    ib_uverbs_ex_query_device_resp,
    size = 304,
    align = 8,
    base = 0,
    comp_mask = 176,
    response_length = 180,
    odp_caps = 184,
    timestamp_mask = 208,
    hca_core_clock = 216,
    device_cap_flags_ex = 224,
    rss_caps = 232,
    max_wq_type_rq = 248,
    raw_packet_caps = 252,
    tm_caps = 256,
    cq_moderation_caps = 280,
    max_dm_size = 288,
    xrc_odp_caps = 296,
    reserved = 300
);

/// `struct ib_uverbs_query_port`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_port {
    pub response: u64,
    pub port_num: u8,
    pub reserved: [u8; 7],
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_query_port, size = 16, align = 8, response = 0, port_num = 8, reserved = 9, driver_data = 16);

/// `struct ib_uverbs_query_port_resp` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_port_resp {
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub gid_tbl_len: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub state: u8,
    pub max_mtu: u8,
    pub active_mtu: u8,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    /// `IB_LINK_LAYER_*`: 1 InfiniBand, 2 Ethernet.
    pub link_layer: u8,
    /// `IB_UVERBS_QPF_*`.
    pub flags: u8,
    pub reserved: u8,
}
assert_layout!(
    ib_uverbs_query_port_resp,
    size = 40,
    align = 4,
    port_cap_flags = 0,
    max_msg_sz = 4,
    bad_pkey_cntr = 8,
    qkey_viol_cntr = 12,
    gid_tbl_len = 16,
    pkey_tbl_len = 20,
    lid = 22,
    sm_lid = 24,
    state = 26,
    max_mtu = 27,
    active_mtu = 28,
    lmc = 29,
    max_vl_num = 30,
    sm_sl = 31,
    subnet_timeout = 32,
    init_type_reply = 33,
    active_width = 34,
    active_speed = 35,
    phys_state = 36,
    link_layer = 37,
    flags = 38,
    reserved = 39
);

/// `struct ib_uverbs_alloc_pd`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_alloc_pd {
    pub response: u64,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_alloc_pd, size = 8, align = 8, response = 0, driver_data = 8);

/// `struct ib_uverbs_alloc_pd_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_alloc_pd_resp {
    pub pd_handle: u32,
    pub driver_data: [u32; 0],
}
assert_layout!(ib_uverbs_alloc_pd_resp, size = 4, align = 4, pd_handle = 0, driver_data = 4);

/// `struct ib_uverbs_dealloc_pd`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_dealloc_pd {
    pub pd_handle: u32,
}
assert_layout!(ib_uverbs_dealloc_pd, size = 4, align = 4, pd_handle = 0);

/// `struct ib_uverbs_open_xrcd`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_open_xrcd {
    pub response: u64,
    pub fd: u32,
    pub oflags: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_open_xrcd, size = 16, align = 8, response = 0, fd = 8, oflags = 12, driver_data = 16);

/// `struct ib_uverbs_open_xrcd_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_open_xrcd_resp {
    pub xrcd_handle: u32,
    pub driver_data: [u32; 0],
}
assert_layout!(ib_uverbs_open_xrcd_resp, size = 4, align = 4, xrcd_handle = 0, driver_data = 4);

/// `struct ib_uverbs_close_xrcd`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_close_xrcd {
    pub xrcd_handle: u32,
}
assert_layout!(ib_uverbs_close_xrcd, size = 4, align = 4, xrcd_handle = 0);

/// `struct ib_uverbs_reg_mr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_reg_mr {
    pub response: u64,
    pub start: u64,
    pub length: u64,
    pub hca_va: u64,
    pub pd_handle: u32,
    pub access_flags: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_reg_mr,
    size = 40,
    align = 8,
    response = 0,
    start = 8,
    length = 16,
    hca_va = 24,
    pd_handle = 32,
    access_flags = 36,
    driver_data = 40
);

/// `struct ib_uverbs_reg_mr_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_reg_mr_resp {
    pub mr_handle: u32,
    pub lkey: u32,
    pub rkey: u32,
    pub driver_data: [u32; 0],
}
assert_layout!(ib_uverbs_reg_mr_resp, size = 12, align = 4, mr_handle = 0, lkey = 4, rkey = 8, driver_data = 12);

/// `struct ib_uverbs_rereg_mr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_rereg_mr {
    pub response: u64,
    pub mr_handle: u32,
    pub flags: u32,
    pub start: u64,
    pub length: u64,
    pub hca_va: u64,
    pub pd_handle: u32,
    pub access_flags: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_rereg_mr,
    size = 48,
    align = 8,
    response = 0,
    mr_handle = 8,
    flags = 12,
    start = 16,
    length = 24,
    hca_va = 32,
    pd_handle = 40,
    access_flags = 44,
    driver_data = 48
);

/// `struct ib_uverbs_rereg_mr_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_rereg_mr_resp {
    pub lkey: u32,
    pub rkey: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_rereg_mr_resp, size = 8, align = 8, lkey = 0, rkey = 4, driver_data = 8);

/// `struct ib_uverbs_dereg_mr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_dereg_mr {
    pub mr_handle: u32,
}
assert_layout!(ib_uverbs_dereg_mr, size = 4, align = 4, mr_handle = 0);

/// `struct ib_uverbs_alloc_mw`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_alloc_mw {
    pub response: u64,
    pub pd_handle: u32,
    pub mw_type: u8,
    pub reserved: [u8; 3],
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_alloc_mw,
    size = 16,
    align = 8,
    response = 0,
    pd_handle = 8,
    mw_type = 12,
    reserved = 13,
    driver_data = 16
);

/// `struct ib_uverbs_alloc_mw_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_alloc_mw_resp {
    pub mw_handle: u32,
    pub rkey: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_alloc_mw_resp, size = 8, align = 8, mw_handle = 0, rkey = 4, driver_data = 8);

/// `struct ib_uverbs_dealloc_mw`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_dealloc_mw {
    pub mw_handle: u32,
}
assert_layout!(ib_uverbs_dealloc_mw, size = 4, align = 4, mw_handle = 0);

/// `struct ib_uverbs_create_comp_channel`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_comp_channel {
    pub response: u64,
}
assert_layout!(ib_uverbs_create_comp_channel, size = 8, align = 8, response = 0);

/// `struct ib_uverbs_create_comp_channel_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_comp_channel_resp {
    pub fd: u32,
}
assert_layout!(ib_uverbs_create_comp_channel_resp, size = 4, align = 4, fd = 0);

/// `struct ib_uverbs_create_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_cq {
    pub response: u64,
    pub user_handle: u64,
    pub cqe: u32,
    pub comp_vector: u32,
    /// Completion channel fd, or -1 for none.
    pub comp_channel: i32,
    pub reserved: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_create_cq,
    size = 32,
    align = 8,
    response = 0,
    user_handle = 8,
    cqe = 16,
    comp_vector = 20,
    comp_channel = 24,
    reserved = 28,
    driver_data = 32
);

/// `struct ib_uverbs_ex_create_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_create_cq {
    pub user_handle: u64,
    pub cqe: u32,
    pub comp_vector: u32,
    /// Completion channel fd, or -1 for none.
    pub comp_channel: i32,
    pub comp_mask: u32,
    pub flags: u32,
    pub reserved: u32,
}
assert_layout!(
    ib_uverbs_ex_create_cq,
    size = 32,
    align = 8,
    user_handle = 0,
    cqe = 8,
    comp_vector = 12,
    comp_channel = 16,
    comp_mask = 20,
    flags = 24,
    reserved = 28
);

/// `struct ib_uverbs_create_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_cq_resp {
    pub cq_handle: u32,
    pub cqe: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_create_cq_resp, size = 8, align = 8, cq_handle = 0, cqe = 4, driver_data = 8);

/// `struct ib_uverbs_ex_create_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_create_cq_resp {
    pub base: ib_uverbs_create_cq_resp,
    pub comp_mask: u32,
    pub response_length: u32,
}
assert_layout!(ib_uverbs_ex_create_cq_resp, size = 16, align = 8, base = 0, comp_mask = 8, response_length = 12);

/// `struct ib_uverbs_resize_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_resize_cq {
    pub response: u64,
    pub cq_handle: u32,
    pub cqe: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_resize_cq, size = 16, align = 8, response = 0, cq_handle = 8, cqe = 12, driver_data = 16);

/// `struct ib_uverbs_resize_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_resize_cq_resp {
    pub cqe: u32,
    pub reserved: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_resize_cq_resp, size = 8, align = 8, cqe = 0, reserved = 4, driver_data = 8);

/// `struct ib_uverbs_poll_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_poll_cq {
    pub response: u64,
    pub cq_handle: u32,
    pub ne: u32,
}
assert_layout!(ib_uverbs_poll_cq, size = 16, align = 8, response = 0, cq_handle = 8, ne = 12);

/// `struct ib_uverbs_wc` (48 bytes): one work completion, as returned by
/// `POLL_CQ` and as stored in rxe's CQ ring.
///
/// `status` carries kernel `enum ib_wc_status` values and `opcode` kernel
/// `enum ib_wc_opcode` values; `wc_flags` uses the **kernel** `ib_wc_flags`
/// bits. See [`crate::ib_verbs_values`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Union `ex`: `__be32 imm_data` (raw network-order bytes) or
    /// `__u32 invalidate_rkey`. See [`imm_data`](Self::imm_data).
    pub ex: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
    pub port_num: u8,
    pub reserved: u8,
}
assert_layout!(
    ib_uverbs_wc,
    size = 48,
    align = 8,
    wr_id = 0,
    status = 8,
    opcode = 12,
    vendor_err = 16,
    byte_len = 20,
    ex = 24,
    qp_num = 28,
    src_qp = 32,
    wc_flags = 36,
    pkey_index = 40,
    slid = 42,
    sl = 44,
    dlid_path_bits = 45,
    port_num = 46,
    reserved = 47
);

impl ib_uverbs_wc {
    /// `ex.imm_data` as stored: `__be32`, raw network-order bytes (apply
    /// `u32::from_be` for the numeric value).
    pub const fn imm_data(&self) -> u32 {
        self.ex
    }

    /// `ex.invalidate_rkey` (host order).
    pub const fn invalidate_rkey(&self) -> u32 {
        self.ex
    }
}

/// `struct ib_uverbs_poll_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_poll_cq_resp {
    pub count: u32,
    pub reserved: u32,
    pub wc: [ib_uverbs_wc; 0],
}
assert_layout!(ib_uverbs_poll_cq_resp, size = 8, align = 8, count = 0, reserved = 4, wc = 8);

/// `struct ib_uverbs_req_notify_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_req_notify_cq {
    pub cq_handle: u32,
    pub solicited_only: u32,
}
assert_layout!(ib_uverbs_req_notify_cq, size = 8, align = 4, cq_handle = 0, solicited_only = 4);

/// `struct ib_uverbs_destroy_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_destroy_cq {
    pub response: u64,
    pub cq_handle: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_destroy_cq, size = 16, align = 8, response = 0, cq_handle = 8, reserved = 12);

/// `struct ib_uverbs_destroy_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_destroy_cq_resp {
    pub comp_events_reported: u32,
    pub async_events_reported: u32,
}
assert_layout!(ib_uverbs_destroy_cq_resp, size = 8, align = 4, comp_events_reported = 0, async_events_reported = 4);

/// `struct ib_uverbs_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_global_route {
    /// Raw GID bytes (network order).
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reserved: u8,
}
assert_layout!(
    ib_uverbs_global_route,
    size = 24,
    align = 4,
    dgid = 0,
    flow_label = 16,
    sgid_index = 20,
    hop_limit = 21,
    traffic_class = 22,
    reserved = 23
);

/// `struct ib_uverbs_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ah_attr {
    pub grh: ib_uverbs_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
    pub reserved: u8,
}
assert_layout!(
    ib_uverbs_ah_attr,
    size = 32,
    align = 4,
    grh = 0,
    dlid = 24,
    sl = 26,
    src_path_bits = 27,
    static_rate = 28,
    is_global = 29,
    port_num = 30,
    reserved = 31
);

/// `struct ib_uverbs_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_qp_attr {
    pub qp_attr_mask: u32,
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub ah_attr: ib_uverbs_ah_attr,
    pub alt_ah_attr: ib_uverbs_ah_attr,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub reserved: [u8; 5],
}
assert_layout!(
    ib_uverbs_qp_attr,
    size = 144,
    align = 4,
    qp_attr_mask = 0,
    qp_state = 4,
    cur_qp_state = 8,
    path_mtu = 12,
    path_mig_state = 16,
    qkey = 20,
    rq_psn = 24,
    sq_psn = 28,
    dest_qp_num = 32,
    qp_access_flags = 36,
    ah_attr = 40,
    alt_ah_attr = 72,
    max_send_wr = 104,
    max_recv_wr = 108,
    max_send_sge = 112,
    max_recv_sge = 116,
    max_inline_data = 120,
    pkey_index = 124,
    alt_pkey_index = 126,
    en_sqd_async_notify = 128,
    sq_draining = 129,
    max_rd_atomic = 130,
    max_dest_rd_atomic = 131,
    min_rnr_timer = 132,
    port_num = 133,
    timeout = 134,
    retry_cnt = 135,
    rnr_retry = 136,
    alt_port_num = 137,
    alt_timeout = 138,
    reserved = 139
);

/// `struct ib_uverbs_create_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_qp {
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub send_cq_handle: u32,
    pub recv_cq_handle: u32,
    pub srq_handle: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub sq_sig_all: u8,
    pub qp_type: u8,
    pub is_srq: u8,
    pub reserved: u8,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_create_qp,
    size = 56,
    align = 8,
    response = 0,
    user_handle = 8,
    pd_handle = 16,
    send_cq_handle = 20,
    recv_cq_handle = 24,
    srq_handle = 28,
    max_send_wr = 32,
    max_recv_wr = 36,
    max_send_sge = 40,
    max_recv_sge = 44,
    max_inline_data = 48,
    sq_sig_all = 52,
    qp_type = 53,
    is_srq = 54,
    reserved = 55,
    driver_data = 56
);

/// `struct ib_uverbs_ex_create_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_create_qp {
    pub user_handle: u64,
    pub pd_handle: u32,
    pub send_cq_handle: u32,
    pub recv_cq_handle: u32,
    pub srq_handle: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub sq_sig_all: u8,
    pub qp_type: u8,
    pub is_srq: u8,
    pub reserved: u8,
    pub comp_mask: u32,
    pub create_flags: u32,
    pub rwq_ind_tbl_handle: u32,
    pub source_qpn: u32,
}
assert_layout!(
    ib_uverbs_ex_create_qp,
    size = 64,
    align = 8,
    user_handle = 0,
    pd_handle = 8,
    send_cq_handle = 12,
    recv_cq_handle = 16,
    srq_handle = 20,
    max_send_wr = 24,
    max_recv_wr = 28,
    max_send_sge = 32,
    max_recv_sge = 36,
    max_inline_data = 40,
    sq_sig_all = 44,
    qp_type = 45,
    is_srq = 46,
    reserved = 47,
    comp_mask = 48,
    create_flags = 52,
    rwq_ind_tbl_handle = 56,
    source_qpn = 60
);

/// `struct ib_uverbs_open_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_open_qp {
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub qpn: u32,
    pub qp_type: u8,
    pub reserved: [u8; 7],
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_open_qp,
    size = 32,
    align = 8,
    response = 0,
    user_handle = 8,
    pd_handle = 16,
    qpn = 20,
    qp_type = 24,
    reserved = 25,
    driver_data = 32
);

/// `struct ib_uverbs_create_qp_resp` (32 bytes); also the OPEN_QP response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_qp_resp {
    pub qp_handle: u32,
    pub qpn: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub reserved: u32,
    pub driver_data: [u32; 0],
}
assert_layout!(
    ib_uverbs_create_qp_resp,
    size = 32,
    align = 4,
    qp_handle = 0,
    qpn = 4,
    max_send_wr = 8,
    max_recv_wr = 12,
    max_send_sge = 16,
    max_recv_sge = 20,
    max_inline_data = 24,
    reserved = 28,
    driver_data = 32
);

/// `struct ib_uverbs_ex_create_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_create_qp_resp {
    pub base: ib_uverbs_create_qp_resp,
    pub comp_mask: u32,
    pub response_length: u32,
}
assert_layout!(ib_uverbs_ex_create_qp_resp, size = 40, align = 4, base = 0, comp_mask = 32, response_length = 36);

/// `struct ib_uverbs_qp_dest` (32 bytes): the address vector in MODIFY_QP / QUERY_QP.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_qp_dest {
    /// Raw GID bytes (network order).
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub dlid: u16,
    pub reserved: u16,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}
assert_layout!(
    ib_uverbs_qp_dest,
    size = 32,
    align = 4,
    dgid = 0,
    flow_label = 16,
    dlid = 20,
    reserved = 22,
    sgid_index = 24,
    hop_limit = 25,
    traffic_class = 26,
    sl = 27,
    src_path_bits = 28,
    static_rate = 29,
    is_global = 30,
    port_num = 31
);

/// `struct ib_uverbs_query_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_qp {
    pub response: u64,
    pub qp_handle: u32,
    pub attr_mask: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(ib_uverbs_query_qp, size = 16, align = 8, response = 0, qp_handle = 8, attr_mask = 12, driver_data = 16);

/// `struct ib_uverbs_query_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_qp_resp {
    pub dest: ib_uverbs_qp_dest,
    pub alt_dest: ib_uverbs_qp_dest,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub qp_state: u8,
    pub cur_qp_state: u8,
    pub path_mtu: u8,
    pub path_mig_state: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub sq_sig_all: u8,
    pub reserved: [u8; 5],
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_query_qp_resp,
    size = 128,
    align = 8,
    dest = 0,
    alt_dest = 32,
    max_send_wr = 64,
    max_recv_wr = 68,
    max_send_sge = 72,
    max_recv_sge = 76,
    max_inline_data = 80,
    qkey = 84,
    rq_psn = 88,
    sq_psn = 92,
    dest_qp_num = 96,
    qp_access_flags = 100,
    pkey_index = 104,
    alt_pkey_index = 106,
    qp_state = 108,
    cur_qp_state = 109,
    path_mtu = 110,
    path_mig_state = 111,
    sq_draining = 112,
    max_rd_atomic = 113,
    max_dest_rd_atomic = 114,
    min_rnr_timer = 115,
    port_num = 116,
    timeout = 117,
    retry_cnt = 118,
    rnr_retry = 119,
    alt_port_num = 120,
    alt_timeout = 121,
    sq_sig_all = 122,
    reserved = 123,
    driver_data = 128
);

/// `struct ib_uverbs_modify_qp` (112 bytes). No `response` field and no
/// udata: a write MODIFY_QP is exactly 8 + 112 = 120 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_modify_qp {
    pub dest: ib_uverbs_qp_dest,
    pub alt_dest: ib_uverbs_qp_dest,
    pub qp_handle: u32,
    /// `IB_QP_*` bits from [`crate::ib_verbs_values`].
    pub attr_mask: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub qp_state: u8,
    pub cur_qp_state: u8,
    pub path_mtu: u8,
    pub path_mig_state: u8,
    pub en_sqd_async_notify: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub reserved: [u8; 2],
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_modify_qp,
    size = 112,
    align = 8,
    dest = 0,
    alt_dest = 32,
    qp_handle = 64,
    attr_mask = 68,
    qkey = 72,
    rq_psn = 76,
    sq_psn = 80,
    dest_qp_num = 84,
    qp_access_flags = 88,
    pkey_index = 92,
    alt_pkey_index = 94,
    qp_state = 96,
    cur_qp_state = 97,
    path_mtu = 98,
    path_mig_state = 99,
    en_sqd_async_notify = 100,
    max_rd_atomic = 101,
    max_dest_rd_atomic = 102,
    min_rnr_timer = 103,
    port_num = 104,
    timeout = 105,
    retry_cnt = 106,
    rnr_retry = 107,
    alt_port_num = 108,
    alt_timeout = 109,
    reserved = 110,
    driver_data = 112
);

/// `struct ib_uverbs_ex_modify_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_modify_qp {
    pub base: ib_uverbs_modify_qp,
    pub rate_limit: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_ex_modify_qp, size = 120, align = 8, base = 0, rate_limit = 112, reserved = 116);

/// `struct ib_uverbs_ex_modify_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_modify_qp_resp {
    pub comp_mask: u32,
    pub response_length: u32,
}
assert_layout!(ib_uverbs_ex_modify_qp_resp, size = 8, align = 4, comp_mask = 0, response_length = 4);

/// `struct ib_uverbs_destroy_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_destroy_qp {
    pub response: u64,
    pub qp_handle: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_destroy_qp, size = 16, align = 8, response = 0, qp_handle = 8, reserved = 12);

/// `struct ib_uverbs_destroy_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_destroy_qp_resp {
    pub events_reported: u32,
}
assert_layout!(ib_uverbs_destroy_qp_resp, size = 4, align = 4, events_reported = 0);

/// `struct ib_uverbs_sge` (16 bytes); same layout as `ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}
assert_layout!(ib_uverbs_sge, size = 16, align = 8, addr = 0, length = 8, lkey = 12);

/// The `wr.rdma` variant of [`ib_uverbs_send_wr`] (C declares it inline).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_send_wr_rdma, size = 16, align = 8, remote_addr = 0, rkey = 8, reserved = 12);

/// The `wr.atomic` variant of [`ib_uverbs_send_wr`] (C declares it inline).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
    pub reserved: u32,
}
assert_layout!(
    ib_uverbs_send_wr_atomic,
    size = 32,
    align = 8,
    remote_addr = 0,
    compare_add = 8,
    swap = 16,
    rkey = 24,
    reserved = 28
);

/// The `wr.ud` variant of [`ib_uverbs_send_wr`] (C declares it inline).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_send_wr_ud {
    /// AH handle.
    pub ah: u32,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_send_wr_ud, size = 16, align = 4, ah = 0, remote_qpn = 4, remote_qkey = 8, reserved = 12);

/// `struct ib_uverbs_send_wr` (56 bytes): a send work request in a write
/// `POST_SEND` command (`wqe_size` must be at least this size).
///
/// Unions flattened: `ex` (`__be32 imm_data` / `u32 invalidate_rkey`) is a
/// `u32`; `wr` (`rdma` / `atomic` / `ud`) is its 32-byte, 8-aligned storage,
/// read and written through [`rdma`](Self::rdma), [`atomic`](Self::atomic),
/// [`ud`](Self::ud) and their setters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_send_wr {
    pub wr_id: u64,
    pub num_sge: u32,
    /// `IB_UVERBS_WR_*`.
    pub opcode: u32,
    pub send_flags: u32,
    /// Union `ex`: `__be32 imm_data` (raw network-order bytes) or
    /// `__u32 invalidate_rkey`.
    pub ex: u32,
    /// Union `wr` storage.
    pub wr: [u64; 4],
}
assert_layout!(
    ib_uverbs_send_wr,
    size = 56,
    align = 8,
    wr_id = 0,
    num_sge = 8,
    opcode = 12,
    send_flags = 16,
    ex = 20,
    wr = 24
);

impl ib_uverbs_send_wr {
    /// `wr.rdma`.
    pub fn rdma(&self) -> ib_uverbs_send_wr_rdma {
        crate::union_get(&self.wr)
    }

    /// Stores `wr.rdma`, zeroing the rest of the union.
    pub fn set_rdma(&mut self, v: ib_uverbs_send_wr_rdma) {
        crate::union_set(&mut self.wr, &v);
    }

    /// `wr.atomic`.
    pub fn atomic(&self) -> ib_uverbs_send_wr_atomic {
        crate::union_get(&self.wr)
    }

    /// Stores `wr.atomic`.
    pub fn set_atomic(&mut self, v: ib_uverbs_send_wr_atomic) {
        crate::union_set(&mut self.wr, &v);
    }

    /// `wr.ud`.
    pub fn ud(&self) -> ib_uverbs_send_wr_ud {
        crate::union_get(&self.wr)
    }

    /// Stores `wr.ud`, zeroing the rest of the union.
    pub fn set_ud(&mut self, v: ib_uverbs_send_wr_ud) {
        crate::union_set(&mut self.wr, &v);
    }
}

/// `struct ib_uverbs_post_send` (24 bytes), followed by `wr_count`
/// send WRs of `wqe_size` bytes each and `sge_count` [`ib_uverbs_sge`]s.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_post_send {
    pub response: u64,
    pub qp_handle: u32,
    pub wr_count: u32,
    pub sge_count: u32,
    pub wqe_size: u32,
    pub send_wr: [ib_uverbs_send_wr; 0],
}
assert_layout!(
    ib_uverbs_post_send,
    size = 24,
    align = 8,
    response = 0,
    qp_handle = 8,
    wr_count = 12,
    sge_count = 16,
    wqe_size = 20,
    send_wr = 24
);

/// `struct ib_uverbs_post_send_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_post_send_resp {
    pub bad_wr: u32,
}
assert_layout!(ib_uverbs_post_send_resp, size = 4, align = 4, bad_wr = 0);

/// `struct ib_uverbs_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_recv_wr {
    pub wr_id: u64,
    pub num_sge: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_recv_wr, size = 16, align = 8, wr_id = 0, num_sge = 8, reserved = 12);

/// `struct ib_uverbs_post_recv`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_post_recv {
    pub response: u64,
    pub qp_handle: u32,
    pub wr_count: u32,
    pub sge_count: u32,
    pub wqe_size: u32,
    pub recv_wr: [ib_uverbs_recv_wr; 0],
}
assert_layout!(
    ib_uverbs_post_recv,
    size = 24,
    align = 8,
    response = 0,
    qp_handle = 8,
    wr_count = 12,
    sge_count = 16,
    wqe_size = 20,
    recv_wr = 24
);

/// `struct ib_uverbs_post_recv_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_post_recv_resp {
    pub bad_wr: u32,
}
assert_layout!(ib_uverbs_post_recv_resp, size = 4, align = 4, bad_wr = 0);

/// `struct ib_uverbs_post_srq_recv`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_post_srq_recv {
    pub response: u64,
    pub srq_handle: u32,
    pub wr_count: u32,
    pub sge_count: u32,
    pub wqe_size: u32,
    pub recv: [ib_uverbs_recv_wr; 0],
}
assert_layout!(
    ib_uverbs_post_srq_recv,
    size = 24,
    align = 8,
    response = 0,
    srq_handle = 8,
    wr_count = 12,
    sge_count = 16,
    wqe_size = 20,
    recv = 24
);

/// `struct ib_uverbs_post_srq_recv_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_post_srq_recv_resp {
    pub bad_wr: u32,
}
assert_layout!(ib_uverbs_post_srq_recv_resp, size = 4, align = 4, bad_wr = 0);

/// `struct ib_uverbs_create_ah`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_ah {
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub reserved: u32,
    pub attr: ib_uverbs_ah_attr,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_create_ah,
    size = 56,
    align = 8,
    response = 0,
    user_handle = 8,
    pd_handle = 16,
    reserved = 20,
    attr = 24,
    driver_data = 56
);

/// `struct ib_uverbs_create_ah_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_ah_resp {
    pub ah_handle: u32,
    pub driver_data: [u32; 0],
}
assert_layout!(ib_uverbs_create_ah_resp, size = 4, align = 4, ah_handle = 0, driver_data = 4);

/// `struct ib_uverbs_destroy_ah`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_destroy_ah {
    pub ah_handle: u32,
}
assert_layout!(ib_uverbs_destroy_ah, size = 4, align = 4, ah_handle = 0);

/// `struct ib_uverbs_attach_mcast`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_attach_mcast {
    /// Raw GID bytes (network order).
    pub gid: [u8; 16],
    pub qp_handle: u32,
    pub mlid: u16,
    pub reserved: u16,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_attach_mcast,
    size = 24,
    align = 8,
    gid = 0,
    qp_handle = 16,
    mlid = 20,
    reserved = 22,
    driver_data = 24
);

/// `struct ib_uverbs_detach_mcast`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_detach_mcast {
    /// Raw GID bytes (network order).
    pub gid: [u8; 16],
    pub qp_handle: u32,
    pub mlid: u16,
    pub reserved: u16,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_detach_mcast,
    size = 24,
    align = 8,
    gid = 0,
    qp_handle = 16,
    mlid = 20,
    reserved = 22,
    driver_data = 24
);

/// `struct ib_uverbs_create_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_srq {
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_create_srq,
    size = 32,
    align = 8,
    response = 0,
    user_handle = 8,
    pd_handle = 16,
    max_wr = 20,
    max_sge = 24,
    srq_limit = 28,
    driver_data = 32
);

/// `struct ib_uverbs_create_xsrq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_xsrq {
    pub response: u64,
    pub user_handle: u64,
    pub srq_type: u32,
    pub pd_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
    pub max_num_tags: u32,
    pub xrcd_handle: u32,
    pub cq_handle: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_create_xsrq,
    size = 48,
    align = 8,
    response = 0,
    user_handle = 8,
    srq_type = 16,
    pd_handle = 20,
    max_wr = 24,
    max_sge = 28,
    srq_limit = 32,
    max_num_tags = 36,
    xrcd_handle = 40,
    cq_handle = 44,
    driver_data = 48
);

/// `struct ib_uverbs_create_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_create_srq_resp {
    pub srq_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srqn: u32,
    pub driver_data: [u32; 0],
}
assert_layout!(
    ib_uverbs_create_srq_resp,
    size = 16,
    align = 4,
    srq_handle = 0,
    max_wr = 4,
    max_sge = 8,
    srqn = 12,
    driver_data = 16
);

/// `struct ib_uverbs_modify_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_modify_srq {
    pub srq_handle: u32,
    pub attr_mask: u32,
    pub max_wr: u32,
    pub srq_limit: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_modify_srq,
    size = 16,
    align = 8,
    srq_handle = 0,
    attr_mask = 4,
    max_wr = 8,
    srq_limit = 12,
    driver_data = 16
);

/// `struct ib_uverbs_query_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_srq {
    pub response: u64,
    pub srq_handle: u32,
    pub reserved: u32,
    pub driver_data: [u64; 0],
}
assert_layout!(
    ib_uverbs_query_srq,
    size = 16,
    align = 8,
    response = 0,
    srq_handle = 8,
    reserved = 12,
    driver_data = 16
);

/// `struct ib_uverbs_query_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_query_srq_resp {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_query_srq_resp, size = 16, align = 4, max_wr = 0, max_sge = 4, srq_limit = 8, reserved = 12);

/// `struct ib_uverbs_destroy_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_destroy_srq {
    pub response: u64,
    pub srq_handle: u32,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_destroy_srq, size = 16, align = 8, response = 0, srq_handle = 8, reserved = 12);

/// `struct ib_uverbs_destroy_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_destroy_srq_resp {
    pub events_reported: u32,
}
assert_layout!(ib_uverbs_destroy_srq_resp, size = 4, align = 4, events_reported = 0);

/// `struct ib_uverbs_ex_create_wq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_create_wq {
    pub comp_mask: u32,
    pub wq_type: u32,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub cq_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub create_flags: u32,
    pub reserved: u32,
}
assert_layout!(
    ib_uverbs_ex_create_wq,
    size = 40,
    align = 8,
    comp_mask = 0,
    wq_type = 4,
    user_handle = 8,
    pd_handle = 16,
    cq_handle = 20,
    max_wr = 24,
    max_sge = 28,
    create_flags = 32,
    reserved = 36
);

/// `struct ib_uverbs_ex_create_wq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_create_wq_resp {
    pub comp_mask: u32,
    pub response_length: u32,
    pub wq_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub wqn: u32,
}
assert_layout!(
    ib_uverbs_ex_create_wq_resp,
    size = 24,
    align = 4,
    comp_mask = 0,
    response_length = 4,
    wq_handle = 8,
    max_wr = 12,
    max_sge = 16,
    wqn = 20
);

/// `struct ib_uverbs_ex_destroy_wq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_destroy_wq {
    pub comp_mask: u32,
    pub wq_handle: u32,
}
assert_layout!(ib_uverbs_ex_destroy_wq, size = 8, align = 4, comp_mask = 0, wq_handle = 4);

/// `struct ib_uverbs_ex_destroy_wq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_destroy_wq_resp {
    pub comp_mask: u32,
    pub response_length: u32,
    pub events_reported: u32,
    pub reserved: u32,
}
assert_layout!(
    ib_uverbs_ex_destroy_wq_resp,
    size = 16,
    align = 4,
    comp_mask = 0,
    response_length = 4,
    events_reported = 8,
    reserved = 12
);

/// `struct ib_uverbs_ex_modify_wq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_modify_wq {
    pub attr_mask: u32,
    pub wq_handle: u32,
    pub wq_state: u32,
    pub curr_wq_state: u32,
    pub flags: u32,
    pub flags_mask: u32,
}
assert_layout!(
    ib_uverbs_ex_modify_wq,
    size = 24,
    align = 4,
    attr_mask = 0,
    wq_handle = 4,
    wq_state = 8,
    curr_wq_state = 12,
    flags = 16,
    flags_mask = 20
);

/// `struct ib_uverbs_ex_create_rwq_ind_table`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_create_rwq_ind_table {
    pub comp_mask: u32,
    pub log_ind_tbl_size: u32,
    pub wq_handles: [u32; 0],
}
assert_layout!(
    ib_uverbs_ex_create_rwq_ind_table,
    size = 8,
    align = 4,
    comp_mask = 0,
    log_ind_tbl_size = 4,
    wq_handles = 8
);

/// `struct ib_uverbs_ex_create_rwq_ind_table_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_create_rwq_ind_table_resp {
    pub comp_mask: u32,
    pub response_length: u32,
    pub ind_tbl_handle: u32,
    pub ind_tbl_num: u32,
}
assert_layout!(
    ib_uverbs_ex_create_rwq_ind_table_resp,
    size = 16,
    align = 4,
    comp_mask = 0,
    response_length = 4,
    ind_tbl_handle = 8,
    ind_tbl_num = 12
);

/// `struct ib_uverbs_ex_destroy_rwq_ind_table`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_destroy_rwq_ind_table {
    pub comp_mask: u32,
    pub ind_tbl_handle: u32,
}
assert_layout!(ib_uverbs_ex_destroy_rwq_ind_table, size = 8, align = 4, comp_mask = 0, ind_tbl_handle = 4);

/// `struct ib_uverbs_cq_moderation`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_cq_moderation {
    pub cq_count: u16,
    pub cq_period: u16,
}
assert_layout!(ib_uverbs_cq_moderation, size = 4, align = 2, cq_count = 0, cq_period = 2);

/// `struct ib_uverbs_ex_modify_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_ex_modify_cq {
    pub cq_handle: u32,
    pub attr_mask: u32,
    pub attr: ib_uverbs_cq_moderation,
    pub reserved: u32,
}
assert_layout!(ib_uverbs_ex_modify_cq, size = 16, align = 4, cq_handle = 0, attr_mask = 4, attr = 8, reserved = 12);

/// `struct ib_uverbs_clock_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_uverbs_clock_info {
    pub sign: u32,
    pub resv: u32,
    pub nsec: u64,
    pub cycles: u64,
    pub frac: u64,
    pub mult: u32,
    pub shift: u32,
    pub mask: u64,
    pub overflow_period: u64,
}
assert_layout!(
    ib_uverbs_clock_info,
    size = 56,
    align = 8,
    sign = 0,
    resv = 4,
    nsec = 8,
    cycles = 16,
    frac = 24,
    mult = 32,
    shift = 36,
    mask = 40,
    overflow_period = 48
);
