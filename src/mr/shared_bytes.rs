//! Bytes that several threads and the device may read and write at once: the
//! memory of a [`MemoryRegion`](crate::MemoryRegion), reached only through
//! relaxed atomics so that no access from safe code is a data race.
//!
//! Rust's memory model (the `std::sync::atomic` module docs) makes two things
//! undefined: a conflicting pair of unsynchronised accesses of which one is
//! not atomic (a data race), and a conflicting pair of unsynchronised atomic
//! accesses that *partially* overlap (mixed sizes). So copying each call's
//! middle with `u64`s and its ends with `u8`s is not enough: `write_at(0, ..16)`
//! storing a `u64` at 0 while `write_at(3, ..2)` stores `u8`s at 3 and 4 is
//! a mixed-size race. The access size of every byte is therefore fixed by
//! where it lies in the *region*, never by the call:
//!
//! ```text
//!  base                                                         base+len
//!   | head: u8 |  body: 8-aligned words, always AtomicU64  | tail: u8 |
//! ```
//!
//! A call that covers only part of a body word reads the whole word and
//! extracts its bytes, or merges its bytes into the word with a
//! compare-exchange loop; whole words are plain relaxed loads and stores,
//! which compile to ordinary `mov`s. Head and tail bytes (at most 7 each,
//! only when the region does not start or end 8-aligned) are single-byte
//! atomics: the word around them reaches outside the region, into memory
//! that is not ours to touch.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

const WORD: usize = std::mem::size_of::<u64>();

/// A view of `len` bytes at `base` accessed only through the atomics above.
#[derive(Debug)]
pub(crate) struct SharedBytes {
    base: NonNull<u8>,
    len: usize,
    /// Offset of the first 8-aligned word (`<= len`).
    body_start: usize,
    /// Offset just past the last whole aligned word (`body_start <= body_end <= len`).
    body_end: usize,
}

// SAFETY: `SharedBytes` is an address and a length; every access through it
// is an atomic of the size its position fixes (module docs), so using it
// from several threads at once is not a data race, and moving it to another
// thread changes nothing about the memory.
unsafe impl Send for SharedBytes {}
// SAFETY: as above: `&self` methods only do those atomic accesses.
unsafe impl Sync for SharedBytes {}

impl SharedBytes {
    /// # Safety
    /// `base..base+len` must be readable and writable for as long as the
    /// value exists, and every other access to it while the value exists
    /// must be the device's, or atomic with the same per-byte sizes (another
    /// `SharedBytes` with the same `base` and `len`).
    pub(crate) unsafe fn new(base: NonNull<u8>, len: usize) -> SharedBytes {
        let body_start = base.as_ptr().align_offset(std::mem::align_of::<AtomicU64>()).min(len);
        let body_end = body_start + (len - body_start) / WORD * WORD;
        SharedBytes { base, len, body_start, body_end }
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn in_range(&self, offset: usize, n: usize) -> bool {
        offset.checked_add(n).is_some_and(|end| end <= self.len)
    }

    fn byte(&self, i: usize) -> &AtomicU8 {
        debug_assert!(i < self.len);
        // SAFETY: `i < len` (callers stay in range), so the byte is inside
        // the region, valid for reads and writes (`new`'s contract), and
        // reached only with single-byte atomics (head and tail bytes).
        unsafe { AtomicU8::from_ptr(self.base.as_ptr().add(i)) }
    }

    /// The body word that starts at offset `w` (`body_start <= w`, `w + 8 <= body_end`).
    fn word(&self, w: usize) -> &AtomicU64 {
        debug_assert!(w >= self.body_start && w + WORD <= self.body_end && (w - self.body_start) % WORD == 0);
        // SAFETY: `w` is a body word: 8-aligned (offset from the aligned
        // `body_start` by whole words) and inside the region, valid for
        // reads and writes (`new`'s contract), reached only as this whole
        // `AtomicU64`.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(w).cast::<u64>()) }
    }

    /// Copies `data` to `offset`. `false` (nothing written) when the range
    /// is outside the region.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> bool {
        if !self.in_range(offset, data.len()) {
            return false;
        }
        let end = offset + data.len();
        // Head and tail bytes.
        for i in (offset..end.min(self.body_start)).chain(offset.max(self.body_end)..end) {
            self.byte(i).store(data[i - offset], Relaxed);
        }
        let (lo, hi) = (offset.max(self.body_start), end.min(self.body_end));
        if lo >= hi {
            return true;
        }
        // The body: a partial word at each end, whole words between.
        let first = self.word_of(lo);
        let last = self.word_of(hi - 1);
        if first == last {
            self.merge(first, lo - first, &data[lo - offset..hi - offset]);
            return true;
        }
        let mut w = first;
        if lo > first {
            self.merge(first, lo - first, &data[lo - offset..first + WORD - offset]);
            w += WORD;
        }
        let whole_end = if hi < last + WORD { last } else { last + WORD };
        let src = &data[w - offset..whole_end - offset];
        for (k, chunk) in src.chunks_exact(WORD).enumerate() {
            let v = u64::from_ne_bytes(chunk.try_into().unwrap_or_default());
            self.word(w + k * WORD).store(v, Relaxed);
        }
        if whole_end == last {
            self.merge(last, 0, &data[last - offset..hi - offset]);
        }
        true
    }

    /// Copies from `offset` into `out`. `false` (nothing read) when the
    /// range is outside the region.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        if !self.in_range(offset, out.len()) {
            return false;
        }
        let end = offset + out.len();
        for i in (offset..end.min(self.body_start)).chain(offset.max(self.body_end)..end) {
            out[i - offset] = self.byte(i).load(Relaxed);
        }
        let (lo, hi) = (offset.max(self.body_start), end.min(self.body_end));
        if lo >= hi {
            return true;
        }
        let first = self.word_of(lo);
        let last = self.word_of(hi - 1);
        // A partial word at each end (the whole word loaded, its bytes
        // picked), whole words between.
        let mut w = first;
        if lo > first || hi < first + WORD {
            let end_in_first = hi.min(first + WORD);
            out[lo - offset..end_in_first - offset]
                .copy_from_slice(&self.word(first).load(Relaxed).to_ne_bytes()[lo - first..end_in_first - first]);
            if first == last {
                return true;
            }
            w += WORD;
        }
        let whole_end = if hi < last + WORD { last } else { last + WORD };
        let dst = &mut out[w - offset..whole_end - offset];
        for (k, chunk) in dst.chunks_exact_mut(WORD).enumerate() {
            chunk.copy_from_slice(&self.word(w + k * WORD).load(Relaxed).to_ne_bytes());
        }
        if whole_end == last {
            out[last - offset..hi - offset].copy_from_slice(&self.word(last).load(Relaxed).to_ne_bytes()[..hi - last]);
        }
        true
    }

    /// Offset of the body word holding offset `i` (`i` in the body).
    fn word_of(&self, i: usize) -> usize {
        self.body_start + (i - self.body_start) / WORD * WORD
    }

    /// Writes `bytes` at `at` inside the body word `w`, keeping its other
    /// bytes (another thread's or the device's) with a compare-exchange loop.
    fn merge(&self, w: usize, at: usize, bytes: &[u8]) {
        let word = self.word(w);
        let mut old = word.load(Relaxed);
        loop {
            let mut b = old.to_ne_bytes();
            b[at..at + bytes.len()].copy_from_slice(bytes);
            match word.compare_exchange_weak(old, u64::from_ne_bytes(b), Relaxed, Relaxed) {
                Ok(_) => return,
                Err(now) => old = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Owns a zeroed, 8-aligned heap buffer; the view starts `skew` bytes in.
    struct Buf {
        mem: *mut u64,
        words: usize,
    }

    impl Buf {
        fn new(words: usize) -> Buf {
            let mem = Box::into_raw(vec![0u64; words].into_boxed_slice()).cast::<u64>();
            Buf { mem, words }
        }
        fn view(&self, skew: usize, len: usize) -> SharedBytes {
            assert!(skew + len <= self.words * WORD);
            // SAFETY: inside the live buffer, which the test reaches only
            // through views of this `skew`/`len` (or after the threads end).
            let p = unsafe { self.mem.cast::<u8>().add(skew) };
            // SAFETY: as above; the buffer outlives the views (tests drop them first).
            unsafe { SharedBytes::new(NonNull::new(p).unwrap(), len) }
        }
    }

    impl Drop for Buf {
        fn drop(&mut self) {
            // SAFETY: made by `Box::into_raw` of a slice of `words` u64s.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.mem, self.words)) });
        }
    }

    // SAFETY: test only; the buffer is shared by threads only through
    // `SharedBytes` views.
    unsafe impl Send for Buf {}
    // SAFETY: as above.
    unsafe impl Sync for Buf {}

    fn lcg(x: &mut u64) -> u64 {
        *x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        *x >> 33
    }

    #[test]
    fn every_range_reads_back_what_was_written() {
        // Every start alignment, lengths around the word size, every
        // offset: head-only, tail-only, a single partial word, partial +
        // whole + partial.
        for skew in 0..WORD {
            let lens: &[usize] = if cfg!(miri) { &[0, 1, 7, 9, 17] } else { &[0, 1, 5, 7, 8, 9, 15, 16, 17, 40, 80] };
            for &len in lens {
                // A fresh buffer per view: views with other bounds access
                // the bytes with other sizes (fine one after the other, but
                // Miri's weak-memory emulation cannot follow it).
                let buf = Buf::new(12);
                let v = buf.view(skew, len);
                let mut model = vec![0u8; len];
                v.write(0, &model);
                for off in 0..=len {
                    for n in 0..=(len - off) {
                        let data: Vec<u8> = (0..n).map(|i| (off * 31 + n * 7 + i) as u8 | 1).collect();
                        assert!(v.write(off, &data));
                        model[off..off + n].copy_from_slice(&data);
                        let mut all = vec![0u8; len];
                        assert!(v.read(0, &mut all));
                        assert_eq!(all, model, "skew {skew} len {len} write {off}+{n}");
                        let mut part = vec![0u8; n];
                        assert!(v.read(off, &mut part));
                        assert_eq!(part, data);
                    }
                }
            }
        }
    }

    #[test]
    fn out_of_range_touches_nothing() {
        let buf = Buf::new(4);
        let v = buf.view(3, 20);
        assert!(v.write(0, &[7; 20]));
        assert!(!v.write(19, &[1, 2]));
        assert!(!v.write(usize::MAX, &[1]));
        assert!(!v.read(21, &mut []));
        let mut out = [0u8; 20];
        assert!(v.read(0, &mut out));
        assert_eq!(out, [7; 20]);
        assert!(v.read(20, &mut []), "an empty range at the end is inside");
    }

    #[test]
    fn bytes_outside_the_view_are_never_touched() {
        let buf = Buf::new(4);
        {
            let v = buf.view(3, 21);
            assert!(v.write(0, &[0xff; 21]));
        }
        // SAFETY: the view is gone and no other thread has the buffer.
        let all: [u8; 32] = unsafe { buf.mem.cast::<[u8; 32]>().read() };
        assert_eq!(&all[..3], &[0; 3]);
        assert_eq!(&all[3..24], &[0xff; 21]);
        assert_eq!(&all[24..], &[0; 8]);
    }

    /// Threads writing and reading overlapping ranges of one region through
    /// an `Arc`, with edges that fall inside each other's words: race-free by
    /// construction (run it under Miri to have that checked). Each writer
    /// owns a byte pattern, so torn bytes would show as values nobody wrote;
    /// disjoint ranges written concurrently must both survive the merges.
    #[test]
    fn concurrent_writers_and_readers_share_one_region() {
        const LEN: usize = 203;
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        let buf = Arc::new(Buf::new(LEN / WORD + 2));
        let region = Arc::new(buf.view(1, LEN));
        let writers_done = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let (region, _buf, writers_done) = (Arc::clone(&region), Arc::clone(&buf), Arc::clone(&writers_done));
                std::thread::spawn(move || {
                    let mut x = u64::from(t) + 1;
                    let mut out = [0u8; LEN];
                    for _ in 0..rounds {
                        let off = lcg(&mut x) as usize % LEN;
                        let n = lcg(&mut x) as usize % (LEN - off + 1);
                        if t < 2 {
                            // Writers: only the values 0x10+t and 0 occur.
                            assert!(region.write(off, &vec![0x10 + t; n]));
                        } else {
                            assert!(region.read(off, &mut out[..n]));
                            let seen = &out[..n];
                            assert!(seen.iter().all(|b| matches!(b, 0 | 0x10 | 0x11 | 0x20 | 0x21)), "{seen:?}");
                        }
                    }
                    // Disjoint single bytes next to each other (inside one
                    // word), once both writers are past their ranges: both
                    // must land.
                    if t < 2 {
                        writers_done.wait();
                        for r in 0..rounds {
                            let i = 8 + (r % 16) * 2 + usize::from(t);
                            assert!(region.write(i, &[0x20 + t]));
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        let mut out = [0u8; LEN];
        region.read(0, &mut out);
        for (k, pair) in out[8..40].chunks(2).enumerate() {
            assert_eq!(pair, [0x20, 0x21], "pair {k}: {out:?}");
        }
    }

    #[test]
    fn random_ranges_match_a_model() {
        let buf = Buf::new(130);
        let v = buf.view(5, 1029);
        let mut model = vec![0u8; 1029];
        v.write(0, &model);
        let mut x = 42;
        for _ in 0..if cfg!(miri) { 50 } else { 5000 } {
            let off = lcg(&mut x) as usize % 1029;
            let n = lcg(&mut x) as usize % (1029 - off + 1);
            let data: Vec<u8> = (0..n).map(|_| lcg(&mut x) as u8).collect();
            v.write(off, &data);
            model[off..off + n].copy_from_slice(&data);
            let off = lcg(&mut x) as usize % 1029;
            let n = lcg(&mut x) as usize % (1029 - off + 1);
            let mut out = vec![0u8; n];
            v.read(off, &mut out);
            assert_eq!(out, model[off..off + n]);
        }
    }
}
