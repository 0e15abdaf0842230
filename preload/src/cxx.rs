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

use crate::cxx_raw::{self, Nothrow};
use crate::heap::{alloc, free as release};
use core::ffi::c_void;

/// The throwing form: a block of `size` bytes aligned to `align` (a power
/// of two; 1 for the default), the new_handler called until one comes, or
/// `std::bad_alloc`.
fn new_or_throw(size: usize, align: usize) -> *mut c_void {
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
fn new_or_null(form: Nothrow, size: usize, align: usize, tag: *const c_void) -> *mut c_void {
    if !align.is_power_of_two() {
        return core::ptr::null_mut();
    }
    let p = alloc(size, align, false);
    if !p.is_null() || cxx_raw::new_handler().is_none() {
        return p;
    }
    cxx_raw::runtime_nothrow(form, size, align, tag).unwrap_or(core::ptr::null_mut())
}

/// The throwing `operator new` family.
macro_rules! throwing_new {
    ($($name:ident($($arg:ident: $t:ty),*) => $align:expr;)*) => {$(
        /// C++'s throwing `operator new` (this mangled form).
        #[unsafe(no_mangle)]
        pub(crate) extern "C-unwind" fn $name(size: usize $(, $arg: $t)*) -> *mut c_void {
            new_or_throw(size, $align)
        }
    )*};
}

/// The `nothrow` `operator new` family (noexcept: nothing unwinds out).
macro_rules! nothrow_new {
    ($($name:ident($($arg:ident: $t:ty),*) => $form:expr, $align:expr;)*) => {$(
        /// C++'s `nothrow` `operator new` (this mangled form).
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(size: usize $(, $arg: $t)*, tag: *const c_void) -> *mut c_void {
            new_or_null($form, size, $align, tag)
        }
    )*};
}

/// The `operator delete` family: the header knows the size and alignment,
/// so the extra arguments are not needed.
macro_rules! delete {
    ($($name:ident($($arg:ident: $t:ty),*);)*) => {$(
        /// C++'s `operator delete` (this mangled form).
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(p: *mut c_void $(, $arg: $t)*) {
            $(let _ = $arg;)*
            release(p)
        }
    )*};
}

throwing_new! {
    _Znwm() => 1;
    _Znam() => 1;
    _ZnwmSt11align_val_t(align: usize) => align;
    _ZnamSt11align_val_t(align: usize) => align;
}

nothrow_new! {
    _ZnwmRKSt9nothrow_t() => Nothrow::New, 1;
    _ZnamRKSt9nothrow_t() => Nothrow::NewArray, 1;
    _ZnwmSt11align_val_tRKSt9nothrow_t(align: usize) => Nothrow::NewAligned, align;
    _ZnamSt11align_val_tRKSt9nothrow_t(align: usize) => Nothrow::NewArrayAligned, align;
}

delete! {
    _ZdlPv();
    _ZdaPv();
    _ZdlPvm(size: usize);
    _ZdaPvm(size: usize);
    _ZdlPvSt11align_val_t(align: usize);
    _ZdaPvSt11align_val_t(align: usize);
    _ZdlPvmSt11align_val_t(size: usize, align: usize);
    _ZdaPvmSt11align_val_t(size: usize, align: usize);
    _ZdlPvRKSt9nothrow_t(nt: *const c_void);
    _ZdaPvRKSt9nothrow_t(nt: *const c_void);
    _ZdlPvSt11align_val_tRKSt9nothrow_t(align: usize, nt: *const c_void);
    _ZdaPvSt11align_val_tRKSt9nothrow_t(align: usize, nt: *const c_void);
}
