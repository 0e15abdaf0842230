//! Plugins that attack the process checking them cannot make the host trust
//! a forged answer, exhaust its memory, outlive its deadline, or leave
//! processes behind: the worker's answer is untrusted input, the timeout
//! bounds the whole run, what the worker's children write into its channel
//! is not the worker's answer (the same verdict every time), and everything
//! a worker started is killed when its candidate is done.
//!
//! The hostile plugins are built from tests/fixtures/hostile_plugin.c in
//! temp directories, beside copies of the bundled plugins.

mod support;

use memplug::policy::Probe;
use memplug::probe::{Answer, Request, Task, WORKER_ARG};
use memplug::{Candidate, Policy, Registry};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const FORGE_CTOR: u32 = 1;
const FORGE_DTOR: u32 = 2;
const HUGE_RESULT: u32 = 3;
const LONG_LINE: u32 = 4;
const STAGE_SPAM: u32 = 5;
const ESCAPE: u32 = 6;
const HOLD_STDERR: u32 = 7;
const CHILD_SPAM: u32 = 8;
const CHILD_RACE: u32 = 9;
const STARVE: u32 = 10;

const BUNDLED: [&str; 4] = ["system", "aligned", "tracking", "arena"];

/// Build a hostile plugin `lib{name}.so` into `dir`; `frame` and `pids` are
/// the files modes 1, 2 and 6 use (`pids` is mode 9's run counter).
fn hostile(dir: &Path, name: &str, mode: u32, frame: Option<&Path>, pids: Option<&Path>) -> PathBuf {
    let mut defines = vec![format!("HOSTILE_NAME=\"{name}\""), format!("HOSTILE_MODE={mode}")];
    if let Some(f) = frame {
        defines.push(format!("HOSTILE_FRAME=\"{}\"", f.display()));
    }
    if let Some(p) = pids {
        defines.push(format!("HOSTILE_PIDS=\"{}\"", p.display()));
        defines.push(format!("HOSTILE_COUNT=\"{}\"", p.display()));
    }
    let defines: Vec<&str> = defines.iter().map(String::as_str).collect();
    let src = support::root().join("tests/fixtures/hostile_plugin.c");
    support::build_c(&src, dir, &format!("lib{name}.so"), &defines)
}

/// Copy the bundled plugins into `dir`.
fn bundled_into(dir: &Path) {
    for name in BUNDLED {
        std::fs::copy(support::plugin(name), dir.join(format!("libmemplug_{name}.so"))).unwrap();
    }
}

fn memplug() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memplug"));
    c.env("MEMPLUG_CACHE", "off");
    c
}

fn json(out: &[u8]) -> Vec<Value> {
    serde_json::from_slice::<Value>(out)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
        .as_array()
        .unwrap()
        .clone()
}

/// The report whose path ends in `file`.
fn row<'a>(rows: &'a [Value], file: &str) -> &'a Value {
    rows.iter().find(|r| r["path"].as_str().unwrap().ends_with(file)).unwrap_or_else(|| panic!("no row for {file}"))
}

fn assert_bundled_ok(rows: &[Value]) {
    for name in BUNDLED {
        let r = row(rows, &format!("libmemplug_{name}.so"));
        assert_eq!(r["status"], "ok", "{r}");
    }
}

fn assert_bad_answer(r: &Value) {
    assert_eq!((r["status"].as_str(), r["reason"].as_str()), (Some("rejected"), Some("bad-answer")), "{r}");
    assert!(r["message"].as_str().unwrap().contains("protocol channel"), "{r}");
}

/// The real answer of a worker checking `plugin`.
fn real_answer(plugin: &Path) -> Answer {
    let request = Request {
        task: Task::Check,
        candidate: Some(Candidate::new(plugin)),
        spec: None,
        options: Vec::new(),
        policy: Policy::default(),
        bench: None,
    };
    let mut bytes = Vec::new();
    ciborium::into_writer(&request, &mut bytes).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .arg(WORKER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    memplug::probe::read_answer(&request, &out.stdout[..]).unwrap().expect("the worker answers")
}

/// Write a framed answer, after `stages`, to `file`.
fn write_frame(file: &Path, stages: &str, answer: &Answer) {
    let mut body = Vec::new();
    ciborium::into_writer(answer, &mut body).unwrap();
    let mut bytes = format!("{stages}result {}\n", body.len()).into_bytes();
    bytes.extend(body);
    std::fs::write(file, bytes).unwrap();
}

/// An "ok" answer about `path`: the real answer about the bundled system
/// plugin with its path changed.
fn ok_answer_about(path: &Path) -> Answer {
    let mut answer = real_answer(&support::plugin("system"));
    let Answer::Reports(reports) = &mut answer else { panic!("{answer:?}") };
    assert_eq!(reports[0].status, memplug::report::Status::Ok);
    reports[0].path = path.to_path_buf();
    answer
}

#[test]
fn forged_answers_are_bad_answers_and_every_good_plugin_is_still_ok() {
    let dir = tempfile::tempdir().unwrap();
    let frames = tempfile::tempdir().unwrap();
    bundled_into(dir.path());
    let imitated = "stage precheck\nstage load\nstage entry\nstage check:alignment\nstage report\n";
    // (name, mode, stages written before the frame, the answer's subject)
    let cases: &[(&str, u32, &str, Option<&str>)] = &[
        ("forge_ctor", FORGE_CTOR, "stage report\n", None),
        ("forge_dtor", FORGE_DTOR, "stage report\n", None),
        ("forge_other", FORGE_CTOR, imitated, Some("libmemplug_system.so")),
        ("forge_empty", FORGE_CTOR, imitated, Some("")),
    ];
    for &(name, mode, stages, about) in cases {
        let lib = dir.path().join(format!("lib{name}.so"));
        let frame = frames.path().join(name);
        let answer = match about {
            None => ok_answer_about(&lib),
            Some("") => Answer::Reports(Vec::new()),
            Some(other) => ok_answer_about(&dir.path().join(other)),
        };
        write_frame(&frame, stages, &answer);
        hostile(dir.path(), name, mode, Some(&frame), None);
    }
    let out = memplug().args(["check", "--json", "--timeout", "10"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = json(&out.stdout);
    assert_eq!(rows.len(), BUNDLED.len() + cases.len(), "no row vanishes: {rows:?}");
    assert_bundled_ok(&rows);
    for &(name, ..) in cases {
        assert_bad_answer(row(&rows, &format!("lib{name}.so")));
    }
}

#[test]
fn a_probing_registry_refuses_a_forging_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libforge_probe.so");
    let frame = dir.path().join("frame");
    write_frame(&frame, "stage report\n", &ok_answer_about(&lib));
    hostile(dir.path(), "forge_probe", FORGE_CTOR, Some(&frame), None);
    let probe = Probe {
        timeout: Duration::from_secs(10),
        worker: Some(PathBuf::from(env!("CARGO_BIN_EXE_memplug"))),
        ..Probe::default()
    };
    let registry = Registry::with_policy(Policy { probe: Some(probe), ..Policy::default() });
    let e = registry.load_path(&lib).unwrap_err();
    assert_eq!(e.code(), "bad-answer", "{e}");
    assert!(registry.get("forge_probe").is_none());
}

/// Run `memplug check --json` on `dir` and wait for it, with the peak
/// resident memory of it and the workers it reaped (`wait4`), in KiB.
#[allow(clippy::zombie_processes)] // reaped by `wait4`, which std does not see
fn check_with_peak_memory(dir: &Path, timeout: &str) -> (Output, i64) {
    let mut child = memplug()
        .args(["check", "--json", "--timeout", timeout])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut e = Vec::new();
        let _ = stderr.read_to_end(&mut e);
        e
    });
    let mut out = Vec::new();
    stdout.read_to_end(&mut out).unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: all-zero bytes are a valid `rusage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid, writable locals; `pid` is our
    // unreaped child.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid);
    let status = std::os::unix::process::ExitStatusExt::from_raw(status);
    (Output { status, stdout: out, stderr: err.join().unwrap() }, usage.ru_maxrss)
}

#[test]
fn a_flood_on_the_channel_neither_aborts_nor_bloats_the_host() {
    let dir = tempfile::tempdir().unwrap();
    bundled_into(dir.path());
    hostile(dir.path(), "huge_result", HUGE_RESULT, None, None);
    hostile(dir.path(), "long_line", LONG_LINE, None, None);
    let (out, peak_kib) = check_with_peak_memory(dir.path(), "20");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = json(&out.stdout);
    assert_eq!(rows.len(), BUNDLED.len() + 2);
    assert_bundled_ok(&rows);
    assert_bad_answer(row(&rows, "libhuge_result.so"));
    let long = row(&rows, "liblong_line.so");
    assert_ne!(long["status"], "ok", "{long}");
    // 256 MiB went through the channel; the host kept far less of it.
    assert!(peak_kib < 100 * 1024, "peak resident memory {peak_kib} KiB");
}

#[test]
fn the_timeout_bounds_the_whole_run_even_while_the_channel_is_written() {
    let dir = tempfile::tempdir().unwrap();
    hostile(dir.path(), "stage_spam", STAGE_SPAM, None, None);
    let started = Instant::now();
    let (out, _) = check_with_peak_memory(dir.path(), "1");
    let took = started.elapsed();
    let rows = json(&out.stdout);
    assert_eq!(rows.len(), 1);
    let r = row(&rows, "libstage_spam.so");
    assert_eq!(r["status"], "timed-out", "{r}");
    // A watchdog, not a measurement: without a deadline it runs for ever.
    // The worker's own time reaches 1 s, or the wall clock its bound.
    let bound = Duration::from_secs(u64::from(memplug::probe::WALL_CLOCK_FACTOR) + 10);
    assert!(took < bound, "took {took:?}");
}

#[test]
fn a_worker_starved_of_a_processor_is_timed_out_but_never_remembered() {
    // 65 threads spinning in a worker on a machine of a few processors: the
    // worker's own time does not reach the timeout before the wall-clock
    // bound does. That says the machine (here, the plugin itself) is too
    // busy to judge, so the time-out is reported as such and the verdict
    // cache, on, keeps nothing: the second run checks again.
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    hostile(dir.path(), "starve", STARVE, None, None);
    for run in 1..=2 {
        let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
            .args(["check", "--json", "--timeout", "0.5"])
            .arg(dir.path())
            .env_remove("MEMPLUG_CACHE")
            .env("XDG_CACHE_HOME", home.path())
            .output()
            .unwrap();
        let rows = json(&out.stdout);
        let r = row(&rows, "libstarve.so");
        assert_eq!(r["status"], "timed-out", "run {run}: {r}");
        assert_eq!(r["starved"], true, "run {run}: {r}");
        assert!(r.get("cached").is_none(), "run {run}: a starved time-out came from the cache: {r}");
        let message = r["message"].as_str().unwrap();
        assert!(message.contains("a rerun on a quieter machine"), "run {run}: {message}");
    }
}

/// The `(status, reason)` of every row of a `check --json` run, by file.
fn verdicts(rows: &[Value]) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = rows
        .iter()
        .map(|r| {
            let file = r["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
            (file, r["status"].as_str().unwrap().to_string(), r["reason"].as_str().unwrap_or("").to_string())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn what_a_plugin_s_child_writes_into_the_channel_never_changes_the_verdict() {
    // A child that writes protocol lines, forged frames and junk all the
    // while, and one whose single line lands before the worker's answer in
    // one run and after it in the next: what they write is not the
    // worker's, so every run is `ok`, every time.
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    bundled_into(dir.path());
    hostile(dir.path(), "child_spam", CHILD_SPAM, None, None);
    hostile(dir.path(), "child_race", CHILD_RACE, None, Some(&scratch.path().join("runs")));
    let mut first = None;
    for run in 1..=6 {
        let out = memplug().args(["check", "--json", "--timeout", "20"]).arg(dir.path()).output().unwrap();
        let rows = json(&out.stdout);
        let v = verdicts(&rows);
        assert_eq!(rows.len(), BUNDLED.len() + 2, "run {run}: {rows:?}");
        for r in &rows {
            assert_eq!(r["status"], "ok", "run {run}: {r}");
        }
        assert_eq!(first.get_or_insert_with(|| v.clone()), &v, "run {run}");
    }
    let runs = std::fs::read_to_string(scratch.path().join("runs")).unwrap();
    assert_eq!(runs.trim(), "6", "the racing child wrote early and late in turn");
}

fn alive(pid: i32) -> bool {
    // SAFETY: `kill` with signal 0 only checks that `pid` exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// `memplug`, the sandbox as the default (`None`) or as `sandbox` says.
fn memplug_sandboxed(sandbox: Option<&str>) -> Command {
    let mut c = memplug();
    match sandbox {
        Some(mode) => c.env("MEMPLUG_SANDBOX", mode),
        None => c.env_remove("MEMPLUG_SANDBOX"),
    };
    c
}

#[test]
fn nothing_a_plugin_starts_outlives_the_check() {
    // Sandboxed, the children's setsid and setpgid are forbidden calls (they
    // end those children, and refuse the plugin); unsandboxed they succeed,
    // and the sweep must find the children where they went.
    for sandbox in [None, Some("off")] {
        escapers_are_swept(sandbox);
    }
}

fn escapers_are_swept(sandbox: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let pids = scratch.path().join("pids");
    bundled_into(dir.path());
    hostile(dir.path(), "escape", ESCAPE, None, Some(&pids));
    let out = memplug_sandboxed(sandbox).args(["check", "--json", "--timeout", "10"]).arg(dir.path()).output().unwrap();
    let rows = json(&out.stdout);
    assert_bundled_ok(&rows);
    let escape = row(&rows, "libescape.so");
    match sandbox {
        None => {
            // Two children make their calls at once: whichever traps first is
            // the one named.
            assert_eq!(escape["reason"].as_str(), Some("forbidden-call"), "{escape}");
            assert!(matches!(escape["call"].as_str(), Some("setsid" | "setpgid")), "{escape}");
        }
        Some(_) => assert_eq!(escape["status"], "ok"),
    }
    let pids: Vec<i32> = std::fs::read_to_string(&pids).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(pids.len(), 3, "setsid, setpgid and double-forked children: {pids:?}");
    let until = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &survivors {
        // SAFETY: clean up what the host failed to kill, so the test leaves
        // nothing behind.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert!(survivors.is_empty(), "still alive after the check: {survivors:?}");
}

#[test]
fn a_child_holding_stderr_does_not_hold_the_host_s_output_open() {
    // Unsandboxed too: sandboxed, the child's setsid ends it at once.
    for sandbox in [None, Some("off")] {
        stderr_holder_is_swept(sandbox);
    }
}

fn stderr_holder_is_swept(sandbox: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    bundled_into(dir.path());
    hostile(dir.path(), "hold_stderr", HOLD_STDERR, None, None);
    // `memplug check 2>&1 | cat`: read the pipe to its end.
    let started = Instant::now();
    let mut child = Command::new("sh")
        .args(["-c", "\"$0\" check --timeout 10 \"$1\" 2>&1 | cat"])
        .arg(env!("CARGO_BIN_EXE_memplug"))
        .arg(dir.path())
        .env("MEMPLUG_CACHE", "off")
        .env("MEMPLUG_SANDBOX", sandbox.unwrap_or("on"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    // Watchdog: the plugin's child sleeps 30 s holding what it was given.
    while !reader.is_finished() && started.elapsed() < Duration::from_secs(25) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let finished = reader.is_finished();
    if !finished {
        let _ = child.kill();
    }
    let _ = child.wait();
    assert!(finished, "the output pipe was still open after {:?}", started.elapsed());
    let out = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    assert!(out.contains("hold_stderr"), "{out}");
}
