//! The sandbox refuses what it blocks: a plugin that makes a system call the
//! worker's seccomp filter forbids — in its constructor, in `malloc`, in a
//! destructor or an `atexit` handler, in a thread or a forked child — is
//! refused with `forbidden-call`, the call named in the report, whatever
//! the call returned (it never returns: the filter traps it). A forked
//! child signalling itself still only gets `EPERM`; a plugin that blocks
//! `SIGSYS` is `crashed` (SIGSYS); one that installs its own `SIGSYS`
//! handler hides the call (which still is not made).
//!
//! The plugins are built from tests/fixtures/forbidden_plugin.c in temp
//! directories.

mod support;

use memplug::policy::Probe;
use memplug::{Policy, Registry};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const CTOR: u32 = 1;
const MALLOC: u32 = 2;
const DTOR: u32 = 3;
const ATEXIT: u32 = 4;
const CHILD: u32 = 5;
const THREAD: u32 = 6;
const BLOCKED: u32 = 7;
const OWN_HANDLER: u32 = 8;
const CHILD_SELF_SIGNAL: u32 = 9;
const NO_CHANNEL: u32 = 10;

/// Build the plugin making call `call` at `place` into `dir/lib{name}.so`.
fn plugin(dir: &Path, name: &str, call: u32, place: u32) -> PathBuf {
    let src = support::root().join("tests/fixtures/forbidden_plugin.c");
    let defines = [format!("PLUGIN_NAME=\"{name}\""), format!("CALL={call}"), format!("WHERE={place}")];
    let defines: Vec<&str> = defines.iter().map(String::as_str).collect();
    support::build_c(&src, dir, &format!("lib{name}.so"), &defines)
}

/// `memplug check --json` of `target` (no verdict cache, the default
/// sandbox); the plugins record into `record`.
fn check(target: &Path, record: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env("MEMPLUG_CACHE", "off")
        .env_remove("MEMPLUG_SANDBOX")
        .env_remove("MEMPLUG_PLUGIN_PATH")
        .env("MEMPLUG_TEST_ERRNO_FILE", record)
        .args(["check", "--json", "--timeout", "20"])
        .arg(target)
        .output()
        .unwrap()
}

fn rows(out: &Output) -> Vec<Value> {
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap_or_else(|e| {
            panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        })
        .as_array()
        .unwrap()
        .clone()
}

fn row<'a>(rows: &'a [Value], file: &str) -> &'a Value {
    rows.iter().find(|r| r["path"].as_str().unwrap().ends_with(file)).unwrap_or_else(|| panic!("no row for {file}"))
}

/// The `name=value` lines the plugins recorded.
fn recorded(record: &Path) -> BTreeMap<String, i64> {
    let text = std::fs::read_to_string(record).unwrap_or_default();
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect()
}

fn assert_forbidden(r: &Value, call: &str, stage: &str) {
    assert_eq!(
        (r["status"].as_str(), r["reason"].as_str(), r["call"].as_str()),
        (Some("rejected"), Some("forbidden-call"), Some(call)),
        "{r}"
    );
    assert!(r["stage"].as_str().unwrap().starts_with(stage), "stage {stage}: {r}");
    let message = r["message"].as_str().unwrap();
    assert!(message.contains(&format!("({call}: ")), "{message}");
    assert!(message.contains("Remove the call"), "{message}");
}

#[test]
fn forbidden_calls_are_refused_and_named_wherever_the_plugin_makes_them() {
    let dir = tempfile::tempdir().unwrap();
    // (call, place, its name, the stage)
    let cases = [
        (1, CTOR, "kill", "load"),
        (2, CTOR, "ptrace", "load"),
        (3, CTOR, "setsid", "load"),
        (4, CTOR, "prctl", "load"),
        (5, CTOR, "seccomp", "load"),
        (6, CTOR, "tgkill", "load"),
        (7, CTOR, "kill", "load"),
        (8, CTOR, "process_vm_writev", "load"),
        (9, CTOR, "setpgid", "load"),
        (10, CTOR, "unshare", "load"),
        (1, MALLOC, "kill", "check:"),
        (4, MALLOC, "prctl", "check:"),
        (1, DTOR, "kill", "exit"),
        (2, DTOR, "ptrace", "exit"),
        (3, ATEXIT, "setsid", "exit"),
        (5, ATEXIT, "seccomp", "exit"),
        (3, CHILD, "setsid", "load"),
        (2, CHILD, "ptrace", "load"),
        (1, THREAD, "kill", "load"),
    ];
    for (call, place, _, _) in cases {
        plugin(dir.path(), &format!("c{call}_w{place}"), call, place);
    }
    let record = dir.path().join("record.txt");
    let out = check(dir.path(), &record);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = rows(&out);
    assert_eq!(rows.len(), cases.len(), "{rows:?}");
    for (call, place, name, stage) in cases {
        assert_forbidden(row(&rows, &format!("libc{call}_w{place}.so")), name, stage);
    }
    assert!(!recorded(&record).contains_key("returned"), "no forbidden call returned to the plugin");
}

#[test]
fn a_child_signalling_itself_still_gets_eperm_and_the_plugin_is_ok() {
    let dir = tempfile::tempdir().unwrap();
    let p = plugin(dir.path(), "selfish_child", 0, CHILD_SELF_SIGNAL);
    let record = dir.path().join("record.txt");
    let out = check(&p, &record);
    let rows = rows(&out);
    assert_eq!(rows[0]["status"], "ok", "{}", rows[0]);
    let r = recorded(&record);
    assert_eq!(r.get("child_kill_self"), Some(&1), "EPERM: {r:?}");
    assert_eq!(r.get("child_raise"), Some(&1), "EPERM: {r:?}");
    // Signal 0 delivers nothing: allowed to any process, the child's own too.
    assert_eq!(r.get("child_kill_self_0"), Some(&0), "{r:?}");
    assert_eq!(r.get("child_exited"), Some(&0), "{r:?}");
}

#[test]
fn a_plugin_that_blocks_sigsys_crashes_and_one_that_takes_it_hides_the_call() {
    let dir = tempfile::tempdir().unwrap();
    plugin(dir.path(), "blocker", 1, BLOCKED);
    plugin(dir.path(), "catcher", 1, OWN_HANDLER);
    plugin(dir.path(), "closer", 1, NO_CHANNEL);
    let record = dir.path().join("record.txt");
    let out = check(dir.path(), &record);
    let rows = rows(&out);
    // Blocked: the kernel kills the worker with SIGSYS.
    let blocker = row(&rows, "libblocker.so");
    assert_eq!(
        (blocker["status"].as_str(), blocker["signal"].as_str()),
        (Some("crashed"), Some("SIGSYS")),
        "{blocker}"
    );
    assert!(blocker["message"].as_str().unwrap().contains("forbids"), "{blocker}");
    // Its own handler: it gets the trap, the call is not made (the parent,
    // this test's `memplug`, is alive and reporting), and memplug is not told.
    let catcher = row(&rows, "libcatcher.so");
    assert_eq!(catcher["status"], "ok", "{catcher}");
    assert_eq!(recorded(&record).get("own_handler"), Some(&1));
    // The channel closed: the exit status still tells, without a name.
    let closer = row(&rows, "libcloser.so");
    assert_eq!(
        (closer["reason"].as_str(), closer["call"].as_str()),
        (Some("forbidden-call"), Some("unknown")),
        "{closer}"
    );
}

#[test]
fn a_probing_registry_refuses_a_forbidden_call_and_so_does_its_cache() {
    let dir = tempfile::tempdir().unwrap();
    let p = plugin(dir.path(), "parent_killer", 1, CTOR);
    let cache = dir.path().join("cache.json");
    let probe = Probe {
        timeout: Duration::from_secs(20),
        worker: Some(PathBuf::from(env!("CARGO_BIN_EXE_memplug"))),
        ..Probe::default()
    };
    for round in ["probed", "cached"] {
        let policy = Policy { probe: Some(probe.clone()), cache: Some(cache.clone()), ..Policy::default() };
        let registry = Registry::with_policy(policy);
        let e = registry.load_path(&p).unwrap_err();
        assert_eq!(e.code(), "forbidden-call", "{round}: {e}");
        let message = e.to_string();
        assert!(message.contains("(kill: ") && message.contains("constructors"), "{round}: {message}");
        assert!(registry.get("parent_killer").is_none());
    }
    // Good plugins still load, into this process.
    let registry = Registry::with_policy(Policy { probe: Some(probe), ..Policy::default() });
    let h = registry.load_path(support::plugin("tracking")).unwrap();
    let q = h.alloc(10).unwrap();
    // SAFETY: `q` came from `h` with 10 bytes.
    unsafe { h.free(q, 10) };
}
