//! rxe's fast path: posting to the send, receive and shared receive rings,
//! ringing the send doorbell, polling the completion ring.
//!
//! No allocation, no locks (`&mut self` serialises each ring), no `dyn`;
//! the only syscall is the send doorbell, once per post call. The one
//! exception to "no locks": a UD send through an AH that has no kernel
//! number (kernels before 5.16) reads its address vector from the
//! context's [`AvTable`] under a read lock.

use std::sync::Arc;

use crate::rxe::av::{AvTable, AV_NUM_FLAG};
use crate::rxe::wqe::{self, SendLimits};
use crate::rxe::Queue;
use crate::wr::{PostError, PostErrorKind, RecvWr, SendWr, Wc, WcFlags};
use crate::Errno;

/// What makes the kernel look at the send ring. For rxe that is a `write()`
/// of `POST_SEND` with no work requests ([`crate::sys::UverbsFd::ring_send_doorbell`]);
/// tests and benchmarks count instead. Static dispatch: posting is generic over it.
pub trait Doorbell {
    /// Rings once for the QP with kernel handle `qp_handle`.
    fn ring(&self, qp_handle: u32) -> Result<(), Errno>;
}

/// The send half of an rxe QP.
#[derive(Debug)]
pub struct SendRing<D> {
    q: Queue,
    lim: SendLimits,
    doorbell: D,
    /// The kernel handle the doorbell names.
    qp_handle: u32,
    /// The context's userspace address vectors (UD AHs without a kernel
    /// number); `None` refuses such AHs.
    avs: Option<Arc<AvTable>>,
}

impl<D: Doorbell> SendRing<D> {
    /// A send ring over `q` with the QP's limits, clamped to what one slot
    /// holds (`elem_size - 208` bytes of SGEs or inline data), so a create
    /// response that promised more than the kernel's ring can hold makes
    /// posts fail instead of writing past a slot.
    ///
    /// # Panics
    /// If a slot is smaller than the 208-byte WQE header (`qp_finish`
    /// refuses such a kernel answer with `EPROTO` before it gets here).
    pub(crate) fn new(q: Queue, mut lim: SendLimits, doorbell: D, qp_handle: u32) -> Self {
        assert!(q.elem_size() >= wqe::SEND_DATA, "send slots of {} bytes cannot hold a WQE", q.elem_size());
        let room = q.elem_size().saturating_sub(wqe::SEND_DATA);
        lim.max_sge = lim.max_sge.min((room / 16) as u32);
        lim.max_inline = lim.max_inline.min(room as u32);
        SendRing { q, lim, doorbell, qp_handle, avs: None }
    }

    /// Lets UD requests name the address vectors of `avs` (AH numbers with
    /// [`AV_NUM_FLAG`]).
    pub(crate) fn with_av_table(mut self, avs: Arc<AvTable>) -> Self {
        self.avs = Some(avs);
        self
    }

    /// The ring (crate-internal: its index words are the kernel's too).
    #[cfg(any(test, feature = "mock"))]
    pub(crate) fn queue(&self) -> &Queue {
        &self.q
    }

    /// The doorbell.
    pub fn doorbell(&self) -> &D {
        &self.doorbell
    }

    /// Posts `wrs` in order, then rings the doorbell once if any was posted.
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
        let mask = self.q.index_mask();
        // Relaxed: the SQ producer is ours; Acquire (in free_slots) on the
        // kernel's consumer: it has finished with the slots it released.
        let mut prod = self.q.producer_own();
        let mut free = self.q.free_slots(prod);
        for (index, wr) in wrs.iter().enumerate() {
            let total = match wqe::check_send(wr, &self.lim) {
                Ok(t) => t,
                Err(kind) => return self.refuse(prod, index, kind),
            };
            if free == 0 {
                return self.refuse(prod, index, PostErrorKind::QueueFull);
            }
            // A UD AH without a kernel number: its vector travels in the WQE.
            let av = match wr.ud {
                Some(u) if u.ah_num & AV_NUM_FLAG != 0 => match self.avs.as_ref().and_then(|t| t.get(u.ah_num)) {
                    Some(av) => Some(av),
                    None => return self.refuse(prod, index, PostErrorKind::BadDestination),
                },
                _ => None,
            };
            // Slot `prod` is free: counted against the consumer we loaded with Acquire.
            // The slot has SEND_DATA bytes (asserted in `new`) plus the SGE or
            // inline room the limits were clamped to; `wr` passed those limits.
            // SAFETY: a free, whole, 8-aligned slot; INLINE's contract forwarded.
            unsafe { wqe::write_send_wqe(self.q.elem_ptr(prod), wr, total, av.as_ref()) };
            prod = prod.wrapping_add(1) & mask;
            free -= 1;
        }
        if wrs.is_empty() {
            return Ok(());
        }
        self.ring_for(prod, wrs.len())
    }

    /// [`post`](Self::post) of the one request `wr`, always inlined: a
    /// caller that posts one request per call (the C library's
    /// `ibv_post_send`) gets a straight line for the usual requests
    /// ([`wqe::check_send_usual`]: a SEND or RDMA WRITE of one SGE, not
    /// inline, no AV to copy) into a ring with room, with the request's
    /// fields in registers and the opcode it built folded into the checks
    /// and the WQE writer. Any other request, and every refusal, goes to
    /// the general [`post`](Self::post) out of line, which checks it again
    /// in full: the same bytes, indices, doorbells and errors
    /// (`tests::post_one_matches_post`).
    ///
    /// # Safety
    /// As for [`post`](Self::post).
    #[inline(always)]
    pub unsafe fn post_one(&mut self, wr: &SendWr<'_>) -> Result<(), PostError> {
        let usual = match wqe::check_send_usual(wr, &self.lim) {
            Some(total) if !wr.ud.is_some_and(|u| u.ah_num & AV_NUM_FLAG != 0) => Some(total),
            _ => None,
        };
        // Relaxed: the SQ producer is ours; Acquire (in free_slots) on the
        // kernel's consumer: it has finished with the slots it released.
        let prod = self.q.producer_own();
        let Some(total) = usual.filter(|_| self.q.free_slots(prod) != 0) else {
            // SAFETY: forwarded.
            return unsafe { self.post_one_general(wr) };
        };
        // SAFETY: slot `prod` is free (counted against the consumer loaded
        // with Acquire), whole and 8-aligned, with SEND_DATA bytes plus the
        // SGE room (`max_sge` != 0, checked above); not INLINE, so nothing
        // is read through the SGE.
        unsafe { wqe::write_send_wqe(self.q.elem_ptr(prod), wr, total, None) };
        self.ring_for(prod.wrapping_add(1), 1)
    }

    /// [`post_one`](Self::post_one) of a request off its short path: the
    /// general [`post`](Self::post), out of line.
    ///
    /// # Safety
    /// As for [`post`](Self::post).
    #[inline(never)]
    unsafe fn post_one_general(&mut self, wr: &SendWr<'_>) -> Result<(), PostError> {
        // SAFETY: forwarded.
        unsafe { self.post(core::slice::from_ref(wr)) }
    }

    /// Publishes `prod` (the WQEs before it are written) and rings the
    /// doorbell for the `posted` requests that are in the ring.
    #[inline(always)]
    fn ring_for(&mut self, prod: u32, posted: usize) -> Result<(), PostError> {
        // Release: the WQEs above are written before the kernel sees the index.
        self.q.publish_producer(prod);
        match self.doorbell.ring(self.qp_handle) {
            Ok(()) => Ok(()),
            // `index` keeps its meaning: requests before it are in the
            // ring (the kernel looks at them on the next doorbell).
            Err(e) => Err(doorbell_failed(posted, e)),
        }
    }

    /// Request `index` is refused (`kind`): the ones before it (up to
    /// `prod`) are posted and the doorbell rung for them. Out of line, so
    /// the posting loop carries no error state.
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, prod: u32, index: usize, kind: PostErrorKind) -> Result<(), PostError> {
        if index > 0 {
            self.ring_for(prod, index)?;
        }
        Err(PostError { index, kind })
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
pub struct RecvRing {
    q: Queue,
    max_sge: u32,
}

impl RecvRing {
    /// A receive ring over `q` taking `max_sge` SGEs per request, clamped
    /// to what one slot holds (`(elem_size - 40) / 16`).
    ///
    /// # Panics
    /// If a slot is smaller than the 40-byte WQE header (`qp_finish` and
    /// `srq_finish` refuse such a kernel answer with `EPROTO` first).
    pub(crate) fn new(q: Queue, max_sge: u32) -> Self {
        assert!(q.elem_size() >= wqe::RECV_DATA, "receive slots of {} bytes cannot hold a WQE", q.elem_size());
        let room = q.elem_size().saturating_sub(wqe::RECV_DATA);
        RecvRing { max_sge: max_sge.min((room / 16) as u32), q }
    }

    /// The ring (crate-internal: its index words are the kernel's too).
    #[cfg(test)]
    pub(crate) fn queue(&self) -> &Queue {
        &self.q
    }

    /// Posts `wrs` in order (no syscall). Same error rule as sends.
    /// Safe: nothing is read from the buffers; the device checks the lkeys
    /// when it writes.
    ///
    /// The usual call, one request of one SGE into a ring with room, is
    /// inlined and takes a short path (`wqe::write_recv_one_sge`: the same
    /// bytes, `golden_recv_one_sge`) that needs no saved registers; any
    /// other goes to the general loop, out of line (`post_list`).
    #[inline(always)]
    pub fn post(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        if let [RecvWr { wr_id, sgl: [sge] }] = wrs {
            // Relaxed: the RQ/SRQ producer is ours; Acquire (in free_slots) on
            // the kernel's consumer: it has finished with the slots it released.
            let prod = self.q.producer_own();
            if self.max_sge != 0 && self.q.free_slots(prod) != 0 {
                // SAFETY: as in `post_list`: a free, whole, aligned slot of at
                // least RECV_DATA bytes plus one SGE (`max_sge` >= 1 was
                // clamped to the slot in `new`).
                unsafe { wqe::write_recv_one_sge(self.q.elem_ptr(prod), *wr_id, sge) };
                // Release: the WQE is written before the kernel sees the index.
                self.q.publish_producer(prod.wrapping_add(1));
                return Ok(());
            }
        }
        self.post_list(wrs)
    }

    /// [`post`](Self::post)'s general loop: any number of requests and
    /// SGEs, each checked (`wqe::check_recv`) before it is written.
    #[inline(never)]
    fn post_list(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let mask = self.q.index_mask();
        // Relaxed: the RQ/SRQ producer is ours; Acquire (in free_slots) on
        // the kernel's consumer: it has finished with the slots it released.
        let mut prod = self.q.producer_own();
        let mut free = self.q.free_slots(prod);
        for (index, wr) in wrs.iter().enumerate() {
            let total = match wqe::check_recv(wr, self.max_sge) {
                Ok(t) => t,
                Err(kind) => return self.refuse(prod, index, kind),
            };
            if free == 0 {
                return self.refuse(prod, index, PostErrorKind::QueueFull);
            }
            // SAFETY: as in `SendRing::post`: a free, whole, aligned slot of at
            // least RECV_DATA bytes (asserted in `new`) plus room for the
            // `max_sge` it was clamped to there; `wr` was checked against it.
            unsafe { wqe::write_recv_wqe(self.q.elem_ptr(prod), wr, total) };
            prod = prod.wrapping_add(1) & mask;
            free -= 1;
        }
        if !wrs.is_empty() {
            // Release: the WQEs above are written before the kernel sees the index.
            self.q.publish_producer(prod);
        }
        Ok(())
    }

    /// Request `index` is refused (`kind`); the ones before it (up to
    /// `prod`) are posted. Out of line, as for sends.
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, prod: u32, index: usize, kind: PostErrorKind) -> Result<(), PostError> {
        if index > 0 {
            // Release: the WQEs before it are written before the kernel sees the index.
            self.q.publish_producer(prod);
        }
        Err(PostError { index, kind })
    }
}

/// The completion ring of an rxe CQ.
#[derive(Debug)]
pub struct CqRing {
    q: Queue,
    /// Bytes per slot (`q.elem_size()`): a slot's offset is one multiply.
    step: usize,
}

impl CqRing {
    /// A completion ring over `q`.
    ///
    /// # Panics
    /// If a slot is smaller than a completion (`cq_finish` refuses such a
    /// kernel answer with `EPROTO` first).
    pub(crate) fn new(q: Queue) -> Self {
        assert!(q.elem_size() >= wqe::CQE_LEN, "CQ slots of {} bytes cannot hold a completion", q.elem_size());
        CqRing { step: q.elem_size(), q }
    }

    /// The ring (crate-internal: its index words are the kernel's too).
    #[cfg(any(test, feature = "mock"))]
    pub(crate) fn queue(&self) -> &Queue {
        &self.q
    }

    /// True when no completion is ready: a [`poll`](Self::poll) now would
    /// return 0. Two loads, nothing consumed (an empty poll in a busy loop,
    /// `ibv_poll_cq` finding nothing, costs just this).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        // Acquire, as in `poll`: a poll after a `false` reads CQEs the
        // kernel finished. Relaxed on our own consumer.
        let prod = self.q.producer_acquire();
        prod.wrapping_sub(self.q.consumer_own()) & self.q.index_mask() == 0
    }

    /// Moves up to `out.len()` completions into `out`; returns how many.
    /// No syscall: one Acquire load of the producer, copies, one Release
    /// store of the consumer.
    #[inline(always)]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        // SAFETY: `MaybeUninit<Wc>` has `Wc`'s layout, and `poll_uninit`
        // writes only whole, initialised `Wc`s through it, so `out` holds
        // valid values whatever it returns.
        let out = unsafe { &mut *(out as *mut [Wc] as *mut [core::mem::MaybeUninit<Wc>]) };
        self.poll_uninit(out)
    }

    /// [`poll`](Self::poll) into memory that need not be initialised (the
    /// C library's caller-owned `ibv_wc` array): the first `n` entries of
    /// `out` are written, whole, and `n` is returned; the rest are left as
    /// they were.
    #[inline(always)]
    pub fn poll_uninit(&mut self, out: &mut [core::mem::MaybeUninit<Wc>]) -> usize {
        self.poll_into::<true>(out)
    }

    /// [`poll_uninit`](Self::poll_uninit) that leaves `imm_data` in network
    /// byte order, as the kernel wrote it and as libibverbs' `ibv_wc` holds
    /// it (the C library's `ibv_poll_cq`: no swap here and none back there);
    /// every other field as [`poll`](Self::poll). Inlined whole, so that
    /// the C poll is one frame.
    #[inline(always)]
    pub fn poll_uninit_net_imm(&mut self, out: &mut [core::mem::MaybeUninit<Wc>]) -> usize {
        self.poll_into::<false>(out)
    }

    /// One completion into `w`, `imm_data` in network byte order (as
    /// [`poll_uninit_net_imm`](Self::poll_uninit_net_imm) with a one-entry
    /// slice): `Some` with it written, or `None` (and `w` untouched) when
    /// the ring is empty. Inlined whole, with no call: the C library's
    /// `ibv_poll_cq` of one entry is then a leaf, with no frame.
    #[inline(always)]
    pub fn poll_one_uninit_net_imm<'a>(&mut self, w: &'a mut core::mem::MaybeUninit<Wc>) -> Option<&'a mut Wc> {
        let mask = self.q.index_mask();
        // Relaxed: the CQ consumer is ours. The slot's address is computed
        // before the Acquire load; nothing is read from it until after.
        let cons = self.q.consumer_own();
        let slot = self.slot(cons);
        // Acquire: the CQE at our consumer is written before we read it.
        let prod = self.q.producer_acquire();
        if prod.wrapping_sub(cons) & mask == 0 {
            return None;
        }
        // SAFETY: slot `cons` lies between our consumer and the producer we
        // loaded with Acquire, so the kernel finished writing it; it is a
        // whole 8-aligned slot of at least CQE_LEN bytes (asserted in `new`).
        let w = unsafe { copy_cqe::<false>(slot, w) };
        // Release: our copy is done before the kernel may reuse the slot
        // (`publish_consumer` masks the index).
        self.q.publish_consumer(cons.wrapping_add(1));
        Some(w)
    }

    /// Slot `i` (masked): the index scaled by a multiply, where
    /// [`Queue::elem_ptr`] needs the shift count in a register.
    #[inline(always)]
    fn slot(&self, i: u32) -> *mut u8 {
        // In bounds of the mapping: `step` is the queue's slot size, and
        // `Queue::map` checked that every masked slot fits; never past
        // it, so `wrapping_add` computes the same pointer `add` would.
        self.q.elem_ptr(0).wrapping_add((i & self.q.index_mask()) as usize * self.step)
    }

    /// [`poll_into`](Self::poll_into) of `n` CQEs from slot `cons` on, when
    /// `n` is not one or two, out of line: copies them into `out` (each as
    /// [`copy_cqe`] does: as it is, decoded only where its flags need it),
    /// publishes the consumer, returns `n`.
    ///
    /// # Safety
    /// The kernel has published `n` slots from `cons` on, `n <= out.len()`.
    #[inline(never)]
    unsafe fn take_many<const HOST_IMM: bool>(
        &mut self,
        out: &mut [core::mem::MaybeUninit<Wc>],
        n: usize,
        cons: u32,
    ) -> usize {
        if n == 0 {
            // No room (`out` is empty): nothing taken, nothing published.
            return 0;
        }
        let out = &mut out[..n];
        // Two runs of consecutive slots: up to the ring's end, then from
        // its start; each walks a pointer (no index to mask and scale).
        let to_end = (self.q.index_mask() - (cons & self.q.index_mask())) as usize + 1;
        let (run, wrapped) = out.split_at_mut(to_end.min(n));
        // SAFETY: published (contract); `run` fits before the ring's end.
        unsafe { self.take_run::<HOST_IMM>(run, self.slot(cons)) };
        // SAFETY: published (contract); `wrapped` holds fewer entries than
        // the ring has slots.
        unsafe { self.take_run::<HOST_IMM>(wrapped, self.slot(0)) };
        // Release: our copies are done before the kernel may reuse the
        // slots (`n` is at most the mask; `publish_consumer` masks).
        self.q.publish_consumer(cons.wrapping_add(n as u32));
        n
    }

    /// Decodes `out.len()` CQEs of consecutive slots from `slot` on.
    ///
    /// # Safety
    /// `slot` is a slot of this ring, and it and the `out.len() - 1`
    /// slots after it are published and lie before the ring's end.
    #[inline(always)]
    unsafe fn take_run<const HOST_IMM: bool>(&self, out: &mut [core::mem::MaybeUninit<Wc>], mut slot: *mut u8) {
        for w in out {
            // SAFETY: published (contract), a whole 8-aligned slot of at
            // least CQE_LEN bytes (asserted in `new`).
            unsafe { copy_cqe::<HOST_IMM>(slot, w) };
            // The next slot, or (after the last) one past the ring's end:
            // never read.
            slot = slot.wrapping_add(self.step);
        }
    }

    /// The polls above: `HOST_IMM` swaps `imm_data` to host order.
    ///
    /// Shaped for the usual poll, which finds one or two completions: they
    /// are copied in a straight line (a CQE that needs no decoding, the
    /// usual one, is three 16-byte copies and one test of its flags) that
    /// saves no register and sets up no loop; three or more go to a loop
    /// out of line, as a tail call.
    #[inline(always)]
    fn poll_into<const HOST_IMM: bool>(&mut self, out: &mut [core::mem::MaybeUninit<Wc>]) -> usize {
        match self.take_few::<HOST_IMM>(out) {
            Few::Taken(n) => n,
            // SAFETY: `Few::More`'s `n` slots from `cons` on are published,
            // and `n <= out.len()`.
            Few::More { n, cons } => unsafe { self.take_many::<HOST_IMM>(out, n, cons) },
        }
    }

    /// [`poll_uninit_net_imm`](Self::poll_uninit_net_imm) when it finds
    /// none, one or two completions: `Some` with how many (copied and
    /// consumed). `None` when `out` is empty or three or more are ready,
    /// with nothing consumed: the caller polls again, out of line. Inlined
    /// whole, with no call: the C library's `ibv_poll_cq` is then a leaf,
    /// with no frame, and its loop for three or more a tail call.
    #[inline(always)]
    pub fn poll_few_uninit_net_imm(&mut self, out: &mut [core::mem::MaybeUninit<Wc>]) -> Option<usize> {
        match self.take_few::<false>(out) {
            Few::Taken(n) => Some(n),
            Few::More { .. } => None,
        }
    }

    /// The polls' common start: how many CQEs the kernel has published
    /// from our consumer on; when that is none, or one or two that fit in
    /// `out`, takes them in a straight line (a CQE that needs no decoding,
    /// the usual one, is three 16-byte copies and one test of its flags)
    /// that saves no register and sets up no loop, and consumes them.
    #[inline(always)]
    fn take_few<const HOST_IMM: bool>(&mut self, out: &mut [core::mem::MaybeUninit<Wc>]) -> Few {
        // Relaxed: the CQ consumer is ours. Loaded before the producer, so
        // that nothing of `self` is loaded twice around the Acquire.
        let cons = self.q.consumer_own();
        // Acquire: the CQEs up to the kernel's producer are written before we read them.
        let prod = self.q.producer_acquire();
        // In `usize`: no zero extension of the count before the `min`.
        let ready = (prod as usize).wrapping_sub(cons as usize) & self.q.index_mask() as usize;
        if ready == 0 {
            return Few::Taken(0);
        }
        let n = ready.min(out.len());
        // The `n` slots from `cons` on lie between our consumer and the
        // producer we loaded with Acquire: the kernel finished writing them.
        // Not one or two (`out` is empty, or three or more are ready):
        // one range test.
        if n.wrapping_sub(1) > 1 {
            return Few::More { n, cons };
        }
        if let [first, rest @ ..] = &mut out[..n] {
            // SAFETY: published (above).
            unsafe { copy_cqe::<HOST_IMM>(self.slot(cons), first) };
            if let [second] = rest {
                // SAFETY: published (above).
                unsafe { copy_cqe::<HOST_IMM>(self.slot(cons.wrapping_add(1)), second) };
            }
        }
        // Release: our copies are done before the kernel may reuse the slots
        // (`publish_consumer` masks the index).
        self.q.publish_consumer(cons.wrapping_add(n as u32));
        Few::Taken(n)
    }
}

/// What [`CqRing::take_few`] did: took `n` CQEs (none, one or two), or
/// took none and left `n` (zero, when `out` is empty, or three or more)
/// from slot `cons` on, published, `n <= out.len()`, to the loop.
enum Few {
    Taken(usize),
    More { n: usize, cons: u32 },
}

/// Copies the CQE at `slot` into `w` as it is, then decodes it there if its
/// flags need it (`HOST_IMM`: [`wqe::decode_cqe`], else
/// [`wqe::decode_cqe_flags`]); the usual CQE needs nothing
/// ([`wqe::CQE_PLAIN`]), so its whole cost is the copy and one test.
///
/// # Safety
/// `slot` is a CQ slot the kernel has published (between our consumer and
/// a producer index loaded with Acquire), whole, at least `CQE_LEN` bytes
/// long and 8-aligned.
#[inline(always)]
unsafe fn copy_cqe<const HOST_IMM: bool>(slot: *const u8, w: &mut core::mem::MaybeUninit<Wc>) -> &mut Wc {
    // SAFETY: forwarded.
    let w = w.write(unsafe { wqe::read_cqe(slot) });
    let plain = if HOST_IMM { wqe::CQE_PLAIN } else { wqe::CQE_PLAIN_NET_IMM };
    let flags = w.wc_flags.bits();
    if flags & !plain != 0 {
        // `decode_cqe` (`decode_cqe_flags`), field by field in place; the
        // immediate's test on the mapped flags (`WITH_IMM` is the same bit
        // in both), so that the kernel's are dead by then.
        let mapped = wqe::map_wc_flags(flags);
        w.wc_flags = mapped;
        if HOST_IMM && mapped.contains(WcFlags::WITH_IMM) {
            w.imm_data = u32::from_be(w.imm_data);
        }
    }
    w
}
