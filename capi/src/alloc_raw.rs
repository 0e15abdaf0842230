//! A handler's info, statistics and usable sizes, instances, and
//! allocation: the exports of `memplug_host.h`'s "Handlers", "Instances" and
//! "Allocation" sections but the fast path's (`fast_raw`), each a thin call
//! into [`memplug::Handler`] with its semantics: sizes of 0 served as 1,
//! `free` and `realloc` told the size, not-thread-safe handlers locked per
//! call.

use crate::boundary_raw::{ErrOut, arg, guarded, optional_text, put, quiet};
use crate::calls_raw::{self as calls, c_ptr};
use crate::error::ErrorObject;
use crate::opaque::{Entry, Info, InstanceBox};
use memplug_abi::MemplugStats;
use std::ffi::{c_char, c_void};
use std::ptr::{NonNull, null, null_mut};

/// `memplug_host_handler_name`: the handler's name; static (valid for the
/// rest of the process). NULL for a NULL handler.
///
/// # Safety
/// `handler` is NULL or a handler this library returned.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_handler_name(handler: *const Entry) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { handler.as_ref() }.map_or(null(), |e| e.name().as_ptr())
}

/// `memplug_host_handler_info`: fill `info`, whose `struct_size` the caller
/// set, with the fields that fit; 0, or −1 when an argument is NULL or
/// `struct_size` is 0.
///
/// # Safety
/// `handler` is NULL or a handler this library returned; `info` is NULL or
/// valid for writes of `info->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_handler_info(handler: *const Entry, info: *mut Info) -> i32 {
    quiet(-1, || {
        // SAFETY: the caller's contract.
        let Some(entry) = (unsafe { handler.as_ref() }) else { return -1 };
        if info.is_null() {
            return -1;
        }
        // SAFETY: the caller's contract: `info` is valid, its first field set.
        let size = unsafe { info.cast::<u64>().read_unaligned() };
        let full = entry.info();
        let n = (size as usize).min(std::mem::size_of::<Info>());
        if n < std::mem::size_of::<u64>() {
            return -1;
        }
        // SAFETY: `n` bytes fit in both `full` and the caller's `info`; the
        // caller's `struct_size` is kept.
        unsafe {
            std::ptr::copy_nonoverlapping((&raw const full).cast::<u8>().add(8), info.cast::<u8>().add(8), n - 8)
        };
        0
    })
}

/// `memplug_host_stats`: the handler's statistics into `out`: 1 when it
/// reports them, 0 when it does not, −1 with `err` set when the call would
/// block (see the lock rules).
///
/// # Safety
/// `handler` a handler this library returned; `out` valid for a write;
/// `err` NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_stats(handler: *const Entry, out: *mut MemplugStats, err: ErrOut) -> i32 {
    const F: &str = "memplug_host_stats";
    // SAFETY: the caller's contract.
    unsafe {
        guarded(F, err, -1, || match arg(handler, F, "handler")?.handler.stats_checked()? {
            Some(s) => put(out, s, F, "out").map(|()| 1),
            None => Ok(0),
        })
    }
}

/// `memplug_host_usable_size`: how many bytes the live block `ptr` of
/// `handler` can hold, into `out`: 1 when the handler answers usable sizes,
/// 0 when it does not, −1 for a NULL argument.
///
/// # Safety
/// `handler` is NULL or a handler this library returned; `ptr` is NULL or a
/// live block of `handler` (from its alloc, calloc or realloc, or an
/// aligned block whose alignment is at most the handler's); `out` is NULL
/// or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_usable_size(handler: *const Entry, ptr: *const c_void, out: *mut usize) -> i32 {
    quiet(-1, || {
        // SAFETY: the caller's contract.
        let (Some(entry), Some(p)) = (unsafe { handler.as_ref() }, NonNull::new(ptr.cast_mut().cast::<u8>())) else {
            return -1;
        };
        if out.is_null() {
            return -1;
        }
        // SAFETY: the caller's contract, which is `Handler::usable_size`'s.
        match unsafe { entry.handler.usable_size(p) } {
            Some(n) => {
                // SAFETY: the caller's contract: `out` is valid for a write.
                unsafe { out.write(n) };
                1
            }
            None => 0,
        }
    })
}

/// `memplug_host_instantiate`: make an instance of `handler` configured by
/// `options` (`key=value,…`; NULL or "" for none); the owner goes to `out`.
///
/// # Safety
/// `handler` a handler this library returned; `options` NULL or a C
/// string; `out` valid for a write; `err` NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_instantiate(
    handler: *const Entry,
    options: *const c_char,
    out: *mut *mut InstanceBox,
    err: ErrOut,
) -> i32 {
    const F: &str = "memplug_host_instantiate";
    // SAFETY: the caller's contract.
    unsafe {
        guarded(F, err, -1, || {
            let entry = arg(handler, F, "handler")?;
            let options = optional_text(options, F, "options")?.unwrap_or("");
            if out.is_null() {
                return Err(ErrorObject::null(F, "out"));
            }
            let owner = entry.handler.instantiate(options)?;
            put(out, Box::into_raw(Box::new(InstanceBox::new(owner))), F, "out").map(|()| 0)
        })
    }
}

/// `memplug_host_instance_handler`: the instance's handler; valid for the
/// rest of the process (it refuses to allocate once the instance is gone).
///
/// # Safety
/// `instance` is NULL or a live instance owner.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_instance_handler(instance: *const InstanceBox) -> *const Entry {
    // SAFETY: the caller's contract.
    unsafe { instance.as_ref() }.map_or(null(), |i| i.entry as *const Entry)
}

/// `memplug_host_instance_free`: let the instance go; the plugin destroys
/// it once its last block is freed too. NULL is ignored.
///
/// # Safety
/// `instance` is NULL or an instance owner this library returned, not yet
/// freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_instance_free(instance: *mut InstanceBox) {
    if !instance.is_null() {
        // SAFETY: the caller's contract: a box this library leaked, freed once.
        let boxed = unsafe { Box::from_raw(instance) };
        quiet((), || drop(boxed));
    }
}

/// `memplug_host_calloc`: `nelem * elsize` zeroed bytes from `handler`.
///
/// # Safety
/// As for `memplug_host_alloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_calloc(
    handler: *const Entry,
    nelem: usize,
    elsize: usize,
    err: ErrOut,
) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { calls::calloc(handler, "memplug_host_calloc", nelem, elsize, err) }
}

/// `memplug_host_realloc`: resize a block of `handler` from `old_size` to
/// `new_size` bytes; on failure the old block is untouched.
///
/// # Safety
/// `ptr` is a live block of `handler` of `old_size` bytes; on success it is
/// not used again. As for `memplug_host_alloc` otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_realloc(
    handler: *const Entry,
    ptr: *mut c_void,
    old_size: usize,
    new_size: usize,
    err: ErrOut,
) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { calls::realloc(handler, "memplug_host_realloc", ptr, old_size, new_size, err) }
}

/// `memplug_host_alloc_aligned`: `size` bytes aligned to `alignment` (a
/// power of two); free with `memplug_host_free_aligned`.
///
/// # Safety
/// As for `memplug_host_alloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_alloc_aligned(
    handler: *const Entry,
    size: usize,
    alignment: usize,
    err: ErrOut,
) -> *mut c_void {
    const F: &str = "memplug_host_alloc_aligned";
    // SAFETY: the caller's contract.
    unsafe {
        guarded(F, err, null_mut(), || Ok(c_ptr(arg(handler, F, "handler")?.handler.alloc_aligned(size, alignment)?)))
    }
}

/// `memplug_host_free_aligned`: free a block of `memplug_host_alloc_aligned`
/// with the same size and alignment. NULL is ignored.
///
/// # Safety
/// `ptr` is NULL or a live aligned block of `handler` of `size` bytes and
/// `alignment`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_free_aligned(
    handler: *const Entry,
    ptr: *mut c_void,
    size: usize,
    alignment: usize,
) {
    // SAFETY: the caller's contract.
    let (Some(entry), Some(p)) = (unsafe { handler.as_ref() }, NonNull::new(ptr.cast::<u8>())) else { return };
    // SAFETY: the caller's contract, which is `Handler::free_aligned`'s.
    quiet((), || unsafe { entry.handler.free_aligned(p, size, alignment) })
}
