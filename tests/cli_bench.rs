//! `memplug bench`: runs quickly on the bundled plugins with a table per
//! workload, `--json` parses with a row per handler and workload, a handler
//! that fails the conformance pass is named and not benchmarked, and bad
//! arguments are usage errors. (Speed itself is measured, not asserted.)

mod support;

use serde_json::Value;
use std::process::{Command, Output};

fn memplug() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memplug"));
    c.env_remove("MEMPLUG_PLUGIN_PATH").env_remove("RUST_LOG");
    c
}

/// The four bundled plugins, copied into a directory of their own.
fn bundled_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for p in ["system", "aligned", "tracking", "arena"] {
        std::fs::copy(support::plugin(p), dir.path().join(format!("libmemplug_{p}.so"))).unwrap();
    }
    dir
}

fn text(out: &Output) -> String {
    format!("{}\n--- stderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

const WORKLOADS: [&str; 5] = ["pair-64", "mixed", "grow", "cross-thread", "threads"];

#[test]
fn quick_bench_prints_a_table_per_workload_for_every_bundled_plugin() {
    let dir = bundled_dir();
    let out = memplug().args(["bench", "--quick", "--rounds", "2"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    for w in WORKLOADS {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("{w} — "))), "a table for {w}:\n{stdout}");
    }
    for name in ["default_allocator", "system", "aligned", "tracking"] {
        let rows = stdout.lines().filter(|l| l.trim_start().starts_with(&format!("{name} "))).count();
        assert_eq!(rows, 5, "one row per workload for {name}:\n{stdout}");
    }
    // The arena is not thread-safe: locked per call, and a guard per batch.
    assert_eq!(stdout.lines().filter(|l| l.contains("arena") && l.contains("per call")).count(), 5, "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.contains("arena") && l.contains("guard/batch")).count(), 5, "{stdout}");
    assert!(stdout.contains("SCALING"), "the threads table shows scaling:\n{stdout}");
    assert!(!stdout.contains("not benchmarked"), "{stdout}");
    assert!(out.stderr.is_empty(), "no progress line when stderr is not a terminal: {}", text_err(&out.stderr));
}

fn text_err(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn json_has_a_result_per_variant_and_workload() {
    let dir = bundled_dir();
    let out = memplug()
        .args(["bench", "--quick", "--rounds", "2", "--json", "--threads", "2", "--handler", "arena"])
        .args(["--handler", "tracking", "--workload", "pair-64", "--workload", "threads"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json(&out);
    assert_eq!(v["baseline"], "default_allocator");
    assert_eq!(v["threads"], 2);
    let handlers: Vec<&str> = v["handlers"].as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(handlers, ["arena", "tracking"], "--handler picks the handlers");
    let workloads = v["workloads"].as_array().unwrap();
    let names: Vec<&str> = workloads.iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pair-64", "threads"]);
    for w in workloads {
        assert_eq!(w["rounds"], 2);
        assert!(w["ops_per_block"].as_u64().unwrap() > 0);
        let results = w["results"].as_array().unwrap();
        let rows: Vec<(&str, &str)> =
            results.iter().map(|r| (r["handler"].as_str().unwrap(), r["locking"].as_str().unwrap())).collect();
        assert_eq!(
            rows,
            [("default_allocator", "none"), ("arena", "per-call"), ("arena", "guard"), ("tracking", "none")]
        );
        for r in results {
            assert!(r["ns_per_op"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["ratio"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["error"].is_null(), "{r}");
            let with_stats = r["handler"] != "default_allocator";
            assert_eq!(r["peak_bytes"].as_u64().is_some(), with_stats, "peak only with statistics: {r}");
            assert_eq!(r["scaling"].as_f64().is_some(), w["name"] == "threads", "{r}");
        }
        let base = &results[0];
        assert_eq!(base["ratio"].as_f64().unwrap(), 1.0, "the baseline's ratio to itself");
    }
}

#[test]
fn a_handler_failing_the_conformance_pass_is_named_and_not_benchmarked() {
    let dir = tempfile::tempdir().unwrap();
    // Declares 64-byte alignment but hands out malloc's 16-byte blocks.
    support::fixture(dir.path(), "libliar.so", &["FIX_NAME=\"liar\"", "FIX_ALIGNMENT=64"]);
    std::fs::copy(support::plugin("system"), dir.path().join("libmemplug_system.so")).unwrap();
    let out = memplug().args(["bench", "--quick", "--rounds", "2", "--workload", "pair-64"]).arg(dir.path()).output();
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(1), "a skipped handler makes the status 1: {}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("system ")), "the others still run:\n{stdout}");
    assert!(!stdout.lines().any(|l| l.trim_start().starts_with("liar ")), "no row for it:\n{stdout}");
    let note = stdout.lines().skip_while(|l| !l.starts_with("not benchmarked")).collect::<Vec<_>>().join("\n");
    assert!(note.contains("liar") && note.contains("alignment"), "named, with the failed check:\n{stdout}");

    let out =
        memplug().args(["bench", "--quick", "--rounds", "2", "--workload", "grow", "--json"]).arg(dir.path()).output();
    let v = json(&out.unwrap());
    let liar = v["handlers"].as_array().unwrap().iter().find(|h| h["name"] == "liar").unwrap().clone();
    assert_eq!(liar["status"], "failed-conformance");
    assert_eq!(liar["reason"], "conformance-failed");
    let rows = v["workloads"][0]["results"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["handler"] != "liar"));
}

#[test]
fn bad_arguments_are_usage_errors() {
    let dir = bundled_dir();
    let run = |args: &[&str]| memplug().arg("bench").args(args).arg(dir.path()).output().unwrap();
    let out = run(&["--workload", "nonsense"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = text_err(&out.stderr);
    assert!(err.contains("nonsense") && err.contains("pair-64"), "names the workloads: {err}");
    let out = run(&["--handler", "nobody", "--quick"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text_err(&out.stderr).contains("nobody"));
    assert_eq!(run(&["--threads", "0"]).status.code(), Some(2));
    assert_eq!(run(&["--rounds", "0"]).status.code(), Some(2));
    assert_eq!(run(&["--options", "nocolon"]).status.code(), Some(2));
}
