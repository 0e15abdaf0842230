//! What the guard says of a size mismatch and of overwritten slack, and
//! whether it then aborts (bad accesses and bad frees are reported with
//! their stacks by `errors`).
//!
//! A plugin cannot reach the host's `tracing` subscriber, so findings go to
//! the process's standard error, one line each, starting with
//! `memplug guard:`. With `abort_on_error=1` the line is followed by the
//! reason for stopping and `abort()` (SIGABRT), so a test harness or a core
//! dump points at the bad call.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// An error the guard found in a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finding {
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

/// Whether the map-count message was printed (once per process).
static MAP_LIMIT_SAID: AtomicBool = AtomicBool::new(false);

/// The map-count message: the process holds `mappings` of `limit`
/// (`vm.max_map_count`) and guard `blocks` blocks; `sampling` says whether
/// `sample=` is on already.
pub(crate) fn map_limit_message(mappings: u64, limit: u64, blocks: usize, sampling: bool) -> String {
    let sample = if sampling {
        "lower the program's own mappings, or give guard fewer slots (slots=)"
    } else {
        "guard one allocation in N and serve the rest from the system allocator (--handler guard:sample=1000)"
    };
    format!(
        "cannot map a block: the process holds {mappings} memory mappings and the kernel allows {limit} \
         (vm.max_map_count); guard holds {blocks} blocks, live and in quarantine, each up to 3 mappings. This \
         allocation, and every one that finds no mapping, returns NULL. Raise the limit (sudo sysctl -w \
         vm.max_map_count=1048576) or {sample}. (Said once.)"
    )
}

/// A mapping failed with ENOMEM: if the process is at `vm.max_map_count`,
/// say so on standard error, the first time only. Never aborts: running out
/// of mappings is the limit's doing, not the program's error.
pub(crate) fn map_limit(blocks: usize, sampling: bool) {
    if MAP_LIMIT_SAID.load(Ordering::Relaxed) {
        return;
    }
    let Some((mappings, limit)) = crate::limits::at_limit() else { return };
    if MAP_LIMIT_SAID.swap(true, Ordering::Relaxed) {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "memplug guard: {}", map_limit_message(mappings, limit, blocks, sampling));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_error_and_the_block() {
        let f = Finding::Overwritten { op: Op::Free, ptr: 0x1000, size: 13, before: 0, after: 1, first: 13 };
        assert!(f.to_string().starts_with("heap overrun: 1 byte after the end of block 0x1000"), "{f}");
        let f = Finding::SizeMismatch { op: Op::Realloc, ptr: 0x1010, size: 10, recorded: 64 };
        assert!(f.to_string().contains("size mismatch: realloc of 0x1010 with size 10"), "{f}");
        let m = map_limit_message(65_500, 65_530, 21_800, false);
        for says in
            ["65500 memory mappings", "allows 65530", "21800 blocks", "sysctl -w vm.max_map_count", "sample=1000"]
        {
            assert!(m.contains(says), "{says}: {m}");
        }
    }
}
