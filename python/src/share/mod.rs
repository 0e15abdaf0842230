//! Arrays handed to other processes: the native half of
//! `memplug.numpy.share` and `memplug.numpy.attach`. Which bytes go where
//! (dtype, shape, strides) is the Python side's
//! (`memplug/numpy/_share.py`); this folder only deals in ranges.
//!
//! # Layers
//! Each imports only from the modules above it in this list (bottom first).
//! 0. `attach_raw` — attaching a shared block through memplug's registry;
//!    imports nothing of the crate;
//! 1. `block_dict` — a handle as a dict, and back;
//! 2. `export` — the handle to a range of an array a bridge made;
//! 3. `attachment` — the base object of attached arrays, and attaching.

#[allow(unsafe_code)]
pub mod attach_raw;
pub mod block_dict;
pub mod export;
pub mod attachment;
