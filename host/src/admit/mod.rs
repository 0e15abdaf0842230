//! The admit wing: from a file on disk to a handler ready to install —
//! where plugins are looked for, the checks of a file before it is opened,
//! the validation of a header, allocators by symbol name and their
//! manifests, opening libraries (its own `raw`), loading, and the policy a
//! registry applies. It imports the heap wing (what it builds) and `text`,
//! nothing above it.
//!
//! # Layers
//! 0. `error` — the refusals of a candidate, with their reason codes;
//!    `stage` — the stages of loading and checking, announced before each
//!    runs;
//! 1. `validate` — judge a handler header: pure Rust over bytes, no FFI;
//!    `symbols` — allocators made of plain C functions (`malloc`/`free` by
//!    name): specs, `*.memplug.toml` manifests;
//! 2. `raw` (private) — the process's user id and opening libraries;
//! 3. `precheck` — before a file is opened: is it a regular file, an ELF
//!    shared library for this machine, trusted?
//! 4. `dirs` — where plugins are looked for and the cache lives;
//!    `discover` — find candidates there or in explicit paths;
//! 5. `layout` (private) — compare a Rust plugin's `abi_stable` type layout
//!    with the frozen type of the ABI minor it claims;
//! 6. `load` — open a library, call its entry, copy and validate the
//!    header; or find a spec's symbols; and `inspect`;
//! 7. `policy` — what a registry accepts (versions, deprecations, trust)
//!    and whether it probes.

pub(crate) mod error;
pub mod stage;
pub mod validate;
pub mod symbols;
#[allow(unsafe_code)]
pub(crate) mod raw;
pub mod precheck;
pub mod dirs;
pub mod discover;
pub(crate) mod layout;
pub mod load;
pub mod policy;
