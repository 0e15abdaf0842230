//! Keeping every process a worker starts within reach, and ending them all
//! when its candidate is done.
//!
//! While at least one worker runs, this process is a **child subreaper**:
//! a descendant of a worker that is orphaned — whatever session or process
//! group it moved to, however many times it forked — is reparented to this
//! process rather than to init. It is also **non-dumpable** then, so the
//! workers (same user) cannot ptrace it or open its `/proc/<pid>/fd`. Both
//! are restored when the last worker is done.
//!
//! # The sweep rule
//! When a candidate is done — its worker reaped after its process group was
//! killed — [`finish`] kills and reaps every child of this process that is
//! **not a live worker** (one [`spawn`] started and [`finish`] has not yet
//! been called for) and **was not already a child when supervision began**,
//! repeating until none is left (a killed orphan's own children are
//! reparented here in turn). Spawning and sweeping hold the same lock, so a
//! worker is registered before any sweep can see it, and a sweep never
//! kills a live worker of another candidate; it may kill another
//! candidate's *orphaned* descendants early, which only brings their end
//! forward. An application that probes plugins while it starts children of
//! its own should know that such a child, started while a probe runs, is
//! treated as an orphan of a worker if it is still running when a probe
//! ends.
//!
//! Imports `raw` (process primitives).

use crate::raw::process::{self, Saved};
use std::collections::HashSet;
use std::io;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The supervision state of this process.
struct State {
    /// How many [`Supervision`]s are alive.
    users: usize,
    /// The settings to restore when the last one ends.
    saved: Option<Saved>,
    /// Children this process had when supervision began: never swept.
    before: Vec<u32>,
    /// Live workers (a pid may appear twice if reused: one entry each).
    workers: Vec<u32>,
}

static STATE: Mutex<State> = Mutex::new(State { users: 0, saved: None, before: Vec::new(), workers: Vec::new() });

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// While alive, this process supervises workers (see the module docs).
pub(crate) struct Supervision(());

impl Supervision {
    /// Begin (or join) supervision.
    pub(crate) fn begin() -> Supervision {
        let mut s = state();
        if s.users == 0 {
            s.saved = Some(process::begin_supervision());
            s.before = children().into_iter().collect();
        }
        s.users += 1;
        Supervision(())
    }
}

impl Drop for Supervision {
    fn drop(&mut self) {
        let mut s = state();
        s.users -= 1;
        if s.users == 0 {
            if let Some(saved) = s.saved.take() {
                process::restore_supervision(saved);
            }
            s.before.clear();
        }
    }
}

/// Start a worker with `command` and register it as live.
pub(crate) fn spawn(command: &mut Command) -> io::Result<Child> {
    let mut s = state();
    let child = command.spawn()?;
    s.workers.push(child.id());
    Ok(child)
}

/// The worker `pid` has been reaped: unregister it and sweep (see the
/// module docs).
pub(crate) fn finish(pid: u32) {
    let mut s = state();
    if let Some(i) = s.workers.iter().position(|&w| w == pid) {
        s.workers.swap_remove(i);
    }
    let spare: HashSet<u32> = s.workers.iter().chain(&s.before).copied().collect();
    let until = Instant::now() + Duration::from_secs(2);
    for _ in 0..10_000 {
        let orphans: Vec<u32> = children().into_iter().filter(|p| !spare.contains(p)).collect();
        if orphans.is_empty() {
            return;
        }
        tracing::debug!(?orphans, "killing what a worker left behind");
        for &pid in &orphans {
            process::kill_pid(pid);
        }
        for &pid in &orphans {
            // A process killed with SIGKILL ends promptly; one that does not
            // (stuck in the kernel) is left after a bounded wait.
            while !process::try_reap(pid) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if Instant::now() >= until {
            tracing::warn!(?orphans, "processes a worker left behind did not end");
            return;
        }
    }
}

/// The pids of this process's children (of any of its threads): every
/// process in `/proc` whose parent is this process.
fn children() -> HashSet<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else { return HashSet::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && parent_of(pid) == Some(me))
        .collect()
}

/// The parent of `pid`, from `/proc/<pid>/stat` (after the command name,
/// which may hold spaces and parentheses: the fields after its last `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_this_process() {
        let me = std::process::id();
        assert_eq!(parent_of(me), Some(std::os::unix::process::parent_id()));
    }
}
