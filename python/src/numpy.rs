//! NumPy's side: a `mem_handler` capsule per bridged handler (made once,
//! kept for the process), and setting and reading NumPy's current handler.

use crate::bridge::Bridge;
use crate::{errors, raw_numpy, registry};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// Capsules by the name they were asked by. Never emptied: NumPy arrays
/// hold these capsules, and the bridges behind them, as long as they like.
static CAPSULES: LazyLock<Mutex<HashMap<String, Py<PyAny>>>> = LazyLock::new(Mutex::default);

/// NumPy's C API, or a `NumpyError` saying why not.
pub fn api(py: Python<'_>) -> PyResult<&'static raw_numpy::NumpyApi> {
    raw_numpy::numpy_api(py).map_err(|e| {
        let text = e.to_string();
        if text.contains("numpy-too-old") {
            errors::numpy_error("numpy-too-old", text)
        } else {
            errors::numpy_error("numpy-unavailable", format!("cannot reach NumPy's C API: {text}"))
        }
    })
}

/// The `mem_handler` capsule for `key` (`name` or `name:options`).
pub fn capsule(py: Python<'_>, key: &str) -> PyResult<Py<PyAny>> {
    if let Some(c) = CAPSULES.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
        return Ok(c.clone_ref(py));
    }
    api(py)?;
    let bridge: &'static Bridge = registry::bridge(key)?;
    let made = raw_numpy::new_capsule(py, bridge, &bridge.numpy_name)?;
    let mut map = CAPSULES.lock().unwrap_or_else(|e| e.into_inner());
    Ok(map.entry(key.to_string()).or_insert(made).clone_ref(py))
}

/// Make `capsule` (NumPy's default if `None`) NumPy's handler in the
/// current context; the previous one.
pub fn set<'py>(py: Python<'py>, capsule: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    if let Some(c) = capsule
        && raw_numpy::capsule_name(c).is_none()
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
    let name = raw_numpy::capsule_name(obj)?;
    Some((name, raw_numpy::capsule_bridge(obj).map(|b| b.key.clone())))
}

/// Close the bridge of `key` (`name:options`): see [`registry::close`].
/// Its capsule is forgotten too, so that asking for `key` again makes a
/// new instance; arrays keep the old capsule and free through it.
pub fn close(key: &str) -> PyResult<bool> {
    let closed = registry::close(key)?;
    CAPSULES.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    Ok(closed)
}
