//! The heap wing's unsafe core: the handler core with its lock and counts,
//! the trampolines of handlers made of plain functions, a buffer's memory
//! and the global allocator's bootstrap arena, over the call core it shares
//! with the interposer (the `memplug-callcore` crate: a plugin's vtable and
//! the calls through it, the direct calls, libc's built-in handler, aligned
//! blocks). It imports nothing from the heap's safe modules but the
//! function types of `functions` and the role table of `roles`; the front
//! ends — `handler`, `lock`, `buffer`, `current` — hold these primitives and
//! call them; where such a call is `unsafe`, the front end opts in for that
//! one item and argues it.
//!
//! # Layers
//! Its modules, bottom first: each imports only from those above it in
//! this list (and from the heap's `error`, `roles` and `functions`).
//! 0. `static_ref` — an atomically swapped `&'static`, for the default
//!    handler; `bytes` — the memory of a buffer and the slices over it;
//!    `bootstrap` — the bootstrap arena of the global allocator, and the
//!    system allocator's calls;
//! 1. `barrier` — the asymmetric barrier between queuing a pending free and
//!    releasing a lock; `life` — an instance's owner, live blocks and
//!    destruction;
//! 2. `relock` — the reentrant, fork-safe lock; `pending` — a handler's
//!    lock with its queue of pending frees (frees that could not wait for
//!    the lock); `atfork` — the host's use of the call core's fork lock,
//!    which holds every such lock (and `Global`'s) around a fork;
//! 3. `ctx_owner` — the table behind a trampolines' vtable, owned until its
//!    handler is installed (freed if it never is); `functions` —
//!    trampolines for functions given by address that take a context
//!    pointer; `symbols` — trampolines for allocators taken by symbol name
//!    (and C functions given by address);
//! 4. `raw_handler` — [`RawHandler`](raw_handler::RawHandler), the handler
//!    core — a vtable with its lock and instance count — and its whole API:
//!    [`Held`](raw_handler::Held), the proof its lock is held that every
//!    call but the direct hot path goes through; the calls counted as users
//!    of an instance (`stats`, `create`, `locate`, `resolve`,
//!    `usable_size`) under the no-wait rule; the per-call API and the
//!    direct hot path; instances made by `create`; the ABI 1.2 calls that
//!    share blocks, with the count that keeps an attached instance alive;
//!    the ABI 1.3 calls.
//!
//! The trampolines of `symbols` and `functions` allocate only their table,
//! once, when a handler is made, and own it through `ctx_owner` until the
//! handler is installed.
//!
//! Every `unsafe` block states why it holds; every `unsafe fn` says what its
//! caller must guarantee.

pub(crate) mod static_ref;
pub(crate) mod bytes;
pub(crate) mod bootstrap;
pub(crate) mod barrier;
pub(crate) mod life;
pub(crate) mod relock;
pub(crate) mod pending;
pub(crate) mod atfork;
pub(crate) mod ctx_owner;
pub(crate) mod functions;
pub(crate) mod symbols;
pub(crate) mod raw_handler;
