//! A handle to a shared block, as Python sees it: a dict of memplug's
//! [`SharedBlock`] fields plus the plugin's file (so that a process that
//! has not loaded the plugin can), and back.

use crate::errors;
use memplug::SharedBlock;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The handle's fields as a dict: [`SharedBlock`]'s, and `plugin` (the
/// library the handler came from, or None).
pub fn block_dict<'py>(py: Python<'py>, block: &SharedBlock, plugin: Option<&str>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("handler", &block.handler)?;
    d.set_item("segment", &block.segment)?;
    d.set_item("segment_size", block.segment_size)?;
    d.set_item("generation", block.generation)?;
    d.set_item("offset", block.offset)?;
    d.set_item("length", block.length)?;
    d.set_item("attach", &block.attach)?;
    d.set_item("plugin", plugin)?;
    Ok(d)
}

/// A [`SharedBlock`] from the dict [`block_dict`] made (any mapping with
/// those keys).
pub fn block_from(d: &Bound<'_, PyAny>) -> PyResult<SharedBlock> {
    let bad = |e: PyErr| errors::share_error("bad-handle", format!("the handle is malformed: {e}"));
    let get = |k: &str| d.get_item(k).map_err(bad);
    Ok(SharedBlock {
        handler: get("handler")?.extract().map_err(bad)?,
        segment: get("segment")?.extract().map_err(bad)?,
        segment_size: get("segment_size")?.extract().map_err(bad)?,
        generation: get("generation")?.extract().map_err(bad)?,
        offset: get("offset")?.extract().map_err(bad)?,
        length: get("length")?.extract().map_err(bad)?,
        attach: get("attach")?.extract().map_err(bad)?,
    })
}
