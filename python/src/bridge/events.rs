//! The record of what NumPy got wrong, by the Python line it happened at:
//! a size passed to `free` that differs from the one allocated, a pointer a
//! bridge never made. Recorded off the hot paths (their cold ends call
//! [`EventLog::record`]), read by the bridge's statistics.

use crate::thread_raw;
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
    /// `free` without the GIL in places; then the site is `<no GIL>`, and
    /// while the interpreter finalizes `<no Python frame>`.
    fn here() -> (Site, Vec<String>) {
        if !thread_raw::python_running() {
            return (Site::placeholder("<no Python frame>"), Vec::new());
        }
        if !thread_raw::gil_held() {
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
        let Some(mut frame) = thread_raw::current_frame(py) else {
            return Ok((Site::placeholder("<no Python frame>"), Vec::new()));
        };
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
    /// One more event, at the running Python frame.
    #[cold]
    pub fn record(&self, allocated: usize, passed: usize) {
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
