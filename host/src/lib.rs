//! memplug: load memory allocators ("handlers") from shared libraries at run
//! time, in the spirit of NumPy's NEP 49 data-memory handlers.
//!
//! The stages, one module each:
//! - [`discover`] — find candidate libraries (explicit paths,
//!   `MEMPLUG_PLUGIN_PATH`, the default directory);
//! - [`validate`] — judge a handler header: pure Rust over bytes, no FFI;
//! - [`load`] — open a library, call its entry, copy and validate the header;
//! - [`symbols`] — allocators made of plain C functions from any library
//!   (`malloc`/`free` by name), and `*.memplug.toml` manifests;
//! - [`registry`] — install validated handlers under unique names;
//! - [`handler`] — dispatch `alloc`/`alloc_zeroed`/`realloc`/`free`;
//! - [`current`] — the process default and per-thread scoped handler;
//! - [`buffer`] — owning buffers that free through the handler that made
//!   them, and base-object ownership of foreign memory;
//! - [`lock`] — serialising handlers that are not thread-safe: guards held
//!   across a batch, and several handlers locked at once without deadlock;
//! - [`check`] — the conformance pass; [`cli`] — the `memplug` command.
//!
//! All `unsafe` code is in the private `raw` module; the rest of the crate
//! denies it.
//!
//! ```no_run
//! use memplug::{Buffer, Registry, current};
//!
//! let registry = Registry::global();
//! for outcome in registry.load_search_path() {
//!     if let Err(e) = outcome.result {
//!         eprintln!("{e}"); // e.code() is a stable reason such as "bad-magic"
//!     }
//! }
//! let aligned = registry.get("aligned").expect("the bundled aligned plugin");
//! let _scope = current::scoped(aligned);
//! let buf = Buffer::zeroed(1 << 20).unwrap();
//! assert_eq!(buf.as_ptr() as usize % 64, 0);
//! ```

#![deny(unsafe_code)]

pub mod buffer;
pub mod check;
pub mod cli;
pub mod current;
pub mod discover;
pub mod error;
pub mod handler;
pub mod load;
pub mod lock;
#[allow(unsafe_code)]
mod raw;
pub mod registry;
pub mod symbols;
pub mod validate;

pub use buffer::{Buffer, Ownership, View};
pub use discover::Candidate;
pub use error::{AllocError, BufferError, LoadError, Refusal};
pub use handler::{AlignedStrategy, Handler, HandlerInfo, Instance, Source};
pub use lock::{HandlerGuard, LockError, MultiGuard};
pub use registry::Registry;

/// The README's Rust examples, compiled as doctests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
