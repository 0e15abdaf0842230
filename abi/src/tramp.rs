//! The trampolines: the `extern "C"` functions a generated handler points
//! at, each calling one [`Allocator`] method under
//! [`catch_unwind`](std::panic::catch_unwind), so that no panic unwinds into
//! the host. `export.rs` builds handlers out of them.

use crate::allocator::Allocator;
use crate::atfork;
use crate::{ERROR_CAP, MemplugInstance, MemplugLocation, MemplugStats, SHARE_FOREIGN, SHARE_OK};
use core::ffi::{CStr, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The body of a generated statistics companion. Not public API.
///
/// # Safety
/// `ctx` is null or the `ctx` of a handler built by [`entry::<A>`]; `out` is
/// null or points at a writable [`MemplugStats`] whose `struct_size` is set.
#[doc(hidden)]
pub unsafe fn stats<A: Allocator>(ctx: *mut c_void, out: *mut MemplugStats) -> i32 {
    if ctx.is_null() || out.is_null() {
        return -1;
    }
    // SAFETY: per the contract, a non-null `ctx` is that of a handler built by
    // `entry::<A>`, pointing at the `'static` `A` in its `OnceLock`.
    let a = unsafe { state::<A>(ctx) };
    match catch_unwind(AssertUnwindSafe(|| a.stats())) {
        Ok(Some(s)) => {
            // SAFETY: `out` is non-null and the host gives a properly aligned
            // `MemplugStats` whose `struct_size` says how much of it exists.
            let size = unsafe { (*out).struct_size } as usize;
            let n = size.min(core::mem::size_of::<MemplugStats>());
            let filled = MemplugStats { struct_size: n as u64, ..s };
            // SAFETY: copy only the `n` bytes the caller's struct has.
            unsafe { core::ptr::copy_nonoverlapping(&filled as *const MemplugStats as *const u8, out as *mut u8, n) };
            0
        }
        _ => 1,
    }
}

/// Recover the state from a `ctx` handed back by the host.
///
/// # Safety
/// `ctx` is the `ctx` of a handler built by [`entry::<A>`].
pub(crate) unsafe fn state<'a, A: Allocator>(ctx: *mut c_void) -> &'a A {
    // SAFETY: per this function's contract `ctx` points at a live `A`.
    unsafe { &*(ctx as *const A) }
}

pub(crate) unsafe extern "C" fn malloc_tramp<A: Allocator>(ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    catch_unwind(AssertUnwindSafe(|| a.malloc(size))).unwrap_or(core::ptr::null_mut()) as *mut c_void
}

pub(crate) unsafe extern "C" fn calloc_tramp<A: Allocator>(
    ctx: *mut c_void,
    nelem: usize,
    elsize: usize,
) -> *mut c_void {
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    catch_unwind(AssertUnwindSafe(|| a.calloc(nelem, elsize))).unwrap_or(core::ptr::null_mut()) as *mut c_void
}

pub(crate) unsafe extern "C" fn realloc_tramp<A: Allocator>(
    ctx: *mut c_void,
    ptr: *mut c_void,
    old: usize,
    new: usize,
) -> *mut c_void {
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    // SAFETY: the host passes a block this handler made with size `old`.
    catch_unwind(AssertUnwindSafe(|| unsafe { a.realloc(ptr as *mut u8, old, new) })).unwrap_or(core::ptr::null_mut())
        as *mut c_void
}

pub(crate) unsafe extern "C" fn aligned_alloc_tramp<A: Allocator>(
    ctx: *mut c_void,
    alignment: usize,
    size: usize,
) -> *mut c_void {
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    catch_unwind(AssertUnwindSafe(|| a.aligned_alloc(alignment, size))).unwrap_or(core::ptr::null_mut()) as *mut c_void
}

pub(crate) unsafe extern "C" fn usable_size_tramp<A: Allocator>(ctx: *mut c_void, ptr: *const c_void) -> usize {
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    catch_unwind(AssertUnwindSafe(|| a.usable_size(ptr as *const u8))).unwrap_or(0)
}

pub(crate) unsafe extern "C" fn stats_tramp<A: Allocator>(ctx: *mut c_void, out: *mut MemplugStats) -> i32 {
    // SAFETY: the host passes this handler's ctx and a valid `out`.
    unsafe { stats::<A>(ctx, out) }
}

/// Write `msg` into a fixed, NUL-terminated error buffer, cut to fit.
fn write_error(buf: &mut [u8; ERROR_CAP], msg: &str) {
    let n = msg.len().min(ERROR_CAP - 1);
    buf[..n].copy_from_slice(&msg.as_bytes()[..n]);
    buf[n] = 0;
}

pub(crate) unsafe extern "C" fn create_tramp<A: Allocator>(
    ctx: *mut c_void,
    options: *const c_char,
    out: *mut MemplugInstance,
) -> i32 {
    if out.is_null() {
        return -1;
    }
    // SAFETY: the host passes a valid, writable instance struct.
    let out = unsafe { &mut *out };
    if (out.struct_size as usize) < core::mem::size_of::<MemplugInstance>() {
        return -1;
    }
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    let text = if options.is_null() {
        ""
    } else {
        // SAFETY: the host passes a NUL-terminated string that outlives the call.
        match unsafe { CStr::from_ptr(options) }.to_str() {
            Ok(t) => t,
            Err(_) => {
                write_error(&mut out.error, "options are not UTF-8");
                return 1;
            }
        }
    };
    match catch_unwind(AssertUnwindSafe(|| a.with_options(text))) {
        Ok(Ok(instance)) => {
            let align = instance.alignment().max(out.alignment as usize);
            let instance = Box::into_raw(Box::new(instance));
            // SAFETY: the box stays where it is until `destroy_tramp`, which
            // unregisters it before dropping it.
            unsafe { atfork::register::<A>(instance) };
            out.ctx = instance as *mut c_void;
            out.alignment = align as u64;
            0
        }
        Ok(Err(msg)) => {
            write_error(&mut out.error, &msg);
            1
        }
        Err(_) => {
            write_error(&mut out.error, "the plugin panicked while creating an instance");
            1
        }
    }
}

pub(crate) unsafe extern "C" fn destroy_tramp<A: Allocator>(instance_ctx: *mut c_void) {
    if instance_ctx.is_null() {
        return;
    }
    atfork::unregister(instance_ctx);
    // SAFETY: the host passes a ctx made by `create_tramp` (a leaked `Box<A>`),
    // exactly once, after its last block was freed.
    let boxed = unsafe { Box::from_raw(instance_ctx as *mut A) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(boxed)));
}

pub(crate) unsafe extern "C" fn free_tramp<A: Allocator>(ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    // SAFETY: the host passes a block this handler made with size `size`.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe { a.free(ptr as *mut u8, size) }));
}

pub(crate) unsafe extern "C" fn locate_tramp<A: Allocator>(
    ctx: *mut c_void,
    ptr: *const c_void,
    size: usize,
    out: *mut MemplugLocation,
) -> i32 {
    if out.is_null() {
        return SHARE_FOREIGN;
    }
    // SAFETY: the host passes a valid, writable record whose `struct_size`
    // says how much of it exists; it is read here, before anything else.
    let have = unsafe { (*out).struct_size } as usize;
    if have < core::mem::size_of::<MemplugLocation>() {
        // A record older than this plugin's: nothing newer was ever defined.
        return SHARE_FOREIGN;
    }
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    let mut loc = MemplugLocation::new();
    match catch_unwind(AssertUnwindSafe(|| a.locate(ptr as *const u8, size, &mut loc))) {
        Ok(Ok(())) => {
            loc.struct_size = have as u64;
            // SAFETY: `out` is writable for `have >= size_of::<MemplugLocation>()` bytes.
            unsafe { out.write(loc) };
            SHARE_OK
        }
        Ok(Err(failure)) => failure.status(),
        Err(_) => SHARE_FOREIGN,
    }
}

pub(crate) unsafe extern "C" fn resolve_tramp<A: Allocator>(
    ctx: *mut c_void,
    location: *const MemplugLocation,
    out_ptr: *mut *mut c_void,
) -> i32 {
    if location.is_null() || out_ptr.is_null() {
        return SHARE_FOREIGN;
    }
    // SAFETY: the host passes a readable record; only its `struct_size` is
    // read before it is known to be whole.
    if (unsafe { (*location).struct_size } as usize) < core::mem::size_of::<MemplugLocation>() {
        return SHARE_FOREIGN;
    }
    // SAFETY: the record is whole (checked above) and lives for the call.
    let loc = unsafe { &*location };
    // SAFETY: the host only calls with the ctx of this handler.
    let a = unsafe { state::<A>(ctx) };
    match catch_unwind(AssertUnwindSafe(|| a.resolve(loc))) {
        Ok(Ok(p)) => {
            // SAFETY: `out_ptr` is a valid, writable pointer slot.
            unsafe { out_ptr.write(p as *mut c_void) };
            SHARE_OK
        }
        Ok(Err(failure)) => failure.status(),
        Err(_) => SHARE_FOREIGN,
    }
}
