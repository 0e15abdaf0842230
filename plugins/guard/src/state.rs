//! The guard allocator: its tables of live and quarantined blocks, its
//! counters, and the checks made on every free. Safe code over
//! [`Region`](crate::raw::pages::Region)s; the only lock is [`Guard`]'s
//! mutex (a [`ForkMutex`], held across `fork`), and system calls are made
//! outside it.
//!
//! A block's life: `alloc` takes a region (a mapping of its own, or with
//! `sample=N` a free slot of the pool reserved up front), opens its data
//! pages, fills the slack with canaries (and the block with junk), and
//! records it as live. `free` takes it out of the live table — marking it
//! as being quarantined, so that a second free is recognised as a double
//! free even while the first is still running — checks its canaries, closes
//! its pages, and queues it; once the queued regions exceed the quarantine,
//! the oldest are unmapped (or their slots freed for reuse). A pool with no
//! free slot reuses its oldest quarantined one.
//!
//! When a mapping fails for want of mappings (ENOMEM), the quarantine is
//! emptied and the mapping tried once more; if it fails again at
//! `vm.max_map_count`, that is said once on standard error and the
//! allocation returns 0 (see `findings::map_limit`).

use crate::config::GuardConfig;
use crate::errors::{Shared, Verdict};
use crate::findings::{Finding, Op, report};
use crate::layout::{Plan, damaged_canaries, fill_canaries};
use crate::raw::pages::{Region, page_size};
use crate::sample::Sampler;
pub(crate) use crate::tables::Block;
use crate::tables::{Origin, Quarantined, Tables};
use memplug_abi::MemplugStats;
use memplug_abi::fork::{ForkLock, ForkMutex};
use std::io;
use std::sync::{Arc, MutexGuard};

/// With `sample=`: the sampler and the pool's address range.
#[derive(Debug)]
struct Sampling {
    sampler: Sampler,
    /// The pool: `[lo, hi)`.
    lo: usize,
    hi: usize,
    /// Bytes of each slot.
    slot_len: usize,
}

/// How a realloc of a guarded block went ([`Guard::resize`]).
#[derive(Debug)]
pub(crate) enum Resized {
    /// The new guarded block.
    Done(usize),
    /// Nothing changed: an error was reported, or no block could be made.
    Failed,
    /// The block was taken out and is to move to the system allocator: copy
    /// its [`Block::contents`], then [`Guard::moved_out`] (or
    /// [`Guard::restore`] if that fails).
    MoveOut(Block),
}

/// The guard allocator (see the crate documentation). Thread-safe.
#[derive(Debug)]
pub struct Guard {
    config: GuardConfig,
    page: usize,
    sampling: Option<Sampling>,
    /// The tables, shared with the `SIGSEGV` handler (`raw::signal`).
    shared: Arc<Shared>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        crate::signal_raw::unregister(&self.shared);
    }
}

impl Guard {
    /// A guard allocator with `config`. With `sample=` this reserves the
    /// pool (`slots` × a slot of `sample_max` bytes and its guard pages, of
    /// address space only); an error says why it could not.
    pub fn try_new(config: GuardConfig) -> Result<Guard, String> {
        let page = page_size();
        let mut tables = Tables::default();
        let sampling = match config.sample {
            0 => None,
            _ if config.slots == 0 => return Err("slots=0: sampling needs at least one slot".into()),
            every => {
                let side_end = config.side == crate::config::Side::End;
                let plan = Plan::new(config.sample_max, config.alignment, page, side_end)
                    .ok_or_else(|| format!("sample_max={} is too large", config.sample_max))?;
                let slots = Region::pool(config.slots, plan.total).map_err(|e| {
                    format!(
                        "cannot reserve {} bytes of address space for slots={} of sample_max={}: {e}; \
                         give fewer slots= or a smaller sample_max=",
                        config.slots.saturating_mul(plan.total),
                        config.slots,
                        config.sample_max
                    )
                })?;
                let (lo, hi) = (slots[0].base(), slots[slots.len() - 1].base() + plan.total);
                tables.free_slots = slots.into();
                Some(Sampling { sampler: Sampler::seeded(every), lo, hi, slot_len: plan.total })
            }
        };
        memplug_stacks::capture::init();
        let pool = sampling.as_ref().map_or((0, 0), |s| (s.lo, s.hi));
        let shared = Arc::new(Shared { config, tables: ForkMutex::new(tables), pool });
        crate::signal_raw::register(&shared);
        Ok(Guard { config, page, sampling, shared })
    }

    /// A guard allocator with `config`; see [`Guard::try_new`], whose error
    /// this panics with (only possible with `sample=`).
    pub fn new(config: GuardConfig) -> Guard {
        Guard::try_new(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A guard allocator configured by an options string
    /// ([`GuardConfig::parse`]).
    pub fn from_options(options: &str) -> Result<Guard, String> {
        GuardConfig::parse(options).and_then(Guard::try_new)
    }

    /// Its configuration.
    pub fn config(&self) -> GuardConfig {
        self.config
    }

    /// Whether `sample=` is on: then only sampled allocations are guard's,
    /// and the plugin serves the rest from the system allocator.
    pub fn is_sampling(&self) -> bool {
        self.sampling.is_some()
    }

    /// Whether the next allocation is to be guarded: always without
    /// `sample=`, one in N at random with it.
    #[inline]
    pub fn sampled(&self) -> bool {
        self.sampling.as_ref().is_none_or(|s| s.sampler.next())
    }

    /// Whether a block at `addr` would be guard's: always without
    /// `sample=`; with it, whether `addr` is inside the pool (one compare,
    /// no lock), the rest being the system allocator's.
    #[inline]
    pub fn owns(&self, addr: usize) -> bool {
        self.sampling.as_ref().is_none_or(|s| (s.lo..s.hi).contains(&addr))
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic while the lock was held (caught at the plugin boundary)
        // leaves the tables consistent: every update is a single insert or
        // remove. `ForkMutex::lock` carries on past poisoning.
        self.shared.tables.lock()
    }

    /// The one lock, for the fork handlers: a `fork` waits until no thread
    /// is inside the tables, and the child finds them whole and unlocked.
    pub(crate) fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        locks(&self.shared.tables);
    }

    /// A new guarded block of `size` bytes (`size >= 1`) aligned to at
    /// least the configured alignment and `align`, zeroed or junk-filled; 0
    /// if it cannot be made (with `sample=`: also when it does not fit a
    /// slot, or every slot is live). The sampler is not asked.
    pub fn alloc(&self, size: usize, align: usize, zeroed: bool) -> usize {
        let made = crate::errors::here(self.config.stack_depth);
        let Some(block) = self.make(size, align, zeroed, made) else { return 0 };
        let ptr = block.at.ptr;
        let mut t = self.tables();
        t.live.insert(ptr, block);
        t.stats.allocated(size);
        ptr
    }

    /// Reserve, open and fill a block; not yet recorded anywhere.
    fn make(&self, size: usize, align: usize, zeroed: bool, made: Origin) -> Option<Block> {
        let align = align.max(self.config.alignment);
        let side_end = self.config.side == crate::config::Side::End;
        let plan = Plan::new(size.max(1), align, self.page, side_end)?;
        let mut region = match &self.sampling {
            Some(s) if plan.total > s.slot_len => return None,
            Some(_) => self.free_slot()?,
            None => self.mapped(|| Region::reserve(plan.total))?,
        };
        let at = plan.at(region.base());
        if self.mapped(|| region.open(at.data_lo - region.base(), plan.data_len)).is_none() {
            let mut unmap = Vec::new();
            self.tables().discard(region, &mut unmap);
            return None;
        }
        let window = region.window_mut();
        let off = |addr: usize| addr - at.data_lo;
        for range in [at.head(), at.tail()] {
            fill_canaries(range.start, &mut window[off(range.start)..off(range.end)]);
        }
        if !zeroed && self.config.junk {
            window[off(at.ptr)..off(at.ptr) + at.size].fill(crate::config::JUNK);
        }
        Some(Block { region, at, align: plan.align(), made, reported: false })
    }

    /// A slot of the pool: a free one, else the oldest in quarantine.
    fn free_slot(&self) -> Option<Region> {
        let mut t = self.tables();
        t.free_slots.pop_front().or_else(|| t.evict_oldest())
    }

    /// `map()`, tried again once after emptying the quarantine if it failed
    /// for want of memory or mappings; `None` (said once on standard error
    /// when the process is at `vm.max_map_count`) if it fails again.
    fn mapped<T>(&self, mut map: impl FnMut() -> io::Result<T>) -> Option<T> {
        let out_of_maps = |e: &io::Error| e.raw_os_error() == Some(libc::ENOMEM);
        match map() {
            Ok(v) => return Some(v),
            Err(e) if !out_of_maps(&e) => return None,
            Err(_) => {}
        }
        self.empty_quarantine();
        match map() {
            Ok(v) => Some(v),
            Err(e) => {
                if out_of_maps(&e) {
                    let t = self.tables();
                    let blocks = t.live.len() + t.quarantine.len();
                    drop(t);
                    crate::findings::map_limit(blocks, self.is_sampling());
                }
                None
            }
        }
    }

    /// Unmap every quarantined block (their slots freed, with `sample=`).
    fn empty_quarantine(&self) {
        let mut unmap = Vec::new();
        let mut t = self.tables();
        while let Some(region) = t.evict_oldest() {
            t.discard(region, &mut unmap);
        }
        drop(t);
        drop(unmap); // unmapped outside the lock
    }

    /// Free the block at `ptr`, given with `size`. Errors are reported and
    /// counted; the call then does nothing (or aborts, with
    /// `abort_on_error=1`).
    pub fn free(&self, ptr: usize, size: usize) {
        if ptr == 0 {
            return;
        }
        let Some(block) = self.take(Op::Free, ptr, size) else { return };
        self.moved_out(Op::Free, block);
    }

    /// Resize the guarded block at `ptr` from `old_size` to `new_size`
    /// into another guarded block. The block always moves (the old address
    /// is quarantined, so a stale pointer to it faults) and keeps its
    /// alignment. 0 on failure, with the old block left as it was, or after
    /// an error was reported.
    pub fn realloc(&self, ptr: usize, old_size: usize, new_size: usize) -> usize {
        match self.resize(ptr, old_size, new_size, true) {
            Resized::Done(p) => p,
            Resized::Failed => 0,
            Resized::MoveOut(old) => {
                self.restore(old);
                0
            }
        }
    }

    /// Resize the guarded block at `ptr`: into a new guarded block if
    /// `guarded` (and one can be made), else hand it out to move to the
    /// system allocator ([`Resized::MoveOut`]; also when no guarded block
    /// can be made with `sample=`).
    pub(crate) fn resize(&self, ptr: usize, old_size: usize, new_size: usize, guarded: bool) -> Resized {
        let Some(old) = self.take(Op::Realloc, ptr, old_size) else { return Resized::Failed };
        let origin = crate::errors::here(self.config.stack_depth);
        let made = if guarded { self.make(new_size.max(1), old.align, false, origin) } else { None };
        let Some(mut new) = made else {
            if guarded && !self.is_sampling() {
                self.restore(old);
                return Resized::Failed;
            }
            return Resized::MoveOut(old);
        };
        let keep = old.at.size.min(new_size);
        let to = new.at.ptr - new.at.data_lo;
        new.region.window_mut()[to..to + keep].copy_from_slice(&old.contents()[..keep]);
        let new_ptr = new.at.ptr;
        let mut t = self.tables();
        t.stats.resized(old.at.size, new.at.size);
        t.live.insert(new_ptr, new);
        drop(t);
        self.retire(Op::Realloc, old);
        Resized::Done(new_ptr)
    }

    /// A taken block is gone (freed, or moved to the system allocator):
    /// count it out, check it and quarantine it.
    pub(crate) fn moved_out(&self, op: Op, block: Block) {
        let mut t = self.tables();
        t.stats.freed(block.at.size);
        drop(t);
        self.retire(op, block);
    }

    /// Take the block at `ptr` out of the live table, marking it as being
    /// quarantined; report and count what is wrong with the call.
    fn take(&self, op: Op, ptr: usize, size: usize) -> Option<Block> {
        let mut t = self.tables();
        match t.live.remove(&ptr) {
            Some(block) => {
                let user = crate::errors::freed_view(&block);
                let (base, len) = (block.region.base(), block.region.len());
                let freed = crate::errors::here(self.config.stack_depth);
                let q = Quarantined {
                    region: None,
                    span: (base, base + len),
                    user,
                    made: block.made,
                    freed,
                    reported: false,
                };
                t.quarantine.insert(ptr, q);
                if block.at.size == size {
                    return Some(block);
                }
                t.stats.size_mismatches += 1;
                let finding = Finding::SizeMismatch { op, ptr, size, recorded: block.at.size };
                drop(t);
                report(&finding, self.config.abort_on_error);
                Some(block)
            }
            None => {
                t.stats.bad_frees += 1;
                let verdict = crate::errors::bad_free(&mut t, &self.config, self.shared.pool, ptr, false);
                drop(t);
                if verdict == Verdict::Abort {
                    std::process::abort();
                }
                None
            }
        }
    }

    /// A pointer `memplug run`'s interposer could not match to a block (its
    /// header is not one the interposer wrote): reported (and the program
    /// aborted, unless `recover=1`) when it is inside a block of guard's,
    /// freed already, or cannot be a block libc made; `false` when it may
    /// be such a libc block, which is left alone.
    pub fn foreign_free(&self, ptr: usize) -> bool {
        let mut t = self.tables();
        let verdict = crate::errors::bad_free(&mut t, &self.config, self.shared.pool, ptr, true);
        if verdict != Verdict::NotOurs {
            t.stats.bad_frees += 1;
        }
        drop(t);
        match verdict {
            Verdict::Abort => std::process::abort(),
            v => v != Verdict::NotOurs,
        }
    }

    /// Put back a block `take` took, after a failed realloc.
    pub(crate) fn restore(&self, block: Block) {
        let mut t = self.tables();
        t.quarantine.remove(&block.at.ptr);
        t.live.insert(block.at.ptr, block);
    }

    /// Check a taken block's canaries, close its pages, and queue it in the
    /// quarantine; unmap what the quarantine no longer holds.
    fn retire(&self, op: Op, mut block: Block) {
        self.check_slack(op, &block);
        let ptr = block.at.ptr;
        let mut evicted = Vec::new();
        if block.region.close().is_err() {
            // Neither remapped nor protected: the pages stay usable, so the
            // quarantine could not catch a use after free. Unmap at once
            // (a slot is free again).
            let mut t = self.tables();
            t.quarantine.remove(&ptr);
            t.discard(block.region, &mut evicted);
            drop(t);
            drop(evicted);
            return;
        }
        let bytes = block.region.len();
        let mut t = self.tables();
        if let Some(q) = t.quarantine.get_mut(&ptr) {
            q.region = Some(block.region);
            t.queue.push_back(ptr);
            t.held += bytes;
        }
        while t.held > self.config.quarantine {
            let Some(region) = t.evict_oldest() else { break };
            t.discard(region, &mut evicted);
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

    /// The blocks live now, grouped by allocation stack: `(bytes, blocks,
    /// stack)`, largest first.
    pub fn live_by_stack(&self) -> Vec<(u64, u64, memplug_stacks::capture::StackId)> {
        crate::errors::live_by_stack(&self.shared)
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
        let g = guard("recover=1");
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
        let g = guard("quarantine=64k,recover=1");
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

    #[test]
    fn sampled_blocks_live_in_a_bounded_pool_and_reuse_the_oldest_slot() {
        let g = guard("sample=1,slots=4,sample_max=4k,quarantine=0,recover=1");
        assert!(g.is_sampling() && g.sampled());
        let ps: Vec<usize> = (0..4).map(|_| g.alloc(100, 16, false)).collect();
        assert!(ps.iter().all(|&p| p != 0 && g.owns(p)), "{ps:x?}");
        assert_eq!(g.alloc(100, 16, false), 0, "every slot is live");
        assert_eq!(g.alloc(5000, 16, false), 0, "larger than sample_max: not guard's");
        let outside = Box::new(0u8);
        assert!(!g.owns(&*outside as *const u8 as usize), "the system's blocks are not guard's");
        g.free(ps[0], 100);
        let again = g.alloc(64, 16, false);
        assert!(again != 0 && g.owns(again), "a freed slot is used again");
        g.free(ps[1], 100);
        g.free(ps[1], 100);
        assert_eq!(g.stats().bad_frees, 1, "a double free inside the pool is still caught");
    }

    #[test]
    fn a_full_pool_takes_its_oldest_quarantined_slot() {
        let g = guard("sample=1,slots=2,sample_max=4k,recover=1");
        let (a, b) = (g.alloc(10, 16, false), g.alloc(10, 16, false));
        g.free(a, 10);
        g.free(b, 10);
        assert!(g.quarantined_bytes() > 0);
        let c = g.alloc(10, 16, false);
        assert_eq!(c, a, "the oldest slot, the same place in it");
        g.free(b, 10);
        assert_eq!(g.stats().bad_frees, 1, "the newer one is still in quarantine: a double free");
    }

    #[test]
    fn a_block_not_sampled_again_moves_out_of_the_pool() {
        let g = guard("sample=1,slots=2,sample_max=4k,recover=1");
        let p = g.alloc(10, 16, false);
        match g.resize(p, 10, 20, false) {
            Resized::MoveOut(b) => {
                assert_eq!(b.contents(), &[crate::config::JUNK; 10]);
                g.moved_out(Op::Realloc, b);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(g.stats().live_count, 0);
        let q = g.alloc(10, 16, false);
        let r = g.realloc(q, 10, 4000);
        assert!(r != 0 && g.owns(r), "guarded to guarded");
        assert_eq!(g.realloc(r, 4000, 10_000), 0, "too large for a slot: Guard::realloc fails");
        assert_eq!(g.stats().live_count, 1, "and keeps the block");
    }
}
