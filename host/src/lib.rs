//! memplug: load memory allocators ("handlers") from shared libraries at run
//! time, in the spirit of NumPy's NEP 49 data-memory handlers.
//!
//! # Layers
//! Three wings over a leaf, then what joins them, bottom first. Each module
//! imports only from modules above it in this list, never from one below;
//! inside a wing, its modules follow the same rule (each wing's own list
//! is in its `mod.rs`); there are no circles.
//! 0. `text` — outside text made safe to show (control characters,
//!    bidirectional overrides and bytes that are not UTF-8 escaped), and
//!    file names carried whole between processes; imports nothing;
//! 1. `heap` (private) — a handler and every call into it: [`Handler`],
//!    [`lock`], [`current`], [`Buffer`], [`share`], over its unsafe core
//!    (the handler's lock and counts) and the call core it
//!    shares with the interposer (`memplug-callcore`: vtable, trampolines,
//!    the fork lock);
//! 2. `admit` (private) — from a file to a handler ready to install:
//!    [`dirs`], [`discover`], [`precheck`], [`validate`], [`symbols`],
//!    [`load`], [`policy`], over the library-opening code;
//! 3. `isolate` (private) — running a candidate where its crash cannot
//!    hurt: [`sandbox`], [`check`], [`report`], [`probe`], [`cache`],
//!    [`screen`], over the worker's process code;
//! 4. [`registry`] — install validated handlers under unique names, under
//!    a policy (probing them first if it says so);
//! 5. [`global`] — a `#[global_allocator]` whose handler an environment
//!    variable names at start-up, with the bootstrap arena that serves
//!    while it loads; [`worker`] — the worker side of `probe`;
//! 6. [`error`] — every public error type, re-exported from the wing that
//!    raises it.
//!
//! The modules of the wings are public under the crate root
//! (`memplug::load`, `memplug::current`, …); the wings themselves are the
//! crate's internal order.
//!
//! The `memplug` command is a separate binary built on this public API (the
//! default cargo feature `cli`); the library itself does not depend on
//! clap, serde_json or tracing-subscriber.
//!
//! # Cargo features
//! - `cli` (default): the `memplug` command. Off, the library builds
//!   without clap, serde_json, tracing-subscriber, indicatif and tempfile.
//! - `nightly`: [`Handler`] and [`HandlerGuard`] implement the standard
//!   library's unstable `core::alloc::Allocator` (allocator-api2 then
//!   re-exports it), so `Vec::new_in` and the rest of std take them;
//!   nightly Rust only.
//!
//! # Unsafe code
//! The crate denies `unsafe` code. Each wing's `raw` module holds its unsafe
//! code; where a front end calls one of its `unsafe` primitives, it opts in
//! for that one item and argues it.
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
// With the `nightly` feature, allocator-api2's `Allocator` is the standard
// library's (unstable) trait, which `alloc_api` then implements.
#![cfg_attr(feature = "nightly", feature(allocator_api))]

pub mod text;
mod heap;
mod admit;
mod isolate;
pub mod registry;
pub mod global;
pub mod worker;
pub mod error;

pub use admit::{dirs, discover, load, policy, precheck, stage, symbols, validate};
pub use heap::{alloc_api, buffer, current, functions, handler, info, lock, share};
pub use isolate::{cache, check, probe, report, sandbox, screen, syscalls};

pub use buffer::Buffer;
pub use current::HandlerScope;
pub use discover::Candidate;
pub use error::{AllocError, BufferError, InstanceError, LoadError, LockError, PolicyError, Refusal, ShareError};
pub use functions::FunctionSpec;
pub use handler::{AlignedStrategy, DirectCalls, Handler, Instance};
pub use heap::ownership::Ownership;
pub use heap::view::View;
pub use info::{HandlerInfo, LayoutCheck, Source};
pub use lock::{HandlerGuard, MultiGuard};
pub use policy::Policy;
pub use registry::{Outcome, Registry};
pub use report::Report;
pub use share::SharedBlock;
pub use symbols::SymbolSpec;

/// The README's Rust examples, compiled as doctests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The Rust snippets of the guide (`docs/src/`), compiled and run as
/// doctests: one item per page that has Rust code.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../../docs/src/getting-started.md")]
    pub struct GuideGettingStarted;
    #[doc = include_str!("../../docs/src/plugins.md")]
    pub struct GuidePlugins;
    #[doc = include_str!("../../docs/src/trust.md")]
    pub struct GuideTrust;
    #[doc = include_str!("../../docs/src/isolation.md")]
    pub struct GuideIsolation;
    #[doc = include_str!("../../docs/src/by-symbol.md")]
    pub struct GuideBySymbol;
    #[doc = include_str!("../../docs/src/sharing.md")]
    pub struct GuideSharing;
    #[doc = include_str!("../../docs/src/rust-library.md")]
    pub struct GuideRustLibrary;
    #[doc = include_str!("../../docs/src/global.md")]
    pub struct GuideGlobal;
    #[doc = include_str!("../../docs/src/plugin-rust.md")]
    pub struct GuidePluginRust;
}
