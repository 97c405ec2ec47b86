//! Object memory in pools: one [`Pool`] per kind of object, its slots
//! carved out of chunks of about 16 KiB (or a size the pool is made
//! with), a destroyed object's slot going back to its kind's free list for
//! the next create of that kind. The C library keeps its objects (`ibv_pd`, `ibv_qp`, ... and what
//! it keeps with each) in pools; rverbs its shared QPs, through a
//! [`PoolArc`], a reference-counted handle as `Arc` is.
//!
//! Why not a `Box` each: glibc's `malloc` of a fresh block of these sizes
//! takes about 180 instructions, and its `free` 110 to 170 once its
//! per-thread cache of the size is full, so a program that creates a
//! hundred objects and then destroys them pays both on nearly every one:
//! the scale bench (issue 35) counted them as most of what the C library
//! added to rverbs' own cost per object, and as a QP's largest single
//! cost in both libraries. A slot here costs the spin lock, a
//! pop or a bump, and the release.
//!
//! A kind's pool keeps the memory of its destroyed objects for later ones,
//! as malloc keeps freed memory in its arenas: it holds at most its peak
//! count of live objects, rounded up to a chunk.
//!
//! A pool's lock is a spin lock held for a few instructions. A child that
//! `fork()` made while another thread of the parent held it would find it
//! held for ever, as with any lock but glibc's own `malloc` locks (which
//! glibc resets in the child): the child of a multithreaded process should
//! keep to async-signal-safe calls until it `exec`s, as POSIX asks, and
//! creating or destroying a QP is not one.

use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::mem::{align_of, size_of};
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{fence, AtomicUsize, Ordering};

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
pub struct Pool<T> {
    state: SpinLock<State>,
    /// Slots per chunk.
    slots: usize,
    kind: PhantomData<fn() -> T>,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Pool<T> {
    /// A free slot holds a [`Free`] where the `T` was.
    const FITS: () = assert!(size_of::<T>() >= size_of::<Free>() && align_of::<T>() >= align_of::<Free>());

    /// A pool of chunks of about 16 KiB.
    pub const fn new() -> Self {
        Self::with_chunk_bytes(CHUNK_BYTES)
    }

    /// A pool of chunks of about `bytes` (at least one slot): smaller for
    /// small objects that a program may have a few of, so that its heap
    /// grows about as it would with a block each.
    pub const fn with_chunk_bytes(bytes: usize) -> Self {
        let slots = if size_of::<T>() >= bytes { 1 } else { bytes / size_of::<T>() };
        Pool {
            state: SpinLock::new(State { free: core::ptr::null_mut(), next: core::ptr::null_mut(), left: 0 }),
            slots,
            kind: PhantomData,
        }
    }

    /// Moves `value` into a slot of its own; [`free`](Self::free) takes it
    /// back. Aborts, as `Box::new` does, when no memory is left.
    #[inline]
    pub fn alloc(&self, value: T) -> *mut T {
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
    #[inline]
    pub fn alloc_uninit(&self) -> *mut T {
        let () = Self::FITS;
        self.slot()
    }

    #[inline]
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
            self.new_chunk(&mut s);
        }
        let p = s.next;
        // SAFETY: `left` slots of `size_of::<T>()` bytes remain from `next`
        // in its chunk, so this stays inside it or reaches its end.
        s.next = unsafe { p.add(size_of::<T>()) };
        s.left -= 1;
        p.cast()
    }

    /// A fresh chunk, its slots all left to carve. Out of line: once per
    /// chunk, and kept out of the creates that inline [`slot`](Self::slot).
    #[cold]
    #[inline(never)]
    fn new_chunk(&self, s: &mut State) {
        let Ok(layout) = Layout::from_size_align(size_of::<T>() * self.slots, align_of::<T>()) else {
            std::alloc::handle_alloc_error(Layout::new::<T>())
        };
        // SAFETY: the layout's size is at least `size_of::<Free>()`, not
        // zero (`FITS`).
        let chunk = unsafe { std::alloc::alloc(layout) };
        if chunk.is_null() {
            std::alloc::handle_alloc_error(layout)
        }
        s.next = chunk;
        s.left = self.slots;
    }

    /// Drops the object at `p` and gives its slot back to the pool.
    ///
    /// # Safety
    /// `p` came from this pool's [`alloc`](Self::alloc), has not been
    /// freed, and nothing uses it afterwards (as `Box::from_raw` + drop).
    #[inline]
    pub unsafe fn free(&self, p: *mut T) {
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
    #[inline]
    pub unsafe fn free_uninit(&self, p: *mut T) {
        let f = p.cast::<Free>();
        let mut s = self.state.lock();
        // SAFETY: the slot is this pool's, no longer holds a value, and is
        // large and aligned enough for a `Free` (`FITS`).
        unsafe { f.write(Free { next: s.free }) };
        s.free = f;
    }
}

/// What a [`PoolArc`]'s slot holds: the count of its handles, the pool it
/// goes back to, the value.
pub struct ArcSlot<T: 'static> {
    count: AtomicUsize,
    pool: &'static Pool<ArcSlot<T>>,
    value: T,
}

/// A reference-counted handle to a `T` in a slot of a pool of the caller's
/// (a `static`), as `Arc` is to a `T` in a `malloc` block: cloned, the
/// count goes up; the last handle dropped drops the value and gives the
/// slot back. No weak handles. For objects that a program creates and
/// destroys by the hundred (rverbs' shared QP), where `malloc` and `free`
/// were about 240 instructions of each.
pub struct PoolArc<T: 'static> {
    slot: NonNull<ArcSlot<T>>,
}

// SAFETY: as `Arc<T>`: a handle gives `&T` to any thread holding one, and
// the last one drops the `T` on whichever thread drops it.
unsafe impl<T: Send + Sync> Send for PoolArc<T> {}
// SAFETY: as `Arc<T>`.
unsafe impl<T: Send + Sync> Sync for PoolArc<T> {}

/// Handles past this many abort, as `Arc`'s do: the count cannot wrap.
const MAX_COUNT: usize = isize::MAX as usize;

impl<T: 'static> PoolArc<T> {
    /// Moves `value` into a slot of `pool`; the one handle.
    #[inline]
    pub fn new(pool: &'static Pool<ArcSlot<T>>, value: T) -> Self {
        let slot = pool.alloc(ArcSlot { count: AtomicUsize::new(1), pool, value });
        // SAFETY: `alloc` never returns null (it aborts when out of memory).
        PoolArc { slot: unsafe { NonNull::new_unchecked(slot) } }
    }

    fn inner(&self) -> &ArcSlot<T> {
        // SAFETY: the slot holds a live `ArcSlot` while any handle exists
        // (this one counts), and is only read through shared references
        // but by `get_mut`, which needs the only handle.
        unsafe { self.slot.as_ref() }
    }

    /// The value, mutably, if this is its only handle (`Arc::get_mut`).
    #[inline]
    pub fn get_mut(this: &mut Self) -> Option<&mut T> {
        // Acquire: the other handles' last uses, before their drops'
        // release decrements, happen before this access.
        if this.inner().count.load(Ordering::Acquire) == 1 {
            // SAFETY: no other handle exists and `this` is borrowed
            // mutably, so no other reference to the value can exist or be
            // made while this one lives.
            Some(unsafe { &mut (*this.slot.as_ptr()).value })
        } else {
            None
        }
    }

    /// Both handles name the same value (`Arc::ptr_eq`).
    #[inline]
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.slot == b.slot
    }

    /// The last handle is gone: the value is dropped, its slot freed.
    #[cold]
    #[inline(never)]
    fn drop_slow(&mut self) {
        let pool = self.inner().pool;
        // SAFETY: the slot came from `pool` (`new`), holds a live value,
        // and no handle is left to reach it.
        unsafe { pool.free(self.slot.as_ptr()) };
    }
}

impl<T: 'static> Clone for PoolArc<T> {
    #[inline]
    fn clone(&self) -> Self {
        // Relaxed: a new handle is made from one that keeps the value
        // alive, as `Arc::clone`.
        if self.inner().count.fetch_add(1, Ordering::Relaxed) > MAX_COUNT {
            std::process::abort();
        }
        PoolArc { slot: self.slot }
    }
}

impl<T: 'static> Drop for PoolArc<T> {
    #[inline]
    fn drop(&mut self) {
        // Release: this handle's uses happen before the last handle's drop
        // of the value; that drop's acquire fence pairs with it (`Arc`).
        if self.inner().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        self.drop_slow();
    }
}

impl<T: 'static> Deref for PoolArc<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T: fmt::Debug + 'static> fmt::Debug for PoolArc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
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
        let n = 3 * pool.slots + 7;
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

    /// The pool of the `PoolArc` tests' values.
    static ARC_SLOTS: Pool<super::ArcSlot<(u64, std::sync::Arc<AtomicUsize>)>> = Pool::new();

    #[test]
    fn a_pool_arc_drops_its_value_once_with_the_last_handle() {
        use super::PoolArc;
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        let a = PoolArc::new(&ARC_SLOTS, (5, drops.clone()));
        let b = a.clone();
        assert!(PoolArc::ptr_eq(&a, &b));
        assert_eq!(b.0, 5);
        drop(a);
        assert_eq!(std::sync::Arc::strong_count(&drops), 2, "a handle is left: the value lives");
        drop(b);
        assert_eq!(std::sync::Arc::strong_count(&drops), 1, "the last handle dropped the value");
        let c = PoolArc::new(&ARC_SLOTS, (6, drops.clone()));
        let d = PoolArc::new(&ARC_SLOTS, (7, drops.clone()));
        assert!(!PoolArc::ptr_eq(&c, &d));
        assert_eq!((c.0, d.0), (6, 7));
    }

    #[test]
    fn a_pool_arc_is_mutable_only_through_its_only_handle() {
        use super::PoolArc;
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        let mut a = PoolArc::new(&ARC_SLOTS, (1, drops));
        let b = a.clone();
        assert!(PoolArc::get_mut(&mut a).is_none(), "another handle exists");
        drop(b);
        PoolArc::get_mut(&mut a).expect("the only handle").0 = 2;
        assert_eq!(a.0, 2);
    }

    #[test]
    fn pool_arcs_cloned_and_dropped_across_threads_drop_each_value_once() {
        use super::PoolArc;
        let live = std::sync::Arc::new(AtomicUsize::new(0));
        for round in 0..50u64 {
            let a = PoolArc::new(&ARC_SLOTS, (round, live.clone()));
            std::thread::scope(|s| {
                for _ in 0..4 {
                    let mine = a.clone();
                    s.spawn(move || {
                        let more: Vec<_> = (0..8).map(|_| mine.clone()).collect();
                        assert!(more.iter().all(|h| h.0 == round));
                    });
                }
            });
            assert_eq!(std::sync::Arc::strong_count(&live), 2, "only `a` holds its value");
            drop(a);
            assert_eq!(std::sync::Arc::strong_count(&live), 1);
        }
    }
}
