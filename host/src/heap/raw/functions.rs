//! Trampolines for handlers made of functions that take a context pointer
//! ([`crate::heap::functions::ContextFunctions`]): the ABI's own signatures, but
//! `calloc` and `realloc` may be missing and are then derived — `calloc` as
//! malloc + zero, `realloc` as malloc + copy of `min(old, new)` bytes +
//! free.
//!
//! The functions are kept in a [`ContextTable`] (kept for the rest of the
//! process once its handler is installed), which is the handler's `ctx`; each trampoline calls the user's function with the
//! user's `ctx`.

use super::ctx_owner::CtxOwner;
use crate::heap::functions::ContextFunctions;
use core::ffi::c_void;
use memplug_callcore::VTable;

/// The user's functions and context.
pub(crate) struct ContextTable(ContextFunctions);

impl ContextTable {
    /// A table of `functions`.
    ///
    /// # Safety
    /// Each function implements its memplug ABI role for `functions.ctx`
    /// (the contract in `memplug.h`: `malloc(ctx, size)` returns a block of
    /// at least `size` bytes or NULL, `free(ctx, ptr, size)` releases a block
    /// the others made, `realloc(ctx, ptr, old, new)` keeps `min(old, new)`
    /// bytes, …), and the functions and `ctx` stay valid for the rest of the
    /// process.
    pub(crate) unsafe fn new(functions: ContextFunctions) -> ContextTable {
        ContextTable(functions)
    }

    /// Move the table to the heap and build the handler's vtable around
    /// it; the table lives as long as its [`CtxOwner`] (for the rest of the
    /// process once the handler is installed).
    pub(crate) fn into_vtable(self) -> (VTable, CtxOwner) {
        let owner = CtxOwner::new(self);
        // SAFETY: each trampoline implements its ABI role for a `ctx` that is
        // a `ContextTable` (kept for the rest of the process once the handler
        // is installed, before any call), by calling the user's functions,
        // which implement those roles (`new`'s contract).
        let vtable = unsafe { VTable::from_fns(owner.ctx(), ctx_malloc, ctx_calloc, ctx_realloc, ctx_free, None) };
        (vtable, owner)
    }
}

/// The functions behind a `ctx` made by `into_vtable`.
///
/// # Safety
/// `ctx` is the `ctx` of a vtable made by [`ContextTable::into_vtable`],
/// whose owner is kept (or not yet dropped).
unsafe fn table<'a>(ctx: *mut c_void) -> &'a ContextFunctions {
    // SAFETY: per the contract, `ctx` points at a live `ContextTable`.
    unsafe { &(*(ctx as *const ContextTable)).0 }
}

unsafe extern "C" fn ctx_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: the user's malloc with the user's ctx (`ContextTable::new`).
    unsafe { (t.malloc)(t.ctx, size) }
}

unsafe extern "C" fn ctx_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let t = unsafe { table(ctx) };
    if let Some(calloc) = t.calloc {
        // SAFETY: the user's calloc with the user's ctx.
        return unsafe { calloc(t.ctx, nelem, elsize) };
    }
    // The host never passes an overflowing product.
    let size = nelem * elsize;
    // SAFETY: the user's malloc with the user's ctx.
    let p = unsafe { (t.malloc)(t.ctx, size) };
    if !p.is_null() {
        // SAFETY: `p` holds `size` writable bytes.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, size) };
    }
    p
}

unsafe extern "C" fn ctx_realloc(ctx: *mut c_void, ptr: *mut c_void, old: usize, new: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let t = unsafe { table(ctx) };
    if let Some(realloc) = t.realloc {
        // SAFETY: `ptr` is a live block of `old` bytes of these functions.
        return unsafe { realloc(t.ctx, ptr, old, new) };
    }
    // SAFETY: the user's malloc with the user's ctx.
    let q = unsafe { (t.malloc)(t.ctx, new) };
    if !q.is_null() {
        // SAFETY: `ptr` holds `old` bytes and `q` holds `new`; distinct blocks.
        unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, q as *mut u8, old.min(new)) };
        // SAFETY: `ptr` is a live block of `old` bytes, not used again.
        unsafe { (t.free)(t.ctx, ptr, old) };
    }
    q
}

unsafe extern "C" fn ctx_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the host only passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: a live block of `size` bytes made by these functions.
    unsafe { (t.free)(t.ctx, ptr, size) }
}
