//! C++'s `operator new` and `operator delete`, in every plain, array,
//! sized, aligned and `nothrow` form, over the heap's `alloc` and `free`.
//!
//! As the standard says: a throwing `operator new` that cannot allocate
//! calls the program's `std::new_handler` and tries again, for as long as
//! one is installed; with none it throws `std::bad_alloc`. What the handler
//! throws reaches the caller (these functions are `"C-unwind"`). A
//! `nothrow` form returns the block or, when allocation fails while a
//! new_handler is installed, hands the request to the C++ runtime's own
//! `nothrow` form, which calls the throwing form (this library's) and turns
//! any exception into null (see `cxx_raw`); with no handler it returns null
//! at once. An aligned form whose alignment is not a power of two fails.
//! `operator delete` ignores the size and alignment it is given: the
//! block's header knows both.
//!
//! The exported, mangled symbols are `exports_raw`'s; this module holds the
//! logic they call, and no unsafe code.

use crate::cxx_raw::{self, Nothrow};
use crate::heap_raw::alloc;
use core::ffi::c_void;

/// The throwing form: a block of `size` bytes aligned to `align` (a power
/// of two; 1 for the default), the new_handler called until one comes, or
/// `std::bad_alloc`.
pub(crate) fn new_or_throw(size: usize, align: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        cxx_raw::throw_bad_alloc();
        return core::ptr::null_mut();
    }
    loop {
        let p = alloc(size, align, false);
        if !p.is_null() {
            return p;
        }
        match cxx_raw::new_handler() {
            Some(handler) => handler.call(),
            None => {
                cxx_raw::throw_bad_alloc();
                // No C++ runtime is loaded: nothing can catch an exception.
                return core::ptr::null_mut();
            }
        }
    }
}

/// The `nothrow` form `form`: a block, or null.
pub(crate) fn new_or_null(form: Nothrow, size: usize, align: usize, tag: *const c_void) -> *mut c_void {
    if !align.is_power_of_two() {
        return core::ptr::null_mut();
    }
    let p = alloc(size, align, false);
    if !p.is_null() || cxx_raw::new_handler().is_none() {
        return p;
    }
    cxx_raw::runtime_nothrow(form, size, align, tag).unwrap_or(core::ptr::null_mut())
}
