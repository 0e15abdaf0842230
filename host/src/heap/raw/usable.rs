//! The ABI 1.3 calls: the one that answers a block's usable size
//! (`usable_size`), and `free` and `realloc` made with size 0, as a host may
//! make them for a handler that declares `FLAG_SIZELESS_FREE` (the
//! conformance check `sizeless-free` makes them).
//!
//! `usable_size`, like `stats` and `locate`, is neither an allocation nor a
//! free: it is made as `user.rs` says (counted as a user of the instance,
//! under the lock taken by the no-wait rule). The sizeless free and realloc
//! follow the rules of the ordinary ones (`dispatch.rs`).

use super::held::Held;
use super::pending::{Deferred, PendingBlock};
use super::state::RawHandler;
use super::user::Refused;
use super::vtable::served;
use crate::heap::error::AllocError;
use std::ptr::NonNull;

impl RawHandler {
    /// Whether the plugin answers usable sizes.
    pub(crate) fn has_usable_size(&self) -> bool {
        self.vtable.has_usable_size()
    }

    /// The usable size of the block at `ptr` by the plugin's `usable_size`:
    /// `Ok(None)` when it has none, `Err` when the call is not made
    /// (`user.rs`).
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
