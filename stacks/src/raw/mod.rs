//! The crate's `unsafe` core: system calls and the dynamic loader
//! ([`sys`]), the unwinders ([`unwind`]), the loaded modules ([`maps`]) and
//! the stack depot's memory ([`depot`]). Nothing here allocates through
//! `malloc` after [`unwind::init`]: every function may run inside an
//! allocator or a signal handler. The rest of the crate denies `unsafe`.
//!
//! # Layers
//! 0. [`sys`] — thread ids, the environment, files, anonymous memory, reading
//!    memory that may not be mapped;
//! 1. [`unwind`] — libunwind's `unw_backtrace`, or libgcc's
//!    `_Unwind_Backtrace`, chosen once;
//! 2. [`maps`] — the modules the dynamic loader has loaded;
//! 3. [`memo`] — each thread's recent stacks and their ids, and the
//!    stacks' hash;
//! 4. [`depot`] — stacks stored once each, by id, in memory mapped once;
//!    [`scratch`] — the one buffer reports are encoded in;
//!    [`spool`] — records appended through a shared mapping of a file.

pub mod sys;
pub mod unwind;
pub mod maps;
pub mod memo;
pub mod depot;
pub mod scratch;
pub mod spool;
