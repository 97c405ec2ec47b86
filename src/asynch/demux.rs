//! The per-channel demultiplexer: completion events read from a channel,
//! handed to the waiter of the CQ each one names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Wake, Waker};

/// Events read from the channel and not yet taken, and the waker of the
/// task waiting, per attached CQ (`user_handle`).
///
/// It is also the waker the reactor holds for the channel's fd (through
/// [`Wake`]): when the fd becomes readable it wakes the waiter of *every*
/// attached CQ, whichever of them then reads the events hands each to its
/// CQ. A reactor that keeps only the last waker registered for an fd
/// (tokio does) can therefore never forget a waiter: the waker it keeps is
/// always this one, whichever task registered it, and whether or not that
/// task still waits.
#[derive(Debug, Default)]
pub(crate) struct Demux {
    slots: Mutex<HashMap<u64, Slot>>,
}

#[derive(Debug, Default)]
struct Slot {
    /// Events read for this CQ, not yet taken by its waiter.
    events: u32,
    /// The task waiting for this CQ, if one is.
    waker: Option<Waker>,
}

impl Demux {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Slot>> {
        // A panic while holding the lock leaves counts that are still
        // whole numbers: nothing to repair.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts routing the events of CQ `handle`; false if it already was.
    pub(crate) fn attach(&self, handle: u64) -> bool {
        let mut m = self.lock();
        if m.contains_key(&handle) {
            return false;
        }
        m.insert(handle, Slot::default());
        true
    }

    /// Stops routing CQ `handle`'s events (its `AsyncCq` went).
    pub(crate) fn detach(&self, handle: u64) {
        self.lock().remove(&handle);
    }

    /// Takes the events read for `handle`. When there are none, records
    /// `waker` as the one to wake when one is, and returns 0.
    pub(crate) fn take(&self, handle: u64, waker: &Waker) -> u32 {
        let mut m = self.lock();
        let Some(s) = m.get_mut(&handle) else { return 0 };
        if s.events > 0 {
            s.waker = None;
            return std::mem::take(&mut s.events);
        }
        if !s.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            s.waker = Some(waker.clone());
        }
        0
    }

    /// An event for `handle` was read: counts it and wakes the CQ's
    /// waiter. False (the event is dropped) when no `AsyncCq` of this
    /// channel has that CQ.
    pub(crate) fn route(&self, handle: u64) -> bool {
        let waker = {
            let mut m = self.lock();
            let Some(s) = m.get_mut(&handle) else { return false };
            s.events = s.events.saturating_add(1);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        true
    }
}

impl Wake for Demux {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// The fd became readable: every waiter of the channel polls again
    /// (outside the lock: a waker may run code).
    fn wake_by_ref(self: &Arc<Self>) {
        let wakers: Vec<Waker> = self.lock().values_mut().filter_map(|s| s.waker.take()).collect();
        for w in wakers {
            w.wake();
        }
    }
}
