//! The block header every bridged block carries, and the calls to the
//! plugin beneath it: what the functions NumPy calls ([`crate::raw_block`],
//! [`crate::raw_padded`]) share, and the draining of the caches of freed blocks
//! when the cache is turned off.
//!
//! # The block header
//! NumPy's `realloc(ctx, ptr, new_size)` does not pass the old size and its
//! `free(ctx, ptr, size)` may pass a wrong one, while a memplug plugin is
//! owed the exact size on both. So every block carries a header of
//! [`Bridge::header`] bytes in front of the pointer NumPy gets: a multiple
//! of the handler's alignment and at least 16, so the pointer keeps the
//! handler's alignment. Its last two words hold the size NumPy asked for
//! and a check word (`cookie`) derived from the pointer, the size and the
//! bridge: a pointer this bridge did not make (or already freed: the check
//! word is cleared on free) is recognised and never handed to the plugin.
//!
//! ```text
//!   base (from the plugin)          ptr (to NumPy)
//!   |<------------ header ------------>|<------- size bytes ------->
//!   [ padding ... | size | cookie     ][ array data ...            ]
//! ```
//!
//! Imports [`crate::bridge`], [`crate::lines`].

use crate::bridge::Bridge;
use crate::lines::Line;
use memplug::DirectCalls;
use std::ffi::c_void;
use std::ptr::NonNull;

/// The check word stored beside a block's size: the pointer, the size and
/// the bridge's [salt](Bridge::salt) mixed.
#[inline]
pub fn cookie(bridge: &Bridge, ptr: *mut u8, size: usize) -> usize {
    (ptr as usize) ^ size ^ bridge.salt
}

/// Write the header in front of `ptr` (a block's data pointer); `ptr`.
///
/// # Safety
/// The two words before `ptr` are the block's, writable; `ptr` is 8-aligned.
#[inline]
pub unsafe fn finish_at(bridge: &Bridge, ptr: *mut u8, size: usize) -> *mut c_void {
    let words = ptr.cast::<usize>();
    // SAFETY: the caller's contract.
    unsafe {
        words.sub(2).write(size);
        words.sub(1).write(cookie(bridge, ptr, size));
    }
    ptr.cast()
}

/// Write the header of a block the plugin just returned; the pointer for
/// NumPy.
///
/// # Safety
/// `base` is a live block of at least `bridge.header` bytes from the
/// bridge's handler.
#[inline]
pub unsafe fn finish(bridge: &Bridge, base: NonNull<u8>, size: usize) -> *mut c_void {
    // SAFETY: `header >= 16` bytes lie in the block before `ptr`, and both
    // words are aligned (header is a multiple of 16 and base is 16-aligned,
    // or at least 8-aligned for handlers declaring alignment 8).
    unsafe { finish_at(bridge, base.as_ptr().add(bridge.header), size) }
}

/// Read the header in front of a pointer NumPy handed back: the size, or
/// `None` if the check word does not match (not ours, or freed already).
///
/// # Safety
/// The two words before `ptr` are readable: NumPy passes back pointers from
/// this handler's `malloc`/`calloc`/`realloc` (an array's data is freed by
/// the handler that made it).
#[inline]
pub unsafe fn read_header(bridge: &Bridge, ptr: *mut u8) -> Option<usize> {
    // SAFETY: the caller's contract.
    let (size, check) = unsafe {
        let words = ptr.cast::<usize>();
        (words.sub(2).read(), words.sub(1).read())
    };
    (check == cookie(bridge, ptr, size)).then_some(size)
}

/// Whether the check word in front of `ptr` says it is a live block of
/// this bridge asked with `size` bytes: the [`read_header`] of a caller
/// that knows the size already (NumPy's `free`), one load, no size read.
/// (The check word mixes the size in, so it matches only if the header's
/// size is `size`.)
///
/// # Safety
/// As for [`read_header`].
#[inline]
pub unsafe fn header_says(bridge: &Bridge, ptr: *mut u8, size: usize) -> bool {
    // SAFETY: the caller's contract.
    let check = unsafe { ptr.cast::<usize>().sub(1).read() };
    check == cookie(bridge, ptr, size)
}

/// The bridge's [direct calls](Bridge::direct), for the functions
/// installed only on bridges that have them (`DIRECT`): no test.
///
/// # Safety
/// `DIRECT` is false, or `bridge.direct` is `Some`.
#[inline(always)]
pub unsafe fn direct_calls<const DIRECT: bool>(bridge: &Bridge) -> Option<DirectCalls> {
    if DIRECT {
        // SAFETY: the caller's contract. (`direct` never changes: bridges
        // are shared as `&'static Bridge`, and the field is not a cell.)
        Some(unsafe { bridge.direct.unwrap_unchecked() })
    } else {
        bridge.direct
    }
}

/// A block of `total` bytes from the bridge's plugin: straight from its
/// `malloc` when the bridge has the [direct calls](Bridge::direct).
///
/// # Safety
/// As for [`direct_calls`].
#[inline(always)]
pub unsafe fn plugin_alloc<const DIRECT: bool>(bridge: &Bridge, total: usize) -> Option<NonNull<u8>> {
    // SAFETY: the caller's contract.
    match unsafe { direct_calls::<DIRECT>(bridge) } {
        // SAFETY: `total > 0`: every block has the header in front.
        Some(calls) => NonNull::new(unsafe { calls.malloc(total) }),
        None => handler_alloc(bridge, total),
    }
}

/// [`plugin_alloc`] through the handler (its lock, its count): out of
/// line, so that the direct path keeps no room for its result.
#[inline(never)]
fn handler_alloc(bridge: &Bridge, total: usize) -> Option<NonNull<u8>> {
    bridge.handler.alloc(total).ok()
}

/// Give a block back to the bridge's plugin.
///
/// # Safety
/// `base` is a live block of `total` bytes from [`plugin_alloc`] (or the
/// handler's `alloc`/`realloc` with that size), not used again; and as for
/// [`direct_calls`].
#[inline(always)]
pub unsafe fn plugin_free<const DIRECT: bool>(bridge: &Bridge, base: NonNull<u8>, total: usize) {
    // SAFETY: the caller's contract.
    match unsafe { direct_calls::<DIRECT>(bridge) } {
        // SAFETY: the caller's contract; `total > 0` (the header).
        Some(calls) => unsafe { calls.free(base, total) },
        // SAFETY: the caller's contract.
        None => unsafe { handler_free(bridge, base, total) },
    }
}

/// [`plugin_free`] through the handler (its lock, its count), out of line.
/// The cold paths of `free` are `extern "C"`, as NumPy's `free` is, so
/// that it can jump to them (a call in last place to a function of
/// another calling convention stays a call, with a stack frame around it).
///
/// # Safety
/// As for [`plugin_free`].
#[inline(never)]
unsafe extern "C" fn handler_free(bridge: &Bridge, base: NonNull<u8>, total: usize) {
    // SAFETY: the caller's contract.
    unsafe { bridge.handler.free(base, total) }
}

/// Free the blocks cached in `line` through the bridge's handler.
///
/// # Safety
/// The calling thread owns `line` (it is [`crate::lines::Counts::mine`]'s,
/// or claimed by [`crate::lines::Counts::with_unowned_caches`]), which is
/// one of `bridge`'s lines.
pub unsafe fn drain_line(bridge: &Bridge, line: &Line) {
    // SAFETY: the caller owns the line; every cached block is a block of
    // the bridge's handler allocated as `header + room` bytes (a small
    // block's class, the spare's exact size), no one's any more.
    unsafe {
        line.cache.drain(|room, ptr| {
            bridge.handler.free(NonNull::new_unchecked(ptr.as_ptr().sub(bridge.header)), bridge.header + room)
        })
    };
}

/// Free the blocks cached by this thread and by threads that ended.
/// Threads alive keep theirs until their next free through the bridge
/// (when the cache is off) or their end.
pub fn drain_caches(bridge: &'static Bridge) {
    if let Some(line) = bridge.counts.mine() {
        // SAFETY: `mine` is this thread's own line.
        unsafe { drain_line(bridge, line) };
    }
    // SAFETY: each line is claimed by this thread while it is drained.
    bridge.counts.with_unowned_caches(|line| unsafe { drain_line(bridge, line) });
}

/// Turn the cache of freed blocks of a bridge on or off; whether it was
/// on. Turning it off frees the blocks cached by this thread and by
/// threads that ended at once, and those of other live threads at their
/// next free of a block of at most 2 MiB (the spares' bound) through this
/// bridge. `Err` with the reason for a bridge that never caches.
pub fn set_caching(bridge: &'static Bridge, on: bool) -> Result<bool, String> {
    let was = bridge.switch_cache(on)?;
    if !on {
        drain_caches(bridge);
    }
    Ok(was)
}

/// Let the bridge's instance go: the host destroys it (for `shm`, unmaps
/// the segment and, with `unlink=1`, removes its name) once its last block
/// is freed — at once if none is live. Blocks still live free as before; a
/// new allocation succeeds while any block lives and fails afterwards. The
/// cache of freed blocks is turned off first (its blocks hold the instance).
/// `false` if the bridge has no instance (a registered handler lives for
/// the process) or was closed already.
pub fn close(bridge: &'static Bridge) -> bool {
    let _ = set_caching(bridge, false);
    bridge.take_instance()
}
