//! The allocator itself: every entry point of lib.rs comes down to
//! [`malloc`], [`alloc`], [`free`], [`realloc`] and [`usable`], which route
//! a request to the plugin (headerless, `bare_raw`, or with a header before
//! the block), to libc (when the plugin could not be used), or to the
//! bootstrap heap (before the plugin is ready, and inside a plugin call),
//! and each free back to whichever made it; `sample_raw` sees each off the
//! fast path. On the header path an aligned request goes to the handler's
//! `aligned_alloc` if any (the header in the `align` bytes before the
//! block), else to its `malloc`, `align` bytes more, the block at the first
//! aligned address after a header.

use crate::bare_raw::{self as bare, nomem};
use crate::block_raw::{self as block, HEADER};
use crate::call_raw::in_call;
use crate::call_raw::mode;
use crate::plugin_raw as plugin;
use crate::setup::Mode;
use crate::{boot_raw as boot, sample_raw as sample, stats};
use core::ffi::c_void;

/// The largest alignment served: the header keeps the offset in 32 bits.
const MAX_ALIGN: usize = 1 << 31;

/// `malloc(size)`: the fast path of a thread-safe headerless handler, else
/// [`alloc_slow`]. NULL always with `errno = ENOMEM`: a manifest's C `malloc`
/// (mimalloc's, say) need not set it, so it is set here, off the fast path.
#[inline(always)]
pub(crate) fn malloc(size: usize) -> *mut c_void {
    // The fast modes are the highest: one compare of the mode.
    if in_call::fast_mode()
        && let Some(p) = bare::direct_malloc(size)
    {
        return if p.is_null() { nomem() } else { p };
    }
    alloc_slow(size, 0, false)
}

/// `calloc`'s `total` zeroed bytes (`n * size`, checked by the caller):
/// the fast path of a thread-safe headerless handler with a `calloc`, else
/// [`alloc_slow`]. NULL with `errno = ENOMEM`, as [`malloc`].
#[inline(always)]
pub(crate) fn calloc(total: usize) -> *mut c_void {
    if in_call::fast_mode()
        && let Some(p) = bare::direct_calloc(total)
    {
        return if p.is_null() { nomem() } else { p };
    }
    alloc_slow(total, 0, true)
}

/// A block of `size` bytes aligned to `align` (a power of two; at most 16
/// means the default), zeroed if `zero`: a plain one is [`malloc`]'s.
#[inline(never)]
pub(crate) fn alloc(size: usize, align: usize, zero: bool) -> *mut c_void {
    if align <= HEADER && !zero { malloc(size) } else { alloc_slow(size, align, zero) }
}

/// [`alloc`] off the fast path (tried, or not for it); sampled for `--profile`.
#[inline(never)]
fn alloc_slow(size: usize, align: usize, zero: bool) -> *mut c_void {
    sample::allocated(alloc_plain(size, align, zero), size)
}

/// [`alloc_slow`], not sampled.
fn alloc_plain(size: usize, align: usize, zero: bool) -> *mut c_void {
    let align = align.max(HEADER);
    if align > MAX_ALIGN {
        return nomem();
    }
    if align > HEADER {
        stats::ALIGNED.add(1);
    }
    let mode = mode();
    if mode == Mode::Header && align == HEADER && !zero {
        return header_malloc(size);
    }
    if mode == Mode::Libc {
        return libc_alloc(size, align, zero);
    }
    if mode.headerless() {
        if let Some(p) = bare::alloc(size, align, zero) {
            return p;
        }
        return boot_alloc(size, align, zero);
    }
    alloc_header(size, align, zero, mode)
}

/// [`alloc`] on the header path (or the bootstrap heap's, before the
/// plugin is ready), `align` at least 16.
fn alloc_header(size: usize, align: usize, zero: bool, mode: Mode) -> *mut c_void {
    // Plain blocks: header, then the block. Aligned ones: `align` extra
    // bytes, the block at the first aligned address after a header.
    let extra = if align > HEADER { align } else { HEADER };
    let Some(mut total) = size.checked_add(extra).filter(|&t| t <= isize::MAX as usize) else { return nomem() };
    let setup = plugin::setup();
    let served = match setup.plugin {
        Some(ref p) if mode == Mode::Header => {
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
                        _ if align > HEADER && p.aligned_alloc.is_some() => {
                            p.aligned_alloc.map_or(core::ptr::null_mut(), |a| a(p.ctx, align, total))
                        }
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
    let (raw, offset) = match served {
        Some((raw, _, _)) if raw.is_null() => return nomem(),
        Some((raw, t, at_end)) => {
            total = t;
            let offset =
                if at_end { total - size } else { ((raw as usize + HEADER + align - 1) & !(align - 1)) - raw as usize };
            (raw.cast::<u8>(), offset)
        }
        None => return boot_alloc(size, align, zero),
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
    stats::made(total - offset);
    user.cast()
}

/// A plain block on the header path: the handler's `malloc` of the size
/// and the header (rounded up to its guard page's alignment when blocks
/// end against one).
fn header_malloc(size: usize) -> *mut c_void {
    let Some(p) = plugin::setup().plugin.as_ref().filter(|p| p.end_align == 0) else {
        return header_general(size);
    };
    let Some(total) = size.checked_add(HEADER).filter(|&t| t <= isize::MAX as usize) else { return nomem() };
    // SAFETY: the handler's malloc with its ctx; total > 0.
    match plugin::call(p, |p| unsafe { (p.malloc)(p.ctx, total) }) {
        Some(raw) if raw.is_null() => nomem(),
        Some(raw) => {
            // SAFETY: the block holds total = HEADER + size bytes from raw.
            let user = unsafe { raw.cast::<u8>().add(HEADER) };
            // SAFETY: as above: the header lies in the block, before user.
            unsafe { block::write(user, total, HEADER) };
            stats::made(size);
            user.cast()
        }
        None => boot_alloc(size, HEADER, false),
    }
}

/// [`alloc`]'s general header path for a plain block (blocks placed
/// against a guard page).
#[inline(never)]
fn header_general(size: usize) -> *mut c_void {
    alloc_header(size, HEADER, false, Mode::Header)
}

/// The bootstrap heap's answer to an allocation.
fn boot_alloc(size: usize, align: usize, zero: bool) -> *mut c_void {
    let p = boot::alloc(size, align, zero);
    if p.is_null() {
        return nomem();
    }
    stats::BOOT_BLOCKS.add(1);
    p
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
#[inline(always)]
pub(crate) fn free(p: *mut c_void) {
    // The table's gate is open only in the fast modes, while no block
    // recorded by address is live. The fast path's free takes NULL; the
    // region is never at 0.
    if boot::fast_free_allowed(p) {
        if bare::direct_free(p) {
            return;
        }
        // Inside a plugin call: the fast path cannot serve.
        return free_slow::<false>(p);
    }
    free_slow::<true>(p);
}

/// Release `p` off the fast path; `GATE_SHUT`: [`free`] found the table's
/// gate shut (a block recorded by address is live, or not a fast mode), so
/// the fast path, not tried yet, serves `p` in a fast mode if the table
/// cannot hold it (else this thread is inside a plugin call).
#[inline(never)]
fn free_slow<const GATE_SHUT: bool>(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    sample::freeing(p);
    let mode = mode();
    if GATE_SHUT && mode.fast() && boot::ODD.quiet(p as usize) && !boot::contains(p.cast()) && bare::direct_free(p) {
        return;
    }
    if boot::contains(p.cast()) {
        match boot::release_in_region(p) {
            true => stats::BOOT_FREES.add(1),
            false => stats::FOREIGN.add(1),
        }
        return;
    }
    if mode.headerless() {
        if boot::release_mapped(p) {
            stats::BOOT_FREES.add(1);
        } else if !bare::free(p) {
            stats::FOREIGN.add(1);
        }
        return;
    }
    if mode == Mode::Libc {
        if boot::release_mapped(p) {
            stats::BOOT_FREES.add(1);
        } else if let Some(f) = plugin::setup().libc.free {
            // SAFETY: in libc mode every block but the bootstrap heap's is libc's.
            unsafe { f(p) };
        }
        return;
    }
    let Some(pl) = plugin::setup().plugin.as_ref().filter(|_| mode == Mode::Header) else {
        free_foreign(p);
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
    match freed {
        Some(true) => {}
        Some(false) => free_unmatched(pl, p),
        None => free_foreign(p),
    }
}

/// Free `p`, whose header is not this library's though the plugin serves:
/// unmapped if the bootstrap heap mapped it; else the plugin's foreign-free
/// companion, if it has one, judges it (a debugging plugin reports a bad
/// free and aborts), and it is leaked.
fn free_unmatched(pl: &crate::setup::Plugin, p: *mut c_void) {
    if boot::release_mapped(p) {
        stats::BOOT_FREES.add(1);
        return;
    }
    free_unmatched_count(pl, p);
}

/// A `realloc` of `p`, whose header is not this library's: as
/// [`free_unmatched`], without unmapping anything.
fn free_unmatched_count(pl: &crate::setup::Plugin, p: *mut c_void) {
    if let Some(f) = pl.foreign_free {
        // SAFETY: the companion takes any pointer and reads only its own
        // tables (memplug_abi::FOREIGN_FREE_SUFFIX).
        let _ = plugin::call(pl, |pl| unsafe { f(pl.ctx, p) });
    }
    stats::FOREIGN.add(1);
}

/// Free `p`, which is not the plugin's (or was freed from inside a plugin
/// call): unmapped if the bootstrap heap mapped it, else leaked.
fn free_foreign(p: *mut c_void) {
    match boot::release_mapped(p) {
        true => stats::BOOT_FREES.add(1),
        false => stats::FOREIGN.add(1),
    }
}

/// Whether blocks may sit at the end of the handler's (and so be aligned
/// only as their size is): see [`crate::setup::Plugin::end_align`].
fn at_end_blocks() -> bool {
    mode() == Mode::Header && plugin::setup().plugin.is_some_and(|p| p.end_align != 0)
}

/// The usable size of block `p`; 0 for a pointer this library did not make.
pub(crate) fn usable(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    match boot::usable(p.cast()) {
        Some(n) => return n,
        None if boot::contains(p.cast()) => return 0,
        None => {}
    }
    if mode().headerless() {
        return bare::usable(p);
    }
    if mode() == Mode::Libc {
        // SAFETY: in libc mode, blocks but the bootstrap heap's are libc's.
        return plugin::setup().libc.usable.map_or(0, |u| unsafe { u(p) });
    }
    // SAFETY: as in `free`.
    unsafe { block::read(p.cast(), at_end_blocks()) }.map_or(0, |(total, offset)| total - offset)
}

/// Resize `p` to `size` bytes; for `--profile`, a free of `p` (recorded
/// first, even if the resize then fails) and an allocation.
pub(crate) fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        return alloc(size, 0, false);
    }
    if size == 0 {
        free(p);
        return core::ptr::null_mut();
    }
    sample::freeing(p);
    let q = resize(p, size);
    if q.is_null() { q } else { sample::allocated(q, size) }
}

/// [`realloc`] of a block (non-null) to a size (non-zero), not sampled.
fn resize(p: *mut c_void, size: usize) -> *mut c_void {
    match boot::usable(p.cast()) {
        // A block of the bootstrap heap moves (to the plugin when it serves).
        Some(old) => return moved(p, old, size, false),
        None if boot::contains(p.cast()) => {
            stats::FOREIGN.add(1);
            return nomem();
        }
        None => {}
    }
    let mode = mode();
    if mode.headerless() {
        return match bare::realloc(p, size) {
            Ok(q) => q,
            Err(old) => moved(p, old, size, true),
        };
    }
    if mode == Mode::Libc {
        // SAFETY: in libc mode, blocks but the bootstrap heap's are libc's.
        return match plugin::setup().libc.realloc.map(|r| unsafe { r(p, size) }) {
            Some(q) if !q.is_null() => q,
            _ => nomem(),
        };
    }
    // SAFETY: as in `free`.
    let Some((total, offset)) = (unsafe { block::read(p.cast(), at_end_blocks()) }) else {
        match plugin::setup().plugin.as_ref().filter(|_| mode == Mode::Header) {
            Some(pl) => free_unmatched_count(pl, p),
            None => stats::FOREIGN.add(1),
        }
        return nomem();
    };
    let old = total - offset;
    let setup = plugin::setup();
    if let (Some(pl), true) = (setup.plugin.as_ref(), mode == Mode::Header)
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
    moved(p, old, size, true)
}

/// Resize `p` (`old` usable bytes) by moving it to a new block of `size`
/// bytes; `count` it as a realloc of the handler's.
fn moved(p: *mut c_void, old: usize, size: usize, count: bool) -> *mut c_void {
    let q = alloc_plain(size, 0, false);
    if q.is_null() {
        return q;
    }
    // SAFETY: both blocks hold at least min(old, size) bytes and are distinct.
    unsafe { core::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), old.min(size)) };
    if count {
        stats::REALLOCS.add(1);
    }
    free(p);
    q
}
