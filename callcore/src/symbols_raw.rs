//! Allocators made of plain C functions (`malloc(size)`, `free(ptr)`, …):
//! the table of the functions, its reader, and the trampolines that give
//! it the handler ABI (each takes the table as its `ctx`). The host makes
//! such a handler from a library named by a manifest or on its command
//! line, or from C functions given by address; the interposer from the
//! table `memplug run` names in its environment. Both read the table here
//! and call through these trampolines.
//!
//! The trampolines derive what the library lacks: `calloc` as malloc +
//! zero, `realloc` as malloc + copy of `min(old, new)` bytes + free (the
//! caller knows the old size), and `free` through the sized free when one
//! is named. Requests smaller than the table's least size
//! ([`SymbolTable::with_min_size`]) are rounded up to it in every function
//! alike, and the sized free gets the same rounded size, so it always sees
//! the size the block was made with. A named `usable_size(ptr)` answers the
//! ABI 1.3 `usable_size`.

#![allow(unsafe_code)]

use crate::role::Role;
use core::ffi::c_void;
use memplug_abi::{AlignedAllocFn, CallocFn, FreeFn, MallocFn, ReallocFn, UsableSizeFn};

/// `void *malloc(size_t size)`.
pub type CMalloc = unsafe extern "C" fn(usize) -> *mut c_void;
/// `void *calloc(size_t nelem, size_t size)`.
pub type CCalloc = unsafe extern "C" fn(usize, usize) -> *mut c_void;
/// `void *realloc(void *ptr, size_t size)`.
pub type CRealloc = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
/// `void free(void *ptr)`.
pub type CFree = unsafe extern "C" fn(*mut c_void);
/// `void sized_free(void *ptr, size_t size)`.
pub type CSizedFree = unsafe extern "C" fn(*mut c_void, usize);
/// `void *aligned_alloc(size_t alignment, size_t size)`.
pub type CAlignedAlloc = unsafe extern "C" fn(usize, usize) -> *mut c_void;
/// `size_t usable_size(void *ptr)`.
pub type CUsableSize = unsafe extern "C" fn(*mut c_void) -> usize;

/// The functions of an allocator made of plain C functions, by role, and
/// how sizes are rounded before they reach them. A handler's `ctx` points
/// at one (see [`SymbolTable::trampolines`]).
///
/// At least one of `free` and `sized_free` is set: [`SymbolTable::read`]
/// requires `free`; a table built by hand names one or the other.
#[derive(Clone, Copy)]
pub struct SymbolTable {
    /// `malloc`.
    pub malloc: CMalloc,
    /// `calloc`, if named (else derived: malloc + zero).
    pub calloc: Option<CCalloc>,
    /// `realloc`, if named (else derived: malloc + copy + free).
    pub realloc: Option<CRealloc>,
    /// `free`, if named.
    pub free: Option<CFree>,
    /// The sized free, if named: used instead of `free` when the size is
    /// known.
    pub sized_free: Option<CSizedFree>,
    /// `aligned_alloc`, if named.
    pub aligned_alloc: Option<CAlignedAlloc>,
    /// The usable-size function, if named.
    pub usable_size: Option<CUsableSize>,
    /// Sizes below this are rounded up to it (0: none are).
    min_size: usize,
    /// Whether an aligned request's size is rounded up to a whole multiple
    /// of the alignment (see [`SymbolTable::with_whole_aligned_sizes`]).
    whole_aligned: bool,
}

/// The handler functions over a [`SymbolTable`]: each takes the table as
/// its `ctx`.
#[derive(Clone, Copy)]
pub struct Trampolines {
    /// `malloc(ctx, size)`.
    pub malloc: MallocFn,
    /// `calloc(ctx, nelem, size)`: the library's, or malloc + zero.
    pub calloc: CallocFn,
    /// `realloc(ctx, ptr, old, new)`: the library's, or malloc + copy + free.
    pub realloc: ReallocFn,
    /// `free(ctx, ptr, size)`: the sized free with the block's size when
    /// one is named, else `free`.
    pub free: FreeFn,
    /// `free(ctx, ptr, _)` for a caller that does not know the size: the
    /// library's `free`, always; `None` for a table that names none.
    pub free_sizeless: Option<FreeFn>,
    /// `aligned_alloc(ctx, alignment, size)`, when the table has one.
    pub aligned_alloc: Option<AlignedAllocFn>,
    /// `usable_size(ctx, ptr)`, when the table has one.
    pub usable_size: Option<UsableSizeFn>,
}

impl SymbolTable {
    /// Read a table: `find(role)` gives the address of the function named
    /// for `role` (`Ok(None)` when none is named; `Err` refuses, e.g. a
    /// named symbol the library lacks), asked in the order malloc, free,
    /// calloc, realloc, sized free, aligned_alloc, usable size; a required
    /// role that `find` says is unnamed is refused with `unnamed(role)`.
    /// No size is rounded until [`with_min_size`](Self::with_min_size) says.
    ///
    /// # Safety
    /// Every address `find` gives is a C function of its role's signature
    /// ([`Role::signature`]) that behaves as that role's C function does
    /// (`malloc` returns a block of at least `size` bytes or NULL, `free`
    /// releases a block made by the others, …) and stays callable for the
    /// rest of the process.
    pub unsafe fn read<E>(
        mut find: impl FnMut(Role) -> Result<Option<*mut c_void>, E>,
        unnamed: impl Fn(Role) -> E,
    ) -> Result<SymbolTable, E> {
        let malloc = find(Role::Malloc)?.ok_or_else(|| unnamed(Role::Malloc))?;
        let free = find(Role::Free)?.ok_or_else(|| unnamed(Role::Free))?;
        let (calloc, realloc) = (find(Role::Calloc)?, find(Role::Realloc)?);
        let sized_free = find(Role::SizedFree)?;
        let (aligned, usable) = (find(Role::AlignedAlloc)?, find(Role::UsableSize)?);
        // SAFETY: each address is a function with the signature of its role
        // (the caller's promise): the transmutes only give the addresses
        // their types.
        Ok(unsafe {
            SymbolTable {
                malloc: core::mem::transmute::<*mut c_void, CMalloc>(malloc),
                calloc: calloc.map(|f| core::mem::transmute::<*mut c_void, CCalloc>(f)),
                realloc: realloc.map(|f| core::mem::transmute::<*mut c_void, CRealloc>(f)),
                free: Some(core::mem::transmute::<*mut c_void, CFree>(free)),
                sized_free: sized_free.map(|f| core::mem::transmute::<*mut c_void, CSizedFree>(f)),
                aligned_alloc: aligned.map(|f| core::mem::transmute::<*mut c_void, CAlignedAlloc>(f)),
                usable_size: usable.map(|f| core::mem::transmute::<*mut c_void, CUsableSize>(f)),
                min_size: 0,
                whole_aligned: false,
            }
        })
    }

    /// A table of `malloc` and a release function given by address, with
    /// no other role; set the others with the fields.
    ///
    /// # Safety
    /// As for [`read`](Self::read): each function has its role's signature
    /// and contract and stays callable for the rest of the process.
    pub const unsafe fn new(malloc: CMalloc, free: Option<CFree>, sized_free: Option<CSizedFree>) -> SymbolTable {
        SymbolTable {
            malloc,
            calloc: None,
            realloc: None,
            free,
            sized_free,
            aligned_alloc: None,
            usable_size: None,
            min_size: 0,
            whole_aligned: false,
        }
    }

    /// Round every size below `min_size` up to it, in every function
    /// alike: the host asks this of a table that declares an alignment (up
    /// to 16, C's fundamental one), so that small blocks get it too —
    /// mimalloc and tcmalloc align blocks under 16 bytes to 8 only, as C
    /// allows.
    pub const fn with_min_size(self, min_size: usize) -> SymbolTable {
        SymbolTable { min_size, ..self }
    }

    /// Round an aligned request's size up to a whole multiple of the
    /// alignment, as C11's `aligned_alloc` wants (mimalloc's returns NULL
    /// otherwise): the interposer's rule, whose callers are programs that
    /// use `aligned_alloc`'s C contract. The host leaves it off, so that its
    /// sized free sees the size an aligned block was made with.
    pub const fn with_whole_aligned_sizes(self) -> SymbolTable {
        SymbolTable { whole_aligned: true, ..self }
    }

    /// The size the library is asked for when `size` bytes are requested.
    #[inline(always)]
    fn size(&self, size: usize) -> usize {
        size.max(self.min_size)
    }

    /// The size an aligned request of `size` bytes asks the library for;
    /// `None` when rounding it overflows.
    #[inline]
    fn aligned_size(&self, alignment: usize, size: usize) -> Option<usize> {
        let size = self.size(size);
        if self.whole_aligned { size.checked_next_multiple_of(alignment.max(1)) } else { Some(size) }
    }

    /// The handler functions over this table: a vtable of them takes the
    /// table's address as its `ctx`. `aligned_alloc` and `usable_size` are
    /// `Some` exactly when the table has those functions.
    ///
    /// Each is chosen for the table (a table that rounds no size gets a
    /// `malloc` that does not ask; a table with a sized free a `free` that
    /// calls it), so that a call makes no choice the table already made.
    pub fn trampolines(&self) -> Trampolines {
        Trampolines {
            malloc: if self.min_size == 0 { sym_malloc_exact } else { sym_malloc },
            calloc: sym_calloc,
            realloc: sym_realloc,
            free: match (self.sized_free, self.free) {
                (Some(_), _) => sym_free_sized,
                (None, _) => sym_free,
            },
            free_sizeless: self.free.map(|_| sym_free_sizeless as FreeFn),
            aligned_alloc: self.aligned_alloc.map(|_| sym_aligned_alloc as AlignedAllocFn),
            usable_size: self.usable_size.map(|_| sym_usable_size as UsableSizeFn),
        }
    }
}

/// The table behind a trampoline's `ctx`.
///
/// # Safety
/// `ctx` is the address of a live [`SymbolTable`], as every caller of a
/// trampoline passes (the handler's `ctx`).
#[inline(always)]
unsafe fn table<'a>(ctx: *mut c_void) -> &'a SymbolTable {
    // SAFETY: per the contract, `ctx` points at a live `SymbolTable`.
    unsafe { &*(ctx as *const SymbolTable) }
}

unsafe extern "C" fn sym_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the caller passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: the library's C malloc.
    unsafe { (t.malloc)(t.size(size)) }
}

/// `malloc` for a table that rounds no size.
unsafe extern "C" fn sym_malloc_exact(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the caller passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: the library's C malloc.
    unsafe { (t.malloc)(size) }
}

unsafe extern "C" fn sym_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: the caller passes this handler's ctx.
    let t = unsafe { table(ctx) };
    if let Some(calloc) = t.calloc {
        let (n, e) = match nelem.checked_mul(elsize) {
            Some(size) if size < t.min_size => (1, t.min_size),
            _ => (nelem, elsize),
        };
        // SAFETY: the library's C calloc, which checks the product itself.
        return unsafe { calloc(n, e) };
    }
    let Some(size) = nelem.checked_mul(elsize) else { return core::ptr::null_mut() };
    let size = t.size(size);
    // SAFETY: the library's C malloc.
    let p = unsafe { (t.malloc)(size) };
    if !p.is_null() {
        // SAFETY: `p` holds `size` writable bytes.
        unsafe { core::ptr::write_bytes(p as *mut u8, 0, size) };
    }
    p
}

unsafe extern "C" fn sym_realloc(ctx: *mut c_void, ptr: *mut c_void, old: usize, new: usize) -> *mut c_void {
    // SAFETY: the caller passes this handler's ctx.
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
        unsafe { core::ptr::copy_nonoverlapping(ptr as *const u8, q as *mut u8, old.min(new)) };
        // SAFETY: `ptr` is this allocator's live block of `old` bytes, not used again.
        unsafe { release_exact(t, ptr, old) };
    }
    q
}

/// Release through the sized free if there is one, else `free`.
///
/// # Safety
/// `ptr` is a live block of this allocator of `size` bytes (already rounded).
#[inline(always)]
unsafe fn release_exact(t: &SymbolTable, ptr: *mut c_void, size: usize) {
    match (t.sized_free, t.free) {
        // SAFETY: per the contract.
        (Some(f), _) => unsafe { f(ptr, size) },
        // SAFETY: per the contract.
        (None, Some(f)) => unsafe { f(ptr) },
        (None, None) => {}
    }
}

/// `free` for a table with no sized free (its `free` is named: see
/// [`SymbolTable`]).
unsafe extern "C" fn sym_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: a live block of `size` bytes as the caller asked for it, which
    // this table rounded the same way when allocating.
    unsafe { release_exact(t, ptr, t.size(size)) }
}

/// `free` for a table with a sized free.
unsafe extern "C" fn sym_free_sized(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: installed only for a table with a sized free.
    let sized = unsafe { t.sized_free.unwrap_unchecked() };
    // SAFETY: a live block of `size` bytes as the caller asked for it, which
    // this table rounded the same way when allocating.
    unsafe { sized(ptr, t.size(size)) }
}

/// `free` without the size, for a table that names `free`.
unsafe extern "C" fn sym_free_sizeless(ctx: *mut c_void, ptr: *mut c_void, _size: usize) {
    // SAFETY: the caller passes this handler's ctx.
    let t = unsafe { table(ctx) };
    // SAFETY: installed only for a table that names `free`.
    let free = unsafe { t.free.unwrap_unchecked() };
    // SAFETY: a live block of this library's allocator (its size unknown).
    unsafe { free(ptr) }
}

unsafe extern "C" fn sym_aligned_alloc(ctx: *mut c_void, alignment: usize, size: usize) -> *mut c_void {
    // SAFETY: the caller passes this handler's ctx; installed only when the
    // table has an aligned allocation function.
    let t = unsafe { table(ctx) };
    match (t.aligned_alloc, t.aligned_size(alignment, size)) {
        // Rounded like every other size, so that `sym_free` (which rounds the
        // same way) hands the sized free the size the block was made with.
        // SAFETY: the library's C `aligned_alloc(alignment, size)`; a power of two.
        (Some(f), Some(size)) => unsafe { f(alignment, size) },
        _ => core::ptr::null_mut(),
    }
}

unsafe extern "C" fn sym_usable_size(ctx: *mut c_void, ptr: *const c_void) -> usize {
    // SAFETY: the caller passes this handler's ctx; installed only when the
    // table has a usable-size function.
    let t = unsafe { table(ctx) };
    match t.usable_size {
        // SAFETY: the library's C `usable_size(ptr)`; callers pass only live
        // blocks of this allocator (such a handler never declares
        // FLAG_KNOWS_FOREIGN). Blocks were rounded up to the table's least
        // size, so the answer is at least the size asked for.
        Some(f) => unsafe { f(ptr.cast_mut()) },
        None => 0,
    }
}
