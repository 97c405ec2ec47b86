//! Posting around [`hot`]: receives in a batch (to the SRQ or
//! the one QP's receive queue) and a send, with its payload copied into
//! the WQE when the QP takes it inline.

use rverbs::{MemoryRegion, PostError, QueuePair, RecvWr, SendWr, SharedReceiveQueue};

use super::{hot, lib_err};

/// Posts `wr` `n` times, one per call, to the SRQ or QP 0's receive
/// queue; returns how many went in.
pub fn post_recvs(qps: &mut [QueuePair], srq: &mut Option<SharedReceiveQueue>, wr: &RecvWr<'_>, n: u32) -> u32 {
    for i in 0..n {
        let r = match srq {
            Some(srq) => hot::post_srq_recv(srq, wr),
            None => hot::post_recv(&mut qps[0], wr),
        };
        if r.is_err() {
            return i;
        }
    }
    n
}

/// [`post_recvs`] without an SRQ: `n` receives on `qp`, without testing
/// for the SRQ at every post.
#[inline(always)]
pub fn post_recvs_rq(qp: &mut QueuePair, wr: &RecvWr<'_>, n: u32) -> u32 {
    for i in 0..n {
        if hot::post_recv(qp, wr).is_err() {
            return i;
        }
    }
    n
}

/// Posts the send `wr` on `qp`: as it is, or with its payload (at `off`
/// in `mr`) copied into the WQE when `inline` (through `scratch`).
#[inline(always)]
pub fn send_on(
    qp: &mut QueuePair,
    wr: &SendWr<'_>,
    inline: bool,
    mr: &MemoryRegion,
    off: usize,
    scratch: &mut [u8],
) -> Result<(), String> {
    if !inline {
        return hot::post_send(qp, wr).map_err(send_failed);
    }
    post_send(qp, wr, Some((mr, off, scratch)))
}

#[cold]
fn send_failed(e: PostError) -> String {
    format!("Couldn't post send: {e}")
}

/// Posts the send `wr` on `qp` (its payload copied into the WQE when
/// `inline` holds it: `scratch` takes the bytes).
fn post_send(
    qp: &mut QueuePair,
    wr: &SendWr<'_>,
    inline: Option<(&MemoryRegion, usize, &mut [u8])>,
) -> Result<(), String> {
    let r = match inline {
        None => hot::post_send(qp, wr),
        Some((mr, off, scratch)) => {
            mr.read_at(off, scratch).map_err(lib_err("Couldn't post send"))?;
            qp.post_send_inline(wr.wr_id, wr.op, wr.flags, scratch, wr.ud)
        }
    };
    r.map_err(|e| format!("Couldn't post send: {e}"))
}
