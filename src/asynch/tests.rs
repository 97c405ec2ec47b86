//! The state machines against a model of the hardware (host tier): a CQ
//! that raises one event per arm (rxe: for a completion after the arm;
//! mlx5-style: also at once when armed with completions unpolled), a
//! channel that is a real fd (a datagram socket: one event per datagram,
//! read non-blocking like the kernel's), and an edge-triggered reactor
//! that keeps one waker per fd, as tokio's does. Hooks inject a
//! completion at the points where a wakeup can be lost.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use super::cq::{ChannelCore, CqCore};
use super::events::EventsCore;
use super::{CqOps, EventSource, Readiness};
use crate::{Result, Wc};

type Hook = Box<dyn FnOnce(&mut Hw) + Send>;

/// The hardware: CQ rings, arm flags, the channel's write end.
struct Hw {
    cqs: HashMap<u64, HwCq>,
    tx: UnixDatagram,
    reactor: Arc<MockReactor>,
    /// Armed with completions unpolled raises the event at once (mlx5).
    event_if_nonempty: bool,
    /// Rule breaks: an arm while the last arm's event was not read yet.
    violations: Vec<String>,
    events_raised: u64,
    arms: u64,
    acked: u64,
    next_wr: u64,
    hooks: Hooks,
}

#[derive(Default)]
struct HwCq {
    queue: VecDeque<Wc>,
    armed: bool,
    /// Events raised for this CQ and not read from the channel yet.
    unread: u32,
}

/// One-shot injections, each run with the hardware locked.
#[derive(Default)]
struct Hooks {
    /// In `arm`, before the CQ is armed.
    before_arm: Option<Hook>,
    /// In `arm`, right after.
    after_arm: Option<Hook>,
    /// In `poll`, when it finds an armed CQ empty.
    empty_poll_armed: Option<Hook>,
    /// In the channel read that finds the fd empty (`EAGAIN`).
    after_drained: Option<Hook>,
}

impl Hw {
    /// A completion on CQ `h`; an event when the CQ is armed.
    fn complete(&mut self, h: u64) -> u64 {
        let wr_id = self.next_wr;
        self.next_wr += 1;
        let cq = self.cqs.get_mut(&h).expect("known CQ");
        cq.queue.push_back(Wc { wr_id, qp_num: h as u32, ..Wc::default() });
        if cq.armed {
            self.raise(h);
        }
        wr_id
    }

    fn raise(&mut self, h: u64) {
        let cq = self.cqs.get_mut(&h).expect("known CQ");
        cq.armed = false;
        cq.unread += 1;
        self.events_raised += 1;
        self.tx.send(&h.to_ne_bytes()).expect("event datagram");
        self.reactor.edge();
    }
}

#[derive(Clone)]
struct Model {
    hw: Arc<Mutex<Hw>>,
}

impl Model {
    fn hw(&self) -> MutexGuard<'_, Hw> {
        self.hw.lock().unwrap()
    }
    fn complete(&self, h: u64) -> u64 {
        self.hw().complete(h)
    }
}

struct MockCq {
    h: u64,
    m: Model,
}

impl CqOps for MockCq {
    fn poll(&mut self, out: &mut [Wc]) -> usize {
        let mut hw = self.m.hw();
        let cq = hw.cqs.get_mut(&self.h).unwrap();
        let n = out.len().min(cq.queue.len());
        for o in &mut out[..n] {
            *o = cq.queue.pop_front().unwrap();
        }
        if n == 0 && cq.armed {
            if let Some(hook) = hw.hooks.empty_poll_armed.take() {
                hook(&mut hw);
            }
        }
        n
    }

    fn arm(&mut self) -> Result<()> {
        let mut hw = self.m.hw();
        if let Some(hook) = hw.hooks.before_arm.take() {
            hook(&mut hw);
        }
        hw.arms += 1;
        let unread = hw.cqs[&self.h].unread;
        if unread > 0 {
            hw.violations.push(format!("CQ {} armed with {unread} event(s) unread", self.h));
        }
        let cq = hw.cqs.get_mut(&self.h).unwrap();
        cq.armed = true;
        let fire_now = !cq.queue.is_empty() && hw.event_if_nonempty;
        if fire_now {
            hw.raise(self.h);
        }
        if let Some(hook) = hw.hooks.after_arm.take() {
            hook(&mut hw);
        }
        Ok(())
    }

    fn ack(&self, n: u32) {
        self.m.hw().acked += u64::from(n);
    }

    fn handle(&self) -> u64 {
        self.h
    }
}

/// The channel: the read end, non-blocking; each read counts the event
/// for its CQ, as `try_get_cq_event` does.
struct MockChannel {
    rx: UnixDatagram,
    m: Model,
}

impl EventSource for MockChannel {
    type Event = u64;
    fn try_next(&self) -> Result<Option<u64>> {
        let mut b = [0u8; 8];
        match self.rx.recv(&mut b) {
            Ok(8) => {
                let h = u64::from_ne_bytes(b);
                self.m.hw().cqs.get_mut(&h).unwrap().unread -= 1;
                Ok(Some(h))
            }
            Ok(n) => panic!("short event datagram: {n}"),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let mut hw = self.m.hw();
                if let Some(hook) = hw.hooks.after_drained.take() {
                    hook(&mut hw);
                }
                Ok(None)
            }
            Err(e) => panic!("recv: {e}"),
        }
    }
}

/// An edge-triggered reactor with one waker per fd (tokio's `AsyncFd`
/// semantics, readiness ticks included).
#[derive(Default)]
struct MockReactor {
    st: Mutex<ReactorState>,
}

#[derive(Default)]
struct ReactorState {
    ready: bool,
    tick: u64,
    waker: Option<Waker>,
}

impl MockReactor {
    /// The fd became readable.
    fn edge(&self) {
        let w = {
            let mut s = self.st.lock().unwrap();
            s.ready = true;
            s.tick += 1;
            s.waker.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl Readiness for Arc<MockReactor> {
    fn poll_drain<T>(&self, cx: &mut Context<'_>, drain: impl FnOnce() -> Result<T>) -> Poll<Result<T>> {
        let tick = {
            let mut s = self.st.lock().unwrap();
            if !s.ready {
                s.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            s.tick
        };
        let r = drain();
        if r.is_ok() {
            let mut s = self.st.lock().unwrap();
            if s.tick == tick {
                s.ready = false;
            }
        }
        Poll::Ready(r)
    }
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Flag(AtomicUsize);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A task waiting on one CQ: its waker and the wakes it has seen.
struct Waiter {
    flag: Arc<Flag>,
    waker: Waker,
    seen: usize,
}

impl Waiter {
    fn new() -> Self {
        let flag = Arc::new(Flag::default());
        Waiter { waker: Waker::from(flag.clone()), flag, seen: 0 }
    }
    fn woken(&self) -> bool {
        self.flag.0.load(Ordering::SeqCst) > self.seen
    }
}

type Core = CqCore<MockCq, MockChannel, Arc<MockReactor>>;

struct Rig {
    m: Model,
    chan: Arc<ChannelCore<MockChannel, Arc<MockReactor>>>,
    cqs: Vec<Core>,
}

/// `n` CQs (handles 1..=n) on one channel.
fn rig(n: u64, event_if_nonempty: bool) -> Rig {
    let (tx, rx) = UnixDatagram::pair().unwrap();
    rx.set_nonblocking(true).unwrap();
    let reactor = Arc::new(MockReactor::default());
    let hw = Hw {
        cqs: (1..=n).map(|h| (h, HwCq::default())).collect(),
        tx,
        reactor: reactor.clone(),
        event_if_nonempty,
        violations: Vec::new(),
        events_raised: 0,
        arms: 0,
        acked: 0,
        next_wr: 0,
        hooks: Hooks::default(),
    };
    let m = Model { hw: Arc::new(Mutex::new(hw)) };
    let chan = Arc::new(ChannelCore::new(MockChannel { rx, m: m.clone() }, reactor));
    let cqs = (1..=n).map(|h| CqCore::new(MockCq { h, m: m.clone() }, chan.clone()).unwrap()).collect();
    Rig { m, chan, cqs }
}

/// One poll of `next` on CQ `i` by `w`.
fn poll_next(rig: &mut Rig, i: usize, w: &mut Waiter) -> Poll<Wc> {
    w.seen = w.flag.0.load(Ordering::SeqCst);
    let mut cx = Context::from_waker(&w.waker);
    rig.cqs[i].poll_one(&mut cx).map(|r| r.unwrap())
}

fn ready(p: Poll<Wc>) -> u64 {
    match p {
        Poll::Ready(wc) => wc.wr_id,
        Poll::Pending => panic!("expected a completion, got Pending"),
    }
}

fn assert_clean(rig: &Rig) {
    let hw = rig.m.hw();
    assert!(hw.violations.is_empty(), "{:?}", hw.violations);
}

#[test]
fn a_completion_before_the_arm_is_found_by_the_poll_after_it() {
    let mut rig = rig(1, false);
    let mut w = Waiter::new();
    // Polled empty, then this completion lands before the arm: it raises
    // no event, so only the poll after the arm can find it.
    rig.m.hw().hooks.before_arm = Some(Box::new(|hw| {
        hw.complete(1);
    }));
    assert_eq!(ready(poll_next(&mut rig, 0, &mut w)), 0);
    assert_clean(&rig);
}

#[test]
fn a_completion_between_arm_and_repoll_is_delivered_once() {
    let mut rig = rig(1, false);
    let mut w = Waiter::new();
    // Lands after the arm (an event) and before the poll after it.
    rig.m.hw().hooks.after_arm = Some(Box::new(|hw| {
        hw.complete(1);
    }));
    assert_eq!(ready(poll_next(&mut rig, 0, &mut w)), 0);
    // Its event is read and acknowledged, the CQ armed again: asleep.
    assert!(poll_next(&mut rig, 0, &mut w).is_pending());
    {
        let hw = rig.m.hw();
        assert_eq!((hw.events_raised, hw.acked, hw.arms), (1, 1, 2));
    }
    // Reading its own event may have woken it once: then one more poll,
    // and it sleeps.
    if w.woken() {
        assert!(poll_next(&mut rig, 0, &mut w).is_pending());
    }
    assert!(!w.woken());
    rig.m.complete(1);
    assert!(w.woken(), "the completion after the second arm wakes the waiter");
    assert_eq!(ready(poll_next(&mut rig, 0, &mut w)), 1);
    assert_clean(&rig);
}

#[test]
fn an_edge_before_the_waiter_registers_is_not_lost() {
    let mut rig = rig(1, false);
    let mut w = Waiter::new();
    // After the arm and the empty poll, before the reactor is asked: the
    // edge comes while no waker is registered.
    rig.m.hw().hooks.empty_poll_armed = Some(Box::new(|hw| {
        hw.complete(1);
    }));
    assert_eq!(ready(poll_next(&mut rig, 0, &mut w)), 0);
    assert!(poll_next(&mut rig, 0, &mut w).is_pending());
    assert_eq!(rig.m.hw().acked, 1);
    assert_clean(&rig);
}

#[test]
fn an_event_that_comes_while_the_channel_is_drained_is_kept() {
    let mut rig = rig(2, false);
    let (mut a, mut b) = (Waiter::new(), Waiter::new());
    assert!(poll_next(&mut rig, 0, &mut a).is_pending());
    assert!(poll_next(&mut rig, 1, &mut b).is_pending());
    rig.m.complete(1);
    // B's task reads A's event; right after the read that found the
    // channel empty, B's CQ completes (its event and edge come before the
    // reactor's readiness is cleared).
    rig.m.hw().hooks.after_drained = Some(Box::new(|hw| {
        hw.complete(2);
    }));
    assert_eq!(ready(poll_next(&mut rig, 1, &mut b)), 1);
    assert_eq!(ready(poll_next(&mut rig, 0, &mut a)), 0);
    // B's event is still to be read: B must not sleep on a cleared fd.
    assert!(poll_next(&mut rig, 1, &mut b).is_pending());
    assert!(poll_next(&mut rig, 0, &mut a).is_pending());
    assert_eq!(rig.m.hw().acked, 2, "both events read and acknowledged");
    rig.m.complete(2);
    assert!(b.woken());
    assert_eq!(ready(poll_next(&mut rig, 1, &mut b)), 2);
    assert_clean(&rig);
}

#[test]
fn events_reach_the_cq_they_name() {
    let mut rig = rig(2, false);
    let (mut a, mut b) = (Waiter::new(), Waiter::new());
    assert!(poll_next(&mut rig, 0, &mut a).is_pending());
    assert!(poll_next(&mut rig, 1, &mut b).is_pending());
    rig.m.complete(1);
    // B's task runs first and reads the channel: A's event goes to A.
    assert!(poll_next(&mut rig, 1, &mut b).is_pending());
    assert!(a.woken());
    assert_eq!(ready(poll_next(&mut rig, 0, &mut a)), 0);
    assert!(poll_next(&mut rig, 0, &mut a).is_pending());
    let hw = rig.m.hw();
    assert_eq!((hw.events_raised, hw.acked), (1, 1));
    assert!(hw.cqs[&2].armed, "B stays armed, its arm unspent");
    assert!(hw.violations.is_empty(), "{:?}", hw.violations);
}

#[test]
fn the_waiter_that_registered_last_may_go_away() {
    // The reactor keeps one waker per fd. B registers after A, then B's
    // future is dropped (a select! took another branch): A must still be
    // woken by A's completion.
    let mut rig = rig(2, false);
    let (mut a, mut b) = (Waiter::new(), Waiter::new());
    assert!(poll_next(&mut rig, 0, &mut a).is_pending());
    assert!(poll_next(&mut rig, 1, &mut b).is_pending());
    drop(b);
    rig.m.complete(1);
    assert!(a.woken(), "A's waiter must be woken");
    assert_eq!(ready(poll_next(&mut rig, 0, &mut a)), 0);
    assert_clean(&rig);
}

#[test]
fn a_dropped_waiter_leaves_the_cq_to_the_next() {
    let mut rig = rig(2, false);
    // Dropped while asleep, its completion then arrives: the next waiter
    // (another task) gets it, and the event's arm state with it.
    let mut w1 = Waiter::new();
    assert!(poll_next(&mut rig, 0, &mut w1).is_pending());
    drop(w1);
    rig.m.complete(1);
    let mut w2 = Waiter::new();
    assert_eq!(ready(poll_next(&mut rig, 0, &mut w2)), 0);
    assert!(poll_next(&mut rig, 0, &mut w2).is_pending());
    drop(w2);
    // Dropped after another CQ's task read its event for it.
    let mut b = Waiter::new();
    assert!(poll_next(&mut rig, 1, &mut b).is_pending());
    rig.m.complete(1);
    assert!(poll_next(&mut rig, 1, &mut b).is_pending()); // reads A's event
    let mut w3 = Waiter::new();
    assert_eq!(ready(poll_next(&mut rig, 0, &mut w3)), 1);
    assert!(poll_next(&mut rig, 0, &mut w3).is_pending());
    rig.m.complete(1);
    assert!(w3.woken());
    assert_eq!(ready(poll_next(&mut rig, 0, &mut w3)), 2);
    let hw = rig.m.hw();
    assert_eq!((hw.events_raised, hw.acked), (3, 2), "the last event is raised, not yet read");
    assert!(hw.violations.is_empty(), "{:?}", hw.violations);
}

#[test]
fn an_idle_waiter_sleeps_and_arms_once() {
    let mut rig = rig(1, false);
    let mut w = Waiter::new();
    for _ in 0..5 {
        assert!(poll_next(&mut rig, 0, &mut w).is_pending());
    }
    assert!(!w.woken(), "nothing happened, nobody woke");
    assert_eq!(rig.m.hw().arms, 1, "spurious polls do not arm again");
    // Completions that are there cost neither an arm nor the reactor.
    for _ in 0..3 {
        rig.m.hw().complete(1);
    }
    for i in 0..3 {
        assert_eq!(ready(poll_next(&mut rig, 0, &mut w)), i);
    }
    assert_eq!(rig.m.hw().arms, 1);
}

#[test]
fn wait_exact_keeps_what_it_gathered_when_dropped() {
    let mut rig = rig(1, false);
    let mut w = Waiter::new();
    for _ in 0..3 {
        rig.m.complete(1);
    }
    let mut out = [Wc { wr_id: u64::MAX, ..Wc::default() }; 5];
    let mut cx = Context::from_waker(&w.waker);
    assert!(rig.cqs[0].poll_exact(&mut cx, &mut out).is_pending());
    assert!(out.iter().all(|wc| wc.wr_id == u64::MAX), "out is written only when full");
    assert_eq!(rig.cqs[0].buffered(), 3);
    // The future is dropped; two more arrive; a new wait gets all five.
    rig.m.complete(1);
    rig.m.complete(1);
    w = Waiter::new();
    let mut cx = Context::from_waker(&w.waker);
    assert!(matches!(rig.cqs[0].poll_exact(&mut cx, &mut out), Poll::Ready(Ok(()))));
    assert_eq!(out.map(|wc| wc.wr_id), [0, 1, 2, 3, 4]);
    assert_eq!(rig.cqs[0].buffered(), 0);
    // wait_any hands out what is there, at least one.
    rig.m.complete(1);
    let mut two = [Wc::default(); 2];
    assert!(matches!(rig.cqs[0].poll_any(&mut cx, &mut two), Poll::Ready(Ok(1))));
    assert_eq!(two[0].wr_id, 5);
    let _ = &rig.chan;
}

/// xorshift64*: deterministic schedules without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Polls CQ `i` like a task looping on `next().await`: every completion
/// there is taken, until `Pending`.
fn run_task(rig: &mut Rig, i: usize, w: &mut Waiter, got: &mut HashSet<u64>, polls: &mut u64) {
    loop {
        *polls += 1;
        match poll_next(rig, i, w) {
            Poll::Ready(wc) => {
                assert_eq!(wc.qp_num as usize, i + 1, "a completion of another CQ");
                assert!(got.insert(wc.wr_id), "wr {} delivered twice", wc.wr_id);
            }
            Poll::Pending => return,
        }
    }
}

/// Random interleavings of completions, task runs, spurious polls,
/// dropped and new waiters, and completions injected at the hooks; then
/// every task runs only when woken, as an executor runs them. Every
/// completion arrives exactly once, the CQs are never armed with an event
/// unread, every event is read and acknowledged, and the tasks fall
/// asleep (no busy loop).
#[test]
fn random_interleavings_lose_no_wakeup() {
    for seed in 1..=40u64 {
        for mlx5_style in [false, true] {
            random_schedule(seed, mlx5_style);
        }
    }
}

fn random_schedule(seed: u64, event_if_nonempty: bool) {
    const CQS: u64 = 3;
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut rig = rig(CQS, event_if_nonempty);
    let mut waiters: Vec<Option<Waiter>> = (0..CQS).map(|_| Some(Waiter::new())).collect();
    let mut got = HashSet::new();
    let mut completed = 0u64;
    let mut polls = 0u64;
    for _ in 0..1500 {
        let i = rng.below(CQS) as usize;
        match rng.below(12) {
            0..=3 => {
                rig.m.complete(i as u64 + 1);
                completed += 1;
            }
            4..=7 => {
                // The executor runs a woken task.
                if let Some(w) = waiters.iter().position(|w| w.as_ref().is_some_and(Waiter::woken)) {
                    let mut waiter = waiters[w].take().unwrap();
                    run_task(&mut rig, w, &mut waiter, &mut got, &mut polls);
                    waiters[w] = Some(waiter);
                }
            }
            8 => {
                // A spurious poll (e.g. another branch of a select! woke).
                if let Some(mut waiter) = waiters[i].take() {
                    run_task(&mut rig, i, &mut waiter, &mut got, &mut polls);
                    waiters[i] = Some(waiter);
                }
            }
            9 => waiters[i] = None, // the future is dropped
            10 => {
                if waiters[i].is_none() {
                    let mut waiter = Waiter::new();
                    run_task(&mut rig, i, &mut waiter, &mut got, &mut polls);
                    waiters[i] = Some(waiter);
                }
            }
            _ => {
                let target = rng.below(CQS) + 1;
                completed += 1;
                let hook: Hook = Box::new(move |hw| {
                    hw.complete(target);
                });
                let mut hw = rig.m.hw();
                let slot = match rng.below(4) {
                    0 => &mut hw.hooks.before_arm,
                    1 => &mut hw.hooks.after_arm,
                    2 => &mut hw.hooks.empty_poll_armed,
                    _ => &mut hw.hooks.after_drained,
                };
                if slot.is_some() {
                    completed -= 1; // one hook of a kind at a time
                } else {
                    *slot = Some(hook);
                }
            }
        }
    }
    // Hooks that never fired.
    {
        let mut hw = rig.m.hw();
        let h = &mut hw.hooks;
        let unfired = [h.before_arm.take(), h.after_arm.take(), h.empty_poll_armed.take(), h.after_drained.take()];
        completed -= unfired.iter().filter(|h| h.is_some()).count() as u64;
    }
    // Every dropped waiter is followed by a new one, then only woken tasks run.
    for (i, w) in waiters.iter_mut().enumerate() {
        if w.is_none() {
            let mut waiter = Waiter::new();
            run_task(&mut rig, i, &mut waiter, &mut got, &mut polls);
            *w = Some(waiter);
        }
    }
    let mut rounds = 0;
    while let Some(i) = waiters.iter().position(|w| w.as_ref().is_some_and(Waiter::woken)) {
        rounds += 1;
        assert!(rounds < 10_000, "seed {seed}: the tasks never fall asleep");
        let mut waiter = waiters[i].take().unwrap();
        run_task(&mut rig, i, &mut waiter, &mut got, &mut polls);
        waiters[i] = Some(waiter);
    }
    let ctx = format!("seed {seed}, mlx5-style {event_if_nonempty}");
    assert_eq!(got.len() as u64, completed, "{ctx}: completions lost (asleep with work left: a lost wakeup)");
    let hw = rig.m.hw();
    assert!(hw.violations.is_empty(), "{ctx}: {:?}", hw.violations);
    assert_eq!(hw.acked, hw.events_raised, "{ctx}: every event read and acknowledged");
    assert!(hw.arms <= hw.events_raised + CQS, "{ctx}: {} arms for {} events", hw.arms, hw.events_raised);
    let mut b = [0u8; 8];
    assert!(rig.chan.source.rx.recv(&mut b).is_err(), "{ctx}: an event left in the channel");
}

/// Async events: a datagram per event, read by one consumer.
struct MockEvents {
    rx: UnixDatagram,
}

impl EventSource for MockEvents {
    type Event = u64;
    fn try_next(&self) -> Result<Option<u64>> {
        let mut b = [0u8; 8];
        match self.rx.recv(&mut b) {
            Ok(_) => Ok(Some(u64::from_ne_bytes(b))),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
            Err(e) => panic!("recv: {e}"),
        }
    }
}

#[test]
fn async_events_arrive_once_in_order_across_dropped_waits() {
    let (tx, rx) = UnixDatagram::pair().unwrap();
    rx.set_nonblocking(true).unwrap();
    let reactor = Arc::new(MockReactor::default());
    let mut ev = EventsCore::new(MockEvents { rx }, reactor.clone());
    let send = |v: u64| {
        tx.send(&v.to_ne_bytes()).unwrap();
        reactor.edge();
    };
    let mut w = Waiter::new();
    let mut poll = |w: &Waiter| {
        let mut cx = Context::from_waker(&w.waker);
        ev.poll_event(&mut cx).map(|r| r.unwrap())
    };
    assert!(poll(&w).is_pending());
    send(1);
    send(2);
    send(3);
    assert!(w.woken());
    // The first wait reads all three and hands out one; it is dropped, a
    // new waiter gets the other two, then sleeps.
    assert_eq!(poll(&w), Poll::Ready(1));
    w = Waiter::new();
    assert_eq!(poll(&w), Poll::Ready(2));
    assert_eq!(poll(&w), Poll::Ready(3));
    assert!(poll(&w).is_pending());
    send(4);
    assert!(w.woken());
    assert_eq!(poll(&w), Poll::Ready(4));
    assert!(poll(&w).is_pending());
}

/// `AsyncCmEvents` on the model of the kernel's rdma_cm fd: events queued
/// before the wait, during it and after a dropped `next` future each come
/// out once, in order, decoded (an unknown number kept), and a waiter
/// sleeps on an empty channel.
#[test]
fn cm_events_arrive_once_in_order_across_dropped_waits() {
    use std::future::Future;

    use rverbs_providers::sys::ucma::UcmaFd;
    use rverbs_providers::sys::ucma_mock::MockUcma;
    use rverbs_uapi::rdma_user_cm::*;

    use super::AsyncCmEvents;
    use crate::cm::{EventChannel, EventKind, PortSpace};

    let m = MockUcma::new();
    let ch = EventChannel::from_fd(UcmaFd::mock(m.clone()));
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let reactor = Arc::new(MockReactor::default());
    let mut events = AsyncCmEvents::with_readiness(ch, reactor.clone());
    let push = |event: u32| {
        m.push(id.kernel_id(), event, 0);
        reactor.edge();
    };
    let w = Waiter::new();
    let mut cx = Context::from_waker(&w.waker);
    assert!(events.poll_next_event(&mut cx).is_pending(), "nothing queued: asleep");
    push(RDMA_CM_EVENT_ROUTE_RESOLVED);
    push(17);
    push(RDMA_CM_EVENT_DISCONNECTED);
    assert!(w.woken());
    {
        // A `next` future polled once (reads all three, hands out one), then
        // another one dropped before it is polled: nothing is lost.
        let mut f = events.next();
        let Poll::Ready(Ok(ev)) = std::pin::Pin::new(&mut f).poll(&mut cx) else { panic!("ready") };
        assert_eq!(ev.kind(), EventKind::RouteResolved);
        assert!(ev.id().same_as(&id));
    }
    drop(events.next());
    let kinds: Vec<EventKind> = (0..2)
        .map(|_| match events.poll_next_event(&mut cx) {
            Poll::Ready(Ok(ev)) => ev.kind(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(kinds, [EventKind::Other(17), EventKind::Disconnected]);
    assert!(events.poll_next_event(&mut cx).is_pending());
    assert_eq!(m.pending(), 0, "every event was read from the fd");
    push(RDMA_CM_EVENT_TIMEWAIT_EXIT);
    assert!(matches!(events.poll_next_event(&mut cx), Poll::Ready(Ok(ev)) if ev.kind() == EventKind::TimewaitExit));
}
