//! A handler made of a library's plain C functions (an allocator manifest,
//! `*.memplug.toml`): `memplug run` names the library and each function in
//! the environment (`MEMPLUG_RUN_LIBRARY`, and one variable per role,
//! [`Role::run_variable`]); here they are found with `dlsym`, read into the
//! call core's [`SymbolTable`] and reached through its trampolines (shared
//! with the host, `memplug_callcore::symbols_raw`). A manifest that names a
//! usable-size function serves headerless, and when it is thread-safe its
//! `malloc` and `free` are called directly on the fast path ([`plain`]),
//! with no trampoline.

use crate::env_raw::{env, flag};
use crate::setup::Plugin;
use core::cell::UnsafeCell;
use core::ffi::{c_char, c_void};
use memplug_abi::run as var;
use memplug_callcore::symbols_raw::{CCalloc, CFree, CMalloc, CUsableSize};
use memplug_callcore::{Role, SymbolTable};

/// The functions the fast path calls directly: a manifest's own, or the
/// plain functions over a handler's (`plugin_raw`).
#[derive(Clone, Copy)]
pub(crate) struct Plain {
    /// `malloc`.
    pub(crate) malloc: CMalloc,
    /// `calloc`, if there is one.
    pub(crate) calloc: Option<CCalloc>,
    /// `free`.
    pub(crate) free: CFree,
    /// The usable-size function, if named.
    usable: Option<CUsableSize>,
}

/// A value written once by the constructor.
struct Slot<T>(UnsafeCell<Option<T>>);

// SAFETY: written once, single-threaded, before the handler is published;
// read-only afterwards.
unsafe impl<T> Sync for Slot<T> {}

/// The manifest's table, the trampolines' `ctx`.
static TABLE: Slot<SymbolTable> = Slot(UnsafeCell::new(None));

/// The fast path's functions.
static PLAIN: Slot<Plain> = Slot(UnsafeCell::new(None));

/// Under `--profile`, the fast path's functions before `sample_raw`'s
/// wrapped them (what its wrappers call); empty otherwise.
static UNSAMPLED: Slot<Plain> = Slot(UnsafeCell::new(None));

/// The fast path's functions, once the mode says a manifest (or a handler
/// served through plain functions) serves fast.
///
/// # Safety
/// [`load`] or [`install_fast`] has filled them (the mode left `Mode::Boot`
/// after it did).
#[inline(always)]
pub(crate) unsafe fn plain() -> &'static Plain {
    // SAFETY: the caller's promise; written once, read-only afterwards.
    unsafe { (*PLAIN.0.get()).as_ref().unwrap_unchecked() }
}

/// Make the fast path call `malloc`, `free` and, when the handler has one,
/// `calloc` (a handler with `ctx`, served fast through plain functions):
/// fills the fast path's functions when no manifest did.
///
/// # Safety
/// Called once, single-threaded (from the constructor), before the mode
/// that reads them is set.
pub(crate) unsafe fn install_fast(malloc: CMalloc, free: CFree, calloc: Option<CCalloc>) {
    // SAFETY: the caller's promise; nothing reads PLAIN yet.
    let p = unsafe { &mut *PLAIN.0.get() };
    if p.is_none() {
        *p = Some(Plain { malloc, calloc, free, usable: None });
    }
}

/// The fast path's functions as they serve without sampling: the ones
/// `--profile`'s wrappers call.
///
/// # Safety
/// [`wrap_fast`] has filled them: called only from the wrappers it put in
/// the fast path's table.
#[inline(always)]
pub(crate) unsafe fn unsampled() -> &'static Plain {
    // SAFETY: the caller's promise; written once, single-threaded, before
    // the fast mode was set, and read-only afterwards.
    unsafe { (*UNSAMPLED.0.get()).as_ref().unwrap_unchecked() }
}

/// `--profile` on the fast path: make it call `malloc`, `free` and (when
/// there is one) `calloc` — `sample_raw`'s wrappers, which call the
/// functions they replace ([`unsampled`]) and sample.
///
/// # Safety
/// Called once, single-threaded (from the constructor), after [`load`] or
/// [`install_fast`] filled the table and before the mode that reads it is
/// set.
pub(crate) unsafe fn wrap_fast(malloc: CMalloc, free: CFree, calloc: CCalloc) {
    // SAFETY: the caller's promise; nothing reads either table yet.
    let (p, u) = unsafe { (&mut *PLAIN.0.get(), &mut *UNSAMPLED.0.get()) };
    if let Some(inner) = *p {
        *u = Some(inner);
        *p = Some(Plain { malloc, calloc: inner.calloc.map(|_| calloc), free, usable: inner.usable });
    }
}

/// The usable size of `p`, a block of the library's.
///
/// # Safety
/// As [`plain`]; the library names a usable-size function.
#[inline(always)]
pub(crate) unsafe fn plain_usable(p: *const c_void) -> usize {
    // SAFETY: the caller's promise.
    unsafe { plain().usable.map_or(0, |u| u(p.cast_mut())) }
}

/// The function named for `role` in `handle`; `Ok(None)` when its variable
/// is unset, `Err` when the symbol is missing.
fn named(handle: *mut c_void, role: Role) -> Result<Option<*mut c_void>, &'static str> {
    let name = env(role.run_variable());
    if name.is_null() {
        return Ok(None);
    }
    // SAFETY: name is NUL-terminated (from getenv).
    let f = unsafe { libc::dlsym(handle, name) };
    if f.is_null() { Err("a function the manifest names is missing from its library") } else { Ok(Some(f)) }
}

/// Why a required role is unnamed.
fn unnamed(role: Role) -> &'static str {
    match role {
        Role::Malloc => "the manifest names no malloc",
        _ => "the manifest names no free",
    }
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
    // SAFETY: each address is the library's function with the signature of
    // its role (the manifest says so, and the check in the worker called
    // it); the library is never closed.
    let table = unsafe { SymbolTable::read(|role| named(handle, role), unnamed) }?.with_whole_aligned_sizes();
    let free = table.free.ok_or(unnamed(Role::Free))?;
    // SAFETY: single-threaded (the caller's promise); nothing reads TABLE
    // or PLAIN yet.
    let ctx: *mut SymbolTable = unsafe { (*TABLE.0.get()).insert(table) };
    // SAFETY: as above.
    unsafe {
        *PLAIN.0.get() = Some(Plain { malloc: table.malloc, calloc: table.calloc, free, usable: table.usable_size })
    };
    let t = table.trampolines();
    Ok(Plugin {
        ctx: ctx.cast(),
        malloc: t.malloc,
        calloc: table.calloc.map(|_| t.calloc),
        realloc: table.realloc.map(|_| t.realloc),
        free: match (table.usable_size, t.free_sizeless) {
            (Some(_), Some(sizeless)) => sizeless,
            _ => t.free,
        },
        stats: None,
        foreign_free: None,
        aligned_alloc: t.aligned_alloc,
        usable_size: t.usable_size,
        headerless: table.usable_size.is_some(),
        knows_foreign: false,
        thread_safe: flag(var::THREAD_SAFE),
        end_align: 0,
    })
}
