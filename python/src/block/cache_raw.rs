//! The per-thread cache of freed blocks, and nothing else: for one thread,
//! a short last-in-first-out list per size class ([`super::classes`]) of
//! small blocks NumPy freed, and two spare larger blocks, kept to be handed
//! out again without calling the plugin.
//!
//! A [`SmallCache`] is 192 bytes, three cache lines: the depth of each list
//! (a byte each) and the list heads, those of the classes up to 128 bytes
//! in the first line with the depths; then the spares. The lists are
//! threaded through the blocks themselves: a cached block's header (the
//! words in front of the pointer NumPy had, see [`super::header_raw`],
//! which reads and writes them) holds the next block of its list and a
//! cleared check word, so a cached block is never taken for a live one (a
//! double free of it is recognised as a foreign pointer).
//!
//! The spares are [`SPARES`] blocks of more than [`MAX_CACHED`](super::classes::MAX_CACHED) and at
//! most [`MAX_SPARE`] bytes that the thread freed, each handed out again
//! only for a request of exactly its size: NumPy's temporaries (a ufunc
//! chain's, a loop's `np.empty`, a loop's shapes in turn) come back at the
//! size they went with, and an exact match keeps what the plugin is told
//! true without a word of room in the header. A freed block that finds
//! both places taken goes to the plugin at once (it is the one whose memory
//! is warm, and often next to the free space) — unless it is the
//! [`SPARE_PATIENCE`]th in a row since a spare was last taken: then the
//! spares are stale, and it replaces the older one (only then: a spare
//! freed amid newer blocks costs the plugin more, see the constant). So a
//! loop over two sizes is served whole, over three two thirds, and sizes
//! that change for good take over the spares. The memory a cache keeps is bounded by
//! `SPARES * MAX_SPARE` + [`LISTS_MAX_BYTES`] (27.5 KiB).
//!
//! One thread owns a cache (its counter line's owner, see
//! [`crate::counters`]): only it pushes and pops, with plain loads and
//! stores; readers only read the depths. Which blocks may be cached (their
//! size class was allocated in full) is the caller's rule.

use super::classes::CLASSES;
use super::header_raw;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Blocks kept per size class and thread.
pub const DEPTH: u8 = 8;
/// The most bytes (of room) one thread's lists hold: [`DEPTH`] blocks of
/// every class.
pub const LISTS_MAX_BYTES: usize = {
    let (mut sum, mut c) = (0, 0);
    while c < CLASSES.len() {
        sum += CLASSES[c];
        c += 1;
    }
    sum * DEPTH as usize
};
/// The largest block kept as a spare. (A block this large takes 512 page
/// faults to fill the first time: the plugin's call is no longer what
/// costs.)
pub const MAX_SPARE: usize = 2 << 20;
/// Spare blocks kept per thread.
pub const SPARES: usize = 2;
/// Freed blocks in a row (since a spare was last taken) that find both
/// spare places taken, the last of which replaces the older spare; those
/// before it go to the plugin. Long: a replaced spare is freed amid newer
/// blocks, which costs a plugin like glibc's far more than a block freed
/// at once (1 024 sizes of about 1 MiB in turn, replacing a spare every 64
/// frees, measured 7% more instructions per `np.empty` than with no
/// spares; with this patience, 1%).
pub const SPARE_PATIENCE: u64 = 4096;

/// One thread's cached blocks (see the module docs).
#[derive(Default)]
#[repr(C, align(64))]
pub struct SmallCache {
    /// How many blocks list `c` holds, at `c`: a byte each, so that a
    /// push or a pop changes its list's depth in one instruction.
    depths: [AtomicU8; CLASSES.len()],
    /// The last block pushed of each class (its data pointer), or 0.
    heads: [AtomicUsize; CLASSES.len()],
    /// The spares, the newer first.
    spares: [Spare; SPARES],
    /// Freed blocks given back since a spare was last taken, for want of
    /// a free place ([`SPARE_PATIENCE`]).
    spare_misses: AtomicU64,
}

/// A spare block of a [`SmallCache`].
#[derive(Default)]
#[repr(C)]
struct Spare {
    /// Its data pointer, or 0.
    ptr: AtomicUsize,
    /// The bytes NumPy asked for of it; 0 when there is none.
    size: AtomicUsize,
}

const _: () = assert!(size_of::<SmallCache>() == 192);

impl SmallCache {
    /// Blocks cached, by class.
    pub fn depths(&self) -> [u64; CLASSES.len()] {
        std::array::from_fn(|c| u64::from(self.depths[c].load(Relaxed)))
    }

    /// The sizes of the spares held (0 for an empty place).
    pub fn spare_sizes(&self) -> [usize; SPARES] {
        std::array::from_fn(|k| self.spares[k].size.load(Relaxed))
    }

    /// Whether no block is cached.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.depths.iter().all(|d| d.load(Relaxed) == 0) && self.spares.iter().all(|s| s.ptr.load(Relaxed) == 0)
    }

    /// A spare asked with `size` bytes (`size > 0`), taken, if one is held.
    ///
    /// # Safety
    /// The calling thread owns this cache (see [`SmallCache::push`]).
    #[inline]
    pub unsafe fn take_spare(&self, size: usize) -> Option<NonNull<u8>> {
        let spare = self.spares.iter().find(|s| s.size.load(Relaxed) == size)?;
        let ptr = NonNull::new(spare.ptr.load(Relaxed) as *mut u8)?;
        spare.ptr.store(0, Relaxed);
        spare.size.store(0, Relaxed);
        self.spare_misses.store(0, Relaxed);
        Some(ptr)
    }

    /// Offer the block at `ptr`, asked with `size` bytes (`size > 0`), as
    /// a spare (see the module docs): the block the caller must free —
    /// none, this one (both places taken), or the older spare it replaced —
    /// with its size.
    ///
    /// # Safety
    /// As for [`SmallCache::push`], with room for `size` bytes.
    #[inline]
    pub unsafe fn offer_spare(&self, ptr: NonNull<u8>, size: usize) -> Option<(NonNull<u8>, usize)> {
        // SAFETY: the caller's contract: the word before `ptr` is the
        // block's check word, writable, and the block is no one's.
        unsafe { header_raw::clear(ptr.as_ptr()) };
        let [newer, older] = &self.spares;
        let mut out = None;
        let newer_ptr = newer.ptr.load(Relaxed);
        if newer_ptr != 0 {
            if older.ptr.load(Relaxed) != 0 {
                let misses = self.spare_misses.load(Relaxed) + 1;
                if misses < SPARE_PATIENCE {
                    self.spare_misses.store(misses, Relaxed);
                    return Some((ptr, size));
                }
                self.spare_misses.store(0, Relaxed);
                out = NonNull::new(older.ptr.load(Relaxed) as *mut u8).map(|p| (p, older.size.load(Relaxed)));
            }
            older.ptr.store(newer_ptr, Relaxed);
            older.size.store(newer.size.load(Relaxed), Relaxed);
        }
        newer.ptr.store(ptr.as_ptr() as usize, Relaxed);
        newer.size.store(size, Relaxed);
        out
    }

    /// Keep the block at `ptr` in list `class`; `false` (nothing done) when
    /// the list is full.
    ///
    /// # Safety
    /// The calling thread owns this cache (no other thread pushes or pops
    /// meanwhile). `ptr` is the data pointer of a block that no one uses
    /// any more, with two writable words in front of it, allocated with
    /// room for `CLASSES[class]` bytes after them.
    #[inline]
    pub unsafe fn push(&self, class: usize, ptr: NonNull<u8>) -> bool {
        // Loaded twice (here and for the store): the second load and the
        // store become one add to memory.
        if self.depths[class].load(Relaxed) >= DEPTH {
            return false;
        }
        // SAFETY: the caller's contract: the two words before `ptr` are the
        // block's header, writable, and the block is no one's.
        unsafe { header_raw::link(ptr, self.heads[class].load(Relaxed)) };
        self.heads[class].store(ptr.as_ptr() as usize, Relaxed);
        self.depths[class].store(self.depths[class].load(Relaxed) + 1, Relaxed);
        true
    }

    /// The block pushed last in list `class`, taken off it.
    ///
    /// # Safety
    /// The calling thread owns this cache (see [`SmallCache::push`]).
    #[inline]
    pub unsafe fn pop(&self, class: usize) -> Option<NonNull<u8>> {
        let head = NonNull::new(self.heads[class].load(Relaxed) as *mut u8)?;
        // SAFETY: every block in a list was pushed under `push`'s contract
        // (`link`ed), and its header stays untouched while listed.
        let next = unsafe { header_raw::linked_next(head) };
        self.heads[class].store(next, Relaxed);
        self.depths[class].store(self.depths[class].load(Relaxed) - 1, Relaxed);
        Some(head)
    }

    /// Take every block off the lists and the spares, handing each to
    /// `free` with the bytes it has room for (its class's, or the spare's
    /// size).
    ///
    /// # Safety
    /// As for [`SmallCache::pop`].
    pub unsafe fn drain(&self, mut free: impl FnMut(usize, NonNull<u8>)) {
        for (class, room) in CLASSES.into_iter().enumerate() {
            // SAFETY: the caller's contract.
            while let Some(ptr) = unsafe { self.pop(class) } {
                free(room, ptr);
            }
        }
        for size in self.spare_sizes() {
            if size != 0
                // SAFETY: the caller's contract.
                && let Some(ptr) = unsafe { self.take_spare(size) }
            {
                free(size, ptr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_hold_at_most_the_bytes_the_guide_gives() {
        assert_eq!(LISTS_MAX_BYTES, 28_160, "the 27.5 KiB the guide gives");
    }

    #[test]
    fn lists_are_last_in_first_out_and_bounded() {
        let cache = SmallCache::default();
        let mut blocks: Vec<Box<[usize; 10]>> = (0..usize::from(DEPTH) + 2).map(|_| Box::new([0; 10])).collect();
        let ptrs: Vec<NonNull<u8>> =
            blocks.iter_mut().map(|b| NonNull::new(b.as_mut_ptr().wrapping_add(2).cast::<u8>()).unwrap()).collect();
        for (i, &p) in ptrs.iter().enumerate() {
            // SAFETY: this thread alone uses the cache; each block has two
            // words in front of `p` and 64 bytes after.
            let kept = unsafe { cache.push(3, p) };
            assert_eq!(kept, i < usize::from(DEPTH), "block {i}");
        }
        assert_eq!(cache.depths()[3], u64::from(DEPTH));
        // SAFETY: as above.
        assert_eq!(unsafe { cache.pop(3) }, Some(ptrs[DEPTH as usize - 1]));
        // SAFETY: as above.
        assert_eq!(unsafe { cache.pop(2) }, None);
        let mut drained = Vec::new();
        // SAFETY: as above.
        unsafe { cache.drain(|c, p| drained.push((c, p))) };
        assert_eq!(drained.len(), DEPTH as usize - 1);
        assert!(drained.iter().all(|&(room, _)| room == CLASSES[3]));
        assert!(cache.is_empty());
    }

    #[test]
    fn spares_are_taken_at_their_exact_size_and_replaced_only_when_stale() {
        let cache = SmallCache::default();
        let mut blocks: Vec<Box<[usize; 4]>> = (0..3).map(|_| Box::new([7; 4])).collect();
        let ptrs: Vec<NonNull<u8>> =
            blocks.iter_mut().map(|b| NonNull::new(b.as_mut_ptr().wrapping_add(2).cast::<u8>()).unwrap()).collect();
        // SAFETY: this thread alone uses the cache; each block has two
        // words in front of its pointer (sizes are not dereferenced).
        unsafe {
            assert_eq!(cache.offer_spare(ptrs[0], 5000), None);
            assert!(!cache.is_empty());
            assert_eq!(cache.take_spare(4999), None, "only the exact size");
            assert_eq!(cache.offer_spare(ptrs[1], 6000), None, "two are kept");
            assert_eq!(cache.spare_sizes(), [6000, 5000]);
            assert_eq!(cache.take_spare(5000), Some(ptrs[0]), "the older one, found too");
            assert_eq!(cache.offer_spare(ptrs[0], 5000), None, "back into the free place");
            for _ in 1..SPARE_PATIENCE {
                assert_eq!(cache.offer_spare(ptrs[2], 7000), Some((ptrs[2], 7000)), "both taken: given back");
            }
            assert_eq!(cache.spare_sizes(), [5000, 6000]);
            assert_eq!(cache.offer_spare(ptrs[2], 7000), Some((ptrs[1], 6000)), "stale: the older one goes");
            assert_eq!(cache.spare_sizes(), [7000, 5000]);
            for _ in 1..SPARE_PATIENCE {
                assert_eq!(cache.offer_spare(ptrs[1], 6000), Some((ptrs[1], 6000)));
            }
            assert_eq!(cache.offer_spare(ptrs[1], 6000), Some((ptrs[0], 5000)));
            assert_eq!(cache.spare_sizes(), [6000, 7000]);
            assert_eq!(cache.take_spare(6000), Some(ptrs[1]), "a use: the count starts again");
            assert_eq!(cache.offer_spare(ptrs[1], 6000), None);
            for _ in 1..SPARE_PATIENCE {
                assert_eq!(cache.offer_spare(ptrs[0], 5000), Some((ptrs[0], 5000)));
            }
            assert_eq!(cache.offer_spare(ptrs[0], 5000), Some((ptrs[2], 7000)));
            assert_eq!(cache.spare_sizes(), [5000, 6000]);
            assert_eq!(cache.take_spare(5000), Some(ptrs[0]));
            assert_eq!(cache.take_spare(6000), Some(ptrs[1]));
            cache.offer_spare(ptrs[2], 7000);
            cache.offer_spare(ptrs[0], 5000);
            assert_eq!(cache.take_spare(7000), Some(ptrs[2]));
            assert_eq!(cache.take_spare(7000), None);
            let mut drained = Vec::new();
            cache.drain(|room, p| drained.push((room, p)));
            assert_eq!(drained, [(5000, ptrs[0])]);
        }
        assert!(cache.is_empty());
        assert_eq!(blocks[0][1], 0, "a spare's check word is cleared");
    }
}
