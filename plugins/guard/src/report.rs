//! What the guard says when it finds an error, and whether it then aborts.
//!
//! A plugin cannot reach the host's `tracing` subscriber, so findings go to
//! the process's standard error, one line each, starting with
//! `memplug guard:`. With `abort_on_error=1` the line is followed by the
//! reason for stopping and `abort()` (SIGABRT), so a test harness or a core
//! dump points at the bad call.

use std::fmt;
use std::io::Write;

/// An error the guard found in a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finding {
    /// A free (or realloc) of a block that was already freed and is still in
    /// the quarantine.
    DoubleFree { op: Op, ptr: usize, size: usize },
    /// A pointer inside a live block (or its guard pages), not its start.
    Interior { op: Op, ptr: usize, block: usize, block_size: usize },
    /// A pointer this allocator does not know.
    Unknown { op: Op, ptr: usize, quarantine: usize },
    /// A free or realloc whose size differs from the block's.
    SizeMismatch { op: Op, ptr: usize, size: usize, recorded: usize },
    /// Slack bytes around a block were overwritten.
    Overwritten { op: Op, ptr: usize, size: usize, before: usize, after: usize, first: isize },
}

/// The call in which a finding was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `free`.
    Free,
    /// `realloc`.
    Realloc,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Free => "free",
            Op::Realloc => "realloc",
        })
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Finding::DoubleFree { op, ptr, size } => write!(
                f,
                "double free: {op} of {ptr:#x} ({size} bytes), which was already freed and is still in \
                 quarantine; the call is ignored"
            ),
            Finding::Interior { op, ptr, block, block_size } => {
                let off = ptr as isize - block as isize;
                write!(
                    f,
                    "bad free: {op} of {ptr:#x}, which is not the start of a block but {off} bytes from the \
                     live block {block:#x} ({block_size} bytes); pass the pointer the allocator returned. The \
                     call is ignored"
                )
            }
            Finding::Unknown { op, ptr, quarantine } => write!(
                f,
                "bad free: {op} of {ptr:#x}, which this allocator did not make (or freed so long ago that it \
                 left the {quarantine}-byte quarantine); the call is ignored"
            ),
            Finding::SizeMismatch { op, ptr, size, recorded } => write!(
                f,
                "size mismatch: {op} of {ptr:#x} with size {size}, but the block was allocated with {recorded} \
                 bytes; served with {recorded}"
            ),
            Finding::Overwritten { op, ptr, size, before, after, first } => {
                let what = match (before, after) {
                    (0, n) => format!("overrun: {} after the end", bytes(n)),
                    (n, 0) => format!("underrun: {} before the start", bytes(n)),
                    (b, a) => format!("underrun and overrun: {} before the start and {a} after the end", bytes(b)),
                };
                write!(
                    f,
                    "heap {what} of block {ptr:#x} ({size} bytes) overwritten (first at offset {first}), found at \
                     its {op}"
                )
            }
        }
    }
}

/// `n` with its unit: "1 byte", "2 bytes".
fn bytes(n: usize) -> String {
    if n == 1 { "1 byte".into() } else { format!("{n} bytes") }
}

/// Print `finding` on standard error; abort the process afterwards if
/// `abort_on_error` is set.
pub(crate) fn report(finding: &Finding, abort_on_error: bool) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "memplug guard: {finding}");
    if abort_on_error {
        let _ = writeln!(err, "memplug guard: aborting (abort_on_error=1)");
        drop(err);
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_error_and_the_block() {
        let f = Finding::DoubleFree { op: Op::Free, ptr: 0x1000, size: 8 };
        assert!(f.to_string().starts_with("double free: free of 0x1000 (8 bytes)"), "{f}");
        let f = Finding::Overwritten { op: Op::Free, ptr: 0x1000, size: 13, before: 0, after: 1, first: 13 };
        assert!(f.to_string().starts_with("heap overrun: 1 byte after the end of block 0x1000"), "{f}");
        let f = Finding::Interior { op: Op::Realloc, ptr: 0x1010, block: 0x1000, block_size: 64 };
        assert!(f.to_string().contains("16 bytes from the live block 0x1000"), "{f}");
    }
}
