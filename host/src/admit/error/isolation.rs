//! Refusals of a plugin judged in a worker process ([`crate::isolate::probe`]) or by
//! the verdict cache ([`crate::isolate::cache`]): what an application that probes
//! plugins before loading them sees. They travel inside
//! [`Refusal::Isolation`](super::Refusal::Isolation).

use thiserror::Error;

/// Why a plugin judged in a worker process is not loaded here.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum IsolationRefusal {
    /// The worker process probing the candidate was killed by a signal: the
    /// plugin crashed it, and was not loaded into this process.
    #[error(
        "the plugin crashed the worker process that probed it ({signal}) {stage}; it was not loaded here. Run \
         `memplug check PATH` to see it fail in isolation, then fix or remove the plugin"
    )]
    Crashed {
        /// The signal's name, e.g. `SIGSEGV`.
        signal: String,
        /// Where it happened, in words.
        stage: String,
    },
    /// The worker process probing the candidate did not finish in time and
    /// was killed.
    #[error(
        "the plugin did not finish within {seconds} in the worker process that probed it (stuck {stage}); it \
         was killed and the plugin not loaded here. A plugin that hangs in its constructor or functions cannot be \
         used; if it is only slow, raise the probe timeout. The time the worker waited for a processor is not \
         counted; if the machine was busy, a rerun on a quieter one tells load from a plugin that hangs"
    )]
    TimedOut {
        /// How long it ran, e.g. `10 s of its own time`.
        seconds: String,
        /// Where it was stuck, in words.
        stage: String,
    },
    /// The worker process probing the candidate ended without a report
    /// (the plugin called `exit`, or similar).
    #[error(
        "the worker process that probed the plugin ended {stage} without a report (exit status {status}): the \
         plugin ends the process (it calls `exit` or `_exit`); it was not loaded here"
    )]
    NoReport {
        /// The exit status, or `none`.
        status: String,
        /// Where it happened, in words.
        stage: String,
    },
    /// The plugin loaded in the worker process but failed the conformance
    /// pass there.
    #[error(
        "the plugin failed the conformance pass in the worker process that probed it ({summary}); it was not \
         loaded here. Run `memplug check PATH` for every check"
    )]
    ConformanceFailed {
        /// The failed checks.
        summary: String,
    },
    /// The plugin loaded in the worker process, but the child of a `fork`
    /// taken there while threads allocated through it hung, crashed or saw
    /// an allocation fail (the conformance check `fork`).
    #[error(
        "the plugin is not usable after a fork ({summary}); it was not loaded here. A thread-safe plugin must take \
         its locks around fork (pthread_atfork; abi/ABI.md, section \"fork\"), or not declare itself thread-safe"
    )]
    ForkUnsafe {
        /// The failed checks.
        summary: String,
    },
    /// The verdict cache remembers that this unchanged file crashed, hung or
    /// ended the process checking it: it is refused without running it.
    #[error(
        "known bad: {what} when it was checked on {date}; the file has not changed since, so it is refused \
         without running it. Fix or replace the plugin, or check it again with `memplug check --rescan`"
    )]
    KnownBad {
        /// What happened, e.g. "it crashed the worker process (SIGSEGV) in
        /// its entry function".
        what: String,
        /// When it was checked.
        date: String,
    },
    /// The plugin made a system call that the worker's sandbox forbids: the
    /// sandbox trapped it there, but loaded into this process the plugin
    /// would make it here.
    #[error(
        "the plugin made a system call that the sandbox of the worker process probing it forbids ({call}: {why}) \
         {stage}; it was not loaded here, where it would make that call unfiltered. Remove the call from the plugin, \
         or do not use the plugin"
    )]
    ForbiddenCall {
        /// The call's name, e.g. `kill`, or `unknown` when the worker ended
        /// as a forbidden call ends it without naming one.
        call: String,
        /// What the call would do, or why it is unknown.
        why: String,
        /// Where it happened, in words.
        stage: String,
    },
    /// The worker process probing the candidate answered something that is
    /// not a report about it: the plugin writes to the protocol channel.
    #[error(
        "the process that probed the plugin answered something that is not a report about it ({problem}): the \
         plugin writes to memplug's protocol channel; it was not loaded here. Remove it or report it to its author"
    )]
    BadAnswer {
        /// What was wrong with the answer.
        problem: String,
    },
    /// No worker process could be started to probe the candidate.
    #[error("cannot probe the plugin in a worker process: {problem}. {fix}")]
    ProbeUnavailable {
        /// What went wrong, and where a worker was looked for.
        problem: String,
        /// What to do: where the lookup that failed would find a worker
        /// (each front end looks in its own places).
        fix: String,
    },
}

impl IsolationRefusal {
    /// The stable reason code: `crashed`, `timed-out`, `no-report`,
    /// `conformance-failed`, `fork-unsafe`, `known-bad`, `forbidden-call`,
    /// `bad-answer` or
    /// `probe-unavailable`.
    pub fn code(&self) -> &'static str {
        match self {
            IsolationRefusal::Crashed { .. } => "crashed",
            IsolationRefusal::TimedOut { .. } => "timed-out",
            IsolationRefusal::NoReport { .. } => "no-report",
            IsolationRefusal::ConformanceFailed { .. } => "conformance-failed",
            IsolationRefusal::ForkUnsafe { .. } => "fork-unsafe",
            IsolationRefusal::KnownBad { .. } => "known-bad",
            IsolationRefusal::ForbiddenCall { .. } => "forbidden-call",
            IsolationRefusal::BadAnswer { .. } => "bad-answer",
            IsolationRefusal::ProbeUnavailable { .. } => "probe-unavailable",
        }
    }
}
