//! The worker side of [`crate::isolate::probe`]: load and check one candidate in this
//! (expendable) process and answer the parent.
//!
//! A program serves as a worker by calling [`serve`] when it is started with
//! [`crate::isolate::probe::WORKER_ARG`] (the `memplug` executable
//! does). [`serve`] reads the [`Request`] from standard input, moves standard
//! output out of the plugin's reach (whatever the plugin prints goes to
//! standard error), enters the [sandbox] before the plugin
//! is opened, announces every stage before it runs, and writes its
//! [`Answer`].

use crate::admit::discover::Candidate;
use crate::admit::load;
use crate::admit::stage;
use crate::heap::handler::Handler;
use crate::isolate::check::conformance_with_fork;
use crate::isolate::probe::wire::{self, Answer, Request, Task};
use crate::isolate::raw::process::take_stdout;
use crate::isolate::report::{Checks, InspectionReport, Report};
use crate::isolate::sandbox::{self, Entered};
use crate::registry::Registry;
use std::io::Read;
use std::process::ExitCode;

/// A front end's bench job ([`Task::Bench`]): given the handler to measure
/// (`None`: the built-in handler alone) and [`Request::bench`], its results
/// as bytes, or why it could not run.
pub type BenchJob = fn(Option<Handler>, &[u8]) -> Result<Vec<u8>, String>;

/// Serve one request from standard input as a worker; the exit status is 0
/// when the answer was sent, 2 when the request could not be read.
pub fn serve() -> ExitCode {
    serve_with(None)
}

/// [`serve`], running [`Task::Bench`] requests with `bench` (a worker
/// without one refuses them).
pub fn serve_with(bench: Option<BenchJob>) -> ExitCode {
    let channel = match take_stdout() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("memplug worker: cannot set up the protocol channel: {e}");
            return ExitCode::from(2);
        }
    };
    let mut bytes = Vec::new();
    let request: Request =
        match std::io::stdin().read_to_end(&mut bytes).map_err(|e| e.to_string()).and_then(|_| wire::decode(&bytes)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("memplug worker: cannot read the request: {e}");
                return ExitCode::from(2);
            }
        };
    // Before the plugin is opened (its constructors run then), while this
    // process has one thread.
    let refused = match sandbox::Mode::from_env().and_then(|mode| sandbox::enter(mode, &channel)) {
        Ok(Entered::Sandboxed | Entered::Off) => None,
        Ok(Entered::Unprotected(e)) => {
            tracing::warn!(reason = e.code(), "{e}");
            eprintln!("memplug worker: warning: {e}");
            None
        }
        Err(e) if request.task == Task::Inspect => {
            // An inspection answers with what it read, and it read nothing.
            eprintln!("memplug worker: {e}");
            return ExitCode::from(3);
        }
        Err(e) => Some(refuse(&request, e.code(), e.to_string())),
    };
    stage::set_sink(Box::new(channel));
    let answer = refused.unwrap_or_else(|| answer_with(request, bench));
    stage::enter("report", &"the worker");
    match wire::frame_result(&answer).and_then(|framed| stage::send(&framed).map_err(|e| e.to_string())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memplug worker: cannot send the answer: {e}");
            ExitCode::from(2)
        }
    }
}

/// Refuse `request` without running it, with reason `code`.
fn refuse(request: &Request, code: &str, message: String) -> Answer {
    let candidate = request.subject();
    let checks = (request.task == Task::Check).then(Checks::none);
    Answer::Reports(vec![Report::refused(&candidate, code, message, None, None, checks)])
}

/// Do what `request` asks, in this process (a [`Task::Bench`] is refused:
/// see [`answer_with`]).
pub fn answer(request: Request) -> Answer {
    answer_with(request, None)
}

/// Do what `request` asks, in this process, running a [`Task::Bench`]
/// with `bench`.
pub fn answer_with(request: Request, bench: Option<BenchJob>) -> Answer {
    if request.task == Task::Bench && request.candidate.is_none() && request.spec.is_none() {
        return run_bench(bench, None, &request);
    }
    let mut policy = request.policy.clone();
    policy.probe = None; // a worker never starts workers
    let trust = policy.trust.clone();
    let registry = Registry::with_policy(policy);
    if request.candidate.is_none() && request.spec.is_none() {
        let nothing = Candidate::new("");
        let r = Report::refused(&nothing, "bad-request", "the request names no candidate".into(), None, None, None);
        return Answer::Reports(vec![r]);
    }
    let candidate = request.subject();
    if request.task == Task::Inspect {
        return Answer::Inspection(Box::new(InspectionReport::of(&load::inspect(&candidate, &trust))));
    }
    let loaded = match &request.spec {
        Some(spec) => registry.load_symbols(spec),
        None => registry.load(&candidate),
    };
    let check = request.task == Task::Check;
    let Ok(h) = loaded else {
        return Answer::Reports(vec![Report::of_result(&candidate, &loaded, check.then(Vec::new))]);
    };
    if request.task == Task::Bench {
        let Some((name, opts)) = request.options.iter().find(|(name, _)| name == h.name()) else {
            return run_bench(bench, Some(h), &request);
        };
        stage::enter(stage::CREATE, &format!("{name}:{opts}"));
        return match h.instantiate(opts) {
            Ok(instance) => run_bench(bench, Some(instance.handler()), &request),
            Err(e) => Answer::Reports(vec![Report::refused(
                &candidate,
                e.code(),
                e.to_string(),
                Some(name.clone()),
                Some(opts.clone()),
                None,
            )]),
        };
    }
    let mut reports = vec![Report::loaded(&candidate, h, check.then(|| conformance_with_fork(h)))];
    if check {
        for (name, opts) in request.options.iter().filter(|(name, _)| name == h.name()) {
            stage::enter(stage::CREATE, &format!("{name}:{opts}"));
            reports.push(match h.instantiate(opts) {
                Ok(instance) => {
                    Report::loaded(&candidate, instance.handler(), Some(conformance_with_fork(instance.handler())))
                }
                Err(e) => Report::refused(
                    &candidate,
                    e.code(),
                    e.to_string(),
                    Some(name.clone()),
                    Some(opts.clone()),
                    Some(Checks::none()),
                ),
            });
        }
    }
    Answer::Reports(reports)
}

/// Run the bench job on `handler`, or refuse: no job, or the job failed.
fn run_bench(bench: Option<BenchJob>, handler: Option<Handler>, request: &Request) -> Answer {
    let subject = request.subject();
    let refuse =
        |message: String| Answer::Reports(vec![Report::refused(&subject, "bad-request", message, None, None, None)]);
    let Some(job) = bench else { return refuse("this worker does not run bench jobs".into()) };
    match job(handler, request.bench.as_deref().unwrap_or_default()) {
        Ok(bytes) => Answer::Bench(bytes),
        Err(e) => refuse(format!("the bench job could not run: {e}")),
    }
}
