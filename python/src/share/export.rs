//! Sharing an array: the range of an array inside the block a memplug
//! bridge made for it (or for the array it views), as a handle
//! (`memplug.numpy.share`'s native half, [`share_array`]).

use super::block_dict::block_dict;
use crate::errors;
use crate::numpy::array_raw::{self, DataOwner};
use pyo3::prelude::*;
use pyo3::types::PyDict;

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
    match array_raw::data_owner(py, owner, data, ndim)? {
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
                 make the array under a shareable handler, e.g. `with memplug.numpy.allocator(\"shm:name=NAME,size=1g\"):` \
                 (arrays made before the `with`, or by NumPy's default handler, stay where they are; copy one with \
                 np.array(a) inside the block)"
            ),
        )),
        DataOwner::NoHandler => Err(errors::share_error(
            "foreign-memory",
            "the array's memory was not made by any data-memory handler (it views a buffer from elsewhere, e.g. \
             np.frombuffer or a memory map), so no handler can share it: copy it into an array made under a \
             shareable handler (`with memplug.numpy.allocator(\"shm:...\"):`)"
                .into(),
        )),
    }
}
