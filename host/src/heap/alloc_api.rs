//! Plugin memory for Rust collections: [`Handler`] and [`HandlerGuard`]
//! implement [`allocator_api2::alloc::Allocator`], the stable mirror of the
//! standard library's allocator API that `allocator_api2::vec::Vec`,
//! `allocator_api2::boxed::Box` and `hashbrown` accept (with the cargo
//! feature `nightly`, allocator-api2 re-exports the nightly
//! `core::alloc::Allocator`, so the same impls serve the standard
//! collections there).
//!
//! ```
//! use allocator_api2::vec::Vec;
//!
//! let h = memplug::current::default_handler();
//! let mut v: Vec<u64, memplug::Handler> = Vec::new_in(h);
//! v.extend(0..1000);
//! assert_eq!(v.iter().sum::<u64>(), 499_500);
//! ```
//!
//! How each request is served:
//! - **zero-size layouts never reach the plugin**: `allocate` returns a
//!   dangling pointer aligned as asked, and deallocating a 0-byte block does
//!   nothing;
//! - alignments up to the handler's own are **plain blocks**
//!   ([`Handler::alloc`], or the plugin's `calloc` for `allocate_zeroed`);
//!   larger ones go through the **aligned path**
//!   ([`Handler::alloc_aligned`]: the plugin's `aligned_alloc`, or host
//!   over-allocation), zeroed by the host when asked;
//! - `grow`, `grow_zeroed` and `shrink` use the plugin's **`realloc` with the
//!   old size** when both alignments are within the handler's, and allocate,
//!   copy and free otherwise;
//! - `deallocate` passes the **exact size** of the block (the returned slices
//!   are exactly as long as asked, so the layout a collection frees with is
//!   the one it allocated with).
//!
//! A block is freed by the handler that made it wherever it is dropped — on
//! another thread, under another current handler — and a handler that is
//! not thread-safe is locked per call. To serve a batch under one lock, build
//! the collection on a guard: `Vec::new_in(&guard)` (a `&HandlerGuard` is an
//! allocator too; it is neither `Send` nor `Sync`, so such a collection stays
//! on the guard's thread and cannot outlive the guard). Dropping memory of
//! one handler while holding another's guard never waits for a lock (see
//! [`lock`](crate::heap::lock)).
//!
//! ```
//! use allocator_api2::vec::Vec;
//!
//! let h = memplug::current::default_handler();
//! let guard = h.lock();
//! let mut v: Vec<u32, &memplug::HandlerGuard> = Vec::with_capacity_in(8, &guard);
//! v.extend([1, 2, 3]);
//! drop(v); // freed under the guard's lock, before the guard goes
//! ```

use crate::heap::calls::Calls;
use crate::heap::error::AllocError as MemplugError;
use crate::heap::handler::Handler;
use crate::heap::lock::HandlerGuard;
use allocator_api2::alloc::{AllocError, Allocator, Layout};
use std::ptr::NonNull;

/// A dangling, non-null pointer aligned to `layout.align()`: the block of a
/// zero-size layout, which is never read or written.
#[inline]
fn dangling(layout: Layout) -> NonNull<[u8]> {
    let p = NonNull::new(std::ptr::without_provenance_mut::<u8>(layout.align())).expect("alignments are non-zero");
    NonNull::slice_from_raw_parts(p, 0)
}

/// Whether `layout` is served by a plain block of `c`'s handler.
#[inline]
fn plain<C: Calls>(c: &C, layout: Layout) -> bool {
    layout.align() <= c.alignment()
}

/// Turn a memplug error into the trait's, logging what it was (the trait's
/// error has no room for it, and a collection turns it into an abort).
#[cold]
fn failed<C: Calls>(c: &C, layout: Layout, e: MemplugError) -> AllocError {
    tracing::debug!(handler = c.name(), size = layout.size(), align = layout.align(), code = e.code(), "{e}");
    AllocError
}

#[inline]
#[allow(unsafe_code)]
fn allocate<C: Calls>(c: &C, layout: Layout, zeroed: bool) -> Result<NonNull<[u8]>, AllocError> {
    let size = layout.size();
    if size == 0 {
        return Ok(dangling(layout));
    }
    let p = if plain(c, layout) {
        if zeroed { c.alloc_zeroed(size, 1) } else { c.alloc(size) }
    } else {
        c.alloc_aligned(size, layout.align()).inspect(|p| {
            if zeroed {
                // SAFETY: `p` is a fresh block of `size` writable bytes.
                unsafe { p.as_ptr().write_bytes(0, size) }
            }
        })
    };
    p.map(|p| NonNull::slice_from_raw_parts(p, size)).map_err(|e| failed(c, layout, e))
}

/// # Safety
/// `ptr` is a block of `c`'s handler allocated (or last resized) through
/// this module with `layout`, and is not used again.
#[inline]
#[allow(unsafe_code)]
unsafe fn deallocate<C: Calls>(c: &C, ptr: NonNull<u8>, layout: Layout) {
    let size = layout.size();
    if size == 0 {
        return;
    }
    if plain(c, layout) {
        // SAFETY: the caller's contract: a plain block of exactly `size` bytes.
        unsafe { c.free(ptr, size) }
    } else {
        // SAFETY: the caller's contract: an aligned block of `size` bytes
        // with this alignment.
        unsafe { c.free_aligned(ptr, size, layout.align()) }
    }
}

/// Grow or shrink a block from `old` to `new`, keeping `min` of the sizes
/// bytes; with `zero_tail`, bytes past the old size are zeroed.
///
/// # Safety
/// As for [`deallocate`] with `old`; on success the old pointer is not used
/// again, on failure it is untouched.
#[allow(unsafe_code)]
unsafe fn resize<C: Calls>(
    c: &C,
    ptr: NonNull<u8>,
    old: Layout,
    new: Layout,
    zero_tail: bool,
) -> Result<NonNull<[u8]>, AllocError> {
    if old.size() == 0 {
        return allocate(c, new, zero_tail);
    }
    if new.size() == 0 {
        // SAFETY: the caller's contract for the old block.
        unsafe { deallocate(c, ptr, old) };
        return Ok(dangling(new));
    }
    let p = if plain(c, old) && plain(c, new) {
        // SAFETY: the caller's contract: a plain block of `old.size()` bytes.
        unsafe { c.realloc(ptr, old.size(), new.size()) }.map_err(|e| failed(c, new, e))?
    } else {
        let q = allocate(c, new, false)?.cast::<u8>();
        // SAFETY: two live, distinct blocks each holding at least the
        // smaller size.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), q.as_ptr(), old.size().min(new.size())) };
        // SAFETY: the caller's contract for the old block.
        unsafe { deallocate(c, ptr, old) };
        q
    };
    if zero_tail && new.size() > old.size() {
        // SAFETY: the new block holds `new.size()` writable bytes.
        unsafe { p.as_ptr().add(old.size()).write_bytes(0, new.size() - old.size()) };
    }
    Ok(NonNull::slice_from_raw_parts(p, new.size()))
}

/// The impls for `Handler` and `HandlerGuard` are one and the same, over
/// [`Calls`].
macro_rules! allocator_impl {
    ($ty:ty, $what:literal) => {
        // SAFETY: a block handed out stays valid until it is deallocated:
        // handlers are never freed and libraries never closed. Every copy of
        // a `Handler` is the same handler, and a guard's blocks are that
        // handler's blocks, so any copy or reference frees them. Sizes and
        // alignments are served as the module docs say: the returned slice is
        // exactly `layout.size()` long and aligned to `layout.align()` (a
        // plain block has the handler's alignment, at least as asked; an
        // aligned one comes from the aligned path), so the layout a caller
        // frees or resizes with is the one the block was made with, and
        // `deallocate`/`resize` pick the same path again.
        #[allow(unsafe_code)]
        unsafe impl Allocator for $ty {
            #[doc = concat!("Allocate a block for `layout` from ", $what, " (see the module docs).")]
            #[inline]
            fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
                allocate(self, layout, false)
            }

            #[doc = concat!("Allocate a zeroed block for `layout` from ", $what, ".")]
            #[inline]
            fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
                allocate(self, layout, true)
            }

            #[inline]
            unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
                // SAFETY: the trait's contract: `ptr` is a block of this
                // allocator and `layout` fits it.
                unsafe { deallocate(self, ptr, layout) }
            }

            unsafe fn grow(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
                // SAFETY: the trait's contract, which is `resize`'s.
                unsafe { resize(self, ptr, old, new, false) }
            }

            unsafe fn grow_zeroed(
                &self,
                ptr: NonNull<u8>,
                old: Layout,
                new: Layout,
            ) -> Result<NonNull<[u8]>, AllocError> {
                // SAFETY: the trait's contract, which is `resize`'s.
                unsafe { resize(self, ptr, old, new, true) }
            }

            unsafe fn shrink(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
                // SAFETY: the trait's contract, which is `resize`'s.
                unsafe { resize(self, ptr, old, new, false) }
            }
        }
    };
}

allocator_impl!(Handler, "the handler, locking it per call if it is not thread-safe");
allocator_impl!(HandlerGuard, "the guard's handler, under the lock it holds");
