//! The set of live blocks (their user pointers, with their sizes and where
//! they were allocated), so that a free can tell a block of this allocator
//! from any other pointer without reading memory; and, for reports, the
//! blocks freed last (bounded rings), with where they were freed.
//!
//! The live blocks are sharded by address: 64 hash sets, each behind its
//! own mutex, so that threads freeing unrelated blocks rarely meet on a
//! lock. The freed blocks go to a few rings (also by address, so that one
//! pointer's frees are all in one ring, newest last), each written in
//! order: a free writes next to the last one, into memory the processor
//! streams, where 64 small rings made every free write to a line of its
//! own far from the others'. A mutex is held only for one insert, remove
//! or record (no allocation of this allocator happens under it: the sets
//! live in libc's heap through the Rust global allocator), and never two
//! at once.
//!
//! A freed block's stack is kept in its ring slot as the addresses
//! themselves, not as an id in the process's stack depot: a free stack is
//! only ever read back for a report about that block, and while the block
//! is in the ring, so storing it costs a copy into memory the ring reuses,
//! not a lookup in the depot.
//!
//! The mutexes are [`ForkMutex`]es, all named to the fork handlers
//! ([`Registry::fork_locks`]): a `fork` waits until no thread is inside a
//! set, and the child finds every set whole and every lock free.

use crate::ring::{Claim, Freed, Origin, Ring};
use memplug_abi::fork::{ForkLock, ForkMutex};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SHARDS: usize = 64;
/// Rings of freed blocks.
const RINGS: usize = 8;
/// Freed blocks remembered per ring (for double-free reports).
const FREED_PER_RING: usize = 2048;

/// What is kept of a live block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live {
    /// Its size (as this allocator was asked for it).
    pub(crate) size: usize,
    pub(crate) made: Origin,
}

/// One shard: live blocks by pointer.
pub(crate) struct Shard {
    pub(crate) live: HashMap<usize, Live, BuildHasherDefault<AddrHasher>>,
}

/// A hasher for addresses: one multiplication (Fibonacci hashing).
#[derive(Default)]
pub(crate) struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// See the module docs.
pub(crate) struct Registry {
    shards: Box<[ForkMutex<Shard>]>,
    rings: Box<[Ring]>,
}

impl Registry {
    /// Empty sets, whose rings keep `depth` frames of each free stack (at
    /// most 255).
    pub(crate) fn new(depth: usize) -> Registry {
        let depth = depth.min(usize::from(u8::MAX));
        Registry {
            shards: (0..SHARDS).map(|_| ForkMutex::new(Shard { live: HashMap::default() })).collect(),
            rings: (0..RINGS).map(|_| Ring::new(FREED_PER_RING, depth)).collect(),
        }
    }

    /// `addr` mixed: blocks are 16-aligned, so the low bits say nothing.
    fn mix(addr: usize) -> u64 {
        ((addr >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// The shard of `addr`.
    fn shard(&self, addr: usize) -> &ForkMutex<Shard> {
        &self.shards[(Registry::mix(addr) >> 58) as usize % SHARDS]
    }

    /// The ring that remembers the frees of `addr` (other bits of the mix
    /// than the shard's).
    fn ring(&self, addr: usize) -> &Ring {
        &self.rings[(Registry::mix(addr) >> 40) as usize % RINGS]
    }

    fn set(&self, addr: usize) -> std::sync::MutexGuard<'_, Shard> {
        // A panic never happens while a set is borrowed: a set is always
        // whole (`ForkMutex` ignores poisoning).
        self.shard(addr).lock()
    }

    /// Every shard's lock, in index order (a thread never holds two, so any
    /// fixed order is safe). The rings take none.
    pub(crate) fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        for shard in self.shards.iter() {
            locks(shard);
        }
    }

    /// Record a new live block.
    pub(crate) fn insert(&self, addr: usize, block: Live) {
        self.set(addr).live.insert(addr, block);
    }

    /// `read()` while `addr` is a live block — its shard held, so that no
    /// free takes it meanwhile; `None` if it is not one.
    pub(crate) fn while_live<R>(&self, addr: usize, read: impl FnOnce() -> R) -> Option<R> {
        let set = self.set(addr);
        set.live.contains_key(&addr).then(read)
    }

    /// Take a block out of the set: `None` if it was not a live block.
    pub(crate) fn remove(&self, addr: usize) -> Option<Live> {
        self.set(addr).live.remove(&addr)
    }

    /// A slot in the ring of `addr`'s frees, for the free taking it now
    /// (see [`Ring::claim`]).
    pub(crate) fn claim(&self, addr: usize) -> Option<Claim<'_>> {
        self.ring(addr).claim()
    }

    /// Remember a freed block, freed at `stack` (the oldest remembered one
    /// in its ring is forgotten).
    pub(crate) fn forget_later(&self, f: Freed, stack: &[usize]) {
        self.ring(f.ptr).push(&f, stack);
    }

    /// Every shard in turn (for reports, and the leaks at exit).
    pub(crate) fn each(&self, f: &mut dyn FnMut(&Shard)) {
        for shard in self.shards.iter() {
            f(&shard.lock());
        }
    }

    /// `f(order, block, free stack)` of every freed block remembered (a
    /// higher `order`: freed later; comparable only within one pointer's
    /// frees, which all go to one ring).
    pub(crate) fn each_freed(&self, f: &mut dyn FnMut(u64, &Freed, &[usize])) {
        for ring in self.rings.iter() {
            ring.each(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_blocks_are_removed_once() {
        let r = Registry::new(4);
        let block = Live { size: 16, made: Origin::default() };
        for a in (0..10_000usize).map(|i| 0x1000 + i * 16) {
            r.insert(a, block);
        }
        assert!(r.remove(0x1000).is_some() && r.remove(0x1000).is_none());
        assert!(r.remove(0x1008).is_none(), "an address inside no block");
        assert!((1..10_000usize).all(|i| r.remove(0x1000 + i * 16).is_some()));
    }

    #[test]
    fn a_freed_block_is_remembered_with_its_stack() {
        let r = Registry::new(2);
        let block = Live { size: 16, made: Origin::default() };
        let n = 4 * RINGS * FREED_PER_RING;
        for i in 0..n {
            let a = 0x1000 + i * 16;
            r.insert(a, block);
            let b = r.remove(a).expect("live");
            let claim = r.claim(a).expect("a free slot");
            assert!(r.remove(a).is_none(), "removed once");
            let f = Freed { ptr: a, size: b.size, user: (a, b.size), made: b.made, free_thread: 7 };
            claim.fill(&f, &[a, a + 1, a + 2]);
        }
        let mut kept = Vec::new();
        r.each_freed(&mut |_, f, stack| {
            assert_eq!(stack, &[f.ptr, f.ptr + 1], "its own stack, cut to the depth");
            assert_eq!((f.free_thread, f.user), (7, (f.ptr, 16)));
            kept.push(f.ptr);
        });
        assert_eq!(kept.len(), RINGS * FREED_PER_RING);
        assert!(kept.contains(&(0x1000 + (n - 1) * 16)), "the last free is remembered");
    }
}
