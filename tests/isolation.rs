//! Plugins that crash, hang or end the process cannot take the host down:
//! `memplug check`, `list` and `inspect` run each candidate in a worker
//! process under a timeout and report how it failed and in which stage, and
//! a registry can probe a candidate in a worker before loading it.
//!
//! The misbehaving plugins are built from tests/fixtures/misbehaving_plugin.c
//! in temp directories, beside copies of the bundled plugins.

mod support;

use memplug::policy::Probe;
use memplug::{Policy, Registry};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const CTOR: u32 = 1;
const ENTRY: u32 = 2;
const MALLOC: u32 = 3;
const CALLOC: u32 = 4;
const REALLOC: u32 = 5;
const FREE: u32 = 6;

const SEGV: u32 = 1;
const ABORT: u32 = 2;
const HANG: u32 = 3;
const EXIT0: u32 = 4;
const READ_ONLY: u32 = 5;

/// Build a misbehaving plugin named `name` into `dir`.
fn misbehaving(dir: &Path, name: &str, at: u32, how: u32, after: u32) -> PathBuf {
    support::misbehaving(dir, name, at, how, after)
}

/// Copy the bundled plugins into `dir`.
fn bundled_into(dir: &Path) {
    for name in ["system", "aligned", "tracking", "arena"] {
        std::fs::copy(support::plugin(name), dir.join(format!("libmemplug_{name}.so"))).unwrap();
    }
}

fn memplug(args: &[&str], dir: &Path) -> Output {
    // Every run checks afresh: no verdict cache.
    Command::new(env!("CARGO_BIN_EXE_memplug")).env("MEMPLUG_CACHE", "off").args(args).arg(dir).output().unwrap()
}

fn json(out: &Output) -> Vec<Value> {
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
        .as_array()
        .unwrap()
        .clone()
}

/// The report whose path ends in `file`.
fn row<'a>(rows: &'a [Value], file: &str) -> &'a Value {
    rows.iter().find(|r| r["path"].as_str().unwrap().ends_with(file)).unwrap_or_else(|| panic!("no row for {file}"))
}

#[test]
fn check_reports_every_misbehaving_plugin_and_every_good_one() {
    let dir = tempfile::tempdir().unwrap();
    bundled_into(dir.path());
    // (name, where, how, after, status, stage, signal)
    type Case = (&'static str, u32, u32, u32, &'static str, &'static str, Option<&'static str>);
    let cases: &[Case] = &[
        ("ctor_segv", CTOR, SEGV, 0, "crashed", "load", Some("SIGSEGV")),
        ("ctor_abort", CTOR, ABORT, 0, "crashed", "load", Some("SIGABRT")),
        ("ctor_hang", CTOR, HANG, 0, "timed-out", "load", None),
        ("ctor_exit", CTOR, EXIT0, 0, "no-report", "load", None),
        ("entry_segv", ENTRY, SEGV, 0, "crashed", "entry", Some("SIGSEGV")),
        ("entry_hang", ENTRY, HANG, 0, "timed-out", "entry", None),
        ("entry_exit", ENTRY, EXIT0, 0, "no-report", "entry", None),
        ("malloc_segv", MALLOC, SEGV, 0, "crashed", "check:alignment", Some("SIGSEGV")),
        ("readonly", MALLOC, READ_ONLY, 0, "crashed", "check:alignment", Some("SIGSEGV")),
        ("free_abort", FREE, ABORT, 0, "crashed", "check:alignment", Some("SIGABRT")),
        ("calloc_abort", CALLOC, ABORT, 0, "crashed", "check:zeroed", Some("SIGABRT")),
        ("realloc_segv", REALLOC, SEGV, 0, "crashed", "check:realloc-preserves", Some("SIGSEGV")),
        ("realloc_hang", REALLOC, HANG, 0, "timed-out", "check:realloc-preserves", None),
        ("zero_size_segv", MALLOC, SEGV, 10, "crashed", "check:zero-size", Some("SIGSEGV")),
        ("overlap_segv", MALLOC, SEGV, 100, "crashed", "check:no-overlap", Some("SIGSEGV")),
        ("overlap_hang", MALLOC, HANG, 100, "timed-out", "check:no-overlap", None),
        ("aligned_abort", 7, ABORT, 0, "crashed", "check:aligned-alloc", Some("SIGABRT")),
        ("aligned_exit", 7, EXIT0, 0, "no-report", "check:aligned-alloc", None),
    ];
    for &(name, at, how, after, ..) in cases {
        misbehaving(dir.path(), name, at, how, after);
    }
    // Malformed ones too: each refused with its own reason.
    let malformed = [("libtext.so", "not-elf"), ("libfifo.so", "not-a-regular-file"), ("libmagic.so", "bad-magic")];
    std::fs::write(dir.path().join("libtext.so"), "not a library\n").unwrap();
    assert!(Command::new("mkfifo").arg(dir.path().join("libfifo.so")).status().unwrap().success());
    support::fixture(dir.path(), "libmagic.so", &["FIX_NAME=\"badmagic\"", "FIX_MAGIC=0x12345678"]);
    let out = memplug(&["check", "--json", "--timeout", "2"], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = json(&out);
    assert_eq!(rows.len(), 4 + cases.len() + malformed.len());
    for (file, reason) in malformed {
        let r = row(&rows, file);
        assert_eq!((r["status"].as_str(), r["reason"].as_str()), (Some("rejected"), Some(reason)), "{r}");
    }
    for name in ["system", "aligned", "tracking", "arena"] {
        let r = row(&rows, &format!("libmemplug_{name}.so"));
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["checks"]["failed"], 0, "{r}");
    }
    for &(name, _, _, _, status, stage, signal) in cases {
        let r = row(&rows, &format!("lib{name}.so"));
        assert_eq!(r["status"], status, "{name}: {r}");
        assert_eq!(r["reason"], status, "{name}: {r}");
        assert_eq!(r["stage"], stage, "{name}: {r}");
        assert_eq!(r["signal"].as_str(), signal, "{name}: {r}");
        assert!(!r["message"].as_str().unwrap().is_empty());
    }
}

#[test]
fn the_table_names_the_failure_and_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    misbehaving(dir.path(), "zeroed_segv", CALLOC, SEGV, 0);
    let out = memplug(&["check", "--timeout", "2"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("crashed"), "{text}");
    assert!(text.contains("[crashed]") && text.contains("SIGSEGV") && text.contains("`zeroed`"), "{text}");
}

#[test]
fn an_exit_in_a_constructor_is_not_all_ok() {
    let dir = tempfile::tempdir().unwrap();
    misbehaving(dir.path(), "quitter", CTOR, EXIT0, 0);
    let out = memplug(&["check"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no-report"));
}

#[test]
fn list_and_inspect_are_protected_too() {
    let dir = tempfile::tempdir().unwrap();
    bundled_into(dir.path());
    let hang = misbehaving(dir.path(), "hangs", CTOR, HANG, 0);
    let crash = misbehaving(dir.path(), "crashes", ENTRY, SEGV, 0);
    let out = memplug(&["list", "--json", "--timeout", "1"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let rows = json(&out);
    assert_eq!(row(&rows, "libhangs.so")["status"], "timed-out");
    assert_eq!(row(&rows, "libcrashes.so")["status"], "crashed");
    assert_eq!(row(&rows, "libmemplug_system.so")["status"], "ok");
    let out = memplug(&["inspect", "--json", "--timeout", "1"], &crash);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["status"].as_str(), v["stage"].as_str(), v["signal"].as_str()),
        (Some("crashed"), Some("entry"), Some("SIGSEGV"))
    );
    let out = memplug(&["inspect", "--timeout", "1"], &hang);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("timed-out"));
}

#[test]
fn in_process_keeps_the_old_behaviour_and_the_log_names_the_culprit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(support::plugin("system"), dir.path().join("liba_good.so")).unwrap();
    let bad = misbehaving(dir.path(), "b_bad", CTOR, SEGV, 0);
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env("MEMPLUG_CACHE", "off")
        .args(["check", "--in-process"])
        .arg(dir.path())
        .env("RUST_LOG", "memplug=debug")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), None, "the crash takes the process down in-process");
    let log = String::from_utf8_lossy(&out.stderr);
    let last = log.lines().rfind(|l| l.contains("starting")).unwrap_or_default();
    assert!(last.contains("load") && last.contains(&*bad.to_string_lossy()), "last stage logged: {last}\n{log}");
}

/// A registry that probes in a worker first.
fn probing(timeout: Duration) -> Registry {
    let probe = Probe { timeout, worker: Some(PathBuf::from(env!("CARGO_BIN_EXE_memplug"))), ..Probe::default() };
    Registry::with_policy(Policy { probe: Some(probe), ..Policy::default() })
}

#[test]
fn a_probing_registry_refuses_what_would_crash_it() {
    let dir = tempfile::tempdir().unwrap();
    let registry = probing(Duration::from_secs(2));
    let cases = [
        (misbehaving(dir.path(), "p_ctor", CTOR, SEGV, 0), "crashed"),
        (misbehaving(dir.path(), "p_free", FREE, ABORT, 0), "crashed"),
        (misbehaving(dir.path(), "p_hang", ENTRY, HANG, 0), "timed-out"),
        (misbehaving(dir.path(), "p_exit", CTOR, EXIT0, 0), "no-report"),
    ];
    for (path, code) in &cases {
        let e = registry.load_path(path).unwrap_err();
        assert_eq!(e.code(), *code, "{e}");
        assert!(registry.get(&path.file_stem().unwrap().to_string_lossy()[3..]).is_none());
    }
    // Good plugins still load, into this process.
    let h = registry.load_path(support::plugin("tracking")).unwrap();
    let p = h.alloc(10).unwrap();
    // SAFETY: `p` came from `h` with 10 bytes.
    unsafe { h.free(p, 10) };
}

#[test]
fn a_probing_registry_without_a_worker_says_where_it_looked() {
    let probe = Probe {
        timeout: Duration::from_secs(1),
        worker: Some(PathBuf::from("/nonexistent/memplug")),
        ..Probe::default()
    };
    let registry = Registry::with_policy(Policy { probe: Some(probe), ..Policy::default() });
    let e = registry.load_path(support::plugin("system")).unwrap_err();
    assert_eq!(e.code(), "probe-unavailable", "{e}");
    assert!(e.to_string().contains("/nonexistent/memplug"), "{e}");
}
