//! A lock-free table of live blocks recognised by their address alone: the
//! blocks the bootstrap heap maps for itself, and the aligned blocks a
//! headerless handler without `aligned_alloc` serves by over-allocating.
//! A `free` asks it only while it holds something ([`Table::quiet`]), and
//! then only for addresses between the lowest and highest it ever held, so
//! that a program that never makes such a block pays one load for it — and
//! the fast path of `free` asks nothing but one word, the gate, which is
//! also the bound of its range check (see [`Table::open`]).
//!
//! Each entry is a key (the program's pointer) and a value (what the owner
//! needs to release it). Keys are hashed to a window of [`WINDOW`] slots,
//! which a lookup reads whole (there are no tombstones: removing clears the
//! slot). Atomics only: safe in a signal handler, on any thread, and in a
//! forked child (the table is plain memory, copied with the process).

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicUsize, Ordering};

/// Slots a key may occupy, from its hash on.
pub(crate) const WINDOW: usize = 16;

/// A table of `N` slots (a power of two).
pub(crate) struct Table<const N: usize> {
    keys: [AtomicUsize; N],
    values: [AtomicUsize; N],
    live: AtomicUsize,
    /// `c` — `live`, plus 1 until [`Table::open`] — as a bound for the fast
    /// path: `span` when `c` is 0 (open and empty), else `usize::MAX -
    /// (c - 1)`, so that one compare against it both asks whether the table
    /// is open and empty and does a range check (see [`Table::open`]).
    gate: AtomicUsize,
    /// What [`Table::open`] was given.
    span: AtomicUsize,
    low: AtomicUsize,
    high: AtomicUsize,
}

impl<const N: usize> Table<N> {
    /// Where the gate word sits in the table, for a fast path that compares
    /// it straight from memory (`boot_raw`).
    pub(crate) const GATE_OFFSET: usize = core::mem::offset_of!(Self, gate);

    /// An empty table.
    pub(crate) const fn new() -> Self {
        Table {
            keys: [const { AtomicUsize::new(0) }; N],
            values: [const { AtomicUsize::new(0) }; N],
            live: AtomicUsize::new(0),
            gate: AtomicUsize::new(usize::MAX),
            span: AtomicUsize::new(0),
            low: AtomicUsize::new(usize::MAX),
            high: AtomicUsize::new(0),
        }
    }

    /// Whether `key` cannot be in the table: nothing live, or `key` outside
    /// the range of every key it held.
    pub(crate) fn quiet(&self, key: usize) -> bool {
        self.live.load(Ordering::Relaxed) == 0
            || key < self.low.load(Ordering::Relaxed)
            || key > self.high.load(Ordering::Relaxed)
    }

    /// Whether the table is open (see [`Table::open`]) and nothing is
    /// live: the fast path's one question, which `boot_raw` asks of the
    /// gate word in memory (at [`Table::GATE_OFFSET`]) with one compare; a
    /// `free` that finds it shut asks [`Table::quiet`] off it.
    #[cfg(test)]
    pub(crate) fn open_and_empty(&self) -> bool {
        self.gate.load(Ordering::Acquire) == self.span.load(Ordering::Relaxed)
    }

    /// Open the gate (once), with the bound `span` (less than
    /// `usize::MAX - N - 1`): from now on [`Table::open_and_empty`] says
    /// whether nothing is live, and the gate word is `span` exactly when
    /// nothing is. A fast path that asks whether an offset `t` is at least
    /// the gate word (`t >= gate`) is then told `t >= span` while the table
    /// is open and empty — a range check — and otherwise `false`, but for
    /// the `c` highest offsets (`c`, the blocks live, is at most `N + 1`).
    pub(crate) fn open(&self, span: usize) {
        self.span.store(span, Ordering::Relaxed);
        self.release();
    }

    /// One more block live (or the table shut): the gate moves away from
    /// `span`, one step down from `usize::MAX` per block.
    fn shut(&self) {
        let span = self.span.load(Ordering::Relaxed);
        let step = |g: usize| Some(if g == span { usize::MAX } else { g - 1 });
        let _ = self.gate.fetch_update(Ordering::AcqRel, Ordering::Acquire, step);
    }

    /// One block fewer live (or the table opened): the gate moves back,
    /// to `span` when none is.
    fn release(&self) {
        let span = self.span.load(Ordering::Relaxed);
        let step = |g: usize| Some(if g == usize::MAX { span } else { g + 1 });
        let _ = self.gate.fetch_update(Ordering::AcqRel, Ordering::Acquire, step);
    }

    /// The first slot of `key`'s window.
    fn home(key: usize) -> usize {
        ((key >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) & (N - 1)
    }

    /// Record `key` (non-zero) with `value`; `false` when its window is full.
    pub(crate) fn insert(&self, key: usize, value: usize) -> bool {
        let home = Self::home(key);
        for i in 0..WINDOW {
            let s = (home + i) & (N - 1);
            if self.keys[s].compare_exchange(0, key, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                self.values[s].store(value, Ordering::Release);
                self.low.fetch_min(key, Ordering::Relaxed);
                self.high.fetch_max(key, Ordering::Relaxed);
                self.live.fetch_add(1, Ordering::Release);
                self.shut();
                return true;
            }
        }
        false
    }

    /// The slot holding `key`.
    fn slot(&self, key: usize) -> Option<usize> {
        if key == 0 || self.quiet(key) {
            return None;
        }
        let home = Self::home(key);
        (0..WINDOW).map(|i| (home + i) & (N - 1)).find(|&s| self.keys[s].load(Ordering::Acquire) == key)
    }

    /// The value of `key`, if the table holds it.
    pub(crate) fn get(&self, key: usize) -> Option<usize> {
        self.slot(key).map(|s| self.values[s].load(Ordering::Acquire))
    }

    /// Remove `key`: its value, if the table held it (and no other thread
    /// removed it first).
    pub(crate) fn remove(&self, key: usize) -> Option<usize> {
        let s = self.slot(key)?;
        let value = self.values[s].load(Ordering::Acquire);
        self.keys[s].compare_exchange(key, 0, Ordering::AcqRel, Ordering::Relaxed).ok()?;
        self.live.fetch_sub(1, Ordering::Release);
        self.release();
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_until_removed() {
        let t = Table::<64>::new();
        assert!(t.quiet(0x1000));
        assert!(!t.open_and_empty(), "shut until opened");
        assert_eq!(t.gate.load(Ordering::Relaxed), usize::MAX);
        t.open(1000);
        assert!(t.open_and_empty());
        assert_eq!(t.gate.load(Ordering::Relaxed), 1000, "open and empty: the span");
        assert!(t.insert(0x1000, 7));
        assert!(t.insert(0x2000, 8));
        assert!(!t.open_and_empty());
        assert_eq!(t.gate.load(Ordering::Relaxed), usize::MAX - 1, "two live: one step down from the top");
        assert_eq!((t.get(0x1000), t.get(0x2000), t.get(0x1800)), (Some(7), Some(8), None));
        assert!(!t.quiet(0x1800) && t.quiet(0x3000), "only addresses in the range are looked up");
        assert_eq!(t.remove(0x1000), Some(7));
        assert_eq!((t.remove(0x1000), t.get(0x1000)), (None, None), "a second removal finds nothing");
        assert_eq!(t.remove(0x2000), Some(8));
        assert!(t.quiet(0x2000) && t.open_and_empty(), "empty again");
        assert_eq!(t.gate.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn blocks_live_before_the_table_opens_keep_it_shut() {
        let t = Table::<64>::new();
        assert!(t.insert(0x1000, 1));
        assert_eq!(t.gate.load(Ordering::Relaxed), usize::MAX - 1);
        t.open(1000);
        assert!(!t.open_and_empty());
        assert_eq!(t.gate.load(Ordering::Relaxed), usize::MAX);
        assert_eq!(t.remove(0x1000), Some(1));
        assert!(t.open_and_empty());
    }

    #[test]
    fn a_full_window_refuses_and_others_still_serve() {
        let t = Table::<16>::new();
        let keys: Vec<usize> = (1..=16).map(|i| i << 12).collect();
        assert!(keys.iter().all(|&k| t.insert(k, k + 1)), "16 slots, one window");
        assert!(!t.insert(17 << 12, 1), "the window is full");
        assert!(keys.iter().all(|&k| t.get(k) == Some(k + 1)));
        assert_eq!(t.remove(keys[3]), Some(keys[3] + 1));
        assert!(t.insert(17 << 12, 5), "a freed slot serves again");
        assert_eq!(t.get(17 << 12), Some(5));
    }
}
