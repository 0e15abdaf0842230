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
//!   `exit(0)` in its constructor), with its exit status and stage;
//! - a bad answer — what the worker wrote is not an acceptable answer to
//!   the request (`bad-answer`): the plugin writes to the protocol channel;
//! - a forbidden call — the plugin made a system call the worker's
//!   [sandbox](crate::isolate::sandbox) forbids (`forbidden-call`): the worker's
//!   `SIGSYS` handler wrote the call's number on the channel and ended the
//!   worker.
//!
//! # An answer is untrusted input
//! The plugin runs in the worker and can write to its protocol channel, so
//! the parent reads the channel as untrusted bytes ([`frames`]): lines and
//! the answer frame are bounded in size, the answer must come right after
//! the worker's `report` stage and be followed only by the channel's end,
//! and it must be about what was asked, coherently ([`answer`]). The answer
//! counts only if the worker then exits with status 0 on its own, and no
//! record of a forbidden call came before or after it. (A plugin that
//! forges such a record only refuses itself.)
//!
//! # Deadline and supervision
//! The timeout bounds each run from start to end, reading included. While
//! workers run, this process is a child subreaper and non-dumpable; when a
//! candidate is done, its worker's process group and every orphan
//! reparented here are killed and reaped (the rule: `supervise.rs`). A
//! worker's standard error is a pipe the parent forwards to its own.
//!
//! `wire.rs` holds the messages (pure), `frames.rs` reads the channel
//! (pure), `answer.rs` judges an answer (pure), `runner.rs` starts a worker
//! and watches it, `supervise.rs` ends what it started, `outcome.rs` says
//! what the outcome means.

mod supervise;
pub(crate) mod wire;
pub mod answer;
pub mod frames;
mod outcome;
mod runner;

pub use outcome::{
    BAD_ANSWER, FORBIDDEN_CALL, WorkerOutcome, bad_answer_message, forbidden_message, signal_name, verdict_of_reports,
};
pub use runner::Worker;
pub use wire::{Answer, Request, Task};

/// Read a whole protocol stream `bytes` as the parent does and judge its
/// answer against `request`: the answer, or what is wrong with the stream
/// or the answer (`None` for a stream without an answer). A record of a
/// forbidden call is an error naming it. Pure; the watcher applies the same
/// rules as the bytes arrive.
pub fn read_answer(request: &Request, bytes: impl std::io::Read) -> Result<Option<Answer>, String> {
    let mut seen = answer::Seen::default();
    let mut got = None;
    for event in frames::events(bytes) {
        match event {
            frames::Event::Stage(s) if got.is_none() => seen.note(&s),
            frames::Event::Stage(_) | frames::Event::Eof => {}
            frames::Event::Answer(a) => got = Some(a),
            frames::Event::Violation(v) => return Err(v),
            frames::Event::Trapped(n) => {
                return Err(format!("a forbidden system call ({})", crate::isolate::syscalls::name(n)));
            }
        }
    }
    got.map(|a| answer::validate(request, &seen, a)).transpose()
}

/// The argument that makes the `memplug` executable serve as a worker.
pub const WORKER_ARG: &str = "__memplug-worker";

/// The environment variable naming the worker executable, looked at first
/// by [`Worker::find`].
pub const WORKER_ENV: &str = "MEMPLUG_WORKER";
