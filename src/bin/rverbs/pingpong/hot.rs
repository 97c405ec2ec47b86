//! The data path, one never-inlined function per verb: each is the
//! library call and nothing else, so a profile shows what each verb costs
//! per call as this program makes it (`cargo xtask bench`, docs/PERFORMANCE.md).
//! The work requests are built once, before the loop.

use rverbs::{
    CompletionChannel, CompletionQueue, CqEvent, PostError, QueuePair, RecvWr, SendWr, SharedReceiveQueue, Wc,
};

/// One send (`ibv_post_send`): the WQE and rxe's doorbell.
#[inline(never)]
pub fn post_send(qp: &mut QueuePair, wr: &SendWr<'_>) -> Result<(), PostError> {
    qp.post_send(std::slice::from_ref(wr))
}

/// One receive (`ibv_post_recv`).
#[inline(never)]
pub fn post_recv(qp: &mut QueuePair, wr: &RecvWr<'_>) -> Result<(), PostError> {
    qp.post_recv(std::slice::from_ref(wr))
}

/// One receive into the SRQ (`ibv_post_srq_recv`).
#[inline(never)]
pub fn post_srq_recv(srq: &mut SharedReceiveQueue, wr: &RecvWr<'_>) -> Result<(), PostError> {
    srq.post_recv(std::slice::from_ref(wr))
}

/// `ibv_poll_cq`.
#[inline(never)]
pub fn poll(cq: &mut CompletionQueue, wcs: &mut [Wc]) -> usize {
    cq.poll(wcs)
}

/// `ibv_req_notify_cq`.
#[inline(never)]
pub fn req_notify(cq: &mut CompletionQueue) -> rverbs::Result<()> {
    cq.req_notify(false)
}

/// `ibv_get_cq_event`: one `read()` of the blocking channel, `EINTR`
/// when the stall alarm interrupted it (the acknowledgement is one call
/// at the end, as in rdma-core's examples).
#[inline(never)]
pub fn get_cq_event(ch: &CompletionChannel) -> rverbs::Result<Option<CqEvent>> {
    ch.read_cq_event()
}
