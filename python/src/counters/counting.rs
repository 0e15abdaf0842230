//! Counting and summing: blocks and bytes allocated, freed, live and peak,
//! and `free(NULL)` calls, per bridged handler — counted in the per-thread
//! lines of [`super::thread_lines`] (see there why they cost next to
//! nothing), and summed over them ([`Totals`]).
//!
//! **Peak bytes** need all threads at once. A thread checks the peak when its
//! own live bytes have grown by [`PEAK_CHECK_BYTES`](super::thread_lines::PEAK_CHECK_BYTES) since its last check
//! (at every large block, every so many small ones): each line keeps the
//! `headroom` left before the next check ([`FULL_HEADROOM`] after one),
//! which an allocation lowers and a free raises, and a check is due when it
//! goes below zero (one subtraction and a branch on its sign on the hot
//! path). A block that goes into the thread's cache of freed blocks, or
//! comes out of it, leaves the headroom as it is: for the headroom it
//! stays live while cached, so the cache's hot paths check nothing (the
//! lists hold at most [`LISTS_MAX_BYTES`](crate::block::cache_raw::LISTS_MAX_BYTES)).
//! While its line is the only one the bridge
//! ever counted in, a thread's live bytes are the total: it raises the
//! shared peak to them, and only when they pass its last high (so a loop of
//! large blocks reads no shared line). Once a second line is claimed (or a
//! thread counts in the fallback) every line is marked crowded in its
//! owner word; its owner takes the mark in at its next call (its next
//! allocation then checks). From then
//! on a free raises the headroom to [`FULL_HEADROOM`] at most — the
//! thread's last check follows its live bytes down, so that growing back
//! counts as growth (another thread may have grown meanwhile) — and a check
//! sums the live bytes of every line (plain loads, no lock) and raises the
//! shared peak if that is higher. Every check publishes the line's live
//! bytes then (its *high*, in a table apart from the lines, written only
//! when it changed), and a crowded check sums the lines only when its own
//! live bytes and the others' highs add up to more than the peak: the
//! others' lines, which their owners write at every call, are read only
//! when the peak may rise (reading them at every large block made two
//! threads allocating large blocks each slow the other down). A line's live
//! bytes are at most its high and the headroom its owner had left after
//! that check, so the sum this skips is short of the peak by no more than
//! the bound below. The peak is therefore exact when memory
//! grows in steps of `PEAK_CHECK_BYTES` or more, and can be short by up to
//! about `PEAK_CHECK_BYTES` + `LISTS_MAX_BYTES` per thread when it grows in
//! small blocks (its live bytes can grow past its last check by the
//! headroom, and by the blocks its lists held then); live counts are
//! always exact.

use super::thread_lines::{
    ALLOCS, BYTES_ALLOCATED, BYTES_FREED, Counts, FREES, FULL_HEADROOM, Line, NULL_FREES, REALLOCS,
};
use crate::block::classes::CLASSES;
use std::sync::atomic::{Ordering, Ordering::Relaxed};

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

impl Counts {
    #[cold]
    #[inline(never)]
    fn fallback(&self, adds: &[(usize, u64)]) {
        for &(k, n) in adds {
            self.fallback[k].fetch_add(n, Relaxed);
        }
        if !self.fallback_used.swap(true, Ordering::SeqCst) {
            self.used_lines().for_each(Line::crowd);
        }
        self.check_peak();
    }

    /// Raise the peak to the live bytes now, if higher. Not `#[cold]`: a
    /// thread allocating and freeing large blocks in turn runs it at every
    /// allocation.
    #[inline(never)]
    fn check_peak(&self) {
        let mut live =
            self.fallback[BYTES_ALLOCATED].load(Relaxed).wrapping_sub(self.fallback[BYTES_FREED].load(Relaxed)) as i64;
        for (w, word) in self.used.iter().enumerate() {
            let mut bits = word.load(Relaxed);
            while bits != 0 {
                live += self.lines[w * 64 + bits.trailing_zeros() as usize].live();
                bits &= bits - 1;
            }
        }
        if live > self.peak.load(Relaxed) {
            self.peak.fetch_max(live, Relaxed);
        }
    }

    /// The check of the peak that `line`'s used-up headroom made due: its
    /// live bytes grew by [`PEAK_CHECK_BYTES`](super::thread_lines::PEAK_CHECK_BYTES)
    /// since its last check (for a crowded line: above the lowest they were
    /// since); see the module docs. Not `#[cold]`: a thread allocating
    /// large blocks runs it at each.
    #[inline(never)]
    pub fn peak_check_due(&self, line: &Line) {
        line.headroom.store(FULL_HEADROOM, Relaxed);
        let live = line.live();
        let index = self.index_of(line);
        // Published before the others' are read (SeqCst both ways): of two
        // threads checking at once, at least one sees the other's.
        let high = &self.highs.0[index];
        if high.load(Relaxed) != live {
            high.store(live, Ordering::SeqCst);
        }
        if line.crowded() {
            if self.may_pass_peak(index, live) {
                self.check_peak();
            }
        } else if live > self.peak.load(Relaxed) {
            // The only line: its live bytes are the total.
            self.peak.fetch_max(live, Relaxed);
        }
    }

    /// Whether the live bytes of every line may be above the peak, judged
    /// from the [highs](super::thread_lines::Highs) the other lines' owners
    /// published at their last checks (each line's live bytes are at most
    /// its high and the headroom after it: see the module docs), beside
    /// `live`, the bytes of `index`'s line now. Reads none of the other
    /// lines, which their owners write at every call.
    fn may_pass_peak(&self, index: usize, live: i64) -> bool {
        if self.fallback_used.load(Relaxed) {
            return true;
        }
        let mut bound = live;
        for (w, word) in self.used.iter().enumerate() {
            let mut bits = word.load(Relaxed);
            while bits != 0 {
                let j = w * 64 + bits.trailing_zeros() as usize;
                if j != index {
                    bound = bound.wrapping_add(self.highs.0[j].load(Ordering::SeqCst));
                }
                bits &= bits - 1;
            }
        }
        bound > self.peak.load(Relaxed)
    }

    /// A block of `size` bytes was allocated, by the thread of `line`
    /// ([`Counts::mine`]).
    #[inline]
    pub fn alloc(&self, line: Option<&Line>, size: usize) {
        match line {
            Some(l) => self.alloc_in(l, size),
            None => self.fallback(&[(ALLOCS, 1), (BYTES_ALLOCATED, size as u64)]),
        }
    }

    /// [`Counts::alloc`] in this thread's own `line`.
    #[inline]
    pub fn alloc_in(&self, line: &Line, size: usize) {
        if Self::count_alloc_in(line, size) {
            self.peak_check_due(line);
        }
    }

    /// [`Counts::alloc_in`] but for the check of the peak: whether one is
    /// due ([`Counts::peak_check_due`] makes it), for a caller that makes
    /// it last (a call in last place needs no registers kept across it).
    #[inline(always)]
    pub fn count_alloc_in(line: &Line, size: usize) -> bool {
        Self::count_cached_alloc(line, size);
        line.take(size as u64)
    }

    /// A block of `size` bytes was allocated by the thread of its own
    /// `line`: counted, with no change to the headroom — as for a block
    /// taken from the cache of freed blocks (which is counted there as if
    /// it stayed live; see the module docs), or as the first half of
    /// [`Counts::count_alloc_in`].
    #[inline(always)]
    pub fn count_cached_alloc(line: &Line, size: usize) {
        line.allocs.add(1);
        line.bytes_allocated.add(size as u64);
    }

    /// A block of `size` bytes was freed by the thread of its own `line`:
    /// counted, with no change to the headroom — the caller gives it back
    /// ([`Line::give_back`]) unless the block went to the cache.
    #[inline(always)]
    pub fn count_free_in(line: &Line, size: usize) {
        line.frees.add(1);
        line.bytes_freed.add(size as u64);
    }

    /// A block of `size` bytes was freed, by the thread of `line`.
    #[inline]
    pub fn free(&self, line: Option<&Line>, size: usize) {
        match line {
            Some(l) => Self::free_in(l, size, l.crowded()),
            None => self.fallback(&[(FREES, 1), (BYTES_FREED, size as u64)]),
        }
    }

    /// [`Counts::free`] in this thread's own `line`, whose
    /// [`crowded`](Line::crowded) the caller read: plain loads and stores,
    /// no call.
    #[inline(always)]
    pub fn free_in(line: &Line, size: usize, crowded: bool) {
        Self::count_free_in(line, size);
        line.give_back(size as u64, crowded);
    }

    /// A block was resized from `old` to `new` bytes.
    pub fn realloc(&'static self, old: usize, new: usize) {
        match self.mine() {
            Some(l) => {
                l.reallocs.add(1);
                l.bytes_freed.add(old as u64);
                l.bytes_allocated.add(new as u64);
                l.give_back(old as u64, l.crowded());
                if l.take(new as u64) {
                    self.peak_check_due(l);
                }
            }
            None => self.fallback(&[(REALLOCS, 1), (BYTES_FREED, old as u64), (BYTES_ALLOCATED, new as u64)]),
        }
    }

    /// NumPy freed NULL.
    pub fn null_free(&'static self) {
        match self.mine() {
            Some(l) => l.null_frees.add(1),
            None => self.fallback(&[(NULL_FREES, 1)]),
        }
    }

    /// Blocks and bytes (of room) held in the caches of every line: the
    /// small blocks and the spares.
    pub fn cached(&self) -> (u64, u64) {
        let mut blocks = 0;
        let mut bytes = 0;
        for line in self.used_lines() {
            for (depth, size) in line.cache.depths().into_iter().zip(CLASSES) {
                blocks += depth;
                bytes += depth * size as u64;
            }
            for spare in line.cache.spare_sizes() {
                blocks += u64::from(spare != 0);
                bytes += spare as u64;
            }
        }
        (blocks, bytes)
    }

    /// The totals over every thread, live or ended.
    pub fn totals(&self) -> Totals {
        let mut sums: [u64; 6] = std::array::from_fn(|k| self.fallback[k].load(Relaxed));
        for line in self.used_lines() {
            for (sum, n) in sums.iter_mut().zip(line.counts()) {
                *sum = sum.wrapping_add(n);
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
        t.peak_bytes = (self.peak.load(Relaxed).max(0) as u64).max(t.live_bytes());
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::thread_lines::{FIRST_LINE, PEAK_CHECK_BYTES};

    fn leaked() -> &'static Counts {
        Box::leak(Box::new(Counts::new()))
    }

    #[test]
    fn counts_add_up_across_threads_that_ended() {
        let c = leaked();
        c.alloc(c.mine(), 100);
        std::thread::scope(|s| {
            s.spawn(|| {
                c.alloc(c.mine(), PEAK_CHECK_BYTES as usize * 2);
                c.free(c.mine(), 100);
                c.null_free();
            });
        });
        // A new thread may claim the ended thread's line: counts stay.
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
        let c = leaked();
        let mb = 1 << 20;
        c.alloc(c.mine(), 3 * mb);
        c.free(c.mine(), 3 * mb);
        c.alloc(c.mine(), mb);
        let t = c.totals();
        assert_eq!((t.peak_bytes, t.live_bytes()), (3 * mb as u64, mb as u64));
    }

    #[test]
    fn the_peak_sees_threads_that_grow_back_after_a_free() {
        // Thread A grows and shrinks; B grows; A grows back to its old high:
        // the sum passes the peak then, though A never passed its own high.
        let c = leaked();
        let mb = 1 << 20;
        let (a_done, b_done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                c.alloc(c.mine(), mb);
                c.free(c.mine(), mb);
                a_done.wait();
                b_done.wait();
                c.alloc(c.mine(), mb);
            });
            s.spawn(|| {
                a_done.wait();
                c.alloc(c.mine(), mb);
                b_done.wait();
            });
        });
        let t = c.totals();
        assert_eq!((t.peak_bytes, t.live_bytes()), (2 * mb as u64, 2 * mb as u64));
        // Freed again, the peak stays.
        c.free(c.mine(), 2 * mb);
        assert_eq!(c.totals().peak_bytes, 2 * mb as u64);
    }

    #[test]
    fn the_peak_is_exact_while_threads_check_from_each_others_highs() {
        // A holds a large block while B allocates and frees large blocks
        // in turn, then A grows again while B holds one: each check sees
        // the others through their highs, and sums the lines when it must.
        let c = leaked();
        let (kb64, mb) = (64 << 10, 1 << 20);
        let (a_holds, b_holds, a_done) =
            (std::sync::Barrier::new(2), std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                c.alloc(c.mine(), mb);
                a_holds.wait();
                b_holds.wait();
                c.alloc(c.mine(), kb64);
                c.free(c.mine(), kb64);
                a_done.wait();
            });
            s.spawn(|| {
                a_holds.wait();
                for _ in 0..100 {
                    c.alloc(c.mine(), kb64);
                    c.free(c.mine(), kb64);
                }
                assert_eq!(c.totals().peak_bytes, (mb + kb64) as u64);
                c.alloc(c.mine(), kb64);
                b_holds.wait();
                a_done.wait();
            });
        });
        let t = c.totals();
        assert_eq!((t.peak_bytes, t.live_bytes()), ((mb + 2 * kb64) as u64, (mb + kb64) as u64));
    }

    #[test]
    fn the_peak_of_small_blocks_is_short_by_less_than_one_check() {
        let c = leaked();
        for _ in 0..1000 {
            c.alloc(c.mine(), 100);
        }
        for _ in 0..1000 {
            c.free(c.mine(), 100);
        }
        let t = c.totals();
        assert_eq!(t.live_bytes(), 0);
        assert!(t.peak_bytes <= 100_000 && t.peak_bytes > 100_000 - PEAK_CHECK_BYTES as u64, "{t:?}");
    }

    #[test]
    fn steps_of_exactly_the_check_size_are_checked() {
        // Both threads crowded; A's growth back by exactly PEAK_CHECK_BYTES
        // while B holds as much makes a new peak, which A's check sees.
        let c = leaked();
        let step = PEAK_CHECK_BYTES as usize;
        let wait = || std::sync::Barrier::new(2);
        let (b_there, a_freed, b_grown, a_grown) = (wait(), wait(), wait(), wait());
        std::thread::scope(|s| {
            s.spawn(|| {
                b_there.wait();
                c.alloc(c.mine(), step);
                c.free(c.mine(), step);
                a_freed.wait();
                b_grown.wait();
                c.alloc(c.mine(), step);
                a_grown.wait();
                c.free(c.mine(), step);
            });
            s.spawn(|| {
                c.alloc(c.mine(), 8);
                c.free(c.mine(), 8);
                b_there.wait();
                a_freed.wait();
                c.alloc(c.mine(), step);
                b_grown.wait();
                a_grown.wait();
                c.free(c.mine(), step);
            });
        });
        let t = c.totals();
        assert_eq!((t.peak_bytes, t.live_bytes()), (2 * step as u64, 0));
    }

    #[test]
    fn the_first_thread_counts_in_the_first_line_others_at_their_homes() {
        use std::ptr::eq;
        let c = leaked();
        let first = || &c.lines[FIRST_LINE];
        std::thread::spawn(move || {
            assert!(eq(c.mine().unwrap(), first()));
            assert!(c.sole_first().is_some_and(|l| eq(l, first())), "alone: free's common case");
            std::thread::spawn(move || {
                let other = c.mine().unwrap();
                assert!(!eq(other, first()));
                assert!(c.sole_first().is_none(), "not this thread's");
                assert!(c.at_home().is_some_and(|l| eq(l, other)));
            })
            .join()
            .unwrap();
            // Crowded now: the mark is taken in off the hot paths.
            assert!(c.sole_first().is_none() && c.at_home().is_none());
            assert!(c.mine().is_some_and(|l| eq(l, first()) && l.crowded()));
            assert!(c.at_home().is_some_and(|l| eq(l, first())));
            assert!(c.sole_first().is_none(), "crowded: not free's common case");
        })
        .join()
        .unwrap();
        // Its thread ended: the next one to count claims the first line.
        std::thread::spawn(move || assert!(eq(c.mine().unwrap(), first()))).join().unwrap();
    }

    #[test]
    fn many_threads_each_get_a_line_and_give_it_up() {
        let c = leaked();
        for _ in 0..4 {
            // `join` waits for the thread to end, its destructors included
            // (a scoped thread's end is signalled before them).
            let threads: Vec<_> = (0..64)
                .map(|_| {
                    std::thread::spawn(move || {
                        c.alloc(c.mine(), 8);
                        c.free(c.mine(), 8);
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
        }
        let t = c.totals();
        assert_eq!((t.allocs, t.frees, t.live_bytes()), (256, 256, 0));
        assert_eq!(c.fallback[ALLOCS].load(Relaxed), 0, "64 threads at once fit in the lines");
        assert!(c.lines.iter().all(|l| l.owner.load(Relaxed) == 0), "ended threads gave their lines up");
    }
}
