//! The interleaved runner of `memplug bench` (the method of the
//! repository's `benches/common`): this machine's speed may drift over
//! seconds, so variants are not timed one after another. Each round times
//! every variant for one short block, in a rotating order; a variant's
//! figure is the median over rounds of its ns per operation, and its ratio
//! the median of its time relative to the baseline's *in the same round*.
//!
//! Block length is calibrated on the baseline; the number of rounds fills a
//! time budget (a few seconds in all by default, `--quick` a fraction,
//! `--rounds` exact) — or both are given (a [`Plan`]'s `fixed`), so that the
//! worker of each handler runs the blocks the baseline's worker chose. For
//! `threads`, every round also runs each variant on one thread, for its
//! scaling. The peak is taken afterwards, in one untimed block per handler
//! that reports statistics.
//!
//! This runs in a bench worker process (`job.rs`), never in `memplug`'s own.

use super::workloads::{self, Locking, NoProbe, PeakProbe, State, Workload};
use memplug::Handler;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// A handler measured, and how it is locked.
#[derive(Debug, Clone)]
pub(crate) struct Variant {
    pub(crate) handler: Handler,
    pub(crate) locking: Locking,
}

/// How long to run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Settings {
    pub(crate) quick: bool,
    /// Exact rounds per workload, or `None` to fill the time budget.
    pub(crate) rounds: Option<usize>,
    /// Threads of the `threads` workload.
    pub(crate) threads: usize,
}

impl Settings {
    /// The time one block should take.
    pub(crate) fn block_time(&self, w: Workload) -> Duration {
        let ms = match (self.quick, w.spawns()) {
            (false, false) => 2.0,
            (false, true) => 8.0,
            (true, false) => 0.4,
            (true, true) => 2.0,
        };
        Duration::from_secs_f64(ms / 1000.0)
    }

    /// The time the rounds of one workload should take.
    fn budget(&self) -> Duration {
        Duration::from_millis(if self.quick { 100 } else { 900 })
    }

    fn min_rounds(&self) -> usize {
        if self.quick { 3 } else { 11 }
    }
}

/// One variant's figures in one workload.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Figures {
    pub(crate) ns_per_op: Option<f64>,
    /// Median per-round ratio to the baseline.
    pub(crate) ratio: Option<f64>,
    /// `threads` only: throughput on N threads over throughput on one.
    pub(crate) scaling: Option<f64>,
    /// The highest live bytes reported during the untimed pass.
    pub(crate) peak_bytes: Option<u64>,
    /// Why the variant stopped, if it did (an allocation failed).
    pub(crate) error: Option<String>,
}

/// One workload's results: a row per variant, in the variants' order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Measured {
    pub(crate) workload: Workload,
    pub(crate) rounds: usize,
    /// Operations per block (per thread for `threads`).
    pub(crate) ops_per_block: usize,
    pub(crate) threads: usize,
    pub(crate) rows: Vec<Figures>,
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied()
}

/// Time one block: ns per operation.
fn time<F: FnMut() -> Result<usize, memplug::AllocError>>(mut block: F) -> Result<f64, String> {
    let t = Instant::now();
    let ops = block().map_err(|e| e.to_string())?;
    Ok(t.elapsed().as_nanos() as f64 / ops.max(1) as f64)
}

/// Operations per block such that the baseline takes about `target`.
fn calibrate(w: Workload, base: &Variant, settings: &Settings, state: &mut State) -> Result<usize, String> {
    let target = settings.block_time(w).as_secs_f64();
    let threads = if w == Workload::Threads { settings.threads } else { 1 };
    let mut ops = w.min_ops();
    let mut run = |ops| {
        let t = Instant::now();
        workloads::run(w, base.handler, base.locking, ops, threads, state, &NoProbe).map_err(|e| e.to_string())?;
        Ok::<f64, String>(t.elapsed().as_secs_f64())
    };
    run(ops)?; // warm up (and fill the live set of `mixed`)
    loop {
        // The fastest of three: a block that was preempted would make the
        // blocks far too short.
        let took = run(ops)?.min(run(ops)?).min(run(ops)?);
        if took >= target / 8.0 || ops >= 1 << 26 {
            let scaled = (ops as f64 * target / took.max(1e-9)) as usize;
            return Ok(scaled.clamp(w.min_ops(), 1 << 28));
        }
        ops *= 4;
    }
}

/// What to run of one workload.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Plan {
    pub(crate) workload: Workload,
    /// `(operations per block, rounds)`, or `None` to calibrate on the
    /// baseline and fill the time budget.
    pub(crate) fixed: Option<(usize, usize)>,
    /// How many variants the time budget is shared by (in all workers),
    /// when the rounds are not fixed.
    pub(crate) share: usize,
}

/// Measure `plan`'s workload for every variant (the first is the
/// baseline).
pub(crate) fn measure(plan: Plan, variants: &[Variant], settings: &Settings) -> Measured {
    let w = plan.workload;
    let n = variants.len();
    let threads = if w == Workload::Threads { settings.threads } else { 1 };
    let mut rows = vec![Figures::default(); n];
    let mut states: Vec<State> = (0..n).map(|_| State::default()).collect();
    let calibrated = match plan.fixed {
        Some((ops, _)) => Ok(ops),
        None => calibrate(w, &variants[0], settings, &mut states[0]),
    };
    let ops = match calibrated {
        Ok(ops) => ops,
        Err(e) => {
            rows[0].error = Some(e);
            return Measured { workload: w, rounds: 0, ops_per_block: 0, threads, rows };
        }
    };
    let run = |v: &Variant, state: &mut State, threads: usize| {
        time(|| workloads::run(w, v.handler, v.locking, ops, threads, state, &NoProbe))
    };
    // Warm up, and learn how long a round takes.
    let t = Instant::now();
    for (k, v) in variants.iter().enumerate() {
        if let Err(e) = run(v, &mut states[k], threads) {
            rows[k].error = Some(e);
        }
    }
    let rounds = plan.fixed.map(|(_, rounds)| rounds).or(settings.rounds).unwrap_or_else(|| {
        // The round here times `n` variants; in all, `share` are.
        let shared = plan.share.max(n) as f64 / n as f64;
        let round = t.elapsed().as_secs_f64() * shared * if w == Workload::Threads { 1.5 } else { 1.0 };
        ((settings.budget().as_secs_f64() / round.max(1e-9)) as usize).clamp(settings.min_rounds(), 1000)
    });
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut ratio: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut scaling: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut this = vec![f64::NAN; n];
    for round in 0..rounds {
        for k in 0..n {
            let v = (k + round) % n;
            if rows[v].error.is_some() {
                continue;
            }
            match run(&variants[v], &mut states[v], threads) {
                Ok(t) => this[v] = t,
                Err(e) => rows[v].error = Some(e),
            }
            if w == Workload::Threads && rows[v].error.is_none() {
                match run(&variants[v], &mut states[v], 1) {
                    // Operations per ns on N threads over that on one.
                    Ok(one) => scaling[v].push(one / this[v]),
                    Err(e) => rows[v].error = Some(e),
                }
            }
        }
        for v in 0..n {
            if rows[v].error.is_none() && rows[0].error.is_none() {
                ns[v].push(this[v]);
                ratio[v].push(this[v] / this[0]);
            }
        }
    }
    drop(states); // frees the live sets of `mixed`
    for (v, row) in rows.iter_mut().enumerate() {
        row.ns_per_op = median(&mut ns[v]);
        row.ratio = median(&mut ratio[v]);
        row.scaling = median(&mut scaling[v]);
        if row.error.is_none() && variants[v].handler.has_stats() {
            row.peak_bytes = peak(w, &variants[v], ops, threads);
        }
    }
    Measured { workload: w, rounds, ops_per_block: ops, threads, rows }
}

/// One untimed block sampling the handler's live bytes after every
/// operation; the plugin's own peak counts too when the block raised it (it
/// sees inside a `realloc`, where old and new block are both live).
fn peak(w: Workload, v: &Variant, ops: usize, threads: usize) -> Option<u64> {
    let before = v.handler.stats()?;
    let probe = PeakProbe { handler: v.handler, peak: AtomicU64::new(before.live_bytes) };
    let mut state = State::default();
    workloads::run(w, v.handler, v.locking, ops, threads, &mut state, &probe).ok()?;
    drop(state);
    let after = v.handler.stats()?;
    let sampled = probe.peak.into_inner();
    Some(if after.peak_bytes > before.peak_bytes { sampled.max(after.peak_bytes) } else { sampled })
}
