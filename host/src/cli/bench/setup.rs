//! What `memplug bench` runs: what `memplug check` loads (the candidates
//! of the paths or the search path, an allocator taken by symbol name,
//! instances asked for with `--options`), each checked in a worker process
//! as `check` does (with the verdict cache). A handler that passed becomes
//! a [`Subject`], measured later in a worker of its own (`job.rs`); every
//! other candidate gets an [`Entry`] saying why it is not benchmarked. No
//! plugin code runs in this process.

use super::job::Subject;
use crate::cli::args::IsolationArgs;
use crate::cli::jobs;
use crate::cli::{candidates, describe_search};
use memplug::check;
use memplug::error::Refusal;
use memplug::probe::{Request, Task};
use memplug::{Policy, Report, SymbolSpec};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// A handler or candidate, and whether it is benchmarked.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Entry {
    /// The handler's name (with an instance's options), or the candidate.
    pub(crate) name: String,
    /// Where it came from.
    pub(crate) source: String,
    /// `benchmarked`, `failed-conformance`, `refused`, or how its bench
    /// worker failed: `crashed`, `timed-out`, `no-report`.
    pub(crate) status: &'static str,
    /// The refusal's reason code (the status, for a failed bench worker).
    pub(crate) reason: Option<String>,
    /// Why it is not benchmarked.
    pub(crate) message: Option<String>,
    pub(crate) thread_safe: Option<bool>,
    /// For a failed bench worker: the stage it was in, e.g. `bench:mixed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stage: Option<String>,
    /// For a crashed bench worker: the signal, e.g. `SIGSEGV`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) signal: Option<String>,
}

/// A handler that passed the check, to measure.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) subject: Subject,
    /// The handler's name.
    pub(crate) name: String,
    /// As shown: the name, with an instance's options.
    pub(crate) label: String,
    pub(crate) source: String,
}

impl Target {
    /// Its entry: benchmarked, or not with `why`.
    pub(crate) fn entry(&self, why: Option<super::job::Failure>) -> Entry {
        let mut e = Entry {
            name: self.label.clone(),
            source: self.source.clone(),
            status: "benchmarked",
            reason: None,
            message: None,
            thread_safe: Some(self.subject.thread_safe),
            stage: None,
            signal: None,
        };
        if let Some(f) = why {
            (e.status, e.reason, e.message, e.stage, e.signal) =
                (f.status, Some(f.reason), Some(f.message), f.stage, f.signal);
        }
        e
    }
}

/// The handlers to measure and what happened to every candidate.
pub(crate) struct Setup {
    pub(crate) targets: Vec<Target>,
    pub(crate) entries: Vec<Entry>,
}

/// What to load.
pub(crate) struct Load<'a> {
    pub(crate) paths: &'a [PathBuf],
    pub(crate) symbols: &'a [String],
    pub(crate) spec: Option<SymbolSpec>,
    pub(crate) options: &'a [(String, String)],
    pub(crate) policy: &'a Policy,
    /// Only these handlers (by name), when not empty.
    pub(crate) only: &'a [String],
}

/// Why nothing can be benchmarked.
pub(crate) enum Unable {
    /// No candidate was found.
    NothingFound(String),
    /// The arguments ask for something that is not there.
    Usage(String),
}

/// Find and check the candidates.
pub(crate) fn prepare(load: Load<'_>) -> Result<Setup, Unable> {
    let found =
        if load.spec.is_some() && load.paths.is_empty() { Vec::new() } else { candidates(load.paths, load.symbols) };
    if found.is_empty() && load.spec.is_none() {
        return Err(Unable::NothingFound(format!(
            "no plugin candidates found (searched: {}). Pass files or directories, or set {}.",
            describe_search(load.paths),
            memplug::discover::PATH_ENV
        )));
    }
    let request = |candidate, spec| Request {
        task: Task::Check,
        candidate,
        spec,
        options: load.options.to_vec(),
        policy: load.policy.clone(),
        bench: None,
    };
    let mut requests: Vec<Request> = load.spec.iter().map(|s| request(None, Some(s.clone()))).collect();
    requests.extend(found.iter().map(|c| request(Some(c.clone()), None)));
    let isolation = IsolationArgs { in_process: false, timeout: Duration::from_secs(5), rescan: false };
    let per_job = jobs::run(requests.clone(), &isolation);

    let mut setup = Setup { targets: Vec::new(), entries: Vec::new() };
    let mut loaded: Vec<(String, String)> = Vec::new(); // (name, source)
    for (request, reports) in requests.iter().zip(per_job) {
        let Some(first) = reports.first() else { continue };
        if first.fails() {
            setup.entries.push(not_passed(first));
            continue;
        }
        let name = first.name.clone().unwrap_or_default();
        let source = first.loaded.as_ref().map_or_else(|| first.source(), |l| l.source.clone());
        if let Some((_, existing)) = loaded.iter().find(|(n, _)| *n == name) {
            let refusal = Refusal::DuplicateName { name: name.clone(), existing: existing.clone() };
            setup.entries.push(Entry {
                name: name.clone(),
                source,
                status: "refused",
                reason: Some(refusal.code().into()),
                message: Some(refusal.to_string()),
                thread_safe: first.thread_safe,
                stage: None,
                signal: None,
            });
            continue;
        }
        loaded.push((name.clone(), source.clone()));
        for r in &reports {
            if r.fails() {
                setup.entries.push(not_passed(r));
                continue;
            }
            let instance = r.options.clone().map(|o| (name.clone(), o));
            let label = instance.as_ref().map_or_else(|| name.clone(), |(n, o)| format!("{n}[{o}]"));
            let subject = Subject {
                candidate: request.candidate.clone(),
                spec: request.spec.clone(),
                instance,
                thread_safe: r.thread_safe.unwrap_or(false),
            };
            setup.targets.push(Target { subject, name: name.clone(), label, source: source.clone() });
        }
    }
    for (name, _) in load.options {
        if !loaded.iter().any(|(n, _)| n == name) {
            return Err(Unable::Usage(format!("--options for `{name}`, but no handler of that name was loaded")));
        }
    }
    let builtin = memplug::current::builtin().name();
    for wanted in load.only {
        if wanted != builtin && !loaded.iter().any(|(n, _)| n == wanted) {
            let names: Vec<&str> = loaded.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Unable::Usage(format!(
                "--handler {wanted}: no handler of that name was loaded (loaded: {})",
                names.join(", ")
            )));
        }
    }
    setup.targets.retain(|t| load.only.is_empty() || load.only.contains(&t.name));
    Ok(setup)
}

/// The entry of a candidate (or instance) that did not pass the check.
fn not_passed(r: &Report) -> Entry {
    let conformance = matches!(r.reason.as_deref(), Some(check::CONFORMANCE_FAILED | check::FORK_UNSAFE));
    let name = match (&r.name, &r.options) {
        (Some(n), Some(o)) => format!("{n}[{o}]"),
        (Some(n), None) => n.clone(),
        _ => r.source(),
    };
    Entry {
        name,
        source: r.source(),
        status: if conformance { "failed-conformance" } else { "refused" },
        reason: r.reason.clone(),
        message: Some(r.message.clone()),
        thread_safe: r.thread_safe,
        stage: r.stage.clone(),
        signal: r.signal.clone(),
    }
}
