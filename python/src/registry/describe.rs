//! Describing what memplug's registry holds, as Python dicts: handler
//! information, and the statistics of a handler — the plugin's own and its
//! bridge's counters.

use super::bridges::{bridge, existing_bridge};
use crate::block::header_raw::PAD_ALIGN;
use crate::bridge::events::EventLog;
use crate::errors;
use memplug::{Handler, Registry};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

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

/// Statistics for `key`: the plugin's own (`plugin`, or None if it reports
/// none) and the bridge's counters (`bridge`, or None if NumPy has not been
/// given this handler).
pub fn stats<'py>(py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyDict>> {
    let existing = existing_bridge(py, key);
    let handler = match existing {
        Some(b) => b.handler,
        None if key.contains(':') => bridge(py, key)?.handler,
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
    match existing_bridge(py, key) {
        Some(b) => {
            let t = b.totals();
            let br = PyDict::new(py);
            br.set_item("numpy_name", &b.numpy_name)?;
            br.set_item("header_bytes", b.header)?;
            let alignment = if b.padded { PAD_ALIGN } else { b.handler.alignment() };
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
