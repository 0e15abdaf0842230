//! [`Report`]: what `memplug check` and `memplug list` say about one
//! candidate — the handler it gave (with its conformance results, when they
//! ran) or why it was refused. One serializable type: the command line
//! renders it as a table or as JSON, and other front ends (the Python
//! package) hand it on as it is.
//!
//! Imports `check`, `registry` (outcomes), `handler`, `info`, `discover`.

use crate::check::{self, CheckResult, Tally, Verdict};
use crate::discover::Candidate;
use crate::handler::{AlignedStrategy, Handler};
use crate::info::Source;
use crate::registry::Outcome;
use serde::Serialize;
use std::path::PathBuf;

/// Whether a candidate is usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Loaded, and every check that ran held.
    Ok,
    /// Refused, or loaded but failing a conformance check.
    Rejected,
}

/// One candidate's report. Serialised (see the README's `check --json`):
/// `path`, `symbol`, `status`, `reason`, `message`, `name`, `version`,
/// `abi`, `deprecated`, `flags`, `thread_safe`, `options`, `checks`, and for
/// a loaded handler also the fields of [`Loaded`].
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The candidate's file (or, for an allocator taken by symbol name from
    /// the command line, the library as named).
    pub path: PathBuf,
    /// The entry symbol (or the `malloc` symbol, for one taken by name).
    pub symbol: String,
    /// `ok` or `rejected`.
    pub status: Status,
    /// The reason code of a refusal, `conformance-failed`, or `None`.
    pub reason: Option<&'static str>,
    /// What went wrong (empty when ok).
    pub message: String,
    /// The handler's name, when known.
    pub name: Option<String>,
    /// The plugin's version.
    pub version: Option<String>,
    /// `"major.minor"`.
    pub abi: Option<String>,
    /// Whether the policy marks the plugin's ABI deprecated.
    pub deprecated: bool,
    /// The advisory flags' names, e.g. `["thread-safe"]`.
    pub flags: Vec<&'static str>,
    /// Whether calls need no lock.
    pub thread_safe: Option<bool>,
    /// The options an instance was made with.
    pub options: Option<String>,
    /// What only a loaded handler has.
    #[serde(flatten)]
    pub loaded: Option<Loaded>,
    /// The conformance pass, when it ran (`check`; not `list`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<Checks>,
}

/// The fields of a [`Report`] that only a loaded handler has.
#[derive(Debug, Clone, Serialize)]
pub struct Loaded {
    /// `plugin` or `symbols` (an allocator taken by symbol name).
    pub kind: &'static str,
    /// The alignment every block has.
    pub alignment: usize,
    /// The memory kind's DLPack name, e.g. `kDLCPU`.
    pub memory_kind: &'static str,
    /// How larger alignments are served: `plugin` or `host-over-allocation`.
    pub aligned_alloc: &'static str,
    /// Whether the plugin makes instances (has `create`).
    pub takes_options: bool,
    /// The ABI 1.1 fields the host supplied defaults for.
    pub defaulted: Vec<&'static str>,
}

/// A conformance pass: the counts and every result.
#[derive(Debug, Clone, Serialize)]
pub struct Checks {
    /// Checks that held.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks skipped.
    pub skipped: usize,
    /// Every check's result, in order.
    pub results: Vec<CheckResult>,
}

impl Checks {
    /// Counts and results of a pass.
    pub fn of(results: Vec<CheckResult>) -> Checks {
        let Tally { passed, failed, skipped } = check::tally(&results);
        Checks { passed, failed, skipped, results }
    }

    /// No checks (a refused candidate).
    pub fn none() -> Checks {
        Checks::of(Vec::new())
    }
}

impl Report {
    /// The report of a loaded handler, with its conformance results if the
    /// pass ran.
    pub fn loaded(candidate: &Candidate, h: Handler, checks: Option<Vec<CheckResult>>) -> Report {
        let info = h.info();
        let checks = checks.map(Checks::of);
        let failed = checks.as_ref().is_some_and(|c| c.failed > 0);
        let message = checks.as_ref().map(failed_summary).unwrap_or_default();
        Report {
            path: candidate.path.clone(),
            symbol: candidate.symbol.clone(),
            status: if failed { Status::Rejected } else { Status::Ok },
            reason: failed.then_some("conformance-failed"),
            message,
            name: Some(info.name.clone()),
            version: Some(info.version.to_string()),
            abi: Some(info.abi()),
            deprecated: info.deprecated,
            flags: info.flag_names(),
            thread_safe: Some(info.thread_safe()),
            options: info.options.clone(),
            loaded: Some(Loaded {
                kind: if matches!(info.source, Source::Symbols { .. }) { "symbols" } else { "plugin" },
                alignment: h.alignment(),
                memory_kind: info.memory_kind_name(),
                aligned_alloc: match h.aligned_strategy() {
                    AlignedStrategy::Plugin => "plugin",
                    AlignedStrategy::OverAllocate => "host-over-allocation",
                },
                takes_options: h.takes_options(),
                defaulted: info.defaulted.clone(),
            }),
            checks,
        }
    }

    /// The report of a refused candidate (`checks` is an empty pass for
    /// `check`, `None` for `list`). `name` and `options` are given when the
    /// refusal concerns a known handler (options it refused).
    pub fn refused(
        candidate: &Candidate,
        code: &'static str,
        message: String,
        name: Option<String>,
        options: Option<String>,
        checks: Option<Checks>,
    ) -> Report {
        Report {
            path: candidate.path.clone(),
            symbol: candidate.symbol.clone(),
            status: Status::Rejected,
            reason: Some(code),
            message,
            name,
            version: None,
            abi: None,
            deprecated: false,
            flags: Vec::new(),
            thread_safe: None,
            options,
            loaded: None,
            checks,
        }
    }

    /// The report of a load outcome: loaded (with `checks` if the pass ran)
    /// or refused.
    pub fn of_outcome(outcome: &Outcome, checks: Option<Vec<CheckResult>>) -> Report {
        match &outcome.result {
            Ok(h) => Report::loaded(&outcome.candidate, *h, checks),
            Err(e) => {
                let pass = checks.map(|_| Checks::none());
                Report::refused(&outcome.candidate, e.code(), e.refusal.to_string(), None, None, pass)
            }
        }
    }

    /// Whether the candidate is usable.
    pub fn ok(&self) -> bool {
        self.status == Status::Ok
    }

    /// Where it came from, as `memplug` shows it: the path, with
    /// `#symbol` when the symbol is not the default entry.
    pub fn source(&self) -> String {
        Candidate { path: self.path.clone(), symbol: self.symbol.clone() }.to_string()
    }

    /// The results that did not pass, e.g. for notes under a table row.
    pub fn unpassed(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks.iter().flat_map(|c| &c.results).filter(|r| r.verdict != Verdict::Passed)
    }
}

/// `name: detail` of every failed check, joined with `; `.
fn failed_summary(checks: &Checks) -> String {
    checks
        .results
        .iter()
        .filter(|r| r.verdict == Verdict::Failed)
        .map(|r| format!("{}: {}", r.name, r.detail))
        .collect::<Vec<_>>()
        .join("; ")
}
