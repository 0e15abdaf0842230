//! The bridge's counters: blocks and bytes allocated, freed, live and peak,
//! and `free(NULL)` calls, per bridged handler.
//!
//! The counting is on NumPy's every `malloc` and `free`, so it must cost next
//! to nothing: **no shared atomic read-modify-write on the hot path**. Each
//! thread counts in a block of its own (found through one thread-local
//! access), with plain loads and stores; a reader sums all the blocks under
//! a lock. A thread's block is folded into a "retired" total when the
//! thread ends, and reused by the next thread.
//!
//! Peak bytes need a view of all threads at once. Each thread keeps the net
//! bytes it has not yet published, and publishes them into the handler's
//! shared live count (one atomic add, plus a max for the peak) once they
//! reach [`FLUSH_BYTES`] either way: large blocks publish at once, small
//! ones in batches. The reported peak is therefore exact for blocks of
//! `FLUSH_BYTES` or more and may miss at most `FLUSH_BYTES` per thread of
//! small blocks; live bytes and every count are exact.
//!
//! The first [`MAX_SLOTS`] bridged handlers count per thread; any beyond
//! that (a program making instances by the dozen) count in shared atomics.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// Handlers that count per thread.
pub const MAX_SLOTS: usize = 32;
/// Net bytes a thread keeps before publishing them for the peak.
pub const FLUSH_BYTES: i64 = 32 * 1024;

/// A counter written by one thread and read by any: a relaxed load and
/// store, not an atomic add (no `lock` prefix, no cache-line traffic).
#[derive(Default)]
struct Owned(AtomicU64);

impl Owned {
    #[inline]
    fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    fn take(&self) -> u64 {
        self.0.swap(0, Relaxed)
    }
}

/// One thread's counts for one handler.
#[derive(Default)]
struct SlotCounts {
    allocs: Owned,
    frees: Owned,
    reallocs: Owned,
    null_frees: Owned,
    bytes_allocated: Owned,
    bytes_freed: Owned,
    /// Net bytes not yet published to [`Shared::live`].
    unpublished: AtomicI64,
}

impl SlotCounts {
    #[inline]
    fn publish(&self, delta: i64, shared: &Shared) {
        let mut u = self.unpublished.load(Relaxed) + delta;
        if !(-FLUSH_BYTES..FLUSH_BYTES).contains(&u) {
            shared.publish(u);
            u = 0;
        }
        self.unpublished.store(u, Relaxed);
    }
}

/// The counts every thread shares for one handler: published live bytes
/// and the peak, and the fallback counts (threads being torn down, handlers
/// beyond [`MAX_SLOTS`]).
#[derive(Default)]
pub struct Shared {
    live: AtomicI64,
    peak: AtomicI64,
    fallback: [AtomicU64; 6],
}

impl Shared {
    fn publish(&self, delta: i64) {
        let live = self.live.fetch_add(delta, Relaxed) + delta;
        if delta > 0 {
            self.peak.fetch_max(live, Relaxed);
        }
    }
}

/// All of one thread's counts.
struct ThreadBlock {
    slots: [SlotCounts; MAX_SLOTS],
}

/// Every block ever made (live threads' and pooled ones), and what ended
/// threads counted.
struct Blocks {
    all: Vec<&'static ThreadBlock>,
    pool: Vec<&'static ThreadBlock>,
    retired: [[u64; 6]; MAX_SLOTS],
}

static BLOCKS: Mutex<Blocks> = Mutex::new(Blocks { all: Vec::new(), pool: Vec::new(), retired: [[0; 6]; MAX_SLOTS] });
/// The shared part of the slotted handlers, indexed by slot.
static SLOT_SHARED: [Shared; MAX_SLOTS] = [const { Shared::new_const() }; MAX_SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

impl Shared {
    const fn new_const() -> Shared {
        Shared { live: AtomicI64::new(0), peak: AtomicI64::new(0), fallback: [const { AtomicU64::new(0) }; 6] }
    }
}

fn blocks() -> MutexGuard<'static, Blocks> {
    BLOCKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// This thread's block; returned to the pool when the thread ends.
struct Local(&'static ThreadBlock);

impl Local {
    fn new() -> Local {
        let mut b = blocks();
        let block = b.pool.pop().unwrap_or_else(|| {
            let block: &'static ThreadBlock =
                Box::leak(Box::new(ThreadBlock { slots: std::array::from_fn(|_| SlotCounts::default()) }));
            b.all.push(block);
            block
        });
        Local(block)
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let mut b = blocks();
        for (i, s) in self.0.slots.iter().enumerate() {
            let r = &mut b.retired[i];
            for (k, c) in [&s.allocs, &s.frees, &s.reallocs, &s.null_frees, &s.bytes_allocated, &s.bytes_freed]
                .into_iter()
                .enumerate()
            {
                r[k] += c.take();
            }
            let u = s.unpublished.swap(0, Relaxed);
            if u != 0 {
                SLOT_SHARED[i].publish(u);
            }
        }
        b.pool.push(self.0);
    }
}

thread_local! {
    static LOCAL: Local = Local::new();
}

/// Totals for one handler, summed over threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// `malloc` and `calloc` calls that succeeded.
    pub allocs: u64,
    /// `free` calls that reached the plugin.
    pub frees: u64,
    /// `realloc` calls that succeeded (not counted as allocations).
    pub reallocs: u64,
    /// `free(NULL)` calls filtered out.
    pub null_frees: u64,
    /// Bytes of all allocations, and the new sizes of reallocs.
    pub bytes_allocated: u64,
    /// Bytes of all frees, and the old sizes of reallocs.
    pub bytes_freed: u64,
    /// The highest live byte count seen (see the module docs for its
    /// precision).
    pub peak_bytes: u64,
}

impl Totals {
    /// Blocks allocated and not freed.
    pub fn live_blocks(&self) -> u64 {
        self.allocs.saturating_sub(self.frees)
    }

    /// Bytes allocated and not freed.
    pub fn live_bytes(&self) -> u64 {
        self.bytes_allocated.saturating_sub(self.bytes_freed)
    }
}

/// The counters of one bridged handler.
pub struct Counts {
    /// Index into each thread's block; `None` beyond [`MAX_SLOTS`].
    slot: Option<usize>,
    shared: &'static Shared,
}

const ALLOCS: usize = 0;
const FREES: usize = 1;
const REALLOCS: usize = 2;
const NULL_FREES: usize = 3;
const BYTES_ALLOCATED: usize = 4;
const BYTES_FREED: usize = 5;

impl Counts {
    /// Counters for a new bridged handler.
    pub fn new() -> Counts {
        let n = NEXT_SLOT.fetch_add(1, Relaxed);
        if n < MAX_SLOTS {
            Counts { slot: Some(n), shared: &SLOT_SHARED[n] }
        } else {
            Counts { slot: None, shared: Box::leak(Box::new(Shared::default())) }
        }
    }

    /// Run `f` on this thread's counts; `false` if there are none (beyond
    /// the slots, or the thread is being torn down).
    #[inline]
    fn local(&self, f: impl FnOnce(&SlotCounts)) -> bool {
        match self.slot {
            Some(slot) => LOCAL.try_with(|l| f(&l.0.slots[slot])).is_ok(),
            None => false,
        }
    }

    #[cold]
    fn fallback(&self, adds: &[(usize, u64)], delta: i64) {
        for &(k, n) in adds {
            self.shared.fallback[k].fetch_add(n, Relaxed);
        }
        self.shared.publish(delta);
    }

    /// A block of `size` bytes was allocated.
    #[inline]
    pub fn alloc(&self, size: usize) {
        let shared = self.shared;
        let done = self.local(|s| {
            s.allocs.add(1);
            s.bytes_allocated.add(size as u64);
            s.publish(size as i64, shared);
        });
        if !done {
            self.fallback(&[(ALLOCS, 1), (BYTES_ALLOCATED, size as u64)], size as i64);
        }
    }

    /// A block of `size` bytes was freed.
    #[inline]
    pub fn free(&self, size: usize) {
        let shared = self.shared;
        let done = self.local(|s| {
            s.frees.add(1);
            s.bytes_freed.add(size as u64);
            s.publish(-(size as i64), shared);
        });
        if !done {
            self.fallback(&[(FREES, 1), (BYTES_FREED, size as u64)], -(size as i64));
        }
    }

    /// A block was resized from `old` to `new` bytes.
    pub fn realloc(&self, old: usize, new: usize) {
        let shared = self.shared;
        let delta = new as i64 - old as i64;
        let done = self.local(|s| {
            s.reallocs.add(1);
            s.bytes_freed.add(old as u64);
            s.bytes_allocated.add(new as u64);
            s.publish(delta, shared);
        });
        if !done {
            self.fallback(&[(REALLOCS, 1), (BYTES_FREED, old as u64), (BYTES_ALLOCATED, new as u64)], delta);
        }
    }

    /// NumPy freed NULL.
    pub fn null_free(&self) {
        if !self.local(|s| s.null_frees.add(1)) {
            self.fallback(&[(NULL_FREES, 1)], 0);
        }
    }

    /// The totals over every thread, live or ended.
    pub fn totals(&self) -> Totals {
        let mut sums = [0u64; 6];
        for (k, a) in self.shared.fallback.iter().enumerate() {
            sums[k] = a.load(Relaxed);
        }
        if let Some(slot) = self.slot {
            let b = blocks();
            for block in &b.all {
                let s = &block.slots[slot];
                for (k, c) in [&s.allocs, &s.frees, &s.reallocs, &s.null_frees, &s.bytes_allocated, &s.bytes_freed]
                    .into_iter()
                    .enumerate()
                {
                    sums[k] += c.get();
                }
            }
            for (k, r) in b.retired[slot].iter().enumerate() {
                sums[k] += r;
            }
        }
        let mut t = Totals {
            allocs: sums[ALLOCS],
            frees: sums[FREES],
            reallocs: sums[REALLOCS],
            null_frees: sums[NULL_FREES],
            bytes_allocated: sums[BYTES_ALLOCATED],
            bytes_freed: sums[BYTES_FREED],
            peak_bytes: 0,
        };
        t.peak_bytes = (self.shared.peak.load(Relaxed).max(0) as u64).max(t.live_bytes());
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_across_threads_that_ended() {
        let c = Counts::new();
        c.alloc(100);
        std::thread::scope(|s| {
            s.spawn(|| {
                c.alloc(FLUSH_BYTES as usize * 2);
                c.free(100);
                c.null_free();
            });
        });
        c.realloc(10, 30);
        let t = c.totals();
        assert_eq!((t.allocs, t.frees, t.reallocs, t.null_frees), (2, 1, 1, 1));
        assert_eq!(t.bytes_allocated, 100 + FLUSH_BYTES as u64 * 2 + 30);
        assert_eq!(t.bytes_freed, 100 + 10);
        assert_eq!(t.live_bytes(), FLUSH_BYTES as u64 * 2 + 20);
        assert!(t.peak_bytes >= FLUSH_BYTES as u64 * 2, "{t:?}");
    }
}
