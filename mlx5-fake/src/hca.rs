//! The HCA's side of the queues, from the PRM's layouts (not from rverbs'
//! `mlx5` module): reading the rings and doorbell records the library
//! wrote, and writing completions into its CQ buffer as the device does by
//! DMA. The memory is the library's own, in this process.

use crate::record;

/// CQE opcodes (`op_own >> 4`).
pub mod opcode {
    pub const REQ: u8 = 0;
    pub const RESP_WR_IMM: u8 = 1;
    pub const RESP_SEND: u8 = 2;
    pub const RESP_SEND_IMM: u8 = 3;
    pub const RESP_SEND_INV: u8 = 4;
    pub const REQ_ERR: u8 = 13;
    pub const RESP_ERR: u8 = 14;
}

/// `op_own` bits saying the payload was scattered into the CQE.
pub const INLINE_SCATTER_32: u8 = 0x4;
pub const INLINE_SCATTER_64: u8 = 0x8;

/// A completion as the HCA reports it; every field in host order, written
/// big-endian at its PRM offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// `MLX5_CQE_*` ([`opcode`]).
    pub opcode: u8,
    /// Requester: the send WQE's opcode (`sop_drop_qpn[31:24]`).
    pub wqe_opcode: u8,
    pub qpn: u32,
    /// CQE version 1: the QP's (or SRQ's) user index; version 0: the SRQ number.
    pub srqn_uidx: u32,
    pub wqe_counter: u16,
    pub byte_cnt: u32,
    /// Immediate data / invalidated rkey / P_Key (its bytes as on the wire).
    pub imm_inval_pkey: u32,
    /// Responder: remote QPN (bits 0-23) and flags (bit 28: a GRH arrived).
    pub flags_rqpn: u32,
    pub slid: u16,
    pub ml_path: u8,
    pub l4_hdr_type_etc: u8,
    pub vlan_info: u16,
    /// Error CQEs: the syndrome and the vendor syndrome.
    pub syndrome: u8,
    pub vendor_err: u8,
    /// [`INLINE_SCATTER_32`]/[`INLINE_SCATTER_64`] with the payload, which
    /// starts at the CQE's first byte (64-byte CQEs: the 32 bytes before
    /// this one's for 64; 128-byte CQEs: the first half).
    pub scatter: u8,
    pub data: Vec<u8>,
}

impl Cqe {
    /// The 64-byte CQE, owner bit clear.
    pub fn bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        let err = self.opcode == opcode::REQ_ERR || self.opcode == opcode::RESP_ERR;
        b[22..24].copy_from_slice(&self.slid.to_be_bytes());
        b[17] = self.ml_path;
        b[24..28].copy_from_slice(&self.flags_rqpn.to_be_bytes());
        b[29] = self.l4_hdr_type_etc;
        b[30..32].copy_from_slice(&self.vlan_info.to_be_bytes());
        b[32..36].copy_from_slice(&self.srqn_uidx.to_be_bytes());
        b[36..40].copy_from_slice(&self.imm_inval_pkey.to_be_bytes());
        b[44..48].copy_from_slice(&self.byte_cnt.to_be_bytes());
        if err {
            b[54] = self.vendor_err;
            b[55] = self.syndrome;
        }
        b[56..60].copy_from_slice(&((u32::from(self.wqe_opcode) << 24) | (self.qpn & 0xff_ffff)).to_be_bytes());
        b[60..62].copy_from_slice(&self.wqe_counter.to_be_bytes());
        b[63] = (self.opcode << 4) | self.scatter;
        if self.scatter == INLINE_SCATTER_32 {
            let n = self.data.len().min(32);
            b[..n].copy_from_slice(&self.data[..n]);
        }
        b
    }
}

/// Writes `cqe` as the `count`-th completion of `cq` (counting from 0 since
/// creation): slot `count % entries`, owner bit `(count / entries) & 1`,
/// the owner byte last, after a release fence, as the device's DMA orders it.
///
/// # Safety
/// `cq` must describe a live CQ buffer of this process (the kernel's record
/// of a CQ the library created and has not destroyed).
pub unsafe fn write_cqe(cq: &record::Cq, count: u32, cqe: &Cqe) {
    let slot = u64::from(count & (cq.entries - 1)) * u64::from(cq.cqe_size);
    let owner = ((count / cq.entries) & 1) as u8;
    let base = (cq.buf_addr + slot) as usize as *mut u8;
    let mut b = cqe.bytes();
    b[63] |= owner;
    // A 128-byte CQE holds the 64-byte one in its second half; a 64-byte
    // payload scattered to it fills the first half.
    let off = if cq.cqe_size == 128 { 64 } else { 0 };
    // SAFETY: the caller's contract: `slot + cqe_size` lies inside the CQ
    // buffer the library registered with the kernel.
    unsafe {
        if cq.cqe_size == 128 && cqe.scatter == INLINE_SCATTER_64 {
            let n = cqe.data.len().min(64);
            std::ptr::copy_nonoverlapping(cqe.data.as_ptr(), base, n);
        }
        std::ptr::copy_nonoverlapping(b.as_ptr(), base.add(off), 63);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        std::ptr::write_volatile(base.add(off + 63), b[63]);
    }
}

/// Copies `len` bytes at `addr` of this process.
///
/// # Safety
/// `addr..addr + len` must be readable memory of this process (a queue
/// buffer, a doorbell record or a UAR page the kernel's record names).
pub unsafe fn read(addr: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: the caller's contract; `v` is our own buffer.
    unsafe { std::ptr::copy_nonoverlapping(addr as usize as *const u8, v.as_mut_ptr(), len) };
    v
}

/// The big-endian 32-bit word `i` of a doorbell record.
///
/// # Safety
/// As [`read`], for the 4 bytes at `db_addr + 4 * i`.
pub unsafe fn dbrec(db_addr: u64, i: u64) -> u32 {
    // SAFETY: forwarded.
    let b = unsafe { read(db_addr + 4 * i, 4) };
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// `n` 64-byte basic blocks of a QP's send queue from block `from` on,
/// wrapping at the ring's end.
///
/// # Safety
/// `qp` must describe a live QP buffer of this process.
pub unsafe fn send_blocks(qp: &record::Qp, from: u32, n: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(n as usize * 64);
    for i in 0..n {
        let idx = (from.wrapping_add(i) & (qp.sq_wqe_cnt - 1)) as u64;
        // SAFETY: the caller's contract; `idx` is inside the send ring.
        v.extend(unsafe { read(qp.buf_addr + qp.sq_offset + idx * 64, 64) });
    }
    v
}

/// Receive WQE `idx` (mod the ring) of a QP's receive queue.
///
/// # Safety
/// `qp` must describe a live QP buffer of this process with a receive queue.
pub unsafe fn recv_wqe(qp: &record::Qp, idx: u32) -> Vec<u8> {
    let stride = 1u64 << qp.rq_wqe_shift;
    let i = u64::from(idx & (qp.rq_wqe_cnt - 1));
    // SAFETY: the caller's contract; `i` is inside the receive ring.
    unsafe { read(qp.buf_addr + i * stride, stride as usize) }
}
