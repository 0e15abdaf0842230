//! The guard allocator: its tables of live and quarantined blocks, its
//! counters, and the checks made on every free. Safe code over
//! [`Region`](crate::raw::pages::Region)s; the only lock is [`Guard`]'s
//! mutex (a [`ForkMutex`], held across `fork`), and system calls are made
//! outside it.
//!
//! A block's life: `alloc` reserves a region, opens its data pages, fills
//! the slack with canaries (and the block with junk), and records it as
//! live. `free` takes it out of the live table — marking it as being
//! quarantined, so that a second free is recognised as a double free even
//! while the first is still running — checks its canaries, closes its pages,
//! and queues it; once the queued regions exceed the quarantine, the oldest
//! are unmapped.

use crate::config::GuardConfig;
use crate::layout::{Placed, Plan, damaged_canaries, fill_canaries};
use crate::raw::pages::{Region, page_size};
use crate::report::{Finding, Op, report};
use memplug_abi::MemplugStats;
use memplug_abi::fork::{ForkLock, ForkMutex};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::MutexGuard;

/// A live block: its region and where it sits.
#[derive(Debug)]
struct Block {
    region: Region,
    at: Placed,
    align: usize,
}

/// A freed block: its size, and its region once it is closed and queued
/// (`None` while the free that put it here is still closing it).
#[derive(Debug)]
struct Quarantined {
    size: usize,
    region: Option<Region>,
}

#[derive(Debug, Default)]
struct Tables {
    /// Live blocks by the address handed out.
    live: BTreeMap<usize, Block>,
    /// Freed blocks still reserved, by the address they had.
    quarantine: HashMap<usize, Quarantined>,
    /// Closed quarantined blocks, oldest first.
    queue: VecDeque<usize>,
    /// Bytes of address space the queued blocks hold.
    held: usize,
    stats: MemplugStats,
}

/// The guard allocator (see the crate documentation). Thread-safe.
#[derive(Debug)]
pub struct Guard {
    config: GuardConfig,
    page: usize,
    tables: ForkMutex<Tables>,
}

impl Guard {
    /// A guard allocator with `config`.
    pub fn new(config: GuardConfig) -> Guard {
        Guard { config, page: page_size(), tables: ForkMutex::default() }
    }

    /// A guard allocator configured by an options string
    /// ([`GuardConfig::parse`]).
    pub fn from_options(options: &str) -> Result<Guard, String> {
        GuardConfig::parse(options).map(Guard::new)
    }

    /// Its configuration.
    pub fn config(&self) -> GuardConfig {
        self.config
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic while the lock was held (caught at the plugin boundary)
        // leaves the tables consistent: every update is a single insert or
        // remove. Carry on with them.
        // `ForkMutex::lock` carries on past poisoning.
        self.tables.lock()
    }

    /// The one lock, for the fork handlers: a `fork` waits until no thread
    /// is inside the tables, and the child finds them whole and unlocked.
    pub(crate) fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        locks(&self.tables);
    }

    /// A new block of `size` bytes (`size >= 1`) aligned to at least the
    /// configured alignment and `align`, zeroed or junk-filled; 0 if it
    /// cannot be made.
    pub fn alloc(&self, size: usize, align: usize, zeroed: bool) -> usize {
        let Some(block) = self.make(size, align, zeroed) else { return 0 };
        let ptr = block.at.ptr;
        let mut t = self.tables();
        t.live.insert(ptr, block);
        let s = &mut t.stats;
        s.total_allocations += 1;
        s.live_count += 1;
        s.live_bytes += size as u64;
        s.peak_bytes = s.peak_bytes.max(s.live_bytes);
        ptr
    }

    /// Reserve, open and fill a block; not yet recorded anywhere.
    fn make(&self, size: usize, align: usize, zeroed: bool) -> Option<Block> {
        let align = align.max(self.config.alignment);
        let side_end = self.config.side == crate::config::Side::End;
        let plan = Plan::new(size.max(1), align, self.page, side_end)?;
        let mut region = Region::reserve(plan.total).ok()?;
        let at = plan.at(region.base());
        region.open(at.data_lo - region.base(), plan.data_len).ok()?;
        let window = region.window_mut();
        let off = |addr: usize| addr - at.data_lo;
        for range in [at.head(), at.tail()] {
            fill_canaries(range.start, &mut window[off(range.start)..off(range.end)]);
        }
        if !zeroed && self.config.junk {
            window[off(at.ptr)..off(at.ptr) + at.size].fill(crate::config::JUNK);
        }
        Some(Block { region, at, align: plan.align() })
    }

    /// Free the block at `ptr`, given with `size`. Errors are reported and
    /// counted; the call then does nothing (or aborts, with
    /// `abort_on_error=1`).
    pub fn free(&self, ptr: usize, size: usize) {
        if ptr == 0 {
            return;
        }
        let Some(block) = self.take(Op::Free, ptr, size) else { return };
        let mut t = self.tables();
        t.stats.live_count -= 1;
        t.stats.live_bytes -= block.at.size as u64;
        drop(t);
        self.retire(Op::Free, block);
    }

    /// Resize the block at `ptr` from `old_size` to `new_size`. The block
    /// always moves (the old address is quarantined, so a stale pointer to
    /// it faults) and keeps its alignment. 0 on failure, with the old block
    /// left as it was, or after an error was reported.
    pub fn realloc(&self, ptr: usize, old_size: usize, new_size: usize) -> usize {
        let Some(old) = self.take(Op::Realloc, ptr, old_size) else { return 0 };
        let Some(mut new) = self.make(new_size.max(1), old.align, false) else {
            self.restore(old);
            return 0;
        };
        let keep = old.at.size.min(new_size);
        let (from, to) = (old.at.ptr - old.at.data_lo, new.at.ptr - new.at.data_lo);
        new.region.window_mut()[to..to + keep].copy_from_slice(&old.region.window()[from..from + keep]);
        let new_ptr = new.at.ptr;
        let mut t = self.tables();
        t.stats.live_bytes = t.stats.live_bytes - old.at.size as u64 + new.at.size as u64;
        t.stats.peak_bytes = t.stats.peak_bytes.max(t.stats.live_bytes);
        t.live.insert(new_ptr, new);
        drop(t);
        self.retire(Op::Realloc, old);
        new_ptr
    }

    /// Take the block at `ptr` out of the live table, marking it as being
    /// quarantined; report and count what is wrong with the call.
    fn take(&self, op: Op, ptr: usize, size: usize) -> Option<Block> {
        let mut t = self.tables();
        let finding = match t.live.remove(&ptr) {
            Some(block) => {
                t.quarantine.insert(ptr, Quarantined { size: block.at.size, region: None });
                if block.at.size == size {
                    return Some(block);
                }
                t.stats.size_mismatches += 1;
                let finding = Finding::SizeMismatch { op, ptr, size, recorded: block.at.size };
                drop(t);
                report(&finding, self.config.abort_on_error);
                return Some(block);
            }
            None => {
                t.stats.bad_frees += 1;
                if let Some(q) = t.quarantine.get(&ptr) {
                    Finding::DoubleFree { op, ptr, size: q.size }
                } else if let Some((&start, b)) = t.live.range(..=ptr).next_back().filter(|(_, b)| {
                    let (base, len) = (b.region.base(), b.region.len());
                    (base..base + len).contains(&ptr)
                }) {
                    Finding::Interior { op, ptr, block: start, block_size: b.at.size }
                } else if let Some((&start, b)) = t.live.range(ptr..).next().filter(|(_, b)| ptr >= b.region.base()) {
                    // In the leading guard page of the next block.
                    Finding::Interior { op, ptr, block: start, block_size: b.at.size }
                } else {
                    Finding::Unknown { op, ptr, quarantine: self.config.quarantine }
                }
            }
        };
        drop(t);
        report(&finding, self.config.abort_on_error);
        None
    }

    /// Put back a block `take` took, after a failed realloc.
    fn restore(&self, block: Block) {
        let mut t = self.tables();
        t.quarantine.remove(&block.at.ptr);
        t.live.insert(block.at.ptr, block);
    }

    /// Check a taken block's canaries, close its pages, and queue it in the
    /// quarantine; unmap what the quarantine no longer holds.
    fn retire(&self, op: Op, mut block: Block) {
        self.check_slack(op, &block);
        let ptr = block.at.ptr;
        if block.region.close().is_err() {
            // Neither remapped nor protected: the pages stay usable, so the
            // quarantine could not catch a use after free. Unmap at once.
            self.tables().quarantine.remove(&ptr);
            return;
        }
        let bytes = block.region.len();
        let mut evicted = Vec::new();
        let mut t = self.tables();
        if let Some(q) = t.quarantine.get_mut(&ptr) {
            q.region = Some(block.region);
            t.queue.push_back(ptr);
            t.held += bytes;
        }
        while t.held > self.config.quarantine {
            let Some(old) = t.queue.pop_front() else { break };
            if let Some(region) = t.quarantine.remove(&old).and_then(|q| q.region) {
                t.held -= region.len();
                evicted.push(region);
            }
        }
        drop(t);
        drop(evicted); // unmapped outside the lock
    }

    /// Report slack bytes that no longer hold their canary.
    fn check_slack(&self, op: Op, block: &Block) {
        let at = block.at;
        let window = block.region.window();
        let damaged = |range: std::ops::Range<usize>| {
            damaged_canaries(range.start, &window[range.start - at.data_lo..range.end - at.data_lo])
        };
        let (before, first_before) = damaged(at.head());
        let (after, first_after) = damaged(at.tail());
        if before + after == 0 {
            return;
        }
        let first = first_before.or(first_after).map_or(0, |a| a as isize - at.ptr as isize);
        let finding = Finding::Overwritten { op, ptr: at.ptr, size: at.size, before, after, first };
        report(&finding, self.config.abort_on_error);
    }

    /// The counters: live bytes and blocks, peak, allocations (a realloc is
    /// not one), bad frees (double, interior or unknown pointers) and size
    /// mismatches.
    pub fn stats(&self) -> MemplugStats {
        self.tables().stats
    }

    /// Bytes of address space the quarantine holds now.
    pub fn quarantined_bytes(&self) -> usize {
        self.tables().held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(options: &str) -> Guard {
        Guard::from_options(options).unwrap()
    }

    #[test]
    fn blocks_are_aligned_junk_filled_and_counted() {
        let g = guard("");
        let p = g.alloc(100, 16, false);
        assert!(p != 0 && p.is_multiple_of(16));
        let s = g.stats();
        assert_eq!((s.live_bytes, s.live_count, s.total_allocations), (100, 1, 1));
        let z = g.alloc(5000, 4096, true);
        assert_eq!(z % 4096, 0);
        g.free(p, 100);
        g.free(z, 5000);
        let s = g.stats();
        assert_eq!((s.live_bytes, s.live_count, s.peak_bytes, s.bad_frees), (0, 0, 5100, 0));
    }

    #[test]
    fn double_unknown_and_interior_frees_are_counted_not_served() {
        let g = guard("");
        let p = g.alloc(64, 16, false);
        g.free(p, 64);
        g.free(p, 64); // double
        g.free(0x1000, 8); // unknown
        let q = g.alloc(64, 16, false);
        g.free(q + 8, 56); // interior
        assert_eq!(g.stats().bad_frees, 3);
        assert_eq!(g.stats().live_count, 1, "the interior free did not free the block");
        g.free(q, 60); // size mismatch, still freed
        let s = g.stats();
        assert_eq!((s.size_mismatches, s.live_count, s.live_bytes), (1, 0, 0));
    }

    #[test]
    fn the_quarantine_is_bounded() {
        let g = guard("quarantine=64k");
        let blocks: Vec<usize> = (0..40).map(|_| g.alloc(100, 16, false)).collect();
        for &p in &blocks {
            g.free(p, 100);
            assert!(g.quarantined_bytes() <= 64 << 10);
        }
        assert!(g.quarantined_bytes() > 0);
        // The first block left the quarantine: its free is now "unknown",
        // not "double".
        g.free(blocks[0], 100);
        assert_eq!(g.stats().bad_frees, 1);
        let none = guard("quarantine=0");
        let p = none.alloc(10, 16, false);
        none.free(p, 10);
        assert_eq!(none.quarantined_bytes(), 0);
    }

    #[test]
    fn realloc_moves_and_keeps_contents_and_alignment() {
        let g = guard("alignment=64");
        let p = g.alloc(10, 256, false);
        assert_eq!(p % 256, 0);
        let mut t = g.tables();
        let b = t.live.get_mut(&p).unwrap();
        let off = p - b.at.data_lo;
        b.region.window_mut()[off..off + 10].copy_from_slice(b"0123456789");
        drop(t);
        let q = g.realloc(p, 10, 5000);
        assert!(q != p && q.is_multiple_of(256));
        let t = g.tables();
        let b = &t.live[&q];
        let off = q - b.at.data_lo;
        assert_eq!(&b.region.window()[off..off + 10], b"0123456789");
        assert_eq!(b.region.window()[off + 10], crate::config::JUNK);
        drop(t);
        let s = g.stats();
        assert_eq!((s.live_bytes, s.total_allocations), (5000, 1));
        g.free(q, 5000);
    }
}
