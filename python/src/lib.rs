//! `memplug._memplug`: the native half of the `memplug` Python package.
//!
//! The Python modules (`memplug`, `memplug.numpy`) are the public API and
//! document it; this module gives them loading into memplug's process-wide
//! registry and describing it, bridges (a memplug handler seen from NumPy),
//! NumPy's handler capsules and hooked handlers, arrays shared with other
//! processes, and allocators defined from Python at run time.
//!
//! # Layers
//! One folder per concern. Each module imports only from modules above it
//! in this list (bottom first), never from one below; there are no circles
//! (checked by `tests/architecture.rs`). In each folder, its `mod.rs` lists
//! its own modules the same way.
//! 0. [`errors`] — Python exceptions carrying memplug's reason codes;
//!    [`thread_raw`] — the calling thread, asked of the system and of
//!    Python: its id, whether it holds the GIL, whether Python runs, its
//!    frame; each imports nothing;
//! 1. [`block`] — a bridged block's memory: the block header in both its
//!    formats (`header_raw`, the one place that reads and writes it), the
//!    size classes of small blocks, and the per-thread cache of freed
//!    blocks (`cache_raw`);
//! 2. [`counters`] — the per-thread counter slots (`thread_lines`) and the
//!    counting over them (`counting`): blocks and bytes allocated, freed,
//!    live and peak;
//! 3. [`bridge`] — a memplug handler seen from NumPy (`state`), the record
//!    of NumPy's mistakes (`events`), and the functions NumPy calls
//!    (`alloc_raw`, `free_raw`, `padded_raw`, over `plugin_raw`);
//! 4. [`registry`] — loading plugins into memplug's registry, the bridges
//!    of its handlers by name, and what it holds as Python dicts;
//! 5. [`numpy`] — NumPy's C API, its handler capsules, an ndarray's fields,
//!    hooked handlers, and the safe front the NumPy functions below use;
//! 6. [`share`] — arrays handed to other processes and attached from them;
//! 7. [`define`] — allocators defined from Python at run time: a library's
//!    functions by symbol name, C functions by address, Python callables.
//!
//! This file declares the modules and the native module's functions, which
//! call into them.
//!
//! # Free-threaded Python
//! The module declares that it runs without the GIL
//! (`#[pymodule(gil_used = false)]`): on a free-threaded CPython (3.13t,
//! 3.14t) importing it leaves the GIL off, and its functions, NumPy's calls
//! into the bridges and the Python-defined allocators run on many threads
//! at once. That holds because of what every piece of shared state is and
//! what runs while a lock is held (the audit, kept true by whoever adds
//! state):
//!
//! - **No Python code runs while a memplug lock is held**, and no thread
//!   waits for one of memplug's locks attached to the interpreter, where a
//!   free-threaded build's stop-the-world pause (garbage collection) would
//!   wait for it in turn. The locks Python-facing code takes —
//!   [`numpy::handlers`]' capsules by name, [`registry::bridges`]' bridges
//!   by name, [`registry::loading`]'s loaded candidates,
//!   [`define::from_library`]'s specs — are taken with PyO3's
//!   `lock_py_attached` (detached while waiting), hold only map look-ups
//!   and inserts (and, for a bridge, the host's registry look-up and the
//!   plugin's `create`, which are not Python), and turn refusals into
//!   Python exceptions, and drop Python objects, after they are let go.
//!   Loading and registering run with the thread detached (`allow_threads`).
//! - **The host's locks hold no Python code.** A handler that is not
//!   thread-safe (`arena`, C functions given as `thread_safe=False`) is
//!   locked by the host around each call into the plugin, and only there;
//!   the bridge calls it with nothing of Python's between. Python callables
//!   (`define::callables_raw`) are registered thread-safe, so the host never
//!   locks around them: each call attaches to the interpreter itself, and
//!   callables not declared thread-safe take a `Turn` (waited for
//!   detached, re-entrant for its holder: a garbage collection inside the
//!   callable may free an array of the same handler). A hooked handler
//!   ([`numpy::hook_raw`]) calls its callback after the inner handler's
//!   call has returned, with no lock held. A `ctypes.CFUNCTYPE` made from a
//!   Python function, given to `from_functions(thread_safe=False)`, would
//!   put Python code under a host lock: it is refused
//!   (`python-under-lock`, in `memplug/_define.py`); only its bare integer
//!   address cannot be told, which the guide says not to give.
//! - **Counters are per thread or atomic.** A bridge counts in per-thread
//!   lines ([`counters::thread_lines`]) claimed by compare-and-swap of the
//!   owner word, written by their owner only, read by anyone, handed on
//!   with release and acquire; beyond 256 threads, in shared atomics; the
//!   peak with `fetch_max`. No thread reads another's line on its hot path
//!   (the first line's holder is named in a word apart), and a check of the
//!   peak reads the other lines only when their published highs say it may
//!   rise. The cache of freed blocks is per line, touched
//!   by its owner only ([`block::cache_raw`]); a thread draining another's
//!   (ended) line claims it first. None of it ever assumed the GIL: NumPy
//!   frees without it in places. Bridges' salts come from an atomic.
//! - **Cells.** NumPy's C API table ([`numpy::api_raw`]) and the verified
//!   array layout ([`numpy::array_raw`]) are `GILOnceCell`s, which rest on
//!   a `std::sync::Once`: two threads may both compute the value, one is
//!   kept, and both are the same. `Py_IsFinalizing`'s address is a
//!   `OnceLock` (no Python). A hook's "inside my callback" flag
//!   ([`numpy::hook`]) is thread-local, as is the list of lines a thread
//!   claimed.
//! - **The record of NumPy's mistakes** ([`bridge::events`]): an atomic
//!   total, and a map of sites under a mutex taken after the Python frame
//!   was read (and only when the thread is attached), for the insert alone.
//! - **The Python half**: `memplug._kept`, `memplug.numpy`'s allocators by
//!   handler and the search path's one-time load each have a
//!   `threading.Lock`; the `with` stack is a context variable, as NumPy's
//!   current handler is.
//!
//! [`thread_raw::gil_held`] asks `PyGILState_Check`, which on a
//! free-threaded build tells whether the thread is attached to the
//! interpreter: the question its callers mean (may Python be called here
//! without attaching).
//!
//! # Unsafe code
//! The crate denies `unsafe` code; the modules whose names end in `_raw`
//! allow it (on their `mod` lines, here or in their folder's `mod.rs`), and
//! every `unsafe` block in them argues why it holds in a `// SAFETY:`
//! comment. The folders themselves and every other module have none.
//!
//! Its Rust API is private (Python is the public one): these docs are for
//! the people working on it, `cargo doc --document-private-items`.

#![deny(unsafe_code)]
// The module map above links the private modules it describes.
#![allow(rustdoc::private_intra_doc_links)]

mod errors;
#[allow(unsafe_code)]
mod thread_raw;
mod block;
mod counters;
mod bridge;
mod registry;
mod numpy;
mod share;
mod define;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;

/// Load plugin libraries, manifests and directories; one outcome dict per
/// candidate.
#[pyfunction]
fn load(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<Bound<'_, PyList>> {
    registry::loading::load(py, paths)
}

/// The search path as `(directory, origin)` pairs, with the package's
/// plugin directory `bundled` in its place.
#[pyfunction]
fn search_path(bundled: PathBuf) -> Vec<(PathBuf, &'static str)> {
    registry::loading::search_path(bundled)
}

/// Turn the registry's worker probe on (`worker`: program and leading
/// arguments; `timeout` in seconds) or off (`None`).
#[pyfunction]
#[pyo3(signature = (worker, timeout=10.0))]
fn set_probe(worker: Option<(PathBuf, Vec<String>)>, timeout: f64) -> PyResult<()> {
    registry::loading::set_probe(worker, timeout)
}

/// `(program, arguments, timeout)` of the registry's worker probe, or None.
#[pyfunction]
fn probe() -> Option<(PathBuf, Vec<String>, f64)> {
    registry::loading::probe()
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
    registry::describe::handlers(py)
}

/// Statistics of a handler (`name` or `name:options`).
#[pyfunction]
fn stats<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    registry::describe::stats(py, name)
}

/// The names of the registered handlers, sorted.
#[pyfunction]
fn names() -> Vec<String> {
    memplug::Registry::global().names()
}

/// NumPy's `mem_handler` capsule for a memplug handler.
#[pyfunction]
fn numpy_capsule(py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
    numpy::handlers::capsule(py, name)
}

/// Set NumPy's handler for the current context (`None`: NumPy's default);
/// returns the previous capsule.
#[pyfunction]
#[pyo3(signature = (capsule))]
fn numpy_set<'py>(py: Python<'py>, capsule: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    numpy::handlers::set(py, capsule.as_ref())
}

/// NumPy's handler capsule in the current context.
#[pyfunction]
fn numpy_get(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    numpy::handlers::get(py)
}

/// `(numpy_name, memplug_name or None)` for a handler capsule, or None if
/// the object is not one.
#[pyfunction]
fn describe_capsule(obj: &Bound<'_, PyAny>) -> Option<(String, Option<String>)> {
    numpy::handlers::describe(obj)
}

/// The address of the handler struct behind a capsule (one key for all
/// capsules of a handler), or None if the object is not a handler capsule.
#[pyfunction]
fn capsule_key(obj: &Bound<'_, PyAny>) -> Option<usize> {
    numpy::handlers::capsule_key(obj)
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
    numpy::handlers::array_handler(py, arr, data, ndim)
}

/// A new handler capsule serving from capsule `inner`'s handler and calling
/// `callback(event, ptr, size, old_ptr)` after each call.
#[pyfunction]
fn numpy_hooked(py: Python<'_>, inner: &Bound<'_, PyAny>, callback: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    numpy::handlers::hooked(py, inner, callback)
}

/// Close the bridge of an instance (`name:options`): its instance goes
/// once its blocks are freed; `False` if no such bridge is open.
#[pyfunction]
fn numpy_close(py: Python<'_>, name: &str) -> PyResult<bool> {
    numpy::handlers::close(py, name)
}

/// Turn the cache of freed blocks of a bridge on or off; whether it was on.
#[pyfunction]
fn numpy_set_cache(py: Python<'_>, name: &str, enabled: bool) -> PyResult<bool> {
    registry::bridges::set_caching(py, name, enabled)
}

/// Check that memplug reads this NumPy's arrays right in this interpreter
/// (see `numpy::array_raw::layout`); raises `NumpyError` if not.
#[pyfunction]
fn numpy_check_layout(py: Python<'_>) -> PyResult<()> {
    numpy::handlers::check_layout(py)
}

/// NumPy's C feature version (`PyArray_GetNDArrayCFeatureVersion`).
#[pyfunction]
fn numpy_feature_version(py: Python<'_>) -> PyResult<u32> {
    Ok(numpy::handlers::api(py)?.feature_version)
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

/// The native module. It declares that it runs without the GIL (see the
/// module docs' "Free-threaded Python" for why that holds), so that
/// importing it on a free-threaded CPython leaves the GIL off.
#[pymodule(gil_used = false)]
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
    m.add_function(wrap_pyfunction!(numpy_check_layout, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_close, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_set_cache, m)?)?;
    m.add_function(wrap_pyfunction!(capsule_key, m)?)?;
    m.add_function(wrap_pyfunction!(array_handler, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_hooked, m)?)?;
    m.add_function(wrap_pyfunction!(share::export::share_array, m)?)?;
    m.add_function(wrap_pyfunction!(share::attachment::attach_block, m)?)?;
    m.add_class::<share::attachment::Attachment>()?;
    m.add_function(wrap_pyfunction!(define::from_library::library_name, m)?)?;
    m.add_function(wrap_pyfunction!(define::from_library::define_library, m)?)?;
    m.add_function(wrap_pyfunction!(define::from_functions::define_callables, m)?)?;
    m.add_function(wrap_pyfunction!(define::from_functions::define_addresses, m)?)?;
    m.add("HEADER_MIN_BYTES", block::header_raw::HEADER_MIN_BYTES)?;
    m.add("PEAK_CHECK_BYTES", counters::thread_lines::PEAK_CHECK_BYTES)?;
    m.add("CACHE_MAX_BYTES", block::classes::MAX_CACHED)?;
    m.add("CACHE_LISTS_MAX_BYTES", block::cache_raw::LISTS_MAX_BYTES)?;
    m.add("CACHE_SPARE_MAX_BYTES", block::cache_raw::MAX_SPARE)?;
    m.add("CACHE_SPARE_PATIENCE", block::cache_raw::SPARE_PATIENCE)?;
    m.add("CACHE_DEPTH", block::cache_raw::DEPTH)?;
    m.add("CACHE_ENV", bridge::state::CACHE_ENV)?;
    Ok(())
}
