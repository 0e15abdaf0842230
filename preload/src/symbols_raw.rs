//! A handler made of a library's plain C functions (an allocator manifest,
//! `*.memplug.toml`): `memplug run` names the library and each function in
//! the environment (`MEMPLUG_RUN_LIBRARY`, `MEMPLUG_RUN_SYM_<ROLE>`); here
//! they are found with `dlsym` and reached through trampolines that take the
//! handler ABI's `ctx` (a pointer to the table of functions). A manifest
//! that names a usable-size function serves headerless, and when it is
//! thread-safe its `malloc` and `free` are called directly on the fast
//! path ([`plain`]), with no trampoline.

use crate::env_raw::{env, flag};
use crate::setup::Plugin;
use core::cell::UnsafeCell;
use core::ffi::{CStr, c_char, c_void};
use memplug_abi::run as var;

/// `void *malloc(size_t)`.
type CMalloc = unsafe extern "C" fn(usize) -> *mut c_void;
/// `void *calloc(size_t, size_t)`.
type CCalloc = unsafe extern "C" fn(usize, usize) -> *mut c_void;
/// `void *realloc(void *, size_t)`.
type CRealloc = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
/// `void free(void *)`.
type CFree = unsafe extern "C" fn(*mut c_void);
/// `void sized_free(void *, size_t)`.
type CSizedFree = unsafe extern "C" fn(*mut c_void, usize);
/// `void *aligned_alloc(size_t align, size_t size)`.
type CAligned = unsafe extern "C" fn(usize, usize) -> *mut c_void;
/// `size_t usable_size(void *)`.
type CUsable = unsafe extern "C" fn(*const c_void) -> usize;

/// The library's functions.
#[derive(Clone, Copy)]
pub(crate) struct Table {
    /// `malloc`.
    pub(crate) malloc: CMalloc,
    /// `calloc`, if named.
    pub(crate) calloc: Option<CCalloc>,
    /// `realloc`, if named.
    realloc: Option<CRealloc>,
    /// `free`.
    pub(crate) free: CFree,
    /// The sized free, if named.
    sized_free: Option<CSizedFree>,
    /// `aligned_alloc`, if named.
    aligned: Option<CAligned>,
    /// The usable-size function, if named.
    usable: Option<CUsable>,
}

/// The table, written once by the constructor.
struct Slot(UnsafeCell<Option<Table>>);

// SAFETY: written once, single-threaded, before the handler is published.
unsafe impl Sync for Slot {}

static TABLE: Slot = Slot(UnsafeCell::new(None));

/// The table behind `ctx`.
///
/// # Safety
/// `ctx` is `TABLE`'s address, filled by [`load`].
unsafe fn table<'a>(ctx: *mut c_void) -> &'a Table {
    // SAFETY: the caller's promise; `load` filled it before publishing.
    unsafe { (*ctx.cast::<Option<Table>>()).as_ref().unwrap_unchecked() }
}

/// The table, once the mode says a manifest serves (`FAST_C`).
///
/// # Safety
/// [`load`] has filled the table (the mode left `BOOT` after it did).
#[inline(always)]
pub(crate) unsafe fn plain() -> &'static Table {
    // SAFETY: the caller's promise; written once, read-only afterwards.
    unsafe { (*TABLE.0.get()).as_ref().unwrap_unchecked() }
}

/// Make the fast path call `malloc`, `free` and, when the handler has one,
/// `calloc` (a handler with `ctx`, served fast through plain functions):
/// fills the table when no manifest did.
///
/// # Safety
/// Called once, single-threaded (from the constructor), before the mode
/// that reads the table is set.
pub(crate) unsafe fn install_fast(malloc: CMalloc, free: CFree, calloc: Option<CCalloc>) {
    // SAFETY: the caller's promise; nothing reads TABLE yet.
    let t = unsafe { &mut *TABLE.0.get() };
    if t.is_none() {
        *t = Some(Table { malloc, calloc, realloc: None, free, sized_free: None, aligned: None, usable: None });
    }
}

/// The usable size of `p`, a block of the library's.
///
/// # Safety
/// As [`plain`]; the library names a usable-size function.
#[inline(always)]
pub(crate) unsafe fn plain_usable(p: *const c_void) -> usize {
    // SAFETY: the caller's promise.
    unsafe { plain().usable.map_or(0, |u| u(p)) }
}

unsafe extern "C" fn t_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: ctx is TABLE (see `load`); the library's malloc.
    unsafe { (table(ctx).malloc)(size) }
}

unsafe extern "C" fn t_calloc(ctx: *mut c_void, n: usize, size: usize) -> *mut c_void {
    // SAFETY: as above; set only when the library has calloc.
    unsafe { table(ctx).calloc.map_or(core::ptr::null_mut(), |c| c(n, size)) }
}

unsafe extern "C" fn t_realloc(ctx: *mut c_void, p: *mut c_void, _old: usize, new: usize) -> *mut c_void {
    // SAFETY: as above; set only when the library has realloc.
    unsafe { table(ctx).realloc.map_or(core::ptr::null_mut(), |r| r(p, new)) }
}

unsafe extern "C" fn t_free(ctx: *mut c_void, p: *mut c_void, size: usize) {
    // SAFETY: as above; a block of this library, with its size.
    unsafe {
        let t = table(ctx);
        match t.sized_free {
            Some(f) => f(p, size),
            None => (t.free)(p),
        }
    }
}

unsafe extern "C" fn t_free_plain(ctx: *mut c_void, p: *mut c_void, _size: usize) {
    // SAFETY: as above; a headerless block of this library (no size known).
    unsafe { (table(ctx).free)(p) }
}

/// C11's `aligned_alloc` wants a size that is a multiple of the alignment
/// (mimalloc's returns NULL otherwise): the size is rounded up to one.
unsafe extern "C" fn t_aligned(ctx: *mut c_void, align: usize, size: usize) -> *mut c_void {
    let Some(size) = size.checked_next_multiple_of(align.max(1)) else { return core::ptr::null_mut() };
    // SAFETY: as above; set only when the library has aligned_alloc.
    unsafe { table(ctx).aligned.map_or(core::ptr::null_mut(), |a| a(align, size)) }
}

unsafe extern "C" fn t_usable(ctx: *mut c_void, p: *const c_void) -> usize {
    // SAFETY: as above; set only when the library has a usable-size function.
    unsafe { table(ctx).usable.map_or(0, |u| u(p)) }
}

/// The function named by environment variable `var` in `handle`; `Ok(None)`
/// when the variable is unset, `Err(var)` when the symbol is missing.
fn named(handle: *mut c_void, var: &'static CStr) -> Result<Option<*mut c_void>, &'static str> {
    let name = env(var);
    if name.is_null() {
        return Ok(None);
    }
    // SAFETY: name is NUL-terminated (from getenv).
    let f = unsafe { libc::dlsym(handle, name) };
    if f.is_null() { Err("a function the manifest names is missing from its library") } else { Ok(Some(f)) }
}

/// Open `MEMPLUG_RUN_LIBRARY` and build a handler of its functions.
///
/// # Safety
/// Called once, single-threaded (from the constructor).
pub(crate) unsafe fn load(library: *const c_char) -> Result<Plugin, &'static str> {
    // SAFETY: library is NUL-terminated (from getenv).
    let handle = unsafe { libc::dlopen(library, libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_DEEPBIND) };
    if handle.is_null() {
        return Err("dlopen of the manifest's library failed");
    }
    let malloc = named(handle, var::SYM_MALLOC)?.ok_or("the manifest names no malloc")?;
    let free = named(handle, var::SYM_FREE)?.ok_or("the manifest names no free")?;
    let (calloc, realloc) = (named(handle, var::SYM_CALLOC)?, named(handle, var::SYM_REALLOC)?);
    let sized_free = named(handle, var::SYM_SIZED_FREE)?;
    let (aligned, usable) = (named(handle, var::SYM_ALIGNED_ALLOC)?, named(handle, var::SYM_USABLE_SIZE)?);
    // SAFETY: each address is the library's function with the signature of
    // its role (the manifest says so, and the check in the worker called
    // it): the transmutes only give the addresses their types.
    let t = unsafe {
        Table {
            malloc: core::mem::transmute::<*mut c_void, CMalloc>(malloc),
            calloc: calloc.map(|f| core::mem::transmute::<*mut c_void, CCalloc>(f)),
            realloc: realloc.map(|f| core::mem::transmute::<*mut c_void, CRealloc>(f)),
            free: core::mem::transmute::<*mut c_void, CFree>(free),
            sized_free: sized_free.map(|f| core::mem::transmute::<*mut c_void, CSizedFree>(f)),
            aligned: aligned.map(|f| core::mem::transmute::<*mut c_void, CAligned>(f)),
            usable: usable.map(|f| core::mem::transmute::<*mut c_void, CUsable>(f)),
        }
    };
    // SAFETY: single-threaded (the caller's promise); nothing reads TABLE yet.
    unsafe { *TABLE.0.get() = Some(t) };
    Ok(Plugin {
        ctx: TABLE.0.get().cast(),
        malloc: t_malloc,
        calloc: t.calloc.map(|_| t_calloc as memplug_abi::CallocFn),
        realloc: t.realloc.map(|_| t_realloc as memplug_abi::ReallocFn),
        free: if t.usable.is_some() { t_free_plain } else { t_free },
        stats: None,
        foreign_free: None,
        aligned_alloc: t.aligned.map(|_| t_aligned as memplug_abi::AlignedAllocFn),
        usable_size: t.usable.map(|_| t_usable as memplug_abi::UsableSizeFn),
        headerless: t.usable.is_some(),
        knows_foreign: false,
        thread_safe: flag(var::THREAD_SAFE),
        end_align: 0,
    })
}
