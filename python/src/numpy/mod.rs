//! NumPy's side: its C API, its handler struct and capsules, the fields of
//! its arrays, hooked handlers, and the safe functions the native module's
//! NumPy calls are made of.
//!
//! # Layers
//! Each imports only from the modules above it in this list (bottom first).
//! 0. `api_raw` — NumPy's C API table: its feature version, and
//!    `PyDataMem_SetHandler`/`GetHandler`; imports nothing of the crate;
//! 1. `capsule_raw` — the `PyDataMem_Handler` struct and the `mem_handler`
//!    capsules holding one: made for a bridge or over any allocator, and
//!    read back;
//! 2. `array_raw` — an ndarray's fields (data pointer, flags, handler
//!    capsule), checked against Python's view of it, and who made its data;
//! 3. `hook` — a hook's Python callback and how it is called;
//! 4. `hook_raw` — the functions of a hooked handler, which call another
//!    handler's and then tell the hook;
//! 5. `handlers` — the safe front: a capsule per bridged handler, NumPy's
//!    current handler, an array's handler, closing, hooking.

#[allow(unsafe_code)]
pub mod api_raw;
#[allow(unsafe_code)]
pub mod capsule_raw;
#[allow(unsafe_code)]
pub mod array_raw;
pub mod hook;
#[allow(unsafe_code)]
pub mod hook_raw;
pub mod handlers;
