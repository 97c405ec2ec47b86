//! Property tests of what siw's kernel writes into memory we share with it
//! (issue 32, hostile bytes): the flags of every ring entry and the fields
//! of the completion entries. The rings are heap rings (the mock kernel's
//! memory); the tests write any flags and field values the kernel could,
//! from any counter, and check that a poll returns exactly the run of
//! `VALID` entries at its counter (each decoded, each handed back), a post
//! stops with a queue-full error exactly at the first entry still the
//! kernel's, the doorbell rings exactly by the rule, and nothing panics.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU16, AtomicU8, Ordering};

use proptest::prelude::*;

use crate::proptest_config::config;
use crate::siw::datapath::{CqRing, Doorbell, RecvQueue, SendQueue};
use crate::siw::mock::{MockRq, MockSq};
use crate::siw::ring::Ring;
use crate::siw::wqe::{self, RawCqe, SendLimits, CQE_LEN, UNKNOWN_OPCODE};
use crate::wr::{PostError, PostErrorKind, RecvWr, SendWr, Sge, Wc, WcFlags, WcOpcode, WcStatus};
use crate::Errno;

#[derive(Debug, Default)]
struct CountingDoorbell(Cell<u32>);

impl Doorbell for CountingDoorbell {
    fn ring(&self, _qp_handle: u32) -> Result<(), Errno> {
        self.0.set(self.0.get() + 1);
        Ok(())
    }
}

/// The flags word of a send or receive entry, as the kernel writes it.
fn wqe_flags<const N: usize>(r: &Ring<N>, i: u32) -> &AtomicU16 {
    // SAFETY: bytes 8..10 of an entry of a heap ring the test owns; every
    // side accesses them atomically as a `u16`.
    unsafe { AtomicU16::from_ptr(r.slot(i).add(8).cast::<u16>()) }
}

/// The flags byte of a completion entry.
fn cqe_flags(r: &Ring<CQE_LEN>, i: u32) -> &AtomicU8 {
    // SAFETY: byte 8 of an entry of a heap ring the test owns; accessed
    // atomically as a `u8` on every side.
    unsafe { AtomicU8::from_ptr(r.slot(i).add(8)) }
}

/// Writes the fields of completion entry `i` (not its flags).
fn put_cqe(r: &Ring<CQE_LEN>, i: u32, c: &RawCqe, imm: u64) {
    let p = r.slot(i);
    // SAFETY: offsets inside the 32-byte entry of a heap ring the test
    // owns, outside its flags byte; no ring call is running.
    unsafe {
        p.cast::<u64>().write_unaligned(c.id);
        p.add(9).write(c.opcode);
        p.add(10).cast::<u16>().write_unaligned(c.status);
        p.add(12).cast::<u32>().write_unaligned(c.bytes);
        p.add(16).cast::<u64>().write_unaligned(imm);
        p.add(24).cast::<u64>().write_unaligned(c.qp_id);
    }
}

/// Any counter: near 0, near the wrap, anything.
fn counter() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..64, (0u32..64).prop_map(|v| v.wrapping_neg()), any::<u32>()]
}

fn raw_cqe() -> impl Strategy<Value = RawCqe> {
    (any::<u64>(), any::<u8>(), any::<u16>(), any::<u32>(), any::<u64>())
        .prop_map(|(id, opcode, status, bytes, qp_id)| RawCqe { id, opcode, status, bytes, qp_id })
}

/// The decoding rdmacm.md §B.3 gives, written out independently.
fn expect_wc(c: &RawCqe) -> Wc {
    let status = [0u32, 1, 4, 2, 5, 7, 8, 10, 9, 21];
    let (status, vendor_err) = match status.get(usize::from(c.status)) {
        Some(&s) => (WcStatus(s), 0),
        None => (WcStatus::GENERAL_ERR, u32::from(c.status)),
    };
    let opcode = match c.opcode {
        0 => WcOpcode::RDMA_WRITE,
        1 | 2 => WcOpcode::RDMA_READ,
        3..=5 => WcOpcode::SEND,
        6 => WcOpcode::FETCH_ADD,
        7 => WcOpcode::COMP_SWAP,
        8 => WcOpcode::RECV,
        o => WcOpcode(UNKNOWN_OPCODE | u32::from(o)),
    };
    Wc { wr_id: c.id, status, opcode, vendor_err, byte_len: c.bytes, qp_num: c.qp_id as u32, ..Wc::default() }
}

proptest! {
    #![proptest_config(config())]

    /// Any completion entry decodes, to the table's status and opcode, with
    /// no flags and no immediate.
    #[test]
    fn any_cqe_decodes(c in raw_cqe()) {
        let w = wqe::decode_cqe(&c);
        prop_assert_eq!(w, expect_wc(&c));
        prop_assert_eq!(w.wc_flags, WcFlags::empty());
        prop_assert!(w.status.name().is_some());
    }

    /// A poll over any flags and fields, from any counter, with room for
    /// any number: it takes exactly the run of entries whose flags have
    /// VALID, starting at its counter (at most a ring's worth: each it
    /// takes it hands back), decodes each, and leaves the rest alone.
    #[test]
    fn poll_takes_exactly_the_valid_run(
        log2 in 0u32..5,
        start in counter(),
        entries in proptest::collection::vec((any::<u8>(), raw_cqe(), any::<u64>()), 16),
        room in 0usize..40,
    ) {
        let slots = 1u32 << log2;
        let ring = Ring::<CQE_LEN>::new_heap(slots, 8);
        for i in 0..slots {
            let (f, c, imm) = &entries[i as usize];
            put_cqe(&ring, i, c, *imm);
            cqe_flags(&ring, i).store(*f, Ordering::Release);
        }
        // The entry counter `k` names, as the test wrote it.
        let at = |k: u32| &entries[(k & (slots - 1)) as usize];
        let run = (0..slots).take_while(|&k| at(start.wrapping_add(k)).0 & 1 != 0).count();
        let want = run.min(room);
        let mut c = CqRing::new(ring).starting_at(start);
        prop_assert_eq!(c.is_empty(), run == 0);
        let mut out = vec![MaybeUninit::<Wc>::uninit(); room];
        let n = c.poll_uninit(&mut out);
        prop_assert_eq!(n, want);
        for (k, w) in out[..n].iter().enumerate() {
            // SAFETY: `poll_uninit` wrote the first `n` entries whole.
            let w = unsafe { w.assume_init() };
            prop_assert_eq!(w, expect_wc(&at(start.wrapping_add(k as u32)).1));
        }
        for k in 0..slots {
            let f = cqe_flags(c.ring(), start.wrapping_add(k)).load(Ordering::Acquire);
            let orig = at(start.wrapping_add(k)).0;
            prop_assert_eq!(f, if (k as usize) < n { 0 } else { orig });
        }
        // Polled again, it goes on from where it stopped.
        let mut more = [Wc::default(); 1];
        let m = c.poll(&mut more);
        prop_assert_eq!(m, usize::from(n == room && run > room));
    }

    /// A batch of sends into a ring whose entries hold any flags, from any
    /// counter: posted up to the first entry still the kernel's (VALID),
    /// refused there as full; the posted entries are what was asked; the
    /// doorbell rings once exactly when the rule says (something posted,
    /// and the entry before the batch not VALID or the whole ring written).
    #[test]
    fn sends_stop_at_the_first_busy_entry(
        log2 in 0u32..5,
        start in counter(),
        flags in proptest::collection::vec(any::<u16>(), 16),
        batch in 0usize..20,
        lim in (0u32..8, any::<bool>()),
    ) {
        let slots = 1u32 << log2;
        let ring = Ring::new_heap(slots, 0);
        let at = |k: u32| flags[(k & (slots - 1)) as usize];
        for i in 0..slots {
            wqe_flags(&ring, i).store(flags[i as usize], Ordering::Release);
        }
        let lim = SendLimits { max_sge: lim.0, max_inline: 80, sig_all: lim.1 };
        let mut q = SendQueue::new(ring, lim, CountingDoorbell::default(), 0).starting_at(start);
        let sgl = [Sge::new(0x1000, 64, 7)];
        let wrs: Vec<_> = (0..batch as u64).map(|i| SendWr::send(i, &sgl)).collect();
        let free = (0..slots).take_while(|&k| at(start.wrapping_add(k)) & 1 == 0).count();
        let posted = if lim.max_sge.min(6) == 0 { 0 } else { free.min(batch) };
        // SAFETY: not INLINE.
        let got = unsafe { q.post(&wrs) };
        let want = if posted == batch {
            Ok(())
        } else if lim.max_sge.min(6) == 0 {
            Err(PostError { index: 0, kind: PostErrorKind::TooManySge { given: 1, max: 0 } })
        } else {
            Err(PostError { index: posted, kind: PostErrorKind::QueueFull })
        };
        prop_assert_eq!(got, want);
        let prev_free = at(start.wrapping_sub(1)) & 1 == 0;
        let rings = u32::from(posted > 0 && (posted >= slots as usize || prev_free));
        prop_assert_eq!(q.doorbell().0.get(), rings);
        let took = MockSq::at(start).take(q.ring(), posted);
        prop_assert_eq!(took.len(), posted);
        for (i, k) in took.iter().enumerate() {
            prop_assert_eq!(k.id, i as u64);
            prop_assert_eq!(k.opcode, 3);
            prop_assert_eq!(k.flags, if lim.sig_all { 1 | 4 } else { 1 });
            prop_assert_eq!(&k.sges[..], &sgl[..]);
        }
    }

    /// The same for receives, where any bit set means the kernel's.
    #[test]
    fn receives_stop_at_the_first_busy_entry(
        log2 in 0u32..5,
        start in counter(),
        flags in proptest::collection::vec(prop_oneof![Just(0u16), any::<u16>()], 16),
        batch in 0usize..20,
        nsge in 0usize..8,
    ) {
        let slots = 1u32 << log2;
        let ring = Ring::new_heap(slots, 0);
        let at = |k: u32| flags[(k & (slots - 1)) as usize];
        for i in 0..slots {
            wqe_flags(&ring, i).store(flags[i as usize], Ordering::Release);
        }
        let mut q = RecvQueue::new(ring, 6).starting_at(start);
        let sgl: Vec<_> = (0..nsge as u64).map(|i| Sge::new(0x1000 * i, 16, 3)).collect();
        let wrs: Vec<_> = (0..batch as u64).map(|i| RecvWr::new(i, &sgl)).collect();
        let free = (0..slots).take_while(|&k| at(start.wrapping_add(k)) == 0).count();
        let got = q.post(&wrs);
        if nsge > 6 {
            let want = if batch == 0 { Ok(()) } else {
                Err(PostError { index: 0, kind: PostErrorKind::TooManySge { given: nsge, max: 6 } })
            };
            prop_assert_eq!(got, want);
            return Ok(());
        }
        let posted = free.min(batch);
        let want = if posted == batch { Ok(()) } else { Err(PostError { index: posted, kind: PostErrorKind::QueueFull }) };
        prop_assert_eq!(got, want);
        let took = MockRq::at(start).take(q.ring(), posted);
        prop_assert_eq!(took.len(), posted);
        for (i, k) in took.iter().enumerate() {
            prop_assert_eq!(k.id, i as u64);
            prop_assert_eq!(&k.sges[..], &sgl[..]);
        }
    }
}
