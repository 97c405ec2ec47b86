//! rxe work-queue entries and completions in the kernel's layout
//! (`include/uapi/rdma/rdma_user_rxe.h`): encoding `rxe_send_wqe` and
//! `rxe_recv_wqe`, decoding `ib_uverbs_wc`.
//!
//! Offsets come from the uapi structs (asserted at compile time in
//! `rverbs-uapi`); the element stride comes from the queue header, never
//! from a Rust size.

use core::mem::offset_of;
use core::ptr;

use rverbs_uapi::ib_user_verbs::IB_UVERBS_ACCESS_ZERO_BASED;
use rverbs_uapi::ib_verbs_values::{
    IBV_WC_GRH, IBV_WC_IP_CSUM_OK, IBV_WC_WITH_IMM, IBV_WC_WITH_INV, IB_WC_GRH, IB_WC_IP_CSUM_OK, IB_WC_WITH_IMM,
    IB_WC_WITH_INVALIDATE,
};
use rverbs_uapi::rdma_user_rxe::{rxe_dma_info, rxe_recv_wqe, rxe_send_wqe, rxe_send_wr_mw, rxe_send_wr_ud};

use crate::rxe::av::Av;
use crate::wr::{PostErrorKind, RecvWr, SendOp, SendWr, Sge, UdDest, Wc, WcFlags};

/// Offset of the SGE array / inline data in a send WQE (208).
pub const SEND_DATA: usize = size_of::<rxe_send_wqe>();
/// Offset of the SGE array in a receive WQE (40).
pub const RECV_DATA: usize = size_of::<rxe_recv_wqe>();
/// Bytes of a CQE that the completion ring copies out (`ib_uverbs_wc`, 48).
pub const CQE_LEN: usize = size_of::<rverbs_uapi::ib_user_verbs::ib_uverbs_wc>();

const DMA: usize = offset_of!(rxe_send_wqe, dma);
const RDMA_DMA: usize = offset_of!(rxe_recv_wqe, dma);
const IOVA: usize = offset_of!(rxe_send_wqe, iova);
const DMA_LENGTH: usize = offset_of!(rxe_dma_info, length);
const DMA_RESID: usize = offset_of!(rxe_dma_info, resid);
const DMA_NUM_SGE: usize = offset_of!(rxe_dma_info, num_sge);
/// Where `rxe_send_wr`'s `wr` union starts (after wr_id, reserved, opcode,
/// send_flags and ex); the `rxe_send_wr` is the WQE's first member.
const WR_UNION: usize = 24;
/// `wr.ud.ah_num` and `wr.ud.av`.
const UD_AH_NUM: usize = WR_UNION + offset_of!(rxe_send_wr_ud, ah_num);
const UD_AV: usize = WR_UNION + offset_of!(rxe_send_wr_ud, av);
const _: () = assert!(UD_AH_NUM == 36 && UD_AV == 56 && offset_of!(rxe_send_wqe, wr) == 0);
/// `ex.imm_data` / `ex.invalidate_rkey`.
const EX: usize = 20;
/// `wr.mw`'s fields (a bind).
const MW_ADDR: usize = WR_UNION + offset_of!(rxe_send_wr_mw, addr);
const MW_LENGTH: usize = WR_UNION + offset_of!(rxe_send_wr_mw, length);
const MW_MR_LKEY: usize = WR_UNION + offset_of!(rxe_send_wr_mw, mr_lkey);
const MW_MW_RKEY: usize = WR_UNION + offset_of!(rxe_send_wr_mw, mw_rkey);
const MW_RKEY: usize = WR_UNION + offset_of!(rxe_send_wr_mw, rkey);
const MW_ACCESS: usize = WR_UNION + offset_of!(rxe_send_wr_mw, access);
const _: () = assert!(MW_ADDR == 24 && MW_LENGTH == 32 && MW_MR_LKEY == 40 && MW_ACCESS == 52);

/// QP transport, as far as posting cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

/// Limits a send WQE must respect (from the create-QP response).
#[derive(Clone, Copy, Debug)]
pub struct SendLimits {
    /// QP transport.
    pub transport: Transport,
    /// SGEs per WQE.
    pub max_sge: u32,
    /// Inline bytes per WQE.
    pub max_inline: u32,
}

/// Checks one send work request against the QP; returns its payload length.
#[inline]
pub fn check_send(wr: &SendWr<'_>, lim: &SendLimits) -> Result<u32, PostErrorKind> {
    if let Some(total) = check_send_usual(wr, lim) {
        return Ok(total);
    }
    check_send_general(wr, lim)
}

/// The usual requests' share of [`check_send`]: a SEND or RDMA WRITE of one
/// SGE, not inlined, with a destination exactly when the QP is UD (WRITE:
/// RC or UC only); its payload length, or `None` for "not one of those,
/// ask [`check_send`]". The general checks accept these with the same
/// length; this skips their tests. Always inlined, so that a caller that
/// fixed the opcode (the C library's `ibv_post_send`) keeps one branch.
#[inline(always)]
pub fn check_send_usual(wr: &SendWr<'_>, lim: &SendLimits) -> Option<u32> {
    // The usual request first: a SEND of one SGE.
    if let (SendOp::Send, [s]) = (wr.op, wr.sgl) {
        let dest_ok = match wr.ud {
            None => lim.transport != Transport::Ud,
            Some(u) => lim.transport == Transport::Ud && u.ah_num != 0,
        };
        if dest_ok && !wr.flags.contains(crate::wr::SendFlags::INLINE) && lim.max_sge != 0 {
            return Some(s.length);
        }
    }
    // The next one (perftest's `ib_write_bw`): an RDMA WRITE of one SGE,
    // not inlined, on RC or UC (no destination). A branch of its own, so
    // that the SEND above pays nothing for it.
    if let (SendOp::RdmaWrite(_), [s], None) = (wr.op, wr.sgl, wr.ud) {
        if lim.transport != Transport::Ud && !wr.flags.contains(crate::wr::SendFlags::INLINE) && lim.max_sge != 0 {
            return Some(s.length);
        }
    }
    None
}

/// [`check_send`] past its usual requests: every rule, for any request.
#[inline]
fn check_send_general(wr: &SendWr<'_>, lim: &SendLimits) -> Result<u32, PostErrorKind> {
    let allowed = match lim.transport {
        Transport::Rc => true,
        Transport::Uc => matches!(
            wr.op,
            SendOp::Send
                | SendOp::SendWithImm(_)
                | SendOp::RdmaWrite(_)
                | SendOp::RdmaWriteWithImm(..)
                | SendOp::BindMw(_)
        ),
        Transport::Ud => matches!(wr.op, SendOp::Send | SendOp::SendWithImm(_)),
    };
    if !allowed {
        return Err(PostErrorKind::OpcodeNotSupported);
    }
    if (lim.transport == Transport::Ud) != wr.ud.is_some() || wr.ud.is_some_and(|u| u.ah_num == 0) {
        // AH number 0 would make the kernel read an (empty) address vector.
        return Err(PostErrorKind::BadDestination);
    }
    if wr.op.is_local() {
        return check_local(wr);
    }
    // One SGE is the common case: skip the (unrolled, vectorised) loop.
    let total: u64 = match wr.sgl {
        [s] => u64::from(s.length),
        sgl => sgl.iter().map(|s| u64::from(s.length)).sum(),
    };
    if total > u64::from(u32::MAX) {
        return Err(PostErrorKind::TooLong);
    }
    if wr.flags.contains(crate::wr::SendFlags::INLINE) {
        if wr.op.is_atomic() || matches!(wr.op, SendOp::RdmaRead(_)) {
            // Their results land in local memory: there is nothing to
            // inline. The kernel's `rxe_dma_info.sge[]` is a union with
            // `inline_data`, so its completer would scatter the response
            // through payload bytes read as an SGE (mlx5 refuses it too).
            return Err(PostErrorKind::OpcodeNotSupported);
        }
        if total > u64::from(lim.max_inline) {
            return Err(PostErrorKind::InlineTooLong { given: total, max: lim.max_inline });
        }
    } else if wr.sgl.len() > lim.max_sge as usize {
        return Err(PostErrorKind::TooManySge { given: wr.sgl.len(), max: lim.max_sge });
    }
    match wr.op {
        SendOp::AtomicCmpAndSwp { remote, .. } | SendOp::AtomicFetchAndAdd { remote, .. }
            if wr.sgl.len() != 1 || wr.sgl[0].length < 8 || remote.addr % 8 != 0 =>
        {
            return Err(PostErrorKind::BadAtomic);
        }
        SendOp::AtomicWrite { remote, .. } => {
            // The 8 bytes travel in the WQE (`dma.atomic_wr`), not in an SGE.
            if !wr.sgl.is_empty() || wr.flags.contains(crate::wr::SendFlags::INLINE) || remote.addr % 8 != 0 {
                return Err(PostErrorKind::BadAtomic);
            }
            return Ok(8);
        }
        _ => {}
    }
    Ok(total as u32)
}

/// `LOCAL_INV` and `BIND_MW` carry no data (libibverbs' rxe: `EINVAL`),
/// and rxe cannot bind a window zero-based.
#[cold]
fn check_local(wr: &SendWr<'_>) -> Result<u32, PostErrorKind> {
    let zero_based = matches!(wr.op, SendOp::BindMw(b) if b.access & IB_UVERBS_ACCESS_ZERO_BASED != 0);
    if !wr.sgl.is_empty() || wr.flags.contains(crate::wr::SendFlags::INLINE) || zero_based {
        return Err(PostErrorKind::BadLocalOp);
    }
    Ok(0)
}

/// Writes `v` at byte offset `off` of `dst`.
///
/// # Safety
/// `dst + off .. + size_of::<T>()` is inside a WQE slot we own.
#[inline(always)]
unsafe fn put<T: Copy>(dst: *mut u8, off: usize, v: T) {
    // SAFETY: forwarded; unaligned because some union members are only 4-aligned.
    unsafe { ptr::write_unaligned(dst.add(off).cast::<T>(), v) }
}

/// Copies `sgl` to `dst`. One or two SGEs are stored directly: a
/// `copy_nonoverlapping` of a run-time length becomes a call to libc's
/// `memcpy`, which costs more than the copy itself.
///
/// # Safety
/// `dst .. dst + sgl.len()` is writable, 8-aligned memory in a slot we own.
#[inline(always)]
unsafe fn copy_sges<'a>(dst: *mut Sge<'a>, sgl: &[Sge<'a>]) {
    // SAFETY: forwarded; `Sge` is `Copy` and 8-aligned like `dst`.
    unsafe {
        match sgl {
            [] => {}
            [a] => ptr::write(dst, *a),
            [a, b] => {
                ptr::write(dst, *a);
                ptr::write(dst.add(1), *b);
            }
            _ => ptr::copy_nonoverlapping(sgl.as_ptr(), dst, sgl.len()),
        }
    }
}

/// A UD request's destination: remote QPN and Q_Key in `wr.ud`, and the
/// address vector (`av`, when the kernel wants it inline) or the AH number.
///
/// # Safety
/// `dst` is a slot of ours, at least `SEND_DATA` bytes.
#[inline(always)]
unsafe fn put_ud(dst: *mut u8, ud: &UdDest<'_>, av: Option<&Av>) {
    // SAFETY: the caller's contract; every offset is inside the header.
    unsafe {
        put(dst, 24, ud.remote_qpn);
        put(dst, 28, ud.remote_qkey);
        match av {
            Some(av) => put(dst, UD_AV, av.0),
            None => put(dst, UD_AH_NUM, ud.ah_num),
        }
    }
}

/// What every one-SGE short path of [`write_send_wqe`] writes: the header
/// zeroed, `wr_id`, one SGE, the opcode, the flags, `dma`'s length, resid
/// and count, and the SGE itself; the caller adds its opcode's fields.
///
/// # Safety
/// `dst` is a slot of ours, at least `SEND_DATA` bytes plus one SGE.
#[inline(always)]
unsafe fn put_one_sge(dst: *mut u8, wr: &SendWr<'_>, total: u32, sge: &Sge<'_>) {
    // SAFETY: the caller's contract.
    unsafe {
        ptr::write_bytes(dst, 0, SEND_DATA);
        put(dst, 0, wr.wr_id);
        put(dst, 8, 1u32);
        put(dst, 12, wr.op.kernel_opcode());
        put(dst, 16, wr.flags.bits());
        put(dst, DMA + DMA_LENGTH, total);
        put(dst, DMA + DMA_RESID, total);
        put(dst, DMA + DMA_NUM_SGE, 1u32);
        ptr::write(dst.add(SEND_DATA).cast::<Sge>(), *sge);
    }
}

/// Encodes a send WQE into the slot at `dst`.
///
/// # Safety
/// `dst` points at a whole, 8-aligned SQ slot of at least
/// `SEND_DATA + max(max_sge * 16, max_inline)` bytes that the kernel does not
/// own (between our producer and its consumer); `wr` passed [`check_send`]
/// with `total` its payload length; for `INLINE` sends every SGE of nonzero
/// length has `addr..addr+length` readable (zero-length ones are skipped,
/// whatever their address).
///
/// `av`: for a UD request whose AH has no kernel number, the address vector
/// to copy into `wr.ud.av` (the WQE's `ah_num` stays 0, which tells the
/// kernel to read it); `None` writes `ud.ah_num`.
#[inline(always)]
pub(crate) unsafe fn write_send_wqe(dst: *mut u8, wr: &SendWr<'_>, total: u32, av: Option<&Av>) {
    // The usual request (as in `check_send`): a SEND of one SGE, not
    // inlined. The same bytes as the general encoding below, without its
    // opcode dispatch and SGE loop.
    if let (SendOp::Send, [sge]) = (wr.op, wr.sgl) {
        if !wr.flags.contains(crate::wr::SendFlags::INLINE) {
            // SAFETY: the slot is ours, at least SEND_DATA bytes plus one
            // SGE (`check_send` allowed one, `max_sge` was clamped to the slot).
            unsafe {
                put_one_sge(dst, wr, total, sge);
                if let Some(ud) = wr.ud {
                    put_ud(dst, &ud, av);
                }
                // `iova` stays 0 (zeroed by `put_one_sge`).
            }
            return;
        }
    }
    // The next one (as in `check_send`): an RDMA WRITE of one SGE, not
    // inlined, on RC or UC: `wr.rdma` and the remote address as `iova`.
    if let (SendOp::RdmaWrite(r), [sge]) = (wr.op, wr.sgl) {
        if !wr.flags.contains(crate::wr::SendFlags::INLINE) {
            // SAFETY: as for the SEND above (`check_send` allowed one SGE).
            unsafe {
                put_one_sge(dst, wr, total, sge);
                put(dst, 24, r.addr);
                put(dst, 32, r.rkey);
                put(dst, IOVA, r.addr);
            }
            return;
        }
    }
    // SAFETY: the slot is ours and at least SEND_DATA bytes long.
    unsafe {
        // The header, zeroed: the kernel expects `state` 0 and clean cursors;
        // the rest is its scratch space.
        ptr::write_bytes(dst, 0, SEND_DATA);
        put(dst, 0, wr.wr_id);
        put(dst, 8, wr.sgl.len() as u32); // `reserved` since 6.1, num_sge before
        put(dst, 12, wr.op.kernel_opcode());
        put(dst, 16, wr.flags.bits());
        let mut iova = 0u64;
        match wr.op {
            SendOp::Send => {}
            SendOp::SendWithImm(imm) => put(dst, 20, imm.to_be()),
            SendOp::RdmaWrite(r) | SendOp::RdmaRead(r) => {
                put(dst, 24, r.addr);
                put(dst, 32, r.rkey);
                iova = r.addr;
            }
            SendOp::RdmaWriteWithImm(r, imm) => {
                put(dst, 20, imm.to_be());
                put(dst, 24, r.addr);
                put(dst, 32, r.rkey);
                iova = r.addr;
            }
            SendOp::AtomicCmpAndSwp { remote, compare, swap } => {
                put(dst, 24, remote.addr);
                put(dst, 32, compare);
                put(dst, 40, swap);
                put(dst, 48, remote.rkey);
                iova = remote.addr;
            }
            SendOp::AtomicFetchAndAdd { remote, add } => {
                put(dst, 24, remote.addr);
                put(dst, 32, add);
                put(dst, 48, remote.rkey);
                iova = remote.addr;
            }
            SendOp::AtomicWrite { remote, value } => {
                // `wr.rdma` and the payload in `dma.atomic_wr` (where the
                // SGEs would start), as rdma-core's rxe lays it out; `dma`'s
                // length and resid are 8 (`total`), `num_sge` 0.
                put(dst, 24, remote.addr);
                put(dst, 32, remote.rkey);
                put(dst, SEND_DATA, value);
                iova = remote.addr;
            }
            // The key in host order, as libibverbs' rxe stores it.
            SendOp::LocalInv(rkey) | SendOp::SendWithInv(rkey) => put(dst, EX, rkey),
            SendOp::BindMw(b) => {
                put(dst, MW_ADDR, b.addr);
                put(dst, MW_LENGTH, b.length);
                put(dst, MW_MR_LKEY, b.mr_lkey);
                put(dst, MW_MW_RKEY, b.mw_rkey);
                put(dst, MW_RKEY, b.new_rkey);
                put(dst, MW_ACCESS, b.access);
            }
        }
        if let Some(ud) = wr.ud {
            put_ud(dst, &ud, av);
        }
        put(dst, IOVA, iova);
        put(dst, DMA + DMA_LENGTH, total);
        put(dst, DMA + DMA_RESID, total);
        put(dst, DMA + DMA_NUM_SGE, wr.sgl.len() as u32);
        let data = dst.add(SEND_DATA);
        if wr.flags.contains(crate::wr::SendFlags::INLINE) {
            let mut at = data;
            for s in wr.sgl {
                // An empty SGE may carry any address, null included, which
                // even a zero-byte copy must not be given.
                if s.length == 0 {
                    continue;
                }
                ptr::copy_nonoverlapping(s.addr as usize as *const u8, at, s.length as usize);
                at = at.add(s.length as usize);
            }
        } else {
            copy_sges(data.cast::<Sge>(), wr.sgl);
        }
    }
}

/// Checks a receive work request against the queue's SGE limit.
#[inline]
pub fn check_recv(wr: &RecvWr<'_>, max_sge: u32) -> Result<u32, PostErrorKind> {
    if wr.sgl.len() > max_sge as usize {
        return Err(PostErrorKind::TooManySge { given: wr.sgl.len(), max: max_sge });
    }
    // One SGE (the usual receive) without the unrolled sum's set-up.
    if let [s] = wr.sgl {
        return Ok(s.length);
    }
    let total: u64 = wr.sgl.iter().map(|s| u64::from(s.length)).sum();
    u32::try_from(total).map_err(|_| PostErrorKind::TooLong)
}

/// Encodes a receive WQE into the slot at `dst`.
///
/// # Safety
/// `dst` points at a whole, 8-aligned RQ/SRQ slot of at least
/// `RECV_DATA + max_sge * 16` bytes that the kernel does not own; `wr`
/// passed [`check_recv`] with `total` its length.
#[inline]
pub(crate) unsafe fn write_recv_wqe(dst: *mut u8, wr: &RecvWr<'_>, total: u32) {
    // SAFETY: the slot is ours and large enough (contract).
    unsafe {
        ptr::write_bytes(dst, 0, RECV_DATA);
        put(dst, 0, wr.wr_id);
        put(dst, 8, wr.sgl.len() as u32);
        put(dst, RDMA_DMA + DMA_LENGTH, total);
        put(dst, RDMA_DMA + DMA_RESID, total);
        put(dst, RDMA_DMA + DMA_NUM_SGE, wr.sgl.len() as u32);
        copy_sges(dst.add(RECV_DATA).cast::<Sge>(), wr.sgl);
    }
}

/// Encodes a receive WQE of one SGE into the slot at `dst`: the bytes
/// [`write_recv_wqe`] writes for such a request (whose [`check_recv`]
/// length is the SGE's), without its SGE-count dispatch.
///
/// # Safety
/// `dst` points at a whole, 8-aligned RQ/SRQ slot of at least
/// `RECV_DATA + 16` bytes that the kernel does not own.
#[inline(always)]
pub(crate) unsafe fn write_recv_one_sge(dst: *mut u8, wr_id: u64, sge: &Sge<'_>) {
    // SAFETY: the slot is ours and large enough (contract).
    unsafe {
        ptr::write_bytes(dst, 0, RECV_DATA);
        put(dst, 0, wr_id);
        put(dst, 8, 1u32);
        put(dst, RDMA_DMA + DMA_LENGTH, sge.length);
        put(dst, RDMA_DMA + DMA_RESID, sge.length);
        put(dst, RDMA_DMA + DMA_NUM_SGE, 1u32);
        ptr::write(dst.add(RECV_DATA).cast::<Sge>(), *sge);
    }
}

/// Maps rxe's `wc_flags` (the kernel's `IB_WC_*` bits, copied unchanged into
/// user CQEs) to libibverbs' bits: kernel bit 2 is WITH_INVALIDATE and bit 3
/// IP_CSUM_OK, libibverbs has them the other way round.
#[inline]
pub fn map_wc_flags(k: u32) -> WcFlags {
    // Kernel bits 0..=3 -> libibverbs bits, one table lookup; the kernel's
    // higher bits (SMAC, VLAN, network header type) have no libibverbs
    // counterpart in `WcFlags` and are dropped.
    const MAP: [u8; 16] = {
        let mut t = [0u8; 16];
        let mut k = 0;
        while k < 16 {
            let mut f = k as u32 & (IBV_WC_GRH | IBV_WC_WITH_IMM);
            if k as u32 & IB_WC_WITH_INVALIDATE != 0 {
                f |= IBV_WC_WITH_INV;
            }
            if k as u32 & IB_WC_IP_CSUM_OK != 0 {
                f |= IBV_WC_IP_CSUM_OK;
            }
            t[k] = f as u8;
            k += 1;
        }
        t
    };
    WcFlags::from_bits_retain(u32::from(MAP[(k & 15) as usize]))
}

/// Finishes a CQE copied out of the completion ring (`read_cqe`): the
/// kernel's flag bits become libibverbs' and immediate data goes to host
/// order. Every other field already holds the verbs value (the kernel's
/// `ib_wc_status`/`ib_wc_opcode` numbers are libibverbs').
#[inline(always)]
pub fn decode_cqe(mut w: Wc) -> Wc {
    let flags = map_wc_flags(w.wc_flags.bits());
    if flags.contains(WcFlags::WITH_IMM) {
        w.imm_data = u32::from_be(w.imm_data);
    }
    w.wc_flags = flags;
    w
}

/// [`decode_cqe`] but for the immediate, which stays in network byte
/// order (libibverbs' `ibv_wc.imm_data` is a `__be32`): the flags only.
#[inline(always)]
pub fn decode_cqe_flags(mut w: Wc) -> Wc {
    w.wc_flags = map_wc_flags(w.wc_flags.bits());
    w
}

/// The kernel flag bits a CQE may have and still be its own [`Wc`] as
/// copied, with nothing to decode: `GRH` (the same bit in libibverbs; rxe
/// sets it on every receive). [`decode_cqe`] of such a CQE changes
/// nothing (`tests::plain_cqes_decode_to_themselves`).
pub const CQE_PLAIN: u32 = IB_WC_GRH;

/// [`CQE_PLAIN`] for [`decode_cqe_flags`], which leaves the immediate in
/// network order: `GRH` and `WITH_IMM` (both the same bits in libibverbs).
pub const CQE_PLAIN_NET_IMM: u32 = IB_WC_GRH | IB_WC_WITH_IMM;

/// Copies the CQE at `src` out of the ring, as it is: a
/// `struct ib_uverbs_wc`, which [`Wc`] mirrors field for field (asserted in
/// `wr.rs`); [`decode_cqe`] then fixes the flags and the immediate.
///
/// # Safety
/// `src` points at a CQ slot the kernel has published (between our consumer
/// and its producer, read after an Acquire load of the producer) and at
/// least 48 bytes long, 8-aligned.
#[inline(always)]
pub(crate) unsafe fn read_cqe(src: *const u8) -> Wc {
    // SAFETY: forwarded from the contract; a copy, never a reference. Every
    // field of `Wc` is a plain integer (status and opcode are transparent
    // `u32`s, the flags a bitflags `u32`), so any bytes are a valid `Wc`.
    unsafe { ptr::read(src.cast::<Wc>()) }
}
