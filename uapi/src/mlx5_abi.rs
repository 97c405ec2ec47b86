//! `include/uapi/rdma/mlx5-abi.h`: the mlx5 driver udata appended to the
//! core uverbs commands (GET_CONTEXT, ALLOC_PD, CREATE_CQ/QP/SRQ/AH, ...).
//!
//! Synced from rdma-core `kernel-headers/rdma/mlx5-abi.h` at commit
//! `691953d8d502`. Layouts match `shared/reference/uverbs-abi.md` §4.2 and
//! `providers.md` §B (identical on kernels 6.1 and 6.12). Every struct of the
//! header is mirrored.
//!
//! The mlx5 *hardware* formats (WQE segments, CQEs, doorbell records) are not
//! uapi (they live in rdma-core's `providers/mlx5/mlx5dv.h`/`wqe.h`) and
//! belong to the provider crate.
#![allow(missing_docs)]

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::mlx5_user_ioctl_verbs::mlx5_ib_uapi_reg;

/// `ETH_ALEN` (`include/uapi/linux/if_ether.h`): MAC address length.
pub const ETH_ALEN: usize = 6;

/// `#define mlx5_ib_clock_info ib_uverbs_clock_info` (deprecated alias).
pub type mlx5_ib_clock_info = crate::ib_user_verbs::ib_uverbs_clock_info;

/// `MLX5_IB_UVERBS_ABI_VERSION`: the driver ABI mlx5 reports in
/// `/sys/class/infiniband_verbs/uverbsN/abi_version` (rdma-core accepts 1..=1).
pub const MLX5_IB_UVERBS_ABI_VERSION: u32 = 1;

// anonymous enum
pub const MLX5_QP_FLAG_SIGNATURE: u32 = 1;
pub const MLX5_QP_FLAG_SCATTER_CQE: u32 = 2;
pub const MLX5_QP_FLAG_TUNNEL_OFFLOADS: u32 = 4;
pub const MLX5_QP_FLAG_BFREG_INDEX: u32 = 8;
pub const MLX5_QP_FLAG_TYPE_DCT: u32 = 0x10;
pub const MLX5_QP_FLAG_TYPE_DCI: u32 = 0x20;
pub const MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_UC: u32 = 0x40;
pub const MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_MC: u32 = 0x80;
pub const MLX5_QP_FLAG_ALLOW_SCATTER_CQE: u32 = 0x100;
pub const MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE: u32 = 0x200;
pub const MLX5_QP_FLAG_UAR_PAGE_INDEX: u32 = 0x400;
pub const MLX5_QP_FLAG_DCI_STREAM: u32 = 0x800;

// anonymous enum
pub const MLX5_SRQ_FLAG_SIGNATURE: u32 = 1;

// anonymous enum
pub const MLX5_WQ_FLAG_SIGNATURE: u32 = 1;

// enum mlx5_lib_caps: `(__u64)` values for `mlx5_ib_alloc_ucontext_req_v2.lib_caps` (u64)
pub const MLX5_LIB_CAP_4K_UAR: u64 = 1;
pub const MLX5_LIB_CAP_DYN_UAR: u64 = 2;

// enum mlx5_ib_alloc_uctx_v2_flags
pub const MLX5_IB_ALLOC_UCTX_DEVX: u32 = 1;

// enum mlx5_ib_alloc_ucontext_resp_mask
pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET: u32 = 1;
pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY: u32 = 2;
pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE: u32 = 4;
pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS: u32 = 8;
pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS: u32 = 0x10;
pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG: u32 = 0x20;

// enum mlx5_user_cmds_supp_uhw
pub const MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE: u32 = 1;
/// Kernel CREATE_AH resolves the RoCE DMAC and returns it in
/// [`mlx5_ib_create_ah_resp`]`.dmac`.
pub const MLX5_USER_CMDS_SUPP_UHW_CREATE_AH: u32 = 2;

// enum mlx5_user_inline_mode
pub const MLX5_USER_INLINE_MODE_NA: u32 = 0;
pub const MLX5_USER_INLINE_MODE_NONE: u32 = 1;
pub const MLX5_USER_INLINE_MODE_L2: u32 = 2;
pub const MLX5_USER_INLINE_MODE_IP: u32 = 3;
pub const MLX5_USER_INLINE_MODE_TCP_UDP: u32 = 4;

// anonymous enum
pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM: u32 = 1;
pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM_REQ_METADATA: u32 = 2;
pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM_SPI_STEERING: u32 = 4;
pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM_FULL_OFFLOAD: u32 = 8;
pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM_TX_IV_IS_ESN: u32 = 0x10;

// enum mlx5_ib_cqe_comp_res_format
pub const MLX5_IB_CQE_RES_FORMAT_HASH: u32 = 1;
pub const MLX5_IB_CQE_RES_FORMAT_CSUM: u32 = 2;
pub const MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX: u32 = 4;

// enum mlx5_ib_packet_pacing_cap_flags
pub const MLX5_IB_PP_SUPPORT_BURST: u32 = 1;

// enum mlx5_ib_mpw_caps
pub const MPW_RESERVED: u32 = 1;
pub const MLX5_IB_ALLOW_MPW: u32 = 2;
pub const MLX5_IB_SUPPORT_EMPW: u32 = 4;

// enum mlx5_ib_sw_parsing_offloads
pub const MLX5_IB_SW_PARSING: u32 = 1;
pub const MLX5_IB_SW_PARSING_CSUM: u32 = 2;
pub const MLX5_IB_SW_PARSING_LSO: u32 = 4;

// enum mlx5_ib_query_dev_resp_flags
pub const MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP: u32 = 1;
pub const MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD: u32 = 2;
pub const MLX5_IB_QUERY_DEV_RESP_PACKET_BASED_CREDIT_MODE: u32 = 4;
pub const MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT: u32 = 8;
pub const MLX5_IB_QUERY_DEV_RESP_FLAGS_OOO_DP: u32 = 0x10;

// enum mlx5_ib_tunnel_offloads
pub const MLX5_IB_TUNNELED_OFFLOADS_VXLAN: u32 = 1;
pub const MLX5_IB_TUNNELED_OFFLOADS_GRE: u32 = 2;
pub const MLX5_IB_TUNNELED_OFFLOADS_GENEVE: u32 = 4;
pub const MLX5_IB_TUNNELED_OFFLOADS_MPLS_GRE: u32 = 8;
pub const MLX5_IB_TUNNELED_OFFLOADS_MPLS_UDP: u32 = 0x10;

// enum mlx5_ib_create_cq_flags
pub const MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD: u32 = 1;
pub const MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX: u32 = 2;
pub const MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS: u32 = 4;

// enum mlx5_rx_hash_function_flags
pub const MLX5_RX_HASH_FUNC_TOEPLITZ: u32 = 1;

// enum mlx5_rx_hash_fields
pub const MLX5_RX_HASH_SRC_IPV4: u32 = 1;
pub const MLX5_RX_HASH_DST_IPV4: u32 = 2;
pub const MLX5_RX_HASH_SRC_IPV6: u32 = 4;
pub const MLX5_RX_HASH_DST_IPV6: u32 = 8;
pub const MLX5_RX_HASH_SRC_PORT_TCP: u32 = 0x10;
pub const MLX5_RX_HASH_DST_PORT_TCP: u32 = 0x20;
pub const MLX5_RX_HASH_SRC_PORT_UDP: u32 = 0x40;
pub const MLX5_RX_HASH_DST_PORT_UDP: u32 = 0x80;
pub const MLX5_RX_HASH_IPSEC_SPI: u32 = 0x100;
pub const MLX5_RX_HASH_INNER: u32 = 0x80000000;

// enum mlx5_ib_create_qp_resp_mask
pub const MLX5_IB_CREATE_QP_RESP_MASK_TIRN: u32 = 1;
pub const MLX5_IB_CREATE_QP_RESP_MASK_TISN: u32 = 2;
pub const MLX5_IB_CREATE_QP_RESP_MASK_RQN: u32 = 4;
pub const MLX5_IB_CREATE_QP_RESP_MASK_SQN: u32 = 8;
pub const MLX5_IB_CREATE_QP_RESP_MASK_TIR_ICM_ADDR: u32 = 0x10;

// enum mlx5_ib_create_wq_mask
pub const MLX5_IB_CREATE_WQ_STRIDING_RQ: u32 = 1;

// enum mlx5_ib_modify_qp_mask
pub const MLX5_IB_MODIFY_QP_OOO_DP: u32 = 1;

// enum mlx5_ib_mmap_cmd
pub const MLX5_IB_MMAP_REGULAR_PAGE: u32 = 0;
pub const MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES: u32 = 1;
pub const MLX5_IB_MMAP_WC_PAGE: u32 = 2;
pub const MLX5_IB_MMAP_NC_PAGE: u32 = 3;
pub const MLX5_IB_MMAP_CORE_CLOCK: u32 = 5;
pub const MLX5_IB_MMAP_ALLOC_WC: u32 = 6;
pub const MLX5_IB_MMAP_CLOCK_INFO: u32 = 7;
pub const MLX5_IB_MMAP_DEVICE_MEM: u32 = 8;

// anonymous enum
pub const MLX5_IB_CLOCK_INFO_KERNEL_UPDATING: u32 = 1;

// anonymous enum
pub const MLX5_IB_CLOCK_INFO_V1: u32 = 0;

/// `struct mlx5_ib_alloc_ucontext_req` (8 bytes): the v0 GET_CONTEXT udata in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_alloc_ucontext_req {
    pub total_num_bfregs: u32,
    pub num_low_latency_bfregs: u32,
}
assert_layout!(mlx5_ib_alloc_ucontext_req, size = 8, align = 4, total_num_bfregs = 0, num_low_latency_bfregs = 4);

/// `struct mlx5_ib_alloc_ucontext_req_v2` (32 bytes): GET_CONTEXT udata in.
/// The kernel needs at least 16 bytes (through `max_cqe_version`); `comp_mask`
/// and the reserved fields must be 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_alloc_ucontext_req_v2 {
    pub total_num_bfregs: u32,
    pub num_low_latency_bfregs: u32,
    /// `MLX5_IB_ALLOC_UCTX_*`.
    pub flags: u32,
    pub comp_mask: u32,
    pub max_cqe_version: u8,
    pub reserved0: u8,
    pub reserved1: u16,
    pub reserved2: u32,
    /// `MLX5_LIB_CAP_*`.
    pub lib_caps: u64,
}
assert_layout!(
    mlx5_ib_alloc_ucontext_req_v2,
    size = 32,
    align = 8,
    total_num_bfregs = 0,
    num_low_latency_bfregs = 4,
    flags = 8,
    comp_mask = 12,
    max_cqe_version = 16,
    reserved0 = 17,
    reserved1 = 18,
    reserved2 = 20,
    lib_caps = 24
);

/// `struct mlx5_ib_alloc_ucontext_resp` (72 bytes): GET_CONTEXT udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_alloc_ucontext_resp {
    pub qp_tab_size: u32,
    /// 0 when the device/arch has no write-combining (no BlueFlame).
    pub bf_reg_size: u32,
    /// 0 means the kernel accepted `MLX5_LIB_CAP_DYN_UAR`.
    pub tot_bfregs: u32,
    pub cache_line_size: u32,
    pub max_sq_desc_sz: u16,
    pub max_rq_desc_sz: u16,
    pub max_send_wqebb: u32,
    pub max_recv_wr: u32,
    pub max_srq_recv_wr: u32,
    pub num_ports: u16,
    pub flow_action_flags: u16,
    /// `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_*`.
    pub comp_mask: u32,
    pub response_length: u32,
    pub cqe_version: u8,
    /// `MLX5_USER_CMDS_SUPP_UHW_*`.
    pub cmds_supp_uhw: u8,
    /// `MLX5_USER_INLINE_MODE_*` (off by one vs. firmware: 0 = N/A).
    pub eth_min_inline: u8,
    pub clock_info_versions: u8,
    pub hca_core_clock_offset: u64,
    pub log_uar_size: u32,
    pub num_uars_per_page: u32,
    pub num_dyn_bfregs: u32,
    pub dump_fill_mkey: u32,
}
assert_layout!(
    mlx5_ib_alloc_ucontext_resp,
    size = 72,
    align = 8,
    qp_tab_size = 0,
    bf_reg_size = 4,
    tot_bfregs = 8,
    cache_line_size = 12,
    max_sq_desc_sz = 16,
    max_rq_desc_sz = 18,
    max_send_wqebb = 20,
    max_recv_wr = 24,
    max_srq_recv_wr = 28,
    num_ports = 32,
    flow_action_flags = 34,
    comp_mask = 36,
    response_length = 40,
    cqe_version = 44,
    cmds_supp_uhw = 45,
    eth_min_inline = 46,
    clock_info_versions = 47,
    hca_core_clock_offset = 48,
    log_uar_size = 56,
    num_uars_per_page = 60,
    num_dyn_bfregs = 64,
    dump_fill_mkey = 68
);

/// `struct mlx5_ib_alloc_pd_resp` (4 bytes): ALLOC_PD udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_alloc_pd_resp {
    pub pdn: u32,
}
assert_layout!(mlx5_ib_alloc_pd_resp, size = 4, align = 4, pdn = 0);

/// `struct mlx5_ib_tso_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}
assert_layout!(mlx5_ib_tso_caps, size = 8, align = 4, max_tso = 0, supported_qpts = 4);

/// `struct mlx5_ib_rss_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_rss_caps {
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
    pub reserved: [u8; 7],
}
assert_layout!(mlx5_ib_rss_caps, size = 16, align = 8, rx_hash_fields_mask = 0, rx_hash_function = 8, reserved = 9);

/// `struct mlx5_ib_cqe_comp_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_cqe_comp_caps {
    pub max_num: u32,
    pub supported_format: u32,
}
assert_layout!(mlx5_ib_cqe_comp_caps, size = 8, align = 4, max_num = 0, supported_format = 4);

/// `struct mlx5_packet_pacing_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
    pub cap_flags: u8,
    pub reserved: [u8; 3],
}
assert_layout!(
    mlx5_packet_pacing_caps,
    size = 16,
    align = 4,
    qp_rate_limit_min = 0,
    qp_rate_limit_max = 4,
    supported_qpts = 8,
    cap_flags = 12,
    reserved = 13
);

/// `struct mlx5_ib_sw_parsing_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_sw_parsing_caps {
    pub sw_parsing_offloads: u32,
    pub supported_qpts: u32,
}
assert_layout!(mlx5_ib_sw_parsing_caps, size = 8, align = 4, sw_parsing_offloads = 0, supported_qpts = 4);

/// `struct mlx5_ib_striding_rq_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_striding_rq_caps {
    pub min_single_stride_log_num_of_bytes: u32,
    pub max_single_stride_log_num_of_bytes: u32,
    pub min_single_wqe_log_num_of_strides: u32,
    pub max_single_wqe_log_num_of_strides: u32,
    pub supported_qpts: u32,
    pub reserved: u32,
}
assert_layout!(
    mlx5_ib_striding_rq_caps,
    size = 24,
    align = 4,
    min_single_stride_log_num_of_bytes = 0,
    max_single_stride_log_num_of_bytes = 4,
    min_single_wqe_log_num_of_strides = 8,
    max_single_wqe_log_num_of_strides = 12,
    supported_qpts = 16,
    reserved = 20
);

/// `struct mlx5_ib_dci_streams_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_dci_streams_caps {
    pub max_log_num_concurent: u8,
    pub max_log_num_errored: u8,
}
assert_layout!(mlx5_ib_dci_streams_caps, size = 2, align = 1, max_log_num_concurent = 0, max_log_num_errored = 1);

/// `struct mlx5_ib_query_device_resp` (112 bytes): EX QUERY_DEVICE udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_query_device_resp {
    pub comp_mask: u32,
    pub response_length: u32,
    pub tso_caps: mlx5_ib_tso_caps,
    pub rss_caps: mlx5_ib_rss_caps,
    pub cqe_comp_caps: mlx5_ib_cqe_comp_caps,
    pub packet_pacing_caps: mlx5_packet_pacing_caps,
    pub mlx5_ib_support_multi_pkt_send_wqes: u32,
    pub flags: u32,
    pub sw_parsing_caps: mlx5_ib_sw_parsing_caps,
    pub striding_rq_caps: mlx5_ib_striding_rq_caps,
    pub tunnel_offloads_caps: u32,
    pub dci_streams_caps: mlx5_ib_dci_streams_caps,
    pub reserved: u16,
    pub reg_c0: mlx5_ib_uapi_reg,
}
assert_layout!(
    mlx5_ib_query_device_resp,
    size = 112,
    align = 8,
    comp_mask = 0,
    response_length = 4,
    tso_caps = 8,
    rss_caps = 16,
    cqe_comp_caps = 32,
    packet_pacing_caps = 40,
    mlx5_ib_support_multi_pkt_send_wqes = 56,
    flags = 60,
    sw_parsing_caps = 64,
    striding_rq_caps = 72,
    tunnel_offloads_caps = 96,
    dci_streams_caps = 100,
    reserved = 102,
    reg_c0 = 104
);

/// `struct mlx5_ib_create_cq` (32 bytes): CREATE_CQ udata in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_cq {
    pub buf_addr: u64,
    pub db_addr: u64,
    /// 64 or 128.
    pub cqe_size: u32,
    pub cqe_comp_en: u8,
    pub cqe_comp_res_format: u8,
    /// `MLX5_IB_CREATE_CQ_FLAGS_*`.
    pub flags: u16,
    pub uar_page_index: u16,
    pub reserved0: u16,
    pub reserved1: u32,
}
assert_layout!(
    mlx5_ib_create_cq,
    size = 32,
    align = 8,
    buf_addr = 0,
    db_addr = 8,
    cqe_size = 16,
    cqe_comp_en = 20,
    cqe_comp_res_format = 21,
    flags = 22,
    uar_page_index = 24,
    reserved0 = 26,
    reserved1 = 28
);

/// `struct mlx5_ib_create_cq_resp` (8 bytes): CREATE_CQ udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_cq_resp {
    pub cqn: u32,
    pub reserved: u32,
}
assert_layout!(mlx5_ib_create_cq_resp, size = 8, align = 4, cqn = 0, reserved = 4);

/// `struct mlx5_ib_resize_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_resize_cq {
    pub buf_addr: u64,
    pub cqe_size: u16,
    pub reserved0: u16,
    pub reserved1: u32,
}
assert_layout!(mlx5_ib_resize_cq, size = 16, align = 8, buf_addr = 0, cqe_size = 8, reserved0 = 10, reserved1 = 12);

/// `struct mlx5_ib_create_srq` (32 bytes): CREATE_SRQ / CREATE_XSRQ udata in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_srq {
    pub buf_addr: u64,
    pub db_addr: u64,
    pub flags: u32,
    pub reserved0: u32,
    pub uidx: u32,
    pub reserved1: u32,
}
assert_layout!(
    mlx5_ib_create_srq,
    size = 32,
    align = 8,
    buf_addr = 0,
    db_addr = 8,
    flags = 16,
    reserved0 = 20,
    uidx = 24,
    reserved1 = 28
);

/// `struct mlx5_ib_create_srq_resp` (8 bytes): CREATE_SRQ udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_srq_resp {
    pub srqn: u32,
    pub reserved: u32,
}
assert_layout!(mlx5_ib_create_srq_resp, size = 8, align = 4, srqn = 0, reserved = 4);

/// `struct mlx5_ib_create_qp_dci_streams`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_qp_dci_streams {
    pub log_num_concurent: u8,
    pub log_num_errored: u8,
}
assert_layout!(mlx5_ib_create_qp_dci_streams, size = 2, align = 1, log_num_concurent = 0, log_num_errored = 1);

/// `struct mlx5_ib_create_qp` (56 bytes): CREATE_QP udata in.
///
/// The C anonymous union `{ __aligned_u64 sq_buf_addr; __aligned_u64
/// access_key; }` is flattened into `sq_buf_addr` (see
/// [`access_key`](Self::access_key)).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_qp {
    pub buf_addr: u64,
    pub db_addr: u64,
    /// Number of 64-byte WQEBBs in the SQ (a power of two).
    pub sq_wqe_count: u32,
    pub rq_wqe_count: u32,
    /// log2 of the RQ stride.
    pub rq_wqe_shift: u32,
    /// `MLX5_QP_FLAG_*`.
    pub flags: u32,
    pub uidx: u32,
    pub bfreg_index: u32,
    /// Union `{ sq_buf_addr, access_key }` (RAW_PACKET / DC use).
    pub sq_buf_addr: u64,
    pub ece_options: u32,
    pub dci_streams: mlx5_ib_create_qp_dci_streams,
    pub reserved: u16,
}
assert_layout!(
    mlx5_ib_create_qp,
    size = 56,
    align = 8,
    buf_addr = 0,
    db_addr = 8,
    sq_wqe_count = 16,
    rq_wqe_count = 20,
    rq_wqe_shift = 24,
    flags = 28,
    uidx = 32,
    bfreg_index = 36,
    sq_buf_addr = 40,
    ece_options = 48,
    dci_streams = 52,
    reserved = 54
);

impl mlx5_ib_create_qp {
    /// The `access_key` view of the `sq_buf_addr` union (DCT access key).
    pub const fn access_key(&self) -> u64 {
        self.sq_buf_addr
    }

    /// Stores the `access_key` view of the union.
    pub fn set_access_key(&mut self, v: u64) {
        self.sq_buf_addr = v;
    }
}

/// `struct mlx5_ib_create_qp_rss`.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_qp_rss {
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
    pub rx_key_len: u8,
    pub reserved: [u8; 6],
    pub rx_hash_key: [u8; 128],
    pub comp_mask: u32,
    pub flags: u32,
}
impl Default for mlx5_ib_create_qp_rss {
    fn default() -> Self {
        FromZeros::new_zeroed()
    }
}
assert_layout!(
    mlx5_ib_create_qp_rss,
    size = 152,
    align = 8,
    rx_hash_fields_mask = 0,
    rx_hash_function = 8,
    rx_key_len = 9,
    reserved = 10,
    rx_hash_key = 16,
    comp_mask = 144,
    flags = 148
);

/// `struct mlx5_ib_create_qp_resp` (40 bytes): CREATE_QP udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_qp_resp {
    pub bfreg_index: u32,
    pub ece_options: u32,
    pub comp_mask: u32,
    pub tirn: u32,
    pub tisn: u32,
    pub rqn: u32,
    pub sqn: u32,
    pub reserved1: u32,
    pub tir_icm_addr: u64,
}
assert_layout!(
    mlx5_ib_create_qp_resp,
    size = 40,
    align = 8,
    bfreg_index = 0,
    ece_options = 4,
    comp_mask = 8,
    tirn = 12,
    tisn = 16,
    rqn = 20,
    sqn = 24,
    reserved1 = 28,
    tir_icm_addr = 32
);

/// `struct mlx5_ib_alloc_mw`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_alloc_mw {
    pub comp_mask: u32,
    pub num_klms: u8,
    pub reserved1: u8,
    pub reserved2: u16,
}
assert_layout!(mlx5_ib_alloc_mw, size = 8, align = 4, comp_mask = 0, num_klms = 4, reserved1 = 5, reserved2 = 6);

/// `struct mlx5_ib_create_wq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_wq {
    pub buf_addr: u64,
    pub db_addr: u64,
    pub rq_wqe_count: u32,
    pub rq_wqe_shift: u32,
    pub user_index: u32,
    pub flags: u32,
    pub comp_mask: u32,
    pub single_stride_log_num_of_bytes: u32,
    pub single_wqe_log_num_of_strides: u32,
    pub two_byte_shift_en: u32,
}
assert_layout!(
    mlx5_ib_create_wq,
    size = 48,
    align = 8,
    buf_addr = 0,
    db_addr = 8,
    rq_wqe_count = 16,
    rq_wqe_shift = 20,
    user_index = 24,
    flags = 28,
    comp_mask = 32,
    single_stride_log_num_of_bytes = 36,
    single_wqe_log_num_of_strides = 40,
    two_byte_shift_en = 44
);

/// `struct mlx5_ib_create_ah_resp` (16 bytes): CREATE_AH udata out (the kernel
/// fills `dmac` when `cmds_supp_uhw & MLX5_USER_CMDS_SUPP_UHW_CREATE_AH`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_ah_resp {
    pub response_length: u32,
    /// `ETH_ALEN` (6) bytes.
    pub dmac: [u8; ETH_ALEN],
    pub reserved: [u8; 6],
}
assert_layout!(mlx5_ib_create_ah_resp, size = 16, align = 4, response_length = 0, dmac = 4, reserved = 10);

/// `struct mlx5_ib_burst_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_burst_info {
    pub max_burst_sz: u32,
    pub typical_pkt_sz: u16,
    pub reserved: u16,
}
assert_layout!(mlx5_ib_burst_info, size = 8, align = 4, max_burst_sz = 0, typical_pkt_sz = 4, reserved = 6);

/// `struct mlx5_ib_modify_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_modify_qp {
    pub comp_mask: u32,
    pub burst_info: mlx5_ib_burst_info,
    pub ece_options: u32,
}
assert_layout!(mlx5_ib_modify_qp, size = 16, align = 4, comp_mask = 0, burst_info = 4, ece_options = 12);

/// `struct mlx5_ib_modify_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_modify_qp_resp {
    pub response_length: u32,
    pub dctn: u32,
    pub ece_options: u32,
    pub reserved: u32,
}
assert_layout!(
    mlx5_ib_modify_qp_resp,
    size = 16,
    align = 4,
    response_length = 0,
    dctn = 4,
    ece_options = 8,
    reserved = 12
);

/// `struct mlx5_ib_create_wq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_wq_resp {
    pub response_length: u32,
    pub reserved: u32,
}
assert_layout!(mlx5_ib_create_wq_resp, size = 8, align = 4, response_length = 0, reserved = 4);

/// `struct mlx5_ib_create_rwq_ind_tbl_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_rwq_ind_tbl_resp {
    pub response_length: u32,
    pub reserved: u32,
}
assert_layout!(mlx5_ib_create_rwq_ind_tbl_resp, size = 8, align = 4, response_length = 0, reserved = 4);

/// `struct mlx5_ib_modify_wq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_modify_wq {
    pub comp_mask: u32,
    pub reserved: u32,
}
assert_layout!(mlx5_ib_modify_wq, size = 8, align = 4, comp_mask = 0, reserved = 4);

/// `struct mlx5_ib_flow_counters_desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_flow_counters_desc {
    pub description: u32,
    pub index: u32,
}
assert_layout!(mlx5_ib_flow_counters_desc, size = 8, align = 4, description = 0, index = 4);

/// `struct mlx5_ib_flow_counters_data`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_flow_counters_data {
    pub counters_data: u64,
    pub ncounters: u32,
    pub reserved: u32,
}
assert_layout!(mlx5_ib_flow_counters_data, size = 16, align = 8, counters_data = 0, ncounters = 8, reserved = 12);

/// `struct mlx5_ib_create_flow`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_create_flow {
    pub ncounters_data: u32,
    pub reserved: u32,
    pub data: [mlx5_ib_flow_counters_data; 0],
}
assert_layout!(mlx5_ib_create_flow, size = 8, align = 8, ncounters_data = 0, reserved = 4, data = 8);
