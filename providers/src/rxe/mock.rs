//! A mock of the *kernel's* side of the rxe rings, for host tests and
//! benchmarks (`cfg(test)` or the `mock` feature; never in a real build).
//!
//! It plays rxe's requester/responder/completer as far as the shared memory
//! goes, following the index protocol of providers.md §A.2 from the other
//! end:
//! - SQ / RQ / SRQ: Acquire-load our producer, read (and decode) the WQEs
//!   between its consumer and that producer, then Release-store its
//!   consumer. Like the kernel, which works on WQEs in place, it then
//!   scribbles over the kernel scratch words of each consumed slot, so a
//!   test sees it if the encoder ever relied on a slot being clean.
//! - CQ: Acquire-load our consumer, write an `ib_uverbs_wc` (with the
//!   *kernel's* `IB_WC_*` flag bits, imm in network order) at its producer
//!   slot, filling the rest of the slot with junk as `ib_wc` would, then
//!   Release-store its producer.
//!
//! Everything goes through [`Queue::elem_ptr`] and the index accessors:
//! the same raw-pointer discipline as the provider itself. The kernel keeps
//! a private copy of the indices it owns; the mock reads them back from the
//! header instead (nobody else writes them in a test).
//!
//! The decoders read every field at the numeric offset of the kernel header
//! (`rdma_user_rxe.h`, providers.md §A.3), independently of `wqe.rs`.

use core::ptr;

use rverbs_uapi::ib_user_verbs::ib_uverbs_wc;

use crate::rxe::wqe::Transport;
use crate::rxe::Queue;
use crate::wr::Sge;

/// Junk the mock leaves in kernel scratch words and CQE slack.
pub const JUNK: u8 = 0xA5;

/// Reads a `T` at byte offset `off` of an element.
///
/// # Safety
/// `p + off .. + size_of::<T>()` lies inside one element of a live queue
/// that the mock (the kernel side) currently owns.
#[inline]
unsafe fn get<T: Copy>(p: *const u8, off: usize) -> T {
    // SAFETY: forwarded from the contract; unaligned because the mock does
    // not assume anything about the encoder's alignment.
    unsafe { ptr::read_unaligned(p.add(off).cast::<T>()) }
}

/// Writes a `T` at byte offset `off` of an element.
///
/// # Safety
/// As [`get`], for writing.
#[inline]
unsafe fn set<T: Copy>(p: *mut u8, off: usize, v: T) {
    // SAFETY: forwarded from the contract.
    unsafe { ptr::write_unaligned(p.add(off).cast::<T>(), v) }
}

/// `rxe_dma_info` header, decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KDma {
    /// `length` (@0).
    pub length: u32,
    /// `resid` (@4).
    pub resid: u32,
    /// `cur_sge` (@8): must be 0 when posted.
    pub cur_sge: u32,
    /// `num_sge` (@12).
    pub num_sge: u32,
    /// `sge_offset` (@16): must be 0 when posted.
    pub sge_offset: u32,
}

/// The `wr.rdma` view (`remote_addr` @24, `rkey` @32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KRdma {
    /// Remote address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// The `wr.atomic` view (@24, @32, @40, @48).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KAtomic {
    /// Remote address.
    pub remote_addr: u64,
    /// `compare_add`.
    pub compare_add: u64,
    /// `swap`.
    pub swap: u64,
    /// Remote key.
    pub rkey: u32,
}

/// The `wr.ud` view (@24, @28, @32, @36).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KUd {
    /// `remote_qpn`.
    pub remote_qpn: u32,
    /// `remote_qkey`.
    pub remote_qkey: u32,
    /// `pkey_index` (u16 @32).
    pub pkey_index: u16,
    /// `ah_num`.
    pub ah_num: u32,
}

/// A send WQE as the kernel reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KSendWqe {
    /// Slot index it was read from.
    pub slot: u32,
    /// `wr.wr_id` (@0).
    pub wr_id: u64,
    /// `wr.reserved` (@8; `num_sge` before 6.1).
    pub reserved: u32,
    /// `wr.opcode` (@12), an `IB_UVERBS_WR_*` value.
    pub opcode: u32,
    /// `wr.send_flags` (@16), `IB_SEND_*` bits.
    pub send_flags: u32,
    /// `wr.ex` (@20) as the kernel's `__be32 imm_data`, turned to host order.
    pub imm: u32,
    /// `wr.ex` (@20) as stored (raw bytes read as a native u32).
    pub ex_raw: u32,
    /// `wr.rdma`, for RDMA WRITE (with imm) and READ.
    pub rdma: Option<KRdma>,
    /// `wr.atomic`, for the two atomics.
    pub atomic: Option<KAtomic>,
    /// `wr.ud`, on a UD QP.
    pub ud: Option<KUd>,
    /// `state` (@148): must be 0 (`wqe_state_posted`).
    pub state: u32,
    /// `iova` (@152).
    pub iova: u64,
    /// `dma` (@184).
    pub dma: KDma,
    /// `dma.sge[..num_sge]` (@208), when not INLINE.
    pub sges: Vec<Sge<'static>>,
    /// `dma.inline_data[..length]` (@208), when INLINE.
    pub inline: Vec<u8>,
}

/// A receive WQE as the kernel reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KRecvWqe {
    /// Slot index it was read from.
    pub slot: u32,
    /// `wr_id` (@0).
    pub wr_id: u64,
    /// `reserved` (@8; `num_sge` before 6.1).
    pub reserved: u32,
    /// `padding` (@12).
    pub padding: u32,
    /// `dma` (@16).
    pub dma: KDma,
    /// `dma.sge[..num_sge]` (@40).
    pub sges: Vec<Sge<'static>>,
}

/// `IB_SEND_INLINE` (kernel value).
const K_SEND_INLINE: u32 = 8;

/// The kernel side of one QP's rings (SQ and RQ/SRQ) and of CQs.
#[derive(Debug, Clone)]
pub struct MockKernel {
    /// QP type: decides whether `wr.ud` is decoded (the kernel knows the QP type).
    pub transport: Transport,
    /// Send WQEs consumed so far.
    pub sends_consumed: u64,
    /// Receive WQEs consumed so far.
    pub recvs_consumed: u64,
    /// CQEs produced so far.
    pub cqes_produced: u64,
}

/// Entries between `cons` and `prod` of a ring with `mask`.
#[inline]
fn used(prod: u32, cons: u32, mask: u32) -> u32 {
    prod.wrapping_sub(cons) & mask
}

impl MockKernel {
    /// A kernel side for a QP of `transport`.
    pub fn new(transport: Transport) -> Self {
        MockKernel { transport, sends_consumed: 0, recvs_consumed: 0, cqes_produced: 0 }
    }

    /// WQEs posted and not yet consumed in a ring we consume (SQ/RQ/SRQ).
    pub fn pending(&self, q: &Queue) -> u32 {
        let prod = q.producer_acquire();
        let cons = q.consumer_own();
        assert!(prod <= q.index_mask(), "user producer index {prod} not masked");
        used(prod, cons, q.index_mask())
    }

    /// Free entries in a ring we produce into (CQ): one slot always stays empty.
    pub fn cq_free(&self, cq: &Queue) -> u32 {
        let prod = cq.producer_own();
        let cons = cq.consumer_acquire();
        assert!(cons <= cq.index_mask(), "user consumer index {cons} not masked");
        cq.index_mask() - used(prod, cons, cq.index_mask())
    }

    /// Consumes up to `max` send WQEs, decoding each, and publishes the new
    /// consumer index (Release). Panics if a WQE claims more SGEs or inline
    /// bytes than its slot holds.
    pub fn consume_send(&mut self, sq: &Queue, max: usize) -> Vec<KSendWqe> {
        let mask = sq.index_mask();
        // Acquire: pairs with the provider's Release store of the producer;
        // the WQEs below are complete.
        let prod = sq.producer_acquire();
        let mut cons = sq.consumer_own();
        let mut out = Vec::new();
        while cons != prod && out.len() < max {
            let p = sq.elem_ptr(cons);
            out.push(self.decode_send(p, sq.elem_size(), cons));
            // These are the scratch words the kernel updates in place (status,
            // state, mask, psns, ack_length, ssn, has_rd_atomic, cur_sge, sge_offset).
            // SAFETY: the slot is between the consumer and the producer we loaded
            // (the kernel's until the consumer passes it); all inside the 208-byte header.
            unsafe {
                for off in [144usize, 148, 160, 164, 168, 172, 176, 180, 184 + 8, 184 + 16] {
                    set(p, off, u32::from_ne_bytes([JUNK; 4]));
                }
            }
            cons = (cons + 1) & mask;
        }
        self.sends_consumed += out.len() as u64;
        // Release: our reads of the slots are done before the provider reuses them.
        sq.publish_consumer(cons);
        out
    }

    /// Consumes up to `max` send WQEs without decoding them (benchmarks).
    #[cfg_attr(not(feature = "mock"), allow(dead_code))]
    pub fn discard_send(&mut self, sq: &Queue, max: u32) -> u32 {
        let n = self.pending(sq).min(max);
        sq.publish_consumer(sq.consumer_own().wrapping_add(n));
        self.sends_consumed += u64::from(n);
        n
    }

    fn decode_send(&self, p: *const u8, elem: usize, slot: u32) -> KSendWqe {
        // SAFETY: `p` is a whole slot of `elem` (>= 208, checked) bytes the
        // kernel side owns (caller); every offset below is inside the
        // 208-byte header, and the tail reads are bounded by `elem`.
        unsafe {
            assert!(elem >= 208, "send slot of {elem} bytes is smaller than rxe_send_wqe");
            let opcode: u32 = get(p, 12);
            let send_flags: u32 = get(p, 16);
            let ex_raw: u32 = get(p, 20);
            let rdma = matches!(opcode, 0 | 1 | 4).then(|| KRdma { remote_addr: get(p, 24), rkey: get(p, 32) });
            let atomic = matches!(opcode, 5 | 6).then(|| KAtomic {
                remote_addr: get(p, 24),
                compare_add: get(p, 32),
                swap: get(p, 40),
                rkey: get(p, 48),
            });
            let ud = (self.transport == Transport::Ud).then(|| KUd {
                remote_qpn: get(p, 24),
                remote_qkey: get(p, 28),
                pkey_index: get(p, 32),
                ah_num: get(p, 36),
            });
            let dma = KDma {
                length: get(p, 184),
                resid: get(p, 188),
                cur_sge: get(p, 192),
                num_sge: get(p, 196),
                sge_offset: get(p, 200),
            };
            let room = elem - 208;
            let mut sges = Vec::new();
            let mut inline = Vec::new();
            if send_flags & K_SEND_INLINE != 0 {
                let n = dma.length as usize;
                assert!(n <= room, "inline length {n} overruns the {elem}-byte slot");
                inline.extend_from_slice(core::slice::from_raw_parts(p.add(208), n));
            } else {
                let n = dma.num_sge as usize;
                assert!(n * 16 <= room, "{n} SGEs overrun the {elem}-byte slot");
                for i in 0..n {
                    let at = 208 + 16 * i;
                    sges.push(Sge::new(get(p, at), get(p, at + 8), get(p, at + 12)));
                }
            }
            KSendWqe {
                slot,
                wr_id: get(p, 0),
                reserved: get(p, 8),
                opcode,
                send_flags,
                imm: u32::from_be_bytes(ex_raw.to_ne_bytes()),
                ex_raw,
                rdma,
                atomic,
                ud,
                state: get(p, 148),
                iova: get(p, 152),
                dma,
                sges,
                inline,
            }
        }
    }

    /// Consumes up to `max` receive WQEs from an RQ or SRQ, decoding each,
    /// and publishes the new consumer index (Release).
    pub fn consume_recv(&mut self, rq: &Queue, max: usize) -> Vec<KRecvWqe> {
        let mask = rq.index_mask();
        // Acquire: pairs with the provider's Release store of the producer.
        let prod = rq.producer_acquire();
        let mut cons = rq.consumer_own();
        let mut out = Vec::new();
        let elem = rq.elem_size();
        assert!(elem >= 40, "receive slot of {elem} bytes is smaller than rxe_recv_wqe");
        while cons != prod && out.len() < max {
            let p = rq.elem_ptr(cons);
            // SAFETY: a whole slot of `elem` bytes owned by the kernel side
            // (between consumer and the Acquire-loaded producer); header
            // offsets are < 40 and the SGE reads are bounded by `elem`.
            let w = unsafe {
                let dma = KDma {
                    length: get(p, 16),
                    resid: get(p, 20),
                    cur_sge: get(p, 24),
                    num_sge: get(p, 28),
                    sge_offset: get(p, 32),
                };
                let n = dma.num_sge as usize;
                assert!(40 + n * 16 <= elem, "{n} SGEs overrun the {elem}-byte slot");
                let sges = (0..n)
                    .map(|i| {
                        let at = 40 + 16 * i;
                        Sge::new(get(p, at), get(p, at + 8), get(p, at + 12))
                    })
                    .collect();
                KRecvWqe { slot: cons, wr_id: get(p, 0), reserved: get(p, 8), padding: get(p, 12), dma, sges }
            };
            // SAFETY: same slot, still ours; the responder moves the dma
            // cursors (cur_sge @24, sge_offset @32) in place.
            unsafe {
                set(p, 24, u32::from_ne_bytes([JUNK; 4]));
                set(p, 32, u32::from_ne_bytes([JUNK; 4]));
            }
            out.push(w);
            cons = (cons + 1) & mask;
        }
        self.recvs_consumed += out.len() as u64;
        // Release: the reads above are done before the provider reuses the slots.
        rq.publish_consumer(cons);
        out
    }

    /// Writes one CQE (kernel layout and flag bits) at the CQ producer and
    /// publishes it (Release). Returns false, writing nothing, if the CQ is
    /// full (the kernel then raises `IB_EVENT_CQ_ERR`).
    pub fn produce_cqe(&mut self, cq: &Queue, wc: &ib_uverbs_wc) -> bool {
        let elem = cq.elem_size();
        assert!(elem >= 48, "CQ slot of {elem} bytes is smaller than ib_uverbs_wc");
        if self.cq_free(cq) == 0 {
            return false;
        }
        let prod = cq.producer_own();
        let p = cq.elem_ptr(prod);
        // The kernel's `rxe_cqe` is a union with the larger `ib_wc`; junk
        // stands for its tail.
        // SAFETY: the slot at the producer is free (the provider finished copying
        // it: consumer loaded with Acquire in `cq_free`), whole, `elem` bytes, 8-aligned.
        unsafe {
            ptr::write_bytes(p, JUNK, elem);
            ptr::write(p.cast::<ib_uverbs_wc>(), *wc);
        }
        // Release: the CQE is written before the provider sees the index.
        cq.publish_producer((prod + 1) & cq.index_mask());
        self.cqes_produced += 1;
        true
    }

    /// Produces CQEs for `wr_ids` (successful, `opcode`, `byte_len`), as many
    /// as fit; returns how many.
    pub fn complete(&mut self, cq: &Queue, qp_num: u32, opcode: u32, wr_ids: &[(u64, u32)]) -> usize {
        let mut n = 0;
        for &(wr_id, byte_len) in wr_ids {
            let wc = ib_uverbs_wc { wr_id, opcode, byte_len, qp_num, ..Default::default() };
            if !self.produce_cqe(cq, &wc) {
                break;
            }
            n += 1;
        }
        n
    }
}

/// A completion the kernel would write for a receive: `IB_WC_GRH` always
/// (RoCE), `IB_WC_WITH_IMM` with the immediate in network order if `imm`.
pub fn recv_cqe(wr_id: u64, qp_num: u32, byte_len: u32, imm: Option<u32>) -> ib_uverbs_wc {
    const IB_WC_RECV: u32 = 128;
    let mut wc =
        ib_uverbs_wc { wr_id, opcode: IB_WC_RECV, byte_len, qp_num, wc_flags: 1, port_num: 1, ..Default::default() };
    if let Some(i) = imm {
        wc.wc_flags |= 2;
        wc.ex = u32::from_ne_bytes(i.to_be_bytes());
    }
    wc
}
