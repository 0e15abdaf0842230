//! The per-call API of the handler core [`RawHandler`] (its state is in
//! `state.rs`). Every call into a plugin goes through the core, and it keeps
//! the promises the ABI makes to plugins and the host makes to itself:
//!
//! - a plugin that is not thread-safe is only ever called by the thread
//!   holding its lock: the per-call methods take it, and [`Held`](super::held::Held) — the only
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
//!   reaches a destroyed one, and follows the no-wait rule (`user.rs`);
//! - a thread that holds any handler's lock never waits for another
//!   handler's lock to *free* a block: it frees it at once if the lock is
//!   free (or its own), and otherwise hands it to the handler's queue of
//!   pending frees (`pending.rs`), which the lock's holder drains. So frees
//!   can never close a cycle of threads waiting for each other's locks.
//!
//! Handlers that are thread-safe and not instances are *direct*: their
//! per-call path is one load, one branch and one indirect call. Everything
//! else goes through [`Held`](super::held::Held) (`held.rs`), whose `counted` is the one place
//! that counts a block, calls, and undoes the count when the plugin returns
//! NULL.

use super::life::Life;
use super::pending::{Deferred, HandlerLock, PendingBlock};
use super::state::RawHandler;
use super::user::Refused;
use super::vtable::{CreateFailure, served};
use crate::heap::error::AllocError;
use memplug_abi::MemplugStats;
use std::ptr::NonNull;

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
    /// The call is made as `user.rs` says: [`CreateError::Call`] if this is
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

    /// Allocate `nelem * elsize` zeroed bytes; see [`Held::calloc`](super::held::Held::calloc).
    #[inline]
    pub(crate) fn calloc(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError> {
        self.lock().calloc(nelem, elsize)
    }

    /// Resize a block; see [`Held::realloc`](super::held::Held::realloc).
    ///
    /// # Safety
    /// As for [`Held::realloc`](super::held::Held::realloc).
    #[inline]
    pub(crate) unsafe fn realloc(&self, ptr: NonNull<u8>, old: usize, new: usize) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: forwarded: the caller's contract.
        unsafe { self.lock().realloc(ptr, old, new) }
    }

    /// Free a block; see [`Held::free`](super::held::Held::free).
    ///
    /// # Safety
    /// As for [`Held::free`](super::held::Held::free).
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
    /// As for [`Held::free`](super::held::Held::free).
    #[inline(never)]
    unsafe fn free_slow(&self, ptr: NonNull<u8>, size: usize) {
        let later = Deferred::Free(PendingBlock { ptr, size: served(size) });
        // SAFETY: forwarded: the caller's contract (the block stays counted
        // and untouched until it is freed, now or by the lock's next holder).
        self.now_or_later(later, |held| unsafe { held.free(ptr, size) });
    }

    /// Allocate with an alignment; see [`Held::alloc_aligned`](super::held::Held::alloc_aligned).
    pub(crate) fn alloc_aligned(&self, size: usize, alignment: usize) -> Result<NonNull<u8>, AllocError> {
        self.lock().alloc_aligned(size, alignment)
    }

    /// Free an aligned block; see [`Held::free_aligned`](super::held::Held::free_aligned).
    ///
    /// # Safety
    /// As for [`Held::free_aligned`](super::held::Held::free_aligned).
    pub(crate) unsafe fn free_aligned(&self, ptr: NonNull<u8>, size: usize, alignment: usize) {
        // SAFETY: the caller's contract.
        let block = unsafe { self.plain_block(ptr, size, alignment) };
        // SAFETY: the plain block the plugin made, with its size; the
        // ordinary free (and its rule for waiting) applies to it.
        unsafe { self.free(block.ptr, block.size) }
    }

    /// Resize an aligned block; see [`Held::realloc_aligned`](super::held::Held::realloc_aligned).
    ///
    /// # Safety
    /// As for [`Held::realloc_aligned`](super::held::Held::realloc_aligned).
    pub(crate) unsafe fn realloc_aligned(
        &self,
        ptr: NonNull<u8>,
        old: usize,
        new: usize,
        alignment: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: forwarded: the caller's contract.
        unsafe { self.lock().realloc_aligned(ptr, old, new, alignment) }
    }

    /// The plugin's statistics, if it reports them (`Ok(None)` if it does
    /// not, or for a destroyed instance), made as `user.rs` says:
    /// `Err(WouldBlock)` rather than waiting for the lock while this thread
    /// holds another.
    pub(crate) fn stats(&self) -> Result<Option<MemplugStats>, Refused> {
        Ok(self.lock_no_wait()?.stats())
    }
}

/// Why [`RawHandler::create`] made no instance.
#[derive(Debug)]
pub(crate) enum CreateError {
    /// The call was not made (`user.rs`).
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
