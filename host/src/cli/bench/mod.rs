//! `memplug bench`: choose an allocator with numbers. Loads what `check`
//! loads, conformance-checks every handler (one that fails is named and not
//! benchmarked), and runs the standard workloads (`workloads.rs`) through
//! the host, interleaved with the built-in `default_allocator` so that every
//! figure is a ratio measured side by side in the same rounds
//! (`runner.rs`). One table per workload, or `--json` (`render.rs`).
//!
//! Files: `setup.rs` (loading and checking), `workloads.rs`, `block.rs`
//! (the raw blocks, the only unsafe code), `runner.rs`, `render.rs`.

mod block;
mod render;
mod runner;
mod setup;
mod workloads;

use super::args::{PolicyArgs, SymbolArgs};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use workloads::Workload;

/// The arguments of `memplug bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// Files or directories to benchmark (default: the search path).
    paths: Vec<PathBuf>,
    /// Entry symbol(s) to take from each given file (repeatable).
    #[arg(long = "symbol", value_name = "NAME")]
    symbols: Vec<String>,
    /// Also benchmark an instance of handler NAME made with OPTIONS:
    /// `NAME:key=value,...` (repeatable).
    #[arg(long = "options", value_name = "NAME:OPTIONS")]
    options: Vec<String>,
    /// Benchmark only the handler NAME (repeatable; the built-in
    /// `default_allocator` always runs, as the baseline of the ratios).
    #[arg(long = "handler", value_name = "NAME")]
    handlers: Vec<String>,
    /// Run only workload NAME (repeatable; default: all).
    #[arg(long = "workload", value_name = "NAME", value_enum)]
    workloads: Vec<Workload>,
    /// Threads of the `threads` workload (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Rounds per workload (default: as many as fit about a second).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    rounds: Option<u32>,
    /// Shorter blocks and fewer rounds: a rough picture in about a second.
    #[arg(long)]
    quick: bool,
    /// Version requirements and deprecations.
    #[command(flatten)]
    policy: PolicyArgs,
    /// An allocator made of a library's C functions.
    #[command(flatten)]
    library: Box<SymbolArgs>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    json: bool,
}

/// A progress line on stderr, drawn only when stderr is a terminal.
fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {msg}")
        .expect("a valid template")
        .progress_chars("=> ");
    bar.set_style(style);
    bar
}

/// Run `memplug bench`.
pub(crate) fn run(args: BenchArgs) -> ExitCode {
    let options = match super::instance_options(&args.options) {
        Ok(o) => o,
        Err(e) => return super::usage_error(&e),
    };
    let policy = match args.policy.policy() {
        Ok(p) => p,
        Err(e) => return super::usage_error(&e.to_string()),
    };
    let bar = progress_bar();
    bar.set_prefix("checking");
    let load = setup::Load {
        paths: &args.paths,
        symbols: &args.symbols,
        spec: args.library.spec(),
        options: &options,
        policy,
        only: &args.handlers,
    };
    let setup = match setup::prepare(load, |name| bar.set_message(name.to_string())) {
        Ok(s) => s,
        Err(setup::Unable::Usage(e)) => {
            bar.finish_and_clear();
            return super::usage_error(&e);
        }
        Err(setup::Unable::NothingFound(e)) => {
            bar.finish_and_clear();
            eprintln!("memplug: {e}");
            return ExitCode::from(1);
        }
    };
    let threads =
        args.threads.map(usize::from).unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let settings = runner::Settings { quick: args.quick, rounds: args.rounds.map(|r| r as usize), threads };
    let mut chosen = if args.workloads.is_empty() { Workload::ALL.to_vec() } else { args.workloads.clone() };
    chosen.sort();
    chosen.dedup();
    let mut measured = Vec::new();
    for w in chosen {
        bar.set_prefix(w.name());
        bar.set_message(format!("{} variants", setup.variants.len()));
        bar.set_position(0);
        measured.push(runner::measure(w, &setup.variants, &settings, |round, rounds| {
            bar.set_length(rounds as u64);
            bar.set_position(round as u64);
        }));
    }
    bar.finish_and_clear();
    if args.json {
        super::print_json(&render::json(&setup.variants, &setup.entries, &measured, args.quick, threads));
    } else {
        render::tables(&setup.variants, &setup.entries, &measured);
    }
    let all_ran = measured.iter().all(|m| m.rows.iter().all(|r| r.error.is_none()));
    if all_ran && setup.entries.iter().all(|e| e.status == "benchmarked") {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
