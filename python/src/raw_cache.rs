//! The bridge's small-block cache, and nothing else: for one thread, a
//! short last-in-first-out list per size class of blocks NumPy freed, kept
//! to be handed out again without calling the plugin.
//!
//! A [`SmallCache`] is 128 bytes, two cache lines: the depth of each list
//! (four bits each, in one word) and the list heads, those of the classes
//! up to 192 bytes in the first line with the depths. The classes reach
//! 1 KiB, as NumPy's own cache does (it keeps up to 7 blocks of each byte
//! size below 1024). The lists are threaded through the blocks
//! themselves: a cached block's header (the two words in front of the
//! pointer NumPy had, see [`crate::raw_block`]) holds the next block of its
//! list and a cleared check word, so a cached block is never taken for a
//! live one (a double free of it is recognised as a foreign pointer).
//!
//! One thread owns a cache (its counter line's owner, see
//! [`crate::counters`]): only it pushes and pops, with plain loads and
//! stores; readers only read the depths. Which blocks may be cached (their
//! size class was allocated in full) is the caller's rule.
//!
//! Imports nothing from the crate.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Bytes of data served by each size class; a cached block of class `c`
/// was allocated with room for `CLASSES[c]` bytes (at most half as much
/// again as it was asked for).
pub const CLASSES: [usize; 12] = [16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024];
/// The largest request served from the cache.
pub const MAX_CACHED: usize = 1024;
/// Blocks kept per size class and thread.
pub const DEPTH: u64 = 8;

/// The class of a request of `size <= MAX_CACHED` bytes, by 16-byte step:
/// the smallest class that holds the step's top.
const CLASS_BY_16: [u8; MAX_CACHED / 16 + 1] = {
    let mut table = [0u8; MAX_CACHED / 16 + 1];
    let mut step = 0;
    while step < table.len() {
        let mut class = 0;
        while CLASSES[class] < step * 16 {
            class += 1;
        }
        table[step] = class as u8;
        step += 1;
    }
    table
};

/// Bits of a list's depth in [`SmallCache::depths`].
const DEPTH_BITS: usize = 4;

const _: () =
    assert!(CLASSES[CLASSES.len() - 1] == MAX_CACHED && DEPTH < (1 << DEPTH_BITS) && CLASSES.len() * DEPTH_BITS <= 64);

/// The size class of a request of `size` bytes (`size <= MAX_CACHED`).
#[inline]
pub fn class_of(size: usize) -> usize {
    CLASS_BY_16[size.div_ceil(16)] as usize
}

/// The bytes a request of `size` is given room for: its class's size for
/// small requests, else `size`.
#[inline]
pub fn rounded(size: usize) -> usize {
    if size <= MAX_CACHED { CLASSES[class_of(size)] } else { size }
}

/// One thread's cached blocks (see the module docs).
#[derive(Default)]
#[repr(C, align(64))]
pub struct SmallCache {
    /// Bits `4c..4c+4`: how many blocks list `c` holds.
    depths: AtomicU64,
    /// The last block pushed of each class (its data pointer), or 0.
    heads: [AtomicUsize; CLASSES.len()],
}

const _: () = assert!(size_of::<SmallCache>() == 128);

impl SmallCache {
    /// Blocks cached, by class.
    pub fn depths(&self) -> [u64; CLASSES.len()] {
        let d = self.depths.load(Relaxed);
        std::array::from_fn(|c| (d >> (DEPTH_BITS * c)) & ((1 << DEPTH_BITS) - 1))
    }

    /// Whether no block is cached.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.depths.load(Relaxed) == 0
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
        let depths = self.depths.load(Relaxed);
        if (depths >> (DEPTH_BITS * class)) & ((1 << DEPTH_BITS) - 1) >= DEPTH {
            return false;
        }
        let words = ptr.as_ptr().cast::<usize>();
        // SAFETY: the caller's contract: the two words before `ptr` are the
        // block's header, writable, and the block is no one's.
        unsafe {
            words.sub(2).write(self.heads[class].load(Relaxed));
            words.sub(1).write(0);
        }
        self.heads[class].store(ptr.as_ptr() as usize, Relaxed);
        self.depths.store(depths + (1 << (DEPTH_BITS * class)), Relaxed);
        true
    }

    /// The block pushed last in list `class`, taken off it.
    ///
    /// # Safety
    /// The calling thread owns this cache (see [`SmallCache::push`]).
    #[inline]
    pub unsafe fn pop(&self, class: usize) -> Option<NonNull<u8>> {
        let head = NonNull::new(self.heads[class].load(Relaxed) as *mut u8)?;
        // SAFETY: every block in a list was pushed under `push`'s contract:
        // its header's first word holds the next block, and it stays
        // untouched while listed.
        let next = unsafe { head.as_ptr().cast::<usize>().sub(2).read() };
        self.heads[class].store(next, Relaxed);
        self.depths.store(self.depths.load(Relaxed) - (1 << (DEPTH_BITS * class)), Relaxed);
        Some(head)
    }

    /// Take every block off the lists, handing each to `free` with its
    /// class.
    ///
    /// # Safety
    /// As for [`SmallCache::pop`].
    pub unsafe fn drain(&self, mut free: impl FnMut(usize, NonNull<u8>)) {
        for class in 0..CLASSES.len() {
            // SAFETY: the caller's contract.
            while let Some(ptr) = unsafe { self.pop(class) } {
                free(class, ptr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_the_next_class() {
        for size in 0..=MAX_CACHED {
            let c = class_of(size);
            assert!(CLASSES[c] >= size, "{size}");
            assert!(c == 0 || CLASSES[c - 1] < size, "{size} is in the smallest class that fits");
        }
        assert_eq!(
            (rounded(8), rounded(64), rounded(65), rounded(512), rounded(513), rounded(1024), rounded(1025)),
            (16, 64, 96, 512, 768, 1024, 1025)
        );
    }

    #[test]
    fn lists_are_last_in_first_out_and_bounded() {
        let cache = SmallCache::default();
        let mut blocks: Vec<Box<[usize; 10]>> = (0..DEPTH + 2).map(|_| Box::new([0; 10])).collect();
        let ptrs: Vec<NonNull<u8>> =
            blocks.iter_mut().map(|b| NonNull::new(b.as_mut_ptr().wrapping_add(2).cast::<u8>()).unwrap()).collect();
        for (i, &p) in ptrs.iter().enumerate() {
            // SAFETY: this thread alone uses the cache; each block has two
            // words in front of `p` and 64 bytes after.
            let kept = unsafe { cache.push(3, p) };
            assert_eq!(kept, (i as u64) < DEPTH, "block {i}");
        }
        assert_eq!(cache.depths()[3], DEPTH);
        // SAFETY: as above.
        assert_eq!(unsafe { cache.pop(3) }, Some(ptrs[DEPTH as usize - 1]));
        // SAFETY: as above.
        assert_eq!(unsafe { cache.pop(2) }, None);
        let mut drained = Vec::new();
        // SAFETY: as above.
        unsafe { cache.drain(|c, p| drained.push((c, p))) };
        assert_eq!(drained.len(), DEPTH as usize - 1);
        assert!(drained.iter().all(|&(c, _)| c == 3));
        assert!(cache.is_empty());
    }
}
