//! The per-thread counter slots: the table of lines (one per thread, a
//! cache line of counts each, and the thread's cache of freed blocks) the
//! bridge counts in, and which thread owns which — the protocol
//! [`super::counting`] counts over.
//!
//! The counters are updated on NumPy's every `malloc` and `free`, so they
//! must cost next to nothing. Measured on NumPy's `np.empty` loop, what
//! costs is not arithmetic but cache lines that the interpreter evicted
//! between two calls, and a thread-local access (a `dlopen`ed library pays
//! a call to `__tls_get_addr`). So the hot path has **no atomic
//! read-modify-write, no thread-local access, and touches one cache
//! line**: each handler has a table of [`MAX_THREADS`] lines, each
//! holding its owner's id (the thread pointer) beside the counts, written
//! with plain loads and stores. The first thread to count claims the
//! [first line](FIRST_LINE) — the one every hot path looks at first, at a
//! fixed place, so a program that uses NumPy from one thread never hashes
//! its id — and any other thread the line at the hash of its id (its
//! home), or, if another thread holds that, the next free one (probing,
//! off the hot path).
//!
//! Counts are cumulative and never move: when a thread ends it gives its
//! lines up, and the next thread to claim a line carries on counting in it.
//! A reader sums every line. Threads beyond [`MAX_THREADS`] alive at once
//! count in shared atomics instead.
//!
//! Each line also holds its thread's cache of freed blocks ([`SmallCache`]:
//! small blocks and two spares, the next 192 bytes), which the bridge uses for
//! handlers it may cache for ([`crate::bridge::alloc_raw`]); a line given up keeps
//! its cached blocks for the next thread that claims it.
//!
//! A line is marked [`CROWDED`] in its owner word once a second line is
//! claimed (or a thread counts in the fallback); its owner takes the mark
//! in at its next call (see [`super::counting`] on the peak, which is why).
//!
//! **No line is read by another thread on the hot path.** Every thread asks
//! first whether the first line is its own, and the first line's owner word
//! lies beside the counts its owner writes at every call: a second thread
//! reading it would pull that cache line away from the first thread's core
//! at each of its calls, and back, so that neither could count alone (on a
//! free-threaded Python, two threads making arrays then scaled worse than
//! with NumPy's own handler). So whose the first line is is also written in
//! a line of its own ([`Counts::first_holder`]), which changes only when the
//! first line changes hands: the hot paths read that, and a thread that
//! does not hold the first line never touches it. It is a hint, and the
//! owner word stays the truth: the hint names the first line's owner while
//! it holds it (the owner writes it when it claims the line and clears it
//! before giving the line up), and a thread that finds its own id in the
//! hint still checks the owner word, in the line it counts in anyway.

use crate::block::cache_raw::SmallCache;
use crate::thread_raw::thread_id;
use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use Ordering::Relaxed;

/// Threads counting per thread at once, per handler.
pub const MAX_THREADS: usize = 256;
/// Growth of one thread's live bytes between two checks of the peak.
pub const PEAK_CHECK_BYTES: i64 = 32 * 1024;
/// A line's headroom right after a check: an allocation that brings the
/// growth to [`PEAK_CHECK_BYTES`] makes it negative.
pub const FULL_HEADROOM: i64 = PEAK_CHECK_BYTES - 1;

const _: () = assert!(MAX_THREADS.is_power_of_two());

/// A counter written by one thread and read by any: a relaxed load and
/// store, not an atomic add (no `lock` prefix, no cache-line traffic).
#[derive(Default)]
pub struct Owned(AtomicU64);

impl Owned {
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// One thread's counts for one handler, who owns them, and its cached
/// blocks: 256 bytes.
#[derive(Default)]
#[repr(C, align(128))]
pub struct Line {
    /// The owning thread's id (a multiple of 4), with [`CROWDED`] or
    /// [`CROWD_SEEN`] in its low bits; 0 when free.
    pub(crate) owner: AtomicUsize,
    pub(crate) allocs: Owned,
    pub(crate) frees: Owned,
    pub(crate) reallocs: Owned,
    pub(crate) null_frees: Owned,
    pub(crate) bytes_allocated: Owned,
    pub(crate) bytes_freed: Owned,
    /// Bytes the owner's live bytes may still grow by before it checks the
    /// peak: [`FULL_HEADROOM`] above its live bytes at its last check (for a
    /// crowded line: at their lowest since), less what they are now.
    pub(crate) headroom: AtomicI64,
    /// The owner's cache of freed blocks.
    pub cache: SmallCache,
}

// The counts in one cache line, the cache in the next three: a multiple of
// 128 bytes (pairs of cache lines travel together).
const _: () = assert!(size_of::<Line>() == 256 && std::mem::offset_of!(Line, cache) == 64);

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
    pub fn crowd(&self) {
        let mut v = self.owner.load(Relaxed);
        while v != 0 && v & MARKS == 0 {
            match self.owner.compare_exchange_weak(v, v | CROWDED, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(now) => v = now,
            }
        }
    }

    pub fn live(&self) -> i64 {
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
    pub fn give_back(&self, n: u64, crowded: bool) {
        let room = self.headroom.load(Relaxed).wrapping_add(n as i64);
        self.headroom.store(if crowded { room.min(FULL_HEADROOM) } else { room }, Relaxed);
    }

    /// Lower the headroom by `n` allocated bytes; whether a check is due
    /// (it is used up: the sign of the subtraction's result tells).
    #[inline]
    pub fn take(&self, n: u64) -> bool {
        let room = self.headroom.load(Relaxed).wrapping_sub(n as i64);
        self.headroom.store(room, Relaxed);
        room < 0
    }

    /// The counts, indexed by [`BYTES_ALLOCATED`] and the others.
    pub fn counts(&self) -> [u64; 6] {
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
pub const BYTES_ALLOCATED: usize = 0;
pub const BYTES_FREED: usize = 1;
pub const ALLOCS: usize = 2;
pub const FREES: usize = 3;
pub const REALLOCS: usize = 4;
pub const NULL_FREES: usize = 5;

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

/// The owner words of the lines this thread claimed, each with the
/// [holder hint](Counts::first_holder) to clear first if the line is a first
/// line.
struct Claimed(RefCell<Vec<(&'static AtomicUsize, Option<&'static AtomicUsize>)>>);

impl Drop for Claimed {
    fn drop(&mut self) {
        for (owner, hint) in self.0.take() {
            // The hint first: once the owner word is 0 another thread may
            // claim the line and write its own id there.
            if let Some(hint) = hint {
                hint.store(0, Relaxed);
            }
            owner.store(0, Ordering::Release);
        }
    }
}

/// A word alone in its pair of cache lines (see [`Counts::first_holder`]).
#[derive(Default)]
#[repr(C, align(128))]
struct Apart(AtomicUsize);

/// Each line's live bytes at its owner's last check of the peak, indexed
/// as the lines: written by a line's owner when they changed, and read by
/// the other threads' checks (see [`super::counting`]), away from the
/// lines, which their owners write at every call.
#[repr(C, align(128))]
pub(crate) struct Highs(pub(crate) [AtomicI64; MAX_THREADS]);

/// The counters of one bridged handler. Counting needs a `&'static Counts`
/// (bridges are leaked): a thread's claim on a line outlives the call. The
/// lines are inline (no pointer to follow on the hot path).
#[repr(C)]
pub struct Counts {
    /// The id of the thread that holds the [first line](FIRST_LINE), without
    /// marks, or 0: a hint, in a line that changes only when the first line
    /// changes hands, so that the hot paths of the other threads need not
    /// read the first line's owner word (see the module docs).
    first_holder: Apart,
    pub(crate) lines: [Line; MAX_THREADS],
    /// Which lines were ever claimed (one bit each): readers and the peak
    /// check sum only those.
    pub(crate) used: [AtomicU64; MAX_THREADS / 64],
    pub(crate) peak: AtomicI64,
    /// Counts of threads that found no free line.
    pub(crate) fallback: [AtomicU64; 6],
    /// Whether any thread counted in `fallback`.
    pub(crate) fallback_used: std::sync::atomic::AtomicBool,
    /// Each line's live bytes at its last check of the peak.
    pub(crate) highs: Highs,
}

// What the peak check reads beside the lines (`used`, `peak`, the fallback's
// byte counts) lies in one cache line; the first line's holder in a pair of
// its own, before the lines.
const _: () = assert!(
    std::mem::offset_of!(Counts, first_holder) == 0
        && std::mem::offset_of!(Counts, lines) == 128
        && std::mem::offset_of!(Counts, used) % 64 == 0
        && std::mem::offset_of!(Counts, fallback) + 8 * (BYTES_FREED + 1) <= std::mem::offset_of!(Counts, used) + 64
);

impl Default for Counts {
    fn default() -> Self {
        Counts::new()
    }
}

impl Counts {
    /// Counters for a new bridged handler (64 KiB of lines).
    pub fn new() -> Counts {
        Counts {
            first_holder: Apart::default(),
            lines: std::array::from_fn(|_| Line::default()),
            used: std::array::from_fn(|_| AtomicU64::new(0)),
            peak: AtomicI64::new(0),
            fallback: std::array::from_fn(|_| AtomicU64::new(0)),
            fallback_used: std::sync::atomic::AtomicBool::new(false),
            highs: Highs(std::array::from_fn(|_| AtomicI64::new(0))),
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
        if self.first_holder.0.load(Relaxed) == me {
            let first = &self.lines[FIRST_LINE];
            if first.owner.load(Relaxed) & !CROWD_SEEN == me {
                return Some(first);
            }
        }
        let line = &self.lines[home(me)];
        (line.owner.load(Relaxed) & !CROWD_SEEN == me).then_some(line)
    }

    /// The [first line](FIRST_LINE) if it is this thread's and the only
    /// one counted in (no mark in its owner word): `free`'s common case in
    /// one comparison, with [`Counts::mine`] as its fallback.
    #[inline(always)]
    pub fn sole_first(&'static self) -> Option<&'static Line> {
        let me = thread_id();
        let first = &self.lines[FIRST_LINE];
        // The owner word only after the hint: another thread's never.
        (self.first_holder.0.load(Relaxed) == me && first.owner.load(Relaxed) == me).then_some(first)
    }

    #[cold]
    #[inline(never)]
    fn find_or_claim(&'static self, me: usize) -> Option<&'static Line> {
        let start = home(me);
        let probe = std::iter::once(&self.lines[FIRST_LINE])
            .chain((0..MAX_THREADS).map(|k| &self.lines[(start + k) % MAX_THREADS]));
        if let Some(line) = probe.clone().find(|l| l.owner.load(Ordering::Acquire) & !MARKS == me) {
            return Some(self.take_in(line, me));
        }
        let line = probe.clone().find(|l| {
            l.owner.load(Relaxed) == 0 && l.owner.compare_exchange(0, me, Ordering::Acquire, Relaxed).is_ok()
        })?;
        let index = self.index_of(line);
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
        let hint = (index == FIRST_LINE).then_some(&self.first_holder.0);
        let _ = CLAIMED.try_with(|c| c.0.borrow_mut().push((&line.owner, hint)));
        Some(self.take_in(line, me))
    }

    /// The index of one of this table's lines.
    pub(crate) fn index_of(&self, line: &Line) -> usize {
        (std::ptr::from_ref(line).addr() - std::ptr::from_ref(&self.lines[0]).addr()) / size_of::<Line>()
    }

    /// This thread's own `line`, with a [`CROWDED`] mark taken in: its
    /// next allocation checks the peak (while the line was alone its last
    /// check did not follow frees down), and the mark becomes
    /// [`CROWD_SEEN`]. Only the owner clears `CROWDED` (others only set it
    /// on an unmarked word), so the swap cannot fail. For the first line,
    /// the [holder hint](Counts::first_holder) is made this thread's, if it
    /// is not yet, so that the hot paths find the line.
    fn take_in(&self, line: &'static Line, me: usize) -> &'static Line {
        if self.index_of(line) == FIRST_LINE && self.first_holder.0.load(Relaxed) != me {
            self.first_holder.0.store(me, Relaxed);
        }
        if line.owner.load(Relaxed) & CROWDED != 0 {
            line.headroom.store(0, Relaxed);
            line.owner.store(me | CROWD_SEEN, Relaxed);
        }
        line
    }

    /// The lines ever claimed.
    pub fn used_lines(&self) -> impl Iterator<Item = &Line> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaked() -> &'static Counts {
        Box::leak(Box::new(Counts::new()))
    }

    fn holder(c: &Counts) -> usize {
        c.first_holder.0.load(Relaxed)
    }

    #[test]
    fn the_first_lines_holder_is_named_apart_while_it_holds_it() {
        let c = leaked();
        std::thread::spawn(move || {
            assert!(std::ptr::eq(c.mine().unwrap(), &c.lines[FIRST_LINE]));
            assert_eq!(holder(c), thread_id(), "named when claimed");
            std::thread::spawn(move || {
                let mine = c.mine().unwrap();
                assert!(!std::ptr::eq(mine, &c.lines[FIRST_LINE]));
                assert_ne!(holder(c), thread_id(), "another thread's line leaves the name alone");
            })
            .join()
            .unwrap();
            // Crowded now: the mark is taken in, and the name stays.
            assert!(c.mine().is_some_and(|l| std::ptr::eq(l, &c.lines[FIRST_LINE]) && l.crowded()));
            assert_eq!(holder(c), thread_id());
        })
        .join()
        .unwrap();
        assert_eq!(holder(c), 0, "cleared when its thread gave the line up");
        assert_eq!(c.lines[FIRST_LINE].owner.load(Relaxed), 0);
    }

    #[test]
    fn a_name_that_is_not_the_owners_only_costs_a_detour() {
        // The owner word is the truth: a thread named in the hint but not
        // owning the first line counts in its own line all the same, and the
        // first line's owner, not named, finds its line the long way (and
        // names itself again).
        let c = leaked();
        std::thread::spawn(move || {
            let first = c.mine().unwrap();
            assert!(std::ptr::eq(first, &c.lines[FIRST_LINE]));
            let owner = thread_id();
            std::thread::spawn(move || {
                let mine = c.mine().unwrap();
                c.first_holder.0.store(thread_id(), Relaxed);
                assert!(c.at_home().is_some_and(|l| std::ptr::eq(l, mine)));
                assert!(c.sole_first().is_none());
            })
            .join()
            .unwrap();
            assert!(c.at_home().is_none(), "not named: not found on the hot path");
            assert!(c.mine().is_some_and(|l| std::ptr::eq(l, first)));
            assert_eq!(holder(c), owner, "named again");
            assert!(c.at_home().is_some_and(|l| std::ptr::eq(l, first)));
        })
        .join()
        .unwrap();
    }
}
