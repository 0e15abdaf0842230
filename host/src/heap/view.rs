//! [`View`]: a non-owning view of bytes, foreign or from a
//! [`Buffer`](crate::Buffer). It never frees anything and refuses to be made
//! to own its memory by flag (see [`Buffer::set_owns_data`](crate::Buffer::set_owns_data)).

use crate::heap::error::BufferError;
use crate::heap::handler::Handler;
use std::fmt;
use std::ops::Deref;

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

    /// A view of bytes of a buffer `handler` made.
    pub(crate) fn of_buffer(data: &'a [u8], handler: Option<Handler>) -> View<'a> {
        View { data, handler }
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
    /// [`Buffer::set_owns_data`](crate::Buffer::set_owns_data).
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
