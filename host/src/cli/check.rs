//! `memplug check`: load and validate every candidate (and an allocator
//! taken by symbol name, and instances asked for with `--options`), run the
//! conformance pass on each one accepted, report.

use super::{candidates, describe_search, print_json, table};
use memplug::check::conformance;
use memplug::discover::PATH_ENV;
use memplug::report::Checks;
use memplug::{Candidate, Outcome, Policy, Registry, Report, SymbolSpec};
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
    json_out: bool,
) -> ExitCode {
    let registry = Registry::with_policy(policy);
    let found = if spec.is_some() && paths.is_empty() { Vec::new() } else { candidates(paths, symbols) };
    let mut outcomes = Vec::new();
    if let Some(spec) = &spec {
        let candidate = Candidate::new(&spec.library).with_symbol(spec.symbols.malloc.clone());
        outcomes.push(Outcome { candidate, result: registry.load_symbols(spec) });
    }
    if found.is_empty() && outcomes.is_empty() {
        eprintln!(
            "memplug: no plugin candidates found (searched: {}). Pass files or directories, or set {PATH_ENV}.",
            describe_search(paths),
        );
        return ExitCode::from(1);
    }
    outcomes.extend(registry.load_all(&found));
    let mut reports = Vec::new();
    let mut used = vec![false; options.len()];
    for outcome in &outcomes {
        let Ok(h) = outcome.result else {
            reports.push(Report::of_outcome(outcome, Some(Vec::new())));
            continue;
        };
        reports.push(Report::loaded(&outcome.candidate, h, Some(conformance(h))));
        for (k, (name, opts)) in options.iter().enumerate().filter(|(_, (name, _))| name == h.name()) {
            used[k] = true;
            reports.push(match h.instantiate(opts) {
                Ok(instance) => {
                    let ih = instance.handler();
                    Report::loaded(&outcome.candidate, ih, Some(conformance(ih)))
                }
                Err(e) => Report::refused(
                    &outcome.candidate,
                    e.code(),
                    e.to_string(),
                    Some(name.clone()),
                    Some(opts.clone()),
                    Some(Checks::none()),
                ),
            });
        }
    }
    let mut unused_options = false;
    for (k, (name, _)) in options.iter().enumerate() {
        if !used[k] {
            eprintln!("memplug: --options for `{name}`, but no handler of that name was loaded");
            unused_options = true;
        }
    }
    if json_out {
        print_json(&reports);
    } else {
        table::print(&reports, true, "checked");
    }
    if reports.iter().all(Report::ok) && !unused_options { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
