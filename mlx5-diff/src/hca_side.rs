//! The fake HCA's view of one library's queues: which send WQEs are
//! outstanding (read from the ring after each post), how far the receive
//! queue and the SRQ's list have been consumed, how many CQEs it wrote. From
//! this it builds the CQE a device would write next.

use std::collections::VecDeque;

use rverbs_mlx5_fake::hca::{self, opcode, Cqe};
use rverbs_mlx5_fake::record;

use crate::scenario::Completion;

/// A send WQE as the HCA parsed it from the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWqe {
    pub index: u16,
    pub opcode: u8,
    pub signaled: bool,
    /// Bytes the data segments name (READ's length; atomics: 8).
    pub bytes: u32,
    /// The WQE's size in 16-byte units (`qpn_ds`'s DS): what the HCA reads.
    pub ds: u32,
    /// The producer index of its first basic block.
    pub start: u32,
}

#[derive(Default)]
pub struct HcaSide {
    /// Send producer index the HCA has seen (basic blocks).
    pub sq_seen: u32,
    pub pending: VecDeque<SendWqe>,
    pub rq_consumed: u32,
    pub srq_head: u16,
    pub cqes: u32,
}

/// Parses the WQEs between the HCA's last look and the doorbell record's
/// producer index. Returns the blocks posted.
///
/// # Safety
/// `qp` must describe a live QP of this process.
pub unsafe fn take_posted(h: &mut HcaSide, qp: &record::Qp) -> Vec<SendWqe> {
    // SAFETY: the caller's contract.
    let pi = unsafe { hca::dbrec(qp.db_addr, 1) } & 0xffff;
    let mut out = Vec::new();
    let mut i = h.sq_seen;
    let mut guard = 0;
    while (i & 0xffff) != pi && guard < 1 << 16 {
        guard += 1;
        // SAFETY: the caller's contract; one block inside the ring.
        let ctrl = unsafe { hca::send_blocks(qp, i, 1) };
        let opmod_idx_opcode = u32::from_be_bytes([ctrl[0], ctrl[1], ctrl[2], ctrl[3]]);
        let ds = u32::from(ctrl[7] & 0x3f);
        let blocks = (ds * 16).div_ceil(64).max(1);
        // SAFETY: as above, the WQE's blocks.
        let wqe = unsafe { hca::send_blocks(qp, i, blocks) };
        let w = SendWqe {
            index: (opmod_idx_opcode >> 8) as u16,
            opcode: opmod_idx_opcode as u8,
            signaled: ctrl[11] & 0x08 != 0,
            bytes: data_bytes(&wqe, ds, opmod_idx_opcode as u8, qp.qp_type),
            ds,
            start: i,
        };
        out.push(w);
        i = i.wrapping_add(blocks);
    }
    h.sq_seen = i;
    h.pending.extend(out.iter().copied());
    out
}

/// The byte count a requester CQE reports: READ's data segments' total,
/// 8 for atomics, else 0.
fn data_bytes(wqe: &[u8], ds: u32, op: u8, qp_type: u8) -> u32 {
    match op {
        0x11 | 0x12 => 8,
        0x10 => {
            // ctrl 16 + raddr 16, then data segments (16 bytes: byte_count, lkey, addr).
            let first = if qp_type == 4 { 16 + 48 } else { 32 };
            let mut total = 0u32;
            let mut off = first;
            while off + 16 <= (ds as usize * 16).min(wqe.len()) {
                total = total.wrapping_add(u32::from_be_bytes([wqe[off], wqe[off + 1], wqe[off + 2], wqe[off + 3]]));
                off += 16;
            }
            total
        }
        _ => 0,
    }
}

/// The next CQE for `c`, or `None` when nothing is outstanding to complete.
///
/// # Safety
/// `qp` (and `srq`) must describe live objects of this process.
pub unsafe fn next_cqe(
    h: &mut HcaSide,
    c: &Completion,
    qp: &record::Qp,
    srq: Option<&record::Srq>,
    cqe_version: u8,
) -> Option<Cqe> {
    // Version 1 names the QP by its user index; version 0 by its number,
    // with the SRQ's number on receives through an SRQ.
    let srqn_uidx = match (cqe_version, srq) {
        (0, Some(s)) => s.srqn,
        (0, None) => 0,
        _ => qp.uidx,
    };
    let mut cqe = Cqe { qpn: qp.qpn, srqn_uidx, ..Default::default() };
    match *c {
        Completion::Send => {
            let w = loop {
                let w = h.pending.pop_front()?;
                if w.signaled {
                    break w;
                }
            };
            if cqe_version == 0 {
                cqe.srqn_uidx = 0;
            }
            cqe.opcode = opcode::REQ;
            cqe.wqe_opcode = w.opcode;
            cqe.wqe_counter = w.index;
            cqe.byte_cnt = w.bytes;
        }
        Completion::Error { requester: true, syndrome, vendor } => {
            let w = h.pending.pop_front()?;
            if cqe_version == 0 {
                cqe.srqn_uidx = 0;
            }
            cqe.opcode = opcode::REQ_ERR;
            cqe.wqe_opcode = w.opcode;
            cqe.wqe_counter = w.index;
            cqe.syndrome = syndrome;
            cqe.vendor_err = vendor;
        }
        Completion::Recv { opcode: op, byte_len, imm, src_qp, grh, scatter } => {
            // SAFETY: forwarded.
            cqe.wqe_counter = unsafe { recv_index(h, srq) };
            cqe.opcode = op;
            cqe.byte_cnt = byte_len;
            cqe.imm_inval_pkey = if op == opcode::RESP_SEND { 0 } else { imm };
            cqe.flags_rqpn = (src_qp & 0xff_ffff) | if grh { 1 << 28 } else { 0 };
            cqe.scatter = scatter;
        }
        Completion::Error { requester: false, syndrome, vendor } => {
            // SAFETY: forwarded.
            cqe.wqe_counter = unsafe { recv_index(h, srq) };
            cqe.opcode = opcode::RESP_ERR;
            cqe.syndrome = syndrome;
            cqe.vendor_err = vendor;
        }
    }
    Some(cqe)
}

/// The receive WQE the HCA consumes: the next in the QP's ring, or the
/// SRQ list's head (then its `next_wqe_index` becomes the head).
///
/// # Safety
/// `srq` must describe a live SRQ of this process.
unsafe fn recv_index(h: &mut HcaSide, srq: Option<&record::Srq>) -> u16 {
    match srq {
        None => {
            let i = h.rq_consumed as u16;
            h.rq_consumed += 1;
            i
        }
        Some(s) => {
            let i = h.srq_head;
            // SAFETY: the caller's contract; WQE `i` is inside the SRQ ring.
            let next = unsafe { hca::read(s.buf_addr + (u64::from(i) << s.wqe_shift) + 2, 2) };
            h.srq_head = u16::from_be_bytes([next[0], next[1]]);
            i
        }
    }
}
