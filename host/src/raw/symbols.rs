//! Allocators made of plain C functions (`malloc(size)`, `free(ptr)`, …)
//! taken by name from any shared library, the way ctypes or PyTorch's
//! `CUDAPluggableAllocator` do.
//!
//! The functions found are kept in a [`SymbolTable`] (leaked: it lives as
//! long as the library, i.e. for the rest of the process) and the handler's
//! `ctx` points at it. Trampolines with the ABI's signatures call through
//! the table and derive what the library lacks: `calloc` as malloc + zero,
//! `realloc` as malloc + copy of `min(old, new)` bytes + free (the host knows
//! the old size), and `free` through the sized free when one is given.
//!
//! Requests smaller than the declared alignment (capped at 16, C's
//! fundamental alignment) are rounded up to it, in every function alike, so
//! that small blocks get the declared alignment too: mimalloc and tcmalloc
//! align blocks under 16 bytes to 8 only, as C allows.

use crate::error::Refusal;
use crate::raw::dispatch::VTable;
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
    /// Sizes below this are rounded up to it.
    min_size: usize,
}

impl SymbolTable {
    #[inline]
    fn size(&self, size: usize) -> usize {
        size.max(self.min_size)
    }
}

/// The symbol names asked for, by role.
pub(crate) struct Names<'a> {
    pub(crate) malloc: &'a str,
    pub(crate) calloc: Option<&'a str>,
    pub(crate) realloc: Option<&'a str>,
    pub(crate) free: Option<&'a str>,
    pub(crate) sized_free: Option<&'a str>,
    pub(crate) aligned_alloc: Option<&'a str>,
}

/// Look up `name` as a function of type `T`.
///
/// # Safety
/// The caller asserts that the symbol, if present, is a C function with the
/// signature `T` (the user named it for that role).
unsafe fn lookup<T: Copy>(lib: &'static Library, name: &str, role: &'static str) -> Result<T, Refusal> {
    // SAFETY: per this function's contract; the library is never unloaded,
    // so the pointer stays valid.
    match unsafe { lib.get::<T>(name.as_bytes()) } {
        Ok(sym) => Ok(*sym),
        Err(_) => Err(Refusal::MissingAllocatorSymbol { symbol: name.to_string(), role }),
    }
}

impl SymbolTable {
    /// Find every named function; a missing one is refused, naming it.
    pub(crate) fn find(lib: &'static Library, names: &Names<'_>, alignment: usize) -> Result<SymbolTable, Refusal> {
        // The same holds for every lookup below ("as above").
        // SAFETY: the user named this symbol for its role, which is the C signature
        // it is looked up with: the contract of loading by symbol (`crate::symbols`).
        let malloc = unsafe { lookup::<CMalloc>(lib, names.malloc, "malloc") }?;
        let calloc = match names.calloc {
            // SAFETY: as above.
            Some(n) => Some(unsafe { lookup::<CCalloc>(lib, n, "calloc") }?),
            None => None,
        };
        let realloc = match names.realloc {
            // SAFETY: as above.
            Some(n) => Some(unsafe { lookup::<CRealloc>(lib, n, "realloc") }?),
            None => None,
        };
        let release = match (names.sized_free, names.free) {
            // SAFETY: as above.
            (Some(n), _) => Release::Sized(unsafe { lookup::<CSizedFree>(lib, n, "sized_free") }?),
            // SAFETY: as above.
            (None, Some(n)) => Release::Free(unsafe { lookup::<CFree>(lib, n, "free") }?),
            (None, None) => return Err(Refusal::MissingAllocatorSymbol { symbol: String::new(), role: "free" }),
        };
        // A given `free` must exist even when a sized free is used.
        if let (Some(_), Some(n)) = (names.sized_free, names.free) {
            // SAFETY: as above.
            unsafe { lookup::<CFree>(lib, n, "free") }?;
        }
        let aligned_alloc = match names.aligned_alloc {
            // SAFETY: as above.
            Some(n) => Some(unsafe { lookup::<CAlignedAlloc>(lib, n, "aligned_alloc") }?),
            None => None,
        };
        Ok(SymbolTable { malloc, calloc, realloc, release, aligned_alloc, min_size: alignment.min(16) })
    }

    /// Which roles the host derives because the library lacks them.
    pub(crate) fn derived(&self) -> Vec<&'static str> {
        let mut d = Vec::new();
        if self.calloc.is_none() {
            d.push("calloc");
        }
        if self.realloc.is_none() {
            d.push("realloc");
        }
        d
    }

    /// Leak the table and build the handler's vtable around it.
    pub(crate) fn into_vtable(self) -> VTable {
        let has_aligned = self.aligned_alloc.is_some();
        let table: &'static SymbolTable = Box::leak(Box::new(self));
        let ctx = table as *const SymbolTable as *mut c_void;
        let v = VTable::from_fns(ctx, sym_malloc, sym_calloc, sym_realloc, sym_free);
        if has_aligned { v.with_aligned_alloc(sym_aligned_alloc) } else { v }
    }
}

/// The table behind a `ctx` made by `into_vtable`.
///
/// # Safety
/// `ctx` is the `ctx` of a vtable made by [`SymbolTable::into_vtable`].
unsafe fn table<'a>(ctx: *mut c_void) -> &'a SymbolTable {
    // SAFETY: per the contract, `ctx` points at a leaked `SymbolTable`.
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
        // The size is passed as asked (and later to the sized free): the function
        // must accept any size, as glibc's, mimalloc's and jemalloc's do.
        // SAFETY: the library's C `aligned_alloc(alignment, size)`; a power of two.
        Some(f) => unsafe { f(alignment, size) },
        None => std::ptr::null_mut(),
    }
}
