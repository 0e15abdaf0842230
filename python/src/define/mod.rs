//! Allocators defined from Python at run time: `memplug.from_library` (a
//! library's C functions by symbol name, as a manifest gives them) and
//! `memplug.from_functions` (C functions by address, or Python callables).
//! Each answers with an outcome dict like `memplug.load`'s.
//!
//! # Layers
//! Each imports only from the modules above it in this list (bottom first).
//! 0. `outcome` — the outcome dict of a definition;
//! 1. `from_library` — a library's functions by symbol name;
//! 2. `callables_raw` — the trampolines that call Python callables, one at
//!    a time for those not declared thread-safe, and their registration;
//! 3. `addresses_raw` — C functions given by address, and their
//!    registration;
//! 4. `from_functions` — callables or addresses, from Python.

pub mod outcome;
pub mod from_library;
#[allow(unsafe_code)]
pub mod callables_raw;
#[allow(unsafe_code)]
pub mod addresses_raw;
pub mod from_functions;
