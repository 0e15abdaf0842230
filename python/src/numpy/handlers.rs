//! NumPy's handlers, the safe front of this folder: a `mem_handler`
//! capsule per bridged handler (made once, kept for the process), setting
//! and reading NumPy's current handler, the handler an array's data came
//! from, and hooked handlers (over [`super::hook_raw`]).

use super::hook::Hook;
use super::{api_raw, array_raw, capsule_raw, hook_raw};
use crate::bridge::state::Bridge;
use crate::errors;
use crate::registry::bridges;
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// Capsules by the name they were asked by. Never emptied: NumPy arrays
/// hold these capsules, and the bridges behind them, as long as they like.
static CAPSULES: LazyLock<Mutex<HashMap<String, Py<PyAny>>>> = LazyLock::new(Mutex::default);

/// NumPy's C API, or a `NumpyError` saying why not.
pub fn api(py: Python<'_>) -> PyResult<&'static api_raw::NumpyApi> {
    api_raw::numpy_api(py).map_err(|e| {
        let text = e.to_string();
        if text.contains("numpy-too-old") {
            errors::numpy_error("numpy-too-old", text)
        } else {
            errors::numpy_error("numpy-unavailable", format!("cannot reach NumPy's C API: {text}"))
        }
    })
}

/// NumPy's C API and the layout of its arrays in this interpreter,
/// verified (see [`array_raw::layout`]): `import memplug.numpy` calls it,
/// so that a NumPy or a Python whose arrays memplug cannot read is refused
/// there, with `NumpyError("numpy-layout")`.
pub fn check_layout(py: Python<'_>) -> PyResult<()> {
    api(py)?;
    array_raw::layout(py).map(drop)
}

/// The `mem_handler` capsule for `key` (`name` or `name:options`).
///
/// The lock on the capsules is taken detached from the interpreter
/// (`lock_py_attached`), and nothing under it runs Python code or frees a
/// Python object: two threads asking at once may both make a capsule, and
/// the one not kept is dropped after the lock is let go.
pub fn capsule(py: Python<'_>, key: &str) -> PyResult<Py<PyAny>> {
    if let Some(c) = CAPSULES.lock_py_attached(py).unwrap_or_else(|e| e.into_inner()).get(key) {
        return Ok(c.clone_ref(py));
    }
    api(py)?;
    let bridge: &'static Bridge = bridges::bridge(py, key)?;
    let made = capsule_raw::new_capsule(py, bridge, &bridge.numpy_name)?;
    let mut map = CAPSULES.lock_py_attached(py).unwrap_or_else(|e| e.into_inner());
    let kept = map.entry(key.to_string()).or_insert_with(|| made.clone_ref(py)).clone_ref(py);
    drop(map);
    drop(made);
    Ok(kept)
}

/// Make `capsule` (NumPy's default if `None`) NumPy's handler in the
/// current context; the previous one.
pub fn set<'py>(py: Python<'py>, capsule: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    if let Some(c) = capsule
        && capsule_raw::capsule_name(c).is_none()
    {
        return Err(errors::numpy_error(
            "not-a-handler",
            format!("{} is not a NumPy `mem_handler` capsule", c.repr()?),
        ));
    }
    api(py)?.set_handler(py, capsule)
}

/// NumPy's handler in the current context.
pub fn get(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    api(py)?.get_handler(py)
}

/// The name NumPy shows for a handler capsule, and the memplug name it
/// bridges (`None` for handlers that are not memplug's).
pub fn describe(obj: &Bound<'_, PyAny>) -> Option<(String, Option<String>)> {
    let name = capsule_raw::capsule_name(obj)?;
    Some((name, capsule_raw::capsule_bridge(obj).map(|b| b.key.clone())))
}

/// Close the bridge of `key` (`name:options`): see [`bridges::close`].
/// Its capsule is forgotten too, so that asking for `key` again makes a
/// new instance; arrays keep the old capsule and free through it.
pub fn close(py: Python<'_>, key: &str) -> PyResult<bool> {
    let closed = bridges::close(py, key)?;
    let forgotten = CAPSULES.lock_py_attached(py).unwrap_or_else(|e| e.into_inner()).remove(key);
    // Dropped with the lock let go.
    drop(forgotten);
    Ok(closed)
}

/// The address of the handler struct behind a capsule: one key for every
/// capsule of a handler (`None` if `obj` is not a handler capsule).
pub fn capsule_key(obj: &Bound<'_, PyAny>) -> Option<usize> {
    capsule_raw::handler_address(obj)
}

/// The handler capsule of `arr` — an ndarray whose data pointer is `data`
/// and which has `ndim` dimensions — if it owns its data and a handler
/// made it.
pub fn array_handler<'py>(
    py: Python<'py>,
    arr: &Bound<'py, PyAny>,
    data: usize,
    ndim: usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    api(py)?;
    array_raw::array_handler(py, arr, data, ndim)
}

/// A new handler capsule serving from the handler of capsule `inner` and
/// calling `callback(event, ptr, size, old_ptr)` after each call, named
/// `memplug:hooked(<inner's name>)`.
pub fn hooked(py: Python<'_>, inner: &Bound<'_, PyAny>, callback: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    api(py)?;
    let Some(inner_name) = capsule_raw::capsule_name(inner) else {
        return Err(errors::numpy_error(
            "not-a-handler",
            format!("{} is not a NumPy `mem_handler` capsule: pass an Allocator or a handler capsule", inner.repr()?),
        ));
    };
    let name = format!("memplug:hooked({inner_name})");
    let hook = Hook::new(callback.clone().unbind(), inner.clone().unbind());
    hook_raw::hooked_capsule(py, inner, hook, &name)
        .unwrap_or_else(|| Err(errors::numpy_error("not-a-handler", "the capsule is not a handler".into())))
}
