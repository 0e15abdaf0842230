//! The C++ runtime's functions that `operator new` needs, found with `dlsym`
//! when an allocation first fails (any program that calls `operator new`
//! has a C++ runtime loaded: libstdc++, or libc++, which exports the same
//! names), and the calls into them:
//!
//! - `std::get_new_handler()` and the handler it returns, called through
//!   the `"C-unwind"` ABI: a handler may throw, and its exception passes
//!   through this library to the program;
//! - `std::__throw_bad_alloc()`, which throws the runtime's own
//!   `std::bad_alloc` (its type information, its exception object) — one
//!   symbol, where throwing by hand would take five (`__cxa_allocate_exception`,
//!   `__cxa_throw`, the type information, the vtable, the destructor) and
//!   copy the runtime's object layout;
//! - the runtime's own `nothrow` forms of `operator new`. The standard
//!   defines them as the throwing form called inside `try`, returning null
//!   on any exception; the runtime's do exactly that, and their call to the
//!   throwing form binds to this library's (it is a replaceable function,
//!   called through the PLT). Rust cannot catch a C++ exception, so this is
//!   how a `nothrow` allocation gets the new_handler loop and still never
//!   throws.
//!
//! A lookup that succeeds is kept; one that fails is tried again next time
//! (a runtime may be opened later with `dlopen`).

use core::ffi::{CStr, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

/// The address of `name` in `handle`'s scope, kept in `cache` once found.
fn lookup(cache: &AtomicUsize, handle: *mut c_void, name: &CStr) -> Option<*mut c_void> {
    let known = cache.load(Ordering::Relaxed);
    if known != 0 {
        return Some(known as *mut c_void);
    }
    // SAFETY: `name` is NUL-terminated; `handle` is RTLD_DEFAULT or
    // RTLD_NEXT, which dlsym takes from any caller.
    let f = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if f.is_null() {
        return None;
    }
    cache.store(f as usize, Ordering::Relaxed);
    Some(f)
}

/// `std::get_new_handler`.
static GET_NEW_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// `std::__throw_bad_alloc`.
static THROW_BAD_ALLOC: AtomicUsize = AtomicUsize::new(0);
/// The runtime's `nothrow` forms, by [`Nothrow`].
static NOTHROW: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// A `std::new_handler` the program installed.
#[derive(Clone, Copy)]
pub(crate) struct NewHandler(extern "C-unwind" fn());

impl NewHandler {
    /// Call it: it frees memory, installs another handler, throws, or ends
    /// the program. What it throws unwinds to the caller.
    pub(crate) fn call(self) {
        (self.0)()
    }
}

/// The program's new_handler, if it set one (and a C++ runtime is loaded).
pub(crate) fn new_handler() -> Option<NewHandler> {
    let f = lookup(&GET_NEW_HANDLER, libc::RTLD_DEFAULT, c"_ZSt15get_new_handlerv")?;
    // SAFETY: `std::new_handler std::get_new_handler() noexcept`: no
    // arguments, the handler (a function pointer) or null.
    let h = unsafe { core::mem::transmute::<*mut c_void, extern "C" fn() -> *mut c_void>(f) }();
    if h.is_null() {
        return None;
    }
    // SAFETY: a non-null `std::new_handler` is a `void ()` function, with
    // the C calling convention on this target; it may throw, hence
    // "C-unwind".
    Some(NewHandler(unsafe { core::mem::transmute::<*mut c_void, extern "C-unwind" fn()>(h) }))
}

/// Throw `std::bad_alloc`; returns only when no C++ runtime is loaded.
pub(crate) fn throw_bad_alloc() {
    if let Some(f) = lookup(&THROW_BAD_ALLOC, libc::RTLD_DEFAULT, c"_ZSt17__throw_bad_allocv") {
        // SAFETY: `void std::__throw_bad_alloc()` takes nothing and never
        // returns: it throws, which unwinds through the "C-unwind" callers.
        unsafe { core::mem::transmute::<*mut c_void, extern "C-unwind" fn() -> !>(f)() }
    }
}

/// Which `nothrow` form of `operator new`.
#[derive(Clone, Copy)]
pub(crate) enum Nothrow {
    /// `operator new(size_t, const nothrow_t&)`.
    New = 0,
    /// `operator new[](size_t, const nothrow_t&)`.
    NewArray = 1,
    /// `operator new(size_t, align_val_t, const nothrow_t&)`.
    NewAligned = 2,
    /// `operator new[](size_t, align_val_t, const nothrow_t&)`.
    NewArrayAligned = 3,
}

/// The mangled names of the [`Nothrow`] forms.
const NOTHROW_NAMES: [&CStr; 4] = [
    c"_ZnwmRKSt9nothrow_t",
    c"_ZnamRKSt9nothrow_t",
    c"_ZnwmSt11align_val_tRKSt9nothrow_t",
    c"_ZnamSt11align_val_tRKSt9nothrow_t",
];

/// The C++ runtime's own `nothrow` form `form` of `operator new` (the next
/// definition after this library's), called with the program's arguments
/// (`align` only for the aligned forms); `None` when no runtime defines it.
pub(crate) fn runtime_nothrow(form: Nothrow, size: usize, align: usize, tag: *const c_void) -> Option<*mut c_void> {
    let i = form as usize;
    let f = lookup(&NOTHROW[i], libc::RTLD_NEXT, NOTHROW_NAMES[i])?;
    Some(match form {
        // SAFETY: `void *operator new(size_t, const nothrow_t&) noexcept`
        // (and its array form); `tag` is the program's `nothrow_t`
        // reference, passed on. noexcept: it never unwinds.
        Nothrow::New | Nothrow::NewArray => unsafe {
            core::mem::transmute::<*mut c_void, extern "C" fn(usize, *const c_void) -> *mut c_void>(f)(size, tag)
        },
        // SAFETY: as above, with the `align_val_t` (a size_t) between.
        Nothrow::NewAligned | Nothrow::NewArrayAligned => unsafe {
            core::mem::transmute::<*mut c_void, extern "C" fn(usize, usize, *const c_void) -> *mut c_void>(f)(
                size, align, tag,
            )
        },
    })
}
