//! The functions NumPy calls on a bridge to allocate (`malloc`, `calloc`,
//! `realloc`; [`super::free_raw`] has `free`): the hot path of every NumPy
//! allocation, and the unsafe code it needs, over the block header of
//! [`crate::block::header_raw`] and the calls of [`super::plugin_raw`].
//! (Bridges of shareable handlers use [`super::padded_raw`]'s.)
//!
//! # The cache of freed blocks
//! For a bridge that may cache ([`Bridge::rounds`]: a thread-safe handler
//! reporting no statistics), a request of at most
//! [`MAX_CACHED`] bytes is given the room of its size class
//! ([`crate::block::classes`]), and a freed small block goes to the freeing
//! thread's cache (when on, and not full) instead of the plugin; the next
//! request of its class on that thread takes it back. A freed block of up
//! to [`MAX_SPARE`] bytes is offered to the thread's two spares
//! ([`crate::block::cache_raw`] says which it keeps), taken back by a request of
//! exactly its size. The plugin is always called with the size it allocated the block
//! with: `header +` the class's room, or the spare's size. The bridge's
//! counters count every NumPy call either way.
//!
//! # The shape of the hot path
//! NumPy's `np.empty` costs about 2 700 instructions; the bridge's share is
//! measured in instructions (`python/bench/instructions.sh`), and kept
//! small by shape more than by arithmetic: the plugin is called through the
//! bridge's own copy of its `malloc`/`free` ([`Bridge::direct`]), by
//! functions installed only on bridges that have one ([`direct_malloc`],
//! [`direct_free`](super::free_raw::direct_free): no test of it per call); a program's first thread
//! counts in the [first line](crate::counters::thread_lines::FIRST_LINE), found with one
//! comparison (no hash of the thread's id); whatever is rare (NULL, a
//! foreign pointer, a wrong size, another thread's line, a crowded line,
//! the cache's misses) is a separate function called last, so `free`'s
//! common path needs no stack frame and ends by jumping into the plugin;
//! and `malloc` counts after the plugin's call, so that only the bridge
//! and the size live across it. The cache's own paths are shorter still
//! (about 27 instructions for `malloc`, 31 for `free`, measured with
//! `objdump` on x86-64): "small, and the cache on?" is one comparison with
//! [`Bridge::caches`]'s limit; a list's depth is a byte, changed by one
//! add to memory; `free` checks the header with the size NumPy passed
//! (the check word mixes it in: one load, and a wrong size goes the
//! foreign pointer's cold way, which tells the two apart); and a cached
//! block leaves the peak's headroom alone ([`crate::counters::counting`]), so
//! neither path can call anything but its misses' function.

use super::plugin_raw::plugin_alloc;
use super::state::Bridge;
use crate::block::cache_raw::MAX_SPARE;
use crate::block::classes::{MAX_CACHED, class_of};
use crate::block::header_raw as header;
use crate::counters::thread_lines::{Counts, Line};
use std::ffi::c_void;
use std::ptr::NonNull;

// The functions NumPy calls. A panic must not unwind into NumPy; nothing on
// these paths panics (allocation results are matched, sizes are checked),
// and the cold paths that touch Python catch their own.

/// NumPy's `malloc(ctx, size)`.
///
/// # Safety
/// `ctx` is the bridge a capsule of [`new_capsule`](crate::numpy::capsule_raw::new_capsule) holds.
pub unsafe extern "C" fn bridge_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the caller's contract; `false` asks nothing of the bridge.
    unsafe { malloc_impl::<false>(ctx, size) }
}

/// [`bridge_malloc`] for a bridge with [direct calls](Bridge::direct):
/// [`new_capsule`](crate::numpy::capsule_raw::new_capsule) installs it on those only.
///
/// # Safety
/// As for [`bridge_malloc`], and `ctx`'s `direct` is `Some`.
pub unsafe extern "C" fn direct_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { malloc_impl::<true>(ctx, size) }
}

/// NumPy's `malloc`, for both kinds of bridge: a test and a jump, to the
/// cache or to the plugin (no registers to keep: the small path is not
/// slowed by the large one's needs).
///
/// # Safety
/// As for [`bridge_malloc`], and as for [`direct_calls`](super::plugin_raw::direct_calls).
#[inline(always)]
unsafe fn malloc_impl<const DIRECT: bool>(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `ctx` is the leaked bridge `new_capsule` stored.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    if bridge.caches(size) {
        // SAFETY: `caches` holds only for sizes the size classes serve
        // (the bridge's limit is 0 or `MAX_CACHED + 1`): said, so that the
        // class's lookup needs no bounds check.
        unsafe { std::hint::assert_unchecked(size <= MAX_CACHED) };
        return malloc_cached(bridge, size);
    }
    // SAFETY: the caller's contract.
    unsafe { malloc_large::<DIRECT>(bridge, size) }
}

/// `malloc` of a block the small-block lists do not serve: this thread's
/// spare of exactly this size if it has one (and the cache is on), else from the
/// plugin.
///
/// # Safety
/// As for [`direct_calls`](super::plugin_raw::direct_calls).
#[inline(never)]
unsafe extern "C" fn malloc_large<const DIRECT: bool>(bridge: &'static Bridge, size: usize) -> *mut c_void {
    if size <= MAX_SPARE
        && bridge.caching()
        && let Some(line) = bridge.counts.at_home()
        // SAFETY: `line` is this thread's own line (`at_home`).
        && let Some(ptr) = unsafe { line.cache.take_spare(size) }
    {
        // SAFETY: the spare is a block of this bridge that was asked with
        // `size` bytes (room for them, its header writable), no one's.
        let ptr = unsafe { header::write(bridge.salt, ptr.as_ptr(), size) };
        if Counts::count_alloc_in(line, size) {
            return check_peak_then(bridge, line, ptr);
        }
        return ptr;
    }
    // SAFETY: the caller's contract.
    unsafe { malloc_from_plugin::<DIRECT>(bridge, size) }
}

/// `malloc` of a small block while the cache is on: this thread's cached
/// block of its class, if any. A function of its own, jumped to, so that
/// `malloc`'s path to the plugin is short and straight (its time moved
/// with where its code lay while it was spread over both). A block from
/// the cache leaves the headroom as it is (see [`crate::counters::counting`]), so
/// its common path checks no peak, makes no call and keeps no registers.
#[inline(never)]
extern "C" fn malloc_cached(bridge: &'static Bridge, size: usize) -> *mut c_void {
    if let Some(line) = bridge.counts.at_home()
        // SAFETY: `line` is this thread's own line (`at_home`).
        && let Some(ptr) = unsafe { line.cache.pop(class_of(size)) }
    {
        // SAFETY: a cached block: its header is writable and it has room
        // for its class, which `size` fits.
        let ptr = unsafe { header::write(bridge.salt, ptr.as_ptr(), size) };
        Counts::count_cached_alloc(line, size);
        return ptr;
    }
    malloc_small(bridge, size)
}

/// The check of the peak an allocation made due, then `ptr`: a call in
/// last place for [`malloc_large`]. (Returned through `black_box`: a
/// function the compiler sees return its argument is not jumped to but
/// called, with the argument kept in a register saved on the stack, which
/// gave its caller a stack frame.)
#[cold]
#[inline(never)]
extern "C" fn check_peak_then(bridge: &'static Bridge, line: &Line, ptr: *mut c_void) -> *mut c_void {
    bridge.counts.peak_check_due(line);
    std::hint::black_box(ptr)
}

/// A block from the plugin, counted, with its header written; NULL if the
/// plugin has none. Counted after the call: only the bridge and the size
/// live across it.
///
/// # Safety
/// As for [`direct_calls`](super::plugin_raw::direct_calls).
#[inline(always)]
unsafe fn malloc_from_plugin<const DIRECT: bool>(bridge: &'static Bridge, size: usize) -> *mut c_void {
    let Some(total) = bridge.plugin_size(size) else { return std::ptr::null_mut() };
    // SAFETY: the caller's contract.
    let Some(base) = (unsafe { plugin_alloc::<DIRECT>(bridge, total) }) else { return std::ptr::null_mut() };
    match bridge.counts.at_home() {
        Some(line) => bridge.counts.alloc_in(line, size),
        None => count_alloc_away(bridge, size),
    }
    // SAFETY: `base` is a fresh block of `total` bytes.
    unsafe { header::write_after(bridge.salt, bridge.header, base, size) }
}

/// Count an allocation of a thread whose line is neither the first nor at
/// its home (or that has none, or must take a mark in).
#[cold]
#[inline(never)]
fn count_alloc_away(bridge: &'static Bridge, size: usize) {
    bridge.counts.alloc(bridge.counts.mine(), size);
}

/// `malloc` of a small block while the cache is on, when this thread's
/// line at its usual place had none: the cache of its line elsewhere (if
/// it has one), else a block from the plugin.
#[inline(never)]
extern "C" fn malloc_small(bridge: &'static Bridge, size: usize) -> *mut c_void {
    if let Some(l) = bridge.counts.mine()
        // SAFETY: `l` is this thread's own line (`mine`).
        && let Some(ptr) = unsafe { l.cache.pop(class_of(size)) }
    {
        Counts::count_cached_alloc(l, size);
        // SAFETY: a cached block: its header is writable and it has room
        // for its class, which `size` fits.
        return unsafe { header::write(bridge.salt, ptr.as_ptr(), size) };
    }
    // SAFETY: `false` asks nothing of the bridge.
    unsafe { malloc_from_plugin::<false>(bridge, size) }
}

/// NumPy's `calloc(ctx, nelem, elsize)`.
///
/// # Safety
/// As for the `malloc` above.
pub unsafe extern "C" fn bridge_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let Some(size) = nelem.checked_mul(elsize) else { return std::ptr::null_mut() };
    if bridge.caches(size) {
        // SAFETY: forwarded, then the `size` bytes it returned are zeroed.
        let ptr = unsafe { bridge_malloc(ctx, size) };
        if !ptr.is_null() {
            // SAFETY: `ptr` is a block of at least `size` bytes, NumPy's now.
            unsafe { ptr.cast::<u8>().write_bytes(0, size) };
        }
        return ptr;
    }
    let Some(total) = bridge.plugin_size(size) else { return std::ptr::null_mut() };
    match bridge.handler.alloc_zeroed(total, 1) {
        Ok(base) => {
            bridge.counts.alloc(bridge.counts.mine(), size);
            // SAFETY: `base` is a fresh block of `total` bytes.
            unsafe { header::write_after(bridge.salt, bridge.header, base, size) }
        }
        Err(_) => std::ptr::null_mut(),
    }
}

/// NumPy's `realloc(ctx, ptr, new_size)`.
///
/// # Safety
/// As for the `malloc` above; `ptr` is NULL or a live block of this
/// bridge (anything else is recognised by its check word, if readable).
pub unsafe extern "C" fn bridge_realloc(ctx: *mut c_void, ptr: *mut c_void, new_size: usize) -> *mut c_void {
    if ptr.is_null() {
        // SAFETY: forwarded: `realloc(NULL, n)` is `malloc(n)`.
        return unsafe { bridge_malloc(ctx, new_size) };
    }
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy reallocs only blocks this handler made.
    let Some(old_size) = (unsafe { header::read(bridge.salt, ptr) }) else {
        bridge.foreign_pointer("realloc");
        return std::ptr::null_mut();
    };
    if bridge.rounds && old_size <= MAX_CACHED && new_size <= MAX_CACHED && class_of(old_size) == class_of(new_size) {
        // The block has the room of its class already.
        bridge.counts.realloc(old_size, new_size);
        // SAFETY: the header matched: the block is live, NumPy's.
        return unsafe { header::write(bridge.salt, ptr, new_size) };
    }
    let (Some(old_total), Some(total)) = (bridge.plugin_size(old_size), bridge.plugin_size(new_size)) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the header matched, so `ptr - header` is a live block of this
    // handler of `old_total` bytes.
    let result = unsafe {
        let base = NonNull::new_unchecked(ptr.sub(bridge.header));
        bridge.handler.realloc(base, old_total, total)
    };
    match result {
        Ok(base) => {
            bridge.counts.realloc(old_size, new_size);
            // SAFETY: `base` is the resized block of `total` bytes (the old
            // one is gone, its header moved with the contents).
            unsafe { header::write_after(bridge.salt, bridge.header, base, new_size) }
        }
        // The old block is untouched, as C's realloc promises.
        Err(_) => std::ptr::null_mut(),
    }
}
