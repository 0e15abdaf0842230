//! The one table renderer: [`Report`]s as aligned columns, with notes (the
//! refusal, failed or skipped checks) under each row and a summary line.
//! Every cell and note is escaped ([`escape`]): file names, and the names,
//! versions, options and messages a plugin supplies, cannot move the
//! cursor, colour the output or reorder a line.

use memplug::Report;
use memplug::check::Verdict;
use memplug::text::escape;

/// Print `reports` as a table; `with_checks` adds the CHECKS column
/// (`check`), `verb` ends the summary line ("checked", "found").
pub(crate) fn print(reports: &[Report], with_checks: bool, verb: &str) {
    let mut header = vec!["STATUS", "NAME", "VERSION", "ABI", "ALIGN", "FLAGS"];
    if with_checks {
        header.push("CHECKS");
    }
    header.push("SOURCE");
    let rows: Vec<Vec<String>> =
        reports.iter().map(|r| cells(r, with_checks).iter().map(|c| escape(c)).collect()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s
    };
    println!("{}", line(&header));
    for (report, row) in reports.iter().zip(&rows) {
        println!("{}", line(&row.iter().map(String::as_str).collect::<Vec<_>>()));
        for note in notes(report) {
            println!("    {}", escape(&note));
        }
    }
    let ok = reports.iter().filter(|r| r.ok()).count();
    let failing = reports.iter().filter(|r| r.fails()).count();
    let shadowed = reports.len() - ok - failing;
    let shadowed = if shadowed > 0 { format!(", {shadowed} shadowed") } else { String::new() };
    println!("\n{ok} ok, {failing} rejected or failing{shadowed}, of {} {verb}", reports.len());
}

/// A row's cells, in header order.
fn cells(r: &Report, with_checks: bool) -> Vec<String> {
    let dash = || "-".to_string();
    let name = match (&r.name, &r.options) {
        (Some(n), Some(o)) => format!("{n}[{o}]"),
        (Some(n), None) => n.clone(),
        _ => dash(),
    };
    let mut row = match &r.loaded {
        None => vec![r.status.as_str().into(), name, dash(), dash(), dash(), dash()],
        Some(loaded) => {
            let mut flags: Vec<String> = r.flags.iter().map(|f| f.to_string()).collect();
            if loaded.shareable {
                flags.push("shareable".into());
            }
            if loaded.usable_size {
                flags.push("usable-size".into());
            }
            if r.thread_safe == Some(false) {
                flags.push("not-thread-safe(locked)".into());
            }
            if r.deprecated {
                flags.push("DEPRECATED-ABI".into());
            }
            let abi = if loaded.kind == "symbols" { "symbols".to_string() } else { r.abi.clone().unwrap_or_default() };
            vec![
                if r.ok() { "ok" } else { "failed" }.into(),
                name,
                r.version.clone().unwrap_or_else(dash),
                abi,
                loaded.alignment.to_string(),
                if flags.is_empty() { dash() } else { flags.join(",") },
            ]
        }
    };
    if with_checks {
        row.push(match (&r.loaded, &r.checks) {
            (Some(_), Some(c)) => format!("{}/{}", c.passed, c.passed + c.failed),
            _ => dash(),
        });
    }
    row.push(r.source());
    row
}

/// The lines under a row: the refusal, or the checks that did not pass.
fn notes(r: &Report) -> Vec<String> {
    if r.loaded.is_none() {
        return vec![format!("[{}] {}", r.reason.as_deref().unwrap_or(r.status.as_str()), r.message)];
    }
    r.unpassed()
        .map(|c| {
            let what = if c.verdict == Verdict::Failed { "FAILED" } else { "skipped" };
            // The one check with a reason code of its own shows it.
            let code = match r.reason.as_deref() {
                Some(code @ memplug::check::FORK_UNSAFE) if c.name == "fork" => format!(" [{code}]"),
                _ => String::new(),
            };
            format!("{what} {}{code}: {}", c.name, c.detail)
        })
        .collect()
}
