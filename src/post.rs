//! Posting work requests: the send and receive halves of a QP.
//!
//! This module may use `unsafe`: it offers the unchecked post whose inline
//! payloads are read through raw SGE addresses, and forwards to the
//! provider's ring code. Every block says why it is sound.
#![allow(unsafe_code)]

use std::sync::atomic::Ordering;

use rverbs_providers::provider::{RecvDriver, SendDriver};

use crate::{PostError, PostErrorKind, QpControl, QpState, QueuePair, RecvWr, SendFlags, SendOp, SendWr, Sge, UdDest};

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
        if self.qp.0.state.load(Ordering::Relaxed) == QpState::Reset as u8 {
            return Err(PostError { index: 0, kind: PostErrorKind::BadState });
        }
        self.ring.post(wrs)
    }
}

impl QueuePair {
    /// See [`SendQueue::post_send`].
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        self.sq.post_send(wrs)
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
