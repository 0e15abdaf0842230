//! `memplug bench`: choose an allocator with numbers. Checks what `check`
//! checks, in worker processes (one that fails is named and not
//! benchmarked), and runs the standard workloads (`workloads.rs`) on each
//! handler that passed in a worker process of its own, interleaved with the
//! built-in `default_allocator` so that every figure is a ratio measured
//! side by side in the same rounds (`runner.rs`, `job.rs`). A handler whose
//! worker crashes, hangs or exits is reported so (`crashed`, `timed-out`,
//! `no-report`); the others' figures stand. One table per workload, or
//! `--json` (`render.rs`).
//!
//! Files: `setup.rs` (finding and checking), `job.rs` (the bench worker,
//! both sides), `workloads.rs`, `block.rs` (the raw blocks, the only unsafe
//! code), `runner.rs`, `render.rs`.

mod block;
mod workloads;
mod runner;
mod job;
mod setup;
mod render;

pub(crate) use job::job;

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
    let worker = match std::env::current_exe() {
        Ok(exe) => memplug::probe::Worker::new(exe),
        Err(e) => {
            eprintln!("memplug: cannot find its own executable to start bench workers ({e})");
            return ExitCode::from(1);
        }
    };
    let bar = progress_bar();
    bar.set_prefix("checking");
    let load = setup::Load {
        paths: &args.paths,
        symbols: &args.symbols,
        spec: args.library.spec(),
        options: &options,
        policy: &policy,
        only: &args.handlers,
    };
    let setup::Setup { targets, mut entries } = match setup::prepare(load) {
        Ok(s) => s,
        Err(setup::Unable::Usage(e)) => {
            bar.finish_and_clear();
            return super::usage_error(&e);
        }
        Err(setup::Unable::NothingFound(e)) => {
            bar.finish_and_clear();
            eprintln!("memplug: {}", memplug::text::escape(&e));
            return ExitCode::from(1);
        }
    };
    let threads =
        args.threads.map(usize::from).unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let settings = runner::Settings { quick: args.quick, rounds: args.rounds.map(|r| r as usize), threads };
    let mut chosen = if args.workloads.is_empty() { Workload::ALL.to_vec() } else { args.workloads.clone() };
    chosen.sort();
    chosen.dedup();

    // The baseline alone first: it sizes the blocks and the rounds of every
    // workload for all the handlers' workers.
    let share = 1 + targets.iter().map(|t| job::lockings(t.subject.thread_safe).len()).sum::<usize>();
    let plans = chosen.iter().map(|&workload| runner::Plan { workload, fixed: None, share }).collect();
    bar.set_prefix("measuring");
    bar.set_length(targets.len() as u64 + 1);
    bar.set_message(memplug::current::builtin().name());
    let mut measured = match job::run(&worker, None, &job::Params { settings, plans }, &policy) {
        Ok(m) => m,
        Err(f) => {
            bar.finish_and_clear();
            eprintln!(
                "memplug: the baseline could not be measured: [{}] {}",
                f.reason,
                memplug::text::escape(&f.message)
            );
            return ExitCode::from(1);
        }
    };
    let builtin = memplug::current::builtin().name().to_string();
    let mut rows = vec![render::Row { label: builtin, locking: workloads::Locking::None }];
    let plans: Vec<runner::Plan> = measured
        .iter()
        .map(|m| runner::Plan {
            workload: m.workload,
            fixed: Some((m.ops_per_block.max(m.workload.min_ops()), m.rounds.max(1))),
            share,
        })
        .collect();
    let params = job::Params { settings, plans };
    for (k, target) in targets.iter().enumerate() {
        bar.set_position(k as u64 + 1);
        bar.set_message(memplug::text::escape(&target.label));
        match job::run(&worker, Some(&target.subject), &params, &policy) {
            Ok(theirs) => {
                for (m, t) in measured.iter_mut().zip(theirs) {
                    // Their first row is their own baseline, which their
                    // ratios are relative to.
                    m.rows.extend(t.rows.into_iter().skip(1));
                }
                for &locking in job::lockings(target.subject.thread_safe) {
                    rows.push(render::Row { label: target.label.clone(), locking });
                }
                entries.push(target.entry(None));
            }
            Err(failure) => entries.push(target.entry(Some(failure))),
        }
    }
    bar.finish_and_clear();
    if args.json {
        super::print_json(&render::json(&rows, &entries, &measured, args.quick, threads));
    } else {
        render::tables(&rows, &entries, &measured);
    }
    let all_ran = measured.iter().all(|m| m.rows.iter().all(|r| r.error.is_none()));
    if all_ran && entries.iter().all(|e| e.status == "benchmarked") { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
