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
//! [`Answer`] on its protocol channel (its standard output, a socket). The
//! parent reads them under a timeout and tells apart
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
//! # One writer
//! The worker's children inherit its channel (a plugin may fork; the
//! conformance check `fork` does), and what they write lands between the
//! worker's own lines wherever the scheduler puts it: before the answer it
//! would be ignored, after it it would break the protocol. A verdict that
//! depended on that would differ from run to run with the machine's load.
//! So the channel is a Unix stream socket whose parent end asks for every
//! writer's credentials (`SO_PASSCRED`): the kernel never joins the bytes
//! of two processes in one read and names the process that wrote each,
//! and no process without `CAP_SYS_ADMIN` (the sandboxed worker and its
//! children have no capabilities) can claim another's id. The parent reads
//! as the protocol only the bytes the worker process itself wrote; of what
//! other processes wrote it takes only records of forbidden calls (their
//! `SIGSYS` handler is the worker's), and drops the rest. When the worker
//! has ended, everything it wrote is queued: the parent shuts the channel
//! (later writes fail) and reads the queue to its end, with no deadline.
//! The verdict is then a function of the worker's own stream and of the
//! records queued before it ended.
//!
//! Waiting for every descendant instead, and judging the whole stream, was
//! the other way: it cannot tell whose bytes are whose, so where a child's
//! write lands would still decide, and a descendant that never ends would
//! turn every such plugin into a time-out. What the credentials cannot
//! separate is the plugin's own code in the worker process (its
//! constructors, its threads): that writes as the worker, and is judged as
//! the untrusted input it is. A descendant's forbidden call counts when it
//! is made before the worker ends (the conformance check waits for its
//! children, so theirs always do); a process a plugin leaves running is
//! killed with the worker's process group, whatever it was about to do.
//!
//! # Deadline and supervision
//! The timeout bounds each run from start to end, reading included,
//! measured on the worker's own clock (`own_time.rs`): the time that
//! passed less the time the worker, its threads and its descendants waited
//! for a processor. A worker that hangs — asleep, or spinning — is charged
//! every second on a busy machine as on an idle one; a worker that is only
//! kept waiting is charged nothing for it, so a busy machine does not turn
//! a good plugin into a time-out. A plugin that starves itself (more busy
//! threads or processes than processors) is stopped by a wall-clock bound,
//! [`WALL_CLOCK_FACTOR`] times the timeout; a time-out says so, and that a
//! rerun on a quieter machine tells load from a hang. While workers run,
//! this process is a child subreaper and non-dumpable; when a candidate is
//! done, its worker's process group and every orphan reparented here are
//! killed and reaped (the rule: `supervise.rs`). A worker's standard error
//! is a pipe the parent forwards to its own.
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
    BAD_ANSWER, FORBIDDEN_CALL, WALL_CLOCK_FACTOR, WorkerOutcome, bad_answer_message, forbidden_message, signal_name,
    verdict_of_reports,
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
