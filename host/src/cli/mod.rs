//! The command line: parsing, and dispatch to one file per command
//! (`check.rs`, `list.rs`, `inspect.rs`, `bench/`, `run/` and
//! `symbolize.rs`; `generate.rs`
//! the completions and man pages); `table.rs` renders
//! reports as a table, `args.rs` holds the arguments shared by several
//! commands.

mod args;
mod generate;
mod inspect;
mod jobs;
mod bench;
mod paths;
mod sys;
mod run;
mod symbolize;
mod table;
mod check;
mod install;
mod list;

use args::{IsolationArgs, PolicyArgs, SymbolArgs, TrustArgs};
use clap::{CommandFactory, Parser, Subcommand};
use memplug::Candidate;
use std::path::PathBuf;
use std::process::ExitCode;

/// Load memory allocators from shared libraries, check and inspect them.
#[derive(Debug, Parser)]
#[command(name = "memplug", version, about, long_about = None)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// List the plugins found on the search path (or in PATHs) with their status.
    List {
        /// Directories or files to list instead of the search path.
        paths: Vec<PathBuf>,
        /// Version requirements and deprecations.
        #[command(flatten)]
        policy: PolicyArgs,
        /// Where plugin code runs.
        #[command(flatten)]
        isolation: IsolationArgs,
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
        /// Where plugin code runs.
        #[command(flatten)]
        isolation: IsolationArgs,
        /// Which files are trusted.
        #[command(flatten)]
        trust: TrustArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show the directories searched for plugins, in order, whether each
    /// exists, where `install` puts plugins, and where the verdict cache is.
    Paths {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check a plugin (or allocator manifest) in a worker process and, if it
    /// passes, copy it into the user (or system) plugin directory, mode 0644.
    Install {
        /// The plugin library (*.so) or manifest (*.memplug.toml).
        file: PathBuf,
        /// Which directory.
        #[command(flatten)]
        place: WhereArgs,
        /// Which files are trusted.
        #[command(flatten)]
        policy: PolicyArgs,
        /// Where plugin code runs.
        #[command(flatten)]
        isolation: IsolationArgs,
    },
    /// Remove an installed plugin, by its handler name or file name, from the
    /// user (or system) plugin directory.
    Uninstall {
        /// The handler's name (or the file's).
        name: String,
        /// Which directory.
        #[command(flatten)]
        place: WhereArgs,
        /// Which files are trusted.
        #[command(flatten)]
        policy: PolicyArgs,
        /// Where plugin code runs.
        #[command(flatten)]
        isolation: IsolationArgs,
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
        /// Where plugin code runs.
        #[command(flatten)]
        isolation: IsolationArgs,
        /// Print a JSON array, one object per candidate (and per instance).
        #[arg(long)]
        json: bool,
    },
    /// Measure every handler that passes the conformance pass on standard
    /// workloads, side by side with the built-in default_allocator: one
    /// table per workload with ns per operation and the ratio.
    Bench(Box<bench::BenchArgs>),
    /// Check a handler, then run PROGRAM with its heap (malloc, free,
    /// operator new, ...) on it: the interposer is preloaded (LD_PRELOAD).
    /// Exits with the program's status (128 + the signal's number if one
    /// ended it); 2 if the handler is refused (the program is not started).
    Run(Box<run::RunArgs>),
    /// Name the frames of a heap report that a debugging plugin printed
    /// without `memplug run` (each frame `#N 0x… (module+0x…)`): read it on
    /// stdin, write it on stdout with functions, files and lines.
    Symbolize,
    /// Print the shell completion script for SHELL on stdout, e.g.
    /// `memplug completions bash > ~/.local/share/bash-completion/completions/memplug`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (memplug.1, memplug-run.1, ...) into DIR, for
    /// packagers: scripts/install.sh and the .deb install them.
    ManPages {
        /// The directory to write into (made if missing).
        dir: PathBuf,
    },
}

/// Which plugin directory `install` and `uninstall` use.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
#[group(multiple = false)]
struct WhereArgs {
    /// The user directory ($XDG_DATA_HOME/memplug/plugins; the default).
    #[arg(long)]
    user: bool,
    /// The system directory (the first of MEMPLUG_SYSTEM_PLUGIN_PATH, else
    /// /usr/local/lib/memplug/plugins).
    #[arg(long)]
    system: bool,
}

/// Exit status for a usage error.
const USAGE: u8 = 2;

/// Parse the command line, set up logging, run, and return the exit status.
/// Started with [`memplug::probe::WORKER_ARG`], serve as a worker process
/// instead.
pub(crate) fn main() -> ExitCode {
    sys::default_sigpipe();
    if std::env::args_os().nth(1).is_some_and(|a| a == memplug::probe::WORKER_ARG) {
        init_logging();
        return memplug::worker::serve_with(Some(bench::job));
    }
    let cli = Cli::parse();
    init_logging();
    run(cli)
}

/// Log to stderr, filtered by `RUST_LOG` (default `warn`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colours only on a terminal: a worker's log lines reach the user through
    // its parent, which escapes control characters.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).try_init();
}

/// Run a parsed command line.
fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::List { paths, policy, isolation, json } => match policy.policy() {
            Ok(p) => list::run(&paths, p, &isolation, json),
            Err(e) => usage_error(&e.to_string()),
        },
        Command::Paths { json } => paths::run(json),
        Command::Install { file, place, policy, isolation } => match policy.policy() {
            Ok(p) => install::install(&file, place.system, p, &isolation),
            Err(e) => usage_error(&e.to_string()),
        },
        Command::Uninstall { name, place, policy, isolation } => match policy.policy() {
            Ok(p) => install::uninstall(&name, place.system, p, &isolation),
            Err(e) => usage_error(&e.to_string()),
        },
        Command::Inspect { file, symbol, trust, isolation, json } => match trust.trust() {
            Ok(t) => inspect::run(Candidate::new(file).with_symbol(symbol), t, &isolation, json),
            Err(e) => usage_error(&e.to_string()),
        },
        Command::Check { paths, symbols, options, policy, library, isolation, json } => {
            let policy = match policy.policy() {
                Ok(p) => p,
                Err(e) => return usage_error(&e.to_string()),
            };
            match instance_options(&options) {
                Ok(per_name) => check::run(&paths, &symbols, library.spec(), &per_name, policy, &isolation, json),
                Err(e) => usage_error(&e),
            }
        }
        Command::Bench(args) => bench::run(*args),
        Command::Run(args) => run::run(*args),
        Command::Symbolize => symbolize::run(),
        Command::Completions { shell } => generate::completions(Cli::command(), shell),
        Command::ManPages { dir } => generate::man_pages(Cli::command(), &dir),
    }
}

/// `--options NAME:key=value,...` values as `(name, options)` pairs.
fn instance_options(options: &[String]) -> Result<Vec<(String, String)>, String> {
    options
        .iter()
        .map(|o| match o.split_once(':') {
            Some((name, opts)) if !name.is_empty() => Ok((name.to_string(), opts.to_string())),
            _ => Err(format!("--options {o:?}: write NAME:key=value,... e.g. aligned:alignment=4096")),
        })
        .collect()
}

/// Report a usage error on stderr; exit status 2.
fn usage_error(msg: &str) -> ExitCode {
    eprintln!("memplug: {}", memplug::text::escape(msg));
    ExitCode::from(USAGE)
}

/// The candidates of `paths` (the search path when empty), each with every
/// entry symbol in `symbols` (the default entry when empty).
fn candidates(paths: &[PathBuf], symbols: &[String]) -> Vec<Candidate> {
    if paths.is_empty() {
        return memplug::discover::discover();
    }
    let base = memplug::discover::candidates_from(paths);
    if symbols.is_empty() {
        return base;
    }
    base.iter().flat_map(|c| symbols.iter().map(move |s| c.clone().with_symbol(s.clone()))).collect()
}

/// How `candidate`, one of [`candidates`]`(paths, ..)`, was found: by a
/// directory scan (the search path, or a directory in `paths`), or named in
/// `paths`.
fn found_by(paths: &[PathBuf], candidate: &Candidate) -> memplug::discover::Found {
    use memplug::discover::Found;
    if paths.iter().any(|p| *p == candidate.path && !p.is_dir()) { Found::Explicit } else { Found::Scan }
}

/// The directories searched, for messages.
fn describe_search(paths: &[PathBuf]) -> String {
    let dirs = if paths.is_empty() { memplug::discover::search_path() } else { paths.to_vec() };
    dirs.iter().map(|d| memplug::text::escape_os(d.as_os_str())).collect::<Vec<_>>().join(", ")
}

/// Print reports as a JSON array (keys sorted, as `serde_json` maps are).
fn print_json(reports: &impl serde::Serialize) {
    let value = serde_json::to_value(reports).expect("reports serialise");
    println!("{}", serde_json::to_string_pretty(&value).expect("JSON values serialise"));
}
