//! A context's table of its C objects (CQs, QPs, SRQs) by rverbs
//! `user_handle`, for `ibv_get_cq_event` and the `element` of async events.
//!
//! rverbs' handles are a slot index in their low 32 bits (a generation in
//! the high ones, never 0), the slots reused as objects come and go, so the
//! table is first a vector indexed the same way: an insert, a lookup and a
//! remove are an index and a compare, where a `HashMap` cost about 65
//! instructions per insert and as many per remove in the scale bench
//! (issue #35). Any other handle (0, a large index, or one whose slot is
//! taken) goes to a `HashMap` beside it, so the table stays exact whatever
//! the handles look like.

use std::collections::HashMap;

/// Handles whose low 32 bits reach this index go to the map, not the
/// vector: a vector entry is 16 bytes, so it never passes 4 MiB.
const DIRECT: usize = 1 << 18;

/// A C object's address by its rverbs `user_handle`. See the module.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    /// By the handle's low 32 bits: `(handle, object)`, `(0, 0)` when free.
    direct: Vec<(u64, usize)>,
    /// The handles [`direct`](Self::direct) does not take.
    other: HashMap<u64, usize, HandleHash>,
}

impl Objects {
    /// An empty table with room for `n` objects before it first grows.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Objects { direct: Vec::with_capacity(n), other: HashMap::default() }
    }

    /// The vector index of `h`, if it may sit there at all.
    #[inline]
    fn index(h: u64) -> Option<usize> {
        let i = h as u32 as usize;
        (h != 0 && i < DIRECT).then_some(i)
    }

    /// Records `obj` as the object of `h` (replacing what `h` had).
    #[inline]
    pub(crate) fn insert(&mut self, h: u64, obj: usize) {
        let Some(i) = Self::index(h) else { return self.insert_other(h, obj) };
        let n = self.direct.len();
        if i < n {
            let e = &mut self.direct[i];
            if e.0 != 0 && e.0 != h {
                return self.insert_other(h, obj);
            }
            *e = (h, obj);
        } else {
            if i > n {
                self.direct.resize(i, (0, 0));
            }
            self.direct.push((h, obj));
        }
        if !self.other.is_empty() {
            // An older entry of `h`, from when its slot was taken.
            self.remove_other(h);
        }
    }

    /// [`insert`](Self::insert) into the map.
    #[cold]
    #[inline(never)]
    fn insert_other(&mut self, h: u64, obj: usize) {
        self.other.insert(h, obj);
    }

    /// Forgets `h`; nothing if it is not in the table.
    #[inline]
    pub(crate) fn remove(&mut self, h: u64) {
        if let Some(e) = Self::index(h).and_then(|i| self.direct.get_mut(i)) {
            if e.0 == h {
                *e = (0, 0);
                return;
            }
        }
        if !self.other.is_empty() {
            self.remove_other(h);
        }
    }

    /// [`remove`](Self::remove) from the map.
    #[cold]
    #[inline(never)]
    fn remove_other(&mut self, h: u64) {
        self.other.remove(&h);
    }

    /// The object of `h`, if it is in the table.
    #[inline]
    pub(crate) fn get(&self, h: u64) -> Option<usize> {
        if let Some(e) = Self::index(h).and_then(|i| self.direct.get(i)) {
            if e.0 == h {
                return Some(e.1);
            }
        }
        if self.other.is_empty() {
            return None;
        }
        self.other.get(&h).copied()
    }
}

/// Hashing of the table's map: one multiplication by a large odd
/// constant (Fibonacci hashing) spreads a handle over every bit, where
/// std's SipHash would spend about a hundred instructions on a key nobody
/// chose against us.
type HandleHash = core::hash::BuildHasherDefault<HandleHasher>;

/// See [`HandleHash`].
#[derive(Default)]
struct HandleHasher(u64);

impl core::hash::Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by `u64` keys; kept correct for any other.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An rverbs-style handle: generation `g`, slot `i`.
    fn h(g: u32, i: u32) -> u64 {
        u64::from(g) << 32 | u64::from(i)
    }

    #[test]
    fn rverbs_handles_are_found_until_removed() {
        let mut t = Objects::with_capacity(2);
        for i in 0..100 {
            t.insert(h(1, i), 1000 + i as usize);
        }
        for i in 0..100 {
            assert_eq!(t.get(h(1, i)), Some(1000 + i as usize));
            assert_eq!(t.get(h(2, i)), None, "another generation of the slot");
        }
        t.remove(h(1, 7));
        assert_eq!(t.get(h(1, 7)), None);
        t.remove(h(1, 7));
        t.insert(h(2, 7), 5);
        assert_eq!((t.get(h(2, 7)), t.get(h(1, 7))), (Some(5), None));
        assert!(t.other.is_empty(), "all in the vector");
    }

    #[test]
    fn a_slot_taken_by_another_handle_sends_the_new_one_to_the_map() {
        let mut t = Objects::with_capacity(0);
        t.insert(h(1, 3), 10);
        t.insert(h(9, 3), 20);
        assert_eq!((t.get(h(1, 3)), t.get(h(9, 3))), (Some(10), Some(20)));
        t.remove(h(1, 3));
        assert_eq!((t.get(h(1, 3)), t.get(h(9, 3))), (None, Some(20)));
        t.insert(h(9, 3), 30);
        assert_eq!(t.get(h(9, 3)), Some(30), "replaced, now in the vector");
        t.remove(h(9, 3));
        assert_eq!(t.get(h(9, 3)), None);
        assert!(t.other.is_empty());
    }

    #[test]
    fn zero_and_far_indexes_go_to_the_map() {
        let mut t = Objects::with_capacity(0);
        for (k, v) in [(0, 1), (h(1, u32::MAX), 2), (h(0, DIRECT as u32), 3), (h(1, 0), 4)] {
            t.insert(k, v);
        }
        assert_eq!(t.direct.len(), 1, "only h(1, 0) is direct");
        assert_eq!(t.get(0), Some(1));
        assert_eq!(t.get(h(1, u32::MAX)), Some(2));
        assert_eq!(t.get(h(0, DIRECT as u32)), Some(3));
        assert_eq!(t.get(h(1, 0)), Some(4));
        t.insert(0, 7);
        assert_eq!(t.get(0), Some(7), "an insert replaces");
        for k in [0, h(1, u32::MAX), h(0, DIRECT as u32), h(1, 0)] {
            t.remove(k);
            assert_eq!(t.get(k), None);
        }
    }
}
