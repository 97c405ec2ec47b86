//! `include/uapi/rdma/siw-abi.h`: the soft-iWARP (siw) driver ABI: the
//! create-response udata (the mmap keys of the rings the kernel allocates),
//! `REG_MR`'s udata, and the layouts of the send, receive and completion
//! ring entries and the CQ control word that userspace and the kernel share.
//!
//! Synced from rdma-core `kernel-headers/rdma/siw-abi.h` (v44.0; unchanged
//! since). Layouts match `shared/reference/rdmacm.md` §B.2 and §B.3
//! (`siw_sqe` 120, `siw_rqe` 112, `siw_cqe` 32, `siw_cq_ctrl` 8), the same
//! on kernels 6.1 and 6.12.
//!
//! The header's unions are flattened: `siw_sqe.raddr` is also `base_mr`,
//! and its `sge` array also `access` (both kernel-internal variants);
//! `siw_cqe.imm_data` is also `inval_stag`, and `qp_id` also the kernel's
//! `base_qp` pointer (only ever written for CQs of kernel users).
#![allow(missing_docs)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `RDMA_DRIVER_SIW` (`ib_user_ioctl_verbs.h`, `enum rdma_driver_id`): the
/// driver id netlink and ioctl headers carry for siw.
pub use crate::ib_user_ioctl_verbs::RDMA_DRIVER_SIW;

/// `SIW_NODE_DESC_COMMON`: the node description siw devices report.
pub const SIW_NODE_DESC_COMMON: &str = "Software iWARP stack";
/// `SIW_ABI_VERSION`: the driver ABI siw reports in
/// `/sys/class/infiniband_verbs/uverbsN/abi_version` (rdma-core accepts 1..=1).
pub const SIW_ABI_VERSION: u32 = 1;
/// `SIW_MAX_SGE`: SGEs per send or receive entry.
pub const SIW_MAX_SGE: usize = 6;
/// `SIW_UOBJ_MAX_KEY`: the largest mmap key. `u64`: keys are `u64` fields.
pub const SIW_UOBJ_MAX_KEY: u64 = 0x08FFFF;
/// `SIW_INVAL_UOBJ_KEY`: the key of a ring the kernel could not offer for
/// mmap (a failed create). `u64`, as the key fields.
pub const SIW_INVAL_UOBJ_KEY: u64 = SIW_UOBJ_MAX_KEY + 1;
/// `SIW_MAX_INLINE` (`sizeof(struct siw_sge) * (SIW_MAX_SGE - 1)`, 80):
/// inline bytes one send entry holds, in the place of `sge[1..]`.
pub const SIW_MAX_INLINE: u32 = (core::mem::size_of::<siw_sge>() * (SIW_MAX_SGE - 1)) as u32;

/// `struct siw_uresp_create_cq`: `CREATE_CQ`'s driver data out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_uresp_create_cq {
    pub cq_id: u32,
    /// Entries in the ring (a power of two).
    pub num_cqe: u32,
    /// mmap offset of the ring (`num_cqe` × 32 bytes, then a `siw_cq_ctrl`).
    pub cq_key: u64,
}
assert_layout!(siw_uresp_create_cq, size = 16, align = 8, cq_id = 0, num_cqe = 4, cq_key = 8);

/// `struct siw_uresp_create_qp`: `CREATE_QP`'s driver data out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_uresp_create_qp {
    pub qp_id: u32,
    /// Send entries (a power of two).
    pub num_sqe: u32,
    /// Receive entries (a power of two; 0 with an SRQ).
    pub num_rqe: u32,
    pub pad: u32,
    /// mmap offset of the send ring (`num_sqe` × 120 bytes).
    pub sq_key: u64,
    /// mmap offset of the receive ring (`num_rqe` × 112 bytes).
    pub rq_key: u64,
}
assert_layout!(
    siw_uresp_create_qp,
    size = 32,
    align = 8,
    qp_id = 0,
    num_sqe = 4,
    num_rqe = 8,
    pad = 12,
    sq_key = 16,
    rq_key = 24
);

/// `struct siw_ureq_reg_mr`: `REG_MR`'s driver data in (required: a
/// shorter one gets `EINVAL`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_ureq_reg_mr {
    /// ORed into the low byte of both keys.
    pub stag_key: u8,
    pub reserved: [u8; 3],
    pub pad: u32,
}
assert_layout!(siw_ureq_reg_mr, size = 8, align = 4, stag_key = 0, reserved = 1, pad = 4);

/// `struct siw_uresp_reg_mr`: `REG_MR`'s driver data out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_uresp_reg_mr {
    pub stag: u32,
    pub pad: u32,
}
assert_layout!(siw_uresp_reg_mr, size = 8, align = 4, stag = 0, pad = 4);

/// `struct siw_uresp_create_srq`: `CREATE_SRQ`'s driver data out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_uresp_create_srq {
    /// Entries in the ring (a power of two).
    pub num_rqe: u32,
    pub pad: u32,
    /// mmap offset of the ring (`num_rqe` × 112 bytes).
    pub srq_key: u64,
}
assert_layout!(siw_uresp_create_srq, size = 16, align = 8, num_rqe = 0, pad = 4, srq_key = 8);

/// `struct siw_uresp_alloc_ctx`: `GET_CONTEXT`'s driver data out
/// (required: a shorter buffer gets `EINVAL`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_uresp_alloc_ctx {
    pub dev_id: u32,
    pub pad: u32,
}
assert_layout!(siw_uresp_alloc_ctx, size = 8, align = 4, dev_id = 0, pad = 4);

// enum siw_opcode (u8 in the ring entries)
pub const SIW_OP_WRITE: u32 = 0;
pub const SIW_OP_READ: u32 = 1;
pub const SIW_OP_READ_LOCAL_INV: u32 = 2;
pub const SIW_OP_SEND: u32 = 3;
pub const SIW_OP_SEND_WITH_IMM: u32 = 4;
pub const SIW_OP_SEND_REMOTE_INV: u32 = 5;
/// Unsupported.
pub const SIW_OP_FETCH_AND_ADD: u32 = 6;
/// Unsupported.
pub const SIW_OP_COMP_AND_SWAP: u32 = 7;
pub const SIW_OP_RECEIVE: u32 = 8;
/// Provider internal.
pub const SIW_OP_READ_RESPONSE: u32 = 9;
/// In-kernel users only.
pub const SIW_OP_INVAL_STAG: u32 = 10;
/// In-kernel users only.
pub const SIW_OP_REG_MR: u32 = 11;
pub const SIW_NUM_OPCODES: u32 = 12;

/// `struct siw_sge`: the same layout as `ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_sge {
    pub laddr: u64,
    pub length: u32,
    pub lkey: u32,
}
assert_layout!(siw_sge, size = 16, align = 8, laddr = 0, length = 8, lkey = 12);

// enum siw_wqe_flags (u16 in siw_sqe/siw_rqe, u8 in siw_cqe)
pub const SIW_WQE_VALID: u32 = 1;
pub const SIW_WQE_INLINE: u32 = 1 << 1;
pub const SIW_WQE_SIGNALLED: u32 = 1 << 2;
pub const SIW_WQE_SOLICITED: u32 = 1 << 3;
pub const SIW_WQE_READ_FENCE: u32 = 1 << 4;
pub const SIW_WQE_REM_INVAL: u32 = 1 << 5;
pub const SIW_WQE_COMPLETED: u32 = 1 << 6;

/// `struct siw_sqe`: one send ring entry. Inline data sits where
/// `sge[1..]` is (byte 40 on), its length in `sge[0].length`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_sqe {
    pub id: u64,
    /// `SIW_WQE_*`; `SIW_WQE_VALID` hands the entry to the kernel.
    pub flags: u16,
    pub num_sge: u8,
    /// `SIW_OP_*`.
    pub opcode: u8,
    pub rkey: u32,
    /// Union with `base_mr` (kernel users' REG_MR).
    pub raddr: u64,
    /// Union with `access: u64` (kernel users' REG_MR).
    pub sge: [siw_sge; SIW_MAX_SGE],
}
assert_layout!(
    siw_sqe,
    size = 120,
    align = 8,
    id = 0,
    flags = 8,
    num_sge = 10,
    opcode = 11,
    rkey = 12,
    raddr = 16,
    sge = 24
);

/// `struct siw_rqe`: one receive (or SRQ) ring entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_rqe {
    pub id: u64,
    /// Exactly `SIW_WQE_VALID` hands the entry to the kernel.
    pub flags: u16,
    pub num_sge: u8,
    /// Kernel use only; ignored if set by userspace.
    pub opcode: u8,
    pub unused: u32,
    pub sge: [siw_sge; SIW_MAX_SGE],
}
assert_layout!(siw_rqe, size = 112, align = 8, id = 0, flags = 8, num_sge = 10, opcode = 11, unused = 12, sge = 16);

// enum siw_notify_flags (siw_cq_ctrl.flags)
pub const SIW_NOTIFY_NOT: u32 = 0;
pub const SIW_NOTIFY_SOLICITED: u32 = 1 << 0;
pub const SIW_NOTIFY_NEXT_COMPLETION: u32 = 1 << 1;
pub const SIW_NOTIFY_MISSED_EVENTS: u32 = 1 << 2;
pub const SIW_NOTIFY_ALL: u32 = SIW_NOTIFY_SOLICITED | SIW_NOTIFY_NEXT_COMPLETION | SIW_NOTIFY_MISSED_EVENTS;

// enum siw_wc_status (u16 in siw_cqe)
pub const SIW_WC_SUCCESS: u32 = 0;
pub const SIW_WC_LOC_LEN_ERR: u32 = 1;
pub const SIW_WC_LOC_PROT_ERR: u32 = 2;
pub const SIW_WC_LOC_QP_OP_ERR: u32 = 3;
pub const SIW_WC_WR_FLUSH_ERR: u32 = 4;
pub const SIW_WC_BAD_RESP_ERR: u32 = 5;
pub const SIW_WC_LOC_ACCESS_ERR: u32 = 6;
pub const SIW_WC_REM_ACCESS_ERR: u32 = 7;
pub const SIW_WC_REM_INV_REQ_ERR: u32 = 8;
pub const SIW_WC_GENERAL_ERR: u32 = 9;
pub const SIW_NUM_WC_STATUS: u32 = 10;

/// `struct siw_cqe`: one completion ring entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_cqe {
    pub id: u64,
    /// `SIW_WQE_VALID` while the entry is the consumer's.
    pub flags: u8,
    /// `SIW_OP_*` of the work request.
    pub opcode: u8,
    /// `SIW_WC_*`.
    pub status: u16,
    pub bytes: u32,
    /// Union with `inval_stag: u32`; always 0 for userspace CQs.
    pub imm_data: u64,
    /// The QP number (union with the kernel's `base_qp` pointer, written
    /// only for kernel users' CQs).
    pub qp_id: u64,
}
assert_layout!(
    siw_cqe,
    size = 32,
    align = 8,
    id = 0,
    flags = 8,
    opcode = 9,
    status = 10,
    bytes = 12,
    imm_data = 16,
    qp_id = 24
);

/// `struct siw_cq_ctrl`: the CQ's arm word, right after the last entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct siw_cq_ctrl {
    /// `SIW_NOTIFY_*`; the kernel clears it when it signals.
    pub flags: u32,
    pub pad: u32,
}
assert_layout!(siw_cq_ctrl, size = 8, align = 4, flags = 0, pad = 4);

// The numbers rdmacm.md §B.2-B.4 and rdma-core's libsiw rely on.
const _: () = {
    assert!(SIW_MAX_INLINE == 80);
    assert!(SIW_INVAL_UOBJ_KEY == 0x09_0000);
    assert!(RDMA_DRIVER_SIW == 18);
};
