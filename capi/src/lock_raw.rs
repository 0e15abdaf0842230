//! Guards: a handler's lock held across a batch of calls, and the locks of
//! several handlers taken at once (the exports of `memplug_host.h`'s
//! "Guards" section), each a thin call into [`memplug::HandlerGuard`] and
//! [`memplug::lock::lock_all_checked`] with their rules: a guard belongs to
//! the thread that took it; a thread holding guards may take no guard of
//! another not-thread-safe handler (`lock-order-violation`), so handlers
//! used together are locked together, in the library's one global order.
//!
//! A `memplug_host_guards *` owns a [`memplug::MultiGuard`]; the guards it
//! hands out (`memplug_host_guards_get`) are its own, borrowed.

use crate::boundary_raw::{ErrOut, arg, guarded, quiet};
use crate::calls_raw as calls;
use crate::opaque::Entry;
use memplug::{Handler, HandlerGuard, MultiGuard};
use std::ffi::c_void;
use std::ptr::{null, null_mut};

/// `memplug_host_lock`: hold `handler`'s lock (none for a thread-safe
/// handler) until `memplug_host_unlock`, on this thread.
///
/// # Safety
/// As for `memplug_host_alloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_lock(handler: *const Entry, err: ErrOut) -> *mut HandlerGuard {
    const F: &str = "memplug_host_lock";
    // SAFETY: the caller's contract.
    unsafe {
        guarded(F, err, null_mut(), || Ok(Box::into_raw(Box::new(arg(handler, F, "handler")?.handler.lock_checked()?))))
    }
}

/// `memplug_host_unlock`: release a guard, on the thread that took it.
/// NULL is ignored.
///
/// # Safety
/// `guard` is NULL or a guard this thread took and has not released.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_unlock(guard: *mut HandlerGuard) {
    if !guard.is_null() {
        // SAFETY: the caller's contract: a box this library leaked, freed once.
        let boxed = unsafe { Box::from_raw(guard) };
        quiet((), || drop(boxed));
    }
}

/// `memplug_host_guard_handler`: the guard's handler.
///
/// # Safety
/// `guard` is NULL or a live guard of this thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_guard_handler(guard: *const HandlerGuard) -> *const Entry {
    // SAFETY: the caller's contract.
    quiet(null(), || unsafe { guard.as_ref() }.map_or(null(), |g| Entry::of(g.handler()) as *const Entry))
}

/// `memplug_host_guard_alloc`: as `memplug_host_alloc`, under the held lock.
///
/// # Safety
/// `guard` a live guard of this thread; `err` NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_guard_alloc(guard: *const HandlerGuard, size: usize, err: ErrOut) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { calls::alloc(guard, "memplug_host_guard_alloc", size, err) }
}

/// `memplug_host_guard_calloc`: as `memplug_host_calloc`, under the held
/// lock.
///
/// # Safety
/// As for [`memplug_host_guard_alloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_guard_calloc(
    guard: *const HandlerGuard,
    nelem: usize,
    elsize: usize,
    err: ErrOut,
) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { calls::calloc(guard, "memplug_host_guard_calloc", nelem, elsize, err) }
}

/// `memplug_host_guard_realloc`: as `memplug_host_realloc`, under the held
/// lock.
///
/// # Safety
/// As for [`memplug_host_realloc`], with the guard's handler.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_guard_realloc(
    guard: *const HandlerGuard,
    ptr: *mut c_void,
    old_size: usize,
    new_size: usize,
    err: ErrOut,
) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { calls::realloc(guard, "memplug_host_guard_realloc", ptr, old_size, new_size, err) }
}

/// `memplug_host_guard_free`: as `memplug_host_free`, under the held lock.
///
/// # Safety
/// As for `memplug_host_free`, with the guard's handler.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_guard_free(guard: *const HandlerGuard, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller's contract.
    unsafe { calls::free(guard, ptr, size) }
}

/// `memplug_host_lock_all`: lock the `count` handlers of `handlers` at
/// once, on this thread, until `memplug_host_unlock_all`: a handler given
/// twice is locked once, and distinct handlers in the library's global
/// order, whatever order they are given in (so two threads locking the same
/// handlers in opposite orders cannot deadlock). Refused, with nothing
/// locked, when this thread already holds guards and one of `handlers` is a
/// not-thread-safe handler it does not hold (`lock-order-violation`).
///
/// # Safety
/// `handlers` is valid for `count` reads (NULL when `count` is 0), each a
/// handler this library returned; `err` NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_lock_all(
    handlers: *const *const Entry,
    count: usize,
    err: ErrOut,
) -> *mut MultiGuard {
    const F: &str = "memplug_host_lock_all";
    // SAFETY: the caller's contract.
    unsafe {
        guarded(F, err, null_mut(), || {
            let list: &[*const Entry] = if count == 0 {
                &[]
            } else {
                // SAFETY: the caller's contract: `count` readable pointers.
                std::slice::from_raw_parts(arg(handlers, F, "handlers")?, count)
            };
            let handlers = list.iter().map(|&h| arg(h, F, "handlers[i]").map(|e| e.handler));
            let handlers = handlers.collect::<Result<Vec<Handler>, _>>()?;
            Ok(Box::into_raw(Box::new(memplug::lock::lock_all_checked(&handlers)?)))
        })
    }
}

/// `memplug_host_guards_get`: the guard of `handler` among `guards`,
/// borrowed from them (valid until `memplug_host_unlock_all`; never
/// unlocked on its own), or NULL when `handler` was not locked with them.
///
/// # Safety
/// `guards` is NULL or live guards of this thread; `handler` NULL or a
/// handler this library returned.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_guards_get(
    guards: *const MultiGuard,
    handler: *const Entry,
) -> *const HandlerGuard {
    quiet(null(), || {
        // SAFETY: the caller's contract.
        let (Some(g), Some(e)) = (unsafe { guards.as_ref() }, unsafe { handler.as_ref() }) else { return null() };
        g.get(e.handler).map_or(null(), |g| g as *const HandlerGuard)
    })
}

/// `memplug_host_guards_count`: how many distinct handlers `guards` hold
/// (0 for NULL).
///
/// # Safety
/// `guards` is NULL or live guards of this thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_guards_count(guards: *const MultiGuard) -> usize {
    // SAFETY: the caller's contract.
    unsafe { guards.as_ref() }.map_or(0, MultiGuard::len)
}

/// `memplug_host_unlock_all`: release every lock `guards` hold, on the
/// thread that took them. NULL is ignored.
///
/// # Safety
/// `guards` is NULL or guards this thread took with
/// `memplug_host_lock_all` and has not released.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_unlock_all(guards: *mut MultiGuard) {
    if !guards.is_null() {
        // SAFETY: the caller's contract: a box this library leaked, freed once.
        let boxed = unsafe { Box::from_raw(guards) };
        quiet((), || drop(boxed));
    }
}
