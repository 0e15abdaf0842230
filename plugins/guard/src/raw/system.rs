//! The system allocator, for the allocations `sample=N` does not guard:
//! libc's `malloc`, `posix_memalign`, `realloc` and `free`. Under
//! `memplug run` the interposer loads the plugin with `RTLD_DEEPBIND`, so
//! these names bind to libc's own functions, not to the interposer's (as
//! for the `system` plugin); loaded by the host, they are the process's
//! allocator.

/// What libc's `malloc` aligns to on every target memplug supports.
const MALLOC_ALIGN: usize = 16;

/// A block of `size` bytes aligned to `align` (a power of two), zeroed if
/// `zeroed`; null if the system has none.
pub(crate) fn alloc(size: usize, align: usize, zeroed: bool) -> *mut u8 {
    if align <= MALLOC_ALIGN {
        // SAFETY: malloc and calloc have no preconditions.
        return unsafe { if zeroed { libc::calloc(1, size) } else { libc::malloc(size) } }.cast();
    }
    let mut p = std::ptr::null_mut();
    // SAFETY: `p` is writable; the alignment is a power of two and a
    // multiple of the pointer size (it exceeds 16).
    if unsafe { libc::posix_memalign(&mut p, align, size.max(1)) } != 0 {
        return std::ptr::null_mut();
    }
    if zeroed {
        // SAFETY: the block just made holds `size` bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, size) };
    }
    p.cast()
}

/// Give back a block of [`alloc`] or [`realloc`].
///
/// # Safety
/// `p` is a live block this module made, not used after this call.
pub(crate) unsafe fn free(p: *mut u8) {
    // SAFETY: the caller's promise: a live libc block.
    unsafe { libc::free(p.cast()) }
}

/// Resize a block of `old_size` bytes to `new_size`, keeping its first
/// `min(old_size, new_size)` bytes and an alignment of `align`; null on
/// failure, with the old block left as it was.
///
/// # Safety
/// `p` is a live block this module made with `old_size` bytes and at least
/// `align` alignment; after a non-null answer it is no longer used.
pub(crate) unsafe fn realloc(p: *mut u8, old_size: usize, new_size: usize, align: usize) -> *mut u8 {
    if align <= MALLOC_ALIGN {
        // SAFETY: the caller's promise: a live libc block.
        return unsafe { libc::realloc(p.cast(), new_size) }.cast();
    }
    let q = alloc(new_size, align, false);
    if !q.is_null() {
        // SAFETY: both blocks are live, distinct, and hold at least the
        // bytes copied; the old one is then freed, as the caller allows.
        unsafe {
            std::ptr::copy_nonoverlapping(p, q, old_size.min(new_size));
            free(p);
        }
    }
    q
}
