//! The `memplug` command line: `list`, `inspect`, `check`.
//!
//! Exit status: 0 when everything is ok, 1 when any candidate is refused or
//! fails a check, 2 for a usage error. Logs go to stderr, filtered by
//! `RUST_LOG` (default `warn`).

use crate::check::{self, CheckResult, Tally, Verdict};
use crate::discover::{self, Candidate};
use crate::handler::{Handler, flag_names};
use crate::load;
use crate::registry::{Outcome, Registry};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;

/// Load memory allocators from shared libraries, check and inspect them.
#[derive(Debug, Parser)]
#[command(name = "memplug", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the plugins found on the search path (or in DIRs) with their status.
    List {
        /// Directories or files to list instead of the search path.
        paths: Vec<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show a plugin's handler header field by field, as read, and the verdict.
    Inspect {
        /// The library file.
        file: PathBuf,
        /// The entry symbol to call.
        #[arg(long, default_value = memplug_abi::ENTRY_SYMBOL)]
        symbol: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Load and validate every candidate, then run the conformance pass on
    /// each one accepted.
    Check {
        /// Files or directories to check (default: the search path).
        paths: Vec<PathBuf>,
        /// Entry symbol(s) to take from each given file (repeatable; default
        /// `memplug_handler`).
        #[arg(long = "symbol", value_name = "NAME")]
        symbols: Vec<String>,
        /// Print a JSON array, one object per candidate.
        #[arg(long)]
        json: bool,
    },
}

/// Parse the command line, set up logging, run, and return the exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    run(cli)
}

/// Log to stderr, filtered by `RUST_LOG` (default `warn`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::List { paths, json } => list(&paths, json),
        Command::Inspect { file, symbol, json } => inspect(Candidate::new(file).with_symbol(symbol), json),
        Command::Check { paths, symbols, json } => check(&paths, &symbols, json),
    }
}

fn candidates(paths: &[PathBuf], symbols: &[String]) -> Vec<Candidate> {
    if paths.is_empty() {
        return discover::discover();
    }
    let base = discover::candidates_from(paths);
    if symbols.is_empty() {
        return base;
    }
    base.iter()
        .flat_map(|c| symbols.iter().map(move |s| c.clone().with_symbol(s.clone())))
        .collect()
}

/// One candidate's report, as `check` prints it.
struct Report {
    outcome: Outcome,
    checks: Vec<CheckResult>,
}

impl Report {
    fn ok(&self) -> bool {
        self.outcome.result.is_ok() && check::tally(&self.checks).failed == 0
    }

    fn json(&self) -> Value {
        let c = &self.outcome.candidate;
        match &self.outcome.result {
            Ok(h) => {
                let info = h.info();
                let t = check::tally(&self.checks);
                json!({
                    "path": c.path,
                    "symbol": c.symbol,
                    "status": if t.failed == 0 { "ok" } else { "rejected" },
                    "reason": if t.failed == 0 { Value::Null } else { json!("conformance-failed") },
                    "message": if t.failed == 0 { String::new() } else { failed_summary(&self.checks) },
                    "name": info.name,
                    "version": info.version.to_string(),
                    "abi": info.abi(),
                    "flags": info.flag_names(),
                    "thread_safe": info.thread_safe(),
                    "checks": { "passed": t.passed, "failed": t.failed, "skipped": t.skipped, "results": self.checks },
                })
            }
            Err(e) => json!({
                "path": c.path,
                "symbol": c.symbol,
                "status": "rejected",
                "reason": e.code(),
                "message": e.refusal.to_string(),
                "name": Value::Null,
                "version": Value::Null,
                "abi": Value::Null,
                "flags": [],
                "thread_safe": Value::Null,
                "checks": { "passed": 0, "failed": 0, "skipped": 0, "results": [] },
            }),
        }
    }
}

fn failed_summary(checks: &[CheckResult]) -> String {
    checks
        .iter()
        .filter(|r| r.verdict == Verdict::Failed)
        .map(|r| format!("{}: {}", r.name, r.detail))
        .collect::<Vec<_>>()
        .join("; ")
}

fn check(paths: &[PathBuf], symbols: &[String], json_out: bool) -> ExitCode {
    let registry = Registry::new();
    let found = candidates(paths, symbols);
    if found.is_empty() {
        eprintln!(
            "memplug: no plugin candidates found (searched: {}). Pass files or directories, or set {}.",
            describe_search(paths),
            discover::PATH_ENV
        );
        return ExitCode::from(1);
    }
    let reports: Vec<Report> = registry
        .load_all(&found)
        .into_iter()
        .map(|outcome| {
            let checks = match &outcome.result {
                Ok(h) => check::conformance(*h),
                Err(_) => Vec::new(),
            };
            Report { outcome, checks }
        })
        .collect();
    if json_out {
        let arr: Vec<Value> = reports.iter().map(Report::json).collect();
        println!("{}", serde_json::to_string_pretty(&arr).expect("JSON values serialise"));
    } else {
        print_table(&reports);
    }
    if reports.iter().all(Report::ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn describe_search(paths: &[PathBuf]) -> String {
    let dirs = if paths.is_empty() {
        discover::search_path()
    } else {
        paths.to_vec()
    };
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn row(h: Handler, checks: Option<Tally>) -> [String; 5] {
    let info = h.info();
    let flags = info.flag_names();
    [
        info.name.clone(),
        info.version.to_string(),
        info.abi(),
        if flags.is_empty() { "-".into() } else { flags.join(",") },
        checks.map_or("-".into(), |t| format!("{}/{}", t.passed, t.passed + t.failed)),
    ]
}

fn print_table(reports: &[Report]) {
    let mut rows: Vec<[String; 7]> = Vec::new();
    let mut notes: Vec<Vec<String>> = Vec::new();
    for r in reports {
        let src = r.outcome.candidate.to_string();
        match &r.outcome.result {
            Ok(h) => {
                let t = check::tally(&r.checks);
                let [name, version, abi, flags, checks] = row(*h, Some(t));
                let status = if t.failed == 0 { "ok" } else { "failed" };
                rows.push([status.into(), name, version, abi, flags, checks, src]);
                notes.push(
                    r.checks
                        .iter()
                        .filter(|c| c.verdict != Verdict::Passed)
                        .map(|c| {
                            format!(
                                "{} {}: {}",
                                if c.verdict == Verdict::Failed {
                                    "FAILED"
                                } else {
                                    "skipped"
                                },
                                c.name,
                                c.detail
                            )
                        })
                        .collect(),
                );
            }
            Err(e) => {
                let dash = || "-".to_string();
                rows.push(["rejected".into(), dash(), dash(), dash(), dash(), dash(), src]);
                notes.push(vec![format!("[{}] {}", e.code(), e.refusal)]);
            }
        }
    }
    let header = ["STATUS", "NAME", "VERSION", "ABI", "FLAGS", "CHECKS", "SOURCE"];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: [&str; 7]| {
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
    println!("{}", line(header));
    for (r, n) in rows.iter().zip(&notes) {
        println!("{}", line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6]]));
        for note in n {
            println!("    {note}");
        }
    }
    let ok = reports.iter().filter(|r| r.ok()).count();
    println!(
        "\n{ok} ok, {} rejected or failing, of {} candidates",
        reports.len() - ok,
        reports.len()
    );
}

fn list(paths: &[PathBuf], json_out: bool) -> ExitCode {
    let registry = Registry::new();
    let found = candidates(paths, &[]);
    let outcomes = registry.load_all(&found);
    if json_out {
        let arr: Vec<Value> = outcomes
            .iter()
            .map(|o| match &o.result {
                Ok(h) => json!({"path": o.candidate.path, "status": "ok", "name": h.name(),
                                "version": h.info().version.to_string(), "abi": h.info().abi(),
                                "flags": h.info().flag_names()}),
                Err(e) => json!({"path": o.candidate.path, "status": "rejected", "reason": e.code(),
                                 "message": e.refusal.to_string()}),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&arr).expect("JSON values serialise"));
    } else {
        if outcomes.is_empty() {
            println!("no plugins found in: {}", describe_search(paths));
        }
        for o in &outcomes {
            match &o.result {
                Ok(h) => {
                    let [name, version, abi, flags, _] = row(*h, None);
                    println!(
                        "ok        {name:<20} {version:<10} abi {abi:<5} {flags:<14} {}",
                        o.candidate
                    );
                }
                Err(e) => println!("rejected  {:<20} [{}] {}", o.candidate.to_string(), e.code(), e.refusal),
            }
        }
    }
    if outcomes.iter().all(|o| o.result.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn inspect(candidate: Candidate, json_out: bool) -> ExitCode {
    let i = load::inspect(&candidate);
    let verdict_ok = i.verdict.is_ok();
    if json_out {
        let fields = i.fields.as_ref().map(|f| {
            json!({
                "name": String::from_utf8_lossy(&f.name), "name_terminated": f.name_terminated,
                "version": String::from_utf8_lossy(&f.version), "version_terminated": f.version_terminated,
                "ctx": format!("{:#x}", f.ctx),
                "malloc": format!("{:#x}", f.functions.malloc), "calloc": format!("{:#x}", f.functions.calloc),
                "realloc": format!("{:#x}", f.functions.realloc), "free": format!("{:#x}", f.functions.free),
            })
        });
        let v = json!({
            "path": candidate.path, "symbol": candidate.symbol,
            "magic": i.prefix.map(|p| format!("{:#010x}", p.magic)),
            "abi": i.prefix.map(|p| format!("{}.{}", p.abi_major, p.abi_minor)),
            "struct_size": i.prefix.map(|p| p.struct_size),
            "flags": i.prefix.map(|p| flag_names(p.flags)),
            "fields": fields,
            "stats": i.has_stats,
            "status": if verdict_ok { "ok" } else { "rejected" },
            "reason": i.verdict.as_ref().err().map(|e| e.code()),
            "message": i.verdict.as_ref().err().map(|e| e.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("JSON values serialise"));
    } else {
        println!("file:         {}", candidate.path.display());
        println!("symbol:       {}", candidate.symbol);
        if let Some(p) = i.prefix {
            let magic_ok = if p.magic == memplug_abi::MAGIC { "ok" } else { "WRONG" };
            println!("magic:        {:#010x} ({magic_ok})", p.magic);
            println!(
                "abi:          {}.{} (host speaks {}.{})",
                p.abi_major,
                p.abi_minor,
                memplug_abi::ABI_MAJOR,
                memplug_abi::ABI_MINOR
            );
            println!(
                "struct_size:  {} bytes (ABI 1.0 is {}; the host reads {})",
                p.struct_size,
                memplug_abi::SIZE_V1_0,
                (p.struct_size as usize).min(memplug_abi::SIZE_V1_0)
            );
            println!("flags:        {:#x} [{}]", p.flags, flag_names(p.flags).join(", "));
        }
        if let Some(f) = &i.fields {
            let term = |t: bool| if t { "" } else { " (NOT NUL-terminated)" };
            println!(
                "name:         {:?}{}",
                String::from_utf8_lossy(&f.name),
                term(f.name_terminated)
            );
            println!(
                "version:      {:?}{}",
                String::from_utf8_lossy(&f.version),
                term(f.version_terminated)
            );
            println!("ctx:          {:#x}", f.ctx);
            for (name, addr) in f.functions.fields() {
                println!(
                    "{:<13} {}",
                    format!("{name}:"),
                    if addr == 0 {
                        "NULL".to_string()
                    } else {
                        format!("{addr:#x}")
                    }
                );
            }
        }
        println!(
            "stats:        {}",
            if i.has_stats {
                format!("exported ({}{})", candidate.symbol, memplug_abi::STATS_SUFFIX)
            } else {
                "none".into()
            }
        );
        match &i.verdict {
            Ok(_) => println!("verdict:      ok"),
            Err(e) => println!("verdict:      rejected [{}] {e}", e.code()),
        }
    }
    if verdict_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
