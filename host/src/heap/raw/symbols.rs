//! Allocators made of plain C functions (`malloc(size)`, `free(ptr)`, …)
//! taken by name from any shared library, the way ctypes or PyTorch's
//! `CUDAPluggableAllocator` do, or given by address
//! ([`crate::heap::functions`]).
//!
//! The table of functions, its reader and the trampolines that give it the
//! handler ABI are the call core's ([`memplug_callcore::symbols_raw`],
//! shared with the interposer); here the host finds the functions in a
//! library it opened, rounds requests smaller than the declared alignment
//! (capped at 16, C's fundamental alignment) up to it, and keeps the table
//! on the heap behind the handler's `ctx` (for the rest of the process once
//! its handler is installed, freed if it never is).

use super::ctx_owner::CtxOwner;
use crate::heap::functions::{CFunctions, Release};
use crate::heap::roles::{Role, Symbols};
use core::ffi::c_void;
use libloading::os::unix::Library;
use memplug_callcore::{SymbolTable, VTable};

/// A function a spec names that its library does not have: the loader
/// refuses it (`missing-allocator-symbol`), naming the symbol and its role.
#[derive(Debug)]
pub(crate) struct MissingSymbol {
    /// The symbol as named.
    pub(crate) symbol: String,
    /// The role it was named for.
    pub(crate) role: Role,
}

/// Find every function `symbols` names in `lib`; a missing one is refused,
/// naming it and its role. Sizes below `alignment` (up to 16) are rounded
/// up to it.
pub(crate) fn find(lib: &'static Library, symbols: &Symbols, alignment: usize) -> Result<SymbolTable, MissingSymbol> {
    let address = |role: Role| -> Result<Option<*mut c_void>, MissingSymbol> {
        let Some(name) = symbols.get(role) else { return Ok(None) };
        // SAFETY: reads the symbol's address only (its type is given by the
        // table's reader); the library is never unloaded, so it stays valid.
        match unsafe { lib.get::<*mut c_void>(name.as_bytes()) } {
            Ok(sym) => Ok(Some(*sym)),
            Err(_) => Err(MissingSymbol { symbol: name.to_string(), role }),
        }
    };
    // `Symbols` always names malloc and free: a required role is never unnamed.
    let unnamed = |role: Role| MissingSymbol { symbol: String::new(), role };
    // SAFETY: the user named each symbol for its role, whose C signature the
    // reader gives it: the contract of loading by symbol
    // (`crate::admit::symbols`); the library is never unloaded.
    let table = unsafe { SymbolTable::read(address, unnamed) }?;
    Ok(table.with_min_size(alignment.min(16)))
}

/// A table of functions given by address
/// ([`crate::heap::functions::CFunctions`]), with no library behind them.
///
/// # Safety
/// Each function is a C function of its role's signature that behaves as
/// that role's C function does (`malloc` returns a block of at least `size`
/// bytes or NULL, `free` releases a block made by the others, …) and stays
/// callable for the rest of the process.
pub(crate) unsafe fn from_functions(f: &CFunctions, alignment: usize) -> SymbolTable {
    let (free, sized_free) = match f.release {
        Release::Free(free) => (Some(free), None),
        Release::Sized(free) => (None, Some(free)),
    };
    // SAFETY: the caller's contract.
    let mut table = unsafe { SymbolTable::new(f.malloc, free, sized_free) };
    table.calloc = f.calloc;
    table.realloc = f.realloc;
    table.with_min_size(alignment.min(16))
}

/// Move `table` to the heap and build the handler's vtable around it; the
/// table lives as long as its [`CtxOwner`] (for the rest of the process
/// once the handler is installed).
pub(crate) fn into_vtable(table: SymbolTable) -> (VTable, CtxOwner) {
    let t = table.trampolines();
    let owner = CtxOwner::new(table);
    // SAFETY: each trampoline implements its ABI role for a `ctx` that is a
    // `SymbolTable` (kept for the rest of the process once the handler is
    // installed, before any call), by calling C functions that implement
    // those roles: the library's, which the user named for them (`find`),
    // or those `from_functions`'s caller vouched for; the usable size is
    // only asked of live blocks (no FLAG_KNOWS_FOREIGN).
    let vtable = unsafe {
        VTable::from_fns(owner.ctx(), t.malloc, t.calloc, t.realloc, t.free, t.aligned_alloc)
            .with_usable_size(t.usable_size)
    };
    (vtable, owner)
}
