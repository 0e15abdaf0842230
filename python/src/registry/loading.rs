//! Loading plugins into memplug's process-wide registry, as Python values:
//! the outcome of each candidate like `memplug check` reports it, the
//! package's search path, and the registry's worker probe.

use memplug::discover::{self, Candidate};
use memplug::{Handler, Registry};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex, MutexGuard};

/// Candidates loaded successfully, and the handler each gave: loading one
/// again reports the same outcome instead of `duplicate-name`. Locked
/// detached from the interpreter, for a look-up or an insert only.
fn loaded(py: Python<'_>) -> MutexGuard<'static, HashMap<Candidate, Handler>> {
    static LOADED: LazyLock<Mutex<HashMap<Candidate, Handler>>> = LazyLock::new(Mutex::default);
    LOADED.lock_py_attached(py).unwrap_or_else(|e| e.into_inner())
}

/// The keys every outcome dict has: `status` (`"ok"`, `"rejected"`, or
/// `"shadowed"` for a directory's handler whose name an earlier directory's
/// took, which is not a failure), `reason` (the refusal's code), `message`
/// (the refusal, without where it came from) and `name`.
pub fn set_status(py: Python<'_>, d: &Bound<'_, PyDict>, result: &Result<Handler, memplug::LoadError>) -> PyResult<()> {
    match result {
        Ok(h) => {
            d.set_item("status", "ok")?;
            d.set_item("reason", py.None())?;
            d.set_item("message", py.None())?;
            d.set_item("name", h.name())?;
        }
        Err(e) => {
            let shadowed = match &e.refusal {
                memplug::Refusal::Shadowed { name, .. } => Some(name.as_str()),
                _ => None,
            };
            d.set_item("status", if shadowed.is_some() { "shadowed" } else { "rejected" })?;
            d.set_item("reason", e.code())?;
            d.set_item("message", e.refusal.to_string())?;
            d.set_item("name", shadowed)?;
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
/// `*.memplug.toml` files), each once per process. A directory's candidate
/// whose name a handler from an earlier directory has is `shadowed`; a file
/// named whose name is taken is `duplicate-name`.
pub fn load<'py>(py: Python<'py>, paths: Vec<PathBuf>) -> PyResult<Bound<'py, PyList>> {
    let candidates: Vec<(Candidate, bool)> = paths
        .iter()
        .flat_map(|p| {
            let scan = p.is_dir();
            discover::candidates_from(std::slice::from_ref(p)).into_iter().map(move |c| (c, scan))
        })
        .collect();
    let mut results = Vec::new();
    for (c, scan) in &candidates {
        let known = loaded(py).get(c).copied();
        let result = match known {
            Some(h) => Ok(h),
            None if *scan => py.allow_threads(|| Registry::global().load_scanned(c)),
            None => py.allow_threads(|| Registry::global().load(c)),
        };
        if let Ok(h) = result {
            loaded(py).insert(c.clone(), h);
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
