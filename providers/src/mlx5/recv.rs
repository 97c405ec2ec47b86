//! The receive half of an mlx5 QP (rdma-core `qp.c mlx5_post_recv`;
//! providers.md §B.7): one data segment per non-empty SGE, a terminator
//! segment when fewer than the stride holds, the wr_id per slot; after the
//! batch `barrier::to_device()` and the receive counter into doorbell
//! record word 0. No MMIO.
//!
//! Unsafe code (allowed below): the receive queue is DMA memory the HCA
//! reads; it is written through raw pointers at slots the overflow check
//! proved free.
#![allow(unsafe_code)]

use core::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::mlx5::barrier;
use crate::mlx5::qp::{recv_ok, QpShared};
use crate::mlx5::seg::DataSeg;
use crate::wr::{PostError, PostErrorKind, RecvWr};

/// The receive queue of one QP.
#[derive(Debug)]
pub struct RecvQueue {
    base: *mut u8,
    shift: u32,
    mask: u32,
    /// The receive counter the device sees (doorbell record word 0, WQE
    /// index): starts over at 0 with each RESET epoch.
    pi: u32,
    /// Receives posted (never starts over: see
    /// [`SqShared`](crate::mlx5::qp::SqShared)).
    posted: u64,
    /// `posted` when the current RESET epoch began.
    epoch_base: u64,
    max_post: u32,
    max_gs: u32,
    state_seen: u32,
    epoch: u32,
    shared: Arc<QpShared>,
}

// SAFETY: `base` points into `shared.buf`, owned by the `Arc` this value
// holds; the ring is only written through `&mut self`.
unsafe impl Send for RecvQueue {}
// SAFETY: `&self` only reads `posted` or hands out the `Arc<QpShared>`
// (`Sync`); the ring is written only through `post(&mut self)`.
unsafe impl Sync for RecvQueue {}

impl RecvQueue {
    pub(crate) fn new(shared: Arc<QpShared>) -> RecvQueue {
        let s = *shared.sizes();
        RecvQueue {
            base: shared.buf.ptr(),
            shift: s.rq_wqe_shift,
            mask: s.rq_wqe_cnt.saturating_sub(1),
            pi: 0,
            posted: 0,
            epoch_base: 0,
            max_post: s.rq_max_post,
            max_gs: s.max_recv_sge,
            state_seen: u32::MAX,
            epoch: 0,
            shared,
        }
    }

    /// Receives posted so far (over the QP's whole life).
    pub fn head(&self) -> u64 {
        self.posted
    }

    /// The shared state.
    pub fn shared(&self) -> &Arc<QpShared> {
        &self.shared
    }

    #[cold]
    fn sync_state(&mut self, word: u32) -> Result<(), PostErrorKind> {
        if word >> 8 != self.epoch {
            // RESET: the device starts over at WQE 0; everything posted
            // before is retired (flushed, or its completion cleaned).
            self.epoch = word >> 8;
            self.pi = 0;
            self.epoch_base = self.posted;
        }
        if !recv_ok(word as u8) {
            return Err(PostErrorKind::BadState);
        }
        self.state_seen = word;
        Ok(())
    }

    /// Posts receive requests in order (no syscall, no MMIO). Same error
    /// rule as sends. Safe: nothing is read from the buffers; the device
    /// checks the lkeys when it writes.
    #[inline]
    pub fn post(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let word = self.shared.state_word();
        if word != self.state_seen {
            if let Err(kind) = self.sync_state(word) {
                return Err(PostError { index: 0, kind });
            }
        }
        // Acquire: the CQ read a slot's wr_id before publishing its
        // retirement. One from before the last RESET is older than
        // `epoch_base` (see `SqShared`).
        let retired = |q: &Self| q.shared.rq.tail.load(Ordering::Acquire).max(q.epoch_base).min(q.posted);
        let mut tail = retired(self);
        let mut n = 0u32;
        let mut failed = None;
        for (index, wr) in wrs.iter().enumerate() {
            if self.posted - tail + u64::from(n) >= u64::from(self.max_post) {
                tail = retired(self);
                if self.posted - tail + u64::from(n) >= u64::from(self.max_post) {
                    failed = Some(PostError { index, kind: PostErrorKind::QueueFull });
                    break;
                }
            }
            if wr.sgl.len() > self.max_gs as usize {
                failed = Some(PostError {
                    index,
                    kind: PostErrorKind::TooManySge { given: wr.sgl.len(), max: self.max_gs },
                });
                break;
            }
            let total: u64 = wr.sgl.iter().map(|s| u64::from(s.length)).sum();
            if total > u64::from(u32::MAX) {
                failed = Some(PostError { index, kind: PostErrorKind::TooLong });
                break;
            }
            let ind = self.pi.wrapping_add(n) & self.mask;
            // SAFETY: slot `ind` is free (overflow check) and lies in the
            // receive queue at the start of the buffer; it holds `max_gs`
            // 16-byte segments, and at most that many are written.
            unsafe {
                let slot = self.base.add((ind as usize) << self.shift).cast::<DataSeg>();
                let mut j = 0;
                for s in wr.sgl {
                    if s.length != 0 {
                        ptr::write(slot.add(j), DataSeg::new(s.length, s.lkey, s.addr));
                        j += 1;
                    }
                }
                if j < self.max_gs as usize {
                    ptr::write(slot.add(j), DataSeg::terminator());
                }
            }
            let slot = self.shared.rq.slot(ind);
            slot.wrid.store(wr.wr_id, Ordering::Relaxed);
            slot.end.store(self.posted + u64::from(n) + 1, Ordering::Relaxed);
            n += 1;
        }
        if n > 0 {
            self.pi = self.pi.wrapping_add(n);
            self.posted += u64::from(n);
            // The WQEs before the counter that publishes them.
            barrier::to_device();
            self.shared.db.store(0, self.pi & 0xffff);
        }
        match failed {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}
