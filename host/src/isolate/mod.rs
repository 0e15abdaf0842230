//! The isolate wing: running a candidate where its crash cannot hurt —
//! a worker process under a deadline and a sandbox, the conformance pass,
//! what a candidate's check says ([`Report`](report::Report)), and the
//! verdict cache — over its own unsafe process code (`raw`). It imports the
//! heap and admit wings and `text`, nothing above it.
//!
//! # Layers
//! 0. `error` — the errors of a worker's sandbox; `syscalls` — the system
//!    calls a worker's sandbox forbids (a pure table) and the record its
//!    `SIGSYS` handler leaves; `own_time` (private) — the time a process
//!    has had (wall-clock time less its waits for a processor), which
//!    verdict deadlines are measured on;
//! 1. `raw` (private) — a worker's process primitives, forking, the
//!    sandbox's privilege calls and `SIGSYS` handler;
//! 2. `sandbox` — what a worker process denies the plugin it runs;
//! 3. `check` — the conformance pass;
//! 4. `report` — what `check`, `list` and `inspect` say about a candidate;
//! 5. `probe` — run a candidate in a worker process, under a deadline, and
//!    read its answer as untrusted input;
//! 6. `cache` — the verdict cache: unchanged files are not checked again,
//!    and files that crashed a worker are refused without running;
//! 7. `screen` — a candidate screened before it runs here, in one order for
//!    the registry and the command: the file checks, the cache, a worker,
//!    the record of what it said.

pub(crate) mod error;
pub mod syscalls;
mod own_time;
#[allow(unsafe_code)]
pub(crate) mod raw;
pub mod sandbox;
pub mod check;
pub mod report;
pub mod probe;
pub mod cache;
pub mod screen;
