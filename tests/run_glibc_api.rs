//! The rest of glibc's allocator interface under `memplug run`: a C program
//! calls `free_sized` and `free_aligned_sized` (C23), `mallinfo2` and
//! `mallinfo`, `mallopt`, `malloc_trim`, `malloc_stats` and `malloc_info`,
//! on every bundled handler and every allocator manifest whose library is
//! installed, with the heap report on (so the interposer counts).
//!
//! Asserted for each: the program ends well; `mallinfo2`'s bytes in use grow
//! by at least what it holds and go back after `free_sized`; `mallinfo`
//! agrees; `mallopt` accepts a known parameter and refuses an unknown one;
//! `malloc_trim` answers 0 or 1; `malloc_info` refuses bad options with
//! EINVAL and writes its summary; `malloc_stats` writes to stderr; and the
//! report shows no block left live by the sized frees.

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

/// How long one run may take before it counts as hung.
const DEADLINE: Duration = Duration::from_secs(120);

/// What the program holds at once: 64 blocks of 1000 bytes.
const HELD: u64 = 64 * 1000;

/// The fixture program, compiled into `dir`.
fn program(dir: &Path) -> PathBuf {
    let out = dir.join("run_glibc_api");
    let src = support::root().join("tests/fixtures/run_glibc_api.c");
    let r = Command::new(support::cc())
        .args(["-O1", "-Wall", "-Wno-deprecated-declarations", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-ldl")
        .output();
    let r = r.expect("run the C compiler (is `cc` installed?)");
    assert!(r.status.success(), "compiling {}: {}", src.display(), String::from_utf8_lossy(&r.stderr));
    out
}

/// The numbers after `key` in the fixture's line.
fn field(line: &str, key: &str, n: usize) -> Option<Vec<i64>> {
    let mut words = line.split_whitespace();
    words.by_ref().find(|w| *w == key)?;
    words.take(n).map(|w| w.parse().ok()).collect()
}

/// What is wrong with one handler's run, if anything.
fn check(name: &str, dir: &Path, prog: &Path) -> Result<(), String> {
    let report = dir.join(format!("report-{name}.json"));
    let mut cmd = memplug_run(dir, name, &["--report-json", report.to_str().unwrap()]);
    cmd.arg(prog);
    let out = deadline::output_within(cmd, DEADLINE, name)?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("{name}: {}\nstdout: {stdout}\nstderr: {stderr}", out.status));
    }
    let line = stdout.lines().last().unwrap_or_default();
    let one = |key: &str| field(line, key, 1).map(|v| v[0]).ok_or(format!("{name}: no {key} in {line:?}"));
    let (before, during, after) = (one("before")?, one("during")?, one("after")?);
    if during - before < HELD as i64 || after > before + 4096 {
        return Err(format!("{name}: mallinfo2 uordblks {before} -> {during} -> {after} holding {HELD} bytes: {line}"));
    }
    if one("legacy")? != during {
        return Err(format!("{name}: mallinfo and mallinfo2 disagree: {line}"));
    }
    if one("opt_known")? != 1 || one("opt_unknown")? != 0 {
        return Err(format!("{name}: mallopt answered {line}"));
    }
    if !matches!(one("trim")?, 0 | 1) {
        return Err(format!("{name}: malloc_trim answered {line}"));
    }
    if field(line, "info_bad", 2) != Some(vec![-1, 1]) || one("xml")? != 1 {
        return Err(format!("{name}: malloc_info answered {line}"));
    }
    if stderr.trim().is_empty() {
        return Err(format!("{name}: malloc_stats wrote nothing to stderr"));
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&report).map_err(|e| format!("{name}: report: {e}"))?)
        .map_err(|e| format!("{name}: report: {e}"))?;
    let live = v["heap"]["counts"]["live_bytes"].as_u64().ok_or(format!("{name}: report {v}"))?;
    if live >= HELD {
        return Err(format!("{name}: {live} bytes live at exit: the sized frees did not free ({v})"));
    }
    Ok(())
}

#[test]
fn glibcs_allocator_interface_answers_on_every_handler() {
    if support::under_asan(support::INTERPOSER_UNDER_ASAN) {
        return;
    }
    let (dir, names) = plugin_dir();
    let prog = program(dir.path());
    let failures: Vec<String> = names.iter().filter_map(|name| check(name, dir.path(), &prog).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
