//! Completing what siw leaves behind in ERROR.
//!
//! siw flushes a QP's rings when the QP enters ERROR, and never reads them
//! again: a request posted afterwards (the send doorbell of a QP in ERROR
//! does nothing; receives are read only when a message arrives) would never
//! complete. That happens when the connection dropped (the kernel moved the
//! QP to ERROR before the user learnt of it), while `rdma_disconnect`'s
//! graceful close runs (SQD: siw refuses the doorbell, or went to ERROR at
//! once when its send queue was busy), or when a user posts to a QP it
//! moved there itself. rxe and mlx5 flush such requests; libsiw does not.
//! rverbs does: once the QP has been moved to ERR (by the user, by
//! `CmId::disconnect` after the DISCONNECT, or by the CM when DISCONNECTED
//! is read), each of its CQs
//! takes over the entries still `VALID` in the rings that complete there,
//! and its polls report them as `WR_FLUSH_ERR`, in order, after what the
//! kernel wrote. The kernel no longer touches those entries, so the flush
//! is their consumer, by the same protocol (Acquire of `VALID`, a copy, a
//! Release store of 0).
//!
//! Where the flush starts: the oldest entry still `VALID`. Entries are
//! `VALID` in one run ending at the producer's counter, so the flush walks
//! back from the `put` it published; but a batch being written at that
//! moment may have filled the slots just before the run, so the walk counts
//! only when the producer's `reserved` equals its `put` after it (nothing
//! being written), and is retried at the next poll otherwise
//! ([`Posted`]). No completion event is raised for these completions (the
//! kernel raises those): a waiter learns of the drop from the CM's
//! `DISCONNECTED`, and polls.

use core::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::ring::{Posted, Ring};
use super::wqe::{self, RQE_LEN, SQE_LEN};
use crate::wr::Wc;

/// A siw QP's rings as its CQs' flush sees them, and where it has got to.
#[derive(Debug)]
pub struct QpRings {
    qp_num: u32,
    sq: Ring<SQE_LEN>,
    /// `None` when the QP receives from an SRQ (whose entries stay there).
    rq: Option<Ring<RQE_LEN>>,
    /// The next entry to flush, per ring; `None` until the start is found.
    cursors: Mutex<Cursors>,
    /// The CQs that flush this QP, to leave when it is destroyed.
    cqs: Mutex<Vec<Weak<CqFlush>>>,
}

#[derive(Debug, Default)]
struct Cursors {
    sq: Option<u32>,
    rq: Option<u32>,
}

/// A lock whose holder panicked leaves consistent data here (cursors and
/// lists are updated in one store): take it anyway.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl QpRings {
    /// QP `qp_num`'s rings: views that keep the memory mapped.
    pub(crate) fn new(qp_num: u32, sq: &Ring<SQE_LEN>, rq: Option<&Ring<RQE_LEN>>) -> Self {
        QpRings { qp_num, sq: sq.share(), rq: rq.map(Ring::share), cursors: Mutex::default(), cqs: Mutex::default() }
    }

    /// The QP was destroyed: its CQs stop flushing it.
    pub(crate) fn destroyed(self: &Arc<Self>) {
        // Not under our lock: `CqFlush::take` locks the CQ's list, then ours.
        let cqs: Vec<_> = lock(&self.cqs).drain(..).collect();
        for cq in cqs {
            if let Some(cq) = cq.upgrade() {
                cq.forget(self);
            }
        }
    }

    /// Flushes the send ring (`send`) or the receive ring into `out`.
    fn flush(&self, send: bool, out: &mut [MaybeUninit<Wc>]) -> usize {
        let mut c = lock(&self.cursors);
        if send {
            flush_ring(&self.sq, &mut c.sq, true, self.qp_num, out)
        } else if let Some(rq) = &self.rq {
            flush_ring(rq, &mut c.rq, false, self.qp_num, out)
        } else {
            0
        }
    }

    /// True when the next flush of that ring would report something.
    fn ready(&self, send: bool) -> bool {
        let mut c = lock(&self.cursors);
        if send {
            ring_ready(&self.sq, &mut c.sq)
        } else {
            self.rq.as_ref().is_some_and(|rq| ring_ready(rq, &mut c.rq))
        }
    }
}

/// Whether the entry at `slot` is still the producer's to hand over.
#[inline]
fn valid(slot: *mut u8) -> bool {
    // Acquire: the producer wrote the entry before it stored VALID.
    // SAFETY: an entry of a live ring (every caller passes `ring.slot(_)`).
    unsafe { wqe::wqe_flags(slot) }.load(Ordering::Acquire) & wqe::VALID != 0
}

/// The oldest entry still `VALID` in `ring`, if it can be known now (no
/// batch being written): the run of `VALID` entries ends at the published
/// `put`, and starts after the last entry the kernel took.
fn start<const S: usize>(ring: &Ring<S>, posted: &Posted) -> Option<u32> {
    let put = posted.put.load(Ordering::Acquire);
    let mut run = 0;
    while run < ring.slots() && valid(ring.slot(put.wrapping_sub(run + 1))) {
        run += 1;
    }
    // After the walk's Acquire loads: had it seen an entry of a batch being
    // written, it would see that batch's `reserved` (stored before the
    // entry's VALID) here.
    let quiet = posted.reserved.load(Ordering::Acquire) == put && posted.put.load(Ordering::Acquire) == put;
    quiet.then(|| put.wrapping_sub(run))
}

/// Flushes `ring` from `*cursor` (found first if unknown) up to the
/// producer's published `put`, into `out`; returns how many.
fn flush_ring<const S: usize>(
    ring: &Ring<S>,
    cursor: &mut Option<u32>,
    send: bool,
    qp_num: u32,
    out: &mut [MaybeUninit<Wc>],
) -> usize {
    let Some(mut at) = cursor.or_else(|| start(ring, ring.posted())) else { return 0 };
    let put = ring.posted().put.load(Ordering::Acquire);
    let mut n = 0;
    while n < out.len() && at != put {
        let slot = ring.slot(at);
        if !valid(slot) {
            break;
        }
        // SAFETY: a whole entry of a live ring of this kind, loaded VALID
        // with Acquire; the kernel no longer reads the ring (the QP is in
        // ERROR) and this cursor, under its lock, is its only consumer.
        out[n].write(unsafe { wqe::flushed(slot, send, qp_num) });
        // Release: our copy is done before the producer, which writes an
        // entry only when its flags are 0, may reuse it.
        // SAFETY: as above.
        unsafe { wqe::wqe_flags(slot) }.store(0, Ordering::Release);
        at = at.wrapping_add(1);
        n += 1;
    }
    *cursor = Some(at);
    n
}

/// True when [`flush_ring`] would report something now.
fn ring_ready<const S: usize>(ring: &Ring<S>, cursor: &mut Option<u32>) -> bool {
    if cursor.is_none() {
        *cursor = start(ring, ring.posted());
    }
    cursor.is_some_and(|at| at != ring.posted().put.load(Ordering::Acquire) && valid(ring.slot(at)))
}

/// A siw CQ's part of the flush: the QPs in ERR whose queues complete
/// here. Shared by the CQ's driver (which polls it) and its kernel object
/// (which QPs moving to ERR reach).
#[derive(Debug, Default)]
pub struct CqFlush {
    /// True while `qps` is not empty: the one load a poll pays otherwise.
    any: AtomicBool,
    qps: Mutex<Vec<Taken>>,
}

#[derive(Debug)]
struct Taken {
    qp: Arc<QpRings>,
    send: bool,
    recv: bool,
}

impl CqFlush {
    /// QP `qp` moved to ERR: its send ring (`send`) and receive ring
    /// (`recv`) complete here, so this CQ flushes them from now on.
    pub(crate) fn take(self: &Arc<Self>, qp: &Arc<QpRings>, send: bool, recv: bool) {
        let mut qps = lock(&self.qps);
        if qps.iter().any(|t| Arc::ptr_eq(&t.qp, qp)) {
            return;
        }
        qps.push(Taken { qp: qp.clone(), send, recv });
        lock(&qp.cqs).push(Arc::downgrade(self));
        self.any.store(true, Ordering::Release);
    }

    fn forget(&self, qp: &Arc<QpRings>) {
        let mut qps = lock(&self.qps);
        qps.retain(|t| !Arc::ptr_eq(&t.qp, qp));
        self.any.store(!qps.is_empty(), Ordering::Release);
    }

    /// Whether any QP is flushed here (one load).
    #[inline(always)]
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// The flushed QPs' entries into `out`; returns how many.
    #[cold]
    #[inline(never)]
    pub(crate) fn poll(&self, out: &mut [MaybeUninit<Wc>]) -> usize {
        let qps = lock(&self.qps);
        let mut n = 0;
        for t in qps.iter() {
            if n == out.len() {
                break;
            }
            if t.send {
                n += t.qp.flush(true, &mut out[n..]);
            }
            if t.recv {
                n += t.qp.flush(false, &mut out[n..]);
            }
        }
        n
    }

    /// True when [`poll`](Self::poll) would report something now.
    #[cold]
    #[inline(never)]
    pub(crate) fn ready(&self) -> bool {
        lock(&self.qps).iter().any(|t| (t.send && t.qp.ready(true)) || (t.recv && t.qp.ready(false)))
    }
}
