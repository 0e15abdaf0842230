//! [`Held`]: the calls into a handler while its lock is held, and what
//! can only be done holding it: an instance's destruction, and a free that
//! may not wait for the lock (done now, or left to the lock's holder).
//!
//! A `Held` is the proof that calls are serialised; every call of the
//! handler core, per-call or batched, ends up here (but the direct hot path
//! of `dispatch.rs`). This file also serves alignments above the handler's own:
//! through the plugin's `aligned_alloc`, or host over-allocation
//! (`aligned.rs`).
//!
//! A `Held` that holds a lock frees the handler's pending frees
//! (`pending.rs`) when it takes the lock and again when it releases it, and
//! counts, per thread, how many locks the thread holds: a thread holding any
//! lock never waits for another handler's lock to free a block
//! ([`RawHandler::now_or_later`]).

use super::aligned::{align_within, over_allocation};
use super::barrier;
use super::pending::Deferred;
use super::relock::ReentrantGuard;
use super::state::RawHandler;
use super::vtable::served;
use crate::heap::error::AllocError;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;

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
    /// plugin's `aligned_alloc`, else host over-allocation (`aligned.rs`).
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

    /// Free a block made by [`alloc_aligned`](Held::alloc_aligned).
    ///
    /// # Safety
    /// `ptr` was returned by `alloc_aligned(size, alignment)` of this handler
    /// (or `realloc_aligned` to `size` with `alignment`) and is not used
    /// again.
    pub(crate) unsafe fn free_aligned(&self, ptr: NonNull<u8>, size: usize, alignment: usize) {
        // SAFETY: the caller's contract.
        let block = unsafe { self.raw.plain_block(ptr, size, alignment) };
        // SAFETY: the plain block the plugin made, of that size.
        unsafe { self.free(block.ptr, block.size) }
    }

    /// Resize a block made by [`alloc_aligned`](Held::alloc_aligned),
    /// keeping its alignment and `min(old, new)` bytes. On error the old
    /// block is untouched.
    ///
    /// # Safety
    /// As for [`free_aligned`](Held::free_aligned) with `old`; on success the
    /// old pointer is not used again.
    pub(crate) unsafe fn realloc_aligned(
        &self,
        ptr: NonNull<u8>,
        old: usize,
        new: usize,
        alignment: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        if alignment <= self.raw.alignment {
            // SAFETY: forwarded: a plain block of this handler.
            return unsafe { self.realloc(ptr, old, new) };
        }
        let q = self.alloc_aligned(new, alignment)?;
        // SAFETY: both blocks are live and distinct, and hold at least
        // `min(old, new)` bytes.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), q.as_ptr(), old.min(new)) };
        // SAFETY: the caller's contract for the old block.
        unsafe { self.free_aligned(ptr, old, alignment) };
        Ok(q)
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
