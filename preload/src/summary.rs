//! The report `memplug run --report` prints: one `key value` line each —
//! the process, which allocator served, the handler, the counts, the
//! plugin's own statistics. Written by the destructor (or `_exit`) of the
//! process that owns it (`exports_raw`); this module holds no unsafe code.

use crate::call_raw::mode;
use crate::env_raw::{pid, write_c};
use crate::plugin_raw::plugin_stats;
use crate::setup::Setup;
use crate::stats;
use crate::text::Text;
use core::fmt::Write;

/// The report: the handler, how it served, the counts, the plugin's own
/// statistics.
pub(crate) fn write(out: &mut Text, setup: &Setup) -> core::fmt::Result {
    let served = if mode().plugin_serves() { "plugin" } else { "libc" };
    writeln!(out, "pid {}", pid())?;
    writeln!(out, "served_by {served}")?;
    writeln!(out, "headerless {}", u8::from(served == "plugin" && mode().headerless()))?;
    writeln!(out, "handler {}", c(&setup.name))?;
    writeln!(out, "version {}", c(&setup.version))?;
    out.write_str("plugin ")?;
    write_c(out, setup.path)?;
    out.write_str("\n")?;
    if served == "libc" {
        writeln!(out, "why {}", core::str::from_utf8(setup.why.bytes()).unwrap_or("?"))?;
    }
    stats::write_counts(out)?;
    if let Some(s) = setup.plugin.as_ref().filter(|_| served == "plugin").and_then(plugin_stats) {
        writeln!(out, "plugin_live_bytes {}", s.live_bytes)?;
        writeln!(out, "plugin_peak_bytes {}", s.peak_bytes)?;
        writeln!(out, "plugin_total_allocations {}", s.total_allocations)?;
        writeln!(out, "plugin_live_count {}", s.live_count)?;
        writeln!(out, "plugin_bad_frees {}", s.bad_frees)?;
        writeln!(out, "plugin_size_mismatches {}", s.size_mismatches)?;
    }
    Ok(())
}

/// The NUL-terminated text in `b`.
pub(crate) fn c(b: &[u8]) -> &str {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    core::str::from_utf8(&b[..end]).unwrap_or("?")
}
