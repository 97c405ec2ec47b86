//! `include/uapi/rdma/rdma_user_cm.h`: the RDMA connection manager's
//! userspace ABI (`rdma_ucm.ko`, the `/dev/infiniband/rdma_cm` misc
//! device), ABI version 4.
//!
//! Every command is one `write()` of [`rdma_ucm_cmd_hdr`] followed by the
//! command's body; a command with a response carries a `response` pointer
//! in its body, and the header's `out` is the size of that buffer
//! (`shared/reference/rdmacm.md` §A.2). The header is byte-identical in
//! kernels 6.1 and 6.12; rdma-core's copy at `691953d8d502` adds commands
//! 23 and 24 (`RESOLVE_IB_SERVICE`, `WRITE_CM_EVENT`) that neither kernel
//! has, which are not mirrored.
//!
//! Also mirrored here, because this header uses them:
//! `struct __kernel_sockaddr_storage` (`linux/socket.h`), `struct
//! sockaddr_ib` (`rdma/ib.h`), `struct ib_user_path_rec` and `struct
//! ib_path_rec_data` (`rdma/ib_user_sa.h`). `sockaddr_in`/`sockaddr_in6`
//! are those of [`crate::rdma_user_rxe`], re-exported.
//!
//! Sizes and offsets were checked against gcc's on x86_64 (rdmacm.md §A.3).
#![allow(missing_docs)]

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::ib_user_verbs::ib_uverbs_ah_attr;
pub use crate::rdma_user_rxe::{sockaddr_in, sockaddr_in6, AF_INET, AF_INET6};

/// `RDMA_USER_CM_ABI_VERSION`: what `/sys/class/misc/rdma_cm/abi_version`
/// reads. librdmacm accepts 3 and 4; rverbs speaks 4 only.
pub const RDMA_USER_CM_ABI_VERSION: u32 = 4;

/// `RDMA_MAX_PRIVATE_DATA`: the size of every private-data buffer.
pub const RDMA_MAX_PRIVATE_DATA: usize = 256;

/// `AF_IB` (`linux/socket.h`): the address family of [`sockaddr_ib`].
pub const AF_IB: u16 = 27;

// enum: command numbers (`rdma_ucm_cmd_hdr.cmd`)
pub const RDMA_USER_CM_CMD_CREATE_ID: u32 = 0;
pub const RDMA_USER_CM_CMD_DESTROY_ID: u32 = 1;
pub const RDMA_USER_CM_CMD_BIND_IP: u32 = 2;
pub const RDMA_USER_CM_CMD_RESOLVE_IP: u32 = 3;
pub const RDMA_USER_CM_CMD_RESOLVE_ROUTE: u32 = 4;
pub const RDMA_USER_CM_CMD_QUERY_ROUTE: u32 = 5;
pub const RDMA_USER_CM_CMD_CONNECT: u32 = 6;
pub const RDMA_USER_CM_CMD_LISTEN: u32 = 7;
pub const RDMA_USER_CM_CMD_ACCEPT: u32 = 8;
pub const RDMA_USER_CM_CMD_REJECT: u32 = 9;
pub const RDMA_USER_CM_CMD_DISCONNECT: u32 = 10;
pub const RDMA_USER_CM_CMD_INIT_QP_ATTR: u32 = 11;
pub const RDMA_USER_CM_CMD_GET_EVENT: u32 = 12;
pub const RDMA_USER_CM_CMD_GET_OPTION: u32 = 13;
pub const RDMA_USER_CM_CMD_SET_OPTION: u32 = 14;
pub const RDMA_USER_CM_CMD_NOTIFY: u32 = 15;
pub const RDMA_USER_CM_CMD_JOIN_IP_MCAST: u32 = 16;
pub const RDMA_USER_CM_CMD_LEAVE_MCAST: u32 = 17;
pub const RDMA_USER_CM_CMD_MIGRATE_ID: u32 = 18;
pub const RDMA_USER_CM_CMD_QUERY: u32 = 19;
pub const RDMA_USER_CM_CMD_BIND: u32 = 20;
pub const RDMA_USER_CM_CMD_RESOLVE_ADDR: u32 = 21;
pub const RDMA_USER_CM_CMD_JOIN_MCAST: u32 = 22;

// enum rdma_ucm_port_space (IBTA Annex A11, service ID bytes 4 and 5)
pub const RDMA_PS_IPOIB: u32 = 0x0002;
pub const RDMA_PS_IB: u32 = 0x013F;
pub const RDMA_PS_TCP: u32 = 0x0106;
pub const RDMA_PS_UDP: u32 = 0x0111;

// enum rdma_ucm_reject_reason
pub const RDMA_USER_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED: u32 = 35;

// enum: rdma_ucm_query.option
pub const RDMA_USER_CM_QUERY_ADDR: u32 = 0;
pub const RDMA_USER_CM_QUERY_PATH: u32 = 1;
pub const RDMA_USER_CM_QUERY_GID: u32 = 2;

// enum: multicast join flags
pub const RDMA_MC_JOIN_FLAG_FULLMEMBER: u32 = 0;
pub const RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: u32 = 1;
pub const RDMA_MC_JOIN_FLAG_RESERVED: u32 = 2;

// enum: option levels (rdma_ucm_set_option.level)
pub const RDMA_OPTION_ID: u32 = 0;
pub const RDMA_OPTION_IB: u32 = 1;

// enum: options of level RDMA_OPTION_ID
pub const RDMA_OPTION_ID_TOS: u32 = 0;
pub const RDMA_OPTION_ID_REUSEADDR: u32 = 1;
pub const RDMA_OPTION_ID_AFONLY: u32 = 2;
pub const RDMA_OPTION_ID_ACK_TIMEOUT: u32 = 3;

// enum: options of level RDMA_OPTION_IB
pub const RDMA_OPTION_IB_PATH: u32 = 1;

// enum rdma_cm_event_type (`include/rdma/rdma_cm.h`, not a uapi header,
// but the numbers are what `rdma_ucm_event_resp.event` carries; 6.12 stops
// at 15)
pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
pub const RDMA_CM_EVENT_ADDR_ERROR: u32 = 1;
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
pub const RDMA_CM_EVENT_ROUTE_ERROR: u32 = 3;
pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
pub const RDMA_CM_EVENT_CONNECT_RESPONSE: u32 = 5;
pub const RDMA_CM_EVENT_CONNECT_ERROR: u32 = 6;
pub const RDMA_CM_EVENT_UNREACHABLE: u32 = 7;
pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;
pub const RDMA_CM_EVENT_DEVICE_REMOVAL: u32 = 11;
pub const RDMA_CM_EVENT_MULTICAST_JOIN: u32 = 12;
pub const RDMA_CM_EVENT_MULTICAST_ERROR: u32 = 13;
pub const RDMA_CM_EVENT_ADDR_CHANGE: u32 = 14;
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: u32 = 15;

/// `struct rdma_ucm_cmd_hdr`: in front of every command.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_cmd_hdr {
    /// `RDMA_USER_CM_CMD_*`.
    pub cmd: u32,
    /// Size of the body that follows (the kernel copies its own size).
    pub r#in: u16,
    /// Size of the buffer the body's `response` points to.
    pub out: u16,
}
assert_layout!(rdma_ucm_cmd_hdr, size = 8, align = 4, cmd = 0, r#in = 4, out = 6);

/// `struct __kernel_sockaddr_storage` (`linux/socket.h`): 128 bytes,
/// aligned like a pointer.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct __kernel_sockaddr_storage {
    pub ss_family: u16,
    pub __data: [u8; 126],
}
assert_layout!(__kernel_sockaddr_storage, size = 128, align = 8, ss_family = 0, __data = 2);

impl Default for __kernel_sockaddr_storage {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// `struct ib_addr` (`rdma/ib.h`): a GID, 8-aligned (its C union has
/// `__be64` members); raw bytes here.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_addr {
    /// The GID's bytes in network order.
    pub sib_raw: [u8; 16],
}
assert_layout!(ib_addr, size = 16, align = 8, sib_raw = 0);

/// `struct sockaddr_ib` (`rdma/ib.h`, 48 bytes): what QUERY(GID) returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct sockaddr_ib {
    /// `AF_IB`.
    pub sib_family: u16,
    /// `__be16`: raw wire bytes.
    pub sib_pkey: u16,
    /// `__be32`: raw wire bytes.
    pub sib_flowinfo: u32,
    pub sib_addr: ib_addr,
    /// `__be64` service id: raw wire bytes.
    pub sib_sid: u64,
    /// `__be64`: raw wire bytes.
    pub sib_sid_mask: u64,
    pub sib_scope_id: u64,
}
assert_layout!(
    sockaddr_ib,
    size = 48,
    align = 8,
    sib_family = 0,
    sib_pkey = 2,
    sib_flowinfo = 4,
    sib_addr = 8,
    sib_sid = 24,
    sib_sid_mask = 32,
    sib_scope_id = 40
);

/// `struct ib_path_rec_data` (`rdma/ib_user_sa.h`): one path record of a
/// QUERY(PATH) response, in wire (SA MAD) format.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_path_rec_data {
    /// `IB_PATH_*` flags.
    pub flags: u32,
    pub reserved: u32,
    /// The 64-byte record, big-endian as on the wire.
    pub path_rec: [u32; 16],
}
assert_layout!(ib_path_rec_data, size = 72, align = 4, flags = 0, reserved = 4, path_rec = 8);

// anonymous enum: ib_path_rec_data.flags
pub const IB_PATH_GMP: u32 = 1;
pub const IB_PATH_PRIMARY: u32 = 1 << 1;
pub const IB_PATH_ALTERNATE: u32 = 1 << 2;
pub const IB_PATH_OUTBOUND: u32 = 1 << 3;
pub const IB_PATH_INBOUND: u32 = 1 << 4;
pub const IB_PATH_INBOUND_REVERSE: u32 = 1 << 5;
pub const IB_PATH_BIDIRECTIONAL: u32 = IB_PATH_OUTBOUND | IB_PATH_INBOUND_REVERSE;

/// `struct ib_user_path_rec` (`rdma/ib_user_sa.h`, 64 bytes): a path in the
/// legacy QUERY_ROUTE response.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ib_user_path_rec {
    pub dgid: [u8; 16],
    pub sgid: [u8; 16],
    /// `__be16`: raw wire bytes.
    pub dlid: u16,
    /// `__be16`: raw wire bytes.
    pub slid: u16,
    pub raw_traffic: u32,
    /// `__be32`: raw wire bytes.
    pub flow_label: u32,
    pub reversible: u32,
    pub mtu: u32,
    /// `__be16`: raw wire bytes.
    pub pkey: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub numb_path: u8,
    pub sl: u8,
    pub mtu_selector: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}
assert_layout!(
    ib_user_path_rec,
    size = 64,
    align = 4,
    dgid = 0,
    sgid = 16,
    dlid = 32,
    slid = 34,
    raw_traffic = 36,
    flow_label = 40,
    reversible = 44,
    mtu = 48,
    pkey = 52,
    hop_limit = 54,
    traffic_class = 55,
    numb_path = 56,
    sl = 57,
    mtu_selector = 58,
    rate_selector = 59,
    rate = 60,
    packet_life_time_selector = 61,
    packet_life_time = 62,
    preference = 63
);

/// `struct rdma_ucm_create_id` (command 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_create_id {
    /// Echoed in every event of the id (`rdma_ucm_event_resp.uid`).
    pub uid: u64,
    /// Pointer to a [`rdma_ucm_create_id_resp`].
    pub response: u64,
    /// `RDMA_PS_*`.
    pub ps: u16,
    /// `IB_UVERBS_QPT_*`; read only for `RDMA_PS_IB`.
    pub qp_type: u8,
    pub reserved: [u8; 5],
}
assert_layout!(rdma_ucm_create_id, size = 24, align = 8, uid = 0, response = 8, ps = 16, qp_type = 18, reserved = 19);

/// `struct rdma_ucm_create_id_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_create_id_resp {
    /// The kernel's id, named in every later command.
    pub id: u32,
}
assert_layout!(rdma_ucm_create_id_resp, size = 4, align = 4, id = 0);

/// `struct rdma_ucm_destroy_id` (command 1; also LEAVE_MCAST's body).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_destroy_id {
    /// Pointer to a [`rdma_ucm_destroy_id_resp`].
    pub response: u64,
    pub id: u32,
    pub reserved: u32,
}
assert_layout!(rdma_ucm_destroy_id, size = 16, align = 8, response = 0, id = 8, reserved = 12);

/// `struct rdma_ucm_destroy_id_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_destroy_id_resp {
    /// How many events of the id were read by GET_EVENT.
    pub events_reported: u32,
}
assert_layout!(rdma_ucm_destroy_id_resp, size = 4, align = 4, events_reported = 0);

/// `struct rdma_ucm_bind_ip` (legacy command 2).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_bind_ip {
    pub response: u64,
    pub addr: sockaddr_in6,
    pub id: u32,
}
assert_layout!(rdma_ucm_bind_ip, size = 40, align = 8, response = 0, addr = 8, id = 36);

/// `struct rdma_ucm_bind` (command 20).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_bind {
    pub id: u32,
    /// The family's size: 16 (`AF_INET`), 28 (`AF_INET6`), 48 (`AF_IB`).
    pub addr_size: u16,
    pub reserved: u16,
    pub addr: __kernel_sockaddr_storage,
}
assert_layout!(rdma_ucm_bind, size = 136, align = 8, id = 0, addr_size = 4, reserved = 6, addr = 8);

/// `struct rdma_ucm_resolve_ip` (legacy command 3).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_resolve_ip {
    pub src_addr: sockaddr_in6,
    pub dst_addr: sockaddr_in6,
    pub id: u32,
    pub timeout_ms: u32,
}
assert_layout!(rdma_ucm_resolve_ip, size = 64, align = 4, src_addr = 0, dst_addr = 28, id = 56, timeout_ms = 60);

/// `struct rdma_ucm_resolve_addr` (command 21).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_resolve_addr {
    pub id: u32,
    pub timeout_ms: u32,
    /// 0: no source address.
    pub src_size: u16,
    pub dst_size: u16,
    pub reserved: u32,
    pub src_addr: __kernel_sockaddr_storage,
    pub dst_addr: __kernel_sockaddr_storage,
}
assert_layout!(
    rdma_ucm_resolve_addr,
    size = 272,
    align = 8,
    id = 0,
    timeout_ms = 4,
    src_size = 8,
    dst_size = 10,
    reserved = 12,
    src_addr = 16,
    dst_addr = 144
);

/// `struct rdma_ucm_resolve_route` (command 4).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_resolve_route {
    pub id: u32,
    pub timeout_ms: u32,
}
assert_layout!(rdma_ucm_resolve_route, size = 8, align = 4, id = 0, timeout_ms = 4);

/// `struct rdma_ucm_query` (command 19; also QUERY_ROUTE's body).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_query {
    pub response: u64,
    pub id: u32,
    /// `RDMA_USER_CM_QUERY_*`.
    pub option: u32,
}
assert_layout!(rdma_ucm_query, size = 16, align = 8, response = 0, id = 8, option = 12);

/// `struct rdma_ucm_query_route_resp` (legacy QUERY_ROUTE's answer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_query_route_resp {
    /// `__be64`: raw wire bytes.
    pub node_guid: u64,
    pub ib_route: [ib_user_path_rec; 2],
    pub src_addr: sockaddr_in6,
    pub dst_addr: sockaddr_in6,
    pub num_paths: u32,
    pub port_num: u8,
    pub reserved: [u8; 3],
    pub ibdev_index: u32,
    pub reserved1: u32,
}
assert_layout!(
    rdma_ucm_query_route_resp,
    size = 208,
    align = 8,
    node_guid = 0,
    ib_route = 8,
    src_addr = 136,
    dst_addr = 164,
    num_paths = 192,
    port_num = 196,
    reserved = 197,
    ibdev_index = 200,
    reserved1 = 204
);

/// `struct rdma_ucm_query_addr_resp`: QUERY(ADDR) and QUERY(GID).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_query_addr_resp {
    /// `__be64`: raw wire bytes (the bytes sysfs' `node_guid` prints).
    pub node_guid: u64,
    pub port_num: u8,
    pub reserved: u8,
    /// Declared `__u16`, but the kernel stores `cpu_to_be16(pkey)`: raw
    /// big-endian bytes (librdmacm passes it on as a `__be16`).
    pub pkey: u16,
    pub src_size: u16,
    pub dst_size: u16,
    pub src_addr: __kernel_sockaddr_storage,
    pub dst_addr: __kernel_sockaddr_storage,
    /// The device's index (`RDMA_NLDEV_ATTR_DEV_INDEX`); since 5.5.
    pub ibdev_index: u32,
    pub reserved1: u32,
}
assert_layout!(
    rdma_ucm_query_addr_resp,
    size = 280,
    align = 8,
    node_guid = 0,
    port_num = 8,
    reserved = 9,
    pkey = 10,
    src_size = 12,
    dst_size = 14,
    src_addr = 16,
    dst_addr = 144,
    ibdev_index = 272,
    reserved1 = 276
);

/// `struct rdma_ucm_query_path_resp`: QUERY(PATH), followed by
/// `num_paths` [`ib_path_rec_data`] records.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_query_path_resp {
    pub num_paths: u32,
    pub reserved: u32,
    pub path_data: [ib_path_rec_data; 0],
}
assert_layout!(rdma_ucm_query_path_resp, size = 8, align = 4, num_paths = 0, reserved = 4, path_data = 8);

/// `struct rdma_ucm_conn_param` (272 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_conn_param {
    /// The QP number (24 bits used).
    pub qp_num: u32,
    pub qkey: u32,
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
    pub private_data_len: u8,
    pub srq: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    /// 1: the parameters are given (CONNECT, a passive ACCEPT); 0 on the
    /// active side's ACCEPT after CONNECT_RESPONSE.
    pub valid: u8,
}
assert_layout!(
    rdma_ucm_conn_param,
    size = 272,
    align = 4,
    qp_num = 0,
    qkey = 4,
    private_data = 8,
    private_data_len = 264,
    srq = 265,
    responder_resources = 266,
    initiator_depth = 267,
    flow_control = 268,
    retry_count = 269,
    rnr_retry_count = 270,
    valid = 271
);

impl Default for rdma_ucm_conn_param {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// `struct rdma_ucm_ud_param` (304 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_ud_param {
    pub qp_num: u32,
    pub qkey: u32,
    pub ah_attr: ib_uverbs_ah_attr,
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
    pub private_data_len: u8,
    pub reserved: [u8; 7],
}
assert_layout!(
    rdma_ucm_ud_param,
    size = 304,
    align = 4,
    qp_num = 0,
    qkey = 4,
    ah_attr = 8,
    private_data = 40,
    private_data_len = 296,
    reserved = 297
);

impl Default for rdma_ucm_ud_param {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// `struct rdma_ucm_ece`: enhanced connection establishment options.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_ece {
    pub vendor_id: u32,
    pub attr_mod: u32,
}
assert_layout!(rdma_ucm_ece, size = 8, align = 4, vendor_id = 0, attr_mod = 4);

/// `struct rdma_ucm_connect` (command 6).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_connect {
    pub conn_param: rdma_ucm_conn_param,
    pub id: u32,
    pub reserved: u32,
    pub ece: rdma_ucm_ece,
}
assert_layout!(rdma_ucm_connect, size = 288, align = 4, conn_param = 0, id = 272, reserved = 276, ece = 280);

/// `struct rdma_ucm_listen` (command 7).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_listen {
    pub id: u32,
    /// `<= 0` or above `net.rdma_ucm.max_backlog`: that maximum.
    pub backlog: u32,
}
assert_layout!(rdma_ucm_listen, size = 8, align = 4, id = 0, backlog = 4);

/// `struct rdma_ucm_accept` (command 8).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_accept {
    /// The child id's uid from now on (with `conn_param.valid` = 1).
    pub uid: u64,
    pub conn_param: rdma_ucm_conn_param,
    pub id: u32,
    pub reserved: u32,
    pub ece: rdma_ucm_ece,
}
assert_layout!(rdma_ucm_accept, size = 296, align = 8, uid = 0, conn_param = 8, id = 280, reserved = 284, ece = 288);

/// `struct rdma_ucm_reject` (command 9).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_reject {
    pub id: u32,
    pub private_data_len: u8,
    /// 0 (the kernel makes it 28, "consumer reject") or
    /// `RDMA_USER_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED`.
    pub reason: u8,
    pub reserved: [u8; 2],
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
}
assert_layout!(
    rdma_ucm_reject,
    size = 264,
    align = 4,
    id = 0,
    private_data_len = 4,
    reason = 5,
    reserved = 6,
    private_data = 8
);

impl Default for rdma_ucm_reject {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// `struct rdma_ucm_disconnect` (command 10).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_disconnect {
    pub id: u32,
}
assert_layout!(rdma_ucm_disconnect, size = 4, align = 4, id = 0);

/// `struct rdma_ucm_init_qp_attr` (command 11); the answer is an
/// `ib_uverbs_qp_attr` (144 bytes, `qp_attr_mask` first).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_init_qp_attr {
    pub response: u64,
    pub id: u32,
    /// `IB_QPS_*`: the state to get attributes for.
    pub qp_state: u32,
}
assert_layout!(rdma_ucm_init_qp_attr, size = 16, align = 8, response = 0, id = 8, qp_state = 12);

/// `struct rdma_ucm_notify` (command 15).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_notify {
    pub id: u32,
    /// An `ib_event_type` (`IBV_EVENT_COMM_EST`).
    pub event: u32,
}
assert_layout!(rdma_ucm_notify, size = 8, align = 4, id = 0, event = 4);

/// `struct rdma_ucm_join_ip_mcast` (legacy command 16).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_join_ip_mcast {
    /// Pointer to a [`rdma_ucm_create_id_resp`].
    pub response: u64,
    pub uid: u64,
    pub addr: sockaddr_in6,
    pub id: u32,
}
assert_layout!(rdma_ucm_join_ip_mcast, size = 48, align = 8, response = 0, uid = 8, addr = 16, id = 44);

/// `struct rdma_ucm_join_mcast` (command 22).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_join_mcast {
    /// Pointer to a [`rdma_ucm_create_id_resp`] (the multicast's id).
    pub response: u64,
    /// Echoed in MULTICAST_JOIN/ERROR events.
    pub uid: u64,
    pub id: u32,
    pub addr_size: u16,
    /// `RDMA_MC_JOIN_FLAG_*`.
    pub join_flags: u16,
    pub addr: __kernel_sockaddr_storage,
}
assert_layout!(
    rdma_ucm_join_mcast,
    size = 152,
    align = 8,
    response = 0,
    uid = 8,
    id = 16,
    addr_size = 20,
    join_flags = 22,
    addr = 24
);

/// `struct rdma_ucm_get_event` (command 12).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_get_event {
    /// Pointer to a [`rdma_ucm_event_resp`].
    pub response: u64,
}
assert_layout!(rdma_ucm_get_event, size = 8, align = 8, response = 0);

/// `struct rdma_ucm_event_resp` (336 bytes): one event.
///
/// `param` is the C union `{ rdma_ucm_conn_param conn; rdma_ucm_ud_param
/// ud; }`, flattened to 4-byte words (the union sits at offset 20, not
/// 8-aligned); read it with [`conn`](Self::conn) or [`ud`](Self::ud).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_event_resp {
    /// The id's uid (a CONNECT_REQUEST: the listener's).
    pub uid: u64,
    /// The kernel id (a CONNECT_REQUEST: the new child's).
    pub id: u32,
    /// `RDMA_CM_EVENT_*`.
    pub event: u32,
    /// `int`: `-errno`, or an IB CM reject reason for REJECTED.
    pub status: u32,
    /// Union `{ conn, ud }` storage.
    pub param: [u32; 76],
    pub reserved: u32,
    pub ece: rdma_ucm_ece,
}
assert_layout!(
    rdma_ucm_event_resp,
    size = 336,
    align = 8,
    uid = 0,
    id = 8,
    event = 12,
    status = 16,
    param = 20,
    reserved = 324,
    ece = 328
);
const _: () = assert!(size_of::<rdma_ucm_conn_param>() <= 304 && size_of::<rdma_ucm_ud_param>() == 304);

impl Default for rdma_ucm_event_resp {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl rdma_ucm_event_resp {
    /// `param.conn`.
    pub fn conn(&self) -> rdma_ucm_conn_param {
        crate::union_get(&self.param)
    }

    /// Stores `param.conn`, zeroing the rest of the union.
    pub fn set_conn(&mut self, v: &rdma_ucm_conn_param) {
        crate::union_set(&mut self.param, v);
    }

    /// `param.ud`.
    pub fn ud(&self) -> rdma_ucm_ud_param {
        crate::union_get(&self.param)
    }

    /// Stores `param.ud`.
    pub fn set_ud(&mut self, v: &rdma_ucm_ud_param) {
        crate::union_set(&mut self.param, v);
    }
}

/// `struct rdma_ucm_set_option` (command 14).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_set_option {
    /// Pointer to the option's value.
    pub optval: u64,
    pub id: u32,
    /// `RDMA_OPTION_ID` or `RDMA_OPTION_IB`.
    pub level: u32,
    pub optname: u32,
    pub optlen: u32,
}
assert_layout!(rdma_ucm_set_option, size = 24, align = 8, optval = 0, id = 8, level = 12, optname = 16, optlen = 20);

/// `struct rdma_ucm_migrate_id` (command 18), written to the *new* fd.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_migrate_id {
    /// Pointer to a [`rdma_ucm_migrate_resp`].
    pub response: u64,
    pub id: u32,
    /// The fd the id is on now.
    pub fd: u32,
}
assert_layout!(rdma_ucm_migrate_id, size = 16, align = 8, response = 0, id = 8, fd = 12);

/// `struct rdma_ucm_migrate_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rdma_ucm_migrate_resp {
    pub events_reported: u32,
}
assert_layout!(rdma_ucm_migrate_resp, size = 4, align = 4, events_reported = 0);
