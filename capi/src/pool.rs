//! The memory of the C objects (`ibv_pd`, `ibv_mr`, `ibv_cq`, `ibv_qp`,
//! `ibv_srq`, `ibv_ah` and what this library keeps with each): one pool
//! per kind, its slots carved out of chunks of about [`CHUNK_BYTES`], a
//! destroyed object's slot going back to its kind's free list for the next
//! create of that kind.
//!
//! Why not a `Box` each: glibc's `malloc` of a fresh block of these sizes
//! takes about 180 instructions, and its `free` 110 to 170 once its
//! per-thread cache of the size is full, so a program that creates a
//! hundred objects and then destroys them pays both on nearly every one:
//! the scale bench (issue 35) counted them as most of what the C library
//! adds to rverbs' own cost per object. A slot here costs the spin lock, a
//! pop or a bump, and the release.
//!
//! A kind's pool keeps the memory of its destroyed objects for later ones,
//! as malloc keeps freed memory in its arenas: it holds at most its peak
//! count of live objects, rounded up to a chunk.

use core::alloc::Layout;
use core::marker::PhantomData;
use core::mem::{align_of, size_of};

use crate::spin::SpinLock;

/// About the size of one chunk of slots (at least one slot).
const CHUNK_BYTES: usize = 16 * 1024;

/// A free slot: the next free one of its pool, written over the slot.
struct Free {
    next: *mut Free,
}

/// A pool's free list and the uncarved rest of its newest chunk.
struct State {
    free: *mut Free,
    next: *mut u8,
    left: usize,
}

// SAFETY: the pointers name memory that belongs to the pool, not to any
// thread; the pool's lock hands the state to one thread at a time.
unsafe impl Send for State {}

/// The slots of the objects of type `T`. See the module.
pub(crate) struct Pool<T> {
    state: SpinLock<State>,
    kind: PhantomData<fn() -> T>,
}

impl<T> Pool<T> {
    /// Slots per chunk.
    const SLOTS: usize = if size_of::<T>() >= CHUNK_BYTES { 1 } else { CHUNK_BYTES / size_of::<T>() };
    /// A free slot holds a [`Free`] where the `T` was.
    const FITS: () = assert!(size_of::<T>() >= size_of::<Free>() && align_of::<T>() >= align_of::<Free>());

    pub(crate) const fn new() -> Self {
        Pool {
            state: SpinLock::new(State { free: core::ptr::null_mut(), next: core::ptr::null_mut(), left: 0 }),
            kind: PhantomData,
        }
    }

    /// Moves `value` into a slot of its own; [`free`](Self::free) takes it
    /// back. Aborts, as `Box::new` does, when no memory is left.
    #[inline]
    pub(crate) fn alloc(&self, value: T) -> *mut T {
        let () = Self::FITS;
        let slot = self.slot();
        // SAFETY: `slot` is valid for a write of a `T`, aligned for it, and
        // no one else's (popped from the free list or freshly carved).
        unsafe { slot.write(value) };
        slot
    }

    /// A slot of its own for a `T`, not yet written: the caller writes
    /// every field there before anything reads the slot or
    /// [`free`](Self::free) drops it. For a large `T` built from its parts,
    /// which [`alloc`](Self::alloc) would copy from its argument (a
    /// `memcpy` past 128 bytes). Aborts when no memory is left.
    pub(crate) fn alloc_uninit(&self) -> *mut T {
        let () = Self::FITS;
        self.slot()
    }

    fn slot(&self) -> *mut T {
        let mut s = self.state.lock();
        if !s.free.is_null() {
            let f = s.free;
            // SAFETY: every entry of the free list is a slot of this pool
            // into which `free` wrote a `Free`, and the lock is held.
            s.free = unsafe { (*f).next };
            return f.cast();
        }
        if s.left == 0 {
            let Ok(layout) = Layout::from_size_align(size_of::<T>() * Self::SLOTS, align_of::<T>()) else {
                std::alloc::handle_alloc_error(Layout::new::<T>())
            };
            // SAFETY: the layout's size is at least `size_of::<Free>()`,
            // not zero (`FITS`).
            let chunk = unsafe { std::alloc::alloc(layout) };
            if chunk.is_null() {
                std::alloc::handle_alloc_error(layout)
            }
            s.next = chunk;
            s.left = Self::SLOTS;
        }
        let p = s.next;
        // SAFETY: `left` slots of `size_of::<T>()` bytes remain from `next`
        // in its chunk, so this stays inside it or reaches its end.
        s.next = unsafe { p.add(size_of::<T>()) };
        s.left -= 1;
        p.cast()
    }

    /// Drops the object at `p` and gives its slot back to the pool.
    ///
    /// # Safety
    /// `p` came from this pool's [`alloc`](Self::alloc), has not been
    /// freed, and nothing uses it afterwards (as `Box::from_raw` + drop).
    pub(crate) unsafe fn free(&self, p: *mut T) {
        // SAFETY: by the contract, a live `T` that no one uses after this.
        unsafe { p.drop_in_place() };
        // SAFETY: by the contract; the value is dropped.
        unsafe { self.free_uninit(p) };
    }

    /// Gives a slot back to the pool without dropping anything in it: one
    /// from [`alloc_uninit`](Self::alloc_uninit) that was never written
    /// (a create that failed after it took its slot).
    ///
    /// # Safety
    /// `p` came from this pool, holds no value that needs dropping, is not
    /// in the pool already, and nothing uses it afterwards.
    pub(crate) unsafe fn free_uninit(&self, p: *mut T) {
        let f = p.cast::<Free>();
        let mut s = self.state.lock();
        // SAFETY: the slot is this pool's, no longer holds a value, and is
        // large and aligned enough for a `Free` (`FITS`).
        unsafe { f.write(Free { next: s.free }) };
        s.free = f;
    }
}

#[cfg(test)]
mod tests {
    use super::Pool;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted<'a>(u64, [u64; 5], &'a AtomicUsize);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.2.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_freed_slot_is_dropped_and_given_to_the_next_alloc() {
        let drops = AtomicUsize::new(0);
        let pool = Pool::new();
        let a = pool.alloc(Counted(1, [0; 5], &drops));
        let b = pool.alloc(Counted(2, [0; 5], &drops));
        assert_ne!(a, b);
        // SAFETY: `a` and `b` are live slots of `pool`.
        unsafe {
            assert_eq!(((*a).0, (*b).0), (1, 2));
            pool.free(a);
        }
        assert_eq!(drops.load(Ordering::Relaxed), 1, "free drops the value");
        let c = pool.alloc(Counted(3, [0; 5], &drops));
        assert_eq!(c, a, "the freed slot is reused");
        // SAFETY: live slots of `pool`.
        unsafe {
            assert_eq!(((*b).0, (*c).0), (2, 3));
            pool.free(b);
            pool.free(c);
        }
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn an_unwritten_slot_given_back_drops_nothing_and_is_reused() {
        let drops = AtomicUsize::new(0);
        let pool = Pool::<Counted<'_>>::new();
        let a = pool.alloc_uninit();
        // SAFETY: `a` is a slot of `pool`, never written.
        unsafe { pool.free_uninit(a) };
        assert_eq!(drops.load(Ordering::Relaxed), 0, "nothing was in it to drop");
        let b = pool.alloc(Counted(7, [0; 5], &drops));
        assert_eq!(b, a, "the slot is reused");
        // SAFETY: a live slot of `pool`.
        unsafe { pool.free(b) };
        assert_eq!(drops.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn slots_across_chunks_are_distinct_and_keep_their_values() {
        let drops = AtomicUsize::new(0);
        let pool = Pool::new();
        // Several chunks' worth (a `Counted` is 56 bytes: 292 per chunk).
        let n = 3 * Pool::<Counted>::SLOTS + 7;
        let slots: Vec<_> = (0..n as u64).map(|i| pool.alloc(Counted(i, [i; 5], &drops))).collect();
        let mut sorted: Vec<usize> = slots.iter().map(|p| p.addr()).collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), n, "no slot handed out twice");
        for (i, &p) in slots.iter().enumerate() {
            assert_eq!(p.addr() % core::mem::align_of::<Counted>(), 0);
            // SAFETY: live slots of `pool`.
            unsafe {
                assert_eq!((*p).0, i as u64);
                assert_eq!((*p).1, [i as u64; 5]);
            }
        }
        for &p in &slots {
            // SAFETY: each is freed once.
            unsafe { pool.free(p) };
        }
        assert_eq!(drops.load(Ordering::Relaxed), n);
    }

    #[test]
    fn threads_never_share_a_slot() {
        let drops = AtomicUsize::new(0);
        let pool = Pool::new();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (pool, drops) = (&pool, &drops);
                s.spawn(move || {
                    for round in 0..200u64 {
                        let mine: Vec<_> =
                            (0..16).map(|i| pool.alloc(Counted(t << 32 | round << 8 | i, [t; 5], drops))).collect();
                        for (i, &p) in mine.iter().enumerate() {
                            // SAFETY: this thread's live slots: another
                            // thread writing one would change the value.
                            unsafe {
                                assert_eq!((*p).0, t << 32 | round << 8 | i as u64);
                                pool.free(p);
                            }
                        }
                    }
                });
            }
        });
        assert_eq!(drops.load(Ordering::Relaxed), 4 * 200 * 16);
    }
}
