//! The `memplug` command line: `list`, `inspect`, `check`.
//!
//! Exit status: 0 when everything is ok, 1 when any candidate is refused or
//! fails a check, 2 for a usage error. Logs go to stderr, filtered by
//! `RUST_LOG` (default `warn`).

use crate::check::{self, CheckResult, Tally, Verdict};
use crate::discover::{self, Candidate};
use crate::handler::{AlignedStrategy, Handler, Source, flag_names};
use crate::load;
use crate::registry::{Outcome, Policy, PolicyError, Registry};
use crate::symbols::SymbolSpec;
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

/// What the registry accepts beyond the ABI's rules.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PolicyArgs {
    /// Require a plugin version: `NAME REQ`, e.g. 'aligned >=1.2, <2'
    /// (repeatable). A miss is refused as `version-unsatisfied`.
    #[arg(long = "require", value_name = "SPEC")]
    pub require: Vec<String>,
    /// Mark an ABI version deprecated, e.g. `1.0` (repeatable): such plugins
    /// still load, with a warning and a `deprecated` mark.
    #[arg(long = "deprecate-abi", value_name = "MAJOR.MINOR")]
    pub deprecate_abi: Vec<String>,
}

impl PolicyArgs {
    /// The policy these arguments describe.
    pub fn policy(&self) -> Result<Policy, PolicyError> {
        let mut p = Policy::default();
        for r in &self.require {
            p.require(r)?;
        }
        for a in &self.deprecate_abi {
            p.deprecate_abi(a)?;
        }
        Ok(p)
    }
}

/// An allocator taken by symbol name from a library, on the command line
/// (the same as a `*.memplug.toml` manifest).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SymbolArgs {
    /// Take plain C allocation functions from this library: a path, or a
    /// soname for the dynamic loader (e.g. libmimalloc.so.2).
    #[arg(long, value_name = "LIB", requires_all = ["malloc", "free"])]
    pub library: Option<String>,
    /// The handler's name (default: from the library's file name).
    #[arg(long, requires = "library")]
    pub name: Option<String>,
    /// `void *malloc(size_t)` symbol.
    #[arg(long, value_name = "SYMBOL", requires = "library")]
    pub malloc: Option<String>,
    /// `void *calloc(size_t, size_t)` symbol (default: derived).
    #[arg(long, value_name = "SYMBOL", requires = "library")]
    pub calloc: Option<String>,
    /// `void *realloc(void *, size_t)` symbol (default: derived).
    #[arg(long, value_name = "SYMBOL", requires = "library")]
    pub realloc: Option<String>,
    /// `void free(void *)` symbol.
    #[arg(long, value_name = "SYMBOL", requires = "library")]
    pub free: Option<String>,
    /// `void sized_free(void *, size_t)` symbol, used instead of free.
    #[arg(long, value_name = "SYMBOL", requires = "library")]
    pub sized_free: Option<String>,
    /// `void *aligned_alloc(size_t alignment, size_t size)` symbol.
    #[arg(long, value_name = "SYMBOL", requires = "library")]
    pub aligned_alloc: Option<String>,
    /// The functions are thread-safe (default: the host locks every call).
    #[arg(long, requires = "library")]
    pub thread_safe: bool,
    /// The alignment every block has (default 16).
    #[arg(long, value_name = "BYTES", requires = "library")]
    pub alignment: Option<u64>,
}

impl SymbolArgs {
    /// The spec these arguments describe, if `--library` was given.
    pub fn spec(&self) -> Option<SymbolSpec> {
        let library = self.library.as_ref()?;
        let name = self.name.clone().unwrap_or_else(|| name_from_library(library));
        let mut spec = SymbolSpec::new(&name, library, self.malloc.as_deref()?, self.free.as_deref()?)
            .thread_safe(self.thread_safe);
        spec.symbols.calloc = self.calloc.clone();
        spec.symbols.realloc = self.realloc.clone();
        spec.symbols.sized_free = self.sized_free.clone();
        spec.symbols.aligned_alloc = self.aligned_alloc.clone();
        spec.alignment = self.alignment;
        Some(spec)
    }
}

/// `libmimalloc.so.2` → `mimalloc`.
fn name_from_library(library: &str) -> String {
    let file = library.rsplit('/').next().unwrap_or(library);
    let stem = file.split(".so").next().unwrap_or(file);
    let stem = stem.strip_prefix("lib").unwrap_or(stem);
    let cleaned: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '_' }).collect();
    if cleaned.is_empty() { "symbols".into() } else { cleaned }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the plugins found on the search path (or in PATHs) with their status.
    List {
        /// Directories or files to list instead of the search path.
        paths: Vec<PathBuf>,
        /// Version requirements and deprecations.
        #[command(flatten)]
        policy: PolicyArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show a plugin's handler header field by field, as read, which fields
    /// came from the plugin and which are host defaults, and the verdict.
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
        /// Also make an instance of handler NAME with OPTIONS (its ABI 1.1
        /// `create`) and check it: `NAME:key=value,...` (repeatable).
        #[arg(long = "options", value_name = "NAME:OPTIONS")]
        options: Vec<String>,
        /// Version requirements and deprecations.
        #[command(flatten)]
        policy: PolicyArgs,
        /// An allocator made of a library's C functions.
        #[command(flatten)]
        library: Box<SymbolArgs>,
        /// Print a JSON array, one object per candidate (and per instance).
        #[arg(long)]
        json: bool,
    },
}

/// Parse the command line, set up logging, run, and return the exit status.
pub fn main() -> ExitCode {
    crate::raw::sys::default_sigpipe();
    let cli = Cli::parse();
    init_logging();
    run(cli)
}

/// Log to stderr, filtered by `RUST_LOG` (default `warn`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// Exit status for a usage error.
const USAGE: u8 = 2;

/// Run a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::List { paths, policy, json } => match policy.policy() {
            Ok(p) => list(&paths, p, json),
            Err(e) => usage_error(&e.to_string()),
        },
        Command::Inspect { file, symbol, json } => inspect(Candidate::new(file).with_symbol(symbol), json),
        Command::Check { paths, symbols, options, policy, library, json } => {
            let policy = match policy.policy() {
                Ok(p) => p,
                Err(e) => return usage_error(&e.to_string()),
            };
            let mut per_name: Vec<(String, String)> = Vec::new();
            for o in &options {
                match o.split_once(':') {
                    Some((name, opts)) if !name.is_empty() => per_name.push((name.to_string(), opts.to_string())),
                    _ => {
                        return usage_error(&format!(
                            "--options {o:?}: write NAME:key=value,... e.g. aligned:alignment=4096"
                        ));
                    }
                }
            }
            check(&paths, &symbols, library.spec(), &per_name, policy, json)
        }
    }
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("memplug: {msg}");
    ExitCode::from(USAGE)
}

fn candidates(paths: &[PathBuf], symbols: &[String]) -> Vec<Candidate> {
    if paths.is_empty() {
        return discover::discover();
    }
    let base = discover::candidates_from(paths);
    if symbols.is_empty() {
        return base;
    }
    base.iter().flat_map(|c| symbols.iter().map(move |s| c.clone().with_symbol(s.clone()))).collect()
}

/// One row of `check`: a candidate's handler (or an instance of it) with its
/// checks, or why it was refused.
struct Row {
    candidate: Candidate,
    result: Result<(Handler, Vec<CheckResult>), Refused>,
}

/// A refusal as `check` reports it.
struct Refused {
    code: &'static str,
    message: String,
    /// The handler's name, when it is known (e.g. bad options).
    name: Option<String>,
    options: Option<String>,
}

impl Row {
    fn ok(&self) -> bool {
        matches!(&self.result, Ok((_, checks)) if check::tally(checks).failed == 0)
    }

    fn json(&self) -> Value {
        let c = &self.candidate;
        match &self.result {
            Ok((h, checks)) => {
                let info = h.info();
                let t = check::tally(checks);
                json!({
                    "path": c.path,
                    "symbol": c.symbol,
                    "status": if t.failed == 0 { "ok" } else { "rejected" },
                    "reason": if t.failed == 0 { Value::Null } else { json!("conformance-failed") },
                    "message": if t.failed == 0 { String::new() } else { failed_summary(checks) },
                    "name": info.name,
                    "version": info.version.to_string(),
                    "abi": info.abi(),
                    "kind": if matches!(info.source, Source::Symbols { .. }) { "symbols" } else { "plugin" },
                    "deprecated": info.deprecated,
                    "flags": info.flag_names(),
                    "thread_safe": info.thread_safe(),
                    "alignment": h.alignment(),
                    "memory_kind": info.memory_kind_name(),
                    "aligned_alloc": match h.aligned_strategy() {
                        AlignedStrategy::Plugin => "plugin",
                        AlignedStrategy::OverAllocate => "host-over-allocation",
                    },
                    "takes_options": h.takes_options(),
                    "options": info.options,
                    "defaulted": info.defaulted,
                    "checks": { "passed": t.passed, "failed": t.failed, "skipped": t.skipped, "results": checks },
                })
            }
            Err(r) => json!({
                "path": c.path,
                "symbol": c.symbol,
                "status": "rejected",
                "reason": r.code,
                "message": r.message,
                "name": r.name,
                "version": Value::Null,
                "abi": Value::Null,
                "deprecated": false,
                "flags": [],
                "thread_safe": Value::Null,
                "options": r.options,
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

fn check(
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
            "memplug: no plugin candidates found (searched: {}). Pass files or directories, or set {}.",
            describe_search(paths),
            discover::PATH_ENV
        );
        return ExitCode::from(1);
    }
    let mut rows = Vec::new();
    let mut used = vec![false; options.len()];
    outcomes.extend(registry.load_all(&found));
    for outcome in outcomes {
        let candidate = outcome.candidate;
        let h = match outcome.result {
            Ok(h) => h,
            Err(e) => {
                let refused = Refused { code: e.code(), message: e.refusal.to_string(), name: None, options: None };
                rows.push(Row { candidate, result: Err(refused) });
                continue;
            }
        };
        rows.push(Row { candidate: candidate.clone(), result: Ok((h, check::conformance(h))) });
        for (k, (name, opts)) in options.iter().enumerate() {
            if name != h.name() {
                continue;
            }
            used[k] = true;
            let result = match h.instantiate(opts) {
                Ok(instance) => Ok((instance.handler(), check::conformance(instance.handler()))),
                Err(r) => Err(Refused {
                    code: r.code(),
                    message: r.to_string(),
                    name: Some(name.clone()),
                    options: Some(opts.clone()),
                }),
            };
            rows.push(Row { candidate: candidate.clone(), result });
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
        let arr: Vec<Value> = rows.iter().map(Row::json).collect();
        println!("{}", serde_json::to_string_pretty(&arr).expect("JSON values serialise"));
    } else {
        print_table(&rows);
    }
    if rows.iter().all(Row::ok) && !unused_options { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn describe_search(paths: &[PathBuf]) -> String {
    let dirs = if paths.is_empty() { discover::search_path() } else { paths.to_vec() };
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn row(h: Handler, checks: Option<Tally>) -> [String; 5] {
    let info = h.info();
    let mut flags: Vec<String> = info.flag_names().iter().map(|f| f.to_string()).collect();
    if !info.thread_safe() {
        flags.push("not-thread-safe(locked)".into());
    }
    if info.deprecated {
        flags.push("DEPRECATED-ABI".into());
    }
    let name = match &info.options {
        Some(o) => format!("{}[{o}]", info.name),
        None => info.name.clone(),
    };
    let abi = if matches!(info.source, Source::Symbols { .. }) { "symbols".to_string() } else { info.abi() };
    [
        name,
        info.version.to_string(),
        abi,
        if flags.is_empty() { "-".into() } else { flags.join(",") },
        checks.map_or("-".into(), |t| format!("{}/{}", t.passed, t.passed + t.failed)),
    ]
}

fn print_table(rows_in: &[Row]) {
    let mut rows: Vec<[String; 8]> = Vec::new();
    let mut notes: Vec<Vec<String>> = Vec::new();
    for r in rows_in {
        let src = r.candidate.to_string();
        match &r.result {
            Ok((h, checks)) => {
                let t = check::tally(checks);
                let [name, version, abi, flags, tally] = row(*h, Some(t));
                let status = if t.failed == 0 { "ok" } else { "failed" };
                rows.push([status.into(), name, version, abi, h.alignment().to_string(), flags, tally, src]);
                notes.push(
                    checks
                        .iter()
                        .filter(|c| c.verdict != Verdict::Passed)
                        .map(|c| {
                            let what = if c.verdict == Verdict::Failed { "FAILED" } else { "skipped" };
                            format!("{what} {}: {}", c.name, c.detail)
                        })
                        .collect(),
                );
            }
            Err(e) => {
                let dash = || "-".to_string();
                let name = match (&e.name, &e.options) {
                    (Some(n), Some(o)) => format!("{n}[{o}]"),
                    (Some(n), None) => n.clone(),
                    _ => dash(),
                };
                rows.push(["rejected".into(), name, dash(), dash(), dash(), dash(), dash(), src]);
                notes.push(vec![format!("[{}] {}", e.code, e.message)]);
            }
        }
    }
    let header = ["STATUS", "NAME", "VERSION", "ABI", "ALIGN", "FLAGS", "CHECKS", "SOURCE"];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: [&str; 8]| {
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
        println!("{}", line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7]]));
        for note in n {
            println!("    {note}");
        }
    }
    let ok = rows_in.iter().filter(|r| r.ok()).count();
    println!("\n{ok} ok, {} rejected or failing, of {} checked", rows_in.len() - ok, rows_in.len());
}

fn list(paths: &[PathBuf], policy: Policy, json_out: bool) -> ExitCode {
    let registry = Registry::with_policy(policy);
    let found = candidates(paths, &[]);
    let outcomes = registry.load_all(&found);
    if json_out {
        let arr: Vec<Value> = outcomes
            .iter()
            .map(|o| match &o.result {
                Ok(h) => json!({"path": o.candidate.path, "status": "ok", "name": h.name(),
                                "version": h.info().version.to_string(), "abi": h.info().abi(),
                                "deprecated": h.info().deprecated, "flags": h.info().flag_names()}),
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
                    println!("ok        {name:<20} {version:<10} abi {abi:<5} {flags:<24} {}", o.candidate);
                }
                Err(e) => println!("rejected  {:<20} [{}] {}", o.candidate.to_string(), e.code(), e.refusal),
            }
        }
    }
    if outcomes.iter().all(|o| o.result.is_ok()) { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// One ABI 1.1 field as `inspect` shows it: its value and where it came from.
struct FieldView {
    name: &'static str,
    value: String,
    source: &'static str,
    note: String,
}

fn v1_1_view(i: &load::Inspection) -> Vec<FieldView> {
    let Some(f) = &i.fields else { return Vec::new() };
    let addr = |a: usize| if a == 0 { "absent".to_string() } else { format!("{a:#x}") };
    let Some(v) = f.v1_1 else {
        let why = "default: the plugin is ABI 1.0";
        return vec![
            FieldView {
                name: "alignment",
                value: memplug_abi::DEFAULT_ALIGNMENT.to_string(),
                source: "default",
                note: why.into(),
            },
            FieldView { name: "memory_kind", value: "1 (kDLCPU)".into(), source: "default", note: why.into() },
            FieldView { name: "required_flags", value: "0x0".into(), source: "default", note: why.into() },
            FieldView {
                name: "aligned_alloc",
                value: "absent".into(),
                source: "default",
                note: "larger alignments are served by host over-allocation".into(),
            },
            FieldView { name: "create", value: "absent".into(), source: "default", note: "takes no options".into() },
            FieldView { name: "destroy", value: "absent".into(), source: "default", note: String::new() },
            FieldView {
                name: "stats",
                value: if i.has_stats {
                    format!("{}{}", i.candidate.symbol, memplug_abi::STATS_SUFFIX)
                } else {
                    "absent".into()
                },
                source: if i.has_stats { "plugin" } else { "default" },
                note: if i.has_stats { "the ABI 1.0 companion symbol".into() } else { "no statistics".into() },
            },
        ];
    };
    let fns = &f.functions;
    let plugin_or = |set: bool| if set { "plugin" } else { "default" };
    vec![
        FieldView {
            name: "alignment",
            value: if v.alignment == 0 { memplug_abi::DEFAULT_ALIGNMENT.to_string() } else { v.alignment.to_string() },
            source: plugin_or(v.alignment != 0),
            note: if v.alignment == 0 { "0 means the default".into() } else { String::new() },
        },
        FieldView {
            name: "memory_kind",
            value: format!("{} ({})", v.memory_kind.max(1), crate::validate::memory_kind_name(v.memory_kind.max(1))),
            source: plugin_or(v.memory_kind != 0),
            note: if v.memory_kind == 0 { "0 means kDLCPU".into() } else { String::new() },
        },
        FieldView {
            name: "required_flags",
            value: format!("{:#x}", v.required_flags),
            source: "plugin",
            note: if v.required_flags & memplug_abi::REQUIRE_SIZED_FREE != 0 {
                "sized-free".into()
            } else {
                String::new()
            },
        },
        FieldView {
            name: "aligned_alloc",
            value: addr(fns.aligned_alloc),
            source: plugin_or(fns.aligned_alloc != 0),
            note: if fns.aligned_alloc == 0 {
                "larger alignments are served by host over-allocation".into()
            } else {
                String::new()
            },
        },
        FieldView {
            name: "create",
            value: addr(fns.create),
            source: plugin_or(fns.create != 0),
            note: if fns.create == 0 { "takes no options".into() } else { "takes options".into() },
        },
        FieldView {
            name: "destroy",
            value: addr(fns.destroy),
            source: plugin_or(fns.destroy != 0),
            note: String::new(),
        },
        FieldView {
            name: "stats",
            value: if fns.stats == 0 && i.has_stats {
                format!("{}{}", i.candidate.symbol, memplug_abi::STATS_SUFFIX)
            } else {
                addr(fns.stats)
            },
            source: plugin_or(fns.stats != 0 || i.has_stats),
            note: if fns.stats == 0 && i.has_stats { "the ABI 1.0 companion symbol".into() } else { String::new() },
        },
    ]
}

fn inspect(candidate: Candidate, json_out: bool) -> ExitCode {
    let i = load::inspect(&candidate);
    let verdict_ok = i.verdict.is_ok();
    let v11 = v1_1_view(&i);
    if json_out {
        let fields = i.fields.as_ref().map(|f| {
            let mut m = serde_json::Map::new();
            m.insert("name".into(), json!(String::from_utf8_lossy(&f.name)));
            m.insert("name_terminated".into(), json!(f.name_terminated));
            m.insert("version".into(), json!(String::from_utf8_lossy(&f.version)));
            m.insert("version_terminated".into(), json!(f.version_terminated));
            m.insert("ctx".into(), json!(format!("{:#x}", f.ctx)));
            for (name, a) in f.functions.fields() {
                m.insert(name.into(), json!(format!("{a:#x}")));
            }
            for fv in &v11 {
                m.insert(fv.name.into(), json!({"value": fv.value, "source": fv.source, "note": fv.note}));
            }
            Value::Object(m)
        });
        let v = json!({
            "path": candidate.path, "symbol": candidate.symbol,
            "magic": i.prefix.map(|p| format!("{:#010x}", p.magic)),
            "abi": i.prefix.map(|p| format!("{}.{}", p.abi_major, p.abi_minor)),
            "struct_size": i.prefix.map(|p| p.struct_size),
            "host_reads": i.prefix.and_then(|p| p.readable_len().ok()),
            "flags": i.prefix.map(|p| flag_names(p.flags)),
            "fields": fields,
            "status": if verdict_ok { "ok" } else { "rejected" },
            "reason": i.verdict.as_ref().err().map(|e| e.code()),
            "message": i.verdict.as_ref().err().map(|e| e.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("JSON values serialise"));
    } else {
        println!("file:           {}", candidate.path.display());
        println!("symbol:         {}", candidate.symbol);
        if let Some(p) = i.prefix {
            let magic_ok = if p.magic == memplug_abi::MAGIC { "ok" } else { "WRONG" };
            println!("magic:          {:#010x} ({magic_ok})", p.magic);
            println!(
                "abi:            {}.{} (host speaks {}.{})",
                p.abi_major,
                p.abi_minor,
                memplug_abi::ABI_MAJOR,
                memplug_abi::ABI_MINOR
            );
            match p.readable_len() {
                Ok(n) => println!("struct_size:    {} bytes (the host reads {n})", p.struct_size),
                Err(_) => println!("struct_size:    {} bytes", p.struct_size),
            }
            println!("flags:          {:#x} [{}]", p.flags, flag_names(p.flags).join(", "));
        }
        if let Some(f) = &i.fields {
            let term = |t: bool| if t { "" } else { " (NOT NUL-terminated)" };
            println!("name:           {:?}{}", String::from_utf8_lossy(&f.name), term(f.name_terminated));
            println!("version:        {:?}{}", String::from_utf8_lossy(&f.version), term(f.version_terminated));
            println!("ctx:            {:#x}", f.ctx);
            for (name, addr) in f.functions.fields() {
                let shown = if addr == 0 { "NULL".to_string() } else { format!("{addr:#x}") };
                println!("{:<15} {shown}", format!("{name}:"));
            }
            for fv in &v11 {
                let note = if fv.note.is_empty() { String::new() } else { format!("; {}", fv.note) };
                println!("{:<15} {} ({}{note})", format!("{}:", fv.name), fv.value, fv.source);
            }
        }
        match &i.verdict {
            Ok(_) => println!("verdict:        ok"),
            Err(e) => println!("verdict:        rejected [{}] {e}", e.code()),
        }
    }
    if verdict_ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
