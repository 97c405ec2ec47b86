//! The mlx5 64-byte completion queue entry (`struct mlx5_cqe64`, and its
//! error view `struct mlx5_err_cqe`; rdma-core `mlx5dv.h`, providers.md
//! §B.8) and the pure parts of decoding it: opcodes, ownership predicate,
//! syndrome → [`WcStatus`], requester opcode → [`WcOpcode`].
//!
//! A CQE is only ever looked at as a *copy* (`cq.rs` reads the owner byte
//! with a volatile load, then copies the entry or the fields it needs
//! out); this file has no `unsafe`.

use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::mlx5::seg::opcode as wqe_op;
use crate::wr::{WcOpcode, WcStatus};

/// Size of the CQEs this provider creates (`cqe_size` = 64).
pub const CQE_SIZE: usize = 64;
/// Byte offset of `op_own` in a 64-byte CQE.
pub const OP_OWN: usize = 63;
/// `op_own` of a fresh entry: opcode INVALID (15), owner 0.
pub const OP_OWN_INIT: u8 = 0xf0;

/// CQE opcodes (`MLX5_CQE_*`, the top nibble of `op_own`).
pub mod opcode {
    /// `MLX5_CQE_REQ`: a send WQE completed.
    pub const REQ: u8 = 0;
    /// `MLX5_CQE_RESP_WR_IMM`: an RDMA WRITE with immediate consumed a receive.
    pub const RESP_WR_IMM: u8 = 1;
    /// `MLX5_CQE_RESP_SEND`.
    pub const RESP_SEND: u8 = 2;
    /// `MLX5_CQE_RESP_SEND_IMM`.
    pub const RESP_SEND_IMM: u8 = 3;
    /// `MLX5_CQE_RESP_SEND_INV`.
    pub const RESP_SEND_INV: u8 = 4;
    /// `MLX5_CQE_RESIZE_CQ` (internal; skipped).
    pub const RESIZE_CQ: u8 = 5;
    /// `MLX5_CQE_NO_PACKET` (tag matching; skipped).
    pub const NO_PACKET: u8 = 6;
    /// `MLX5_CQE_SIG_ERR` (signature offload; skipped).
    pub const SIG_ERR: u8 = 12;
    /// `MLX5_CQE_REQ_ERR`.
    pub const REQ_ERR: u8 = 13;
    /// `MLX5_CQE_RESP_ERR`.
    pub const RESP_ERR: u8 = 14;
    /// `MLX5_CQE_INVALID`: never written by the HCA; the initial fill.
    pub const INVALID: u8 = 15;
}

/// Error syndromes (`MLX5_CQE_SYNDROME_*`, byte 55 of an error CQE).
pub mod syndrome {
    /// `LOCAL_LENGTH_ERR`.
    pub const LOCAL_LENGTH_ERR: u8 = 0x01;
    /// `LOCAL_QP_OP_ERR`.
    pub const LOCAL_QP_OP_ERR: u8 = 0x02;
    /// `LOCAL_PROT_ERR`.
    pub const LOCAL_PROT_ERR: u8 = 0x04;
    /// `WR_FLUSH_ERR`.
    pub const WR_FLUSH_ERR: u8 = 0x05;
    /// `MW_BIND_ERR`.
    pub const MW_BIND_ERR: u8 = 0x06;
    /// `BAD_RESP_ERR`.
    pub const BAD_RESP_ERR: u8 = 0x10;
    /// `LOCAL_ACCESS_ERR`.
    pub const LOCAL_ACCESS_ERR: u8 = 0x11;
    /// `REMOTE_INVAL_REQ_ERR`.
    pub const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
    /// `REMOTE_ACCESS_ERR`.
    pub const REMOTE_ACCESS_ERR: u8 = 0x13;
    /// `REMOTE_OP_ERR`.
    pub const REMOTE_OP_ERR: u8 = 0x14;
    /// `TRANSPORT_RETRY_EXC_ERR`.
    pub const TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
    /// `RNR_RETRY_EXC_ERR`.
    pub const RNR_RETRY_EXC_ERR: u8 = 0x16;
    /// `REMOTE_ABORTED_ERR`.
    pub const REMOTE_ABORTED_ERR: u8 = 0x22;
}

/// `struct mlx5_cqe64` (64 bytes). For an error CQE (`REQ_ERR`/`RESP_ERR`)
/// bytes 54 and 55 are `vendor_err_synd` and `syndrome` (they overlay the
/// timestamp) and byte 56 starts `s_wqe_opcode_qpn`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Cqe64 {
    rsvd0: [u8; 2],
    wqe_id: U16,
    rsvd4: [u8; 13],
    ml_path: u8,
    rsvd18: [u8; 4],
    slid: U16,
    flags_rqpn: U32,
    hds_ip_ext: u8,
    l4_hdr_type_etc: u8,
    vlan_info: U16,
    srqn_uidx: U32,
    imm_inval_pkey: U32,
    app: u8,
    app_op: u8,
    app_info: U16,
    byte_cnt: U32,
    timestamp: U64,
    sop_drop_qpn: U32,
    wqe_counter: U16,
    signature: u8,
    op_own: u8,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Cqe64>() == 64);
    assert!(offset_of!(Cqe64, wqe_id) == 2);
    assert!(offset_of!(Cqe64, ml_path) == 17);
    assert!(offset_of!(Cqe64, slid) == 22);
    assert!(offset_of!(Cqe64, flags_rqpn) == 24);
    assert!(offset_of!(Cqe64, hds_ip_ext) == 28);
    assert!(offset_of!(Cqe64, l4_hdr_type_etc) == 29);
    assert!(offset_of!(Cqe64, vlan_info) == 30);
    assert!(offset_of!(Cqe64, srqn_uidx) == 32);
    assert!(offset_of!(Cqe64, imm_inval_pkey) == 36);
    assert!(offset_of!(Cqe64, app) == 40);
    assert!(offset_of!(Cqe64, byte_cnt) == 44);
    assert!(offset_of!(Cqe64, timestamp) == 48);
    assert!(offset_of!(Cqe64, sop_drop_qpn) == 56);
    assert!(offset_of!(Cqe64, wqe_counter) == 60);
    assert!(offset_of!(Cqe64, signature) == 62);
    assert!(offset_of!(Cqe64, op_own) == OP_OWN);
};

impl Cqe64 {
    /// CQE opcode (`op_own >> 4`).
    #[inline(always)]
    pub fn opcode(&self) -> u8 {
        self.op_own >> 4
    }
    /// Owner bit (`op_own & 1`).
    #[inline(always)]
    pub fn owner(&self) -> u8 {
        self.op_own & 1
    }
    /// Solicited-event bit (`op_own & 2`).
    pub fn solicited(&self) -> bool {
        self.op_own & 2 != 0
    }
    /// Raw `op_own`.
    pub fn op_own(&self) -> u8 {
        self.op_own
    }
    /// QP number (`sop_drop_qpn & 0xffffff`).
    #[inline(always)]
    pub fn qpn(&self) -> u32 {
        self.sop_drop_qpn.get() & 0x00ff_ffff
    }
    /// Requester CQEs: the send WQE opcode (`sop_drop_qpn >> 24`; for error
    /// CQEs `s_wqe_opcode`).
    #[inline(always)]
    pub fn send_opcode(&self) -> u8 {
        (self.sop_drop_qpn.get() >> 24) as u8
    }
    /// `wqe_counter`: the WQE index of the completed send WQE (first
    /// WQEBB), of the receive WQE (counter), or the SRQ WQE index.
    #[inline(always)]
    pub fn wqe_counter(&self) -> u16 {
        self.wqe_counter.get()
    }
    /// `srqn_uidx & 0xffffff`: the user index (CQE version 1) or the SRQ
    /// number (version 0, responder CQEs of SRQ receives).
    #[inline(always)]
    pub fn srqn_uidx(&self) -> u32 {
        self.srqn_uidx.get() & 0x00ff_ffff
    }
    /// `byte_cnt`.
    #[inline(always)]
    pub fn byte_cnt(&self) -> u32 {
        self.byte_cnt.get()
    }
    /// `imm_inval_pkey` as a host-order number: the immediate (sent in
    /// network order), the invalidated rkey, or the P_Key index in the low
    /// 16 bits.
    #[inline(always)]
    pub fn imm_inval_pkey(&self) -> u32 {
        self.imm_inval_pkey.get()
    }
    /// Remote QPN (`flags_rqpn & 0xffffff`).
    #[inline(always)]
    pub fn src_qp(&self) -> u32 {
        self.flags_rqpn.get() & 0x00ff_ffff
    }
    /// Service level (`flags_rqpn >> 24 & 0xf`).
    #[inline(always)]
    pub fn sl(&self) -> u8 {
        ((self.flags_rqpn.get() >> 24) & 0xf) as u8
    }
    /// GRH-present field (`flags_rqpn >> 28 & 3`; non-zero: a GRH is in the buffer).
    #[inline(always)]
    pub fn grh(&self) -> u8 {
        ((self.flags_rqpn.get() >> 28) & 3) as u8
    }
    /// Source LID.
    #[inline(always)]
    pub fn slid(&self) -> u16 {
        self.slid.get()
    }
    /// DLID path bits (`ml_path & 0x7f`).
    #[inline(always)]
    pub fn dlid_path_bits(&self) -> u8 {
        self.ml_path & 0x7f
    }
    /// `l4_hdr_type_etc >> 2 & 3`: the L3 header type.
    pub fn l3_hdr_type(&self) -> u8 {
        (self.l4_hdr_type_etc >> 2) & 3
    }
    /// `hds_ip_ext` (L2/L3/L4-OK bits).
    pub fn hds_ip_ext(&self) -> u8 {
        self.hds_ip_ext
    }
    /// Error CQEs: `syndrome` (byte 55).
    #[inline(always)]
    pub fn syndrome(&self) -> u8 {
        self.timestamp.get() as u8
    }
    /// Error CQEs: `vendor_err_synd` (byte 54).
    #[inline(always)]
    pub fn vendor_err_synd(&self) -> u8 {
        (self.timestamp.get() >> 8) as u8
    }
    /// Timestamp (success CQEs).
    pub fn timestamp(&self) -> u64 {
        self.timestamp.get()
    }
}

/// The ownership test of rdma-core's `get_sw_cqe`: the entry at consumer
/// index `ci` belongs to software iff its opcode is not INVALID and its
/// owner bit equals the wrap parity of `ci` (`ci & ncqe != 0`). `ncqe` is a
/// power of two.
#[inline(always)]
pub fn sw_owned(op_own: u8, ci: u32, ncqe: u32) -> bool {
    (op_own >> 4) != opcode::INVALID && u32::from(op_own & 1) == u32::from(ci & ncqe != 0)
}

/// `mlx5_handle_error_cqe`: syndrome → `ibv_wc_status`.
#[inline]
pub fn status_of(syndrome: u8) -> WcStatus {
    use syndrome::*;
    match syndrome {
        LOCAL_LENGTH_ERR => WcStatus::LOC_LEN_ERR,
        LOCAL_QP_OP_ERR => WcStatus::LOC_QP_OP_ERR,
        LOCAL_PROT_ERR => WcStatus::LOC_PROT_ERR,
        WR_FLUSH_ERR => WcStatus::WR_FLUSH_ERR,
        MW_BIND_ERR => WcStatus::MW_BIND_ERR,
        BAD_RESP_ERR => WcStatus::BAD_RESP_ERR,
        LOCAL_ACCESS_ERR => WcStatus::LOC_ACCESS_ERR,
        REMOTE_INVAL_REQ_ERR => WcStatus::REM_INV_REQ_ERR,
        REMOTE_ACCESS_ERR => WcStatus::REM_ACCESS_ERR,
        REMOTE_OP_ERR => WcStatus::REM_OP_ERR,
        TRANSPORT_RETRY_EXC_ERR => WcStatus::RETRY_EXC_ERR,
        RNR_RETRY_EXC_ERR => WcStatus::RNR_RETRY_EXC_ERR,
        REMOTE_ABORTED_ERR => WcStatus::REM_ABORT_ERR,
        _ => WcStatus::GENERAL_ERR,
    }
}

/// `handle_good_req`: the send WQE opcode of a requester CQE → the work
/// completion opcode, whether it carries `WITH_IMM`, and whether `byte_len`
/// comes from the CQE (READ), is 8 (atomics) or is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqKind {
    /// Completion opcode.
    pub opcode: WcOpcode,
    /// `IBV_WC_WITH_IMM`.
    pub with_imm: bool,
    /// Byte length rule.
    pub len: ReqLen,
}

/// Where a requester completion's `byte_len` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReqLen {
    /// 0 (sends, writes: libibverbs leaves it undefined; we report 0).
    Zero,
    /// `byte_cnt` of the CQE (RDMA READ).
    Cqe,
    /// 8 (atomics).
    Eight,
}

/// See [`ReqKind`]. Unknown opcodes (UMR, NOP, ...) keep their raw value in `WcOpcode`.
#[inline(always)]
pub const fn req_kind(send_opcode: u8) -> ReqKind {
    let (opcode, with_imm, len) = match send_opcode {
        wqe_op::SEND | wqe_op::SEND_INVAL => (WcOpcode::SEND, false, ReqLen::Zero),
        wqe_op::SEND_IMM => (WcOpcode::SEND, true, ReqLen::Zero),
        wqe_op::RDMA_WRITE => (WcOpcode::RDMA_WRITE, false, ReqLen::Zero),
        wqe_op::RDMA_WRITE_IMM => (WcOpcode::RDMA_WRITE, true, ReqLen::Zero),
        wqe_op::RDMA_READ => (WcOpcode::RDMA_READ, false, ReqLen::Cqe),
        wqe_op::ATOMIC_CS => (WcOpcode::COMP_SWAP, false, ReqLen::Eight),
        wqe_op::ATOMIC_FA => (WcOpcode::FETCH_ADD, false, ReqLen::Eight),
        o => (WcOpcode(o as u32), false, ReqLen::Zero),
    };
    ReqKind { opcode, with_imm, len }
}
