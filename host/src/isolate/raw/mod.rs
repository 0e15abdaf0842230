//! The isolate wing's unsafe code: a worker's process primitives, forking
//! for the conformance check `fork`, and the sandbox's privilege calls and
//! `SIGSYS` handler. It imports only the wing's `syscalls` table.
//!
//! # Layers
//! 0. `process` — a worker's protocol descriptor and channel (a socket
//!    whose reader learns each writer), killing a process group;
//!    `privileges` — a worker's `PR_SET_NO_NEW_PRIVS` and dropping its
//!    capabilities;
//! 1. `forked` — forking for the conformance check `fork`, and waiting for
//!    the child under a deadline; `trap` — the worker's `SIGSYS` handler,
//!    which reports a system call the sandbox forbids on the protocol
//!    channel.
//!
//! Every `unsafe` block states why it holds; every `unsafe fn` says what its
//! caller must guarantee.

pub(crate) mod process;
pub(crate) mod privileges;
pub(crate) mod forked;
pub(crate) mod trap;
