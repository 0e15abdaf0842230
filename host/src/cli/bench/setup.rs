//! What `memplug bench` runs: load what `memplug check` loads (the
//! candidates of the paths or the search path, an allocator taken by symbol
//! name, instances asked for with `--options`), conformance-check every
//! handler (each candidate is probed in a worker process first, so a plugin
//! that crashes or hangs is refused, not run here), and make the variants — the built-in `default_allocator` first,
//! as the baseline, then each handler that passed: once if it is
//! thread-safe, twice (locked per call, and with a guard per batch) if not.

use super::runner::Variant;
use super::workloads::Locking;
use crate::cli::args::IsolationArgs;
use crate::cli::jobs;
use crate::cli::{candidates, describe_search};
use memplug::check::{Verdict, conformance};
use memplug::probe::{Request, Task};
use memplug::{Candidate, Handler, Instance, Outcome, Policy, Registry, SymbolSpec};
use serde::Serialize;
use std::path::PathBuf;

/// A handler or candidate, and whether it is benchmarked.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Entry {
    /// The handler's name (with an instance's options), or the candidate.
    pub(crate) name: String,
    /// Where it came from.
    pub(crate) source: String,
    /// `benchmarked`, `failed-conformance` or `refused`.
    pub(crate) status: &'static str,
    /// The refusal's reason code.
    pub(crate) reason: Option<String>,
    /// Why it is not benchmarked.
    pub(crate) message: Option<String>,
    pub(crate) thread_safe: Option<bool>,
}

/// The variants to run and what happened to every candidate.
pub(crate) struct Setup {
    pub(crate) variants: Vec<Variant>,
    pub(crate) entries: Vec<Entry>,
    /// Instances made for `--options`, alive while they are benchmarked.
    pub(crate) _instances: Vec<Instance>,
}

/// What to load.
pub(crate) struct Load<'a> {
    pub(crate) paths: &'a [PathBuf],
    pub(crate) symbols: &'a [String],
    pub(crate) spec: Option<SymbolSpec>,
    pub(crate) options: &'a [(String, String)],
    pub(crate) policy: Policy,
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

/// Load, check and make the variants.
pub(crate) fn prepare(load: Load<'_>, mut progress: impl FnMut(&str)) -> Result<Setup, Unable> {
    let found =
        if load.spec.is_some() && load.paths.is_empty() { Vec::new() } else { candidates(load.paths, load.symbols) };
    if found.is_empty() && load.spec.is_none() {
        return Err(Unable::NothingFound(format!(
            "no plugin candidates found (searched: {}). Pass files or directories, or set {}.",
            describe_search(load.paths),
            memplug::discover::PATH_ENV
        )));
    }
    // Benchmarking runs plugin code here: check every candidate in a worker
    // process first, as `memplug check` does (with the verdict cache), and
    // load here only those that passed, so that one that crashes, hangs or
    // exits is named instead of taking `memplug bench` down.
    let mut setup = Setup { variants: Vec::new(), entries: Vec::new(), _instances: Vec::new() };
    let (found, spec) = screen(found, load.spec, load.options, &load.policy, &mut setup.entries);
    let registry = Registry::with_policy(load.policy);
    let mut outcomes = Vec::new();
    if let Some(spec) = &spec {
        let candidate = Candidate::new(&spec.library).with_symbol(spec.symbols.malloc.clone());
        outcomes.push(Outcome { candidate, result: registry.load_symbols(spec) });
    }
    outcomes.extend(registry.load_all(&found));

    let mut handlers: Vec<(Handler, String)> = Vec::new();
    for outcome in &outcomes {
        match &outcome.result {
            Err(e) => setup.entries.push(Entry {
                name: outcome.candidate.to_string(),
                source: outcome.candidate.to_string(),
                status: "refused",
                reason: Some(e.code().to_string()),
                message: Some(e.to_string()),
                thread_safe: None,
            }),
            Ok(h) => {
                handlers.push((*h, h.name().to_string()));
                for (_, opts) in load.options.iter().filter(|(name, _)| name == h.name()) {
                    match h.instantiate(opts) {
                        Ok(instance) => {
                            handlers.push((instance.handler(), format!("{}[{opts}]", h.name())));
                            setup._instances.push(instance);
                        }
                        Err(e) => setup.entries.push(Entry {
                            name: format!("{}[{opts}]", h.name()),
                            source: h.info().source.to_string(),
                            status: "refused",
                            reason: Some(e.code().to_string()),
                            message: Some(e.to_string()),
                            thread_safe: None,
                        }),
                    }
                }
            }
        }
    }
    for (name, _) in load.options {
        if !handlers.iter().any(|(h, _)| h.name() == name) {
            return Err(Unable::Usage(format!("--options for `{name}`, but no handler of that name was loaded")));
        }
    }
    for wanted in load.only {
        if wanted != current_builtin_name() && !handlers.iter().any(|(h, _)| h.name() == wanted) {
            let loaded: Vec<&str> = handlers.iter().map(|(h, _)| h.name()).collect();
            let loaded = loaded.join(", ");
            return Err(Unable::Usage(format!(
                "--handler {wanted}: no handler of that name was loaded (loaded: {loaded})"
            )));
        }
    }
    handlers.retain(|(h, _)| load.only.is_empty() || load.only.iter().any(|n| n == h.name()));

    let builtin = memplug::current::builtin();
    setup.variants.push(Variant { handler: builtin, label: builtin.name().to_string(), locking: Locking::None });
    for (h, label) in handlers {
        progress(&label);
        let failed: Vec<String> = conformance(h)
            .into_iter()
            .filter(|c| c.verdict == Verdict::Failed)
            .map(|c| format!("{} ({})", c.name, c.detail))
            .collect();
        let entry = |status, message| Entry {
            name: label.clone(),
            source: h.info().source.to_string(),
            status,
            reason: (!failed.is_empty()).then(|| "conformance-failed".to_string()),
            message,
            thread_safe: Some(h.is_thread_safe()),
        };
        if !failed.is_empty() {
            setup.entries.push(entry("failed-conformance", Some(format!("failed: {}", failed.join("; ")))));
            continue;
        }
        setup.entries.push(entry("benchmarked", None));
        if h.is_thread_safe() {
            setup.variants.push(Variant { handler: h, label, locking: Locking::None });
        } else {
            setup.variants.push(Variant { handler: h, label: label.clone(), locking: Locking::PerCall });
            setup.variants.push(Variant { handler: h, label, locking: Locking::Guard });
        }
    }
    Ok(setup)
}

fn current_builtin_name() -> &'static str {
    memplug::current::builtin().name()
}

/// Check `found` (and `spec`) in worker processes; keep those that passed,
/// and add an entry for each that did not (`failed-conformance` or
/// `refused`, named as its report names it).
fn screen(
    found: Vec<Candidate>,
    spec: Option<SymbolSpec>,
    options: &[(String, String)],
    policy: &Policy,
    entries: &mut Vec<Entry>,
) -> (Vec<Candidate>, Option<SymbolSpec>) {
    let request = |candidate, spec| Request {
        task: Task::Check,
        candidate,
        spec,
        options: options.to_vec(),
        policy: policy.clone(),
    };
    let mut requests: Vec<Request> = spec.iter().map(|s| request(None, Some(s.clone()))).collect();
    requests.extend(found.iter().map(|c| request(Some(c.clone()), None)));
    let isolation = IsolationArgs { in_process: false, timeout: 5.0, rescan: false };
    let per_job = jobs::run(requests, &isolation);
    let mut passed = per_job.iter().map(|reports| reports.first().is_some_and(|r| !r.fails()));
    let spec = spec.filter(|_| passed.next().unwrap_or(false));
    let mut kept = Vec::new();
    for (c, ok) in found.into_iter().zip(passed) {
        if ok {
            kept.push(c);
        }
    }
    for r in per_job.iter().filter_map(|reports| reports.first()).filter(|r| r.fails()) {
        let conformance = r.reason.as_deref() == Some("conformance-failed");
        entries.push(Entry {
            name: r.name.clone().unwrap_or_else(|| r.source()),
            source: r.source(),
            status: if conformance { "failed-conformance" } else { "refused" },
            reason: r.reason.clone(),
            message: Some(r.message.clone()),
            thread_safe: r.thread_safe,
        });
    }
    (kept, spec)
}
