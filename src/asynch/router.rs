//! One CM event channel shared by many async ids: the events read from it,
//! handed to the id each one is about (issue #35, connections at scale).
//!
//! librdmacm's users put every id on one channel and route each event by
//! the id it names; rverbs' async listener used to give every accepted id
//! a channel of its own instead (an open of `/dev/infiniband/rdma_cm`, a
//! MIGRATE_ID, a reactor registration and its removal, a close, and a
//! read that finds the fd empty, per connection). Here one reader (the
//! channel's driver task, with feature `tokio`) reads every queued event
//! and [`Router::route`]s it to the slot of its id, by the uid the kernel
//! echoes (a CONNECT_REQUEST goes to its listener's slot, with the new id
//! in it); each id's owner takes its events from its own slot.
//!
//! - An event that comes before its owner polls waits in the slot, in the
//!   order the kernel reported it.
//! - An event for a uid without a slot (its owner went) is dropped, which
//!   drops what it holds: a CONNECT_REQUEST's new id is destroyed then.
//! - [`Router::close`] drops a slot's queued events (and the ids they
//!   hold: DESTROY_ID never waits in rverbs) and nothing of another slot.
//! - Taking an event holds no state outside the slot: a future dropped at
//!   any point loses nothing.
//!
//! The slots are behind one mutex, taken once per event routed and once
//! per poll of an owner: CM events are the control path (thousands a
//! second at most), never a post or a poll of a queue. A slot's queue
//! allocates when it first grows, not per event.

// Its users are the tokio-only types (and the host tests).
#![cfg_attr(not(feature = "tokio"), allow(dead_code))]

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use rverbs_providers::{Errno, Error};

use super::EventSource;
use crate::cm::UidHash;
use crate::Result;

/// What the router needs of an event: the uid of the id whose slot it
/// goes to.
pub(crate) trait Routed {
    /// The uid whose owner takes this event.
    fn route_uid(&self) -> u64;
}

impl Routed for crate::cm::Event {
    /// A CONNECT_REQUEST belongs to its listener; every other event to
    /// the id it names.
    fn route_uid(&self) -> u64 {
        match self.listen_id() {
            Some(l) => l.uid(),
            None => self.id().uid(),
        }
    }
}

/// One id's events, read and not yet taken, and its owner's waker.
#[derive(Debug)]
struct Slot<E> {
    queue: VecDeque<E>,
    waker: Option<Waker>,
}

#[derive(Debug)]
struct Slots<E> {
    map: HashMap<u64, Slot<E>, UidHash>,
    /// Reading the channel failed for good: every owner with an empty
    /// slot gets this error.
    failed: Option<Error>,
}

/// The channel (`source`) and the slots of the ids on it.
#[derive(Debug)]
pub(crate) struct Router<S: EventSource> {
    pub(crate) source: S,
    slots: Mutex<Slots<S::Event>>,
}

impl<S: EventSource> Router<S>
where
    S::Event: Routed,
{
    pub(crate) fn new(source: S) -> Self {
        Router { source, slots: Mutex::new(Slots { map: HashMap::with_hasher(UidHash), failed: None }) }
    }

    fn lock(&self) -> MutexGuard<'_, Slots<S::Event>> {
        // A panic while holding the lock leaves whole queues: nothing to repair.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts keeping `uid`'s events (before the command that makes the
    /// kernel report any: CREATE_ID's first request, ACCEPT for a
    /// listener's new id). False if it already was.
    pub(crate) fn open(&self, uid: u64) -> bool {
        let mut s = self.lock();
        if s.map.contains_key(&uid) {
            return false;
        }
        s.map.insert(uid, Slot { queue: VecDeque::new(), waker: None });
        true
    }

    /// Stops keeping `uid`'s events and drops those queued (outside the
    /// lock: dropping an event may destroy the id it holds); returns how
    /// many were dropped.
    pub(crate) fn close(&self, uid: u64) -> usize {
        let slot = self.lock().map.remove(&uid);
        let n = slot.as_ref().map_or(0, |s| s.queue.len());
        if n > 0 {
            tracing::debug!(uid, events = n, "CM id's owner went with events unread: dropped");
        }
        drop(slot);
        n
    }

    /// Hands `ev` to its id's slot and wakes the owner; false (and `ev`
    /// dropped, outside the lock) when no slot has its uid.
    pub(crate) fn route(&self, ev: S::Event) -> bool {
        let uid = ev.route_uid();
        let (waker, unrouted) = {
            let mut s = self.lock();
            match s.map.get_mut(&uid) {
                Some(slot) => {
                    slot.queue.push_back(ev);
                    (slot.waker.take(), None)
                }
                None => (None, Some(ev)),
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
        match unrouted {
            Some(ev) => {
                tracing::debug!(uid, "CM event for an id without an owner here: dropped");
                drop(ev);
                false
            }
            None => true,
        }
    }

    /// Reads every event queued on the channel (until it is empty) and
    /// routes each; how many were read.
    pub(crate) fn drain(&self) -> Result<usize> {
        let mut n = 0;
        while let Some(ev) = self.source.try_next()? {
            self.route(ev);
            n += 1;
        }
        Ok(n)
    }

    /// Reading failed for good: every owner that waits, and every later
    /// poll of an empty slot, gets `e`.
    pub(crate) fn fail(&self, e: Error) {
        let wakers: Vec<Waker> = {
            let mut s = self.lock();
            s.failed = Some(e);
            s.map.values_mut().filter_map(|slot| slot.waker.take()).collect()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// `uid`'s next event; when none is queued, `cx`'s waker is kept to be
    /// woken when one is routed, and `Pending`.
    pub(crate) fn poll_take(&self, uid: u64, cx: &mut Context<'_>) -> Poll<Result<S::Event>> {
        let mut s = self.lock();
        let failed = s.failed.clone();
        let Some(slot) = s.map.get_mut(&uid) else {
            return Poll::Ready(Err(Error::check("rdma_get_cm_event", Errno::ENOENT)
                .with_message("the CM id's events are no longer routed to this owner")));
        };
        if let Some(ev) = slot.queue.pop_front() {
            return Poll::Ready(Ok(ev));
        }
        if let Some(e) = failed {
            return Poll::Ready(Err(e));
        }
        if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            slot.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Events queued for `uid`.
    #[cfg(test)]
    pub(crate) fn queued(&self, uid: u64) -> usize {
        self.lock().map.get(&uid).map_or(0, |s| s.queue.len())
    }

    /// Ids with a slot.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.lock().map.len()
    }
}
