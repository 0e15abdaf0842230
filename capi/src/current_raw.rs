//! The current handler: the process default and per-thread scopes that
//! nest (the exports of `memplug_host.h`'s "The current handler" section),
//! with the library's rule that a block is freed by the handler that made
//! it — [`memplug_host_current_alloc`] says which handler that is.

use crate::boundary_raw::{ErrOut, arg, guarded, put, quiet};
use crate::error::ErrorObject;
use crate::opaque::Entry;
use crate::scope;
use memplug::current;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

/// `memplug_host_builtin`: the built-in libc handler, `default_allocator`.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_builtin() -> *const Entry {
    quiet(null(), || Entry::of(current::builtin()))
}

/// `memplug_host_default`: the process default handler.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_default() -> *const Entry {
    quiet(null(), || Entry::of(current::default_handler()))
}

/// `memplug_host_set_default`: make `handler` the process default (NULL:
/// the built-in handler); returns the previous default. Threads inside a
/// scope keep their scope's handler.
///
/// # Safety
/// `handler` is NULL or a handler this library returned.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_set_default(handler: *const Entry) -> *const Entry {
    quiet(null(), || {
        // SAFETY: the caller's contract.
        let h = unsafe { handler.as_ref() }.map_or_else(current::builtin, |e| e.handler);
        Entry::of(current::set_default(h))
    })
}

/// `memplug_host_current`: this thread's current handler: its innermost
/// scope's, else the process default.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_current() -> *const Entry {
    quiet(null(), || Entry::of(current::current()))
}

/// `memplug_host_scope_push`: make `handler` current on this thread until
/// the scope is popped; returns the scope's token (never 0), or 0 with
/// `err` set.
///
/// # Safety
/// `handler` a handler this library returned; `err` NULL or valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_scope_push(handler: *const Entry, err: ErrOut) -> u64 {
    const F: &str = "memplug_host_scope_push";
    // SAFETY: the caller's contract.
    unsafe { guarded(F, err, 0, || Ok(scope::push(arg(handler, F, "handler")?.handler))) }
}

/// `memplug_host_scope_pop`: close this thread's innermost scope, whose
/// token is `token`; what was current before it is current again. 0, or −1
/// with `err` set (`scope-order`) when `token` is not the innermost scope's.
///
/// # Safety
/// `err` NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_scope_pop(token: u64, err: ErrOut) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { guarded("memplug_host_scope_pop", err, -1, || scope::pop(token).map(|()| 0)) }
}

/// `memplug_host_scope_depth`: how many scopes this thread has open.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_scope_depth() -> u64 {
    quiet(0, scope::depth)
}

/// `memplug_host_current_alloc`: `size` bytes from this thread's current
/// handler, which goes to `made_by`: free the block through it
/// (`memplug_host_free(*made_by, ptr, size)`), whatever is current then.
///
/// # Safety
/// `made_by` valid for a write; `err` NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_current_alloc(
    size: usize,
    made_by: *mut *const Entry,
    err: ErrOut,
) -> *mut c_void {
    const F: &str = "memplug_host_current_alloc";
    // SAFETY: the caller's contract.
    unsafe {
        guarded(F, err, null_mut(), || {
            if made_by.is_null() {
                return Err(ErrorObject::null(F, "made_by"));
            }
            let h = current::current();
            let p = h.alloc(size)?;
            put(made_by, Entry::of(h) as *const Entry, F, "made_by")?;
            Ok(p.as_ptr().cast())
        })
    }
}
