//! mlx5 completion queues: the user-allocated CQE buffer and doorbell
//! record, polling by owner bit, decoding into [`Wc`], consumer-index
//! updates, arming through the doorbell record and the UAR arm register,
//! and cleaning a QP's entries out (rdma-core `cq.c`; providers.md §B.3,
//! §B.8, §B.9).
//!
//! Unsafe code (allowed below): the CQE buffer is written by the HCA at any
//! time; it is read only with a volatile load of the owner byte, then (after
//! `barrier::from_device()`) a copy of the whole 64-byte entry, never
//! through a reference. `clean_qp` moves software-owned entries with raw
//! copies.
#![allow(unsafe_code)]

use core::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use rverbs_uapi::mlx5_abi::{mlx5_ib_create_cq, mlx5_ib_create_cq_resp, MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX};

use crate::mlx5::barrier;
use crate::mlx5::cqe::{opcode, req_kind, status_of, sw_owned, Cqe64, ReqLen, CQE_SIZE, OP_OWN, OP_OWN_INIT};
use crate::mlx5::mem::{DbRec, DmaBuf};
use crate::mlx5::mmio::{Mmio, UarMmio};
use crate::mlx5::qp::{FinishError, QpShared, SqSlot};
use crate::mlx5::srq::SrqShared;
use crate::mlx5::table::Registry;
use crate::mlx5::uar::{RegInfo, UarPage, CQ_DOORBELL, UAR_SIZE};
use crate::mlx5::{parse, Context};
use crate::wr::{Wc, WcFlags, WcOpcode, WcStatus};
use crate::{Errno, Error, Result};

/// `MLX5_CQ_DB_REQ_NOT_SOL`: arm for solicited (and error) completions only.
pub const CQ_DB_REQ_NOT_SOL: u32 = 1 << 24;
/// `MLX5_CQ_DB_REQ_NOT`: arm for the next completion.
pub const CQ_DB_REQ_NOT: u32 = 0;
/// Most entries a CQ may have (`1 << 24`).
pub const MAX_CQE: u32 = 1 << 24;

/// The arm doorbell: `(sn << 28 | cmd | ci)` in the high half, the CQN in
/// the low half, as the big-endian bytes the register receives.
pub fn arm_doorbell(sn: u32, solicited: bool, ci: u32, cqn: u32) -> (u32, u64) {
    let cmd = if solicited { CQ_DB_REQ_NOT_SOL } else { CQ_DB_REQ_NOT };
    let word = (sn & 3) << 28 | cmd | (ci & 0x00ff_ffff);
    (word, (u64::from(word) << 32 | u64::from(cqn)).to_be())
}

/// A CQ between its driver data and the kernel's answer: owns the CQE
/// buffer and the doorbell record. Drop it if the kernel create fails.
#[derive(Debug)]
pub struct PendingCq {
    buf: DmaBuf,
    db: DbRec,
    ncqe: u32,
    uar_index: u32,
    arm_page: Arc<UarPage>,
    udata: mlx5_ib_create_cq,
}

impl PendingCq {
    /// The `cqe` for the core create-CQ command: `ncqe - 1` (the kernel
    /// rounds `cqe + 1` up to a power of two and must arrive at `ncqe`).
    pub fn core_cqe(&self) -> u32 {
        self.ncqe - 1
    }
    /// Entries in the buffer.
    pub fn ncqe(&self) -> u32 {
        self.ncqe
    }
    /// The driver data.
    pub fn udata(&self) -> &mlx5_ib_create_cq {
        &self.udata
    }
    /// Dynamic UARs with a page id ≥ 65536 do not fit `uar_page_index`:
    /// then send it as the ioctl attribute `MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX`
    /// of `UVERBS_METHOD_CQ_CREATE` (the write form cannot carry it).
    pub fn uar_index_attr(&self) -> Option<u32> {
        (self.udata.flags & MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX as u16 != 0 && self.uar_index > 0xffff)
            .then_some(self.uar_index)
    }
}

/// A cache of the QP (and, with CQE version 0, SRQ) the last CQE named.
#[derive(Debug, Default)]
struct Cache {
    generation: u64,
    qp: Option<Arc<QpShared>>,
    srq: Option<Arc<SrqShared>>,
}

/// A created completion queue. `Send`; one poller at a time (`&mut self`).
#[derive(Debug)]
pub struct Cq<M: Mmio = UarMmio> {
    base: *mut u8,
    ncqe: u32,
    mask: u32,
    /// Consumer index, free running.
    ci: u32,
    arm_sn: u32,
    cqn: u32,
    cqe_v1: bool,
    /// log2(ncqe): the owner bit expected at `ci` is `ci >> log_ncqe & 1`.
    log_ncqe: u32,
    /// Where a requester CQE names its QP: `srqn_uidx` (32, version 1) or
    /// `sop_drop_qpn` (56, version 0).
    rsn_off: usize,
    /// The cached QP's resource number, send slots, their mask and its
    /// retire counter (pointers into `cache.qp`).
    cur_rsn: u32,
    cur_slots: *const SqSlot,
    cur_sq_mask: u32,
    cur_tail: *const AtomicU32,
    /// Consumer-index word of `db`.
    db_ci: *mut u32,
    cache: Cache,
    registry: Arc<Registry>,
    mmio: M,
    skipped: u64,
    db: DbRec,
    buf: DmaBuf,
}

// SAFETY: `base` points into `buf`, `db_ci` into `db`, `cur_slots` and
// `cur_tail` into the `Arc` in `cache`, all owned by this value; the buffer is only read through
// raw copies and written (clean) through `&mut self`; `QpShared` is `Sync`.
unsafe impl<M: Mmio + Send> Send for Cq<M> {}
// SAFETY: every `&self` method reads plain fields of this value (numbers,
// the doorbell record's address) or hands out `&M`; nothing reachable
// through `&self` dereferences the raw pointers or writes anything.
unsafe impl<M: Mmio + Sync> Sync for Cq<M> {}

/// What the fast path needs to know about a send opcode: the completion
/// opcode, flags and `byte_len` (`u32::MAX`: the CQE's `byte_cnt`).
#[derive(Clone, Copy)]
struct ReqFast {
    opcode: WcOpcode,
    flags: WcFlags,
    len: u32,
}

/// [`req_kind`] as a table over the low 6 bits of the send opcode (every
/// mlx5 send opcode is below 0x40); unknown ones keep their raw value in `WcOpcode`.
const REQ_FAST: [ReqFast; 64] = {
    let mut t = [ReqFast { opcode: WcOpcode::SEND, flags: WcFlags::empty(), len: 0 }; 64];
    let mut i = 0;
    while i < 64 {
        let k = req_kind(i as u8);
        t[i] = ReqFast {
            opcode: k.opcode,
            flags: if k.with_imm { WcFlags::WITH_IMM } else { WcFlags::empty() },
            len: match k.len {
                ReqLen::Zero => 0,
                ReqLen::Cqe => u32::MAX,
                ReqLen::Eight => 8,
            },
        };
        i += 1;
    }
    t
};

/// What one CQE turned into.
enum Decoded {
    Wc(Wc),
    Skip,
}

impl Context {
    /// Phase one of create-CQ: at least `cqe` entries. Allocates a
    /// page-aligned buffer of `ncqe = roundup_pow2(cqe + 1)` 64-byte entries
    /// with every `op_own` 0xF0 and a zeroed doorbell record; returns the
    /// driver data (`mlx5_ib_create_cq`). Put [`PendingCq::core_cqe`] into
    /// the core command.
    pub fn cq_prepare(&self, cqe: u32) -> Result<(PendingCq, mlx5_ib_create_cq)> {
        const VERB: &str = "ibv_create_cq";
        if cqe == 0 || cqe >= MAX_CQE {
            return Err(Error::os(VERB, Errno::EINVAL).with_message(format!("{cqe} CQ entries; 1..{MAX_CQE} allowed")));
        }
        let ncqe = (cqe + 1).next_power_of_two();
        let buf = DmaBuf::new(VERB, ncqe as usize * CQE_SIZE)?;
        for i in 0..ncqe as usize {
            // SAFETY: entry `i` lies in the fresh buffer; the HCA does not
            // know it yet.
            unsafe { buf.ptr().add(i * CQE_SIZE + OP_OWN).write(OP_OWN_INIT) };
        }
        let db = self.dbrecs().alloc(VERB)?;
        let (page, uar_index) = self.uars().cq_page();
        let mut udata = mlx5_ib_create_cq {
            buf_addr: buf.addr(),
            db_addr: db.addr(),
            cqe_size: CQE_SIZE as u32,
            ..Default::default()
        };
        if self.uars().is_dynamic() {
            udata.flags |= MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX as u16;
            udata.uar_page_index = uar_index as u16;
        }
        let arm_page = page.clone();
        Ok((PendingCq { buf, db, ncqe, uar_index, arm_page, udata }, udata))
    }

    /// Phase two: the kernel created the CQ with `kernel_cqe` entries (the
    /// core answer) and answered `drv_out` (`mlx5_ib_create_cq_resp`).
    pub fn cq_finish(&self, pending: PendingCq, drv_out: &[u8], kernel_cqe: u32) -> Result<Cq, FinishError<PendingCq>> {
        self.cq_finish_with(pending, drv_out, kernel_cqe, |_, page| UarMmio::new(page, 0, UAR_SIZE))
    }

    /// [`cq_finish`](Self::cq_finish) with the doorbell seam supplied by the
    /// caller: `mmio` gets the arm page (the arm register is at +0x20 of the
    /// window it returns).
    pub fn cq_finish_with<M: Mmio>(
        &self,
        pending: PendingCq,
        drv_out: &[u8],
        kernel_cqe: u32,
        mmio: impl FnOnce(&RegInfo, &Arc<UarPage>) -> M,
    ) -> Result<Cq<M>, FinishError<PendingCq>> {
        const VERB: &str = "ibv_create_cq";
        let resp: mlx5_ib_create_cq_resp = match parse(VERB, drv_out) {
            Ok(r) => r,
            Err(error) => return Err(FinishError { error, pending: Box::new(pending) }),
        };
        if kernel_cqe != pending.ncqe - 1 {
            let error = Error::os(VERB, Errno::EPROTO).with_message(format!(
                "the kernel made {} entries of a {}-entry buffer",
                kernel_cqe.wrapping_add(1),
                pending.ncqe
            ));
            return Err(FinishError { error, pending: Box::new(pending) });
        }
        let PendingCq { buf, db, ncqe, uar_index, arm_page, udata: _ } = pending;
        let info = RegInfo { uar_index, offset: 0, bf_half: 0 };
        let m = mmio(&info, &arm_page);
        tracing::debug!(cqn = resp.cqn, ncqe, uar = uar_index, "mlx5 CQ ready");
        Ok(Cq {
            base: buf.ptr(),
            ncqe,
            mask: ncqe - 1,
            ci: 0,
            arm_sn: 0,
            cqn: resp.cqn,
            cqe_v1: self.device().cqe_version >= 1,
            log_ncqe: ncqe.trailing_zeros(),
            rsn_off: if self.device().cqe_version >= 1 { 32 } else { 56 },
            cur_rsn: u32::MAX,
            cur_slots: ptr::null(),
            cur_sq_mask: 0,
            cur_tail: ptr::null(),
            db_ci: db.word_ptr(0),
            cache: Cache { generation: self.registry().generation(), ..Default::default() },
            registry: self.registry().clone(),
            mmio: m,
            skipped: 0,
            db,
            buf,
        })
    }
}

impl<M: Mmio> Cq<M> {
    /// CQ number.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }
    /// Entries.
    pub fn ncqe(&self) -> u32 {
        self.ncqe
    }
    /// Consumer index (free running).
    pub fn cons_index(&self) -> u32 {
        self.ci
    }
    /// Arm sequence number.
    pub fn arm_sn(&self) -> u32 {
        self.arm_sn
    }
    /// CQEs consumed without a completion: internal opcodes, or naming a QP
    /// this context does not know (e.g. destroyed without cleaning).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
    /// Buffer address given to the kernel.
    pub fn buf_addr(&self) -> u64 {
        self.buf.addr()
    }
    /// Doorbell record address given to the kernel.
    pub fn db_addr(&self) -> u64 {
        self.db.addr()
    }
    /// The doorbell seam.
    pub fn mmio(&self) -> &M {
        &self.mmio
    }

    #[inline(always)]
    fn entry(&self, i: u32) -> *mut u8 {
        // SAFETY: masked entry index, inside the buffer.
        unsafe { self.base.add(((i & self.mask) as usize) * CQE_SIZE) }
    }

    #[inline(always)]
    fn op_own(&self, i: u32) -> u8 {
        // SAFETY: the owner byte of an entry in our buffer; volatile because
        // the HCA writes it.
        unsafe { self.entry(i).add(OP_OWN).read_volatile() }
    }

    /// Moves up to `out.len()` completions into `out`; returns how many.
    /// No syscall. Publishes the consumer index (`CQ_SET_CI`) once at the end.
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        let generation = self.registry.generation();
        if generation != self.cache.generation {
            self.forget(generation);
        }
        let start = self.ci;
        let mut ci = start;
        let (base, mask, shift) = (self.base, self.mask, self.log_ncqe);
        let mut n = 0;
        while let Some(w) = out.get_mut(n) {
            // SAFETY: masked entry index, inside the buffer.
            let p = unsafe { base.add(((ci & mask) as usize) * CQE_SIZE) };
            // SAFETY: the owner byte of an entry of our buffer; volatile
            // because the HCA writes it.
            let op_own = unsafe { p.add(OP_OWN).read_volatile() };
            // `sw_owned`: not INVALID, owner bit = this pass's parity.
            let parity_ok = (u32::from(op_own) ^ (ci >> shift)) & 1 == 0;
            if op_own < 0x10 && parity_ok {
                // A requester CQE (opcode 0) of ours.
                ci = ci.wrapping_add(1);
                // The rest of the entry is read after its owner byte.
                barrier::from_device();
                if self.decode_req(p, w) || self.decode_other(p, w) {
                    n += 1;
                }
                continue;
            }
            if op_own >= 0xf0 || !parity_ok {
                break;
            }
            ci = ci.wrapping_add(1);
            barrier::from_device();
            if self.decode_other(p, w) {
                n += 1;
            }
        }
        if ci != start {
            self.ci = ci;
            // Our copies are done before the HCA may reuse the entries.
            barrier::cqe_reads_done();
            // SAFETY: consumer-index word of our doorbell record (cached
            // pointer into `self.db`); one volatile big-endian store.
            unsafe { self.db_ci.write_volatile((ci & 0x00ff_ffff).to_be()) };
        }
        n
    }

    #[cold]
    fn forget(&mut self, generation: u64) {
        self.cache = Cache { generation, qp: None, srq: None };
        self.cur_rsn = u32::MAX;
        self.cur_slots = ptr::null();
        self.cur_tail = ptr::null();
        // Requests are pushed before the generation moves, so they are seen here.
        self.apply_cleans();
    }

    /// Runs the cleans requested for this CQ with
    /// [`Context::request_clean`] (a QP destroyed or reset while this CQ's
    /// poller could not be reached). `poll` does it by itself, before
    /// looking at any entry, whenever the registry's generation moved; call
    /// it directly before parking a CQ nobody will poll again.
    #[cold]
    pub fn apply_cleans(&mut self) {
        let qps = self.registry.cleans_for(self.cqn);
        if qps.is_empty() {
            return;
        }
        for qp in &qps {
            self.clean_qp(qp);
        }
        self.registry.cleans_done(self.cqn, &qps);
    }

    /// The common case: a requester CQE (the caller checked the opcode) of
    /// the cached QP with a known send opcode. Fills `w` and returns true,
    /// or returns false (untouched).
    #[inline(always)]
    fn decode_req(&self, p: *const u8, w: &mut Wc) -> bool {
        // The resource number is read at its offset for this CQE version:
        // `srqn_uidx` or `sop_drop_qpn`.
        // SAFETY: a whole 64-byte entry the HCA handed to software (owner bit
        // checked, barrier passed); copied out, never referenced.
        let (c, rsn_be) = unsafe { (ptr::read(p.cast::<Cqe64>()), ptr::read(p.add(self.rsn_off).cast::<[u8; 4]>())) };
        let c = &c;
        let rsn = u32::from_be_bytes(rsn_be) & 0x00ff_ffff;
        if rsn != self.cur_rsn {
            return false;
        }
        let k = REQ_FAST[usize::from(c.send_opcode() & 0x3f)];
        // SAFETY: `cur_slots`/`cur_tail` point into the `QpShared` of
        // `cache.qp`, an `Arc` this value holds (set and reset together in
        // `qp` / `forget`); the slot index is masked to the array's length.
        let (slot, tail) = unsafe {
            (&*self.cur_slots.add((u32::from(c.wqe_counter()) & self.cur_sq_mask) as usize), &*self.cur_tail)
        };
        let (wr_id, head) = (slot.wrid.load(Ordering::Relaxed), slot.head.load(Ordering::Relaxed));
        // Release: the slot's wr_id was read before the poster reuses it.
        tail.store(head.wrapping_add(1), Ordering::Release);
        *w = Wc {
            wr_id,
            status: WcStatus::SUCCESS,
            opcode: k.opcode,
            vendor_err: 0,
            byte_len: if k.len == u32::MAX { c.byte_cnt() } else { k.len },
            imm_data: 0,
            qp_num: c.qpn(),
            src_qp: 0,
            wc_flags: k.flags,
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
            port_num: 0,
        };
        true
    }

    /// Everything else: fills `w` and returns true, or false when the CQE
    /// yields no completion (counted in `skipped`).
    #[inline(never)]
    fn decode_other(&mut self, p: *const u8, w: &mut Wc) -> bool {
        // SAFETY: `p` is the entry `poll` just took ownership of (owner bit
        // checked, barrier passed); copied out.
        let c = unsafe { ptr::read(p.cast::<Cqe64>()) };
        match self.decode(&c) {
            Decoded::Wc(wc) => {
                *w = wc;
                true
            }
            Decoded::Skip => {
                self.skipped += 1;
                false
            }
        }
    }

    /// The QP named by resource number `rsn`, through the cache.
    #[inline(always)]
    fn qp(&mut self, rsn: u32) -> Option<&QpShared> {
        let hit = matches!(&self.cache.qp, Some(q) if q.rsn() == rsn);
        if !hit {
            let q = self.registry.qp(rsn)?;
            self.cur_rsn = rsn;
            self.cur_slots = q.sq.slot(0);
            self.cur_sq_mask = q.sq.mask;
            self.cur_tail = &q.sq.tail;
            self.cache.qp = Some(q);
        }
        self.cache.qp.as_deref()
    }

    #[inline(always)]
    fn decode(&mut self, c: &Cqe64) -> Decoded {
        let op = c.opcode();
        let qpn = c.qpn();
        let v1 = self.cqe_v1;
        if op == opcode::REQ {
            let rsn = if v1 { c.srqn_uidx() } else { qpn };
            let Some(qp) = self.qp(rsn) else { return Decoded::Skip };
            let idx = u32::from(c.wqe_counter());
            let slot = qp.sq.slot(idx);
            let (wr_id, head) = (slot.wrid.load(Ordering::Relaxed), slot.head.load(Ordering::Relaxed));
            // Release: the slots' wr_ids were read before the poster reuses them.
            qp.sq.tail.store(head.wrapping_add(1), Ordering::Release);
            let k = req_kind(c.send_opcode());
            let byte_len = match k.len {
                ReqLen::Zero => 0,
                ReqLen::Cqe => c.byte_cnt(),
                ReqLen::Eight => 8,
            };
            return Decoded::Wc(Wc {
                wr_id,
                status: WcStatus::SUCCESS,
                opcode: k.opcode,
                vendor_err: 0,
                byte_len,
                imm_data: 0,
                qp_num: qpn,
                src_qp: 0,
                wc_flags: if k.with_imm { WcFlags::WITH_IMM } else { WcFlags::empty() },
                pkey_index: 0,
                slid: 0,
                sl: 0,
                dlid_path_bits: 0,
                port_num: 0,
            });
        }
        match op {
            opcode::RESP_WR_IMM | opcode::RESP_SEND | opcode::RESP_SEND_IMM | opcode::RESP_SEND_INV => {
                let Some(wr_id) = self.retire_recv(c) else { return Decoded::Skip };
                let imm = c.imm_inval_pkey();
                let (opcode, mut flags, imm_data) = match op {
                    opcode::RESP_WR_IMM => (WcOpcode::RECV_RDMA_WITH_IMM, WcFlags::WITH_IMM, imm),
                    opcode::RESP_SEND => (WcOpcode::RECV, WcFlags::empty(), 0),
                    opcode::RESP_SEND_IMM => (WcOpcode::RECV, WcFlags::WITH_IMM, imm),
                    _ => (WcOpcode::RECV, WcFlags::WITH_INV, imm),
                };
                if c.grh() != 0 {
                    flags |= WcFlags::GRH;
                }
                Decoded::Wc(Wc {
                    wr_id,
                    status: WcStatus::SUCCESS,
                    opcode,
                    vendor_err: 0,
                    byte_len: c.byte_cnt(),
                    imm_data,
                    qp_num: qpn,
                    src_qp: c.src_qp(),
                    wc_flags: flags,
                    // The field holds the P_Key index only when it holds
                    // no immediate / invalidated rkey.
                    pkey_index: if op == opcode::RESP_SEND { imm as u16 } else { 0 },
                    slid: c.slid(),
                    sl: c.sl(),
                    dlid_path_bits: c.dlid_path_bits(),
                    port_num: 0,
                })
            }
            opcode::REQ_ERR => {
                let rsn = if v1 { c.srqn_uidx() } else { qpn };
                let Some(qp) = self.qp(rsn) else { return Decoded::Skip };
                let idx = u32::from(c.wqe_counter());
                let slot = qp.sq.slot(idx);
                let (wr_id, head) = (slot.wrid.load(Ordering::Relaxed), slot.head.load(Ordering::Relaxed));
                qp.sq.tail.store(head.wrapping_add(1), Ordering::Release);
                Decoded::Wc(self.error_wc(c, wr_id, req_kind(c.send_opcode()).opcode))
            }
            opcode::RESP_ERR => {
                let Some(wr_id) = self.retire_recv(c) else { return Decoded::Skip };
                Decoded::Wc(self.error_wc(c, wr_id, WcOpcode::RECV))
            }
            // RESIZE_CQ, SIG_ERR, NO_PACKET and anything unknown: internal.
            _ => Decoded::Skip,
        }
    }

    fn error_wc(&self, c: &Cqe64, wr_id: u64, opcode: WcOpcode) -> Wc {
        Wc {
            wr_id,
            status: status_of(c.syndrome()),
            opcode,
            vendor_err: u32::from(c.vendor_err_synd()),
            qp_num: c.qpn(),
            ..Wc::default()
        }
    }

    /// A responder CQE: the wr_id of the receive it consumed, retiring it
    /// (RQ: `tail++`; SRQ: the WQE goes back on the free list).
    #[inline(always)]
    fn retire_recv(&mut self, c: &Cqe64) -> Option<u64> {
        let ctr = u32::from(c.wqe_counter());
        let srqn_uidx = c.srqn_uidx();
        if !self.cqe_v1 && srqn_uidx != 0 {
            // Version 0: an SRQ receive names the SRQ.
            let hit = matches!(&self.cache.srq, Some(s) if s.srqn() == srqn_uidx);
            if !hit {
                self.cache.srq = Some(self.registry.srq(srqn_uidx)?);
            }
            let srq = self.cache.srq.as_deref()?;
            let wr_id = srq.wrid(ctr);
            srq.free(ctr);
            return Some(wr_id);
        }
        let rsn = if self.cqe_v1 { srqn_uidx } else { c.qpn() };
        let qp = self.qp(rsn)?;
        if let Some(srq) = &qp.srq {
            let wr_id = srq.wrid(ctr);
            srq.free(ctr);
            return Some(wr_id);
        }
        let wr_id = qp.rq.wrid(ctr).load(Ordering::Relaxed);
        let t = qp.rq.tail.load(Ordering::Relaxed);
        qp.rq.tail.store(t.wrapping_add(1), Ordering::Release);
        Some(wr_id)
    }

    /// Requests a completion event (`ibv_req_notify_cq`; rdma-core
    /// `mlx5_arm_cq`): the arm word into doorbell record word 1, then the
    /// 64-bit arm doorbell at UAR + 0x20. No syscall. One-shot: arm again
    /// after each event.
    pub fn arm(&mut self, solicited: bool) {
        let (word, bytes) = arm_doorbell(self.arm_sn, solicited, self.ci, self.cqn);
        self.db.store(1, word);
        // The doorbell record before the register write.
        self.mmio.wc_start();
        self.mmio.write64(CQ_DOORBELL, bytes);
        self.mmio.flush();
    }

    /// The application consumed a completion event for this CQ (read from
    /// its completion channel): advances the arm sequence number
    /// (rdma-core `mlx5_cq_event`).
    pub fn on_event(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }

    /// Drops the entries of QP `qp` that software has not polled yet,
    /// compacting the rest and keeping each slot's owner bit (rdma-core
    /// `__mlx5_cq_clean`); receive entries of an SRQ go back to its free
    /// list. For destroy-QP and the move to RESET, after the kernel command.
    pub fn clean_qp(&mut self, qp: &QpShared) {
        let rsn = qp.rsn();
        let v1 = self.cqe_v1;
        let mut pi = self.ci;
        while sw_owned(self.op_own(pi), pi, self.ncqe) {
            pi = pi.wrapping_add(1);
            if pi == self.ci.wrapping_add(self.ncqe - 1) {
                break;
            }
        }
        let mut freed = 0u32;
        while pi != self.ci {
            pi = pi.wrapping_sub(1);
            // The entry's body after its owner byte (read in the scan).
            barrier::from_device();
            // SAFETY: a software-owned entry (owner bit checked in the scan).
            let c = unsafe { ptr::read(self.entry(pi).cast::<Cqe64>()) };
            let mine = if v1 { c.srqn_uidx() == rsn } else { c.qpn() == rsn };
            if mine {
                let responder = matches!(c.opcode(), 1..=4 | opcode::RESP_ERR);
                if let (true, Some(srq)) = (responder, &qp.srq) {
                    srq.free(u32::from(c.wqe_counter()));
                }
                freed += 1;
            } else if freed > 0 {
                let dst = self.entry(pi.wrapping_add(freed));
                // SAFETY: `dst` is a software-owned entry between `pi` and
                // the scan's end (it held an entry of this QP); `c` is a
                // copy. The owner bit stays the slot's own.
                unsafe {
                    let owner = dst.add(OP_OWN).read() & 1;
                    ptr::write(dst.cast::<Cqe64>(), c);
                    dst.add(OP_OWN).write((c.op_own() & !1) | owner);
                }
            }
        }
        if freed > 0 {
            self.ci = self.ci.wrapping_add(freed);
            barrier::to_device();
            self.db.store(0, self.ci & 0x00ff_ffff);
        }
    }
}
