//! The allocation fast path: the exports behind `memplug_host.h`'s inline
//! `memplug_host_alloc` / `memplug_host_free`, and the same two functions
//! as exported symbols.
//!
//! The header's inline functions read the handler's fast-call prefix
//! ([`crate::opaque::FastCalls`]) and call the plugin themselves when it is
//! filled; otherwise (an instance, a not-thread-safe handler, a NULL
//! handler), and when the plugin returns NULL, they call
//! `memplug_host_alloc_call` / `memplug_host_free_call` here: the full
//! [`memplug::Handler`] call, which locks, counts an instance's blocks and
//! reports why an allocation failed. The exported `memplug_host_alloc` /
//! `memplug_host_free` (for callers that bind symbols rather than include
//! the header, or that define `MEMPLUG_HOST_NO_INLINE`) do what the inline
//! functions do, out of line. `memplug_host_direct_calls` hands the prefix
//! out as a `memplug_host_direct`.

use crate::boundary_raw::{ErrOut, quiet};
use crate::opaque::Entry;
use std::ffi::c_void;
use std::ptr::NonNull;

/// `memplug_host_alloc_call`: `size` bytes (uninitialised) from `handler`
/// through the full handler call (0 served as 1, a not-thread-safe handler
/// locked, an instance's block counted); NULL with `err` set on failure.
///
/// # Safety
/// `handler` NULL or a handler this library returned; `err` NULL or valid
/// for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_alloc_call(handler: *const Entry, size: usize, err: ErrOut) -> *mut c_void {
    // Errors name the function the caller wrote: the header's inline
    // `memplug_host_alloc` calls this one.
    // SAFETY: the caller's contract.
    unsafe { crate::calls_raw::alloc(handler, "memplug_host_alloc", size, err) }
}

/// `memplug_host_free_call`: free a block of `handler`, told its size,
/// through the full handler call. NULL is ignored.
///
/// # Safety
/// `ptr` is NULL or a live block of `handler` of `size` bytes (its
/// allocation or last reallocation size), not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_free_call(handler: *const Entry, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller's contract.
    unsafe { crate::calls_raw::free(handler, ptr, size) }
}

/// `memplug_host_alloc` as an exported symbol: what the header's inline
/// function does, out of line — the plugin's own `malloc` for a direct
/// handler, else (or when that returns NULL) [`memplug_host_alloc_call`].
///
/// # Safety
/// As for [`memplug_host_alloc_call`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_alloc(handler: *const Entry, size: usize, err: ErrOut) -> *mut c_void {
    // The fast path, a direct handler: one call into the plugin, no Rust
    // code that could panic. A NULL from it takes the full path, which
    // asks again and reports why.
    // SAFETY: the caller's contract: NULL or a handler this library returned.
    if let Some((ctx, malloc, _)) = unsafe { handler.as_ref() }.and_then(|e| e.fast.parts()) {
        // SAFETY: the prefix is filled only for a handler whose calls need
        // nothing around them (`Handler::direct_calls`: thread-safe, not an
        // instance): its plugin's own malloc with its own ctx, asked for a
        // non-zero size, as the header's inline function does.
        let p = unsafe { malloc(ctx, size.max(1)) };
        if !p.is_null() {
            return p;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { memplug_host_alloc_call(handler, size, err) }
}

/// `memplug_host_free` as an exported symbol: the plugin's own `free` for a
/// direct handler, else [`memplug_host_free_call`]. NULL is ignored.
///
/// # Safety
/// As for [`memplug_host_free_call`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_free(handler: *const Entry, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller's contract.
    let (Some(entry), Some(p)) = (unsafe { handler.as_ref() }, NonNull::new(ptr.cast::<u8>())) else { return };
    match entry.fast.parts() {
        // SAFETY: the caller's contract: a live block of this handler of
        // `size` bytes (a size of 0 was served as 1); its plugin's own free
        // with its own ctx, which needs nothing around it (the prefix is
        // filled only then).
        Some((ctx, _, free)) => unsafe { free(ctx, p.as_ptr().cast(), size.max(1)) },
        // SAFETY: the caller's contract, which is `Handler::free`'s.
        None => quiet((), || unsafe { entry.handler.free(p, size) }),
    }
}

/// `memplug_host_direct`: a direct handler's own `ctx`, `malloc` and `free`.
#[repr(C)]
#[derive(Debug)]
pub struct Direct {
    ctx: *mut c_void,
    malloc: Option<memplug_abi::MallocFn>,
    free: Option<memplug_abi::FreeFn>,
}

/// `memplug_host_direct_calls`: for a handler whose calls need nothing
/// around them (thread-safe, not an instance), its fast-call prefix — the
/// plugin's own `ctx`, `malloc` and `free` — into `out` and 1 (what the
/// header's inline `memplug_host_alloc` / `_free` call, and
/// `memplug_host_direct_alloc` / `_free` with it); 0 for any other handler
/// (use `memplug_host_alloc`); −1 for a NULL argument.
///
/// # Safety
/// `handler` is NULL or a handler this library returned; `out` is NULL or
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_direct_calls(handler: *const Entry, out: *mut Direct) -> i32 {
    quiet(-1, || {
        // SAFETY: the caller's contract.
        let Some(entry) = (unsafe { handler.as_ref() }) else { return -1 };
        if out.is_null() {
            return -1;
        }
        let Some((ctx, malloc, free)) = entry.fast.parts() else { return 0 };
        // SAFETY: the caller's contract: `out` is valid for a write.
        unsafe { out.write(Direct { ctx, malloc: Some(malloc), free: Some(free) }) };
        1
    })
}
