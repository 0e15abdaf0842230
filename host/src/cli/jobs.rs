//! Running the jobs of `check` and `list` — one per candidate (and one for
//! an allocator taken by symbol name) — each in a worker process of its own
//! (in parallel, under a timeout) or, with `--in-process`, here; then the
//! rules that span candidates (duplicate names).

use super::args::IsolationArgs;
use memplug::cache::context;
use memplug::discover::{Found, name_taken};
use memplug::error::Refusal;
use memplug::probe::{Request, Task, Worker};
use memplug::report::Checks;
use memplug::report::Status;
use memplug::screen::{Known, Screen};
use memplug::{Candidate, Report};
use std::path::PathBuf;
use std::sync::Mutex;

/// Run every request — in workers, unless the screening knows the answer
/// (see [`cached`]) — and remember what they said; the reports of each, in
/// request order.
pub(crate) fn run(requests: Vec<Request>, isolation: &IsolationArgs) -> Vec<Vec<Report>> {
    if isolation.in_process {
        return requests.into_iter().map(in_process).collect();
    }
    let Some(file) = requests.first().and_then(|r| r.policy.cache.clone()) else {
        return run_workers(requests, isolation);
    };
    let exe = std::env::current_exe().ok();
    let mut screen = Screen::open(Some(&file), exe.as_deref());
    let mut reports: Vec<Option<Vec<Report>>> = Vec::new();
    let mut misses = Vec::new();
    for request in requests {
        match cached(&mut screen, &request, isolation.rescan) {
            Some(r) => reports.push(Some(r)),
            None => {
                reports.push(None);
                let key = request.candidate.as_ref().and_then(|c| screen.key(c));
                misses.push((reports.len() - 1, key, request));
            }
        }
    }
    let ran = run_workers(misses.iter().map(|(_, _, r)| r.clone()).collect(), isolation);
    for ((slot, key, request), got) in misses.into_iter().zip(ran) {
        if let (Some(candidate), Some(key)) = (&request.candidate, key) {
            screen.record(candidate, &context(request.task, &request.policy, &request.options), key, &got);
        }
        reports[slot] = Some(got);
    }
    screen.save();
    reports.into_iter().map(Option::unwrap_or_default).collect()
}

/// What screening `request` concludes before a worker runs it: a refusal of
/// its file (never cached: a `chmod` of a directory changes no file), the
/// reports of an earlier run on the unchanged file, or a `known-bad`
/// refusal of one that crashed, hung or exited its worker; `None` to run it
/// (`rescan`, or nothing usable).
fn cached(screen: &mut Screen, request: &Request, rescan: bool) -> Option<Vec<Report>> {
    let candidate = request.candidate.as_ref()?;
    let ctx = context(request.task, &request.policy, &request.options);
    match screen.check(candidate, &request.policy.trust, &ctx, rescan) {
        Err(refusal) => {
            let checks = (request.task == Task::Check).then(Checks::none);
            Some(vec![Report::refused(candidate, refusal.code(), refusal.to_string(), None, None, checks)])
        }
        Ok((_, Known::Seen(mut reports))) => {
            for r in &mut reports {
                r.cached = true;
            }
            Some(reports)
        }
        Ok((_, Known::Bad(entry))) => entry.report(candidate, request.task == Task::Check).map(|r| vec![r]),
        Ok((_, Known::Unknown)) => None,
    }
}

/// Run every request in a worker of its own, in parallel.
fn run_workers(requests: Vec<Request>, isolation: &IsolationArgs) -> Vec<Vec<Report>> {
    if requests.is_empty() {
        return Vec::new();
    }
    let worker = match std::env::current_exe() {
        Ok(exe) => Worker::new(exe),
        Err(e) => {
            eprintln!("memplug: cannot find its own executable to start workers ({e}); checking in-process");
            return requests.into_iter().map(in_process).collect();
        }
    };
    let timeout = isolation.timeout;
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
                    let reports = worker.run(request, timeout).into_reports(&request.subject(), with_checks);
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
        memplug::probe::Answer::Inspection(_) | memplug::probe::Answer::Bench(_) => Vec::new(),
    }
}

/// Apply, as a registry would, the rule for a handler whose name an earlier
/// candidate's handler has ([`name_taken`]: a candidate a scan found, from
/// another directory, is shadowed — not a failure; one named explicitly, or
/// from the same directory, is refused as `duplicate-name`); either way the
/// instances made of it go too. `found` says how each job's candidate was
/// found (one per job). Flatten the reports.
pub(crate) fn refuse_duplicates(per_job: Vec<Vec<Report>>, found: &[Found]) -> Vec<Report> {
    // (name, where it came from, its file)
    let mut seen: Vec<(String, String, PathBuf)> = Vec::new();
    let mut out = Vec::new();
    for (i, reports) in per_job.into_iter().enumerate() {
        let Some(first) = reports.first() else { continue };
        let name = first.name.clone().filter(|_| first.loaded.is_some());
        let earlier = name.as_ref().and_then(|n| seen.iter().find(|(s, ..)| s == n)).cloned();
        match (name, earlier) {
            (Some(name), Some((_, by, file))) => {
                let how = found.get(i).copied().unwrap_or(Found::Explicit);
                let refusal = name_taken(&name, by, first.path.parent(), file.parent(), how);
                let candidate = Candidate { path: first.path.clone(), symbol: first.symbol.clone() };
                let checks = first.checks.as_ref().map(|_| Checks::none());
                let mut r = Report::refused(&candidate, refusal.code(), refusal.to_string(), None, None, checks);
                if let Refusal::Shadowed { .. } = refusal {
                    r.status = Status::Shadowed;
                    r.name = Some(name);
                }
                out.push(r);
            }
            (Some(name), None) => {
                let source = first.loaded.as_ref().map(|l| l.source.clone()).unwrap_or_default();
                seen.push((name, source, first.path.clone()));
                out.extend(reports);
            }
            (None, _) => out.extend(reports),
        }
    }
    out
}
