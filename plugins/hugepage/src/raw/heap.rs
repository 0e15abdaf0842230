//! Small blocks: libc's heap, as safe allocation functions and `unsafe`
//! release and resize (their pointers must be libc's).

/// `malloc(size)`, or null.
pub(crate) fn malloc(size: usize) -> *mut u8 {
    // SAFETY: malloc has no preconditions.
    unsafe { libc::malloc(size) as *mut u8 }
}

/// `calloc(1, size)`: zeroed, or null.
pub(crate) fn calloc(size: usize) -> *mut u8 {
    // SAFETY: calloc has no preconditions.
    unsafe { libc::calloc(1, size) as *mut u8 }
}

/// A block of `size` bytes aligned to `align` (a power of two), or null.
pub(crate) fn aligned(align: usize, size: usize) -> *mut u8 {
    let align = align.max(size_of::<usize>());
    let mut p: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: `align` is a power of two and a multiple of the pointer size,
    // as posix_memalign requires; `p` is a valid out-pointer.
    let rc = unsafe { libc::posix_memalign(&mut p, align, size) };
    if rc == 0 { p as *mut u8 } else { std::ptr::null_mut() }
}

/// `realloc(ptr, size)`.
///
/// # Safety
/// `ptr` is a live libc block; on success it is not used again.
pub(crate) unsafe fn realloc(ptr: *mut u8, size: usize) -> *mut u8 {
    // SAFETY: per the contract `ptr` is a live libc block.
    unsafe { libc::realloc(ptr.cast(), size) as *mut u8 }
}

/// `free(ptr)`.
///
/// # Safety
/// `ptr` is a live libc block, not used again.
pub(crate) unsafe fn free(ptr: *mut u8) {
    // SAFETY: per the contract `ptr` is a live libc block.
    unsafe { libc::free(ptr.cast()) }
}

/// Copy `n` bytes from `from` to `to`.
///
/// # Safety
/// `from` is readable and `to` writable for `n` bytes; they do not overlap.
pub(crate) unsafe fn copy(from: *const u8, to: *mut u8, n: usize) {
    // SAFETY: per the contract.
    unsafe { std::ptr::copy_nonoverlapping(from, to, n) }
}
