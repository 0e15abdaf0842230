//! Calls through a handler's function pointers.

use crate::error::AllocError;
use crate::handler::Handler;
use crate::validate::ValidatedHeader;
use core::ffi::c_void;
use memplug_abi::{CallocFn, FreeFn, MallocFn, MemplugStats, ReallocFn, StatsFn};
use std::ptr::NonNull;

/// A handler's functions and `ctx`, all non-null.
pub(crate) struct VTable {
    ctx: *mut c_void,
    malloc: MallocFn,
    calloc: CallocFn,
    realloc: ReallocFn,
    free: FreeFn,
    stats: Option<StatsFn>,
}

// SAFETY: the vtable is immutable plain data. Calls into a plugin that did not
// declare itself thread-safe are serialised by the handler's lock
// (`HandlerInner::lock`), so sharing the pointers between threads is sound.
unsafe impl Send for VTable {}
// SAFETY: as above.
unsafe impl Sync for VTable {}

impl VTable {
    /// A vtable from Rust function pointers (the built-in handler).
    pub(crate) fn from_fns(
        ctx: *mut c_void,
        malloc: MallocFn,
        calloc: CallocFn,
        realloc: ReallocFn,
        free: FreeFn,
    ) -> VTable {
        VTable {
            ctx,
            malloc,
            calloc,
            realloc,
            free,
            stats: None,
        }
    }

    /// A vtable from a validated header's addresses.
    ///
    /// # Safety
    /// The header was read from a live handler in a library that is never
    /// unloaded, so its non-zero addresses are functions with the ABI's
    /// signatures (the plugin's side of the contract in `memplug.h`).
    pub(crate) unsafe fn from_header(h: &ValidatedHeader, stats: Option<StatsFn>) -> VTable {
        let f = &h.functions;
        // SAFETY: `validate` guarantees every address is non-zero, and the
        // caller guarantees each is a function of the matching ABI type;
        // function pointers and usize have the same size on supported targets.
        unsafe {
            VTable {
                ctx: h.ctx as *mut c_void,
                malloc: std::mem::transmute::<usize, MallocFn>(f.malloc),
                calloc: std::mem::transmute::<usize, CallocFn>(f.calloc),
                realloc: std::mem::transmute::<usize, ReallocFn>(f.realloc),
                free: std::mem::transmute::<usize, FreeFn>(f.free),
                stats,
            }
        }
    }
}

impl Handler {
    #[inline]
    pub(crate) fn raw_malloc(&self, size: usize) -> *mut u8 {
        let v = &self.inner.vtable;
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: `malloc` is a valid ABI function of this handler and `ctx`
        // is its own; the call is serialised if the handler is not
        // thread-safe; `size > 0` as the ABI promises (callers round up).
        unsafe { (v.malloc)(v.ctx, size) as *mut u8 }
    }

    #[inline]
    pub(crate) fn raw_calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        let v = &self.inner.vtable;
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: as in `raw_malloc`; the product does not overflow (checked
        // by `alloc_zeroed`) and is non-zero.
        unsafe { (v.calloc)(v.ctx, nelem, elsize) as *mut u8 }
    }

    pub(crate) fn raw_stats(&self) -> Option<MemplugStats> {
        let v = &self.inner.vtable;
        let f = v.stats?;
        let mut out = MemplugStats {
            struct_size: size_of::<MemplugStats>() as u64,
            ..Default::default()
        };
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: `f` is the handler's statistics companion (ABI signature),
        // `ctx` is its own and `out` is a valid, writable struct whose
        // `struct_size` is set.
        let rc = unsafe { f(v.ctx, &mut out) };
        (rc == 0).then_some(out)
    }

    /// Resize a block made by this handler, keeping `min(old_size, new_size)`
    /// bytes. On error the old block is untouched and still owned by the
    /// caller. Sizes of 0 are rounded up to 1 (see the module docs).
    ///
    /// # Safety
    /// `ptr` was returned by this handler (`alloc`, `alloc_zeroed` or
    /// `realloc`) with size `old_size` and has not been freed. On success it
    /// must not be used again.
    #[inline]
    pub unsafe fn realloc(
        &self,
        ptr: NonNull<u8>,
        old_size: usize,
        new_size: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        let (old_size, new_size) = (old_size.max(1), new_size.max(1));
        let v = &self.inner.vtable;
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: the caller guarantees `ptr`/`old_size` describe a live block
        // of this handler; the call is serialised if needed.
        let p = unsafe { (v.realloc)(v.ctx, ptr.as_ptr() as *mut c_void, old_size, new_size) };
        NonNull::new(p as *mut u8).ok_or(AllocError::OutOfMemory {
            handler: self.name(),
            size: new_size,
        })
    }

    /// Free a block made by this handler.
    ///
    /// # Safety
    /// `ptr` was returned by this handler with size `size` (its allocation
    /// size or last `realloc` size) and is not used again.
    #[inline]
    pub unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        let v = &self.inner.vtable;
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: the caller guarantees `ptr`/`size` describe a live block of
        // this handler; the call is serialised if needed.
        unsafe { (v.free)(v.ctx, ptr.as_ptr() as *mut c_void, size.max(1)) }
    }
}

/// A `&'static` to a leaked handler state stored as a raw pointer.
pub(crate) fn leaked(p: *mut crate::handler::HandlerInner) -> &'static crate::handler::HandlerInner {
    assert!(!p.is_null());
    // SAFETY: the only pointers stored in `current::DEFAULT` come from
    // `Handler::inner` (a `&'static` of a leaked `Box`), never freed.
    unsafe { &*p }
}
