//! Running plugin code where it cannot take this process down: a **worker
//! process** loads and checks one candidate and reports back; the parent
//! survives whatever the plugin does.
//!
//! A plugin is foreign code: its constructors run when its library is
//! opened, before any check, and its functions run in the conformance pass.
//! A plugin that crashes, hangs or calls `exit` there takes its process
//! with it. So `memplug check`, `list` and `inspect` run each candidate in a
//! worker, and an application can ask its [`Registry`](crate::Registry) to
//! probe each candidate in one before loading it
//! ([`Policy::probe`](crate::Policy::probe)).
//!
//! The worker is the `memplug` executable started with the hidden argument
//! [`WORKER_ARG`] (any program that calls [`crate::worker::serve`] when it
//! sees that argument serves as well). The parent writes a [`Request`] to
//! its standard input; the worker announces each stage *before* it runs
//! (`stage load`, `stage entry`, `stage check:zeroed`, …) and ends with its
//! [`Answer`]. The parent reads them under a timeout and tells apart
//! ([`WorkerOutcome`]):
//! - an answer — the reports, as if the candidate had been checked here;
//! - a crash — the worker was killed by a signal: its name and the stage;
//! - a time-out — the worker (and everything it started) is killed, and the
//!   stage it was stuck in is reported;
//! - no report — the worker ended without an answer (a plugin calling
//!   `exit(0)` in its constructor), with its exit status and stage.
//!
//! `wire.rs` holds the messages and their framing (pure); `runner.rs` starts
//! a worker and watches it.
//!
//! Imports `report`, `policy`, `discover`, `symbols`, `error` and `raw`
//! (killing a worker's process group).

mod runner;
pub(crate) mod wire;

pub use runner::{Worker, WorkerOutcome, signal_name};
pub use wire::{Answer, Request, Task};

/// The argument that makes the `memplug` executable serve as a worker.
pub const WORKER_ARG: &str = "__memplug-worker";

/// The environment variable naming the worker executable, looked at first
/// by [`Worker::find`].
pub const WORKER_ENV: &str = "MEMPLUG_WORKER";
