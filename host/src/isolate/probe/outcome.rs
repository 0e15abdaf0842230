//! How a worker ended ([`WorkerOutcome`]), and what that means as reports
//! and as a registry's verdict.

use super::WORKER_ENV;
use super::wire::Answer;
use crate::admit::discover::Candidate;
use crate::admit::error::{IsolationRefusal, Refusal};
use crate::admit::stage::describe;
use crate::isolate::check;
use crate::isolate::report::{Checks, Report, Status};
use crate::isolate::syscalls::{self, TRAPPED_STATUS};
use std::time::Duration;

pub use crate::isolate::raw::process::signal_name;

/// The reason code of a [`WorkerOutcome::BadAnswer`].
pub const BAD_ANSWER: &str = "bad-answer";
/// The reason code of a [`WorkerOutcome::Forbidden`].
pub const FORBIDDEN_CALL: &str = "forbidden-call";
/// The call a [`WorkerOutcome::Forbidden`] without a record names.
const UNKNOWN: &str = "unknown";

/// How many times its timeout a worker may run by the wall clock, however
/// little of a processor it had (see [`Worker::run`](super::Worker::run)).
pub const WALL_CLOCK_FACTOR: u32 = 10;

/// How a worker ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerOutcome {
    /// It answered and exited normally.
    Answered(Answer),
    /// It was killed by `signal` (after its answer, if `stage` is `exit`).
    Crashed {
        /// The signal's number.
        signal: i32,
        /// The last stage it announced (`None`: before any).
        stage: Option<String>,
    },
    /// It did not finish within the timeout and was killed, with everything
    /// it started.
    TimedOut {
        /// The last stage it announced.
        stage: Option<String>,
        /// The timeout, of the worker's own time (time it waited for a
        /// processor not counted: see [`Worker::run`](super::Worker::run)).
        after: Duration,
        /// Whether it was killed at the wall-clock bound before its own
        /// time reached the timeout: it had too little of a processor to be
        /// judged (the machine is too busy, or the plugin starves itself
        /// with threads or processes).
        starved: bool,
    },
    /// It ended without an answer.
    NoReport {
        /// Its exit code.
        code: Option<i32>,
        /// The last stage it announced.
        stage: Option<String>,
    },
    /// The plugin (or a child of the worker) made a system call the
    /// sandbox forbids: the filter trapped it and the worker's `SIGSYS`
    /// handler ended the worker.
    Forbidden {
        /// The call's name (`None`: the worker ended with the handler's
        /// exit status, but its record did not arrive).
        call: Option<String>,
        /// The stage it was in (`exit`: after the answer, in a destructor
        /// or `atexit` handler).
        stage: Option<String>,
    },
    /// Its answer is not an acceptable answer to the request (see
    /// [`crate::isolate::probe`]): the plugin writes to the protocol channel.
    BadAnswer {
        /// What was wrong with it.
        problem: String,
        /// The last stage it announced.
        stage: Option<String>,
    },
    /// It could not be started.
    Failed(String),
}

impl WorkerOutcome {
    /// The outcome as reports about `candidate`: the worker's own, or one
    /// saying how it failed (with an empty conformance pass when
    /// `with_checks`, as `check` reports refusals).
    pub fn into_reports(self, candidate: &Candidate, with_checks: bool) -> Vec<Report> {
        let checks = || with_checks.then(Checks::none);
        let starved = matches!(self, WorkerOutcome::TimedOut { starved: true, .. });
        let (status, message, stage, signal) = match self {
            WorkerOutcome::Answered(Answer::Reports(reports)) => return reports,
            WorkerOutcome::Answered(Answer::Inspection(_) | Answer::Bench(_)) => {
                let msg = "the worker answered something else than reports".to_string();
                return vec![Report::refused(candidate, "probe-failed", msg, None, None, checks())];
            }
            WorkerOutcome::Failed(msg) => {
                return vec![Report::refused(candidate, "probe-unavailable", msg, None, None, checks())];
            }
            WorkerOutcome::BadAnswer { problem, stage } => {
                let mut r = Report::refused(candidate, BAD_ANSWER, bad_answer_message(&problem), None, None, checks());
                r.stage = stage;
                return vec![r];
            }
            WorkerOutcome::Forbidden { call, stage } => {
                let message = forbidden_message(call.as_deref(), stage.as_deref());
                let mut r = Report::refused(candidate, FORBIDDEN_CALL, message, None, None, checks());
                r.stage = stage;
                r.call = Some(call.unwrap_or_else(|| UNKNOWN.into()));
                return vec![r];
            }
            other => other.failure().expect("every other outcome is a failure"),
        };
        let mut r = Report::worker_failed(candidate, status, message, stage, signal, checks());
        r.starved = starved;
        vec![r]
    }

    /// For a worker that crashed, timed out or ended without a report: the
    /// status, a message, the stage and the signal's name.
    pub fn failure(&self) -> Option<(Status, String, Option<String>, Option<String>)> {
        match self {
            WorkerOutcome::Crashed { signal, stage } => {
                let name = signal_name(*signal);
                // The kernel kills with SIGSYS a forbidden call made with
                // SIGSYS blocked or ignored, or one through the i386 ABI.
                let hint = if *signal == libc::SIGSYS {
                    ": a system call the sandbox forbids, made with SIGSYS blocked, or through the i386 interface"
                } else {
                    ""
                };
                let msg = format!(
                    "the plugin crashed the process checking it ({name}{hint}) {}; fix or remove the plugin",
                    describe(stage.as_deref())
                );
                Some((Status::Crashed, msg, stage.clone(), Some(name)))
            }
            WorkerOutcome::TimedOut { stage, after, starved } => {
                let msg = format!(
                    "the plugin did not finish within {} ({}); it was killed. A plugin that hangs cannot be used; \
                     if it is only slow, raise --timeout. {}",
                    timed_out_span(*after, *starved),
                    describe(stage.as_deref()).replacen("in ", "stuck in ", 1),
                    timed_out_note(*starved)
                );
                Some((Status::TimedOut, msg, stage.clone(), None))
            }
            WorkerOutcome::NoReport { code, stage } => {
                let code = code.map_or("none".to_string(), |c| c.to_string());
                let msg = format!(
                    "the process checking the plugin ended {} without a report (exit status {code}): the plugin ends \
                     the process (it calls `exit` or `_exit`)",
                    describe(stage.as_deref())
                );
                Some((Status::NoReport, msg, stage.clone(), None))
            }
            _ => None,
        }
    }

    /// What a registry probing a candidate makes of the outcome: `Ok` to go
    /// on and load it here (a candidate the worker refused at loading is
    /// refused again here, precisely), or why not.
    pub fn verdict(&self) -> Result<(), Refusal> {
        match self {
            WorkerOutcome::Answered(Answer::Reports(reports)) => verdict_of_reports(reports),
            WorkerOutcome::Answered(Answer::Inspection(_) | Answer::Bench(_)) => Ok(()),
            WorkerOutcome::Crashed { signal, stage } => Err(Refusal::from(IsolationRefusal::Crashed {
                signal: signal_name(*signal),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::TimedOut { stage, after, starved } => Err(Refusal::from(IsolationRefusal::TimedOut {
                seconds: timed_out_span(*after, *starved),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::NoReport { code, stage } => Err(Refusal::from(IsolationRefusal::NoReport {
                status: code.map_or("none".to_string(), |c| c.to_string()),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::Failed(problem) => Err(Refusal::from(IsolationRefusal::ProbeUnavailable {
                problem: problem.clone(),
                fix: format!(
                    "Check that the worker is a `memplug` command of this version that can run here ({WORKER_ENV} \
                     names it when set), or turn probing off in the policy"
                ),
            })),
            WorkerOutcome::BadAnswer { problem, .. } => {
                Err(Refusal::from(IsolationRefusal::BadAnswer { problem: problem.clone() }))
            }
            WorkerOutcome::Forbidden { call, stage } => Err(forbidden_refusal(call.as_deref(), stage.as_deref())),
        }
    }
}

/// How long a timed-out worker ran, in words: `timeout` of its own time,
/// or, when it was `starved`, the wall-clock bound it reached first.
fn timed_out_span(timeout: Duration, starved: bool) -> String {
    let secs = timeout.as_secs_f64();
    if starved {
        let wall = timeout.saturating_mul(WALL_CLOCK_FACTOR).as_secs_f64();
        format!("{wall} s by the clock, in which it had less than the {secs} s of its own time it may take")
    } else {
        format!("{secs} s of its own time")
    }
}

/// What a timed-out report adds about load, after its advice.
fn timed_out_note(starved: bool) -> &'static str {
    if starved {
        "It waited for a processor most of the time: the machine is very busy, or the plugin keeps more threads or \
         processes running than there are processors; a rerun on a quieter machine tells which"
    } else {
        "The time it waited for a processor is not counted; if the machine was busy, a rerun on a quieter one tells \
         load from a plugin that hangs"
    }
}

/// What a registry probing a candidate makes of the reports about it (from
/// a worker, or remembered by the verdict cache): `Ok` to go on and load it
/// here, unless the reports say it failed the conformance pass
/// (`fork-unsafe` when the `fork` check did, else `conformance-failed`) or
/// made a forbidden call.
pub fn verdict_of_reports(reports: &[Report]) -> Result<(), Refusal> {
    match reports.first() {
        Some(r) if r.reason.as_deref() == Some(check::CONFORMANCE_FAILED) => {
            Err(Refusal::from(IsolationRefusal::ConformanceFailed { summary: r.message.clone() }))
        }
        Some(r) if r.reason.as_deref() == Some(check::FORK_UNSAFE) => {
            Err(Refusal::from(IsolationRefusal::ForkUnsafe { summary: r.message.clone() }))
        }
        Some(r) if r.reason.as_deref() == Some(FORBIDDEN_CALL) => {
            Err(forbidden_refusal(r.call.as_deref().filter(|c| *c != UNKNOWN), r.stage.as_deref()))
        }
        _ => Ok(()),
    }
}

/// The call and what it does, for a forbidden call's messages.
fn call_and_why(call: Option<&str>) -> (String, String) {
    match call {
        Some(name) => {
            let why = syscalls::why(name).unwrap_or("a call the sandbox does not list (a forged record)");
            (name.to_string(), why.to_string())
        }
        None => (
            UNKNOWN.to_string(),
            format!(
                "the worker ended with exit status {TRAPPED_STATUS}, as memplug's SIGSYS handler ends it, but the \
                 record naming the call did not arrive"
            ),
        ),
    }
}

/// The refusal of a forbidden call (`call`: its name, if known).
fn forbidden_refusal(call: Option<&str>, stage: Option<&str>) -> Refusal {
    let (call, why) = call_and_why(call);
    Refusal::from(IsolationRefusal::ForbiddenCall { call, why, stage: describe(stage) })
}

/// The message of a `forbidden-call` report: what happened and what to do.
pub fn forbidden_message(call: Option<&str>, stage: Option<&str>) -> String {
    let (call, why) = call_and_why(call);
    format!(
        "the plugin made a system call that memplug's sandbox forbids ({call}: {why}) {}; the sandbox stopped it, but \
         loaded into an application the plugin would make that call there. Remove the call from the plugin, or do \
         not use the plugin",
        describe(stage)
    )
}

/// The message of a `bad-answer` report: what happened and what to do.
pub fn bad_answer_message(problem: &str) -> String {
    format!(
        "the process checking the plugin answered something that is not a report about it ({problem}): the plugin \
         writes to memplug's protocol channel; remove it or report it to its author"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_out_says_which_clock_ran_out_and_that_a_rerun_tells_load_from_a_hang() {
        let stage = Some("check:fork".to_string());
        let own = WorkerOutcome::TimedOut { stage: stage.clone(), after: Duration::from_secs(5), starved: false };
        let (status, message, ..) = own.failure().unwrap();
        assert_eq!(status, Status::TimedOut);
        assert!(message.contains("within 5 s of its own time (stuck in conformance check `fork`)"), "{message}");
        assert!(message.contains("waited for a processor is not counted"), "{message}");
        assert!(message.contains("a rerun on a quieter one tells load from a plugin that hangs"), "{message}");
        let starved = WorkerOutcome::TimedOut { stage, after: Duration::from_secs(5), starved: true };
        let (_, message, ..) = starved.failure().unwrap();
        assert!(message.contains("within 50 s by the clock, in which it had less than the 5 s"), "{message}");
        assert!(message.contains("a rerun on a quieter machine tells which"), "{message}");
        let refusal = starved.verdict().unwrap_err();
        assert_eq!(refusal.code(), "timed-out");
        assert!(refusal.to_string().contains("50 s by the clock"), "{refusal}");
        assert!(refusal.to_string().contains("a rerun on a quieter one"), "{refusal}");
    }
}
