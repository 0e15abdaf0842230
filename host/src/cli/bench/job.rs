//! Each handler is measured in a worker process of its own, so that a
//! plugin that passed the check and crashes, hangs or exits under the
//! workloads takes only its own figures with it.
//!
//! A bench job is a [`Task::Bench`] request to the `memplug` executable as
//! a worker ([`memplug::worker::serve_with`] with [`job`]): the worker loads
//! the candidate as `check` does (and makes the instance asked for), then
//! runs the [`Params`]' workloads with the built-in handler as the baseline
//! beside it, in the same rounds, and answers its [`Measured`] figures. The
//! baseline alone runs in a job of its own first, which calibrates every
//! workload; each handler's job then runs the same blocks and rounds.
//!
//! The parent ([`run`]) checks the answer's shape and numbers before using
//! them.

use super::runner::{self, Figures, Measured, Plan, Settings, Variant};
use super::workloads::Locking;
use memplug::probe::{Answer, Request, Task, Worker, WorkerOutcome};
use memplug::report::Status;
use memplug::{Candidate, Handler, Policy, SymbolSpec};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a bench job is asked to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Params {
    pub(crate) settings: Settings,
    pub(crate) plans: Vec<Plan>,
}

/// The variants of `handler`: per call if it is thread-safe, else locked
/// per call and with a guard per batch.
pub(crate) fn lockings(thread_safe: bool) -> &'static [Locking] {
    if thread_safe { &[Locking::None] } else { &[Locking::PerCall, Locking::Guard] }
}

/// The worker side: run `params` (CBOR) on the built-in handler and
/// `handler`; the figures, as CBOR.
pub(crate) fn job(handler: Option<Handler>, params: &[u8]) -> Result<Vec<u8>, String> {
    let params: Params = ciborium::from_reader(params).map_err(|e| format!("bad bench parameters: {e}"))?;
    let builtin = memplug::current::builtin();
    let mut variants = vec![Variant { handler: builtin, locking: Locking::None }];
    if let Some(h) = handler {
        for &locking in lockings(h.is_thread_safe()) {
            variants.push(Variant { handler: h, locking });
        }
    }
    let subject = handler.map_or_else(|| builtin.name().to_string(), |h| h.name().to_string());
    let mut measured = Vec::new();
    for plan in params.plans {
        memplug::stage::enter(&format!("{}{}", memplug::stage::BENCH_PREFIX, plan.workload.name()), &subject);
        measured.push(runner::measure(plan, &variants, &params.settings));
    }
    let mut out = Vec::new();
    ciborium::into_writer(&measured, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// What a job measures: the built-in handler alone, or a handler that
/// passed the check (a candidate or an allocator spec, and an instance's
/// options).
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub(crate) candidate: Option<Candidate>,
    pub(crate) spec: Option<SymbolSpec>,
    /// `(handler name, options)` of an instance.
    pub(crate) instance: Option<(String, String)>,
    pub(crate) thread_safe: bool,
}

/// Why a job gave no figures.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    /// `crashed`, `timed-out`, `no-report` or `refused`.
    pub(crate) status: &'static str,
    /// The reason code.
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) stage: Option<String>,
    pub(crate) signal: Option<String>,
}

impl Failure {
    fn refused(reason: &str, message: String) -> Failure {
        Failure { status: "refused", reason: reason.into(), message, stage: None, signal: None }
    }
}

/// The longest an error message from a worker is kept, in characters.
const MAX_ERROR: usize = 2000;

/// How long a job may take: generous (a plugin may be far slower than the
/// baseline the blocks were sized on), but a hang ends.
pub(crate) fn timeout(params: &Params, variants: usize) -> Duration {
    let s = &params.settings;
    let expected: f64 = params
        .plans
        .iter()
        .map(|p| {
            let rounds = p.fixed.map(|(_, r)| r).or(s.rounds).unwrap_or(1000);
            let per_round = if p.workload == super::workloads::Workload::Threads { 2.0 } else { 1.0 };
            rounds as f64 * variants as f64 * per_round * s.block_time(p.workload).as_secs_f64()
        })
        .sum();
    Duration::from_secs_f64((120.0 + 20.0 * expected).min(86_400.0))
}

/// Run `params` on `subject` (`None`: the baseline alone) in a worker; the
/// figures per plan, checked, or why there are none.
pub(crate) fn run(
    worker: &Worker,
    subject: Option<&Subject>,
    params: &Params,
    policy: &Policy,
) -> Result<Vec<Measured>, Failure> {
    let variants = 1 + subject.map_or(0, |s| lockings(s.thread_safe).len());
    let mut bytes = Vec::new();
    ciborium::into_writer(params, &mut bytes).map_err(|e| Failure::refused("bad-request", e.to_string()))?;
    let request = Request {
        task: Task::Bench,
        candidate: subject.and_then(|s| s.candidate.clone()),
        spec: subject.and_then(|s| s.spec.clone()),
        options: subject.and_then(|s| s.instance.clone()).into_iter().collect(),
        policy: policy.clone(),
        bench: Some(bytes),
    };
    let outcome = worker.run(&request, timeout(params, variants));
    let answer = match outcome {
        WorkerOutcome::Answered(Answer::Bench(answer)) => answer,
        WorkerOutcome::Answered(Answer::Reports(reports)) => {
            let r = reports.first();
            let reason = r.and_then(|r| r.reason.clone()).unwrap_or_else(|| "probe-failed".into());
            let message = r.map_or_else(|| "the worker gave no figures".into(), |r| r.message.clone());
            return Err(Failure::refused(&reason, message));
        }
        WorkerOutcome::Answered(Answer::Inspection(_)) => {
            return Err(Failure::refused("probe-failed", "the worker answered an inspection".into()));
        }
        WorkerOutcome::Failed(problem) => return Err(Failure::refused("probe-unavailable", problem)),
        WorkerOutcome::BadAnswer { problem, .. } => {
            return Err(Failure::refused(memplug::probe::BAD_ANSWER, memplug::probe::bad_answer_message(&problem)));
        }
        WorkerOutcome::Forbidden { call, stage } => {
            let message = memplug::probe::forbidden_message(call.as_deref(), stage.as_deref());
            return Err(Failure { stage, ..Failure::refused(memplug::probe::FORBIDDEN_CALL, message) });
        }
        other => {
            let Some((status, message, stage, signal)) = other.failure() else {
                return Err(Failure::refused("probe-failed", "the worker ended oddly".into()));
            };
            let status = match status {
                Status::Crashed => "crashed",
                Status::TimedOut => "timed-out",
                _ => "no-report",
            };
            let message = message.replace("the process checking it", "the process measuring it");
            return Err(Failure { status, reason: status.into(), message, stage, signal });
        }
    };
    let measured: Vec<Measured> = ciborium::from_reader(answer.as_slice())
        .map_err(|e| Failure::refused("probe-failed", format!("the worker's figures could not be read: {e}")))?;
    validate(measured, params, variants).map_err(|e| Failure::refused("probe-failed", e))
}

/// The figures if they answer `params` for `variants` variants: one per
/// plan, in order, with the blocks and rounds asked for, a row per variant,
/// numbers finite and not negative; error messages cut to a bounded length.
fn validate(mut measured: Vec<Measured>, params: &Params, variants: usize) -> Result<Vec<Measured>, String> {
    if measured.len() != params.plans.len() {
        return Err(format!("the worker answered {} workloads of {}", measured.len(), params.plans.len()));
    }
    for (m, plan) in measured.iter_mut().zip(&params.plans) {
        let w = plan.workload.name();
        if m.workload != plan.workload || m.rows.len() != variants {
            return Err(format!("the worker's figures for {w} are not the ones asked for"));
        }
        if let Some((ops, rounds)) = plan.fixed
            && m.rows[0].error.is_none()
            && (m.ops_per_block, m.rounds) != (ops, rounds)
        {
            return Err(format!("the worker ran other blocks of {w} than asked"));
        }
        for row in &mut m.rows {
            check_row(row).map_err(|e| format!("{w}: {e}"))?;
        }
    }
    Ok(measured)
}

fn check_row(row: &mut Figures) -> Result<(), String> {
    for x in [row.ns_per_op, row.ratio, row.scaling].into_iter().flatten() {
        if !x.is_finite() || x < 0.0 {
            return Err(format!("the figure {x} is not a time or a ratio"));
        }
    }
    if let Some(e) = &mut row.error
        && e.chars().count() > MAX_ERROR
    {
        *e = e.chars().take(MAX_ERROR).chain("…".chars()).collect();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::bench::workloads::Workload;

    fn params() -> Params {
        let settings = Settings { quick: true, rounds: None, threads: 2 };
        Params { settings, plans: vec![Plan { workload: Workload::Pair64, fixed: Some((256, 3)), share: 2 }] }
    }

    fn measured(rows: Vec<Figures>) -> Vec<Measured> {
        vec![Measured { workload: Workload::Pair64, rounds: 3, ops_per_block: 256, threads: 1, rows }]
    }

    #[test]
    fn answers_of_the_wrong_shape_or_with_odd_numbers_are_refused() {
        let good = Figures { ns_per_op: Some(10.0), ratio: Some(1.0), ..Figures::default() };
        assert!(validate(measured(vec![good.clone(), good.clone()]), &params(), 2).is_ok());
        assert!(validate(measured(vec![good.clone()]), &params(), 2).is_err(), "a row short");
        assert!(validate(Vec::new(), &params(), 2).is_err(), "a workload short");
        let nan = Figures { ratio: Some(f64::NAN), ..good.clone() };
        assert!(validate(measured(vec![good.clone(), nan]), &params(), 2).is_err());
        let long = Figures { error: Some("x".repeat(10 * MAX_ERROR)), ..good.clone() };
        let kept = validate(measured(vec![good, long]), &params(), 2).unwrap();
        assert!(kept[0].rows[1].error.as_ref().unwrap().chars().count() <= MAX_ERROR + 1);
    }

    #[test]
    fn the_job_runs_the_baseline_alone() {
        let mut bytes = Vec::new();
        ciborium::into_writer(&params(), &mut bytes).unwrap();
        let answer = job(None, &bytes).unwrap();
        let m: Vec<Measured> = ciborium::from_reader(answer.as_slice()).unwrap();
        let m = validate(m, &params(), 1).unwrap();
        assert_eq!(m[0].rows[0].ratio, Some(1.0));
    }
}
