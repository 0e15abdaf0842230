//! The raw trace format: what a process hands back — the modules it had
//! loaded, the heap errors it found, the blocks live at exit — as records
//! of raw return addresses, for a symbolizer outside the process.
//!
//! Writing ([`Encoder`]) fills a caller's buffer and allocates nothing, so
//! it runs in a signal handler or inside an allocator. Reading
//! ([`Records`]) is a pure function over bytes that come from another
//! process and are trusted in nothing: every length is checked, a truncated
//! or damaged record ends the reading with an error, and nothing panics.
//!
//! A trace is a sequence of records. Each has a 24-byte header, all numbers
//! little-endian:
//!
//! | bytes | field |
//! | --- | --- |
//! | 4 | magic `MPST` |
//! | 1 | format version ([`VERSION`]) |
//! | 1 | kind ([`Kind`]) |
//! | 2 | flags (per kind; 0 unless said) |
//! | 4 | payload bytes that follow |
//! | 4 | the process id |
//! | 8 | the process's nonce (tells apart the images one pid `exec`s) |
//!
//! Payloads: a **module** is `start, end, bias` (u64 each), the build id's
//! length (u8) and the path's (u16), then both; an **error** is its
//! [`ErrorKind`] (u8), 3 zero bytes, the thread (u32), `address, block,
//! size` (u64), `offset` (i64), the allocating and freeing threads (u32;
//! [`NO_THREAD`] when not freed), then three stacks (access, allocation,
//! free), each a count (u16) and that many u64 addresses (the free stack's
//! count is [`NO_STACK`] when there is none); a **leak** is `bytes, blocks`
//! (u64) and one stack; a **note** is UTF-8 text; a **sample** (a heap
//! profile's sampled allocation, see [`SampleOut`]) is `bytes, rate,
//! allocated, freed` (u64) and one stack, with the flag
//! [`FLAG_INHERITED`].
//!
//! A heap profile's records go to a *spool* instead, a file each process
//! fills through a shared mapping: the same records, each at a multiple of
//! 8 bytes, after a header (see [`spooled`]).

mod read;
mod spool;

pub use read::{FormatError, Records, records};
pub use spool::{SPOOL_ALIGN, SPOOL_COMMITTED, SPOOL_HEADER, SPOOL_INFIX, SPOOL_MAGIC, SPOOL_USED, Spooled, spooled};

/// The first four bytes of every record.
pub const MAGIC: [u8; 4] = *b"MPST";
/// The version of the format written.
pub const VERSION: u8 = 1;
/// Bytes of a record's header.
pub const HEADER: usize = 24;
/// The thread of a block never freed.
pub const NO_THREAD: u32 = u32::MAX;
/// The frame count of a stack that is absent (the free stack of a live
/// block).
pub const NO_STACK: u16 = u16::MAX;
/// The most frames a stack in a record may have.
pub const MAX_FRAMES: usize = 256;
/// Error flag: the access stack's first address is the faulting
/// instruction itself, not a return address.
pub const FLAG_EXACT_FIRST: u16 = 1;
/// Sample flag: the block was allocated before the process was forked
/// from its parent (it is in use in the process, but the parent allocated
/// it).
pub const FLAG_INHERITED: u16 = 1;
/// A sample's `freed` when the block was not freed.
pub const NOT_FREED: u64 = u64::MAX;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A loaded module.
    Module = 1,
    /// A heap error.
    Error = 2,
    /// Blocks live at exit with one allocation stack.
    Leak = 3,
    /// A line of text (which unwinder captured the stacks, say).
    Note = 4,
    /// A sampled allocation of a heap profile.
    Sample = 5,
}

impl Kind {
    pub(crate) fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Module,
            2 => Kind::Error,
            3 => Kind::Leak,
            4 => Kind::Note,
            5 => Kind::Sample,
            _ => return None,
        })
    }
}

/// A heap error, in AddressSanitizer's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An access past the end of a block.
    HeapBufferOverflow = 1,
    /// An access before the start of a block.
    HeapBufferUnderflow = 2,
    /// An access to a freed block.
    UseAfterFree = 3,
    /// A free (or realloc) of a block already freed.
    DoubleFree = 4,
    /// A free (or realloc) of a pointer that is not a block's start: inside
    /// one, or never handed out.
    InvalidFree = 5,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 5] = [
        ErrorKind::HeapBufferOverflow,
        ErrorKind::HeapBufferUnderflow,
        ErrorKind::UseAfterFree,
        ErrorKind::DoubleFree,
        ErrorKind::InvalidFree,
    ];

    /// The name reports use: `heap-buffer-overflow`, `use-after-free`, …
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::HeapBufferOverflow => "heap-buffer-overflow",
            ErrorKind::HeapBufferUnderflow => "heap-buffer-underflow",
            ErrorKind::UseAfterFree => "use-after-free",
            ErrorKind::DoubleFree => "double-free",
            ErrorKind::InvalidFree => "invalid-free",
        }
    }

    /// The kind of byte `b`.
    pub fn from_u8(b: u8) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| *k as u8 == b)
    }

    /// Whether it is found at a bad access (a fault), rather than at a call
    /// to `free` or `realloc`.
    pub const fn is_access(self) -> bool {
        matches!(self, ErrorKind::HeapBufferOverflow | ErrorKind::HeapBufferUnderflow | ErrorKind::UseAfterFree)
    }
}

/// Who wrote a record: the process and its nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// The process id.
    pub pid: u32,
    /// A number drawn when the process image started.
    pub nonce: u64,
}

/// A heap error as recorded: addresses, no names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawError<'a> {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The thread that made the bad access or call.
    pub thread: u32,
    /// The address accessed, or passed to `free`.
    pub address: u64,
    /// The block's start as the program sees it (0 when no block is known).
    pub block: u64,
    /// Its size in bytes, as the program asked for it.
    pub size: u64,
    /// `address - block`.
    pub offset: i64,
    /// The thread that allocated the block ([`NO_THREAD`] when unknown).
    pub alloc_thread: u32,
    /// The thread that freed it ([`NO_THREAD`] when it is live).
    pub free_thread: u32,
    /// The access's (or the call's) stack.
    pub stack: Frames<'a>,
    /// The allocation's stack.
    pub alloc_stack: Frames<'a>,
    /// The free's stack, when the block was freed.
    pub free_stack: Option<Frames<'a>>,
    /// Whether `stack`'s first address is the faulting instruction.
    pub exact_first: bool,
}

/// A module of the process: where it was loaded and which file it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawModule<'a> {
    /// Its first mapped address.
    pub start: u64,
    /// One past its last.
    pub end: u64,
    /// The load bias: an address minus it is the ELF file's address.
    pub bias: u64,
    /// Its GNU build id (empty when it has none).
    pub build_id: &'a [u8],
    /// Its file's path (bytes, as the loader had it).
    pub path: &'a [u8],
}

/// Addresses of a stack, innermost first, as stored (little-endian u64).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Frames<'a>(pub(crate) &'a [u8]);

impl<'a> Frames<'a> {
    /// How many.
    pub fn len(&self) -> usize {
        self.0.len() / 8
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The addresses.
    pub fn iter(&self) -> impl Iterator<Item = u64> + 'a {
        self.0.chunks_exact(8).map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
    }
}

impl core::fmt::Debug for Frames<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One record read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// See [`RawModule`].
    Module(Origin, RawModule<'a>),
    /// See [`RawError`].
    Error(Origin, RawError<'a>),
    /// Blocks live at exit from one stack.
    Leak {
        /// Who wrote it.
        origin: Origin,
        /// Their bytes.
        bytes: u64,
        /// How many.
        blocks: u64,
        /// Their allocation stack.
        stack: Frames<'a>,
    },
    /// A line of text.
    Note(Origin, &'a str),
    /// A sampled allocation (see [`SampleOut`]).
    Sample {
        /// Who wrote it.
        origin: Origin,
        /// See [`SampleOut::bytes`].
        bytes: u64,
        /// See [`SampleOut::rate`].
        rate: u64,
        /// See [`SampleOut::allocated`].
        allocated: u64,
        /// See [`SampleOut::freed`].
        freed: u64,
        /// See [`SampleOut::inherited`].
        inherited: bool,
        /// Its allocation stack.
        stack: Frames<'a>,
    },
}

/// Fills a caller's buffer with one record; allocates nothing. Each `put`
/// returns `None` when the buffer is full.
pub struct Encoder<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> Encoder<'b> {
    /// A record of `kind` with `flags` from `origin`, in `buf`.
    pub fn new(buf: &'b mut [u8], kind: Kind, flags: u16, origin: Origin) -> Option<Encoder<'b>> {
        let mut e = Encoder { buf, len: 0 };
        e.bytes(&MAGIC)?;
        e.bytes(&[VERSION, kind as u8])?;
        e.bytes(&flags.to_le_bytes())?;
        e.bytes(&0u32.to_le_bytes())?;
        e.bytes(&origin.pid.to_le_bytes())?;
        e.bytes(&origin.nonce.to_le_bytes())?;
        Some(e)
    }

    /// Append raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> Option<()> {
        let end = self.len.checked_add(b.len())?;
        self.buf.get_mut(self.len..end)?.copy_from_slice(b);
        self.len = end;
        Some(())
    }

    /// Append a u8.
    pub fn u8(&mut self, v: u8) -> Option<()> {
        self.bytes(&[v])
    }

    /// Append a u16.
    pub fn u16(&mut self, v: u16) -> Option<()> {
        self.bytes(&v.to_le_bytes())
    }

    /// Append a u32.
    pub fn u32(&mut self, v: u32) -> Option<()> {
        self.bytes(&v.to_le_bytes())
    }

    /// Append a u64.
    pub fn u64(&mut self, v: u64) -> Option<()> {
        self.bytes(&v.to_le_bytes())
    }

    /// Append a stack: its count, then its addresses (at most [`MAX_FRAMES`]).
    pub fn stack(&mut self, frames: &[usize]) -> Option<()> {
        let frames = &frames[..frames.len().min(MAX_FRAMES)];
        self.u16(frames.len() as u16)?;
        frames.iter().try_for_each(|&f| self.u64(f as u64))
    }

    /// Finish: write the payload length; the record's bytes.
    pub fn finish(self) -> &'b [u8] {
        let payload = (self.len - HEADER) as u32;
        self.buf[8..12].copy_from_slice(&payload.to_le_bytes());
        &self.buf[..self.len]
    }
}

/// Encode a module record into `buf`.
pub fn module<'b>(buf: &'b mut [u8], origin: Origin, m: &RawModule<'_>) -> Option<&'b [u8]> {
    let mut e = Encoder::new(buf, Kind::Module, 0, origin)?;
    e.u64(m.start)?;
    e.u64(m.end)?;
    e.u64(m.bias)?;
    let id = &m.build_id[..m.build_id.len().min(255)];
    let path = &m.path[..m.path.len().min(u16::MAX as usize)];
    e.u8(id.len() as u8)?;
    e.u16(path.len() as u16)?;
    e.bytes(id)?;
    e.bytes(path)?;
    Some(e.finish())
}

/// What an error record says, with its stacks as address slices (for
/// writing).
#[derive(Debug, Clone, Copy)]
pub struct ErrorOut<'s> {
    /// See [`RawError::kind`].
    pub kind: ErrorKind,
    /// See [`RawError::thread`].
    pub thread: u32,
    /// See [`RawError::address`].
    pub address: usize,
    /// See [`RawError::block`].
    pub block: usize,
    /// See [`RawError::size`].
    pub size: usize,
    /// See [`RawError::alloc_thread`].
    pub alloc_thread: u32,
    /// See [`RawError::free_thread`].
    pub free_thread: u32,
    /// See [`RawError::stack`].
    pub stack: &'s [usize],
    /// See [`RawError::alloc_stack`].
    pub alloc_stack: &'s [usize],
    /// See [`RawError::free_stack`].
    pub free_stack: Option<&'s [usize]>,
    /// See [`RawError::exact_first`].
    pub exact_first: bool,
}

/// Encode an error record into `buf`.
pub fn error<'b>(buf: &'b mut [u8], origin: Origin, x: &ErrorOut<'_>) -> Option<&'b [u8]> {
    let flags = if x.exact_first { FLAG_EXACT_FIRST } else { 0 };
    let mut e = Encoder::new(buf, Kind::Error, flags, origin)?;
    e.u8(x.kind as u8)?;
    e.bytes(&[0; 3])?;
    e.u32(x.thread)?;
    e.u64(x.address as u64)?;
    e.u64(x.block as u64)?;
    e.u64(x.size as u64)?;
    e.u64((x.address as u64).wrapping_sub(x.block as u64))?;
    e.u32(x.alloc_thread)?;
    e.u32(x.free_thread)?;
    e.stack(x.stack)?;
    e.stack(x.alloc_stack)?;
    match x.free_stack {
        Some(s) => e.stack(s)?,
        None => e.u16(NO_STACK)?,
    }
    Some(e.finish())
}

/// Encode a leak record into `buf`.
pub fn leak<'b>(buf: &'b mut [u8], origin: Origin, bytes: u64, blocks: u64, stack: &[usize]) -> Option<&'b [u8]> {
    let mut e = Encoder::new(buf, Kind::Leak, 0, origin)?;
    e.u64(bytes)?;
    e.u64(blocks)?;
    e.stack(stack)?;
    Some(e.finish())
}

/// What a sample record says: one allocation a heap profile sampled, with
/// the events that order it among the process's other sampled allocations
/// and frees (one counter for both, so a reader can replay the sampled
/// part of the heap and find its peak).
#[derive(Debug, Clone, Copy)]
pub struct SampleOut<'s> {
    /// The bytes the program asked for.
    pub bytes: u64,
    /// The mean gap between samples, in bytes, that the process sampled
    /// with: an allocation of `bytes` was sampled with probability
    /// `1 - exp(-bytes / rate)`.
    pub rate: u64,
    /// The event number of its allocation.
    pub allocated: u64,
    /// The event number of its free, or [`NOT_FREED`].
    pub freed: u64,
    /// Whether the block was allocated before the process was forked
    /// (see [`FLAG_INHERITED`]).
    pub inherited: bool,
    /// Its allocation stack.
    pub stack: &'s [usize],
}

/// Encode a sample record (a heap profile's) into `buf`.
pub fn sample<'b>(buf: &'b mut [u8], origin: Origin, s: &SampleOut<'_>) -> Option<&'b [u8]> {
    let flags = if s.inherited { FLAG_INHERITED } else { 0 };
    let mut e = Encoder::new(buf, Kind::Sample, flags, origin)?;
    e.u64(s.bytes)?;
    e.u64(s.rate)?;
    e.u64(s.allocated)?;
    e.u64(s.freed)?;
    e.stack(s.stack)?;
    Some(e.finish())
}

/// Encode a note into `buf`.
pub fn note<'b>(buf: &'b mut [u8], origin: Origin, text: &str) -> Option<&'b [u8]> {
    let mut e = Encoder::new(buf, Kind::Note, 0, origin)?;
    e.bytes(text.as_bytes())?;
    Some(e.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const O: Origin = Origin { pid: 42, nonce: 7 };

    #[test]
    fn every_kind_reads_back() {
        let mut trace = Vec::new();
        let mut buf = [0u8; 4096];
        let m = RawModule { start: 0x1000, end: 0x9000, bias: 0x1000, build_id: b"\x01\x02", path: b"/bin/x" };
        trace.extend_from_slice(module(&mut buf, O, &m).unwrap());
        let x = ErrorOut {
            kind: ErrorKind::UseAfterFree,
            thread: 9,
            address: 0x5010,
            block: 0x5000,
            size: 64,
            alloc_thread: 8,
            free_thread: 9,
            stack: &[0x1234, 0x2345],
            alloc_stack: &[0x3456],
            free_stack: Some(&[]),
            exact_first: true,
        };
        trace.extend_from_slice(error(&mut buf, O, &x).unwrap());
        trace.extend_from_slice(leak(&mut buf, O, 100, 2, &[0x11]).unwrap());
        trace.extend_from_slice(note(&mut buf, O, "unwinder libunwind").unwrap());
        let s =
            SampleOut { bytes: 10, rate: 4096, allocated: 3, freed: NOT_FREED, inherited: true, stack: &[0x22, 0x33] };
        trace.extend_from_slice(sample(&mut buf, O, &s).unwrap());
        let got: Vec<Record<'_>> = records(&trace).collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 5);
        assert_eq!(got[0], Record::Module(O, m));
        let Record::Error(o, e) = got[1] else { panic!("{got:?}") };
        assert_eq!((o, e.kind, e.offset, e.exact_first), (O, ErrorKind::UseAfterFree, 16, true));
        assert_eq!(e.stack.iter().collect::<Vec<_>>(), [0x1234, 0x2345]);
        assert_eq!(e.free_stack.map(|s| s.len()), Some(0));
        assert!(matches!(got[2], Record::Leak { bytes: 100, blocks: 2, .. }));
        assert_eq!(got[3], Record::Note(O, "unwinder libunwind"));
        assert!(matches!(got[4], Record::Sample { rate: 4096, allocated: 3, freed: NOT_FREED, inherited: true, .. }));
        let cut = &trace[..trace.len() - 3];
        let last = records(cut).last().unwrap();
        assert!(matches!(last, Err(FormatError::Truncated { .. })), "{last:?}");
    }

    #[test]
    fn a_full_buffer_writes_nothing() {
        let mut small = [0u8; 30];
        assert!(leak(&mut small, O, 1, 1, &[1, 2, 3]).is_none());
    }

    proptest! {
        #[test]
        fn any_bytes_read_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            for r in records(&bytes) {
                let _ = r;
            }
        }

        #[test]
        fn damaged_records_never_panic(flip in 0usize..200, to in any::<u8>()) {
            let mut buf = [0u8; 512];
            let x = ErrorOut {
                kind: ErrorKind::DoubleFree, thread: 1, address: 2, block: 2, size: 3, alloc_thread: 1,
                free_thread: 1, stack: &[1, 2, 3], alloc_stack: &[4], free_stack: None, exact_first: false,
            };
            let mut bytes = error(&mut buf, O, &x).unwrap().to_vec();
            let i = flip % bytes.len();
            bytes[i] = to;
            for r in records(&bytes) {
                let _ = r;
            }
        }
    }
}
