//! `memplug list`: what is found, loaded and validated, with its status (no
//! conformance pass), each candidate in a worker process.

use super::args::IsolationArgs;
use super::{candidates, describe_search, found_by, jobs, print_json, table};
use memplug::Policy;
use memplug::discover::Found;
use memplug::probe::{Request, Task};
use std::path::PathBuf;
use std::process::ExitCode;

/// List the candidates of `paths` (or the search path).
pub(crate) fn run(paths: &[PathBuf], policy: Policy, isolation: &IsolationArgs, json_out: bool) -> ExitCode {
    let found = candidates(paths, &[]);
    let how: Vec<Found> = found.iter().map(|c| found_by(paths, c)).collect();
    let requests = found
        .into_iter()
        .map(|c| Request {
            task: Task::List,
            candidate: Some(c),
            spec: None,
            options: Vec::new(),
            policy: policy.clone(),
            bench: None,
        })
        .collect();
    let reports = jobs::refuse_duplicates(jobs::run(requests, isolation), &how);
    if reports.is_empty() {
        // As `check` does: nothing found is not "all ok".
        eprintln!(
            "memplug: no plugin candidates found (searched: {}). Pass files or directories, or set {}.",
            describe_search(paths),
            memplug::discover::PATH_ENV
        );
        if json_out {
            println!("[]");
        }
        return ExitCode::from(1);
    }
    if json_out {
        print_json(&reports);
    } else {
        table::print(&reports, false, "found");
    }
    if reports.iter().any(memplug::Report::fails) { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
