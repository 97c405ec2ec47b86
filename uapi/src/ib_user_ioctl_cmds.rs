//! `include/uapi/rdma/ib_user_ioctl_cmds.h`: object, method and attribute ids
//! of the uverbs ioctl interface.
//!
//! Synced from rdma-core `kernel-headers/rdma/ib_user_ioctl_cmds.h` at
//! commit `691953d8d502` (matches the kernel 7.3 uapi). All ids are `u16`,
//! the type of `ib_uverbs_ioctl_hdr.object_id`/`method_id` and
//! `ib_uverbs_attr.attr_id`.
//!
//! Kernel availability (from `shared/reference/uverbs-abi.md` §2.5, §7): the
//! numbering is identical in 6.1, 6.12 and later, but newer ids simply do not
//! exist on older kernels (the call then fails with `EPROTONOSUPPORT`):
//! `UVERBS_OBJECT_DMAH` and `UVERBS_METHOD_REG_MR` ≈6.17,
//! `UVERBS_OBJECT_DMABUF` and `UVERBS_METHOD_QUERY_PORT_SPEED` ≈6.19/7.0,
//! `UVERBS_OBJECT_COMP_CNTR`, `UVERBS_METHOD_QUERY_COMP_CNTR_CAPS` and
//! `UVERBS_METHOD_QP_ATTACH_COMP_CNTR` 7.3,
//! `UVERBS_ATTR_GET_CONTEXT_FD_ARR` ≈6.15, the CQ `BUFFER_*` attributes ≈6.17,
//! the `*_BUF_UMEM` attributes ≤7.2.
#![allow(missing_docs)]

/// `UVERBS_ID_NS_MASK`: the namespace bits of an object, method or attribute id.
pub const UVERBS_ID_NS_MASK: u16 = 0xf000;
/// `UVERBS_ID_NS_SHIFT`: ids with `1 << UVERBS_ID_NS_SHIFT` set are in the
/// driver namespace.
pub const UVERBS_ID_NS_SHIFT: u32 = 12;

// enum uverbs_default_objects
pub const UVERBS_OBJECT_DEVICE: u16 = 0;
pub const UVERBS_OBJECT_PD: u16 = 1;
pub const UVERBS_OBJECT_COMP_CHANNEL: u16 = 2;
pub const UVERBS_OBJECT_CQ: u16 = 3;
pub const UVERBS_OBJECT_QP: u16 = 4;
pub const UVERBS_OBJECT_SRQ: u16 = 5;
pub const UVERBS_OBJECT_AH: u16 = 6;
pub const UVERBS_OBJECT_MR: u16 = 7;
pub const UVERBS_OBJECT_MW: u16 = 8;
pub const UVERBS_OBJECT_FLOW: u16 = 9;
pub const UVERBS_OBJECT_XRCD: u16 = 10;
pub const UVERBS_OBJECT_RWQ_IND_TBL: u16 = 11;
pub const UVERBS_OBJECT_WQ: u16 = 12;
pub const UVERBS_OBJECT_FLOW_ACTION: u16 = 13;
pub const UVERBS_OBJECT_DM: u16 = 14;
pub const UVERBS_OBJECT_COUNTERS: u16 = 15;
pub const UVERBS_OBJECT_ASYNC_EVENT: u16 = 16;
pub const UVERBS_OBJECT_DMAH: u16 = 17;
pub const UVERBS_OBJECT_DMABUF: u16 = 18;
pub const UVERBS_OBJECT_COMP_CNTR: u16 = 19;

// anonymous enum
/// `UVERBS_ID_DRIVER_NS`: first id of the driver namespace.
pub const UVERBS_ID_DRIVER_NS: u16 = 0x1000;
/// `UVERBS_ATTR_UHW_IN`: legacy driver udata in (`PTR_IN`, any size); the
/// provider's `*_req` struct that follows the core struct in the write ABI.
pub const UVERBS_ATTR_UHW_IN: u16 = 0x1000;
/// `UVERBS_ATTR_UHW_OUT`: legacy driver udata out (`PTR_OUT`, any size).
pub const UVERBS_ATTR_UHW_OUT: u16 = 0x1001;
/// `UVERBS_ID_DRIVER_NS_WITH_UHW`: first driver-specific attribute id on a
/// core method that also takes UHW. Named in kernel ≈6.11+ (present in 6.12,
/// absent from 6.1, where only the `0x1000` driver-namespace flag existed).
pub const UVERBS_ID_DRIVER_NS_WITH_UHW: u16 = 0x1002;

// enum uverbs_methods_device
pub const UVERBS_METHOD_INVOKE_WRITE: u16 = 0;
pub const UVERBS_METHOD_INFO_HANDLES: u16 = 1;
pub const UVERBS_METHOD_QUERY_PORT: u16 = 2;
pub const UVERBS_METHOD_GET_CONTEXT: u16 = 3;
pub const UVERBS_METHOD_QUERY_CONTEXT: u16 = 4;
pub const UVERBS_METHOD_QUERY_GID_TABLE: u16 = 5;
pub const UVERBS_METHOD_QUERY_GID_ENTRY: u16 = 6;
pub const UVERBS_METHOD_QUERY_PORT_SPEED: u16 = 7;
pub const UVERBS_METHOD_QUERY_COMP_CNTR_CAPS: u16 = 8;

// enum uverbs_attrs_invoke_write_cmd_attr_ids
pub const UVERBS_ATTR_CORE_IN: u16 = 0;
pub const UVERBS_ATTR_CORE_OUT: u16 = 1;
pub const UVERBS_ATTR_WRITE_CMD: u16 = 2;

// enum uverbs_attrs_query_port_cmd_attr_ids
pub const UVERBS_ATTR_QUERY_PORT_PORT_NUM: u16 = 0;
pub const UVERBS_ATTR_QUERY_PORT_RESP: u16 = 1;

// enum uverbs_attrs_query_port_speed_cmd_attr_ids
pub const UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM: u16 = 0;
pub const UVERBS_ATTR_QUERY_PORT_SPEED_RESP: u16 = 1;

// enum uverbs_attrs_query_comp_cntr_caps_attr_ids
pub const UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_COUNTERS: u16 = 0;
pub const UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_VALUE: u16 = 1;
pub const UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_SUPPORTED_QP_ATTACH_OPS: u16 = 2;

// enum uverbs_attrs_get_context_attr_ids
pub const UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS: u16 = 0;
pub const UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT: u16 = 1;
pub const UVERBS_ATTR_GET_CONTEXT_FD_ARR: u16 = 2;

// enum uverbs_attrs_query_context_attr_ids
pub const UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS: u16 = 0;
pub const UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT: u16 = 1;

// enum uverbs_attrs_create_cq_cmd_attr_ids
pub const UVERBS_ATTR_CREATE_CQ_HANDLE: u16 = 0;
pub const UVERBS_ATTR_CREATE_CQ_CQE: u16 = 1;
pub const UVERBS_ATTR_CREATE_CQ_USER_HANDLE: u16 = 2;
pub const UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL: u16 = 3;
pub const UVERBS_ATTR_CREATE_CQ_COMP_VECTOR: u16 = 4;
pub const UVERBS_ATTR_CREATE_CQ_FLAGS: u16 = 5;
pub const UVERBS_ATTR_CREATE_CQ_RESP_CQE: u16 = 6;
pub const UVERBS_ATTR_CREATE_CQ_EVENT_FD: u16 = 7;
pub const UVERBS_ATTR_CREATE_CQ_BUFFER_VA: u16 = 8;
pub const UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH: u16 = 9;
pub const UVERBS_ATTR_CREATE_CQ_BUFFER_FD: u16 = 10;
pub const UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET: u16 = 11;
pub const UVERBS_ATTR_CREATE_CQ_BUF_UMEM: u16 = 12;

// enum uverbs_attrs_destroy_cq_cmd_attr_ids
pub const UVERBS_ATTR_DESTROY_CQ_HANDLE: u16 = 0;
pub const UVERBS_ATTR_DESTROY_CQ_RESP: u16 = 1;

// enum uverbs_attrs_create_flow_action_esp
pub const UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE: u16 = 0;
pub const UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS: u16 = 1;
pub const UVERBS_ATTR_FLOW_ACTION_ESP_ESN: u16 = 2;
pub const UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT: u16 = 3;
pub const UVERBS_ATTR_FLOW_ACTION_ESP_REPLAY: u16 = 4;
pub const UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP: u16 = 5;

// enum uverbs_attrs_modify_flow_action_esp
pub const UVERBS_ATTR_MODIFY_FLOW_ACTION_ESP_HANDLE: u16 = 0;

// enum uverbs_attrs_destroy_flow_action_esp
pub const UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE: u16 = 0;

// enum uverbs_attrs_create_qp_cmd_attr_ids
pub const UVERBS_ATTR_CREATE_QP_HANDLE: u16 = 0;
pub const UVERBS_ATTR_CREATE_QP_XRCD_HANDLE: u16 = 1;
pub const UVERBS_ATTR_CREATE_QP_PD_HANDLE: u16 = 2;
pub const UVERBS_ATTR_CREATE_QP_SRQ_HANDLE: u16 = 3;
pub const UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE: u16 = 4;
pub const UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE: u16 = 5;
pub const UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE: u16 = 6;
pub const UVERBS_ATTR_CREATE_QP_USER_HANDLE: u16 = 7;
pub const UVERBS_ATTR_CREATE_QP_CAP: u16 = 8;
pub const UVERBS_ATTR_CREATE_QP_TYPE: u16 = 9;
pub const UVERBS_ATTR_CREATE_QP_FLAGS: u16 = 10;
pub const UVERBS_ATTR_CREATE_QP_SOURCE_QPN: u16 = 11;
pub const UVERBS_ATTR_CREATE_QP_EVENT_FD: u16 = 12;
pub const UVERBS_ATTR_CREATE_QP_RESP_CAP: u16 = 13;
pub const UVERBS_ATTR_CREATE_QP_RESP_QP_NUM: u16 = 14;
pub const UVERBS_ATTR_CREATE_QP_BUF_UMEM: u16 = 15;
pub const UVERBS_ATTR_CREATE_QP_RQ_BUF_UMEM: u16 = 16;
pub const UVERBS_ATTR_CREATE_QP_SQ_BUF_UMEM: u16 = 17;

// enum uverbs_attrs_destroy_qp_cmd_attr_ids
pub const UVERBS_ATTR_DESTROY_QP_HANDLE: u16 = 0;
pub const UVERBS_ATTR_DESTROY_QP_RESP: u16 = 1;

// enum uverbs_attrs_qp_attach_comp_cntr_cmd_attr_ids
pub const UVERBS_ATTR_QP_ATTACH_COMP_CNTR_HANDLE: u16 = 0;
pub const UVERBS_ATTR_QP_ATTACH_COMP_CNTR_CNTR_HANDLE: u16 = 1;
pub const UVERBS_ATTR_QP_ATTACH_COMP_CNTR_OP_MASK: u16 = 2;

// enum uverbs_methods_qp
pub const UVERBS_METHOD_QP_CREATE: u16 = 0;
pub const UVERBS_METHOD_QP_DESTROY: u16 = 1;
pub const UVERBS_METHOD_QP_ATTACH_COMP_CNTR: u16 = 2;

// enum uverbs_attrs_create_srq_cmd_attr_ids
pub const UVERBS_ATTR_CREATE_SRQ_HANDLE: u16 = 0;
pub const UVERBS_ATTR_CREATE_SRQ_PD_HANDLE: u16 = 1;
pub const UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE: u16 = 2;
pub const UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE: u16 = 3;
pub const UVERBS_ATTR_CREATE_SRQ_USER_HANDLE: u16 = 4;
pub const UVERBS_ATTR_CREATE_SRQ_MAX_WR: u16 = 5;
pub const UVERBS_ATTR_CREATE_SRQ_MAX_SGE: u16 = 6;
pub const UVERBS_ATTR_CREATE_SRQ_LIMIT: u16 = 7;
pub const UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS: u16 = 8;
pub const UVERBS_ATTR_CREATE_SRQ_TYPE: u16 = 9;
pub const UVERBS_ATTR_CREATE_SRQ_EVENT_FD: u16 = 10;
pub const UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR: u16 = 11;
pub const UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE: u16 = 12;
pub const UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM: u16 = 13;

// enum uverbs_attrs_destroy_srq_cmd_attr_ids
pub const UVERBS_ATTR_DESTROY_SRQ_HANDLE: u16 = 0;
pub const UVERBS_ATTR_DESTROY_SRQ_RESP: u16 = 1;

// enum uverbs_methods_srq
pub const UVERBS_METHOD_SRQ_CREATE: u16 = 0;
pub const UVERBS_METHOD_SRQ_DESTROY: u16 = 1;

// enum uverbs_methods_cq
pub const UVERBS_METHOD_CQ_CREATE: u16 = 0;
pub const UVERBS_METHOD_CQ_DESTROY: u16 = 1;

// enum uverbs_attrs_create_wq_cmd_attr_ids
pub const UVERBS_ATTR_CREATE_WQ_HANDLE: u16 = 0;
pub const UVERBS_ATTR_CREATE_WQ_PD_HANDLE: u16 = 1;
pub const UVERBS_ATTR_CREATE_WQ_CQ_HANDLE: u16 = 2;
pub const UVERBS_ATTR_CREATE_WQ_USER_HANDLE: u16 = 3;
pub const UVERBS_ATTR_CREATE_WQ_TYPE: u16 = 4;
pub const UVERBS_ATTR_CREATE_WQ_EVENT_FD: u16 = 5;
pub const UVERBS_ATTR_CREATE_WQ_MAX_WR: u16 = 6;
pub const UVERBS_ATTR_CREATE_WQ_MAX_SGE: u16 = 7;
pub const UVERBS_ATTR_CREATE_WQ_FLAGS: u16 = 8;
pub const UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR: u16 = 9;
pub const UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE: u16 = 10;
pub const UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM: u16 = 11;

// enum uverbs_attrs_destroy_wq_cmd_attr_ids
pub const UVERBS_ATTR_DESTROY_WQ_HANDLE: u16 = 0;
pub const UVERBS_ATTR_DESTROY_WQ_RESP: u16 = 1;

// enum uverbs_methods_wq
pub const UVERBS_METHOD_WQ_CREATE: u16 = 0;
pub const UVERBS_METHOD_WQ_DESTROY: u16 = 1;

// enum uverbs_methods_actions_flow_action_ops
pub const UVERBS_METHOD_FLOW_ACTION_ESP_CREATE: u16 = 0;
pub const UVERBS_METHOD_FLOW_ACTION_DESTROY: u16 = 1;
pub const UVERBS_METHOD_FLOW_ACTION_ESP_MODIFY: u16 = 2;

// enum uverbs_attrs_alloc_dm_cmd_attr_ids
pub const UVERBS_ATTR_ALLOC_DM_HANDLE: u16 = 0;
pub const UVERBS_ATTR_ALLOC_DM_LENGTH: u16 = 1;
pub const UVERBS_ATTR_ALLOC_DM_ALIGNMENT: u16 = 2;

// enum uverbs_attrs_free_dm_cmd_attr_ids
pub const UVERBS_ATTR_FREE_DM_HANDLE: u16 = 0;

// enum uverbs_methods_dm
pub const UVERBS_METHOD_DM_ALLOC: u16 = 0;
pub const UVERBS_METHOD_DM_FREE: u16 = 1;

// enum uverbs_attrs_alloc_dmah_cmd_attr_ids
pub const UVERBS_ATTR_ALLOC_DMAH_HANDLE: u16 = 0;
pub const UVERBS_ATTR_ALLOC_DMAH_CPU_ID: u16 = 1;
pub const UVERBS_ATTR_ALLOC_DMAH_TPH_MEM_TYPE: u16 = 2;
pub const UVERBS_ATTR_ALLOC_DMAH_PH: u16 = 3;

// enum uverbs_attrs_free_dmah_cmd_attr_ids
pub const UVERBS_ATTR_FREE_DMA_HANDLE: u16 = 0;

// enum uverbs_methods_dmah
pub const UVERBS_METHOD_DMAH_ALLOC: u16 = 0;
pub const UVERBS_METHOD_DMAH_FREE: u16 = 1;

// enum uverbs_attrs_alloc_dmabuf_cmd_attr_ids
pub const UVERBS_ATTR_ALLOC_DMABUF_HANDLE: u16 = 0;
pub const UVERBS_ATTR_ALLOC_DMABUF_PGOFF: u16 = 1;

// enum uverbs_methods_dmabuf
pub const UVERBS_METHOD_DMABUF_ALLOC: u16 = 0;

// enum uverbs_attrs_reg_dm_mr_cmd_attr_ids
pub const UVERBS_ATTR_REG_DM_MR_HANDLE: u16 = 0;
pub const UVERBS_ATTR_REG_DM_MR_OFFSET: u16 = 1;
pub const UVERBS_ATTR_REG_DM_MR_LENGTH: u16 = 2;
pub const UVERBS_ATTR_REG_DM_MR_PD_HANDLE: u16 = 3;
pub const UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS: u16 = 4;
pub const UVERBS_ATTR_REG_DM_MR_DM_HANDLE: u16 = 5;
pub const UVERBS_ATTR_REG_DM_MR_RESP_LKEY: u16 = 6;
pub const UVERBS_ATTR_REG_DM_MR_RESP_RKEY: u16 = 7;

// enum uverbs_methods_mr
pub const UVERBS_METHOD_DM_MR_REG: u16 = 0;
pub const UVERBS_METHOD_MR_DESTROY: u16 = 1;
pub const UVERBS_METHOD_ADVISE_MR: u16 = 2;
pub const UVERBS_METHOD_QUERY_MR: u16 = 3;
pub const UVERBS_METHOD_REG_DMABUF_MR: u16 = 4;
pub const UVERBS_METHOD_REG_MR: u16 = 5;

// enum uverbs_attrs_mr_destroy_ids
pub const UVERBS_ATTR_DESTROY_MR_HANDLE: u16 = 0;

// enum uverbs_attrs_advise_mr_cmd_attr_ids
pub const UVERBS_ATTR_ADVISE_MR_PD_HANDLE: u16 = 0;
pub const UVERBS_ATTR_ADVISE_MR_ADVICE: u16 = 1;
pub const UVERBS_ATTR_ADVISE_MR_FLAGS: u16 = 2;
pub const UVERBS_ATTR_ADVISE_MR_SGE_LIST: u16 = 3;

// enum uverbs_attrs_query_mr_cmd_attr_ids
pub const UVERBS_ATTR_QUERY_MR_HANDLE: u16 = 0;
pub const UVERBS_ATTR_QUERY_MR_RESP_LKEY: u16 = 1;
pub const UVERBS_ATTR_QUERY_MR_RESP_RKEY: u16 = 2;
pub const UVERBS_ATTR_QUERY_MR_RESP_LENGTH: u16 = 3;
pub const UVERBS_ATTR_QUERY_MR_RESP_IOVA: u16 = 4;

// enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids
pub const UVERBS_ATTR_REG_DMABUF_MR_HANDLE: u16 = 0;
pub const UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE: u16 = 1;
pub const UVERBS_ATTR_REG_DMABUF_MR_OFFSET: u16 = 2;
pub const UVERBS_ATTR_REG_DMABUF_MR_LENGTH: u16 = 3;
pub const UVERBS_ATTR_REG_DMABUF_MR_IOVA: u16 = 4;
pub const UVERBS_ATTR_REG_DMABUF_MR_FD: u16 = 5;
pub const UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS: u16 = 6;
pub const UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY: u16 = 7;
pub const UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY: u16 = 8;

// enum uverbs_attrs_reg_mr_cmd_attr_ids
pub const UVERBS_ATTR_REG_MR_HANDLE: u16 = 0;
pub const UVERBS_ATTR_REG_MR_PD_HANDLE: u16 = 1;
pub const UVERBS_ATTR_REG_MR_DMA_HANDLE: u16 = 2;
pub const UVERBS_ATTR_REG_MR_IOVA: u16 = 3;
pub const UVERBS_ATTR_REG_MR_ADDR: u16 = 4;
pub const UVERBS_ATTR_REG_MR_LENGTH: u16 = 5;
pub const UVERBS_ATTR_REG_MR_ACCESS_FLAGS: u16 = 6;
pub const UVERBS_ATTR_REG_MR_FD: u16 = 7;
pub const UVERBS_ATTR_REG_MR_FD_OFFSET: u16 = 8;
pub const UVERBS_ATTR_REG_MR_RESP_LKEY: u16 = 9;
pub const UVERBS_ATTR_REG_MR_RESP_RKEY: u16 = 10;

// enum uverbs_attrs_create_counters_cmd_attr_ids
pub const UVERBS_ATTR_CREATE_COUNTERS_HANDLE: u16 = 0;

// enum uverbs_attrs_destroy_counters_cmd_attr_ids
pub const UVERBS_ATTR_DESTROY_COUNTERS_HANDLE: u16 = 0;

// enum uverbs_attrs_read_counters_cmd_attr_ids
pub const UVERBS_ATTR_READ_COUNTERS_HANDLE: u16 = 0;
pub const UVERBS_ATTR_READ_COUNTERS_BUFF: u16 = 1;
pub const UVERBS_ATTR_READ_COUNTERS_FLAGS: u16 = 2;

// enum uverbs_methods_actions_counters_ops
pub const UVERBS_METHOD_COUNTERS_CREATE: u16 = 0;
pub const UVERBS_METHOD_COUNTERS_DESTROY: u16 = 1;
pub const UVERBS_METHOD_COUNTERS_READ: u16 = 2;

// enum uverbs_attrs_info_handles_id
pub const UVERBS_ATTR_INFO_OBJECT_ID: u16 = 0;
pub const UVERBS_ATTR_INFO_TOTAL_HANDLES: u16 = 1;
pub const UVERBS_ATTR_INFO_HANDLES_LIST: u16 = 2;

// enum uverbs_methods_pd
pub const UVERBS_METHOD_PD_DESTROY: u16 = 0;

// enum uverbs_attrs_pd_destroy_ids
pub const UVERBS_ATTR_DESTROY_PD_HANDLE: u16 = 0;

// enum uverbs_methods_mw
pub const UVERBS_METHOD_MW_DESTROY: u16 = 0;

// enum uverbs_attrs_mw_destroy_ids
pub const UVERBS_ATTR_DESTROY_MW_HANDLE: u16 = 0;

// enum uverbs_methods_xrcd
pub const UVERBS_METHOD_XRCD_DESTROY: u16 = 0;

// enum uverbs_attrs_xrcd_destroy_ids
pub const UVERBS_ATTR_DESTROY_XRCD_HANDLE: u16 = 0;

// enum uverbs_methods_ah
pub const UVERBS_METHOD_AH_DESTROY: u16 = 0;

// enum uverbs_attrs_ah_destroy_ids
pub const UVERBS_ATTR_DESTROY_AH_HANDLE: u16 = 0;

// enum uverbs_methods_rwq_ind_tbl
pub const UVERBS_METHOD_RWQ_IND_TBL_DESTROY: u16 = 0;

// enum uverbs_attrs_rwq_ind_tbl_destroy_ids
pub const UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE: u16 = 0;

// enum uverbs_methods_flow
pub const UVERBS_METHOD_FLOW_DESTROY: u16 = 0;

// enum uverbs_attrs_flow_destroy_ids
pub const UVERBS_ATTR_DESTROY_FLOW_HANDLE: u16 = 0;

// enum uverbs_method_async_event
pub const UVERBS_METHOD_ASYNC_EVENT_ALLOC: u16 = 0;

// enum uverbs_attrs_async_event_create
pub const UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE: u16 = 0;

// enum uverbs_attrs_query_gid_table_cmd_attr_ids
pub const UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE: u16 = 0;
pub const UVERBS_ATTR_QUERY_GID_TABLE_FLAGS: u16 = 1;
pub const UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES: u16 = 2;
pub const UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES: u16 = 3;

// enum uverbs_attrs_query_gid_entry_cmd_attr_ids
pub const UVERBS_ATTR_QUERY_GID_ENTRY_PORT: u16 = 0;
pub const UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX: u16 = 1;
pub const UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS: u16 = 2;
pub const UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY: u16 = 3;

// enum uverbs_methods_comp_cntr
pub const UVERBS_METHOD_COMP_CNTR_CREATE: u16 = 0;
pub const UVERBS_METHOD_COMP_CNTR_DESTROY: u16 = 1;
pub const UVERBS_METHOD_COMP_CNTR_MODIFY: u16 = 2;
pub const UVERBS_METHOD_COMP_CNTR_READ: u16 = 3;

// enum uverbs_attrs_create_comp_cntr_cmd_attr_ids
pub const UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE: u16 = 0;

// enum uverbs_attrs_destroy_comp_cntr_cmd_attr_ids
pub const UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE: u16 = 0;

// enum uverbs_attrs_modify_comp_cntr_cmd_attr_ids
pub const UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE: u16 = 0;
pub const UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY: u16 = 1;
pub const UVERBS_ATTR_MODIFY_COMP_CNTR_OP: u16 = 2;
pub const UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE: u16 = 3;

// enum uverbs_attrs_read_comp_cntr_cmd_attr_ids
pub const UVERBS_ATTR_READ_COMP_CNTR_HANDLE: u16 = 0;
pub const UVERBS_ATTR_READ_COMP_CNTR_ENTRY: u16 = 1;
pub const UVERBS_ATTR_READ_COMP_CNTR_RESP_VALUE: u16 = 2;
