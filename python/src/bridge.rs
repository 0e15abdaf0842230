//! A [`Bridge`]: one memplug handler seen from NumPy — the handler, the
//! header size its blocks carry, its counters, and the record of what NumPy
//! got wrong (a size passed to `free` that differs from the one allocated,
//! a pointer the bridge never made). Bridges are made once per handler
//! name and live for the process: NumPy's capsules point at them.
//!
//! The calls NumPy makes are in [`crate::raw_numpy`]; this module owns the
//! state they use and the cold paths they call into.

use crate::counters::{Counts, Totals};
use crate::raw_thread;
use memplug::{Handler, Instance};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Distinct places kept per kind of event; later new places are counted
/// under one `<other places>` entry.
const MAX_SITES: usize = 256;
/// Calling frames kept with a site (the first time it is seen).
const MAX_CALLERS: usize = 4;

/// Where NumPy called the bridge from: the Python frame running at the
/// time (or why there is none).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Site {
    /// The frame's file, or `<no GIL>` / `<no Python frame>` / `<other places>`.
    pub file: String,
    /// The line being run (0 when there is no frame).
    pub line: u32,
    /// The function's name.
    pub function: String,
}

impl Site {
    fn placeholder(what: &str) -> Site {
        Site { file: what.to_string(), line: 0, function: String::new() }
    }

    /// The running Python frame and up to [`MAX_CALLERS`] of its callers
    /// (`file:line in function`), if this thread holds the GIL. NumPy calls
    /// `free` without the GIL in places; then the site is `<no GIL>`.
    fn here() -> (Site, Vec<String>) {
        if !raw_thread::gil_held() {
            return (Site::placeholder("<no GIL>"), Vec::new());
        }
        let caught = std::panic::catch_unwind(|| {
            Python::with_gil(|py| {
                // Keep whatever exception is being raised (an array may be
                // freed while one propagates) out of our look-up.
                let pending = PyErr::take(py);
                let site =
                    Site::from_frame(py).unwrap_or_else(|_| (Site::placeholder("<no Python frame>"), Vec::new()));
                if let Some(e) = pending {
                    e.restore(py);
                }
                site
            })
        });
        caught.unwrap_or_else(|_| (Site::placeholder("<no Python frame>"), Vec::new()))
    }

    fn of(frame: &Bound<'_, PyAny>) -> PyResult<Site> {
        let code = frame.getattr("f_code")?;
        Ok(Site {
            file: code.getattr("co_filename")?.extract()?,
            line: frame.getattr("f_lineno")?.extract::<Option<u32>>()?.unwrap_or(0),
            function: code.getattr("co_name")?.extract()?,
        })
    }

    fn from_frame(py: Python<'_>) -> PyResult<(Site, Vec<String>)> {
        let mut frame = py.import("sys")?.getattr("_getframe")?.call1((0,))?;
        let site = Site::of(&frame)?;
        let mut callers = Vec::new();
        while callers.len() < MAX_CALLERS {
            frame = frame.getattr("f_back")?;
            if frame.is_none() {
                break;
            }
            callers.push(Site::of(&frame)?.to_string());
        }
        Ok((site, callers))
    }
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} in {}", self.file, self.line, self.function)
    }
}

/// How often one thing happened at one [`Site`], with the sizes and callers
/// of the first time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteCount {
    /// Times seen.
    pub count: u64,
    /// The size the block was allocated with (0 if unknown).
    pub allocated: usize,
    /// The size NumPy passed (0 if none).
    pub passed: usize,
    /// The calling frames, innermost first, as `file:line in function`.
    pub callers: Vec<String>,
}

/// Events of one kind, by site.
#[derive(Debug, Default)]
pub struct EventLog {
    total: AtomicU64,
    sites: Mutex<BTreeMap<Site, SiteCount>>,
}

impl EventLog {
    #[cold]
    fn record(&self, allocated: usize, passed: usize) {
        self.total.fetch_add(1, Relaxed);
        let (site, callers) = Site::here();
        let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        let key = if sites.len() >= MAX_SITES && !sites.contains_key(&site) {
            Site::placeholder("<other places>")
        } else {
            site
        };
        sites.entry(key).or_insert(SiteCount { count: 0, allocated, passed, callers }).count += 1;
    }

    /// Times it happened.
    pub fn total(&self) -> u64 {
        self.total.load(Relaxed)
    }

    /// Where, most frequent first.
    pub fn sites(&self) -> Vec<(Site, SiteCount)> {
        let sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = sites.iter().map(|(s, c)| (s.clone(), c.clone())).collect();
        v.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

/// One memplug handler bridged to NumPy.
pub struct Bridge {
    /// The handler blocks come from.
    pub handler: Handler,
    /// Bytes in front of each block (see [`crate::raw_numpy`]).
    pub header: usize,
    /// The name NumPy shows: `memplug:<name>` (with options, if any).
    pub numpy_name: String,
    /// The name it was asked by, e.g. `arena` or `arena:region_size=1m`.
    pub key: String,
    /// Allocation counters.
    pub counts: Counts,
    /// `free` calls whose size differs from the block's.
    pub size_mismatches: EventLog,
    /// Pointers handed to `free`/`realloc` that this bridge did not make
    /// (or freed already): never passed to the plugin.
    pub foreign_pointers: EventLog,
    /// Keeps an instance made from options alive for the process.
    _instance: Option<Instance>,
}

impl Bridge {
    /// A bridge for `handler`, leaked: it lives for the process.
    pub fn leak(key: &str, handler: Handler, instance: Option<Instance>) -> &'static Bridge {
        Box::leak(Box::new(Bridge {
            handler,
            header: header_size(handler.alignment()),
            numpy_name: format!("memplug:{key}"),
            key: key.to_string(),
            counts: Counts::new(),
            size_mismatches: EventLog::default(),
            foreign_pointers: EventLog::default(),
            _instance: instance,
        }))
    }

    /// NumPy passed `passed` to `free` for a block of `allocated` bytes.
    #[cold]
    #[inline(never)]
    pub fn numpy_size_mismatch(&self, allocated: usize, passed: usize) {
        self.size_mismatches.record(allocated, passed);
    }

    /// NumPy handed `free`/`realloc` a pointer this bridge did not make.
    #[cold]
    #[inline(never)]
    pub fn foreign_pointer(&self, call: &str) {
        tracing::warn!(handler = %self.key, call, "NumPy passed a pointer this handler did not make; ignored");
        self.foreign_pointers.record(0, 0);
    }

    /// The counters summed over threads.
    pub fn totals(&self) -> Totals {
        self.counts.totals()
    }
}

/// The header in front of each block for a handler aligned to `alignment`:
/// at least 16 bytes (two words), and a multiple of the alignment so the
/// pointer NumPy gets keeps it.
pub fn header_size(alignment: usize) -> usize {
    alignment.max(16).next_multiple_of(alignment.max(1))
}

#[cfg(test)]
mod tests {
    use super::header_size;

    #[test]
    fn header_keeps_the_alignment_and_holds_two_words() {
        for (alignment, want) in [(1, 16), (8, 16), (16, 16), (64, 64), (4096, 4096)] {
            assert_eq!(header_size(alignment), want, "alignment {alignment}");
        }
    }
}
