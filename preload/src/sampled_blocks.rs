//! `--profile`'s table of sampled blocks, which follows each to its free:
//! addresses and their allocation's event number, in a fixed table (open
//! addressing in a window of slots from the address's hash), and in front
//! of it a filter — a counter per hash of the address, summed up in a
//! bitmap — so that a `free` of a block that was not sampled (nearly every
//! one) is ruled out with one load. Atomics only: no lock, nothing
//! allocated, safe in a signal handler.

use core::ffi::c_void;
use core::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// Slots of the table of sampled blocks (a power of two).
const SLOTS: usize = 1 << 16;
/// Slots a key may occupy, from its hash on.
const WINDOW: usize = 16;
/// Counters of the filter, and bits of its summary (a power of two, a
/// multiple of 64).
const FILTER: usize = 1 << 14;

/// The sampled blocks: addresses and their allocation's event number.
static KEYS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static EVENT_OF: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// How many sampled blocks hash to each counter (saturating: a counter at
/// 255 stays there).
static COUNTS: [AtomicU8; FILTER] = [const { AtomicU8::new(0) }; FILTER];
/// One bit per counter, set while it is not 0: what a `free` reads (2 KiB,
/// which stays in the cache, where the counters' 16 KiB would not).
static MAYBE: [AtomicU64; FILTER / 64] = [const { AtomicU64::new(0) }; FILTER / 64];

/// The filter's counter of address `a`.
#[inline(always)]
fn filter_slot(a: usize) -> usize {
    ((a >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & (FILTER - 1)
}

/// Whether `p` may be a sampled block: its counter's bit (one load, one
/// test). A block's bit is set before its allocation returns, so before
/// the program can free it.
#[inline(always)]
pub(crate) fn maybe(p: *mut c_void) -> bool {
    let i = filter_slot(p as usize);
    MAYBE[i / 64].load(Ordering::Relaxed) & (1 << (i % 64)) != 0
}

/// Add one to the counter of `a` (its bit set when it leaves 0).
fn filter_add(a: usize) {
    let i = filter_slot(a);
    if COUNTS[i].fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_add(1)) == Ok(0) {
        MAYBE[i / 64].fetch_or(1 << (i % 64), Ordering::SeqCst);
    }
}

/// Take one from the counter of `a` (a saturated counter stays): its bit
/// cleared when it reaches 0 — and set again if another block took the
/// counter from 0 meanwhile, whose bit-setting this clearing may have
/// overtaken.
fn filter_remove(a: usize) {
    let i = filter_slot(a);
    if COUNTS[i].fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n != u8::MAX).then(|| n - 1)) == Ok(1) {
        MAYBE[i / 64].fetch_and(!(1 << (i % 64)), Ordering::SeqCst);
        if COUNTS[i].load(Ordering::SeqCst) != 0 {
            MAYBE[i / 64].fetch_or(1 << (i % 64), Ordering::SeqCst);
        }
    }
}

/// The first table slot of address `a`'s window.
fn home(a: usize) -> usize {
    ((a >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 24) & (SLOTS - 1)
}

/// Record the sampled block `a` (allocated at `event`); `false` when its
/// window is full.
pub(crate) fn insert(a: usize, event: u64) -> bool {
    for i in 0..WINDOW {
        let s = (home(a) + i) & (SLOTS - 1);
        if KEYS[s].compare_exchange(0, a, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            EVENT_OF[s].store(event, Ordering::Release);
            filter_add(a);
            return true;
        }
    }
    false
}

/// Remove the sampled block `a`: its allocation's event number, if it was
/// one.
pub(crate) fn remove(a: usize) -> Option<u64> {
    for i in 0..WINDOW {
        let s = (home(a) + i) & (SLOTS - 1);
        if KEYS[s].load(Ordering::Acquire) != a {
            continue;
        }
        let event = EVENT_OF[s].load(Ordering::Acquire);
        KEYS[s].compare_exchange(a, 0, Ordering::AcqRel, Ordering::Relaxed).ok()?;
        filter_remove(a);
        return Some(event);
    }
    None
}
