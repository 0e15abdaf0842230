//! Allocation from signal handlers under `memplug run`: a C program whose
//! handlers of SIGUSR1 and SIGUSR2 allocate, fill and free 1 KiB (and now
//! and then resize it, take a zeroed block and an aligned one), signalled
//! 40,000 times by a thread while its main thread allocates and frees
//! without pause, then again in a forked child; on every bundled handler
//! and every allocator manifest whose library is installed.
//!
//! A signal often lands while the main thread is inside a plugin call
//! (on the system call of a large block, say): the handler's requests then
//! go to the interposer's bootstrap heap. Each handler must see no NULL and
//! no bad block, the process's memory must stay bounded, and the report
//! must show the bootstrap heap serving those requests again and again from
//! a few KiB of its region.

mod support;
#[path = "support/deadline.rs"]
mod deadline;
#[path = "support/handlers.rs"]
mod handlers;

use handlers::{memplug_run, plugin_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Signals sent in pairs (SIGUSR1 then SIGUSR2): 40,000 in all.
const PAIRS: u32 = 20_000;

/// How long one run may take before it counts as hung (a handler that
/// deadlocks inside an allocator never finishes at all).
const DEADLINE: Duration = Duration::from_secs(300);

/// The most resident memory the program may reach: a few MiB are enough;
/// one KiB kept per signal would be 40 MiB.
const MAX_HWM_KB: u64 = 32 << 10;

/// The bootstrap region that may be carved for the handlers' requests:
/// they are freed at once, so a few chunks serve them all.
const MAX_BOOTSTRAP_BYTES: u64 = 1 << 20;

/// More handler requests than a bootstrap arena of 8 MiB that never reuses
/// its memory could serve (1 KiB and more each).
const MIN_BOOTSTRAP_BLOCKS: u64 = 8192;

/// The fixture program, compiled into `dir`.
fn program(dir: &Path) -> PathBuf {
    let out = dir.join("run_signals");
    let src = support::root().join("tests/fixtures/run_signals.c");
    let r = Command::new(support::cc()).args(["-O1", "-pthread", "-Wall", "-o"]).arg(&out).arg(&src).output();
    let r = r.expect("run the C compiler (is `cc` installed?)");
    assert!(r.status.success(), "compiling {}: {}", src.display(), String::from_utf8_lossy(&r.stderr));
    out
}

/// The value after `key` in the fixture's line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut words = line.split_whitespace();
    words.by_ref().find(|w| *w == key)?;
    words.next()
}

/// What is wrong with one handler's run, if anything.
fn check(name: &str, dir: &Path, prog: &Path) -> Result<(), String> {
    let report = dir.join(format!("report-{name}.json"));
    let mut cmd = memplug_run(dir, name, &["--report-json", report.to_str().unwrap()]);
    cmd.arg(prog).arg(PAIRS.to_string());
    let out = deadline::output_within(cmd, DEADLINE, name)?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("{name}: {}\nstdout: {stdout}\nstderr: {stderr}", out.status));
    }
    let line = stdout.trim();
    let want = [("signals", (2 * PAIRS).to_string()), ("nulls", "0".into()), ("bad", "0".into())];
    for (key, value) in want {
        if field(line, key) != Some(value.as_str()) {
            return Err(format!("{name}: printed {line:?}, wanted {key} {value}"));
        }
    }
    if field(line, "child") != Some("ok") {
        return Err(format!("{name}: the forked child saw a NULL or a bad block: {line:?}"));
    }
    let hwm: u64 = field(line, "hwm_kb").and_then(|v| v.parse().ok()).ok_or(format!("{name}: {line:?}"))?;
    if hwm > MAX_HWM_KB {
        return Err(format!("{name}: resident memory reached {hwm} KiB (more than {MAX_HWM_KB})"));
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&report).map_err(|e| format!("{name}: report: {e}"))?)
        .map_err(|e| format!("{name}: report: {e}"))?;
    let n = |k: &str| v["heap"]["counts"][k].as_u64().unwrap_or(u64::MAX);
    let (blocks, frees, bytes) = (n("bootstrap_blocks"), n("bootstrap_frees"), n("bootstrap_bytes"));
    if blocks < MIN_BOOTSTRAP_BLOCKS || blocks == u64::MAX {
        return Err(format!(
            "{name}: only {blocks} requests went to the bootstrap heap: the signals did not land in plugin calls ({v})"
        ));
    }
    if bytes > MAX_BOOTSTRAP_BYTES || frees + 64 < blocks {
        return Err(format!(
            "{name}: the bootstrap heap served {blocks} blocks, took {frees} back, carved {bytes} bytes"
        ));
    }
    if n("failed_requests") != 0 {
        return Err(format!("{name}: {} requests failed", n("failed_requests")));
    }
    Ok(())
}

#[test]
fn handlers_that_allocate_40000_times_never_get_null_on_any_handler() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let (dir, names) = plugin_dir();
    let prog = program(dir.path());
    let failures: Vec<String> = names.iter().filter_map(|name| check(name, dir.path(), &prog).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
