//! The time a process has had, as opposed to the time that has passed: the
//! clock that deadlines deciding a verdict are measured on, so that a busy
//! machine does not turn a slow start into a "hang".
//!
//! A process (with its threads and its descendants) that is kept waiting
//! for a processor has not had the time the wall clock shows. Linux counts,
//! per thread, the time it spent runnable in a run queue without a
//! processor (`run_delay`, the second field of
//! `/proc/<pid>/task/<tid>/schedstat`, added when the wait ends).
//! [`OwnClock`] advances with the wall clock, less, for each interval
//! between two samples, the longest wait that any thread of the process or
//! of its descendants (found through `/proc/<pid>/task/<tid>/children`)
//! finished in it. So:
//! - a process that hangs asleep (a `futex` no one will release, `pause`)
//!   or spins on a lock is charged every second, on a busy machine as on
//!   an idle one (a spinning thread is charged the time it runs, and while
//!   it waits for a processor nothing it could have done is lost);
//! - a process that only waits for a processor is charged nothing for it.
//!
//! What the clock cannot see: time a process waits for something other
//! than a processor that is itself slowed by load (another, unrelated
//! process's lock, the disk). Callers keep a wall-clock bound as well, and
//! say in what they report that a rerun on a quieter machine tells load
//! from a process that hangs.
//!
//! Where the kernel keeps no such counts (built without `CONFIG_SCHED_INFO`,
//! or `/proc` unreadable), the clock is the wall clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The fewest wall-clock time between two samples: reading `/proc` costs a
/// few system calls per thread, and the deadlines it serves are seconds.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// The most threads read per sample (a process that starts thousands is
/// sampled in part; the others' waits are not credited).
const MAX_TASKS: usize = 256;

/// The time process `pid` (its threads and descendants) has had since the
/// clock was started (see the module docs).
#[derive(Debug)]
pub(crate) struct OwnClock {
    pid: u32,
    started: Instant,
    last: Instant,
    own: Duration,
    /// The waits for a processor credited so far.
    stalled: Duration,
    /// Each thread's `run_delay` (nanoseconds) at the last sample.
    waited: HashMap<u32, u64>,
}

impl OwnClock {
    /// Start the clock of process `pid` now.
    pub(crate) fn start(pid: u32) -> OwnClock {
        let now = Instant::now();
        let mut clock = OwnClock {
            pid,
            started: now,
            last: now,
            own: Duration::ZERO,
            stalled: Duration::ZERO,
            waited: HashMap::new(),
        };
        clock.waited = run_delays(pid).into_iter().collect();
        clock
    }

    /// The time the process has had since the clock started, sampled now
    /// (or, within [`SAMPLE_EVERY`] of the last sample, as of then).
    pub(crate) fn own(&mut self) -> Duration {
        let now = Instant::now();
        let interval = now.saturating_duration_since(self.last);
        if interval < SAMPLE_EVERY {
            return self.own;
        }
        let delays = run_delays(self.pid);
        let longest = delays
            .iter()
            .map(|(tid, delay)| delay.saturating_sub(self.waited.get(tid).copied().unwrap_or(0)))
            .max()
            .unwrap_or(0);
        self.waited = delays.into_iter().collect();
        // The kernel adds a wait to `run_delay` when the wait ends, so a
        // wait longer than the interval shows in a later sample, whole: it
        // is credited then, and the clock never goes back.
        self.stalled += Duration::from_nanos(longest);
        self.own = self.own.max(now.saturating_duration_since(self.started).saturating_sub(self.stalled));
        self.last = now;
        self.own
    }

    /// The wall-clock time since the clock started.
    pub(crate) fn wall(&self) -> Duration {
        self.started.elapsed()
    }
}

/// `(thread id, run_delay in nanoseconds)` of every thread of process `pid`
/// and of its descendants, at most [`MAX_TASKS`]; empty when the kernel
/// does not say (or the process is gone).
fn run_delays(pid: u32) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    let mut processes = vec![pid];
    while let Some(p) = processes.pop() {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for tid in dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()) {
            if out.len() >= MAX_TASKS {
                return out;
            }
            let task = format!("/proc/{p}/task/{tid}");
            if let Some(delay) = std::fs::read_to_string(format!("{task}/schedstat")).ok().as_deref().and_then(parse) {
                out.push((tid, delay));
            }
            if let Ok(children) = std::fs::read_to_string(format!("{task}/children")) {
                processes.extend(children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
            }
        }
    }
    out
}

/// The `run_delay` of a `schedstat` line: `TIME_ON_CPU RUN_DELAY SLICES`,
/// in nanoseconds.
fn parse(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_parse() {
        assert_eq!(parse("178066021 17259000 395\n"), Some(17_259_000));
        assert_eq!(parse("0 0 0"), Some(0));
        assert_eq!(parse("12"), None);
        assert_eq!(parse("1 x 2"), None);
    }

    #[test]
    fn this_process_is_found_with_its_threads() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv());
        let delays = run_delays(me);
        tx.send(()).unwrap();
        t.join().unwrap().unwrap();
        if std::path::Path::new(&format!("/proc/{me}/task/{me}/schedstat")).exists() {
            assert!(delays.iter().any(|&(tid, _)| tid == me), "{delays:?}");
            assert!(delays.len() >= 2, "{delays:?}");
        }
    }

    #[test]
    fn without_counts_the_clock_is_the_wall_clock_and_never_runs_ahead_of_it() {
        // A process that is gone has no counts: nothing is credited.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let mut clock = OwnClock::start(gone);
        std::thread::sleep(SAMPLE_EVERY * 2);
        let own = clock.own();
        assert_eq!(own, clock.last - clock.started);
        // This process, with its threads: never more than the wall clock.
        let mut clock = OwnClock::start(std::process::id());
        std::thread::sleep(SAMPLE_EVERY * 2);
        let own = clock.own();
        assert!(own <= clock.wall(), "{own:?} {:?}", clock.wall());
    }
}
