//! The conformance check `fork`, for a handler that declares itself
//! thread-safe: while [`THREADS`] threads allocate and free through it
//! without pause, a thread forks the process, up to [`FORKS`] times, and
//! each child allocates, writes, reads back and frees [`CHILD_BLOCKS`]
//! blocks through the handler and exits — within [`DEADLINE`] of its own
//! time. A child that hangs (on a lock the fork left held by a thread the
//! child does not have), crashes, or sees an allocation fail or its bytes
//! change fails the check, and the handler is refused with `fork-unsafe`
//! ([`super::FORK_UNSAFE`]). The first failing child ends the check.
//!
//! # Load
//! The deadline is measured on the child's own clock
//! ([`crate::isolate::own_time`]): wall-clock time less the time the child waited
//! for a processor. A child that hangs — asleep on a lock no one will
//! release, or spinning on it — is charged every second on a busy machine
//! as on an idle one; a child that has not run yet because the machine is
//! busy is charged nothing. A child that works needs well under a
//! millisecond of its own time, so the verdict does not depend on the
//! machine's load. What the clock cannot see — a child waiting on a lock
//! held in shared memory by another process that cannot run — is covered
//! by the margin (over a thousand times what a working child needs), and
//! the refusal says that a rerun on a quieter machine tells load from a
//! fork-unsafe handler. Before each fork the threads are given
//! [`AT_WORK`] of the worker's own time to be found at work.
//!
//! A handler that is not thread-safe is skipped: the host holds its lock
//! across every fork, so no call is in progress when the process forks.
//!
//! The check forks the process running it, so only
//! [`super::conformance_with_fork`] runs it (a worker process, or a program
//! that checks plugins). The child runs nothing but the handler's `malloc`
//! and `free` and plain writes and reads of its blocks, then `_exit`s
//! (`isolate/raw/forked.rs` has the contract). The forks are made on a thread of
//! their own, which ends when the check gives up on a child: that ends the
//! child too, even inside the worker's sandbox, which lets a process signal
//! nothing but itself.
//!
//! A plugin whose own fork handlers deadlock in the parent hangs the fork
//! itself: the worker's timeout catches that (`timed-out`, in the stage
//! `check:fork`).

use super::{Block, CheckResult, Verdict, alloc_failure, result};
use crate::heap::handler::Handler;
use crate::isolate::own_time::OwnClock;
use crate::isolate::raw::forked::{self, Forked};
use crate::isolate::raw::process::{Exit, signal_name};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Threads that allocate and free while the process forks.
const THREADS: usize = 2;
/// Forks, at most (fewer if a child fails).
const FORKS: usize = 3;
/// How much of its own time (waits for a processor not counted: see the
/// module docs) a child may take. A child that works needs well under a
/// millisecond; only a child that hangs gets near this.
const DEADLINE: Duration = Duration::from_millis(1500);
/// How often a child's clock is read while it runs.
const POLL: Duration = Duration::from_millis(10);
/// How much of the worker's own time the threads have, before each fork,
/// to be found at work (see [`at_work`]).
const AT_WORK: Duration = Duration::from_millis(200);
/// Blocks each child allocates, all alive at once.
const CHILD_BLOCKS: usize = 24;
/// Their sizes, in turn.
const CHILD_SIZES: [usize; 8] = [1, 16, 24, 100, 512, 4096, 4097, 20_000];
/// Allocations the threads make between two forks, at least, so that each
/// fork finds them at work.
const BETWEEN: usize = 2;
/// A child's exit status when an allocation returned NULL.
const CHILD_NULL: u8 = 3;
/// A child's exit status when a block's bytes changed.
const CHILD_CHANGED: u8 = 4;

/// What a handler that fails must do, for the check's detail.
const FIX: &str = "a thread-safe handler must take its locks around fork (pthread_atfork handlers, or \
                   memplug_abi::fork::ForkMutex in a Rust plugin), as abi/ABI.md, section \"fork\", says — or not \
                   declare itself thread-safe (the host then holds its lock across every fork)";

/// Run the check on `h`.
pub(super) fn check_fork(h: Handler) -> CheckResult {
    if !h.is_thread_safe() {
        return result(
            "fork",
            Verdict::Skipped,
            "the handler is not thread-safe: the host holds its lock across every fork, so no call is in progress \
             when the process forks"
                .into(),
        );
    }
    let stop = AtomicBool::new(false);
    let work = Work {
        made: AtomicUsize::new(0),
        inside: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        paused: AtomicBool::new(false),
    };
    let (forks, churned) = std::thread::scope(|s| {
        let (stop, work) = (&stop, &work);
        let churning: Vec<_> = (0..THREADS).map(|t| s.spawn(move || churn(h, t, stop, work))).collect();
        // The forking thread ends as soon as it gives up on a child, which
        // ends that child (see the module docs); it is reaped after.
        let threads: Vec<Thread> = churning.iter().map(|t| t.thread().clone()).collect();
        let forks = match s.spawn(move || forks(h, work, &threads)).join() {
            Ok((verdict, leftover)) => {
                if let Some(child) = leftover {
                    reap_late(child);
                }
                verdict
            }
            Err(_) => Err("the forking thread panicked".to_string()),
        };
        stop.store(true, Ordering::Relaxed);
        // (The scope joins any thread left once one failed.)
        let churned = churning
            .into_iter()
            .try_for_each(|t| t.join().unwrap_or_else(|_| Err("an allocating thread panicked".into())));
        (forks, churned)
    });
    match forks.and_then(|skip| churned.map(|()| skip)) {
        Ok(None) => result("fork", Verdict::Passed, String::new()),
        Ok(Some(why)) => result("fork", Verdict::Skipped, why),
        Err(detail) => result("fork", Verdict::Failed, detail),
    }
}

/// What the allocating threads are doing, for the forking one.
struct Work {
    /// Blocks made so far.
    made: AtomicUsize,
    /// Threads inside a call to the handler (or between two) now.
    inside: AtomicUsize,
    /// Whether a thread stopped on a failed allocation.
    failed: AtomicBool,
    /// Set while a child runs: the threads wait, leaving the processors to
    /// it (what matters is that they were at work at the fork).
    paused: AtomicBool,
}

/// One of the threads at work during the forks: allocate and free blocks
/// of many sizes, keeping a few alive, until `stop`.
fn churn(h: Handler, t: usize, stop: &AtomicBool, work: &Work) -> Result<(), String> {
    let mut live: [Option<Block>; 8] = [const { None }; 8];
    let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        if work.paused.load(Ordering::Relaxed) {
            // Woken by the forking thread (see `at_work`).
            std::thread::park_timeout(Duration::from_millis(1));
            continue;
        }
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let size = 1 + (x >> 33) as usize % 2048;
        work.inside.fetch_add(1, Ordering::SeqCst);
        // The block it replaces is freed.
        let made = Block::new(h, size).map(|b| live[i % live.len()] = Some(b));
        work.inside.fetch_sub(1, Ordering::SeqCst);
        if let Err(e) = made {
            work.failed.store(true, Ordering::Relaxed);
            return Err(format!("on a thread allocating while the process forks: {}", alloc_failure(e)));
        }
        work.made.fetch_add(1, Ordering::Relaxed);
        i += 1;
    }
    Ok(())
}

/// The forks, one after another: `Ok(None)` when every child finished,
/// `Ok(Some(why))` when the process cannot fork, `Err` for the first child
/// that failed — with it, if it still runs.
fn forks(h: Handler, work: &Work, threads: &[Thread]) -> (Result<Option<String>, String>, Option<Forked>) {
    for n in 1..=FORKS {
        at_work(work, threads);
        if work.failed.load(Ordering::Relaxed) {
            return (Ok(None), None); // the allocating thread says why
        }
        let forked = fork_child(h);
        work.paused.store(true, Ordering::Relaxed);
        let child = match forked {
            Ok(child) => child,
            Err(e) => return (Ok(Some(format!("this process cannot fork ({e}): the check could not run"))), None),
        };
        let pid = child.pid();
        let taken = format!("the child of fork {n} of {FORKS}, taken while {THREADS} threads allocated and freed");
        match wait_for(child) {
            Ok(Exit::Code(0)) => {}
            Ok(exit) => return (Err(format!("{taken}, {}; {FIX}", ended(exit))), None),
            Err(hung) => {
                tracing::debug!(pid, "a forked child hangs; ending it");
                let detail = format!(
                    "{taken}, did not finish within {} s of its own time (time it waited for a processor not \
                     counted): it hangs, most likely on a lock one of those threads held at the fork (a thread the \
                     child does not have), and was killed; {FIX}. (A child that works needs under a millisecond; \
                     if the machine was busy, a rerun on a quieter one tells load from a fork-unsafe handler)",
                    DEADLINE.as_secs_f64()
                );
                return (Err(detail), Some(hung.kill()));
            }
        }
    }
    (Ok(None), None)
}

/// Wait for `child` until it ends, or until it has had [`DEADLINE`] of
/// its own time (see the module docs): how it ended, or the child still
/// running.
fn wait_for(mut child: Forked) -> Result<Exit, Forked> {
    let mut clock = OwnClock::start(child.pid());
    loop {
        match child.wait_until(Instant::now() + POLL) {
            Ok(exit) => return Ok(exit),
            Err(running) => child = running,
        }
        if clock.own() >= DEADLINE {
            return Err(child);
        }
    }
}

/// How a child that ended but not with 0 did, in words.
fn ended(exit: Exit) -> String {
    match exit {
        Exit::Code(c) if c == i32::from(CHILD_NULL) => "had an allocation return NULL".into(),
        Exit::Code(c) if c == i32::from(CHILD_CHANGED) => "saw the bytes of a live block change".into(),
        Exit::Code(c) => {
            format!(
                "exited with status {c} before it was done (the plugin's fork handlers or functions end the process)"
            )
        }
        Exit::Signal(s) => format!("was killed by {}", signal_name(s)),
    }
}

/// Wait until the threads made [`BETWEEN`] more blocks and one of them is
/// inside the handler (or one failed), for at most [`AT_WORK`] of this
/// process's own time (on a busy machine the threads may wait for a
/// processor longer than that): the fork should find a thread inside a
/// call, holding whatever the handler locks there.
fn at_work(work: &Work, threads: &[Thread]) {
    work.paused.store(false, Ordering::Relaxed);
    for t in threads {
        t.unpark();
    }
    let from = work.made.load(Ordering::Relaxed);
    let mut clock = OwnClock::start(std::process::id());
    let ready = || {
        work.failed.load(Ordering::Relaxed)
            || (work.made.load(Ordering::Relaxed) >= from + BETWEEN && work.inside.load(Ordering::SeqCst) > 0)
    };
    while !ready() && clock.own() < AT_WORK {
        std::thread::yield_now();
    }
}

/// Reap a child given up on, now that the thread that forked it ended (or
/// it was killed): it ends at once, unless it hangs in a fork handler
/// before its first act, where nothing but the end of the worker's process
/// group reaches it.
fn reap_late(child: Forked) {
    let pid = child.pid();
    if child.wait_until(Instant::now() + Duration::from_millis(500)).is_err() {
        tracing::warn!(pid, "a forked child that hangs could not be ended; it ends with this process's group");
    }
}

/// Fork, and in the child exercise `h` ([`child`]).
#[allow(unsafe_code)]
fn fork_child(h: Handler) -> std::io::Result<Forked> {
    // SAFETY: `child` calls only `h`'s allocation and free (a thread-safe
    // handler: `check_fork` runs this for no other), reads and writes the
    // blocks they return and its own stack; it allocates nothing else,
    // takes no lock of its own and cannot panic (no indexing past a fixed
    // array, no unwrap), as `raw::forked::fork` requires.
    unsafe { forked::fork(move || child(h)) }
}

/// The child's run: [`CHILD_BLOCKS`] blocks allocated and filled, all read
/// back (a few bytes of each), all freed. Its exit status: 0, [`CHILD_NULL`] or [`CHILD_CHANGED`].
#[allow(unsafe_code)]
fn child(h: Handler) -> u8 {
    let mut blocks: [Option<(NonNull<u8>, usize)>; CHILD_BLOCKS] = [None; CHILD_BLOCKS];
    let mut status = 0;
    for (i, slot) in blocks.iter_mut().enumerate() {
        let size = CHILD_SIZES[i % CHILD_SIZES.len()];
        let Ok(p) = h.alloc(size) else {
            status = CHILD_NULL;
            break;
        };
        // SAFETY: `p` is a new block of `size` bytes, writable and ours.
        unsafe { p.as_ptr().write_bytes(mark(i), size) };
        *slot = Some((p, size));
    }
    for (i, (p, size)) in blocks.iter().enumerate().filter_map(|(i, b)| b.map(|b| (i, b))) {
        // Its first, middle and last bytes.
        for at in [0, size / 2, size - 1] {
            // SAFETY: `at < size`, within the live block this child filled.
            if unsafe { p.as_ptr().add(at).read() } != mark(i) {
                status = CHILD_CHANGED;
            }
        }
    }
    for (p, size) in blocks.into_iter().flatten() {
        // SAFETY: `p` came from `h.alloc(size)` above and is freed once.
        unsafe { h.free(p, size) };
    }
    status
}

/// The byte block `i` of a child is filled with.
fn mark(i: usize) -> u8 {
    (i as u8).wrapping_mul(37).wrapping_add(11)
}
