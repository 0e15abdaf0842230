//! The functions NumPy calls on a *padded* bridge: one whose array data is
//! aligned to [`PAD_ALIGN`](header::PAD_ALIGN) (64 bytes, a cache line) although its handler
//! aligns less. The bridge pads the blocks of shareable handlers so
//! (see [`Bridge::padded`]): their arrays are handed to other processes,
//! whose loops then run on cache-line-aligned data — as on a page-aligned
//! `multiprocessing.shared_memory` block — and processes writing
//! neighbouring arrays never write the same cache line.
//!
//! Every block is asked of the plugin with [`PADDED_OVERHEAD`] bytes more
//! than NumPy wants, and carries the padded format of the block header
//! ([`crate::block::header_raw`] defines it, with the data's offset in the
//! block beside the size and the check word).
//!
//! No cache of freed blocks here: shareable handlers report statistics.

use super::state::Bridge;
use crate::block::header_raw::{self as header, PADDED_OVERHEAD};
use std::ffi::c_void;
use std::ptr::NonNull;

/// NumPy's `malloc(ctx, size)`.
///
/// # Safety
/// `ctx` is the bridge a capsule of [`new_capsule`](crate::numpy::capsule_raw::new_capsule) holds.
pub unsafe extern "C" fn padded_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `ctx` is the leaked bridge `new_capsule` stored.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let Some(total) = size.checked_add(PADDED_OVERHEAD) else { return std::ptr::null_mut() };
    match bridge.handler.alloc(total) {
        Ok(base) => {
            bridge.counts.alloc(bridge.counts.mine(), size);
            // SAFETY: `base` is a fresh block of `total` bytes.
            unsafe { header::write_padded(bridge.salt, base, size) }
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
            unsafe { header::write_padded(bridge.salt, base, size) }
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
    let Some((old_size, offset)) = (unsafe { header::read_padded(bridge.salt, ptr) }) else {
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
    let moved_to = header::padded_offset(base);
    if moved_to != offset {
        // The new block aligns differently: move the data to its place.
        // SAFETY: the plugin's realloc kept the first `min(old, new) +
        // PADDED_OVERHEAD` bytes, so the old data is at `offset`; both
        // offsets are below three words + `PAD_ALIGN <= PADDED_OVERHEAD` (the
        // base is at least 8-aligned; see the header's padded format), so both ranges of `min(old, new)` bytes lie
        // in the new block of `new + PADDED_OVERHEAD`; `copy` allows overlap.
        unsafe {
            let from = base.as_ptr().add(offset);
            std::ptr::copy(from, base.as_ptr().add(moved_to), old_size.min(new_size));
        }
    }
    bridge.counts.realloc(old_size, new_size);
    // SAFETY: `base` is the resized block of `total` bytes.
    unsafe { header::write_padded(bridge.salt, base, new_size) }
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
    let Some((real, offset)) = (unsafe { header::read_padded(bridge.salt, ptr) }) else {
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
        header::clear(ptr);
        bridge.handler.free(NonNull::new_unchecked(ptr.sub(offset)), real + PADDED_OVERHEAD);
    }
}
