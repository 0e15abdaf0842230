//! A lock-free table of live blocks recognised by their address alone: the
//! blocks the bootstrap heap maps for itself, and the aligned blocks a
//! headerless handler without `aligned_alloc` serves by over-allocating.
//! A `free` asks it only while it holds something ([`Table::quiet`]), and
//! then only for addresses between the lowest and highest it ever held, so
//! that a program that never makes such a block pays one load for it.
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
    /// `live`, plus 1 until [`Table::open`]: 0 only when the table is empty
    /// and open, so that the fast path asks one word.
    gate: AtomicUsize,
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
            gate: AtomicUsize::new(1),
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
        self.gate.load(Ordering::Acquire) == 0
    }

    /// Open the gate (once): from now on [`Table::open_and_empty`] says
    /// whether nothing is live.
    pub(crate) fn open(&self) {
        self.gate.fetch_sub(1, Ordering::Release);
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
                self.gate.fetch_add(1, Ordering::Release);
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
        self.gate.fetch_sub(1, Ordering::Release);
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
        t.open();
        assert!(t.open_and_empty());
        assert!(t.insert(0x1000, 7));
        assert!(t.insert(0x2000, 8));
        assert!(!t.open_and_empty());
        assert_eq!((t.get(0x1000), t.get(0x2000), t.get(0x1800)), (Some(7), Some(8), None));
        assert!(!t.quiet(0x1800) && t.quiet(0x3000), "only addresses in the range are looked up");
        assert_eq!(t.remove(0x1000), Some(7));
        assert_eq!((t.remove(0x1000), t.get(0x1000)), (None, None), "a second removal finds nothing");
        assert_eq!(t.remove(0x2000), Some(8));
        assert!(t.quiet(0x2000) && t.open_and_empty(), "empty again");
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
