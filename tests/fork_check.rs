//! The conformance check `fork`: a thread-safe handler whose forked child
//! hangs is refused as `fork-unsafe` — by `memplug check` (in its sandboxed
//! worker, unsandboxed, and in-process) and by a registry that probes —
//! and its hung child does not outlive the check; the bundled plugins and
//! the allocators taken by symbol (glibc, mimalloc, tcmalloc, and jemalloc
//! preloaded) pass it; a handler that is not thread-safe skips it; and the
//! pass an application runs (`check::conformance`) does not fork.

mod support;

use memplug::policy::Probe;
use memplug::{Candidate, Policy, Registry, check};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The fixture that is not usable after a fork, built into `dir`, as a
/// thread-safe plugin or (with `NOT_THREAD_SAFE`) one the host locks.
fn fork_unsafe(dir: &Path, thread_safe: bool) -> PathBuf {
    let src = support::root().join("tests/fixtures/fork_unsafe_plugin.c");
    let defines: &[&str] = if thread_safe { &[] } else { &["NOT_THREAD_SAFE"] };
    support::build_c(&src, dir, "libforkunsafe.so", defines)
}

/// Environment variables to set: `(name, value)`.
type Env<'a> = &'a [(&'a str, &'a str)];

/// `memplug check --json` of `paths`, with the verdict cache off, and
/// `env` set: its reports.
fn check_json(args: &[&str], paths: &[&Path], env: Env) -> Vec<Value> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memplug"));
    cmd.env("MEMPLUG_CACHE", "off").args(["check", "--json"]).args(args).args(paths);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    v.as_array().unwrap().clone()
}

/// The verdict of the check `name` in a report.
fn verdict<'a>(report: &'a Value, name: &str) -> Option<&'a str> {
    report["checks"]["results"].as_array()?.iter().find(|c| c["name"] == name)?["verdict"].as_str()
}

/// Processes that have `file` mapped, other than this one.
fn mapping(file: &Path) -> Vec<u32> {
    let me = std::process::id();
    let name = file.to_str().unwrap();
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains(name)))
        .collect()
}

fn assert_fork_unsafe(r: &Value, how: &str) {
    assert_eq!((r["status"].as_str(), r["reason"].as_str()), (Some("rejected"), Some("fork-unsafe")), "{how}: {r}");
    assert_eq!(verdict(r, "fork"), Some("failed"), "{how}: {r}");
    let message = r["message"].as_str().unwrap();
    assert!(message.contains("did not finish within") && message.contains("pthread_atfork"), "{how}: {message}");
}

#[test]
fn a_plain_mutex_without_fork_handlers_is_refused_as_fork_unsafe() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = fork_unsafe(dir.path(), true);
    let runs: [(&str, &[&str], Env); 3] = [
        ("in the sandboxed worker", &[], &[]),
        ("in an unsandboxed worker", &[], &[("MEMPLUG_SANDBOX", "off")]),
        ("in-process", &["--in-process"], &[]),
    ];
    for (how, args, env) in runs {
        let reports = check_json(args, &[&plugin], env);
        assert_eq!(reports.len(), 1, "{how}");
        assert_fork_unsafe(&reports[0], how);
        // The other checks held: only the fork fails it.
        assert_eq!(reports[0]["checks"]["failed"], 1, "{how}");
        // The hung child was ended with the check.
        assert_eq!(mapping(&plugin), Vec::<u32>::new(), "{how}: a process still has the plugin loaded");
    }
    // The table shows the code beside the failed check.
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env("MEMPLUG_CACHE", "off")
        .arg("check")
        .arg(&plugin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAILED fork [fork-unsafe]: the child of fork"));
}

#[test]
fn a_registry_that_probes_refuses_it_too() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = fork_unsafe(dir.path(), true);
    let probe = Probe {
        timeout: Duration::from_secs(60),
        worker: Some(PathBuf::from(env!("CARGO_BIN_EXE_memplug"))),
        ..Probe::default()
    };
    let registry = Registry::with_policy(Policy { probe: Some(probe), ..Policy::default() });
    let e = registry.load(&Candidate::new(&plugin)).unwrap_err();
    assert_eq!(e.code(), "fork-unsafe", "{e}");
    let message = e.to_string();
    assert!(message.contains("not usable after a fork") && message.contains("did not finish within"), "{message}");
    assert!(registry.get("fork-unsafe").is_none());
    assert_eq!(mapping(&plugin), Vec::<u32>::new(), "a process still has the plugin loaded");
}

#[test]
fn a_handler_the_host_locks_skips_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = fork_unsafe(dir.path(), false);
    let reports = check_json(&[], &[&plugin], &[]);
    assert_eq!(reports[0]["status"], "ok", "{}", reports[0]);
    assert_eq!(reports[0]["thread_safe"], false);
    assert_eq!(verdict(&reports[0], "fork"), Some("skipped"));
}

#[test]
fn the_bundled_plugins_pass() {
    let plugins = ["system", "aligned", "tracking", "arena", "hugepage", "guard", "shm"].map(support::plugin);
    let paths: Vec<&Path> = plugins.iter().map(PathBuf::as_path).collect();
    let reports = check_json(&[], &paths, &[]);
    assert_eq!(reports.len(), plugins.len());
    for r in &reports {
        assert_eq!(r["status"], "ok", "{r}");
        // arena is not thread-safe: the host holds its lock across forks.
        let expected = if r["name"] == "arena" { "skipped" } else { "passed" };
        assert_eq!(verdict(r, "fork"), Some(expected), "{r}");
    }
}

/// Whether the dynamic loader knows `soname` (`ldconfig -p`).
fn installed(soname: &str) -> bool {
    let out = Command::new("ldconfig").arg("-p").output().expect("ldconfig");
    String::from_utf8_lossy(&out.stdout).contains(soname)
}

#[test]
fn the_allocators_taken_by_symbol_pass() {
    let manifests = support::root().join("examples/manifests");
    let mut paths = vec![manifests.join("libc.memplug.toml")];
    for (manifest, soname) in [("mimalloc", "libmimalloc.so.2"), ("tcmalloc", "libtcmalloc_minimal.so.4")] {
        // scripts/test-all.sh installs them; say so when they are missing.
        assert!(installed(soname), "{soname} is not installed (scripts/test-all.sh installs it)");
        paths.push(manifests.join(format!("{manifest}.memplug.toml")));
    }
    let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    for r in check_json(&[], &paths, &[]) {
        assert_eq!((r["status"].as_str(), verdict(&r, "fork")), (Some("ok"), Some("passed")), "{r}");
    }
    // jemalloc loads when the program starts with it (see its manifest).
    assert!(installed("libjemalloc.so.2"), "libjemalloc.so.2 is not installed (scripts/test-all.sh installs it)");
    let jemalloc = manifests.join("jemalloc.memplug.toml");
    let r = &check_json(&[], &[&jemalloc], &[("LD_PRELOAD", "libjemalloc.so.2")])[0];
    assert_eq!((r["status"].as_str(), verdict(r, "fork")), (Some("ok"), Some("passed")), "{r}");
}

#[test]
fn the_pass_an_application_runs_does_not_fork() {
    let h = Registry::new().load(&Candidate::new(support::plugin("system"))).unwrap();
    let results = check::conformance(h);
    assert!(results.iter().all(|r| r.name != "fork"), "{results:?}");
    assert_eq!(check::refusal_code(&results), None);
    let failed =
        |name: &str| check::CheckResult { name: name.into(), verdict: check::Verdict::Failed, detail: String::new() };
    assert_eq!(check::refusal_code(&[failed("zeroed")]), Some("conformance-failed"));
    assert_eq!(check::refusal_code(&[failed("zeroed"), failed("fork")]), Some("fork-unsafe"));
}
