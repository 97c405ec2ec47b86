//! `include/uapi/rdma/mlx5_user_ioctl_verbs.h`: enums and structs used by
//! the mlx5 driver-namespace ioctl methods.
//!
//! Synced from rdma-core `kernel-headers/rdma/mlx5_user_ioctl_verbs.h` at
//! commit `691953d8d502`.
#![allow(missing_docs)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

// enum mlx5_ib_uapi_flow_action_flags
pub const MLX5_IB_UAPI_FLOW_ACTION_FLAGS_REQUIRE_METADATA: u32 = 1;

// enum mlx5_ib_uapi_flow_table_type
pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_NIC_RX: u32 = 0;
pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_NIC_TX: u32 = 1;
pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_FDB: u32 = 2;
pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_RDMA_RX: u32 = 3;
pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_RDMA_TX: u32 = 4;
pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_RDMA_TRANSPORT_RX: u32 = 5;
pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_RDMA_TRANSPORT_TX: u32 = 6;

// enum mlx5_ib_uapi_flow_action_packet_reformat_type
pub const MLX5_IB_UAPI_FLOW_ACTION_PACKET_REFORMAT_TYPE_L2_TUNNEL_TO_L2: u32 = 0;
pub const MLX5_IB_UAPI_FLOW_ACTION_PACKET_REFORMAT_TYPE_L2_TO_L2_TUNNEL: u32 = 1;
pub const MLX5_IB_UAPI_FLOW_ACTION_PACKET_REFORMAT_TYPE_L3_TUNNEL_TO_L2: u32 = 2;
pub const MLX5_IB_UAPI_FLOW_ACTION_PACKET_REFORMAT_TYPE_L2_TO_L3_TUNNEL: u32 = 3;

// enum mlx5_ib_uapi_reg_dmabuf_flags
pub const MLX5_IB_UAPI_REG_DMABUF_ACCESS_DATA_DIRECT: u32 = 1;

// enum mlx5_ib_uapi_dm_type
pub const MLX5_IB_UAPI_DM_TYPE_MEMIC: u32 = 0;
pub const MLX5_IB_UAPI_DM_TYPE_STEERING_SW_ICM: u32 = 1;
pub const MLX5_IB_UAPI_DM_TYPE_HEADER_MODIFY_SW_ICM: u32 = 2;
pub const MLX5_IB_UAPI_DM_TYPE_HEADER_MODIFY_PATTERN_SW_ICM: u32 = 3;
pub const MLX5_IB_UAPI_DM_TYPE_ENCAP_SW_ICM: u32 = 4;

// enum mlx5_ib_uapi_devx_create_event_channel_flags
pub const MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA: u32 = 1;

// enum mlx5_ib_uapi_pp_alloc_flags
pub const MLX5_IB_UAPI_PP_ALLOC_FLAGS_DEDICATED_INDEX: u32 = 1;

// enum mlx5_ib_uapi_uar_alloc_type
pub const MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF: u32 = 0;
pub const MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC: u32 = 1;

// enum mlx5_ib_uapi_query_port_flags
pub const MLX5_IB_UAPI_QUERY_PORT_VPORT: u32 = 1;
pub const MLX5_IB_UAPI_QUERY_PORT_VPORT_VHCA_ID: u32 = 2;
pub const MLX5_IB_UAPI_QUERY_PORT_VPORT_STEERING_ICM_RX: u32 = 4;
pub const MLX5_IB_UAPI_QUERY_PORT_VPORT_STEERING_ICM_TX: u32 = 8;
pub const MLX5_IB_UAPI_QUERY_PORT_VPORT_REG_C0: u32 = 0x10;
pub const MLX5_IB_UAPI_QUERY_PORT_ESW_OWNER_VHCA_ID: u32 = 0x20;

// enum mlx5_ib_uapi_var_alloc_flags
pub const MLX5_IB_UAPI_VAR_ALLOC_FLAG_TLP: u32 = 1;

/// `struct mlx5_ib_uapi_devx_async_cmd_hdr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_uapi_devx_async_cmd_hdr {
    pub wr_id: u64,
    pub out_data: [u8; 0],
}
assert_layout!(mlx5_ib_uapi_devx_async_cmd_hdr, size = 8, align = 8, wr_id = 0, out_data = 8);

/// `struct mlx5_ib_uapi_devx_async_event_hdr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_uapi_devx_async_event_hdr {
    pub cookie: u64,
    pub out_data: [u8; 0],
}
assert_layout!(mlx5_ib_uapi_devx_async_event_hdr, size = 8, align = 8, cookie = 0, out_data = 8);

/// `struct mlx5_ib_uapi_reg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_uapi_reg {
    pub value: u32,
    pub mask: u32,
}
assert_layout!(mlx5_ib_uapi_reg, size = 8, align = 4, value = 0, mask = 4);

/// `struct mlx5_ib_uapi_query_port`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_uapi_query_port {
    pub flags: u64,
    pub vport: u16,
    pub vport_vhca_id: u16,
    pub esw_owner_vhca_id: u16,
    pub rsvd0: u16,
    pub vport_steering_icm_rx: u64,
    pub vport_steering_icm_tx: u64,
    pub reg_c0: mlx5_ib_uapi_reg,
}
assert_layout!(
    mlx5_ib_uapi_query_port,
    size = 40,
    align = 8,
    flags = 0,
    vport = 8,
    vport_vhca_id = 10,
    esw_owner_vhca_id = 12,
    rsvd0 = 14,
    vport_steering_icm_rx = 16,
    vport_steering_icm_tx = 24,
    reg_c0 = 32
);
