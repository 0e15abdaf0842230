//! Errors of allocating through a handler and of using buffers: what code
//! that allocates sees.

use thiserror::Error;

/// An allocation through a handler failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AllocError {
    /// The handler returned NULL.
    #[error(
        "handler `{handler}` could not allocate {size} bytes (it returned NULL): free memory, ask for less, or use \
         another handler"
    )]
    OutOfMemory {
        /// The handler's name.
        handler: &'static str,
        /// The size asked for.
        size: usize,
    },
    /// The alignment asked for is not a power of two.
    #[error("alignment {alignment} is not a power of two; refused before calling handler `{handler}`")]
    BadAlignment {
        /// The handler's name.
        handler: &'static str,
        /// The alignment asked for.
        alignment: usize,
    },
    /// The instance was destroyed (its owner dropped and its blocks freed).
    #[error(
        "instance `{handler}` is gone: its owner was dropped and its last block freed; keep the `Instance` alive \
         while you allocate from it"
    )]
    InstanceGone {
        /// The handler's name.
        handler: &'static str,
    },
    /// `nelem * elsize` (or a growth computation) does not fit in `usize`.
    #[error("{nelem} x {elsize} bytes overflows usize; refused before calling handler `{handler}`")]
    SizeOverflow {
        /// The handler's name.
        handler: &'static str,
        /// Element count.
        nelem: usize,
        /// Element size.
        elsize: usize,
    },
}

impl AllocError {
    /// The stable reason code: `allocation-failed`, `size-overflow`,
    /// `bad-alignment` or `instance-gone`.
    pub fn code(&self) -> &'static str {
        match self {
            AllocError::OutOfMemory { .. } => "allocation-failed",
            AllocError::SizeOverflow { .. } => "size-overflow",
            AllocError::BadAlignment { .. } => "bad-alignment",
            AllocError::InstanceGone { .. } => "instance-gone",
        }
    }
}

/// An operation on a [`Buffer`](crate::Buffer) was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BufferError {
    /// An attempt to change ownership by flag.
    #[error(
        "memplug does not change who owns memory by setting a flag ({requested}): foreign memory is owned through a \
         base object. Wrap it with `Buffer::from_base(ptr, len, base)` where dropping `base` releases the memory, \
         or with `Buffer::from_owner(owner)`; a handler-made buffer always frees itself through its handler"
    )]
    OwnsDataFlag {
        /// What was asked, e.g. `owns_data = true on a borrowed buffer`.
        requested: String,
    },
    /// Foreign memory cannot grow: memplug did not allocate it.
    #[error(
        "this buffer holds foreign memory ({kind}) of {capacity} bytes and cannot grow to {wanted}: copy it into a \
         handler-owned buffer with `Buffer::from_slice` first"
    )]
    NotResizable {
        /// `borrowed` or `base object`.
        kind: &'static str,
        /// Its capacity.
        capacity: usize,
        /// The length asked for.
        wanted: usize,
    },
    /// The handler could not allocate.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

impl BufferError {
    /// The stable reason code.
    pub fn code(&self) -> &'static str {
        match self {
            BufferError::OwnsDataFlag { .. } => "owns-data-flag-refused",
            BufferError::NotResizable { .. } => "foreign-not-resizable",
            BufferError::Alloc(e) => e.code(),
        }
    }
}
