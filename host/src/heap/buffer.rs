//! Owning buffers: memory that remembers the handler that made it.
//!
//! A [`Buffer`] allocated through the current handler (or a given one) keeps
//! that [`Handler`] and grows and frees through it, whatever the current
//! handler is by then — NumPy's rule that an array frees its data with the
//! handler that allocated it. The buffer holds a plain `Copy` reference to
//! the handler (handlers are never freed): no reference-count traffic.
//! Foreign memory is never adopted by flipping an "owns data" flag: it is
//! borrowed or owned through a base object (see `ownership.rs`).
//!
//! Invariants every constructor establishes and every method keeps:
//! 1. `bytes` covers memory valid for `capacity` bytes, the first `len`
//!    initialised, used by this buffer alone (`RawBytes`'s invariants);
//! 2. with `Owner::Handler(h)`, it is a live block `h` made for `capacity`
//!    bytes (by `alloc_aligned(capacity, align)` when `align` is non-zero),
//!    freed and resized through `h` exactly so.
//!
//! ```
//! use memplug::{Buffer, current};
//!
//! let mut buf = Buffer::from_slice(b"hello").unwrap();
//! assert_eq!(buf.handler().unwrap(), current::current());
//! buf.extend_from_slice(b", world").unwrap();
//! assert_eq!(&buf[..], b"hello, world");
//! assert!(buf.owns_data());
//! ```

use crate::heap::current;
use crate::heap::error::{AllocError, BufferError};
use crate::heap::handler::Handler;
use crate::heap::ownership::Owner;
pub use crate::heap::ownership::Ownership;
use crate::heap::raw::bytes::RawBytes;
pub use crate::heap::view::View;
use std::fmt;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut, RangeBounds};
use std::ptr::NonNull;

/// A growable byte buffer whose memory comes from a memplug [`Handler`], or
/// foreign memory owned through a base object or borrowed.
///
/// Dereferences to `[u8]` (the first [`len`](Buffer::len) bytes, always
/// initialised). A handler-made buffer always holds an allocation from its
/// handler, even at capacity 0 (one byte, see [`Handler`]'s zero-size rule).
pub struct Buffer {
    bytes: RawBytes,
    /// An alignment above the handler's own, served by its aligned path; 0
    /// for ordinary blocks.
    align: usize,
    owner: Owner,
}

impl Buffer {
    /// A handler-made buffer over `ptr`, a block `handler` just made for
    /// `cap` bytes (aligned to `align` through its aligned path when
    /// non-zero) whose first `len` bytes are initialised.
    #[allow(unsafe_code)]
    fn made_by(handler: Handler, ptr: NonNull<u8>, len: usize, cap: usize, align: usize) -> Buffer {
        // SAFETY: callers pass a block the handler returned just now for `cap`
        // writable bytes, used by no one else, with `len <= cap` initialised
        // (0, or all of them for a zeroed allocation); it stays valid until
        // the buffer frees it (invariants 1 and 2).
        let bytes = unsafe { RawBytes::new(ptr, len, cap) };
        Buffer { bytes, align, owner: Owner::Handler(handler) }
    }

    /// An empty buffer with room for `capacity` bytes, from the current
    /// handler.
    #[inline]
    pub fn with_capacity(capacity: usize) -> Result<Buffer, AllocError> {
        Buffer::with_capacity_in(capacity, current::current())
    }

    /// An empty buffer with room for `capacity` bytes, from `handler`.
    #[inline]
    pub fn with_capacity_in(capacity: usize, handler: Handler) -> Result<Buffer, AllocError> {
        let ptr = handler.alloc(capacity)?;
        Ok(Buffer::made_by(handler, ptr, 0, capacity, 0))
    }

    /// An empty buffer with room for `capacity` bytes aligned to `alignment`
    /// (a power of two), from the current handler; it keeps the alignment
    /// when it grows.
    pub fn with_capacity_aligned(capacity: usize, alignment: usize) -> Result<Buffer, AllocError> {
        Buffer::with_capacity_aligned_in(capacity, alignment, current::current())
    }

    /// As [`with_capacity_aligned`](Buffer::with_capacity_aligned), from
    /// `handler`.
    ///
    /// ```
    /// let h = memplug::current::builtin();
    /// let mut b = memplug::Buffer::with_capacity_aligned_in(10, 4096, h).unwrap();
    /// b.extend_from_slice(&[1; 100_000]).unwrap();
    /// assert_eq!(b.as_ptr() as usize % 4096, 0);
    /// ```
    pub fn with_capacity_aligned_in(capacity: usize, alignment: usize, handler: Handler) -> Result<Buffer, AllocError> {
        let ptr = handler.alloc_aligned(capacity, alignment)?;
        let align = if alignment > handler.alignment() { alignment } else { 0 };
        Ok(Buffer::made_by(handler, ptr, 0, capacity, align))
    }

    /// `len` zero bytes from the current handler (its zeroed allocation).
    pub fn zeroed(len: usize) -> Result<Buffer, AllocError> {
        Buffer::zeroed_in(len, current::current())
    }

    /// `len` zero bytes from `handler` (its zeroed allocation).
    pub fn zeroed_in(len: usize, handler: Handler) -> Result<Buffer, AllocError> {
        let ptr = handler.alloc_zeroed(len, 1)?;
        Ok(Buffer::made_by(handler, ptr, len, len, 0))
    }

    /// A copy of `data` in memory from the current handler.
    pub fn from_slice(data: &[u8]) -> Result<Buffer, AllocError> {
        Buffer::from_slice_in(data, current::current())
    }

    /// A copy of `data` in memory from `handler`.
    pub fn from_slice_in(data: &[u8], handler: Handler) -> Result<Buffer, AllocError> {
        let mut b = Buffer::with_capacity_in(data.len(), handler)?;
        b.bytes.push_slice(data);
        Ok(b)
    }

    /// Own foreign memory through `owner`: the buffer covers
    /// `owner.as_mut()` and drops `owner` (once) when it is dropped.
    ///
    /// ```
    /// let b = memplug::Buffer::from_owner(vec![1u8, 2, 3]);
    /// assert_eq!(&b[..], &[1, 2, 3]);
    /// assert!(b.owns_data());
    /// assert!(b.handler().is_none());
    /// ```
    #[allow(unsafe_code)]
    pub fn from_owner<O: AsMut<[u8]> + Send + 'static>(owner: O) -> Buffer {
        let mut boxed = Box::new(owner);
        let slice: &mut [u8] = (*boxed).as_mut();
        let (ptr, len) = (NonNull::new(slice.as_mut_ptr()).unwrap_or(NonNull::dangling()), slice.len());
        // SAFETY: the slice lives in the boxed owner, which does not move
        // (the box is moved, not its contents), is never reached again except
        // to be dropped with the buffer, and its bytes are initialised.
        unsafe { Buffer::from_base(ptr, len, boxed) }
    }

    /// Own foreign memory through a base object: the buffer covers
    /// `len` bytes at `ptr` and drops `base` (exactly once) when it is
    /// dropped. The base's `Drop` is what releases the memory.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes, all initialised,
    /// for as long as `base` is alive, and nothing else uses them meanwhile.
    #[allow(unsafe_code)]
    pub unsafe fn from_base<B: Send + 'static>(ptr: NonNull<u8>, len: usize, base: B) -> Buffer {
        // SAFETY: the caller's contract; the base lives as long as the buffer.
        let bytes = unsafe { RawBytes::new(ptr, len, len) };
        Buffer { bytes, align: 0, owner: Owner::base(base) }
    }

    /// Borrow foreign memory owned elsewhere: nothing is released on drop.
    /// Prefer [`View`] for Rust slices.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` initialised bytes for the
    /// whole life of the buffer, and nothing else uses them meanwhile.
    #[allow(unsafe_code)]
    pub unsafe fn from_borrowed(ptr: NonNull<u8>, len: usize) -> Buffer {
        // SAFETY: the caller's contract.
        let bytes = unsafe { RawBytes::new(ptr, len, len) };
        Buffer { bytes, align: 0, owner: Owner::Borrowed }
    }

    /// Rebuild a handler-made buffer from [`Buffer::into_raw_parts`].
    ///
    /// # Safety
    /// `ptr` was returned by `handler` for `cap` bytes (as reported by
    /// `into_raw_parts`), its first `len <= cap` bytes are initialised, and it
    /// is not used elsewhere.
    #[allow(unsafe_code)]
    pub unsafe fn from_raw_parts_in(ptr: NonNull<u8>, len: usize, cap: usize, handler: Handler) -> Buffer {
        // SAFETY: the caller's contract: invariants 1 and 2 hold.
        let bytes = unsafe { RawBytes::new(ptr, len, cap) };
        Buffer { bytes, align: 0, owner: Owner::Handler(handler) }
    }

    /// Give up a handler-made buffer without freeing it: `(ptr, len, cap,
    /// handler)`. Free it later with `handler.free(ptr, cap)`, or rebuild it
    /// with [`Buffer::from_raw_parts_in`]. Foreign buffers and buffers with
    /// an alignment above their handler's are returned as they are
    /// (`Err(self)`).
    pub fn into_raw_parts(self) -> Result<(NonNull<u8>, usize, usize, Handler), Buffer> {
        match self.owner {
            Owner::Handler(h) if self.align == 0 => {
                let parts = (self.bytes.ptr(), self.bytes.len(), self.bytes.cap(), h);
                std::mem::forget(self);
                Ok(parts)
            }
            _ => Err(self),
        }
    }

    /// Number of initialised bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether `len() == 0`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bytes.len() == 0
    }

    /// Bytes the buffer can hold without growing.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.bytes.cap()
    }

    /// Pointer to the first byte.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.bytes.ptr().as_ptr()
    }

    /// Mutable pointer to the first byte.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.bytes.ptr().as_ptr()
    }

    /// The initialised bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The initialised bytes, mutable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.bytes.as_mut_slice()
    }

    /// The capacity past `len`, possibly uninitialised. Write into it, then
    /// [`set_len`](Buffer::set_len).
    #[inline]
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        self.bytes.spare_mut()
    }

    /// Set the length.
    ///
    /// # Safety
    /// `new_len <= capacity()` and the first `new_len` bytes are initialised.
    #[inline]
    #[allow(unsafe_code)]
    pub unsafe fn set_len(&mut self, new_len: usize) {
        // SAFETY: the caller's contract, which is `RawBytes::set_len`'s.
        unsafe { self.bytes.set_len(new_len) }
    }

    /// The handler that made this buffer and will free it; `None` for
    /// foreign memory.
    #[inline]
    pub fn handler(&self) -> Option<Handler> {
        match self.owner {
            Owner::Handler(h) => Some(h),
            _ => None,
        }
    }

    /// The alignment the buffer guarantees for its first byte.
    pub fn alignment(&self) -> usize {
        match self.owner {
            Owner::Handler(h) => self.align.max(h.alignment()),
            _ => 1 << (self.as_ptr() as usize).trailing_zeros().min(12),
        }
    }

    /// The kind of memory (a DLPack `DLDeviceType`: 1 = CPU, 3 = CUDA
    /// pinned host, …) as the handler declared it; foreign memory reports
    /// CPU (1).
    pub fn memory_kind(&self) -> i32 {
        match self.owner {
            Owner::Handler(h) => h.info().memory_kind,
            _ => memplug_abi::KIND_CPU,
        }
    }

    /// How the memory is owned.
    pub fn ownership(&self) -> Ownership {
        self.owner.ownership()
    }

    /// Whether dropping the buffer releases its memory (handler-made or
    /// base-owned), i.e. NumPy's `OWNDATA`.
    pub fn owns_data(&self) -> bool {
        self.owner.owns_data()
    }

    /// Refuse to change ownership by flag. Asking for the state the buffer
    /// already has is a no-op; anything else is
    /// [`BufferError::OwnsDataFlag`], whose message explains base-object
    /// ownership.
    ///
    /// ```
    /// let raw = [0u8; 4];
    /// let view = memplug::View::new(&raw);
    /// let err = view.set_owns_data(true).unwrap_err();
    /// assert_eq!(err.code(), "owns-data-flag-refused");
    /// assert!(err.to_string().contains("base object"));
    /// ```
    pub fn set_owns_data(&mut self, owns: bool) -> Result<(), BufferError> {
        self.owner.refuse_flag(owns)
    }

    /// Make room for at least `additional` more bytes, growing through the
    /// buffer's own handler (amortised doubling). Foreign memory cannot grow.
    pub fn reserve(&mut self, additional: usize) -> Result<(), BufferError> {
        let Some(needed) = self.len().checked_add(additional) else {
            let handler = self.handler().map_or("<foreign>", |h| h.name());
            return Err(AllocError::SizeOverflow { handler, nelem: self.len(), elsize: 1 }.into());
        };
        if needed <= self.capacity() {
            return Ok(());
        }
        let new_cap = needed.max(self.capacity().saturating_mul(2)).max(8);
        self.grow_to(new_cap)
    }

    /// Reallocate to exactly `new_cap` bytes through the owning handler,
    /// keeping `min(len, new_cap)` bytes. Foreign memory cannot be resized.
    #[allow(unsafe_code)]
    pub(crate) fn grow_to(&mut self, new_cap: usize) -> Result<(), BufferError> {
        let Owner::Handler(h) = self.owner else {
            let kind = self.owner.foreign_kind();
            return Err(BufferError::NotResizable { kind, capacity: self.capacity(), wanted: new_cap });
        };
        let (ptr, cap) = (self.bytes.ptr(), self.bytes.cap());
        let p = if self.align == 0 {
            // SAFETY: invariant 2: `ptr` is `h`'s live block of `cap` bytes. On
            // success the old pointer is replaced below and never used again;
            // on failure it is untouched and still ours.
            unsafe { h.realloc(ptr, cap, new_cap) }?
        } else {
            // SAFETY: as above, for a block from `alloc_aligned(cap, align)`.
            unsafe { h.realloc_aligned(ptr, cap, new_cap, self.align) }?
        };
        // SAFETY: `p` is `h`'s new block of `new_cap` bytes, holding the first
        // `min(cap, new_cap)` bytes of the old one (so the first
        // `min(len, new_cap)` initialised bytes), used by this buffer alone.
        unsafe { self.bytes.replace(p, new_cap) };
        Ok(())
    }

    /// Append bytes, growing if needed.
    pub fn extend_from_slice(&mut self, data: &[u8]) -> Result<(), BufferError> {
        self.reserve(data.len())?;
        self.bytes.push_slice(data);
        Ok(())
    }

    /// Append one byte, growing if needed.
    pub fn push(&mut self, byte: u8) -> Result<(), BufferError> {
        self.extend_from_slice(&[byte])
    }

    /// Set the length to `new_len`, filling new bytes with `value`.
    pub fn resize(&mut self, new_len: usize, value: u8) -> Result<(), BufferError> {
        let len = self.len();
        if new_len <= len {
            self.bytes.truncate(new_len);
            return Ok(());
        }
        self.reserve(new_len - len)?;
        self.bytes.push_fill(new_len - len, value);
        Ok(())
    }

    /// Shorten to `len` bytes (no effect if already shorter). Keeps the
    /// capacity.
    pub fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
    }

    /// Give back unused capacity to the handler (`realloc` to `len`).
    pub fn shrink_to_fit(&mut self) -> Result<(), BufferError> {
        if self.capacity() == self.len() || !matches!(self.owner, Owner::Handler(_)) {
            return Ok(());
        }
        self.grow_to(self.len())
    }

    /// A non-owning view of a range of the buffer.
    pub fn view(&self, range: impl RangeBounds<usize>) -> View<'_> {
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        View::of_buffer(&self[range], self.handler())
    }
}

impl Deref for Buffer {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for Buffer {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("ownership", &self.ownership())
            .finish()
    }
}

impl Drop for Buffer {
    #[inline]
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if let Owner::Handler(h) = self.owner {
            let (ptr, cap) = (self.bytes.ptr(), self.bytes.cap());
            // SAFETY: invariant 2, and the buffer is going away, so the block
            // is never used again. Base-owned memory is released by dropping
            // the base (the field's own drop, right after this).
            unsafe { if self.align == 0 { h.free(ptr, cap) } else { h.free_aligned(ptr, cap, self.align) } }
        }
    }
}
