//! The worker's sandbox: a plugin that attacks the process running
//! `memplug check` from inside its worker — signals it, traces it, writes
//! into its memory, leaves the worker's process group — is stopped at the
//! first forbidden call and refused with `forbidden-call` naming it (the
//! host survives and reports); `/proc/<pid>/fd` of a non-dumpable host
//! stays closed (`EACCES`); what an allocator needs (shared memory, huge
//! pages, threads, fork and exec, signals to itself, signal 0 to any process
//! to ask whether it exists) stays allowed; and the
//! conformance check `threads` catches plugins that are not as thread-safe
//! as they declare. tests/forbidden.rs has every place a call is caught.
//!
//! The plugins are built from tests/fixtures/sandbox_plugin.c and
//! thread_plugin.c in temp directories.

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EPERM: i64 = 1;
const ESRCH: i64 = 3;
const EACCES: i64 = 13;

/// Build tests/fixtures/sandbox_plugin.c with `ATTACK=attack` into
/// `dir/lib{name}.so`.
fn attacker(dir: &Path, name: &str, attack: u32) -> PathBuf {
    let src = support::root().join("tests/fixtures/sandbox_plugin.c");
    let defines = [format!("PLUGIN_NAME=\"{name}\""), format!("ATTACK={attack}")];
    let defines: Vec<&str> = defines.iter().map(String::as_str).collect();
    support::build_c(&src, dir, &format!("lib{name}.so"), &defines)
}

/// Build tests/fixtures/thread_plugin.c with `BROKEN=broken` into
/// `dir/lib{name}.so`.
fn thread_plugin(dir: &Path, name: &str, broken: u32) -> PathBuf {
    let src = support::root().join("tests/fixtures/thread_plugin.c");
    let defines = [format!("PLUGIN_NAME=\"{name}\""), format!("BROKEN={broken}")];
    let defines: Vec<&str> = defines.iter().map(String::as_str).collect();
    support::build_c(&src, dir, &format!("lib{name}.so"), &defines)
}

/// `memplug check --json` of `target`, every run afresh (no verdict cache),
/// the sandbox as the default or as `sandbox` says; the attacking plugins
/// record into `record`.
fn check(target: &Path, record: &Path, sandbox: Option<&str>, preload: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memplug"));
    cmd.env("MEMPLUG_CACHE", "off")
        .env_remove("MEMPLUG_SANDBOX")
        .env_remove("MEMPLUG_PLUGIN_PATH")
        .env("MEMPLUG_TEST_ERRNO_FILE", record)
        .args(["check", "--json", "--timeout", "20"])
        .arg(target);
    if let Some(mode) = sandbox {
        cmd.env("MEMPLUG_SANDBOX", mode);
    }
    if let Some(lib) = preload {
        cmd.env("LD_PRELOAD", lib);
    }
    cmd.output().unwrap()
}

/// The reports of a `check --json` run; panics if stdout is not one JSON
/// document.
fn json(out: &Output) -> Vec<Value> {
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap_or_else(|e| {
            panic!(
                "{e}: stdout {}\nstderr {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .as_array()
        .unwrap()
        .clone()
}

/// The `name=errno` lines the plugin recorded.
fn recorded(record: &Path) -> BTreeMap<String, i64> {
    let text = std::fs::read_to_string(record).unwrap_or_default();
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect()
}

/// Check the attacking plugin `attack` under the default sandbox: the host
/// survives and reports; its report and what it recorded.
fn attack(attack_no: u32, name: &str) -> (Value, BTreeMap<String, i64>) {
    let dir = tempfile::tempdir().unwrap();
    let plugin = attacker(dir.path(), name, attack_no);
    let record = dir.path().join("errno.txt");
    let out = check(&plugin, &record, None, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "the host survives and reports: {stderr}");
    let rows = json(&out);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(!stderr.contains("could not sandbox"), "{stderr}");
    (rows[0].clone(), recorded(&record))
}

/// Check `attack`: refused with `forbidden-call`, naming `call`, and none of
/// its forbidden calls returned to it.
fn refused(attack_no: u32, name: &str, call: &str) {
    let (row, r) = attack(attack_no, name);
    assert_eq!(
        (row["status"].as_str(), row["reason"].as_str(), row["call"].as_str(), row["stage"].as_str()),
        (Some("rejected"), Some("forbidden-call"), Some(call), Some("load")),
        "{row}"
    );
    assert!(row["message"].as_str().unwrap().contains(&format!("({call}: ")), "{row}");
    assert!(r.is_empty(), "no forbidden call returned: {r:?}");
}

#[test]
fn signals_to_the_parent_or_the_group_are_refused_and_the_host_reports() {
    refused(1, "killer", "kill");
}

#[test]
fn leaving_the_process_group_is_refused() {
    refused(2, "escaper", "setsid");
}

#[test]
fn asking_whether_another_process_exists_is_allowed_but_signalling_it_is_not() {
    let (row, r) = attack(6, "prober");
    // Signal 0 delivers nothing: the liveness probes all returned...
    for probe in ["kill_other_0", "tgkill_other_0", "sigqueue_other_0"] {
        assert_eq!(r.get(probe), Some(&0), "{probe}: {r:?}");
    }
    assert_eq!(r.get("kill_gone_0"), Some(&ESRCH), "a process that is gone: {r:?}");
    // ...while a real signal to another process, however harmless, is still
    // a forbidden call, and never returned.
    assert_eq!(
        (row["status"].as_str(), row["reason"].as_str(), row["call"].as_str(), row["stage"].as_str()),
        (Some("rejected"), Some("forbidden-call"), Some("kill"), Some("load")),
        "{row}"
    );
    assert!(!r.contains_key("kill_other_sigcont"), "{r:?}");
}

#[test]
fn tracing_or_writing_into_the_parent_is_refused() {
    refused(4, "tracer", "ptrace");
}

#[test]
fn what_an_allocator_needs_stays_allowed() {
    let (row, r) = attack(5, "allocator");
    assert_eq!(row["status"], "ok", "{row}");
    for call in [
        "memfd_create",
        "ftruncate",
        "mmap_shared",
        "shm_open",
        "fallocate",
        "madvise",
        "pthread_create",
        "fork_exec",
        "raise",
        "kill_self",
        "prlimit_self",
        "prlimit_own_pid",
        "proc_meminfo",
    ] {
        assert_eq!(r.get(call), Some(&0), "{call}: {r:?}");
    }
    // Without reserved huge pages the kernel says ENOMEM; never EPERM.
    assert!(r.get("mmap_hugetlb").is_some_and(|&e| e != EPERM), "{r:?}");
}

/// Whether this process has `CAP_SYS_PTRACE` (capability 19) in its
/// effective set.
fn can_ptrace() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap().trim();
    u64::from_str_radix(eff, 16).unwrap() & (1 << 19) != 0
}

#[test]
fn a_non_dumpable_hosts_stdout_is_closed_to_the_sandboxed_worker() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = attacker(dir.path(), "scribbler", 3);
    let nondumpable =
        support::build_c(&support::root().join("tests/fixtures/nondumpable.c"), dir.path(), "libnondumpable.so", &[]);
    // The host is non-dumpable: with its capabilities dropped, the worker
    // (even as root, the host's own user) cannot open /proc/<host>/fd/1, and
    // the host's JSON stays one valid document.
    let record = dir.path().join("sandboxed.txt");
    let out = check(&plugin, &record, None, Some(&nondumpable));
    let rows = json(&out);
    assert_eq!(rows[0]["status"], "ok", "{}", rows[0]);
    let r = recorded(&record);
    assert_eq!(r.get("open_parent_stdout"), Some(&EACCES), "{r:?}");
    // The control: unsandboxed, a root worker keeps CAP_SYS_PTRACE and gets
    // in — which is what the capabilities are dropped for.
    if can_ptrace() {
        let record = dir.path().join("unsandboxed.txt");
        let out = check(&plugin, &record, Some("off"), Some(&nondumpable));
        assert_eq!(recorded(&record).get("open_parent_stdout"), Some(&0));
        assert!(String::from_utf8_lossy(&out.stdout).contains("not json"), "the junk reached the host's stdout");
    }
}

#[test]
fn off_turns_the_sandbox_off_and_a_bad_setting_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = attacker(dir.path(), "escaper_off", 2);
    let record = dir.path().join("errno.txt");
    let out = check(&plugin, &record, Some("off"), None);
    assert_eq!(json(&out)[0]["status"], "ok");
    assert_eq!(recorded(&record).get("setpgid"), Some(&0), "unsandboxed, the worker may leave its group");

    let out = check(&plugin, &dir.path().join("bad.txt"), Some("maybe"), None);
    assert_eq!(out.status.code(), Some(1));
    let row = &json(&out)[0];
    assert_eq!((row["status"].as_str(), row["reason"].as_str()), (Some("rejected"), Some("bad-sandbox-setting")));
    assert!(row["message"].as_str().unwrap().contains("MEMPLUG_SANDBOX"), "{row}");
    assert!(!dir.path().join("bad.txt").exists(), "the plugin did not run");

    let out = check(&plugin, &dir.path().join("required.txt"), Some("require"), None);
    let row = &json(&out)[0];
    assert_eq!(row["reason"], "forbidden-call", "this kernel has seccomp: {row}");
    assert_eq!(row["call"], "setsid", "{row}");
}

/// The `threads` result of a report.
fn threads_result(row: &Value) -> &Value {
    row["checks"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "threads")
        .unwrap_or_else(|| panic!("no `threads` check: {row}"))
}

#[test]
fn the_threads_check_catches_plugins_that_are_not_thread_safe() {
    let dir = tempfile::tempdir().unwrap();
    thread_plugin(dir.path(), "overlapping", 1);
    thread_plugin(dir.path(), "first_thread_only", 2);
    let out = check(dir.path(), &dir.path().join("unused.txt"), None, None);
    assert_eq!(out.status.code(), Some(1));
    let rows = json(&out);
    let row = |file: &str| rows.iter().find(|r| r["path"].as_str().unwrap().ends_with(file)).unwrap();

    let overlapping = row("liboverlapping.so");
    assert_eq!(
        (overlapping["status"].as_str(), overlapping["reason"].as_str()),
        (Some("rejected"), Some("conformance-failed")),
        "{overlapping}"
    );
    let t = threads_result(overlapping);
    assert_eq!(t["verdict"], "failed", "{t}");
    assert!(t["detail"].as_str().unwrap().contains("blocks of two threads overlap"), "{t}");
    let others_passed = overlapping["checks"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] != "threads")
        .all(|c| c["verdict"] != "failed");
    assert!(others_passed, "on one thread the plugin is fine: {overlapping}");

    let first = row("libfirst_thread_only.so");
    assert_eq!(
        (first["status"].as_str(), first["stage"].as_str(), first["signal"].as_str()),
        (Some("crashed"), Some("check:threads"), Some("SIGABRT")),
        "{first}"
    );
}

#[test]
fn the_bundled_plugins_pass_in_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["system", "aligned", "tracking", "arena", "hugepage", "guard", "shm"] {
        std::fs::copy(support::plugin(name), dir.path().join(format!("libmemplug_{name}.so"))).unwrap();
    }
    let out = check(dir.path(), &dir.path().join("unused.txt"), Some("require"), None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = json(&out);
    assert_eq!(rows.len(), 7);
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["checks"]["failed"], 0, "{r}");
        let expected = if r["name"] == "arena" { "skipped" } else { "passed" };
        assert_eq!(threads_result(r)["verdict"], expected, "{r}");
    }
}

/// Every system call the sandbox denies is named in its documentation.
#[test]
fn the_documentation_lists_every_denied_system_call() {
    let doc = std::fs::read_to_string(support::root().join("docs/src/sandbox.md")).unwrap();
    for d in memplug::sandbox::denials() {
        assert!(doc.contains(&format!("`{}`", d.syscall)), "docs/src/sandbox.md does not name `{}`", d.syscall);
    }
}
