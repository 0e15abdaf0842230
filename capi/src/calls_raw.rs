//! The bodies a handler's allocation export and its guard's twin share
//! (`memplug_host_alloc_call` and `memplug_host_guard_alloc`, and so on for
//! `calloc`, `realloc` and `free`): one generic body each, over
//! [`BlockCalls`], which the handler entry and the guard implement by
//! calling `memplug`'s `Handler` and `HandlerGuard` (the same block calls,
//! taken with or without the lock already held). Each export names its
//! function and passes its arguments through.

use crate::boundary_raw::{ErrOut, arg, guarded, quiet};
use crate::error::ErrorObject;
use crate::opaque::Entry;
use memplug::HandlerGuard;
use std::ffi::c_void;
use std::ptr::{NonNull, null_mut};

/// What an export allocates through: a handler's entry, or a guard of its
/// lock.
pub(crate) trait BlockCalls {
    /// The name of the export's argument that holds it, for errors.
    const ARG: &'static str;

    /// `size` bytes.
    fn alloc(&self, size: usize) -> Result<NonNull<u8>, ErrorObject>;

    /// `nelem * elsize` zeroed bytes.
    fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, ErrorObject>;

    /// Resize `ptr` from `old` to `new` bytes.
    ///
    /// # Safety
    /// As for `memplug::Handler::realloc`.
    unsafe fn realloc(&self, ptr: NonNull<u8>, old: usize, new: usize) -> Result<NonNull<u8>, ErrorObject>;

    /// Free `ptr`, a block of `size` bytes.
    ///
    /// # Safety
    /// As for `memplug::Handler::free`.
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize);
}

impl BlockCalls for Entry {
    const ARG: &'static str = "handler";

    #[inline]
    fn alloc(&self, size: usize) -> Result<NonNull<u8>, ErrorObject> {
        Ok(self.handler.alloc(size)?)
    }

    #[inline]
    fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, ErrorObject> {
        Ok(self.handler.alloc_zeroed(nelem, elsize)?)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: NonNull<u8>, old: usize, new: usize) -> Result<NonNull<u8>, ErrorObject> {
        // SAFETY: the caller's contract, which is `Handler::realloc`'s.
        Ok(unsafe { self.handler.realloc(ptr, old, new) }?)
    }

    #[inline]
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller's contract, which is `Handler::free`'s.
        unsafe { self.handler.free(ptr, size) }
    }
}

impl BlockCalls for HandlerGuard {
    const ARG: &'static str = "guard";

    #[inline]
    fn alloc(&self, size: usize) -> Result<NonNull<u8>, ErrorObject> {
        Ok(HandlerGuard::alloc(self, size)?)
    }

    #[inline]
    fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, ErrorObject> {
        Ok(HandlerGuard::alloc_zeroed(self, nelem, elsize)?)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: NonNull<u8>, old: usize, new: usize) -> Result<NonNull<u8>, ErrorObject> {
        // SAFETY: the caller's contract, which is `HandlerGuard::realloc`'s.
        Ok(unsafe { HandlerGuard::realloc(self, ptr, old, new) }?)
    }

    #[inline]
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller's contract, which is `HandlerGuard::free`'s.
        unsafe { HandlerGuard::free(self, ptr, size) }
    }
}

/// A pointer as C sees it.
pub(crate) fn c_ptr(p: NonNull<u8>) -> *mut c_void {
    p.as_ptr().cast()
}

/// The body of `function`, an `alloc` export: `size` bytes from `owner`.
///
/// # Safety
/// `owner` is NULL or a live handler (guard of this thread) this library
/// returned; `err` NULL or valid for a write.
#[inline]
pub(crate) unsafe fn alloc<T: BlockCalls>(owner: *const T, function: &str, size: usize, err: ErrOut) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { guarded(function, err, null_mut(), || Ok(c_ptr(arg(owner, function, T::ARG)?.alloc(size)?))) }
}

/// The body of `function`, a `calloc` export: `nelem * elsize` zeroed
/// bytes from `owner`.
///
/// # Safety
/// As for [`alloc`].
#[inline]
pub(crate) unsafe fn calloc<T: BlockCalls>(
    owner: *const T,
    function: &str,
    nelem: usize,
    elsize: usize,
    err: ErrOut,
) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe {
        guarded(function, err, null_mut(), || Ok(c_ptr(arg(owner, function, T::ARG)?.alloc_zeroed(nelem, elsize)?)))
    }
}

/// The body of `function`, a `realloc` export: resize `ptr` from
/// `old_size` to `new_size` bytes (NULL: a new block); on failure the old
/// block is untouched.
///
/// # Safety
/// `ptr` is NULL or a live block of `owner`'s handler of `old_size` bytes,
/// not used again on success; as for [`alloc`] otherwise.
#[inline]
pub(crate) unsafe fn realloc<T: BlockCalls>(
    owner: *const T,
    function: &str,
    ptr: *mut c_void,
    old_size: usize,
    new_size: usize,
    err: ErrOut,
) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe {
        guarded(function, err, null_mut(), || {
            let o = arg(owner, function, T::ARG)?;
            match NonNull::new(ptr.cast::<u8>()) {
                // SAFETY: the caller's contract, which is `realloc`'s.
                Some(p) => Ok(c_ptr(o.realloc(p, old_size, new_size)?)),
                None => Ok(c_ptr(o.alloc(new_size)?)),
            }
        })
    }
}

/// The body of a `free` export: free `ptr`, a block of `size` bytes of
/// `owner`'s handler; NULL (either) is ignored.
///
/// # Safety
/// `owner` as for [`alloc`]; `ptr` NULL or a live block of its handler of
/// `size` bytes, not used again.
#[inline]
pub(crate) unsafe fn free<T: BlockCalls>(owner: *const T, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller's contract.
    let (Some(o), Some(p)) = (unsafe { owner.as_ref() }, NonNull::new(ptr.cast::<u8>())) else { return };
    // SAFETY: the caller's contract, which is `free`'s.
    quiet((), || unsafe { o.free(p, size) })
}
