//! The heap wing: a handler and every call into it — allocation, locking,
//! the current handler, owning buffers, blocks shared with other processes
//! — over its own unsafe call core (`raw`). It imports nothing from the
//! wings above it (`admit`, `isolate`) or the top (`registry`, `global`):
//! only `text`.
//!
//! # Layers
//! 0. `error` — the errors it raises (allocation, buffers, locks,
//!    instances, sharing);
//! 1. `roles` (private) — the roles a C function plays in an allocator
//!    (`malloc`, `free`, …) and the functions named for each;
//!    `functions` — allocators made of functions given by address: specs;
//! 2. `raw` (private) — the unsafe call core;
//! 3. `info` — what is known about a handler (`HandlerInfo`, `Source`);
//! 4. `guarded` (private) — the handler locks this thread holds through
//!    guards; `calls` (private) — the block calls, written once for
//!    `Handler` and `HandlerGuard`;
//! 5. `handler` — the `Handler` type and its API: dispatch, aligned
//!    requests, instances;
//! 6. `lock` — guards that hold a handler's lock across a batch, and
//!    several handlers locked at once without deadlock;
//! 7. `alloc_api` — `Handler` and `HandlerGuard` as allocators of Rust
//!    collections;
//! 8. `current` — the process default and per-thread scoped handler;
//! 9. `view`, `ownership` (private) and `buffer` — owning buffers that free
//!    through the handler that made them, base-object ownership of foreign
//!    memory, and views; `share` — blocks handed to other processes
//!    (`SharedBlock`) and attached there.

pub(crate) mod error;
pub(crate) mod roles;
pub mod functions;
#[allow(unsafe_code)]
pub(crate) mod raw;
pub mod info;
pub(crate) mod guarded;
pub(crate) mod calls;
pub mod handler;
pub mod lock;
pub mod alloc_api;
pub mod current;
pub(crate) mod view;
pub(crate) mod ownership;
pub mod buffer;
pub mod share;
