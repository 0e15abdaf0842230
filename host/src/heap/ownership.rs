//! Who owns a buffer's memory, and the rule that foreign memory is never
//! adopted by flipping an "owns data" flag.
//!
//! Foreign memory (from another library, a memory map, a GPU runtime) is
//! either
//! - **borrowed** — [`View`](crate::View) for a Rust slice, or
//!   [`Buffer::from_borrowed`](crate::Buffer::from_borrowed) for a raw
//!   pointer whose owner outlives the buffer; or
//! - **owned through a base object** —
//!   [`Buffer::from_base`](crate::Buffer::from_base) /
//!   [`Buffer::from_owner`](crate::Buffer::from_owner): the buffer keeps the
//!   base object and drops it (once) when the buffer is dropped, and the
//!   base's `Drop` releases the memory (NumPy's PyCapsule-base pattern).
//!
//! [`Buffer::set_owns_data`](crate::Buffer::set_owns_data) exists so that
//! code ported from NumPy finds the door and the sign on it: it refuses any
//! change with [`BufferError::OwnsDataFlag`].

use crate::heap::error::BufferError;
use crate::heap::handler::Handler;
use crate::heap::raw::bytes::Unshared;
use std::any::Any;

/// Who releases a buffer's memory.
pub(crate) enum Owner {
    /// Made by this handler; freed through it.
    Handler(Handler),
    /// Foreign memory kept alive by a base object; dropping it releases.
    Base(#[expect(dead_code, reason = "held only to be dropped with the buffer")] Unshared<Box<dyn Any + Send>>),
    /// Foreign memory owned elsewhere; nothing is released.
    Borrowed,
}

/// How a buffer's memory is owned, as reported by
/// [`Buffer::ownership`](crate::Buffer::ownership).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Allocated by this handler, and freed through it on drop.
    Handler(Handler),
    /// Foreign memory owned through a base object, dropped with the buffer.
    Base,
    /// Foreign memory owned elsewhere.
    Borrowed,
}

impl Owner {
    /// Ownership through `base`, whose drop releases the memory.
    pub(crate) fn base<B: Send + 'static>(base: B) -> Owner {
        Owner::Base(Unshared::new(Box::new(base)))
    }

    /// The public view of this owner.
    pub(crate) fn ownership(&self) -> Ownership {
        match self {
            Owner::Handler(h) => Ownership::Handler(*h),
            Owner::Base(_) => Ownership::Base,
            Owner::Borrowed => Ownership::Borrowed,
        }
    }

    /// Whether dropping releases the memory (NumPy's `OWNDATA`).
    pub(crate) fn owns_data(&self) -> bool {
        !matches!(self, Owner::Borrowed)
    }

    /// For foreign memory, what kind it is (`borrowed` or `base object`).
    pub(crate) fn foreign_kind(&self) -> &'static str {
        if matches!(self, Owner::Borrowed) { "borrowed" } else { "base object" }
    }

    /// Refuse to change ownership by flag: asking for the state there is
    /// already is a no-op; anything else is [`BufferError::OwnsDataFlag`].
    pub(crate) fn refuse_flag(&self, owns: bool) -> Result<(), BufferError> {
        if owns == self.owns_data() {
            return Ok(());
        }
        let what = match self {
            Owner::Borrowed => "owns_data = true on a borrowed buffer",
            Owner::Base(_) => "owns_data = false on a base-owned buffer",
            Owner::Handler(_) => "owns_data = false on a handler-made buffer",
        };
        Err(BufferError::OwnsDataFlag { requested: what.into() })
    }
}
