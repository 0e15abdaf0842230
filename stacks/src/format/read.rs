//! Reading a trace: a pure function over bytes from another process,
//! trusted in nothing. Every length is checked; a truncated or damaged
//! record ends the reading with an error; nothing panics.

use super::{
    ErrorKind, Frames, HEADER, Kind, MAGIC, MAX_FRAMES, NO_STACK, Origin, RawError, RawModule, Record, VERSION,
};
use super::{FLAG_EXACT_FIRST, FLAG_INHERITED};

/// Why reading stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    /// The bytes end inside a record (the writer was killed mid-write).
    Truncated {
        /// Where the record starts.
        at: usize,
    },
    /// A record does not start with [`MAGIC`], or is of a newer version.
    BadHeader {
        /// Where.
        at: usize,
    },
    /// A record's payload does not parse as its kind says.
    BadPayload {
        /// Where the record starts.
        at: usize,
    },
}

impl core::fmt::Display for FormatError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FormatError::Truncated { at } => write!(f, "the trace ends inside the record at byte {at}"),
            FormatError::BadHeader { at } => write!(f, "no record header (or a newer format) at byte {at}"),
            FormatError::BadPayload { at } => write!(f, "the record at byte {at} is damaged"),
        }
    }
}

impl std::error::Error for FormatError {}

/// A cursor over a payload.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
    fn stack(&mut self) -> Option<Option<Frames<'a>>> {
        match self.u16()? {
            NO_STACK => Some(None),
            n if n as usize > MAX_FRAMES => None,
            n => self.take(n as usize * 8).map(|b| Some(Frames(b))),
        }
    }
    fn frames(&mut self) -> Option<Frames<'a>> {
        self.stack()?
    }
}

/// The records of a trace, in order; an error ends the iteration.
pub struct Records<'a> {
    bytes: &'a [u8],
    at: usize,
    failed: bool,
}

/// Read the records of `bytes`.
pub fn records(bytes: &[u8]) -> Records<'_> {
    Records { bytes, at: 0, failed: false }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.bytes.len() {
            return None;
        }
        let at = self.at;
        let got = self.read(at);
        if got.is_err() {
            self.failed = true;
        }
        Some(got)
    }
}

impl<'a> Records<'a> {
    fn read(&mut self, at: usize) -> Result<Record<'a>, FormatError> {
        let (record, next) = record_at(self.bytes, at)?;
        self.at = next;
        Ok(record)
    }
}

/// The record that starts at byte `at` of `bytes`, and where the bytes
/// after it start.
pub(super) fn record_at(bytes: &[u8], at: usize) -> Result<(Record<'_>, usize), FormatError> {
    let rest = bytes.get(at..).unwrap_or_default();
    let Some(mut h) = rest.get(..HEADER).map(Cursor) else { return Err(FormatError::Truncated { at }) };
    let bad = FormatError::BadHeader { at };
    if h.take(4) != Some(&MAGIC[..]) || h.u8() != Some(VERSION) {
        return Err(bad);
    }
    let (kind, flags, len, pid, nonce) = (h.u8(), h.u16(), h.u32(), h.u32(), h.u64());
    let (Some(kind), Some(flags), Some(len), Some(pid), Some(nonce)) = (kind, flags, len, pid, nonce) else {
        return Err(bad);
    };
    let kind = Kind::from_u8(kind).ok_or(bad)?;
    let Some(payload) = rest.get(HEADER..HEADER + len as usize) else { return Err(FormatError::Truncated { at }) };
    let origin = Origin { pid, nonce };
    let record = parse(kind, flags, origin, Cursor(payload)).ok_or(FormatError::BadPayload { at })?;
    Ok((record, at + HEADER + len as usize))
}

/// A payload of `kind`; `None` if it does not parse or has bytes left over.
fn parse<'a>(kind: Kind, flags: u16, origin: Origin, mut c: Cursor<'a>) -> Option<Record<'a>> {
    let record = match kind {
        Kind::Module => {
            let (start, end, bias) = (c.u64()?, c.u64()?, c.u64()?);
            let (id_len, path_len) = (c.u8()?, c.u16()?);
            let build_id = c.take(id_len as usize)?;
            let path = c.take(path_len as usize)?;
            Record::Module(origin, RawModule { start, end, bias, build_id, path })
        }
        Kind::Error => {
            let kind = ErrorKind::from_u8(c.u8()?)?;
            c.take(3)?;
            let thread = c.u32()?;
            let (address, block, size, offset) = (c.u64()?, c.u64()?, c.u64()?, c.u64()? as i64);
            let (alloc_thread, free_thread) = (c.u32()?, c.u32()?);
            let (stack, alloc_stack, free_stack) = (c.frames()?, c.frames()?, c.stack()?);
            let exact_first = flags & FLAG_EXACT_FIRST != 0;
            Record::Error(
                origin,
                RawError {
                    kind,
                    thread,
                    address,
                    block,
                    size,
                    offset,
                    alloc_thread,
                    free_thread,
                    stack,
                    alloc_stack,
                    free_stack,
                    exact_first,
                },
            )
        }
        Kind::Leak => Record::Leak { origin, bytes: c.u64()?, blocks: c.u64()?, stack: c.frames()? },
        Kind::Note => Record::Note(origin, core::str::from_utf8(c.take(c.0.len())?).ok()?),
        Kind::Sample => {
            let (bytes, rate, allocated, freed) = (c.u64()?, c.u64()?, c.u64()?, c.u64()?);
            let inherited = flags & FLAG_INHERITED != 0;
            Record::Sample { origin, bytes, rate, allocated, freed, inherited, stack: c.frames()? }
        }
    };
    c.0.is_empty().then_some(record)
}
