//! The functions NumPy calls on a bridge, and the block header they read
//! and write: the hot path of every NumPy allocation, and the unsafe code
//! it needs. (Bridges of shareable handlers use [`crate::raw_padded`]'s.)
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
//! Imports [`crate::bridge`], [`crate::counters`], [`crate::raw_cache`].

use crate::bridge::Bridge;
use crate::counters::Line;
use crate::raw_cache::{CLASSES, MAX_CACHED, class_of};
use std::ffi::c_void;
use std::ptr::NonNull;

/// Mixed into every check word.
const COOKIE_SALT: usize = 0x6d65_6d70_6c75_6721;

/// The check word stored beside a block's size.
#[inline]
pub fn cookie(bridge: &Bridge, ptr: *mut u8, size: usize) -> usize {
    (ptr as usize) ^ size.rotate_left(29) ^ (std::ptr::from_ref(bridge) as usize) ^ COOKIE_SALT
}

/// Write the header in front of `ptr` (a block's data pointer); `ptr`.
///
/// # Safety
/// The two words before `ptr` are the block's, writable; `ptr` is 8-aligned.
#[inline]
unsafe fn finish_at(bridge: &Bridge, ptr: *mut u8, size: usize) -> *mut c_void {
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
unsafe fn finish(bridge: &Bridge, base: NonNull<u8>, size: usize) -> *mut c_void {
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
unsafe fn read_header(bridge: &Bridge, ptr: *mut u8) -> Option<usize> {
    // SAFETY: the caller's contract.
    let (size, check) = unsafe {
        let words = ptr.cast::<usize>();
        (words.sub(2).read(), words.sub(1).read())
    };
    (check == cookie(bridge, ptr, size)).then_some(size)
}

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

/// Free the blocks cached in `line` through the bridge's handler.
///
/// # Safety
/// The calling thread owns `line` (it is [`crate::counters::Counts::mine`]'s,
/// or claimed by [`crate::counters::Counts::with_unowned_caches`]), which is
/// one of `bridge`'s lines.
unsafe fn drain_line(bridge: &Bridge, line: &Line) {
    // SAFETY: the caller owns the line; every cached block is a block of
    // the bridge's handler allocated as `header + CLASSES[class]` bytes,
    // no one's any more.
    unsafe {
        line.cache.drain(|class, ptr| {
            bridge.handler.free(NonNull::new_unchecked(ptr.as_ptr().sub(bridge.header)), bridge.header + CLASSES[class])
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

// The functions NumPy calls. A panic must not unwind into NumPy; nothing on
// these paths panics (allocation results are matched, sizes are checked),
// and the cold paths that touch Python catch their own.

/// NumPy's `malloc(ctx, size)`.
///
/// # Safety
/// `ctx` is the bridge a capsule of [`crate::raw_numpy::new_capsule`] holds.
pub unsafe extern "C" fn bridge_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `ctx` is the leaked bridge `new_capsule` stored.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    let line = bridge.counts.mine();
    if size <= MAX_CACHED
        && bridge.caching()
        && let Some(l) = line
        // SAFETY: `line` is this thread's own (`mine`).
        && let Some(ptr) = unsafe { l.cache.pop(class_of(size)) }
    {
        bridge.counts.alloc(line, size);
        // SAFETY: a cached block: its header is writable and it has room
        // for its class, which `size` fits.
        return unsafe { finish_at(bridge, ptr.as_ptr(), size) };
    }
    let Some(total) = bridge.plugin_size(size) else { return std::ptr::null_mut() };
    match bridge.handler.alloc(total) {
        Ok(base) => {
            bridge.counts.alloc(line, size);
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

/// NumPy's `free(ctx, ptr, size)`.
///
/// # Safety
/// As for `realloc`.
pub unsafe extern "C" fn bridge_free(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: as in `bridge_malloc`.
    let bridge: &'static Bridge = unsafe { &*(ctx as *const Bridge) };
    if ptr.is_null() {
        // NumPy frees NULL (argsort's index buffer, ...); plugins never see it.
        bridge.counts.null_free();
        return;
    }
    let ptr = ptr.cast::<u8>();
    // SAFETY: NumPy frees only blocks this handler made.
    let Some(real) = (unsafe { read_header(bridge, ptr) }) else {
        bridge.foreign_pointer("free");
        return;
    };
    if size != real {
        bridge.numpy_size_mismatch(real, size);
    }
    let line = bridge.counts.mine();
    // Counted first: its loads overlap with the call below.
    bridge.counts.free(line, real);
    if real <= MAX_CACHED
        && bridge.rounds
        && let Some(l) = line
    {
        if bridge.caching() {
            // SAFETY: `l` is this thread's own line; the header matched, so
            // `ptr` is a live block of this bridge, allocated with the room
            // of its class (`rounds`), and NumPy is done with it.
            if unsafe { l.cache.push(class_of(real), NonNull::new_unchecked(ptr)) } {
                return;
            }
        } else if !l.cache.is_empty() {
            // The cache was turned off: give back what this thread kept.
            // SAFETY: `l` is this thread's own line.
            unsafe { drain_line(bridge, l) };
        }
    }
    // SAFETY: the header matched: `ptr - header` is a live block of
    // `plugin_size(real)` bytes (which did not overflow when it was made).
    // Clearing the check word first makes a second free of the same
    // pointer recognisable.
    unsafe {
        ptr.cast::<usize>().sub(1).write(0);
        let total = bridge.header + if bridge.rounds { crate::raw_cache::rounded(real) } else { real };
        bridge.handler.free(NonNull::new_unchecked(ptr.sub(bridge.header)), total);
    }
}
