//! [`RawBytes`]: the memory of a buffer, and the slices over it.
//!
//! A `RawBytes` is a pointer with a capacity and a length, and two
//! invariants that its one unsafe constructor makes the caller promise and
//! every method keeps:
//! 1. `ptr` is valid for reads and writes of `cap` bytes while the value
//!    lives, and nothing else accesses them (it is their only user);
//! 2. the first `len <= cap` bytes are initialised.
//!
//! It does not know who releases the memory: its owner (a `Buffer`) does.
//! [`Unshared`] is the other half of what lets a buffer be `Sync`: a value
//! that is never reached through a shared reference.

use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Memory valid for `cap` bytes whose first `len` are initialised; see the
/// module docs for the invariants.
pub(crate) struct RawBytes {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: a `RawBytes` is the unique user of its memory (invariant 1), like a
// `Box<[u8]>`: moving it to another thread moves that exclusive access.
unsafe impl Send for RawBytes {}
// SAFETY: `&RawBytes` only gives shared, read-only access to initialised
// bytes (invariants 1 and 2), like `&[u8]`.
unsafe impl Sync for RawBytes {}

impl RawBytes {
    /// Take `ptr` as memory of `cap` bytes whose first `len` are
    /// initialised.
    ///
    /// # Safety
    /// `len <= cap`; `ptr` is valid for reads and writes of `cap` bytes for
    /// as long as the `RawBytes` (or any pointer it is later
    /// [`replace`](RawBytes::replace)d with) lives; the first `len` are
    /// initialised; nothing else accesses them meanwhile.
    #[inline]
    pub(crate) unsafe fn new(ptr: NonNull<u8>, len: usize, cap: usize) -> RawBytes {
        debug_assert!(len <= cap);
        RawBytes { ptr, len, cap }
    }

    /// The first byte.
    #[inline]
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Initialised bytes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes valid for writes.
    #[inline]
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// The initialised bytes.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: invariants 1 and 2: `len` initialised bytes at `ptr`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The initialised bytes, mutable.
    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: invariants 1 and 2, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes past `len`, possibly uninitialised.
    #[inline]
    pub(crate) fn spare_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: invariant 1: the `cap - len` bytes past `len` are valid for
        // writes, and `&mut self` makes the access unique; `MaybeUninit` makes
        // no claim about their contents.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(self.len) as *mut MaybeUninit<u8>, self.cap - self.len)
        }
    }

    /// Append `data`, which must fit in the spare capacity.
    ///
    /// # Panics
    /// If `data` is longer than the spare capacity.
    #[inline]
    pub(crate) fn push_slice(&mut self, data: &[u8]) {
        let spare = &mut self.spare_mut()[..data.len()];
        for (dst, &src) in spare.iter_mut().zip(data) {
            dst.write(src);
        }
        self.len += data.len();
    }

    /// Append `count` copies of `value`, which must fit in the spare
    /// capacity.
    ///
    /// # Panics
    /// If `count` is more than the spare capacity.
    pub(crate) fn push_fill(&mut self, count: usize, value: u8) {
        for b in &mut self.spare_mut()[..count] {
            b.write(value);
        }
        self.len += count;
    }

    /// Shorten to `len` bytes (no effect if already shorter).
    #[inline]
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Set the length.
    ///
    /// # Safety
    /// `len <= cap` and the first `len` bytes are initialised.
    #[inline]
    pub(crate) unsafe fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.cap);
        self.len = len;
    }

    /// Move to new memory (after a reallocation); the length is cut to
    /// `cap` if it was longer.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `cap` bytes under the same
    /// terms as in [`new`](RawBytes::new), and holds the current first
    /// `min(len, cap)` bytes; the old memory is not used again.
    #[inline]
    pub(crate) unsafe fn replace(&mut self, ptr: NonNull<u8>, cap: usize) {
        self.ptr = ptr;
        self.cap = cap;
        self.len = self.len.min(cap);
    }
}

/// A value that is never reached through a shared reference, so it may be
/// shared between threads whatever it is (like `std::sync::Exclusive`): it
/// can only be moved and dropped.
pub(crate) struct Unshared<T>(T);

impl<T> Unshared<T> {
    /// Wrap `value`; it comes out only by being dropped.
    pub(crate) fn new(value: T) -> Unshared<T> {
        Unshared(value)
    }
}

// SAFETY: `Unshared` has no method that takes `&self`, so a shared reference
// to it gives access to nothing; only its owner (by value or `&mut`) can move
// or drop the inner value.
unsafe impl<T> Sync for Unshared<T> {}
