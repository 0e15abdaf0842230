//! `fork()` for Rust plugins: a lock a fork leaves usable ([`ForkMutex`]).
//! The `pthread_atfork` handlers that the export macros register, which take
//! every instance's locks around a fork, are in `atfork.rs`.
//!
//! A process that forks while other threads are inside the allocator gives
//! the child a copy of memory in which those threads' locks are held by
//! threads that do not exist there: the child's first allocation that needs
//! such a lock waits forever. glibc's `malloc` avoids it by taking all of its
//! locks before the fork and releasing them in both processes after it; a
//! plugin must do the same (see `ABI.md`, "fork").
//!
//! For a plugin exported with [`export_handler!`](crate::export_handler):
//! keep state that threads share behind [`ForkMutex`]es and name them in
//! [`Allocator::fork_locks`](crate::Allocator::fork_locks). The generated code then registers, once per
//! library, `pthread_atfork` handlers that, in the forking thread:
//! - before the fork, take every registered instance's locks — the default
//!   instance's first, then the instances made by `create` in the order they
//!   were made, each instance's in the order `fork_locks` names them (give
//!   them in the order your code nests them: outer first);
//! - after it, in the parent and in the child, release them all, and in the
//!   child call [`Allocator::after_fork_child`] on every instance.
//!
//! So the child finds every lock free and every structure whole. The cost is
//! paid by `fork` alone: the allocation paths lock a `ForkMutex` exactly as
//! they would lock a [`std::sync::Mutex`].
//!
//! ```
//! use memplug_abi::fork::{ForkLock, ForkMutex};
//! use memplug_abi::{Allocator, FLAG_THREAD_SAFE};
//!
//! #[derive(Default)]
//! struct Counting {
//!     blocks: ForkMutex<Vec<usize>>,
//! }
//!
//! impl Allocator for Counting {
//!     const NAME: &'static str = "counting";
//!     const VERSION: &'static str = "0.1.0";
//!     const FLAGS: u32 = FLAG_THREAD_SAFE;
//!     fn create() -> Self {
//!         Counting::default()
//!     }
//!     fn malloc(&self, size: usize) -> *mut u8 {
//!         // SAFETY: libc's malloc has no preconditions.
//!         let p = unsafe { libc_malloc(size) };
//!         self.blocks.lock().push(p as usize);
//!         p
//!     }
//!     unsafe fn free(&self, ptr: *mut u8, _size: usize) {
//!         self.blocks.lock().retain(|&b| b != ptr as usize);
//!         // SAFETY: `ptr` came from `malloc` above.
//!         unsafe { libc_free(ptr) }
//!     }
//!     fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
//!         locks(&self.blocks);
//!     }
//! }
//! # unsafe extern "C" {
//! #     #[link_name = "malloc"]
//! #     fn libc_malloc(size: usize) -> *mut u8;
//! #     #[link_name = "free"]
//! #     fn libc_free(p: *mut u8);
//! # }
//! memplug_abi::export_handler!(Counting);
//! ```

use core::cell::UnsafeCell;
use std::sync::{Mutex, MutexGuard, TryLockError};

/// A mutex that a `fork` leaves usable: a [`std::sync::Mutex`] (poisoning
/// ignored: a panic never leaves an allocator's table half-written where
/// the trait's trampolines catch it) that the fork handlers can hold from
/// before a fork until after it, in the parent and in the child.
///
/// Name it in [`Allocator::fork_locks`](crate::Allocator::fork_locks);
/// nothing else is needed. `T` owns its data (`'static`), as an
/// allocator's tables do.
pub struct ForkMutex<T: 'static> {
    /// The guard the fork handlers hold across a fork. Declared before
    /// `inner`, so that it is dropped (unlocking) before the mutex is.
    held: UnsafeCell<Option<MutexGuard<'static, T>>>,
    inner: Mutex<T>,
}

// SAFETY: `held` is written only by the thread that holds `inner` (it stores
// the guard it just took, or takes it back to unlock), so it is protected by
// the mutex itself; the data is reached only through guards, as with a
// `Mutex<T>`, which is `Sync` when `T: Send`.
unsafe impl<T: Send + 'static> Sync for ForkMutex<T> {}
// SAFETY: moving a `ForkMutex` moves a `Mutex<T>` (`Send` when `T: Send`) and
// an empty `held`: it is only ever full between `hold` and `release`, during
// which the contract of those functions forbids moving it.
unsafe impl<T: Send + 'static> Send for ForkMutex<T> {}

impl<T: 'static> ForkMutex<T> {
    /// An unlocked mutex holding `value`.
    pub const fn new(value: T) -> ForkMutex<T> {
        ForkMutex { held: UnsafeCell::new(None), inner: Mutex::new(value) }
    }

    /// Lock it, waiting if another thread holds it.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lock it if no other thread holds it.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.inner.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The value, when nothing else can reach it.
    pub fn into_inner(self) -> T {
        let ForkMutex { held: _, inner } = self;
        inner.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: Default + 'static> Default for ForkMutex<T> {
    fn default() -> ForkMutex<T> {
        ForkMutex::new(T::default())
    }
}

impl<T: 'static> core::fmt::Debug for ForkMutex<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ForkMutex { .. }")
    }
}

/// A lock the fork handlers take before a fork and release after it (in
/// the parent and in the child). Implemented by [`ForkMutex`]; a plugin
/// names its locks in [`Allocator::fork_locks`](crate::Allocator::fork_locks) and never calls these
/// itself.
pub trait ForkLock {
    /// Lock, and stay locked until [`release`](ForkLock::release).
    ///
    /// # Safety
    /// The same thread calls `release` next (in the parent, or in the child
    /// of a fork), and the lock is neither moved nor dropped in between.
    unsafe fn hold(&self);

    /// Lock without waiting: `true` if it is now held (then as
    /// [`hold`](ForkLock::hold)), `false` if another thread holds it. A host
    /// that must take several locks no thread takes in one order uses it to
    /// take them all or none. The default waits ([`hold`](ForkLock::hold)).
    ///
    /// # Safety
    /// As for [`hold`](ForkLock::hold), when it returns `true`.
    unsafe fn try_hold(&self) -> bool {
        // SAFETY: the caller's promise, which is `hold`'s.
        unsafe { self.hold() };
        true
    }

    /// Unlock what [`hold`](ForkLock::hold) locked; nothing if it holds
    /// nothing.
    ///
    /// # Safety
    /// This thread called `hold` (in this process, or in the parent of this
    /// child) and has not released it since.
    unsafe fn release(&self);
}

impl<T: Send + 'static> ForkLock for ForkMutex<T> {
    unsafe fn hold(&self) {
        let guard = self.lock();
        // SAFETY: the guard borrows `self.inner`, which by the caller's
        // promise stays where it is, alive, until `release` takes the guard
        // back; so widening its lifetime to store it in `self.held` never
        // lets it outlive the mutex.
        let guard: MutexGuard<'static, T> = unsafe { core::mem::transmute(guard) };
        // SAFETY: this thread holds the mutex, which protects `held`.
        unsafe { *self.held.get() = Some(guard) };
    }

    unsafe fn try_hold(&self) -> bool {
        let Some(guard) = self.try_lock() else { return false };
        // SAFETY: as in `hold`: the caller keeps the mutex in place and
        // alive until `release`.
        let guard: MutexGuard<'static, T> = unsafe { core::mem::transmute(guard) };
        // SAFETY: this thread holds the mutex, which protects `held`.
        unsafe { *self.held.get() = Some(guard) };
        true
    }

    unsafe fn release(&self) {
        // SAFETY: by the caller's promise this thread holds the mutex (its
        // guard is in `held`), which protects `held`.
        let guard = unsafe { (*self.held.get()).take() };
        drop(guard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_mutex_is_locked_until_released() {
        let m = ForkMutex::new(5);
        // SAFETY: released below on this thread; `m` does not move.
        unsafe { m.hold() };
        assert!(m.try_lock().is_none());
        // SAFETY: held above on this thread.
        unsafe { m.release() };
        assert_eq!(*m.try_lock().unwrap(), 5);
        // SAFETY: nothing is held: a release does nothing.
        unsafe { m.release() };
        assert_eq!(m.into_inner(), 5);
    }
}
