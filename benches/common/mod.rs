//! An interleaved micro-benchmark runner for this noisy machine.
//!
//! This machine's speed drifts by up to 1.7x over seconds (other guests on
//! the host), so timing variants one after another — as criterion does —
//! lets the drift decide their ratios. Here each round times every variant
//! for one short block, in a rotating order, and a variant's figure is the
//! median over rounds of its time relative to the baseline's (the first
//! variant) in the same round.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Instant;

/// One variant: a name and a block of work doing `ops` operations.
pub(crate) struct Variant<'a> {
    /// Shown in the table.
    pub name: &'static str,
    /// Runs one block; returns the number of operations it did.
    pub block: Box<dyn FnMut() -> usize + 'a>,
}

/// A variant from a name and a block.
pub(crate) fn variant<'a>(name: &'static str, block: impl FnMut() -> usize + 'a) -> Variant<'a> {
    Variant { name, block: Box::new(block) }
}

/// Rounds to run: `ROUNDS` from the environment, or `default`.
pub(crate) fn rounds(default: usize) -> usize {
    std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Whether the harness was only asked to list benchmarks.
pub(crate) fn listing() -> bool {
    std::env::args().any(|a| a == "--list")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Run `variants` interleaved for `rounds` rounds and print a Markdown
/// table: median ns per operation, and median per-round ratio to the first.
pub(crate) fn run(title: &str, rounds: usize, variants: &mut [Variant<'_>]) -> Vec<(&'static str, f64, f64)> {
    let n = variants.len();
    for v in variants.iter_mut() {
        (v.block)(); // warm up
    }
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut ratio: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut this = vec![0.0; n];
    for round in 0..rounds {
        for k in 0..n {
            let v = (k + round) % n;
            let t = Instant::now();
            let ops = (variants[v].block)();
            this[v] = t.elapsed().as_nanos() as f64 / ops as f64;
        }
        for v in 0..n {
            ns[v].push(this[v]);
            ratio[v].push(this[v] / this[0]);
        }
    }
    println!("{title} ({rounds} interleaved rounds; ratio = median of per-round variant / {})", variants[0].name);
    println!("| variant | median ns/op | ratio |");
    println!("|---|---:|---:|");
    let mut out = Vec::new();
    for v in 0..n {
        let (m, r) = (median(&mut ns[v]), median(&mut ratio[v]));
        println!("| {} | {m:.2} | {r:.2} |", variants[v].name);
        out.push((variants[v].name, m, r));
    }
    println!();
    out
}

/// The bundled plugin `name` as cargo built it for this bench run (the
/// plugins are dev-dependencies, so their `.so` sits next to the bench).
pub(crate) fn plugin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("bench executable");
    let deps = exe.parent().expect("bench directory");
    let file = format!("libmemplug_{name}.so");
    [deps.to_path_buf(), deps.join("..")]
        .into_iter()
        .map(|d| d.join(&file))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{file} not found next to {}; run it with `cargo bench`", exe.display()))
}
