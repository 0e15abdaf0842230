//! Loading plugins into memplug's process-wide registry and describing
//! what it holds, as Python values: outcomes like `memplug check` reports
//! them, handler information, statistics. Also the one place names are
//! resolved — `tracking`, or `arena:region_size=1m` for an instance made
//! through the plugin's ABI 1.1 `create` — into [`Bridge`]s.

use crate::bridge::{Bridge, EventLog};
use crate::errors;
use memplug::discover::{self, Candidate};
use memplug::{Handler, Registry};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex, MutexGuard};

/// What the bridge remembers across calls.
#[derive(Default)]
struct State {
    /// Candidates loaded successfully, and the handler each gave: loading
    /// one again reports the same outcome instead of `duplicate-name`.
    loaded: HashMap<Candidate, Handler>,
    /// Bridges by the name they were asked by.
    bridges: HashMap<String, &'static Bridge>,
    /// Bridges closed ([`close`]), by name: their statistics stay readable
    /// until a new bridge of the same name is made.
    closed: HashMap<String, &'static Bridge>,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: LazyLock<Mutex<State>> = LazyLock::new(Mutex::default);
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The keys every outcome dict has: `status` (`"ok"` or `"rejected"`),
/// `reason` (the refusal's code), `message` (the refusal, without where it
/// came from) and `name`.
pub fn set_status(py: Python<'_>, d: &Bound<'_, PyDict>, result: &Result<Handler, memplug::LoadError>) -> PyResult<()> {
    match result {
        Ok(h) => {
            d.set_item("status", "ok")?;
            d.set_item("reason", py.None())?;
            d.set_item("message", py.None())?;
            d.set_item("name", h.name())?;
        }
        Err(e) => {
            d.set_item("status", "rejected")?;
            d.set_item("reason", e.code())?;
            d.set_item("message", e.refusal.to_string())?;
            d.set_item("name", py.None())?;
        }
    }
    Ok(())
}

/// One load outcome, as a dict with the keys of `memplug check --json`
/// rows: `path`, `symbol`, `status`, `reason`, `message`, `name`, `version`,
/// `abi`.
fn outcome<'py>(
    py: Python<'py>,
    c: &Candidate,
    result: &Result<Handler, memplug::LoadError>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("path", c.path.to_string_lossy())?;
    d.set_item("symbol", &c.symbol)?;
    set_status(py, &d, result)?;
    match result {
        Ok(h) => {
            d.set_item("version", h.info().version.to_string())?;
            d.set_item("abi", h.info().abi())?;
        }
        Err(_) => {
            d.set_item("version", py.None())?;
            d.set_item("abi", py.None())?;
        }
    }
    Ok(d)
}

/// Load candidates (files or directories; a directory's `*.so` and
/// `*.memplug.toml` files), each once per process.
pub fn load<'py>(py: Python<'py>, paths: Vec<PathBuf>) -> PyResult<Bound<'py, PyList>> {
    let candidates = discover::candidates_from(&paths);
    let mut results = Vec::new();
    for c in &candidates {
        let known = state().loaded.get(c).copied();
        let result = match known {
            Some(h) => Ok(h),
            None => py.allow_threads(|| Registry::global().load(c)),
        };
        if let Ok(h) = result {
            state().loaded.insert(c.clone(), h);
        }
        results.push((c.clone(), result));
    }
    let list = PyList::empty(py);
    for (c, r) in &results {
        list.append(outcome(py, c, r)?)?;
    }
    Ok(list)
}

/// The package's search path: memplug's (`MEMPLUG_PLUGIN_PATH`, the user
/// directory, then the system directories), with `bundled` (the package's
/// own plugins) after the user directory and before the system ones. Each
/// as `(path, origin)`; duplicates once, at their first place.
pub fn search_path(bundled: PathBuf) -> Vec<(PathBuf, &'static str)> {
    use memplug::dirs::{Env, Origin};
    let host = Env::current().search_path();
    let split = host.iter().position(|d| !matches!(d.origin, Origin::Env | Origin::User)).unwrap_or(host.len());
    let mut out: Vec<(PathBuf, &'static str)> = Vec::new();
    let ordered = host[..split]
        .iter()
        .map(|d| (d.path.clone(), d.origin.as_str()))
        .chain(std::iter::once((bundled, "package")))
        .chain(host[split..].iter().map(|d| (d.path.clone(), d.origin.as_str())));
    for (path, origin) in ordered {
        if !out.iter().any(|(p, _)| *p == path) {
            out.push((path, origin));
        }
    }
    out
}

/// The handler information dict: `name`, `version`, `abi`, `alignment`,
/// `thread_safe`, `memory_kind`, `source`, and more.
pub fn info<'py>(py: Python<'py>, h: Handler) -> PyResult<Bound<'py, PyDict>> {
    let i = h.info();
    let d = PyDict::new(py);
    d.set_item("name", h.name())?;
    d.set_item("version", i.version.to_string())?;
    d.set_item("abi", i.abi())?;
    d.set_item("alignment", h.alignment())?;
    d.set_item("thread_safe", h.is_thread_safe())?;
    d.set_item("memory_kind", i.memory_kind_name())?;
    d.set_item("source", i.source.to_string())?;
    d.set_item("flags", i.flag_names())?;
    d.set_item("takes_options", h.takes_options())?;
    d.set_item("has_stats", h.has_stats())?;
    d.set_item("deprecated", i.deprecated)?;
    d.set_item("options", i.options.clone())?;
    Ok(d)
}

/// Every registered handler.
pub fn handlers(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for h in Registry::global().handlers() {
        list.append(info(py, h)?)?;
    }
    Ok(list)
}

/// The bridge for `key` (`name` or `name:options`), made on first use.
pub fn bridge(key: &str) -> PyResult<&'static Bridge> {
    // Held throughout, so that two threads asking at once make one bridge
    // (and one instance).
    let mut state = state();
    if let Some(&b) = state.bridges.get(key) {
        return Ok(b);
    }
    let (name, options) = match key.split_once(':') {
        Some((n, o)) => (n, Some(o)),
        None => (key, None),
    };
    let registry = Registry::global();
    let handler = registry.get(name).ok_or_else(|| errors::unknown_handler(name, &registry.names()))?;
    let bridge = match options {
        None => Bridge::leak(key, handler, None),
        Some(options) => {
            let instance = handler.instantiate(options).map_err(|r| errors::refusal(key, &r))?;
            Bridge::leak(key, instance.handler(), Some(instance))
        }
    };
    state.closed.remove(key);
    state.bridges.insert(key.to_string(), bridge);
    Ok(bridge)
}

/// The bridge already made for `key` (or the last one closed), if any.
pub fn existing_bridge(key: &str) -> Option<&'static Bridge> {
    let state = state();
    state.bridges.get(key).or_else(|| state.closed.get(key)).copied()
}

/// Close the bridge of `key`, an instance (`name:options`): let its
/// instance go once its blocks are freed ([`crate::raw_plugin::close`]), and forget
/// the name, so that asking for it again makes a new instance. `false` if
/// no bridge of that name is open.
pub fn close(key: &str) -> PyResult<bool> {
    let mut state = state();
    let Some(&bridge) = state.bridges.get(key) else { return Ok(false) };
    if !bridge.is_instance() {
        return Err(errors::numpy_error(
            "not-an-instance",
            format!(
                "`{key}` is a registered handler, which lives for the process: only instances made from options \
                 (`name:options`, e.g. `shm:name=work,size=1g`) can be closed"
            ),
        ));
    }
    state.bridges.remove(key);
    state.closed.insert(key.to_string(), bridge);
    drop(state);
    Ok(crate::raw_plugin::close(bridge))
}

fn events<'py>(py: Python<'py>, log: &EventLog) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (site, c) in log.sites() {
        let d = PyDict::new(py);
        d.set_item("file", site.file)?;
        d.set_item("line", site.line)?;
        d.set_item("function", site.function)?;
        d.set_item("count", c.count)?;
        d.set_item("allocated", c.allocated)?;
        d.set_item("passed", c.passed)?;
        d.set_item("callers", c.callers)?;
        list.append(d)?;
    }
    Ok(list)
}

/// Turn the worker probe of memplug's registry on (`worker`: the program
/// and the arguments it takes before the worker argument; `timeout` in
/// seconds) or off (`None`). From then on every plugin, manifest and
/// `from_library` spec is loaded and checked in a worker process first,
/// as `memplug check` does, and refused if the worker crashes, hangs, ends
/// without a report or sees a conformance check fail.
pub fn set_probe(worker: Option<(PathBuf, Vec<String>)>, timeout: f64) -> PyResult<()> {
    let registry = Registry::global();
    let mut policy = registry.policy();
    policy.probe = match worker {
        None => None,
        Some((exe, args)) => {
            if !(timeout.is_finite() && timeout > 0.0) {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "the probe's timeout must be a positive number of seconds, not {timeout}"
                )));
            }
            Some(memplug::policy::Probe {
                timeout: std::time::Duration::from_secs_f64(timeout),
                worker: Some(exe),
                worker_args: args.into_iter().map(Into::into).collect(),
            })
        }
    };
    registry.set_policy(policy);
    Ok(())
}

/// Whether the registry probes in a worker process, and the worker's
/// command line.
pub fn probe() -> Option<(PathBuf, Vec<String>, f64)> {
    let p = Registry::global().policy().probe?;
    let args = p.worker_args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    Some((p.worker.unwrap_or_default(), args, p.timeout.as_secs_f64()))
}

/// Statistics for `key`: the plugin's own (`plugin`, or None if it reports
/// none) and the bridge's counters (`bridge`, or None if NumPy has not been
/// given this handler).
pub fn stats<'py>(py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyDict>> {
    let existing = existing_bridge(key);
    let handler = match existing {
        Some(b) => b.handler,
        None if key.contains(':') => bridge(key)?.handler,
        None => {
            let registry = Registry::global();
            registry.get(key).ok_or_else(|| errors::unknown_handler(key, &registry.names()))?
        }
    };
    let d = PyDict::new(py);
    d.set_item("name", key)?;
    d.set_item("handler", info(py, handler)?)?;
    match handler.stats() {
        Some(s) => {
            let p = PyDict::new(py);
            p.set_item("live_bytes", s.live_bytes)?;
            p.set_item("peak_bytes", s.peak_bytes)?;
            p.set_item("total_allocations", s.total_allocations)?;
            p.set_item("live_count", s.live_count)?;
            p.set_item("bad_frees", s.bad_frees)?;
            p.set_item("size_mismatches", s.size_mismatches)?;
            d.set_item("plugin", p)?;
        }
        None => d.set_item("plugin", py.None())?,
    }
    match existing_bridge(key) {
        Some(b) => {
            let t = b.totals();
            let br = PyDict::new(py);
            br.set_item("numpy_name", &b.numpy_name)?;
            br.set_item("header_bytes", b.header)?;
            let alignment = if b.padded { crate::bridge::PAD_ALIGN } else { b.handler.alignment() };
            br.set_item("data_alignment", alignment)?;
            let (cached_blocks, cached_bytes) = b.counts.cached();
            br.set_item("cache", b.cache_state())?;
            br.set_item("cache_refusal", b.cache_refusal.as_deref())?;
            br.set_item("cached_blocks", cached_blocks)?;
            br.set_item("cached_bytes", cached_bytes)?;
            br.set_item("allocations", t.allocs)?;
            br.set_item("frees", t.frees)?;
            br.set_item("reallocs", t.reallocs)?;
            br.set_item("bytes_allocated", t.bytes_allocated)?;
            br.set_item("bytes_freed", t.bytes_freed)?;
            br.set_item("live_blocks", t.live_blocks())?;
            br.set_item("live_bytes", t.live_bytes())?;
            br.set_item("peak_bytes", t.peak_bytes)?;
            br.set_item("null_frees", t.null_frees)?;
            br.set_item("numpy_size_mismatches", b.size_mismatches.total())?;
            br.set_item("numpy_size_mismatch_sites", events(py, &b.size_mismatches)?)?;
            br.set_item("foreign_pointers", b.foreign_pointers.total())?;
            br.set_item("foreign_pointer_sites", events(py, &b.foreign_pointers)?)?;
            d.set_item("bridge", br)?;
        }
        None => d.set_item("bridge", py.None())?,
    }
    Ok(d)
}

/// Turn the cache of freed blocks of `key`'s bridge on or off (made first if
/// need be); whether it was on.
pub fn set_caching(key: &str, on: bool) -> PyResult<bool> {
    let b = bridge(key)?;
    crate::raw_plugin::set_caching(b, on).map_err(|why| {
        errors::numpy_error("not-cacheable", format!("the bridge of `{key}` never caches freed blocks: {why}"))
    })
}
