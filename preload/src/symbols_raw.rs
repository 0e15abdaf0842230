//! A handler made of a library's plain C functions (an allocator manifest,
//! `*.memplug.toml`): `memplug run` names the library and each function in
//! the environment (`MEMPLUG_RUN_LIBRARY`, `MEMPLUG_RUN_SYM_<ROLE>`); here
//! they are found with `dlsym` and reached through trampolines that take the
//! handler ABI's `ctx` (a pointer to the table of functions).

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

/// The library's functions.
#[derive(Clone, Copy)]
struct Table {
    malloc: CMalloc,
    calloc: Option<CCalloc>,
    realloc: Option<CRealloc>,
    free: CFree,
    sized_free: Option<CSizedFree>,
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
        }
    };
    // SAFETY: single-threaded (the caller's promise); nothing reads TABLE yet.
    unsafe { *TABLE.0.get() = Some(t) };
    Ok(Plugin {
        ctx: TABLE.0.get().cast(),
        malloc: t_malloc,
        calloc: t.calloc.map(|_| t_calloc as memplug_abi::CallocFn),
        realloc: t.realloc.map(|_| t_realloc as memplug_abi::ReallocFn),
        free: t_free,
        stats: None,
        thread_safe: flag(var::THREAD_SAFE),
        end_align: 0,
    })
}
