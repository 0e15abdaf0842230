//! The bootstrap arena of [`Global`](crate::global::Global): a fixed static
//! region served by a lock-free bump pointer, which holds every allocation
//! made while a global allocator is still choosing its handler (memplug's
//! own, the dynamic loader's Rust callers, other threads'). Its blocks are
//! never reused: freeing one does nothing, and whether a pointer is one of
//! them is an address-range check. The region is zero-initialised `.bss`,
//! so only the pages it hands out cost memory.
//!
//! Also the system allocator's calls, for the global allocator's fallback.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The arena's size: 8 MiB of address space.
pub(crate) const ARENA_SIZE: usize = 8 << 20;

/// The arena's bytes.
#[repr(C, align(4096))]
struct Region(UnsafeCell<[u8; ARENA_SIZE]>);

// SAFETY: the bytes are only reached through `alloc`, which hands each byte
// to at most one caller (the bump pointer only grows, by an atomic
// read-modify-write); what a caller does with its bytes is its own affair.
unsafe impl Sync for Region {}

static REGION: Region = Region(UnsafeCell::new([0; ARENA_SIZE]));
/// Bytes handed out so far (from the region's start).
static USED: AtomicUsize = AtomicUsize::new(0);

/// A fresh block of `layout` from the arena, zeroed (its bytes were never
/// handed out before); `None` when the arena cannot hold it.
pub(crate) fn alloc(layout: Layout) -> Option<NonNull<u8>> {
    let base = REGION.0.get().cast::<u8>();
    let mut used = USED.load(Ordering::Relaxed);
    loop {
        let start = (base as usize + used).checked_next_multiple_of(layout.align())? - base as usize;
        let end = start.checked_add(layout.size())?;
        if end > ARENA_SIZE {
            return None;
        }
        match USED.compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed) {
            // `start + size <= ARENA_SIZE`: in bounds of the region.
            Ok(_) => return NonNull::new(base.wrapping_add(start)),
            Err(now) => used = now,
        }
    }
}

/// Whether `ptr` points into the arena: one subtraction and one compare.
#[inline(always)]
pub(crate) fn contains(ptr: *const u8) -> bool {
    (ptr as usize).wrapping_sub(REGION.0.get() as usize) < ARENA_SIZE
}

/// Bytes of the arena handed out so far (alignment padding included).
pub(crate) fn used() -> usize {
    USED.load(Ordering::Relaxed)
}

/// The system allocator's `alloc` (or `alloc_zeroed`); null on failure.
///
/// # Safety
/// `layout` has a non-zero size.
#[inline(always)]
pub(crate) unsafe fn system_alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    // SAFETY: the caller's contract, which is `GlobalAlloc`'s.
    unsafe { if zeroed { System.alloc_zeroed(layout) } else { System.alloc(layout) } }
}

/// The system allocator's `dealloc`.
///
/// # Safety
/// `ptr` was made by the system allocator with `layout` and is not used again.
#[inline(always)]
pub(crate) unsafe fn system_dealloc(ptr: *mut u8, layout: Layout) {
    // SAFETY: the caller's contract, which is `GlobalAlloc`'s.
    unsafe { System.dealloc(ptr, layout) }
}

/// The system allocator's `realloc`.
///
/// # Safety
/// As for [`GlobalAlloc::realloc`] on [`System`].
#[inline(always)]
pub(crate) unsafe fn system_realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: the caller's contract, which is `GlobalAlloc`'s.
    unsafe { System.realloc(ptr, layout, new_size) }
}

/// Copy `n` bytes from `from` to `to`.
///
/// # Safety
/// Both are valid for `n` bytes and do not overlap.
#[inline]
pub(crate) unsafe fn copy(from: *const u8, to: *mut u8, n: usize) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(from, to, n) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_disjoint_zeroed_and_recognised() {
        let a = alloc(Layout::from_size_align(10, 1).unwrap()).unwrap();
        let b = alloc(Layout::from_size_align(64, 64).unwrap()).unwrap();
        assert_eq!(b.as_ptr() as usize % 64, 0);
        assert!(b.as_ptr() as usize >= a.as_ptr() as usize + 10);
        assert!(contains(a.as_ptr()) && contains(b.as_ptr()));
        assert!(!contains(std::ptr::null()));
        let boxed = Box::new(1u8);
        assert!(!contains(&*boxed));
        assert!(alloc(Layout::from_size_align(ARENA_SIZE + 1, 1).unwrap()).is_none());
        assert!(used() >= 74);
    }
}
