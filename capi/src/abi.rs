//! The C structs of rdma-core 44's `<infiniband/verbs.h>` (and `verbs_device`
//! of its `driver.h`) that this library hands out or fills, mirrored for
//! x86_64 and checked at compile time against the offsets and sizes gcc
//! prints for the 44 headers (`capi-layouts.txt` of the project's
//! reference notes; the asserts below are that file, field by field).
//!
//! C enums are 4-byte ints: they are `u32` here, never Rust enums (a C
//! caller may pass any value). Pointers to objects this library does not
//! lay out yet are `*mut c_void`.

use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};

/// `pthread_mutex_t` on x86_64 glibc: 40 bytes, all-zero = `PTHREAD_MUTEX_INITIALIZER`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct PthreadMutex(pub [u8; 40]);

/// A type-erased function pointer slot: an op this library fills with an
/// EOPNOTSUPP dummy (`crate::stubs`) whose C signature it does not spell out.
pub type Slot = *const c_void;

/// `struct ibv_device` (664 bytes).
#[repr(C)]
pub struct ibv_device {
    /// `struct _ibv_device_ops` (two compat pointers, unused): zero.
    pub _ops: [*mut c_void; 2],
    /// `enum ibv_node_type`.
    pub node_type: u32,
    /// `enum ibv_transport_type`.
    pub transport_type: u32,
    /// IB device name (`rxe0`), NUL-terminated.
    pub name: [c_char; 64],
    /// uverbs device name (`uverbs0`).
    pub dev_name: [c_char; 64],
    /// `/sys/class/infiniband_verbs/uverbs0`.
    pub dev_path: [c_char; 256],
    /// `/sys/class/infiniband/rxe0`.
    pub ibdev_path: [c_char; 256],
}

/// `struct verbs_device` of `driver.h` (712 bytes): `ops` must be NULL
/// (libmlx5's `is_mlx5_dev()` and libefa's `is_efa_dev()` read it).
#[repr(C)]
pub struct verbs_device {
    pub device: ibv_device,
    /// `const struct verbs_device_ops *`: NULL, no provider is loaded.
    pub ops: *const c_void,
    pub refcount: u32,
    /// `struct list_node` (two pointers): unused.
    pub entry: [*mut c_void; 2],
    /// `struct verbs_sysfs_dev *`: NULL.
    pub sysfs: *mut c_void,
    pub core_support: u64,
}

/// `struct ibv_context_ops` (32 pointers). The slots the inline functions
/// of `verbs.h` call are named; `_compat_*` slots are old-ABI leftovers.
#[repr(C)]
pub struct ibv_context_ops {
    /// `_compat_query_device` … `_compat_dereg_mr` (7 slots).
    pub _compat0: [Slot; 7],
    /// `alloc_mw`, `bind_mw`, `dealloc_mw`: rverbs' memory windows
    /// (`mw.rs`).
    pub alloc_mw: Slot,
    pub bind_mw: Slot,
    pub dealloc_mw: Slot,
    pub _compat_create_cq: Slot,
    pub poll_cq: Slot,
    pub req_notify_cq: Slot,
    /// `_compat_cq_event` … `_compat_destroy_srq` (7 slots).
    pub _compat1: [Slot; 7],
    pub post_srq_recv: Slot,
    /// `_compat_create_qp` … `_compat_destroy_qp` (4 slots).
    pub _compat2: [Slot; 4],
    pub post_send: Slot,
    pub post_recv: Slot,
    /// `_compat_create_ah` … `_compat_async_event` (5 slots).
    pub _compat3: [Slot; 5],
}

/// `struct ibv_context` (328 bytes).
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: PthreadMutex,
    /// `(void *)UINTPTR_MAX`: tells `verbs_get_ctx()` this is a `verbs_context`.
    pub abi_compat: *mut c_void,
}

/// `vctx->query_port(context, port_num, port_attr, port_attr_len)`.
pub type QueryPortFn = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int;
/// `vctx->query_device_ex(context, input, attr, attr_size)`.
pub type QueryDeviceExFn =
    unsafe extern "C" fn(*mut ibv_context, *const ibv_query_device_ex_input, *mut ibv_device_attr_ex, usize) -> c_int;

/// `struct verbs_context` (648 bytes): the extended ops, then `sz`, then the
/// `ibv_context` applications see (at offset 320).
#[repr(C)]
pub struct verbs_context {
    pub query_port: Option<QueryPortFn>,
    /// `advise_mr` (8) … `create_cq_ex` (200): 25 ops.
    pub ops_a: [Slot; 25],
    /// `struct verbs_ex_private *`: NULL.
    pub priv_: *mut c_void,
    pub query_device_ex: Option<QueryDeviceExFn>,
    pub ibv_destroy_flow: Slot,
    pub abi_placeholder2: Slot,
    pub ibv_create_flow: Slot,
    pub abi_placeholder1: Slot,
    /// `open_qp` (256) … `close_xrcd` (296): 6 ops.
    pub ops_b: [Slot; 6],
    pub abi_placeholder3: u64,
    /// `sizeof(struct verbs_context)` as this library knows it: 648.
    pub sz: usize,
    pub context: ibv_context,
}

/// `struct ibv_device_attr` (232 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    /// `__be64`.
    pub node_guid: u64,
    /// `__be64`.
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_odp_caps` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

/// `struct ibv_tso_caps` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}

/// `struct ibv_rss_caps` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}

/// `struct ibv_packet_pacing_caps` (12 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}

/// `struct ibv_tm_caps` (20 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}

/// `struct ibv_cq_moderation_caps` (4 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_cq_moderation_caps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}

/// `struct ibv_pci_atomic_caps` (6 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_pci_atomic_caps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}

/// `struct ibv_device_attr_ex` (400 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: ibv_tso_caps,
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    pub raw_packet_caps: u32,
    pub tm_caps: ibv_tm_caps,
    pub cq_mod_caps: ibv_cq_moderation_caps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

/// `struct ibv_query_device_ex_input` (4 bytes).
#[repr(C)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

/// `struct ibv_port_attr` (52 bytes). The exported `ibv_query_port@@IBVERBS_1.1`
/// writes only its first 48 (`struct _compat_ibv_port_attr`, up to `flags`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// The bytes of `ibv_port_attr` the exported `ibv_query_port` writes.
pub const COMPAT_PORT_ATTR_LEN: usize = 48;

/// `struct ibv_gid_entry` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_entry {
    pub gid: [u8; 16],
    pub gid_index: u32,
    pub port_num: u32,
    /// `enum ibv_gid_type`: `IBV_GID_TYPE_IB` 0, `ROCE_V1` 1, `ROCE_V2` 2.
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `struct ibv_async_event` (16 bytes): `element` is a union of object
/// pointers and `int port_num`.
#[repr(C)]
pub struct ibv_async_event {
    pub element: *mut c_void,
    /// `enum ibv_event_type`.
    pub event_type: u32,
}

// ---- compile-time layout checks: capi-layouts.txt (gcc, libibverbs-dev 44.0-2, x86_64) ----

macro_rules! layout {
    ($t:ty, $size:expr $(, $field:ident = $off:expr)* $(,)?) => {
        const _: () = assert!(size_of::<$t>() == $size);
        $(const _: () = assert!(offset_of!($t, $field) == $off);)*
    };
}

layout!(PthreadMutex, 40);
layout!(
    ibv_device,
    664,
    _ops = 0,
    node_type = 16,
    transport_type = 20,
    name = 24,
    dev_name = 88,
    dev_path = 152,
    ibdev_path = 408
);
layout!(verbs_device, 712, device = 0, ops = 664, refcount = 672, entry = 680, sysfs = 696, core_support = 704);
layout!(
    ibv_context_ops,
    256,
    alloc_mw = 56,
    bind_mw = 64,
    dealloc_mw = 72,
    poll_cq = 88,
    req_notify_cq = 96,
    post_srq_recv = 160,
    post_send = 200,
    post_recv = 208,
    _compat3 = 216,
);
const _: () = assert!(offset_of!(ibv_context_ops, _compat3) + 4 * 8 == 248); // _compat_async_event
layout!(
    ibv_context,
    328,
    device = 0,
    ops = 8,
    cmd_fd = 264,
    async_fd = 268,
    num_comp_vectors = 272,
    mutex = 280,
    abi_compat = 320
);
layout!(
    verbs_context,
    648,
    query_port = 0,
    ops_a = 8, // advise_mr
    priv_ = 208,
    query_device_ex = 216,
    ibv_destroy_flow = 224,
    abi_placeholder2 = 232,
    ibv_create_flow = 240,
    abi_placeholder1 = 248,
    ops_b = 256, // open_qp
    abi_placeholder3 = 304,
    sz = 312,
    context = 320,
);
// create_cq_ex is the last of ops_a (200); close_xrcd the last of ops_b (296).
const _: () = assert!(offset_of!(verbs_context, ops_a) + 24 * 8 == 200);
const _: () = assert!(offset_of!(verbs_context, ops_b) + 5 * 8 == 296);
layout!(
    ibv_device_attr,
    232,
    fw_ver = 0,
    node_guid = 64,
    sys_image_guid = 72,
    max_mr_size = 80,
    page_size_cap = 88,
    vendor_id = 96,
    vendor_part_id = 100,
    hw_ver = 104,
    max_qp = 108,
    max_qp_wr = 112,
    device_cap_flags = 116,
    max_sge = 120,
    max_sge_rd = 124,
    max_cq = 128,
    max_cqe = 132,
    max_mr = 136,
    max_pd = 140,
    max_qp_rd_atom = 144,
    max_ee_rd_atom = 148,
    max_res_rd_atom = 152,
    max_qp_init_rd_atom = 156,
    max_ee_init_rd_atom = 160,
    atomic_cap = 164,
    max_ee = 168,
    max_rdd = 172,
    max_mw = 176,
    max_raw_ipv6_qp = 180,
    max_raw_ethy_qp = 184,
    max_mcast_grp = 188,
    max_mcast_qp_attach = 192,
    max_total_mcast_qp_attach = 196,
    max_ah = 200,
    max_fmr = 204,
    max_map_per_fmr = 208,
    max_srq = 212,
    max_srq_wr = 216,
    max_srq_sge = 220,
    max_pkeys = 224,
    local_ca_ack_delay = 226,
    phys_port_cnt = 227,
);
layout!(ibv_odp_caps, 24, general_caps = 0, rc_odp_caps = 8, uc_odp_caps = 12, ud_odp_caps = 16);
layout!(ibv_tso_caps, 8, max_tso = 0, supported_qpts = 4);
layout!(
    ibv_rss_caps,
    32,
    supported_qpts = 0,
    max_rwq_indirection_tables = 4,
    max_rwq_indirection_table_size = 8,
    rx_hash_fields_mask = 16,
    rx_hash_function = 24
);
layout!(ibv_packet_pacing_caps, 12, qp_rate_limit_min = 0, qp_rate_limit_max = 4, supported_qpts = 8);
layout!(ibv_tm_caps, 20, max_rndv_hdr_size = 0, max_num_tags = 4, flags = 8, max_ops = 12, max_sge = 16);
layout!(ibv_cq_moderation_caps, 4, max_cq_count = 0, max_cq_period = 2);
layout!(ibv_pci_atomic_caps, 6, fetch_add = 0, swap = 2, compare_swap = 4);
layout!(
    ibv_device_attr_ex,
    400,
    orig_attr = 0,
    comp_mask = 232,
    odp_caps = 240,
    completion_timestamp_mask = 264,
    hca_core_clock = 272,
    device_cap_flags_ex = 280,
    tso_caps = 288,
    rss_caps = 296,
    max_wq_type_rq = 328,
    packet_pacing_caps = 332,
    raw_packet_caps = 344,
    tm_caps = 348,
    cq_mod_caps = 368,
    max_dm_size = 376,
    pci_atomic_caps = 384,
    xrc_odp_caps = 392,
    phys_port_cnt_ex = 396,
);
layout!(ibv_query_device_ex_input, 4, comp_mask = 0);
layout!(
    ibv_port_attr,
    52,
    state = 0,
    max_mtu = 4,
    active_mtu = 8,
    gid_tbl_len = 12,
    port_cap_flags = 16,
    max_msg_sz = 20,
    bad_pkey_cntr = 24,
    qkey_viol_cntr = 28,
    pkey_tbl_len = 32,
    lid = 34,
    sm_lid = 36,
    lmc = 38,
    max_vl_num = 39,
    sm_sl = 40,
    subnet_timeout = 41,
    init_type_reply = 42,
    active_width = 43,
    active_speed = 44,
    phys_state = 45,
    link_layer = 46,
    flags = 47,
    port_cap_flags2 = 48,
);
const _: () = assert!(offset_of!(ibv_port_attr, port_cap_flags2) == COMPAT_PORT_ATTR_LEN);
layout!(ibv_gid_entry, 32, gid = 0, gid_index = 16, port_num = 20, gid_type = 24, ndev_ifindex = 28);
layout!(ibv_async_event, 16, element = 0, event_type = 8);

// ---- PD, MR, completion channel, CQ, QP and their value structs ----

/// `pthread_cond_t` on x86_64 glibc: 48 bytes, all-zero = `PTHREAD_COND_INITIALIZER`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct PthreadCond(pub [u8; 48]);

/// `struct ibv_pd` (16 bytes).
#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr` (48 bytes).
#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_mw` (32 bytes).
#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    /// `enum ibv_mw_type`.
    pub mw_type: u32,
}

/// `struct ibv_mw_bind_info` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: u32,
}

/// `struct ibv_mw_bind` (48 bytes).
#[repr(C)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    pub send_flags: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `struct ibv_comp_channel` (16 bytes).
#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    /// CQs using the channel.
    pub refcnt: c_int,
}

/// `struct ibv_cq` (128 bytes).
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_qp` (160 bytes).
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    /// `struct ibv_srq *`.
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    /// `enum ibv_qp_state`, kept true by modify and query.
    pub state: u32,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct ibv_cq_ex` (288 bytes): the `ibv_cq` fields, then what
/// `ibv_start_poll`/`ibv_next_poll` write (`status`, `wr_id`) and the
/// polling and `ibv_wc_read_*` ops the `verbs.h` inlines call. Every CQ of
/// this library carries one (as every `verbs_cq` of rdma-core does).
#[repr(C)]
pub struct ibv_cq_ex {
    pub cq: ibv_cq,
    pub comp_mask: u32,
    /// `enum ibv_wc_status` of the current completion.
    pub status: u32,
    /// `wr_id` of the current completion.
    pub wr_id: u64,
    pub start_poll: Slot,
    pub next_poll: Slot,
    pub end_poll: Slot,
    pub read_opcode: Slot,
    pub read_vendor_err: Slot,
    pub read_byte_len: Slot,
    pub read_imm_data: Slot,
    pub read_qp_num: Slot,
    pub read_src_qp: Slot,
    pub read_wc_flags: Slot,
    pub read_slid: Slot,
    pub read_sl: Slot,
    pub read_dlid_path_bits: Slot,
    pub read_completion_ts: Slot,
    pub read_cvlan: Slot,
    pub read_flow_tag: Slot,
    pub read_tm_info: Slot,
    pub read_completion_wallclock_ns: Slot,
}

/// `struct ibv_cq_init_attr_ex` (56 bytes).
#[repr(C)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    /// `IBV_WC_EX_WITH_*`.
    pub wc_flags: u64,
    /// `IBV_CQ_INIT_ATTR_MASK_FLAGS` (1), `_PD` (2).
    pub comp_mask: u32,
    /// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (1), `_IGNORE_OVERRUN` (2).
    pub flags: u32,
    /// `struct ibv_pd *` (a parent domain).
    pub parent_domain: *mut c_void,
}

/// `struct ibv_poll_cq_attr` (4 bytes).
#[repr(C)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// `struct ibv_qp_ex` (352 bytes): the `ibv_qp`, then the fields the
/// `ibv_wr_*` builders read (`wr_id`, `wr_flags`) and their ops. Every QP of
/// this library carries one; the ops are set only on QPs from
/// `ibv_create_qp_ex` (NULL elsewhere, as in rdma-core).
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    /// `wr_id` of the next request a builder creates.
    pub wr_id: u64,
    /// `IBV_SEND_*` of the next request a builder creates.
    pub wr_flags: u32,
    pub wr_atomic_cmp_swp: Slot,
    pub wr_atomic_fetch_add: Slot,
    pub wr_bind_mw: Slot,
    pub wr_local_inv: Slot,
    pub wr_rdma_read: Slot,
    pub wr_rdma_write: Slot,
    pub wr_rdma_write_imm: Slot,
    pub wr_send: Slot,
    pub wr_send_imm: Slot,
    pub wr_send_inv: Slot,
    pub wr_send_tso: Slot,
    pub wr_set_ud_addr: Slot,
    pub wr_set_xrc_srqn: Slot,
    pub wr_set_inline_data: Slot,
    pub wr_set_inline_data_list: Slot,
    pub wr_set_sge: Slot,
    pub wr_set_sge_list: Slot,
    pub wr_start: Slot,
    pub wr_complete: Slot,
    pub wr_abort: Slot,
    pub wr_atomic_write: Slot,
}

/// `struct ibv_qp_init_attr_ex` (136 bytes); its first 64 bytes are an
/// `ibv_qp_init_attr`.
#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    /// `IBV_QP_INIT_ATTR_*`.
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    /// `struct ibv_xrcd *`.
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    /// `struct ibv_rwq_ind_table *`.
    pub rwq_ind_tbl: *mut c_void,
    /// `struct ibv_rx_hash_conf` (24 bytes).
    pub rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    /// `IBV_QP_EX_WITH_*`.
    pub send_ops_flags: u64,
}

/// `struct ibv_data_buf` (16 bytes).
#[repr(C)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// `struct ibv_grh` (40 bytes): the first 40 bytes of a UD receive
/// buffer. On RoCE v2 over IPv4 its last 20 bytes hold the IPv4 header.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_grh {
    /// `__be32`: IP version (4 bits), traffic class (8), flow label (20).
    pub version_tclass_flow: u32,
    pub paylen: u16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: [u8; 16],
    pub dgid: [u8; 16],
}

/// `struct ibv_wc` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `__be32`, network order (rverbs' `Wc` is host order).
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_sge` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr` (128 bytes); `wr` is the union of `rdma`
/// (remote_addr, rkey), `atomic` (remote_addr, compare_add, swap, rkey) and
/// `ud` (ah, remote_qpn, remote_qkey), kept as raw words.
#[repr(C)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    /// `enum ibv_wr_opcode`.
    pub opcode: u32,
    pub send_flags: u32,
    /// `__be32` (or `invalidate_rkey`).
    pub imm_data: u32,
    /// The `wr` union: `[0]` remote_addr (or `ud.ah`), `[1]` rkey (low 32
    /// bits) or `atomic.compare_add`, `[2]` `atomic.swap`, `[3]` `atomic.rkey`.
    pub wr: [u64; 4],
    /// `qp_type.xrc.remote_srqn`.
    pub qp_type: u32,
    /// The `bind_mw`/`tso` union.
    pub bind_mw: [u64; 6],
}

/// `struct ibv_recv_wr` (32 bytes).
#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `struct ibv_qp_cap` (20 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr` (64 bytes).
#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `struct ibv_global_route` (24 bytes; 8-aligned: `union ibv_gid` holds `__be64`s).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr` (144 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
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
    pub rate_limit: u32,
}

layout!(PthreadCond, 48);
layout!(ibv_pd, 16, context = 0, handle = 8);
layout!(ibv_mr, 48, context = 0, pd = 8, addr = 16, length = 24, handle = 32, lkey = 36, rkey = 40);
layout!(ibv_comp_channel, 16, context = 0, fd = 8, refcnt = 12);
layout!(ibv_mw, 32, context = 0, pd = 8, rkey = 16, handle = 20, mw_type = 24);
layout!(ibv_mw_bind_info, 32, mr = 0, addr = 8, length = 16, mw_access_flags = 24);
layout!(ibv_mw_bind, 48, wr_id = 0, send_flags = 8, bind_info = 16);
layout!(
    ibv_cq,
    128,
    context = 0,
    channel = 8,
    cq_context = 16,
    handle = 24,
    cqe = 28,
    mutex = 32,
    cond = 72,
    comp_events_completed = 120,
    async_events_completed = 124
);
layout!(
    ibv_qp,
    160,
    context = 0,
    qp_context = 8,
    pd = 16,
    send_cq = 24,
    recv_cq = 32,
    srq = 40,
    handle = 48,
    qp_num = 52,
    state = 56,
    qp_type = 60,
    mutex = 64,
    cond = 104,
    events_completed = 152
);
layout!(
    ibv_cq_ex,
    288,
    cq = 0,
    comp_mask = 128,
    status = 132,
    wr_id = 136,
    start_poll = 144,
    next_poll = 152,
    end_poll = 160,
    read_opcode = 168,
    read_vendor_err = 176,
    read_byte_len = 184,
    read_imm_data = 192,
    read_qp_num = 200,
    read_src_qp = 208,
    read_wc_flags = 216,
    read_slid = 224,
    read_sl = 232,
    read_dlid_path_bits = 240,
    read_completion_ts = 248,
    read_cvlan = 256,
    read_flow_tag = 264,
    read_tm_info = 272,
    read_completion_wallclock_ns = 280
);
layout!(
    ibv_cq_init_attr_ex,
    56,
    cqe = 0,
    cq_context = 8,
    channel = 16,
    comp_vector = 24,
    wc_flags = 32,
    comp_mask = 40,
    flags = 44,
    parent_domain = 48
);
layout!(ibv_poll_cq_attr, 4, comp_mask = 0);
layout!(
    ibv_qp_ex,
    352,
    qp_base = 0,
    comp_mask = 160,
    wr_id = 168,
    wr_flags = 176,
    wr_atomic_cmp_swp = 184,
    wr_atomic_fetch_add = 192,
    wr_bind_mw = 200,
    wr_local_inv = 208,
    wr_rdma_read = 216,
    wr_rdma_write = 224,
    wr_rdma_write_imm = 232,
    wr_send = 240,
    wr_send_imm = 248,
    wr_send_inv = 256,
    wr_send_tso = 264,
    wr_set_ud_addr = 272,
    wr_set_xrc_srqn = 280,
    wr_set_inline_data = 288,
    wr_set_inline_data_list = 296,
    wr_set_sge = 304,
    wr_set_sge_list = 312,
    wr_start = 320,
    wr_complete = 328,
    wr_abort = 336,
    wr_atomic_write = 344
);
layout!(
    ibv_qp_init_attr_ex,
    136,
    qp_context = 0,
    send_cq = 8,
    recv_cq = 16,
    srq = 24,
    cap = 32,
    qp_type = 52,
    sq_sig_all = 56,
    comp_mask = 60,
    pd = 64,
    xrcd = 72,
    create_flags = 80,
    max_tso_header = 84,
    rwq_ind_tbl = 88,
    rx_hash_conf = 96,
    source_qpn = 120,
    send_ops_flags = 128
);
layout!(ibv_data_buf, 16, addr = 0, length = 8);
layout!(ibv_grh, 40, version_tclass_flow = 0, paylen = 4, next_hdr = 6, hop_limit = 7, sgid = 8, dgid = 24);
layout!(
    ibv_wc,
    48,
    wr_id = 0,
    status = 8,
    opcode = 12,
    vendor_err = 16,
    byte_len = 20,
    imm_data = 24,
    qp_num = 28,
    src_qp = 32,
    wc_flags = 36,
    pkey_index = 40,
    slid = 42,
    sl = 44,
    dlid_path_bits = 45
);
layout!(ibv_sge, 16, addr = 0, length = 8, lkey = 12);
layout!(
    ibv_send_wr,
    128,
    wr_id = 0,
    next = 8,
    sg_list = 16,
    num_sge = 24,
    opcode = 28,
    send_flags = 32,
    imm_data = 36,
    wr = 40,
    qp_type = 72,
    bind_mw = 80
);
layout!(ibv_recv_wr, 32, wr_id = 0, next = 8, sg_list = 16, num_sge = 24);
layout!(ibv_qp_cap, 20, max_send_wr = 0, max_recv_wr = 4, max_send_sge = 8, max_recv_sge = 12, max_inline_data = 16);
layout!(
    ibv_qp_init_attr,
    64,
    qp_context = 0,
    send_cq = 8,
    recv_cq = 16,
    srq = 24,
    cap = 32,
    qp_type = 52,
    sq_sig_all = 56
);
layout!(ibv_global_route, 24, dgid = 0, flow_label = 16, sgid_index = 20, hop_limit = 21, traffic_class = 22);
layout!(
    ibv_ah_attr,
    32,
    grh = 0,
    dlid = 24,
    sl = 26,
    src_path_bits = 27,
    static_rate = 28,
    is_global = 29,
    port_num = 30
);
layout!(
    ibv_qp_attr,
    144,
    qp_state = 0,
    cur_qp_state = 4,
    path_mtu = 8,
    path_mig_state = 12,
    qkey = 16,
    rq_psn = 20,
    sq_psn = 24,
    dest_qp_num = 28,
    qp_access_flags = 32,
    cap = 36,
    ah_attr = 56,
    alt_ah_attr = 88,
    pkey_index = 120,
    alt_pkey_index = 122,
    en_sqd_async_notify = 124,
    sq_draining = 125,
    max_rd_atomic = 126,
    max_dest_rd_atomic = 127,
    min_rnr_timer = 128,
    port_num = 129,
    timeout = 130,
    retry_cnt = 131,
    rnr_retry = 132,
    alt_port_num = 133,
    alt_timeout = 134,
    rate_limit = 136
);

/// `struct ibv_ah` (24 bytes).
#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_srq` (128 bytes).
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct ibv_srq_attr` (12 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr` (24 bytes).
#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

layout!(ibv_ah, 24, context = 0, pd = 8, handle = 16);
layout!(
    ibv_srq,
    128,
    context = 0,
    srq_context = 8,
    pd = 16,
    handle = 24,
    mutex = 32,
    cond = 72,
    events_completed = 120
);
layout!(ibv_srq_attr, 12, max_wr = 0, max_sge = 4, srq_limit = 8);
layout!(ibv_srq_init_attr, 24, srq_context = 0, attr = 8);

/// `struct ibv_sa_path_rec` (`<infiniband/sa.h>`, 64 bytes, 8-aligned by its `union ibv_gid`s).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default)]
pub struct ibv_sa_path_rec {
    pub dgid: [u8; 16],
    pub sgid: [u8; 16],
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

// Not in capi-layouts.txt: checked once with gcc 12 on the declaration of
// rdma-core 44's `libibverbs/sa.h` (the kernel's `ib_user_path_rec` is
// `rverbs_uapi::rdma_user_cm`'s, where the CM's route response uses it).
layout!(
    ibv_sa_path_rec,
    64,
    dlid = 32,
    slid = 34,
    raw_traffic = 36,
    flow_label = 40,
    hop_limit = 44,
    reversible = 48,
    numb_path = 52,
    pkey = 54,
    sl = 56,
    mtu = 58,
    preference = 63
);
