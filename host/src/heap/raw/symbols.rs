//! Allocators made of plain C functions (`malloc(size)`, `free(ptr)`, …)
//! taken by name from any shared library, the way ctypes or PyTorch's
//! `CUDAPluggableAllocator` do.
//!
//! The functions found are kept in a [`SymbolTable`] (kept for the rest of
//! the process once its handler is installed, freed if it never is) and the
//! handler's `ctx` points at it. Trampolines with the ABI's signatures call through
//! the table and derive what the library lacks: `calloc` as malloc + zero,
//! `realloc` as malloc + copy of `min(old, new)` bytes + free (the host knows
//! the old size), and `free` through the sized free when one is given.
//!
//! Requests smaller than the declared alignment (capped at 16, C's
//! fundamental alignment) are rounded up to it, in every function alike, so
//! that small blocks get the declared alignment too: mimalloc and tcmalloc
//! align blocks under 16 bytes to 8 only, as C allows. The sized free gets
//! the same rounded size, so it always sees the size the block was made with.
//! A named `usable_size(ptr)` answers the ABI 1.3 `usable_size`.
//!
//! The same table serves C functions given by address, with no library
//! ([`crate::heap::functions`]).

use super::ctx_owner::CtxOwner;
use super::vtable::VTable;
use crate::heap::functions::CFunctions;
use crate::heap::roles::{Role, Symbols};
use core::ffi::c_void;
use libloading::os::unix::Library;

/// `malloc(size)`.
pub(crate) type CMalloc = unsafe extern "C" fn(usize) -> *mut c_void;
/// `calloc(nelem, size)`.
pub(crate) type CCalloc = unsafe extern "C" fn(usize, usize) -> *mut c_void;
/// `realloc(ptr, size)`.
pub(crate) type CRealloc = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
/// `free(ptr)`.
pub(crate) type CFree = unsafe extern "C" fn(*mut c_void);
/// `sized_free(ptr, size)`.
pub(crate) type CSizedFree = unsafe extern "C" fn(*mut c_void, usize);
/// `aligned_alloc(alignment, size)`.
pub(crate) type CAlignedAlloc = unsafe extern "C" fn(usize, usize) -> *mut c_void;
/// `usable_size(ptr)`.
pub(crate) type CUsableSize = unsafe extern "C" fn(*mut c_void) -> usize;

/// Either release function.
#[derive(Clone, Copy)]
pub(crate) enum Release {
    Free(CFree),
    Sized(CSizedFree),
}

/// The functions found in the library.
pub(crate) struct SymbolTable {
    malloc: CMalloc,
    calloc: Option<CCalloc>,
    realloc: Option<CRealloc>,
    release: Release,
    aligned_alloc: Option<CAlignedAlloc>,
    usable_size: Option<CUsableSize>,
    /// Sizes below this are rounded up to it.
    min_size: usize,
}

impl SymbolTable {
    #[inline]
    fn size(&self, size: usize) -> usize {
        size.max(self.min_size)
    }
}

/// Look up `name` as a function of type `T`.
///
/// # Safety
/// The caller asserts that the symbol, if present, is a C function with the
/// signature `T` (the user named it for that role).
unsafe fn lookup<T: Copy>(lib: &'static Library, name: &str, role: Role) -> Result<T, MissingSymbol> {
    // SAFETY: per this function's contract; the library is never unloaded,
    // so the pointer stays valid.
    match unsafe { lib.get::<T>(name.as_bytes()) } {
        Ok(sym) => Ok(*sym),
        Err(_) => Err(MissingSymbol { symbol: name.to_string(), role }),
    }
}

/// A function a spec names that its library does not have: the loader
/// refuses it (`missing-allocator-symbol`), naming the symbol and its role.
#[derive(Debug)]
pub(crate) struct MissingSymbol {
    /// The symbol as named.
    pub(crate) symbol: String,
    /// The role it was named for.
    pub(crate) role: Role,
}

impl SymbolTable {
    /// Find every named function; a missing one is refused, naming it and
    /// its role.
    pub(crate) fn find(
        lib: &'static Library,
        symbols: &Symbols,
        alignment: usize,
    ) -> Result<SymbolTable, MissingSymbol> {
        // The same holds for every lookup below ("as above").
        // SAFETY: the user named this symbol for its role, whose C signature is
        // the type it is looked up with: the contract of loading by symbol
        // (`crate::admit::symbols`).
        let malloc = unsafe { lookup::<CMalloc>(lib, &symbols.malloc, Role::Malloc) }?;
        // SAFETY: as above. A named `free` must exist even when a sized free is used.
        let free = unsafe { lookup::<CFree>(lib, &symbols.free, Role::Free) }?;
        let calloc = match symbols.get(Role::Calloc) {
            // SAFETY: as above.
            Some(n) => Some(unsafe { lookup::<CCalloc>(lib, n, Role::Calloc) }?),
            None => None,
        };
        let realloc = match symbols.get(Role::Realloc) {
            // SAFETY: as above.
            Some(n) => Some(unsafe { lookup::<CRealloc>(lib, n, Role::Realloc) }?),
            None => None,
        };
        let release = match symbols.get(Role::SizedFree) {
            // SAFETY: as above.
            Some(n) => Release::Sized(unsafe { lookup::<CSizedFree>(lib, n, Role::SizedFree) }?),
            None => Release::Free(free),
        };
        let aligned_alloc = match symbols.get(Role::AlignedAlloc) {
            // SAFETY: as above.
            Some(n) => Some(unsafe { lookup::<CAlignedAlloc>(lib, n, Role::AlignedAlloc) }?),
            None => None,
        };
        let usable_size = match symbols.get(Role::UsableSize) {
            // SAFETY: as above.
            Some(n) => Some(unsafe { lookup::<CUsableSize>(lib, n, Role::UsableSize) }?),
            None => None,
        };
        Ok(SymbolTable { malloc, calloc, realloc, release, aligned_alloc, usable_size, min_size: alignment.min(16) })
    }

    /// A table of functions given by address
    /// ([`crate::heap::functions::CFunctions`]), with no library behind them.
    ///
    /// # Safety
    /// Each function is a C function of its role's signature that behaves
    /// as that role's C function does (`malloc` returns a block of at least
    /// `size` bytes or NULL, `free` releases a block made by the others, …)
    /// and stays callable for the rest of the process.
    pub(crate) unsafe fn from_functions(f: &CFunctions, alignment: usize) -> SymbolTable {
        let release = match f.release {
            crate::heap::functions::Release::Free(free) => Release::Free(free),
            crate::heap::functions::Release::Sized(free) => Release::Sized(free),
        };
        SymbolTable {
            malloc: f.malloc,
            calloc: f.calloc,
            realloc: f.realloc,
            release,
            aligned_alloc: None,
            usable_size: None,
            min_size: alignment.min(16),
        }
    }

    /// Move the table to the heap and build the handler's vtable around
    /// it; the table lives as long as its [`CtxOwner`] (for the rest of the
    /// process once the handler is installed).
    pub(crate) fn into_vtable(self) -> (VTable, CtxOwner) {
        let aligned: Option<memplug_abi::AlignedAllocFn> = self.aligned_alloc.map(|_| sym_aligned_alloc as _);
        let usable: Option<memplug_abi::UsableSizeFn> = self.usable_size.map(|_| sym_usable_size as _);
        let owner = CtxOwner::new(self);
        // SAFETY: each trampoline implements its ABI role for a `ctx` that is
        // a `SymbolTable` (kept for the rest of the process once the handler
        // is installed, before any call), by calling C functions that
        // implement those roles: the library's, which the user named for them
        // (`find`), or those `from_functions`'s caller vouched for; the
        // usable size is only asked of live blocks (no FLAG_KNOWS_FOREIGN).
        let vtable = unsafe {
            VTable::from_fns(owner.ctx(), sym_malloc, sym_calloc, sym_realloc, sym_free, aligned)
                .with_usable_size(usable)
        };
        (vtable, owner)
    }
}

/// The table behind a `ctx` made by `into_vtable`.
///
/// # Safety
/// `ctx` is the `ctx` of a vtable made by [`SymbolTable::into_vtable`],
/// whose owner is kept (or not yet dropped).
unsafe fn table<'a>(ctx: *mut c_void) -> &'a SymbolTable {
    // SAFETY: per the contract, `ctx` points at a live `SymbolTable`.
    unsafe { &*(ctx as *const SymbolTable) }
}

unsafe extern "C" fn sym_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: the library's C malloc.
    unsafe { (t.malloc)(t.size(size)) }
}

unsafe extern "C" fn sym_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // The host never passes an overflowing product.
    let size = nelem * elsize;
    if let Some(calloc) = t.calloc {
        let (n, e) = if size < t.min_size { (1, t.min_size) } else { (nelem, elsize) };
        // SAFETY: the library's C calloc.
        return unsafe { calloc(n, e) };
    }
    let size = t.size(size);
    // SAFETY: the library's C malloc.
    let p = unsafe { (t.malloc)(size) };
    if !p.is_null() {
        // SAFETY: `p` holds `size` writable bytes.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, size) };
    }
    p
}

unsafe extern "C" fn sym_realloc(ctx: *mut c_void, ptr: *mut c_void, old: usize, new: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx.
    let t = unsafe { table(ctx) };
    let (old, new) = (t.size(old), t.size(new));
    if let Some(realloc) = t.realloc {
        // SAFETY: `ptr` is a live block of this library's allocator.
        return unsafe { realloc(ptr, new) };
    }
    // SAFETY: the library's C malloc.
    let q = unsafe { (t.malloc)(new) };
    if !q.is_null() {
        // SAFETY: `ptr` holds `old` bytes and `q` holds `new`; distinct blocks.
        unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, q as *mut u8, old.min(new)) };
        // SAFETY: `ptr` is this allocator's live block of `old` bytes, not used again.
        unsafe { release_exact(t, ptr, old) };
    }
    q
}

/// Release through the sized free if there is one, else `free`.
///
/// # Safety
/// `ptr` is a live block of this allocator of `size` bytes (already rounded).
unsafe fn release_exact(t: &SymbolTable, ptr: *mut c_void, size: usize) {
    match t.release {
        // SAFETY: per the contract.
        Release::Sized(f) => unsafe { f(ptr, size) },
        // SAFETY: per the contract.
        Release::Free(f) => unsafe { f(ptr) },
    }
}

unsafe extern "C" fn sym_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the host only passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: a live block of `size` bytes as the host asked for it, which
    // this table rounded the same way when allocating.
    unsafe { release_exact(t, ptr, t.size(size)) }
}

unsafe extern "C" fn sym_aligned_alloc(ctx: *mut c_void, alignment: usize, size: usize) -> *mut c_void {
    // SAFETY: the host only passes this handler's ctx, and only calls this
    // when the table has an aligned allocation function.
    let t = unsafe { table(ctx) };
    match t.aligned_alloc {
        // Rounded like every other size, so that `sym_free` (which rounds the
        // same way) hands the sized free the size the block was made with.
        // SAFETY: the library's C `aligned_alloc(alignment, size)`; a power of two.
        Some(f) => unsafe { f(alignment, t.size(size)) },
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn sym_usable_size(ctx: *mut c_void, ptr: *const c_void) -> usize {
    // SAFETY: the host only passes this handler's ctx, and only calls this
    // when the table has a usable-size function.
    let t = unsafe { table(ctx) };
    match t.usable_size {
        // SAFETY: the library's C `usable_size(ptr)`; the host passes only
        // live blocks of this allocator (a handler taken by symbol name never
        // declares FLAG_KNOWS_FOREIGN). Blocks were rounded up to the
        // table's least size, so the answer is at least the size asked for.
        Some(f) => unsafe { f(ptr.cast_mut()) },
        None => 0,
    }
}
