//! The system layer: memory from the OS (`mmap`) for the regions, and from
//! libc (`malloc` and friends) for the large blocks.
//!
//! Owns [`Mapping`], one anonymous private mapping that is carved front to
//! back and unmapped when dropped, and the libc block calls, which keep every
//! block 16-byte aligned. It touches nothing but the OS and libc, and the
//! bytes of a block it copies when it moves one. It imports only
//! [`MIN_ALIGN`].
//!
//! This file and `header.rs` are the arena's raw layer (see `header.rs`).

use crate::class::MIN_ALIGN;
use std::ptr::{self, NonNull};

/// One region's memory: `len` bytes mapped at `base`, of which the first
/// `used` have been carved into slots.
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
    used: usize,
}

// SAFETY: a `Mapping` owns its pages outright (a private anonymous mapping,
// no thread-local data), and `&Mapping` only reads its three fields. Moving
// one to another thread is sound.
unsafe impl Send for Mapping {}

impl Mapping {
    /// A fresh mapping of `len` bytes (zeroed, page-aligned), or `None` if
    /// the OS refuses one.
    pub(crate) fn new(len: usize) -> Option<Mapping> {
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; the result is checked against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        Some(Mapping { base: NonNull::new(base.cast::<u8>())?, len, used: 0 })
    }

    /// The first address of the mapping.
    #[inline]
    pub(crate) fn base(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// Whether `addr` lies inside the mapping.
    #[inline]
    pub(crate) fn contains(&self, addr: usize) -> bool {
        let base = self.base();
        addr >= base && addr - base < self.len
    }

    /// The next `slot` bytes, never handed out before (so still zero), or
    /// null if fewer than `slot` bytes are left.
    #[inline]
    pub(crate) fn carve(&mut self, slot: usize) -> *mut u8 {
        if self.len - self.used < slot {
            return ptr::null_mut();
        }
        // SAFETY: `used + slot <= len`, so the slot lies inside the mapping.
        let start = unsafe { self.base.as_ptr().add(self.used) };
        self.used += slot;
        start
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are those of a mapping made by
        // `Mapping::new` and not unmapped since; its owner (the arena) is
        // going away, and nothing it handed out may be used after it.
        unsafe { libc::munmap(self.base.as_ptr().cast::<libc::c_void>(), self.len) };
    }
}

/// Whether libc's `malloc` already aligns every block to 16 bytes (its
/// alignment is that of `max_align_t`). Where it does not, large blocks come
/// from `posix_memalign` instead.
const LIBC_ALIGNS_16: bool = std::mem::align_of::<libc::max_align_t>() >= MIN_ALIGN;

/// A libc block of `size` bytes, 16-byte aligned, zeroed if asked; null on
/// failure. Give it back with [`libc_free`].
pub(crate) fn libc_alloc(size: usize, zeroed: bool) -> *mut u8 {
    if LIBC_ALIGNS_16 {
        // SAFETY: libc malloc/calloc have no preconditions.
        return unsafe { if zeroed { libc::calloc(1, size) } else { libc::malloc(size) } }.cast::<u8>();
    }
    let mut out: *mut libc::c_void = ptr::null_mut();
    // SAFETY: `out` is a valid place for the result; 16 is a power of two and
    // a multiple of the pointer size.
    if unsafe { libc::posix_memalign(&mut out, MIN_ALIGN, size) } != 0 {
        return ptr::null_mut();
    }
    if zeroed {
        // SAFETY: `out` holds `size` writable bytes.
        unsafe { ptr::write_bytes(out.cast::<u8>(), 0, size) };
    }
    out.cast::<u8>()
}

/// Resize a libc block, keeping 16-byte alignment and `min(old, new)` bytes;
/// null on failure, with the old block untouched.
///
/// # Safety
/// `ptr` is a live block of `old` bytes from [`libc_alloc`] or
/// `libc_realloc`; on success it is not used again.
pub(crate) unsafe fn libc_realloc(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
    if LIBC_ALIGNS_16 {
        // SAFETY: per the contract `ptr` is a live libc block.
        return unsafe { libc::realloc(ptr.cast::<libc::c_void>(), new) }.cast::<u8>();
    }
    let q = libc_alloc(new, false);
    if !q.is_null() {
        // SAFETY: both blocks are live, distinct and hold `min(old, new)`
        // bytes; `ptr` is a libc block given up on success.
        unsafe {
            ptr::copy_nonoverlapping(ptr, q, old.min(new));
            libc::free(ptr.cast::<libc::c_void>());
        }
    }
    q
}

/// Give a libc block back.
///
/// # Safety
/// `ptr` is a live block from [`libc_alloc`] or [`libc_realloc`], not used
/// again.
#[inline]
pub(crate) unsafe fn libc_free(ptr: *mut u8) {
    // SAFETY: per the contract.
    unsafe { libc::free(ptr.cast::<libc::c_void>()) }
}
