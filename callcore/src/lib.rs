//! The call core that memplug's host and its interposer (`memplug run`,
//! `libmemplug_preload.so`) share, so that each rule of calling a plugin is
//! written once: the host's heap wing holds these types behind its handler
//! core, and the interposer forwards to them as mimalloc's
//! `alloc-override.c` forwards to mimalloc's core.
//!
//! The crate is `no_std` and allocates nothing: the interposer *is* the
//! program's allocator, so nothing it shares with the host may call one.
//! What a host needs beyond it — a table's box, a handler's lock and counts,
//! error text — stays with the host.
//!
//! # Layers
//! Each module imports only from those above it in this list (bottom
//! first); there are no circles.
//! 0. [`role`] — the roles a plain C function plays in an allocator made
//!    of them; [`direct_raw`] — a thread-safe handler's block calls copied
//!    out of its vtable for hot paths; [`fork_raw`] — the fork lock: the
//!    set of locks held across a `fork`, taken all or none;
//! 1. [`vtable_raw`] — a handler's functions and `ctx`, the calls through
//!    them, the zero-size rule ([`served`]), and the addresses a header
//!    holds;
//! 2. [`builtin_raw`] — libc's allocator as a handler; [`aligned_raw`] — an
//!    aligned block carved out of a plain one; [`symbols_raw`] — the table
//!    of an allocator made of plain C functions, its reader and the
//!    trampolines that give it the handler ABI.
//!
//! # Unsafe code
//! The crate denies `unsafe` code; the modules whose names end in `_raw`
//! allow it (each on its first line, `#![allow(unsafe_code)]`): calling a
//! plugin through addresses is unsafe by nature. Every `unsafe` block states why it holds; every
//! `unsafe fn` says what its caller must guarantee.

#![no_std]
#![deny(unsafe_code)]

pub mod role;
pub mod direct_raw;
pub mod fork_raw;
pub mod vtable_raw;
pub mod builtin_raw;
pub mod aligned_raw;
pub mod symbols_raw;

pub use direct_raw::{DirectCalls, PlainCalls};
pub use fork_raw::{ForkNode, ForkSet, ForkSetStatic, PthreadLock};
pub use role::Role;
pub use symbols_raw::{SymbolTable, Trampolines};
pub use vtable_raw::{CreateFailure, FunctionAddrs, VTable, served};
