//! The raw memory of a [`Buffer`]: slices over it, growth and release.
//!
//! Invariants every constructor establishes and every method keeps:
//! 1. `ptr` is valid for reads and writes of `cap` bytes while the buffer
//!    lives, and nothing else accesses them (the buffer is their only user);
//! 2. the first `len <= cap` bytes are initialised;
//! 3. with `Owner::Handler(h)`, `ptr` was returned by `h` for `cap` bytes.

use crate::buffer::{Buffer, Owner};
use crate::error::BufferError;
use crate::handler::Handler;
use std::any::Any;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

// SAFETY: the buffer is the unique user of its memory (invariant 1); the base
// object is `Send`; a handler is callable from any thread (non-thread-safe
// handlers lock every call).
unsafe impl Send for Buffer {}
// SAFETY: `&Buffer` only gives shared access to the initialised bytes; the
// base object is never reached through `&Buffer`.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Own foreign memory through a base object: the buffer covers
    /// `len` bytes at `ptr` and drops `base` (exactly once) when it is
    /// dropped. The base's `Drop` is what releases the memory.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes, all initialised,
    /// for as long as `base` is alive, and nothing else uses them meanwhile.
    pub unsafe fn from_base<B: Send + 'static>(ptr: NonNull<u8>, len: usize, base: B) -> Buffer {
        let base: Box<dyn Any + Send> = Box::new(base);
        Buffer { ptr, len, cap: len, align: 0, owner: Owner::Base(base) }
    }

    /// Borrow foreign memory owned elsewhere: nothing is released on drop.
    /// Prefer [`View`](crate::View) for Rust slices.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` initialised bytes for the
    /// whole life of the buffer, and nothing else uses them meanwhile.
    pub unsafe fn from_borrowed(ptr: NonNull<u8>, len: usize) -> Buffer {
        Buffer { ptr, len, cap: len, align: 0, owner: Owner::Borrowed }
    }

    /// Rebuild a handler-made buffer from [`Buffer::into_raw_parts`].
    ///
    /// # Safety
    /// `ptr` was returned by `handler` for `cap` bytes (as reported by
    /// `into_raw_parts`), its first `len <= cap` bytes are initialised, and it
    /// is not used elsewhere.
    pub unsafe fn from_raw_parts_in(ptr: NonNull<u8>, len: usize, cap: usize, handler: Handler) -> Buffer {
        Buffer { ptr, len, cap, align: 0, owner: Owner::Handler(handler) }
    }

    /// Give up a handler-made buffer without freeing it: `(ptr, len, cap,
    /// handler)`. Free it later with `handler.free(ptr, cap)`, or rebuild it
    /// with [`Buffer::from_raw_parts_in`]. Foreign buffers and buffers with
    /// an alignment above their handler's are returned as they are
    /// (`Err(self)`).
    pub fn into_raw_parts(self) -> Result<(NonNull<u8>, usize, usize, Handler), Buffer> {
        match self.owner {
            Owner::Handler(h) if self.align == 0 => {
                let parts = (self.ptr, self.len, self.cap, h);
                std::mem::forget(self);
                Ok(parts)
            }
            _ => Err(self),
        }
    }

    /// The initialised bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: invariants 1 and 2: `len` initialised bytes at `ptr`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The initialised bytes, mutable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: invariants 1 and 2, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The capacity past `len`, possibly uninitialised. Write into it, then
    /// [`set_len`](Buffer::set_len).
    #[inline]
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: invariant 1: `cap - len` bytes past `len` are valid for
        // writes; `MaybeUninit` makes no claim about their contents.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(self.len) as *mut MaybeUninit<u8>, self.cap - self.len)
        }
    }

    /// Set the length.
    ///
    /// # Safety
    /// `new_len <= capacity()` and the first `new_len` bytes are initialised.
    #[inline]
    pub unsafe fn set_len(&mut self, new_len: usize) {
        debug_assert!(new_len <= self.cap);
        self.len = new_len;
    }

    /// Reallocate to exactly `new_cap` bytes through the owning handler.
    pub(crate) fn grow_to(&mut self, new_cap: usize) -> Result<(), BufferError> {
        let Owner::Handler(h) = self.owner else {
            let kind = if matches!(self.owner, Owner::Borrowed) { "borrowed" } else { "base object" };
            return Err(BufferError::NotResizable { kind, capacity: self.cap, wanted: new_cap });
        };
        debug_assert!(new_cap >= self.len);
        let p = if self.align == 0 {
            // SAFETY: invariant 3: `ptr` is `h`'s block of `cap` bytes. On
            // success the old pointer is replaced and never used again; on
            // failure it is untouched and still ours.
            unsafe { h.realloc(self.ptr, self.cap, new_cap) }?
        } else {
            // SAFETY: as above, for a block from `alloc_aligned(cap, align)`.
            unsafe { h.realloc_aligned(self.ptr, self.cap, new_cap, self.align) }?
        };
        self.ptr = p;
        self.cap = new_cap;
        Ok(())
    }
}

impl Drop for Buffer {
    #[inline]
    fn drop(&mut self) {
        if let Owner::Handler(h) = self.owner {
            // SAFETY: invariant 3, and the buffer is going away, so the block
            // is never used again. Base-owned memory is released by dropping
            // the base (the field's own drop, right after this).
            unsafe {
                if self.align == 0 {
                    h.free(self.ptr, self.cap)
                } else {
                    h.free_aligned(self.ptr, self.cap, self.align)
                }
            }
        }
    }
}

/// A raw block for the conformance pass (`check.rs`): made by a handler,
/// every byte initialised by the host right away (or by the plugin's zeroed
/// allocation), freed exactly once on drop.
pub(crate) struct Block {
    h: Handler,
    ptr: NonNull<u8>,
    size: usize,
}

impl Block {
    /// `size` bytes from `h`, filled with `0x5A`.
    pub(crate) fn new(h: Handler, size: usize) -> Result<Block, crate::error::AllocError> {
        let size = size.max(1);
        let ptr = h.alloc(size)?;
        // SAFETY: `alloc` returned a block of `size` writable bytes.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0x5A, size) };
        Ok(Block { h, ptr, size })
    }

    /// `nelem * elsize` bytes from `h`'s zeroed allocation, untouched.
    pub(crate) fn zeroed(h: Handler, nelem: usize, elsize: usize) -> Result<Block, crate::error::AllocError> {
        let ptr = h.alloc_zeroed(nelem, elsize)?;
        Ok(Block { h, ptr, size: (nelem * elsize).max(1) })
    }

    /// The block's address.
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// The block's bytes.
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the block is live, `size` bytes long, ours alone, and every
        // byte was initialised (by `new`, `realloc` or the plugin's zeroed
        // allocation).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.size) }
    }

    /// Resize through the handler; bytes past the old size are filled with
    /// `0x5A`.
    pub(crate) fn realloc(&mut self, new_size: usize) -> Result<(), crate::error::AllocError> {
        let new_size = new_size.max(1);
        // SAFETY: `ptr` is `h`'s live block of `size` bytes; on success the
        // old pointer is replaced and never used again.
        let p = unsafe { self.h.realloc(self.ptr, self.size, new_size) }?;
        if new_size > self.size {
            // SAFETY: the new block has `new_size` writable bytes.
            unsafe { std::ptr::write_bytes(p.as_ptr().add(self.size), 0x5A, new_size - self.size) };
        }
        self.ptr = p;
        self.size = new_size;
        Ok(())
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `ptr` is `h`'s live block of `size` bytes, freed only here.
        unsafe { self.h.free(self.ptr, self.size) }
    }
}
