//! The functions NumPy calls on a *padded* bridge: one whose array data is
//! aligned to [`PAD_ALIGN`] (64 bytes, a cache line) although its handler
//! aligns less. The bridge pads the blocks of shareable handlers so
//! (see [`Bridge::padded`]): their arrays are handed to other processes,
//! whose loops then run on cache-line-aligned data — as on a page-aligned
//! `multiprocessing.shared_memory` block — and processes writing
//! neighbouring arrays never write the same cache line.
//!
//! Every block is asked of the plugin with [`PADDED_OVERHEAD`] bytes more
//! than NumPy wants; the data starts at the first 64-aligned address at
//! least three words into it. The three words in front of the data hold
//! the offset from the block's start, the size NumPy asked for, and the
//! check word (as in [`crate::raw_plugin`], with the offset mixed in):
//!
//! ```text
//!   base (from the plugin)                 ptr (to NumPy, 64-aligned)
//!   |<--------- offset (24 to 87) -------->|<------- size bytes ------->
//!   [ padding ... | offset | size | cookie ][ array data ... ][ rest of the padding ]
//! ```
//!
//! No cache of freed blocks here: shareable handlers report statistics.
//!
//! Imports [`crate::bridge`] and [`crate::raw_plugin`]'s check word.

use crate::bridge::{Bridge, PAD_ALIGN, PADDED_OVERHEAD};
use crate::raw_plugin::cookie;
use std::ffi::c_void;
use std::ptr::NonNull;

/// Bytes of header words in front of the data.
const WORDS: usize = 3 * size_of::<usize>();

const _: () = assert!(PADDED_OVERHEAD >= WORDS + PAD_ALIGN);

/// The check word of a padded block.
#[inline]
fn check(bridge: &Bridge, ptr: *mut u8, size: usize, offset: usize) -> usize {
    cookie(bridge, ptr, size) ^ offset.rotate_left(48)
}

/// The data's offset in a block starting at `base`.
#[inline]
fn offset_in(base: NonNull<u8>) -> usize {
    let start = base.as_ptr() as usize;
    (start + WORDS).next_multiple_of(PAD_ALIGN) - start
}

/// Write the header of a block the plugin just returned; the pointer for
/// NumPy.
///
/// # Safety
/// `base` is a live block of `size + PADDED_OVERHEAD` bytes, 8-aligned.
#[inline]
unsafe fn finish(bridge: &Bridge, base: NonNull<u8>, size: usize) -> *mut c_void {
    let offset = offset_in(base);
    // SAFETY: `WORDS <= offset <= WORDS + PAD_ALIGN - 8 <= PADDED_OVERHEAD`,
    // so the three words before `ptr` and the `size` bytes after it lie in
    // the block; `ptr` is 64-aligned, so the words are aligned.
    unsafe {
        let ptr = base.as_ptr().add(offset);
        let words = ptr.cast::<usize>();
        words.sub(3).write(offset);
        words.sub(2).write(size);
        words.sub(1).write(check(bridge, ptr, size, offset));
        ptr.cast()
    }
}

/// The size and offset in front of a pointer NumPy handed back, or `None`
/// if the check word does not match.
///
/// # Safety
/// The three words before `ptr` are readable (a pointer from this bridge).
#[inline]
unsafe fn read(bridge: &Bridge, ptr: *mut u8) -> Option<(usize, usize)> {
    // SAFETY: the caller's contract.
    let (offset, size, word) = unsafe {
        let words = ptr.cast::<usize>();
        (words.sub(3).read(), words.sub(2).read(), words.sub(1).read())
    };
    (word == check(bridge, ptr, size, offset)).then_some((size, offset))
}

/// The size NumPy asked for of the live block at `ptr`.
///
/// # Safety
/// As for [`crate::raw_block::block_size`].
pub unsafe fn block_size(bridge: &Bridge, ptr: NonNull<u8>) -> Option<usize> {
    // SAFETY: the caller's contract.
    unsafe { read(bridge, ptr.as_ptr()) }.map(|(size, _)| size)
}

/// NumPy's `malloc(ctx, size)`.
///
/// # Safety
/// `ctx` is the bridge a capsule of [`crate::raw_numpy::new_capsule`] holds.
pub unsafe extern "C" fn padded_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `ctx` is the leaked bridge `new_capsule` stored.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let Some(total) = size.checked_add(PADDED_OVERHEAD) else { return std::ptr::null_mut() };
    match bridge.handler.alloc(total) {
        Ok(base) => {
            bridge.counts.alloc(bridge.counts.mine(), size);
            // SAFETY: `base` is a fresh block of `total` bytes.
            unsafe { finish(bridge, base, size) }
        }
        Err(_) => std::ptr::null_mut(),
    }
}

/// NumPy's `calloc(ctx, nelem, elsize)`.
///
/// # Safety
/// As for the `malloc` above.
pub unsafe extern "C" fn padded_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: as in `padded_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let Some(size) = nelem.checked_mul(elsize) else { return std::ptr::null_mut() };
    let Some(total) = size.checked_add(PADDED_OVERHEAD) else { return std::ptr::null_mut() };
    // Zeroed by the plugin as a whole (a shared-memory plugin serves that
    // from untouched pages without writing them).
    match bridge.handler.alloc_zeroed(total, 1) {
        Ok(base) => {
            bridge.counts.alloc(bridge.counts.mine(), size);
            // SAFETY: `base` is a fresh block of `total` bytes.
            unsafe { finish(bridge, base, size) }
        }
        Err(_) => std::ptr::null_mut(),
    }
}

/// NumPy's `realloc(ctx, ptr, new_size)`.
///
/// # Safety
/// As for the `malloc` above; `ptr` is NULL or a live block of this
/// bridge (anything else is recognised by its check word, if readable).
pub unsafe extern "C" fn padded_realloc(ctx: *mut c_void, ptr: *mut c_void, new_size: usize) -> *mut c_void {
    if ptr.is_null() {
        // SAFETY: forwarded: `realloc(NULL, n)` is `malloc(n)`.
        return unsafe { padded_malloc(ctx, new_size) };
    }
    // SAFETY: as in `padded_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy reallocs only blocks this handler made.
    let Some((old_size, offset)) = (unsafe { read(bridge, ptr) }) else {
        bridge.foreign_pointer("realloc");
        return std::ptr::null_mut();
    };
    let Some(total) = new_size.checked_add(PADDED_OVERHEAD) else { return std::ptr::null_mut() };
    // SAFETY: the header matched, so `ptr - offset` is a live block of this
    // handler of `old_size + PADDED_OVERHEAD` bytes.
    let result = unsafe {
        let base = NonNull::new_unchecked(ptr.sub(offset));
        bridge.handler.realloc(base, old_size + PADDED_OVERHEAD, total)
    };
    let Ok(base) = result else {
        // The old block is untouched, as C's realloc promises.
        return std::ptr::null_mut();
    };
    let moved_to = offset_in(base);
    if moved_to != offset {
        // The new block aligns differently: move the data to its place.
        // SAFETY: the plugin's realloc kept the first `min(old, new) +
        // PADDED_OVERHEAD` bytes, so the old data is at `offset`; both
        // offsets are below `WORDS + PAD_ALIGN <= PADDED_OVERHEAD` (the base
        // is at least 8-aligned), so both ranges of `min(old, new)` bytes lie
        // in the new block of `new + PADDED_OVERHEAD`; `copy` allows overlap.
        unsafe {
            let from = base.as_ptr().add(offset);
            std::ptr::copy(from, base.as_ptr().add(moved_to), old_size.min(new_size));
        }
    }
    bridge.counts.realloc(old_size, new_size);
    // SAFETY: `base` is the resized block of `total` bytes.
    unsafe { finish(bridge, base, new_size) }
}

/// NumPy's `free(ctx, ptr, size)`.
///
/// # Safety
/// As for `realloc`.
pub unsafe extern "C" fn padded_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: as in `padded_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    if ptr.is_null() {
        bridge.counts.null_free();
        return;
    }
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy frees only blocks this handler made.
    let Some((real, offset)) = (unsafe { read(bridge, ptr) }) else {
        bridge.foreign_pointer("free");
        return;
    };
    if size != real {
        bridge.numpy_size_mismatch(real, size);
    }
    bridge.counts.free(bridge.counts.mine(), real);
    // SAFETY: the header matched: `ptr - offset` is a live block of
    // `real + PADDED_OVERHEAD` bytes. Clearing the check word first makes a
    // second free of the same pointer recognisable.
    unsafe {
        ptr.cast::<usize>().sub(1).write(0);
        bridge.handler.free(NonNull::new_unchecked(ptr.sub(offset)), real + PADDED_OVERHEAD);
    }
}
