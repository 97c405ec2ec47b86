//! Host tests of the siw fast path: golden entry bytes built by hand from
//! the offsets of rdmacm.md §B.3, and ring behaviour against the mock of
//! the kernel side (`siw::mock`).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;

use crate::siw::datapath::{CqRing, Doorbell, RecvQueue, SendQueue};
use crate::siw::flush::QpRings;
use crate::siw::mock::{recv_cqe, send_cqe, MockCq, MockRq, MockSq};
use crate::siw::ring::Ring;
use crate::siw::wqe::{self, RawCqe, SendLimits, RQE_LEN, SQE_LEN, UNKNOWN_OPCODE};
use crate::wr::{
    MwBind, PostError, PostErrorKind, RecvWr, RemoteAddr, SendOp, SendWr, Sge, UdDest, Wc, WcFlags, WcOpcode, WcStatus,
};
use crate::Errno;

// ---------------------------------------------------------------------------
// Fixtures.

/// A doorbell that counts its rings, remembers the QP handle it was rung
/// for, and fails while `fail` is set.
#[derive(Debug, Default)]
struct TestDoorbell {
    rings: Cell<u32>,
    qp_handle: Cell<Option<u32>>,
    fail: Cell<Option<Errno>>,
}

impl Doorbell for TestDoorbell {
    fn ring(&self, qp_handle: u32) -> Result<(), Errno> {
        self.rings.set(self.rings.get() + 1);
        self.qp_handle.set(Some(qp_handle));
        self.fail.get().map_or(Ok(()), Err)
    }
}

/// The kernel handle of the QP whose send queue [`sq`] makes.
const SQ_HANDLE: u32 = 7;

const LIM: SendLimits = SendLimits { max_sge: 6, max_inline: 80, sig_all: false };

fn sq(slots: u32) -> SendQueue<TestDoorbell> {
    SendQueue::new(Ring::new_heap(slots, 0), LIM, TestDoorbell::default(), SQ_HANDLE)
}

fn rq(slots: u32) -> RecvQueue {
    RecvQueue::new(Ring::new_heap(slots, 0), 6)
}

fn cq(slots: u32) -> CqRing {
    CqRing::new(Ring::new_heap(slots, 8))
}

fn rings(q: &SendQueue<TestDoorbell>) -> u32 {
    q.doorbell().rings.get()
}

/// The bytes of entry `i` of a heap ring.
fn entry<const N: usize>(r: &Ring<N>, i: u32) -> Vec<u8> {
    // SAFETY: a whole entry of a heap ring the test owns; no one writes it now.
    (0..N).map(|b| unsafe { r.slot(i).add(b).read() }).collect()
}

fn put_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}
/// A `siw_sge` at `off`: laddr @0, length @8, lkey @12.
fn put_sge(b: &mut [u8], off: usize, s: Sge) {
    put_u64(b, off, s.addr);
    put_u32(b, off + 8, s.length);
    put_u32(b, off + 12, s.lkey);
}

const SGE_A: Sge<'static> = Sge::new(0x0000_7f00_1234_5000, 0x1000, 0x0102_0304);
const SGE_B: Sge<'static> = Sge::new(0x0000_7f00_dead_0008, 0x20, 0x0a0b_0c0d);
const REMOTE: RemoteAddr = RemoteAddr { addr: 0x0000_5555_aaaa_0010, rkey: 0x8765_4321 };

/// Posts `wrs` into an empty 4-entry SQ and returns entry 0's bytes.
fn encode(wrs: &[SendWr<'_>], lim: SendLimits) -> Vec<u8> {
    let mut q = SendQueue::new(Ring::new_heap(4, 0), lim, TestDoorbell::default(), 0);
    // SAFETY: INLINE requests in these tests point at live local arrays.
    unsafe { q.post(wrs) }.expect("valid request");
    entry(q.ring(), 0)
}

// ---------------------------------------------------------------------------
// Golden entries.

#[test]
fn golden_send() {
    let sgl = [SGE_A, SGE_B];
    let wr = SendWr::send(0x1122_3344_5566_7788, &sgl).signaled().solicited();
    let mut want = vec![0u8; SQE_LEN];
    put_u64(&mut want, 0, 0x1122_3344_5566_7788);
    put_u16(&mut want, 8, 1 | 4 | 8); // VALID | SIGNALLED | SOLICITED
    want[10] = 2; // num_sge
    want[11] = 3; // SIW_OP_SEND
    put_sge(&mut want, 24, SGE_A);
    put_sge(&mut want, 40, SGE_B);
    assert_eq!(encode(&[wr], LIM), want);
}

#[test]
fn golden_write_and_read() {
    let sgl = [SGE_B];
    let wr = SendWr::write(9, &sgl, REMOTE).fence();
    let mut want = vec![0u8; SQE_LEN];
    put_u64(&mut want, 0, 9);
    put_u16(&mut want, 8, 1 | 16); // VALID | READ_FENCE
    want[10] = 1;
    want[11] = 0; // SIW_OP_WRITE
    put_u32(&mut want, 12, REMOTE.rkey);
    put_u64(&mut want, 16, REMOTE.addr);
    put_sge(&mut want, 24, SGE_B);
    assert_eq!(encode(&[wr], LIM), want);

    let sgl = [SGE_A];
    let wr = SendWr::read(10, &sgl, REMOTE).signaled();
    let mut want = vec![0u8; SQE_LEN];
    put_u64(&mut want, 0, 10);
    put_u16(&mut want, 8, 1 | 4);
    want[10] = 1;
    want[11] = 1; // SIW_OP_READ
    put_u32(&mut want, 12, REMOTE.rkey);
    put_u64(&mut want, 16, REMOTE.addr);
    put_sge(&mut want, 24, SGE_A);
    assert_eq!(encode(&[wr], LIM), want);
}

#[test]
fn golden_send_with_inv_and_sig_all() {
    let sgl = [SGE_A];
    let wr = SendWr::send_inv(11, &sgl, 0x00ab_cd07);
    let mut want = vec![0u8; SQE_LEN];
    put_u64(&mut want, 0, 11);
    put_u16(&mut want, 8, 1 | 4); // sq_sig_all signals it
    want[10] = 1;
    want[11] = 5; // SIW_OP_SEND_REMOTE_INV
    put_u32(&mut want, 12, 0x00ab_cd07);
    put_sge(&mut want, 24, SGE_A);
    assert_eq!(encode(&[wr], SendLimits { sig_all: true, ..LIM }), want);
}

/// Inline: the bytes of every SGE of non-zero length, concatenated at byte
/// 40 (where `sge[1]` is), their count in `sge[0].length`; more SGEs than
/// `max_sge` are fine (they are copied now).
#[test]
fn golden_inline() {
    let a: [u8; 5] = *b"hello";
    let b = [0xeeu8; 75];
    let sgl = [
        Sge::new(a.as_ptr() as u64, 5, 0),
        Sge::new(0xdead_0000, 0, 0), // skipped: never read
        Sge::new(b.as_ptr() as u64, 75, 7),
    ];
    let wr = SendWr::write(12, &sgl, REMOTE).inline().signaled();
    let mut want = vec![0u8; SQE_LEN];
    put_u64(&mut want, 0, 12);
    put_u16(&mut want, 8, 1 | 2 | 4); // VALID | INLINE | SIGNALLED
    want[10] = 1;
    want[11] = 0;
    put_u32(&mut want, 12, REMOTE.rkey);
    put_u64(&mut want, 16, REMOTE.addr);
    put_u32(&mut want, 32, 80);
    want[40..45].copy_from_slice(&a);
    want[45..120].copy_from_slice(&b);
    assert_eq!(encode(&[wr], SendLimits { max_sge: 1, ..LIM }), want);
}

/// A zero-length READ (the kernel allows it) still gets a `sge[0]`, of
/// length 0, over whatever the entry held; an empty inline SEND has no SGE.
#[test]
fn golden_empty_requests() {
    let mut q = SendQueue::new(Ring::new_heap(2, 0), LIM, TestDoorbell::default(), 0);
    // SAFETY: the ring is the test's; no one else touches entry 0 now.
    unsafe { q.ring().slot(0).add(24).write_bytes(0xee, 16) };
    // SAFETY: not INLINE; the inline request has no bytes to read.
    unsafe { q.post(&[SendWr::read(1, &[], REMOTE), SendWr::send(2, &[]).inline()]) }.unwrap();
    let mut want = vec![0u8; SQE_LEN];
    put_u64(&mut want, 0, 1);
    put_u16(&mut want, 8, 1);
    want[11] = 1; // SIW_OP_READ, num_sge 0
    put_u32(&mut want, 12, REMOTE.rkey);
    put_u64(&mut want, 16, REMOTE.addr);
    assert_eq!(entry(q.ring(), 0), want);
    let mut want = vec![0u8; SQE_LEN];
    put_u64(&mut want, 0, 2);
    put_u16(&mut want, 8, 1 | 2);
    want[11] = 3; // SIW_OP_SEND, num_sge 0, sge[0].length 0
    assert_eq!(entry(q.ring(), 1), want);
}

#[test]
fn golden_recv() {
    let mut q = rq(4);
    let sgl = [SGE_A, SGE_B];
    q.post(&[RecvWr::new(0x77, &sgl)]).unwrap();
    let mut want = vec![0u8; RQE_LEN];
    put_u64(&mut want, 0, 0x77);
    put_u16(&mut want, 8, 1); // exactly VALID
    want[10] = 2;
    put_sge(&mut want, 16, SGE_A);
    put_sge(&mut want, 32, SGE_B);
    assert_eq!(entry(q.ring(), 0), want);
}

// ---------------------------------------------------------------------------
// What siw refuses.

#[test]
fn refused_requests() {
    let one = [SGE_A];
    let seven = [SGE_A; 7];
    let two = [SGE_A, SGE_B];
    let word = [Sge::new(0x1000, 8, 1)];
    let big = [Sge::new(0x1000, u32::MAX, 1), Sge::new(0x2000, 1, 1)];
    let long = [Sge::new(0x1000, 81, 0)];
    let bind = MwBind { mw_rkey: 1, new_rkey: 2, mr_lkey: 3, addr: 0, length: 8, access: 0 };
    let cases: Vec<(SendWr<'_>, PostErrorKind)> = vec![
        (SendWr::send(1, &one).imm(5), PostErrorKind::OpcodeNotSupported),
        (SendWr::write(1, &one, REMOTE).imm(5), PostErrorKind::OpcodeNotSupported),
        (SendWr::compare_swap(1, &word, REMOTE, 1, 2), PostErrorKind::OpcodeNotSupported),
        (SendWr::fetch_add(1, &word, REMOTE, 1), PostErrorKind::OpcodeNotSupported),
        (SendWr::local_inv(1, 9), PostErrorKind::OpcodeNotSupported),
        (SendWr::bind_mw(1, bind), PostErrorKind::OpcodeNotSupported),
        (SendWr::new(1, SendOp::AtomicWrite { remote: REMOTE, value: [0; 8] }, &[]), PostErrorKind::OpcodeNotSupported),
        (SendWr::send(1, &one).to(UdDest::new(1, 2, 3)), PostErrorKind::BadDestination),
        (SendWr::send(1, &seven), PostErrorKind::TooManySge { given: 7, max: 6 }),
        (SendWr::read(1, &two, REMOTE), PostErrorKind::TooManySge { given: 2, max: 1 }),
        (SendWr::read(1, &one, REMOTE).fence(), PostErrorKind::OpcodeNotSupported),
        (SendWr::read(1, &one, REMOTE).inline(), PostErrorKind::OpcodeNotSupported),
        (SendWr::send_inv(1, &one, 4).inline(), PostErrorKind::OpcodeNotSupported),
        (SendWr::send(1, &big), PostErrorKind::TooLong),
        (SendWr::send(1, &long).inline(), PostErrorKind::InlineTooLong { given: 81, max: 80 }),
    ];
    for (wr, kind) in cases {
        let mut q = sq(4);
        // A good request, then the bad one, then a good one: the first is
        // posted (and rung for), the error names the second, the third is
        // not posted.
        let batch = [SendWr::send(0, &one), wr, SendWr::send(2, &one)];
        // SAFETY: the only INLINE requests name memory never read: they are
        // refused before their bytes are copied.
        let got = unsafe { q.post(&batch) };
        assert_eq!(got, Err(PostError { index: 1, kind }), "{:?}", wr.op);
        assert_eq!(rings(&q), 1);
        let k = MockSq::default().take(q.ring(), 4);
        assert_eq!(k.iter().map(|k| k.id).collect::<Vec<_>>(), [0], "{:?}", wr.op);
    }
}

#[test]
fn limits_are_clamped_and_checked() {
    let q = SendQueue::new(Ring::new_heap(2, 0), SendLimits { max_sge: 30, max_inline: 1000, sig_all: false }, (), 0);
    assert_eq!(q.limits(), LIM);
    let mut q = SendQueue::new(Ring::new_heap(2, 0), SendLimits { max_sge: 2, max_inline: 10, ..LIM }, (), 0);
    let three = [SGE_A; 3];
    // SAFETY: not INLINE.
    let e = unsafe { q.post(&[SendWr::send(1, &three)]) }.unwrap_err();
    assert_eq!(e.kind, PostErrorKind::TooManySge { given: 3, max: 2 });
    let eleven = [0u8; 11];
    let sgl = [Sge::new(eleven.as_ptr() as u64, 11, 0)];
    // SAFETY: the SGE names a live local array (refused before it is read).
    let e = unsafe { q.post(&[SendWr::send(1, &sgl).inline()]) }.unwrap_err();
    assert_eq!(e.kind, PostErrorKind::InlineTooLong { given: 11, max: 10 });
    let mut r = RecvQueue::new(Ring::new_heap(2, 0), 9);
    assert_eq!(r.max_sge(), 6);
    let seven = [SGE_A; 7];
    assert_eq!(
        r.post(&[RecvWr::new(1, &seven)]),
        Err(PostError { index: 0, kind: PostErrorKind::TooManySge { given: 7, max: 6 } })
    );
    let big = [Sge::new(0, u32::MAX, 1), Sge::new(0, 1, 1)];
    assert_eq!(r.post(&[RecvWr::new(1, &big)]), Err(PostError { index: 0, kind: PostErrorKind::TooLong }));
}

impl Doorbell for () {
    fn ring(&self, _qp_handle: u32) -> Result<(), Errno> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Round trips through the mock kernel.

#[test]
fn send_round_trip() {
    let mut q = sq(8);
    let mut c = cq(8);
    let (mut ksq, mut kcq) = (MockSq::default(), MockCq::default());
    let sgl = [SGE_A];
    let rsgl = [SGE_B];
    let wrs = [SendWr::send(1, &sgl).signaled(), SendWr::write(2, &sgl, REMOTE), SendWr::read(3, &rsgl, REMOTE)];
    // SAFETY: not INLINE.
    unsafe { q.post(&wrs) }.unwrap();
    let took = ksq.take(q.ring(), 8);
    assert_eq!(took.len(), 3);
    assert_eq!((took[0].opcode, took[1].opcode, took[2].opcode), (3, 0, 1));
    assert_eq!(took[1].rkey, REMOTE.rkey);
    assert_eq!(took[2].raddr, REMOTE.addr);
    assert_eq!(took[0].sges, sgl);
    for k in &took {
        assert!(kcq.complete(c.ring(), &send_cqe(k, 0x0001_0042, 0), false));
    }
    let mut out = [Wc::default(); 4];
    assert_eq!(c.poll(&mut out), 3);
    let expect = |wr_id, opcode, byte_len| Wc { wr_id, opcode, byte_len, qp_num: 0x0001_0042, ..Wc::default() };
    assert_eq!(out[0], expect(1, WcOpcode::SEND, 0x1000));
    assert_eq!(out[1], expect(2, WcOpcode::RDMA_WRITE, 0x1000));
    assert_eq!(out[2], expect(3, WcOpcode::RDMA_READ, 0x20));
    assert_eq!(c.poll(&mut out), 0);
    assert!(c.is_empty());
}

#[test]
fn recv_round_trip_qp_and_srq() {
    for srq in [false, true] {
        let mut q = rq(4);
        let mut c = cq(4);
        let (mut krq, mut kcq) = (MockRq::default(), MockCq::default());
        let sgl = [SGE_A, SGE_B];
        q.post(&[RecvWr::new(7, &sgl), RecvWr::new(8, &sgl[..1])]).unwrap();
        let took = krq.take(q.ring(), 1);
        assert_eq!((took[0].id, &took[0].sges[..]), (7, &sgl[..]), "srq {srq}");
        assert!(kcq.complete(c.ring(), &recv_cqe(&took[0], 5, 100, 0), false));
        let mut w = [Wc::default()];
        assert_eq!(c.poll(&mut w), 1);
        assert_eq!(w[0], Wc { wr_id: 7, opcode: WcOpcode::RECV, byte_len: 100, qp_num: 5, ..Wc::default() });
        assert!(w[0].opcode.is_recv() && w[0].wc_flags == WcFlags::empty());
        assert_eq!(krq.take(q.ring(), 4).iter().map(|k| k.id).collect::<Vec<_>>(), [8]);
    }
}

/// Free-running counters across the `u32` wrap, on rings of 1, 2 and 4
/// entries: every request comes out once, in order, at the entry its
/// counter names.
#[test]
fn ring_wrap_around() {
    for slots in [1u32, 2, 4] {
        let start = u32::MAX - 2 * slots;
        let mut q = sq(slots).starting_at(start);
        let mut r = rq(slots).starting_at(start);
        let mut c = cq(slots).starting_at(start);
        let (mut ksq, mut krq, mut kcq) = (MockSq::at(start), MockRq::at(start), MockCq::at(start));
        let sgl = [SGE_A];
        for i in 0..(5 * slots as u64 + 3) {
            // SAFETY: not INLINE.
            unsafe { q.post(&[SendWr::send(i, &sgl).signaled()]) }.unwrap();
            r.post(&[RecvWr::new(i, &sgl)]).unwrap();
            let s = ksq.take(q.ring(), 8);
            let v = krq.take(r.ring(), 8);
            assert_eq!((s.len(), v.len()), (1, 1));
            assert_eq!((s[0].id, v[0].id), (i, i));
            assert_eq!(s[0].at, start.wrapping_add(i as u32));
            assert!(kcq.complete(c.ring(), &send_cqe(&s[0], 1, 0), false));
            let mut w = [Wc::default(); 2];
            assert_eq!(c.poll(&mut w), 1, "slots {slots}, request {i}");
            assert_eq!(w[0].wr_id, i);
        }
    }
}

#[test]
fn full_send_queue() {
    let mut q = sq(4);
    let sgl = [SGE_A];
    let wrs: Vec<_> = (0..5).map(|i| SendWr::send(i, &sgl)).collect();
    // SAFETY: not INLINE.
    let e = unsafe { q.post(&wrs) }.unwrap_err();
    assert_eq!(e, PostError { index: 4, kind: PostErrorKind::QueueFull });
    // SAFETY: not INLINE.
    assert_eq!(unsafe { q.post(&wrs[..1]) }.unwrap_err(), PostError { index: 0, kind: PostErrorKind::QueueFull });
    // The kernel takes one (at the start of the request, before it
    // completes): its entry is free again.
    let mut k = MockSq::default();
    assert_eq!(k.take(q.ring(), 1).len(), 1);
    // SAFETY: not INLINE.
    unsafe { q.post(&wrs[..1]) }.unwrap();
    assert_eq!(k.take(q.ring(), 8).iter().map(|k| k.id).collect::<Vec<_>>(), [1, 2, 3, 0]);
}

#[test]
fn full_recv_queue() {
    let mut q = rq(2);
    let sgl = [SGE_A];
    let wrs = [RecvWr::new(1, &sgl), RecvWr::new(2, &sgl), RecvWr::new(3, &sgl)];
    assert_eq!(q.post(&wrs), Err(PostError { index: 2, kind: PostErrorKind::QueueFull }));
    let mut k = MockRq::default();
    assert_eq!(k.take(q.ring(), 1).len(), 1);
    q.post(&wrs[2..]).unwrap();
    assert_eq!(k.take(q.ring(), 8).iter().map(|k| k.id).collect::<Vec<_>>(), [2, 3]);
}

#[test]
fn full_cq() {
    let mut c = cq(2);
    let mut k = MockCq::default();
    let cqe = |id| RawCqe { id, opcode: 3, ..RawCqe::default() };
    assert!(k.complete(c.ring(), &cqe(1), false));
    assert!(k.complete(c.ring(), &cqe(2), false));
    assert!(!k.complete(c.ring(), &cqe(3), false), "full: the kernel raises CQ_ERR");
    assert_eq!(k.overflows, 1);
    let mut w = [Wc::default()];
    assert_eq!(c.poll(&mut w), 1);
    assert!(k.complete(c.ring(), &cqe(3), false));
    let mut w = [Wc::default(); 3];
    assert_eq!(c.poll(&mut w), 2);
    assert_eq!((w[0].wr_id, w[1].wr_id), (2, 3));
}

/// `poll` takes no more than `out` holds, and `poll_uninit` writes whole
/// entries only; an empty `out` consumes nothing.
#[test]
fn poll_sizes() {
    let mut c = cq(8);
    let mut k = MockCq::default();
    for id in 0..5 {
        assert!(k.complete(c.ring(), &RawCqe { id, opcode: 8, ..RawCqe::default() }, false));
    }
    assert_eq!(c.poll(&mut []), 0);
    let mut two = [Wc::default(); 2];
    assert_eq!(c.poll(&mut two), 2);
    let mut out = [std::mem::MaybeUninit::<Wc>::uninit(); 8];
    assert_eq!(c.poll_uninit(&mut out), 3);
    // SAFETY: `poll_uninit` wrote the first three whole.
    let ids: Vec<u64> = out[..3].iter().map(|w| unsafe { w.assume_init() }.wr_id).collect();
    assert_eq!(ids, [2, 3, 4]);
    assert!(c.is_empty());
}

// ---------------------------------------------------------------------------
// The doorbell rule (rdmacm.md §B.4).

#[test]
fn doorbell_rings_only_when_the_kernel_may_be_idle() {
    let mut q = sq(4);
    let mut k = MockSq::default();
    let sgl = [SGE_A];
    let one = |i| [SendWr::send(i, &sgl)];
    // SAFETY: not INLINE.
    unsafe { q.post(&one(0)) }.unwrap();
    assert_eq!(rings(&q), 1, "the entry before the first is not VALID: ring");
    assert_eq!(q.doorbell().qp_handle.get(), Some(SQ_HANDLE), "for the queue's QP");
    // SAFETY: not INLINE.
    unsafe { q.post(&one(1)) }.unwrap();
    assert_eq!(rings(&q), 1, "the previous entry is still VALID: the kernel will get to this one");
    assert_eq!(k.take(q.ring(), 8).len(), 2);
    // SAFETY: not INLINE.
    unsafe { q.post(&one(2)) }.unwrap();
    assert_eq!(rings(&q), 2, "the kernel took everything: it may be idle");
    assert_eq!(k.take(q.ring(), 8).len(), 1);
    // A batch that rewrites the whole ring rings, though the entry before
    // it (its own last) is VALID.
    let four: Vec<_> = (10..14).map(|i| SendWr::send(i, &sgl)).collect();
    // SAFETY: not INLINE.
    unsafe { q.post(&four) }.unwrap();
    assert_eq!(rings(&q), 3);
    // Nothing posted, nothing rung.
    // SAFETY: no request.
    unsafe { q.post(&[]) }.unwrap();
    assert_eq!(rings(&q), 3);
}

#[test]
fn failed_doorbell_is_reported_and_rung_again() {
    let mut q = sq(8);
    let sgl = [SGE_A];
    q.doorbell().fail.set(Some(Errno::ENOTCONN));
    let wrs = [SendWr::send(0, &sgl), SendWr::send(1, &sgl)];
    // SAFETY: not INLINE.
    let e = unsafe { q.post(&wrs) }.unwrap_err();
    assert_eq!(e, PostError { index: 2, kind: PostErrorKind::Doorbell(Errno::ENOTCONN as i32) });
    assert!(e.to_string().contains("doorbell"), "{e}");
    // The entries stay posted (VALID) and the kernel never took them: the
    // next post rings although the entry before it is VALID.
    q.doorbell().fail.set(None);
    // SAFETY: not INLINE.
    unsafe { q.post(&wrs[..1]) }.unwrap();
    assert_eq!(rings(&q), 2);
    // SAFETY: not INLINE.
    unsafe { q.post(&wrs[..1]) }.unwrap();
    assert_eq!(rings(&q), 2, "rung once: the debt is paid");
    assert_eq!(MockSq::default().take(q.ring(), 8).len(), 4);
}

/// A refused request after some good ones: the doorbell rings for those,
/// and a failing doorbell's error wins (it says how many went in).
#[test]
fn refusal_and_doorbell_failure_together() {
    let mut q = sq(8);
    let sgl = [SGE_A];
    q.doorbell().fail.set(Some(Errno::EIO));
    let wrs = [SendWr::send(0, &sgl), SendWr::send(1, &sgl).imm(3)];
    // SAFETY: not INLINE.
    let e = unsafe { q.post(&wrs) }.unwrap_err();
    assert_eq!(e, PostError { index: 1, kind: PostErrorKind::Doorbell(Errno::EIO as i32) });
}

// ---------------------------------------------------------------------------
// Arming (rdmacm.md §B.4).

#[test]
fn arm_flags_and_events() {
    let c = cq(4);
    let mut k = MockCq::default();
    assert_eq!(c.armed(), 0);
    let cqe = RawCqe { opcode: 3, ..RawCqe::default() };
    assert!(k.complete(c.ring(), &cqe, true));
    assert_eq!(k.events, 0, "not armed: no event");
    c.arm(true);
    assert_eq!(c.armed(), 1);
    assert!(k.complete(c.ring(), &cqe, false));
    assert_eq!((k.events, c.armed()), (0, 1), "solicited only: an unsolicited completion raises nothing");
    assert!(k.complete(c.ring(), &cqe, true));
    assert_eq!((k.events, c.armed()), (1, 0), "one event, then disarmed");
    c.arm(false);
    assert_eq!(c.armed(), 3);
    let mut w = [Wc::default(); 4];
    let mut c = c;
    assert_eq!(c.poll(&mut w), 3);
    assert!(k.complete(c.ring(), &cqe, false));
    assert_eq!((k.events, c.armed()), (2, 0));
}

// ---------------------------------------------------------------------------
// Completion decoding (rdmacm.md §B.3).

#[test]
fn cqe_status_and_opcode_map() {
    let status = [
        (0, WcStatus::SUCCESS),
        (1, WcStatus::LOC_LEN_ERR),
        (2, WcStatus::LOC_PROT_ERR),
        (3, WcStatus::LOC_QP_OP_ERR),
        (4, WcStatus::WR_FLUSH_ERR),
        (5, WcStatus::BAD_RESP_ERR),
        (6, WcStatus::LOC_ACCESS_ERR),
        (7, WcStatus::REM_ACCESS_ERR),
        (8, WcStatus::REM_INV_REQ_ERR),
        (9, WcStatus::GENERAL_ERR),
    ];
    for (s, want) in status {
        let w = wqe::decode_cqe(&RawCqe { status: s, ..RawCqe::default() });
        assert_eq!((w.status, w.vendor_err), (want, 0), "status {s}");
    }
    // The numbers, too (B.3: 0→0, 1→1, 2→4, 3→2, 4→5, 5→7, 6→8, 7→10, 8→9, 9→21).
    let nums: Vec<u32> = status.iter().map(|(_, w)| w.0).collect();
    assert_eq!(nums, [0, 1, 4, 2, 5, 7, 8, 10, 9, 21]);
    let w = wqe::decode_cqe(&RawCqe { status: 10, ..RawCqe::default() });
    assert_eq!((w.status, w.vendor_err), (WcStatus::GENERAL_ERR, 10));
    let opcode = [
        (0, WcOpcode::RDMA_WRITE),
        (1, WcOpcode::RDMA_READ),
        (2, WcOpcode::RDMA_READ),
        (3, WcOpcode::SEND),
        (4, WcOpcode::SEND),
        (5, WcOpcode::SEND),
        (6, WcOpcode::FETCH_ADD),
        (7, WcOpcode::COMP_SWAP),
        (8, WcOpcode::RECV),
        (9, WcOpcode(UNKNOWN_OPCODE | 9)),
        (255, WcOpcode(UNKNOWN_OPCODE | 255)),
    ];
    for (o, want) in opcode {
        assert_eq!(wqe::decode_cqe(&RawCqe { opcode: o, ..RawCqe::default() }).opcode, want, "opcode {o}");
    }
    let w = wqe::decode_cqe(&RawCqe { id: 3, bytes: 9, qp_id: 0xffff_ffff_0000_0007, ..RawCqe::default() });
    assert_eq!((w.wr_id, w.byte_len, w.qp_num, w.imm(), w.wc_flags), (3, 9, 7, None, WcFlags::empty()));
}

/// A poll hands each entry back (flags 0) and reads nothing the kernel
/// has not marked VALID; flags with other bits but VALID count as ready.
#[test]
fn poll_hands_entries_back() {
    let mut c = cq(4);
    let mut k = MockCq::default();
    assert!(k.complete(c.ring(), &RawCqe { id: 1, ..RawCqe::default() }, false));
    // SAFETY: byte 8 of entry 1 of a heap ring the test owns; accessed atomically.
    let f1 = unsafe { std::sync::atomic::AtomicU8::from_ptr(c.ring().slot(1).add(8)) };
    f1.store(0x21, Ordering::Release); // VALID | REM_INVAL, as for kernel CQs
    let mut w = [Wc::default(); 4];
    assert_eq!(c.poll(&mut w), 2);
    assert_eq!(f1.load(Ordering::Acquire), 0);
    // SAFETY: as above, entry 0.
    let f0 = unsafe { std::sync::atomic::AtomicU8::from_ptr(c.ring().slot(0).add(8)) };
    assert_eq!(f0.load(Ordering::Acquire), 0);
}

/// The mock's own check: receive flags other than exactly VALID are a
/// provider bug the kernel would answer by never taking the entry.
#[test]
#[should_panic(expected = "exactly SIW_WQE_VALID")]
fn mock_refuses_receive_flags_other_than_valid() {
    let q = rq(2);
    // SAFETY: bytes 8..10 of entry 0 of a heap ring the test owns.
    let f = unsafe { AtomicU16::from_ptr(q.ring().slot(0).add(8).cast::<u16>()) };
    f.store(3, Ordering::Release);
    MockRq::default().take(q.ring(), 1);
}

/// A kernel thread and a user thread at once (under Miri, a check of the
/// orderings): the user posts and polls, the kernel takes and completes.
#[test]
fn concurrent_kernel() {
    const N: u64 = if cfg!(miri) { 40 } else { 5000 };
    let mut q = SendQueue::new(Ring::new_heap(4, 0), LIM, (), 0);
    let mut c = cq(4);
    // The kernel thread's views of the rings.
    let (sq_ring, cq_ring) = (q.ring().share(), c.ring().share());
    let stop = &AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(move || {
            let (mut ks, mut kc) = (MockSq::default(), MockCq::default());
            let mut done = 0;
            while done < N && !stop.load(Ordering::Relaxed) {
                for k in ks.take(&sq_ring, 1) {
                    while !kc.complete(&cq_ring, &send_cqe(&k, 1, 0), false) && !stop.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                    }
                    done += 1;
                }
                std::thread::yield_now();
            }
        });
        // Stops the kernel thread however this one leaves (a failed assert too).
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(stop);
        let sgl = [SGE_A];
        let (mut posted, mut polled, mut outstanding) = (0u64, 0u64, 0u64);
        while polled < N {
            // Completions count what is outstanding: the kernel frees an
            // entry when it starts a request, the CQ must still hold its
            // completion.
            if posted < N && outstanding < 4 {
                // SAFETY: not INLINE.
                match unsafe { q.post(&[SendWr::send(posted, &sgl).signaled()]) } {
                    Ok(()) => {
                        posted += 1;
                        outstanding += 1;
                    }
                    Err(e) => assert_eq!(e.kind, PostErrorKind::QueueFull),
                }
            }
            let mut w = [Wc::default(); 4];
            let n = c.poll(&mut w);
            for x in &w[..n] {
                assert_eq!(x.wr_id, polled);
                polled += 1;
            }
            outstanding -= n as u64;
            std::thread::yield_now();
        }
    });
}

// ---------------------------------------------------------------------------
// What the kernel leaves in a QP in ERROR (`siw::flush`).

/// A QP's rings as the flush sees them, for a send queue and a receive queue.
fn qp_rings(s: &SendQueue<TestDoorbell>, r: &RecvQueue) -> Arc<QpRings> {
    Arc::new(QpRings::new(7, s.ring(), Some(r.ring())))
}

fn flushed(out: &[Wc]) -> Vec<(u64, WcOpcode)> {
    for w in out {
        assert_eq!((w.status, w.qp_num, w.byte_len), (WcStatus::WR_FLUSH_ERR, 7, 0), "{w:?}");
    }
    out.iter().map(|w| (w.wr_id, w.opcode)).collect()
}

fn post_sends(q: &mut SendQueue<TestDoorbell>, ids: std::ops::Range<u64>) {
    let sgl = [SGE_A];
    let wrs: Vec<SendWr<'_>> = ids.map(|i| SendWr::send(i, &sgl)).collect();
    // SAFETY: not INLINE.
    unsafe { q.post(&wrs) }.unwrap();
}

fn post_recvs(q: &mut RecvQueue, ids: std::ops::Range<u64>) {
    let sgl = [SGE_A];
    let wrs: Vec<RecvWr<'_>> = ids.map(|i| RecvWr { wr_id: i, sgl: &sgl }).collect();
    q.post(&wrs).unwrap();
}

/// The kernel took and completed some requests, then the QP went to ERROR:
/// the CQ reports the kernel's completions, then flushes the rest in order,
/// and everything posted afterwards, each once.
#[test]
fn a_cq_flushes_what_a_qp_in_error_left() {
    let (mut s, mut r, mut c) = (sq(8), rq(8), cq(32));
    post_sends(&mut s, 0..5);
    post_recvs(&mut r, 100..103);
    // The kernel sends two and receives one before the connection drops.
    let (mut ks, mut kr, mut kc) = (MockSq::default(), MockRq::default(), MockCq::default());
    for k in ks.take(s.ring(), 2) {
        assert!(kc.complete(c.ring(), &send_cqe(&k, 7, 0), false));
    }
    for k in kr.take(r.ring(), 1) {
        assert!(kc.complete(c.ring(), &recv_cqe(&k, 7, 64, 0), false));
    }
    let rings = qp_rings(&s, &r);
    c.flush().take(&rings, true, true);
    c.flush().take(&rings, true, true); // a second move to ERR: nothing more
    assert!(!c.is_empty());
    let mut w = [Wc::default(); 16];
    let n = c.poll(&mut w);
    assert_eq!(
        w[..3].iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(0, WcStatus::SUCCESS), (1, WcStatus::SUCCESS), (100, WcStatus::SUCCESS)]
    );
    assert_eq!(
        flushed(&w[3..n]),
        [(2, WcOpcode::SEND), (3, WcOpcode::SEND), (4, WcOpcode::SEND), (101, WcOpcode::RECV), (102, WcOpcode::RECV)]
    );
    assert!(c.is_empty());
    assert_eq!(c.poll(&mut w), 0);
    // Posted after the error: flushed at the next poll, a slice at a time.
    post_sends(&mut s, 5..13);
    post_recvs(&mut r, 103..105);
    assert!(!c.is_empty());
    let mut got = Vec::new();
    loop {
        let mut w3 = [Wc::default(); 3];
        let n = c.poll(&mut w3);
        if n == 0 {
            break;
        }
        got.extend(flushed(&w3[..n]));
    }
    let want: Vec<_> = (5..13).map(|i| (i, WcOpcode::SEND)).chain((103..105).map(|i| (i, WcOpcode::RECV))).collect();
    assert_eq!(got, want);
    // The entries are free again: a full ring's worth posts.
    post_sends(&mut s, 13..21);
    assert_eq!(c.poll(&mut [Wc::default(); 16]), 8);
}

/// A full ring whose oldest entry is in the middle (the kernel took some
/// first) flushes from that entry; a CQ that flushes only the receive side
/// leaves the sends alone.
#[test]
fn the_flush_starts_at_the_oldest_entry() {
    let (mut s, mut r, mut c) = (sq(4), rq(4), cq(16));
    post_sends(&mut s, 0..3);
    MockSq::default().take(s.ring(), 3);
    post_sends(&mut s, 3..7); // entries 3, 0, 1, 2: full
    post_recvs(&mut r, 10..12);
    let rings = qp_rings(&s, &r);
    let mut recv_cq = cq(16);
    c.flush().take(&rings, true, false);
    recv_cq.flush().take(&rings, false, true);
    let mut w = [Wc::default(); 16];
    let n = c.poll(&mut w);
    assert_eq!(flushed(&w[..n]), (3..7).map(|i| (i, WcOpcode::SEND)).collect::<Vec<_>>());
    let n = recv_cq.poll(&mut w);
    assert_eq!(flushed(&w[..n]), [(10, WcOpcode::RECV), (11, WcOpcode::RECV)]);
}

/// While a batch is being written the start cannot be known: the flush
/// waits for the next poll. Once the QP is destroyed its CQs forget it.
#[test]
fn a_batch_being_written_defers_the_flush_and_destroy_ends_it() {
    let (mut s, r, mut c) = (sq(4), rq(4), cq(16));
    post_sends(&mut s, 0..2);
    let rings = qp_rings(&s, &r);
    c.flush().take(&rings, true, true);
    let posted = s.ring().posted();
    posted.reserved.store(posted.put.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    assert!(c.is_empty());
    assert_eq!(c.poll(&mut [Wc::default(); 4]), 0);
    posted.reserved.store(posted.put.load(Ordering::Relaxed), Ordering::Relaxed);
    assert_eq!(c.poll(&mut [Wc::default(); 1]), 1);
    rings.destroyed();
    assert!(!c.flush().any());
    assert!(c.is_empty());
    assert_eq!(c.poll(&mut [Wc::default(); 4]), 0);
}

/// A producer posting on another thread while the CQ flushes (under Miri,
/// a check of the orderings): every request is flushed once, in order.
#[test]
fn concurrent_posts_are_flushed_once_in_order() {
    const N: u64 = if cfg!(miri) { 30 } else { 5000 };
    let (mut s, r, mut c) = (SendQueue::new(Ring::new_heap(4, 0), LIM, (), 0), rq(4), cq(4));
    let rings = Arc::new(QpRings::new(7, s.ring(), Some(r.ring())));
    // The QP goes to ERR with two requests in, the producer going on.
    let sgl = [SGE_A];
    // SAFETY: not INLINE.
    unsafe { s.post(&[SendWr::send(0, &sgl), SendWr::send(1, &sgl)]) }.unwrap();
    c.flush().take(&rings, true, true);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut next = 2;
            while next < N {
                let n = (N - next).min(3) as usize;
                let wrs: Vec<SendWr<'_>> = (next..next + n as u64).map(|i| SendWr::send(i, &sgl)).collect();
                // SAFETY: not INLINE.
                match unsafe { s.post(&wrs) } {
                    Ok(()) => next += n as u64,
                    Err(e) => {
                        assert_eq!(e.kind, PostErrorKind::QueueFull);
                        next += e.index as u64;
                    }
                }
                std::thread::yield_now();
            }
        });
        let mut want = 0;
        while want < N {
            let mut w = [Wc::default(); 4];
            let n = c.poll(&mut w);
            for x in &w[..n] {
                assert_eq!((x.wr_id, x.status), (want, WcStatus::WR_FLUSH_ERR));
                want += 1;
            }
            std::thread::yield_now();
        }
    });
}
