//! A spin lock for critical sections of a few instructions, where
//! `std::sync::Mutex` costs more than the work it guards: its poison checks
//! read the global panic count on both ends, and its release is a swap
//! plus a test for sleepers (about 19 instructions per lock and unlock).
//!
//! Its users: the C library's queues (rdma-core's providers take
//! `pthread_spin_lock` around every post and poll of librxe and libmlx5,
//! and the C API lets two threads post to one QP or poll one CQ at once),
//! its channel reference counts, the object pools (`pool.rs`: the C
//! library's objects, rverbs' shared QPs), and rverbs' registry of QP
//! handles (three lock round trips per QP create and destroy). Uncontended,
//! the usual case, taking it is one atomic swap (or one `lock bts`) and
//! releasing it one store. Nothing is poisoned: a holder that panics
//! releases the lock as its guard drops, and each user keeps its value
//! consistent at every step (the C library aborts on a panic anyway). Under
//! contention the waiter spins with `spin_loop` hints and yields its CPU
//! every `SPINS` (128) tries, so a holder that was preempted gets to run.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

/// Tries between two `sched_yield`s of a waiting thread.
const SPINS: u32 = 128;

/// A value that one thread at a time may reach, through [`SpinLock::lock`].
pub struct SpinLock<T> {
    locked: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands the value to one thread at a time (acquire on
// taking it, release on giving it back), as `std::sync::Mutex` does: sharing
// the lock is sound when the value may move between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A lock, free, around `value`.
    pub const fn new(value: T) -> Self {
        SpinLock { locked: AtomicU32::new(0), value: UnsafeCell::new(value) }
    }

    /// Waits for the value and holds it until the guard drops.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if self.take() {
            self.wait();
        }
        SpinGuard { lock: self, _value: PhantomData }
    }

    /// The value if no one holds it, else `None` at once (one atomic swap):
    /// for a hot path that hands the contended case to a function of its own.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        if self.take() {
            return None;
        }
        Some(SpinGuard { lock: self, _value: PhantomData })
    }

    /// [`try_lock`](Self::try_lock) in two instructions, for a function
    /// that makes no call while it holds the lock (the C library's empty
    /// poll): a `fetch_or` whose result is tested for bit 0 alone is one
    /// `lock bts`, branched on by its carry, where a swap is four (a move,
    /// the `xchg`, a test, the branch). But LLVM's `bts` takes the lock
    /// word's address as a value, which then stays in a register until the
    /// release: one `lea`, and in a function that holds the lock across
    /// calls a spill and a reload too (`post_recv`: 2 instructions more
    /// than with the swap, measured). A word, not a byte: `bts` has no
    /// 8-bit form.
    #[inline]
    pub fn try_lock_bts(&self) -> Option<SpinGuard<'_, T>> {
        // Acquire: what the last holder wrote before its release is visible.
        if self.locked.fetch_or(1, Ordering::Acquire) & 1 != 0 {
            return None;
        }
        Some(SpinGuard { lock: self, _value: PhantomData })
    }

    /// Sets the lock word; true if it was already set (another holds it).
    #[inline(always)]
    fn take(&self) -> bool {
        // Acquire: what the last holder wrote before its release is visible.
        self.locked.swap(1, Ordering::Acquire) != 0
    }

    #[cold]
    #[inline(never)]
    fn wait(&self) {
        let mut tries = 0u32;
        loop {
            // Spin on a plain load (no cache-line ping-pong), then try again.
            while self.locked.load(Ordering::Relaxed) != 0 {
                tries += 1;
                if tries % SPINS == 0 {
                    std::thread::yield_now();
                } else {
                    core::hint::spin_loop();
                }
            }
            if !self.take() {
                return;
            }
        }
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for SpinLock<T> {
    /// The value if the lock is free now (it is taken for the print), as
    /// `Mutex`'s `Debug` does.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut d = f.debug_struct("SpinLock");
        match self.try_lock() {
            Some(g) => d.field("value", &&*g),
            None => d.field("value", &format_args!("<locked>")),
        };
        d.finish()
    }
}

/// The value of a [`SpinLock`], held. One pointer (`repr(transparent)`),
/// so an `extern "C"` function may take it by value (the C library's poll
/// hands the held lock to a function that cannot unwind).
#[repr(transparent)]
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Shared across threads only where `&T` may be (`T: Sync`), as
    /// `std::sync::MutexGuard`; the lock reference alone would make it
    /// `Sync` for any `T: Send`.
    _value: PhantomData<&'a mut T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock, so
        // no other reference to the value is live.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only
        // reference the guard hands out.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: the holder's writes are visible to the next one.
        self.lock.locked.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::SpinLock;

    #[test]
    fn hands_the_value_to_one_thread_at_a_time() {
        let lock = SpinLock::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        // A read-modify-write that loses counts unless the
                        // lock excludes the other threads.
                        let mut g = lock.lock();
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                });
            }
        });
        assert_eq!(lock.value.into_inner(), 40_000);
    }

    #[test]
    fn try_lock_fails_while_held_and_succeeds_after() {
        let lock = SpinLock::new(1u8);
        let g = lock.lock();
        assert!(lock.try_lock().is_none());
        drop(g);
        let g = lock.try_lock().expect("free after the guard dropped");
        assert_eq!(*g, 1);
    }

    #[test]
    fn try_lock_bts_excludes_as_the_swap_does() {
        let lock = SpinLock::new(2u8);
        let g = lock.try_lock_bts().expect("free at first");
        assert!(lock.try_lock_bts().is_none() && lock.try_lock().is_none());
        drop(g);
        let g = lock.try_lock().expect("free after the bts guard dropped");
        assert!(lock.try_lock_bts().is_none(), "held through the swap");
        drop(g);
        assert_eq!(*lock.try_lock_bts().expect("free again"), 2);
    }

    #[test]
    fn a_second_lock_waits_for_the_first_guard() {
        let lock = SpinLock::new(Vec::new());
        let g = lock.lock();
        std::thread::scope(|s| {
            let t = s.spawn(|| lock.lock().push(2));
            std::thread::sleep(std::time::Duration::from_millis(20));
            // The other thread cannot have pushed while `g` is held.
            drop({
                let mut g = g;
                assert!(g.is_empty());
                g.push(1);
                g
            });
            t.join().unwrap();
        });
        assert_eq!(lock.value.into_inner(), vec![1, 2]);
    }
}
