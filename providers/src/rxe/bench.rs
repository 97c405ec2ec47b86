//! Benchmark fixtures (`--features mock`, hidden from the docs): an rxe
//! ring together with the mock of the kernel side that serves it, for
//! `examples/rxe_bench.rs`.
//!
//! Sound to expose: each fixture owns its heap queue and the mock that
//! consumes or produces into it, and hands out neither (no `&Queue`, no
//! `&mut SendRing` that could be swapped for a kernel-mapped one); the
//! mock only ever touches the fixture's own queue.

use rverbs_uapi::ib_user_verbs::ib_uverbs_wc;

use crate::rxe::mock::MockKernel;
use crate::rxe::{CqRing, Doorbell, Queue, SendLimits, SendRing};
use crate::wr::{PostError, SendWr, Wc};

pub use crate::rxe::mock::recv_cqe;

/// A send ring of `slots` slots of `1 << log2` bytes in heap memory, and
/// the kernel side that consumes it.
// `repr(C)`, the ring first: `&mut self.ring` is `self`, so the measured
// code is the same as on a bare `&mut SendRing`.
#[derive(Debug)]
#[repr(C)]
pub struct SendBench<D: Doorbell> {
    ring: SendRing<D>,
    kernel: MockKernel,
}

impl<D: Doorbell> SendBench<D> {
    /// A fixture; panics on a geometry a kernel would not make (`slots` a
    /// power of two >= 2, `log2` from 8 to 15).
    pub fn new(slots: u32, log2: u32, lim: SendLimits, doorbell: D) -> Self {
        SendBench {
            ring: SendRing::new(Queue::new_heap(slots, log2), lim, doorbell, 0),
            kernel: MockKernel::new(lim.transport),
        }
    }

    /// [`SendRing::post`].
    ///
    /// # Safety
    /// As for [`SendRing::post`].
    #[inline(always)]
    pub unsafe fn post(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        // SAFETY: forwarded.
        unsafe { self.ring.post(wrs) }
    }

    /// Requests the ring holds at most.
    pub fn capacity(&self) -> u32 {
        self.ring.queue().capacity()
    }

    /// The kernel side consumes everything posted; returns how many.
    pub fn consume_all(&mut self) -> u32 {
        self.kernel.discard_send(self.ring.queue(), u32::MAX)
    }
}

/// A completion ring of `slots` slots of `1 << log2` bytes in heap memory,
/// and the kernel side that produces into it.
// `repr(C)`, the ring first: see `SendBench`.
#[derive(Debug)]
#[repr(C)]
pub struct CqBench {
    ring: CqRing,
    kernel: MockKernel,
}

impl CqBench {
    /// A fixture; panics on a geometry a kernel would not make (`slots` a
    /// power of two >= 2, `log2` from 6 to 15).
    pub fn new(slots: u32, log2: u32) -> Self {
        CqBench { ring: CqRing::new(Queue::new_heap(slots, log2)), kernel: MockKernel::new(crate::rxe::Transport::Rc) }
    }

    /// [`CqRing::poll`].
    #[inline(always)]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.ring.poll(out)
    }

    /// Completions the ring holds at most.
    pub fn capacity(&self) -> u32 {
        self.ring.queue().capacity()
    }

    /// The kernel side writes `wc` (kernel layout and flag bits: see
    /// [`recv_cqe`]); false if the ring is full.
    pub fn produce(&mut self, wc: &ib_uverbs_wc) -> bool {
        self.kernel.produce_cqe(self.ring.queue(), wc)
    }
}
