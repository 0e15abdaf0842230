//! `memplug list`: what is found, loaded and validated, with its status (no
//! conformance pass), each candidate in a worker process.

use super::args::IsolationArgs;
use super::{candidates, describe_search, jobs, print_json, table};
use memplug::Policy;
use memplug::probe::{Request, Task};
use std::path::PathBuf;
use std::process::ExitCode;

/// List the candidates of `paths` (or the search path).
pub(crate) fn run(paths: &[PathBuf], policy: Policy, isolation: &IsolationArgs, json_out: bool) -> ExitCode {
    let requests = candidates(paths, &[])
        .into_iter()
        .map(|c| Request {
            task: Task::List,
            candidate: Some(c),
            spec: None,
            options: Vec::new(),
            policy: policy.clone(),
        })
        .collect();
    let reports = jobs::refuse_duplicates(jobs::run(requests, isolation));
    if json_out {
        print_json(&reports);
    } else if reports.is_empty() {
        println!("no plugins found in: {}", describe_search(paths));
    } else {
        table::print(&reports, false, "found");
    }
    if reports.iter().all(memplug::Report::ok) { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
