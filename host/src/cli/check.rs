//! `memplug check`: load and validate every candidate (and an allocator
//! taken by symbol name, and instances asked for with `--options`), run the
//! conformance pass on each one accepted, report. Each candidate runs in a
//! worker process of its own unless `--in-process` says otherwise.

use super::args::IsolationArgs;
use super::{candidates, describe_search, found_by, jobs, print_json, table};
use memplug::discover::Found;
use memplug::discover::PATH_ENV;
use memplug::probe::{Request, Task};
use memplug::{Policy, Report, SymbolSpec};
use std::path::PathBuf;
use std::process::ExitCode;

/// Check the candidates of `paths` (or the search path) with each entry
/// symbol in `symbols`, the allocator `spec` if given, and an instance per
/// `(name, options)`.
pub(crate) fn run(
    paths: &[PathBuf],
    symbols: &[String],
    spec: Option<SymbolSpec>,
    options: &[(String, String)],
    policy: Policy,
    isolation: &IsolationArgs,
    json_out: bool,
) -> ExitCode {
    let found = if spec.is_some() && paths.is_empty() { Vec::new() } else { candidates(paths, symbols) };
    let request = |candidate, spec| Request {
        task: Task::Check,
        candidate,
        spec,
        options: options.to_vec(),
        policy: policy.clone(),
        bench: None,
    };
    let mut requests: Vec<Request> = spec.into_iter().map(|s| request(None, Some(s))).collect();
    requests.extend(found.into_iter().map(|c| request(Some(c), None)));
    if requests.is_empty() {
        eprintln!(
            "memplug: no plugin candidates found (searched: {}). Pass files or directories, or set {PATH_ENV}.",
            describe_search(paths),
        );
        if json_out {
            println!("[]");
        }
        return ExitCode::from(1);
    }
    let how: Vec<Found> =
        requests.iter().map(|r| r.candidate.as_ref().map_or(Found::Explicit, |c| found_by(paths, c))).collect();
    let reports = jobs::refuse_duplicates(jobs::run(requests, isolation), &how);
    let mut unused_options = false;
    for (name, opts) in options {
        let used = reports.iter().any(|r| r.name.as_deref() == Some(name) && r.options.as_deref() == Some(opts));
        if !used {
            eprintln!("memplug: --options for `{name}`, but no handler of that name was loaded");
            unused_options = true;
        }
    }
    if json_out {
        print_json(&reports);
    } else {
        table::print(&reports, true, "checked");
    }
    if !reports.iter().any(Report::fails) && !unused_options { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
