//! `include/uapi/rdma/rdma_netlink.h`: the RDMA netlink family
//! (`NETLINK_RDMA`), used for device discovery (`RDMA_NLDEV_CMD_GET`,
//! `RDMA_NLDEV_CMD_GET_CHARDEV`).
//!
//! Synced from rdma-core `kernel-headers/rdma/rdma_netlink.h` at commit
//! `691953d8d502`. All enums are mirrored (not only the NLDEV ones discovery
//! needs). Messages are a `nlmsghdr` whose `nlmsg_type` is
//! [`RDMA_NL_GET_TYPE`]`(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_*)` followed directly
//! by `nlattr`s (no genetlink header); cast the `u32` constants to the
//! `u16` netlink fields.
//!
//! Attribute payload types worth knowing (kernel `nldev.c` policy; rdma-core
//! `util/rdma_nl.c`): `DEV_INDEX` u32, `DEV_NAME` string, `PORT_INDEX` u32,
//! `NODE_GUID` u64, `DEV_NODE_TYPE` u8, `CHARDEV_TYPE`/`CHARDEV_NAME` string,
//! `CHARDEV_ABI` u64, `CHARDEV` u64 (`huge_encode_dev`), and
//! `UVERBS_DRIVER_ID` **u32** (the header's comment says u64, but the kernel
//! puts and rdma-core reads a u32). `RDMA_NLDEV_ATTR_PAD` (0) pads u64
//! attributes and must be skipped.
#![allow(missing_docs)]
#![allow(non_snake_case)] // RDMA_NL_GET_* keep the kernel macro names

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// `NETLINK_RDMA` (`include/uapi/linux/netlink.h`): the netlink protocol
/// number for `socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA)`.
pub const NETLINK_RDMA: u32 = 20;

/// `RDMA_NL_GET_CLIENT(type)`: the client (`RDMA_NL_*`) bits of a message type.
pub const fn RDMA_NL_GET_CLIENT(ty: u32) -> u32 {
    (ty & (((1 << 6) - 1) << 10)) >> 10
}

/// `RDMA_NL_GET_OP(type)`: the operation bits of a message type.
pub const fn RDMA_NL_GET_OP(ty: u32) -> u32 {
    ty & ((1 << 10) - 1)
}

/// `RDMA_NL_GET_TYPE(client, op)`: builds `nlmsg_type`, e.g.
/// `RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET) == 0x1401`.
pub const fn RDMA_NL_GET_TYPE(client: u32, op: u32) -> u32 {
    (client << 10) + op
}
const _: () = assert!(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET) == 0x1401);
const _: () = assert!(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET_CHARDEV) == 0x140F);

/// `NLA_F_NESTED` (`include/uapi/linux/netlink.h`).
const NLA_F_NESTED: u32 = 1 << 15;
/// `NLA_F_NET_BYTEORDER` (`include/uapi/linux/netlink.h`).
const NLA_F_NET_BYTEORDER: u32 = 1 << 14;

/// `RDMA_NLA_TYPE_MASK`: strips the flag bits from an `nla_type`.
pub const RDMA_NLA_TYPE_MASK: u32 = !(NLA_F_NESTED | NLA_F_NET_BYTEORDER | RDMA_NLA_F_MANDATORY);

pub const IWPM_UABI_VERSION_MIN: u32 = 3;
pub const IWPM_UABI_VERSION: u32 = 4;
pub const IWPM_NLA_MAPINFO_SEND_MAX: u32 = 3;
pub const IWPM_NLA_REMOVE_MAPPING_MAX: u32 = 3;
pub const RDMA_NL_LS_F_ERR: u32 = 0x100;
pub const LS_DEVICE_NAME_MAX: usize = 64;
pub const RDMA_NLA_F_MANDATORY: u32 = 0x2000;

// anonymous enum
pub const RDMA_NL_IWCM: u32 = 2;
pub const RDMA_NL_RSVD: u32 = 3;
pub const RDMA_NL_LS: u32 = 4;
pub const RDMA_NL_NLDEV: u32 = 5;
pub const RDMA_NL_NUM_CLIENTS: u32 = 6;

// anonymous enum
pub const RDMA_NL_GROUP_IWPM: u32 = 2;
pub const RDMA_NL_GROUP_LS: u32 = 3;
pub const RDMA_NL_GROUP_NOTIFY: u32 = 4;
pub const RDMA_NL_NUM_GROUPS: u32 = 5;

// anonymous enum
pub const IWPM_FLAGS_NO_PORT_MAP: u32 = 1;

// anonymous enum
pub const RDMA_NL_IWPM_REG_PID: u32 = 0;
pub const RDMA_NL_IWPM_ADD_MAPPING: u32 = 1;
pub const RDMA_NL_IWPM_QUERY_MAPPING: u32 = 2;
pub const RDMA_NL_IWPM_REMOVE_MAPPING: u32 = 3;
pub const RDMA_NL_IWPM_REMOTE_INFO: u32 = 4;
pub const RDMA_NL_IWPM_HANDLE_ERR: u32 = 5;
pub const RDMA_NL_IWPM_MAPINFO: u32 = 6;
pub const RDMA_NL_IWPM_MAPINFO_NUM: u32 = 7;
pub const RDMA_NL_IWPM_HELLO: u32 = 8;
pub const RDMA_NL_IWPM_NUM_OPS: u32 = 9;

// anonymous enum
pub const IWPM_NLA_REG_PID_UNSPEC: u32 = 0;
pub const IWPM_NLA_REG_PID_SEQ: u32 = 1;
pub const IWPM_NLA_REG_IF_NAME: u32 = 2;
pub const IWPM_NLA_REG_IBDEV_NAME: u32 = 3;
pub const IWPM_NLA_REG_ULIB_NAME: u32 = 4;
pub const IWPM_NLA_REG_PID_MAX: u32 = 5;

// anonymous enum
pub const IWPM_NLA_RREG_PID_UNSPEC: u32 = 0;
pub const IWPM_NLA_RREG_PID_SEQ: u32 = 1;
pub const IWPM_NLA_RREG_IBDEV_NAME: u32 = 2;
pub const IWPM_NLA_RREG_ULIB_NAME: u32 = 3;
pub const IWPM_NLA_RREG_ULIB_VER: u32 = 4;
pub const IWPM_NLA_RREG_PID_ERR: u32 = 5;
pub const IWPM_NLA_RREG_PID_MAX: u32 = 6;

// anonymous enum
pub const IWPM_NLA_MANAGE_MAPPING_UNSPEC: u32 = 0;
pub const IWPM_NLA_MANAGE_MAPPING_SEQ: u32 = 1;
pub const IWPM_NLA_MANAGE_ADDR: u32 = 2;
pub const IWPM_NLA_MANAGE_FLAGS: u32 = 3;
pub const IWPM_NLA_MANAGE_MAPPING_MAX: u32 = 4;

// anonymous enum
pub const IWPM_NLA_RMANAGE_MAPPING_UNSPEC: u32 = 0;
pub const IWPM_NLA_RMANAGE_MAPPING_SEQ: u32 = 1;
pub const IWPM_NLA_RMANAGE_ADDR: u32 = 2;
pub const IWPM_NLA_RMANAGE_MAPPED_LOC_ADDR: u32 = 3;
pub const IWPM_NLA_MANAGE_MAPPED_LOC_ADDR: u32 = 3;
pub const IWPM_NLA_RMANAGE_MAPPING_ERR: u32 = 4;
pub const IWPM_NLA_RMANAGE_MAPPING_MAX: u32 = 5;

// anonymous enum
pub const IWPM_NLA_QUERY_MAPPING_UNSPEC: u32 = 0;
pub const IWPM_NLA_QUERY_MAPPING_SEQ: u32 = 1;
pub const IWPM_NLA_QUERY_LOCAL_ADDR: u32 = 2;
pub const IWPM_NLA_QUERY_REMOTE_ADDR: u32 = 3;
pub const IWPM_NLA_QUERY_FLAGS: u32 = 4;
pub const IWPM_NLA_QUERY_MAPPING_MAX: u32 = 5;

// anonymous enum
pub const IWPM_NLA_RQUERY_MAPPING_UNSPEC: u32 = 0;
pub const IWPM_NLA_RQUERY_MAPPING_SEQ: u32 = 1;
pub const IWPM_NLA_RQUERY_LOCAL_ADDR: u32 = 2;
pub const IWPM_NLA_RQUERY_REMOTE_ADDR: u32 = 3;
pub const IWPM_NLA_RQUERY_MAPPED_LOC_ADDR: u32 = 4;
pub const IWPM_NLA_RQUERY_MAPPED_REM_ADDR: u32 = 5;
pub const IWPM_NLA_RQUERY_MAPPING_ERR: u32 = 6;
pub const IWPM_NLA_RQUERY_MAPPING_MAX: u32 = 7;

// anonymous enum
pub const IWPM_NLA_MAPINFO_REQ_UNSPEC: u32 = 0;
pub const IWPM_NLA_MAPINFO_ULIB_NAME: u32 = 1;
pub const IWPM_NLA_MAPINFO_ULIB_VER: u32 = 2;
pub const IWPM_NLA_MAPINFO_REQ_MAX: u32 = 3;

// anonymous enum
pub const IWPM_NLA_MAPINFO_UNSPEC: u32 = 0;
pub const IWPM_NLA_MAPINFO_LOCAL_ADDR: u32 = 1;
pub const IWPM_NLA_MAPINFO_MAPPED_ADDR: u32 = 2;
pub const IWPM_NLA_MAPINFO_FLAGS: u32 = 3;
pub const IWPM_NLA_MAPINFO_MAX: u32 = 4;

// anonymous enum
pub const IWPM_NLA_MAPINFO_NUM_UNSPEC: u32 = 0;
pub const IWPM_NLA_MAPINFO_SEQ: u32 = 1;
pub const IWPM_NLA_MAPINFO_SEND_NUM: u32 = 2;
pub const IWPM_NLA_MAPINFO_ACK_NUM: u32 = 3;
pub const IWPM_NLA_MAPINFO_NUM_MAX: u32 = 4;

// anonymous enum
pub const IWPM_NLA_ERR_UNSPEC: u32 = 0;
pub const IWPM_NLA_ERR_SEQ: u32 = 1;
pub const IWPM_NLA_ERR_CODE: u32 = 2;
pub const IWPM_NLA_ERR_MAX: u32 = 3;

// anonymous enum
pub const IWPM_NLA_HELLO_UNSPEC: u32 = 0;
pub const IWPM_NLA_HELLO_ABI_VERSION: u32 = 1;
pub const IWPM_NLA_HELLO_MAX: u32 = 2;

// anonymous enum
pub const RDMA_NODE_IB_CA: u32 = 1;
pub const RDMA_NODE_IB_SWITCH: u32 = 2;
pub const RDMA_NODE_IB_ROUTER: u32 = 3;
pub const RDMA_NODE_RNIC: u32 = 4;
pub const RDMA_NODE_USNIC: u32 = 5;
pub const RDMA_NODE_USNIC_UDP: u32 = 6;
pub const RDMA_NODE_UNSPECIFIED: u32 = 7;

// anonymous enum
pub const RDMA_NL_LS_OP_RESOLVE: u32 = 0;
pub const RDMA_NL_LS_OP_SET_TIMEOUT: u32 = 1;
pub const RDMA_NL_LS_OP_IP_RESOLVE: u32 = 2;
pub const RDMA_NL_LS_NUM_OPS: u32 = 3;

// anonymous enum
pub const LS_RESOLVE_PATH_USE_ALL: u32 = 0;
pub const LS_RESOLVE_PATH_USE_UNIDIRECTIONAL: u32 = 1;
pub const LS_RESOLVE_PATH_USE_GMP: u32 = 2;
pub const LS_RESOLVE_PATH_USE_MAX: u32 = 3;

// anonymous enum
pub const LS_NLA_TYPE_UNSPEC: u32 = 0;
pub const LS_NLA_TYPE_PATH_RECORD: u32 = 1;
pub const LS_NLA_TYPE_TIMEOUT: u32 = 2;
pub const LS_NLA_TYPE_SERVICE_ID: u32 = 3;
pub const LS_NLA_TYPE_DGID: u32 = 4;
pub const LS_NLA_TYPE_SGID: u32 = 5;
pub const LS_NLA_TYPE_TCLASS: u32 = 6;
pub const LS_NLA_TYPE_PKEY: u32 = 7;
pub const LS_NLA_TYPE_QOS_CLASS: u32 = 8;
pub const LS_NLA_TYPE_IPV4: u32 = 9;
pub const LS_NLA_TYPE_IPV6: u32 = 10;
pub const LS_NLA_TYPE_MAX: u32 = 11;

// enum rdma_nldev_command
pub const RDMA_NLDEV_CMD_UNSPEC: u32 = 0;
pub const RDMA_NLDEV_CMD_GET: u32 = 1;
pub const RDMA_NLDEV_CMD_SET: u32 = 2;
pub const RDMA_NLDEV_CMD_NEWLINK: u32 = 3;
pub const RDMA_NLDEV_CMD_DELLINK: u32 = 4;
pub const RDMA_NLDEV_CMD_PORT_GET: u32 = 5;
pub const RDMA_NLDEV_CMD_SYS_GET: u32 = 6;
pub const RDMA_NLDEV_CMD_SYS_SET: u32 = 7;
pub const RDMA_NLDEV_CMD_RES_GET: u32 = 9;
pub const RDMA_NLDEV_CMD_RES_QP_GET: u32 = 10;
pub const RDMA_NLDEV_CMD_RES_CM_ID_GET: u32 = 11;
pub const RDMA_NLDEV_CMD_RES_CQ_GET: u32 = 12;
pub const RDMA_NLDEV_CMD_RES_MR_GET: u32 = 13;
pub const RDMA_NLDEV_CMD_RES_PD_GET: u32 = 14;
pub const RDMA_NLDEV_CMD_GET_CHARDEV: u32 = 15;
pub const RDMA_NLDEV_CMD_STAT_SET: u32 = 16;
pub const RDMA_NLDEV_CMD_STAT_GET: u32 = 17;
pub const RDMA_NLDEV_CMD_STAT_DEL: u32 = 18;
pub const RDMA_NLDEV_CMD_RES_QP_GET_RAW: u32 = 19;
pub const RDMA_NLDEV_CMD_RES_CQ_GET_RAW: u32 = 20;
pub const RDMA_NLDEV_CMD_RES_MR_GET_RAW: u32 = 21;
pub const RDMA_NLDEV_CMD_RES_CTX_GET: u32 = 22;
pub const RDMA_NLDEV_CMD_RES_SRQ_GET: u32 = 23;
pub const RDMA_NLDEV_CMD_STAT_GET_STATUS: u32 = 24;
pub const RDMA_NLDEV_CMD_RES_SRQ_GET_RAW: u32 = 25;
pub const RDMA_NLDEV_CMD_NEWDEV: u32 = 26;
pub const RDMA_NLDEV_CMD_DELDEV: u32 = 27;
pub const RDMA_NLDEV_CMD_MONITOR: u32 = 28;
pub const RDMA_NLDEV_CMD_FRMR_POOLS_GET: u32 = 29;
pub const RDMA_NLDEV_CMD_FRMR_POOLS_SET: u32 = 30;
pub const RDMA_NLDEV_NUM_OPS: u32 = 31;

// enum rdma_nldev_print_type
pub const RDMA_NLDEV_PRINT_TYPE_UNSPEC: u32 = 0;
pub const RDMA_NLDEV_PRINT_TYPE_HEX: u32 = 1;

// enum rdma_nldev_attr
pub const RDMA_NLDEV_ATTR_UNSPEC: u32 = 0;
pub const RDMA_NLDEV_ATTR_PAD: u32 = 0;
pub const RDMA_NLDEV_ATTR_DEV_INDEX: u32 = 1;
pub const RDMA_NLDEV_ATTR_DEV_NAME: u32 = 2;
pub const RDMA_NLDEV_ATTR_PORT_INDEX: u32 = 3;
pub const RDMA_NLDEV_ATTR_CAP_FLAGS: u32 = 4;
pub const RDMA_NLDEV_ATTR_FW_VERSION: u32 = 5;
pub const RDMA_NLDEV_ATTR_NODE_GUID: u32 = 6;
pub const RDMA_NLDEV_ATTR_SYS_IMAGE_GUID: u32 = 7;
pub const RDMA_NLDEV_ATTR_SUBNET_PREFIX: u32 = 8;
pub const RDMA_NLDEV_ATTR_LID: u32 = 9;
pub const RDMA_NLDEV_ATTR_SM_LID: u32 = 10;
pub const RDMA_NLDEV_ATTR_LMC: u32 = 11;
pub const RDMA_NLDEV_ATTR_PORT_STATE: u32 = 12;
pub const RDMA_NLDEV_ATTR_PORT_PHYS_STATE: u32 = 13;
pub const RDMA_NLDEV_ATTR_DEV_NODE_TYPE: u32 = 14;
pub const RDMA_NLDEV_ATTR_RES_SUMMARY: u32 = 15;
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY: u32 = 16;
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME: u32 = 17;
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR: u32 = 18;
pub const RDMA_NLDEV_ATTR_RES_QP: u32 = 19;
pub const RDMA_NLDEV_ATTR_RES_QP_ENTRY: u32 = 20;
pub const RDMA_NLDEV_ATTR_RES_LQPN: u32 = 21;
pub const RDMA_NLDEV_ATTR_RES_RQPN: u32 = 22;
pub const RDMA_NLDEV_ATTR_RES_RQ_PSN: u32 = 23;
pub const RDMA_NLDEV_ATTR_RES_SQ_PSN: u32 = 24;
pub const RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE: u32 = 25;
pub const RDMA_NLDEV_ATTR_RES_TYPE: u32 = 26;
pub const RDMA_NLDEV_ATTR_RES_STATE: u32 = 27;
pub const RDMA_NLDEV_ATTR_RES_PID: u32 = 28;
pub const RDMA_NLDEV_ATTR_RES_KERN_NAME: u32 = 29;
pub const RDMA_NLDEV_ATTR_RES_CM_ID: u32 = 30;
pub const RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY: u32 = 31;
pub const RDMA_NLDEV_ATTR_RES_PS: u32 = 32;
pub const RDMA_NLDEV_ATTR_RES_SRC_ADDR: u32 = 33;
pub const RDMA_NLDEV_ATTR_RES_DST_ADDR: u32 = 34;
pub const RDMA_NLDEV_ATTR_RES_CQ: u32 = 35;
pub const RDMA_NLDEV_ATTR_RES_CQ_ENTRY: u32 = 36;
pub const RDMA_NLDEV_ATTR_RES_CQE: u32 = 37;
pub const RDMA_NLDEV_ATTR_RES_USECNT: u32 = 38;
pub const RDMA_NLDEV_ATTR_RES_POLL_CTX: u32 = 39;
pub const RDMA_NLDEV_ATTR_RES_MR: u32 = 40;
pub const RDMA_NLDEV_ATTR_RES_MR_ENTRY: u32 = 41;
pub const RDMA_NLDEV_ATTR_RES_RKEY: u32 = 42;
pub const RDMA_NLDEV_ATTR_RES_LKEY: u32 = 43;
pub const RDMA_NLDEV_ATTR_RES_IOVA: u32 = 44;
pub const RDMA_NLDEV_ATTR_RES_MRLEN: u32 = 45;
pub const RDMA_NLDEV_ATTR_RES_PD: u32 = 46;
pub const RDMA_NLDEV_ATTR_RES_PD_ENTRY: u32 = 47;
pub const RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY: u32 = 48;
pub const RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY: u32 = 49;
pub const RDMA_NLDEV_ATTR_NDEV_INDEX: u32 = 50;
pub const RDMA_NLDEV_ATTR_NDEV_NAME: u32 = 51;
pub const RDMA_NLDEV_ATTR_DRIVER: u32 = 52;
pub const RDMA_NLDEV_ATTR_DRIVER_ENTRY: u32 = 53;
pub const RDMA_NLDEV_ATTR_DRIVER_STRING: u32 = 54;
pub const RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE: u32 = 55;
pub const RDMA_NLDEV_ATTR_DRIVER_S32: u32 = 56;
pub const RDMA_NLDEV_ATTR_DRIVER_U32: u32 = 57;
pub const RDMA_NLDEV_ATTR_DRIVER_S64: u32 = 58;
pub const RDMA_NLDEV_ATTR_DRIVER_U64: u32 = 59;
pub const RDMA_NLDEV_ATTR_RES_PDN: u32 = 60;
pub const RDMA_NLDEV_ATTR_RES_CQN: u32 = 61;
pub const RDMA_NLDEV_ATTR_RES_MRN: u32 = 62;
pub const RDMA_NLDEV_ATTR_RES_CM_IDN: u32 = 63;
pub const RDMA_NLDEV_ATTR_RES_CTXN: u32 = 64;
pub const RDMA_NLDEV_ATTR_LINK_TYPE: u32 = 65;
pub const RDMA_NLDEV_SYS_ATTR_NETNS_MODE: u32 = 66;
pub const RDMA_NLDEV_ATTR_DEV_PROTOCOL: u32 = 67;
pub const RDMA_NLDEV_NET_NS_FD: u32 = 68;
pub const RDMA_NLDEV_ATTR_CHARDEV_TYPE: u32 = 69;
pub const RDMA_NLDEV_ATTR_CHARDEV_NAME: u32 = 70;
pub const RDMA_NLDEV_ATTR_CHARDEV_ABI: u32 = 71;
pub const RDMA_NLDEV_ATTR_CHARDEV: u32 = 72;
/// `u32` payload (`RDMA_DRIVER_*`), despite the header's `/* u64 */` comment.
pub const RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID: u32 = 73;
pub const RDMA_NLDEV_ATTR_STAT_MODE: u32 = 74;
pub const RDMA_NLDEV_ATTR_STAT_RES: u32 = 75;
pub const RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK: u32 = 76;
pub const RDMA_NLDEV_ATTR_STAT_COUNTER: u32 = 77;
pub const RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY: u32 = 78;
pub const RDMA_NLDEV_ATTR_STAT_COUNTER_ID: u32 = 79;
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTERS: u32 = 80;
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY: u32 = 81;
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME: u32 = 82;
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE: u32 = 83;
pub const RDMA_NLDEV_ATTR_DEV_DIM: u32 = 84;
pub const RDMA_NLDEV_ATTR_RES_RAW: u32 = 85;
pub const RDMA_NLDEV_ATTR_RES_CTX: u32 = 86;
pub const RDMA_NLDEV_ATTR_RES_CTX_ENTRY: u32 = 87;
pub const RDMA_NLDEV_ATTR_RES_SRQ: u32 = 88;
pub const RDMA_NLDEV_ATTR_RES_SRQ_ENTRY: u32 = 89;
pub const RDMA_NLDEV_ATTR_RES_SRQN: u32 = 90;
pub const RDMA_NLDEV_ATTR_MIN_RANGE: u32 = 91;
pub const RDMA_NLDEV_ATTR_MAX_RANGE: u32 = 92;
pub const RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK: u32 = 93;
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX: u32 = 94;
pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC: u32 = 95;
pub const RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE: u32 = 96;
pub const RDMA_NLDEV_ATTR_DRIVER_DETAILS: u32 = 97;
pub const RDMA_NLDEV_ATTR_RES_SUBTYPE: u32 = 98;
pub const RDMA_NLDEV_ATTR_DEV_TYPE: u32 = 99;
pub const RDMA_NLDEV_ATTR_PARENT_NAME: u32 = 100;
pub const RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE: u32 = 101;
pub const RDMA_NLDEV_ATTR_EVENT_TYPE: u32 = 102;
pub const RDMA_NLDEV_SYS_ATTR_MONITOR_MODE: u32 = 103;
pub const RDMA_NLDEV_ATTR_STAT_OPCOUNTER_ENABLED: u32 = 104;
pub const RDMA_NLDEV_ATTR_FRMR_POOLS: u32 = 105;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_ENTRY: u32 = 106;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_KEY: u32 = 107;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_KEY_ATS: u32 = 108;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_KEY_ACCESS_FLAGS: u32 = 109;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_KEY_VENDOR_KEY: u32 = 110;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_KEY_NUM_DMA_BLOCKS: u32 = 111;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_QUEUE_HANDLES: u32 = 112;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_MAX_IN_USE: u32 = 113;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_IN_USE: u32 = 114;
pub const RDMA_NLDEV_ATTR_FRMR_POOLS_AGING_PERIOD: u32 = 115;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_PINNED_HANDLES: u32 = 116;
pub const RDMA_NLDEV_ATTR_FRMR_POOL_KEY_KERNEL_VENDOR_KEY: u32 = 117;
pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_MAX: u32 = 118;
pub const RDMA_NLDEV_ATTR_MAX: u32 = 119;

// enum rdma_nl_counter_mode
pub const RDMA_COUNTER_MODE_NONE: u32 = 0;
pub const RDMA_COUNTER_MODE_AUTO: u32 = 1;
pub const RDMA_COUNTER_MODE_MANUAL: u32 = 2;
pub const RDMA_COUNTER_MODE_MAX: u32 = 3;

// enum rdma_nl_counter_mask
pub const RDMA_COUNTER_MASK_QP_TYPE: u32 = 1;
pub const RDMA_COUNTER_MASK_PID: u32 = 2;

// enum rdma_nl_dev_type
pub const RDMA_DEVICE_TYPE_SMI: u32 = 1;

// enum rdma_nl_name_assign_type
pub const RDMA_NAME_ASSIGN_TYPE_UNKNOWN: u32 = 0;
pub const RDMA_NAME_ASSIGN_TYPE_USER: u32 = 1;

// enum rdma_nl_notify_event_type
pub const RDMA_REGISTER_EVENT: u32 = 0;
pub const RDMA_UNREGISTER_EVENT: u32 = 1;
pub const RDMA_NETDEV_ATTACH_EVENT: u32 = 2;
pub const RDMA_NETDEV_DETACH_EVENT: u32 = 3;
pub const RDMA_RENAME_EVENT: u32 = 4;
pub const RDMA_NETDEV_RENAME_EVENT: u32 = 5;

/// `struct rdma_ls_resolve_header`.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ls_resolve_header {
    pub device_name: [u8; LS_DEVICE_NAME_MAX],
    pub port_num: u8,
    pub path_use: u8,
}
impl Default for rdma_ls_resolve_header {
    fn default() -> Self {
        FromZeros::new_zeroed()
    }
}
assert_layout!(rdma_ls_resolve_header, size = 66, align = 1, device_name = 0, port_num = 64, path_use = 65);

/// `struct rdma_ls_ip_resolve_header`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ls_ip_resolve_header {
    pub ifindex: u32,
}
assert_layout!(rdma_ls_ip_resolve_header, size = 4, align = 4, ifindex = 0);

/// `struct rdma_nla_ls_gid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_nla_ls_gid {
    pub gid: [u8; 16],
}
assert_layout!(rdma_nla_ls_gid, size = 16, align = 1, gid = 0);
