//! The headerless path: for a handler whose `free` and `realloc` need no
//! size (`FLAG_SIZELESS_FREE`, or a manifest that names a usable-size
//! function) and that can say a block's usable size, each request goes
//! straight to the handler's function and the program holds the handler's
//! own pointer, as under a plain `LD_PRELOAD` of its library.
//!
//! - `malloc(0)` asks a handler for 1 byte (a unique pointer); a
//!   manifest's C `malloc` gets 0, as under a plain preload of its library
//!   (C's `malloc(0)`, a unique pointer from glibc, mimalloc, tcmalloc and
//!   jemalloc alike); a failure is NULL with `errno = ENOMEM`.
//! - Aligned requests go to the handler's `aligned_alloc`. A handler without
//!   one gets `size + align` bytes from its `malloc`, the program the
//!   first aligned address in them, recorded by address in
//!   `boot_raw::ODD` (so that `free` gives the handler back its own
//!   pointer); when that table is full the request fails (ENOMEM).
//! - `free` passes the size 0; `realloc` calls the handler's with old size
//!   0, or moves the block (its usable size copied).
//! - `malloc_usable_size` asks the handler.
//! - A pointer the handler did not make reaches its `free`, as it would
//!   under a plain preload — unless the handler declares
//!   `FLAG_KNOWS_FOREIGN` and the run counts (`--report`), where a pointer
//!   whose usable size is 0 is counted as foreign and kept from it.
//! - Under `--report`, a block's bytes are its usable size (the handler's
//!   answer), so the report's byte counts are exact for what the handler
//!   reserved, not for what the program asked.
//!
//! The bootstrap heap's blocks are recognised by address before any of
//! this (its region by range, its mapped blocks in `boot_raw::ODD`), and
//! requests made from inside a plugin call go to it as on the header path.
//!
//! For a thread-safe handler in a run that does not count (no `--report`),
//! `malloc`, `free` and `calloc` take a fast path ([`direct_malloc`],
//! [`direct_free`], [`direct_calloc`] when the handler has a `calloc`): one
//! load and branch on the mode, one check of the in-call flag and one
//! indirect call (for a manifest, the library's C function itself).

use crate::boot_raw::{MAPPED, ODD};
use crate::call_raw::mode;
use crate::call_raw::{call, in_call};
use crate::plugin_raw::setup;
use crate::setup::{Mode, Plugin};
use crate::stats;
use crate::symbols_raw::{plain, plain_usable};
use core::ffi::c_void;

/// Set `errno`.
pub(crate) fn set_errno(e: i32) {
    // SAFETY: __errno_location is this thread's errno, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// Fail a request: NULL, `errno = ENOMEM`.
#[cold]
pub(crate) fn nomem() -> *mut c_void {
    stats::FAILED.add(1);
    set_errno(libc::ENOMEM);
    core::ptr::null_mut()
}

/// The handler, once the mode says a headerless one serves.
#[inline(always)]
fn plugin() -> &'static Plugin {
    // SAFETY: the headerless modes are set only after `setup().plugin` is
    // filled (plugin_raw::init), and it is never written again.
    unsafe { setup().plugin.as_ref().unwrap_unchecked() }
}

/// The handler's usable size of its block `p`, called directly (the
/// caller is inside a plugin call, or accepts calling from outside one).
fn handler_usable(p: *const c_void) -> usize {
    if mode() == Mode::FastManifest {
        // SAFETY: `Mode::FastManifest` is set only after the manifest's table is filled,
        // and only when it names a usable-size function; p is its block.
        return unsafe { plain_usable(p) };
    }
    let pl = plugin();
    // SAFETY: the handler's own function with its ctx; headerless handlers
    // have one (see `Plugin::headerless`).
    pl.usable_size.map_or(0, |u| unsafe { u(pl.ctx, p) })
}

/// The fast `malloc` of a thread-safe headerless handler in a run that
/// does not count (a manifest's C function, or the handler's through
/// `plugin_raw`'s plain function); `None` when this thread is inside a
/// plugin call (the bootstrap heap serves).
#[inline(always)]
pub(crate) fn direct_malloc(size: usize) -> Option<*mut c_void> {
    let off = in_call::try_enter()?;
    // SAFETY: the table is filled before a fast mode is set. A manifest's
    // C `malloc` takes any size, 0 included, as C's does (so the program
    // gets what a plain preload of the library would give); the plain
    // function over a handler's asks it for at least 1 byte (plugin_raw).
    let p = unsafe { (plain().malloc)(size) };
    in_call::leave(off);
    // A C library's malloc sets errno itself (POSIX); the plain function
    // over a handler's sets it (plugin_raw).
    Some(p)
}

/// The fast `calloc` of `total` zeroed bytes (`n * size`, checked), as
/// [`direct_malloc`]: the library's C `calloc` for a manifest (given 0 as is),
/// the plain function over a handler's otherwise; `None` when there is no
/// `calloc` or this thread is inside a plugin call.
#[inline(always)]
pub(crate) fn direct_calloc(total: usize) -> Option<*mut c_void> {
    // SAFETY: the table is filled before a fast mode is set.
    let c = unsafe { plain() }.calloc?;
    let off = in_call::try_enter()?;
    // SAFETY: a C calloc (or the plain function over the handler's), which
    // takes any size; `1 * total` cannot overflow.
    let p = unsafe { c(1, total) };
    in_call::leave(off);
    Some(p)
}

/// The fast `free` of `p` (not the bootstrap region's; the plain function
/// takes NULL) for a thread-safe headerless handler in a run that does not
/// count, while no block recorded by address is live; `false` for a free
/// from inside a plugin call.
#[inline(always)]
pub(crate) fn direct_free(p: *mut c_void) -> bool {
    let Some(off) = in_call::try_enter() else { return false };
    // SAFETY: the table is filled before a fast mode is set; a pointer the
    // program holds.
    unsafe { (plain().free)(p) };
    in_call::leave(off);
    true
}

/// Count the free of `p` (inside a plugin call): `false` when it is kept
/// from the handler (a pointer a `FLAG_KNOWS_FOREIGN` handler did not make).
#[cold]
fn counted_free(p: *mut c_void) -> bool {
    let n = handler_usable(p);
    if n == 0 && plugin().knows_foreign {
        stats::FOREIGN.add(1);
        return false;
    }
    stats::freed(n);
    true
}

/// A block of `size` bytes aligned to `align` (a power of two, at least
/// 16), zeroed if `zero`; `None` when this thread is inside a plugin call.
pub(crate) fn alloc(size: usize, align: usize, zero: bool) -> Option<*mut c_void> {
    let n = size.max(1);
    let pl = plugin();
    let got = call(pl, |pl| {
        // SAFETY: the handler's own functions with its ctx; n > 0.
        let (p, raw) = unsafe {
            match (align > 16, pl.aligned_alloc, zero, pl.calloc) {
                (true, Some(a), _, _) => (a(pl.ctx, align, n), None),
                (true, None, _, _) => match n.checked_add(align) {
                    Some(total) => {
                        let raw = (pl.malloc)(pl.ctx, total);
                        let user = (raw as usize).next_multiple_of(align) as *mut c_void;
                        if !raw.is_null() && !ODD.insert(user as usize, raw as usize) {
                            (pl.free)(pl.ctx, raw, 0);
                            (core::ptr::null_mut(), None)
                        } else {
                            (user, Some(raw))
                        }
                    }
                    None => (core::ptr::null_mut(), None),
                },
                (false, _, true, Some(c)) => (c(pl.ctx, 1, n), None),
                (false, _, _, _) => ((pl.malloc)(pl.ctx, n), None),
            }
        };
        if p.is_null() {
            return p;
        }
        if zero && (align > 16 || pl.calloc.is_none()) {
            // SAFETY: the block holds at least n bytes from p.
            unsafe { core::ptr::write_bytes(p.cast::<u8>(), 0, n) };
        }
        if stats::counting() {
            stats::made(match raw {
                Some(raw) => handler_usable(raw) - (p as usize - raw as usize),
                None => handler_usable(p),
            });
        }
        p
    })?;
    Some(if got.is_null() { nomem() } else { got })
}

/// Free `p` (non-null, not the bootstrap heap's); `false` when this
/// thread is inside a plugin call (the block is then left alone).
pub(crate) fn free(p: *mut c_void) -> bool {
    let raw = match ODD.get(p as usize) {
        Some(MAPPED) => return crate::boot_raw::release_mapped(p),
        Some(raw) => Some(raw as *mut c_void),
        None => None,
    };
    let pl = plugin();
    call(pl, |pl| match raw {
        Some(raw) => {
            if ODD.remove(p as usize).is_some() {
                if stats::counting() {
                    stats::freed(handler_usable(raw) - (p as usize - raw as usize));
                }
                // SAFETY: the handler's own block, which the program gave back.
                unsafe { (pl.free)(pl.ctx, raw, 0) };
            }
        }
        None => {
            if !stats::counting() || counted_free(p) {
                // SAFETY: the handler's free; it needs no size (headerless).
                unsafe { (pl.free)(pl.ctx, p, 0) };
            }
        }
    })
    .is_some()
}

/// The usable size of `p` (non-null, not the bootstrap heap's).
pub(crate) fn usable(p: *mut c_void) -> usize {
    let pl = plugin();
    let ask = |p: *const c_void| call(pl, |_| handler_usable(p)).unwrap_or_else(|| handler_usable(p));
    match ODD.get(p as usize) {
        Some(MAPPED) => 0,
        Some(raw) => ask(raw as *const c_void).saturating_sub(p as usize - raw),
        None => ask(p),
    }
}

/// Resize `p` (non-null, not the bootstrap heap's) to `size` (non-zero)
/// bytes with the handler's `realloc`; `Err(old)` when the block must move
/// instead (`old` usable bytes): no `realloc`, a block recorded by address,
/// or a call from inside a plugin call.
pub(crate) fn realloc(p: *mut c_void, size: usize) -> Result<*mut c_void, usize> {
    let pl = plugin();
    let Some(re) = pl.realloc.filter(|_| ODD.quiet(p as usize) || ODD.get(p as usize).is_none()) else {
        return Err(usable(p));
    };
    let got = call(pl, |pl| {
        let old = if stats::counting() { handler_usable(p) } else { 0 };
        // SAFETY: the handler's realloc of its own block; the old size is
        // not needed (headerless).
        let q = unsafe { re(pl.ctx, p, 0, size) };
        if !q.is_null() && stats::counting() {
            stats::resized(old, handler_usable(q));
        }
        q
    });
    match got {
        Some(q) if q.is_null() => Ok(nomem()),
        Some(q) => Ok(q),
        None => Err(handler_usable(p)),
    }
}
