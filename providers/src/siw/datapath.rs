//! siw's fast path (rdmacm.md §B.4): posting to the send, receive and
//! shared receive rings, the send doorbell, polling and arming the CQ.
//!
//! No index words: an entry belongs to the kernel while its flags hold
//! `SIW_WQE_VALID`. Each queue keeps a free-running counter of its own
//! (`put` for the rings we fill, `get` for the CQ), the entry being the
//! counter modulo the ring's power-of-two size. No allocation, no lock
//! (`&mut self` serialises each queue), no `dyn`; the only syscall is the
//! send doorbell, and only when the kernel may be idle.

use core::mem::MaybeUninit;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;

use rverbs_uapi::siw_abi::{SIW_NOTIFY_NEXT_COMPLETION, SIW_NOTIFY_SOLICITED};

use super::flush::CqFlush;
use super::ring::Ring;
use super::wqe::{self, SendLimits, CQE_LEN, RQE_LEN, SQE_LEN};
use crate::wr::{PostError, PostErrorKind, RecvWr, SendWr, Wc};
use crate::Errno;

/// What makes the kernel look at the send ring: for siw a `write()` of
/// `POST_SEND` with no work requests (the kernel then runs the SQ in the
/// caller's context); tests count instead. Static dispatch.
pub trait Doorbell {
    /// Rings once for the QP with kernel handle `qp_handle`.
    fn ring(&self, qp_handle: u32) -> Result<(), Errno>;
}

/// The send half of a siw QP.
#[derive(Debug)]
pub struct SendQueue<D> {
    ring: Ring<SQE_LEN>,
    /// Requests posted so far (free-running; the next entry is `put % slots`).
    put: u32,
    lim: SendLimits,
    doorbell: D,
    /// The kernel handle the doorbell names.
    qp_handle: u32,
    /// The last doorbell failed (say `ENOTCONN` before the connection was
    /// up): the entries it was for may still be posted, so the next post
    /// rings whatever the ring shows.
    owe_ring: bool,
}

impl<D: Doorbell> SendQueue<D> {
    /// A send queue over `ring` with the QP's limits, clamped to what an
    /// entry holds.
    pub(crate) fn new(ring: Ring<SQE_LEN>, lim: SendLimits, doorbell: D, qp_handle: u32) -> Self {
        SendQueue { ring, put: 0, lim: lim.clamped(), doorbell, qp_handle, owe_ring: false }
    }

    /// The ring (crate-internal: the kernel owns some of its entries).
    #[cfg(any(test, feature = "mock"))]
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn ring(&self) -> &Ring<SQE_LEN> {
        &self.ring
    }

    /// The queue with its counter at `put` (tests of the counter's wrap).
    #[cfg(test)]
    pub(crate) fn starting_at(self, put: u32) -> Self {
        SendQueue { put, ..self }
    }

    /// The doorbell.
    pub fn doorbell(&self) -> &D {
        &self.doorbell
    }

    /// The limits requests are checked against.
    pub fn limits(&self) -> SendLimits {
        self.lim
    }

    /// Posts `wrs` in order (`ibv_post_send`), then rings the doorbell once
    /// if the kernel may be idle: when the entry before this batch is no
    /// longer `VALID` (the kernel has taken it, so it may have stopped
    /// before ours), when the batch filled the whole ring, or when the last
    /// doorbell failed. A busy kernel moves on to our entries by itself.
    ///
    /// On a refused request the ones before it are posted (and the doorbell
    /// rung for them), none after it, and the error names its index. A
    /// request is checked completely before a byte of it is written.
    ///
    /// # Safety
    /// For `INLINE` requests, every SGE's `addr..addr+length` of non-zero
    /// length must be readable memory (it is copied now). For the others
    /// nothing is read here; the kernel checks the lkeys.
    #[inline]
    pub unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        let start = self.put;
        // Before any entry's VALID (a Release store): see `Posted`.
        self.ring.posted().reserved.store(start.wrapping_add(wrs.len() as u32), Ordering::Relaxed);
        let mut put = start;
        for (index, wr) in wrs.iter().enumerate() {
            let enc = match wqe::check_send(wr, &self.lim) {
                Ok(e) => e,
                Err(kind) => return self.finish(start, put, Err(PostError { index, kind })),
            };
            let slot = self.ring.slot(put);
            // Acquire: the kernel copied the entry out before it cleared
            // VALID (siw_activate_tx_from_sq); our rewrite comes after.
            // SAFETY: an entry of our live ring.
            if unsafe { wqe::wqe_flags(slot) }.load(Ordering::Acquire) & wqe::VALID != 0 {
                let kind = PostErrorKind::QueueFull;
                return self.finish(start, put, Err(PostError { index, kind }));
            }
            // SAFETY: a whole entry, ours (VALID clear); `enc` is `wr`'s
            // check against limits clamped to an entry; INLINE's contract
            // forwarded.
            unsafe { wqe::write_sqe(slot, wr, &enc) };
            put = put.wrapping_add(1);
        }
        self.finish(start, put, Ok(()))
    }

    /// Records the requests posted (`start..put`) and rings the doorbell
    /// for them if the kernel may be idle; then `result`, unless the
    /// doorbell failed (its error names how many went in).
    #[inline]
    fn finish(&mut self, start: u32, put: u32, result: Result<(), PostError>) -> Result<(), PostError> {
        let posted = put.wrapping_sub(start);
        let published = self.ring.posted();
        if posted == 0 {
            published.reserved.store(start, Ordering::Relaxed);
            return result;
        }
        self.put = put;
        // Release: the entries are written before a flush reads up to `put`.
        published.put.store(put, Ordering::Release);
        published.reserved.store(put, Ordering::Relaxed);
        // SeqCst fence: our VALID stores above are ordered before the load
        // of the previous entry's flags. The kernel clears that entry with
        // `smp_store_mb` (a full barrier) before it looks at the next one,
        // so either it sees our entry, or we see the previous one cleared
        // and ring: never both miss.
        fence(Ordering::SeqCst);
        // Relaxed: only the value decides; the fence above orders it.
        // SAFETY: an entry of our live ring.
        let prev_taken =
            unsafe { wqe::wqe_flags(self.ring.slot(start.wrapping_sub(1))) }.load(Ordering::Relaxed) & wqe::VALID == 0;
        if self.owe_ring || prev_taken || posted >= self.ring.slots() {
            if let Err(e) = self.doorbell.ring(self.qp_handle) {
                self.owe_ring = true;
                return Err(doorbell_failed(posted as usize, e));
            }
            self.owe_ring = false;
        }
        result
    }
}

/// The error of a doorbell that failed after `posted` requests went in.
#[cold]
#[inline(never)]
fn doorbell_failed(posted: usize, e: Errno) -> PostError {
    PostError { index: posted, kind: PostErrorKind::Doorbell(e as i32) }
}

/// A receive ring: a QP's RQ or an SRQ. Posting is pure memory.
#[derive(Debug)]
pub struct RecvQueue {
    ring: Ring<RQE_LEN>,
    put: u32,
    max_sge: u32,
}

impl RecvQueue {
    /// A receive queue over `ring` taking `max_sge` SGEs per request,
    /// clamped to what an entry holds.
    pub(crate) fn new(ring: Ring<RQE_LEN>, max_sge: u32) -> Self {
        RecvQueue { ring, put: 0, max_sge: max_sge.min(wqe::MAX_SGE) }
    }

    /// The ring (crate-internal: the kernel owns some of its entries).
    #[cfg(any(test, feature = "mock"))]
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn ring(&self) -> &Ring<RQE_LEN> {
        &self.ring
    }

    /// The queue with its counter at `put` (tests of the counter's wrap).
    #[cfg(test)]
    pub(crate) fn starting_at(self, put: u32) -> Self {
        RecvQueue { put, ..self }
    }

    /// SGEs per request.
    pub fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Posts `wrs` in order (`ibv_post_recv`, `ibv_post_srq_recv`): no
    /// syscall, the kernel takes an entry when a message arrives. On a
    /// refused request the ones before it are posted, none after it.
    /// Safe: nothing is read from the buffers; the kernel checks the lkeys
    /// when it writes.
    #[inline]
    pub fn post(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        // Before any entry's VALID (a Release store): see `Posted`.
        self.ring.posted().reserved.store(self.put.wrapping_add(wrs.len() as u32), Ordering::Relaxed);
        let result = self.post_entries(wrs);
        let published = self.ring.posted();
        // Release: the entries are written before a flush reads up to `put`.
        published.put.store(self.put, Ordering::Release);
        published.reserved.store(self.put, Ordering::Relaxed);
        result
    }

    #[inline(always)]
    fn post_entries(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        for (index, wr) in wrs.iter().enumerate() {
            if let Err(kind) = wqe::check_recv(wr, self.max_sge) {
                return Err(PostError { index, kind });
            }
            let slot = self.ring.slot(self.put);
            // Acquire: the kernel copied the entry out before it cleared
            // its flags (siw_rqe_get); our rewrite comes after. Any bit
            // set: still the kernel's.
            // SAFETY: an entry of our live ring.
            if unsafe { wqe::wqe_flags(slot) }.load(Ordering::Acquire) != 0 {
                return Err(PostError { index, kind: PostErrorKind::QueueFull });
            }
            // SAFETY: a whole entry, ours; `wr` passed `check_recv` with
            // `max_sge <= MAX_SGE`.
            unsafe { wqe::write_rqe(slot, wr) };
            self.put = self.put.wrapping_add(1);
        }
        Ok(())
    }
}

/// The completion ring of a siw CQ, and its arm word; and the requests
/// the kernel left in QPs in ERROR (see `siw::flush`).
#[derive(Debug)]
pub struct CqRing {
    ring: Ring<CQE_LEN>,
    /// Completions taken so far (free-running).
    get: u32,
    flush: Arc<CqFlush>,
}

impl CqRing {
    /// A completion ring over `ring` (made with `siw_cq_ctrl`'s 8 bytes of tail).
    pub(crate) fn new(ring: Ring<CQE_LEN>) -> Self {
        CqRing { ring, get: 0, flush: Arc::default() }
    }

    /// What QPs moving to ERR reach to have this CQ flush them.
    pub(crate) fn flush(&self) -> &Arc<CqFlush> {
        &self.flush
    }

    /// The ring (crate-internal: the kernel owns some of its entries).
    #[cfg(any(test, feature = "mock"))]
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn ring(&self) -> &Ring<CQE_LEN> {
        &self.ring
    }

    /// The ring with its counter at `get` (tests of the counter's wrap).
    #[cfg(test)]
    pub(crate) fn starting_at(self, get: u32) -> Self {
        CqRing { get, ..self }
    }

    /// The arm word, `siw_cq_ctrl.flags`, after the last entry.
    #[inline(always)]
    fn ctrl(&self) -> &AtomicU32 {
        // SAFETY: the ring was mapped with the 8-byte `siw_cq_ctrl` tail
        // (`cq_finish`, `new_heap` in tests); 4-aligned (after whole 32-byte
        // entries of page-aligned memory); the kernel accesses it only as a
        // whole `u32` (READ_ONCE / WRITE_ONCE / smp_store_mb).
        unsafe { AtomicU32::from_ptr(self.ring.tail().cast::<u32>()) }
    }

    /// True when no completion is ready: a poll now would return 0. One
    /// load, nothing consumed (and one more while a QP in ERR is flushed
    /// here).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        // Acquire, as in `poll`: a poll after a `false` reads an entry the
        // kernel finished.
        // SAFETY: an entry of our live ring.
        unsafe { wqe::cqe_flags(self.ring.slot(self.get)) }.load(Ordering::Acquire) & wqe::VALID as u8 == 0
            && !(self.flush.any() && self.flush.ready())
    }

    /// Moves up to `out.len()` completions into `out`; returns how many
    /// (`ibv_poll_cq`). No syscall: per entry an Acquire load of its flags,
    /// a copy, and a Release store of 0 that hands it back.
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        // SAFETY: `MaybeUninit<Wc>` has `Wc`'s layout, and `poll_uninit`
        // writes only whole `Wc`s through it, so `out` stays valid.
        let out = unsafe { &mut *(out as *mut [Wc] as *mut [MaybeUninit<Wc>]) };
        self.poll_uninit(out)
    }

    /// [`poll`](Self::poll) into memory that need not be initialised: the
    /// first `n` entries of `out` are written whole, `n` returned.
    #[inline]
    pub fn poll_uninit(&mut self, out: &mut [MaybeUninit<Wc>]) -> usize {
        let mut n = 0;
        for w in out.iter_mut() {
            let slot = self.ring.slot(self.get);
            // SAFETY: an entry of our live ring.
            let flags = unsafe { wqe::cqe_flags(slot) };
            // Acquire: the kernel wrote the entry before it stored VALID
            // (WRITE_ONCE after the fields, under its CQ lock).
            if flags.load(Ordering::Acquire) & wqe::VALID as u8 == 0 {
                break;
            }
            // SAFETY: a whole entry whose VALID we loaded with Acquire.
            let c = unsafe { wqe::read_cqe(slot) };
            w.write(wqe::decode_cqe(&c));
            // Release: our copy is done before the kernel, which writes an
            // entry only when its flags are 0, may reuse it.
            flags.store(0, Ordering::Release);
            self.get = self.get.wrapping_add(1);
            n += 1;
        }
        // After the kernel's: a QP's flushed requests are younger than
        // anything the kernel completed for it.
        if n < out.len() && self.flush.any() {
            n += self.flush.poll(&mut out[n..]);
        }
        n
    }

    /// Arms the CQ for one completion event (`ibv_req_notify_cq`): the arm
    /// word becomes `SIW_NOTIFY_SOLICITED` (1), or with `NEXT_COMPLETION`
    /// too (3) for any completion. No syscall; the kernel clears the word
    /// when it signals.
    #[inline]
    pub fn arm(&self, solicited_only: bool) {
        let v = if solicited_only { SIW_NOTIFY_SOLICITED } else { SIW_NOTIFY_SOLICITED | SIW_NOTIFY_NEXT_COMPLETION };
        // SeqCst (rdma-core's atomic_store): the arm is ordered before the
        // poll that usually follows it, so a completion the kernel added
        // before it saw the arm is found by that poll.
        self.ctrl().store(v, Ordering::SeqCst);
    }

    /// The arm word as it is now (tests).
    #[cfg(test)]
    pub(crate) fn armed(&self) -> u32 {
        self.ctrl().load(Ordering::Acquire)
    }
}
