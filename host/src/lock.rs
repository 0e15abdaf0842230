//! Locks for handlers that are not thread-safe.
//!
//! A plugin that does not declare [`memplug_abi::FLAG_THREAD_SAFE`] gets a
//! lock when it is installed, and every call into it holds that lock. A
//! thread-safe handler has no lock: its calls go straight to the plugin.

use std::sync::{Mutex, MutexGuard};

/// The lock of one non-thread-safe handler.
#[derive(Debug, Default)]
pub(crate) struct HandlerLock(Mutex<()>);

impl HandlerLock {
    pub(crate) fn new() -> HandlerLock {
        HandlerLock(Mutex::new(()))
    }

    /// Take the lock. A poisoned lock is taken anyway: nothing runs under it
    /// that can leave the plugin half-updated because of a Rust panic.
    #[inline]
    pub(crate) fn acquire(&self) -> MutexGuard<'_, ()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
