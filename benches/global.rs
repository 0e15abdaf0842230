//! `memplug::global::Global` as the process's global allocator against the
//! standard library's system allocator, on a Vec/String/HashMap workload
//! (`common/global_workload.rs`). Each variant runs in its own child
//! process (a process has one global allocator):
//!
//! - `std System` — `global_plain`, a binary without `#[global_allocator]`
//!   (the baseline);
//! - `Global, unset` — this binary with `MEMPLUG_BENCH_ALLOCATOR` unset:
//!   `Global`'s system fast path (goal ≈ 1.00×);
//! - `Global, system plugin` — this binary with the variable set to
//!   `system`, the bundled plugin over glibc: the whole route through a
//!   handler (goal ≤ 1.05×).
//!
//! Rounds run the three children one after another in a rotating order;
//! each child times its loop in CPU time (this machine is shared), and a
//! variant's figure is the median over rounds of its time relative to the
//! baseline's in the same round (the machine's speed drifts too).
//!
//! Run: `cargo bench --bench global --bench global_plain` (`global` finds
//! `global_plain` next to itself). `ROUNDS=n` (default 31), `ITERATIONS=n`
//! per child (default 100).

#[path = "common/global_workload.rs"]
mod workload;

use memplug::global::Global;
use std::path::{Path, PathBuf};
use std::process::Command;

#[global_allocator]
static GLOBAL: Global = Global::from_env("MEMPLUG_BENCH_ALLOCATOR");

const VAR: &str = "MEMPLUG_BENCH_ALLOCATOR";

fn env_or(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The newest `global_plain-*` executable in `dir`.
fn plain_binary(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("global_plain-") && !name.contains('.')
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
}

/// Run `exe --child iterations` with the variable set to `value`; the
/// child's nanoseconds per iteration.
fn time(exe: &Path, value: Option<&str>, iterations: u32, plugins: &Path) -> f64 {
    let mut cmd = Command::new(exe);
    cmd.args(["--child", &iterations.to_string()]).env_remove(VAR).env("MEMPLUG_PLUGIN_PATH", plugins);
    if let Some(v) = value {
        cmd.env(VAR, v);
    }
    let out = cmd.output().expect("run a child");
    assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "child: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("the child's figure")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if let Some(n) = workload::child_iterations() {
        workload::child(n);
        if std::env::var_os(VAR).is_some_and(|v| !v.is_empty()) {
            assert!(GLOBAL.handler().is_some(), "{:?}", GLOBAL.status());
        }
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let me = std::env::current_exe().expect("this executable");
    let dir = me.parent().expect("its directory").to_path_buf();
    let Some(plain) = plain_binary(&dir) else {
        eprintln!(
            "global: no global_plain binary next to {}; run `cargo bench --bench global --bench global_plain`",
            me.display()
        );
        return;
    };
    let (rounds, iterations) = (env_or("ROUNDS", 31), env_or("ITERATIONS", 100));
    let variants: [(&str, &Path, Option<&str>); 3] =
        [("std System", &plain, None), ("Global, unset", &me, None), ("Global, system plugin", &me, Some("system"))];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for round in 0..rounds as usize {
        let mut this = [0.0; 3];
        for k in 0..variants.len() {
            let i = (round + k) % variants.len();
            let (_, exe, value) = variants[i];
            this[i] = time(exe, value, iterations, &dir);
        }
        for i in 0..variants.len() {
            ns[i].push(this[i]);
            ratios[i].push(this[i] / this[0]);
        }
    }
    println!("global allocator, Vec/String/HashMap workload: {rounds} rounds x {iterations} iterations per child");
    println!("{:<24} {:>14} {:>10}", "variant", "CPU us/iter", "vs System");
    for (i, (name, _, _)) in variants.iter().enumerate() {
        println!("{name:<24} {:>14.1} {:>9.3}x", median(&mut ns[i]) / 1000.0, median(&mut ratios[i]));
    }
}
