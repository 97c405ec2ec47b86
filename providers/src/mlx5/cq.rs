//! mlx5 completion queues: the user-allocated CQE buffer and doorbell
//! record, polling by owner bit, decoding into [`Wc`], consumer-index
//! updates, arming through the doorbell record and the UAR arm register,
//! and cleaning a QP's entries out (rdma-core `cq.c`; providers.md §B.3,
//! §B.8, §B.9).
//!
//! Unsafe code (allowed below): the CQE buffer is written by the HCA at any
//! time; it is read only with a volatile load of the owner byte, then (after
//! `barrier::from_device()`) plain reads of the fields the fast path needs
//! or a copy of the whole 64-byte entry, never through a reference. The
//! fast path writes `Wc`s as whole 8- and 16-byte words. `clean_qp` moves software-owned entries with raw
//! copies. The buffer has a sentinel entry after the ring, never the HCA's.
//! The poll gate (`Gate`, a word of the doorbell record's slot that the
//! registry closes on every generation bump) and the send queue's retire
//! counter (reached from the cached slot pointer) are only accessed
//! atomically.
#![allow(unsafe_code)]

use core::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use rverbs_uapi::mlx5_abi::{mlx5_ib_create_cq, mlx5_ib_create_cq_resp, MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX};

use crate::mlx5::barrier;
use crate::mlx5::cqe::{opcode, req_kind, status_of, sw_owned, Cqe64, ReqLen, CQE_SIZE, OP_OWN, OP_OWN_INIT};
use crate::mlx5::mem::{DbRec, DmaBuf, Gate, GATE_WORD};
use crate::mlx5::mmio::{Mmio, UarMmio};
use crate::mlx5::qp::{FinishError, QpShared, SqSlot, TAIL_OFFSET};
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
    /// The QPs looked up before, by resource number (user indices are
    /// dense from 0), made when the CQ first switches from one QP to
    /// another (the QP cached until then goes in too), grown as larger
    /// numbers come, dropped with the rest of the cache. With many QPs on
    /// one CQ consecutive CQEs name different QPs; the registry's lookup
    /// (a lock and a hash) is then made once a QP, not once a switch
    /// (`examples/mlx5_scale.rs`).
    recent: Option<Vec<Option<Arc<QpShared>>>>,
    /// The fast paths' view ([`FastQp::of`]) of each QP of `recent`, at
    /// the same index (an unused one: `FastQp::NONE`, whose key no CQE
    /// has), so that a run of CQEs switches QPs in place
    /// ([`poll_req`](Cq::poll_req) with `SWITCH`). Its pointers are into
    /// the `Arc`s of `recent`, which it never outlives.
    fast: Vec<FastQp>,
}

/// One QP as the fast paths see it (`Cq`'s `cur_*` fields): its resource
/// number as [`rsn_key`] makes it from a CQE, its number as `Wc` bytes
/// 24..32, its send slots and their mask as a byte offset.
#[derive(Clone, Copy, Debug)]
struct FastQp {
    key: u32,
    slot_mask: u32,
    slots: *const SqSlot,
    qpn_word: u64,
}

impl FastQp {
    /// No QP: no CQE's key ([`rsn_key`], below `1 << 24`) equals it.
    const NONE: FastQp = FastQp { key: u32::MAX, slot_mask: 0, slots: ptr::null(), qpn_word: 0 };

    #[inline(always)]
    fn of(q: &QpShared) -> FastQp {
        FastQp {
            key: rsn_key(q.rsn().to_be()),
            slot_mask: q.sq.mask << 4,
            slots: q.sq.slots_ptr(),
            qpn_word: pair(0, q.qpn()),
        }
    }
}

/// Resource numbers from here on (version-0 QPNs can be anything) are not
/// kept in [`Cache::recent`].
const RECENT_MAX: usize = 1 << 16;

/// A created completion queue. `Send`; one poller at a time (`&mut self`).
#[derive(Debug)]
pub struct Cq<M: Mmio = UarMmio> {
    base: *mut u8,
    ncqe: u32,
    mask: u32,
    /// One past the ring's last entry: the sentinel entry, never the
    /// HCA's, whose owner byte stays `OP_OWN_INIT` (no gate value matches).
    end: *mut u8,
    /// Consumer index, free running.
    ci: u32,
    /// The entry at `ci` and the owner bit it has when it is software's
    /// (`ci >> log_ncqe & 1`): set with `ci` (`set_ci`, `clean_qp`), so
    /// the single-entry poll neither masks nor shifts. The one-entry fast
    /// path steps `cur_cqe` without looking for the ring's end, so it may be
    /// `end` (then `ci` is at index 0 and `cur_owner` is still the last
    /// pass's): whoever finds it there wraps it ([`wrap_cursor`](Self::wrap_cursor)).
    /// The gate word of `db` mirrors `cur_owner` while open (see [`Gate`]).
    cur_cqe: *mut u8,
    cur_owner: u32,
    arm_sn: u32,
    cqn: u32,
    /// CQE version 1 (the default): requester CQEs name their QP in
    /// `srqn_uidx` (byte 32), version 0 in `sop_drop_qpn` (byte 56). The
    /// one-entry fast path is written for version 1 only (the offset a
    /// constant); a version-0 CQ's gate stays closed, and its one-entry
    /// polls take the same decode from [`single_slow`](Self::single_slow).
    cqe_v1: bool,
    /// log2(ncqe): the owner bit expected at `ci` is `ci >> log_ncqe & 1`.
    log_ncqe: u32,
    /// The cached QP's resource number as [`rsn_key`] makes it from a CQE
    /// (`u32::MAX`, which no key equals, when nothing is cached), its number
    /// as `Wc` bytes 24..32 (`imm_data` 0, `qp_num`), its send slots (a
    /// pointer into `cache.qp` or an entry of `cache.recent`, see
    /// [`switch_qp`](Self::switch_qp); the retire counter lies [`TAIL_OFFSET`]
    /// bytes before them, see [`tail_of`]) and their mask as a byte offset
    /// (`sq.mask << 4`, see [`slot_offset`]).
    cur_rsn_key: u32,
    cur_qpn_word: u64,
    cur_slots: *const SqSlot,
    cur_slot_mask: u32,
    /// Consumer-index word of `db`.
    db_ci: *mut u32,
    cache: Cache,
    registry: Arc<Registry>,
    mmio: M,
    skipped: u64,
    db: DbRec,
    buf: DmaBuf,
}

// SAFETY: `base`, `end` and `cur_cqe` point into `buf`, `db_ci` into `db`, `cur_slots`
// and those of `cache.fast` into the `Arc`s in `cache`, all owned by this value; the buffer
// is only read through volatile owner-byte loads and raw copies, and
// written (clean) through `&mut self`; the doorbell record and the
// `QpShared` words are accessed atomically (`QpShared` is `Sync`).
unsafe impl<M: Mmio + Send> Send for Cq<M> {}
// SAFETY: the public `&self` methods only read plain fields of this value
// (numbers, the buffer's and doorbell record's addresses) or, `is_empty`,
// one owner byte (volatile). The private `&self` helpers that dereference
// the raw pointers (`entry`, `op_own`: CQE reads; `set_gate`, `gate_word`:
// atomic accesses to the gate) are only called from `&mut self` methods
// (`poll`, `poll_one`, `clean_qp`) or while the value is built, so two
// threads never run them on one CQ at once; the slot loads and
// retire-counter stores (`poll_req`, `poll_single`) take `&mut self`.
unsafe impl<M: Mmio + Sync> Sync for Cq<M> {}

/// Retires the send requests of a QP up to the one the requester CQE at
/// `p` completed: its slot's `end` into the retire counter. The slot is
/// read again for it (not carried through the decode loops, which then
/// keep one register more for themselves).
///
/// # Safety
/// `p` is an entry the caller decoded (its body may be read) for the QP
/// whose send slots are `slots` (mask `slot_mask`), held alive by the CQ.
#[inline(always)]
unsafe fn retire(p: *const u8, slots: *const SqSlot, slot_mask: u32) {
    // SAFETY: the caller's contract; the offset is a slot's, masked to the
    // array's length.
    let end = unsafe { &*slots.byte_add(slot_offset(p, slot_mask)) }.end.load(Ordering::Relaxed);
    // Release: the slots' wr_ids were read before the poster reuses them.
    // SAFETY: `slots` is a QP's slot array (the caller's contract).
    unsafe { tail_of(slots) }.store(end, Ordering::Release);
}

/// A CQE's resource number (`srqn_uidx` or `sop_drop_qpn`, big-endian,
/// `& 0x00ff_ffff`) from the 32-bit word read as it lies in memory, without
/// swapping its bytes: the word with its top byte shifted out. Always
/// below `1 << 24`.
#[inline(always)]
const fn rsn_key(raw: u32) -> u32 {
    if cfg!(target_endian = "little") {
        raw >> 8
    } else {
        raw & 0x00ff_ffff
    }
}

/// The send queue's retire counter ([`SqShared::tail`]) of the QP whose
/// slot array is `slots` ([`SqShared::slots_ptr`]): [`TAIL_OFFSET`] bytes
/// before it, in the same allocation.
///
/// # Safety
/// `slots` is a live QP's `sq.slots_ptr()`; the reference lives no longer
/// than that QP's `QpShared`.
///
/// [`SqShared::tail`]: crate::mlx5::qp::SqShared::tail
/// [`SqShared::slots_ptr`]: crate::mlx5::qp::SqShared::slots_ptr
#[inline(always)]
unsafe fn tail_of<'a>(slots: *const SqSlot) -> &'a AtomicU64 {
    // SAFETY: the caller's contract; `slots_ptr` is derived from the whole
    // array, whose entry 0 holds the counter.
    unsafe { &*slots.byte_sub(TAIL_OFFSET).cast::<AtomicU64>() }
}

/// The gate word ([`Gate`]) of the CQ whose consumer-index word is `db_ci`.
///
/// # Safety
/// `db_ci` is a CQ's `db_ci` (word 0 of its live doorbell record); the
/// reference lives no longer than that record.
#[inline(always)]
unsafe fn gate_at<'a>(db_ci: *mut u32) -> &'a AtomicU32 {
    // SAFETY: word `GATE_WORD` of the record's slot (slots are at least 16
    // bytes: `DbRecPool::new`), 4-aligned, alive as long as the record, and
    // only ever accessed atomically (here and in `Gate`).
    unsafe { AtomicU32::from_ptr(db_ci.add(GATE_WORD)) }
}

/// Publishes consumer index `ci` (`CQ_SET_CI`) into the CQ doorbell-record
/// word `db_ci`.
///
/// # Safety
/// `db_ci` is a CQ's `db_ci` (word 0 of its live doorbell record).
#[inline(always)]
unsafe fn publish_ci_at(db_ci: *mut u32, ci: u32) {
    // Our copies are done before the HCA may reuse the entries.
    barrier::cqe_reads_done();
    // SAFETY: consumer-index word of a live doorbell record (the caller's
    // contract); one atomic big-endian store, read by the HCA.
    unsafe { crate::mlx5::mem::store_word(db_ci, ci & 0x00ff_ffff) };
}

/// The byte offset in the send slot array of the slot a requester CQE at
/// `p` names: its `wqe_counter` (bytes 60..62, big-endian) masked and
/// times 16, with `slot_mask` the queue's mask times 16 (`sq.mask << 4`).
/// One 32-bit load of bytes 60..64 (`wqe_counter`, `signature`, `op_own`)
/// taken big-endian puts the counter in the top half; shifted right by 12 it
/// is the counter times 16, with four bits of `signature` below, which the
/// mask clears. No 16-bit swap, no separate shift.
///
/// # Safety
/// `p` is a software-owned entry whose body may be read (owner byte
/// checked, `barrier::from_device` passed).
#[inline(always)]
unsafe fn slot_offset(p: *const u8, slot_mask: u32) -> usize {
    // SAFETY: bytes 60..64 of the entry, 4-aligned; plain bytes, read
    // without a reference (the caller's contract).
    let word = u32::from_be_bytes(unsafe { p.add(60).cast::<[u8; 4]>().read() });
    ((word >> 12) & slot_mask) as usize
}

// `slot_offset` counts in 16-byte slots.
const _: () = assert!(core::mem::size_of::<SqSlot>() == 16);

/// The `u64` whose bytes in memory are `lo`'s, then `hi`'s: two adjacent
/// 32-bit fields of a `Wc` written with one store.
const fn pair(lo: u32, hi: u32) -> u64 {
    if cfg!(target_endian = "little") {
        lo as u64 | (hi as u64) << 32
    } else {
        (lo as u64) << 32 | hi as u64
    }
}

// The fast path writes a `Wc` as six `u64`s: `wr_id`; `status, opcode`;
// `vendor_err, byte_len`; `imm_data, qp_num`; `src_qp, wc_flags`; and
// `pkey_index .. port_num` (all 0) with the padding byte.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Wc>() == 48 && align_of::<Wc>() == 8);
    assert!(offset_of!(Wc, wr_id) == 0);
    assert!(offset_of!(Wc, status) == 8 && offset_of!(Wc, opcode) == 12);
    assert!(offset_of!(Wc, vendor_err) == 16 && offset_of!(Wc, byte_len) == 20);
    assert!(offset_of!(Wc, imm_data) == 24 && offset_of!(Wc, qp_num) == 28);
    assert!(offset_of!(Wc, src_qp) == 32 && offset_of!(Wc, wc_flags) == 36);
    assert!(offset_of!(Wc, pkey_index) == 40 && offset_of!(Wc, port_num) == 46);
};

/// A successful requester completion of one send opcode, as the `Wc`
/// bytes that do not depend on the CQE or the QP: two 16-byte copies.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
struct ReqFast {
    /// `Wc` bytes 8..24: `status` SUCCESS, `opcode`, `vendor_err` 0,
    /// `byte_len` ([`LEN_FROM_CQE`]: the CQE's `byte_cnt` replaces it).
    mid: [u64; 2],
    /// `Wc` bytes 32..48: `src_qp` 0, `wc_flags`, and the rest 0.
    tail: [u64; 2],
}

/// The fast path's per-opcode tables, one `const` ([`REQ`]): `fast`, the
/// `Wc` words, and after it (so that one address serves both), per send
/// opcode byte the bit the one-entry fast path XORs
/// into the resource-number key it compares: 0, or for RDMA READ (whose
/// `byte_len` comes from the CQE) a bit above the key's 24, so that the one
/// compare also declines READ, which `single_slow` then takes (with the
/// length test). Indexed by the byte itself (times 4), not by the entry
/// offset (times 32): the byte is then the register the entry offset is
/// shifted in, with no copy.
#[repr(C)]
struct ReqTables {
    /// Indexed by the send opcode byte: see [`REQ`].
    fast: [ReqFast; 256],
    decline: [u32; 256],
}

/// [`ReqFast::mid`]'s `byte_len` for RDMA READ: `byte_len` is the CQE's
/// `byte_cnt`. No other opcode's length is this.
const LEN_FROM_CQE: u32 = u32::MAX;

impl ReqFast {
    /// Whether `byte_len` comes from the CQE.
    #[inline(always)]
    fn len_from_cqe(&self) -> bool {
        // `mid[1]` is `pair(0, byte_len)`.
        self.mid[1] == pair(0, LEN_FROM_CQE)
    }
}

/// [`req_kind`] as a table over the send opcode byte (`sop_drop_qpn`'s
/// top byte, all of it: no mask, so the fast path decodes every byte as
/// `decode` does; unknown ones keep their raw value in `WcOpcode`), and
/// the decline bits ([`ReqTables`]). 9 KiB of read-only data, of which a
/// poll touches the 32-byte entries of the opcodes it sees. A `const`, not
/// a `static`: the compiler then knows the contents (the batch path's READ
/// test is a compare of the opcode byte, and the table's address is
/// PC-relative, not loaded through the GOT).
const REQ: ReqTables = {
    let mut t = ReqTables { fast: [ReqFast { mid: [0; 2], tail: [0; 2] }; 256], decline: [0; 256] };
    let mut i = 0;
    while i < 256 {
        let k = req_kind(i as u8);
        let len = match k.len {
            ReqLen::Zero => 0,
            ReqLen::Cqe => LEN_FROM_CQE,
            ReqLen::Eight => 8,
        };
        let flags = if k.with_imm { WcFlags::WITH_IMM.bits() } else { 0 };
        t.fast[i] = ReqFast { mid: [pair(WcStatus::SUCCESS.0, k.opcode.0), pair(0, len)], tail: [pair(0, flags), 0] };
        t.decline[i] = if len == LEN_FROM_CQE { 1 << 24 } else { 0 };
        i += 1;
    }
    t
};

/// What the one-entry slow path returns: `bool` for `poll_one`, a count
/// for `poll` (so that each is a tail call of its caller).
trait Got {
    /// The `Wc` the one-entry chain writes is initialised (a `&mut Wc`
    /// may be made of it); else only written, all of it at once.
    const INIT: bool;
    fn got(one: bool) -> Self;
}

impl Got for bool {
    const INIT: bool = true;
    #[inline(always)]
    fn got(one: bool) -> bool {
        one
    }
}

impl Got for usize {
    const INIT: bool = true;
    #[inline(always)]
    fn got(one: bool) -> usize {
        usize::from(one)
    }
}

/// [`Got`] of [`Cq::poll_one_uninit`]: into memory that need not be
/// initialised.
struct Uninit(bool);

impl Got for Uninit {
    const INIT: bool = false;
    #[inline(always)]
    fn got(one: bool) -> Uninit {
        Uninit(one)
    }
}

/// What [`Cq::poll_other`] found.
enum Other {
    /// Hardware-owned (or never written): polling stops.
    NotOurs,
    /// Consumed without a completion.
    Skipped,
    /// Consumed into a completion.
    Wc,
}

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
    ///
    /// Crate-internal in spirit: the pending CQ owns memory a kernel CQ
    /// made from its driver data would use, and dropping it frees that.
    pub(crate) fn cq_prepare(&self, cqe: u32) -> Result<(PendingCq, mlx5_ib_create_cq)> {
        const VERB: &str = "ibv_create_cq";
        if cqe == 0 || cqe >= MAX_CQE {
            return Err(
                Error::check(VERB, Errno::EINVAL).with_message(format!("{cqe} CQ entries; 1..{MAX_CQE} allowed"))
            );
        }
        let ncqe = (cqe + 1).next_power_of_two();
        // One entry more than the kernel is told of: the sentinel after the
        // ring (`Cq::end`), where the one-entry fast path stops.
        let buf = DmaBuf::new(VERB, (ncqe as usize + 1) * CQE_SIZE)?;
        for i in 0..=ncqe as usize {
            // SAFETY: entry `i` (or the sentinel) lies in the fresh buffer;
            // the HCA does not know it yet.
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
    ///
    /// Dropping the [`Cq`] frees its buffer: only after the kernel destroy.
    pub(crate) fn cq_finish(
        &self,
        pending: PendingCq,
        drv_out: &[u8],
        kernel_cqe: u32,
    ) -> Result<Cq, FinishError<PendingCq>> {
        self.cq_finish_with(pending, drv_out, kernel_cqe, |_, page| UarMmio::new(page, 0, UAR_SIZE))
    }

    /// [`cq_finish`](Self::cq_finish) with the doorbell seam supplied by the
    /// caller: `mmio` gets the arm page (the arm register is at +0x20 of the
    /// window it returns).
    pub(crate) fn cq_finish_with<M: Mmio>(
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
            let error = Error::check(VERB, Errno::EPROTO).with_message(format!(
                "the kernel made {} entries of a {}-entry buffer",
                kernel_cqe.wrapping_add(1),
                pending.ncqe
            ));
            return Err(FinishError { error, pending: Box::new(pending) });
        }
        let PendingCq { buf, db, ncqe, uar_index, arm_page, udata: _ } = pending;
        let info = RegInfo { uar_index, offset: 0, bf_half: 0, bf_copy: false };
        let m = mmio(&info, &arm_page);
        tracing::debug!(cqn = resp.cqn, ncqe, uar = uar_index, "mlx5 CQ ready");
        // The gate is registered (so every later bump closes it) before the
        // generation the cache starts from is read; it opens below.
        self.registry().add_gate(db.gate());
        let generation = self.registry().generation();
        let cq = Cq {
            base: buf.ptr(),
            // SAFETY: the sentinel entry, inside the buffer (`cq_prepare`).
            end: unsafe { buf.ptr().add(ncqe as usize * CQE_SIZE) },
            ncqe,
            mask: ncqe - 1,
            ci: 0,
            cur_cqe: buf.ptr(),
            cur_owner: 0,
            arm_sn: 0,
            cqn: resp.cqn,
            cqe_v1: self.device().cqe_version >= 1,
            log_ncqe: ncqe.trailing_zeros(),
            cur_rsn_key: u32::MAX,
            cur_qpn_word: 0,
            cur_slots: ptr::null(),
            cur_slot_mask: 0,
            db_ci: db.word_ptr(0),
            cache: Cache { generation, ..Default::default() },
            registry: self.registry().clone(),
            mmio: m,
            skipped: 0,
            db,
            buf,
        };
        cq.set_gate(0);
        Ok(cq)
    }
}

impl<M: Mmio> Drop for Cq<M> {
    fn drop(&mut self) {
        self.registry.remove_gate(self.db_ci.wrapping_add(GATE_WORD) as usize);
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

    /// True when no completion is ready: the entry at the consumer index is
    /// still the hardware's (a [`poll`](Self::poll) now would return 0).
    /// One load of its owner byte, nothing consumed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        !sw_owned(self.op_own(self.ci), self.ci, self.ncqe)
    }

    /// [`poll`](Self::poll) into memory that need not be initialised: `out`
    /// is initialised first (to `Wc::default()`), then polled as usual; the
    /// first `n` entries hold the completions, `n` is returned.
    pub fn poll_uninit(&mut self, out: &mut [core::mem::MaybeUninit<Wc>]) -> usize {
        for w in out.iter_mut() {
            w.write(Wc::default());
        }
        // SAFETY: every entry was initialised just above, and
        // `MaybeUninit<Wc>` has `Wc`'s layout.
        let out = unsafe { &mut *(out as *mut [core::mem::MaybeUninit<Wc>] as *mut [Wc]) };
        self.poll(out)
    }

    /// Moves up to `out.len()` completions into `out`; returns how many
    /// (`ibv_poll_cq`; rdma-core `mlx5_poll_cq`). No syscall. Publishes
    /// the consumer index (`CQ_SET_CI`) once at the end. A one-entry
    /// slice takes the path of [`poll_one`](Self::poll_one).
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        // One at a time (a common way to poll) is decoded here, with no
        // frame of its own: every other way out is a tail call.
        let [one] = out else { return self.poll_batch(out) };
        // SAFETY: `one` is one writable, initialised `Wc`.
        unsafe {
            if self.poll_single::<32, true, false, false>(one) {
                1
            } else {
                self.poll_single_slow(one)
            }
        }
    }

    /// Moves one completion into `w` and returns true, or returns false
    /// (and leaves `w` as it was) when none is ready: `ibv_poll_cq` with
    /// one entry, the same as [`poll`](Self::poll) with a one-entry slice
    /// (the same checks, completions and counters) without the slice.
    /// No syscall. Publishes the consumer index (`CQ_SET_CI`) when it
    /// consumed anything.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_one(&mut self, w: &mut Wc) -> bool {
        // SAFETY: `w` is one writable, initialised `Wc`.
        unsafe { self.poll_single::<32, true, false, false>(w) || self.poll_one_slow(w) }
    }

    /// [`poll_one`](Self::poll_one) into memory that need not be
    /// initialised: `Some` with the completion written into `w`, or `None`
    /// (`w` untouched). The fast path writes into `w` directly; the others
    /// decode into a local `Wc` and copy it.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_one_uninit<'a>(&mut self, w: &'a mut core::mem::MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        let p = w.as_mut_ptr();
        // SAFETY: `p` is valid for writes of one `Wc`; `Uninit` (and
        // `poll_single`) only write it, all 48 bytes, when they return true.
        let got = unsafe { self.poll_single::<32, true, false, false>(p) || self.poll_one_uninit_slow(p) };
        // SAFETY: true means every byte of `w` was written.
        got.then(|| unsafe { w.assume_init_mut() })
    }

    /// [`poll`](Self::poll) into any number of `Wc`s but one: after the
    /// generation check (dropping the cache and running the cleans
    /// requested when it moved), the first run of fast-path entries here,
    /// the rest in [`poll_more`](Self::poll_more).
    #[inline(never)]
    fn poll_batch(&mut self, out: &mut [Wc]) -> usize {
        // Acquire: see `Registry::generation`.
        let generation = self.registry.generation();
        if generation != self.cache.generation {
            self.forget(generation);
        }
        if self.cur_cqe == self.end {
            self.wrap_cursor();
        }
        let first = if self.cqe_v1 { self.poll_first::<32>(out) } else { self.poll_first::<56>(out) };
        match first {
            Ok(n) => n,
            Err(n) => self.poll_more(out, n),
        }
    }

    /// The common case of [`poll_batch`](Self::poll_batch):
    /// successful requester CQEs of the cached QP, from the consumer index
    /// to `out`'s end, the ring's end or the first other entry. `Ok(n)`:
    /// done (`out` is full or the next entry is the hardware's; the consumer
    /// index is published); `Err(n)`: `n` done, the rest is for
    /// [`poll_more`](Self::poll_more) (the ring wrapped, or another kind of
    /// entry came next).
    #[inline(always)]
    fn poll_first<const RSN_OFF: usize>(&mut self, out: &mut [Wc]) -> Result<usize, usize> {
        let ci = self.ci;
        let idx = ci & self.mask;
        let run = out.len().min((self.mask - idx) as usize + 1);
        // SAFETY: `cur_cqe` is entry `idx` (not `end`: wrapped by the
        // caller), `run <= out.len()` and `idx + run <= ncqe`.
        let (k, end) = unsafe { self.poll_req::<RSN_OFF, false>(self.cur_cqe, self.cur_owner, out.as_mut_ptr(), run) };
        let next = ci.wrapping_add(k as u32);
        if k == out.len() || (k != run && !sw_owned(self.op_own(next), next, self.ncqe)) {
            if k != 0 {
                self.ci = next;
                // `end` is entry `idx + k`, or `self.end` when `next` is at
                // index 0: the cursor as the fast path leaves it.
                self.cur_cqe = end;
                self.publish_ci(next);
            }
            return Ok(k);
        }
        Err(k)
    }

    /// One successful requester CQE of the cached QP at the consumer index
    /// into `w` (the checks and stores of [`poll_req`](Self::poll_req) for a
    /// run of one, the cached fields read where they are used): true; false
    /// for anything else (the entry is the hardware's or of another kind,
    /// the gate is closed, the cursor is at the ring's end), which
    /// [`single_slow`](Self::single_slow) sorts out.
    ///
    /// The registry's generation is not loaded here: every bump closes the
    /// gate this compares the owner byte with (see [`Gate`]), so a poll
    /// that starts after a bump (after a destroy or a clean request that
    /// happens before it) comes out here with false and the slow path
    /// drops the cache and runs the cleans, as the generation check did.
    ///
    /// `RSN_OFF`: where the CQE names its QP (32 with CQE version 1, 56
    /// with 0). `GATED`: the owner bit comes from the gate; else (a
    /// version-0 CQ, whose gate stays closed, from `single_slow` after its
    /// generation check) from `cur_owner`. `ALL_OPS`: every send opcode;
    /// else RDMA READ (the one whose `byte_len` is the CQE's) is declined
    /// by the resource-number compare ([`ReqTables::decline`]), which saves
    /// the length test on the inlined path; `single_slow` takes it.
    /// `SWITCH`: a CQE of another QP of [`Cache::fast`] is taken too, that
    /// QP cached from then on.
    ///
    /// # Safety
    /// `w` is valid for writes of one `Wc` (written, all 48 bytes, only
    /// when true is returned; never read).
    #[inline(always)]
    unsafe fn poll_single<const RSN_OFF: usize, const GATED: bool, const ALL_OPS: bool, const SWITCH: bool>(
        &mut self,
        w: *mut Wc,
    ) -> bool {
        let p = self.cur_cqe;
        // Loaded once: the gate lies in its slot, the consumer index goes
        // into it at the end.
        let db_ci = self.db_ci;
        // SAFETY: the owner byte of the entry at `ci` (`cur_cqe`, in our
        // buffer, or the sentinel after it); volatile because the HCA
        // writes it.
        let op_own = unsafe { p.add(OP_OWN).read_volatile() };
        // Opcode REQ (0), no format or solicited bit, and the owner bit of
        // this pass (`sw_owned`) in one compare of the whole byte, against
        // the gate (the owner bit, or CLOSED). Format bits come only with
        // scatter-to-CQE or compression, which this provider never asks
        // for; an entry with any of bits 1..=3 set is declined here and
        // `poll_more` decodes it (to the same `Wc`: `decode` ignores them).
        let owner = if GATED {
            // SAFETY: `db_ci` is `self.db_ci` (see `gate_word`).
            unsafe { gate_at(db_ci) }.load(Ordering::Relaxed)
        } else {
            self.cur_owner
        };
        if u32::from(op_own) != owner {
            return false;
        }
        // The rest of the entry is read after its owner byte.
        barrier::from_device();
        // The reads of `p` below: fields of a whole 64-byte entry the HCA
        // handed to software (owner bit checked, barrier passed), read as
        // plain bytes, never referenced. It is not the sentinel (whose
        // owner byte no gate value matches).
        // SAFETY: see above; `RSN_OFF` is 32 or 56, 4-aligned (entries are
        // 64-aligned).
        let rsn = unsafe { p.add(RSN_OFF).cast::<u32>().read() };
        // `sop_drop_qpn`'s top byte: the send opcode.
        // SAFETY: see above.
        let op = usize::from(unsafe { p.add(56).read() });
        let tables = &REQ;
        // Without `ALL_OPS`, RDMA READ's decline bit makes the key differ.
        let key = if ALL_OPS { rsn_key(rsn) } else { rsn_key(rsn) ^ tables.decline[op] };
        if key != self.cur_rsn_key {
            // With `SWITCH`, a QP of `Cache::fast` becomes the cached one
            // in place, as in `poll_req` (without `ALL_OPS` RDMA READ's
            // decline bit still makes the keys differ).
            if !SWITCH {
                return false;
            }
            let Some(&f) = self.cache.fast.get((u32::from_be(rsn) & 0x00ff_ffff) as usize) else { return false };
            if f.key != key {
                return false;
            }
            self.set_cur(f);
        }
        // `cur_slots` is set and reset together with `cur_rsn_key` (in `qp`,
        // `switch_qp`, `poll_req`, `forget`), so the matched key means it is
        // set; it points into the `QpShared` of `cache.qp` or of an entry of
        // `cache.recent`, `Arc`s this value holds.
        let slots = self.cur_slots;
        // SAFETY: the CQE read is as above; `slots` is a live QP's slot
        // array (above); the offset is a slot's, masked to its length.
        let slot = unsafe { &*slots.byte_add(slot_offset(p, self.cur_slot_mask)) };
        let q = w.cast::<u64>();
        // Written in this order (the slot first, and retired at once) so
        // that fewer values are live at once; all 48 bytes are written below.
        // SAFETY: `w` is valid for writes of one `Wc` (the caller's
        // contract), 48 bytes of integers (offsets asserted above).
        unsafe { q.write(slot.wrid.load(Ordering::Relaxed)) };
        // Release: the slot's wr_id was read before the poster reuses it.
        // SAFETY: `slots` is the slot array of the cached QP (see above).
        unsafe { tail_of(slots) }.store(slot.end.load(Ordering::Relaxed), Ordering::Release);
        let k = &tables.fast[op];
        // SAFETY: as for `wr_id`; the CQE read is as above.
        unsafe {
            q.add(1).cast::<[u64; 2]>().write(k.mid);
            q.add(3).write(self.cur_qpn_word);
            q.add(4).cast::<[u64; 2]>().write(k.tail);
            if ALL_OPS && k.len_from_cqe() {
                ptr::addr_of_mut!((*w).byte_len).write(u32::from_be_bytes(p.add(44).cast::<[u8; 4]>().read()));
            }
        }
        // `publish_ci_at` written out, so that both fields are stepped in
        // place (one add to memory each, as no register keeps them): `ci`,
        // then loaded again for the doorbell record (a volatile read of our
        // own field: the compiler would otherwise keep the sum in a register
        // and store it, one instruction more); `cur_cqe` last.
        self.ci = self.ci.wrapping_add(1);
        // Our copies are done before the HCA may reuse the entry.
        barrier::cqe_reads_done();
        // SAFETY: a plain read of a field of `self`.
        let ci = unsafe { ptr::read_volatile(&self.ci) };
        // SAFETY: `db_ci` is `self.db_ci`, the consumer-index word of our
        // doorbell record; one atomic big-endian store, read by the HCA.
        unsafe { crate::mlx5::mem::store_word(db_ci, ci & 0x00ff_ffff) };
        // The next entry, or the sentinel after the ring's last one (no
        // test here: the next call stops at the sentinel and wraps).
        // SAFETY: `cur_cqe` is `p`, an entry of the ring, so `p + 1` is at
        // most `end`.
        self.cur_cqe = unsafe { self.cur_cqe.add(CQE_SIZE) };
        true
    }

    /// [`poll`](Self::poll) of one entry after [`poll_single`](Self::poll_single) declined.
    #[inline(never)]
    fn poll_single_slow(&mut self, w: &mut Wc) -> usize {
        // SAFETY: `w` is one writable, initialised `Wc`.
        unsafe { self.single_slow::<usize>(w) }
    }

    /// [`poll_one`](Self::poll_one) after [`poll_single`](Self::poll_single) declined.
    #[inline(never)]
    fn poll_one_slow(&mut self, w: &mut Wc) -> bool {
        // SAFETY: as above.
        unsafe { self.single_slow::<bool>(w) }
    }

    /// [`poll_one_uninit`](Self::poll_one_uninit) after
    /// [`poll_single`](Self::poll_single) declined.
    ///
    /// # Safety
    /// `w` is valid for writes of one `Wc`.
    #[inline(never)]
    unsafe fn poll_one_uninit_slow(&mut self, w: *mut Wc) -> bool {
        // SAFETY: forwarded; `Uninit` never reads `w` nor makes a
        // reference of it.
        unsafe { self.single_slow::<Uninit>(w) }.0
    }

    /// A one-entry poll the fast path declined: drops the cache (and runs
    /// the cleans requested) when the generation moved; returns nothing
    /// when the entry at `ci` is the hardware's (an empty CQ: this much,
    /// with no call and no register saved, is all a busy poller's empty
    /// polls cost), else takes it in [`single_taken`](Self::single_taken).
    /// Every other way out is a tail call.
    ///
    /// # Safety
    /// `w` is valid for writes of one `Wc`, and initialised when `T::INIT`.
    /// (The same for the rest of the chain.)
    #[inline(always)]
    unsafe fn single_slow<T: Got>(&mut self, w: *mut Wc) -> T {
        // Acquire: see `Registry::generation`.
        let generation = self.registry.generation();
        // SAFETY: forwarded.
        unsafe {
            if generation != self.cache.generation {
                return self.single_stale(w, generation);
            }
            self.single_entry(w)
        }
    }

    /// [`single_slow`](Self::single_slow) after the generation moved.
    #[cold]
    #[inline(never)]
    unsafe fn single_stale<T: Got>(&mut self, w: *mut Wc, generation: u64) -> T {
        self.forget(generation);
        // SAFETY: forwarded.
        unsafe { self.single_entry(w) }
    }

    /// The entry at `ci`: nothing when it is the hardware's, else
    /// [`single_taken`](Self::single_taken).
    #[inline(always)]
    unsafe fn single_entry<T: Got>(&mut self, w: *mut Wc) -> T {
        // The entry at `ci` from the cursor (at the sentinel: the ring's
        // first entry, with the other owner bit), tested as `sw_owned` does.
        let (p, owner) =
            if self.cur_cqe == self.end { (self.base, self.cur_owner ^ 1) } else { (self.cur_cqe, self.cur_owner) };
        // SAFETY: the owner byte of an entry of our buffer; volatile because
        // the HCA writes it.
        let op_own = unsafe { p.add(OP_OWN).read_volatile() };
        if op_own >> 4 == opcode::INVALID || u32::from(op_own & 1) != owner {
            return T::got(false);
        }
        // SAFETY: forwarded.
        unsafe { self.single_taken(w) }
    }

    /// A software-owned entry at `ci` the fast path declined: wraps the
    /// cursor at the sentinel, opens the gate, tries the fast path again
    /// (now for every send opcode, RDMA READ, and for the QPs of the CQ's
    /// table: a CQ under many QPs), and once more after looking the
    /// entry's QP up ([`cache_entry_qp`](Self::cache_entry_qp)); if it
    /// declines still, takes the entry through [`poll_more`](Self::poll_more).
    #[inline(never)]
    unsafe fn single_taken<T: Got>(&mut self, w: *mut Wc) -> T {
        if self.cur_cqe == self.end {
            self.wrap_cursor();
        }
        // SAFETY: `w` as the caller's contract says, which is
        // `poll_single`'s.
        let got = unsafe {
            if !self.cqe_v1 {
                // Version 0: the gate stays closed; the generation was
                // checked by the caller.
                self.poll_single::<56, false, true, true>(w)
                    || (self.cache_entry_qp(self.ci) && self.poll_single::<56, false, true, false>(w))
            } else {
                if self.gate_word().load(Ordering::Relaxed) != self.cur_owner {
                    self.set_gate(self.cur_owner);
                }
                // Also RDMA READ, which the inlined fast path declines.
                self.poll_single::<32, true, true, true>(w)
                    || (self.cache_entry_qp(self.ci) && self.poll_single::<32, true, true, false>(w))
            }
        };
        if got {
            return T::got(true);
        }
        if T::INIT {
            // SAFETY: initialised (`T::INIT`) and writable, as the caller
            // says; no other reference to it is live here.
            return T::got(self.poll_more(core::slice::from_mut(unsafe { &mut *w }), 0) == 1);
        }
        let mut local = Wc::default();
        let one = self.poll_more(core::slice::from_mut(&mut local), 0) == 1;
        if one {
            // SAFETY: valid for writes of one `Wc` (the caller's contract).
            unsafe { w.write(local) };
        }
        T::got(one)
    }

    /// The rest of [`poll`](Self::poll) after its first run, `n` entries in:
    /// any mix of entries, any number of runs.
    #[inline(never)]
    fn poll_more(&mut self, out: &mut [Wc], mut n: usize) -> usize {
        let mut ci = self.ci.wrapping_add(n as u32);
        loop {
            // A requester CQE of another QP (or of the cached one, after the
            // ring wrapped) starts a run of its own once its QP is cached:
            // a CQ under many QPs switches here, not in `decode`.
            let k = if self.cache_entry_qp(ci) {
                let idx = ci & self.mask;
                let run = (out.len() - n).min((self.mask - idx) as usize + 1);
                // SAFETY: `n + run <= out.len()` and `idx + run <= ncqe`.
                unsafe { self.poll_run(self.entry(ci), (ci >> self.log_ncqe) & 1, out[n..].as_mut_ptr(), run) }
            } else {
                0
            };
            if k != 0 {
                ci = ci.wrapping_add(k as u32);
                n += k;
                if n == out.len() {
                    break;
                }
                continue;
            }
            // Anything else, one entry at a time.
            match self.poll_other(ci, &mut out[n]) {
                Other::NotOurs => break,
                Other::Skipped => ci = ci.wrapping_add(1),
                Other::Wc => {
                    ci = ci.wrapping_add(1);
                    n += 1;
                }
            }
            if n == out.len() {
                break;
            }
            let idx = ci & self.mask;
            let run = (out.len() - n).min((self.mask - idx) as usize + 1);
            // SAFETY: `n + run <= out.len()` and `idx + run <= ncqe`.
            let k = unsafe { self.poll_run(self.entry(ci), (ci >> self.log_ncqe) & 1, out[n..].as_mut_ptr(), run) };
            ci = ci.wrapping_add(k as u32);
            n += k;
            if n == out.len() {
                break;
            }
        }
        if ci != self.ci {
            self.set_ci(ci);
        }
        n
    }

    /// Moves the consumer index to `ci` and publishes it (`CQ_SET_CI`).
    #[inline(always)]
    fn set_ci(&mut self, ci: u32) {
        self.ci = ci;
        self.sync_cursor();
        self.publish_ci(ci);
    }

    /// The cursor at the sentinel (`ci` at index 0, once a pass): the
    /// first entry, with the other owner bit.
    #[cold]
    #[inline(never)]
    fn wrap_cursor(&mut self) {
        self.cur_cqe = self.base;
        self.set_owner(self.cur_owner ^ 1);
    }

    /// `cur_cqe` and `cur_owner` for the consumer index.
    #[inline(always)]
    fn sync_cursor(&mut self) {
        self.cur_cqe = self.entry(self.ci);
        let owner = (self.ci >> self.log_ncqe) & 1;
        if owner != self.cur_owner {
            self.set_owner(owner);
        }
    }

    /// A new `cur_owner`, mirrored into the gate.
    #[cold]
    fn set_owner(&mut self, owner: u32) {
        self.cur_owner = owner;
        self.set_gate(owner);
    }

    /// The gate word in `db`'s slot ([`Gate`]).
    #[inline(always)]
    fn gate_word(&self) -> &AtomicU32 {
        // SAFETY: `db_ci` is `self.db_ci`.
        unsafe { gate_at(self.db_ci) }
    }

    /// Opens the gate with owner bit `owner` (`cur_owner`), unless the
    /// generation moved since the cache was last dropped: then it closes it
    /// again. The store and the generation load are SeqCst, as are the
    /// bump and the close in `Registry::bump`: if a bump's close comes
    /// before this store in the gate word's order, the load here sees the
    /// bump; if after, the gate is closed. So an open gate means the cache
    /// is as new as the last bump a poll could be ordered after.
    #[cold]
    fn set_gate(&self, owner: u32) {
        if !self.cqe_v1 {
            // A version-0 CQ's gate stays closed (see `cqe_v1`).
            return;
        }
        let gate = self.gate_word();
        gate.store(owner, Ordering::SeqCst);
        if self.registry.generation() != self.cache.generation {
            gate.store(Gate::CLOSED, Ordering::SeqCst);
        }
    }

    /// Publishes consumer index `ci` (`CQ_SET_CI`).
    #[inline(always)]
    fn publish_ci(&mut self, ci: u32) {
        // SAFETY: `self.db_ci`.
        unsafe { publish_ci_at(self.db_ci, ci) }
    }

    /// [`poll_req`](Self::poll_req) for this CQ's CQE version.
    ///
    /// # Safety
    /// As for `poll_req`.
    #[inline(always)]
    unsafe fn poll_run(&mut self, at: *mut u8, owner: u32, out: *mut Wc, run: usize) -> usize {
        // SAFETY: forwarded.
        unsafe {
            if self.cqe_v1 {
                self.poll_req::<32, true>(at, owner, out, run).0
            } else {
                self.poll_req::<56, true>(at, owner, out, run).0
            }
        }
    }

    /// The fast path of [`poll`](Self::poll): decodes consecutive entries
    /// from entry `at` while they are software-owned (`owner` is this
    /// pass's owner bit) requester CQEs of the cached QP, at most `run` of
    /// them, into `out..out + run`; retires their send requests. Returns how
    /// many, and the entry after them (at most one past the ring's end),
    /// which is left for the general path. `RSN_OFF`:
    /// where a requester CQE names its QP, `srqn_uidx` (32, CQE version 1)
    /// or `sop_drop_qpn` (56, version 0). With `SWITCH`, an entry of
    /// another QP of [`Cache::fast`] does not end the run: the QP so far
    /// is retired, the run goes on with the other, which is cached at the
    /// end (a CQ under many QPs, whose consecutive CQEs name different
    /// QPs, takes them all here).
    ///
    /// # Safety
    /// `at` is entry `idx` of the buffer with `idx + run <= ncqe`; `out` is
    /// valid for `run` writes of `Wc`.
    #[inline(always)]
    unsafe fn poll_req<const RSN_OFF: usize, const SWITCH: bool>(
        &mut self,
        at: *mut u8,
        owner: u32,
        out: *mut Wc,
        run: usize,
    ) -> (usize, *mut u8) {
        let (mut rsn_key_cur, mut qpn_word) = (self.cur_rsn_key, self.cur_qpn_word);
        let (mut slots, mut slot_mask) = (self.cur_slots, self.cur_slot_mask);
        // Entries `at..at + run` are inside the buffer.
        let (mut p, mut w) = (at, out);
        let mut n = 0;
        while n != run {
            // SAFETY: the owner byte of an entry of our buffer; volatile
            // because the HCA writes it.
            let op_own = unsafe { p.add(OP_OWN).read_volatile() };
            // Opcode REQ (0), no format or solicited bit, and the owner bit
            // of this pass (`sw_owned`): the whole byte, as in `poll_single`.
            if u32::from(op_own) != owner {
                break;
            }
            // The rest of the entry is read after its owner byte.
            barrier::from_device();
            // The reads of `p` below: fields of a whole 64-byte entry the HCA
            // handed to software (owner bit checked, barrier passed), read as
            // plain bytes, never referenced.
            // SAFETY: see above; 4-aligned (entries are 64-aligned).
            let rsn = unsafe { p.add(RSN_OFF).cast::<u32>().read() };
            if rsn_key(rsn) != rsn_key_cur {
                if !SWITCH {
                    break;
                }
                let Some(&f) = self.cache.fast.get((u32::from_be(rsn) & 0x00ff_ffff) as usize) else { break };
                if f.key != rsn_key(rsn) {
                    break;
                }
                if n != 0 {
                    // SAFETY: `p - 1` is the last entry decoded, of the QP
                    // so far (`slots`), as below.
                    unsafe { retire(p.sub(CQE_SIZE), slots, slot_mask) };
                }
                (rsn_key_cur, qpn_word, slots, slot_mask) = (f.key, f.qpn_word, f.slots, f.slot_mask);
            }
            // `sop_drop_qpn`'s top byte: the send opcode.
            // SAFETY: see above.
            let k = &REQ.fast[usize::from(unsafe { p.add(56).read() })];
            // SAFETY: the CQE read is as above; the matched key means `slots`
            // is set (as in `poll_single`: an entry of `fast` has both), a
            // live QP's slot array; the offset is masked to its length.
            let slot = unsafe { &*slots.byte_add(slot_offset(p, slot_mask)) };
            let wr_id = slot.wrid.load(Ordering::Relaxed);
            // SAFETY: `w` is one of the `run` writable `Wc`s (`n < run`); a `Wc` is 48 bytes of
            // integers (offsets asserted above), any bytes are valid. The
            // CQE read is as above.
            unsafe {
                let q = w.cast::<u64>();
                q.write(wr_id);
                q.add(1).cast::<[u64; 2]>().write(k.mid);
                q.add(3).write(qpn_word);
                q.add(4).cast::<[u64; 2]>().write(k.tail);
                if k.len_from_cqe() {
                    (*w).byte_len = u32::from_be_bytes(p.add(44).cast::<[u8; 4]>().read());
                }
                // At most one past the run's last entry / `Wc`.
                p = p.add(CQE_SIZE);
                w = w.add(1);
            }
            n += 1;
        }
        if n != 0 {
            // One store for the run (of each QP): the last retirement covers
            // the others.
            // SAFETY: `p - 1` is the run's last entry, decoded above with
            // `slots`.
            unsafe { retire(p.sub(CQE_SIZE), slots, slot_mask) };
        }
        if SWITCH {
            self.set_cur(FastQp { key: rsn_key_cur, slot_mask, slots, qpn_word });
        }
        (n, p)
    }

    /// True when the entry at `ci` is one [`poll_req`](Self::poll_req)
    /// takes: a software-owned requester CQE (the whole owner byte, as
    /// there) of a QP this CQ knows, which is made the cached QP
    /// ([`qp`](Self::qp)) if it was not. False for anything else, left to
    /// [`poll_other`](Self::poll_other) (which skips a CQE of an unknown QP).
    #[inline(always)]
    fn cache_entry_qp(&mut self, ci: u32) -> bool {
        let p = self.entry(ci);
        // SAFETY: the owner byte of an entry of our buffer; volatile because
        // the HCA writes it.
        let op_own = unsafe { p.add(OP_OWN).read_volatile() };
        if u32::from(op_own) != (ci >> self.log_ncqe) & 1 {
            return false;
        }
        // The rest of the entry is read after its owner byte.
        barrier::from_device();
        let off = if self.cqe_v1 { 32 } else { 56 };
        // SAFETY: a field of an entry the HCA handed to software (owner
        // checked, barrier passed), read as plain bytes; 4-aligned.
        let raw = unsafe { p.add(off).cast::<u32>().read() };
        if rsn_key(raw) == self.cur_rsn_key {
            return true;
        }
        // `srqn_uidx` (version 1) or `sop_drop_qpn` (version 0): the low
        // 24 bits name the QP, as `decode` reads them.
        self.switch_qp(u32::from_be(raw) & 0x00ff_ffff)
    }

    /// The entry at `ci` when it is not for the fast path: not ours yet, or
    /// any CQE, decoded into `w` by [`decode_other`](Self::decode_other).
    #[inline(never)]
    fn poll_other(&mut self, ci: u32, w: &mut Wc) -> Other {
        if !sw_owned(self.op_own(ci), ci, self.ncqe) {
            return Other::NotOurs;
        }
        // The rest of the entry is read after its owner byte.
        barrier::from_device();
        if self.decode_other(self.entry(ci), w) {
            Other::Wc
        } else {
            Other::Skipped
        }
    }

    #[cold]
    fn forget(&mut self, generation: u64) {
        self.cache = Cache { generation, ..Cache::default() };
        self.cur_rsn_key = u32::MAX;
        self.cur_qpn_word = 0;
        self.cur_slots = ptr::null();
        // Requests are pushed before the generation moves, so they are seen here.
        self.apply_cleans();
    }

    /// Runs the cleans requested for this CQ with
    /// `Context::request_clean` (a QP destroyed or reset while this CQ's
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

    /// Everything else: fills `w` and returns true, or false when the CQE
    /// yields no completion (counted in `skipped`).
    #[inline(always)]
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
            let q = self.lookup_qp(rsn)?;
            self.set_cur(FastQp::of(&q));
            self.cache.qp = Some(q);
        }
        self.cache.qp.as_deref()
    }

    /// Makes `f` the QP the fast paths take (the `cur_*` fields).
    #[inline(always)]
    fn set_cur(&mut self, f: FastQp) {
        (self.cur_rsn_key, self.cur_qpn_word, self.cur_slots, self.cur_slot_mask) =
            (f.key, f.qpn_word, f.slots, f.slot_mask);
    }

    /// Makes `rsn`'s QP the one the fast paths take (the `cur_*` fields),
    /// or returns false when this CQ knows no such QP. A QP of
    /// [`Cache::fast`] is switched to in place, as `poll_req` does: no
    /// reference count moves, `cache.qp` stays as it was. So the `cur_*`
    /// fields name `cache.qp` or an entry of `recent`, both held until
    /// [`forget`](Self::forget) (entries are never replaced: each sits at
    /// its own resource number), which resets them.
    #[inline(always)]
    fn switch_qp(&mut self, rsn: u32) -> bool {
        if let Some(&f) = self.cache.fast.get(rsn as usize) {
            if f.key == rsn_key(rsn.to_be()) {
                self.set_cur(f);
                return true;
            }
        }
        self.qp(rsn).is_some()
    }

    /// `rsn`'s QP from [`Cache::recent`], else from the registry (then
    /// kept in `recent` once this CQ has served more than one QP).
    fn lookup_qp(&mut self, rsn: u32) -> Option<Arc<QpShared>> {
        let i = rsn as usize;
        if let Some(Some(q)) = self.cache.recent.as_ref().and_then(|t| t.get(i)) {
            if q.rsn() == rsn {
                return Some(Arc::clone(q));
            }
        }
        let q = self.registry.qp(rsn)?;
        if self.cache.qp.is_some() {
            if self.cache.recent.is_none() {
                // The table is made on the first switch: the QP cached
                // until now goes in too.
                self.cache.recent = Some(Vec::new());
                if let Some(first) = self.cache.qp.clone() {
                    self.keep(first);
                }
            }
            self.keep(Arc::clone(&q));
        }
        Some(q)
    }

    /// Puts `q` into [`Cache::recent`] and [`Cache::fast`] at its resource
    /// number (unless that is `RECENT_MAX` or more).
    #[cold]
    fn keep(&mut self, q: Arc<QpShared>) {
        let i = q.rsn() as usize;
        let (Some(t), true) = (self.cache.recent.as_mut(), i < RECENT_MAX) else { return };
        if t.len() <= i {
            let len = (i + 1).next_power_of_two();
            t.resize(len, None);
            self.cache.fast.resize(len, FastQp::NONE);
        }
        self.cache.fast[i] = FastQp::of(&q);
        t[i] = Some(q);
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
            let (wr_id, end) = (slot.wrid.load(Ordering::Relaxed), slot.end.load(Ordering::Relaxed));
            // Release: the slots' wr_ids were read before the poster reuses them.
            qp.sq.tail().store(end, Ordering::Release);
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
                let (wr_id, end) = (slot.wrid.load(Ordering::Relaxed), slot.end.load(Ordering::Relaxed));
                qp.sq.tail().store(end, Ordering::Release);
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
        let slot = qp.rq.slot(ctr);
        let (wr_id, end) = (slot.wrid.load(Ordering::Relaxed), slot.end.load(Ordering::Relaxed));
        // Release: the slot was read before the poster reuses it.
        qp.rq.tail.store(end, Ordering::Release);
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
        // SAFETY: the arm register at +0x20 of the arm page's window
        // (`0..UAR_SIZE`, `cq_finish_with`), 8-aligned.
        unsafe { self.mmio.write64(CQ_DOORBELL, bytes) };
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
    ///
    /// Crate-internal in spirit: given a QP of another context, the SRQ
    /// free list of that QP would be handed WQEs that are not its own.
    pub(crate) fn clean_qp(&mut self, qp: &QpShared) {
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
            self.sync_cursor();
            barrier::to_device();
            self.db.store(0, self.ci & 0x00ff_ffff);
        }
    }
}
