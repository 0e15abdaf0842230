//! The counted life of an instance (a handler made by a plugin's `create`):
//! whether its owner is alive, how many of its blocks are live, and whether
//! it was destroyed — one atomic word, so that every transition is one
//! compare-and-swap and `destroy` is decided exactly once.
//!
//! The instance is destroyed when its owner is gone **and** its last block
//! is freed. The owner is counted apart from the blocks, so a free the
//! instance never handed out (a double free or a foreign pointer caught by
//! a debugging plugin) cannot destroy it while its owner lives; a free with
//! no live block counted is ignored here (the plugin reports it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The owner is alive.
const OWNER: u64 = 1 << 63;
/// `destroy` was decided.
const DEAD: u64 = 1 << 62;
/// The live blocks.
const BLOCKS: u64 = DEAD - 1;

/// See the module docs.
pub(super) struct Life {
    state: AtomicU64,
    /// Whether the owner's handle was handed out.
    owned: AtomicBool,
}

impl Life {
    /// A new instance: owner alive, no blocks.
    pub(super) fn new() -> Life {
        Life { state: AtomicU64::new(OWNER), owned: AtomicBool::new(false) }
    }

    /// Hand out the owner's handle: `true` the first time only.
    pub(super) fn take_owner(&self) -> bool {
        !self.owned.swap(true, Ordering::AcqRel)
    }

    /// Count a new block; `false` once the instance is gone (or going: no
    /// owner and no blocks left).
    #[inline]
    pub(super) fn enter(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & DEAD != 0 || (s & OWNER == 0 && s & BLOCKS == 0) || s & BLOCKS == BLOCKS {
                return false;
            }
            match self.state.compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Uncount a block (freed, or its allocation failed); `true` when the
    /// instance is to be destroyed now — returned once, ever.
    #[inline]
    pub(super) fn leave_block(&self) -> bool {
        self.update(|s| (s & BLOCKS != 0).then(|| s - 1))
    }

    /// The owner is gone; `true` when the instance is to be destroyed now.
    pub(super) fn leave_owner(&self) -> bool {
        self.update(|s| (s & OWNER != 0).then_some(s & !OWNER))
    }

    /// Apply `step` (`None`: nothing to do), then decide `destroy` if that
    /// left no owner and no blocks.
    fn update(&self, step: impl Fn(u64) -> Option<u64>) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let Some(mut next) = step(s) else { return false };
            let dies = next & (OWNER | BLOCKS | DEAD) == 0;
            if dies {
                next |= DEAD;
            }
            match self.state.compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return dies,
                Err(now) => s = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destroyed_once_after_the_owner_and_the_last_block() {
        let l = Life::new();
        assert!(l.take_owner() && !l.take_owner());
        assert!(l.enter() && l.enter());
        assert!(!l.leave_block());
        assert!(!l.leave_owner(), "a block is still live");
        assert!(l.enter(), "a live block keeps the instance usable");
        assert!(!l.leave_block());
        assert!(l.leave_block(), "the last block destroys it");
        assert!(!l.enter() && !l.leave_block() && !l.leave_owner(), "gone for good");
    }

    #[test]
    fn stray_frees_cannot_destroy_an_owned_instance() {
        let l = Life::new();
        assert!(!l.leave_block() && !l.leave_block(), "no block was counted: ignored");
        assert!(l.enter());
        assert!(!l.leave_owner() && l.leave_block());
    }

    #[test]
    fn threads_decide_destroy_exactly_once() {
        for _ in 0..200 {
            let l = Life::new();
            for _ in 0..8 {
                assert!(l.enter());
            }
            let deaths = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|s| {
                for _ in 0..8 {
                    s.spawn(|| {
                        if l.leave_block() {
                            deaths.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
                s.spawn(|| {
                    if l.leave_owner() {
                        deaths.fetch_add(1, Ordering::Relaxed);
                    }
                });
            });
            assert_eq!(deaths.load(Ordering::Relaxed), 1);
        }
    }
}
