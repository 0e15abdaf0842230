//! The counts `memplug run --report` shows, kept with relaxed atomics beside
//! the hot path, and the report written at exit to the file named by
//! `MEMPLUG_RUN_REPORT` (one `key value` line each).

use crate::text::Text;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// Whether this process counts: only when it writes the report (the
/// counters are shared by every thread; without a report nobody reads them).
static COUNTING: AtomicBool = AtomicBool::new(false);

/// Count from now on (called once, by the constructor of the process that
/// writes the report).
pub(crate) fn count() {
    COUNTING.store(true, Relaxed);
}

/// Whether this process counts (see [`count`]).
pub(crate) fn counting() -> bool {
    COUNTING.load(Relaxed)
}

/// A counter.
pub(crate) struct Count(AtomicUsize);

impl Count {
    /// Zero.
    const fn new() -> Count {
        Count(AtomicUsize::new(0))
    }
    /// Add `n` (when counting).
    #[inline]
    pub(crate) fn add(&self, n: usize) {
        if COUNTING.load(Relaxed) {
            self.0.fetch_add(n, Relaxed);
        }
    }
    /// The value.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Relaxed)
    }
}

/// Blocks the handler made.
pub(crate) static ALLOCS: Count = Count::new();
/// Bytes of those blocks (as the program sees them).
pub(crate) static ALLOC_BYTES: Count = Count::new();
/// Blocks given back to the handler.
pub(crate) static FREES: Count = Count::new();
/// Bytes of those blocks.
pub(crate) static FREE_BYTES: Count = Count::new();
/// `realloc` calls on a live block.
pub(crate) static REALLOCS: Count = Count::new();
/// Requests for more than the default alignment.
pub(crate) static ALIGNED: Count = Count::new();
/// Frees (and reallocs) of pointers neither the handler nor the bootstrap
/// heap made, or freed already: leaked, never passed to the plugin.
pub(crate) static FOREIGN: Count = Count::new();
/// Blocks served by the bootstrap heap.
pub(crate) static BOOT_BLOCKS: Count = Count::new();
/// Frees of its blocks (each back in it, for reuse).
pub(crate) static BOOT_FREES: Count = Count::new();
/// Requests that failed (NULL, ENOMEM).
pub(crate) static FAILED: Count = Count::new();
/// Bytes live now.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most bytes live at once.
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// A block of `bytes` was made.
pub(crate) fn made(bytes: usize) {
    if !COUNTING.load(Relaxed) {
        return;
    }
    ALLOCS.add(1);
    ALLOC_BYTES.add(bytes);
    grow(bytes);
}

/// A block of `bytes` was freed.
pub(crate) fn freed(bytes: usize) {
    if !COUNTING.load(Relaxed) {
        return;
    }
    FREES.add(1);
    FREE_BYTES.add(bytes);
    LIVE.fetch_sub(bytes, Relaxed);
}

/// A block went from `old` to `new` bytes.
pub(crate) fn resized(old: usize, new: usize) {
    if !COUNTING.load(Relaxed) {
        return;
    }
    REALLOCS.add(1);
    ALLOC_BYTES.add(new);
    FREE_BYTES.add(old);
    LIVE.fetch_sub(old, Relaxed);
    grow(new);
}

/// Bytes live now (0 unless counting).
pub(crate) fn live() -> usize {
    LIVE.load(Relaxed)
}

/// The most bytes live at once (0 unless counting).
pub(crate) fn peak() -> usize {
    PEAK.load(Relaxed)
}

/// `bytes` more are live.
fn grow(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Relaxed).wrapping_add(bytes);
    PEAK.fetch_max(now, Relaxed);
}

/// Write the counts as `key value` lines.
pub(crate) fn write_counts(out: &mut Text) -> core::fmt::Result {
    let allocs = ALLOCS.get();
    let frees = FREES.get();
    writeln!(out, "allocated_blocks {allocs}")?;
    writeln!(out, "allocated_bytes {}", ALLOC_BYTES.get())?;
    writeln!(out, "freed_blocks {frees}")?;
    writeln!(out, "freed_bytes {}", FREE_BYTES.get())?;
    writeln!(out, "live_blocks {}", allocs.saturating_sub(frees))?;
    writeln!(out, "live_bytes {}", LIVE.load(Relaxed))?;
    writeln!(out, "peak_bytes {}", PEAK.load(Relaxed))?;
    writeln!(out, "reallocs {}", REALLOCS.get())?;
    writeln!(out, "aligned_requests {}", ALIGNED.get())?;
    writeln!(out, "foreign_frees {}", FOREIGN.get())?;
    writeln!(out, "failed_requests {}", FAILED.get())?;
    writeln!(out, "bootstrap_blocks {}", BOOT_BLOCKS.get())?;
    writeln!(out, "bootstrap_bytes {}", crate::boot_raw::carved())?;
    writeln!(out, "bootstrap_frees {}", BOOT_FREES.get())
}
