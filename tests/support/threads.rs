//! Helpers of the thread tests: a watchdog that turns a deadlock into a
//! prompt, clearly reported failure, private copies of the bundled plugins,
//! and a small deterministic random generator.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Seconds a watched test may run before the watchdog gives up on it:
/// `MEMPLUG_WATCHDOG_SECS`, else `default`.
pub(crate) fn watchdog_secs(default: u64) -> u64 {
    std::env::var("MEMPLUG_WATCHDOG_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Aborts the whole test process, with a message naming the test, if it is
/// still alive after `secs` seconds: a deadlocked thread cannot be
/// interrupted, and a hung CI job tells nobody anything. Dropping it (at the
/// end of the test, or while unwinding from a failed assertion) disarms it.
pub(crate) struct Watchdog {
    done: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Arm a watchdog for the test `what`.
    pub(crate) fn arm(what: &'static str, secs: u64) -> Watchdog {
        let (done, rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(secs)) {
                // Straight to the stderr stream: the test harness captures
                // `eprintln!`, and its capture is lost when the process aborts.
                let _ = writeln!(
                    std::io::stderr(),
                    "\nWATCHDOG: test `{what}` did not finish within {secs} s: its threads are deadlocked (or hung). \
                     Aborting the test process so that CI fails instead of hanging. Set MEMPLUG_WATCHDOG_SECS to \
                     allow more time on a slow machine (e.g. under valgrind)."
                );
                std::process::abort();
            }
        });
        Watchdog { done: Some(done), thread: Some(thread) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A private copy of the bundled plugin `name` in `dir` under `file_name`:
/// loaded from its own path, it is a library of its own with its own state,
/// so the counters a test reads are that test's.
pub(crate) fn private_copy(name: &str, dir: &Path, file_name: &str) -> PathBuf {
    let to = dir.join(file_name);
    std::fs::copy(super::support::plugin(name), &to).unwrap();
    to
}

/// xorshift64*: deterministic, seedable, good enough to pick operations.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from a seed (any value; 0 is mapped to a fixed one).
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `true` with probability `percent` / 100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}
