//! A check's verdict does not depend on how busy the machine is: under CPU
//! load (busy loops in sessions of their own, as other users' work runs,
//! started and stopped by each test), and beside another process using the
//! `shm` plugin, `memplug check` gives every bundled plugin the same `ok`,
//! every time, and a worker's timeout is measured on
//! its own time — the time it waited for a processor is not counted — so a
//! short one does not trip on a good plugin that is only kept waiting.

mod support;
#[path = "support/load.rs"]
mod load;

use load::Load;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const BUNDLED: [&str; 7] = ["system", "aligned", "tracking", "arena", "hugepage", "guard", "shm"];

/// A directory holding copies of the bundled plugins.
fn bundled() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in BUNDLED {
        std::fs::copy(support::plugin(name), dir.path().join(format!("libmemplug_{name}.so"))).unwrap();
    }
    dir
}

/// `memplug check --rescan --json ARGS DIR`, with a verdict cache of its
/// own in `cache` (so that `--rescan` checks every plugin in a worker, and
/// updates that cache): what each row says, by file, sorted — the status,
/// the reason and every check's verdict.
fn verdicts(dir: &Path, cache: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env_remove("MEMPLUG_CACHE")
        .env_remove("MEMPLUG_SANDBOX")
        .env("XDG_CACHE_HOME", cache)
        .args(["check", "--rescan", "--json"])
        .args(args)
        .arg(dir)
        .output()
        .unwrap();
    let rows: Vec<Value> = serde_json::from_slice::<Value>(&out.stdout)
        .unwrap_or_else(|e| {
            panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        })
        .as_array()
        .unwrap()
        .clone();
    let mut v: Vec<String> = rows
        .iter()
        .map(|r| {
            let file = r["path"].as_str().unwrap().rsplit('/').next().unwrap();
            let checks: Vec<String> = r["checks"]["results"]
                .as_array()
                .map(|a| a.iter().map(|c| format!("{}={}", c["name"], c["verdict"])).collect())
                .unwrap_or_default();
            let (status, reason) = (&r["status"], &r["reason"]);
            let message = if status == "ok" { String::new() } else { r["message"].to_string() };
            format!("{file}: {status} {reason} [{}] {message}", checks.join(" "))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_bundled_plugins_are_ok_thirty_times_in_a_row_under_load() {
    let dir = bundled();
    let cache = tempfile::tempdir().unwrap();
    // A neighbour using the shm plugin meanwhile, as on a shared machine:
    // this process, with a block in its own segment. The worker checking
    // shm asks whether that segment's process is alive (signal 0).
    let load = Load::per_core(2);
    let registry = memplug::Registry::new();
    let shm = registry.load_path(support::plugin("shm")).unwrap();
    let block = shm.alloc(64).unwrap();
    let mut first: Option<Vec<String>> = None;
    for run in 1..=30 {
        let v = verdicts(dir.path(), cache.path(), &[]);
        assert_eq!(v.len(), BUNDLED.len(), "run {run} ({} busy loops): {v:#?}", load.len());
        for row in &v {
            assert!(row.contains(": \"ok\" null ["), "run {run} ({} busy loops): {row}", load.len());
        }
        assert_eq!(first.get_or_insert_with(|| v.clone()), &v, "run {run}: not the verdicts of run 1");
    }
    drop(load);
    // SAFETY: `block` came from `shm.alloc(64)` and is freed once.
    unsafe { shm.free(block, 64) };
}

#[test]
fn a_timeout_is_the_worker_s_own_time_so_a_busy_machine_does_not_trip_it() {
    // Eight busy loops per processor: a worker that needs a few hundred
    // milliseconds of its own time takes seconds by the clock. Measured on
    // the clock, a 1-second timeout would refuse good plugins here.
    let dir = bundled();
    let cache = tempfile::tempdir().unwrap();
    let load = Load::per_core(8);
    for run in 1..=2 {
        let v = verdicts(dir.path(), cache.path(), &["--timeout", "1"]);
        assert_eq!(v.len(), BUNDLED.len(), "{v:#?}");
        for row in &v {
            assert!(row.contains(": \"ok\" null ["), "run {run} ({} busy loops): {row}", load.len());
        }
    }
}
