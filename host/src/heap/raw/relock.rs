//! [`ReentrantLock`]: the lock of a handler that is not thread-safe — a
//! thread may take it again while it holds it (a guard held across a batch,
//! and the per-call path under it) — that a `fork` leaves usable.
//!
//! It is a [`std::sync::Mutex`] (a futex on Linux: unlocking it in the child
//! of a fork only swaps a word and wakes nobody) with the holding thread and
//! its depth beside it. The fork handlers (`atfork.rs`) hold every handler's
//! lock across a fork through [`ForkLock`], so that no thread is inside a
//! plugin that is not thread-safe when the process is copied, and release
//! it after, in the parent and in the child.

use memplug_abi::fork::ForkLock;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

thread_local! {
    /// Its address tells this thread from every other live one.
    static ME: u8 = const { 0 };
}

/// This thread's id: never 0.
#[inline]
fn me() -> usize {
    ME.with(|b| std::ptr::from_ref(b) as usize)
}

/// A reentrant, fork-safe lock (see the module docs).
pub(crate) struct ReentrantLock {
    /// The guard of the outermost hold of the thread in `owner`, kept for
    /// as long as its depth is above 0. Declared before `mutex`, so it is
    /// dropped first.
    guard: UnsafeCell<Option<MutexGuard<'static, ()>>>,
    mutex: Mutex<()>,
    /// The thread holding it (`me()`), 0 when none.
    owner: AtomicUsize,
    /// How many times `owner` holds it.
    depth: UnsafeCell<usize>,
}

// SAFETY: `guard` and `depth` are read and written only by the thread that
// holds `mutex` (the one recorded in `owner`), so they are protected by the
// mutex; `owner` is atomic. A thread reads `owner` without the mutex only to
// compare it with its own id, which no other thread ever stores.
unsafe impl Sync for ReentrantLock {}
// SAFETY: moving the lock moves an unlocked mutex: while it is held a guard
// borrows it, and the fork handlers hold only locks that never move.
unsafe impl Send for ReentrantLock {}

/// One hold of a [`ReentrantLock`], released on drop, by the thread that
/// took it (neither `Send` nor `Sync`).
pub(crate) struct ReentrantGuard<'a> {
    lock: &'a ReentrantLock,
    _not_send: PhantomData<*const ()>,
}

impl ReentrantLock {
    /// An unlocked lock.
    pub(crate) const fn new() -> ReentrantLock {
        ReentrantLock {
            guard: UnsafeCell::new(None),
            mutex: Mutex::new(()),
            owner: AtomicUsize::new(0),
            depth: UnsafeCell::new(0),
        }
    }

    /// Take it, waiting for another thread that holds it.
    #[inline]
    pub(crate) fn lock(&self) -> ReentrantGuard<'_> {
        if !self.again() {
            let guard = self.mutex.lock().unwrap_or_else(|e| e.into_inner());
            self.first(guard);
        }
        ReentrantGuard { lock: self, _not_send: PhantomData }
    }

    /// Take it if that needs no wait (it is free, or this thread holds it).
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<ReentrantGuard<'_>> {
        if !self.again() {
            let guard = match self.mutex.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return None,
            };
            self.first(guard);
        }
        Some(ReentrantGuard { lock: self, _not_send: PhantomData })
    }

    /// If this thread holds it, hold it once more: `true`.
    #[inline]
    fn again(&self) -> bool {
        if self.owner.load(Ordering::Relaxed) != me() {
            return false;
        }
        // SAFETY: this thread holds the mutex (it is the owner), which
        // protects `depth`.
        unsafe { *self.depth.get() += 1 };
        true
    }

    /// This thread has just taken the mutex: record it.
    #[inline]
    fn first(&self, guard: MutexGuard<'_, ()>) {
        // SAFETY: the guard borrows `self.mutex`; it is dropped in `unlock`
        // while a `ReentrantGuard` (or a fork hold, which never moves the
        // lock) still borrows `self`, so it never outlives the mutex it
        // borrows.
        let guard: MutexGuard<'static, ()> = unsafe { std::mem::transmute(guard) };
        // SAFETY: this thread holds the mutex, which protects these fields.
        unsafe {
            *self.guard.get() = Some(guard);
            *self.depth.get() = 1;
        }
        self.owner.store(me(), Ordering::Relaxed);
    }

    /// Give up one hold of this thread's.
    ///
    /// # Safety
    /// This thread holds the lock (a hold not given up yet).
    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: this thread holds the mutex, which protects `depth`.
        let depth = unsafe { &mut *self.depth.get() };
        *depth -= 1;
        if *depth == 0 {
            self.owner.store(0, Ordering::Relaxed);
            // SAFETY: as above, for `guard`; dropping it unlocks the mutex.
            drop(unsafe { (*self.guard.get()).take() });
        }
    }
}

impl Drop for ReentrantGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: a guard is one hold of this thread's, given up once, here.
        unsafe { self.lock.unlock() }
    }
}

impl ForkLock for ReentrantLock {
    unsafe fn hold(&self) {
        std::mem::forget(self.lock());
    }

    unsafe fn try_hold(&self) -> bool {
        self.try_lock().map(std::mem::forget).is_some()
    }

    unsafe fn release(&self) {
        // SAFETY: the caller held it with `hold` or `try_hold` on this
        // thread (in this process or the parent of this child) and forgot
        // that guard: this gives that hold up.
        unsafe { self.unlock() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_takes_it_again_and_others_wait() {
        let lock = ReentrantLock::new();
        let outer = lock.lock();
        let inner = lock.try_lock().expect("the holder takes it again");
        std::thread::scope(|s| s.spawn(|| assert!(lock.try_lock().is_none())).join().unwrap());
        drop(inner);
        std::thread::scope(|s| s.spawn(|| assert!(lock.try_lock().is_none())).join().unwrap());
        drop(outer);
        std::thread::scope(|s| s.spawn(|| assert!(lock.try_lock().is_some())).join().unwrap());
    }

    #[test]
    fn a_fork_hold_is_released_by_release() {
        let lock = ReentrantLock::new();
        // SAFETY: released below, on this thread; `lock` does not move.
        assert!(unsafe { lock.try_hold() });
        let g = lock.lock();
        drop(g);
        std::thread::scope(|s| s.spawn(|| assert!(lock.try_lock().is_none())).join().unwrap());
        // SAFETY: held above on this thread.
        unsafe { lock.release() };
        std::thread::scope(|s| s.spawn(|| assert!(lock.try_lock().is_some())).join().unwrap());
    }
}
