//! [`RawHandler`], the handler core, and [`Held`], the proof that its
//! lock is held: the one type every call into a plugin goes through, with
//! its whole API in this file (a hashbrown-style core: long, and in one
//! place). Its sections, in order:
//!
//! # The state
//! [`RawHandler`]'s state: a plugin's vtable with the lock and the counts
//! that make calling it sound, and what can be read of it without calling
//! the plugin. The calls follow in the sections below.
//!
//! # Under the lock: `Held`
//! [`Held`]: the calls into a handler while its lock is held, and what
//! can only be done holding it: an instance's destruction, and a free that
//! may not wait for the lock (done now, or left to the lock's holder).
//!
//! A `Held` is the proof that calls are serialised; every call of the
//! handler core, per-call or batched, ends up there (but the direct hot path
//! of the per-call API). `Held` also serves alignments above the handler's own:
//! through the plugin's `aligned_alloc`, or host over-allocation
//! (`memplug_callcore::aligned_raw`).
//!
//! A `Held` that holds a lock frees the handler's pending frees
//! (`pending.rs`) when it takes the lock and again when it releases it, and
//! counts, per thread, how many locks the thread holds: a thread holding any
//! lock never waits for another handler's lock to free a block
//! ([`RawHandler::now_or_later`]).
//!
//! # Calls counted as users
//! The one way a call into a plugin that is neither an allocation nor a
//! free reaches it — `stats`, `create`, `locate`, `resolve`: **counted as a
//! user of the instance** for the length of the call, and under the
//! handler's lock taken by the **no-wait rule**.
//!
//! - A [`User`] counts in an instance's `Life` as a live block would, so
//!   the instance cannot be destroyed while the call runs (another thread
//!   freeing its last block meanwhile leaves the destruction to whoever
//!   leaves last — possibly this call, when its `User` is dropped). An
//!   instance that is gone already counts no new user: the call is not
//!   made, and returns [`Refused::Gone`]. A handler that is not an
//!   instance counts nothing (it is never destroyed).
//! - The lock: a thread that holds no handler lock waits for it, as any
//!   per-call operation does; a thread that holds another handler's lock
//!   takes it only if that needs no wait (it is free, or this thread's),
//!   and otherwise returns [`Refused::WouldBlock`] — waiting could close a
//!   cycle with a thread that holds this lock and waits for one of ours.
//!
//! Allocation and free paths (the per-call API, `Held`) do not come here:
//! a live block already keeps its instance alive, and allocation keeps its
//! own documented rule. [`Retained`] is a `User`
//! that lives as long as memory attached through the instance.
//!
//! # The per-call API
//! The per-call API of the handler core [`RawHandler`]. Every call into a plugin goes through the core, and it keeps
//! the promises the ABI makes to plugins and the host makes to itself:
//!
//! - a plugin that is not thread-safe is only ever called by the thread
//!   holding its lock: the per-call methods take it, and [`Held`] — the only
//!   other way to call — exists only while its thread holds it;
//! - plugins never see a size of 0 (requests are served as 1 byte, and the
//!   same rounding is applied to the sizes passed back to `free`/`realloc`),
//!   nor an overflowing `nelem * elsize`, nor an alignment that is not a
//!   power of two;
//! - an instance (made by `create`) counts its owner and its live blocks
//!   (`life.rs`); when both are gone its `destroy` runs, once, and it
//!   refuses further allocations.
//!
//! - every call that is not an allocation or a free (`stats`, `create`,
//!   `locate`, `resolve`) is counted as a user of the instance, so it never
//!   reaches a destroyed one, and follows the no-wait rule (calls counted as users);
//! - a thread that holds any handler's lock never waits for another
//!   handler's lock to *free* a block: it frees it at once if the lock is
//!   free (or its own), and otherwise hands it to the handler's queue of
//!   pending frees (`pending.rs`), which the lock's holder drains. So frees
//!   can never close a cycle of threads waiting for each other's locks.
//!
//! Handlers that are thread-safe and not instances are *direct*: their
//! per-call path is one load, one branch and one indirect call. Everything
//! else goes through [`Held`], whose `counted` is the one place
//! that counts a block, calls, and undoes the count when the plugin returns
//! NULL.
//!
//! # Sharing blocks (ABI 1.2)
//! The calls through which a handler shares its blocks with other processes
//! (ABI 1.2 `locate`/`resolve`), and [`Retained`]: a count on an instance
//! that keeps it — and so its attachment to a segment — alive while memory
//! reached through it is in use.
//!
//! The allocation paths do not change for sharing: these are the only
//! additions to the handler core for it.
//!
//! # Usable sizes (ABI 1.3)
//! The ABI 1.3 calls: the one that answers a block's usable size
//! (`usable_size`), and `free` and `realloc` made with size 0, as a host may
//! make them for a handler that declares `FLAG_SIZELESS_FREE` (the
//! conformance check `sizeless-free` makes them).
//!
//! `usable_size`, like `stats` and `locate`, is neither an allocation nor a
//! free: it is made as a user call is (counted as a user of the instance,
//! under the lock taken by the no-wait rule). The sizeless free and realloc
//! follow the rules of the ordinary ones (the per-call API).

use super::barrier;
use super::life::Life;
use super::pending::{Deferred, HandlerLock, PendingBlock};
use super::relock::ReentrantGuard;
use crate::heap::error::AllocError;
use memplug_abi::{MemplugLocation, MemplugStats};
use memplug_callcore::aligned_raw::{align_within, block_start, over_allocation};
use memplug_callcore::{CreateFailure, DirectCalls, PlainCalls, VTable, served};
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;

// ---- The state ----

/// A handler's vtable with the lock and counts that make calling it sound.
/// `repr(C)` keeps `direct` and the vtable's first fields on one cache line.
#[repr(C)]
pub(crate) struct RawHandler {
    /// Thread-safe and not an instance: calls go straight to the plugin,
    /// with no lock and no count (the hot path checks only this).
    pub(super) direct: bool,
    pub(super) vtable: VTable,
    /// The alignment every block of the plugin has.
    pub(super) alignment: usize,
    /// The handler's name, for errors.
    pub(super) name: &'static str,
    /// `Some` for handlers that are not thread-safe: every call holds it.
    /// Reentrant, so that a thread holding a [`Held`](Held)
    /// may also use the per-call path; with the frees waiting for it.
    pub(super) lock: Option<HandlerLock>,
    /// `Some` for instances made by `create`.
    pub(super) life: Option<Life>,
}

impl RawHandler {
    /// A handler core for `vtable`. `thread_safe` is the plugin's (or the
    /// by-symbol spec's) declaration: without it every call is locked.
    /// `alignment` is the alignment the plugin promises for every block.
    pub(crate) fn new(vtable: VTable, thread_safe: bool, alignment: usize, name: &'static str) -> RawHandler {
        let lock = (!thread_safe).then(HandlerLock::new);
        RawHandler { direct: thread_safe, vtable, alignment, name, lock, life: None }
    }

    /// Whether calls need no lock.
    pub(crate) fn is_thread_safe(&self) -> bool {
        self.lock.is_none()
    }

    /// Whether this is an instance made by
    /// [`create`](RawHandler::create).
    pub(crate) fn is_instance(&self) -> bool {
        self.life.is_some()
    }

    /// The alignment every block has.
    #[inline]
    pub(crate) fn alignment(&self) -> usize {
        self.alignment
    }

    /// The handler's name.
    #[inline]
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The plugin's `malloc` and `free`, to be called without this core:
    /// only for a direct handler (thread-safe, not an instance), whose calls
    /// need no lock and no count.
    pub(crate) fn direct_calls(&self) -> Option<DirectCalls> {
        self.direct.then(|| self.vtable.direct_calls())
    }

    /// The plugin's four block calls, to be called without this core: only
    /// for a direct handler, as [`direct_calls`](RawHandler::direct_calls).
    pub(crate) fn plain_calls(&self) -> Option<PlainCalls> {
        self.direct.then(|| self.vtable.plain_calls())
    }

    /// The plugin's functions, for what they have (not to call them).
    pub(crate) fn vtable(&self) -> &VTable {
        &self.vtable
    }

    #[cold]
    pub(super) fn out_of_memory(&self, size: usize) -> AllocError {
        AllocError::OutOfMemory { handler: self.name, size }
    }

    /// Count a new block of an instance; `Err` once the instance is gone.
    #[inline]
    pub(super) fn enter_block(&self) -> Result<(), AllocError> {
        match &self.life {
            Some(life) if !life.enter() => Err(AllocError::InstanceGone { handler: self.name }),
            _ => Ok(()),
        }
    }

    /// The plain block behind a block of `size` bytes made by
    /// `alloc_aligned` with `alignment` (the block itself, or the
    /// over-allocation it was carved from): what the plugin's `free` must be
    /// given.
    ///
    /// # Safety
    /// `ptr` was returned by `alloc_aligned(size, alignment)` of this
    /// handler (or `realloc_aligned` to `size`) and is live.
    pub(super) unsafe fn plain_block(&self, ptr: NonNull<u8>, size: usize, alignment: usize) -> PendingBlock {
        let size = served(size);
        if alignment <= self.alignment || self.vtable.has_aligned_alloc() {
            // From `malloc` or the plugin's `aligned_alloc`, both released by
            // the ordinary `free`.
            return PendingBlock { ptr, size };
        }
        // SAFETY: the block came from host over-allocation (`align_within`) and is live.
        let start = unsafe { block_start(ptr) };
        let total = over_allocation(size, alignment).expect("it fitted when the block was allocated");
        PendingBlock { ptr: start, size: total }
    }
}

// ---- Under the lock: `Held` ----

thread_local! {
    /// How many handler locks this thread holds through `Held`s (a nested,
    /// reentrant `Held` counts again).
    static HOLDING: Cell<usize> = const { Cell::new(0) };
}

/// Whether this thread holds the lock of any handler.
#[inline]
fn holds_any_lock() -> bool {
    HOLDING.with(|n| n.get() > 0)
}

fn count_lock(delta: isize) {
    HOLDING.with(|n| n.set(n.get().wrapping_add_signed(delta)));
}

/// Proof that calls into a handler are serialised: while a `Held` lives,
/// this thread holds the handler's lock (if it has one). Neither `Send` nor
/// `Sync`: a lock is released by the thread that took it, and only that
/// thread may call through it. Made only by [`RawHandler::lock`].
pub(crate) struct Held<'a> {
    raw: &'a RawHandler,
    guard: Option<ReentrantGuard<'a>>,
    _not_send_sync: PhantomData<*const ()>,
}

impl<'a> Held<'a> {
    /// Take `raw`'s lock, if it has one, for the life of the `Held`.
    #[inline]
    pub(super) fn new(raw: &'a RawHandler) -> Held<'a> {
        let guard = raw.lock.as_ref().map(|l| l.mutex.lock());
        Held::holding(raw, guard)
    }

    /// Take `raw`'s lock if that needs no wait (it is free, or this thread
    /// holds it already); `None` if another thread holds it.
    #[inline]
    pub(super) fn try_new(raw: &'a RawHandler) -> Option<Held<'a>> {
        match &raw.lock {
            None => Some(Held::holding(raw, None)),
            Some(l) => l.mutex.try_lock().map(|g| Held::holding(raw, Some(g))),
        }
    }

    /// Take `raw`'s lock by the no-wait rule: waited for if this thread
    /// holds no lock; otherwise only taken if that needs no wait (`None`
    /// if another thread holds it).
    #[inline]
    pub(super) fn no_wait(raw: &'a RawHandler) -> Option<Held<'a>> {
        if holds_any_lock() { Held::try_new(raw) } else { Some(Held::new(raw)) }
    }

    /// The handler whose lock this holds.
    #[inline]
    pub(super) fn raw(&self) -> &'a RawHandler {
        self.raw
    }

    /// A `Held` over a guard just taken: counted, pending frees freed.
    #[inline]
    fn holding(raw: &'a RawHandler, guard: Option<ReentrantGuard<'a>>) -> Held<'a> {
        let held = Held { raw, guard, _not_send_sync: PhantomData };
        if held.guard.is_some() {
            count_lock(1);
            held.drain();
        }
        held
    }

    /// Free every pending block (the lock is held).
    #[inline]
    fn drain(&self) {
        let Some(lock) = &self.raw.lock else { return };
        if lock.pending.is_empty() {
            return;
        }
        self.drain_slow();
    }

    #[cold]
    #[inline(never)]
    fn drain_slow(&self) {
        let Some(lock) = &self.raw.lock else { return };
        for work in lock.pending.take() {
            match work {
                // SAFETY: a pending block is a live block of this handler
                // with the size its free was asked with, handed over by a
                // free that could not wait for the lock (`RawHandler::free_slow`)
                // and used by no one since; this `Held` holds the lock.
                Deferred::Free(block) => unsafe { self.free(block.ptr, block.size) },
                // SAFETY: `Destroy` is queued only by `RawHandler::destroy`,
                // which runs once, when `Life` decided the destruction.
                Deferred::Destroy => unsafe { self.destroy() },
            }
        }
    }

    /// Destroy the instance this holds.
    ///
    /// # Safety
    /// This handler is an instance whose `Life` decided its destruction (its
    /// owner is gone and no block of it is live, and no new block will be
    /// counted), and this is the one call made for that decision.
    unsafe fn destroy(&self) {
        // SAFETY: only an instance has a `Life`, and its vtable's `ctx` came
        // from `create`; the caller guarantees no block is left and that
        // this runs once; this `Held` serialises the call.
        unsafe { self.raw.vtable.destroy() }
    }

    /// Count a block, make it with `call`, undo the count if the plugin
    /// returned NULL. `size` is what was asked, for the error.
    #[inline]
    fn counted(&self, size: usize, call: impl FnOnce() -> *mut u8) -> Result<NonNull<u8>, AllocError> {
        self.raw.enter_block()?;
        NonNull::new(call()).ok_or_else(|| {
            self.raw.leave_block();
            self.raw.out_of_memory(size)
        })
    }

    /// Allocate `size` bytes (uninitialised); 0 is served as 1.
    #[inline]
    pub(crate) fn malloc(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
        let size = served(size);
        // SAFETY: this `Held` serialises the call; `size > 0`.
        self.counted(size, || unsafe { self.raw.vtable.malloc(size) })
    }

    /// Allocate `nelem * elsize` zeroed bytes. An overflowing product is
    /// refused before the plugin is called; a product of 0 is served as 1.
    #[inline]
    pub(crate) fn calloc(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError> {
        let Some(total) = nelem.checked_mul(elsize) else {
            return Err(AllocError::SizeOverflow { handler: self.raw.name, nelem, elsize });
        };
        let (nelem, elsize) = if total == 0 { (1, 1) } else { (nelem, elsize) };
        // SAFETY: this `Held` serialises the call; the product fits and is non-zero.
        self.counted(total, || unsafe { self.raw.vtable.calloc(nelem, elsize) })
    }

    /// Resize a block, keeping `min(old, new)` bytes; sizes of 0 are served
    /// as 1. On error the old block is untouched and still the caller's.
    ///
    /// # Safety
    /// `ptr` is a live block of this handler (from `malloc`, `calloc` or
    /// `realloc`) of `old` bytes. On success it is not used again.
    #[inline]
    pub(crate) unsafe fn realloc(&self, ptr: NonNull<u8>, old: usize, new: usize) -> Result<NonNull<u8>, AllocError> {
        let (old, new) = (served(old), served(new));
        // SAFETY: this `Held` serialises the call; the caller guarantees the
        // block and its size, rounded as it was when allocated; `new > 0`.
        let p = unsafe { self.raw.vtable.realloc(ptr.as_ptr(), old, new) };
        NonNull::new(p).ok_or_else(|| self.raw.out_of_memory(new))
    }

    /// Free a block.
    ///
    /// # Safety
    /// `ptr` is a live block of this handler of `size` bytes (its allocation
    /// size or last `realloc` size) and is not used again.
    #[inline]
    pub(crate) unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: this `Held` serialises the call; the caller guarantees the
        // block and its size, rounded as it was when allocated.
        unsafe { self.raw.vtable.free(ptr.as_ptr(), served(size)) };
        // An instance's last block may destroy it; that takes the lock again,
        // which the reentrant lock allows on this thread.
        self.raw.leave_block();
    }

    /// Allocate `size` bytes aligned to `alignment` (a power of two): a
    /// plain block when the handler's own alignment suffices, else the
    /// plugin's `aligned_alloc`, else host over-allocation (`memplug_callcore::aligned_raw`).
    pub(crate) fn alloc_aligned(&self, size: usize, alignment: usize) -> Result<NonNull<u8>, AllocError> {
        if !alignment.is_power_of_two() {
            return Err(AllocError::BadAlignment { handler: self.raw.name, alignment });
        }
        if alignment <= self.raw.alignment {
            return self.malloc(size);
        }
        let size = served(size);
        if self.raw.vtable.has_aligned_alloc() {
            // SAFETY: this `Held` serialises the call; `alignment` is a power of
            // two and `size > 0`.
            return self.counted(size, || unsafe { self.raw.vtable.aligned_alloc(alignment, size) });
        }
        let overflow = || AllocError::SizeOverflow { handler: self.raw.name, nelem: size, elsize: 1 };
        let total = over_allocation(size, alignment).ok_or_else(overflow)?;
        let block = self.malloc(total)?;
        // SAFETY: `block` holds `over_allocation(size, alignment)` writable
        // bytes, and `alignment` is a power of two.
        Ok(unsafe { align_within(block, alignment) })
    }
}

/// The free and the resize of an aligned block, written once for both
/// cores: [`Held`] (under the lock) and [`RawHandler`] (the per-call path:
/// its plain `free` with its rule for waiting, a resize under one hold of
/// the lock).
pub(crate) trait AlignedBlocks {
    /// The handler core the block belongs to.
    fn core(&self) -> &RawHandler;

    /// `f` with the lock held (this `Held`, or a hold taken for it).
    fn with_held<R>(&self, f: impl FnOnce(&Held<'_>) -> R) -> R;

    /// Free a plain block (`Held::free` or `RawHandler::free`).
    ///
    /// # Safety
    /// As for [`Held::free`].
    unsafe fn free_plain(&self, ptr: NonNull<u8>, size: usize);

    /// Free a block made by [`alloc_aligned`](Held::alloc_aligned).
    ///
    /// # Safety
    /// `ptr` was returned by `alloc_aligned(size, alignment)` of this handler
    /// (or `realloc_aligned` to `size` with `alignment`) and is not used
    /// again.
    unsafe fn free_aligned(&self, ptr: NonNull<u8>, size: usize, alignment: usize) {
        // SAFETY: the caller's contract.
        let block = unsafe { self.core().plain_block(ptr, size, alignment) };
        // SAFETY: the plain block the plugin made, of that size.
        unsafe { self.free_plain(block.ptr, block.size) }
    }

    /// Resize a block made by [`alloc_aligned`](Held::alloc_aligned),
    /// keeping its alignment and `min(old, new)` bytes. On error the old
    /// block is untouched.
    ///
    /// # Safety
    /// As for [`free_aligned`](AlignedBlocks::free_aligned) with `old`; on
    /// success the old pointer is not used again.
    unsafe fn realloc_aligned(
        &self,
        ptr: NonNull<u8>,
        old: usize,
        new: usize,
        alignment: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        self.with_held(|held| {
            if alignment <= held.raw.alignment {
                // SAFETY: forwarded: a plain block of this handler.
                return unsafe { held.realloc(ptr, old, new) };
            }
            let q = held.alloc_aligned(new, alignment)?;
            // SAFETY: both blocks are live and distinct, and hold at least
            // `min(old, new)` bytes.
            unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), q.as_ptr(), old.min(new)) };
            // SAFETY: the caller's contract for the old block.
            unsafe { held.free_aligned(ptr, old, alignment) };
            Ok(q)
        })
    }
}

impl AlignedBlocks for Held<'_> {
    fn core(&self) -> &RawHandler {
        self.raw
    }

    fn with_held<R>(&self, f: impl FnOnce(&Held<'_>) -> R) -> R {
        f(self)
    }

    unsafe fn free_plain(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: forwarded: the caller's contract.
        unsafe { self.free(ptr, size) }
    }
}

impl AlignedBlocks for RawHandler {
    fn core(&self) -> &RawHandler {
        self
    }

    fn with_held<R>(&self, f: impl FnOnce(&Held<'_>) -> R) -> R {
        f(&self.lock())
    }

    unsafe fn free_plain(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: forwarded: the caller's contract.
        unsafe { self.free(ptr, size) }
    }
}

impl Drop for Held<'_> {
    /// Free what is pending, release the lock, then make sure no block
    /// queued meanwhile is left behind: a thread that queued a block while
    /// this one held the lock set the queue's flag before it tested the
    /// lock; with a barrier on both sides (`barrier.rs`: the light one here,
    /// on every release), either it found the lock free (and drained the
    /// queue itself) or this check sees the flag. If the lock is taken again
    /// by then, its new holder does the same on release.
    fn drop(&mut self) {
        if self.guard.is_none() {
            return;
        }
        let raw = self.raw;
        let Some(lock) = &raw.lock else { return };
        self.drain();
        self.guard = None;
        count_lock(-1);
        loop {
            barrier::light();
            if lock.pending.is_empty() {
                return;
            }
            let Some(guard) = lock.mutex.try_lock() else { return };
            self.guard = Some(guard);
            count_lock(1);
            self.drain();
            self.guard = None;
            count_lock(-1);
        }
    }
}

impl RawHandler {
    /// Hold this handler's lock (if it has one) until the [`Held`] is
    /// dropped; calls through it do not lock again.
    #[inline]
    pub(crate) fn lock(&self) -> Held<'_> {
        Held::new(self)
    }

    /// Do `now` under the lock — or, if it cannot be had without a wait that
    /// could deadlock, leave `later` to the lock's holder. With no lock held
    /// by this thread, it waits for the lock as any call does. Holding some
    /// lock, it never waits: it runs `now` if the lock is free (or this
    /// thread's), and otherwise queues `later` (see `pending.rs` and
    /// `Held`'s drop).
    pub(super) fn now_or_later(&self, later: Deferred, now: impl FnOnce(&Held<'_>)) {
        if let Some(held) = Held::no_wait(self) {
            return now(&held);
        }
        let Some(lock) = &self.lock else { unreachable!("a handler without a lock is held at once") };
        lock.pending.push(later);
        barrier::heavy();
        // If the holder released the lock before it could see the work, do
        // it now (taking the lock drains the queue).
        drop(Held::try_new(self));
    }

    /// Uncount a block (freed, or its allocation failed); once the owner is
    /// gone too, destroy the instance after its last block.
    #[inline]
    pub(super) fn leave_block(&self) {
        if let Some(life) = &self.life
            && life.leave_block()
        {
            self.destroy();
        }
    }

    /// `Life` decided the destruction (called once for it): destroy the
    /// instance, now or (if this thread holds another lock and this one is
    /// taken) by the lock's next holder. The lock is reentrant, so a thread
    /// already holding it may be the one freeing the last block.
    #[cold]
    pub(super) fn destroy(&self) {
        tracing::debug!(name = self.name, "destroying instance");
        // SAFETY: the callers (`leave_block`, `InstanceOwner::drop`) call
        // this exactly when `Life` decided the destruction, which it does once.
        self.now_or_later(Deferred::Destroy, |held| unsafe { held.destroy() });
    }
}

// ---- Calls counted as users ----

/// Why a call was not made (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The instance is destroyed: its `ctx` is freed.
    Gone,
    /// This thread holds another handler's lock, and this one is taken by
    /// another thread: waiting could deadlock.
    WouldBlock,
}

/// One counted user of a handler's instance (nothing for a handler that is
/// not an instance); dropping it uncounts it, and destroys the instance if
/// it was the last user after its owner went.
pub(crate) struct User<'a> {
    raw: &'a RawHandler,
}

impl Drop for User<'_> {
    fn drop(&mut self) {
        self.raw.leave_block();
    }
}

impl RawHandler {
    /// Count a user of this handler (see [`User`]); `None` for an instance
    /// that is gone.
    pub(crate) fn user(&self) -> Option<User<'_>> {
        self.enter_block().ok()?;
        Some(User { raw: self })
    }

    /// This handler's lock by the no-wait rule: waited for if this thread
    /// holds no lock; otherwise only taken if that needs no wait.
    pub(super) fn lock_no_wait(&self) -> Result<Held<'_>, Refused> {
        Held::no_wait(self).ok_or(Refused::WouldBlock)
    }

    /// Run `call` with the plugin's functions, under the lock taken by the
    /// no-wait rule and counted as a user of the instance.
    pub(super) fn call<R>(&self, call: impl FnOnce(&VTable) -> R) -> Result<R, Refused> {
        self.lock_no_wait()?.call(call)
    }
}

impl Held<'_> {
    /// Run `call` with the plugin's functions, counted as a user of the
    /// instance for its length: the one way, under a held lock, to call the
    /// plugin but to allocate and free. [`Refused::Gone`] (and no call) for
    /// an instance that is destroyed.
    pub(super) fn call<R>(&self, call: impl FnOnce(&VTable) -> R) -> Result<R, Refused> {
        let raw = self.raw();
        let _user = raw.user().ok_or(Refused::Gone)?;
        Ok(call(&raw.vtable))
        // `_user` goes here, under the lock: if it was the instance's last
        // user, `destroy` runs now, on this thread (the lock is reentrant).
    }

    /// The plugin's statistics, if it reports them; `None` too for an
    /// instance that is destroyed (the plugin is not called).
    pub(crate) fn stats(&self) -> Option<MemplugStats> {
        // SAFETY: this `Held` serialises the call, and `call` keeps the
        // instance (its `ctx`) alive during it.
        self.call(|v| unsafe { v.stats() }).ok().flatten()
    }
}

// ---- The per-call API ----

impl RawHandler {
    /// From now on, hold this handler's lock (if it is not thread-safe)
    /// across every `fork` (`atfork.rs`). Called once the handler is
    /// installed for good: its state never moves again.
    pub(crate) fn hold_across_forks(&'static self) {
        if let Some(lock) = &self.lock {
            super::atfork::register(lock);
        }
    }

    /// Make an instance through the plugin's `create` with `options`: a new
    /// core with the same functions and the instance's `ctx` and alignment,
    /// whose life is counted (see [`take_owner`](RawHandler::take_owner)).
    /// The call is made as a user call is (see the module docs): [`CreateError::Call`] if this is
    /// a destroyed instance, or if the lock would have to be waited for
    /// while this thread holds another; the plugin's message on failure.
    pub(crate) fn create(&self, options: &str, name: &'static str) -> Result<RawHandler, CreateError> {
        let Ok(c_options) = std::ffi::CString::new(options) else {
            return Err(CreateError::Plugin("options must not contain NUL bytes".into()));
        };
        let mut error = [0; memplug_abi::ERROR_CAP];
        // SAFETY: `call` serialises the call (it holds the lock, if any) and
        // keeps this instance's `ctx` (if it is one) alive during it.
        let made = self.call(|v| unsafe { v.create(&c_options, self.alignment, &mut error) });
        let made = made.map_err(CreateError::Call)?;
        let (ctx, alignment) = made.map_err(|f| {
            CreateError::Plugin(match f {
                CreateFailure::NoCreate => "the plugin has no `create` function".into(),
                CreateFailure::Status(rc) => {
                    let end = error.iter().position(|&b| b == 0).unwrap_or(error.len());
                    let msg = String::from_utf8_lossy(&error[..end]).into_owned();
                    if msg.is_empty() { format!("create failed with status {rc}") } else { msg }
                }
                CreateFailure::BadAlignment(align) => {
                    format!("create reported alignment {align}, which is not a power of two")
                }
            })
        })?;
        let lock = self.lock.as_ref().map(|_| HandlerLock::new());
        let life = Some(Life::new());
        Ok(RawHandler { direct: false, vtable: self.vtable.with_ctx(ctx), alignment, name, lock, life })
    }

    /// The owner's reference of an instance, once: `None` for a handler that
    /// is not an instance, or when it was taken already. Dropping the
    /// [`InstanceOwner`] lets the instance go once its last block is freed.
    pub(crate) fn take_owner(&'static self) -> Option<InstanceOwner> {
        self.life.as_ref()?.take_owner().then_some(InstanceOwner { raw: self })
    }

    /// Allocate `size` bytes (0 is served as 1).
    #[inline]
    pub(crate) fn malloc(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
        let size = served(size);
        if self.direct {
            // The hot path: one load, one branch, one indirect call.
            // SAFETY: a direct handler is thread-safe, so the call needs no
            // lock, and uncounted; `size > 0`.
            return NonNull::new(unsafe { self.vtable.malloc(size) }).ok_or_else(|| self.out_of_memory(size));
        }
        self.malloc_slow(size)
    }

    #[inline(never)]
    fn malloc_slow(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
        self.lock().malloc(size)
    }

    /// Allocate `nelem * elsize` zeroed bytes; see [`Held::calloc`](Held::calloc).
    #[inline]
    pub(crate) fn calloc(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError> {
        self.lock().calloc(nelem, elsize)
    }

    /// Resize a block; see [`Held::realloc`](Held::realloc).
    ///
    /// # Safety
    /// As for [`Held::realloc`](Held::realloc).
    #[inline]
    pub(crate) unsafe fn realloc(&self, ptr: NonNull<u8>, old: usize, new: usize) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: forwarded: the caller's contract.
        unsafe { self.lock().realloc(ptr, old, new) }
    }

    /// Free a block; see [`Held::free`](Held::free).
    ///
    /// # Safety
    /// As for [`Held::free`](Held::free).
    #[inline]
    pub(crate) unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        if self.direct {
            // SAFETY: the caller guarantees `ptr`/`size` describe a live block
            // of this thread-safe, uncounted handler: nothing to lock or count.
            return unsafe { self.vtable.free(ptr.as_ptr(), served(size)) };
        }
        // SAFETY: forwarded: the caller's contract.
        unsafe { self.free_slow(ptr, size) }
    }

    /// A free that needs the lock or a count; see
    /// [`now_or_later`](RawHandler::now_or_later).
    ///
    /// # Safety
    /// As for [`Held::free`](Held::free).
    #[inline(never)]
    unsafe fn free_slow(&self, ptr: NonNull<u8>, size: usize) {
        let later = Deferred::Free(PendingBlock { ptr, size: served(size) });
        // SAFETY: forwarded: the caller's contract (the block stays counted
        // and untouched until it is freed, now or by the lock's next holder).
        self.now_or_later(later, |held| unsafe { held.free(ptr, size) });
    }

    /// Allocate with an alignment; see [`Held::alloc_aligned`](Held::alloc_aligned).
    pub(crate) fn alloc_aligned(&self, size: usize, alignment: usize) -> Result<NonNull<u8>, AllocError> {
        self.lock().alloc_aligned(size, alignment)
    }

    /// The plugin's statistics, if it reports them (`Ok(None)` if it does
    /// not, or for a destroyed instance), made as a user call is (see the module docs):
    /// `Err(WouldBlock)` rather than waiting for the lock while this thread
    /// holds another.
    pub(crate) fn stats(&self) -> Result<Option<MemplugStats>, Refused> {
        Ok(self.lock_no_wait()?.stats())
    }
}

/// Why [`RawHandler::create`] made no instance.
#[derive(Debug)]
pub(crate) enum CreateError {
    /// The call was not made (a user call: see the module docs).
    Call(Refused),
    /// The plugin refused: its message.
    Plugin(String),
}

/// The owner's reference of an instance (see [`RawHandler::take_owner`]);
/// dropping it releases that reference.
pub(crate) struct InstanceOwner {
    raw: &'static RawHandler,
}

impl Drop for InstanceOwner {
    fn drop(&mut self) {
        if self.raw.life.as_ref().is_some_and(Life::leave_owner) {
            self.raw.destroy();
        }
    }
}

// ---- Sharing blocks (ABI 1.2) ----

impl RawHandler {
    /// Whether the plugin can share blocks (`locate` and `resolve`).
    pub(crate) fn is_shareable(&self) -> bool {
        self.vtable.is_shareable()
    }

    /// Where the `size` bytes at `ptr` live, by the plugin's `locate`: the
    /// plugin's status on failure. `ptr` may be any address (the plugin only
    /// compares it). The call is made as a user call is (see the module docs) (counted as a user,
    /// no wait for the lock while holding another): `Err(Call(..))` when it
    /// is not made.
    pub(crate) fn locate(&self, ptr: *const u8, size: usize) -> Result<MemplugLocation, ShareCall> {
        // SAFETY: `call` serialises the call and keeps the instance alive;
        // `locate` never dereferences `ptr`.
        self.call(|v| unsafe { v.locate(ptr, size) }).map_err(ShareCall::Call)?.map_err(ShareCall::Status)
    }

    /// The address in this process of the range `location` describes, by
    /// the plugin's `resolve`: its status on failure; made as
    /// [`locate`](RawHandler::locate) is.
    pub(crate) fn resolve(&self, location: &MemplugLocation) -> Result<NonNull<u8>, ShareCall> {
        // SAFETY: `call` serialises the call and keeps the instance alive.
        self.call(|v| unsafe { v.resolve(location) }).map_err(ShareCall::Call)?.map_err(ShareCall::Status)
    }

    /// Count one more user of this handler's memory, as a live block
    /// would be counted: an instance is not destroyed (and does not let go
    /// of its segment) while a [`Retained`] lives. For a handler that is
    /// not an instance nothing is counted (it is never destroyed).
    pub(crate) fn retain(&'static self) -> Result<Retained, AllocError> {
        self.user().ok_or(AllocError::InstanceGone { handler: self.name })
    }
}

/// Why [`RawHandler::locate`] or [`RawHandler::resolve`] found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShareCall {
    /// The call was not made (a user call: see the module docs).
    Call(Refused),
    /// The plugin's non-zero `SHARE_*` status.
    Status(i32),
}

/// One counted user of an instance that lives as long as memory reached
/// through it (see [`RawHandler::retain`]); dropping it lets the instance
/// go, once its owner and its blocks are gone too.
pub(crate) type Retained = User<'static>;

// ---- Usable sizes (ABI 1.3) ----

impl RawHandler {
    /// Whether the plugin answers usable sizes.
    pub(crate) fn has_usable_size(&self) -> bool {
        self.vtable.has_usable_size()
    }

    /// The usable size of the block at `ptr` by the plugin's `usable_size`:
    /// `Ok(None)` when it has none, `Err` when the call is not made
    /// (a user call: see the module docs).
    ///
    /// # Safety
    /// `ptr` is a live block of this handler, made by its `malloc`,
    /// `calloc`, `realloc` or `aligned_alloc` (not an over-allocated block
    /// of the host's), or the handler declared `FLAG_KNOWS_FOREIGN`.
    pub(crate) unsafe fn usable_size(&self, ptr: *const u8) -> Result<Option<usize>, Refused> {
        // SAFETY: `call` serialises the call and keeps the instance alive;
        // the caller guarantees the pointer.
        self.call(|v| unsafe { v.usable_size(ptr) })
    }
}

impl RawHandler {
    /// Free a block passing size 0 to the plugin's `free`, by the rules of
    /// [`free`](RawHandler::free) (a free that cannot wait for the lock is
    /// left to its holder, which passes the size 1 then: any size is right
    /// for such a handler).
    ///
    /// # Safety
    /// `ptr` is a live block of this handler from `malloc`, `calloc` or
    /// `realloc` and is not used again; the handler declared
    /// `FLAG_SIZELESS_FREE`.
    pub(crate) unsafe fn free_sizeless(&self, ptr: NonNull<u8>) {
        let later = Deferred::Free(PendingBlock { ptr, size: 1 });
        // SAFETY: forwarded: the caller's contract.
        self.now_or_later(later, |held| unsafe { held.free_sizeless(ptr) });
    }

    /// Resize a block passing old size 0 to the plugin's `realloc`; `new`
    /// of 0 is served as 1. On error the old block is untouched.
    ///
    /// # Safety
    /// As for [`free_sizeless`](RawHandler::free_sizeless); on success the
    /// old pointer is not used again.
    pub(crate) unsafe fn realloc_sizeless(&self, ptr: NonNull<u8>, new: usize) -> Result<NonNull<u8>, AllocError> {
        let new = served(new);
        let held = self.lock();
        // SAFETY: `held` serialises the call; the caller guarantees the block
        // and that the handler needs no old size; `new > 0`.
        let p = unsafe { held.raw().vtable.realloc(ptr.as_ptr(), 0, new) };
        NonNull::new(p).ok_or_else(|| self.out_of_memory(new))
    }
}

impl Held<'_> {
    /// `free(ctx, ptr, 0)`, then uncount the block.
    ///
    /// # Safety
    /// As for [`RawHandler::free_sizeless`].
    unsafe fn free_sizeless(&self, ptr: NonNull<u8>) {
        // SAFETY: this `Held` serialises the call; the caller guarantees the
        // block and that the handler needs no size.
        unsafe { self.raw().vtable.free(ptr.as_ptr(), 0) };
        self.raw().leave_block();
    }
}
