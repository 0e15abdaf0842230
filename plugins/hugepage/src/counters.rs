//! The hugepage allocator's counters: relaxed atomics, updated once per
//! block by the plugin export and read as the ABI's statistics.

use memplug_abi::MemplugStats;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The allocator's counters, updated with relaxed atomics.
#[derive(Debug, Default)]
pub struct Counters {
    live_bytes: AtomicU64,
    peak_bytes: AtomicU64,
    total_allocations: AtomicU64,
    live_count: AtomicU64,
    bad_frees: AtomicU64,
    size_mismatches: AtomicU64,
}

impl Counters {
    /// A new block of `size` bytes.
    pub fn allocated(&self, size: usize) {
        let live = self.live_bytes.fetch_add(size as u64, Relaxed) + size as u64;
        self.peak_bytes.fetch_max(live, Relaxed);
        self.total_allocations.fetch_add(1, Relaxed);
        self.live_count.fetch_add(1, Relaxed);
    }

    /// A block of `size` bytes freed.
    pub fn freed(&self, size: usize) {
        self.live_bytes.fetch_sub(size as u64, Relaxed);
        self.live_count.fetch_sub(1, Relaxed);
    }

    /// A free of a pointer with no block of that size.
    pub fn bad_free(&self) {
        self.bad_frees.fetch_add(1, Relaxed);
    }

    /// A free or realloc with a size other than the block's.
    pub fn size_mismatch(&self) {
        self.size_mismatches.fetch_add(1, Relaxed);
    }

    /// A block resized from `old` to `new` bytes (not a new allocation).
    pub fn resized(&self, old: usize, new: usize) {
        // Take the old size off first, so that no reader sees both at once.
        self.live_bytes.fetch_sub(old as u64, Relaxed);
        let live = self.live_bytes.fetch_add(new as u64, Relaxed) + new as u64;
        self.peak_bytes.fetch_max(live, Relaxed);
    }

    /// The counters as the ABI's statistics.
    pub fn snapshot(&self) -> MemplugStats {
        MemplugStats {
            struct_size: 0,
            live_bytes: self.live_bytes.load(Relaxed),
            peak_bytes: self.peak_bytes.load(Relaxed),
            total_allocations: self.total_allocations.load(Relaxed),
            live_count: self.live_count.load(Relaxed),
            bad_frees: self.bad_frees.load(Relaxed),
            size_mismatches: self.size_mismatches.load(Relaxed),
        }
    }
}
