//! memplug: load memory allocators ("handlers") from shared libraries at run
//! time, in the spirit of NumPy's NEP 49 data-memory handlers.
//!
//! # Layers
//! One module per stage. Each imports only from modules above it in this
//! list (bottom first), never from one below; there are no circles.
//! 0. [`text`] — outside text made safe to show (control characters,
//!    bidirectional overrides and bytes that are not UTF-8 escaped), and
//!    file names carried whole between processes; imports nothing;
//!    [`syscalls`] — the system calls a worker's sandbox forbids (names,
//!    numbers, conditions, reasons: a pure table) and the record its
//!    `SIGSYS` handler leaves when a plugin makes one; `own_time`
//!    (private) — the time a process has had (wall-clock time less its
//!    waits for a processor), which verdict deadlines are measured on;
//! 1. [`error`] — every error type, with its reason codes; [`stage`] — the
//!    stages of loading and checking, announced before each runs;
//! 2. [`validate`] — judge a handler header: pure Rust over bytes, no FFI;
//! 3. [`symbols`] — allocators made of plain C functions (`malloc`/`free` by
//!    name): specs, `*.memplug.toml` manifests, the role table;
//!    [`functions`] — allocators made of functions given by address (C
//!    functions, or functions taking a context pointer): specs;
//! 4. `raw` (private) — the unsafe core: a plugin's vtable and the calls
//!    through it, the handler core with its lock and counts, opening
//!    libraries, the by-symbol trampolines, a buffer's memory, a worker's
//!    process primitives, the sandbox's privilege calls and its `SIGSYS`
//!    handler;
//! 5. [`precheck`] — before a file is opened: is it a regular file, an ELF
//!    shared library for this machine, trusted (owner and modes of it and
//!    every directory on its path; SHA-256 pinning)? Pure checks over
//!    bytes and facts, and the I/O that gathers them;
//! 6. [`dirs`] — where plugins are looked for (`MEMPLUG_PLUGIN_PATH`, the
//!    user directory, the system directories) and the cache lives;
//!    [`discover`] — find candidates there or in explicit paths;
//! 7. [`info`] — what is known about a handler ([`HandlerInfo`], [`Source`]);
//!    `layout` (private) — compare a Rust plugin's `abi_stable` type layout
//!    with the frozen type of the ABI minor it claims;
//! 8. [`load`] — open a library, call its entry, copy and validate the
//!    header; or find a spec's symbols; and `inspect`;
//! 9. `handle` (private) — the [`Handler`] type itself;
//! 10. [`lock`] — guards that hold a handler's lock across a batch, and
//!     several handlers locked at once without deadlock;
//! 11. [`handler`] — [`Handler`]'s API: dispatch, aligned requests,
//!     instances;
//! 12. [`alloc_api`] — [`Handler`] and [`HandlerGuard`] as allocators of
//!     Rust collections (`allocator_api2::alloc::Allocator`);
//! 13. [`current`] — the process default and per-thread scoped handler;
//! 14. `view`, `ownership` (private) and [`buffer`] — owning buffers that
//!     free through the handler that made them, base-object ownership of
//!     foreign memory, and views; [`share`] — blocks handed to other
//!     processes ([`SharedBlock`]) and attached there;
//! 15. [`policy`] — what a registry accepts (versions, deprecations, trust)
//!     and whether it probes; [`check`] — the conformance pass; [`report`]
//!     — what `check`, `list` and `inspect` say about a candidate;
//! 16. [`probe`] — run a candidate in a worker process, under a deadline,
//!     and read its answer as untrusted input (or how it crashed, hung or
//!     exited); then end every process it started. Its files: `wire` (the
//!     messages), `frames` (reading the protocol channel, bounded),
//!     `answer` (judging an answer against its request), `runner`
//!     (starting and watching a worker), `supervise` (the subreaper and
//!     the sweep of a worker's descendants), `outcome` (how a worker
//!     ended, as reports and as a verdict);
//! 17. [`cache`] — the verdict cache: unchanged files are not checked
//!     again, and files that crashed a worker are refused without running;
//!     [`registry`] — install validated handlers under unique names, under
//!     a policy (probing them first if it says so); [`global`] — a
//!     `#[global_allocator]` whose handler an environment variable names at
//!     start-up, with the bootstrap arena that serves while it loads;
//! 18. [`sandbox`] — what a worker process denies the plugin it runs (a
//!     seccomp filter that traps forbidden calls, no capabilities);
//! 19. [`worker`] — the worker side of `probe`.
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
//! The crate denies `unsafe` code. The `raw` module holds the unsafe core;
//! where a front end calls one of its `unsafe` primitives, it opts in for
//! that one item and argues it.
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
pub mod syscalls;
mod own_time;
pub mod error;
pub mod stage;
pub mod validate;
pub mod symbols;
pub mod functions;
#[allow(unsafe_code)]
mod raw;
pub mod precheck;
pub mod dirs;
pub mod discover;
pub mod info;
mod layout;
pub mod load;
mod handle;
pub mod lock;
pub mod handler;
pub mod alloc_api;
pub mod current;
mod view;
mod ownership;
pub mod buffer;
pub mod share;
pub mod policy;
pub mod check;
pub mod report;
pub mod probe;
pub mod cache;
pub mod registry;
pub mod global;
pub mod sandbox;
pub mod worker;

pub use buffer::Buffer;
pub use current::HandlerScope;
pub use discover::Candidate;
pub use error::{AllocError, BufferError, InstanceError, LoadError, LockError, PolicyError, Refusal, ShareError};
pub use functions::FunctionSpec;
pub use handler::{AlignedStrategy, DirectCalls, Handler, Instance};
pub use info::{HandlerInfo, LayoutCheck, Source};
pub use lock::{HandlerGuard, MultiGuard};
pub use ownership::Ownership;
pub use policy::Policy;
pub use registry::{Outcome, Registry};
pub use report::Report;
pub use share::SharedBlock;
pub use symbols::SymbolSpec;
pub use view::View;

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
