//! The unsafe core of hooks (`memplug.numpy.hooked`): a NumPy handler
//! whose functions call another handler's, then tell a [`Hook`]. Its
//! `ctx` is a leaked [`Hooked`]: a copy of the inner handler's allocator
//! (context and functions) and the hook, which keeps the inner capsule —
//! and so the struct and context the copy points into — alive for the
//! process.
//!
//! The callback is only called while the interpreter runs: not once
//! finalization has begun (nor after), when Python code must not run.

use super::capsule_raw::{self, PyDataMemAllocator};
use super::hook::{Event, Hook};
use crate::thread_raw;
use pyo3::prelude::*;
use std::ffi::c_void;

/// The `ctx` of a hooked handler.
struct Hooked {
    /// The inner handler's allocator, copied out of its capsule.
    inner: PyDataMemAllocator,
    /// The callback, and the inner capsule kept alive.
    hook: Hook,
}

/// A new `mem_handler` capsule named `name` that serves from the handler
/// of the capsule `inner` and tells `hook` of every call; `None` if
/// `inner` is not a handler capsule. The hooked handler, its context and
/// `hook` are leaked: arrays made through it free through it whenever.
pub fn hooked_capsule(py: Python<'_>, inner: &Bound<'_, PyAny>, hook: Hook, name: &str) -> Option<PyResult<Py<PyAny>>> {
    let inner = capsule_raw::allocator_of(inner)?;
    let ctx: &'static Hooked = Box::leak(Box::new(Hooked { inner, hook }));
    let allocator = PyDataMemAllocator {
        ctx: std::ptr::from_ref(ctx) as *mut c_void,
        malloc: hooked_malloc,
        calloc: hooked_calloc,
        realloc: hooked_realloc,
        free: hooked_free,
    };
    // SAFETY: the hooked functions take a leaked `&'static Hooked` as
    // `ctx` (this one) and pass each call on to the inner handler's
    // function with its own context, which lives as long as the inner
    // capsule, which `hook` keeps for the process: they keep NumPy's
    // contract exactly as far as the inner handler does, on any thread,
    // with or without the GIL (the hook takes it itself).
    Some(unsafe { capsule_raw::capsule_with(py, name, allocator) })
}

/// Tell the hook of `ctx`, if Python runs.
fn report(hooked: &Hooked, event: Event, ptr: *mut c_void, size: usize, old_ptr: Option<*mut c_void>) {
    if thread_raw::python_running() {
        hooked.hook.notify(event, ptr as usize, size, old_ptr.map(|p| p as usize));
    }
}

/// The [`Hooked`] behind a `ctx`.
///
/// # Safety
/// `ctx` must be the `ctx` of a handler [`hooked_capsule`] made.
unsafe fn hooked<'a>(ctx: *mut c_void) -> &'a Hooked {
    // SAFETY: the caller's: such a `ctx` is a leaked, never freed `Hooked`.
    unsafe { &*(ctx as *const Hooked) }
}

/// NumPy's `malloc`: the inner handler's, then the hook.
///
/// # Safety
/// Called by NumPy through a capsule [`hooked_capsule`] made, with its `ctx`.
unsafe extern "C" fn hooked_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: NumPy passes the handler's own `ctx` (the caller's duty).
    let h = unsafe { hooked(ctx) };
    // SAFETY: the inner handler's function with its own context, which the
    // hook keeps alive; NumPy's arguments passed on unchanged.
    let p = unsafe { (h.inner.malloc)(h.inner.ctx, size) };
    report(h, Event::Malloc, p, size, None);
    p
}

/// NumPy's `calloc`: the inner handler's, then the hook (told
/// `nelem * elsize` bytes).
///
/// # Safety
/// As [`hooked_malloc`].
unsafe extern "C" fn hooked_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: as in `hooked_malloc`.
    let h = unsafe { hooked(ctx) };
    // SAFETY: as in `hooked_malloc`.
    let p = unsafe { (h.inner.calloc)(h.inner.ctx, nelem, elsize) };
    report(h, Event::Calloc, p, nelem.saturating_mul(elsize), None);
    p
}

/// NumPy's `realloc`: the inner handler's, then the hook.
///
/// # Safety
/// As [`hooked_malloc`]; `ptr` came from this handler (NumPy's contract),
/// hence from the inner one.
unsafe extern "C" fn hooked_realloc(ctx: *mut c_void, ptr: *mut c_void, new_size: usize) -> *mut c_void {
    // SAFETY: as in `hooked_malloc`.
    let h = unsafe { hooked(ctx) };
    // SAFETY: as in `hooked_malloc`; `ptr` is the inner handler's block,
    // since every block of this handler is.
    let p = unsafe { (h.inner.realloc)(h.inner.ctx, ptr, new_size) };
    report(h, Event::Realloc, p, new_size, Some(ptr));
    p
}

/// NumPy's `free`: the inner handler's, then the hook.
///
/// # Safety
/// As [`hooked_realloc`].
unsafe extern "C" fn hooked_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: as in `hooked_malloc`.
    let h = unsafe { hooked(ctx) };
    // SAFETY: as in `hooked_realloc`.
    unsafe { (h.inner.free)(h.inner.ctx, ptr, size) };
    report(h, Event::Free, ptr, size, None);
}
