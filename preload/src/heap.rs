//! The allocator itself: every entry point of lib.rs comes down to
//! [`alloc`], [`free`], [`realloc`] and [`usable`], which route a request to
//! the plugin (with a header before the block), to libc (when the plugin
//! could not be used), or to the bootstrap arena (before the plugin is
//! ready, and for requests made from inside a plugin call).

use crate::block::{self, HEADER};
use crate::plugin::{self, LIBC, READY};
use crate::{arena, stats};
use core::ffi::c_void;

/// The largest alignment served: the header keeps the offset in 32 bits.
const MAX_ALIGN: usize = 1 << 31;

/// Set `errno`.
fn set_errno(e: i32) {
    // SAFETY: __errno_location is this thread's errno, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// Fail a request: NULL, `errno = ENOMEM`.
fn nomem() -> *mut c_void {
    stats::FAILED.add(1);
    set_errno(libc::ENOMEM);
    core::ptr::null_mut()
}

/// A block of `size` bytes aligned to `align` (a power of two; at most 16
/// means the default), zeroed if `zero`.
pub(crate) fn alloc(size: usize, align: usize, zero: bool) -> *mut c_void {
    let align = align.max(HEADER);
    if align > MAX_ALIGN {
        return nomem();
    }
    if align > HEADER {
        stats::ALIGNED.add(1);
    }
    let mode = plugin::mode();
    if mode == LIBC {
        return libc_alloc(size, align, zero);
    }
    // Plain blocks: header, then the block. Aligned ones: `align` extra
    // bytes, the block at the first aligned address after a header.
    let extra = if align > HEADER { align } else { HEADER };
    let Some(mut total) = size.checked_add(extra).filter(|&t| t <= isize::MAX as usize) else { return nomem() };
    let setup = plugin::setup();
    let served = match setup.plugin {
        Some(ref p) if mode == READY => {
            // A handler that puts a block's end against a guard page gets a
            // plain request rounded as it rounds, and the block goes at the
            // very end: one byte past it is on the guard page. The block is
            // then aligned only as its size is (as with Electric Fence).
            let at_end = p.end_align != 0 && align == HEADER;
            let total = match at_end {
                true => match total.checked_next_multiple_of(p.end_align).filter(|&t| t <= isize::MAX as usize) {
                    Some(t) => t,
                    None => return nomem(),
                },
                false => total,
            };
            plugin::call(p, |p| {
                // SAFETY: the handler's own functions with its ctx; sizes are
                // never 0 (total includes the header).
                unsafe {
                    match (zero && align == HEADER, p.calloc) {
                        (true, Some(c)) => c(p.ctx, 1, total),
                        (true, None) => {
                            let b = (p.malloc)(p.ctx, total);
                            if !b.is_null() {
                                core::ptr::write_bytes(b.cast::<u8>(), 0, total);
                            }
                            b
                        }
                        (false, _) => (p.malloc)(p.ctx, total),
                    }
                }
            })
            .map(|raw| (raw, total, at_end))
        }
        _ => None,
    };
    let from_plugin = served.is_some();
    let (raw, offset) = match served {
        Some((raw, _, _)) if raw.is_null() => return nomem(),
        Some((raw, t, at_end)) => {
            total = t;
            let offset =
                if at_end { total - size } else { ((raw as usize + HEADER + align - 1) & !(align - 1)) - raw as usize };
            (raw.cast::<u8>(), offset)
        }
        None => {
            let raw = arena::take(total, align, HEADER);
            if raw.is_null() {
                return nomem();
            }
            stats::ARENA_BLOCKS.add(1);
            (raw, HEADER)
        }
    };
    if zero && align > HEADER {
        // SAFETY: the block is `total` bytes from `raw`.
        unsafe { core::ptr::write_bytes(raw, 0, total) };
    }
    // SAFETY: offset >= HEADER and offset + size <= total: the header and
    // the block lie inside the `total` bytes at `raw`.
    let user = unsafe { raw.add(offset) };
    // SAFETY: as above.
    unsafe { block::write(user, total, offset) };
    if from_plugin {
        stats::made(total - offset);
    }
    user.cast()
}

/// libc's answer to an allocation.
fn libc_alloc(size: usize, align: usize, zero: bool) -> *mut c_void {
    let l = plugin::setup().libc;
    // SAFETY: libc's own functions, found by dlsym(RTLD_NEXT).
    unsafe {
        let p = match (align > HEADER, zero, l.malloc, l.calloc, l.memalign) {
            (false, false, Some(m), _, _) => m(size),
            (false, true, _, Some(c), _) => c(1, size),
            (true, _, _, _, Some(pm)) => {
                let mut out = core::ptr::null_mut();
                if pm(&mut out, align, size) != 0 {
                    return nomem();
                }
                if zero {
                    core::ptr::write_bytes(out.cast::<u8>(), 0, size);
                }
                out
            }
            _ => return nomem(),
        };
        if p.is_null() { nomem() } else { p }
    }
}

/// Release `p` (any pointer a program may pass to `free`).
pub(crate) fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    if arena::contains(p.cast()) {
        stats::ARENA_FREES.add(1);
        return;
    }
    let mode = plugin::mode();
    if mode == LIBC {
        if let Some(f) = plugin::setup().libc.free {
            // SAFETY: in libc mode every block outside the arena is libc's.
            unsafe { f(p) };
        }
        return;
    }
    let Some(pl) = plugin::setup().plugin.as_ref().filter(|_| mode == READY) else {
        stats::FOREIGN.add(1);
        return;
    };
    let freed = plugin::call(pl, |pl| {
        // SAFETY: p is a pointer the program got from an allocator; the 16
        // bytes before it are readable.
        let Some((total, offset)) = (unsafe { block::read(p.cast(), pl.end_align != 0) }) else {
            return false;
        };
        stats::freed(total - offset);
        // SAFETY: the header is ours: the block is live and this library made it.
        unsafe { block::clear(p.cast()) };
        // SAFETY: the handler's block of `total` bytes starts `offset` before p.
        let raw = unsafe { p.cast::<u8>().sub(offset) };
        // SAFETY: handing the handler back its own block with its size.
        unsafe { (pl.free)(pl.ctx, raw.cast(), total) };
        true
    });
    if freed != Some(true) {
        // Not ours, or freed from inside a plugin call: leaked.
        stats::FOREIGN.add(1);
    }
}

/// Whether blocks may sit at the end of the handler's (and so be aligned
/// only as their size is): see [`plugin::Plugin::end_align`].
fn at_end_blocks() -> bool {
    plugin::mode() == READY && plugin::setup().plugin.is_some_and(|p| p.end_align != 0)
}

/// The usable size of block `p`; 0 for a pointer this library did not make.
pub(crate) fn usable(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if plugin::mode() == LIBC && !arena::contains(p.cast()) {
        // SAFETY: in libc mode, blocks outside the arena are libc's.
        return plugin::setup().libc.usable.map_or(0, |u| unsafe { u(p) });
    }
    // SAFETY: as in `free`.
    unsafe { block::read(p.cast(), at_end_blocks()) }.map_or(0, |(total, offset)| total - offset)
}

/// Resize `p` to `size` bytes.
pub(crate) fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        return alloc(size, 0, false);
    }
    if size == 0 {
        free(p);
        return core::ptr::null_mut();
    }
    let mode = plugin::mode();
    let in_arena = arena::contains(p.cast());
    if mode == LIBC && !in_arena {
        // SAFETY: in libc mode, blocks outside the arena are libc's.
        return match plugin::setup().libc.realloc.map(|r| unsafe { r(p, size) }) {
            Some(q) if !q.is_null() => q,
            _ => nomem(),
        };
    }
    // SAFETY: as in `free`.
    let Some((total, offset)) = (unsafe { block::read(p.cast(), at_end_blocks()) }) else {
        stats::FOREIGN.add(1);
        return nomem();
    };
    let old = total - offset;
    let setup = plugin::setup();
    if let (Some(pl), true) = (setup.plugin.as_ref(), mode == READY && !in_arena)
        && offset == HEADER
        && pl.end_align == 0
        && let Some(re) = pl.realloc
    {
        let Some(new_total) = size.checked_add(HEADER).filter(|&t| t <= isize::MAX as usize) else { return nomem() };
        // SAFETY: the handler's block starts HEADER bytes before p.
        let raw = unsafe { p.cast::<u8>().sub(HEADER) };
        // SAFETY: the handler's realloc with its own block and sizes.
        if let Some(got) = plugin::call(pl, |pl| unsafe { re(pl.ctx, raw.cast(), total, new_total) }) {
            if got.is_null() {
                return nomem();
            }
            // SAFETY: the new block holds new_total bytes from `got`.
            let user = unsafe { got.cast::<u8>().add(HEADER) };
            // SAFETY: as above.
            unsafe { block::write(user, new_total, HEADER) };
            stats::resized(old, size);
            return user.cast();
        }
    }
    let q = alloc(size, 0, false);
    if q.is_null() {
        return q;
    }
    // SAFETY: both blocks hold at least min(old, size) bytes and are distinct.
    unsafe { core::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), old.min(size)) };
    if !in_arena {
        stats::REALLOCS.add(1);
    }
    free(p);
    q
}
