//! Call stacks for memplug's heap reports.
//!
//! Inside a program (a plugin, or the interposer) this crate captures the
//! stack of an allocation, a free or a faulting access without allocating
//! — from any thread, inside a signal handler, in code built without frame
//! pointers — keeps each distinct stack once in a lock-free depot so that a
//! block holds a 4-byte id, and hands reports out as raw return addresses
//! with the module map (path, load bias, build id) they need. Outside the
//! program (the `memplug` command, feature `symbolize`) it reads those
//! records back — a pure parser over untrusted bytes — and turns addresses
//! into `function file:line`; with the feature `profile`, it turns the
//! samples of a heap profile into pprof's format and a flame graph.
//!
//! ```
//! use memplug_stacks::capture::{self, Stack};
//!
//! capture::init(); // choose the unwinder (may dlopen): once, up front
//! let here = capture::capture(capture::DEFAULT_DEPTH);
//! let id = here.intern(); // 4 bytes to keep with a block
//! assert_eq!(Stack::of(id).frames(), here.frames());
//! ```
//!
//! # Layers
//! Each module imports only from those above it in this list (bottom
//! first).
//! 0. [`format`] — the raw trace format: an encoder into a caller's buffer,
//!    a reader over bytes;
//! 1. [`text`] — how a report reads (AddressSanitizer's layout), over
//!    `core::fmt::Write`;
//! 2. [`raw`] — the unsafe core: system calls, the unwinders, the module
//!    map, the depot's memory;
//! 3. [`capture`] — a block's stack: captured, trimmed, interned;
//! 4. [`blocks`] — whether a pointer may be a block libc made, and where a
//!    block the interposer placed starts;
//! 5. [`emit`] — reports out of the process: into `memplug run`'s trace, or
//!    on standard error;
//! 6. `symbolize` — addresses to names, files and lines; a trace read back
//!    into reports (with the feature `symbolize`);
//! 7. `profile` — heap profiles: a trace's sampled allocations weighed
//!    into estimates, written as pprof and as a flame graph (with the
//!    feature `profile`).
//!
//! All `unsafe` code is in `raw`; the rest of the crate denies it.

#![deny(unsafe_code)]

pub mod format;
pub mod text;
#[allow(unsafe_code)]
pub mod raw;
pub mod capture;
pub mod blocks;
pub mod emit;
#[cfg(feature = "symbolize")]
pub mod symbolize;
#[cfg(feature = "profile")]
pub mod profile;
