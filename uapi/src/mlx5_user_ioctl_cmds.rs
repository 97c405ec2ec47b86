//! `include/uapi/rdma/mlx5_user_ioctl_cmds.h`: mlx5 driver-namespace ioctl
//! objects, methods and attributes (`UVERBS_ID_DRIVER_NS` = `0x1000` and up).
//!
//! Synced from rdma-core `kernel-headers/rdma/mlx5_user_ioctl_cmds.h` at
//! commit `691953d8d502`. Object, method and attribute ids are `u16` (the
//! ioctl header/attribute field type); the two value enums
//! (`mlx5_ib_flow_type`, `mlx5_ib_create_flow_flags`) are `u32`.
//!
//! Dynamic UAR allocation (`providers.md` §B.2): object
//! [`MLX5_IB_OBJECT_UAR`], method [`MLX5_IB_METHOD_UAR_OBJ_ALLOC`] with
//! attributes `MLX5_IB_ATTR_UAR_OBJ_ALLOC_{HANDLE,TYPE,MMAP_OFFSET,MMAP_LENGTH,PAGE_ID}`
//! (types `MLX5_IB_UAPI_UAR_ALLOC_TYPE_*` in
//! [`crate::mlx5_user_ioctl_verbs`]), destroyed with
//! [`MLX5_IB_METHOD_UAR_OBJ_DESTROY`].
#![allow(missing_docs)]

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// `MLX5_IB_DW_MATCH_PARAM`: dwords in [`mlx5_ib_match_params`].
pub const MLX5_IB_DW_MATCH_PARAM: usize = 0xa0;

// enum mlx5_ib_create_flow_action_attrs
pub const MLX5_IB_ATTR_CREATE_FLOW_ACTION_FLAGS: u16 = 0x1000;

// enum mlx5_ib_dm_methods
pub const MLX5_IB_METHOD_DM_MAP_OP_ADDR: u16 = 0x1000;
pub const MLX5_IB_METHOD_DM_QUERY: u16 = 0x1001;

// enum mlx5_ib_dm_map_op_addr_attrs
pub const MLX5_IB_ATTR_DM_MAP_OP_ADDR_REQ_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_DM_MAP_OP_ADDR_REQ_OP: u16 = 0x1001;
pub const MLX5_IB_ATTR_DM_MAP_OP_ADDR_RESP_START_OFFSET: u16 = 0x1002;
pub const MLX5_IB_ATTR_DM_MAP_OP_ADDR_RESP_PAGE_INDEX: u16 = 0x1003;

// enum mlx5_ib_query_dm_attrs
pub const MLX5_IB_ATTR_QUERY_DM_REQ_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_QUERY_DM_RESP_START_OFFSET: u16 = 0x1001;
pub const MLX5_IB_ATTR_QUERY_DM_RESP_PAGE_INDEX: u16 = 0x1002;
pub const MLX5_IB_ATTR_QUERY_DM_RESP_LENGTH: u16 = 0x1003;

// enum mlx5_ib_alloc_dm_attrs
pub const MLX5_IB_ATTR_ALLOC_DM_RESP_START_OFFSET: u16 = 0x1000;
pub const MLX5_IB_ATTR_ALLOC_DM_RESP_PAGE_INDEX: u16 = 0x1001;
pub const MLX5_IB_ATTR_ALLOC_DM_REQ_TYPE: u16 = 0x1002;

// enum mlx5_ib_devx_methods
pub const MLX5_IB_METHOD_DEVX_OTHER: u16 = 0x1000;
pub const MLX5_IB_METHOD_DEVX_QUERY_UAR: u16 = 0x1001;
pub const MLX5_IB_METHOD_DEVX_QUERY_EQN: u16 = 0x1002;
pub const MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT: u16 = 0x1003;

// enum mlx5_ib_devx_other_attrs
pub const MLX5_IB_ATTR_DEVX_OTHER_CMD_IN: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT: u16 = 0x1001;

// enum mlx5_ib_devx_obj_create_attrs
pub const MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN: u16 = 0x1001;
pub const MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT: u16 = 0x1002;

// enum mlx5_ib_devx_query_uar_attrs
pub const MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX: u16 = 0x1001;

// enum mlx5_ib_devx_obj_destroy_attrs
pub const MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE: u16 = 0x1000;

// enum mlx5_ib_devx_obj_modify_attrs
pub const MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN: u16 = 0x1001;
pub const MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT: u16 = 0x1002;

// enum mlx5_ib_devx_obj_query_attrs
pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN: u16 = 0x1001;
pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT: u16 = 0x1002;

// enum mlx5_ib_devx_obj_query_async_attrs
pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN: u16 = 0x1001;
pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD: u16 = 0x1002;
pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID: u16 = 0x1003;
pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN: u16 = 0x1004;

// enum mlx5_ib_devx_subscribe_event_attrs
pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE: u16 = 0x1001;
pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST: u16 = 0x1002;
pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM: u16 = 0x1003;
pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE: u16 = 0x1004;

// enum mlx5_ib_devx_query_eqn_attrs
pub const MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN: u16 = 0x1001;

// enum mlx5_ib_devx_obj_methods
pub const MLX5_IB_METHOD_DEVX_OBJ_CREATE: u16 = 0x1000;
pub const MLX5_IB_METHOD_DEVX_OBJ_DESTROY: u16 = 0x1001;
pub const MLX5_IB_METHOD_DEVX_OBJ_MODIFY: u16 = 0x1002;
pub const MLX5_IB_METHOD_DEVX_OBJ_QUERY: u16 = 0x1003;
pub const MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY: u16 = 0x1004;

// enum mlx5_ib_var_alloc_attrs
pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_MMAP_OFFSET: u16 = 0x1001;
pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_MMAP_LENGTH: u16 = 0x1002;
pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_PAGE_ID: u16 = 0x1003;
pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_FLAGS: u16 = 0x1004;

// enum mlx5_ib_var_obj_destroy_attrs
pub const MLX5_IB_ATTR_VAR_OBJ_DESTROY_HANDLE: u16 = 0x1000;

// enum mlx5_ib_var_obj_methods
pub const MLX5_IB_METHOD_VAR_OBJ_ALLOC: u16 = 0x1000;
pub const MLX5_IB_METHOD_VAR_OBJ_DESTROY: u16 = 0x1001;

// enum mlx5_ib_uar_alloc_attrs
pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE: u16 = 0x1001;
pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET: u16 = 0x1002;
pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH: u16 = 0x1003;
pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID: u16 = 0x1004;

// enum mlx5_ib_uar_obj_destroy_attrs
pub const MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE: u16 = 0x1000;

// enum mlx5_ib_uar_obj_methods
pub const MLX5_IB_METHOD_UAR_OBJ_ALLOC: u16 = 0x1000;
pub const MLX5_IB_METHOD_UAR_OBJ_DESTROY: u16 = 0x1001;

// enum mlx5_ib_devx_umem_reg_attrs
pub const MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR: u16 = 0x1001;
pub const MLX5_IB_ATTR_DEVX_UMEM_REG_LEN: u16 = 0x1002;
pub const MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS: u16 = 0x1003;
pub const MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID: u16 = 0x1004;
pub const MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP: u16 = 0x1005;
pub const MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD: u16 = 0x1006;

// enum mlx5_ib_devx_umem_dereg_attrs
pub const MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE: u16 = 0x1000;

// enum mlx5_ib_pp_obj_methods
pub const MLX5_IB_METHOD_PP_OBJ_ALLOC: u16 = 0x1000;
pub const MLX5_IB_METHOD_PP_OBJ_DESTROY: u16 = 0x1001;

// enum mlx5_ib_pp_alloc_attrs
pub const MLX5_IB_ATTR_PP_OBJ_ALLOC_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_PP_OBJ_ALLOC_CTX: u16 = 0x1001;
pub const MLX5_IB_ATTR_PP_OBJ_ALLOC_FLAGS: u16 = 0x1002;
pub const MLX5_IB_ATTR_PP_OBJ_ALLOC_INDEX: u16 = 0x1003;

// enum mlx5_ib_pp_obj_destroy_attrs
pub const MLX5_IB_ATTR_PP_OBJ_DESTROY_HANDLE: u16 = 0x1000;

// enum mlx5_ib_devx_umem_methods
pub const MLX5_IB_METHOD_DEVX_UMEM_REG: u16 = 0x1000;
pub const MLX5_IB_METHOD_DEVX_UMEM_DEREG: u16 = 0x1001;

// enum mlx5_ib_devx_async_cmd_fd_alloc_attrs
pub const MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE: u16 = 0x1000;

// enum mlx5_ib_devx_async_event_fd_alloc_attrs
pub const MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS: u16 = 0x1001;

// enum mlx5_ib_devx_async_cmd_fd_methods
pub const MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC: u16 = 0x1000;

// enum mlx5_ib_devx_async_event_fd_methods
pub const MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC: u16 = 0x1000;

// enum mlx5_ib_objects
pub const MLX5_IB_OBJECT_DEVX: u16 = 0x1000;
pub const MLX5_IB_OBJECT_DEVX_OBJ: u16 = 0x1001;
pub const MLX5_IB_OBJECT_DEVX_UMEM: u16 = 0x1002;
pub const MLX5_IB_OBJECT_FLOW_MATCHER: u16 = 0x1003;
pub const MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD: u16 = 0x1004;
pub const MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD: u16 = 0x1005;
pub const MLX5_IB_OBJECT_VAR: u16 = 0x1006;
pub const MLX5_IB_OBJECT_PP: u16 = 0x1007;
/// Dynamic UAR allocation (kernel 5.7+): methods `MLX5_IB_METHOD_UAR_OBJ_*`.
pub const MLX5_IB_OBJECT_UAR: u16 = 0x1008;
pub const MLX5_IB_OBJECT_STEERING_ANCHOR: u16 = 0x1009;

// enum mlx5_ib_flow_matcher_create_attrs
pub const MLX5_IB_ATTR_FLOW_MATCHER_CREATE_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_FLOW_MATCHER_MATCH_MASK: u16 = 0x1001;
pub const MLX5_IB_ATTR_FLOW_MATCHER_FLOW_TYPE: u16 = 0x1002;
pub const MLX5_IB_ATTR_FLOW_MATCHER_MATCH_CRITERIA: u16 = 0x1003;
pub const MLX5_IB_ATTR_FLOW_MATCHER_FLOW_FLAGS: u16 = 0x1004;
pub const MLX5_IB_ATTR_FLOW_MATCHER_FT_TYPE: u16 = 0x1005;
pub const MLX5_IB_ATTR_FLOW_MATCHER_IB_PORT: u16 = 0x1006;

// enum mlx5_ib_flow_matcher_destroy_attrs
pub const MLX5_IB_ATTR_FLOW_MATCHER_DESTROY_HANDLE: u16 = 0x1000;

// enum mlx5_ib_flow_matcher_methods
pub const MLX5_IB_METHOD_FLOW_MATCHER_CREATE: u16 = 0x1000;
pub const MLX5_IB_METHOD_FLOW_MATCHER_DESTROY: u16 = 0x1001;

// enum mlx5_ib_flow_steering_anchor_create_attrs
pub const MLX5_IB_ATTR_STEERING_ANCHOR_CREATE_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_STEERING_ANCHOR_FT_TYPE: u16 = 0x1001;
pub const MLX5_IB_ATTR_STEERING_ANCHOR_PRIORITY: u16 = 0x1002;
pub const MLX5_IB_ATTR_STEERING_ANCHOR_FT_ID: u16 = 0x1003;

// enum mlx5_ib_flow_steering_anchor_destroy_attrs
pub const MLX5_IB_ATTR_STEERING_ANCHOR_DESTROY_HANDLE: u16 = 0x1000;

// enum mlx5_ib_steering_anchor_methods
pub const MLX5_IB_METHOD_STEERING_ANCHOR_CREATE: u16 = 0x1000;
pub const MLX5_IB_METHOD_STEERING_ANCHOR_DESTROY: u16 = 0x1001;

// enum mlx5_ib_device_query_context_attrs
pub const MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX: u16 = 0x1000;

// enum mlx5_ib_create_cq_attrs
/// On `UVERBS_METHOD_CQ_CREATE`; kernel ≈6.11+ (present in 6.12, not 6.1).
/// Needed only for UAR page ids ≥ 65536 (smaller ones fit the udata's u16).
pub const MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX: u16 = 0x1002;
pub const MLX5_IB_ATTR_CREATE_CQ_DBR_BUF_UMEM: u16 = 0x1003;

// enum mlx5_ib_create_qp_attrs
pub const MLX5_IB_ATTR_CREATE_QP_DBR_BUF_UMEM: u16 = 0x1002;

// enum mlx5_ib_reg_dmabuf_mr_attrs
pub const MLX5_IB_ATTR_REG_DMABUF_MR_ACCESS_FLAGS: u16 = 0x1000;

// enum mlx5_ib_flow_type (an attribute value, not an id: u32)
pub const MLX5_IB_FLOW_TYPE_NORMAL: u32 = 0;
pub const MLX5_IB_FLOW_TYPE_SNIFFER: u32 = 1;
pub const MLX5_IB_FLOW_TYPE_ALL_DEFAULT: u32 = 2;
pub const MLX5_IB_FLOW_TYPE_MC_DEFAULT: u32 = 3;

// enum mlx5_ib_create_flow_flags (flag bits, not ids: u32)
pub const MLX5_IB_ATTR_CREATE_FLOW_FLAGS_DEFAULT_MISS: u32 = 1;
pub const MLX5_IB_ATTR_CREATE_FLOW_FLAGS_DROP: u32 = 2;

// enum mlx5_ib_create_flow_attrs
pub const MLX5_IB_ATTR_CREATE_FLOW_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_CREATE_FLOW_MATCH_VALUE: u16 = 0x1001;
pub const MLX5_IB_ATTR_CREATE_FLOW_DEST_QP: u16 = 0x1002;
pub const MLX5_IB_ATTR_CREATE_FLOW_DEST_DEVX: u16 = 0x1003;
pub const MLX5_IB_ATTR_CREATE_FLOW_MATCHER: u16 = 0x1004;
pub const MLX5_IB_ATTR_CREATE_FLOW_ARR_FLOW_ACTIONS: u16 = 0x1005;
pub const MLX5_IB_ATTR_CREATE_FLOW_TAG: u16 = 0x1006;
pub const MLX5_IB_ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX: u16 = 0x1007;
pub const MLX5_IB_ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX_OFFSET: u16 = 0x1008;
pub const MLX5_IB_ATTR_CREATE_FLOW_FLAGS: u16 = 0x1009;

// enum mlx5_ib_destroy_flow_attrs
pub const MLX5_IB_ATTR_DESTROY_FLOW_HANDLE: u16 = 0x1000;

// enum mlx5_ib_flow_methods
pub const MLX5_IB_METHOD_CREATE_FLOW: u16 = 0x1000;
pub const MLX5_IB_METHOD_DESTROY_FLOW: u16 = 0x1001;

// enum mlx5_ib_flow_action_methods
pub const MLX5_IB_METHOD_FLOW_ACTION_CREATE_MODIFY_HEADER: u16 = 0x1000;
pub const MLX5_IB_METHOD_FLOW_ACTION_CREATE_PACKET_REFORMAT: u16 = 0x1001;

// enum mlx5_ib_create_flow_action_create_modify_header_attrs
pub const MLX5_IB_ATTR_CREATE_MODIFY_HEADER_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_CREATE_MODIFY_HEADER_ACTIONS_PRM: u16 = 0x1001;
pub const MLX5_IB_ATTR_CREATE_MODIFY_HEADER_FT_TYPE: u16 = 0x1002;

// enum mlx5_ib_create_flow_action_create_packet_reformat_attrs
pub const MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_TYPE: u16 = 0x1001;
pub const MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_FT_TYPE: u16 = 0x1002;
pub const MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_DATA_BUF: u16 = 0x1003;

// enum mlx5_ib_query_pd_attrs
pub const MLX5_IB_ATTR_QUERY_PD_HANDLE: u16 = 0x1000;
pub const MLX5_IB_ATTR_QUERY_PD_RESP_PDN: u16 = 0x1001;

// enum mlx5_ib_pd_methods
pub const MLX5_IB_METHOD_PD_QUERY: u16 = 0x1000;

// enum mlx5_ib_device_methods
pub const MLX5_IB_METHOD_QUERY_PORT: u16 = 0x1000;
pub const MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH: u16 = 0x1001;

// enum mlx5_ib_query_port_attrs
pub const MLX5_IB_ATTR_QUERY_PORT_PORT_NUM: u16 = 0x1000;
pub const MLX5_IB_ATTR_QUERY_PORT: u16 = 0x1001;

// enum mlx5_ib_get_data_direct_sysfs_path_attrs
pub const MLX5_IB_ATTR_GET_DATA_DIRECT_SYSFS_PATH: u16 = 0x1000;

/// `struct mlx5_ib_match_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mlx5_ib_match_params {
    pub match_params: [u32; MLX5_IB_DW_MATCH_PARAM],
}
impl Default for mlx5_ib_match_params {
    fn default() -> Self {
        FromZeros::new_zeroed()
    }
}
assert_layout!(mlx5_ib_match_params, size = 640, align = 4, match_params = 0);
