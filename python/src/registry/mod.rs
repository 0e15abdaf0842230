//! memplug's process-wide registry seen from Python: loading plugins into
//! it, the bridges made of its handlers by name, and what it holds, as
//! Python values.
//!
//! # Layers
//! Each imports only from the modules above it in this list (bottom first).
//! 0. `loading` — loading candidates (outcomes like `memplug check`'s),
//!    the package's search path, the worker probe; imports nothing;
//! 1. `bridges` — names (`name` or `name:options`) resolved into bridges,
//!    made on first use; closing an instance's bridge; its cache switch;
//! 2. `describe` — handler information and statistics as dicts.

pub mod loading;
pub mod bridges;
pub mod describe;
