//! `memplug list`: what is found, loaded and validated, with its status (no
//! conformance pass).

use super::{candidates, describe_search, print_json, table};
use memplug::{Policy, Registry, Report};
use std::path::PathBuf;
use std::process::ExitCode;

/// List the candidates of `paths` (or the search path).
pub(crate) fn run(paths: &[PathBuf], policy: Policy, json_out: bool) -> ExitCode {
    let registry = Registry::with_policy(policy);
    let reports: Vec<Report> =
        registry.load_all(&candidates(paths, &[])).iter().map(|o| Report::of_outcome(o, None)).collect();
    if json_out {
        print_json(&reports);
    } else if reports.is_empty() {
        println!("no plugins found in: {}", describe_search(paths));
    } else {
        table::print(&reports, false, "found");
    }
    if reports.iter().all(Report::ok) { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
