//! The functions NumPy calls on a bridge: the hot path of every NumPy
//! allocation, and the unsafe code it needs, over the block header of
//! [`crate::raw_plugin`]. (Bridges of shareable handlers use
//! [`crate::raw_padded`]'s.)
//!
//! # The small-block cache
//! For a bridge that may cache ([`Bridge::rounds`]: a thread-safe handler
//! reporting no statistics), a request of at most
//! [`MAX_CACHED`] bytes is given the room of its size class
//! ([`crate::raw_cache`]), and a freed small block goes to the freeing
//! thread's cache (when on, and not full) instead of the plugin; the next
//! request of its class on that thread takes it back. The plugin is always
//! called with the size it allocated the block with: `header +` the class's
//! room. The bridge's counters count every NumPy call either way.
//!
//! # The shape of the hot path
//! NumPy's `np.empty` costs about 2 700 instructions; the bridge's share is
//! measured in instructions (`python/bench/instructions.sh`), and kept
//! small by shape more than by arithmetic: the plugin is called through the
//! bridge's own copy of its `malloc`/`free` ([`Bridge::direct`]), by
//! functions installed only on bridges that have one ([`direct_malloc`],
//! [`direct_free`]: no test of it per call); a program's first thread
//! counts in the [first line](crate::lines::FIRST_LINE), found with one
//! comparison (no hash of the thread's id); whatever is rare (NULL, a
//! foreign pointer, a wrong size, another thread's line, a crowded line,
//! the cache's misses) is a separate function called last, so `free`'s
//! common path needs no stack frame and ends by jumping into the plugin;
//! and `malloc` counts after the plugin's call, so that only the bridge
//! and the size live across it.
//!
//! Imports [`crate::bridge`], [`crate::lines`], [`crate::raw_cache`],
//! [`crate::raw_plugin`], [`crate::raw_padded`].

use crate::bridge::Bridge;
use crate::lines::{Counts, Line};
use crate::raw_cache::{MAX_CACHED, class_of};
use crate::raw_plugin::{drain_line, finish, finish_at, plugin_alloc, plugin_free, read_header};
use std::ffi::c_void;
use std::ptr::NonNull;

/// The size NumPy asked for of the live block at `ptr`, from its header;
/// `None` if the check word does not match.
///
/// # Safety
/// `ptr` was returned by `bridge`'s `malloc`, `calloc` or `realloc` and has
/// not been freed.
pub unsafe fn block_size(bridge: &Bridge, ptr: NonNull<u8>) -> Option<usize> {
    if bridge.padded {
        // SAFETY: the caller's contract, for a padded bridge's block.
        return unsafe { crate::raw_padded::block_size(bridge, ptr) };
    }
    // SAFETY: the caller's contract is `read_header`'s.
    unsafe { read_header(bridge, ptr.as_ptr()) }
}

// The functions NumPy calls. A panic must not unwind into NumPy; nothing on
// these paths panics (allocation results are matched, sizes are checked),
// and the cold paths that touch Python catch their own.

/// NumPy's `malloc(ctx, size)`.
///
/// # Safety
/// `ctx` is the bridge a capsule of [`crate::raw_numpy::new_capsule`] holds.
pub unsafe extern "C" fn bridge_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the caller's contract; `false` asks nothing of the bridge.
    unsafe { malloc_impl::<false>(ctx, size) }
}

/// [`bridge_malloc`] for a bridge with [direct calls](Bridge::direct):
/// [`crate::raw_numpy::new_capsule`] installs it on those only.
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
/// As for [`bridge_malloc`], and as for [`direct_calls`](crate::raw_plugin::direct_calls).
#[inline(always)]
unsafe fn malloc_impl<const DIRECT: bool>(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `ctx` is the leaked bridge `new_capsule` stored.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    if size <= MAX_CACHED && bridge.caching() {
        return malloc_cached(bridge, size);
    }
    // SAFETY: the caller's contract.
    unsafe { malloc_large::<DIRECT>(bridge, size) }
}

/// `malloc` of a block the cache does not serve: from the plugin.
///
/// # Safety
/// As for [`direct_calls`](crate::raw_plugin::direct_calls).
#[inline(never)]
unsafe extern "C" fn malloc_large<const DIRECT: bool>(bridge: &'static Bridge, size: usize) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { malloc_from_plugin::<DIRECT>(bridge, size) }
}

/// `malloc` of a small block while the cache is on: this thread's cached
/// block of its class, if any. A function of its own, jumped to, so that
/// `malloc`'s path to the plugin is short and straight (its time moved
/// with where its code lay while it was spread over both). Its calls are
/// all in last place (the header is written before the count, and a due
/// check of the peak returns the pointer), so its common path keeps no
/// registers.
#[inline(never)]
extern "C" fn malloc_cached(bridge: &'static Bridge, size: usize) -> *mut c_void {
    if let Some(line) = bridge.counts.at_home()
        // SAFETY: `line` is this thread's own line (`at_home`).
        && let Some(ptr) = unsafe { line.cache.pop(class_of(size)) }
    {
        // SAFETY: a cached block: its header is writable and it has room
        // for its class, which `size` fits.
        let ptr = unsafe { finish_at(bridge, ptr.as_ptr(), size) };
        if Counts::count_alloc_in(line, size) {
            return check_peak_then(bridge, line, ptr);
        }
        return ptr;
    }
    malloc_small(bridge, size)
}

/// The check of the peak an allocation made due, then `ptr`: a call in
/// last place for [`malloc_cached`].
#[cold]
#[inline(never)]
extern "C" fn check_peak_then(bridge: &'static Bridge, line: &Line, ptr: *mut c_void) -> *mut c_void {
    bridge.counts.peak_check_due(line);
    ptr
}

/// A block from the plugin, counted, with its header written; NULL if the
/// plugin has none. Counted after the call: only the bridge and the size
/// live across it.
///
/// # Safety
/// As for [`direct_calls`](crate::raw_plugin::direct_calls).
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
    unsafe { finish(bridge, base, size) }
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
fn malloc_small(bridge: &'static Bridge, size: usize) -> *mut c_void {
    if let line @ Some(l) = bridge.counts.mine()
        // SAFETY: `l` is this thread's own line (`mine`).
        && let Some(ptr) = unsafe { l.cache.pop(class_of(size)) }
    {
        bridge.counts.alloc(line, size);
        // SAFETY: a cached block: its header is writable and it has room
        // for its class, which `size` fits.
        return unsafe { finish_at(bridge, ptr.as_ptr(), size) };
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
    if size <= MAX_CACHED && bridge.caching() {
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
pub unsafe extern "C" fn bridge_realloc(ctx: *mut c_void, ptr: *mut c_void, new_size: usize) -> *mut c_void {
    if ptr.is_null() {
        // SAFETY: forwarded: `realloc(NULL, n)` is `malloc(n)`.
        return unsafe { bridge_malloc(ctx, new_size) };
    }
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy reallocs only blocks this handler made.
    let Some(old_size) = (unsafe { read_header(bridge, ptr) }) else {
        bridge.foreign_pointer("realloc");
        return std::ptr::null_mut();
    };
    if bridge.rounds && old_size <= MAX_CACHED && new_size <= MAX_CACHED && class_of(old_size) == class_of(new_size) {
        // The block has the room of its class already.
        bridge.counts.realloc(old_size, new_size);
        // SAFETY: the header matched: the block is live, NumPy's.
        return unsafe { finish_at(bridge, ptr, new_size) };
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
            unsafe { finish(bridge, base, new_size) }
        }
        // The old block is untouched, as C's realloc promises.
        Err(_) => std::ptr::null_mut(),
    }
}

/// NumPy's `free(ctx, ptr, size)`. Everything but the common path is out
/// of line and called last, so that path needs no stack frame and ends by
/// jumping to the plugin's `free`.
///
/// # Safety
/// As for `realloc`.
pub unsafe extern "C" fn bridge_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the caller's contract; `false` asks nothing of the bridge.
    unsafe { free_impl::<false>(ctx, ptr, size) }
}

/// [`bridge_free`] for a bridge with [direct calls](Bridge::direct):
/// [`crate::raw_numpy::new_capsule`] installs it on those only.
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
/// As for [`bridge_free`], and as for [`direct_calls`](crate::raw_plugin::direct_calls).
#[inline(always)]
unsafe fn free_impl<const DIRECT: bool>(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    if ptr.is_null() {
        return free_null(bridge);
    }
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy frees only blocks this handler made.
    let Some(real) = (unsafe { read_header(bridge, ptr) }) else {
        return free_foreign(bridge);
    };
    if size != real {
        // SAFETY: forwarded: the header matched.
        return unsafe { free_mismatched(bridge, ptr, real, size) };
    }
    match bridge.counts.sole_first() {
        // SAFETY: forwarded: the header matched; `line` is this thread's,
        // not crowded; the caller's contract for `DIRECT`.
        Some(line) => unsafe { free_counted::<DIRECT>(bridge, Some(line), ptr, real, false) },
        // SAFETY: forwarded: the header matched; the caller's contract for
        // `DIRECT`.
        None => unsafe { free_other::<DIRECT>(bridge, ptr, real) },
    }
}

/// `free` by a thread whose line is not the [first](crate::lines::FIRST_LINE)
/// or is crowded (other threads count too: the same, with the headroom
/// capped, see [`crate::counters`]), or must take a mark in. (A version
/// that found the line without a call, a leaf ending in a jump to the
/// plugin, saved 13 instructions here but measured slower on the
/// one-thread benchmark: code placement, see BENCHMARKS.md.)
///
/// # Safety
/// As for [`free_counted`], but for the line; and as for [`direct_calls`](crate::raw_plugin::direct_calls)
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

/// NumPy handed `free` a pointer this bridge did not make.
#[cold]
#[inline(never)]
extern "C" fn free_foreign(bridge: &'static Bridge) {
    bridge.foreign_pointer("free");
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
/// line, if any; and as for [`direct_calls`](crate::raw_plugin::direct_calls).
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
        Some(l) => Counts::free_in(l, real, crowded),
        None => bridge.counts.free(None, real),
    }
    if real <= MAX_CACHED {
        // The cache is on only for a bridge that rounds: tested first, so
        // that the common small free reads one flag.
        if bridge.caching()
            && let Some(l) = line
            // SAFETY: `l` is this thread's own line; the header matched, so
            // `ptr` is a live block of this bridge, allocated with the room
            // of its class (`rounds`), and NumPy is done with it.
            && unsafe { l.cache.push(class_of(real), NonNull::new_unchecked(ptr)) }
        {
            return;
        }
        if bridge.rounds {
            // SAFETY: forwarded: the caller's contract; a bridge that
            // rounds made the block with the room of its class.
            return unsafe { free_small(bridge, line, ptr, real) };
        }
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
/// no more; and as for [`direct_calls`](crate::raw_plugin::direct_calls).
#[inline(always)]
unsafe fn release<const DIRECT: bool>(bridge: &Bridge, ptr: *mut u8, total: usize) {
    // SAFETY: the caller's contract; the check word is in the header.
    unsafe {
        ptr.cast::<usize>().sub(1).write(0);
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
    unsafe { release::<false>(bridge, ptr, bridge.header + crate::raw_cache::rounded(real)) }
}
