//! The stack depot: every distinct stack stored once, in memory mapped once
//! per process, and named by a 32-bit id — so a block keeps 4 bytes, not its
//! addresses (AddressSanitizer's `StackDepot`, in small).
//!
//! Lock-free and allocation-free, so it serves any thread, a signal
//! handler, and a child after `fork`: stacks are appended to an arena
//! (reserved as address space, committed as it is written) by one atomic
//! add; a hash table of chain heads (atomic words) links them; a new entry
//! is published by a compare-and-swap on its chain's head after it is
//! written, so a reader never sees half an entry. Entries are never
//! removed. A full arena stores nothing more: [`Depot::insert`] then
//! answers [`NONE`].
//!
//! An entry is `[next id: u32 | hash: u32]`, `[len: u64]`, then `len`
//! addresses (u64 words); an id is the entry's word index in the arena.

use super::memo::hash;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// The id of no stack.
pub const NONE: u32 = 0;

/// Buckets of the hash table (a power of two).
const BUCKETS: usize = 1 << 18;
/// Words of the arena: 2^27 (1 GiB of address space).
const ARENA_WORDS: usize = 1 << 27;

/// A depot's memory: its table and arena, mapped on first use.
pub struct Depot {
    /// The table's and arena's base (0: not mapped yet; 1: mapping failed).
    base: AtomicUsize,
    /// The next free word of the arena (word 0 is never used: id 0 is NONE).
    top: AtomicU64,
}

impl Depot {
    /// An empty depot (nothing mapped).
    pub const fn new() -> Depot {
        Depot { base: AtomicUsize::new(0), top: AtomicU64::new(1) }
    }

    /// The table and the arena, mapped once (racing threads map and the
    /// losers unmap theirs).
    fn memory(&self) -> Option<(&[AtomicU32], &[AtomicU64])> {
        let mut base = self.base.load(Ordering::Acquire);
        if base == 0 {
            let len = BUCKETS * 4 + ARENA_WORDS * 8;
            let fresh = super::sys::map_zeroed(len).map_or(1, |p| p as usize);
            base = match self.base.compare_exchange(0, fresh, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => fresh,
                Err(won) => {
                    if fresh != 1 {
                        // SAFETY: our own mapping, never published.
                        unsafe { libc::munmap(fresh as *mut libc::c_void, len) };
                    }
                    won
                }
            };
        }
        if base == 1 {
            return None;
        }
        // SAFETY: the mapping holds BUCKETS u32 then ARENA_WORDS u64, zeroed,
        // readable and writable for the life of the process, and only ever
        // accessed through atomics.
        unsafe {
            let table = core::slice::from_raw_parts(base as *const AtomicU32, BUCKETS);
            let arena = core::slice::from_raw_parts((base + BUCKETS * 4) as *const AtomicU64, ARENA_WORDS);
            Some((table, arena))
        }
    }

    /// The id of `frames` (stored now if it is new); [`NONE`] for an empty
    /// stack or a full depot.
    pub fn insert(&self, frames: &[usize]) -> u32 {
        self.insert_hashed(frames, hash(frames))
    }

    /// [`Depot::insert`] of `frames`, whose [`hash`] is `hash`.
    pub fn insert_hashed(&self, frames: &[usize], hash: u32) -> u32 {
        if frames.is_empty() {
            return NONE;
        }
        let Some((table, arena)) = self.memory() else { return NONE };
        let head = &table[hash as usize & (BUCKETS - 1)];
        let mut seen = head.load(Ordering::Acquire);
        if let Some(id) = find(arena, seen, NONE, hash, frames) {
            return id;
        }
        let words = 2 + frames.len() as u64;
        let at = self.top.fetch_add(words, Ordering::Relaxed);
        if at + words > ARENA_WORDS as u64 {
            return NONE;
        }
        let id = at as u32;
        arena[at as usize + 1].store(frames.len() as u64, Ordering::Relaxed);
        for (i, &f) in frames.iter().enumerate() {
            arena[at as usize + 2 + i].store(f as u64, Ordering::Relaxed);
        }
        loop {
            arena[at as usize].store(u64::from(seen) << 32 | u64::from(hash), Ordering::Relaxed);
            match head.compare_exchange(seen, id, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return id,
                Err(now) => {
                    // Someone linked entries first: one may be this stack.
                    if let Some(other) = find(arena, now, seen, hash, frames) {
                        return other;
                    }
                    seen = now;
                }
            }
        }
    }

    /// Copy the stack `id` into `out`; its length (0 for [`NONE`] or an id
    /// this depot did not give).
    pub fn get(&self, id: u32, out: &mut [usize]) -> usize {
        let Some((_, arena)) = self.memory() else { return 0 };
        let at = id as usize;
        if id == NONE || at + 2 > self.top.load(Ordering::Acquire).min(ARENA_WORDS as u64) as usize {
            return 0;
        }
        let len = (arena[at + 1].load(Ordering::Relaxed) as usize).min(out.len());
        for (i, o) in out[..len].iter_mut().enumerate() {
            *o = arena[at + 2 + i].load(Ordering::Relaxed) as usize;
        }
        len
    }
}

impl Default for Depot {
    fn default() -> Depot {
        Depot::new()
    }
}

/// The id of `frames` in the chain from `from` up to (not including)
/// `until`.
fn find(arena: &[AtomicU64], from: u32, until: u32, hash: u32, frames: &[usize]) -> Option<u32> {
    let mut id = from;
    while id != NONE && id != until {
        let at = id as usize;
        let link = arena[at].load(Ordering::Relaxed);
        if link as u32 == hash
            && arena[at + 1].load(Ordering::Relaxed) as usize == frames.len()
            && frames.iter().enumerate().all(|(i, &f)| arena[at + 2 + i].load(Ordering::Relaxed) == f as u64)
        {
            return Some(id);
        }
        id = (link >> 32) as u32;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_stacks_share_an_id_and_read_back() {
        let d = Depot::new();
        let a = d.insert(&[1, 2, 3]);
        let b = d.insert(&[1, 2, 4]);
        assert!(a != NONE && b != NONE && a != b);
        assert_eq!(d.insert(&[1, 2, 3]), a);
        let mut out = [0usize; 8];
        let n = d.get(b, &mut out);
        assert_eq!(&out[..n], &[1, 2, 4]);
        assert_eq!(d.get(NONE, &mut out), 0);
        assert_eq!(d.insert(&[]), NONE);
    }

    #[test]
    fn threads_racing_on_the_same_stacks_agree() {
        let d = std::sync::Arc::new(Depot::new());
        let ids: Vec<Vec<u32>> = (0..4)
            .map(|_| {
                let d = d.clone();
                std::thread::spawn(move || (0..2000usize).map(|i| d.insert(&[i % 500, 7, i % 3])).collect())
            })
            .map(|t| t.join().unwrap())
            .collect();
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "every thread got the same ids");
        let distinct: std::collections::HashSet<u32> = ids[0].iter().copied().collect();
        assert_eq!(distinct.len(), 1500, "(i % 500, i % 3) over 0..2000 takes 1500 values");
    }
}
