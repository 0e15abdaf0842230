//! The unsafe core of the host, at the bottom of its layers: it imports
//! nothing from the modules above it (only `syscalls`, `error`, `validate`, the role
//! table of `symbols` and the function types of `functions`, which are
//! below it). The front ends — `handler`,
//! `lock`, `buffer`, `current`, `load` — hold these primitives and call
//! them; where such a call is `unsafe`, the front end opts in for that one
//! item and argues it.
//!
//! - `vtable` — a plugin's function pointers and the calls through them;
//! - `dispatch`, `held` — [`RawHandler`](dispatch::RawHandler): a vtable with its
//!   lock and instance count, the per-call paths (and the direct hot path),
//!   and [`Held`](held::Held), the proof a lock is held that batched calls
//!   go through; `life` — an instance's owner, live blocks and destruction;
//!   `pending` — a handler's lock with its queue of pending frees (frees
//!   that could not wait for the lock), and `barrier`, the asymmetric
//!   barrier between queuing and releasing; `relock` — the reentrant,
//!   fork-safe lock itself; `atfork` — the `pthread_atfork` handlers that
//!   hold every such lock (and `Global`'s) around a fork; `aligned` — host
//!   over-allocation for large alignments;
//!   `user` — every other call into a plugin (`stats`, `create`,
//!   `locate`, `resolve`): counted as a user of the instance, under the
//!   lock taken by the no-wait rule;
//!   `share` — the ABI 1.2 calls that share blocks with other processes,
//!   and the count that keeps an attached instance alive;
//! - `library` — opening libraries (never closed), calling entry functions,
//!   copying a handler's bytes out of the plugin;
//! - `symbols` — trampolines for allocators taken by symbol name (and C
//!   functions given by address); `functions` — trampolines for functions
//!   given by address that take a context pointer;
//! - `builtin` — the libc handler;
//! - `process` — a worker's protocol descriptor, killing a process group;
//!   `fork` — forking for the conformance check `fork`, and waiting for the
//!   child under a deadline;
//! - `sandbox` — a worker's `PR_SET_NO_NEW_PRIVS` and dropping its
//!   capabilities; `trap` — its `SIGSYS` handler, which reports a system
//!   call the sandbox forbids on the protocol channel;
//! - `bytes` — the memory of a buffer and the slices over it;
//! - `bootstrap` — the bootstrap arena of the global allocator, and the
//!   system allocator's calls;
//! - `static_ref` — an atomically swapped `&'static`, for the default
//!   handler;
//! - `os` — the process's effective user id, for the trust checks.
//!
//! Every `unsafe` block states why it holds; every `unsafe fn` says what its
//! caller must guarantee.

pub(crate) mod aligned;
pub(crate) mod atfork;
pub(crate) mod barrier;
pub(crate) mod bootstrap;
pub(crate) mod builtin;
pub(crate) mod bytes;
pub(crate) mod dispatch;
pub(crate) mod fork;
pub(crate) mod functions;
pub(crate) mod held;
pub(crate) mod library;
pub(crate) mod life;
pub(crate) mod os;
pub(crate) mod pending;
pub(crate) mod process;
pub(crate) mod relock;
pub(crate) mod sandbox;
pub(crate) mod share;
pub(crate) mod static_ref;
pub(crate) mod symbols;
pub(crate) mod trap;
pub(crate) mod user;
pub(crate) mod vtable;
