//! [`Report`]: what `memplug check` and `memplug list` say about one
//! candidate — the handler it gave (with its conformance results, when they
//! ran) or why it was refused. One serializable type: the command line
//! renders it as a table or as JSON, and other front ends (the Python
//! package) hand it on as it is.
//!
//! A report also travels from a worker process to its parent
//! ([`crate::isolate::probe`]), so it is `Deserialize` too and owns its strings.

use crate::admit::discover::Candidate;
use crate::admit::error::{LoadError, Refusal};
use crate::admit::load::Inspection;
use crate::admit::validate::{Prefix, RawFields, readable_len};
use crate::heap::handler::{AlignedStrategy, Handler};
use crate::heap::info::{LayoutCheck, Source};
use crate::isolate::check::{self, CheckResult, Tally, Verdict};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Whether a candidate is usable, and if not, how it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Loaded, and every check that ran held.
    Ok,
    /// Refused, or loaded but failing a conformance check.
    Rejected,
    /// The process checking it was killed by a signal (`signal`, in `stage`).
    Crashed,
    /// The process checking it did not finish in time (in `stage`).
    TimedOut,
    /// The process checking it ended without a report (in `stage`), e.g. a
    /// plugin that calls `exit`.
    NoReport,
    /// A handler of the same name from an earlier directory on the search
    /// path takes precedence; not a failure.
    Shadowed,
}

impl Status {
    /// The status as written in reports, e.g. `timed-out`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Rejected => "rejected",
            Status::Crashed => "crashed",
            Status::TimedOut => "timed-out",
            Status::NoReport => "no-report",
            Status::Shadowed => "shadowed",
        }
    }
}

/// One candidate's report. Serialised (see the guide's `check --json`, `docs/src/cli.md`):
/// `path`, `symbol`, `status`, `reason`, `message`, `name`, `version`,
/// `abi`, `deprecated`, `flags`, `thread_safe`, `options`, `checks`, for a
/// loaded handler also the fields of [`Loaded`], for a worker that
/// failed `stage` (and `signal`), and for a forbidden call `stage` and
/// `call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The candidate's file (or, for an allocator taken by symbol name from
    /// the command line, the library as named). Any bytes; in JSON a
    /// string, escaped when not UTF-8 ([`crate::text::path_serde`]).
    #[serde(with = "crate::text::path_serde")]
    pub path: PathBuf,
    /// The entry symbol (or the `malloc` symbol, for one taken by name).
    pub symbol: String,
    /// `ok`, `rejected`, or how the worker checking it failed.
    pub status: Status,
    /// The reason code of a refusal, `conformance-failed` or `fork-unsafe`
    /// ([`check::refusal_code`]), the status of a failed worker, or `None`.
    pub reason: Option<String>,
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
    pub flags: Vec<String>,
    /// Whether calls need no lock.
    pub thread_safe: Option<bool>,
    /// The options an instance was made with.
    pub options: Option<String>,
    /// What only a loaded handler has.
    #[serde(flatten)]
    pub loaded: Option<Loaded>,
    /// The conformance pass, when it ran (`check`; not `list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Checks>,
    /// For a worker that crashed, timed out or ended without a report: the
    /// stage it was in (`load`, `entry`, `check:NAME`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// For a crashed worker: the signal's name, e.g. `SIGSEGV`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// For a candidate refused with `forbidden-call`: the system call's
    /// name, e.g. `kill` (`unknown` when the worker could not name it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// Whether this report comes from the verdict cache (the file is
    /// unchanged since it was checked) rather than a check just now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// For a worker that timed out: whether it was stopped by the
    /// wall-clock bound before it had had its own time, starved of a
    /// processor. That says how busy the machine was, not what the plugin
    /// does, so it is never remembered by the verdict cache: the next run
    /// checks again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub starved: bool,
}

/// The fields of a [`Report`] that only a loaded handler has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loaded {
    /// `plugin` or `symbols` (an allocator taken by symbol name).
    pub kind: String,
    /// Where the handler came from, as [`Source`] shows it.
    pub source: String,
    /// The alignment every block has.
    pub alignment: usize,
    /// The memory kind's DLPack name, e.g. `kDLCPU`.
    pub memory_kind: String,
    /// How larger alignments are served: `plugin` or `host-over-allocation`.
    pub aligned_alloc: String,
    /// Whether the plugin makes instances (has `create`).
    pub takes_options: bool,
    /// Whether its blocks can be reached from other processes (ABI 1.2
    /// `locate` and `resolve`; see [`crate::heap::share`]).
    #[serde(default)]
    pub shareable: bool,
    /// Whether it answers usable sizes (ABI 1.3 `usable_size`, or a
    /// manifest's `usable_size` symbol).
    #[serde(default)]
    pub usable_size: bool,
    /// The fields of ABI 1.1 and later the host supplied defaults for.
    pub defaulted: Vec<String>,
    /// Whether a Rust plugin's type layout was compared with the frozen
    /// one: `checked`, `not-exported` (a C plugin) or `not-checked`.
    #[serde(default)]
    pub layout: String,
}

/// A conformance pass: the counts and every result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        let reason = checks.as_ref().and_then(|c| check::refusal_code(&c.results));
        let failed = reason.is_some();
        let message = checks.as_ref().map(failed_summary).unwrap_or_default();
        Report {
            reason: reason.map(String::from),
            name: Some(info.name.clone()),
            version: Some(info.version.to_string()),
            abi: Some(info.abi()),
            deprecated: info.deprecated,
            flags: info.flag_names().into_iter().map(String::from).collect(),
            thread_safe: Some(info.thread_safe()),
            options: info.options.clone(),
            loaded: Some(Loaded {
                kind: if matches!(info.source, Source::Symbols { .. }) { "symbols" } else { "plugin" }.into(),
                source: info.source.to_string(),
                alignment: h.alignment(),
                memory_kind: info.memory_kind_name().into(),
                aligned_alloc: match h.aligned_strategy() {
                    AlignedStrategy::Plugin => "plugin",
                    AlignedStrategy::OverAllocate => "host-over-allocation",
                }
                .into(),
                takes_options: h.takes_options(),
                shareable: h.is_shareable(),
                usable_size: h.has_usable_size(),
                defaulted: info.defaulted.iter().map(|d| d.to_string()).collect(),
                layout: info.layout.code().to_string(),
            }),
            checks,
            ..Report::empty(candidate, if failed { Status::Rejected } else { Status::Ok }, message)
        }
    }

    /// The report of a refused candidate (`checks` is an empty pass for
    /// `check`, `None` for `list`). `name` and `options` are given when the
    /// refusal concerns a known handler (options it refused).
    pub fn refused(
        candidate: &Candidate,
        code: &str,
        message: String,
        name: Option<String>,
        options: Option<String>,
        checks: Option<Checks>,
    ) -> Report {
        Report {
            reason: Some(code.to_string()),
            name,
            options,
            checks,
            ..Report::empty(candidate, Status::Rejected, message)
        }
    }

    /// A report of `candidate` that says `status` and `message` alone: no
    /// handler, no checks, no failure's stage; what each constructor fills.
    fn empty(candidate: &Candidate, status: Status, message: String) -> Report {
        Report {
            path: candidate.path.clone(),
            symbol: candidate.symbol.clone(),
            status,
            reason: None,
            message,
            name: None,
            version: None,
            abi: None,
            deprecated: false,
            flags: Vec::new(),
            thread_safe: None,
            options: None,
            loaded: None,
            checks: None,
            stage: None,
            signal: None,
            call: None,
            cached: false,
            starved: false,
        }
    }

    /// The report of a candidate whose worker process failed (`status` is
    /// [`Status::Crashed`], [`Status::TimedOut`] or [`Status::NoReport`]):
    /// the reason code is the status, `stage` where it happened.
    pub fn worker_failed(
        candidate: &Candidate,
        status: Status,
        message: String,
        stage: Option<String>,
        signal: Option<String>,
        checks: Option<Checks>,
    ) -> Report {
        let mut r = Report::refused(candidate, status.as_str(), message, None, None, checks);
        r.status = status;
        r.stage = stage;
        r.signal = signal;
        r
    }

    /// The report of a load result: loaded (with `checks` if the pass ran)
    /// or refused.
    pub fn of_result(
        candidate: &Candidate,
        result: &Result<Handler, LoadError>,
        checks: Option<Vec<CheckResult>>,
    ) -> Report {
        match result {
            Ok(h) => Report::loaded(candidate, *h, checks),
            Err(e) => {
                let pass = checks.map(|_| Checks::none());
                let mut r = Report::refused(candidate, e.code(), e.refusal.to_string(), None, None, pass);
                if let Refusal::Shadowed { name, .. } = &e.refusal {
                    r.status = Status::Shadowed;
                    r.name = Some(name.clone());
                }
                r
            }
        }
    }

    /// Whether the candidate is usable.
    pub fn ok(&self) -> bool {
        self.status == Status::Ok
    }

    /// Whether the report is a failure: anything but ok or shadowed (what
    /// makes `memplug`'s exit status 1).
    pub fn fails(&self) -> bool {
        !matches!(self.status, Status::Ok | Status::Shadowed)
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

/// What `memplug inspect` says about a candidate: its header as read, field
/// by field, and the verdict — [`load::Inspection`](crate::admit::load::Inspection)
/// in a form that owns its strings and travels from a worker process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectionReport {
    /// The candidate.
    pub candidate: Candidate,
    /// The prefix, if the entry could be called.
    pub prefix: Option<Prefix>,
    /// How many bytes the host reads, if the prefix allows reading any.
    pub host_reads: Option<usize>,
    /// All 1.0 fields, if the prefix allowed reading them.
    pub fields: Option<RawFields>,
    /// The fields of ABI 1.1 and later as the host would use them.
    pub readings: Vec<Reading>,
    /// The layout check of a Rust plugin's `<entry>_layout` companion, if
    /// it ran.
    #[serde(default)]
    pub layout: Option<LayoutCheck>,
    /// The verdict: `ok`, `rejected`, or how a worker failed.
    pub status: Status,
    /// The reason code when not ok.
    pub reason: Option<String>,
    /// What went wrong, when not ok.
    pub message: Option<String>,
    /// For a failed worker: the stage it was in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// For a crashed worker: the signal's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

/// One field of ABI 1.1 or later as read (see [`FieldReading`](crate::admit::validate::FieldReading)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reading {
    /// The field's name.
    pub name: String,
    /// The value in force, as text.
    pub value: String,
    /// Whether the plugin supplied it.
    pub from_plugin: bool,
    /// What it means, or why it is a default.
    pub note: String,
}

impl InspectionReport {
    /// The report of an inspection made in this process.
    pub fn of(i: &Inspection) -> InspectionReport {
        InspectionReport {
            candidate: i.candidate.clone(),
            prefix: i.prefix,
            host_reads: i.prefix.and_then(|p| readable_len(&p).ok()),
            fields: i.fields.clone(),
            readings: i
                .readings
                .iter()
                .map(|r| Reading {
                    name: r.name.into(),
                    value: r.value.clone(),
                    from_plugin: r.from_plugin,
                    note: r.note.clone(),
                })
                .collect(),
            layout: i.layout.clone(),
            status: if i.verdict.is_ok() { Status::Ok } else { Status::Rejected },
            reason: i.verdict.as_ref().err().map(|e| e.code().to_string()),
            message: i.verdict.as_ref().err().map(|e| e.to_string()),
            stage: None,
            signal: None,
        }
    }

    /// The report of an inspection whose worker failed: nothing was read.
    pub fn worker_failed(
        candidate: &Candidate,
        status: Status,
        message: String,
        stage: Option<String>,
        signal: Option<String>,
    ) -> InspectionReport {
        InspectionReport {
            candidate: candidate.clone(),
            prefix: None,
            host_reads: None,
            fields: None,
            readings: Vec::new(),
            layout: None,
            status,
            reason: Some(status.as_str().to_string()),
            message: Some(message),
            stage,
            signal,
        }
    }
}
