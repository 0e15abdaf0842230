//! The set of live blocks (their user pointers, with their sizes and where
//! they were allocated), so that a free can tell a block of this allocator
//! from any other pointer without reading memory; and, for reports, the
//! blocks freed last (a bounded ring per shard), with where they were
//! freed.
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
use memplug_stacks::capture::StackId;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

const SHARDS: usize = 64;
/// Freed blocks remembered per shard (for double-free reports).
const FREED_PER_SHARD: usize = 256;

/// Who made (or freed) a block: its stack and thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) stack: StackId,
    pub(crate) thread: u32,
}

/// What is kept of a live block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live {
    /// Its size (as this allocator was asked for it).
    pub(crate) size: usize,
    pub(crate) made: Origin,
}

/// What is kept of a freed block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Freed {
    /// The pointer this allocator had handed out.
    pub(crate) ptr: usize,
    pub(crate) size: usize,
    /// The block as the program saw it: start and size.
    pub(crate) user: (usize, usize),
    pub(crate) made: Origin,
    pub(crate) freed: Origin,
}

/// One shard: live blocks by pointer, and the last freed ones.
#[derive(Default)]
pub(crate) struct Shard {
    pub(crate) live: HashMap<usize, Live, BuildHasherDefault<AddrHasher>>,
    pub(crate) freed: VecDeque<Freed>,
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
}

impl Default for Registry {
    fn default() -> Registry {
        Registry { shards: (0..SHARDS).map(|_| ForkMutex::default()).collect() }
    }
}

impl Registry {
    /// The shard of `addr`: blocks are 16-aligned, so the low bits say
    /// nothing; mix the rest.
    fn shard(&self, addr: usize) -> &ForkMutex<Shard> {
        let h = ((addr >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(h >> 58) as usize % SHARDS]
    }

    fn set(&self, addr: usize) -> std::sync::MutexGuard<'_, Shard> {
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

    /// Remember a freed block (the oldest remembered one in its shard is
    /// forgotten).
    pub(crate) fn forget_later(&self, f: Freed) {
        let mut s = self.set(f.ptr);
        if s.freed.len() == FREED_PER_SHARD {
            s.freed.pop_front();
        }
        s.freed.push_back(f);
    }

    /// Every shard in turn (for reports, and the leaks at exit).
    pub(crate) fn each(&self, f: &mut dyn FnMut(&Shard)) {
        for shard in self.shards.iter() {
            f(&shard.lock());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_blocks_are_removed_once() {
        let r = Registry::default();
        let block = Live { size: 16, made: Origin::default() };
        for a in (0..10_000usize).map(|i| 0x1000 + i * 16) {
            r.insert(a, block);
        }
        assert!(r.remove(0x1000).is_some() && r.remove(0x1000).is_none());
        assert!(r.remove(0x1008).is_none(), "an address inside no block");
        assert!((1..10_000usize).all(|i| r.remove(0x1000 + i * 16).is_some()));
    }
}
