//! `memplug._memplug`: the native half of the `memplug` Python package.
//!
//! The Python modules (`memplug`, `memplug.numpy`) are the public API and
//! document it; this module gives them:
//! - loading into memplug's process-wide registry and describing it
//!   ([`registry`]);
//! - bridges: a memplug handler seen from NumPy, with its block header,
//!   counters, cache of freed blocks and record of NumPy's mistakes
//!   ([`bridge`]; the counters [`counters`], kept in the per-thread lines
//!   of [`lines`]), under the unsafe [`raw_plugin`] (the block header, the
//!   calls to the plugin), [`raw_block`] and [`raw_free`] (the functions
//!   NumPy calls),
//!   [`raw_padded`] (the same for shareable handlers, whose data is
//!   aligned to 64 bytes) and over [`raw_cache`] (the per-thread lists of
//!   cached small blocks and the spares);
//! - NumPy's handler capsules, current handler and arrays' handlers
//!   ([`numpy`]), over the unsafe [`raw_numpy`] (NumPy's C API table, the
//!   capsules) and [`raw_thread`] (the thread's id, whether it holds the
//!   GIL);
//! - hooked handlers, which call a Python callback after each call into
//!   another handler ([`hook`]: the callback's side, over the unsafe
//!   [`raw_hook`]: the functions NumPy calls);
//! - arrays shared with other processes and attached from them
//!   ([`share`], over the unsafe [`raw_share`]);
//! - allocators defined from Python at run time: a library's functions by
//!   symbol name, C functions by address, Python callables ([`define`],
//!   over the unsafe [`raw_callbacks`]: the trampolines that call Python);
//! - exceptions with reason codes ([`errors`]).
//!
//! Layers, lowest first, in the order of the `mod` lines below: each
//! module imports only from the modules declared before it (checked by
//! `tests/architecture.rs`): `errors`, `raw_thread`, `raw_cache` → `lines`
//! → `counters` → `bridge` → `raw_plugin` → `raw_padded` → `raw_block` →
//! `raw_free` → `raw_numpy` → `hook` → `raw_hook` → `raw_share` → `registry` → `numpy`,
//! `share` → `raw_callbacks` → `define` → this module.
//!
//! Its Rust API is private (Python is the public one): these docs are for
//! the people working on it, `cargo doc --document-private-items`.

#![deny(unsafe_code)]
// The module map above links the private modules it describes.
#![allow(rustdoc::private_intra_doc_links)]

mod errors;
#[allow(unsafe_code)]
mod raw_thread;
#[allow(unsafe_code)]
mod raw_cache;
mod lines;
mod counters;
mod bridge;
#[allow(unsafe_code)]
mod raw_plugin;
#[allow(unsafe_code)]
mod raw_padded;
#[allow(unsafe_code)]
mod raw_block;
#[allow(unsafe_code)]
mod raw_free;
#[allow(unsafe_code)]
mod raw_numpy;
mod hook;
#[allow(unsafe_code)]
mod raw_hook;
#[allow(unsafe_code)]
mod raw_share;
mod registry;
mod numpy;
mod share;
#[allow(unsafe_code)]
mod raw_callbacks;
mod define;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;

/// Load plugin libraries, manifests and directories; one outcome dict per
/// candidate.
#[pyfunction]
fn load(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<Bound<'_, PyList>> {
    registry::load(py, paths)
}

/// The search path as `(directory, origin)` pairs, with the package's
/// plugin directory `bundled` in its place.
#[pyfunction]
fn search_path(bundled: PathBuf) -> Vec<(PathBuf, &'static str)> {
    registry::search_path(bundled)
}

/// Turn the registry's worker probe on (`worker`: program and leading
/// arguments; `timeout` in seconds) or off (`None`).
#[pyfunction]
#[pyo3(signature = (worker, timeout=10.0))]
fn set_probe(worker: Option<(PathBuf, Vec<String>)>, timeout: f64) -> PyResult<()> {
    registry::set_probe(worker, timeout)
}

/// `(program, arguments, timeout)` of the registry's worker probe, or None.
#[pyfunction]
fn probe() -> Option<(PathBuf, Vec<String>, f64)> {
    registry::probe()
}

/// Serve one probe request as a worker process (`python -m memplug._worker
/// __memplug-worker`): the exit status.
#[pyfunction]
fn serve_worker(py: Python<'_>) -> u8 {
    // The request may load a plugin that runs for a while: other Python
    // threads (there are none in a worker) need not wait for this one.
    let code = py.allow_threads(memplug::worker::serve);
    if code == std::process::ExitCode::SUCCESS { 0 } else { 2 }
}

/// Information dicts of every registered handler.
#[pyfunction]
fn handlers(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    registry::handlers(py)
}

/// Statistics of a handler (`name` or `name:options`).
#[pyfunction]
fn stats<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    registry::stats(py, name)
}

/// The names of the registered handlers, sorted.
#[pyfunction]
fn names() -> Vec<String> {
    memplug::Registry::global().names()
}

/// NumPy's `mem_handler` capsule for a memplug handler.
#[pyfunction]
fn numpy_capsule(py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
    numpy::capsule(py, name)
}

/// Set NumPy's handler for the current context (`None`: NumPy's default);
/// returns the previous capsule.
#[pyfunction]
#[pyo3(signature = (capsule))]
fn numpy_set<'py>(py: Python<'py>, capsule: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    numpy::set(py, capsule.as_ref())
}

/// NumPy's handler capsule in the current context.
#[pyfunction]
fn numpy_get(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    numpy::get(py)
}

/// `(numpy_name, memplug_name or None)` for a handler capsule, or None if
/// the object is not one.
#[pyfunction]
fn describe_capsule(obj: &Bound<'_, PyAny>) -> Option<(String, Option<String>)> {
    numpy::describe(obj)
}

/// The address of the handler struct behind a capsule (one key for all
/// capsules of a handler), or None if the object is not a handler capsule.
#[pyfunction]
fn capsule_key(obj: &Bound<'_, PyAny>) -> Option<usize> {
    numpy::capsule_key(obj)
}

/// The handler capsule of `arr` (an ndarray with data pointer `data` and
/// `ndim` dimensions) if it owns its data and a handler made it, else None.
#[pyfunction]
fn array_handler<'py>(
    py: Python<'py>,
    arr: &Bound<'py, PyAny>,
    data: usize,
    ndim: usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    numpy::array_handler(py, arr, data, ndim)
}

/// A new handler capsule serving from capsule `inner`'s handler and calling
/// `callback(event, ptr, size, old_ptr)` after each call.
#[pyfunction]
fn numpy_hooked(py: Python<'_>, inner: &Bound<'_, PyAny>, callback: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    numpy::hooked(py, inner, callback)
}

/// Close the bridge of an instance (`name:options`): its instance goes
/// once its blocks are freed; `False` if no such bridge is open.
#[pyfunction]
fn numpy_close(name: &str) -> PyResult<bool> {
    numpy::close(name)
}

/// Turn the cache of freed blocks of a bridge on or off; whether it was on.
#[pyfunction]
fn numpy_set_cache(name: &str, enabled: bool) -> PyResult<bool> {
    registry::set_caching(name, enabled)
}

/// NumPy's C feature version (`PyArray_GetNDArrayCFeatureVersion`).
#[pyfunction]
fn numpy_feature_version(py: Python<'_>) -> PyResult<u32> {
    Ok(numpy::api(py)?.feature_version)
}

/// Send memplug's log (the `tracing` events of the host library and the
/// bridge) to stderr, filtered by `MEMPLUG_LOG` (e.g. `memplug=debug`).
fn init_logging() {
    if let Ok(filter) = std::env::var("MEMPLUG_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

/// The native module.
#[pymodule]
fn _memplug(m: &Bound<'_, PyModule>) -> PyResult<()> {
    init_logging();
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(search_path, m)?)?;
    m.add_function(wrap_pyfunction!(handlers, m)?)?;
    m.add_function(wrap_pyfunction!(set_probe, m)?)?;
    m.add_function(wrap_pyfunction!(probe, m)?)?;
    m.add_function(wrap_pyfunction!(serve_worker, m)?)?;
    m.add_function(wrap_pyfunction!(stats, m)?)?;
    m.add_function(wrap_pyfunction!(names, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_capsule, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_set, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_get, m)?)?;
    m.add_function(wrap_pyfunction!(describe_capsule, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_feature_version, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_close, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_set_cache, m)?)?;
    m.add_function(wrap_pyfunction!(capsule_key, m)?)?;
    m.add_function(wrap_pyfunction!(array_handler, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_hooked, m)?)?;
    m.add_function(wrap_pyfunction!(share::share_array, m)?)?;
    m.add_function(wrap_pyfunction!(share::attach_block, m)?)?;
    m.add_class::<share::Attachment>()?;
    m.add_function(wrap_pyfunction!(define::library_name, m)?)?;
    m.add_function(wrap_pyfunction!(define::define_library, m)?)?;
    m.add_function(wrap_pyfunction!(define::define_callables, m)?)?;
    m.add_function(wrap_pyfunction!(define::define_addresses, m)?)?;
    m.add("HEADER_MIN_BYTES", 16)?;
    m.add("PEAK_CHECK_BYTES", lines::PEAK_CHECK_BYTES)?;
    m.add("CACHE_MAX_BYTES", raw_cache::MAX_CACHED)?;
    m.add("CACHE_LISTS_MAX_BYTES", raw_cache::LISTS_MAX_BYTES)?;
    m.add("CACHE_SPARE_MAX_BYTES", raw_cache::MAX_SPARE)?;
    m.add("CACHE_SPARE_PATIENCE", raw_cache::SPARE_PATIENCE)?;
    m.add("CACHE_DEPTH", raw_cache::DEPTH)?;
    m.add("CACHE_ENV", bridge::CACHE_ENV)?;
    Ok(())
}
