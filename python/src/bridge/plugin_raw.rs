//! The calls into the plugin beneath the functions NumPy calls
//! ([`super::alloc_raw`], [`super::free_raw`]): straight through the
//! bridge's copy of the plugin's `malloc` and `free` when it has one, else
//! through the handler; and the giving back of the caches of freed blocks
//! to the plugin, when the cache is turned off or the bridge closed.

use super::state::Bridge;
use crate::counters::thread_lines::Line;
use memplug::DirectCalls;
use std::ptr::NonNull;

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
/// The calling thread owns `line` (it is [`Counts::mine`](crate::counters::thread_lines::Counts::mine)'s,
/// or claimed by [`Counts::with_unowned_caches`](crate::counters::thread_lines::Counts::with_unowned_caches)), which is
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
