//! Handing a report out of the process, allocation-free (from a signal
//! handler, or inside an allocator on its way to `abort`).
//!
//! Under `memplug run` the command names a trace file in the environment
//! ([`TRACE`]); a report is then appended to it as raw records — the
//! modules loaded now, then the error or the leaks — and the command
//! symbolizes and prints it once the program has ended. Records from every
//! process of the run go to the same file, each `write` a whole record
//! (`O_APPEND`), each record tagged with its process. Without the command
//! (a host, the NumPy bridge) an error is printed on standard error at
//! once, each frame as `module+offset`, for `memplug symbolize` to name.

use crate::capture::{Stack, StackId};
use crate::format::{self, ErrorOut, Origin};
use crate::raw::scratch::with_scratch;
use crate::raw::{maps, sys, unwind};
use crate::text::{self, Buf, Facts, Which};
use core::ffi::CStr;
use core::sync::atomic::{AtomicU64, Ordering};

/// The environment variable naming the trace file `memplug run` reads.
pub const TRACE: &CStr = c"MEMPLUG_RUN_TRACE";
/// Set by `memplug run` when a report was asked for (`--report`).
const REPORT: &CStr = c"MEMPLUG_RUN_REPORT";
/// The pid of the process that writes the report.
const OWNER: &CStr = c"MEMPLUG_RUN_OWNER";

/// The process image's nonce (0: not drawn yet).
static NONCE: AtomicU64 = AtomicU64::new(0);

/// This process, as records name it.
pub fn origin() -> Origin {
    let mut nonce = NONCE.load(Ordering::Relaxed);
    if nonce == 0 {
        nonce = sys::nonce() | 1;
        NONCE.store(nonce, Ordering::Relaxed);
    }
    Origin { pid: sys::process_id(), nonce }
}

/// Whether `memplug run` collects reports (a trace file is named).
pub fn traced() -> bool {
    sys::env(TRACE).is_some_and(|p| !p.is_empty())
}

/// Whether this process writes the run's report (`--report`): the only one
/// whose leaks are listed.
pub fn owns_report() -> bool {
    let mut pid = Buf::<16>::new();
    let _ = core::fmt::Write::write_fmt(&mut pid, format_args!("{}", sys::process_id()));
    traced() && sys::env(REPORT).is_some() && sys::env(OWNER) == Some(pid.bytes())
}

/// Encodes the next record into the buffer: `None` when there are no
/// more, `Some(None)` when one did not fit, else its length.
pub type NextRecord<'a> = dyn FnMut(&mut [u8], Origin) -> Option<Option<usize>> + 'a;

/// Append the loaded modules and then `records` (each encoded into the
/// scratch buffer by `next`, until it answers `None`) to the trace file.
fn to_trace(next: &mut NextRecord<'_>) -> bool {
    to_file(TRACE, next)
}

/// Append a note naming the unwinder, the loaded modules, and then the
/// records `next` encodes (into the scratch buffer, until it answers
/// `None`) to the file the environment variable `var` names (which must
/// exist: it is opened to append, never created); whether it was.
/// Allocation-free; each record is one `write`.
pub fn to_file(var: &CStr, next: &mut NextRecord<'_>) -> bool {
    let Some(path) = sys::env_c(var).filter(|p| !p.is_empty()) else { return false };
    let Some(fd) = sys::open_append(path) else { return false };
    let o = origin();
    let done = with_scratch(|buf| {
        let backend = unwind::chosen().unwrap_or(unwind::Backend::None).name();
        let mut note = Buf::<64>::new();
        let _ = core::fmt::Write::write_fmt(&mut note, format_args!("unwinder {backend}"));
        if let Some(r) = format::note(buf, o, core::str::from_utf8(note.bytes()).unwrap_or("")) {
            sys::write_all(fd, r);
        }
        maps::each_module(&mut |m| {
            if let Some(r) = format::module(buf, o, m) {
                sys::write_all(fd, r);
            }
        });
        while let Some(len) = next(buf, o) {
            if let Some(len) = len {
                sys::write_all(fd, &buf[..len]);
            }
        }
    });
    sys::close(fd);
    done.is_some()
}

/// Report an error that `handler` found: into the trace under `memplug
/// run`, else on standard error with `module+offset` frames.
pub fn error(handler: &str, x: &ErrorOut<'_>) {
    let mut once = Some(*x);
    let traced = to_trace(&mut |buf, o| once.take().map(|x| format::error(buf, o, &x).map(<[u8]>::len)));
    if !traced {
        print_error(handler, x);
    }
}

/// Print an error on standard error, each frame as `module+offset`.
fn print_error(handler: &str, x: &ErrorOut<'_>) {
    let facts = Facts {
        pid: sys::process_id(),
        handler,
        kind: x.kind,
        address: x.address as u64,
        block: x.block as u64,
        size: x.size as u64,
        offset: (x.address as i64).wrapping_sub(x.block as i64),
        thread: x.thread,
        alloc_thread: (x.alloc_thread != format::NO_THREAD).then_some(x.alloc_thread),
        free_thread: (x.free_thread != format::NO_THREAD).then_some(x.free_thread),
    };
    let mut out = Lines(Buf::new());
    let _ = text::error_report(&mut out, &facts, &mut |w, which| {
        let frames = match which {
            Which::Access => x.stack,
            Which::Alloc => x.alloc_stack,
            Which::Free => x.free_stack.unwrap_or(&[]),
        };
        for (i, &a) in frames.iter().enumerate() {
            let mut path = [0u8; 256];
            let module = maps::module_of(a, &mut path);
            let shown = module.map(|(n, bias)| (core::str::from_utf8(&path[..n]).unwrap_or("?"), (a - bias) as u64));
            text::raw_frame(w, i, a as u64, shown.as_ref().map(|&(p, o)| (p, o)))?;
        }
        Ok(())
    });
    let _ = core::fmt::Write::write_str(&mut out, text::SYMBOLIZE_HINT);
    let _ = core::fmt::Write::write_str(&mut out, "\n");
    sys::stderr(out.0.bytes());
}

/// A buffer written to standard error whenever it fills.
struct Lines(Buf<2048>);

impl core::fmt::Write for Lines {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        if self.0.bytes().len() + s.len() > 2000 {
            sys::stderr(self.0.bytes());
            self.0.clear();
        }
        self.0.write_str(s)
    }
}

/// Report the blocks live at exit, grouped by allocation stack (`(bytes,
/// blocks, stack)` from `groups`), into the trace; only the process that
/// writes the run's report does. Whether they were written.
pub fn leaks(groups: &mut dyn Iterator<Item = (u64, u64, StackId)>) -> bool {
    if !owns_report() {
        return false;
    }
    to_trace(&mut |buf, o| {
        let (bytes, blocks, id) = groups.next()?;
        Some(format::leak(buf, o, bytes, blocks, Stack::of(id).frames()).map(<[u8]>::len))
    })
}
