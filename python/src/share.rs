//! Arrays handed to other processes: the native half of
//! `memplug.numpy.share` and `memplug.numpy.attach`.
//!
//! - [`share_array`]: the range of an array inside the block a memplug
//!   bridge made for it (or for the array it views), as a handle of
//!   memplug's [`SharedBlock`] fields plus the plugin's file, so that a
//!   process that has not loaded the plugin can.
//! - [`Attachment`]: the base object of an attached array. It owns the
//!   host's base-owned [`memplug::Buffer`] over the block — which keeps the
//!   segment mapped in this process and never frees the block — and shows
//!   NumPy the bytes through `__array_interface__`. NumPy's arrays over it
//!   hold it as their base; when the last goes, the buffer goes, and with
//!   the last buffer of the segment the mapping.
//!
//! Which bytes go where (dtype, shape, strides) is the Python side's
//! (`memplug/numpy/_share.py`); this module only deals in ranges.

use crate::errors;
use crate::raw_share::{self, DataOwner};
use memplug::{Buffer, SharedBlock};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;

/// The handle's fields as a dict: [`SharedBlock`]'s, and `plugin` (the
/// library the handler came from, or None).
fn block_dict<'py>(py: Python<'py>, block: &SharedBlock, plugin: Option<&str>) -> PyResult<Bound<'py, PyDict>> {
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
fn block_from(d: &Bound<'_, PyAny>) -> PyResult<SharedBlock> {
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

/// The handle to the `len` bytes at address `lo`, which lie in the data
/// of `owner` — an ndarray whose data pointer is `data` and which has
/// `ndim` dimensions — or raise `memplug.ShareError`.
#[pyfunction]
pub fn share_array<'py>(
    py: Python<'py>,
    owner: &Bound<'py, PyAny>,
    data: usize,
    ndim: usize,
    lo: usize,
    len: usize,
) -> PyResult<Bound<'py, PyDict>> {
    match raw_share::data_owner(py, owner, data, ndim)? {
        DataOwner::Bridge { bridge, data, size } => {
            if lo < data || lo.saturating_add(len) > data + size {
                return Err(errors::share_error(
                    "out-of-range",
                    format!(
                        "the range {lo:#x}+{len} is not inside the array's block ({data:#x}+{size}): pass the array \
                         (or a view of it) whose data you mean to share"
                    ),
                ));
            }
            let block = bridge.handler.share(lo as *const u8, len).map_err(|e| errors::from_share(&e))?;
            let plugin = bridge.handler.info().source.file().map(|p| p.to_string_lossy().into_owned());
            block_dict(py, &block, plugin.as_deref())
        }
        DataOwner::OtherHandler(name) => Err(errors::share_error(
            "not-shareable",
            format!(
                "the array's data was made by NumPy's handler `{name}`, which is not a shareable memplug handler: \
                 make the array under a shareable handler, e.g. `with memplug.numpy.use(\"shm:name=NAME,size=1g\"):` \
                 (arrays made before the `with`, or by NumPy's default handler, stay where they are; copy one with \
                 np.array(a) inside the block)"
            ),
        )),
        DataOwner::NoHandler => Err(errors::share_error(
            "foreign-memory",
            "the array's memory was not made by any data-memory handler (it views a buffer from elsewhere, e.g. \
             np.frombuffer or a memory map), so no handler can share it: copy it into an array made under a \
             shareable handler (`memplug.numpy.use(\"shm:...\")`)"
                .into(),
        )),
    }
}

/// The base object of arrays attached from another process: the host's
/// attached buffer, shown to NumPy by address.
#[pyclass(frozen, module = "memplug._memplug")]
pub struct Attachment {
    address: usize,
    length: usize,
    block: SharedBlock,
    plugin: Option<String>,
    /// Keeps the attachment (and the mapping) alive; never read.
    _buffer: Mutex<Buffer>,
}

#[pymethods]
impl Attachment {
    /// The address of the block's first byte in this process.
    #[getter]
    fn address(&self) -> usize {
        self.address
    }

    /// Bytes of the block.
    #[getter]
    fn length(&self) -> usize {
        self.length
    }

    /// NumPy's array interface: the bytes, writable, as a 1-D `uint8` array.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", (self.length,))?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.address, false))?;
        Ok(d)
    }

    /// The handle this was attached from.
    fn handle<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        block_dict(py, &self.block, self.plugin.as_deref())
    }

    /// A handle to the `len` bytes at address `lo`, inside this block (a
    /// view of an attached array, handed on).
    fn share<'py>(&self, py: Python<'py>, lo: usize, len: usize) -> PyResult<Bound<'py, PyDict>> {
        let start = lo.checked_sub(self.address).filter(|s| s.saturating_add(len) <= self.length);
        let Some(start) = start else {
            return Err(errors::share_error(
                "out-of-range",
                format!(
                    "the range {lo:#x}+{len} is not inside the attached block ({:#x}+{})",
                    self.address, self.length
                ),
            ));
        };
        let part = self.block.slice(start as u64..(start + len) as u64).map_err(|e| errors::from_share(&e))?;
        block_dict(py, &part, self.plugin.as_deref())
    }

    fn __reduce__(&self) -> PyResult<()> {
        Err(pyo3::exceptions::PyTypeError::new_err(
            "an attachment cannot be pickled: send the handle (memplug.numpy.share of the array) instead",
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "<memplug attachment: {} bytes at {:#x}, segment {} offset {}>",
            self.length, self.address, self.block.segment, self.block.offset
        )
    }
}

/// Attach the block a handle (the dict [`share_array`] made) names.
#[pyfunction]
pub fn attach_block(py: Python<'_>, handle: &Bound<'_, PyAny>) -> PyResult<Attachment> {
    let block = block_from(handle)?;
    let plugin: Option<String> = handle.get_item("plugin").ok().and_then(|p| p.extract().ok());
    let buffer = py.allow_threads(|| raw_share::attach(&block)).map_err(|e| errors::from_share(&e))?;
    Ok(Attachment {
        address: buffer.as_ptr() as usize,
        length: buffer.len(),
        block,
        plugin,
        _buffer: Mutex::new(buffer),
    })
}
