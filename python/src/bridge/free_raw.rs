//! The function NumPy calls to free a bridge's block: the other half of
//! the hot path of [`super::alloc_raw`] (whose docs describe the cache of
//! freed blocks and the path's shape), and the unsafe code it needs. A
//! freed block goes to this thread's small-block list of its class, to
//! one of its spares, or to the plugin.

use super::plugin_raw::{drain_line, plugin_free};
use super::state::Bridge;
use crate::block::cache_raw::MAX_SPARE;
use crate::block::classes::{MAX_CACHED, class_of, rounded};
use crate::block::header_raw as header;
use crate::counters::thread_lines::{Counts, Line};
use std::ffi::c_void;
use std::ptr::NonNull;

/// NumPy's `free(ctx, ptr, size)`. Everything but the common path is out
/// of line and called last, so that path needs no stack frame and ends by
/// jumping to the plugin's `free`.
///
/// # Safety
/// As for [`super::alloc_raw::bridge_realloc`].
pub unsafe extern "C" fn bridge_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller's contract; `false` asks nothing of the bridge.
    unsafe { free_impl::<false>(ctx, ptr, size) }
}

/// [`bridge_free`] for a bridge with [direct calls](Bridge::direct):
/// [`new_capsule`](crate::numpy::capsule_raw::new_capsule) installs it on those only.
///
/// # Safety
/// As for [`bridge_free`], and `ctx`'s `direct` is `Some`.
pub unsafe extern "C" fn direct_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller's contract.
    unsafe { free_impl::<true>(ctx, ptr, size) }
}

/// NumPy's `free`, for both kinds of bridge.
///
/// # Safety
/// As for [`bridge_free`], and as for [`direct_calls`](super::plugin_raw::direct_calls).
#[inline(always)]
unsafe fn free_impl<const DIRECT: bool>(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    if ptr.is_null() {
        return free_null(bridge);
    }
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy frees only blocks this handler made.
    if !unsafe { header::says(bridge.salt, ptr, size) } {
        // SAFETY: forwarded.
        return unsafe { free_unmatched(bridge, ptr, size) };
    }
    let real = size;
    match bridge.counts.sole_first() {
        // SAFETY: forwarded: the header matched; `line` is this thread's,
        // not crowded; the caller's contract for `DIRECT`.
        Some(line) => unsafe { free_counted::<DIRECT>(bridge, Some(line), ptr, real, false) },
        // SAFETY: forwarded: the header matched; the caller's contract for
        // `DIRECT`.
        None => unsafe { free_other::<DIRECT>(bridge, ptr, real) },
    }
}

/// `free` by a thread whose line is not the [first](crate::counters::thread_lines::FIRST_LINE)
/// or is crowded (other threads count too: the same, with the headroom
/// capped, see [`crate::counters::counting`]), or must take a mark in. (A version
/// that found the line without a call, a leaf ending in a jump to the
/// plugin, saved 13 instructions here but measured slower on the
/// one-thread benchmark: code placement, see BENCHMARKS.md.)
///
/// # Safety
/// As for [`free_counted`], but for the line; and as for [`direct_calls`](super::plugin_raw::direct_calls)
/// (`DIRECT` is not used: the direct calls are tested).
#[inline(never)]
unsafe extern "C" fn free_other<const DIRECT: bool>(bridge: &'static Bridge, ptr: *mut u8, real: usize) {
    let line = bridge.counts.mine();
    // SAFETY: forwarded; `mine` is this thread's line.
    unsafe { free_counted::<false>(bridge, line, ptr, real, line.is_some_and(Line::crowded)) }
}

/// `free` by a thread whose line is elsewhere (or that has none, or must
/// take a mark in).
///
/// # Safety
/// As for [`free_counted`], but for the line.
#[cold]
#[inline(never)]
unsafe extern "C" fn free_away(bridge: &'static Bridge, ptr: *mut u8, real: usize) {
    let line = bridge.counts.mine();
    // SAFETY: forwarded; `mine` is this thread's line.
    unsafe { free_counted::<false>(bridge, line, ptr, real, line.is_some_and(Line::crowded)) }
}

/// `free` of a block whose check word does not say `passed` bytes: a
/// pointer this bridge did not make (or freed already), or a block NumPy
/// passed the wrong size for.
///
/// # Safety
/// As for [`bridge_free`], for `ptr`.
#[cold]
#[inline(never)]
unsafe extern "C" fn free_unmatched(bridge: &'static Bridge, ptr: *mut u8, passed: usize) {
    // SAFETY: the caller's contract.
    match unsafe { header::read(bridge.salt, ptr) } {
        // SAFETY: forwarded: the header matched.
        Some(real) => unsafe { free_mismatched(bridge, ptr, real, passed) },
        None => bridge.foreign_pointer("free"),
    }
}

/// NumPy frees NULL (argsort's index buffer, ...); plugins never see it.
#[cold]
#[inline(never)]
extern "C" fn free_null(bridge: &'static Bridge) {
    bridge.counts.null_free();
}

/// `free` of a block NumPy passed the wrong size for: recorded, then freed
/// as usual (with its real size).
///
/// # Safety
/// As for [`free_counted`], but for the line.
#[cold]
#[inline(never)]
unsafe extern "C" fn free_mismatched(bridge: &'static Bridge, ptr: *mut u8, real: usize, passed: usize) {
    bridge.numpy_size_mismatch(real, passed);
    // SAFETY: forwarded: the header matched.
    unsafe { free_away(bridge, ptr, real) }
}

/// Count the free of the block at `ptr` and give it up: to the cache or
/// to the plugin. `crowded` is the line's [`Line::crowded`].
///
/// # Safety
/// The block's header matched (it is a live block of this bridge of `real`
/// bytes asked, which NumPy is done with); `line` is this thread's own
/// line, if any; and as for [`direct_calls`](super::plugin_raw::direct_calls).
#[inline(always)]
unsafe fn free_counted<const DIRECT: bool>(
    bridge: &'static Bridge,
    line: Option<&Line>,
    ptr: *mut u8,
    real: usize,
    crowded: bool,
) {
    match line {
        // Counted first: its loads overlap with the call below.
        Some(l) => Counts::count_free_in(l, real),
        None => bridge.counts.free(None, real),
    }
    if let Some(l) = line
        && bridge.caches(real)
        // SAFETY: as in `alloc_raw::malloc_impl` (`caches` holds only for
        // sizes the size classes serve).
        && unsafe { std::hint::assert_unchecked(real <= MAX_CACHED); true }
        // SAFETY: `l` is this thread's own line; the header matched, so
        // `ptr` is a live block of this bridge, allocated with the room of
        // its class (a bridge that caches rounds), and NumPy is done with it.
        && unsafe { l.cache.push(class_of(real), NonNull::new_unchecked(ptr)) }
    {
        // Its bytes stay in the headroom's count (see `crate::counters::counting`).
        return;
    }
    if let Some(l) = line {
        l.give_back(real as u64, crowded);
    }
    if real <= MAX_CACHED {
        if bridge.rounds {
            // SAFETY: forwarded: the caller's contract; a bridge that
            // rounds made the block with the room of its class.
            return unsafe { free_small(bridge, line, ptr, real) };
        }
    } else if real <= MAX_SPARE && bridge.rounds {
        // SAFETY: forwarded: the caller's contract.
        return unsafe { free_spare::<DIRECT>(bridge, line, ptr, real) };
    }
    // SAFETY: the header matched: `ptr - header` is a live block of
    // `plugin_size(real)` bytes (which did not overflow when it was made);
    // the caller's contract for `DIRECT`.
    unsafe { release::<DIRECT>(bridge, ptr, bridge.header + real) }
}

/// Give NumPy's block at `ptr` to the plugin: `total` bytes from
/// `ptr - header`. Clearing the check word first makes a second free of the
/// same pointer recognisable.
///
/// # Safety
/// `ptr - header` is a live block of the bridge of `total` bytes, NumPy's
/// no more; and as for [`direct_calls`](super::plugin_raw::direct_calls).
#[inline(always)]
unsafe fn release<const DIRECT: bool>(bridge: &Bridge, ptr: *mut u8, total: usize) {
    // SAFETY: the caller's contract; the check word is in the header.
    unsafe {
        header::clear(ptr);
        plugin_free::<DIRECT>(bridge, NonNull::new_unchecked(ptr.sub(bridge.header)), total);
    }
}

/// The rest of `free` for a small block of a bridge that rounds, when the
/// cache did not take it (off, or full): to the plugin — after this
/// thread's cached blocks, if the cache was turned off.
///
/// # Safety
/// `line` is this thread's own line, if any; the block at `ptr` is live, of
/// `real` bytes asked, made by this bridge with the room of its class, and
/// NumPy is done with it.
#[inline(never)]
unsafe extern "C" fn free_small(bridge: &Bridge, line: Option<&Line>, ptr: *mut u8, real: usize) {
    if let Some(line) = line
        && !bridge.caching()
        && !line.cache.is_empty()
    {
        // The cache was turned off: give back what this thread kept.
        // SAFETY: `line` is this thread's own line.
        unsafe { drain_line(bridge, line) };
    }
    // SAFETY: the caller's contract: the block was made with the room of
    // its class.
    unsafe { release::<false>(bridge, ptr, bridge.header + rounded(real)) }
}

/// The rest of `free` for a block of more than [`MAX_CACHED`] and at most
/// [`MAX_SPARE`] bytes of a bridge that rounds: offered to this thread's
/// spares (while the cache is on), and what they give back goes to the
/// plugin; with the cache off, the block goes to the plugin, after this
/// thread's cached blocks if it has any.
///
/// # Safety
/// `line` is this thread's own line, if any; the block at `ptr` is live, of
/// `real` bytes asked (and room for as many), made by this bridge, and
/// NumPy is done with it; and as for [`direct_calls`](super::plugin_raw::direct_calls).
#[inline(never)]
unsafe extern "C" fn free_spare<const DIRECT: bool>(bridge: &Bridge, line: Option<&Line>, ptr: *mut u8, real: usize) {
    if let Some(line) = line {
        if bridge.caching() {
            // SAFETY: `line` is this thread's own; the block is no one's,
            // with its header in front and room for `real` bytes.
            let out = unsafe { line.cache.offer_spare(NonNull::new_unchecked(ptr), real) };
            if let Some((old, old_size)) = out {
                // SAFETY: this block or a spare, a block of this bridge
                // asked with `old_size` bytes, so `header + old_size` from
                // its header; no one's. The caller's contract for `DIRECT`.
                unsafe {
                    plugin_free::<DIRECT>(
                        bridge,
                        NonNull::new_unchecked(old.as_ptr().sub(bridge.header)),
                        bridge.header + old_size,
                    )
                };
            }
            return;
        }
        if !line.cache.is_empty() {
            // The cache was turned off: give back what this thread kept.
            // SAFETY: `line` is this thread's own line.
            unsafe { drain_line(bridge, line) };
        }
    }
    // SAFETY: the caller's contract: the block has room for `real` bytes
    // (a bridge that rounds gives a large request its size).
    unsafe { release::<DIRECT>(bridge, ptr, bridge.header + real) }
}
