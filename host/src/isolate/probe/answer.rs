//! Judging a worker's answer against the request it answers. Pure.
//!
//! A worker's answer is untrusted input: the plugin runs in the worker and
//! can write to its protocol channel. The answer is accepted only if it is
//! about what was asked — exactly one report about the candidate (same
//! path and symbol; for a spec, its library and `malloc` symbol), then only
//! reports of instances that were asked for, or for `inspect` one
//! inspection of the same file — and if what it says is coherent: an `ok`
//! report of `check` carries a passed conformance pass, and the stages the
//! worker announced before it include those an `ok` needs (`load`, the
//! entry function, the checks, `create`). The checks are structural and
//! cheap: they do not stop a plugin from lying about itself (see the threat
//! model), only from answering for something else or in a shape the worker
//! never writes.

use super::wire::{Answer, Request, Task};
use crate::admit::discover::{Candidate, CandidateKind};
use crate::admit::stage::{CHECK_PREFIX, CREATE, ENTRY, OPEN};
use crate::isolate::report::{Checks, Report, Status};
use std::path::Path;

/// The stages a worker announced before its answer, as far as judging the
/// answer needs them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// `load`: the library was opened.
    pub load: bool,
    /// `entry`: the entry function was called.
    pub entry: bool,
    /// `check:*`: the conformance pass ran.
    pub check: bool,
    /// `create`: an instance was made.
    pub create: bool,
}

impl Seen {
    /// Take note of an announced stage.
    pub fn note(&mut self, stage: &str) {
        match stage {
            OPEN => self.load = true,
            ENTRY => self.entry = true,
            CREATE => self.create = true,
            s if s.starts_with(CHECK_PREFIX) => self.check = true,
            _ => {}
        }
    }
}

/// Whether `report` is about `candidate` (its path and symbol).
fn same_subject(report: &Report, candidate: &Candidate) -> bool {
    same_path(&report.path, &candidate.path) && report.symbol == candidate.symbol
}

/// Whether two paths name the same file, as reports name them.
fn same_path(a: &Path, b: &Path) -> bool {
    a == b
}

/// `answer` if it is an acceptable answer to `request` from a worker that
/// announced `seen` before it; else what is wrong with it.
pub fn validate(request: &Request, seen: &Seen, answer: Answer) -> Result<Answer, String> {
    let subject = request.subject();
    match (request.task, &answer) {
        (Task::Inspect, Answer::Inspection(i)) => {
            if !same_path(&i.candidate.path, &subject.path) || i.candidate.symbol != subject.symbol {
                return Err(format!("an inspection of {} instead of {subject}", i.candidate.path.display()));
            }
            if i.status == Status::Ok && (i.fields.is_none() || !seen.load || !seen.entry) {
                return Err("an `ok` inspection without the header's fields or the stages that read them".into());
            }
            if !matches!(i.status, Status::Ok | Status::Rejected) {
                return Err(format!("an inspection with status `{}`", i.status.as_str()));
            }
        }
        (Task::Inspect, Answer::Reports(_)) => return Err("reports instead of an inspection".into()),
        (_, Answer::Inspection(_)) => return Err("an inspection instead of reports".into()),
        // A bench's results are the front end's to judge (it bounds and
        // checks them); they are only taken from a bench worker.
        (Task::Bench, Answer::Bench(_)) => {}
        (_, Answer::Bench(_)) => return Err("bench results instead of reports".into()),
        (task, Answer::Reports(reports)) => reports_fit(request, task, &subject, seen, reports)?,
    }
    Ok(answer)
}

/// The rules for the reports of `check` and `list`.
fn reports_fit(
    request: &Request,
    task: Task,
    subject: &Candidate,
    seen: &Seen,
    reports: &[Report],
) -> Result<(), String> {
    let Some((first, instances)) = reports.split_first() else {
        return Err("no report at all".into());
    };
    if !same_subject(first, subject) {
        return Err(format!("a report about {} ({}) instead of {subject}", first.path.display(), first.symbol));
    }
    // A plugin file (not a manifest, not a spec) is only loaded through its
    // entry function.
    let by_entry = request.spec.is_none() && subject.kind() == CandidateKind::Plugin;
    coherent(first, task, seen, by_entry, false)?;
    if instances.is_empty() {
        return Ok(());
    }
    if task != Task::Check || first.loaded.is_none() {
        return Err("instance reports for a candidate that made no handler".into());
    }
    let mut asked: Vec<&(String, String)> =
        request.options.iter().filter(|(name, _)| first.name.as_deref() == Some(name.as_str())).collect();
    for r in instances {
        if !same_subject(r, subject) {
            return Err(format!("a report about {} ({}) instead of {subject}", r.path.display(), r.symbol));
        }
        let found = asked.iter().position(|(name, opts)| {
            r.name.as_deref() == Some(name.as_str()) && r.options.as_deref() == Some(opts.as_str())
        });
        let Some(i) = found else {
            return Err(format!(
                "a report about an instance that was not asked for ({}: {})",
                r.name.as_deref().unwrap_or("?"),
                r.options.as_deref().unwrap_or("?")
            ));
        };
        asked.swap_remove(i);
        coherent(r, task, seen, by_entry, true)?;
    }
    Ok(())
}

/// Whether one report is a shape the worker writes, and an `ok` one is
/// backed by the stages and checks an `ok` needs.
fn coherent(r: &Report, task: Task, seen: &Seen, by_entry: bool, instance: bool) -> Result<(), String> {
    if r.cached || r.stage.is_some() || r.signal.is_some() || r.call.is_some() {
        return Err("a report with fields only this process sets (cached, stage, signal, call)".into());
    }
    if (task == Task::Check) != r.checks.is_some() {
        return Err("a report whose conformance pass does not match the task".into());
    }
    match r.status {
        Status::Ok => {}
        Status::Rejected if r.reason.as_deref().is_some_and(|s| !s.is_empty()) => return Ok(()),
        Status::Rejected => return Err("a rejection without a reason".into()),
        other => return Err(format!("a report with status `{}`", other.as_str())),
    }
    if r.reason.is_some() || r.loaded.is_none() || r.name.is_none() {
        return Err("an `ok` report without a loaded handler".into());
    }
    if !seen.load || (by_entry && !seen.entry) || (instance && !seen.create) {
        return Err("an `ok` report before the library was loaded and its entry called".into());
    }
    if let Some(checks) = &r.checks {
        let whole = Checks::of(checks.results.clone()) == *checks;
        if !whole || checks.failed != 0 || checks.passed == 0 || !seen.check {
            return Err("an `ok` report without a conformance pass that passed".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit::policy::Policy;
    use crate::isolate::check::{CheckResult, Verdict};
    use crate::isolate::report::Loaded;

    fn request(options: &[(&str, &str)]) -> Request {
        Request {
            task: Task::Check,
            candidate: Some(Candidate::new("/p/libx.so")),
            spec: None,
            options: options.iter().map(|(n, o)| (n.to_string(), o.to_string())).collect(),
            policy: Policy::default(),
            bench: None,
        }
    }

    /// An `ok` report of `check` about `path`.
    fn ok(path: &str, options: Option<&str>) -> Report {
        let pass = CheckResult { name: "zeroed".into(), verdict: Verdict::Passed, detail: String::new() };
        let mut r =
            Report::refused(&Candidate::new(path), "x", String::new(), None, None, Some(Checks::of(vec![pass])));
        r.status = Status::Ok;
        r.reason = None;
        r.name = Some("x".into());
        r.options = options.map(String::from);
        r.loaded = Some(Loaded {
            kind: "plugin".into(),
            source: path.into(),
            alignment: 16,
            memory_kind: "kDLCPU".into(),
            aligned_alloc: "plugin".into(),
            takes_options: true,
            shareable: false,
            usable_size: false,
            defaulted: Vec::new(),
            layout: "not-exported".into(),
        });
        r
    }

    const ALL: Seen = Seen { load: true, entry: true, check: true, create: true };

    #[test]
    fn answers_judged() {
        let asked = request(&[("x", "a=1")]);
        let failed = {
            let mut r = ok("/p/libx.so", None);
            r.checks = Some(Checks::of(vec![CheckResult {
                name: "zeroed".into(),
                verdict: Verdict::Failed,
                detail: String::new(),
            }]));
            r
        };
        let lying = {
            let mut r = ok("/p/libx.so", None);
            r.checks.as_mut().unwrap().passed = 7;
            r
        };
        // (reports, seen, accepted)
        let cases: Vec<(Vec<Report>, Seen, bool)> = vec![
            (vec![ok("/p/libx.so", None)], ALL, true),
            (vec![ok("/p/libx.so", None), ok("/p/libx.so", Some("a=1"))], ALL, true),
            (vec![], ALL, false),
            (vec![ok("/q/liby.so", None)], ALL, false),
            (vec![ok("/p/libx.so", None), ok("/p/libx.so", None)], ALL, false),
            (vec![ok("/p/libx.so", None), ok("/p/libx.so", Some("b=2"))], ALL, false),
            (vec![ok("/p/libx.so", None), ok("/p/libx.so", Some("a=1")), ok("/p/libx.so", Some("a=1"))], ALL, false),
            (vec![ok("/p/libx.so", None)], Seen { check: false, ..ALL }, false),
            (vec![ok("/p/libx.so", None)], Seen { entry: false, ..ALL }, false),
            (vec![failed], ALL, false),
            (vec![lying], ALL, false),
        ];
        for (i, (reports, seen, accepted)) in cases.into_iter().enumerate() {
            let got = validate(&asked, &seen, Answer::Reports(reports));
            assert_eq!(got.is_ok(), accepted, "case {i}: {got:?}");
        }
        let inspect = Request { task: Task::Inspect, ..request(&[]) };
        assert!(validate(&inspect, &ALL, Answer::Reports(vec![ok("/p/libx.so", None)])).is_err());
    }
}
