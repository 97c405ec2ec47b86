//! libibverbs' destroy/acknowledge contract: `ibv_destroy_qp`, `_cq` and
//! `_srq` return only once every event the kernel reported for the object
//! has been acknowledged (`ibv_ack_async_event`, `ibv_ack_cq_events`), as
//! rdma-core 44's `ibv_cmd_destroy_*` wait on the object's condition
//! variable. Until then the object stays in the context's handle table, so
//! an event read while the destroy runs still names it, and an
//! acknowledgement never writes freed memory.
//!
//! The kernel counts an event as reported when a `read()` hands it to user
//! space, and drops the unread ones of an object it destroys, so the counts
//! its destroy answers are exact: an event another thread has read but not
//! yet returned to its caller is among them, and the destroy waits for it.

use std::sync::{Condvar, Mutex, PoisonError};

/// The acknowledgements of one object's events.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    acked: Mutex<Acked>,
    changed: Condvar,
}

#[derive(Clone, Copy, Debug, Default)]
struct Acked {
    async_: u32,
    comp: u32,
    /// Destroys sleeping in [`Acks::wait_for`]: an acknowledgement wakes
    /// them only when there are some (a notify is a `futex` syscall even
    /// with nobody waiting, once per `ibv_ack_cq_events` otherwise).
    waiting: u32,
}

/// `want` not yet reached by `have` (modulo 2^32, as the kernel's counters wrap).
fn behind(have: u32, want: u32) -> bool {
    (want.wrapping_sub(have) as i32) > 0
}

impl Acks {
    /// Counts `n` async events acknowledged and mirrors the count into the
    /// C object's field (`ibv_qp`/`ibv_srq.events_completed`,
    /// `ibv_cq.async_events_completed`).
    ///
    /// # Safety
    /// `field` points at that counter of the live C object that owns `self`.
    pub(crate) unsafe fn ack_async(&self, n: u32, field: *mut u32) {
        let mut a = self.acked.lock().unwrap_or_else(PoisonError::into_inner);
        a.async_ = a.async_.wrapping_add(n);
        // SAFETY: by the contract; written only here, under `acked`.
        unsafe { field.write(a.async_) };
        self.wake(&a);
    }

    /// Counts `n` completion events acknowledged, mirrored into
    /// `ibv_cq.comp_events_completed`.
    ///
    /// # Safety
    /// As [`ack_async`](Self::ack_async).
    pub(crate) unsafe fn ack_comp(&self, n: u32, field: *mut u32) {
        let mut a = self.acked.lock().unwrap_or_else(PoisonError::into_inner);
        a.comp = a.comp.wrapping_add(n);
        // SAFETY: by the contract; written only here, under `acked`.
        unsafe { field.write(a.comp) };
        self.wake(&a);
    }

    /// Wakes the waiting destroys, if any (`a`: the counts, locked).
    fn wake(&self, a: &Acked) {
        if a.waiting > 0 {
            self.changed.notify_all();
        }
    }

    /// Sleeps until the acknowledgements reach the counts the kernel's
    /// destroy reported. More acknowledgements than events (a caller's
    /// bug, on which rdma-core sleeps for good) end the wait too.
    #[inline]
    pub(crate) fn wait_for(&self, async_reported: u32, comp_reported: u32) {
        if async_reported == 0 && comp_reported == 0 {
            // No event was read for the object (the usual destroy): none to
            // wait for, and no lock taken. (Exactly 2^32 of them would read
            // as none too; the kernel's counters are 32 bits.)
            return;
        }
        self.wait_slow(async_reported, comp_reported);
    }

    /// [`wait_for`](Self::wait_for) when events were reported: out of
    /// line, so that the usual destroy pays one compare.
    #[cold]
    #[inline(never)]
    fn wait_slow(&self, async_reported: u32, comp_reported: u32) {
        let mut a = self.acked.lock().unwrap_or_else(PoisonError::into_inner);
        a.waiting += 1;
        let mut a = self
            .changed
            .wait_while(a, |a| behind(a.async_, async_reported) || behind(a.comp, comp_reported))
            .unwrap_or_else(PoisonError::into_inner);
        a.waiting -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destroy_waits_for_the_last_acknowledgement() {
        let acks = std::sync::Arc::new(Acks::default());
        let mut field = 0u32;
        let field_at = core::ptr::addr_of_mut!(field) as usize;
        let a = acks.clone();
        let acker = std::thread::spawn(move || {
            for _ in 0..3 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                // SAFETY: `field` outlives the thread (joined below), and
                // only this thread writes it meanwhile.
                unsafe { a.ack_async(1, field_at as *mut u32) };
            }
        });
        acks.wait_for(3, 0);
        let acked = acks.acked.lock().unwrap().async_;
        acker.join().unwrap();
        assert_eq!(acked, 3, "the wait ended only after the third");
        assert_eq!(field, 3, "mirrored into the C field");
    }

    #[test]
    fn counters_compare_across_the_wrap() {
        assert!(behind(u32::MAX, 1));
        assert!(!behind(1, u32::MAX));
        assert!(!behind(5, 5));
    }
}
