//! `memplug run`: check a handler exactly as `memplug check` does (in a
//! worker process, through the verdict cache), then run a program with its
//! heap on it — the interposer `libmemplug_preload.so` preloaded
//! (`LD_PRELOAD`), the checked plugin named in the environment — and exit
//! with the program's status (128 + the signal's number when a signal ended
//! it). `report.rs` reads what the interposer wrote at exit and shows it;
//! `limits.rs` warns first when `vm.max_map_count` is low for `guard`.

mod env;
mod limits;
mod profile;
mod program;
mod summary;
mod trace;

use super::args::{IsolationArgs, PolicyArgs};
use super::jobs;
use env::{file_id, manifest_env, name, switch};
use memplug::Candidate;
use memplug::discover::CandidateKind;
use memplug::discover::Found;
use memplug::probe::{Request, Task};
use memplug::report::Report;
use memplug::symbols::SymbolSpec;
use memplug_abi::run as var;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The interposer's file name.
pub(crate) const PRELOAD_FILE: &str = memplug::discover::INTERPOSER_FILE;
/// Environment variable naming the interposer to use instead of the one
/// found beside the `memplug` executable.
pub(crate) const PRELOAD_ENV: &str = "MEMPLUG_PRELOAD";
/// Exit status when the handler is refused or the program cannot start.
const REFUSED: u8 = 2;

/// `memplug run`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The handler: its name (found on the search path and in
    /// --plugin-path), or a plugin file's path; `:OPTIONS` makes an instance
    /// with those options (e.g. `arena:region_size=1m`).
    #[arg(long, value_name = "NAME[:OPTIONS]")]
    handler: String,
    /// Also look for the handler in DIR (or file), before the search path
    /// (repeatable).
    #[arg(long = "plugin-path", value_name = "DIR")]
    plugin_path: Vec<PathBuf>,
    /// At exit, print what the handler served as a table on stderr.
    #[arg(long)]
    report: bool,
    /// At exit, write that report as JSON to FILE.
    #[arg(long = "report-json", value_name = "FILE")]
    report_json: Option<PathBuf>,
    /// Programs the program starts run on libc's allocator (the interposer
    /// removes itself from their LD_PRELOAD).
    #[arg(long = "no-children")]
    no_children: bool,
    /// If the plugin cannot be loaded in the program, stop it (status 125)
    /// instead of continuing on libc's allocator.
    #[arg(long)]
    strict: bool,
    /// With `guard` (side=end): put each block's last byte against the
    /// guard page, so that one byte past a block of any size faults; blocks
    /// are then aligned only as far as their size allows (C's `malloc`
    /// promises 16 bytes: for C programs under test, not interpreters).
    #[arg(long = "exact-ends")]
    exact_ends: bool,
    /// Write a sampled heap profile of the program to FILE (pprof's
    /// format, gzipped), with a flame graph of what was in use at the peak
    /// in FILE.svg; each other process of the run to FILE.<pid>.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// With --profile: the mean number of bytes allocated between two
    /// samples.
    #[arg(long = "profile-rate", value_name = "BYTES", default_value_t = 512 * 1024, requires = "profile",
          value_parser = clap::value_parser!(u64).range(1..))]
    profile_rate: u64,
    /// Version requirements and trust.
    #[command(flatten)]
    policy: PolicyArgs,
    /// Where the check runs plugin code.
    #[command(flatten)]
    isolation: IsolationArgs,
    /// The program and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

/// Why the program was not started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// The handler's check refused it (or its worker crashed).
    #[error("[{code}] the handler {what} was refused: {message}. The program was not started.")]
    Refused {
        /// What was asked for.
        what: String,
        /// The check's reason code.
        code: String,
        /// The check's message.
        message: String,
    },
    /// No candidate has a handler of that name.
    #[error(
        "[no-such-handler] no plugin with a handler named `{name}` was found (searched: {searched}){refused}. \
         The program was not started: see `memplug list`, or add a directory with --plugin-path."
    )]
    NotFound {
        /// The name asked for.
        name: String,
        /// The directories searched.
        searched: String,
        /// Refusals of files whose name mentions the handler's.
        refused: String,
    },
    /// Options for an allocator manifest, or a manifest that cannot be read.
    #[error("[run-manifest] {what}: {problem}. The program was not started.")]
    Manifest {
        /// What was asked for.
        what: String,
        /// What is wrong.
        problem: String,
    },
    /// The interposer is missing.
    #[error(
        "[no-interposer] {PRELOAD_FILE} was not found (looked in: {looked}). Install memplug with \
         scripts/install.sh (or `cargo build --workspace`), or set {PRELOAD_ENV} to its path."
    )]
    NoInterposer {
        /// Where it was looked for.
        looked: String,
    },
    /// The handler argument is malformed.
    #[error("[bad-argument] --handler {0:?}: write NAME, NAME:key=value,... or a plugin file's path")]
    BadHandler(String),
}

impl RunError {
    /// The stable reason code.
    pub(crate) fn code(&self) -> String {
        match self {
            RunError::Refused { code, .. } => code.clone(),
            RunError::NotFound { .. } => "no-such-handler".into(),
            RunError::Manifest { .. } => "run-manifest".into(),
            RunError::NoInterposer { .. } => "no-interposer".into(),
            RunError::BadHandler(_) => "bad-argument".into(),
        }
    }
}

/// The handler chosen and checked.
#[derive(Debug, Clone)]
pub(crate) struct Chosen {
    /// Its report from the check.
    pub(crate) report: Report,
    /// Options for its instance (empty: none).
    pub(crate) options: String,
    /// The allocator manifest, when the handler is made of a library's C
    /// functions.
    pub(crate) manifest: Option<SymbolSpec>,
}

/// Run `memplug run`.
pub(crate) fn run(args: RunArgs) -> ExitCode {
    let policy = match args.policy.policy() {
        Ok(p) => p,
        Err(e) => return super::usage_error(&e.to_string()),
    };
    let chosen = match choose(&args, &policy) {
        Ok(c) => c,
        Err(e) => return refuse(&e),
    };
    let preload = match find_preload() {
        Ok(p) => p,
        Err(e) => return refuse(&e),
    };
    if let Some(why) = program::why_not_preloaded(&args.program[0]) {
        eprintln!("memplug: warning: {why}; the handler will not serve it");
    }
    if chosen.manifest.is_none()
        && let Some(why) = limits::map_count_warning(chosen.report.name.as_deref(), &chosen.options)
    {
        eprintln!("memplug: warning: {}", memplug::text::escape(&why));
    }
    let report_file = (args.report || args.report_json.is_some()).then(|| summary::temp_file("report")).flatten();
    let trace_file = summary::temp_file("trace");
    let profile_file = args.profile.as_ref().and_then(|_| summary::temp_file("profile"));
    let mut cmd = Command::new(&args.program[0]);
    cmd.args(&args.program[1..]);
    let mut ld = preload.clone().into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        ld.push(":");
        ld.push(old);
    }
    // Absolute, so that programs it starts in other directories find it too.
    let plugin = &std::fs::canonicalize(&chosen.report.path).unwrap_or_else(|_| chosen.report.path.clone());
    // What an enclosing `memplug run` set is not this run's.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with(var::PREFIX) {
            cmd.env_remove(key);
        }
    }
    cmd.env("LD_PRELOAD", ld)
        .env(name(var::PRELOAD), &preload)
        .env(name(var::PLUGIN), plugin)
        .env(name(var::SYMBOL), &chosen.report.symbol)
        .env(name(var::OPTIONS), &chosen.options)
        .env(name(var::STRICT), switch(args.strict))
        .env(name(var::NO_CHILDREN), switch(args.no_children))
        .env(name(var::EXACT_ENDS), switch(args.exact_ends));
    match &chosen.manifest {
        Some(spec) => manifest_env(&mut cmd, spec),
        None => {
            if let Some(id) = file_id(plugin) {
                cmd.env(name(var::FILE_ID), id);
            }
        }
    }
    if let Some(f) = &report_file {
        cmd.env(name(var::REPORT), f);
    }
    if let Some(f) = &trace_file {
        cmd.env(name(var::TRACE), f);
    }
    if let Some(f) = &profile_file {
        cmd.env(name(var::PROFILE), f).env(name(var::PROFILE_RATE), args.profile_rate.to_string());
    }
    tracing::debug!(program = ?args.program, plugin = %plugin.display(), preload = %preload.display(), "starting");
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let shown = memplug::text::escape_os(&args.program[0]);
            eprintln!("memplug: [spawn-failed] cannot start {shown}: {e}");
            let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            return ExitCode::from(code);
        }
    };
    super::sys::ignore_interrupts();
    let top = child.id();
    let status = child.wait();
    let (code, signal) = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => (c, None),
            (None, Some(sig)) => (128 + sig, Some(sig)),
            (None, None) => (1, None),
        },
        Err(e) => {
            eprintln!("memplug: cannot wait for the program: {e}");
            (1, None)
        }
    };
    if let (Some(raw), Some(out)) = (&profile_file, &args.profile) {
        profile::write(raw, out, top, &memplug::text::escape_os(&args.program[0]));
    }
    let trace = trace_file.map(|f| trace::collect(&f)).unwrap_or_default();
    trace::print_errors(&trace, chosen.report.name.as_deref().unwrap_or("plugin"));
    if let Some(file) = report_file {
        let got = summary::read(&file);
        let _ = std::fs::remove_file(&file);
        let full = summary::RunReport::new(&chosen, &args.program, got, code, signal, trace);
        if args.report {
            full.print();
        }
        if let Some(out) = &args.report_json
            && let Err(e) = full.write_json(out)
        {
            eprintln!("memplug: cannot write the report to {}: {e}", memplug::text::escape_os(out.as_os_str()));
        }
    }
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1))
}

/// Say why the program was not started; exit status 2.
fn refuse(e: &RunError) -> ExitCode {
    tracing::debug!(reason = %e.code(), "the program was not started");
    eprintln!("memplug: {}", memplug::text::escape(&e.to_string()));
    ExitCode::from(REFUSED)
}

/// `NAME[:OPTIONS]` or `PATH[:OPTIONS]`: what to look for, and the options.
fn parse_handler(spec: &str) -> Result<(String, String), RunError> {
    let after = spec.rfind('/').map_or(0, |i| i + 1);
    let (what, options) = match spec[after..].find(':') {
        Some(i) => (&spec[..after + i], &spec[after + i + 1..]),
        None => (spec, ""),
    };
    if what.is_empty() {
        return Err(RunError::BadHandler(spec.to_string()));
    }
    Ok((what.to_string(), options.to_string()))
}

/// Whether `what` names a file rather than a handler.
fn is_path(what: &str) -> bool {
    what.contains('/') || what.ends_with(".so") || what.contains(".so.") || what.ends_with(".toml")
}

/// Check the candidates and pick the handler asked for (and its instance).
fn choose(args: &RunArgs, policy: &memplug::Policy) -> Result<Chosen, RunError> {
    let (what, options) = parse_handler(&args.handler)?;
    let by_path = is_path(&what);
    let candidates: Vec<Candidate> = if by_path {
        vec![Candidate::new(PathBuf::from(&what))]
    } else {
        let mut c = memplug::discover::candidates_from(&args.plugin_path);
        c.extend(memplug::discover::discover());
        c
    };
    let request = |candidate: Candidate, options: Vec<(String, String)>| Request {
        task: Task::Check,
        candidate: Some(candidate),
        spec: None,
        options,
        policy: policy.clone(),
        bench: None,
    };
    let requests: Vec<Request> = candidates.iter().cloned().map(|c| request(c, Vec::new())).collect();
    // --plugin-path and the search path are one search order: a later
    // handler of a name is shadowed.
    let how = vec![if by_path { Found::Explicit } else { Found::Scan }; requests.len()];
    let reports = jobs::refuse_duplicates(jobs::run(requests, &args.isolation), &how);
    let found = if by_path {
        reports.into_iter().next()
    } else {
        let hit = reports.iter().find(|r| r.name.as_deref() == Some(what.as_str()) && r.options.is_none()).cloned();
        if hit.is_none() {
            return Err(not_found(&what, &reports, &args.plugin_path));
        }
        hit
    };
    let Some(base) = found else { return Err(not_found(&what, &[], &args.plugin_path)) };
    refused_unless_ok(&base, &what)?;
    let candidate = Candidate { path: base.path.clone(), symbol: base.symbol.clone() };
    if candidate.kind() == CandidateKind::Manifest {
        let manifest = |problem: String| RunError::Manifest { what: what.clone(), problem };
        if !options.is_empty() {
            return Err(manifest("an allocator manifest takes no options".into()));
        }
        let spec = SymbolSpec::read_manifest(&base.path).map_err(|e| manifest(e.to_string()))?;
        return Ok(Chosen { report: base, options, manifest: Some(spec) });
    }
    if options.is_empty() {
        return Ok(Chosen { report: base, options, manifest: None });
    }
    let name = base.name.clone().unwrap_or_default();
    let again = jobs::run(vec![request(candidate, vec![(name.clone(), options.clone())])], &args.isolation);
    let instance = again.into_iter().flatten().find(|r| r.options.as_deref() == Some(options.as_str()));
    match instance {
        Some(r) => {
            refused_unless_ok(&r, &format!("{what}:{options}"))?;
            Ok(Chosen { report: base, options, manifest: None })
        }
        None => Err(RunError::Refused {
            what: format!("`{what}:{options}`"),
            code: "options-unsupported".into(),
            message: "the check made no instance with these options (does the handler take options?)".into(),
        }),
    }
}

/// `Ok` if `r` passed its check; else the refusal.
fn refused_unless_ok(r: &Report, what: &str) -> Result<(), RunError> {
    if !r.fails() && r.status == memplug::report::Status::Ok {
        return Ok(());
    }
    let message = r.message.clone();
    Err(RunError::Refused {
        what: format!("`{what}` ({})", r.source()),
        code: r.reason.clone().unwrap_or_else(|| r.status.as_str().to_string()),
        message,
    })
}

/// The `no-such-handler` error, naming refused files that look related.
fn not_found(name: &str, reports: &[Report], extra: &[PathBuf]) -> RunError {
    let related: Vec<String> = reports
        .iter()
        .filter(|r| r.fails() && r.path.file_name().is_some_and(|f| f.to_string_lossy().contains(name)))
        .map(|r| format!("{} [{}]", r.source(), r.reason.as_deref().unwrap_or(r.status.as_str())))
        .collect();
    let refused = if related.is_empty() { String::new() } else { format!("; refused: {}", related.join(", ")) };
    let mut dirs = extra.to_vec();
    dirs.extend(memplug::discover::search_path());
    let searched = dirs.iter().map(|d| memplug::text::escape_os(d.as_os_str())).collect::<Vec<_>>().join(", ");
    RunError::NotFound { name: name.to_string(), searched, refused }
}

/// The interposer: `$MEMPLUG_PRELOAD`, else beside the executable (the
/// cargo build tree: `target/<profile>/` and its `deps/`), else the
/// installed `lib/memplug/` (beside the plugin directories).
fn find_preload() -> Result<PathBuf, RunError> {
    let mut looked = Vec::new();
    if let Some(p) = std::env::var_os(PRELOAD_ENV).filter(|v| !v.is_empty()) {
        looked.push(PathBuf::from(p));
    } else {
        if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
            looked.push(dir.join(PRELOAD_FILE));
            looked.push(dir.join("deps").join(PRELOAD_FILE));
            looked.push(dir.join("../lib/memplug").join(PRELOAD_FILE));
        }
        for d in memplug::discover::search_path() {
            if let Some(parent) = d.parent() {
                looked.push(parent.join(PRELOAD_FILE));
            }
        }
    }
    for p in &looked {
        if p.is_file() {
            return std::fs::canonicalize(p).map_err(|_| RunError::NoInterposer { looked: p.display().to_string() });
        }
    }
    let looked = looked.iter().map(|p| memplug::text::escape_os(p.as_os_str())).collect::<Vec<_>>().join(", ");
    Err(RunError::NoInterposer { looked })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_specs() {
        let p = |s: &str| parse_handler(s).map_err(|e| e.code());
        assert_eq!(p("tracking").unwrap(), ("tracking".into(), String::new()));
        assert_eq!(p("arena:region=1M").unwrap(), ("arena".into(), "region=1M".into()));
        assert_eq!(p("/a:b/lib.so:x=1").unwrap(), ("/a:b/lib.so".into(), "x=1".into()));
        assert_eq!(p(":x").unwrap_err(), "bad-argument");
        assert!(is_path("./x.so") && is_path("libfoo.so.2") && !is_path("tracking"));
    }
}
