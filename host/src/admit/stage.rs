//! The stages of loading and checking a plugin, announced *before* each one
//! runs, so that whatever happens inside it — a crash, a hang, an `exit` in
//! the plugin's code — can be blamed on the right plugin and the right step.
//!
//! Every announcement is a `tracing` debug event naming the stage and the
//! plugin (`RUST_LOG=memplug=debug` shows them); in a worker process
//! ([`crate::isolate::probe`]) it is also written, flushed, to the parent.

use std::fmt::Display;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// Where a worker process sends its stages (and, at the end, its result).
static SINK: OnceLock<Mutex<Box<dyn Write + Send>>> = OnceLock::new();

/// The stage in which a plugin's file is checked (no plugin code runs).
pub const PRECHECK: &str = "precheck";
/// The stage in which the library is opened: its constructors run.
pub const OPEN: &str = "load";
/// The stage in which the plugin's entry function is called.
pub const ENTRY: &str = "entry";
/// The stage in which a handler header is judged (no plugin code runs).
pub const VALIDATE: &str = "validate";
/// The stage in which an instance is made through `create`.
pub const CREATE: &str = "create";
/// The prefix of a conformance check's stage, e.g. `check:zeroed`.
pub const CHECK_PREFIX: &str = "check:";
/// The prefix of a bench workload's stage (`memplug bench`), e.g.
/// `bench:mixed`.
pub const BENCH_PREFIX: &str = "bench:";

/// Where a stage is, in words, e.g. "in conformance check `zeroed`";
/// `None` means before the first stage was announced.
pub fn describe(stage: Option<&str>) -> String {
    match stage {
        None => "before its first stage".into(),
        Some(OPEN) => "while loading the library (its constructors run then)".into(),
        Some(ENTRY) => "in its entry function".into(),
        Some(PRECHECK) => "while its file was checked".into(),
        Some(VALIDATE) => "while its header was validated".into(),
        Some(CREATE) => "while making an instance (`create`)".into(),
        Some("exit") => "at exit, after its report was sent (a destructor or atexit handler)".into(),
        Some(s) => match (s.strip_prefix(CHECK_PREFIX), s.strip_prefix(BENCH_PREFIX)) {
            (Some(check), _) => format!("in conformance check `{check}`"),
            (_, Some(workload)) => format!("in bench workload `{workload}`"),
            _ => format!("in stage `{s}`"),
        },
    }
}

/// Announce that `stage` of `subject` (a plugin's path, a handler's name)
/// starts now.
pub fn enter(stage: &str, subject: &dyn Display) {
    tracing::debug!(stage, plugin = %subject, "starting");
    if let Some(sink) = SINK.get() {
        let mut w = sink.lock().unwrap_or_else(|e| e.into_inner());
        // A parent that went away is not this process's problem: the stage
        // only matters to it. One write, so that a record the SIGSYS
        // handler writes from another thread never lands inside the line.
        let line = format!("stage {}\n", stage.replace('\n', " "));
        let _ = w.write_all(line.as_bytes());
        let _ = w.flush();
    }
}

/// Send stages (and then a worker's result) to `sink` from now on. Only the
/// first call takes effect.
pub(crate) fn set_sink(sink: Box<dyn Write + Send>) {
    let _ = SINK.set(Mutex::new(sink));
}

/// Write `bytes` to the sink, if there is one (a worker's framed result).
pub(crate) fn send(bytes: &[u8]) -> std::io::Result<()> {
    match SINK.get() {
        Some(sink) => {
            let mut w = sink.lock().unwrap_or_else(|e| e.into_inner());
            w.write_all(bytes)?;
            w.flush()
        }
        None => Ok(()),
    }
}
