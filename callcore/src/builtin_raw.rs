//! The built-in handler: libc's `malloc`/`calloc`/`realloc`/`free`. It is
//! the process default until another one is set.

#![allow(unsafe_code)]

use crate::vtable_raw::VTable;
use core::ffi::c_void;

unsafe extern "C" fn builtin_malloc(_ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: libc malloc accepts any size.
    unsafe { libc::malloc(size) }
}

unsafe extern "C" fn builtin_calloc(_ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: libc calloc accepts any sizes and checks the product itself.
    unsafe { libc::calloc(nelem, elsize) }
}

unsafe extern "C" fn builtin_realloc(_ctx: *mut c_void, ptr: *mut c_void, _old: usize, new: usize) -> *mut c_void {
    // SAFETY: the host only passes blocks this handler made with libc malloc.
    unsafe { libc::realloc(ptr, new) }
}

unsafe extern "C" fn builtin_free(_ctx: *mut c_void, ptr: *mut c_void, _size: usize) {
    // SAFETY: the host only passes blocks this handler made with libc malloc.
    unsafe { libc::free(ptr) }
}

unsafe extern "C" fn builtin_usable_size(_ctx: *mut c_void, ptr: *const c_void) -> usize {
    // SAFETY: the host only passes live blocks this handler made with libc
    // malloc (the handler does not declare FLAG_KNOWS_FOREIGN).
    unsafe { libc::malloc_usable_size(ptr.cast_mut()) }
}

/// The built-in handler's vtable (thread-safe; no `ctx`). Its `free` and
/// `realloc` ignore the size (`FLAG_SIZELESS_FREE`), and it answers usable
/// sizes with libc's `malloc_usable_size`.
pub fn vtable() -> VTable {
    // SAFETY: each function implements its ABI role with libc's allocator,
    // which is thread-safe and ignores `ctx`; `malloc_usable_size` answers
    // for libc's live blocks.
    unsafe {
        VTable::from_fns(core::ptr::null_mut(), builtin_malloc, builtin_calloc, builtin_realloc, builtin_free, None)
            .with_usable_size(Some(builtin_usable_size))
    }
}
