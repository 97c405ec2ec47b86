//! Posting work requests: the send and receive halves of a QP.
//!
//! This module may use `unsafe`: it offers the unchecked post whose inline
//! payloads are read through raw SGE addresses, and forwards to the
//! provider's ring code. Every block says why it is sound.
#![allow(unsafe_code)]

use std::sync::atomic::Ordering;

use rverbs_providers::provider::{RecvDriver, SendDriver};

use crate::{
    PostError, PostErrorKind, QpControl, QpState, QueuePair, RecvWr, SendFlags, SendOp, SendWr, Sge,
    SharedReceiveQueue, UdDest,
};

/// Requests a posting iterator gathers on the stack before it posts them
/// with one call (one doorbell).
const BATCH: usize = 32;

/// Posts `items` in stack batches of [`BATCH`], each a `&[RecvWr]` of one
/// SGE per request, through `post`; a refused request's index counts from
/// the first item.
#[inline]
fn post_recv_batches<'a>(
    items: impl IntoIterator<Item = (u64, Sge<'a>)>,
    mut post: impl FnMut(&[RecvWr<'_>]) -> std::result::Result<(), PostError>,
) -> std::result::Result<(), PostError> {
    let mut items = items.into_iter();
    let mut done = 0;
    loop {
        let mut ids = [0u64; BATCH];
        let mut sges = [Sge::default(); BATCH];
        let mut n = 0;
        for (slot, (id, sge)) in ids.iter_mut().zip(&mut sges).zip(items.by_ref()) {
            (*slot.0, *slot.1) = (id, sge);
            n += 1;
        }
        if n == 0 {
            return Ok(());
        }
        let mut wrs = [RecvWr::new(0, &[]); BATCH];
        for ((wr, &id), sge) in wrs.iter_mut().zip(&ids).zip(&sges).take(n) {
            *wr = RecvWr::new(id, std::slice::from_ref(sge));
        }
        post(&wrs[..n]).map_err(|e| PostError { index: done + e.index, ..e })?;
        done += n;
        if n < BATCH {
            return Ok(());
        }
    }
}

/// As [`post_recv_batches`] for send requests: each `(wr, sge)` is posted
/// as `wr` gathering (or scattering into) the one `sge`.
#[inline]
fn post_send_batches<'a>(
    items: impl IntoIterator<Item = (SendWr<'a>, Sge<'a>)>,
    mut post: impl FnMut(&[SendWr<'_>]) -> std::result::Result<(), PostError>,
) -> std::result::Result<(), PostError> {
    let mut items = items.into_iter();
    let mut done = 0;
    loop {
        let mut reqs = [SendWr::send(0, &[]); BATCH];
        let mut sges = [Sge::default(); BATCH];
        let mut n = 0;
        for (slot, (wr, sge)) in reqs.iter_mut().zip(&mut sges).zip(items.by_ref()) {
            (*slot.0, *slot.1) = (wr, sge);
            n += 1;
        }
        if n == 0 {
            return Ok(());
        }
        let mut wrs = [SendWr::send(0, &[]); BATCH];
        for ((wr, req), sge) in wrs.iter_mut().zip(&reqs).zip(&sges).take(n) {
            *wr = SendWr { sgl: std::slice::from_ref(sge), ..*req };
        }
        post(&wrs[..n]).map_err(|e| PostError { index: done + e.index, ..e })?;
        done += n;
        if n < BATCH {
            return Ok(());
        }
    }
}

/// The send half of a QP. Usable from one thread while another uses the
/// [`RecvQueue`] half, without locks: borrowed through [`QueuePair::split`],
/// or owned (`Send`) through [`QueuePair::into_split`].
#[derive(Debug)]
pub struct SendQueue {
    ring: SendDriver,
    qp: QpControl,
}

/// The receive half of a QP (absent when it receives from an SRQ).
#[derive(Debug)]
pub struct RecvQueue {
    ring: RecvDriver,
    qp: QpControl,
}

impl SendQueue {
    pub(crate) fn new(ring: SendDriver, qp: QpControl) -> Self {
        SendQueue { ring, qp }
    }

    /// The QP's control side (state, modify, query).
    pub fn control(&self) -> &QpControl {
        &self.qp
    }

    #[inline]
    fn check_state(&self) -> std::result::Result<(), PostError> {
        // Sends need RTS or later (SQD, SQE, ERR flush).
        if self.qp.0.state.load(Ordering::Relaxed) < QpState::Rts as u8 {
            return Err(PostError { index: 0, kind: PostErrorKind::BadState });
        }
        Ok(())
    }

    /// Posts send work requests (`ibv_post_send`): WQEs into the send
    /// queue, then one doorbell for the whole list (rxe: one `write()`;
    /// mlx5: the doorbell record and a UAR store or a BlueFlame copy, no
    /// syscall). On a refused request the ones before it are posted, none
    /// after it, and the error names its index.
    ///
    /// Safe because the device reaches memory only through registered
    /// regions, which stay valid while registered (owned regions never
    /// expose references; caller regions are under `reg_mr`'s contract), and
    /// deregistration waits for the device. `INLINE` payloads are read by the
    /// CPU now, so here they must come as bytes: see [`post_send_inline`](Self::post_send_inline).
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        if let Some(index) = wrs.iter().position(|w| w.flags.contains(SendFlags::INLINE)) {
            // Post the ones before it, as for any refused request.
            if index > 0 {
                self.post_send(&wrs[..index])?;
            }
            return Err(PostError { index, kind: PostErrorKind::InlineNeedsBytes });
        }
        // SAFETY: no request is INLINE, so nothing is read through the SGEs.
        unsafe { self.post_send_unchecked(wrs) }
    }

    /// Posts send requests of one SGE each, as an iterator of
    /// `(request, sge)`: each `request` is posted gathering (or, for READs
    /// and atomics, scattering into) its `sge`, which replaces its `sgl`
    /// (build it over `&[]`). The pairs own their SGE, so a batch can be
    /// built in a loop and collected, which a `Vec<SendWr>` cannot (each
    /// would borrow a temporary SGE list: E0716). See
    /// [`QueuePair::post_send_iter`] for the pattern.
    ///
    /// Posts in batches of 32 gathered on the stack (no allocation): one
    /// [`post_send`](Self::post_send), so one doorbell (rxe: one `write()`),
    /// per 32 requests. On a refused request the ones before it are posted,
    /// none after it, and the error's index counts from the first item.
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send_iter<'a>(
        &mut self,
        wrs: impl IntoIterator<Item = (SendWr<'a>, Sge<'a>)>,
    ) -> std::result::Result<(), PostError> {
        post_send_batches(wrs, |batch| self.post_send(batch))
    }

    /// Posts one send whose payload is copied into the WQE now (`IBV_SEND_INLINE`):
    /// `data` may be reused as soon as this returns. At most the QP's
    /// `max_inline_data` bytes.
    #[inline]
    pub fn post_send_inline(
        &mut self,
        wr_id: u64,
        op: SendOp,
        flags: SendFlags,
        data: &[u8],
        ud: Option<UdDest<'_>>,
    ) -> std::result::Result<(), PostError> {
        let Ok(length) = u32::try_from(data.len()) else {
            return Err(PostError { index: 0, kind: PostErrorKind::TooLong });
        };
        let sge = [Sge::borrowing(data, data.as_ptr() as u64, length, 0)];
        let wr = SendWr { wr_id, op, flags: flags | SendFlags::INLINE, sgl: &sge, ud };
        // SAFETY: the one SGE is `data`, borrowed for this call, readable.
        unsafe { self.post_send_unchecked(std::slice::from_ref(&wr)) }
    }

    /// Like [`post_send`](Self::post_send) but also takes `INLINE` requests
    /// whose SGEs point at arbitrary memory.
    ///
    /// # Safety
    /// For every `INLINE` request, each SGE's `addr..addr+length` must be
    /// memory this process may read for the duration of the call.
    #[inline]
    pub unsafe fn post_send_unchecked(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        self.check_state()?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.ring.post(wrs) }
    }

    /// [`post_send_unchecked`](Self::post_send_unchecked) of the one
    /// request `wr`, always inlined into the caller: on rxe a SEND or RDMA
    /// WRITE of one SGE takes a short path whose checks fold away for an
    /// opcode the caller fixed, with the request's fields in registers (any
    /// other request, and every error, goes through the general post). For
    /// callers that post one request per call (the C library's
    /// `ibv_post_send`).
    ///
    /// # Safety
    /// As for [`post_send_unchecked`](Self::post_send_unchecked).
    #[doc(alias = "ibv_post_send")]
    #[inline(always)]
    pub unsafe fn post_send_one_unchecked(&mut self, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
        self.check_state()?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.ring.post_one(wr) }
    }
}

impl RecvQueue {
    pub(crate) fn new(ring: RecvDriver, qp: QpControl) -> Self {
        RecvQueue { ring, qp }
    }

    /// The QP's control side (state, modify, query).
    pub fn control(&self) -> &QpControl {
        &self.qp
    }

    /// Posts receive work requests (`ibv_post_recv`): pure memory, no
    /// syscall. Allowed from INIT on. On a refused request the ones before
    /// it are posted, none after it.
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        let state = self.qp.0.state.load(Ordering::Relaxed);
        if state == QpState::Reset as u8 || state == QpState::Err as u8 {
            return self.post_recv_reset_or_err(state, wrs);
        }
        self.ring.post(wrs)
    }

    /// [`post_recv`](Self::post_recv) in RESET (refused) or ERR (posted,
    /// then flushed: see [`QpControl::posted_recv_in_err`]), out of line.
    #[cold]
    #[inline(never)]
    fn post_recv_reset_or_err(&mut self, state: u8, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        if state == QpState::Reset as u8 {
            return Err(PostError { index: 0, kind: PostErrorKind::BadState });
        }
        let posted = self.ring.post(wrs);
        self.qp.posted_recv_in_err();
        posted
    }

    /// Posts receives of one SGE each, as an iterator of `(wr_id, sge)`:
    /// see [`QueuePair::post_recv_iter`].
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv_iter<'a>(
        &mut self,
        wrs: impl IntoIterator<Item = (u64, Sge<'a>)>,
    ) -> std::result::Result<(), PostError> {
        post_recv_batches(wrs, |batch| self.post_recv(batch))
    }
}

impl QueuePair {
    /// See [`SendQueue::post_send`].
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        self.sq.post_send(wrs)
    }

    /// Posts send requests of one SGE each, as an iterator of
    /// `(request, sge)`: each `request` (built over `&[]`) is posted with
    /// `sge` as its one entry. The batch pattern: a loop collects the
    /// pairs, which own their SGEs (a `Vec<SendWr>` cannot be built that way:
    /// each request would borrow a temporary SGE list, E0716), and one call
    /// posts them. 32 requests per doorbell, gathered on the stack; details
    /// in [`SendQueue::post_send_iter`].
    ///
    /// ```no_run
    /// use rverbs::{MemoryRegion, QueuePair, RemoteMemory, SendWr};
    ///
    /// /// WRITEs 16 slots of 64 bytes of `mr` into the same slots of the
    /// /// peer's memory, every one signaled.
    /// fn write_slots(qp: &mut QueuePair, mr: &MemoryRegion, peer: &RemoteMemory) -> rverbs::Result<()> {
    ///     let mut batch = Vec::with_capacity(16);
    ///     for i in 0..16u64 {
    ///         let to = peer.at(i * 64, 64)?;
    ///         batch.push((SendWr::write(i, &[], to).signaled(), mr.sge(i as usize * 64, 64)?));
    ///     }
    ///     qp.post_send_iter(batch)?; // PostError -> rverbs::Error
    ///     Ok(())
    /// }
    /// ```
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send_iter<'a>(
        &mut self,
        wrs: impl IntoIterator<Item = (SendWr<'a>, Sge<'a>)>,
    ) -> std::result::Result<(), PostError> {
        self.sq.post_send_iter(wrs)
    }

    /// See [`SendQueue::post_send_inline`].
    #[inline]
    pub fn post_send_inline(
        &mut self,
        wr_id: u64,
        op: SendOp,
        flags: SendFlags,
        data: &[u8],
        ud: Option<UdDest<'_>>,
    ) -> std::result::Result<(), PostError> {
        self.sq.post_send_inline(wr_id, op, flags, data, ud)
    }

    /// See [`SendQueue::post_send_unchecked`].
    ///
    /// # Safety
    /// As for [`SendQueue::post_send_unchecked`].
    #[inline]
    pub unsafe fn post_send_unchecked(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded.
        unsafe { self.sq.post_send_unchecked(wrs) }
    }

    /// See [`SendQueue::post_send_one_unchecked`].
    ///
    /// ```no_run
    /// # use rverbs::{AccessFlags, QpInitAttr, QpType, SendFlags, SendOp, SendWr};
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    /// let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE)?;
    /// // ... connect `qp` (INIT, RTR, RTS) ...
    /// let sgl = [mr.sge(0, 64)?];
    /// let wr = SendWr { flags: SendFlags::SIGNALED, ..SendWr::new(7, SendOp::Send, &sgl) };
    /// // SAFETY: not INLINE, so nothing is read through the SGE here.
    /// unsafe { qp.post_send_one_unchecked(&wr) }.map_err(|e| format!("post: {:?}", e.kind))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Safety
    /// As for [`SendQueue::post_send_unchecked`].
    #[doc(alias = "ibv_post_send")]
    #[inline(always)]
    pub unsafe fn post_send_one_unchecked(&mut self, wr: &SendWr<'_>) -> std::result::Result<(), PostError> {
        // SAFETY: forwarded.
        unsafe { self.sq.post_send_one_unchecked(wr) }
    }

    /// See [`RecvQueue::post_recv`]. A QP that receives from an SRQ has no
    /// receive queue: the error is [`PostErrorKind::UsesSrq`]; post to the
    /// SRQ instead.
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), PostError> {
        match &mut self.rq {
            Some(rq) => rq.post_recv(wrs),
            None => Err(PostError { index: 0, kind: PostErrorKind::UsesSrq }),
        }
    }

    /// Posts receives of one SGE each, as an iterator of `(wr_id, sge)`.
    /// The batch pattern: a loop (or a `map`) makes the pairs, which own
    /// their SGEs, and one call posts them all. (A `Vec<RecvWr>` built with
    /// `RecvWr::new(i, &[mr.sge(..)?])` in a loop does not compile, E0716:
    /// each request borrows a temporary SGE list.)
    ///
    /// Posts in batches of 32 gathered on the stack (no allocation, no
    /// syscall: a receive is pure memory); on a refused request the ones
    /// before it are posted, none after it, and the error's index counts
    /// from the first item. A QP that receives from an SRQ has none: post
    /// to the SRQ ([`SharedReceiveQueue::post_recv_iter`]).
    ///
    /// ```no_run
    /// use rverbs::{AccessFlags, QpInitAttr, QpType};
    /// # fn main() -> rverbs::Result<()> {
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(256)?;
    /// let mut init = QpInitAttr::new(QpType::Rc, &cq);
    /// init.cap.max_recv_wr = 128;
    /// let mut qp = pd.create_qp(&init)?;
    /// let mr = pd.alloc_mr(128 * 4096, AccessFlags::LOCAL_WRITE)?;
    /// qp.to_init(&Default::default())?;
    ///
    /// // 128 receives of 4 KiB, wr_id = the slot.
    /// let mut batch = Vec::with_capacity(128);
    /// for slot in 0..128u64 {
    ///     batch.push((slot, mr.sge(slot as usize * 4096, 4096)?));
    /// }
    /// qp.post_recv_iter(batch)?;
    /// // Or without the Vec, when the SGEs cannot fail:
    /// let sges = [mr.sge(0, 4096)?, mr.sge(4096, 4096)?];
    /// qp.post_recv_iter(sges.into_iter().enumerate().map(|(i, s)| (i as u64, s)))?;
    /// # Ok(())
    /// # }
    /// ```
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv_iter<'a>(
        &mut self,
        wrs: impl IntoIterator<Item = (u64, Sge<'a>)>,
    ) -> std::result::Result<(), PostError> {
        match &mut self.rq {
            Some(rq) => rq.post_recv_iter(wrs),
            None => Err(PostError { index: 0, kind: PostErrorKind::UsesSrq }),
        }
    }

    /// The two halves, borrowed, for two threads (e.g. with
    /// `std::thread::scope`): each posts without locks. The receive half is
    /// `None` with an SRQ.
    pub fn split(&mut self) -> (&mut SendQueue, Option<&mut RecvQueue>) {
        (&mut self.sq, self.rq.as_mut())
    }

    /// The two halves, owned and `Send`, for two threads or tasks that
    /// outlive this scope: each posts without locks, and each keeps the QP
    /// alive ([`SendQueue::control`] reaches its control side). The
    /// receive half is `None` with an SRQ.
    ///
    /// ```no_run
    /// # use rverbs::{QpInitAttr, QpType};
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq))?;
    /// let (mut sq, rq) = qp.into_split();
    /// let receiver = std::thread::spawn(move || {
    ///     let mut rq = rq.expect("no SRQ");
    ///     // rq.post_recv(...)
    /// });
    /// // sq.post_send(...)
    /// # Ok::<(), rverbs::Error>(())
    /// ```
    pub fn into_split(self) -> (SendQueue, Option<RecvQueue>) {
        (self.sq, self.rq)
    }
}

impl SharedReceiveQueue {
    /// Posts receives of one SGE each to the SRQ, as an iterator of
    /// `(wr_id, sge)`: the batch pattern of [`QueuePair::post_recv_iter`].
    /// 32 requests per [`post_recv`](Self::post_recv), gathered on the stack.
    ///
    /// ```no_run
    /// use rverbs::{AccessFlags, SrqAttr};
    /// # fn main() -> rverbs::Result<()> {
    /// # let ctx = rverbs::devices()?[0].open()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mut srq = pd.create_srq(&SrqAttr { max_wr: 64, max_sge: 1, srq_limit: 0 })?;
    /// let mr = pd.alloc_mr(64 * 256, AccessFlags::LOCAL_WRITE)?;
    /// let batch = (0..64u64).map(|i| Ok((i, mr.sge(i as usize * 256, 256)?))).collect::<rverbs::Result<Vec<_>>>()?;
    /// srq.post_recv_iter(batch)?;
    /// # Ok(())
    /// # }
    /// ```
    #[doc(alias = "ibv_post_srq_recv")]
    #[inline]
    pub fn post_recv_iter<'a>(
        &mut self,
        wrs: impl IntoIterator<Item = (u64, Sge<'a>)>,
    ) -> std::result::Result<(), PostError> {
        post_recv_batches(wrs, |batch| self.post_recv(batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(i: u64) -> Sge<'static> {
        Sge::new(0x1000 * i, 64, 7)
    }

    /// An SGE list's values, free of its lifetime.
    fn raw(sgl: &[Sge<'_>]) -> Vec<(u64, u32, u32)> {
        sgl.iter().map(|s| (s.addr, s.length, s.lkey)).collect()
    }

    /// Batches of 32 in order, each request with its own SGE; a refusal's
    /// index counts from the first item and nothing after it is posted or
    /// taken from the iterator beyond its batch.
    #[test]
    fn receives_post_in_batches_with_absolute_indices() {
        let mut seen = Vec::new();
        let mut calls = 0;
        post_recv_batches((0..70).map(|i| (i, sge(i))), |wrs| {
            calls += 1;
            seen.extend(wrs.iter().map(|w| (w.wr_id, raw(w.sgl))));
            Ok(())
        })
        .unwrap();
        assert_eq!(calls, 3, "32 + 32 + 6");
        assert_eq!(seen, (0..70).map(|i| (i, raw(&[sge(i)]))).collect::<Vec<_>>());

        let mut taken = 0;
        let items = (0..100).inspect(|_| taken += 1).map(|i| (i, sge(i)));
        let e = post_recv_batches(items, |wrs| match wrs.iter().position(|w| w.wr_id == 40) {
            Some(index) => Err(PostError { index, kind: PostErrorKind::QueueFull }),
            None => Ok(()),
        })
        .unwrap_err();
        assert_eq!(e, PostError { index: 40, kind: PostErrorKind::QueueFull });
        assert_eq!(taken, 64, "the iterator is read one batch at a time");

        let mut calls = 0;
        post_recv_batches(std::iter::empty(), |_| {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(calls, 0, "nothing to post, no post");
    }

    #[test]
    fn sends_take_their_sge_and_keep_the_rest() {
        let mut seen = Vec::new();
        let items = (0..33).map(|i| (SendWr::send(i, &[]).signaled().imm(i as u32), sge(i)));
        post_send_batches(items, |wrs| {
            seen.extend(wrs.iter().map(|w| (w.wr_id, w.op, w.flags, raw(w.sgl))));
            Ok(())
        })
        .unwrap();
        let want: Vec<_> =
            (0..33).map(|i| (i, SendOp::SendWithImm(i as u32), SendFlags::SIGNALED, raw(&[sge(i)]))).collect();
        assert_eq!(seen, want);
        let e = post_send_batches(items_err(), |wrs| {
            Err(PostError { index: wrs.len() - 1, kind: PostErrorKind::BadState })
        })
        .unwrap_err();
        assert_eq!(e.index, 31, "refused in the first batch");
    }

    fn items_err() -> impl Iterator<Item = (SendWr<'static>, Sge<'static>)> {
        (0..40).map(|i| (SendWr::send(i, &[]), sge(i)))
    }
}
