//! The bootstrap heap's bookkeeping, over offsets into its region (the
//! memory itself is `boot_raw`'s): a bump pointer that carves fresh chunks,
//! and one lock-free free list per size class that takes chunks back for
//! reuse.
//!
//! Every operation is a compare-exchange loop on one atomic word and holds
//! no lock, so it is safe in a signal handler, in any thread, and in the
//! child of a `fork` (the words are consistent at every instant; a chunk a
//! vanished thread held is only lost). A free list's head is a chunk index
//! with a generation ([`Head`]): a pop that a signal handler (or another
//! thread) interrupted between reading the head and swapping it finds the
//! generation changed and starts again, never installing a stale link. The
//! links sit in an array of atomics beside the region, one per grain, not in
//! the chunks: the program's writes into a block never meet a link read.

#![forbid(unsafe_code)]

use crate::boot_class::{CLASSES, GRAIN, Head, class_size};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// The bookkeeping of a region of `GRAINS * GRAIN` bytes.
pub(crate) struct Lists<const GRAINS: usize> {
    /// Each class's free list ([`Head::pack`]).
    heads: [AtomicU64; CLASSES],
    /// Bytes carved so far.
    carved: AtomicUsize,
    /// For a free chunk starting at grain `i`: the next chunk of its list
    /// (its index plus one, or 0).
    links: [AtomicU32; GRAINS],
}

impl<const GRAINS: usize> Lists<GRAINS> {
    /// Nothing carved, every list empty.
    #[allow(clippy::new_without_default)] // only ever a static
    pub(crate) const fn new() -> Self {
        Lists {
            heads: [const { AtomicU64::new(0) }; CLASSES],
            carved: AtomicUsize::new(0),
            links: [const { AtomicU32::new(0) }; GRAINS],
        }
    }

    /// Bytes of the region.
    pub(crate) const fn bytes() -> usize {
        GRAINS * GRAIN
    }

    /// Bytes carved so far (the region's high-water mark).
    pub(crate) fn carved(&self) -> usize {
        self.carved.load(Ordering::Relaxed)
    }

    /// The offset of a chunk of class `class` (`< CLASSES`): a freed one if
    /// its list has one, else a fresh one, else a freed chunk of a larger
    /// class; `None` when the region has none. Returns the class of the
    /// chunk taken too.
    pub(crate) fn take(&self, class: usize) -> Option<(usize, usize)> {
        if let Some(off) = self.pop(class) {
            return Some((off, class));
        }
        if let Some(off) = self.carve(class_size(class)) {
            return Some((off, class));
        }
        (class + 1..CLASSES).find_map(|k| self.pop(k).map(|off| (off, k)))
    }

    /// Give back the chunk at `offset` (from [`Lists::take`] with class
    /// `class`, not given back since).
    pub(crate) fn give(&self, class: usize, offset: usize) {
        let Some(head) = self.heads.get(class) else { return };
        let Some(link) = self.links.get(offset / GRAIN) else { return };
        let me = (offset / GRAIN + 1) as u32;
        let mut cur = head.load(Ordering::Relaxed);
        loop {
            let h = Head::unpack(cur);
            link.store(h.top, Ordering::Relaxed);
            // Release: the link (and the program's last writes to the
            // chunk) are seen by whoever pops it.
            match head.compare_exchange_weak(cur, h.then(me).pack(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// Take the top chunk of class `class`'s list.
    fn pop(&self, class: usize) -> Option<usize> {
        let head = &self.heads[class];
        let mut cur = head.load(Ordering::Acquire);
        loop {
            let h = Head::unpack(cur);
            let top = h.top.checked_sub(1)? as usize;
            // May be stale if the chunk was popped meanwhile: then the head's
            // generation has moved and the exchange below fails.
            let next = self.links.get(top).map_or(0, |l| l.load(Ordering::Relaxed));
            match head.compare_exchange_weak(cur, h.then(next).pack(), Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Some(top * GRAIN),
                Err(now) => cur = now,
            }
        }
    }

    /// A fresh chunk of `size` bytes (a multiple of the grain).
    fn carve(&self, size: usize) -> Option<usize> {
        let mut cur = self.carved.load(Ordering::Relaxed);
        loop {
            let end = cur.checked_add(size).filter(|&e| e <= Self::bytes())?;
            match self.carved.compare_exchange_weak(cur, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(cur),
                Err(now) => cur = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boot_class::class_of;
    use std::collections::HashSet;
    use std::sync::Arc;

    #[test]
    fn freed_chunks_are_reused_so_a_loop_never_runs_dry() {
        let lists = Lists::<64>::new(); // 1 KiB
        let k = class_of(100).unwrap();
        for _ in 0..100_000 {
            let (off, got) = lists.take(k).expect("never dry");
            assert_eq!(got, k);
            lists.give(got, off);
        }
        assert_eq!(lists.carved(), class_size(k), "one chunk served them all");
    }

    #[test]
    fn chunks_are_disjoint_and_the_region_bounded() {
        let lists = Lists::<64>::new();
        let k = class_of(64).unwrap();
        let mut seen = Vec::new();
        while let Some((off, _)) = lists.take(k) {
            assert!(off + class_size(k) <= Lists::<64>::bytes());
            seen.push(off);
        }
        assert_eq!(seen.len(), Lists::<64>::bytes() / class_size(k));
        assert_eq!(seen.iter().collect::<HashSet<_>>().len(), seen.len());
        for &off in &seen {
            lists.give(k, off);
        }
        let again: HashSet<usize> = std::iter::from_fn(|| lists.take(k).map(|t| t.0)).collect();
        assert_eq!(again, seen.into_iter().collect(), "the same chunks come back, no more");
    }

    #[test]
    fn a_full_region_lends_a_freed_chunk_of_a_larger_class() {
        let lists = Lists::<8>::new(); // 128 bytes
        let big = class_of(128).unwrap();
        let (off, _) = lists.take(big).unwrap();
        assert_eq!(lists.take(0), None, "nothing carved is left, nothing is free");
        lists.give(big, off);
        assert_eq!(lists.take(0), Some((off, big)), "the caller learns it got a larger chunk");
    }

    #[test]
    fn threads_taking_and_giving_never_share_a_chunk() {
        let lists = Arc::new(Lists::<4096>::new()); // 64 KiB
        let owner: Arc<Vec<AtomicU32>> = Arc::new((0..4096).map(|_| AtomicU32::new(0)).collect());
        let threads: Vec<_> = (1..=4u32)
            .map(|t| {
                let (lists, owner) = (lists.clone(), owner.clone());
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..20_000u32 {
                        let k = ((i + t) % 6) as usize;
                        if let Some((off, got)) = lists.take(k) {
                            let was = owner[off / GRAIN].swap(t, Ordering::Relaxed);
                            assert_eq!(was, 0, "chunk {off} taken twice");
                            mine.push((off, got));
                        }
                        if (mine.len() > 8 || i % 3 == 0)
                            && let Some((off, got)) = mine.pop()
                        {
                            owner[off / GRAIN].store(0, Ordering::Relaxed);
                            lists.give(got, off);
                        }
                    }
                    for (off, got) in mine {
                        owner[off / GRAIN].store(0, Ordering::Relaxed);
                        lists.give(got, off);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(lists.carved() <= Lists::<4096>::bytes());
    }
}
