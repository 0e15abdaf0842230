//! The lock of a handler that is not thread-safe, and its queue of
//! **pending frees**: blocks whose free could not wait for the lock (and,
//! for an instance, its `destroy` when the last reference went at such a
//! moment).
//!
//! A thread that holds the lock of some handler A and must free a block of
//! another handler B whose lock is taken by someone else may not wait for
//! it: that someone may be waiting for A (two threads each dropping the
//! other's memory while holding a guard). So it pushes the block onto B's
//! queue and goes on; the block is freed by whoever holds B's lock next.
//! [`Held`](super::raw_handler::Held) does the draining — when it takes the
//! lock, and when it releases it — and the per-call API of `raw_handler.rs`
//! decides when to queue.
//!
//! The queue's own mutex is held only to push one block or to take the whole
//! list; never while calling the plugin, and never while waiting for
//! anything else, so it cannot take part in a deadlock.
//!
//! Both locks are fork-safe ([`ForkLock`]): the fork handlers
//! (`atfork.rs`) take a handler's lock and its queue's before a fork and
//! release them after, so the child finds no call half-made and no lock
//! held by a thread it does not have.

use super::relock::ReentrantLock;
use memplug_abi::fork::{ForkLock, ForkMutex};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// A handler's lock (reentrant, so that a thread holding a guard may also
/// use the per-call path) with the frees waiting for it.
pub(crate) struct HandlerLock {
    /// Every call into the plugin holds it.
    pub(super) mutex: ReentrantLock,
    /// Blocks to free once the lock is held.
    pub(super) pending: Pending,
}

impl HandlerLock {
    /// An unlocked lock with nothing pending.
    pub(super) fn new() -> HandlerLock {
        super::barrier::prepare();
        HandlerLock { mutex: ReentrantLock::new(), pending: Pending::default() }
    }
}

/// Both of a handler's locks, for the fork handlers: all or none.
impl ForkLock for HandlerLock {
    unsafe fn hold(&self) {
        // SAFETY: the caller's promise (released by `release` on this thread,
        // the lock in place until then) covers both locks.
        unsafe {
            self.mutex.hold();
            self.pending.work.hold();
        }
    }

    unsafe fn try_hold(&self) -> bool {
        // SAFETY: as in `hold`; a lock taken here is given back at once if
        // the other one cannot be had.
        unsafe {
            if !self.mutex.try_hold() {
                return false;
            }
            if !self.pending.work.try_hold() {
                self.mutex.release();
                return false;
            }
        }
        true
    }

    unsafe fn release(&self) {
        // SAFETY: the caller holds both through `hold` or `try_hold`.
        unsafe {
            self.pending.work.release();
            self.mutex.release();
        }
    }
}

/// A plain block the plugin made (an aligned block is known by its
/// underlying allocation) and its size.
pub(super) struct PendingBlock {
    pub(super) ptr: NonNull<u8>,
    pub(super) size: usize,
}

/// Work left for the lock's next holder.
pub(super) enum Deferred {
    /// Free this block.
    Free(PendingBlock),
    /// Destroy the instance: its count reached zero.
    Destroy,
}

// SAFETY: a pending block is memory handed over for freeing: no one uses it
// any more, and the plugin's free is called for it only under the handler's
// lock, from whichever thread holds it (a block of a handler may be freed on
// any thread; the lock serialises the call).
unsafe impl Send for PendingBlock {}

/// The queue of pending frees of one handler.
pub(super) struct Pending {
    /// Whether `work` may be non-empty: read without the mutex on every
    /// release of the lock. Set after a push, cleared when the list is
    /// taken, both under the mutex.
    any: AtomicBool,
    work: ForkMutex<Vec<Deferred>>,
}

impl Default for Pending {
    fn default() -> Pending {
        Pending { any: AtomicBool::new(false), work: ForkMutex::new(Vec::new()) }
    }
}

impl Pending {
    /// Queue a block. The caller then re-checks the handler's lock (see
    /// `RawHandler::free_slow`): with the flag set first and the lock
    /// tested after, either it finds the lock free and drains the queue
    /// itself, or the holder it found sees the flag when it releases.
    pub(super) fn push(&self, work: Deferred) {
        let mut queued = self.work.lock();
        queued.push(work);
        self.any.store(true, Ordering::SeqCst);
    }

    /// Whether nothing is pending (one atomic load).
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        !self.any.load(Ordering::SeqCst)
    }

    /// Take everything pending (the caller holds the handler's lock and
    /// does it).
    pub(super) fn take(&self) -> Vec<Deferred> {
        let mut queued = self.work.lock();
        self.any.store(false, Ordering::SeqCst);
        std::mem::take(&mut *queued)
    }
}
