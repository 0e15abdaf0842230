//! The bridge's counters: blocks and bytes allocated, freed, live and peak,
//! and `free(NULL)` calls, per bridged handler.
//!
//! They are updated on NumPy's every `malloc` and `free`, so they must cost
//! next to nothing. Measured on NumPy's `np.empty` loop, what costs is not
//! arithmetic but cache lines that the interpreter evicted between two
//! calls, and a thread-local access (a `dlopen`ed library pays a call to
//! `__tls_get_addr`). So the hot path has **no atomic read-modify-write, no
//! thread-local access, and touches one cache line**: each handler has a
//! table of [`MAX_THREADS`] 64-byte lines, each holding its owner's id
//! (the thread pointer) beside the counts, written with plain loads and
//! stores. The first thread to count claims the [first line](FIRST_LINE)
//! — the one every hot path looks at first, at a fixed place, so a
//! program that uses NumPy from one thread never hashes its id — and any
//! other thread the line at the hash of its id (its home), or, if another
//! thread holds that, the next free one (probing, off the hot path).
//!
//! Counts are cumulative and never move: when a thread ends it gives its
//! lines up, and the next thread to claim a line carries on counting in it.
//! A reader sums every line. Threads beyond [`MAX_THREADS`] alive at once
//! count in shared atomics instead.
//!
//! Each line also holds its thread's small-block cache ([`SmallCache`],
//! the next 64 bytes: the adjacent cache line), which the bridge uses for
//! handlers it may cache for ([`crate::raw_block`]); a line given up keeps
//! its cached blocks for the next thread that claims it.
//!
//! **Peak bytes** need all threads at once. A thread checks the peak when its
//! own live bytes have grown by [`PEAK_CHECK_BYTES`] since its last check
//! (at every large block, every so many small ones): each line keeps the
//! `headroom` left before the next check ([`FULL_HEADROOM`] after one),
//! which an allocation lowers and a free raises, and a check is due when it
//! goes below zero (one subtraction and a branch on its sign on the hot
//! path). While its line is the only one the bridge
//! ever counted in, a thread's live bytes are the total: it raises the
//! shared peak to them, and only when they pass its last high (so a loop of
//! large blocks reads no shared line). Once a second line is claimed (or a
//! thread counts in the fallback) every line is marked [`CROWDED`] in its
//! owner word; its owner takes the mark in at its next call (its next
//! allocation then checks, and the mark becomes [`CROWD_SEEN`]). From then
//! on a free raises the headroom to [`FULL_HEADROOM`] at most — the
//! thread's last check follows its live bytes down, so that growing back
//! counts as growth (another thread may have grown meanwhile) — and a check
//! sums the live bytes of every line (plain loads, no lock) and raises the
//! shared peak if that is higher. The peak is therefore exact when memory
//! grows in steps of `PEAK_CHECK_BYTES` or more, and can be short by up to
//! about `PEAK_CHECK_BYTES` per thread when it grows in small blocks; live
//! counts are always exact.

use crate::raw_cache::{CLASSES, SmallCache};
use crate::raw_thread::thread_id;
use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use Ordering::Relaxed;

/// Threads counting per thread at once, per handler.
pub const MAX_THREADS: usize = 256;
/// Growth of one thread's live bytes between two checks of the peak.
pub const PEAK_CHECK_BYTES: i64 = 32 * 1024;
/// A line's headroom right after a check: an allocation that brings the
/// growth to [`PEAK_CHECK_BYTES`] makes it negative.
const FULL_HEADROOM: i64 = PEAK_CHECK_BYTES - 1;

const _: () = assert!(MAX_THREADS.is_power_of_two());

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

/// One thread's counts for one handler, who owns them, and its cached
/// blocks: two cache lines.
#[derive(Default)]
#[repr(C, align(128))]
pub struct Line {
    /// The owning thread's id (a multiple of 4), with [`CROWDED`] or
    /// [`CROWD_SEEN`] in its low bits; 0 when free.
    owner: AtomicUsize,
    allocs: Owned,
    frees: Owned,
    reallocs: Owned,
    null_frees: Owned,
    bytes_allocated: Owned,
    bytes_freed: Owned,
    /// Bytes the owner's live bytes may still grow by before it checks the
    /// peak: [`FULL_HEADROOM`] above its live bytes at its last check (for a
    /// crowded line: at their lowest since), less what they are now.
    headroom: AtomicI64,
    /// The owner's small-block cache.
    pub cache: SmallCache,
}

const _: () = assert!(size_of::<Line>() == 128);

/// A mark in a line's owner word, set by any thread: the bridge counts in
/// more than one line (or in the shared fallback), so this thread's live
/// bytes are not the total (see the module docs on the peak). Its owner has
/// not taken it in yet: [`Counts::mine`] does, on its next call.
const CROWDED: usize = 1;
/// The owner's mark in its owner word: it took [`CROWDED`] in.
const CROWD_SEEN: usize = 2;
/// The bits of an owner word that are not the owner.
const MARKS: usize = CROWDED | CROWD_SEEN;

impl Line {
    /// Mark this line [`CROWDED`] if a thread owns it and it is not marked
    /// yet.
    fn crowd(&self) {
        let mut v = self.owner.load(Relaxed);
        while v != 0 && v & MARKS == 0 {
            match self.owner.compare_exchange_weak(v, v | CROWDED, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(now) => v = now,
            }
        }
    }

    fn live(&self) -> i64 {
        self.bytes_allocated.get().wrapping_sub(self.bytes_freed.get()) as i64
    }

    /// Whether other lines count too, as far as the owner knows
    /// ([`CROWD_SEEN`]); for the owner to ask.
    #[inline]
    pub fn crowded(&self) -> bool {
        self.owner.load(Relaxed) & CROWD_SEEN != 0
    }

    /// Raise the headroom by `n` freed bytes; for a crowded line, to
    /// [`FULL_HEADROOM`] at most (the last check follows the live bytes
    /// down, so that growing back up is growth: other threads may have
    /// grown meanwhile, and the sum of all may pass the peak on the way).
    #[inline(always)]
    fn give_back(&self, n: u64, crowded: bool) {
        let room = self.headroom.load(Relaxed).wrapping_add(n as i64);
        self.headroom.store(if crowded { room.min(FULL_HEADROOM) } else { room }, Relaxed);
    }

    /// Lower the headroom by `n` allocated bytes; whether a check is due
    /// (it is used up: the sign of the subtraction's result tells).
    #[inline]
    fn take(&self, n: u64) -> bool {
        let room = self.headroom.load(Relaxed).wrapping_sub(n as i64);
        self.headroom.store(room, Relaxed);
        room < 0
    }

    /// The counts, indexed by [`BYTES_ALLOCATED`] and the others.
    fn counts(&self) -> [u64; 6] {
        [
            self.bytes_allocated.get(),
            self.bytes_freed.get(),
            self.allocs.get(),
            self.frees.get(),
            self.reallocs.get(),
            self.null_frees.get(),
        ]
    }
}

// Byte counts first: the peak check reads them from `Counts::fallback`,
// which then shares its cache line with `used` and `peak`.
const BYTES_ALLOCATED: usize = 0;
const BYTES_FREED: usize = 1;
const ALLOCS: usize = 2;
const FREES: usize = 3;
const REALLOCS: usize = 4;
const NULL_FREES: usize = 5;

/// The line a thread claims if it is free — the first thread to count in
/// a bridge does, and keeps it — and that the hot paths look at before
/// the thread's [`home`]: a program that uses NumPy from one thread finds
/// its line at a fixed place, without hashing its id.
pub const FIRST_LINE: usize = 0;

/// Where a thread's search for its line starts, after the
/// [first line](FIRST_LINE) (never that one: a thread that does not own
/// it finds its line at its home).
#[inline]
fn home(thread: usize) -> usize {
    let hash =
        (thread.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (usize::BITS - MAX_THREADS.trailing_zeros())) % MAX_THREADS;
    const _: () = assert!(FIRST_LINE == 0);
    hash.max(1)
}

thread_local! {
    /// The lines this thread claimed, given up when it ends. Touched only
    /// when a line is claimed.
    static CLAIMED: Claimed = const { Claimed(RefCell::new(Vec::new())) };
}

struct Claimed(RefCell<Vec<&'static AtomicUsize>>);

impl Drop for Claimed {
    fn drop(&mut self) {
        for owner in self.0.take() {
            owner.store(0, Ordering::Release);
        }
    }
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

/// The counters of one bridged handler. Counting needs a `&'static Counts`
/// (bridges are leaked): a thread's claim on a line outlives the call. The
/// lines are inline (no pointer to follow on the hot path).
#[repr(C)]
pub struct Counts {
    lines: [Line; MAX_THREADS],
    /// Which lines were ever claimed (one bit each): readers and the peak
    /// check sum only those.
    used: [AtomicU64; MAX_THREADS / 64],
    peak: AtomicI64,
    /// Counts of threads that found no free line.
    fallback: [AtomicU64; 6],
    /// Whether any thread counted in `fallback`.
    fallback_used: std::sync::atomic::AtomicBool,
}

// What the peak check reads beside the lines (`used`, `peak`, the fallback's
// byte counts) lies in one cache line.
const _: () = assert!(
    std::mem::offset_of!(Counts, used) % 64 == 0
        && std::mem::offset_of!(Counts, fallback) + 8 * (BYTES_FREED + 1) <= std::mem::offset_of!(Counts, used) + 64
);

impl Default for Counts {
    fn default() -> Self {
        Counts::new()
    }
}

impl Counts {
    /// Counters for a new bridged handler (32 KiB of lines).
    pub fn new() -> Counts {
        Counts {
            lines: std::array::from_fn(|_| Line::default()),
            used: std::array::from_fn(|_| AtomicU64::new(0)),
            peak: AtomicI64::new(0),
            fallback: std::array::from_fn(|_| AtomicU64::new(0)),
            fallback_used: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// This thread's line: at its usual place, or found or claimed
    /// elsewhere; `None` when every line is taken.
    #[inline]
    pub fn mine(&'static self) -> Option<&'static Line> {
        self.at_home().or_else(|| self.find_or_claim(thread_id()))
    }

    /// This thread's line if it is the [first](FIRST_LINE) or the one at
    /// its home, and needs nothing done: the hot paths' question, with
    /// [`Counts::mine`] as their cold fallback.
    #[inline]
    pub fn at_home(&'static self) -> Option<&'static Line> {
        let me = thread_id();
        let first = &self.lines[FIRST_LINE];
        if first.owner.load(Relaxed) & !CROWD_SEEN == me {
            return Some(first);
        }
        let line = &self.lines[home(me)];
        (line.owner.load(Relaxed) & !CROWD_SEEN == me).then_some(line)
    }

    /// The [first line](FIRST_LINE) if it is this thread's and the only
    /// one counted in (no mark in its owner word): `free`'s common case in
    /// one comparison, with [`Counts::mine`] as its fallback.
    #[inline(always)]
    pub fn sole_first(&'static self) -> Option<&'static Line> {
        let first = &self.lines[FIRST_LINE];
        (first.owner.load(Relaxed) == thread_id()).then_some(first)
    }

    #[cold]
    #[inline(never)]
    fn find_or_claim(&'static self, me: usize) -> Option<&'static Line> {
        let start = home(me);
        let probe = std::iter::once(&self.lines[FIRST_LINE])
            .chain((0..MAX_THREADS).map(|k| &self.lines[(start + k) % MAX_THREADS]));
        if let Some(line) = probe.clone().find(|l| l.owner.load(Ordering::Acquire) & !MARKS == me) {
            return Some(Self::take_in(line, me));
        }
        let line = probe.clone().find(|l| {
            l.owner.load(Relaxed) == 0 && l.owner.compare_exchange(0, me, Ordering::Acquire, Relaxed).is_ok()
        })?;
        let index = (std::ptr::from_ref(line).addr() - std::ptr::from_ref(&self.lines[0]).addr()) / size_of::<Line>();
        // SeqCst with the loads below: of two threads claiming their first
        // lines at once, at least one sees the other's bit and crowds both.
        self.used[index / 64].fetch_or(1 << (index % 64), Ordering::SeqCst);
        let lines: u32 = self.used.iter().map(|w| w.load(Ordering::SeqCst).count_ones()).sum();
        if lines > 1 || self.fallback_used.load(Ordering::SeqCst) {
            self.used_lines().for_each(Line::crowd);
        }
        // A line given up at thread exit only has its owner reset. If the
        // thread is being torn down this cannot be registered: the line then
        // stays with this thread id (a later thread with the same id carries
        // on in it).
        let _ = CLAIMED.try_with(|c| c.0.borrow_mut().push(&line.owner));
        Some(Self::take_in(line, me))
    }

    /// This thread's own `line`, with a [`CROWDED`] mark taken in: its
    /// next allocation checks the peak (while the line was alone its last
    /// check did not follow frees down), and the mark becomes
    /// [`CROWD_SEEN`]. Only the owner clears `CROWDED` (others only set it
    /// on an unmarked word), so the swap cannot fail.
    fn take_in(line: &'static Line, me: usize) -> &'static Line {
        if line.owner.load(Relaxed) & CROWDED != 0 {
            line.headroom.store(0, Relaxed);
            line.owner.store(me | CROWD_SEEN, Relaxed);
        }
        line
    }

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

    /// The lines ever claimed.
    fn used_lines(&self) -> impl Iterator<Item = &Line> {
        // Set bits only (the peak check runs at every large block).
        self.used.iter().enumerate().flat_map(move |(w, bits)| {
            let mut bits = bits.load(Relaxed);
            std::iter::from_fn(move || {
                let b = bits.trailing_zeros() as usize;
                (bits != 0).then(|| {
                    bits &= bits - 1;
                    &self.lines[w * 64 + b]
                })
            })
        })
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
    /// live bytes grew by [`PEAK_CHECK_BYTES`] since its last check (for a
    /// crowded line: above the lowest they were since); see the module
    /// docs. Not `#[cold]`: a thread allocating large blocks runs it at
    /// each.
    #[inline(never)]
    fn peak_check_due(&self, line: &Line) {
        line.headroom.store(FULL_HEADROOM, Relaxed);
        if line.crowded() {
            self.check_peak();
        } else {
            // The only line: its live bytes are the total.
            let live = line.live();
            if live > self.peak.load(Relaxed) {
                self.peak.fetch_max(live, Relaxed);
            }
        }
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
        line.allocs.add(1);
        line.bytes_allocated.add(size as u64);
        if line.take(size as u64) {
            self.peak_check_due(line);
        }
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
        line.frees.add(1);
        line.bytes_freed.add(size as u64);
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

    /// Blocks and bytes (of room) held in the small-block caches of every
    /// line.
    pub fn cached(&self) -> (u64, u64) {
        let mut blocks = 0;
        let mut bytes = 0;
        for line in self.used_lines() {
            for (depth, size) in line.cache.depths().into_iter().zip(CLASSES) {
                blocks += depth;
                bytes += depth * size as u64;
            }
        }
        (blocks, bytes)
    }

    /// Run `f` on each line no thread owns and that has cached blocks,
    /// claimed by this thread meanwhile (so no thread takes it in between).
    pub fn with_unowned_caches(&'static self, mut f: impl FnMut(&'static Line)) {
        let me = thread_id();
        for line in self.used_lines() {
            if !line.cache.is_empty()
                && line.owner.load(Relaxed) == 0
                && line.owner.compare_exchange(0, me, Ordering::Acquire, Relaxed).is_ok()
            {
                f(line);
                line.owner.store(0, Ordering::Release);
            }
        }
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
