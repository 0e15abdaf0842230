//! Host over-allocation: serving an alignment above a handler's own from a
//! plain block of that handler. The block is `size + alignment + one word`
//! long; the aligned pointer is the first `alignment`-aligned address at
//! least one word past the block's start, and the word just before it holds
//! the block's start, so that the block can be found again to free it.

#![allow(unsafe_code)]

use core::ptr::NonNull;

/// The bytes to allocate to carve a `size`-byte block aligned to
/// `alignment` out of it, with room for the original pointer in front.
#[inline]
pub fn over_allocation(size: usize, alignment: usize) -> Option<usize> {
    size.checked_add(alignment)?.checked_add(size_of::<usize>())
}

/// Align inside an over-allocated block: the aligned pointer, with the
/// block's start stored in the word just before it.
///
/// # Safety
/// `raw` is valid for writes of `over_allocation(size, alignment)` bytes for
/// the `size` the caller will use, and `alignment` is a power of two.
#[inline]
pub unsafe fn align_within(raw: NonNull<u8>, alignment: usize) -> NonNull<u8> {
    let addr = raw.as_ptr() as usize;
    let aligned = (addr + size_of::<usize>() + alignment - 1) & !(alignment - 1);
    let offset = aligned - addr;
    // SAFETY: `size_of::<usize>() <= offset < alignment + size_of::<usize>()`,
    // so the word before `raw + offset` and the `size` bytes after it lie in
    // the `size + alignment + size_of::<usize>()` bytes the caller vouches for.
    unsafe {
        let p = raw.as_ptr().add(offset);
        (p as *mut usize).sub(1).write_unaligned(addr);
        NonNull::new_unchecked(p)
    }
}

/// The start of the block an aligned pointer was carved from.
///
/// # Safety
/// `aligned` was returned by [`align_within`] and its block is live.
#[inline]
pub unsafe fn block_start(aligned: NonNull<u8>) -> NonNull<u8> {
    // SAFETY: `align_within` stored the (non-null) block start in the word
    // just before `aligned`, inside the live block.
    unsafe {
        let addr = (aligned.as_ptr() as *const usize).sub(1).read_unaligned();
        NonNull::new_unchecked(addr as *mut u8)
    }
}
