//! A mock of the *kernel's* side of the siw rings, for host tests and
//! benchmarks (`cfg(test)` or the `mock` feature; never in a real build).
//!
//! It follows the ownership protocol from the other end, as `siw_qp.c`,
//! `siw_qp_tx.c` and `siw_qp_rx.c` do:
//! - SQ: take the entry at its own counter when its flags hold `VALID`,
//!   copy it out, clear the flags with a full barrier (`smp_store_mb`,
//!   `siw_activate_tx_from_sq`: at the *start* of the request).
//! - RQ / SRQ: take the entry when its flags *equal* `VALID`
//!   (`siw_rqe_get`), copy it out, clear the flags.
//! - CQ: write an entry at its own counter when its flags are 0, the flags
//!   (`VALID`) last; a CQ whose next entry is still the consumer's is full
//!   (the kernel raises `IB_EVENT_CQ_ERR`). Then the arm word: an event if
//!   it holds `NEXT_COMPLETION`, or `SOLICITED` and the request was
//!   solicited, and the word cleared (`siw_cq_notify_now`).
//!
//! The decoders read every field at the numeric offset of `siw-abi.h`
//! (rdmacm.md §B.3), independently of `wqe.rs`, and panic on an entry the
//! kernel would refuse: a test failure, which is the point.

use core::ptr;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU8, Ordering};

use super::ring::Ring;
use super::wqe::{RawCqe, CQE_LEN, RQE_LEN, SQE_LEN};
use crate::wr::Sge;

/// Reads a `T` at byte offset `off` of an entry.
///
/// # Safety
/// `p + off .. + size_of::<T>()` lies inside one entry of a live ring that
/// the mock (the kernel side) currently owns, outside its flags.
#[inline]
unsafe fn get<T: Copy>(p: *const u8, off: usize) -> T {
    // SAFETY: forwarded; unaligned, assuming nothing of the encoder.
    unsafe { ptr::read_unaligned(p.add(off).cast::<T>()) }
}

/// Writes a `T` at byte offset `off` of an entry.
///
/// # Safety
/// As [`get`], for writing.
#[inline]
unsafe fn set<T: Copy>(p: *mut u8, off: usize, v: T) {
    // SAFETY: forwarded.
    unsafe { ptr::write_unaligned(p.add(off).cast::<T>(), v) }
}

/// The `u16` flags of a send or receive entry, as the kernel sees them.
fn wqe_flags<'a>(p: *mut u8) -> &'a AtomicU16 {
    // SAFETY: bytes 8..10 of a live entry (callers pass `Ring::slot`s),
    // 2-aligned; accessed only atomically as a `u16` on both sides.
    unsafe { AtomicU16::from_ptr(p.add(8).cast::<u16>()) }
}

/// The `u8` flags of a completion entry.
fn cqe_flags<'a>(p: *mut u8) -> &'a AtomicU8 {
    // SAFETY: byte 8 of a live entry; accessed only atomically on both sides.
    unsafe { AtomicU8::from_ptr(p.add(8)) }
}

/// A send entry as the kernel copies it out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KSqe {
    /// The counter value it was taken at.
    pub at: u32,
    /// `id` (@0).
    pub id: u64,
    /// `flags` (@8) as posted.
    pub flags: u16,
    /// `num_sge` (@10).
    pub num_sge: u8,
    /// `opcode` (@11).
    pub opcode: u8,
    /// `rkey` (@12).
    pub rkey: u32,
    /// `raddr` (@16).
    pub raddr: u64,
    /// `sge[..num_sge]` (@24), when not INLINE.
    pub sges: Vec<Sge<'static>>,
    /// The inline bytes (@40, `sge[0].length` of them), when INLINE.
    pub inline: Vec<u8>,
}

/// A receive entry as the kernel copies it out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KRqe {
    /// The counter value it was taken at.
    pub at: u32,
    /// `id` (@0).
    pub id: u64,
    /// `sge[..num_sge]` (@16).
    pub sges: Vec<Sge<'static>>,
}

/// `SIW_WQE_VALID`, `SIW_WQE_INLINE`.
const VALID: u16 = 1;
const INLINE: u16 = 2;
/// `SIW_OP_SEND`, `SIW_OP_WRITE`, `SIW_NUM_OPCODES`.
const OP_WRITE: u8 = 0;
const OP_SEND: u8 = 3;
const NUM_OPCODES: u8 = 12;

/// The kernel's side of a send queue: its `sq_get`.
#[derive(Clone, Debug, Default)]
pub struct MockSq {
    /// Entries taken so far (free-running).
    pub get: u32,
}

impl MockSq {
    /// A kernel side whose counter starts at `get` (the provider's must too).
    pub fn at(get: u32) -> Self {
        MockSq { get }
    }

    /// Takes up to `max` posted entries, as `siw_activate_tx_from_sq` does
    /// one at a time. Panics on an entry the kernel would refuse.
    pub(crate) fn take(&mut self, sq: &Ring<SQE_LEN>, max: usize) -> Vec<KSqe> {
        let mut out = Vec::new();
        while out.len() < max {
            let p = sq.slot(self.get);
            // Acquire: pairs with the provider's Release store of the flags.
            let flags = wqe_flags(p).load(Ordering::Acquire);
            if flags & VALID == 0 {
                break;
            }
            out.push(decode_sqe(p, flags, self.get));
            // smp_store_mb: the entry is the provider's again.
            wqe_flags(p).store(0, Ordering::SeqCst);
            self.get = self.get.wrapping_add(1);
        }
        out
    }
}

fn decode_sqe(p: *mut u8, flags: u16, at: u32) -> KSqe {
    // SAFETY: `p` is a whole 120-byte entry the kernel side owns (VALID,
    // loaded with Acquire); every offset below is inside it, the inline
    // and SGE reads bounded by the asserts.
    unsafe {
        let opcode: u8 = get(p, 11);
        assert!(opcode < NUM_OPCODES, "opcode {opcode} is not a siw opcode");
        let num_sge: u8 = get(p, 10);
        let mut k =
            KSqe { at, id: get(p, 0), flags, num_sge, opcode, rkey: get(p, 12), raddr: get(p, 16), ..KSqe::default() };
        if flags & INLINE != 0 {
            assert!(opcode == OP_SEND || opcode == OP_WRITE, "INLINE on opcode {opcode}");
            let n: u32 = get(p, 24 + 8);
            assert!(n <= 80, "{n} inline bytes overrun the entry");
            k.inline = (0..n as usize).map(|i| get::<u8>(p, 40 + i)).collect();
        } else {
            assert!(num_sge <= 6, "{num_sge} SGEs overrun the entry");
            k.sges = (0..usize::from(num_sge))
                .map(|i| {
                    let at = 24 + 16 * i;
                    Sge::new(get(p, at), get(p, at + 8), get(p, at + 12))
                })
                .collect();
        }
        k
    }
}

/// The kernel's side of a receive queue or SRQ: its `rq_get`.
#[derive(Clone, Debug, Default)]
pub struct MockRq {
    /// Entries taken so far (free-running).
    pub get: u32,
}

impl MockRq {
    /// A kernel side whose counter starts at `get`.
    pub fn at(get: u32) -> Self {
        MockRq { get }
    }

    /// Takes up to `max` posted entries, as `siw_rqe_get` does when messages
    /// arrive. Panics on flags that are set but not exactly `VALID` (the
    /// kernel would never take such an entry) or too many SGEs.
    pub(crate) fn take(&mut self, rq: &Ring<RQE_LEN>, max: usize) -> Vec<KRqe> {
        let mut out = Vec::new();
        while out.len() < max {
            let p = rq.slot(self.get);
            // Acquire: pairs with the provider's Release store of the flags.
            let flags = wqe_flags(p).load(Ordering::Acquire);
            if flags == 0 {
                break;
            }
            assert_eq!(flags, VALID, "receive flags {flags:#x}: the kernel takes only exactly SIW_WQE_VALID");
            // SAFETY: a whole 112-byte entry the kernel side owns; reads
            // bounded by the assert.
            let k = unsafe {
                let n: u8 = get(p, 10);
                assert!(n <= 6, "{n} SGEs overrun the entry");
                let sges = (0..usize::from(n))
                    .map(|i| {
                        let at = 16 + 16 * i;
                        Sge::new(get(p, at), get(p, at + 8), get(p, at + 12))
                    })
                    .collect();
                KRqe { at: self.get, id: get(p, 0), sges }
            };
            out.push(k);
            wqe_flags(p).store(0, Ordering::SeqCst);
            self.get = self.get.wrapping_add(1);
        }
        out
    }
}

/// The kernel's side of a CQ: its `cq_put`, and the events it raised.
#[derive(Clone, Debug, Default)]
pub struct MockCq {
    /// Entries written so far (free-running).
    pub put: u32,
    /// Completion events raised (the arm word said so).
    pub events: u32,
    /// Completions refused because the CQ was full (`IB_EVENT_CQ_ERR`).
    pub overflows: u32,
}

impl MockCq {
    /// A kernel side whose counter starts at `put`.
    pub fn at(put: u32) -> Self {
        MockCq { put, ..MockCq::default() }
    }

    /// Writes completion `c` (`siw_sqe_complete`/`siw_rqe_complete`);
    /// `solicited`: the request asked for a solicited event. False, writing
    /// nothing, if the CQ is full.
    pub(crate) fn complete(&mut self, cq: &Ring<CQE_LEN>, c: &RawCqe, solicited: bool) -> bool {
        let p = cq.slot(self.put);
        // Acquire: the provider's copy of the entry is done before we reuse it.
        if cqe_flags(p).load(Ordering::Acquire) != 0 {
            self.overflows += 1;
            return false;
        }
        // SAFETY: a whole 32-byte entry whose flags are 0: the kernel's.
        unsafe {
            set(p, 0, c.id);
            set(p, 9, c.opcode);
            set(p, 10, c.status);
            set(p, 12, c.bytes);
            set(p, 16, 0u64);
            set(p, 24, c.qp_id);
        }
        // Release (WRITE_ONCE after the fields, under the CQ lock).
        cqe_flags(p).store(1, Ordering::Release);
        self.put = self.put.wrapping_add(1);
        // SAFETY: the arm word after the last entry of a CQ ring made with
        // its 8-byte tail; accessed only atomically as a `u32`.
        let ctrl = unsafe { AtomicU32::from_ptr(cq.tail().cast::<u32>()) };
        let arm = ctrl.load(Ordering::SeqCst);
        if arm & 2 != 0 || (arm & 1 != 0 && solicited) {
            ctrl.store(0, Ordering::SeqCst);
            self.events += 1;
        }
        true
    }
}

/// The completion the kernel writes for send entry `k` on QP `qp_id`.
pub fn send_cqe(k: &KSqe, qp_id: u32, status: u16) -> RawCqe {
    let bytes = if k.inline.is_empty() { k.sges.iter().map(|s| s.length).sum() } else { k.inline.len() as u32 };
    RawCqe { id: k.id, opcode: k.opcode, status, bytes, qp_id: u64::from(qp_id) }
}

/// The completion the kernel writes for receive entry `k` of `bytes`.
pub fn recv_cqe(k: &KRqe, qp_id: u32, bytes: u32, status: u16) -> RawCqe {
    RawCqe { id: k.id, opcode: 8, status, bytes, qp_id: u64::from(qp_id) }
}
