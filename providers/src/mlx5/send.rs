//! The send half of an mlx5 QP: building WQEs in the send queue and
//! ringing the doorbell (rdma-core `qp.c _mlx5_post_send`, `post_send_db`;
//! providers.md §B.5, §B.6).
//!
//! Per request: control segment, then the operation's segments (remote
//! address; remote address + atomic; datagram), then data segments (one per
//! non-empty SGE) or one inline segment. A WQE takes `ceil(ds / 4)` 64-byte
//! blocks and may start in the last block of the ring and continue at
//! block 0: every 16-byte segment address is `(start + 16 * i) & (ring
//! bytes - 1)`, and inline payloads are copied in at most two pieces.
//!
//! Per call, after the WQEs: `barrier::to_device()`, the send counter into
//! the doorbell record, `wc_start`, then either a BlueFlame copy of the WQE
//! (one request, BlueFlame register, `1 < ds <= bf_half / 16`) or the 8-byte
//! doorbell (the first 8 bytes of the last control segment), `flush`, and
//! the register half flips.
//!
//! Unsafe code (allowed below): the send queue is DMA memory the HCA reads;
//! it is written through raw pointers only, at slots the overflow check
//! proved free; inline payloads are read from caller memory under
//! [`SendQueue::post`]'s contract.
#![allow(unsafe_code)]

use core::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rverbs_uapi::ib_verbs_values::IB_SEND_INLINE;

use crate::mlx5::ah::AhTable;
use crate::mlx5::barrier;
use crate::mlx5::mmio::Mmio;
use crate::mlx5::qp::{send_ok, QpShared, QpType, SqSlot};
use crate::mlx5::seg::{ctrl_words, data_words, fm_ce_se, opcode, AtomicSeg, CtrlSeg, DataSeg, InlineSeg, RaddrSeg};
use crate::wr::{PostError, PostErrorKind, SendOp, SendWr};

/// `IB_SEND_FENCE | SIGNALED | SOLICITED` (bits 0..2) → `fm_ce_se`.
const FM_CE_SE: [u8; 8] = {
    let mut t = [0u8; 8];
    let mut i = 0;
    while i < 8 {
        let mut v = 0;
        if i & 1 != 0 {
            v |= fm_ce_se::FENCE;
        }
        if i & 2 != 0 {
            v |= fm_ce_se::CQ_UPDATE;
        }
        if i & 4 != 0 {
            v |= fm_ce_se::SOLICITED;
        }
        t[i] = v;
        i += 1;
    }
    t
};

/// The send queue of one QP. `Send` (one thread posts at a time, `&mut
/// self`), no locks, no allocation, no `dyn`.
#[derive(Debug)]
pub struct SendQueue<M: Mmio> {
    base: *mut u8,
    /// Ring bytes - 1 (the ring is a power of two ≥ 64 bytes).
    bytes_mask: usize,
    /// WQEBB mask.
    bb_mask: u32,
    /// Producer counter in WQEBBs (free running; the low 16 bits go to the
    /// HCA; starts over at 0 with each RESET epoch).
    cur_post: u32,
    /// Send requests posted (never starts over, not even at RESET: see
    /// [`SqShared`](crate::mlx5::qp::SqShared)).
    head: u64,
    /// Requests that may be outstanding (`u64`: added to the 64-bit counts).
    max_post: u64,
    max_sge: u32,
    max_inline: u32,
    /// `qpn << 8`.
    qpn8: u32,
    /// `(qpn << 8).to_be()`.
    qpn8_be: u32,
    /// The first control word of a short SEND without its WQE index:
    /// opcode SEND, this QP's number, ds = 2.
    ctrl0_send: u64,
    /// The second control word's `fm_ce_se` byte for each `flags & 7`.
    ctrl1_fm: [u64; 8],
    qp_type: QpType,
    /// `CQ_UPDATE` with `sq_sig_all`.
    sig_all: u8,
    /// The state word last seen valid; the RESET epoch it belongs to.
    state_seen: u32,
    /// `state_seen` when the short path is open to this QP (not UD, SGEs
    /// allowed), else a value no state word has: one compare checks both.
    short_seen: u32,
    /// The `head` at which the queue is full as of the last load of
    /// `tail` (`tail + max_post`): room while `head < limit`, and
    /// `limit - head` requests fit before `tail` must be reloaded. A
    /// retirement stored late, from before a RESET, is older than any
    /// request since, so it can only make `limit` smaller than the truth,
    /// even below `head` (no room: the difference is compared signed).
    /// Posting moves only `head`, so the common case keeps no second counter.
    limit: u64,
    epoch: u32,
    /// Current BlueFlame half and its size (0: doorbells only).
    bf_offset: usize,
    bf_half: usize,
    /// Largest WQE (in 16-byte units) copied by BlueFlame: `bf_half / 16`,
    /// 0 when the register takes no copies (`MLX5_SHUT_UP_BF`, NC pages).
    bf_max_ds: usize,
    /// One-SGE SEND / SEND_IMM can take the short path (not UD, SGEs allowed).
    fast: bool,
    mmio: M,
    // Cached pointers into `shared` (which this value keeps alive): the
    // state word, the retire counter, the slot arrays, doorbell word 1.
    qp: *const QpShared,
    slots: *const SqSlot,
    db_snd: *mut u32,
    ahs: Arc<AhTable>,
    shared: Arc<QpShared>,
}

// SAFETY: `base` and the cached pointers point into `shared` (its buffer,
// doorbell record and arrays), owned by the `Arc` this value holds; the ring
// is only written through `&mut self`, and the shared words (slots, retire
// counter, state word, doorbell record) are accessed atomically. The
// doorbell seam must be `Send` itself.
unsafe impl<M: Mmio + Send> Send for SendQueue<M> {}
// SAFETY: the public `&self` methods read plain fields (counters, sizes) or
// hand out `&Arc<QpShared>` (`Sync`); the seam `M` is never handed out; the
// private `&self` helpers that write queue memory or MMIO (`seg`,
// `write_inline`, `bf_copy`) are only called from `post(&mut self)`.
unsafe impl<M: Mmio + Sync> Sync for SendQueue<M> {}

/// What the ring step needs of the last WQE written.
#[derive(Clone, Copy)]
struct Last {
    off: usize,
    doorbell: u64,
    ds: u32,
    inline: bool,
}

impl<M: Mmio> SendQueue<M> {
    /// `bf`: the register's (`bf_half`, `bf_copy`) ([`RegInfo`](crate::mlx5::uar::RegInfo)).
    pub(crate) fn new(
        shared: Arc<QpShared>,
        mmio: M,
        (bf_half, bf_copy): (usize, bool),
        sq_sig_all: bool,
        ahs: Arc<AhTable>,
    ) -> Self {
        let s = *shared.sizes();
        let sig_all = if sq_sig_all { fm_ce_se::CQ_UPDATE } else { 0 };
        let qpn8_be = (shared.qpn() << 8).to_be();
        let ctrl0_send = ctrl_words(opcode::SEND, 0, qpn8_be, 2, 0, 0)[0];
        let ctrl1_fm = core::array::from_fn(|i| ctrl_words(0, 0, 0, 0, sig_all | FM_CE_SE[i], 0)[1]);
        // SAFETY: the send queue starts `sq_offset` bytes into the buffer,
        // inside it (`buf_len` covers it).
        let base = unsafe { shared.buf.ptr().add(s.sq_offset) };
        let bytes = s.sq_wqe_cnt as usize * 64;
        SendQueue {
            base,
            bytes_mask: bytes.saturating_sub(1),
            bb_mask: s.sq_wqe_cnt.saturating_sub(1),
            cur_post: 0,
            head: 0,
            max_post: u64::from(s.sq_max_post),
            max_sge: s.max_send_sge,
            max_inline: s.max_inline,
            qpn8: shared.qpn() << 8,
            qpn8_be,
            ctrl0_send,
            ctrl1_fm,
            qp_type: shared.qp_type(),
            sig_all,
            state_seen: u32::MAX,
            short_seen: u32::MAX,
            limit: u64::from(s.sq_max_post),
            epoch: 0,
            bf_offset: 0,
            bf_half,
            bf_max_ds: if bf_copy { bf_half / 16 } else { 0 },
            fast: shared.qp_type() != QpType::Ud && s.max_send_sge >= 1,
            mmio,
            qp: Arc::as_ptr(&shared),
            slots: shared.sq.slots_ptr(),
            db_snd: shared.db.word_ptr(1),
            ahs,
            shared,
        }
    }

    /// The shared state.
    pub fn shared(&self) -> &Arc<QpShared> {
        &self.shared
    }
    /// Producer counter in WQEBBs.
    pub fn cur_post(&self) -> u32 {
        self.cur_post
    }
    /// Requests posted so far (over the QP's whole life).
    pub fn head(&self) -> u64 {
        self.head
    }
    /// Requests that may be outstanding.
    pub fn max_post(&self) -> u32 {
        self.max_post as u32
    }
    /// The BlueFlame half the next copy goes to.
    pub fn bf_offset(&self) -> usize {
        self.bf_offset
    }

    #[cold]
    fn sync_state(&mut self, word: u32) -> Result<(), PostErrorKind> {
        let epoch = word >> 8;
        if epoch != self.epoch {
            // The QP went through RESET: the device starts over at WQEBB 0,
            // and every request posted before is retired (flushed, or its
            // completion cleaned): a whole queue of room. A poller may still
            // store an old request's retirement after this; it is no larger
            // than `head` now, so `refresh_free` can only see less room.
            self.epoch = epoch;
            self.cur_post = 0;
            self.limit = self.head + self.max_post;
        }
        if !send_ok(word as u8) {
            return Err(PostErrorKind::BadState);
        }
        self.state_seen = word;
        self.short_seen = if self.fast { word } else { u32::MAX };
        Ok(())
    }

    /// Reloads the retire counter: how many more requests fit.
    #[inline(always)]
    fn refresh_free(&mut self) -> i64 {
        // Acquire: the CQ read a slot's wr_id before publishing its retirement.
        // SAFETY: `qp` points at `self.shared`, alive as long as `self`.
        let tail = unsafe { &*self.qp }.sq.tail().load(Ordering::Acquire);
        self.limit = tail + self.max_post;
        self.room()
    }

    /// Requests that fit before `tail` must be reloaded; negative (none)
    /// when a late retirement from before a RESET left `limit` below `head`.
    #[inline(always)]
    fn room(&self) -> i64 {
        self.limit.wrapping_sub(self.head) as i64
    }

    #[inline(always)]
    fn seg(&self, off: usize) -> *mut u8 {
        // SAFETY: masked into the ring.
        unsafe { self.base.add(off & self.bytes_mask) }
    }

    /// Posts `wrs` in order, then rings the doorbell once.
    ///
    /// On a refused request the ones before it are posted (and the doorbell
    /// rung for them), none after it, and the error names its index. A
    /// request is checked completely before a byte of it is written.
    ///
    /// # Safety
    /// For `INLINE` requests, every SGE's `addr..addr+length` must be
    /// readable memory (it is copied now); SGEs of length 0 are skipped,
    /// whatever their address. For the others nothing is read here; the
    /// device checks the lkeys.
    #[inline]
    pub unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        // The latency case gets a straight line: one short request, the
        // state as last seen, room in the queue.
        if let [wr] = wrs {
            if let Some(s) = self.short(wr) {
                // SAFETY: `qp` points at `self.shared`, alive as long as `self`.
                let word = unsafe { &*self.qp }.state_word();
                if word == self.short_seen && self.head < self.limit {
                    // SAFETY: room for a WQE at `cur_post` (`head < limit`).
                    let last = unsafe { self.write_short(wr.flags.bits(), s, wr.wr_id, 0) };
                    self.ring(1, last);
                    return Ok(());
                }
            }
        }
        // SAFETY: forwarded.
        unsafe { self.post_list(wrs) }
    }

    /// The request's SGE if it can take the short path: SEND, one non-empty
    /// SGE, not inline, not UD.
    #[inline(always)]
    fn short<'w, 'a>(&self, wr: &'w SendWr<'a>) -> Option<&'w crate::wr::Sge<'a>> {
        let [s] = wr.sgl else { return None };
        if s.length == 0 || wr.ud.is_some() || wr.flags.bits() & IB_SEND_INLINE != 0 {
            return None;
        }
        // SEND only: every other opcode takes the general path (a second
        // opcode here costs the common case a few instructions).
        match wr.op {
            SendOp::Send => Some(s),
            _ => None,
        }
    }

    /// [`post`](Self::post) for any list.
    ///
    /// # Safety
    /// As for `post`.
    #[inline(never)]
    unsafe fn post_list(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        // SAFETY: `qp` points at `self.shared`, alive as long as `self`.
        let word = unsafe { &*self.qp }.state_word();
        if word != self.state_seen {
            if let Err(kind) = self.sync_state(word) {
                return Err(PostError { index: 0, kind });
            }
        }
        // 64-bit, as the counts it is added to and compared with.
        let mut nreq = 0u64;
        let mut last = Last { off: 0, doorbell: 0, ds: 0, inline: false };
        let mut failed = None;
        for (index, wr) in wrs.iter().enumerate() {
            // `head` moves only in `ring`: count this call's requests too.
            if self.room() <= nreq as i64 && self.refresh_free() <= nreq as i64 {
                failed = Some(PostError { index, kind: PostErrorKind::QueueFull });
                break;
            }
            match self.short(wr) {
                Some(s) if self.fast => {
                    // SAFETY: room for a WQE at `cur_post` (overflow check).
                    last = unsafe { self.write_short(wr.flags.bits(), s, wr.wr_id, nreq) };
                }
                // SAFETY: the overflow check above leaves room for a whole WQE
                // of `wqe_size` bytes at `cur_post`; the INLINE contract is ours.
                _ => match unsafe { self.write_wqe(wr, nreq) } {
                    Ok(l) => last = l,
                    Err(kind) => {
                        failed = Some(PostError { index, kind });
                        break;
                    }
                },
            }
            nreq += 1;
        }
        if nreq != 0 {
            self.ring(nreq, last);
        }
        match failed {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// A SEND with one SGE: the slot's wr_id and head, then the control
    /// segment and one data segment (four 64-bit stores); advances
    /// `cur_post` by one WQEBB.
    ///
    /// # Safety
    /// Room for one WQEBB at `cur_post`.
    #[inline(always)]
    unsafe fn write_short(&mut self, flags: u32, s: &crate::wr::Sge, wr_id: u64, nreq: u64) -> Last {
        let cur = self.cur_post;
        let idx = cur & self.bb_mask;
        // The slot first: `wr_id` and `head` are then dead, which keeps the
        // rest within the caller-saved registers.
        // SAFETY: the slot array has `bb_mask + 1` entries (masked index).
        unsafe {
            let slot = &*self.slots.add(idx as usize);
            slot.wrid.store(wr_id, Ordering::Relaxed);
            slot.end.store(self.head + nreq + 1, Ordering::Relaxed);
        }
        let off = (idx as usize) << 6;
        // SAFETY: the block at `off` is free (overflow check), inside the
        // ring (masked index) and 64-aligned (page-aligned ring), so four
        // aligned 64-bit stores fit.
        let wqe = unsafe { self.base.add(off).cast::<u64>() };
        // `data_words` with `length` and `lkey` (adjacent in `Sge`) taken as
        // one 64-bit load: one byte swap and a rotate make both big-endian.
        let d0 = if cfg!(target_endian = "little") {
            (u64::from(s.length) | u64::from(s.lkey) << 32).swap_bytes().rotate_left(32)
        } else {
            data_words(s.length, s.lkey, s.addr)[0]
        };
        let d1 = s.addr.to_be();
        debug_assert_eq!([d0, d1], data_words(s.length, s.lkey, s.addr));
        // `ctrl_words` with the per-QP parts precomputed: opcode and
        // `qpn_ds` (ds 2) in the first word, `fm_ce_se` in the second.
        let c0 = self.ctrl0_send | u64::from((u32::from(cur as u16) << 8).to_be());
        let c1 = self.ctrl1_fm[(flags & 7) as usize];
        let fm = self.ctrl1_fm[(flags & 7) as usize].to_ne_bytes()[3];
        debug_assert_eq!([c0, c1], ctrl_words(opcode::SEND, cur as u16, self.qpn8_be, 2, fm, 0));
        // SAFETY: see above.
        unsafe {
            wqe.add(2).write(d0);
            wqe.add(3).write(d1);
            wqe.write(c0);
            wqe.add(1).write(c1);
        }
        self.cur_post = cur.wrapping_add(1);
        Last { off, doorbell: c0, ds: 2, inline: false }
    }

    /// Checks and writes one WQE at `cur_post`; advances `cur_post`.
    ///
    /// # Safety
    /// There is room for `wqe_size` bytes at `cur_post` (overflow check);
    /// INLINE SGEs are readable.
    #[inline(never)]
    unsafe fn write_wqe(&mut self, wr: &SendWr<'_>, nreq: u64) -> Result<Last, PostErrorKind> {
        let flags = wr.flags.bits();
        let inline = flags & IB_SEND_INLINE != 0;
        // Operation: opcode, immediate, which segments follow the control one.
        let (op, imm) = match wr.op {
            SendOp::Send => (opcode::SEND, 0),
            SendOp::SendWithImm(imm) => (opcode::SEND_IMM, imm),
            SendOp::RdmaWrite(_) => (opcode::RDMA_WRITE, 0),
            SendOp::RdmaWriteWithImm(_, imm) => (opcode::RDMA_WRITE_IMM, imm),
            SendOp::RdmaRead(_) => (opcode::RDMA_READ, 0),
            SendOp::AtomicCmpAndSwp { .. } => (opcode::ATOMIC_CS, 0),
            SendOp::AtomicFetchAndAdd { .. } => (opcode::ATOMIC_FA, 0),
            // The rkey to invalidate rides in the control segment's
            // immediate field, as libmlx5 puts it.
            SendOp::SendWithInv(rkey) => (opcode::SEND_INVAL, rkey),
            // Memory windows and local invalidation take UMR segments on
            // mlx5, which this provider does not build yet.
            SendOp::LocalInv(_) | SendOp::BindMw(_) => return Err(PostErrorKind::OpcodeNotSupported),
            // Not posted on mlx5 yet.
            SendOp::AtomicWrite { .. } => return Err(PostErrorKind::OpcodeNotSupported),
        };
        let allowed = match self.qp_type {
            QpType::Rc => true,
            // The IBTA defines SEND with Invalidate for RC (and XRC) only.
            QpType::Uc => matches!(op, opcode::SEND | opcode::SEND_IMM | opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM),
            QpType::Ud => matches!(op, opcode::SEND | opcode::SEND_IMM),
        };
        if !allowed {
            return Err(PostErrorKind::OpcodeNotSupported);
        }
        if (self.qp_type == QpType::Ud) != wr.ud.is_some() {
            return Err(PostErrorKind::BadDestination);
        }
        let sgl = wr.sgl;
        // Lengths: one SGE is the common case.
        let total: u64 = match sgl {
            [s] => u64::from(s.length),
            _ => sgl.iter().map(|s| u64::from(s.length)).sum(),
        };
        if total > u64::from(u32::MAX) {
            return Err(PostErrorKind::TooLong);
        }
        let atomic = matches!(op, opcode::ATOMIC_CS | opcode::ATOMIC_FA);
        if inline {
            if atomic || op == opcode::RDMA_READ {
                // Results land in memory: there is nothing to inline.
                return Err(PostErrorKind::OpcodeNotSupported);
            }
            if total > u64::from(self.max_inline) {
                return Err(PostErrorKind::InlineTooLong { given: total, max: self.max_inline });
            }
        } else if sgl.len() > self.max_sge as usize {
            return Err(PostErrorKind::TooManySge { given: sgl.len(), max: self.max_sge });
        }
        let av = match wr.ud {
            Some(d) => match self.ahs.get(d.ah_num) {
                Some(mut av) => {
                    av.set_remote_qpn(d.remote_qpn);
                    av.set_qkey(d.remote_qkey);
                    Some(av)
                }
                None => return Err(PostErrorKind::BadDestination),
            },
            None => None,
        };
        if atomic {
            let r = match wr.op {
                SendOp::AtomicCmpAndSwp { remote, .. } | SendOp::AtomicFetchAndAdd { remote, .. } => remote,
                _ => unreachable!(),
            };
            if sgl.len() != 1 || sgl[0].length < 8 || r.addr % 8 != 0 {
                return Err(PostErrorKind::BadAtomic);
            }
        }

        // Checked: write it.
        let idx = self.cur_post & self.bb_mask;
        let off = (idx as usize) << 6;
        let mut ds: u32 = 1;
        // Segments are 16 bytes and 16-aligned, so none crosses the ring's
        // end; the segment types have alignment 1.
        // SAFETY: for all stores below: the WQE's blocks at `off` are free
        // (overflow check); every address goes through `seg` (masked into the ring).
        unsafe {
            match wr.op {
                SendOp::RdmaWrite(r) | SendOp::RdmaWriteWithImm(r, _) | SendOp::RdmaRead(r) => {
                    ptr::write(self.seg(off + 16).cast::<RaddrSeg>(), RaddrSeg::new(r.addr, r.rkey));
                    ds = 2;
                }
                SendOp::AtomicCmpAndSwp { remote, compare, swap } => {
                    ptr::write(self.seg(off + 16).cast::<RaddrSeg>(), RaddrSeg::new(remote.addr, remote.rkey));
                    ptr::write(self.seg(off + 32).cast::<AtomicSeg>(), AtomicSeg::cmp_swap(compare, swap));
                    ds = 3;
                }
                SendOp::AtomicFetchAndAdd { remote, add } => {
                    ptr::write(self.seg(off + 16).cast::<RaddrSeg>(), RaddrSeg::new(remote.addr, remote.rkey));
                    ptr::write(self.seg(off + 32).cast::<AtomicSeg>(), AtomicSeg::fetch_add(add));
                    ds = 3;
                }
                SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) | SendOp::AtomicWrite { .. } => {}
                // Refused above.
                SendOp::LocalInv(_) | SendOp::BindMw(_) => {}
            }
            if let Some(av) = av {
                // 48 bytes right after the control segment: same block.
                ptr::write(self.seg(off + 16).cast::<crate::mlx5::seg::Av>(), av);
                ds = 4;
            }
            if inline {
                if total > 0 {
                    ds += self.write_inline(off + 16 * ds as usize, sgl, total as u32);
                }
            } else if atomic {
                // The local SGE receives the 8-byte result.
                let s = &sgl[0];
                ptr::write(self.seg(off + 16 * ds as usize).cast::<DataSeg>(), DataSeg::new(8, s.lkey, s.addr));
                ds += 1;
            } else {
                for s in sgl {
                    if s.length != 0 {
                        ptr::write(
                            self.seg(off + 16 * ds as usize).cast::<DataSeg>(),
                            DataSeg::new(s.length, s.lkey, s.addr),
                        );
                        ds += 1;
                    }
                }
            }
            let fm = self.sig_all | FM_CE_SE[(flags & 7) as usize];
            let ctrl = CtrlSeg::new(op, self.cur_post as u16, self.qpn8 >> 8, ds as u8, fm, imm);
            ptr::write(self.base.add(off).cast::<CtrlSeg>(), ctrl);
            let slot = self.shared.sq.slot(idx);
            slot.wrid.store(wr.wr_id, Ordering::Relaxed);
            slot.end.store(self.head + nreq + 1, Ordering::Relaxed);
            self.cur_post = self.cur_post.wrapping_add(ds.div_ceil(4));
            Ok(Last { off, doorbell: ctrl.doorbell_word(), ds, inline })
        }
    }

    /// Writes an inline segment at ring offset `at` (unmasked): header,
    /// payload (split at the ring's end), zero padding to 16 bytes. Returns
    /// its length in 16-byte units.
    ///
    /// # Safety
    /// Room for `align(4 + total, 16)` bytes at `at`; the SGEs are readable.
    #[inline(never)]
    unsafe fn write_inline(&self, at: usize, sgl: &[crate::wr::Sge], total: u32) -> u32 {
        let ring = self.bytes_mask + 1;
        // SAFETY: a 16-aligned offset masked into the ring.
        unsafe { ptr::write(self.seg(at).cast::<InlineSeg>(), InlineSeg::new(total)) };
        let mut dst = at + 4;
        for s in sgl {
            let mut src = s.addr as usize as *const u8;
            let mut len = s.length as usize;
            while len > 0 {
                let pos = dst & self.bytes_mask;
                let n = len.min(ring - pos);
                // The source is caller memory, so it does not overlap the ring.
                // SAFETY: `pos..pos+n` is inside the ring (n stops at its end)
                // and this WQE (room for the inline segment); the source is
                // readable (contract).
                unsafe {
                    ptr::copy_nonoverlapping(src, self.base.add(pos), n);
                    src = src.add(n);
                }
                dst += n;
                len -= n;
            }
        }
        let units = (4 + total).div_ceil(16);
        let end = at + units as usize * 16;
        while dst < end {
            // SAFETY: padding inside the inline segment's last unit.
            unsafe { self.seg(dst).write(0) };
            dst += 1;
        }
        units
    }

    /// The doorbell for `nreq` requests, the last of which is `last`.
    #[inline(always)]
    fn ring(&mut self, nreq: u64, last: Last) {
        self.head += nreq;
        let pi = self.cur_post & 0xffff;
        // The WQEs are in memory before the doorbell record says so.
        barrier::to_device();
        // SAFETY: doorbell-record word 1 of this QP (cached pointer into
        // `shared.db`, alive as long as `self`); one atomic big-endian store,
        // read by the HCA (atomic: `on_state_change` may store it too).
        unsafe { crate::mlx5::mem::store_word(self.db_snd, pi) };
        // The doorbell record before the register write.
        self.mmio.wc_start();
        let bf = nreq == 1 && last.ds > 1 && last.ds as usize <= self.bf_max_ds && (last.inline || PREFER_BF);
        if bf {
            self.bf_copy(last);
        } else {
            // SAFETY: `bf_offset` is 0 or `bf_half` (it flips between the
            // two), so `bf_offset + 8 <= 2 * max(bf_half, 8)`: inside the
            // register window `mmio` was made for (`qp_finish_with`), 8-aligned
            // (`bf_half` is 0 or at least 64, a power of two: `DeviceInfo`).
            unsafe { self.mmio.write64(self.bf_offset, last.doorbell) };
        }
        self.mmio.flush();
        self.bf_offset ^= self.bf_half;
    }

    #[inline(always)]
    fn bf_copy(&self, last: Last) {
        let blocks = (last.ds as usize * 16).div_ceil(64);
        for b in 0..blocks {
            // SAFETY: a whole 64-byte block of the WQE just written, masked
            // into the ring (blocks are 64-aligned, so none crosses the end);
            // the HCA only reads the send queue, so a plain copy is fine.
            let block: [u64; 8] = unsafe { ptr::read(self.seg(last.off + 64 * b).cast::<[u64; 8]>()) };
            // SAFETY: `ring` copies only when `ds <= bf_max_ds <= bf_half / 16`, so the
            // `blocks * 64 <= bf_half` bytes (`bf_half` a power of two >= 64)
            // from `bf_offset` (0 or `bf_half`) fit in the window of
            // `2 * bf_half` bytes; 64-aligned for the same reason.
            unsafe { self.mmio.bf_copy(self.bf_offset + 64 * b, &block) };
        }
    }
}

/// rdma-core's `prefer_bf` default (`MLX5_POST_SEND_PREFER_BF` unset):
/// BlueFlame for every single-request post, inline or not.
const PREFER_BF: bool = true;
