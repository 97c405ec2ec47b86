//! The CM event router (`router.rs`, issue #35) on the host: a model
//! channel for the routing rules and their properties, and the model of
//! the kernel's rdma_cm fd (`ucma_mock`) for real decoded events: many ids
//! on one channel with interleaved events, an id dropped with events
//! pending, a listener dropped with a request queued and connections
//! alive.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use proptest::prelude::*;
use rverbs_providers::sys::ucma::UcmaFd;
use rverbs_providers::sys::ucma_mock::MockUcma;
use rverbs_providers::{Errno, Error};
use rverbs_uapi::rdma_user_cm::*;

use super::router::{Routed, Router};
use super::EventSource;
use crate::cm::{CmId, EventChannel, EventKind, PortSpace};
use crate::Result;

/// A model event: the uid it is for and its number; counts the live ones
/// (so a test sees the router drop what it must, and keep nothing else).
#[derive(Debug)]
struct Ev {
    uid: u64,
    seq: u64,
    live: Arc<AtomicUsize>,
}

impl Drop for Ev {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Routed for Ev {
    fn route_uid(&self) -> u64 {
        self.uid
    }
}

/// The model channel: events queued "in the kernel", read one by one.
#[derive(Default)]
struct Source {
    queue: Mutex<VecDeque<Ev>>,
    fail: Mutex<Option<Errno>>,
    live: Arc<AtomicUsize>,
    next: AtomicUsize,
}

impl Source {
    fn push(&self, uid: u64) -> u64 {
        let seq = self.next.fetch_add(1, Ordering::SeqCst) as u64;
        self.live.fetch_add(1, Ordering::SeqCst);
        self.queue.lock().unwrap().push_back(Ev { uid, seq, live: self.live.clone() });
        seq
    }
}

impl EventSource for Source {
    type Event = Ev;
    fn try_next(&self) -> Result<Option<Ev>> {
        if let Some(e) = *self.fail.lock().unwrap() {
            return Err(Error::os("rdma_get_cm_event", e));
        }
        Ok(self.queue.lock().unwrap().pop_front())
    }
}

#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn waker() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count::default());
    (c.clone(), Waker::from(c))
}

fn take<S: EventSource>(r: &Router<S>, uid: u64, w: &Waker) -> Poll<Result<S::Event>>
where
    S::Event: Routed,
{
    r.poll_take(uid, &mut Context::from_waker(w))
}

fn seq(p: Poll<Result<Ev>>) -> Option<u64> {
    match p {
        Poll::Ready(Ok(e)) => Some(e.seq),
        Poll::Pending => None,
        Poll::Ready(Err(e)) => panic!("{e}"),
    }
}

#[test]
fn many_ids_interleaved_each_gets_its_own_in_order() {
    let r = Router::new(Source::default());
    for uid in 1..=50 {
        assert!(r.open(uid));
    }
    assert!(!r.open(7), "one owner per uid");
    // 50 ids x 4 events, interleaved; nobody polled yet: all queued.
    let mut want: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for round in 0..4 {
        for uid in 1..=50 {
            let uid = if round % 2 == 0 { uid } else { 51 - uid };
            want.entry(uid).or_default().push(r.source.push(uid));
        }
    }
    assert_eq!(r.drain().unwrap(), 200);
    let (_, w) = waker();
    for (uid, seqs) in &want {
        let got: Vec<u64> = std::iter::from_fn(|| seq(take(&r, *uid, &w))).collect();
        assert_eq!(&got, seqs, "uid {uid}");
    }
    assert_eq!(r.source.live.load(Ordering::SeqCst), 0, "every event was handed out once");
}

#[test]
fn a_waiting_owner_is_woken_by_its_event_only() {
    let r = Router::new(Source::default());
    r.open(1);
    r.open(2);
    let (c1, w1) = waker();
    let (c2, w2) = waker();
    assert!(take(&r, 1, &w1).is_pending());
    assert!(take(&r, 2, &w2).is_pending());
    r.source.push(2);
    r.drain().unwrap();
    assert_eq!((c1.0.load(Ordering::SeqCst), c2.0.load(Ordering::SeqCst)), (0, 1));
    assert!(seq(take(&r, 2, &w2)).is_some());
    assert!(take(&r, 1, &w1).is_pending());
}

#[test]
fn an_owner_gone_with_events_pending_drops_them_and_only_them() {
    let r = Router::new(Source::default());
    r.open(1);
    r.open(2);
    for _ in 0..3 {
        r.source.push(1);
        r.source.push(2);
    }
    r.drain().unwrap();
    assert_eq!(r.close(1), 3);
    assert_eq!(r.source.live.load(Ordering::SeqCst), 3, "1's three dropped, 2's kept");
    // Later events for the gone uid are dropped when read.
    r.source.push(1);
    r.source.push(2);
    r.drain().unwrap();
    assert_eq!(r.queued(2), 4);
    assert_eq!(r.source.live.load(Ordering::SeqCst), 4);
    let (_, w) = waker();
    assert!(matches!(take(&r, 1, &w), Poll::Ready(Err(e)) if e.errno() == Some(Errno::ENOENT)));
    assert_eq!(r.slots(), 1);
}

#[test]
fn a_failed_channel_reaches_every_waiting_owner_after_its_queued_events() {
    let r = Router::new(Source::default());
    r.open(1);
    r.open(2);
    let (c2, w2) = waker();
    assert!(take(&r, 2, &w2).is_pending());
    r.source.push(1);
    r.drain().unwrap();
    *r.source.fail.lock().unwrap() = Some(Errno::ENODEV);
    let e = r.drain().unwrap_err();
    r.fail(e);
    assert_eq!(c2.0.load(Ordering::SeqCst), 1);
    let (_, w) = waker();
    assert!(seq(take(&r, 1, &w)).is_some(), "what was read before the failure comes first");
    assert!(matches!(take(&r, 1, &w), Poll::Ready(Err(e)) if e.errno() == Some(Errno::ENODEV)));
    assert!(matches!(take(&r, 2, &w), Poll::Ready(Err(e)) if e.errno() == Some(Errno::ENODEV)));
}

#[derive(Clone, Debug)]
enum Op {
    Open(u64),
    Close(u64),
    Push(u64),
    Drain,
    Take(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let uid = 1..6u64;
    prop_oneof![
        1 => uid.clone().prop_map(Op::Open),
        1 => uid.clone().prop_map(Op::Close),
        3 => uid.clone().prop_map(Op::Push),
        2 => Just(Op::Drain),
        3 => uid.prop_map(Op::Take),
    ]
}

proptest! {
    #![proptest_config(crate::proptest_config::config())]

    /// Against a model: each event read reaches the owner of its uid if
    /// it had one when it was read, in order, exactly once; an owner's
    /// close drops its queue; nothing else is kept (no leak).
    #[test]
    fn routing_matches_the_model(ops in proptest::collection::vec(op(), 0..80)) {
        let r = Router::new(Source::default());
        let mut kernel: VecDeque<(u64, u64)> = VecDeque::new();
        let mut model: BTreeMap<u64, VecDeque<u64>> = BTreeMap::new();
        let (_, w) = waker();
        for op in ops {
            match op {
                Op::Open(u) => {
                    let fresh = !model.contains_key(&u);
                    prop_assert_eq!(r.open(u), fresh);
                    model.entry(u).or_default();
                }
                Op::Close(u) => {
                    let n = model.remove(&u).map_or(0, |q| q.len());
                    prop_assert_eq!(r.close(u), n);
                }
                Op::Push(u) => kernel.push_back((u, r.source.push(u))),
                Op::Drain => {
                    prop_assert_eq!(r.drain().unwrap(), kernel.len());
                    for (u, s) in kernel.drain(..) {
                        if let Some(q) = model.get_mut(&u) {
                            q.push_back(s);
                        }
                    }
                }
                Op::Take(u) => match (take(&r, u, &w), model.get_mut(&u)) {
                    (Poll::Ready(Ok(e)), Some(q)) => prop_assert_eq!(Some(e.seq), q.pop_front()),
                    (Poll::Pending, Some(q)) => prop_assert!(q.is_empty()),
                    (Poll::Ready(Err(e)), None) => prop_assert_eq!(e.errno(), Some(Errno::ENOENT)),
                    (p, q) => prop_assert!(false, "{:?} with model {:?}", p.map(|r| r.map(|e| e.seq)), q),
                },
            }
            let held: usize = model.values().map(VecDeque::len).sum::<usize>() + kernel.len();
            prop_assert_eq!(r.source.live.load(Ordering::SeqCst), held);
        }
    }
}

// Real events: the kernel's fd modelled by `ucma_mock`.

fn channel() -> (EventChannel, Arc<MockUcma>) {
    let m = MockUcma::new();
    (EventChannel::from_fd(UcmaFd::mock(m.clone())), m)
}

fn event(r: &Router<EventChannel>, id: &CmId) -> Option<crate::cm::Event> {
    let (_, w) = waker();
    match take(r, id.uid(), &w) {
        Poll::Ready(Ok(ev)) => Some(ev),
        Poll::Pending => None,
        Poll::Ready(Err(e)) => panic!("{e}"),
    }
}

fn request(m: &MockUcma, listener: &CmId) -> u32 {
    let child = m.new_child();
    m.push_event(rdma_ucm_event_resp {
        uid: listener.uid(),
        id: child,
        event: RDMA_CM_EVENT_CONNECT_REQUEST,
        ..Default::default()
    });
    child
}

#[test]
fn real_events_of_many_ids_and_a_listeners_requests_reach_their_owners() {
    let (ch, m) = channel();
    let r = Router::new(ch.clone());
    let ids: Vec<CmId> = (0..8).map(|_| ch.create_id(PortSpace::Tcp).unwrap()).collect();
    let l = ch.create_id(PortSpace::Tcp).unwrap();
    for id in ids.iter().chain([&l]) {
        r.open(id.uid());
    }
    let kinds = [RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_TIMEWAIT_EXIT];
    let mut children = Vec::new();
    for k in kinds {
        for id in &ids {
            m.push(id.kernel_id(), k, 0);
        }
        children.push(request(&m, &l));
    }
    r.drain().unwrap();
    for id in &ids {
        let got: Vec<EventKind> = std::iter::from_fn(|| event(&r, id)).map(|e| e.kind()).collect();
        assert_eq!(got, [EventKind::Established, EventKind::Disconnected, EventKind::TimewaitExit]);
    }
    // The requests went to the listener, each with its new id.
    let reqs: Vec<_> = std::iter::from_fn(|| event(&r, &l)).collect();
    assert_eq!(reqs.iter().map(|e| e.id().kernel_id()).collect::<Vec<_>>(), children);
    assert!(reqs.iter().all(|e| e.kind() == EventKind::ConnectRequest && e.listen_id().unwrap().same_as(&l)));
    // A new id's events, once its owner opened its slot (before ACCEPT),
    // reach it and not the listener.
    let c = reqs[0].id().clone();
    r.open(c.uid());
    m.push_event(rdma_ucm_event_resp {
        uid: c.uid(),
        id: c.kernel_id(),
        event: RDMA_CM_EVENT_ESTABLISHED,
        ..Default::default()
    });
    r.drain().unwrap();
    assert!(event(&r, &l).is_none());
    assert!(event(&r, &c).unwrap().id().same_as(&c));
}

#[test]
fn an_id_dropped_with_events_pending_is_destroyed_and_the_others_keep_theirs() {
    let (ch, m) = channel();
    let r = Router::new(ch.clone());
    let a = ch.create_id(PortSpace::Tcp).unwrap();
    let b = ch.create_id(PortSpace::Tcp).unwrap();
    r.open(a.uid());
    r.open(b.uid());
    for k in [RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_TIMEWAIT_EXIT] {
        m.push(a.kernel_id(), k, 0);
        m.push(b.kernel_id(), k, 0);
    }
    r.drain().unwrap();
    let (ka, a_uid) = (a.kernel_id(), a.uid());
    // The owner goes: its handle, then its slot (the queued events held
    // the id): DESTROY_ID once, without waiting.
    drop(a);
    assert!(m.destroyed().is_empty(), "the queued events still hold the id");
    assert_eq!(r.close(a_uid), 2);
    assert_eq!(m.destroyed(), vec![ka]);
    // An event the kernel had read out for it before the destroy: dropped.
    m.push_event(rdma_ucm_event_resp { uid: a_uid, id: ka, event: RDMA_CM_EVENT_DEVICE_REMOVAL, ..Default::default() });
    m.push(b.kernel_id(), RDMA_CM_EVENT_ADDR_CHANGE, 0);
    r.drain().unwrap();
    let got: Vec<EventKind> = std::iter::from_fn(|| event(&r, &b)).map(|e| e.kind()).collect();
    assert_eq!(got, [EventKind::Disconnected, EventKind::TimewaitExit, EventKind::AddrChange]);
    assert_eq!(m.pending(), 0);
    assert_eq!(r.slots(), 1);
}

#[test]
fn a_listener_dropped_with_a_request_queued_destroys_it_and_its_connections_live_on() {
    let (ch, m) = channel();
    let r = Router::new(ch.clone());
    let l = ch.create_id(PortSpace::Tcp).unwrap();
    r.open(l.uid());
    let first = request(&m, &l);
    r.drain().unwrap();
    // One request accepted: its id owned (slot open), the event gone.
    let conn = event(&r, &l).unwrap().id().clone();
    assert_eq!(conn.kernel_id(), first);
    r.open(conn.uid());
    // A second request queued, unread by the listener's owner; a third
    // still in the kernel.
    let queued = request(&m, &l);
    r.drain().unwrap();
    let late = request(&m, &l);
    let (kl, l_uid) = (l.kernel_id(), l.uid());
    drop(l);
    assert!(m.destroyed().is_empty(), "the queued request holds the listener");
    assert_eq!(r.close(l_uid), 1);
    let destroyed = m.destroyed();
    assert!(destroyed.contains(&kl) && destroyed.contains(&queued), "{destroyed:?}");
    // The late one is destroyed when read (its listener is gone); the
    // connection's events still reach it.
    m.push_event(rdma_ucm_event_resp {
        uid: conn.uid(),
        id: conn.kernel_id(),
        event: RDMA_CM_EVENT_DISCONNECTED,
        ..Default::default()
    });
    r.drain().unwrap();
    assert!(m.destroyed().contains(&late));
    assert!(!m.destroyed().contains(&first));
    assert_eq!(event(&r, &conn).unwrap().kind(), EventKind::Disconnected);
}
