//! What `memplug run --report` (a table on stderr) and `--report-json FILE`
//! show: the handler, what it served (read from the `key value` lines the
//! interposer writes at exit), its own statistics, and how the program
//! ended.

use super::Chosen;
use memplug_stacks::symbolize::{ErrorReport, LeakReport, Trace};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A fresh, empty file (mode 0600) for the interposer's report (`what`
/// `report`) or the plugins' trace (`trace`).
pub(super) fn temp_file(what: &str) -> Option<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    for i in 0..16u32 {
        let path = std::env::temp_dir().join(format!("memplug-run-{}-{nanos}-{i}.{what}", std::process::id()));
        let made = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
        if made.is_ok() {
            return Some(path);
        }
    }
    tracing::warn!("cannot create a {what} file in the temporary directory; no {what}");
    None
}

/// The interposer's `key value` lines; empty when it wrote none.
pub(super) fn read(file: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines().filter_map(|l| l.split_once(' ')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The counts of the heap, as the interposer saw them.
#[derive(Debug, Serialize)]
pub(super) struct Heap {
    /// Whether the plugin served (`plugin`) or libc did (`libc`).
    served_by: String,
    /// Why the plugin did not serve, when it did not.
    why: Option<String>,
    /// Every count the interposer wrote, by name.
    counts: BTreeMap<String, u64>,
    /// The plugin's own statistics, if it keeps them.
    plugin_stats: Option<BTreeMap<String, u64>>,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub(super) struct RunReport {
    /// The handler's name.
    handler: Option<String>,
    /// Its version.
    version: Option<String>,
    /// The plugin file.
    #[serde(serialize_with = "memplug::text::path_serde::serialize")]
    plugin: PathBuf,
    /// Its entry symbol.
    symbol: String,
    /// The instance's options, if any.
    options: Option<String>,
    /// The program and its arguments.
    program: Vec<String>,
    /// memplug's exit status: the program's, or 128 + the signal.
    exit_status: i32,
    /// The signal that ended the program, e.g. `SIGABRT`.
    signal: Option<String>,
    /// What the interposer counted; `None` when the program wrote no
    /// report (killed by a signal, or ended with `_exit`).
    heap: Option<Heap>,
    /// The heap errors a debugging plugin found, with their stacks.
    errors: Vec<ErrorReport>,
    /// The blocks live at exit by allocation stack, largest first (under a
    /// plugin that records stacks: `tracking`, `guard`).
    leaks: Vec<LeakReport>,
}

impl RunReport {
    /// Assemble the report.
    pub(super) fn new(
        chosen: &Chosen,
        program: &[OsString],
        mut lines: BTreeMap<String, String>,
        exit_status: i32,
        signal: Option<i32>,
        trace: Trace,
    ) -> RunReport {
        let r = &chosen.report;
        let heap = (!lines.is_empty()).then(|| {
            let served_by = lines.remove("served_by").unwrap_or_default();
            let why = lines.remove("why");
            let mut counts = BTreeMap::new();
            let mut plugin = BTreeMap::new();
            for (k, v) in &lines {
                let Ok(n) = v.parse::<u64>() else { continue };
                match k.strip_prefix("plugin_") {
                    Some(rest) => plugin.insert(rest.to_string(), n),
                    None if k != "pid" => counts.insert(k.clone(), n),
                    None => None,
                };
            }
            Heap { served_by, why, counts, plugin_stats: (!plugin.is_empty()).then_some(plugin) }
        });
        RunReport {
            handler: r.name.clone(),
            version: r.version.clone(),
            plugin: r.path.clone(),
            symbol: r.symbol.clone(),
            options: (!chosen.options.is_empty()).then(|| chosen.options.clone()),
            program: program.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            exit_status,
            signal: signal.map(memplug::probe::signal_name),
            heap,
            errors: trace.errors,
            leaks: trace.leaks,
        }
    }

    /// Print the report as a table on stderr.
    pub(super) fn print(&self) {
        let esc = memplug::text::escape;
        let mut out = String::new();
        let name = self.handler.as_deref().unwrap_or("?");
        let version = self.version.as_deref().unwrap_or("?");
        let opts = self.options.as_deref().map(|o| format!(" with options {o}")).unwrap_or_default();
        out += &format!(
            "memplug run: handler {} {}{} ({})\n",
            esc(name),
            esc(version),
            esc(&opts),
            memplug::text::escape_os(self.plugin.as_os_str())
        );
        let mut row = |k: &str, v: String| out.push_str(&format!("  {k:<22} {v}\n"));
        match &self.heap {
            None => row(
                "heap",
                "no report: the program was killed, or the interposer did not run in it \
                 (a static or set-user-ID program)"
                    .into(),
            ),
            Some(h) => {
                let n = |k: &str| h.counts.get(k).copied().unwrap_or(0);
                row(
                    "served by",
                    h.served_by.clone() + &h.why.as_ref().map(|w| format!(" ({})", esc(w))).unwrap_or_default(),
                );
                if h.served_by == "plugin" {
                    row(
                        "blocks",
                        match n("headerless") {
                            0 => "with a 16-byte header (the handler needs sizes)".to_string(),
                            _ => "headerless (the handler's own pointers; bytes are its usable sizes)".to_string(),
                        },
                    );
                }
                row("allocated", format!("{} blocks, {} bytes", n("allocated_blocks"), n("allocated_bytes")));
                row("freed", format!("{} blocks, {} bytes", n("freed_blocks"), n("freed_bytes")));
                row("live at exit", format!("{} blocks, {} bytes", n("live_blocks"), n("live_bytes")));
                row("peak", format!("{} bytes", n("peak_bytes")));
                row("reallocs", n("reallocs").to_string());
                row("aligned requests", n("aligned_requests").to_string());
                row(
                    "foreign frees",
                    format!("{} (not made by the handler; leaked, never passed to it)", n("foreign_frees")),
                );
                row("failed requests", n("failed_requests").to_string());
                row(
                    "bootstrap heap",
                    format!(
                        "{} blocks ({} freed), {} bytes of its region used",
                        n("bootstrap_blocks"),
                        n("bootstrap_frees"),
                        n("bootstrap_bytes")
                    ),
                );
                if let Some(p) = &h.plugin_stats {
                    let s = |k: &str| p.get(k).copied().unwrap_or(0);
                    row(
                        "plugin's statistics",
                        format!(
                            "live {} bytes in {} blocks, peak {} bytes, {} allocations, {} bad frees, {} size mismatches",
                            s("live_bytes"),
                            s("live_count"),
                            s("peak_bytes"),
                            s("total_allocations"),
                            s("bad_frees"),
                            s("size_mismatches")
                        ),
                    );
                }
            }
        }
        if !self.errors.is_empty() {
            let kinds: Vec<&str> = self.errors.iter().map(|e| e.kind.as_str()).collect();
            row("heap errors", format!("{} ({}; reported above)", kinds.len(), kinds.join(", ")));
        }
        match &self.signal {
            Some(sig) => row("exit", format!("killed by {sig} (status {})", self.exit_status)),
            None => row("exit", format!("status {}", self.exit_status)),
        }
        out += &memplug_stacks::symbolize::leaks_text(name, &self.leaks);
        let _ = std::io::stderr().write_all(out.as_bytes());
    }

    /// Write the report as JSON to `file`.
    pub(super) fn write_json(&self, file: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(file, text + "\n")
    }
}
