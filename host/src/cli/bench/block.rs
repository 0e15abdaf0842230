//! The benchmark's raw blocks: the one file of `memplug bench` with unsafe
//! code. A [`Block`] owns one allocation and remembers its handler; a
//! [`Route`] makes, resizes and frees blocks per call through a
//! [`Handler`], or under a held [`HandlerGuard`]. Both are safe to use: a
//! block is freed exactly once, by its own handler, with its own size.
//! They cost what a caller of the raw `Handler` API pays (plus one
//! comparison of handlers per free), so that the figures are the handlers'.

use memplug::{AllocError, Handler, HandlerGuard};
use std::ptr::NonNull;

/// One live block of `size` bytes from `handler`. Dropping it frees it
/// per call.
pub(crate) struct Block {
    ptr: NonNull<u8>,
    size: usize,
    handler: Handler,
}

// SAFETY: a block is plain memory owned by this value alone; a handler's
// blocks may be freed on any thread (the handler locks per call when it is
// not thread-safe).
#[allow(unsafe_code)]
unsafe impl Send for Block {}

impl Block {
    /// The block's size.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Write `byte` at offset `at` (`at < size`), as a user touching the
    /// block would.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn touch(&mut self, at: usize, byte: u8) {
        assert!(at < self.size.max(1));
        // SAFETY: the block holds `max(size, 1)` writable bytes (0 is
        // served as 1) and `at` is inside them.
        unsafe { self.ptr.as_ptr().add(at).write_volatile(byte) }
    }
}

impl Drop for Block {
    #[inline]
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: the block is a live block of `handler` of `size` bytes,
        // owned by this value and never used again.
        unsafe { self.handler.free(self.ptr, self.size) }
    }
}

/// How a workload reaches its handler.
#[derive(Clone, Copy)]
pub(crate) enum Route<'g> {
    /// Per call (locking per call if the handler is not thread-safe).
    Call(Handler),
    /// Under a guard held across the batch.
    Guard(&'g HandlerGuard),
}

impl Route<'_> {
    /// The handler.
    #[inline]
    pub(crate) fn handler(self) -> Handler {
        match self {
            Route::Call(h) => h,
            Route::Guard(g) => g.handler(),
        }
    }

    /// A new block of `size` bytes.
    #[inline]
    pub(crate) fn alloc(self, size: usize) -> Result<Block, AllocError> {
        let ptr = match self {
            Route::Call(h) => h.alloc(size)?,
            Route::Guard(g) => g.alloc(size)?,
        };
        Ok(Block { ptr, size, handler: self.handler() })
    }

    /// Free `block` through this route.
    ///
    /// # Panics
    /// If the block is another handler's.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn free(self, block: Block) {
        assert!(block.handler == self.handler(), "a block is freed by the handler that made it");
        let block = std::mem::ManuallyDrop::new(block);
        match self {
            // SAFETY: a live block of this handler with its size, given up
            // here (its drop does not run).
            Route::Call(h) => unsafe { h.free(block.ptr, block.size) },
            // SAFETY: as above, under the guard's lock.
            Route::Guard(g) => unsafe { g.free(block.ptr, block.size) },
        }
    }

    /// Resize `block` to `size` bytes with the handler's `realloc`; on
    /// error the block is unchanged.
    ///
    /// # Panics
    /// If the block is another handler's.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn realloc(self, block: &mut Block, size: usize) -> Result<(), AllocError> {
        assert!(block.handler == self.handler(), "a block is resized by the handler that made it");
        let ptr = match self {
            // SAFETY: a live block of this handler with its size; on success
            // the old pointer is replaced below and never used again.
            Route::Call(h) => unsafe { h.realloc(block.ptr, block.size, size) }?,
            // SAFETY: as above, under the guard's lock.
            Route::Guard(g) => unsafe { g.realloc(block.ptr, block.size, size) }?,
        };
        (block.ptr, block.size) = (ptr, size);
        Ok(())
    }
}
