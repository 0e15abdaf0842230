//! How reports read: the layout of an error report and of a frame line, in
//! AddressSanitizer's form, written through `core::fmt::Write` so that the
//! same layout serves a fixed buffer inside the program (frames as
//! `module+offset`) and the `memplug` command (frames with names, files
//! and lines). [`Buf`] is that fixed buffer.

use crate::format::ErrorKind;
use core::fmt::{self, Write};

/// A fixed buffer that `write!` fills without allocating; what does not fit
/// is dropped.
pub struct Buf<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Buf<N> {
    /// Empty.
    pub const fn new() -> Self {
        Buf { bytes: [0; N], len: 0 }
    }

    /// What was written.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Empty it.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl<const N: usize> Default for Buf<N> {
    fn default() -> Self {
        Buf::new()
    }
}

impl<const N: usize> Write for Buf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(N - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Which stack of an error a frame belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The access (or the call to `free`).
    Access,
    /// Where the block was allocated.
    Alloc,
    /// Where it was freed.
    Free,
}

/// The facts of an error report, without its stacks.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The process.
    pub pid: u32,
    /// Who found it (`guard`, `tracking`).
    pub handler: &'a str,
    /// What.
    pub kind: ErrorKind,
    /// The address accessed or freed.
    pub address: u64,
    /// The block's start as the program sees it (0: no block).
    pub block: u64,
    /// The block's size.
    pub size: u64,
    /// `address - block`.
    pub offset: i64,
    /// The thread that erred.
    pub thread: u32,
    /// The thread that allocated the block (none when no block is known).
    pub alloc_thread: Option<u32>,
    /// The thread that freed it, when it was freed.
    pub free_thread: Option<u32>,
}

/// Write an error report: the title, the access stack, where the address
/// is, then the free and allocation stacks. `frames(w, which)` writes the
/// frame lines of one stack.
pub fn error_report<W: Write>(
    w: &mut W,
    f: &Facts<'_>,
    frames: &mut dyn FnMut(&mut W, Which) -> fmt::Result,
) -> fmt::Result {
    let pid = f.pid;
    writeln!(
        w,
        "=={pid}==ERROR: memplug {}: {} on address {:#x} (thread T{})",
        f.handler,
        f.kind.name(),
        f.address,
        f.thread
    )?;
    let what = match f.kind {
        ErrorKind::DoubleFree => "attempting double-free here:",
        ErrorKind::InvalidFree => "attempting to free a pointer that is not a block's start here:",
        _ => "the access, here:",
    };
    writeln!(w, "{what}")?;
    frames(w, Which::Access)?;
    let end = f.block.wrapping_add(f.size);
    if f.block == 0 {
        writeln!(
            w,
            "{:#x} is not inside any block the handler made, and cannot be a block libc made before memplug started",
            f.address
        )?;
    } else {
        let (n, side) = match f.offset {
            o if o < 0 => (o.unsigned_abs(), "before"),
            o if o as u64 >= f.size => (o as u64 - f.size, "after"),
            o => (o as u64, "inside"),
        };
        writeln!(
            w,
            "{:#x} is located {n} bytes {side} the {}-byte block [{:#x},{end:#x})",
            f.address, f.size, f.block
        )?;
    }
    if let Some(t) = f.free_thread {
        writeln!(w, "freed by thread T{t} here:")?;
        frames(w, Which::Free)?;
    }
    if let Some(t) = f.alloc_thread {
        let previously = if f.free_thread.is_some() { "previously " } else { "" };
        writeln!(w, "{previously}allocated by thread T{t} here:")?;
        frames(w, Which::Alloc)?;
    }
    writeln!(w, "SUMMARY: memplug {}: {}", f.handler, f.kind.name())
}

/// A frame line known only by module and offset: `    #3 0x7f… (/usr/lib/libx.so+0x1f2a)`.
pub fn raw_frame<W: Write>(w: &mut W, index: usize, addr: u64, module: Option<(&str, u64)>) -> fmt::Result {
    match module {
        Some((path, offset)) => writeln!(w, "    #{index} {addr:#x} ({path}+{offset:#x})"),
        None => writeln!(w, "    #{index} {addr:#x} (<unknown module>)"),
    }
}

/// Read a raw frame line back: `(index, address, module path, offset)`.
pub fn parse_raw_frame(line: &str) -> Option<(usize, u64, &str, u64)> {
    let rest = line.trim_start().strip_prefix('#')?;
    let (index, rest) = rest.split_once(' ')?;
    let (addr, rest) = rest.split_once(' ')?;
    let inner = rest.trim_end().strip_prefix('(')?.strip_suffix(')')?;
    let (path, offset) = inner.rsplit_once("+0x")?;
    let addr = u64::from_str_radix(addr.strip_prefix("0x")?, 16).ok()?;
    Some((index.parse().ok()?, addr, path, u64::from_str_radix(offset, 16).ok()?))
}

/// The line that follows a report whose frames are not symbolized.
pub const SYMBOLIZE_HINT: &str =
    "(frames are module+offset: pipe this report into `memplug symbolize` for functions, files and lines)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_like_addresssanitizers() {
        let f = Facts {
            pid: 7,
            handler: "guard",
            kind: ErrorKind::HeapBufferOverflow,
            address: 0x1040,
            block: 0x1000,
            size: 64,
            offset: 64,
            thread: 7,
            alloc_thread: Some(7),
            free_thread: None,
        };
        let mut out = String::new();
        error_report(&mut out, &f, &mut |w, which| raw_frame(w, 0, 0x55, Some((&format!("{which:?}"), 0x5)))).unwrap();
        assert!(
            out.starts_with("==7==ERROR: memplug guard: heap-buffer-overflow on address 0x1040 (thread T7)"),
            "{out}"
        );
        assert!(out.contains("0x1040 is located 0 bytes after the 64-byte block [0x1000,0x1040)"), "{out}");
        assert!(out.contains("allocated by thread T7 here:\n    #0 0x55 (Alloc+0x5)"), "{out}");
        assert!(!out.contains("freed by"), "{out}");
        let line = out.lines().find(|l| l.contains("Access+")).unwrap();
        assert_eq!(parse_raw_frame(line), Some((0, 0x55, "Access", 5)));
    }
}
