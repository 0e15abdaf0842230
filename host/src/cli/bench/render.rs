//! The output of `memplug bench`: one table per workload (handler, locking,
//! ns per operation, ratio to the baseline in the same rounds, scaling for
//! `threads`, peak live bytes where the plugin reports statistics), the
//! handlers not benchmarked and why; or the same as one JSON document.

use super::runner::Measured;
use super::setup::Entry;
use super::workloads::Locking;
use memplug::text::escape;
use serde::Serialize;

/// A row of every table: a handler and how it is reached.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// As shown: the name, with an instance's options.
    pub(crate) label: String,
    pub(crate) locking: Locking,
}

/// The JSON document.
#[derive(Serialize)]
pub(crate) struct Doc<'a> {
    /// The handler every ratio is relative to.
    baseline: &'a str,
    quick: bool,
    threads: usize,
    handlers: &'a [Entry],
    workloads: Vec<WorkloadJson<'a>>,
}

#[derive(Serialize)]
struct WorkloadJson<'a> {
    name: &'static str,
    description: String,
    rounds: usize,
    ops_per_block: usize,
    threads: usize,
    results: Vec<ResultJson<'a>>,
}

#[derive(Serialize)]
struct ResultJson<'a> {
    handler: &'a str,
    locking: Locking,
    ns_per_op: Option<f64>,
    ratio: Option<f64>,
    scaling: Option<f64>,
    peak_bytes: Option<u64>,
    error: Option<&'a str>,
}

/// Everything as one JSON document.
pub(crate) fn json<'a>(
    variants: &'a [Row],
    entries: &'a [Entry],
    measured: &'a [Measured],
    quick: bool,
    threads: usize,
) -> Doc<'a> {
    let round2 = |x: Option<f64>| x.map(|x| (x * 100.0).round() / 100.0);
    let round3 = |x: Option<f64>| x.map(|x| (x * 1000.0).round() / 1000.0);
    Doc {
        baseline: &variants[0].label,
        quick,
        threads,
        handlers: entries,
        workloads: measured
            .iter()
            .map(|m| WorkloadJson {
                name: m.workload.name(),
                description: m.workload.description(m.threads),
                rounds: m.rounds,
                ops_per_block: m.ops_per_block,
                threads: m.threads,
                results: variants
                    .iter()
                    .zip(&m.rows)
                    .map(|(v, r)| ResultJson {
                        handler: &v.label,
                        locking: v.locking,
                        ns_per_op: round2(r.ns_per_op),
                        ratio: round3(r.ratio),
                        scaling: round3(r.scaling),
                        peak_bytes: r.peak_bytes,
                        error: r.error.as_deref(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// `1234567` → `1.2 MiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut x = n as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{x:.1} {}", UNITS[u]) }
}

/// Print the tables.
pub(crate) fn tables(variants: &[Row], entries: &[Entry], measured: &[Measured]) {
    let baseline = &variants[0].label;
    for m in measured {
        println!(
            "{} — {} ({} rounds of {} ops{})",
            m.workload.name(),
            m.workload.description(m.threads),
            m.rounds,
            m.ops_per_block,
            if m.threads > 1 { " per thread" } else { "" }
        );
        let threads = m.threads > 1;
        let mut header = vec!["HANDLER", "LOCKING", "NS/OP", "RATIO"];
        if threads {
            header.push("SCALING");
        }
        header.push("PEAK LIVE");
        let rows: Vec<Vec<String>> = variants
            .iter()
            .zip(&m.rows)
            .map(|(v, r)| {
                let dash = || "-".to_string();
                let mut row = vec![
                    escape(&v.label),
                    v.locking.label().to_string(),
                    r.ns_per_op.map_or_else(dash, |x| format!("{x:.1}")),
                    r.ratio.map_or_else(dash, |x| format!("{x:.2}x")),
                ];
                if threads {
                    row.push(r.scaling.map_or_else(dash, |x| format!("{x:.2}x")));
                }
                row.push(r.peak_bytes.map_or_else(dash, bytes));
                row
            })
            .collect();
        let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
        for row in &rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        // Names and locking left-aligned, figures right-aligned.
        let line = |cells: &[&str]| {
            let mut s = String::from(" ");
            for (i, c) in cells.iter().enumerate() {
                let w = widths[i];
                s.push_str(&if i < 2 { format!(" {c:<w$}") } else { format!("  {c:>w$}") });
            }
            s.trim_end().to_string()
        };
        println!("{}", line(&header));
        for (row, r) in rows.iter().zip(&m.rows) {
            println!("{}", line(&row.iter().map(String::as_str).collect::<Vec<_>>()));
            if let Some(e) = &r.error {
                println!("      stopped: {}", escape(e));
            }
        }
        println!();
    }
    println!(
        "NS/OP: median over rounds. RATIO: median of the per-round ratio to `{baseline}` run beside it in the same \
         worker process, in the same rounds (below 1.00x is faster).{}",
        if measured.iter().any(|m| m.threads > 1) {
            " SCALING: throughput on N threads over the same handler on one thread."
        } else {
            ""
        }
    );
    println!("PEAK LIVE: the most bytes the plugin reported live during one untimed block (statistics only).");
    let skipped: Vec<&Entry> = entries.iter().filter(|e| e.status != "benchmarked").collect();
    if !skipped.is_empty() {
        println!("\nnot benchmarked:");
        for e in skipped {
            let message = escape(e.message.as_deref().unwrap_or(e.status));
            if e.status == "refused" {
                println!("  {message}"); // names the candidate and the reason code
            } else {
                let reason = e.reason.as_ref().map(|r| format!("[{}] ", escape(r))).unwrap_or_default();
                println!("  {}: {reason}{message}", escape(&e.name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn byte_counts_read_well() {
        assert_eq!(super::bytes(64), "64 B");
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::bytes(3 << 20), "3.0 MiB");
    }
}
