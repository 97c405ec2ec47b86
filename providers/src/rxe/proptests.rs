//! Property tests of what rxe's kernel writes into memory we share with it
//! (issue 32, hostile bytes): the producer and consumer index words of each
//! ring, and the completion entries. The rings are heap queues with the
//! kernel's header (`Queue::new_heap`, the mock kernel's memory); the
//! tests write the index words and CQE bytes the kernel could write, any
//! values, and check that polling returns completions (exactly the entries
//! between our consumer and the kernel's producer, masked), posting
//! returns `Ok` or a queue-full error at the request the indices say, and
//! every loop ends.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use rverbs_uapi::rdma_user_rxe::rxe_queue_buf;

use crate::proptest_config::config;
use crate::rxe::wqe::{self, SendLimits, Transport, CQE_LEN};
use crate::rxe::{CqRing, Doorbell, Queue, RecvRing, SendRing};
use crate::wr::{PostError, PostErrorKind, RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcFlags};
use crate::Errno;

/// Bytes before the element array (`struct rxe_queue_buf`).
const DATA: usize = size_of::<rxe_queue_buf>();

/// The index word at `offset` of `q`'s header, as the kernel sees it.
fn word(q: &Queue, offset: usize) -> &AtomicU32 {
    // SAFETY: element 0 starts DATA bytes after the page-aligned header
    // (`Queue::new_heap`); `offset` is the producer's or the consumer's,
    // 4-aligned inside it. The queue only ever accesses these words
    // atomically, as here.
    unsafe { &*q.elem_ptr(0).sub(DATA).add(offset).cast::<AtomicU32>() }
}

/// Writes raw index words, unmasked, as a hostile kernel could.
fn set_indices(q: &Queue, producer: u32, consumer: u32) {
    word(q, core::mem::offset_of!(rxe_queue_buf, producer_index)).store(producer, Ordering::Release);
    word(q, core::mem::offset_of!(rxe_queue_buf, consumer_index)).store(consumer, Ordering::Release);
}

/// Fills every slot of `q` with bytes from `seed` (xorshift: cheap, so the
/// cases go to the ring code, not to the generator).
fn fill_noise(q: &Queue, mut seed: u64) {
    seed |= 1;
    for i in 0..=q.index_mask() {
        for off in (0..q.elem_size()).step_by(8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // SAFETY: the test owns the heap queue; `off + 8 <= elem_size`
            // (a power of two of at least 64); no ring call is running.
            unsafe { q.elem_ptr(i).add(off).cast::<u64>().write_unaligned(seed) };
        }
    }
}

/// The CQE in slot `i`, decoded as the poll should (`imm_data` to host order).
fn cqe_at(q: &Queue, i: u32) -> Wc {
    // SAFETY: a whole slot of at least CQE_LEN bytes, 8-aligned, of a heap
    // queue no one else writes.
    wqe::decode_cqe(unsafe { wqe::read_cqe(q.elem_ptr(i)) })
}

/// The flags a decoded completion may carry.
fn known_flags() -> WcFlags {
    WcFlags::GRH | WcFlags::WITH_IMM | WcFlags::WITH_INV | WcFlags::IP_CSUM_OK
}

#[derive(Debug, Default)]
struct CountingDoorbell(Cell<u32>);

impl Doorbell for CountingDoorbell {
    fn ring(&self, _qp_handle: u32) -> Result<(), Errno> {
        self.0.set(self.0.get() + 1);
        Ok(())
    }
}

/// Any index word: small values near the ring, wrapped ones, anything.
fn index() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..600, (0u32..600).prop_map(|v| v.wrapping_neg()), any::<u32>()]
}

proptest! {
    #![proptest_config(config())]

    /// Any 48 bytes decode to a completion with known flags only.
    #[test]
    fn any_cqe_bytes_decode(raw in proptest::array::uniform6(any::<u64>())) {
        let mut buf = [0u64; 6];
        buf.copy_from_slice(&raw);
        const { assert!(CQE_LEN == 48) };
        // SAFETY: 48 bytes, 8-aligned.
        let w = unsafe { wqe::read_cqe(buf.as_ptr().cast::<u8>()) };
        let d = wqe::decode_cqe(w);
        prop_assert!(known_flags().contains(d.wc_flags));
        prop_assert_eq!(wqe::decode_cqe_flags(w).wc_flags, d.wc_flags);
        prop_assert!(known_flags().contains(wqe::map_wc_flags(w.wc_flags.bits())));
    }

    /// A CQ whose producer and consumer words hold anything and whose slots
    /// hold noise: each poll returns the entries between the two indices
    /// (masked), as they are decoded, at most `out.len()` of them; the
    /// consumer we publish stays masked; polling again drains the ring in
    /// at most one pass and then finds it empty.
    #[test]
    fn cq_polls_what_the_indices_say(
        log2_slots in 1u32..7,
        log2_elem in 6u32..8,
        producer in index(),
        consumer in index(),
        noise in any::<u64>(),
        want in 0usize..80,
        how in 0u8..3,
    ) {
        let q = Queue::new_heap(1 << log2_slots, log2_elem);
        fill_noise(&q, noise);
        set_indices(&q, producer, consumer);
        let mask = q.index_mask();
        let mut cq = CqRing::new(q);
        let ready = producer.wrapping_sub(consumer) & mask;
        prop_assert_eq!(cq.is_empty(), ready == 0);
        let mut out = vec![Wc::default(); want];
        let n = match how {
            0 => cq.poll(&mut out),
            1 => {
                let uninit = vec![core::mem::MaybeUninit::<Wc>::uninit(); want];
                let mut uninit = uninit;
                let n = cq.poll_uninit_net_imm(&mut uninit);
                for (o, u) in out.iter_mut().zip(&uninit[..n]) {
                    // SAFETY: the first `n` entries were written whole.
                    let mut w = unsafe { u.assume_init() };
                    if w.wc_flags.contains(WcFlags::WITH_IMM) {
                        w.imm_data = u32::from_be(w.imm_data);
                    }
                    *o = w;
                }
                n
            }
            _ => {
                let mut one = core::mem::MaybeUninit::<Wc>::uninit();
                match cq.poll_one_uninit_net_imm(&mut one) {
                    Some(w) if want > 0 => {
                        let mut w = *w;
                        if w.wc_flags.contains(WcFlags::WITH_IMM) {
                            w.imm_data = u32::from_be(w.imm_data);
                        }
                        out[0] = w;
                        1
                    }
                    // Nowhere to put it: consumed, not compared.
                    Some(_) => 1,
                    None => 0,
                }
            }
        };
        let expect = if how == 2 { usize::from(ready != 0) } else { (ready as usize).min(want) };
        prop_assert_eq!(n, expect);
        for (k, w) in out.iter().take(n).enumerate() {
            prop_assert_eq!(*w, cqe_at(cq.queue(), consumer.wrapping_add(k as u32)));
            prop_assert!(known_flags().contains(w.wc_flags));
        }
        let cons = cq.queue().consumer_own();
        if n > 0 {
            prop_assert_eq!(cons, consumer.wrapping_add(n as u32) & mask);
        } else {
            prop_assert_eq!(cons, consumer, "an empty poll publishes nothing");
        }
        // Drain: no hang, and no more than the ring holds.
        let mut more = vec![Wc::default(); 3];
        let mut rounds = 0;
        while cq.poll(&mut more) > 0 {
            rounds += 1;
            prop_assert!(rounds <= mask, "still polling after {} rounds of a {}-slot ring", rounds, mask + 1);
        }
        prop_assert!(cq.is_empty());
    }

    /// A send queue whose kernel-written consumer word (and our own
    /// producer word, scribbled over) hold anything: a post takes exactly
    /// the free slots those indices leave, refuses the rest as QueueFull at
    /// the right index, rings once if it posted, and publishes a masked
    /// producer.
    #[test]
    fn sq_posts_into_the_free_slots_only(
        log2_slots in 1u32..5,
        producer in index(),
        consumer in index(),
        count in 0usize..20,
        one in any::<bool>(),
    ) {
        let lim = SendLimits { transport: Transport::Rc, max_sge: 4, max_inline: 64 };
        let mut s = SendRing::new(Queue::new_heap(1 << log2_slots, 9), lim, CountingDoorbell::default(), 0);
        set_indices(s.queue(), producer, consumer);
        let mask = s.queue().index_mask();
        let free = (mask - (producer.wrapping_sub(consumer) & mask)) as usize;
        let sge = [Sge::new(0x1000, 64, 7)];
        let wrs: Vec<SendWr<'_>> = (0..count)
            .map(|i| SendWr { wr_id: i as u64, op: SendOp::Send, flags: SendFlags::SIGNALED, sgl: &sge, ud: None })
            .collect();
        let got = if one && count == 1 {
            // SAFETY: not INLINE: nothing is read through the SGE.
            unsafe { s.post_one(&wrs[0]) }
        } else {
            // SAFETY: as above.
            unsafe { s.post(&wrs) }
        };
        let posted = count.min(free);
        if count > free {
            prop_assert_eq!(got, Err(PostError { index: free, kind: PostErrorKind::QueueFull }));
        } else {
            prop_assert_eq!(got, Ok(()));
        }
        prop_assert_eq!(s.doorbell().0.get(), u32::from(posted > 0));
        let p = s.queue().producer_own();
        if posted > 0 {
            prop_assert_eq!(p, producer.wrapping_add(posted as u32) & mask);
        } else {
            prop_assert_eq!(p, producer);
        }
    }

    /// The same for a receive queue (its one-SGE short path included).
    #[test]
    fn rq_posts_into_the_free_slots_only(
        log2_slots in 1u32..5,
        producer in index(),
        consumer in index(),
        count in 0usize..20,
        sges in 1usize..3,
    ) {
        let mut r = RecvRing::new(Queue::new_heap(1 << log2_slots, 7), 4);
        set_indices(r.queue(), producer, consumer);
        let mask = r.queue().index_mask();
        let free = (mask - (producer.wrapping_sub(consumer) & mask)) as usize;
        let sgl = [Sge::new(0x2000, 32, 9), Sge::new(0x3000, 32, 9)];
        let wrs: Vec<RecvWr<'_>> = (0..count).map(|i| RecvWr { wr_id: i as u64, sgl: &sgl[..sges] }).collect();
        let got = r.post(&wrs);
        let posted = count.min(free);
        if count > free {
            prop_assert_eq!(got, Err(PostError { index: free, kind: PostErrorKind::QueueFull }));
        } else {
            prop_assert_eq!(got, Ok(()));
        }
        let p = r.queue().producer_own();
        if posted > 0 {
            prop_assert_eq!(p, producer.wrapping_add(posted as u32) & mask);
        } else {
            prop_assert_eq!(p, producer);
        }
    }
}
