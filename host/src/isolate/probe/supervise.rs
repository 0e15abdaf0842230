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
//! Every worker starts in a **session of its own**; its descendants inherit
//! it or make new ones, but none can rejoin this process's session (a
//! session can be left, not joined). When a candidate is done — its worker
//! reaped after its process group was killed — [`finish`] kills and reaps
//! every child of this process that
//! - is **not in this process's session**,
//! - is **not a live worker** (one [`spawn`] started and [`finish`] has not
//!   yet been called for), and
//! - was **not already a child when supervision began**,
//!
//! repeating until none is left (a killed orphan's own children are
//! reparented here in turn). Spawning and sweeping hold the same lock, so a
//! worker is registered before any sweep can see it, and a sweep never
//! kills a live worker of another candidate; it may kill another
//! candidate's *orphaned* descendants early, which only brings their end
//! forward. The children an application starts itself stay in its session
//! and are never touched — unless they leave it (`setsid`) while a probe
//! runs, which an application that probes plugins should not combine with.

use crate::isolate::raw::process::{self, Saved};
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

/// Start a worker with `command`, in a session of its own, and register it
/// as live.
pub(crate) fn spawn(command: &mut Command) -> io::Result<Child> {
    process::new_session(command);
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

/// The pids of this process's children (of any of its threads) outside
/// its session: every process in `/proc` whose parent is this process and
/// whose session is another.
fn children() -> HashSet<u32> {
    let me = std::process::id();
    let Some((_, my_session)) = parent_and_session("self") else { return HashSet::new() };
    let Ok(dir) = std::fs::read_dir("/proc") else { return HashSet::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            pid != me
                && parent_and_session(&pid.to_string())
                    .is_some_and(|(parent, session)| parent == me && session != my_session)
        })
        .collect()
}

/// The parent and the session of process `pid` (a number or `self`), from
/// `/proc/<pid>/stat`: after the command name, which may hold spaces and
/// parentheses (so: after its last `)`), come state, parent, group,
/// session.
fn parent_and_session(pid: &str) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace().skip(1);
    let parent = fields.next()?.parse().ok()?;
    let session = fields.nth(1)?.parse().ok()?;
    Some((parent, session))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_this_process() {
        let me = std::process::id();
        let (parent, session) = parent_and_session(&me.to_string()).unwrap();
        assert_eq!(parent, std::os::unix::process::parent_id());
        assert_eq!(Some((parent, session)), parent_and_session("self"));
    }
}
