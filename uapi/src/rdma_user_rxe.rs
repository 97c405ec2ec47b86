//! `include/uapi/rdma/rdma_user_rxe.h`: the soft-RoCE (rxe) driver ABI:
//! create-response udata, the mmapped queue header and the WQE layouts the
//! kernel reads from the shared send/receive rings.
//!
//! Synced from rdma-core `kernel-headers/rdma/rdma_user_rxe.h` at commit
//! `691953d8d502`. Layouts match `shared/reference/providers.md` §A.3
//! (`rxe_send_wr` 144, `rxe_send_wqe` 208, `rxe_recv_wqe` 40, `rxe_av` 88,
//! `rxe_queue_buf` 384 with `producer_index` at 128, `consumer_index` at 256
//! and `data` at 384), identical on kernels 6.1, 6.12 and 7.3.
//!
//! `struct sockaddr_in`/`sockaddr_in6` (from `linux/in.h`/`linux/in6.h`,
//! which this header includes for `rxe_av`) are mirrored here too.
//!
//! The kernel-only `wr.reg` variant of `rxe_send_wr` (under `__KERNEL__`) is
//! not part of the uapi and not mirrored.
#![allow(missing_docs)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `RXE_UVERBS_ABI_VERSION` (kernel `drivers/infiniband/sw/rxe/rxe.h`, not in
/// the uapi header): the driver ABI rxe reports in
/// `/sys/class/infiniband_verbs/uverbsN/abi_version`. rdma-core accepts 1..=2
/// on 64-bit hosts.
pub const RXE_UVERBS_ABI_VERSION: u32 = 2;

// anonymous enum: rxe_av.network_type
pub const RXE_NETWORK_TYPE_IPV4: u32 = 1;
pub const RXE_NETWORK_TYPE_IPV6: u32 = 2;

/// `AF_INET` (`linux/socket.h`), for `sockaddr_in.sin_family`.
pub const AF_INET: u16 = 2;
/// `AF_INET6` (`linux/socket.h`), for `sockaddr_in6.sin6_family`.
pub const AF_INET6: u16 = 10;

/// `union rxe_gid` (16 bytes, 8-aligned): flattened to its `raw[16]` view;
/// the `global` view (`__be64 subnet_prefix, interface_id`) is available
/// through accessors.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_gid {
    /// Raw GID bytes (network order).
    pub raw: [u8; 16],
}
assert_layout!(rxe_gid, size = 16, align = 8, raw = 0);

impl rxe_gid {
    /// `global.subnet_prefix` as a number (the bytes are big-endian).
    pub fn subnet_prefix(&self) -> u64 {
        u64::from_be_bytes(crate::union_get(&self.raw))
    }

    /// `global.interface_id` as a number (the bytes are big-endian).
    pub fn interface_id(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.raw[8..]);
        u64::from_be_bytes(b)
    }
}

/// `struct rxe_global_route` (24 bytes). Same leading layout as
/// `ib_uverbs_global_route` / `ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_global_route {
    pub dgid: rxe_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// Implicit trailing padding in C.
    pub _pad0: u8,
}
assert_layout!(
    rxe_global_route,
    size = 24,
    align = 8,
    dgid = 0,
    flow_label = 16,
    sgid_index = 20,
    hop_limit = 21,
    traffic_class = 22,
    _pad0 = 23
);

/// `struct sockaddr_in` (`include/uapi/linux/in.h`, 16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct sockaddr_in {
    /// `AF_INET`.
    pub sin_family: u16,
    /// `__be16`: big-endian; raw wire bytes (use `u16::from_be`).
    pub sin_port: u16,
    /// `struct in_addr` (`__be32 s_addr`): raw network-order address bytes
    /// (`u32::from_be` gives the number, `to_ne_bytes` the octets).
    pub sin_addr: u32,
    /// `__pad`: zero.
    pub __pad: [u8; 8],
}
assert_layout!(sockaddr_in, size = 16, align = 4, sin_family = 0, sin_port = 2, sin_addr = 4, __pad = 8);

/// `struct sockaddr_in6` (`include/uapi/linux/in6.h`, 28 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct sockaddr_in6 {
    /// `AF_INET6`.
    pub sin6_family: u16,
    /// `__be16`: big-endian; raw wire bytes (use `u16::from_be`).
    pub sin6_port: u16,
    /// `__be32`: big-endian; raw wire bytes (use `u32::from_be`).
    pub sin6_flowinfo: u32,
    /// `struct in6_addr`: the IPv6 address bytes in network order.
    pub sin6_addr: [u8; 16],
    pub sin6_scope_id: u32,
}
assert_layout!(
    sockaddr_in6,
    size = 28,
    align = 4,
    sin6_family = 0,
    sin6_port = 2,
    sin6_flowinfo = 4,
    sin6_addr = 8,
    sin6_scope_id = 24
);

/// `struct rxe_av` (88 bytes): the address vector the kernel reads from
/// `rxe_send_wr.wr.ud.av` when a UD WR has `ah_num == 0` (pre-5.16 kernels).
///
/// `sgid_addr` and `dgid_addr` are C unions of `struct sockaddr_in` and
/// `struct sockaddr_in6` (28 bytes, 4-aligned), flattened to `[u32; 7]`
/// storage with accessors.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_av {
    pub port_num: u8,
    /// `RXE_NETWORK_TYPE_*`.
    pub network_type: u8,
    pub dmac: [u8; 6],
    pub grh: rxe_global_route,
    /// Union `{ sockaddr_in, sockaddr_in6 }` storage.
    pub sgid_addr: [u32; 7],
    /// Union `{ sockaddr_in, sockaddr_in6 }` storage.
    pub dgid_addr: [u32; 7],
}
assert_layout!(
    rxe_av,
    size = 88,
    align = 8,
    port_num = 0,
    network_type = 1,
    dmac = 2,
    grh = 8,
    sgid_addr = 32,
    dgid_addr = 60
);

impl rxe_av {
    /// `sgid_addr._sockaddr_in`.
    pub fn sgid_addr_in(&self) -> sockaddr_in {
        crate::union_get(&self.sgid_addr)
    }

    /// Stores `sgid_addr._sockaddr_in`, zeroing the rest of the union.
    pub fn set_sgid_addr_in(&mut self, v: sockaddr_in) {
        crate::union_set(&mut self.sgid_addr, &v);
    }

    /// `sgid_addr._sockaddr_in6`.
    pub fn sgid_addr_in6(&self) -> sockaddr_in6 {
        crate::union_get(&self.sgid_addr)
    }

    /// Stores `sgid_addr._sockaddr_in6`.
    pub fn set_sgid_addr_in6(&mut self, v: sockaddr_in6) {
        crate::union_set(&mut self.sgid_addr, &v);
    }

    /// `dgid_addr._sockaddr_in`.
    pub fn dgid_addr_in(&self) -> sockaddr_in {
        crate::union_get(&self.dgid_addr)
    }

    /// Stores `dgid_addr._sockaddr_in`, zeroing the rest of the union.
    pub fn set_dgid_addr_in(&mut self, v: sockaddr_in) {
        crate::union_set(&mut self.dgid_addr, &v);
    }

    /// `dgid_addr._sockaddr_in6`.
    pub fn dgid_addr_in6(&self) -> sockaddr_in6 {
        crate::union_get(&self.dgid_addr)
    }

    /// Stores `dgid_addr._sockaddr_in6`.
    pub fn set_dgid_addr_in6(&mut self, v: sockaddr_in6) {
        crate::union_set(&mut self.dgid_addr, &v);
    }
}

/// The `wr.flush` variant of [`rxe_send_wr`] (kernel 6.2+; C declares it inline).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_send_wr_flush {
    pub remote_addr: u64,
    pub length: u32,
    pub rkey: u32,
    /// `IB_FLUSH_GLOBAL` / `IB_FLUSH_PERSISTENT` (placement type).
    pub r#type: u8,
    /// `IB_FLUSH_RANGE` / `IB_FLUSH_MR` (selectivity level).
    pub level: u8,
    /// Implicit trailing padding in C.
    pub _pad0: [u8; 6],
}
assert_layout!(
    rxe_send_wr_flush,
    size = 24,
    align = 8,
    remote_addr = 0,
    length = 8,
    rkey = 12,
    r#type = 16,
    level = 17,
    _pad0 = 18
);

/// The `wr.rdma` variant of [`rxe_send_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
    pub reserved: u32,
}
assert_layout!(rxe_send_wr_rdma, size = 16, align = 8, remote_addr = 0, rkey = 8, reserved = 12);

/// The `wr.atomic` variant of [`rxe_send_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
    pub reserved: u32,
}
assert_layout!(
    rxe_send_wr_atomic,
    size = 32,
    align = 8,
    remote_addr = 0,
    compare_add = 8,
    swap = 16,
    rkey = 24,
    reserved = 28
);

/// The `wr.ud` variant of [`rxe_send_wr`] (120 bytes: the whole union).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_send_wr_ud {
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub pkey_index: u16,
    pub reserved: u16,
    /// AH index from `rxe_create_ah_resp` (kernel 5.16+); 0 means "use `av`".
    pub ah_num: u32,
    pub pad: [u32; 4],
    pub av: rxe_av,
}
assert_layout!(
    rxe_send_wr_ud,
    size = 120,
    align = 8,
    remote_qpn = 0,
    remote_qkey = 4,
    pkey_index = 8,
    reserved = 10,
    ah_num = 12,
    pad = 16,
    av = 32
);

/// The `wr.mw` (memory-window bind) variant of [`rxe_send_wr`] (kernel 5.14+).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_send_wr_mw {
    pub addr: u64,
    pub length: u64,
    pub mr_lkey: u32,
    pub mw_rkey: u32,
    pub rkey: u32,
    pub access: u32,
}
assert_layout!(
    rxe_send_wr_mw,
    size = 32,
    align = 8,
    addr = 0,
    length = 8,
    mr_lkey = 16,
    mw_rkey = 20,
    rkey = 24,
    access = 28
);

/// `struct rxe_send_wr` (144 bytes): the WR part of an rxe send WQE.
///
/// Unions flattened: `ex` (`__be32 imm_data` / `u32 invalidate_rkey`) is a
/// `u32`; `wr` is its 120-byte, 8-aligned storage, read and written through
/// the `flush`/`rdma`/`atomic`/`ud`/`mw` accessors (in-union offsets: add 24
/// for the offset in the struct, e.g. `wr.ud.ah_num` at 36, `wr.ud.av` at 56).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_send_wr {
    pub wr_id: u64,
    /// Was `num_sge` before kernel 6.1; never read by the kernel.
    pub reserved: u32,
    /// `IB_UVERBS_WR_*`.
    pub opcode: u32,
    /// `IB_SEND_*` (same values as `IBV_SEND_*`).
    pub send_flags: u32,
    /// Union `ex`: `__be32 imm_data` (raw network-order bytes) or
    /// `__u32 invalidate_rkey`.
    pub ex: u32,
    /// Union `wr` storage.
    pub wr: [u64; 15],
}
assert_layout!(
    rxe_send_wr,
    size = 144,
    align = 8,
    wr_id = 0,
    reserved = 8,
    opcode = 12,
    send_flags = 16,
    ex = 20,
    wr = 24
);

impl rxe_send_wr {
    /// `wr.flush`.
    pub fn flush(&self) -> rxe_send_wr_flush {
        crate::union_get(&self.wr)
    }

    /// Stores `wr.flush`, zeroing the rest of the union.
    pub fn set_flush(&mut self, v: rxe_send_wr_flush) {
        crate::union_set(&mut self.wr, &v);
    }

    /// `wr.rdma`.
    pub fn rdma(&self) -> rxe_send_wr_rdma {
        crate::union_get(&self.wr)
    }

    /// Stores `wr.rdma`, zeroing the rest of the union.
    pub fn set_rdma(&mut self, v: rxe_send_wr_rdma) {
        crate::union_set(&mut self.wr, &v);
    }

    /// `wr.atomic`.
    pub fn atomic(&self) -> rxe_send_wr_atomic {
        crate::union_get(&self.wr)
    }

    /// Stores `wr.atomic`, zeroing the rest of the union.
    pub fn set_atomic(&mut self, v: rxe_send_wr_atomic) {
        crate::union_set(&mut self.wr, &v);
    }

    /// `wr.ud`.
    pub fn ud(&self) -> rxe_send_wr_ud {
        crate::union_get(&self.wr)
    }

    /// Stores `wr.ud`.
    pub fn set_ud(&mut self, v: rxe_send_wr_ud) {
        crate::union_set(&mut self.wr, &v);
    }

    /// `wr.mw`.
    pub fn mw(&self) -> rxe_send_wr_mw {
        crate::union_get(&self.wr)
    }

    /// Stores `wr.mw`, zeroing the rest of the union.
    pub fn set_mw(&mut self, v: rxe_send_wr_mw) {
        crate::union_set(&mut self.wr, &v);
    }
}

/// `struct rxe_sge` (16 bytes); same layout as `ib_uverbs_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}
assert_layout!(rxe_sge, size = 16, align = 8, addr = 0, length = 8, lkey = 12);

/// `struct mminfo` (16 bytes): `mmap(NULL, size, PROT_READ|PROT_WRITE,
/// MAP_SHARED, cmd_fd, offset)` maps the queue. Each queue can be mapped once.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct mminfo {
    pub offset: u64,
    pub size: u32,
    pub pad: u32,
}
assert_layout!(mminfo, size = 16, align = 8, offset = 0, size = 8, pad = 12);

/// `struct rxe_dma_info` (24-byte header + tail): the data descriptor of a
/// send or receive WQE.
///
/// The C tail is an anonymous union of flexible arrays
/// (`u8 inline_data[]`, `u8 atomic_wr[]`, `struct rxe_sge sge[]`), all at
/// offset 24; it is mirrored as `sge: [rxe_sge; 0]`, which keeps the 8-byte
/// alignment. Inline payload bytes start at the same offset.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_dma_info {
    /// Total bytes.
    pub length: u32,
    pub resid: u32,
    pub cur_sge: u32,
    pub num_sge: u32,
    pub sge_offset: u32,
    pub reserved: u32,
    /// Start of `sge[]` / `inline_data[]` / `atomic_wr[]`.
    pub sge: [rxe_sge; 0],
}
assert_layout!(
    rxe_dma_info,
    size = 24,
    align = 8,
    length = 0,
    resid = 4,
    cur_sge = 8,
    num_sge = 12,
    sge_offset = 16,
    reserved = 20,
    sge = 24
);

/// `struct rxe_send_wqe` (208-byte header; SGEs or inline data follow at 208).
///
/// The kernel works on it in place: `status`, `state` (write 0 =
/// `wqe_state_posted`), `mask`, the PSNs, `ack_length`, `ssn` and
/// `has_rd_atomic` are kernel scratch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_send_wqe {
    pub wr: rxe_send_wr,
    pub status: u32,
    pub state: u32,
    pub iova: u64,
    pub mask: u32,
    pub first_psn: u32,
    pub last_psn: u32,
    pub ack_length: u32,
    pub ssn: u32,
    pub has_rd_atomic: u32,
    pub dma: rxe_dma_info,
}
assert_layout!(
    rxe_send_wqe,
    size = 208,
    align = 8,
    wr = 0,
    status = 144,
    state = 148,
    iova = 152,
    mask = 160,
    first_psn = 164,
    last_psn = 168,
    ack_length = 172,
    ssn = 176,
    has_rd_atomic = 180,
    dma = 184
);

/// `struct rxe_recv_wqe` (40-byte header; SGEs follow at 40).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_recv_wqe {
    pub wr_id: u64,
    /// Was `num_sge` before kernel 6.1.
    pub reserved: u32,
    pub padding: u32,
    pub dma: rxe_dma_info,
}
assert_layout!(rxe_recv_wqe, size = 40, align = 8, wr_id = 0, reserved = 8, padding = 12, dma = 16);

/// `struct rxe_create_ah_resp` (8 bytes): CREATE_AH udata out (kernel 5.16+).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_create_ah_resp {
    pub ah_num: u32,
    pub reserved: u32,
}
assert_layout!(rxe_create_ah_resp, size = 8, align = 4, ah_num = 0, reserved = 4);

/// `struct rxe_create_cq_resp` (16 bytes): CREATE_CQ udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_create_cq_resp {
    pub mi: mminfo,
}
assert_layout!(rxe_create_cq_resp, size = 16, align = 8, mi = 0);

/// `struct rxe_resize_cq_resp` (16 bytes): RESIZE_CQ udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_resize_cq_resp {
    pub mi: mminfo,
}
assert_layout!(rxe_resize_cq_resp, size = 16, align = 8, mi = 0);

/// `struct rxe_create_qp_resp` (32 bytes): CREATE_QP udata out
/// (`rq_mi` has size 0 when the QP uses an SRQ).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_create_qp_resp {
    pub rq_mi: mminfo,
    pub sq_mi: mminfo,
}
assert_layout!(rxe_create_qp_resp, size = 32, align = 8, rq_mi = 0, sq_mi = 16);

/// `struct rxe_create_srq_resp` (24 bytes): CREATE_SRQ udata out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_create_srq_resp {
    pub mi: mminfo,
    pub srq_num: u32,
    pub reserved: u32,
}
assert_layout!(rxe_create_srq_resp, size = 24, align = 8, mi = 0, srq_num = 16, reserved = 20);

/// `struct rxe_modify_srq_cmd` (8 bytes): MODIFY_SRQ udata in; a user
/// pointer to a [`mminfo`] the kernel fills when the SRQ is resized.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_modify_srq_cmd {
    pub mmap_info_addr: u64,
}
assert_layout!(rxe_modify_srq_cmd, size = 8, align = 8, mmap_info_addr = 0);

/// `struct rxe_queue_buf` (384-byte header): the start of every mmapped rxe
/// queue (SQ, RQ, SRQ, CQ). Element `i` is at `384 + (i << log2_elem_size)`.
/// Indices are stored masked (`& index_mask`); empty is `prod == cons`, full
/// is `((prod + 1) & mask) == cons`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct rxe_queue_buf {
    /// Element stride is `1 << log2_elem_size`; always use it, never a `size_of`.
    pub log2_elem_size: u32,
    pub index_mask: u32,
    pub pad_1: [u32; 30],
    /// Own cache line. Owner: user for SQ/RQ/SRQ, kernel for CQ.
    pub producer_index: u32,
    pub pad_2: [u32; 31],
    /// Own cache line. Owner: kernel for SQ/RQ/SRQ, user for CQ.
    pub consumer_index: u32,
    pub pad_3: [u32; 31],
    /// Start of the element array.
    pub data: [u8; 0],
}
assert_layout!(
    rxe_queue_buf,
    size = 384,
    align = 4,
    log2_elem_size = 0,
    index_mask = 4,
    pad_1 = 8,
    producer_index = 128,
    pad_2 = 132,
    consumer_index = 256,
    pad_3 = 260,
    data = 384
);
