//! Attached arrays' base object: [`Attachment`] owns the host's base-owned
//! [`memplug::Buffer`] over a block another process shared — which keeps
//! the segment mapped in this process and never frees the block — and
//! shows NumPy the bytes through `__array_interface__`. NumPy's arrays over
//! it hold it as their base; when the last goes, the buffer goes, and with
//! the last buffer of the segment the mapping. [`attach_block`] is
//! `memplug.numpy.attach`'s native half.

use super::attach_raw;
use super::block_dict::{block_dict, block_from};
use crate::errors;
use memplug::{Buffer, SharedBlock};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;

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

/// Attach the block a handle (the dict [`share_array`](super::export::share_array) made) names.
#[pyfunction]
pub fn attach_block(py: Python<'_>, handle: &Bound<'_, PyAny>) -> PyResult<Attachment> {
    let block = block_from(handle)?;
    let plugin: Option<String> = handle.get_item("plugin").ok().and_then(|p| p.extract().ok());
    let buffer = py.allow_threads(|| attach_raw::attach(&block)).map_err(|e| errors::from_share(&e))?;
    Ok(Attachment {
        address: buffer.as_ptr() as usize,
        length: buffer.len(),
        block,
        plugin,
        _buffer: Mutex::new(buffer),
    })
}
