//! A handler's functions and `ctx`, and the calls through them.
//!
//! [`VTable`] is plain data: the plugin's function pointers as the ABI types
//! them. Every call is an `unsafe fn` whose `# Safety` section says what the
//! caller must guarantee; the callers — the host's handler core, the
//! interposer's calls into its plugin — keep those guarantees for every
//! handler (its lock, its counts, non-zero sizes). The calls copied out for
//! hot paths are in `direct_raw`.
//! [`FunctionAddrs`] is the vtable as a header holds it (the host's
//! validator reads it out of a plugin's bytes, the interposer out of the
//! live header): addresses, before they are made into function pointers.

#![allow(unsafe_code)]

use crate::direct_raw::{DirectCalls, PlainCalls};
use core::ffi::{CStr, c_void};
use core::ptr::NonNull;
use memplug_abi::{
    AlignedAllocFn, CallocFn, CreateFn, DestroyFn, FreeFn, LocateFn, MallocFn, MemplugInstance, MemplugLocation,
    MemplugStats, ReallocFn, ResolveFn, StatsFn, UsableSizeFn,
};

/// The size a plugin is asked for when `size` bytes are requested: 0 is
/// served as 1, so that every request gets a unique, freeable, non-null
/// pointer, and a block is freed with the size it was made with. The one
/// place the host's zero-size rule is written: every call into a plugin's
/// block functions passes its sizes through it.
#[inline(always)]
pub const fn served(size: usize) -> usize {
    if size == 0 { 1 } else { size }
}

/// The addresses of a handler's functions, as read. The four ABI 1.0 ones
/// are non-zero in a valid header (the host's validator refuses any other);
/// the optional 1.1, 1.2 and 1.3 ones are 0 when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FunctionAddrs {
    /// `malloc`.
    pub malloc: usize,
    /// `calloc`.
    pub calloc: usize,
    /// `realloc`.
    pub realloc: usize,
    /// `free`.
    pub free: usize,
    /// `aligned_alloc` (1.1, optional).
    pub aligned_alloc: usize,
    /// `create` (1.1, optional).
    pub create: usize,
    /// `destroy` (1.1, optional).
    pub destroy: usize,
    /// `stats` (1.1, optional).
    pub stats: usize,
    /// `locate` (1.2, optional).
    #[cfg_attr(feature = "serde", serde(default))]
    pub locate: usize,
    /// `resolve` (1.2, optional).
    #[cfg_attr(feature = "serde", serde(default))]
    pub resolve: usize,
    /// `usable_size` (1.3, optional).
    #[cfg_attr(feature = "serde", serde(default))]
    pub usable_size: usize,
}

impl FunctionAddrs {
    /// The required (ABI 1.0) functions by name, in ABI order.
    #[inline]
    pub fn fields(&self) -> [(&'static str, usize); 4] {
        [("malloc", self.malloc), ("calloc", self.calloc), ("realloc", self.realloc), ("free", self.free)]
    }

    /// The optional (ABI 1.1, 1.2 and 1.3) functions by name, in ABI order.
    #[inline]
    pub fn optional_fields(&self) -> [(&'static str, usize); 7] {
        [
            ("aligned_alloc", self.aligned_alloc),
            ("create", self.create),
            ("destroy", self.destroy),
            ("stats", self.stats),
            ("locate", self.locate),
            ("resolve", self.resolve),
            ("usable_size", self.usable_size),
        ]
    }
}

/// Why [`VTable::create`] made no instance, as the plugin said it.
#[derive(Debug)]
pub enum CreateFailure {
    /// The plugin has no `create` function.
    NoCreate,
    /// `create` returned this non-zero status; its message (a NUL-terminated
    /// string, maybe empty) is in the caller's `error` buffer.
    Status(i32),
    /// `create` reported an alignment that is not a power of two.
    BadAlignment(usize),
}

/// A handler's functions and `ctx`; the four required functions non-null.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct VTable {
    ctx: *mut c_void,
    malloc: MallocFn,
    calloc: CallocFn,
    realloc: ReallocFn,
    free: FreeFn,
    aligned_alloc: Option<AlignedAllocFn>,
    create: Option<CreateFn>,
    destroy: Option<DestroyFn>,
    stats: Option<StatsFn>,
    locate: Option<LocateFn>,
    resolve: Option<ResolveFn>,
    usable_size: Option<UsableSizeFn>,
}

// SAFETY: the vtable is immutable plain data (function pointers and an opaque
// `ctx` value). Sharing it lets other threads *call* the plugin only through
// its `unsafe` calls, whose contract is that the caller serialises every
// call into a plugin that is not thread-safe (the host's handler core and
// the interposer do, with their locks).
unsafe impl Send for VTable {}
// SAFETY: as above.
unsafe impl Sync for VTable {}

impl VTable {
    /// A vtable from Rust functions (the built-in handler, the by-symbol
    /// trampolines).
    ///
    /// # Safety
    /// Each function implements its memplug ABI role for `ctx` (the contract
    /// in `memplug.h`): `malloc(ctx, size)` returns a block of `size` bytes or
    /// NULL, `free(ctx, ptr, size)` releases a block it made, and so on; and
    /// `ctx` stays valid for the rest of the process.
    #[inline]
    pub unsafe fn from_fns(
        ctx: *mut c_void,
        malloc: MallocFn,
        calloc: CallocFn,
        realloc: ReallocFn,
        free: FreeFn,
        aligned_alloc: Option<AlignedAllocFn>,
    ) -> VTable {
        VTable {
            ctx,
            malloc,
            calloc,
            realloc,
            free,
            aligned_alloc,
            create: None,
            destroy: None,
            stats: None,
            locate: None,
            resolve: None,
            usable_size: None,
        }
    }

    /// The same vtable with `usable_size` as its ABI 1.3 `usable_size`.
    ///
    /// # Safety
    /// `usable_size(ctx, ptr)` answers the usable size of a live block of
    /// this vtable's handler (the contract in `memplug.h`) and stays
    /// callable for the rest of the process.
    #[inline]
    pub unsafe fn with_usable_size(self, usable_size: Option<UsableSizeFn>) -> VTable {
        VTable { usable_size, ..self }
    }

    /// A vtable from a validated header's addresses; `stats` is the 1.0
    /// companion, used when the 1.1 `stats` field is absent.
    ///
    /// # Safety
    /// `functions` and `ctx` were read from a live handler in a library that
    /// is never unloaded, and `validate` accepted them (the four required
    /// addresses are non-zero; optional ones are 0 when absent); so every
    /// non-zero address is a function with its ABI signature (the plugin's
    /// side of the contract in `memplug.h`).
    #[inline]
    pub unsafe fn from_header(functions: &FunctionAddrs, ctx: usize, stats: Option<StatsFn>) -> VTable {
        let f = functions;
        // Function pointers, `Option`s of them and usize have the same size here.
        // SAFETY: by the caller's guarantee each non-zero address is a function of
        // its ABI type; zero becomes `None` for the optional ones, and the four
        // required ones are non-zero.
        unsafe {
            VTable {
                ctx: ctx as *mut c_void,
                malloc: core::mem::transmute::<usize, MallocFn>(f.malloc),
                calloc: core::mem::transmute::<usize, CallocFn>(f.calloc),
                realloc: core::mem::transmute::<usize, ReallocFn>(f.realloc),
                free: core::mem::transmute::<usize, FreeFn>(f.free),
                aligned_alloc: core::mem::transmute::<usize, Option<AlignedAllocFn>>(f.aligned_alloc),
                create: core::mem::transmute::<usize, Option<CreateFn>>(f.create),
                destroy: core::mem::transmute::<usize, Option<DestroyFn>>(f.destroy),
                stats: core::mem::transmute::<usize, Option<StatsFn>>(f.stats).or(stats),
                locate: core::mem::transmute::<usize, Option<LocateFn>>(f.locate),
                resolve: core::mem::transmute::<usize, Option<ResolveFn>>(f.resolve),
                usable_size: core::mem::transmute::<usize, Option<UsableSizeFn>>(f.usable_size),
            }
        }
    }

    /// The `malloc` and `free` calls alone, to be made without this vtable
    /// (see [`DirectCalls`]).
    #[inline]
    pub fn direct_calls(&self) -> DirectCalls {
        DirectCalls { ctx: self.ctx, malloc: self.malloc, free: self.free }
    }

    /// The four block calls alone, to be made without this vtable (see
    /// [`PlainCalls`]).
    #[inline]
    pub fn plain_calls(&self) -> PlainCalls {
        PlainCalls { ctx: self.ctx, malloc: self.malloc, calloc: self.calloc, realloc: self.realloc, free: self.free }
    }

    /// The same functions with another `ctx` (an instance's, from `create`).
    #[inline]
    pub fn with_ctx(&self, ctx: *mut c_void) -> VTable {
        VTable { ctx, ..*self }
    }

    /// Whether the plugin has its own aligned allocation.
    #[inline]
    pub fn has_aligned_alloc(&self) -> bool {
        self.aligned_alloc.is_some()
    }

    /// Whether the plugin makes instances (`create`).
    #[inline]
    pub fn has_create(&self) -> bool {
        self.create.is_some()
    }

    /// Whether the handler reports statistics.
    #[inline]
    pub fn has_stats(&self) -> bool {
        self.stats.is_some()
    }

    /// Whether the plugin can share blocks with other processes: it has
    /// both `locate` and `resolve` (ABI 1.2).
    #[inline]
    pub fn is_shareable(&self) -> bool {
        self.locate.is_some() && self.resolve.is_some()
    }

    /// Whether the plugin answers usable sizes (ABI 1.3 `usable_size`).
    #[inline]
    pub fn has_usable_size(&self) -> bool {
        self.usable_size.is_some()
    }
}

/// The calls. Each `# Safety` section starts from one rule, "the call is
/// serialised": the caller holds the lock of the handler owning this
/// vtable, or that handler is thread-safe.
impl VTable {
    /// `malloc(ctx, size)`.
    ///
    /// # Safety
    /// The call is serialised; `size > 0`.
    #[inline(always)]
    pub unsafe fn malloc(&self, size: usize) -> *mut u8 {
        // SAFETY: `malloc` is this handler's ABI function and `ctx` its own;
        // the caller serialises the call and passes a non-zero size.
        unsafe { (self.malloc)(self.ctx, size) as *mut u8 }
    }

    /// `calloc(ctx, nelem, elsize)`.
    ///
    /// # Safety
    /// The call is serialised; `nelem * elsize` does not overflow and is
    /// non-zero.
    #[inline(always)]
    pub unsafe fn calloc(&self, nelem: usize, elsize: usize) -> *mut u8 {
        // SAFETY: as in `malloc`, with the caller's product guarantee.
        unsafe { (self.calloc)(self.ctx, nelem, elsize) as *mut u8 }
    }

    /// `realloc(ctx, ptr, old_size, new_size)`.
    ///
    /// # Safety
    /// The call is serialised; `ptr` is a live block of this handler of
    /// `old_size > 0` bytes (or `old_size` is 0 and the handler declared
    /// `FLAG_SIZELESS_FREE`); `new_size > 0`.
    #[inline(always)]
    pub unsafe fn realloc(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees the block, the sizes and serialisation.
        unsafe { (self.realloc)(self.ctx, ptr as *mut c_void, old_size, new_size) as *mut u8 }
    }

    /// `free(ctx, ptr, size)`.
    ///
    /// # Safety
    /// The call is serialised; `ptr` is a live block of this handler of
    /// `size > 0` bytes (or `size` is 0 and the handler declared
    /// `FLAG_SIZELESS_FREE`) and is not used again.
    #[inline(always)]
    pub unsafe fn free(&self, ptr: *mut u8, size: usize) {
        // SAFETY: the caller guarantees the block, its size and serialisation.
        unsafe { (self.free)(self.ctx, ptr as *mut c_void, size) }
    }

    /// `aligned_alloc(ctx, alignment, size)`; NULL when the plugin has none.
    ///
    /// # Safety
    /// The call is serialised; `alignment` is a power of two; `size > 0`.
    #[inline]
    pub unsafe fn aligned_alloc(&self, alignment: usize, size: usize) -> *mut u8 {
        match self.aligned_alloc {
            // SAFETY: `f` is this handler's ABI `aligned_alloc` and `ctx` its own;
            // the caller guarantees the arguments and serialisation.
            Some(f) => unsafe { f(self.ctx, alignment, size) as *mut u8 },
            None => core::ptr::null_mut(),
        }
    }

    /// `stats(ctx, &out)`: the statistics, or `None` if the plugin has none
    /// or its call failed.
    ///
    /// # Safety
    /// The call is serialised.
    #[inline]
    pub unsafe fn stats(&self) -> Option<MemplugStats> {
        let f = self.stats?;
        let mut out = MemplugStats { struct_size: size_of::<MemplugStats>() as u64, ..Default::default() };
        // SAFETY: `f` is the handler's statistics function (ABI signature),
        // `ctx` its own, `out` a valid writable struct whose `struct_size` is
        // set; the caller serialises the call.
        let rc = unsafe { f(self.ctx, &mut out) };
        (rc == 0).then_some(out)
    }

    /// `create(ctx, options, &out)`: a new instance's `ctx` and the alignment
    /// it reports (at least `alignment`), or why not. Allocates nothing:
    /// the options come as a C string, and a failure as the plugin's own
    /// status ([`CreateFailure`]) with its message bytes left in `error`.
    ///
    /// # Safety
    /// The call is serialised.
    #[inline]
    pub unsafe fn create(
        &self,
        options: &CStr,
        alignment: usize,
        error: &mut [u8; memplug_abi::ERROR_CAP],
    ) -> Result<(*mut c_void, usize), CreateFailure> {
        let Some(create) = self.create else { return Err(CreateFailure::NoCreate) };
        let mut out = MemplugInstance {
            struct_size: size_of::<MemplugInstance>() as u64,
            ctx: core::ptr::null_mut(),
            alignment: alignment as u64,
            error: [0; memplug_abi::ERROR_CAP],
        };
        // SAFETY: `create` is this plugin's ABI function and `ctx` its own, the
        // options a live NUL-terminated string, `out` a writable struct with
        // `struct_size` set; the caller serialises the call.
        let rc = unsafe { create(self.ctx, options.as_ptr(), &mut out) };
        if rc != 0 {
            *error = out.error;
            return Err(CreateFailure::Status(rc));
        }
        let align = (out.alignment as usize).max(alignment);
        if !align.is_power_of_two() {
            return Err(CreateFailure::BadAlignment(align));
        }
        Ok((out.ctx, align))
    }

    /// `locate(ctx, ptr, size, &out)`: where the range lives, or the
    /// plugin's non-zero status (`SHARE_FOREIGN` when it has no `locate`).
    ///
    /// # Safety
    /// The call is serialised. (`ptr` may be any address: the ABI forbids
    /// `locate` to dereference it.)
    #[inline]
    pub unsafe fn locate(&self, ptr: *const u8, size: usize) -> Result<MemplugLocation, i32> {
        let Some(locate) = self.locate else { return Err(memplug_abi::SHARE_FOREIGN) };
        let mut out = MemplugLocation::new();
        // SAFETY: `locate` is this plugin's ABI function and `ctx` its own;
        // `out` is a writable, zeroed record with `struct_size` set; the ABI
        // says `ptr` is only compared, never read; the caller serialises.
        match unsafe { locate(self.ctx, ptr.cast(), size, &mut out) } {
            0 => Ok(out),
            status => Err(status),
        }
    }

    /// `resolve(ctx, location, &out)`: the range's address in this process,
    /// or the plugin's non-zero status (`SHARE_FOREIGN` when it has no
    /// `resolve`, or returned NULL with status 0).
    ///
    /// # Safety
    /// The call is serialised.
    #[inline]
    pub unsafe fn resolve(&self, location: &MemplugLocation) -> Result<NonNull<u8>, i32> {
        let Some(resolve) = self.resolve else { return Err(memplug_abi::SHARE_FOREIGN) };
        let mut out: *mut c_void = core::ptr::null_mut();
        // SAFETY: `resolve` is this plugin's ABI function and `ctx` its own;
        // `location` is a whole, readable record and `out` a writable slot;
        // the caller serialises the call.
        match unsafe { resolve(self.ctx, location, &mut out) } {
            0 => NonNull::new(out.cast()).ok_or(memplug_abi::SHARE_FOREIGN),
            status => Err(status),
        }
    }

    /// `usable_size(ctx, ptr)`: the usable size of the block at `ptr`, or
    /// `None` when the plugin has no `usable_size`.
    ///
    /// # Safety
    /// The call is serialised; `ptr` is a live block of this handler, or the
    /// handler declared `FLAG_KNOWS_FOREIGN` (its `usable_size` then answers
    /// 0 for any other pointer without reading through it).
    #[inline]
    pub unsafe fn usable_size(&self, ptr: *const u8) -> Option<usize> {
        let f = self.usable_size?;
        // SAFETY: `f` is this plugin's ABI `usable_size` and `ctx` its own;
        // the caller guarantees the pointer and serialisation.
        Some(unsafe { f(self.ctx, ptr.cast()) })
    }

    /// `destroy(ctx)` on this instance vtable's `ctx`, if the plugin has it.
    ///
    /// # Safety
    /// The call is serialised; this vtable's `ctx` came from `create`, all
    /// its blocks are freed, and it is destroyed once.
    #[inline]
    pub unsafe fn destroy(&self) {
        if let Some(destroy) = self.destroy {
            // SAFETY: per the contract: a live instance ctx from `create`,
            // with no blocks left, destroyed exactly once, serialised.
            unsafe { destroy(self.ctx) }
        }
    }
}
