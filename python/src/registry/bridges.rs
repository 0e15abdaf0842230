//! The one place names are resolved — `tracking`, or
//! `arena:region_size=1m` for an instance made through the plugin's ABI 1.1
//! `create` — into [`Bridge`]s: made on first use, kept by name, closed.

use crate::bridge::state::Bridge;
use crate::errors;
use memplug::Registry;
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

/// The bridges, by the name they were asked by.
#[derive(Default)]
struct Bridges {
    /// Bridges open.
    open: HashMap<String, &'static Bridge>,
    /// Bridges closed ([`close`]), by name: their statistics stay readable
    /// until a new bridge of the same name is made.
    closed: HashMap<String, &'static Bridge>,
}

/// The bridges, locked: taken detached from the interpreter
/// (`lock_py_attached`), so that a thread waiting for it never holds up
/// the interpreter (a free-threaded build's stop-the-world pauses wait for
/// every attached thread). Nothing under it runs Python code: refusals
/// become Python exceptions after it is let go.
fn state(py: Python<'_>) -> MutexGuard<'static, Bridges> {
    static STATE: LazyLock<Mutex<Bridges>> = LazyLock::new(Mutex::default);
    STATE.lock_py_attached(py).unwrap_or_else(|e| e.into_inner())
}

/// Why a bridge could not be made, before it is a Python exception.
enum Refused {
    Unknown(String, Vec<String>),
    Instance(memplug::InstanceError),
}

/// The bridge for `key` (`name` or `name:options`), made on first use.
pub fn bridge(py: Python<'_>, key: &str) -> PyResult<&'static Bridge> {
    // Held throughout, so that two threads asking at once make one bridge
    // (and one instance).
    let mut state = state(py);
    let made = make(&mut state, key);
    drop(state);
    made.map_err(|refused| match refused {
        Refused::Unknown(name, known) => errors::unknown_handler(&name, &known),
        Refused::Instance(r) => errors::refusal(key, &r),
    })
}

fn make(state: &mut Bridges, key: &str) -> Result<&'static Bridge, Refused> {
    if let Some(&b) = state.open.get(key) {
        return Ok(b);
    }
    let (name, options) = match key.split_once(':') {
        Some((n, o)) => (n, Some(o)),
        None => (key, None),
    };
    let registry = Registry::global();
    let handler = registry.get(name).ok_or_else(|| Refused::Unknown(name.to_string(), registry.names()))?;
    let bridge = match options {
        None => Bridge::leak(key, handler, None),
        Some(options) => {
            let instance = handler.instantiate(options).map_err(Refused::Instance)?;
            Bridge::leak(key, instance.handler(), Some(instance))
        }
    };
    state.closed.remove(key);
    state.open.insert(key.to_string(), bridge);
    Ok(bridge)
}

/// The bridge already made for `key` (or the last one closed), if any.
pub fn existing_bridge(py: Python<'_>, key: &str) -> Option<&'static Bridge> {
    let state = state(py);
    state.open.get(key).or_else(|| state.closed.get(key)).copied()
}

/// Close the bridge of `key`, an instance (`name:options`): let its
/// instance go once its blocks are freed ([`close`](crate::bridge::plugin_raw::close)), and forget
/// the name, so that asking for it again makes a new instance. `false` if
/// no bridge of that name is open.
pub fn close(py: Python<'_>, key: &str) -> PyResult<bool> {
    let mut state = state(py);
    let Some(&bridge) = state.open.get(key) else { return Ok(false) };
    if !bridge.is_instance() {
        drop(state);
        return Err(errors::numpy_error(
            "not-an-instance",
            format!(
                "`{key}` is a registered handler, which lives for the process: only instances made from options \
                 (`name:options`, e.g. `shm:name=work,size=1g`) can be closed"
            ),
        ));
    }
    state.open.remove(key);
    state.closed.insert(key.to_string(), bridge);
    drop(state);
    Ok(crate::bridge::plugin_raw::close(bridge))
}

/// Turn the cache of freed blocks of `key`'s bridge on or off (made first if
/// need be); whether it was on.
pub fn set_caching(py: Python<'_>, key: &str, on: bool) -> PyResult<bool> {
    let b = bridge(py, key)?;
    crate::bridge::plugin_raw::set_caching(b, on).map_err(|why| {
        errors::numpy_error("not-cacheable", format!("the bridge of `{key}` never caches freed blocks: {why}"))
    })
}
