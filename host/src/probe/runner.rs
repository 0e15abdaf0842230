//! Starting a worker, feeding it its request, and watching it under a
//! timeout: its stages as they come, its answer, and how it ended.

use super::wire::{self, Answer, Line, Request};
use super::{WORKER_ARG, WORKER_ENV};
use crate::discover::Candidate;
use crate::error::{IsolationRefusal, Refusal};
use crate::raw::process::kill_group;
use crate::report::{Checks, Report, Status};
use crate::stage::describe;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A worker executable (see the [module docs](crate::probe)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    exe: PathBuf,
}

/// How a worker ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerOutcome {
    /// It answered and exited normally.
    Answered(Answer),
    /// It was killed by `signal` (after its answer, if `stage` is `exit`).
    Crashed {
        /// The signal's number.
        signal: i32,
        /// The last stage it announced (`None`: before any).
        stage: Option<String>,
    },
    /// It did not finish within the timeout and was killed, with everything
    /// it started.
    TimedOut {
        /// The last stage it announced.
        stage: Option<String>,
        /// The timeout.
        after: Duration,
    },
    /// It ended without an answer.
    NoReport {
        /// Its exit code.
        code: Option<i32>,
        /// The last stage it announced.
        stage: Option<String>,
    },
    /// It could not be started (or its answer not read).
    Failed(String),
}

/// What the reader thread passes on.
enum Msg {
    Stage(String),
    Answer(Result<Answer, String>),
    Eof,
}

impl Worker {
    /// A worker run as `exe __memplug-worker`.
    pub fn new(exe: impl Into<PathBuf>) -> Worker {
        Worker { exe: exe.into() }
    }

    /// The worker executable: [`WORKER_ENV`] if set, else `memplug` beside
    /// the current executable (or in the directory above, for cargo's
    /// `deps/`), else `memplug` on `PATH`.
    pub fn find() -> Result<Worker, Refusal> {
        if let Some(exe) = std::env::var_os(WORKER_ENV).filter(|v| !v.is_empty()) {
            return Ok(Worker::new(exe));
        }
        let mut looked = Vec::new();
        if let Some(dir) = std::env::current_exe().ok().as_deref().and_then(Path::parent) {
            for d in [dir.to_path_buf(), dir.join("..")] {
                let exe = d.join("memplug");
                if exe.is_file() {
                    return Ok(Worker::new(exe));
                }
                looked.push(exe.display().to_string());
            }
        }
        for d in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let exe = d.join("memplug");
            if exe.is_file() {
                return Ok(Worker::new(exe));
            }
        }
        looked.push("memplug on PATH".into());
        Err(Refusal::from(IsolationRefusal::ProbeUnavailable {
            problem: format!("no worker executable found (looked at {WORKER_ENV}, {})", looked.join(", ")),
        }))
    }

    /// The executable.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Run `request` in a new worker; kill it (and everything it started)
    /// after `timeout`. The worker's standard error is this process's.
    pub fn run(&self, request: &Request, timeout: Duration) -> WorkerOutcome {
        let about = request.candidate.as_ref().map_or_else(|| "an allocator spec".into(), |c| c.to_string());
        tracing::debug!(candidate = %about, worker = %self.exe.display(), "starting a worker process");
        let mut child = match Command::new(&self.exe)
            .arg(WORKER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return WorkerOutcome::Failed(format!("cannot start the worker {}: {e}", self.exe.display())),
        };
        let pgid = child.id();
        let outcome = watch(&mut child, request, timeout);
        // Whatever happened, nothing the worker started outlives it.
        kill_group(pgid);
        let _ = child.wait();
        outcome
    }
}

/// Feed `request` to `child` and watch it until it ends or `timeout` passes.
fn watch(child: &mut Child, request: &Request, timeout: Duration) -> WorkerOutcome {
    let deadline = Instant::now() + timeout;
    if let Some(mut stdin) = child.stdin.take() {
        // A worker that dies before reading its request is seen below.
        match wire::encode(request) {
            Ok(bytes) => {
                let _ = stdin.write_all(&bytes);
            }
            Err(e) => return WorkerOutcome::Failed(e),
        }
    }
    let Some(stdout) = child.stdout.take() else { return WorkerOutcome::Failed("no pipe from the worker".into()) };
    let rx = read_in_background(stdout);
    let mut stage = None;
    let mut answer = None;
    let mut status = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Msg::Stage(s)) => stage = Some(s),
            Ok(Msg::Answer(a)) => answer = Some(a),
            Ok(Msg::Eof) | Err(RecvTimeoutError::Disconnected) => {
                status = wait_until(child, deadline);
                break;
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        if let Ok(Some(s)) = child.try_wait() {
            // Give the reader a moment to pass on what the worker wrote last.
            while let Ok(msg) = rx.recv_timeout(Duration::from_millis(200)) {
                match msg {
                    Msg::Stage(s) => stage = Some(s),
                    Msg::Answer(a) => answer = Some(a),
                    Msg::Eof => break,
                }
            }
            status = Some(s);
            break;
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    let Some(status) = status else { return WorkerOutcome::TimedOut { stage, after: timeout } };
    classify(status, stage, answer)
}

/// Wait for the child until `deadline`; `None` if it is still running.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// How a worker that ended did.
fn classify(status: ExitStatus, stage: Option<String>, answer: Option<Result<Answer, String>>) -> WorkerOutcome {
    match (status.signal(), answer) {
        (Some(signal), Some(Ok(_))) => WorkerOutcome::Crashed { signal, stage: Some("exit".into()) },
        (Some(signal), _) => WorkerOutcome::Crashed { signal, stage },
        (None, Some(Ok(a))) if status.success() => WorkerOutcome::Answered(a),
        (None, Some(Err(e))) => WorkerOutcome::Failed(format!("the worker's answer could not be read: {e}")),
        (None, _) => WorkerOutcome::NoReport { code: status.code(), stage },
    }
}

/// Read the worker's protocol lines on a thread of their own, so that the
/// watcher can keep time.
fn read_in_background(stdout: impl Read + Send + 'static) -> Receiver<Msg> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            let msg = match wire::parse_line(text.trim_end_matches('\n')) {
                Line::Stage(s) => Msg::Stage(s),
                Line::Result(len) => {
                    let mut body = vec![0; len];
                    match r.read_exact(&mut body) {
                        Ok(()) => Msg::Answer(wire::decode(&body)),
                        Err(e) => Msg::Answer(Err(format!("the answer was cut short: {e}"))),
                    }
                }
                Line::Other => continue,
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
        let _ = tx.send(Msg::Eof);
    });
    rx
}

/// The name of a signal, e.g. `SIGSEGV`; `signal N` for one without a name
/// here.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

impl WorkerOutcome {
    /// The outcome as reports about `candidate`: the worker's own, or one
    /// saying how it failed (with an empty conformance pass when
    /// `with_checks`, as `check` reports refusals).
    pub fn into_reports(self, candidate: &Candidate, with_checks: bool) -> Vec<Report> {
        let checks = || with_checks.then(Checks::none);
        let (status, message, stage, signal) = match self {
            WorkerOutcome::Answered(Answer::Reports(reports)) => return reports,
            WorkerOutcome::Answered(Answer::Inspection(_) | Answer::Bench(_)) => {
                let msg = "the worker answered something else than reports".to_string();
                return vec![Report::refused(candidate, "probe-failed", msg, None, None, checks())];
            }
            WorkerOutcome::Failed(msg) => {
                return vec![Report::refused(candidate, "probe-unavailable", msg, None, None, checks())];
            }
            other => other.failure().expect("every other outcome is a failure"),
        };
        vec![Report::worker_failed(candidate, status, message, stage, signal, checks())]
    }

    /// For a worker that crashed, timed out or ended without a report: the
    /// status, a message, the stage and the signal's name.
    pub fn failure(&self) -> Option<(Status, String, Option<String>, Option<String>)> {
        match self {
            WorkerOutcome::Crashed { signal, stage } => {
                let name = signal_name(*signal);
                let msg = format!(
                    "the plugin crashed the process checking it ({name}) {}; fix or remove the plugin",
                    describe(stage.as_deref())
                );
                Some((Status::Crashed, msg, stage.clone(), Some(name)))
            }
            WorkerOutcome::TimedOut { stage, after } => {
                let msg = format!(
                    "the plugin did not finish within {} s ({}); it was killed. A plugin that hangs cannot be used; \
                     if it is only slow, raise --timeout",
                    after.as_secs_f64(),
                    describe(stage.as_deref()).replacen("in ", "stuck in ", 1)
                );
                Some((Status::TimedOut, msg, stage.clone(), None))
            }
            WorkerOutcome::NoReport { code, stage } => {
                let code = code.map_or("none".to_string(), |c| c.to_string());
                let msg = format!(
                    "the process checking the plugin ended {} without a report (exit status {code}): the plugin ends \
                     the process (it calls `exit` or `_exit`)",
                    describe(stage.as_deref())
                );
                Some((Status::NoReport, msg, stage.clone(), None))
            }
            _ => None,
        }
    }

    /// What a registry probing a candidate makes of the outcome: `Ok` to go
    /// on and load it here (a candidate the worker refused at loading is
    /// refused again here, precisely), or why not.
    pub fn verdict(&self) -> Result<(), Refusal> {
        match self {
            WorkerOutcome::Answered(Answer::Reports(reports)) => match reports.first() {
                Some(r) if r.reason.as_deref() == Some("conformance-failed") => {
                    Err(Refusal::from(IsolationRefusal::ConformanceFailed { summary: r.message.clone() }))
                }
                _ => Ok(()),
            },
            WorkerOutcome::Answered(Answer::Inspection(_) | Answer::Bench(_)) => Ok(()),
            WorkerOutcome::Crashed { signal, stage } => Err(Refusal::from(IsolationRefusal::Crashed {
                signal: signal_name(*signal),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::TimedOut { stage, after } => Err(Refusal::from(IsolationRefusal::TimedOut {
                seconds: format!("{} s", after.as_secs_f64()),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::NoReport { code, stage } => Err(Refusal::from(IsolationRefusal::NoReport {
                status: code.map_or("none".to_string(), |c| c.to_string()),
                stage: describe(stage.as_deref()),
            })),
            WorkerOutcome::Failed(problem) => {
                Err(Refusal::from(IsolationRefusal::ProbeUnavailable { problem: problem.clone() }))
            }
        }
    }
}
