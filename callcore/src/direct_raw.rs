//! A thread-safe handler's block calls copied out of its vtable, for hot
//! paths that call them without the handler core: [`DirectCalls`] (the
//! public `malloc`/`free` pair) and [`PlainCalls`] (the global allocator's
//! four calls). The vtable makes them ([`VTable::direct_calls`],
//! [`VTable::plain_calls`]); the host hands them out only for handlers
//! whose calls need nothing around them.
//!
//! [`VTable::direct_calls`]: crate::VTable::direct_calls
//! [`VTable::plain_calls`]: crate::VTable::plain_calls

#![allow(unsafe_code)]

use core::ffi::c_void;
use core::ptr::NonNull;
use memplug_abi::{CallocFn, FreeFn, MallocFn, ReallocFn};

/// A handler's `malloc` and `free` with their `ctx`, copied out of it for a
/// caller that makes these two calls on its own hot path (the NumPy bridge
/// keeps them beside its other per-call fields). Only handlers that need
/// nothing around a call hand them out (memplug's `Handler::direct_calls`):
/// thread-safe (no lock) and not instances (no count of live blocks). The
/// library they come from is never unloaded, so they stay callable for the
/// life of the process.
///
/// A block from [`DirectCalls::malloc`] is a block of the handler, as if
/// from memplug's `Handler::alloc` with the same size: either way of
/// freeing it is right.
#[derive(Clone, Copy)]
pub struct DirectCalls {
    pub(crate) ctx: *mut c_void,
    pub(crate) malloc: MallocFn,
    pub(crate) free: FreeFn,
}

impl core::fmt::Debug for DirectCalls {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DirectCalls").field("ctx", &self.ctx).finish_non_exhaustive()
    }
}

// SAFETY: plain data (two function pointers and the plugin's opaque `ctx`)
// of a thread-safe handler: any thread may call them, at once.
unsafe impl Send for DirectCalls {}
// SAFETY: as above.
unsafe impl Sync for DirectCalls {}

impl DirectCalls {
    /// The plugin's `malloc(ctx, size)`: a block of `size` bytes with the
    /// handler's alignment, or NULL.
    ///
    /// # Safety
    /// `size > 0` (the host's own calls serve a request of 0 as 1 byte; a
    /// plugin need not accept 0).
    #[inline(always)]
    pub unsafe fn malloc(&self, size: usize) -> *mut u8 {
        // SAFETY: `malloc` is the handler's ABI function and `ctx` its own;
        // the handler is thread-safe, so the call needs no lock (the only
        // way to get a `DirectCalls`); the caller passes a non-zero size.
        unsafe { (self.malloc)(self.ctx, size) as *mut u8 }
    }

    /// The plugin's `free(ctx, ptr, size)`.
    ///
    /// # Safety
    /// `ptr` is a live block of this handler of `size` bytes, made by
    /// [`DirectCalls::malloc`] with `size` or by the handler's `alloc(size)`
    /// with `size > 0`, and is not used again.
    #[inline(always)]
    pub unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller guarantees the block and its size; the handler
        // is thread-safe and counts no blocks, so nothing else is owed.
        unsafe { (self.free)(self.ctx, ptr.as_ptr().cast(), size) }
    }

    /// The plugin's `ctx`, `malloc` and `free` themselves, for a front end
    /// that hands them on (libmemplug's `memplug_host_direct_calls` gives
    /// them to C). Calling them carries [`DirectCalls::malloc`]'s and
    /// [`DirectCalls::free`]'s contracts.
    #[inline]
    pub fn parts(&self) -> (*mut c_void, MallocFn, FreeFn) {
        (self.ctx, self.malloc, self.free)
    }
}

/// A handler's `malloc`, `calloc`, `realloc` and `free` with their `ctx`,
/// copied out of it for the global allocator's hot paths (memplug's
/// `Global` in its *direct* state). Like
/// [`DirectCalls`], only for a handler whose calls need nothing around them
/// (thread-safe, not an instance), from a library never unloaded. Each call
/// is the one the handler's own per-call path makes for a block within its
/// alignment (`calloc` as `calloc(size, 1)`), so a block made, resized or
/// freed here is a block of the handler as if through it.
#[derive(Clone, Copy)]
pub struct PlainCalls {
    pub(crate) ctx: *mut c_void,
    pub(crate) malloc: MallocFn,
    pub(crate) calloc: CallocFn,
    pub(crate) realloc: ReallocFn,
    pub(crate) free: FreeFn,
}

// SAFETY: plain data (function pointers and the plugin's opaque `ctx`) of a
// thread-safe handler: any thread may call them, at once.
unsafe impl Send for PlainCalls {}
// SAFETY: as above.
unsafe impl Sync for PlainCalls {}

impl PlainCalls {
    /// The plugin's `malloc(ctx, size)`: a block of `size` bytes with the
    /// handler's alignment, or NULL.
    ///
    /// # Safety
    /// `size > 0`.
    #[inline(always)]
    pub unsafe fn malloc(&self, size: usize) -> *mut u8 {
        // SAFETY: `malloc` is the handler's ABI function and `ctx` its own;
        // the handler is thread-safe, so the call needs no lock (the only
        // way to get a `PlainCalls`); the caller passes a non-zero size.
        unsafe { (self.malloc)(self.ctx, size) as *mut u8 }
    }

    /// The plugin's `calloc(ctx, size, 1)`: a zeroed block of `size` bytes
    /// with the handler's alignment, or NULL.
    ///
    /// # Safety
    /// `size > 0`.
    #[inline(always)]
    pub unsafe fn calloc(&self, size: usize) -> *mut u8 {
        // SAFETY: as in `malloc`; `size * 1` is non-zero and does not overflow.
        unsafe { (self.calloc)(self.ctx, size, 1) as *mut u8 }
    }

    /// The plugin's `realloc(ctx, ptr, old_size, new_size)`: the block
    /// resized to `new_size` bytes with the handler's alignment, or NULL
    /// with the old block untouched.
    ///
    /// # Safety
    /// As for [`PlainCalls::free`] with `old_size`; `new_size > 0`. On
    /// success the old pointer is not used again.
    #[inline(always)]
    pub unsafe fn realloc(&self, ptr: NonNull<u8>, old_size: usize, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees the block, its size and a non-zero
        // new size; the handler is thread-safe and counts no blocks.
        unsafe { (self.realloc)(self.ctx, ptr.as_ptr().cast(), old_size, new_size) as *mut u8 }
    }

    /// The plugin's `free(ctx, ptr, size)`.
    ///
    /// # Safety
    /// `ptr` is a live block of this handler of `size > 0` bytes, made by
    /// these calls or the handler's own within its alignment (with `size`,
    /// or resized to it), and is not used again.
    #[inline(always)]
    pub unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller guarantees the block and its size; the handler
        // is thread-safe and counts no blocks, so nothing else is owed.
        unsafe { (self.free)(self.ctx, ptr.as_ptr().cast(), size) }
    }
}
