//! The trace the debugging plugins write under `memplug run` (see
//! `memplug_stacks::emit`): an empty file made before the program starts
//! and named to it in the environment; after the program ends (or dies),
//! its heap errors and the blocks live at exit, read back, symbolized from
//! the module maps the processes wrote, and printed: every error on
//! stderr at once, in AddressSanitizer's form; the leaks in the report.

use memplug_stacks::symbolize::{self, Symbolizer, Trace};
use std::path::Path;

/// Read, symbolize and delete the trace at `file`.
pub(super) fn collect(file: &Path) -> Trace {
    let bytes = std::fs::read(file).unwrap_or_default();
    let _ = std::fs::remove_file(file);
    if bytes.is_empty() {
        return Trace::default();
    }
    let trace = symbolize::read_trace(&bytes, &mut Symbolizer::new());
    if let Some(problem) = &trace.problem {
        tracing::warn!("the heap trace was cut short: {problem}; what came before is shown");
    }
    trace
}

/// Print every error of `trace` on stderr, `handler` naming who found them.
pub(super) fn print_errors(trace: &Trace, handler: &str) {
    for e in &trace.errors {
        eprint!("{}", e.text(handler));
    }
}
