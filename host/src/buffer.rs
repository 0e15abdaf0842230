//! Owning buffers: memory that remembers the handler that made it.
//!
//! A [`Buffer`] allocated through the current handler (or a given one) keeps
//! that [`Handler`] and grows and frees through it, whatever the current
//! handler is by then — NumPy's rule that an array frees its data with the
//! handler that allocated it. The buffer holds a plain `Copy` reference to
//! the handler (handlers are never freed), so making and dropping a buffer
//! costs no reference-count traffic.
//!
//! Foreign memory (from another library, a memory map, a GPU runtime) is
//! never adopted by flipping an "owns data" flag. It is either
//! - **borrowed** — [`View`] for a Rust slice, or [`Buffer::from_borrowed`]
//!   for a raw pointer whose owner outlives the buffer; or
//! - **owned through a base object** — [`Buffer::from_base`] /
//!   [`Buffer::from_owner`]: the buffer keeps the base object and drops it
//!   (once) when the buffer is dropped, and the base's `Drop` releases the
//!   memory (NumPy's PyCapsule-base pattern).
//!
//! [`Buffer::set_owns_data`] exists so that code ported from NumPy finds the
//! door and the sign on it: it refuses any change with
//! [`BufferError::OwnsDataFlag`].
//!
//! ```
//! use memplug::{Buffer, current};
//!
//! let mut buf = Buffer::from_slice(b"hello").unwrap();
//! let made_by = buf.handler().unwrap();
//! assert_eq!(made_by, current::current());
//! buf.extend_from_slice(b", world").unwrap();
//! assert_eq!(&buf[..], b"hello, world");
//! assert!(buf.owns_data());
//! ```

use crate::current;
use crate::error::{AllocError, BufferError};
use crate::handler::Handler;
use std::any::Any;
use std::fmt;
use std::ops::{Deref, RangeBounds};
use std::ptr::NonNull;

/// Who releases a buffer's memory.
pub(crate) enum Owner {
    /// Made by this handler; freed through it.
    Handler(Handler),
    /// Foreign memory kept alive by a base object; dropping it releases.
    Base(#[allow(dead_code)] Box<dyn Any + Send>),
    /// Foreign memory owned elsewhere; nothing is released.
    Borrowed,
}

/// How a buffer's memory is owned, as reported by [`Buffer::ownership`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Allocated by this handler, and freed through it on drop.
    Handler(Handler),
    /// Foreign memory owned through a base object, dropped with the buffer.
    Base,
    /// Foreign memory owned elsewhere.
    Borrowed,
}

/// A growable byte buffer whose memory comes from a memplug [`Handler`], or
/// foreign memory owned through a base object or borrowed.
///
/// Dereferences to `[u8]` (the first [`len`](Buffer::len) bytes, always
/// initialised). A handler-made buffer always holds an allocation from its
/// handler, even at capacity 0 (one byte, see [`Handler`]'s zero-size rule).
pub struct Buffer {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) len: usize,
    pub(crate) cap: usize,
    /// An alignment above the handler's own, served by its aligned path; 0
    /// for ordinary blocks.
    pub(crate) align: usize,
    pub(crate) owner: Owner,
}

impl Buffer {
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
        Ok(Buffer { ptr, len: 0, cap: capacity, align: 0, owner: Owner::Handler(handler) })
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
        Ok(Buffer { ptr, len: 0, cap: capacity, align, owner: Owner::Handler(handler) })
    }

    /// `len` zero bytes from the current handler (its zeroed allocation).
    pub fn zeroed(len: usize) -> Result<Buffer, AllocError> {
        Buffer::zeroed_in(len, current::current())
    }

    /// `len` zero bytes from `handler` (its zeroed allocation).
    pub fn zeroed_in(len: usize, handler: Handler) -> Result<Buffer, AllocError> {
        let ptr = handler.alloc_zeroed(len, 1)?;
        Ok(Buffer { ptr, len, cap: len, align: 0, owner: Owner::Handler(handler) })
    }

    /// A copy of `data` in memory from the current handler.
    pub fn from_slice(data: &[u8]) -> Result<Buffer, AllocError> {
        Buffer::from_slice_in(data, current::current())
    }

    /// A copy of `data` in memory from `handler`.
    pub fn from_slice_in(data: &[u8], handler: Handler) -> Result<Buffer, AllocError> {
        let mut b = Buffer::with_capacity_in(data.len(), handler)?;
        b.extend_from_slice(data).map_err(|e| match e {
            BufferError::Alloc(a) => a,
            _ => unreachable!("a handler-made buffer can grow"),
        })?;
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
    pub fn from_owner<O: AsMut<[u8]> + Send + 'static>(owner: O) -> Buffer {
        let mut boxed = Box::new(owner);
        let slice: &mut [u8] = (*boxed).as_mut();
        let (ptr, len) = (NonNull::new(slice.as_mut_ptr()).unwrap_or(NonNull::dangling()), slice.len());
        Buffer { ptr, len, cap: len, align: 0, owner: Owner::Base(boxed) }
    }

    /// Number of initialised bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether `len() == 0`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the buffer can hold without growing.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Pointer to the first byte.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Mutable pointer to the first byte.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
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
            _ => 1 << (self.ptr.as_ptr() as usize).trailing_zeros().min(12),
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
        match self.owner {
            Owner::Handler(h) => Ownership::Handler(h),
            Owner::Base(_) => Ownership::Base,
            Owner::Borrowed => Ownership::Borrowed,
        }
    }

    /// Whether dropping the buffer releases its memory (handler-made or
    /// base-owned), i.e. NumPy's `OWNDATA`.
    pub fn owns_data(&self) -> bool {
        !matches!(self.owner, Owner::Borrowed)
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
        if owns == self.owns_data() {
            return Ok(());
        }
        let what = match self.owner {
            Owner::Borrowed => "owns_data = true on a borrowed buffer",
            Owner::Base(_) => "owns_data = false on a base-owned buffer",
            Owner::Handler(_) => "owns_data = false on a handler-made buffer",
        };
        Err(BufferError::OwnsDataFlag { requested: what.into() })
    }

    /// Make room for at least `additional` more bytes, growing through the
    /// buffer's own handler (amortised doubling). Foreign memory cannot grow.
    pub fn reserve(&mut self, additional: usize) -> Result<(), BufferError> {
        let Some(needed) = self.len.checked_add(additional) else {
            let handler = self.handler().map_or("<foreign>", |h| h.name());
            return Err(AllocError::SizeOverflow { handler, nelem: self.len, elsize: 1 }.into());
        };
        if needed <= self.cap {
            return Ok(());
        }
        let new_cap = needed.max(self.cap.saturating_mul(2)).max(8);
        self.grow_to(new_cap)
    }

    /// Append bytes, growing if needed.
    pub fn extend_from_slice(&mut self, data: &[u8]) -> Result<(), BufferError> {
        self.reserve(data.len())?;
        let start = self.len;
        let spare = self.spare_capacity_mut();
        for (dst, &src) in spare.iter_mut().zip(data) {
            dst.write(src);
        }
        self.len = start + data.len();
        Ok(())
    }

    /// Append one byte, growing if needed.
    pub fn push(&mut self, byte: u8) -> Result<(), BufferError> {
        self.extend_from_slice(&[byte])
    }

    /// Set the length to `new_len`, filling new bytes with `value`.
    pub fn resize(&mut self, new_len: usize, value: u8) -> Result<(), BufferError> {
        if new_len <= self.len {
            self.len = new_len;
            return Ok(());
        }
        self.reserve(new_len - self.len)?;
        let extra = new_len - self.len;
        for b in &mut self.spare_capacity_mut()[..extra] {
            b.write(value);
        }
        self.len = new_len;
        Ok(())
    }

    /// Shorten to `len` bytes (no effect if already shorter). Keeps the
    /// capacity.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Give back unused capacity to the handler (`realloc` to `len`).
    pub fn shrink_to_fit(&mut self) -> Result<(), BufferError> {
        if self.cap == self.len || !matches!(self.owner, Owner::Handler(_)) {
            return Ok(());
        }
        self.grow_to(self.len)
    }

    /// A non-owning view of a range of the buffer.
    pub fn view(&self, range: impl RangeBounds<usize>) -> View<'_> {
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        View { data: &self[range], handler: self.handler() }
    }
}

impl Deref for Buffer {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for Buffer {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.len)
            .field("capacity", &self.cap)
            .field("ownership", &self.ownership())
            .finish()
    }
}

/// A non-owning view of bytes: it never frees anything.
#[derive(Clone, Copy)]
pub struct View<'a> {
    data: &'a [u8],
    handler: Option<Handler>,
}

impl<'a> View<'a> {
    /// A view of any slice (foreign or not).
    pub fn new(data: &'a [u8]) -> View<'a> {
        View { data, handler: None }
    }

    /// The handler that made the viewed buffer, if the view came from one.
    pub fn base_handler(&self) -> Option<Handler> {
        self.handler
    }

    /// Always `false`: a view never owns.
    pub fn owns_data(&self) -> bool {
        false
    }

    /// Refuse to make a view own its memory by flag: see
    /// [`Buffer::set_owns_data`].
    pub fn set_owns_data(&self, owns: bool) -> Result<(), BufferError> {
        if !owns {
            return Ok(());
        }
        Err(BufferError::OwnsDataFlag { requested: "owns_data = true on a view".into() })
    }

    /// The viewed bytes.
    pub fn as_slice(&self) -> &'a [u8] {
        self.data
    }
}

impl Deref for View<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.data
    }
}

impl fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("View").field("len", &self.data.len()).field("base_handler", &self.handler).finish()
    }
}
