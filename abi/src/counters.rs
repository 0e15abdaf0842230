//! The statistics a plugin keeps, counted one way in every plugin:
//! [`MemplugStats`]'s own methods for counts kept under a lock (the plugin
//! holds it around each update), and [`AtomicCounters`] for counts updated
//! with relaxed atomics by any thread. Either gives the
//! [`MemplugStats`] the plugin's `stats` function reports.
//!
//! ```
//! use memplug_abi::MemplugStats;
//! use memplug_abi::counters::AtomicCounters;
//!
//! let counters = AtomicCounters::default();
//! counters.allocated(100);
//! counters.resized(100, 40);
//! counters.allocated(8);
//! counters.freed(40);
//! let s = counters.snapshot();
//! assert_eq!((s.live_bytes, s.peak_bytes, s.total_allocations, s.live_count), (8, 100, 2, 1));
//!
//! let mut plain = MemplugStats::default();
//! plain.allocated(100);
//! plain.freed(100);
//! assert_eq!((plain.live_bytes, plain.peak_bytes, plain.live_count), (0, 100, 0));
//! ```

use crate::MemplugStats;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

impl MemplugStats {
    /// A block of `size` bytes was handed out.
    #[inline]
    pub fn allocated(&mut self, size: usize) {
        self.live_bytes += size as u64;
        self.peak_bytes = self.peak_bytes.max(self.live_bytes);
        self.total_allocations += 1;
        self.live_count += 1;
    }

    /// A block of `size` bytes was given back.
    #[inline]
    pub fn freed(&mut self, size: usize) {
        self.live_bytes -= size as u64;
        self.live_count -= 1;
    }

    /// A block of `old` bytes now holds `new` (not a new allocation).
    #[inline]
    pub fn resized(&mut self, old: usize, new: usize) {
        self.live_bytes = self.live_bytes - old as u64 + new as u64;
        self.peak_bytes = self.peak_bytes.max(self.live_bytes);
    }
}

/// A plugin's statistics as relaxed atomics, updated by any thread without
/// a lock; [`snapshot`](AtomicCounters::snapshot) reads them as the ABI's
/// [`MemplugStats`] (each field read on its own: a snapshot taken while
/// other threads count is not one instant).
#[derive(Debug, Default)]
pub struct AtomicCounters {
    live_bytes: AtomicU64,
    peak_bytes: AtomicU64,
    total_allocations: AtomicU64,
    live_count: AtomicU64,
    bad_frees: AtomicU64,
    size_mismatches: AtomicU64,
}

impl AtomicCounters {
    /// All counts at 0.
    pub const fn new() -> AtomicCounters {
        AtomicCounters {
            live_bytes: AtomicU64::new(0),
            peak_bytes: AtomicU64::new(0),
            total_allocations: AtomicU64::new(0),
            live_count: AtomicU64::new(0),
            bad_frees: AtomicU64::new(0),
            size_mismatches: AtomicU64::new(0),
        }
    }

    /// A block of `size` bytes was handed out.
    #[inline]
    pub fn allocated(&self, size: usize) {
        let live = self.live_bytes.fetch_add(size as u64, Relaxed) + size as u64;
        self.peak_bytes.fetch_max(live, Relaxed);
        self.total_allocations.fetch_add(1, Relaxed);
        self.live_count.fetch_add(1, Relaxed);
    }

    /// A block of `size` bytes was given back.
    #[inline]
    pub fn freed(&self, size: usize) {
        self.live_bytes.fetch_sub(size as u64, Relaxed);
        self.live_count.fetch_sub(1, Relaxed);
    }

    /// A block of `old` bytes now holds `new` (not a new allocation).
    #[inline]
    pub fn resized(&self, old: usize, new: usize) {
        // Take the old size off first, so that no reader sees both at once.
        self.live_bytes.fetch_sub(old as u64, Relaxed);
        let live = self.live_bytes.fetch_add(new as u64, Relaxed) + new as u64;
        self.peak_bytes.fetch_max(live, Relaxed);
    }

    /// A free of a pointer this allocator did not make.
    #[inline]
    pub fn bad_free(&self) {
        self.bad_frees.fetch_add(1, Relaxed);
    }

    /// A free or realloc with a size other than the block's.
    #[inline]
    pub fn size_mismatch(&self) {
        self.size_mismatches.fetch_add(1, Relaxed);
    }

    /// The counts as the ABI's statistics (`struct_size` 0: the export
    /// code sets it).
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
