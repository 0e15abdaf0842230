//! The bridge's counters: blocks and bytes allocated, freed, live and peak,
//! and `free(NULL)` calls, per bridged handler.
//!
//! They are updated on NumPy's every `malloc` and `free`, so they must cost
//! next to nothing: **no atomic read-modify-write on the hot path**. Each
//! thread counts in a block of its own, found through one thread-local
//! pointer (constant-initialised, no destructor check), with plain loads and
//! stores. A reader sums every block. Counts are cumulative and never move:
//! when a thread ends, its block goes back to a pool with its counts in it,
//! and the next new thread carries on counting in it. So there are as many
//! blocks as threads ever alive at once, and every sum is complete.
//!
//! **Peak bytes** need all threads at once. A thread checks the peak when its
//! own live bytes have grown by [`PEAK_CHECK_BYTES`] since its last check
//! (at every large block, every so many small ones): it sums the live bytes
//! of every block (plain loads, no lock) and raises the shared peak if that
//! is higher. The peak is therefore exact when memory grows in steps of
//! `PEAK_CHECK_BYTES` or more, and can be short by up to about
//! `PEAK_CHECK_BYTES` per thread when it grows in small blocks; live counts
//! are always exact.
//!
//! The first [`MAX_SLOTS`] bridged handlers count per thread, in up to
//! [`MAX_BLOCKS`] thread blocks; counts beyond either (a program making
//! instances by the dozen, or thousands of threads at once) and counts made
//! while a thread is being torn down go to shared atomic counters instead.

use crate::raw_static::{AtomicStatic, LocalStatic, Slot};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use Ordering::Relaxed;

/// Handlers that count per thread.
pub const MAX_SLOTS: usize = 32;
/// Thread blocks at most (threads alive at once, counting).
pub const MAX_BLOCKS: usize = 1024;
/// Growth of one thread's live bytes between two checks of the peak.
pub const PEAK_CHECK_BYTES: i64 = 32 * 1024;

/// A counter written by one thread and read by any: a relaxed load and
/// store, not an atomic add (no `lock` prefix, no cache-line traffic).
#[derive(Default)]
struct Owned(AtomicU64);

impl Owned {
    #[inline]
    fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    #[inline]
    fn get(&self) -> u64 {
        self.0.load(Relaxed)
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
    /// This thread's live bytes when it last checked the peak (owner only).
    checkpoint: AtomicI64,
}

impl SlotCounts {
    /// Check the peak if this thread's live bytes grew by
    /// [`PEAK_CHECK_BYTES`] since its last check.
    #[inline]
    fn maybe_check_peak(&self, slot: usize, shared: &Shared) {
        let live = self.live();
        if live - self.checkpoint.load(Relaxed) >= PEAK_CHECK_BYTES {
            self.checkpoint.store(live, Relaxed);
            shared.check_peak(slot);
        }
    }

    fn live(&self) -> i64 {
        self.bytes_allocated.get().wrapping_sub(self.bytes_freed.get()) as i64
    }
}

/// One thread's counts for every slotted handler.
struct ThreadBlock {
    slots: [SlotCounts; MAX_SLOTS],
}

/// Every block made (threads' and pooled): readers look at the first
/// `BLOCKS_LEN`.
static BLOCKS: [AtomicStatic<ThreadBlock>; MAX_BLOCKS] = [const { AtomicStatic::empty() }; MAX_BLOCKS];
static BLOCKS_LEN: AtomicUsize = AtomicUsize::new(0);
/// Blocks of ended threads, waiting for new threads. Taking one from here
/// (and returning it) under the mutex hands its counters over cleanly.
static POOL: Mutex<Vec<&'static ThreadBlock>> = Mutex::new(Vec::new());

/// The blocks made so far.
fn blocks() -> impl Iterator<Item = &'static ThreadBlock> {
    let len = BLOCKS_LEN.load(Ordering::Acquire);
    BLOCKS[..len].iter().filter_map(AtomicStatic::get)
}

thread_local! {
    /// This thread's block: empty before its first count, closed once the
    /// thread is being torn down (or when no block could be had).
    static LOCAL: LocalStatic<ThreadBlock> = const { LocalStatic::empty() };
    /// Returns the block to the pool when the thread ends. Touched only
    /// once per thread, off the hot path.
    static RETURN_ON_EXIT: ReturnOnExit = const { ReturnOnExit(Cell::new(None)) };
}

struct ReturnOnExit(Cell<Option<&'static ThreadBlock>>);

impl Drop for ReturnOnExit {
    fn drop(&mut self) {
        if let Some(block) = self.0.take() {
            let _ = LOCAL.try_with(LocalStatic::close);
            POOL.lock().unwrap_or_else(|e| e.into_inner()).push(block);
        }
    }
}

/// Give this thread a block (from the pool, or a new one).
#[cold]
#[inline(never)]
fn attach() -> Option<&'static ThreadBlock> {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let block = match pool.pop() {
        Some(b) => b,
        None => {
            // Registration is serialised by the pool's lock.
            let n = BLOCKS_LEN.load(Relaxed);
            if n == MAX_BLOCKS {
                drop(pool);
                let _ = LOCAL.try_with(LocalStatic::close);
                return None;
            }
            let b: &'static ThreadBlock =
                Box::leak(Box::new(ThreadBlock { slots: std::array::from_fn(|_| SlotCounts::default()) }));
            BLOCKS[n].set(b);
            BLOCKS_LEN.store(n + 1, Ordering::Release);
            b
        }
    };
    drop(pool);
    // Registering the destructor fails during teardown: then the block
    // stays out of the pool (its counts still count) and the thread counts
    // in the shared atomics from now on.
    if RETURN_ON_EXIT.try_with(|r| r.0.set(Some(block))).is_ok() {
        let _ = LOCAL.try_with(|l| l.set(block));
    } else {
        let _ = LOCAL.try_with(LocalStatic::close);
        return None;
    }
    Some(block)
}

/// This thread's block, if it has (or can get) one.
#[inline]
fn local() -> Option<&'static ThreadBlock> {
    match LOCAL.with(LocalStatic::get) {
        Slot::Ref(b) => Some(b),
        Slot::Empty => attach(),
        Slot::Closed => None,
    }
}

/// The counts every thread shares for one handler: the peak, and the
/// fallback counts.
pub struct Shared {
    peak: AtomicI64,
    fallback: [AtomicU64; 6],
}

impl Shared {
    const fn new() -> Shared {
        Shared { peak: AtomicI64::new(0), fallback: [const { AtomicU64::new(0) }; 6] }
    }

    fn fallback_live(&self) -> i64 {
        self.fallback[BYTES_ALLOCATED].load(Relaxed).wrapping_sub(self.fallback[BYTES_FREED].load(Relaxed)) as i64
    }

    /// Raise the peak to the live bytes now, if higher.
    #[cold]
    #[inline(never)]
    fn check_peak(&self, slot: usize) {
        let live = self.fallback_live() + blocks().map(|b| b.slots[slot].live()).sum::<i64>();
        if live > self.peak.load(Relaxed) {
            self.peak.fetch_max(live, Relaxed);
        }
    }
}

static SLOT_SHARED: [Shared; MAX_SLOTS] = [const { Shared::new() }; MAX_SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

const ALLOCS: usize = 0;
const FREES: usize = 1;
const REALLOCS: usize = 2;
const NULL_FREES: usize = 3;
const BYTES_ALLOCATED: usize = 4;
const BYTES_FREED: usize = 5;

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

impl Default for Counts {
    fn default() -> Self {
        Counts::new()
    }
}

impl Counts {
    /// Counters for a new bridged handler.
    pub fn new() -> Counts {
        let n = NEXT_SLOT.fetch_add(1, Relaxed);
        if n < MAX_SLOTS {
            Counts { slot: Some(n), shared: &SLOT_SHARED[n] }
        } else {
            Counts { slot: None, shared: Box::leak(Box::new(Shared::new())) }
        }
    }

    /// This thread's counts for this handler, if it counts per thread.
    #[inline]
    fn mine(&self) -> Option<(usize, &'static SlotCounts)> {
        let slot = self.slot?;
        let block = local()?;
        Some((slot, &block.slots[slot]))
    }

    #[cold]
    #[inline(never)]
    fn fallback(&self, adds: &[(usize, u64)]) {
        for &(k, n) in adds {
            self.shared.fallback[k].fetch_add(n, Relaxed);
        }
        let live = self.shared.fallback_live();
        if self.slot.is_none() && live > self.shared.peak.load(Relaxed) {
            self.shared.peak.fetch_max(live, Relaxed);
        }
    }

    /// A block of `size` bytes was allocated.
    #[inline]
    pub fn alloc(&self, size: usize) {
        match self.mine() {
            Some((slot, s)) => {
                s.allocs.add(1);
                s.bytes_allocated.add(size as u64);
                s.maybe_check_peak(slot, self.shared);
            }
            None => self.fallback(&[(ALLOCS, 1), (BYTES_ALLOCATED, size as u64)]),
        }
    }

    /// A block of `size` bytes was freed.
    #[inline]
    pub fn free(&self, size: usize) {
        match self.mine() {
            Some((_, s)) => {
                s.frees.add(1);
                s.bytes_freed.add(size as u64);
            }
            None => self.fallback(&[(FREES, 1), (BYTES_FREED, size as u64)]),
        }
    }

    /// A block was resized from `old` to `new` bytes.
    pub fn realloc(&self, old: usize, new: usize) {
        match self.mine() {
            Some((slot, s)) => {
                s.reallocs.add(1);
                s.bytes_freed.add(old as u64);
                s.bytes_allocated.add(new as u64);
                s.maybe_check_peak(slot, self.shared);
            }
            None => self.fallback(&[(REALLOCS, 1), (BYTES_FREED, old as u64), (BYTES_ALLOCATED, new as u64)]),
        }
    }

    /// NumPy freed NULL.
    pub fn null_free(&self) {
        match self.mine() {
            Some((_, s)) => s.null_frees.add(1),
            None => self.fallback(&[(NULL_FREES, 1)]),
        }
    }

    /// The totals over every thread, live or ended.
    pub fn totals(&self) -> Totals {
        let mut sums: [u64; 6] = std::array::from_fn(|k| self.shared.fallback[k].load(Relaxed));
        if let Some(slot) = self.slot {
            for block in blocks() {
                let s = &block.slots[slot];
                for (k, c) in [&s.allocs, &s.frees, &s.reallocs, &s.null_frees, &s.bytes_allocated, &s.bytes_freed]
                    .into_iter()
                    .enumerate()
                {
                    sums[k] = sums[k].wrapping_add(c.get());
                }
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
                c.alloc(PEAK_CHECK_BYTES as usize * 2);
                c.free(100);
                c.null_free();
            });
        });
        // A new thread reuses the ended thread's block and keeps its counts.
        std::thread::scope(|s| {
            s.spawn(|| c.realloc(10, 30));
        });
        let t = c.totals();
        assert_eq!((t.allocs, t.frees, t.reallocs, t.null_frees), (2, 1, 1, 1));
        assert_eq!(t.bytes_allocated, 100 + PEAK_CHECK_BYTES as u64 * 2 + 30);
        assert_eq!(t.bytes_freed, 100 + 10);
        assert_eq!(t.live_bytes(), PEAK_CHECK_BYTES as u64 * 2 + 20);
        assert!(t.peak_bytes >= PEAK_CHECK_BYTES as u64 * 2 + 100, "{t:?}");
    }

    #[test]
    fn the_peak_follows_large_blocks_exactly() {
        let c = Counts::new();
        let mb = 1 << 20;
        c.alloc(3 * mb);
        c.free(3 * mb);
        c.alloc(mb);
        let t = c.totals();
        assert_eq!((t.peak_bytes, t.live_bytes()), (3 * mb as u64, mb as u64));
    }

    #[test]
    fn handlers_beyond_the_slots_count_in_shared_atomics() {
        let extra: Vec<Counts> = (0..MAX_SLOTS + 1).map(|_| Counts::new()).collect();
        let last = extra.last().unwrap();
        assert!(last.slot.is_none());
        last.alloc(1 << 20);
        last.free(1 << 20);
        let t = last.totals();
        assert_eq!((t.allocs, t.frees, t.live_bytes(), t.peak_bytes), (1, 1, 0, 1 << 20));
    }
}
