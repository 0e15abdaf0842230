//! The calls of a [`HandlerGuard`]: straight into the plugin, because the
//! guard already holds the handler's lock.
//!
//! Every `unsafe` block here rests on the guard's invariant (`lock.rs`): a
//! `HandlerGuard` is made only by locking its handler (when it has a lock)
//! and keeps the lock until it is dropped; it is neither `Send` nor `Sync`,
//! so its methods run on the thread holding the lock. The calls are thus
//! serialised exactly as the per-call path's are. Instance accounting
//! (`enter_block` / `leave_block`) is the same as on the per-call path.

use crate::error::AllocError;
use crate::lock::HandlerGuard;
use std::ptr::NonNull;

impl HandlerGuard {
    /// Allocate `size` bytes (uninitialised) under the held lock; a request
    /// for 0 bytes is served as 1 (see [`Handler`](crate::Handler)).
    #[inline]
    pub fn alloc(&self, size: usize) -> Result<NonNull<u8>, AllocError> {
        let h = self.handler();
        let size = size.max(1);
        h.enter_block()?;
        // SAFETY: the guard holds `h`'s lock (if any) on this thread for its
        // whole life (module docs); `size > 0`.
        let p = unsafe { h.inner.vtable.malloc_held(size) };
        NonNull::new(p).ok_or_else(|| {
            h.leave_block();
            AllocError::OutOfMemory { handler: h.name(), size }
        })
    }

    /// Allocate `nelem * elsize` zeroed bytes under the held lock. An
    /// overflowing product is refused before the plugin is called.
    #[inline]
    pub fn alloc_zeroed(&self, nelem: usize, elsize: usize) -> Result<NonNull<u8>, AllocError> {
        let h = self.handler();
        let Some(total) = nelem.checked_mul(elsize) else {
            return Err(AllocError::SizeOverflow { handler: h.name(), nelem, elsize });
        };
        let (nelem, elsize) = if total == 0 { (1, 1) } else { (nelem, elsize) };
        h.enter_block()?;
        // SAFETY: the guard holds the lock (module docs); the product was
        // checked above and is non-zero.
        let p = unsafe { h.inner.vtable.calloc_held(nelem, elsize) };
        NonNull::new(p).ok_or_else(|| {
            h.leave_block();
            AllocError::OutOfMemory { handler: h.name(), size: total }
        })
    }

    /// Resize a block of this handler under the held lock, keeping
    /// `min(old_size, new_size)` bytes. On error the old block is untouched.
    ///
    /// # Safety
    /// As for [`Handler::realloc`](crate::Handler::realloc): `ptr` is a live
    /// block of this handler of `old_size` bytes; on success it is not used
    /// again.
    #[inline]
    pub unsafe fn realloc(
        &self,
        ptr: NonNull<u8>,
        old_size: usize,
        new_size: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        let h = self.handler();
        let (old_size, new_size) = (old_size.max(1), new_size.max(1));
        // SAFETY: the guard holds the lock (module docs); the caller
        // guarantees the block and its size; both sizes are non-zero.
        let p = unsafe { h.inner.vtable.realloc_held(ptr, old_size, new_size) };
        NonNull::new(p).ok_or(AllocError::OutOfMemory { handler: h.name(), size: new_size })
    }

    /// Free a block of this handler under the held lock.
    ///
    /// # Safety
    /// As for [`Handler::free`](crate::Handler::free): `ptr` is a live block
    /// of this handler of `size` bytes (its allocation or last `realloc`
    /// size) and is not used again.
    #[inline]
    pub unsafe fn free(&self, ptr: NonNull<u8>, size: usize) {
        let h = self.handler();
        // SAFETY: the guard holds the lock (module docs); the caller
        // guarantees the block and its size, rounded like the allocation.
        unsafe { h.inner.vtable.free_held(ptr, size.max(1)) };
        // An instance's last block may destroy it; that takes the lock again,
        // which the reentrant lock allows on this thread.
        h.leave_block();
    }
}
