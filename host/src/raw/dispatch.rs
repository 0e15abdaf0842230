//! Calls through a handler's function pointers.

use crate::error::AllocError;
use crate::handler::Handler;
use crate::validate::ValidatedHeader;
use core::ffi::c_void;
use memplug_abi::{
    AlignedAllocFn, CallocFn, CreateFn, DestroyFn, FreeFn, MallocFn, MemplugInstance, MemplugStats, ReallocFn, StatsFn,
};
use std::ptr::NonNull;

/// A handler's functions and `ctx`; the four required functions non-null.
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct VTable {
    ctx: *mut c_void,
    malloc: MallocFn,
    calloc: CallocFn,
    realloc: ReallocFn,
    free: FreeFn,
    aligned_alloc: Option<AlignedAllocFn>,
    create: Option<CreateFn>,
    destroy: Option<DestroyFn>,
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
        VTable { ctx, malloc, calloc, realloc, free, aligned_alloc: None, create: None, destroy: None, stats: None }
    }

    /// The same vtable with an aligned allocation function.
    pub(crate) fn with_aligned_alloc(self, f: AlignedAllocFn) -> VTable {
        VTable { aligned_alloc: Some(f), ..self }
    }

    /// Whether the plugin has its own aligned allocation.
    pub(crate) fn has_aligned_alloc(&self) -> bool {
        self.aligned_alloc.is_some()
    }

    /// Whether the plugin makes instances (`create`).
    pub(crate) fn has_create(&self) -> bool {
        self.create.is_some()
    }

    /// Whether the handler reports statistics.
    pub(crate) fn has_stats(&self) -> bool {
        self.stats.is_some()
    }

    /// Call the plugin's `create` with `options`: the instance's vtable (the
    /// same functions, the new `ctx`) and alignment, or the plugin's message.
    /// The caller holds the handler's lock if it is not thread-safe.
    pub(crate) fn create_instance(&self, options: &str, alignment: usize) -> Result<(VTable, usize), String> {
        let Some(create) = self.create else { return Err("the plugin has no `create` function".into()) };
        let Ok(c_options) = std::ffi::CString::new(options) else {
            return Err("options must not contain NUL bytes".into());
        };
        let mut out = MemplugInstance {
            struct_size: size_of::<MemplugInstance>() as u64,
            ctx: std::ptr::null_mut(),
            alignment: alignment as u64,
            error: [0; memplug_abi::ERROR_CAP],
        };
        // The caller holds the lock if the handler is not thread-safe.
        // SAFETY: `create` is this plugin's ABI function, `ctx` its own, the options
        // a live NUL-terminated string, `out` a writable struct with `struct_size` set.
        let rc = unsafe { create(self.ctx, c_options.as_ptr(), &mut out) };
        if rc != 0 {
            let end = out.error.iter().position(|&b| b == 0).unwrap_or(out.error.len());
            let msg = String::from_utf8_lossy(&out.error[..end]).into_owned();
            return Err(if msg.is_empty() { format!("create failed with status {rc}") } else { msg });
        }
        let align = (out.alignment as usize).max(alignment);
        if !align.is_power_of_two() {
            return Err(format!("create reported alignment {align}, which is not a power of two"));
        }
        Ok((VTable { ctx: out.ctx, ..*self }, align))
    }

    /// Call the plugin's `destroy` on this (instance) vtable's `ctx`.
    ///
    /// # Safety
    /// This vtable was made by `create_instance`, all its blocks are freed,
    /// and it is destroyed once; the caller holds the lock if needed.
    pub(crate) unsafe fn destroy_instance(&self) {
        if let Some(destroy) = self.destroy {
            // SAFETY: per the contract: a live instance ctx from `create`,
            // with no blocks left, destroyed exactly once.
            unsafe { destroy(self.ctx) }
        }
    }

    /// A vtable from a validated header's addresses; `stats` is the 1.0
    /// companion symbol, used when the 1.1 `stats` field is absent.
    ///
    /// # Safety
    /// The header was read from a live handler in a library that is never
    /// unloaded, so its non-zero addresses are functions with the ABI's
    /// signatures (the plugin's side of the contract in `memplug.h`).
    pub(crate) unsafe fn from_header(h: &ValidatedHeader, stats: Option<StatsFn>) -> VTable {
        let f = &h.functions;
        // Function pointers, `Option`s of them and usize have the same size here.
        // SAFETY: `validate` made the four required addresses non-zero (optional ones
        // are 0 = None), and the caller guarantees each is a function of its ABI type.
        unsafe {
            VTable {
                ctx: h.ctx as *mut c_void,
                malloc: std::mem::transmute::<usize, MallocFn>(f.malloc),
                calloc: std::mem::transmute::<usize, CallocFn>(f.calloc),
                realloc: std::mem::transmute::<usize, ReallocFn>(f.realloc),
                free: std::mem::transmute::<usize, FreeFn>(f.free),
                aligned_alloc: std::mem::transmute::<usize, Option<AlignedAllocFn>>(f.aligned_alloc),
                create: std::mem::transmute::<usize, Option<CreateFn>>(f.create),
                destroy: std::mem::transmute::<usize, Option<DestroyFn>>(f.destroy),
                stats: std::mem::transmute::<usize, Option<StatsFn>>(f.stats).or(stats),
            }
        }
    }
}

impl Handler {
    /// `malloc` with no lock and no count: only for `inner.direct` handlers.
    #[inline(always)]
    pub(crate) fn direct_malloc(&self, size: usize) -> *mut u8 {
        debug_assert!(self.inner.direct);
        // SAFETY: a direct handler is thread-safe, so the call needs no lock;
        // `size > 0` as the ABI promises (callers round up).
        unsafe { self.inner.vtable.malloc_held(size) }
    }

    #[inline]
    pub(crate) fn raw_malloc(&self, size: usize) -> *mut u8 {
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: the call is serialised by the guard if the handler is not
        // thread-safe; `size > 0` as the ABI promises (callers round up).
        unsafe { self.inner.vtable.malloc_held(size) }
    }

    #[inline]
    pub(crate) fn raw_calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: as in `raw_malloc`; the product does not overflow (checked
        // by `alloc_zeroed`) and is non-zero.
        unsafe { self.inner.vtable.calloc_held(nelem, elsize) }
    }

    #[inline]
    pub(crate) fn raw_aligned_alloc(&self, alignment: usize, size: usize) -> *mut u8 {
        let v = &self.inner.vtable;
        let Some(f) = v.aligned_alloc else { return std::ptr::null_mut() };
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: `f` is this handler's ABI `aligned_alloc` and `ctx` its own;
        // `alignment` is a power of two and `size > 0`; serialised if needed.
        unsafe { f(v.ctx, alignment, size) as *mut u8 }
    }

    pub(crate) fn raw_stats(&self) -> Option<MemplugStats> {
        let v = &self.inner.vtable;
        let f = v.stats?;
        let mut out = MemplugStats { struct_size: size_of::<MemplugStats>() as u64, ..Default::default() };
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
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: the caller guarantees `ptr`/`old_size` describe a live block
        // of this handler; the call is serialised if needed.
        let p = unsafe { self.inner.vtable.realloc_held(ptr, old_size, new_size) };
        drop(_guard);
        NonNull::new(p).ok_or(AllocError::OutOfMemory { handler: self.name(), size: new_size })
    }

    /// Free a block made by this handler.
    ///
    /// # Safety
    /// `ptr` was returned by this handler with size `size` (its allocation
    /// size or last `realloc` size) and is not used again.
    #[inline]
    pub unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        if self.inner.direct {
            // SAFETY: the caller guarantees `ptr`/`size` describe a live block
            // of this thread-safe, uncounted handler: nothing to lock or count.
            return unsafe { self.inner.vtable.free_held(ptr, size.max(1)) };
        }
        // SAFETY: forwarded: the caller's contract.
        unsafe { self.free_slow(ptr, size) }
    }

    /// `free` for locked handlers and instances.
    ///
    /// # Safety
    /// As for [`free`](Handler::free).
    #[inline(never)]
    unsafe fn free_slow(&self, ptr: NonNull<u8>, size: usize) {
        let _guard = self.inner.lock.as_ref().map(|l| l.acquire());
        // SAFETY: the caller guarantees `ptr`/`size` describe a live block of
        // this handler; the call is serialised if needed.
        unsafe { self.inner.vtable.free_held(ptr, size.max(1)) };
        drop(_guard);
        self.leave_block();
    }

    /// Free a block made by [`alloc_aligned`](Handler::alloc_aligned).
    ///
    /// # Safety
    /// `ptr` was returned by `self.alloc_aligned(size, alignment)` (or
    /// `realloc_aligned` to `size` with `alignment`) and is not used again.
    pub unsafe fn free_aligned(&self, ptr: NonNull<u8>, size: usize, alignment: usize) {
        let size = size.max(1);
        if alignment <= self.alignment() || self.aligned_strategy() == crate::handler::AlignedStrategy::Plugin {
            // SAFETY: the block came from `alloc` or the plugin's
            // `aligned_alloc`, both released by the ordinary `free`.
            return unsafe { self.free(ptr, size) };
        }
        // SAFETY: `align_within` stored the original pointer in the word just
        // before the aligned block, inside the over-allocated block.
        let raw = unsafe { (ptr.as_ptr() as *const usize).sub(1).read_unaligned() } as *mut u8;
        let total = crate::handler::over_allocation(size, alignment).expect("checked when allocated");
        // SAFETY: `raw` is the handler's block of `total` bytes from `alloc_aligned`.
        unsafe { self.free(NonNull::new_unchecked(raw), total) }
    }

    /// Resize a block made by [`alloc_aligned`](Handler::alloc_aligned),
    /// keeping its alignment and `min(old_size, new_size)` bytes. On error
    /// the old block is untouched.
    ///
    /// # Safety
    /// As for [`free_aligned`](Handler::free_aligned) with `old_size`; on
    /// success the old pointer is not used again.
    pub unsafe fn realloc_aligned(
        &self,
        ptr: NonNull<u8>,
        old_size: usize,
        new_size: usize,
        alignment: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        if alignment <= self.alignment() {
            // SAFETY: forwarded: a plain block of this handler.
            return unsafe { self.realloc(ptr, old_size, new_size) };
        }
        let q = self.alloc_aligned(new_size, alignment)?;
        // SAFETY: both blocks are live, distinct, and hold at least
        // `min(old, new)` bytes.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), q.as_ptr(), old_size.min(new_size)) };
        // SAFETY: the caller's contract for the old block.
        unsafe { self.free_aligned(ptr, old_size, alignment) };
        Ok(q)
    }
}

/// Align inside an over-allocated block (see `handler::over_allocation`):
/// the first `alignment`-aligned address at least one word past `raw`, with
/// `raw` stored in the word just before it.
pub(crate) fn align_within(raw: NonNull<u8>, alignment: usize) -> NonNull<u8> {
    let addr = raw.as_ptr() as usize;
    let aligned = (addr + size_of::<usize>() + alignment - 1) & !(alignment - 1);
    let offset = aligned - addr;
    // SAFETY: `raw` holds `size + alignment + size_of::<usize>()` bytes and
    // `size_of::<usize>() <= offset < alignment + size_of::<usize>()`, so the
    // word before `raw + offset` and the `size` bytes after it are inside it.
    unsafe {
        let p = raw.as_ptr().add(offset);
        (p as *mut usize).sub(1).write_unaligned(addr);
        NonNull::new_unchecked(p)
    }
}

/// Run an instance's `destroy` once its last reference is gone. Called by
/// `Handler::leave_block` (holding the lock if the handler needs one).
pub(crate) fn destroy_released(h: &Handler) {
    // The vtable is the instance's, made by `create_instance`.
    // SAFETY: `leave_block` calls this once, when the count (owner + live blocks)
    // reached zero: no block is left and `enter_block` refuses any new one.
    unsafe { h.inner.vtable.destroy_instance() }
}

/// A `&'static` to a leaked handler state stored as a raw pointer.
pub(crate) fn leaked(p: *mut crate::handler::HandlerInner) -> &'static crate::handler::HandlerInner {
    assert!(!p.is_null());
    // SAFETY: the only pointers stored in `current::DEFAULT` come from
    // `Handler::inner` (a `&'static` of a leaked `Box`), never freed.
    unsafe { &*p }
}

/// The calls themselves, for a caller that already holds the handler's lock
/// (or whose handler is thread-safe): what a [`HandlerGuard`](crate::lock::HandlerGuard)
/// runs (`raw/guard.rs`) without locking again.
impl VTable {
    /// # Safety
    /// The caller holds the lock of the handler owning this vtable, if it has
    /// one; `size > 0`.
    #[inline]
    pub(crate) unsafe fn malloc_held(&self, size: usize) -> *mut u8 {
        // SAFETY: `malloc` is this handler's ABI function and `ctx` its own;
        // the caller serialises the call and passes a non-zero size.
        unsafe { (self.malloc)(self.ctx, size) as *mut u8 }
    }

    /// # Safety
    /// As for [`malloc_held`](VTable::malloc_held); `nelem * elsize` does not
    /// overflow and is non-zero.
    #[inline]
    pub(crate) unsafe fn calloc_held(&self, nelem: usize, elsize: usize) -> *mut u8 {
        // SAFETY: as in `malloc_held`, with the caller's product guarantee.
        unsafe { (self.calloc)(self.ctx, nelem, elsize) as *mut u8 }
    }

    /// # Safety
    /// As for [`malloc_held`](VTable::malloc_held); `ptr` is a live block of
    /// this handler of `old_size > 0` bytes, `new_size > 0`.
    #[inline]
    pub(crate) unsafe fn realloc_held(&self, ptr: NonNull<u8>, old_size: usize, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees the block, the sizes and the lock.
        unsafe { (self.realloc)(self.ctx, ptr.as_ptr() as *mut c_void, old_size, new_size) as *mut u8 }
    }

    /// # Safety
    /// As for [`malloc_held`](VTable::malloc_held); `ptr` is a live block of
    /// this handler of `size > 0` bytes, not used again.
    #[inline]
    pub(crate) unsafe fn free_held(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller guarantees the block, its size and the lock.
        unsafe { (self.free)(self.ctx, ptr.as_ptr() as *mut c_void, size) }
    }
}
