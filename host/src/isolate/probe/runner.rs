//! Starting a worker, feeding it its request, and watching it until a
//! deadline: its stages as they come, its answer, and how it ended; then
//! ending everything it started.
//!
//! The protocol channel is a Unix stream socket whose reading end learns
//! the writer of every byte ([`crate::isolate::raw::process::recv_from`]): the
//! watcher reads the worker's own bytes as the protocol, and of what the
//! worker's descendants write only records of forbidden calls (see
//! [`crate::probe`], "One writer"). When the worker has ended, the channel
//! is shut: what was written before it ended is read, and nothing after.

use super::answer::{Seen, validate};
use super::frames::{Event, ForeignRecords, Frames, LineRead, MAX_LINE, read_line_bounded};
use super::outcome::{WALL_CLOCK_FACTOR, WorkerOutcome};
use super::supervise::{self, Supervision};
use super::wire::{self, Answer, Request};
use super::{WORKER_ARG, WORKER_ENV};
use crate::admit::error::{IsolationRefusal, Refusal};
use crate::isolate::own_time::OwnClock;
use crate::isolate::raw::process::{Exit, channel_pair, kill_group, peek_exit, recv_from};
use crate::isolate::syscalls::{self, TRAPPED_STATUS};
use std::ffi::OsString;
use std::io::{BufReader, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

/// How long the watcher waits, after the worker ended and the channel was
/// shut, for the reader to reach the channel's end. It reads what is
/// queued in the socket (a few hundred KiB at most), so this is only a
/// guard against a reader that cannot run.
const DRAIN_GUARD: Duration = Duration::from_secs(30);

/// A worker executable (see the [module docs](crate::isolate::probe)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    exe: PathBuf,
    args: Vec<OsString>,
}

impl Worker {
    /// A worker run as `exe __memplug-worker`.
    pub fn new(exe: impl Into<PathBuf>) -> Worker {
        Worker { exe: exe.into(), args: Vec::new() }
    }

    /// A worker run as `exe ARGS… __memplug-worker`: a program that serves
    /// as a worker when given those arguments first, e.g. an interpreter
    /// and the module that calls [`crate::worker::serve`]
    /// (`python3 -m memplug._worker`).
    pub fn with_args(exe: impl Into<PathBuf>, args: impl IntoIterator<Item = impl Into<OsString>>) -> Worker {
        Worker { exe: exe.into(), args: args.into_iter().map(Into::into).collect() }
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
            fix: format!(
                "Install the `memplug` command beside this program or on PATH, or set {WORKER_ENV} to its path (or \
                 turn probing off in the policy)"
            ),
        }))
    }

    /// The executable.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Run `request` in a new worker. `timeout` bounds the whole run,
    /// measured on the worker's own clock: wall-clock time less the time
    /// the worker (its threads and its descendants) waited for a processor
    /// (see the [module docs](crate::probe), "Deadline and supervision"),
    /// so that a busy machine does not make a worker that is only kept
    /// waiting time out. A worker that has had `timeout` of its own time,
    /// or has run [`WALL_CLOCK_FACTOR`] times `timeout` by the wall clock
    /// whatever it had, is killed, with everything it started, and the
    /// outcome is [`WorkerOutcome::TimedOut`]. Whatever happened, every
    /// process the worker started is killed and reaped before this returns
    /// (see [`crate::isolate::probe`]'s supervision). The worker's standard error is
    /// forwarded, line by line, to this process's.
    pub fn run(&self, request: &Request, timeout: Duration) -> WorkerOutcome {
        let about = request.subject().to_string();
        tracing::debug!(candidate = %about, worker = %self.exe.display(), "starting a worker process");
        let _supervision = Supervision::begin();
        let (channel, worker_end) = match channel_pair() {
            Ok(pair) => pair,
            Err(e) => return WorkerOutcome::Failed(format!("cannot make the worker's protocol channel: {e}")),
        };
        let mut command = Command::new(&self.exe);
        command
            .args(&self.args)
            .arg(WORKER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(OwnedFd::from(worker_end)))
            .stderr(Stdio::piped());
        let spawned = supervise::spawn(&mut command);
        // The worker's end of the channel is the worker's (and its
        // descendants') alone from now on.
        drop(command);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => return WorkerOutcome::Failed(format!("cannot start the worker {}: {e}", self.exe.display())),
        };
        let pid = child.id();
        let mut clock = OwnClock::start(pid);
        let forwarding = child.stderr.take().map(forward_stderr);
        let outcome = watch(&mut child, request, channel, &mut clock, timeout);
        tracing::debug!(candidate = %about, own = ?clock.own(), wall = ?clock.wall(), "the worker's time");
        // The worker is not reaped yet, so its process group id cannot have
        // been reused: kill the group, reap the worker, then sweep.
        kill_group(pid);
        let _ = child.wait();
        supervise::finish(pid);
        if let Some((done, finished)) = forwarding {
            // Every writer is gone now; let the forwarder pass on the last
            // lines, but never wait on it for long.
            let _ = finished.recv_timeout(Duration::from_millis(200));
            done.store(true, Ordering::Relaxed);
        }
        tracing::debug!(candidate = %about, "worker done");
        outcome
    }
}

/// What the watcher learned so far.
#[derive(Default)]
struct Watched {
    stage: Option<String>,
    seen: Seen,
    answer: Option<Answer>,
    violation: Option<String>,
    /// The first forbidden call recorded, and the stage it came in.
    trapped: Option<(i64, Option<String>)>,
    eof: bool,
}

impl Watched {
    fn take(&mut self, event: Event) {
        match event {
            Event::Stage(s) => {
                if self.answer.is_none() {
                    self.seen.note(&s);
                }
                self.stage = Some(s);
            }
            Event::Answer(a) => self.answer = Some(a),
            Event::Violation(v) => self.violation = Some(v),
            Event::Trapped(n) if self.trapped.is_none() => {
                let stage = if self.answer.is_some() { Some("exit".into()) } else { self.stage.clone() };
                self.trapped = Some((n, stage));
            }
            Event::Trapped(_) => {}
            Event::Eof => self.eof = true,
        }
    }
}

/// Feed `request` to `child`, read `channel` (the parent's end of its
/// protocol channel) and watch the child until it ends or its `clock`
/// reaches `timeout` (see [`Worker::run`]). Never reaps the child; shuts
/// the channel before it returns.
fn watch(
    child: &mut Child,
    request: &Request,
    channel: UnixStream,
    clock: &mut OwnClock,
    timeout: Duration,
) -> WorkerOutcome {
    let shut = match channel.try_clone() {
        Ok(s) => s,
        Err(e) => return WorkerOutcome::Failed(format!("cannot read the worker's protocol channel: {e}")),
    };
    let outcome = watch_channel(child, request, channel, &shut, clock, timeout);
    // Whatever the outcome, the reader ends now: it reads what is queued,
    // then the end of the stream.
    let _ = shut.shutdown(Shutdown::Read);
    outcome
}

/// [`watch`], with `shut` a handle of `channel` to shut it by.
fn watch_channel(
    child: &mut Child,
    request: &Request,
    channel: UnixStream,
    shut: &UnixStream,
    clock: &mut OwnClock,
    timeout: Duration,
) -> WorkerOutcome {
    if let Some(mut stdin) = child.stdin.take() {
        // On a thread of its own, so that a worker that does not read its
        // request cannot hold the watcher past the deadline; one that dies
        // before reading it is seen below.
        let bytes = match wire::encode(request) {
            Ok(bytes) => bytes,
            Err(e) => return WorkerOutcome::Failed(e),
        };
        std::thread::spawn(move || stdin.write_all(&bytes));
    }
    let rx = read_in_background(channel, child.id());
    let mut w = Watched::default();
    let wall_limit = timeout.saturating_mul(WALL_CLOCK_FACTOR);
    let exit = loop {
        let own = clock.own();
        if own >= timeout || clock.wall() >= wall_limit {
            return WorkerOutcome::TimedOut { stage: w.stage, after: timeout, starved: own < timeout };
        }
        match rx.recv_timeout((timeout - own).min(Duration::from_millis(20))) {
            Ok(event) => w.take(event),
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(5)),
            Err(RecvTimeoutError::Timeout) => {}
        }
        if let Some(v) = w.violation.take() {
            return match w.trapped {
                Some((n, stage)) => WorkerOutcome::Forbidden { call: Some(syscalls::name(n)), stage },
                None => WorkerOutcome::BadAnswer { problem: v, stage: w.stage },
            };
        }
        if let Some(exit) = peek_exit(child.id()) {
            break exit;
        }
    };
    // It ended, so everything it wrote is queued in the channel: shut the
    // channel (a descendant that writes on gets EPIPE), read what is
    // queued, to the channel's end, and judge. No deadline decides here.
    let _ = shut.shutdown(Shutdown::Read);
    let until = Instant::now() + DRAIN_GUARD;
    while !w.eof && w.violation.is_none() {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(event) => w.take(event),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                tracing::warn!("the worker's protocol channel was not read to its end");
                break;
            }
        }
    }
    drop(rx);
    classify(exit, w, request)
}

/// How a worker that ended did. A record of a forbidden call decides,
/// whatever else happened (a forked child may have made the call and the
/// worker answered after it); so does the exit status of the `SIGSYS`
/// handler without its record.
fn classify(exit: Exit, w: Watched, request: &Request) -> WorkerOutcome {
    if let Some((n, stage)) = w.trapped {
        return WorkerOutcome::Forbidden { call: Some(syscalls::name(n)), stage };
    }
    if exit == Exit::Code(TRAPPED_STATUS) {
        let stage = if w.answer.is_some() { Some("exit".into()) } else { w.stage };
        return WorkerOutcome::Forbidden { call: None, stage };
    }
    if let Some(problem) = w.violation {
        return WorkerOutcome::BadAnswer { problem, stage: w.stage };
    }
    match (exit, w.answer) {
        (Exit::Signal(signal), Some(_)) => WorkerOutcome::Crashed { signal, stage: Some("exit".into()) },
        (Exit::Signal(signal), None) => WorkerOutcome::Crashed { signal, stage: w.stage },
        (Exit::Code(0), Some(a)) => match validate(request, &w.seen, a) {
            Ok(a) => WorkerOutcome::Answered(a),
            Err(problem) => WorkerOutcome::BadAnswer { problem, stage: w.stage },
        },
        (Exit::Code(code), _) => WorkerOutcome::NoReport { code: Some(code), stage: w.stage },
    }
}

/// What the worker itself wrote on its protocol channel, as a stream: the
/// bytes of other processes (its descendants) are not part of it; their
/// records of forbidden calls are sent to the watcher as they come.
struct WorkerBytes {
    channel: UnixStream,
    worker: u32,
    foreign: ForeignRecords,
    tx: SyncSender<Event>,
}

impl Read for WorkerBytes {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match recv_from(self.channel.as_fd(), buf)? {
                (0, _) => return Ok(0),
                // Without credentials (which a kernel that passes them never
                // does) the bytes cannot be told apart: they are the worker's.
                (n, None) => return Ok(n),
                (n, Some(from)) if from == self.worker => return Ok(n),
                (n, Some(from)) => {
                    for number in self.foreign.take(from, &buf[..n]) {
                        tracing::debug!(from, number, "a descendant of the worker made a forbidden call");
                        let _ = self.tx.send(Event::Trapped(number));
                    }
                }
            }
        }
    }
}

/// Read the protocol channel of `worker` on a thread of its own, so that
/// the watcher can keep time. The channel holds a few events at most; the
/// thread ends at the stream's end (which shutting the channel brings), at
/// a violation, or when the watcher stops listening.
fn read_in_background(channel: UnixStream, worker: u32) -> Receiver<Event> {
    let (tx, rx) = mpsc::sync_channel(16);
    let bytes = WorkerBytes { channel, worker, foreign: ForeignRecords::default(), tx: tx.clone() };
    std::thread::spawn(move || {
        let mut frames = Frames::new(bytes);
        loop {
            let event = frames.next_event();
            let last = matches!(event, Event::Eof | Event::Violation(_));
            if tx.send(event).is_err() || last {
                return;
            }
        }
    });
    rx
}

/// Forward the worker's standard error to this process's, line by line
/// (each line cut at [`MAX_LINE`] bytes), on a thread of its own, until the
/// stream ends or the flag returned is set. The receiver hears when it
/// ended.
fn forward_stderr(stderr: impl Read + Send + 'static) -> (Arc<AtomicBool>, Receiver<()>) {
    let done = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = done.clone();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stderr);
        let mut line = Vec::new();
        while !flag.load(Ordering::Relaxed) {
            match read_line_bounded(&mut r, &mut line, MAX_LINE) {
                LineRead::Eof => break,
                LineRead::Line | LineRead::TooLong => {
                    // A plugin's text, escaped like everything shown from a
                    // plugin: no control sequence reaches the terminal.
                    let mut shown = crate::text::escape_bytes(&line);
                    shown.push('\n');
                    let _ = std::io::stderr().lock().write_all(shown.as_bytes());
                }
            }
        }
        let _ = tx.send(());
    });
    (done, rx)
}
