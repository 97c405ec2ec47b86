//! The owned halves of `QueuePair::into_split` driven from four threads
//! (VM tier, rxe loopback): two RC QPs, each split into its send and receive
//! half, each half with its own CQ and its own thread. 100,000 work requests
//! in all; every completion must arrive exactly once, and every message in
//! order with its sequence number.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use rverbs::{
    AccessFlags, CompletionQueue, ConnectOptions, QpCap, QpInitAttr, QpType, RecvQueue, RecvWr, SendQueue, SendWr,
    WcOpcode,
};

/// Messages each QP sends to the other (and so receives).
const N: u64 = 25_000;
/// Work requests a thread keeps outstanding.
const DEPTH: u32 = 64;
const MSG: usize = 8;

/// A hang detector (not a time limit): fails when a thread's count of
/// completions has not moved for 120 s.
struct Stall {
    count: u64,
    since: std::time::Instant,
}

impl Default for Stall {
    fn default() -> Self {
        Stall { count: 0, since: std::time::Instant::now() }
    }
}

impl Stall {
    fn check(&mut self, count: u64, what: impl Fn() -> String) {
        if count != self.count {
            *self = Stall { count, since: std::time::Instant::now() };
        }
        assert!(self.since.elapsed() < std::time::Duration::from_secs(120), "no completion for 120 s: {}", what());
    }
}

/// Sends `N` messages carrying their sequence number, keeping at most
/// `DEPTH` outstanding; checks that every send completes once. With
/// `credits` (iWARP), message `k` goes only once the peer's receiver has
/// posted receive `k`: iWARP has no RNR retry, and a send completes when
/// TCP took it, not when the peer consumed it, so an application bounds
/// its sends by the receives the peer posted (here the count it shares).
fn sender(
    mut sq: SendQueue,
    mut cq: CompletionQueue,
    mr: rverbs::MemoryRegion,
    ready: &Barrier,
    credits: Option<Arc<AtomicU64>>,
) -> u64 {
    // Both peers' receives first: iWARP has no RNR retry, a SEND that finds
    // no receive ends the connection.
    ready.wait();
    let mut seen = HashSet::new();
    let (mut posted, mut done) = (0u64, 0u64);
    let mut stall = Stall::default();
    while done < N {
        stall.check(done, || format!("sender: {posted} posted, {done} completed"));
        let allowed = credits.as_ref().map_or(N, |c| c.load(Ordering::Acquire).min(N));
        while posted < allowed && posted - done < u64::from(DEPTH) {
            let slot = (posted % u64::from(DEPTH)) as usize * MSG;
            mr.write_at(slot, &posted.to_le_bytes()).unwrap();
            let sge = [mr.sge(slot, MSG as u32).unwrap()];
            sq.post_send(&[SendWr::send(posted, &sge).signaled()]).unwrap();
            posted += 1;
        }
        for wc in cq.drain() {
            let wc = wc.ok().unwrap();
            assert_eq!(wc.opcode, WcOpcode::SEND, "{wc:?}");
            assert!(seen.insert(wc.wr_id), "send {} completed twice", wc.wr_id);
            done += 1;
        }
        thread::yield_now();
    }
    assert!(cq.poll_one().is_none(), "a completion beyond the {N} sends");
    done
}

/// Keeps `DEPTH` receives posted until `N` messages arrived; checks each
/// completes once and carries the next sequence number (RC is in order).
fn receiver(
    mut rq: RecvQueue,
    mut cq: CompletionQueue,
    mr: rverbs::MemoryRegion,
    ready: &Barrier,
    credits: Arc<AtomicU64>,
) -> u64 {
    let post = |rq: &mut RecvQueue, id: u64| {
        let slot = (id % u64::from(DEPTH)) as usize * MSG;
        rq.post_recv(&[RecvWr::new(id, &[mr.sge(slot, MSG as u32).unwrap()])]).unwrap();
        // Release: the receive is posted before the peer's sender sees it.
        credits.store(id + 1, Ordering::Release);
    };
    let mut next_post = 0u64;
    let mut stall = Stall::default();
    while next_post < u64::from(DEPTH) {
        post(&mut rq, next_post);
        next_post += 1;
    }
    ready.wait();
    let mut expect = 0u64;
    while expect < N {
        stall.check(expect, || format!("receiver: {next_post} posted, {expect} completed"));
        for wc in cq.drain() {
            let wc = wc.ok().unwrap();
            assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::RECV, MSG as u32), "{wc:?}");
            assert_eq!(wc.wr_id, expect, "receives complete in order, once each");
            let mut b = [0u8; MSG];
            mr.read_at((wc.wr_id % u64::from(DEPTH)) as usize * MSG, &mut b).unwrap();
            assert_eq!(u64::from_le_bytes(b), expect, "message {expect} carried the wrong sequence number");
            expect += 1;
            if next_post < N {
                post(&mut rq, next_post);
                next_post += 1;
            }
        }
        thread::yield_now();
    }
    assert!(cq.poll_one().is_none(), "a completion beyond the {N} receives");
    expect
}

#[test]
fn owned_halves_on_four_threads_complete_every_request_once() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cqs: Vec<CompletionQueue> = (0..4).map(|_| ctx.create_cq(2 * DEPTH).unwrap()).collect();
    let [a_send, a_recv, b_send, b_recv]: [CompletionQueue; 4] = cqs.try_into().unwrap();
    let cap = QpCap { max_send_wr: DEPTH, max_recv_wr: DEPTH, ..QpCap::default() };
    let qp = |send_cq, recv_cq| {
        let mut init = QpInitAttr::new(QpType::Rc, send_cq);
        init.recv_cq = recv_cq;
        init.cap = cap;
        pd.create_qp(&init).unwrap()
    };
    let a = qp(&a_send, &a_recv);
    let b = qp(&b_send, &b_recv);
    let _cm = common::connect_pair(&ctx, &a, &b, &ConnectOptions::default());
    let mr = || pd.alloc_mr(DEPTH as usize * MSG, AccessFlags::LOCAL_WRITE).unwrap();
    let (a_sq, a_rq) = a.into_split();
    let (b_sq, b_rq) = b.into_split();
    let ready = Arc::new(Barrier::new(4));
    // Receives posted by a's and b's receivers: the peer's send credits.
    let (a_posted, b_posted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let iwarp = common::is_iwarp(&dev);
    let credits = |c: &Arc<AtomicU64>| iwarp.then(|| c.clone());
    let threads = [
        thread::spawn({
            let (m, r, c) = (mr(), ready.clone(), credits(&b_posted));
            move || sender(a_sq, a_send, m, &r, c)
        }),
        thread::spawn({
            let (m, r, c) = (mr(), ready.clone(), a_posted.clone());
            move || receiver(a_rq.unwrap(), a_recv, m, &r, c)
        }),
        thread::spawn({
            let (m, r, c) = (mr(), ready.clone(), credits(&a_posted));
            move || sender(b_sq, b_send, m, &r, c)
        }),
        thread::spawn({
            let (m, r, c) = (mr(), ready.clone(), b_posted.clone());
            move || receiver(b_rq.unwrap(), b_recv, m, &r, c)
        }),
    ];
    let total: u64 = threads.into_iter().map(|t| t.join().expect("a half's thread panicked")).sum();
    assert_eq!(total, 4 * N, "every posted work request completed exactly once");
}

#[test]
fn a_split_half_keeps_the_qp_and_its_control_side() {
    let Some(dev) = common::first_device() else { return };
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq)).unwrap();
    let qpn = qp.qp_num();
    let (sq, rq) = qp.into_split();
    drop(rq);
    // The QP still exists through the send half: it can be moved to INIT.
    sq.control().to_init(&ConnectOptions::default()).unwrap();
    // siw reports its IDLE state for INIT (common::iwarp_idle_state).
    let init = if common::is_iwarp(&dev) { common::iwarp_idle_state() } else { rverbs::QpState::Init };
    assert_eq!(sq.control().query(rverbs::QpAttrMask::STATE).unwrap().qp_state, init);
    assert_eq!(sq.control().qp_num(), qpn);
    let control = sq.control().clone();
    drop(sq);
    // A control handle alone keeps the kernel QP too.
    assert_eq!(control.query(rverbs::QpAttrMask::STATE).unwrap().qp_state, init);
}
