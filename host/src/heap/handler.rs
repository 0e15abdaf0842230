//! [`Handler`]: a validated, registered allocator — the type, the state
//! behind it, and its API. Every method of the type is here but two
//! features that sit above it and keep their calls beside them: the guards
//! it hands out ([`Handler::lock`], in `lock.rs`) and sharing blocks with
//! other processes ([`Handler::share`], [`Handler::attach`], in `share.rs`,
//! which sits above buffers). The block calls (`alloc`, `free`, …) are
//! written once for a handler and its guard, in `calls.rs`; the calls into
//! the plugin are in `raw/`.
//!
//! A `Handler` is a `Copy` reference to handler state that lives for the rest
//! of the process: libraries are never closed, and a handler's state is never
//! freed, so "a handler lives as long as any buffer it made" holds without
//! reference counting on the allocation path.
//!
//! # Aligned requests
//! [`Handler::alloc_aligned`] serves any power-of-two alignment: with the
//! plugin's `aligned_alloc` (ABI 1.1) when it has one, with a plain
//! allocation when the handler's declared alignment already suffices, and
//! otherwise by over-allocating and remembering the original pointer just
//! before the aligned block. [`Handler::aligned_strategy`] says which.
//!
//! # Instances
//! A plugin with `create` (ABI 1.1) makes instances configured by options
//! ([`Handler::instantiate`]). An instance is a handler of its own with a
//! counted life: the plugin's `destroy` runs once, after the [`Instance`]
//! owner is dropped *and* the last block of that instance is freed. Only
//! instances pay for this count; other handlers have no reference counting
//! on the allocation path.
//!
//! # Zero-size requests
//! A request for 0 bytes (`alloc(0)`, `alloc_zeroed(0, n)`, `realloc` to 0)
//! is served as a request for 1 byte: the result is a unique, non-null,
//! freeable pointer, and plugins never see a size of 0. `free` and `realloc`
//! apply the same rounding to the size they pass on, so the plugin always
//! gets back the size it allocated.

use crate::heap::error::{AllocError, InstanceError, LockError};
use crate::heap::guarded::would_block;
use crate::heap::info::HandlerInfo;
use crate::heap::raw::ctx_owner::CtxOwner;
use crate::heap::raw::raw_handler::RawHandler;
use crate::heap::raw::raw_handler::Refused;
use crate::heap::raw::raw_handler::{CreateError, InstanceOwner};
pub use memplug_callcore::DirectCalls;
use memplug_callcore::VTable;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ptr::NonNull;

/// A validated handler, not installed yet: what the loader (`load`) makes
/// and the registry installs once its name is known to be free.
pub(crate) struct Prepared {
    pub(crate) vtable: VTable,
    pub(crate) info: HandlerInfo,
    /// The table behind `vtable`'s `ctx`, for trampolines: freed if this is
    /// dropped (the handler refused), kept once it is installed.
    pub(crate) ctx: Option<CtxOwner>,
}

/// The state behind a [`Handler`], leaked on installation. `repr(C)` keeps
/// the core (whose first field is the hot path's flag) first.
#[repr(C)]
pub(crate) struct HandlerState {
    /// The functions, the lock and the counts: every call goes through it.
    pub(crate) raw: RawHandler,
    /// Everything else known about the handler.
    pub(crate) info: HandlerInfo,
}

/// A registered allocator. Cheap to copy; compares by identity.
///
/// Its methods (allocation, instances, locking) are documented in the
/// [`handler`](crate::heap::handler) module.
///
/// ```
/// let h = memplug::current::default_handler();
/// let p = h.alloc(64).unwrap();
/// // SAFETY: `p` came from `h.alloc(64)` and is not used again.
/// unsafe { h.free(p, 64) };
/// ```
#[derive(Clone, Copy)]
pub struct Handler {
    pub(crate) state: &'static HandlerState,
}

impl Handler {
    /// The key of identity (and of the global lock order): the address of
    /// the handler's state.
    #[inline]
    pub(crate) fn key(self) -> usize {
        std::ptr::from_ref(self.state) as usize
    }
}

// A handler's state is immutable but for its lock and instance count, which
// a panic cannot leave half-updated (the lock has no poisoning, and a count
// changes in one atomic step), so observing a handler after a caught panic is
// as sound as before it.
impl std::panic::RefUnwindSafe for Handler {}
impl std::panic::UnwindSafe for Handler {}

impl PartialEq for Handler {
    fn eq(&self, other: &Handler) -> bool {
        std::ptr::eq(self.state, other.state)
    }
}

impl Eq for Handler {}

impl Hash for Handler {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = &self.state.info;
        f.debug_struct("Handler")
            .field("name", &info.name)
            .field("version", &info.version.to_string())
            .field("abi", &info.abi())
            .field("alignment", &self.state.raw.alignment())
            .field("source", &info.source.to_string())
            .finish()
    }
}

impl fmt::Display for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.state.raw.name())
    }
}

/// How [`Handler::alloc_aligned`] serves alignments above the handler's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlignedStrategy {
    /// The plugin's own `aligned_alloc` (ABI 1.1).
    Plugin,
    /// The host over-allocates by the alignment plus a pointer and aligns
    /// within the block.
    OverAllocate,
}

impl Handler {
    /// Install a validated handler for the rest of the process (without
    /// registering its name anywhere).
    pub(crate) fn install(prepared: Prepared) -> Handler {
        let Prepared { vtable, info, ctx } = prepared;
        if let Some(ctx) = ctx {
            ctx.keep();
        }
        let name: &'static str = Box::leak(info.name.clone().into_boxed_str());
        let raw = RawHandler::new(vtable, info.thread_safe(), info.alignment, name);
        let handler = Handler { state: Box::leak(Box::new(HandlerState { raw, info })) };
        handler.raw().hold_across_forks();
        handler
    }

    #[inline]
    fn raw(&self) -> &'static RawHandler {
        &self.state.raw
    }

    /// Make an instance of this plugin configured by `options` (a
    /// `key=value,…` string, possibly empty) through its ABI 1.1 `create`.
    /// The plugin's own error message comes back in
    /// [`InstanceError::BadOptions`].
    ///
    /// The returned [`Instance`] owns the instance: `destroy` runs after it
    /// is dropped and the last buffer of the instance is freed.
    ///
    /// Errors: `no-options` (no `create`), `bad-options` (the plugin's
    /// refusal), `instance-destroyed` when `self` is an instance that is
    /// destroyed already, and `would-block` when this thread holds another
    /// handler's lock and `self`'s is taken by another thread (see
    /// [the lock rules](crate::heap::lock)).
    pub fn instantiate(&self, options: &str) -> Result<Instance, InstanceError> {
        if !self.takes_options() {
            return Err(InstanceError::NoOptions { name: self.name().to_string() });
        }
        let raw = self.raw().create(options, self.name()).map_err(|e| match e {
            CreateError::Plugin(message) => {
                InstanceError::BadOptions { name: self.name().to_string(), options: options.to_string(), message }
            }
            CreateError::Call(Refused::Gone) => InstanceError::Destroyed { name: self.name().to_string() },
            CreateError::Call(Refused::WouldBlock) => InstanceError::Lock(would_block(self.name())),
        })?;
        let mut info = self.info().clone();
        info.alignment = raw.alignment();
        info.options = Some(options.to_string());
        let handler = Handler { state: Box::leak(Box::new(HandlerState { raw, info })) };
        handler.raw().hold_across_forks();
        let owner = handler.raw().take_owner().expect("a new instance still has its owner's reference");
        tracing::debug!(name = self.name(), options, alignment = handler.alignment(), "created instance");
        Ok(Instance { handler, _owner: owner })
    }

    /// The handler's unique name.
    pub fn name(&self) -> &'static str {
        self.raw().name()
    }

    /// Everything known about the handler.
    pub fn info(&self) -> &'static HandlerInfo {
        &self.state.info
    }

    /// Whether calls go straight to the plugin (`true`) or through the
    /// handler's lock (`false`).
    pub fn is_thread_safe(&self) -> bool {
        self.raw().is_thread_safe()
    }

    /// The alignment every block of this handler has.
    #[inline]
    pub fn alignment(&self) -> usize {
        self.raw().alignment()
    }

    /// How alignments above [`alignment`](Handler::alignment) are served.
    pub fn aligned_strategy(&self) -> AlignedStrategy {
        if self.raw().vtable().has_aligned_alloc() { AlignedStrategy::Plugin } else { AlignedStrategy::OverAllocate }
    }

    /// Whether this handler is an instance made by [`instantiate`](Handler::instantiate).
    pub fn is_instance(&self) -> bool {
        self.raw().is_instance()
    }

    /// Whether the plugin makes instances (has `create`).
    pub fn takes_options(&self) -> bool {
        self.raw().vtable().has_create()
    }

    /// The plugin's `malloc` and `free` for a caller that makes these calls
    /// itself, on a path where the load of this handler's core and its
    /// branch are too much (the NumPy bridge does): `Some` only when a call
    /// needs nothing around it — the handler is thread-safe and not an
    /// instance. Others (locked, counted) are called through
    /// [`alloc`](Handler::alloc) and [`free`](Handler::free) only.
    ///
    /// ```
    /// let system = memplug::current::builtin();
    /// let calls = system.direct_calls().expect("libc is thread-safe");
    /// // SAFETY: a non-zero size; the block is freed once, with its size.
    /// unsafe {
    ///     let p = std::ptr::NonNull::new(calls.malloc(64)).expect("memory");
    ///     calls.free(p, 64);
    /// }
    /// ```
    pub fn direct_calls(&self) -> Option<DirectCalls> {
        self.raw().direct_calls()
    }

    /// The plugin's `malloc`, `calloc`, `realloc` and `free`, for the
    /// global allocator's hot paths: `Some` exactly when
    /// [`direct_calls`](Handler::direct_calls) is.
    pub(crate) fn plain_calls(&self) -> Option<memplug_callcore::PlainCalls> {
        self.raw().plain_calls()
    }

    /// Whether the handler reports statistics.
    pub fn has_stats(&self) -> bool {
        self.raw().vtable().has_stats()
    }

    /// Whether blocks of this handler can be reached from other processes:
    /// the plugin has ABI 1.2 `locate` and `resolve` (see
    /// [`share`](crate::heap::share)).
    pub fn is_shareable(&self) -> bool {
        self.raw().is_shareable()
    }

    /// Whether the plugin answers usable sizes (ABI 1.3 `usable_size`; a
    /// handler taken by symbol name when its manifest names one).
    pub fn has_usable_size(&self) -> bool {
        self.raw().has_usable_size()
    }

    /// The usable size of a live block of this handler: at least the size
    /// it was allocated (or last resized) with; the block's bytes up to it
    /// may be used. `None` when the plugin has no `usable_size`, for an
    /// instance that is destroyed, and when the call would have to wait for
    /// this handler's lock while this thread holds another handler's (see
    /// [the lock rules](crate::heap::lock)).
    ///
    /// # Safety
    /// `ptr` is a live block of this handler from [`alloc`](Handler::alloc),
    /// [`alloc_zeroed`](Handler::alloc_zeroed) or
    /// [`realloc`](Handler::realloc) (or from
    /// [`alloc_aligned`](Handler::alloc_aligned) when
    /// [`aligned_strategy`](Handler::aligned_strategy) is
    /// [`AlignedStrategy::Plugin`] or the alignment is at most
    /// [`alignment`](Handler::alignment): a block the host over-allocated
    /// starts inside the plugin's), unless the handler
    /// [knows foreign pointers](Handler::knows_foreign). The plugin's
    /// function reads the allocator's own records of the block: on another
    /// pointer it may fault.
    ///
    /// ```
    /// let libc = memplug::current::builtin();
    /// let p = libc.alloc(100).expect("memory");
    /// // SAFETY: a live block of `libc`, made by `alloc`.
    /// let usable = unsafe { libc.usable_size(p) }.expect("libc answers usable sizes");
    /// assert!(usable >= 100);
    /// // SAFETY: the block, freed once with its size.
    /// unsafe { libc.free(p, 100) };
    /// ```
    #[allow(unsafe_code)]
    pub unsafe fn usable_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        // SAFETY: the caller's contract is the call's.
        unsafe { self.raw().usable_size(ptr.as_ptr()) }.ok().flatten()
    }

    /// The usable size at any address, for a handler that
    /// [knows foreign pointers](Handler::knows_foreign): `Some(0)` for
    /// memory it did not make, otherwise as [`usable_size`](Handler::usable_size).
    /// `None` for a handler that does not know foreign pointers (asking it
    /// about one could fault), or as `usable_size` says.
    // `ptr` is never dereferenced, by the host or (under FLAG_KNOWS_FOREIGN,
    // checked first) by the plugin: any address is fine, as for `share`.
    #[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
    pub fn usable_size_any(&self, ptr: *const u8) -> Option<usize> {
        if !self.knows_foreign() {
            return None;
        }
        // SAFETY: the handler declared FLAG_KNOWS_FOREIGN (and validation
        // made sure it has `usable_size`): any pointer may be passed.
        unsafe { self.raw().usable_size(ptr) }.ok().flatten()
    }

    /// Free a block passing size 0 to the plugin, as a host may for a
    /// handler that declares `FLAG_SIZELESS_FREE` (the conformance check
    /// `sizeless-free` does).
    ///
    /// # Safety
    /// `ptr` is a live block of this handler from [`alloc`](Handler::alloc),
    /// [`alloc_zeroed`](Handler::alloc_zeroed) or
    /// [`realloc`](Handler::realloc) and is not used again; the handler
    /// declares `FLAG_SIZELESS_FREE` ([`sizeless_free`](Handler::sizeless_free)).
    #[allow(unsafe_code)]
    pub(crate) unsafe fn free_sizeless(&self, ptr: NonNull<u8>) {
        // SAFETY: the caller's contract is the call's.
        unsafe { self.raw().free_sizeless(ptr) }
    }

    /// Resize a block passing old size 0 to the plugin (see
    /// [`free_sizeless`](Handler::free_sizeless)); on error the old block is
    /// untouched.
    ///
    /// # Safety
    /// As for [`free_sizeless`](Handler::free_sizeless); on success the old
    /// pointer is not used again.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn realloc_sizeless(&self, ptr: NonNull<u8>, new_size: usize) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract is the call's.
        unsafe { self.raw().realloc_sizeless(ptr, new_size) }
    }

    /// Whether `free` and `realloc` of this handler need no size (ABI 1.3
    /// `FLAG_SIZELESS_FREE`; see [`HandlerInfo::sizeless_free`]).
    pub fn sizeless_free(&self) -> bool {
        self.info().sizeless_free()
    }

    /// Whether the handler's `usable_size` answers 0 for pointers it did
    /// not make (ABI 1.3 `FLAG_KNOWS_FOREIGN`, with `usable_size`).
    pub fn knows_foreign(&self) -> bool {
        self.info().knows_foreign() && self.has_usable_size()
    }

    /// Statistics, if the plugin reports them (the ABI 1.1 `stats` field, or
    /// a 1.0 plugin's `_stats` companion of its entry function).
    ///
    /// `None` when the plugin reports none, for an instance that is
    /// destroyed (the plugin is not called), and when the call would have to
    /// wait for this handler's lock while this thread holds another
    /// handler's (see [the lock rules](crate::heap::lock));
    /// [`stats_checked`](Handler::stats_checked) tells the last case apart.
    pub fn stats(&self) -> Option<memplug_abi::MemplugStats> {
        self.stats_checked().ok().flatten()
    }

    /// [`Handler::stats`], returning [`LockError::WouldBlock`] (code
    /// `would-block`) instead of `None` when this thread holds another
    /// handler's lock and this one is taken by another thread. A thread that
    /// holds no lock waits for it, as any call does.
    pub fn stats_checked(&self) -> Result<Option<memplug_abi::MemplugStats>, LockError> {
        self.raw().stats().map_err(|_| would_block(self.name()))
    }
}

/// The owner of an instance made by [`Handler::instantiate`]. Use
/// [`handler`](Instance::handler) to allocate from it (or make it current);
/// dropping the owner lets the instance go once its last block is freed.
pub struct Instance {
    handler: Handler,
    /// Released when the `Instance` is dropped.
    _owner: InstanceOwner,
}

crate::heap::calls::block_calls!(Handler, "", |h| core: h.raw(), handler: *h);

impl Instance {
    /// The instance's handler.
    pub fn handler(&self) -> Handler {
        self.handler
    }
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instance").field("handler", &self.handler).finish()
    }
}
