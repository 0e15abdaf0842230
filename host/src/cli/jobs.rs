//! Running the jobs of `check` and `list` — one per candidate (and one for
//! an allocator taken by symbol name) — each in a worker process of its own
//! (in parallel, under a timeout) or, with `--in-process`, here; then the
//! rules that span candidates (duplicate names).

use super::args::IsolationArgs;
use memplug::error::Refusal;
use memplug::probe::{Request, Task, Worker};
use memplug::{Candidate, Report};
use std::sync::Mutex;
use std::time::Duration;

/// The candidate a request is about, as reports name it.
fn subject(request: &Request) -> Candidate {
    match (&request.spec, &request.candidate) {
        (Some(spec), _) => Candidate::new(&spec.library).with_symbol(spec.symbols.malloc.clone()),
        (None, Some(c)) => c.clone(),
        (None, None) => Candidate::new(""),
    }
}

/// Run every request; the reports of each, in request order.
pub(crate) fn run(requests: Vec<Request>, isolation: &IsolationArgs) -> Vec<Vec<Report>> {
    if isolation.in_process {
        return requests.into_iter().map(in_process).collect();
    }
    let worker = match std::env::current_exe() {
        Ok(exe) => Worker::new(exe),
        Err(e) => {
            eprintln!("memplug: cannot find its own executable to start workers ({e}); checking in-process");
            return requests.into_iter().map(in_process).collect();
        }
    };
    let timeout = Duration::from_secs_f64(isolation.timeout);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8).min(requests.len().max(1));
    let results: Vec<Mutex<Option<Vec<Report>>>> = requests.iter().map(|_| Mutex::new(None)).collect();
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(request) = requests.get(i) else { return };
                    let with_checks = request.task == Task::Check;
                    let reports = worker.run(request, timeout).into_reports(&subject(request), with_checks);
                    *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(reports);
                }
            });
        }
    });
    results.into_iter().map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()).unwrap_or_default()).collect()
}

/// Run one request in this process.
fn in_process(request: Request) -> Vec<Report> {
    match memplug::worker::answer(request) {
        memplug::probe::Answer::Reports(r) => r,
        memplug::probe::Answer::Inspection(_) => Vec::new(),
    }
}

/// Refuse, as a registry would, a handler whose name an earlier candidate's
/// handler has (with the instances made of it); flatten the reports.
pub(crate) fn refuse_duplicates(per_job: Vec<Vec<Report>>) -> Vec<Report> {
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut out = Vec::new();
    for reports in per_job {
        let Some(first) = reports.first() else { continue };
        let name = first.name.clone().filter(|_| first.loaded.is_some());
        let existing = name.as_ref().and_then(|n| seen.iter().find(|(s, _)| s == n)).map(|(_, src)| src.clone());
        match (name, existing) {
            (Some(name), Some(existing)) => {
                let refusal = Refusal::DuplicateName { name, existing };
                let candidate = Candidate { path: first.path.clone(), symbol: first.symbol.clone() };
                let checks = first.checks.as_ref().map(|_| memplug::report::Checks::none());
                out.push(Report::refused(&candidate, refusal.code(), refusal.to_string(), None, None, checks));
            }
            (Some(name), None) => {
                let source = first.loaded.as_ref().map(|l| l.source.clone()).unwrap_or_default();
                seen.push((name, source));
                out.extend(reports);
            }
            (None, _) => out.extend(reports),
        }
    }
    out
}
