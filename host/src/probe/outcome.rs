//! How a worker ended ([`WorkerOutcome`]), and what that means as reports
//! and as a registry's verdict.
//!
//! Imports `wire`, `report`, `check`, `discover`, `stage`, `error` and `raw`
//! (the names of signals).

use super::wire::Answer;
use crate::check;
use crate::discover::Candidate;
use crate::error::{IsolationRefusal, Refusal};
use crate::report::{Checks, Report, Status};
use crate::stage::describe;
use std::time::Duration;

pub use crate::raw::process::signal_name;

/// The reason code of a [`WorkerOutcome::BadAnswer`].
pub const BAD_ANSWER: &str = "bad-answer";

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
        /// The timeout.
        after: Duration,
    },
    /// It ended without an answer.
    NoReport {
        /// Its exit code.
        code: Option<i32>,
        /// The last stage it announced.
        stage: Option<String>,
    },
    /// Its answer is not an acceptable answer to the request (see
    /// [`crate::probe`]): the plugin writes to the protocol channel.
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
            other => other.failure().expect("every other outcome is a failure"),
        };
        vec![Report::worker_failed(candidate, status, message, stage, signal, checks())]
    }

    /// For a worker that crashed, timed out or ended without a report: the
    /// status, a message, the stage and the signal's name.
    pub fn failure(&self) -> Option<(Status, String, Option<String>, Option<String>)> {
        match self {
            WorkerOutcome::Crashed { signal, stage } => {
                let name = signal_name(*signal);
                let msg = format!(
                    "the plugin crashed the process checking it ({name}) {}; fix or remove the plugin",
                    describe(stage.as_deref())
                );
                Some((Status::Crashed, msg, stage.clone(), Some(name)))
            }
            WorkerOutcome::TimedOut { stage, after } => {
                let msg = format!(
                    "the plugin did not finish within {} s ({}); it was killed. A plugin that hangs cannot be used; \
                     if it is only slow, raise --timeout",
                    after.as_secs_f64(),
                    describe(stage.as_deref()).replacen("in ", "stuck in ", 1)
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
            WorkerOutcome::Answered(Answer::Reports(reports)) => reports.first().map_or(Ok(()), failed_pass),
            WorkerOutcome::Answered(Answer::Inspection(_) | Answer::Bench(_)) => Ok(()),
            WorkerOutcome::Crashed { signal, stage } => Err(Refusal::from(IsolationRefusal::Crashed {
                signal: signal_name(*signal),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::TimedOut { stage, after } => Err(Refusal::from(IsolationRefusal::TimedOut {
                seconds: format!("{} s", after.as_secs_f64()),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::NoReport { code, stage } => Err(Refusal::from(IsolationRefusal::NoReport {
                status: code.map_or("none".to_string(), |c| c.to_string()),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::Failed(problem) => {
                Err(Refusal::from(IsolationRefusal::ProbeUnavailable { problem: problem.clone() }))
            }
            WorkerOutcome::BadAnswer { problem, .. } => {
                Err(Refusal::from(IsolationRefusal::BadAnswer { problem: problem.clone() }))
            }
        }
    }
}

/// What a registry makes of a worker's (or the verdict cache's) report
/// about its candidate: refused if its conformance pass failed —
/// `fork-unsafe` when the `fork` check did, else `conformance-failed` — and
/// `Ok` otherwise (a refusal at loading is found again when it is loaded
/// here).
pub fn failed_pass(report: &Report) -> Result<(), Refusal> {
    let summary = report.message.clone();
    match report.reason.as_deref() {
        Some(check::CONFORMANCE_FAILED) => Err(Refusal::from(IsolationRefusal::ConformanceFailed { summary })),
        Some(check::FORK_UNSAFE) => Err(Refusal::from(IsolationRefusal::ForkUnsafe { summary })),
        _ => Ok(()),
    }
}

/// The message of a `bad-answer` report: what happened and what to do.
pub fn bad_answer_message(problem: &str) -> String {
    format!(
        "the process checking the plugin answered something that is not a report about it ({problem}): the plugin \
         writes to memplug's protocol channel; remove it or report it to its author"
    )
}
