//! siw's ring entries (`siw-abi.h`, rdmacm.md §B.3): the send and receive
//! entries we write, the completion entries we read, the checks a request
//! passes first, and the decoding of a completion into the neutral [`Wc`].
//!
//! Every entry is written through raw pointers at the header's offsets
//! (asserted against `rverbs_uapi::siw_abi` below), its `flags` word last
//! and atomically: that store hands the entry to the kernel.

use core::ptr;
use std::sync::atomic::{AtomicU16, AtomicU8, Ordering};

use rverbs_uapi::siw_abi::{self as abi, siw_cqe, siw_rqe, siw_sqe};

use crate::wr::{PostErrorKind, RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcFlags, WcOpcode, WcStatus};

/// Bytes of a send entry.
pub const SQE_LEN: usize = size_of::<siw_sqe>();
/// Bytes of a receive entry.
pub const RQE_LEN: usize = size_of::<siw_rqe>();
/// Bytes of a completion entry.
pub const CQE_LEN: usize = size_of::<siw_cqe>();
/// SGEs an entry holds.
pub const MAX_SGE: u32 = abi::SIW_MAX_SGE as u32;
/// Inline bytes a send entry holds.
pub const MAX_INLINE: u32 = abi::SIW_MAX_INLINE;

// The offsets the encoders use, checked against the uapi mirror.
const FLAGS: usize = 8;
const NUM_SGE: usize = 10;
const SQ_RKEY: usize = 12;
const SQ_RADDR: usize = 16;
const SQ_SGE: usize = 24;
/// Inline data: in the place of `sge[1..]`.
const SQ_INLINE: usize = SQ_SGE + 16;
const RQ_SGE: usize = 16;
/// `siw_sqe.opcode`.
const SQ_OPCODE: usize = 11;
const CQ_OPCODE: usize = 9;
const CQ_STATUS: usize = 10;
const CQ_BYTES: usize = 12;
const CQ_QP_ID: usize = 24;
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(siw_sqe, flags) == FLAGS && offset_of!(siw_rqe, flags) == FLAGS);
    assert!(offset_of!(siw_cqe, flags) == FLAGS);
    assert!(offset_of!(siw_sqe, num_sge) == NUM_SGE && offset_of!(siw_rqe, num_sge) == NUM_SGE);
    assert!(offset_of!(siw_sqe, opcode) == SQ_OPCODE);
    assert!(offset_of!(siw_sqe, id) == 0 && offset_of!(siw_rqe, id) == 0);
    assert!(offset_of!(siw_sqe, rkey) == SQ_RKEY && offset_of!(siw_sqe, raddr) == SQ_RADDR);
    assert!(offset_of!(siw_sqe, sge) == SQ_SGE && offset_of!(siw_rqe, sge) == RQ_SGE);
    assert!(offset_of!(siw_cqe, opcode) == CQ_OPCODE && offset_of!(siw_cqe, status) == CQ_STATUS);
    assert!(offset_of!(siw_cqe, bytes) == CQ_BYTES && offset_of!(siw_cqe, qp_id) == CQ_QP_ID);
    assert!(SQ_INLINE + MAX_INLINE as usize == SQE_LEN);
    // `Sge` is `ibv_sge` is `siw_sge`: an SGE list is copied as it is.
    assert!(size_of::<Sge<'static>>() == size_of::<abi::siw_sge>());
};

/// `SIW_WQE_VALID` in a `u16` entry flags word.
pub const VALID: u16 = abi::SIW_WQE_VALID as u16;

/// The `flags` word of a send or receive entry.
///
/// # Safety
/// `slot` is an entry of a live ring (`SQE_LEN` or `RQE_LEN` bytes, 8-aligned).
#[inline(always)]
pub unsafe fn wqe_flags<'a>(slot: *mut u8) -> &'a AtomicU16 {
    // SAFETY: bytes 8..10 of the entry, 2-aligned; the kernel accesses them
    // only as a whole `u16` (READ_ONCE / smp_store_mb), and so do we.
    unsafe { AtomicU16::from_ptr(slot.add(FLAGS).cast::<u16>()) }
}

/// The `flags` byte of a completion entry.
///
/// # Safety
/// `slot` is an entry of a live CQ ring (`CQE_LEN` bytes, 8-aligned).
#[inline(always)]
pub unsafe fn cqe_flags<'a>(slot: *mut u8) -> &'a AtomicU8 {
    // SAFETY: byte 8 of the entry; the kernel accesses it only as a whole
    // `u8` (READ_ONCE / WRITE_ONCE), and so do we.
    unsafe { AtomicU8::from_ptr(slot.add(FLAGS)) }
}

/// Writes `v` at byte offset `off` of an entry.
///
/// # Safety
/// `dst + off .. + size_of::<T>()` lies inside an entry we own (its flags
/// say it is not the kernel's), outside its flags word.
#[inline(always)]
unsafe fn put<T: Copy>(dst: *mut u8, off: usize, v: T) {
    // SAFETY: forwarded; the fields are naturally aligned in an 8-aligned
    // entry, but unaligned stores cost nothing more on the targets we build.
    unsafe { ptr::write_unaligned(dst.add(off).cast::<T>(), v) }
}

/// Reads a `T` at byte offset `off` of an entry.
///
/// # Safety
/// As [`put`], for reading an entry the kernel handed us.
#[inline(always)]
unsafe fn get<T: Copy>(src: *const u8, off: usize) -> T {
    // SAFETY: forwarded.
    unsafe { ptr::read_unaligned(src.add(off).cast::<T>()) }
}

/// The limits a send queue checks requests against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendLimits {
    /// SGEs per request (at most [`MAX_SGE`]).
    pub max_sge: u32,
    /// Inline bytes per request (at most [`MAX_INLINE`]).
    pub max_inline: u32,
    /// Every request is signalled (`sq_sig_all`).
    pub sig_all: bool,
}

impl SendLimits {
    /// `max_sge` and `max_inline` clamped to what an entry holds.
    pub fn clamped(self) -> Self {
        SendLimits { max_sge: self.max_sge.min(MAX_SGE), max_inline: self.max_inline.min(MAX_INLINE), ..self }
    }
}

/// A checked send request: what goes into its entry besides the SGEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendEnc {
    /// `SIW_OP_*`.
    pub opcode: u8,
    /// `siw_sqe.flags`, `SIW_WQE_VALID` included.
    pub flags: u16,
    /// `rkey`: the remote key, or the key a SEND_WITH_INV invalidates.
    pub rkey: u32,
    /// `raddr`.
    pub raddr: u64,
    /// Bytes the SGEs hold.
    pub total: u32,
}

/// Checks a send request against siw's rules (rdmacm.md §B.3-B.5,
/// `siw_activate_tx_from_sq`) and `lim`: RC only, so no destination; SEND,
/// SEND_WITH_INV, RDMA WRITE and RDMA READ only (siw has no immediate
/// data, no atomics, no memory windows: `OpcodeNotSupported`); inline
/// only for SEND and WRITE, up to `max_inline` bytes; a READ takes one SGE
/// and no fence (the kernel would refuse it when it starts the request,
/// and the entry would stay posted).
#[inline]
pub fn check_send(wr: &SendWr<'_>, lim: &SendLimits) -> Result<SendEnc, PostErrorKind> {
    if wr.ud.is_some() {
        return Err(PostErrorKind::BadDestination);
    }
    let (opcode, rkey, raddr) = match wr.op {
        SendOp::Send => (abi::SIW_OP_SEND, 0, 0),
        SendOp::RdmaWrite(r) => (abi::SIW_OP_WRITE, r.rkey, r.addr),
        SendOp::RdmaRead(r) => (abi::SIW_OP_READ, r.rkey, r.addr),
        SendOp::SendWithInv(k) => (abi::SIW_OP_SEND_REMOTE_INV, k, 0),
        _ => return Err(PostErrorKind::OpcodeNotSupported),
    };
    let total: u64 = match wr.sgl {
        [s] => u64::from(s.length),
        sgl => sgl.iter().map(|s| u64::from(s.length)).sum(),
    };
    if total > u64::from(u32::MAX) {
        return Err(PostErrorKind::TooLong);
    }
    let inline = wr.flags.contains(SendFlags::INLINE);
    if inline {
        if !matches!(wr.op, SendOp::Send | SendOp::RdmaWrite(_)) {
            return Err(PostErrorKind::OpcodeNotSupported);
        }
        if total > u64::from(lim.max_inline) {
            return Err(PostErrorKind::InlineTooLong { given: total, max: lim.max_inline });
        }
    } else {
        let max = if opcode == abi::SIW_OP_READ { lim.max_sge.min(1) } else { lim.max_sge };
        if wr.sgl.len() > max as usize {
            return Err(PostErrorKind::TooManySge { given: wr.sgl.len(), max });
        }
    }
    let mut flags = VALID;
    if inline {
        flags |= abi::SIW_WQE_INLINE as u16;
    }
    if wr.flags.contains(SendFlags::SIGNALED) || lim.sig_all {
        flags |= abi::SIW_WQE_SIGNALLED as u16;
    }
    if wr.flags.contains(SendFlags::SOLICITED) {
        flags |= abi::SIW_WQE_SOLICITED as u16;
    }
    if wr.flags.contains(SendFlags::FENCE) {
        if opcode == abi::SIW_OP_READ {
            return Err(PostErrorKind::OpcodeNotSupported);
        }
        flags |= abi::SIW_WQE_READ_FENCE as u16;
    }
    Ok(SendEnc { opcode: opcode as u8, flags, rkey, raddr, total: total as u32 })
}

/// Writes the send entry of `wr` (checked: `enc`) into `slot`, flags last
/// with Release: every field is written before the kernel sees `VALID`.
///
/// # Safety
/// `slot` is a whole `SQE_LEN`-byte entry of a live ring whose flags we
/// found clear (ours), and `enc` is what [`check_send`] returned for `wr`
/// with limits no larger than an entry holds. For an `INLINE` request,
/// every SGE of non-zero length names `length` bytes this process may read.
#[inline]
pub unsafe fn write_sqe(slot: *mut u8, wr: &SendWr<'_>, enc: &SendEnc) {
    // SAFETY: every `put` is at an offset inside the 120-byte entry, outside its
    // flags word; the entry is ours (contract).
    unsafe {
        put(slot, 0, wr.wr_id);
        put(slot, SQ_RKEY, enc.rkey);
        put(slot, SQ_RADDR, enc.raddr);
    }
    let num_sge = if enc.flags & abi::SIW_WQE_INLINE as u16 != 0 {
        let mut at = SQ_INLINE;
        for s in wr.sgl.iter().filter(|s| s.length != 0) {
            let n = s.length as usize;
            // SAFETY: the SGE's bytes are readable (contract); the copy ends
            // at most `total <= MAX_INLINE` bytes after SQ_INLINE, inside the
            // entry (asserted above), which the kernel does not touch now.
            unsafe { ptr::copy_nonoverlapping(s.addr as usize as *const u8, slot.add(at), n) };
            at += n;
        }
        // SAFETY: `sge[0]` of the entry: its address and key the kernel
        // replaces, its length says how many inline bytes follow.
        unsafe {
            put(slot, SQ_SGE, 0u64);
            put(slot, SQ_SGE + 8, enc.total);
            put(slot, SQ_SGE + 12, 0u32);
        }
        u8::from(enc.total != 0)
    } else if wr.sgl.is_empty() && enc.opcode == abi::SIW_OP_READ as u8 {
        // The kernel reads `sge[0]` of every READ: a zero-length one.
        // SAFETY: `sge[0]` of the entry.
        unsafe { put(slot, SQ_SGE, [0u64; 2]) };
        0
    } else {
        // SAFETY: `check_send` kept the list within `max_sge <= MAX_SGE`
        // entries, which the entry's `sge[6]` holds; `Sge` has
        // `siw_sge`'s layout.
        unsafe {
            ptr::copy_nonoverlapping(wr.sgl.as_ptr().cast::<u8>(), slot.add(SQ_SGE), size_of_val(wr.sgl));
        }
        wr.sgl.len() as u8
    };
    // SAFETY: `num_sge` and `opcode`, bytes 10 and 11.
    unsafe { put(slot, NUM_SGE, [num_sge, enc.opcode]) };
    // Release: the fields above are written before the kernel, which tests
    // VALID before it copies the entry, can see the flags.
    // SAFETY: an entry of a live ring (contract).
    unsafe { wqe_flags(slot) }.store(enc.flags, Ordering::Release);
}

/// Checks a receive request against `max_sge` SGEs: its total length.
#[inline]
pub fn check_recv(wr: &RecvWr<'_>, max_sge: u32) -> Result<(), PostErrorKind> {
    if wr.sgl.len() > max_sge as usize {
        return Err(PostErrorKind::TooManySge { given: wr.sgl.len(), max: max_sge });
    }
    if wr.sgl.iter().map(|s| u64::from(s.length)).sum::<u64>() > u64::from(u32::MAX) {
        return Err(PostErrorKind::TooLong);
    }
    Ok(())
}

/// Writes the receive entry of `wr` into `slot`, then its flags: exactly
/// `VALID` (the kernel takes an entry only if its flags equal `VALID`),
/// with Release.
///
/// # Safety
/// `slot` is a whole `RQE_LEN`-byte entry of a live ring whose flags we
/// found clear, and `wr` passed [`check_recv`] with `max_sge <= MAX_SGE`.
#[inline]
pub unsafe fn write_rqe(slot: *mut u8, wr: &RecvWr<'_>) {
    // SAFETY: offsets inside the 112-byte entry, outside its flags word;
    // the list fits `sge[6]` (contract) and `Sge` has `siw_sge`'s layout.
    unsafe {
        put(slot, 0, wr.wr_id);
        put(slot, NUM_SGE, [wr.sgl.len() as u8, 0]);
        ptr::copy_nonoverlapping(wr.sgl.as_ptr().cast::<u8>(), slot.add(RQ_SGE), size_of_val(wr.sgl));
    }
    // Release: the entry is written before the kernel can see VALID.
    // SAFETY: an entry of a live ring (contract).
    unsafe { wqe_flags(slot) }.store(VALID, Ordering::Release);
}

/// A completion entry's fields, as the kernel wrote them (all but flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawCqe {
    /// `id`: the work request's id.
    pub id: u64,
    /// `opcode`: `SIW_OP_*`.
    pub opcode: u8,
    /// `status`: `SIW_WC_*`.
    pub status: u16,
    /// `bytes`.
    pub bytes: u32,
    /// `qp_id`.
    pub qp_id: u64,
}

/// Copies the fields of the completion entry at `slot` (not its flags, nor
/// `imm_data`, always 0 for userspace).
///
/// # Safety
/// `slot` is a whole `CQE_LEN`-byte entry of a live ring whose flags we
/// loaded, with Acquire, as `VALID` (the kernel finished writing it).
#[inline(always)]
pub unsafe fn read_cqe(slot: *const u8) -> RawCqe {
    // SAFETY: offsets inside the 32-byte entry, outside its flags byte; the
    // kernel wrote them before it stored VALID (contract).
    unsafe {
        RawCqe {
            id: get(slot, 0),
            opcode: get(slot, CQ_OPCODE),
            status: get(slot, CQ_STATUS),
            bytes: get(slot, CQ_BYTES),
            qp_id: get(slot, CQ_QP_ID),
        }
    }
}

/// `SIW_WC_*` → `IBV_WC_*` (rdmacm.md §B.3, rdma-core's `map_cqe_status`).
const STATUS: [WcStatus; abi::SIW_NUM_WC_STATUS as usize] = [
    WcStatus::SUCCESS,
    WcStatus::LOC_LEN_ERR,
    WcStatus::LOC_PROT_ERR,
    WcStatus::LOC_QP_OP_ERR,
    WcStatus::WR_FLUSH_ERR,
    WcStatus::BAD_RESP_ERR,
    WcStatus::LOC_ACCESS_ERR,
    WcStatus::REM_ACCESS_ERR,
    WcStatus::REM_INV_REQ_ERR,
    WcStatus::GENERAL_ERR,
];

/// The [`WcOpcode`] of a completion whose `SIW_OP_*` opcode siw does not
/// define for completions: `UNKNOWN_OPCODE | opcode`, a value no
/// libibverbs opcode has.
pub const UNKNOWN_OPCODE: u32 = 0x1_0000;

/// `SIW_OP_*` → `IBV_WC_*` (rdmacm.md §B.3, rdma-core's `map_cqe_opcode`).
#[inline(always)]
fn wc_opcode(op: u8) -> WcOpcode {
    match u32::from(op) {
        abi::SIW_OP_WRITE => WcOpcode::RDMA_WRITE,
        abi::SIW_OP_READ | abi::SIW_OP_READ_LOCAL_INV => WcOpcode::RDMA_READ,
        abi::SIW_OP_SEND | abi::SIW_OP_SEND_WITH_IMM | abi::SIW_OP_SEND_REMOTE_INV => WcOpcode::SEND,
        abi::SIW_OP_FETCH_AND_ADD => WcOpcode::FETCH_ADD,
        abi::SIW_OP_COMP_AND_SWAP => WcOpcode::COMP_SWAP,
        abi::SIW_OP_RECEIVE => WcOpcode::RECV,
        other => WcOpcode(UNKNOWN_OPCODE | other),
    }
}

/// The neutral completion of a siw completion entry: status and opcode
/// mapped, `qp_num` the low 32 bits of `qp_id`, no flags and no immediate
/// (siw has neither). A status siw does not define becomes `GENERAL_ERR`
/// with the raw value in `vendor_err` (0 otherwise, as libsiw).
#[inline(always)]
pub fn decode_cqe(c: &RawCqe) -> Wc {
    let (status, vendor_err) = match STATUS.get(usize::from(c.status)) {
        Some(&s) => (s, 0),
        None => (WcStatus::GENERAL_ERR, u32::from(c.status)),
    };
    Wc {
        wr_id: c.id,
        status,
        opcode: wc_opcode(c.opcode),
        vendor_err,
        byte_len: c.bytes,
        imm_data: 0,
        qp_num: c.qp_id as u32,
        src_qp: 0,
        wc_flags: WcFlags::empty(),
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
        port_num: 0,
    }
}

/// The completion of a request flushed by the provider, not the kernel
/// (`siw::flush`): `WR_FLUSH_ERR` for the entry at `slot` of QP
/// `qp_num`'s send ring (`send`) or receive ring, with what siw's own
/// flush reports (`siw_sq_flush`, `siw_rq_flush`): the request's id and
/// opcode, no bytes.
///
/// # Safety
/// `slot` is a whole entry of a live send (`send`) or receive ring whose
/// flags we loaded, with Acquire, as `VALID`: its producer wrote it, and
/// nobody else reads it for a flush.
#[inline]
pub unsafe fn flushed(slot: *const u8, send: bool, qp_num: u32) -> Wc {
    // SAFETY: bytes 0..8 and 11 of the entry, outside its flags word,
    // written before its producer stored VALID (contract).
    let (id, opcode) = unsafe { (get::<u64>(slot, 0), if send { get::<u8>(slot, SQ_OPCODE) } else { 0 }) };
    let opcode = if send { wc_opcode(opcode) } else { WcOpcode::RECV };
    Wc { wr_id: id, status: WcStatus::WR_FLUSH_ERR, opcode, qp_num, ..decode_cqe(&RawCqe::default()) }
}
