//! A fixed buffer that `write!` fills without allocating (this library is
//! the allocator): messages, the report, numbers turned into text. Imports
//! nothing.

use core::fmt::Write;

/// A fixed buffer that `write!` fills without allocating.
pub(crate) struct Text {
    /// The bytes.
    pub(crate) buf: [u8; 4096],
    /// How many are used.
    pub(crate) len: usize,
}

impl Text {
    /// Empty.
    pub(crate) const fn new() -> Text {
        Text { buf: [0; 4096], len: 0 }
    }
    /// The text so far.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Write for Text {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() { Err(core::fmt::Error) } else { Ok(()) }
    }
}
