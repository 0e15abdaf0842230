//! The set of live blocks (their user pointers), so that a free can tell a
//! block of this allocator from any other pointer without reading memory.
//!
//! Sharded by address: 64 hash sets, each behind its own mutex, so that
//! threads freeing unrelated blocks rarely meet on a lock. A mutex is held
//! only for one insert or remove (no allocation of this allocator happens
//! under it: the sets live in libc's heap through the Rust global
//! allocator), and never two at once.
//!
//! The mutexes are [`ForkMutex`]es, all named to the fork handlers
//! ([`Registry::fork_locks`]): a `fork` waits until no thread is inside a
//! set, and the child finds every set whole and every lock free.

use memplug_abi::fork::{ForkLock, ForkMutex};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

const SHARDS: usize = 64;

/// A hasher for addresses: one multiplication (Fibonacci hashing).
#[derive(Default)]
struct AddrHasher(u64);

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

type Set = HashSet<usize, BuildHasherDefault<AddrHasher>>;

/// See the module docs.
pub(crate) struct Registry {
    shards: Box<[ForkMutex<Set>]>,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry { shards: (0..SHARDS).map(|_| ForkMutex::default()).collect() }
    }
}

impl Registry {
    /// The shard of `addr`: blocks are 16-aligned, so the low bits say
    /// nothing; mix the rest.
    fn shard(&self, addr: usize) -> &ForkMutex<Set> {
        let h = ((addr >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(h >> 58) as usize % SHARDS]
    }

    fn set(&self, addr: usize) -> std::sync::MutexGuard<'_, Set> {
        // A panic never happens while a set is borrowed: a set is always
        // whole (`ForkMutex` ignores poisoning).
        self.shard(addr).lock()
    }

    /// Every shard's lock, in index order (a thread never holds two, so any
    /// fixed order is safe).
    pub(crate) fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        for shard in self.shards.iter() {
            locks(shard);
        }
    }

    /// Record a new live block.
    pub(crate) fn insert(&self, addr: usize) {
        self.set(addr).insert(addr);
    }

    /// `read()` while `addr` is a live block — its shard held, so that no
    /// free takes it meanwhile; `None` if it is not one.
    pub(crate) fn while_live<R>(&self, addr: usize, read: impl FnOnce() -> R) -> Option<R> {
        let set = self.set(addr);
        set.contains(&addr).then(read)
    }

    /// Take a block out of the set: `false` if it was not a live block.
    pub(crate) fn remove(&self, addr: usize) -> bool {
        self.set(addr).remove(&addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_blocks_are_removed_once() {
        let r = Registry::default();
        for a in (0..10_000usize).map(|i| 0x1000 + i * 16) {
            r.insert(a);
        }
        assert!(r.remove(0x1000) && !r.remove(0x1000));
        assert!(!r.remove(0x1008), "an address inside no block");
        assert!((1..10_000usize).all(|i| r.remove(0x1000 + i * 16)));
    }
}
