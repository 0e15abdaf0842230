//! The host's `pthread_atfork` handlers: around a `fork`, the forking thread
//! holds every lock the host takes around calls into a plugin — the lock of
//! each handler that is not thread-safe with its queue of pending frees
//! (`pending.rs`), and `Global`'s own — so that in the child no call into a
//! plugin is half made and no such lock is held by a thread the child does
//! not have. glibc's `malloc` does the same with its arenas.
//!
//! # Taking them
//! No thread takes these locks in one global order (a thread holding one
//! handler's guard may allocate from another), so the prepare handler takes
//! them all or none: it tries each without waiting; if one is taken, it
//! gives back what it has, waits for that one alone (holding nothing), and
//! starts again. It never waits while holding a lock, so it cannot close a
//! cycle of waiting threads. It allocates nothing (under `Global` an
//! allocation could need one of these locks).
//!
//! # Order with the plugins' handlers
//! A thread inside a plugin that is not thread-safe holds the host's lock
//! and may wait there for a lock of the plugin's own, which the plugin's
//! fork handlers take. So the host's prepare handler must run *before* the
//! plugins' (and its parent and child handlers after theirs). Prepare
//! handlers run newest first, so the host registers its handlers again when
//! it makes a lock after a library was opened or an entry called (which is
//! when plugins register theirs), up to [`SLOTS`] times; only the newest
//! registration acts. The same reasoning puts the host's handlers after
//! glibc's own, which take `malloc`'s locks after every handler ran.

use memplug_abi::fork::ForkLock;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Every lock the fork handlers hold, and the registration bookkeeping.
struct Locks {
    all: Vec<&'static (dyn ForkLock + Sync)>,
    /// How many times the handlers were registered.
    registered: usize,
    /// [`EVENTS`] at the last registration.
    events_then: usize,
    /// Whether running out of slots was said.
    warned: bool,
}

static LOCKS: Mutex<Locks> =
    Mutex::new(Locks { all: Vec::new(), registered: 0, events_then: usize::MAX, warned: false });

/// Libraries opened and entries called so far (see the module docs).
static EVENTS: AtomicUsize = AtomicUsize::new(0);

/// The thread (`me`) whose fork the handlers are in, 0 if none: the older
/// registrations' handlers of the same fork do nothing.
static FORKING: AtomicUsize = AtomicUsize::new(0);

/// The guard of [`LOCKS`] held from the prepare handler to the parent or
/// child handler, with the slot that acted.
struct Held(UnsafeCell<Option<(MutexGuard<'static, Locks>, usize)>>);

// SAFETY: written only by the thread that holds `LOCKS` (the forking one).
unsafe impl Sync for Held {}

static HELD: Held = Held(UnsafeCell::new(None));

thread_local! {
    static ME: u8 = const { 0 };
}

fn me() -> usize {
    ME.with(|b| std::ptr::from_ref(b) as usize)
}

fn locks() -> MutexGuard<'static, Locks> {
    LOCKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A library was opened, or an entry function called: the plugins' fork
/// handlers may have been registered after the host's.
pub(crate) fn library_event() {
    EVENTS.fetch_add(1, Ordering::Relaxed);
}

/// Hold `lock` around every fork from now on (for the rest of the process:
/// host locks live as long as their handlers, which is forever).
pub(crate) fn register(lock: &'static (dyn ForkLock + Sync)) {
    let slot = {
        let mut l = locks();
        l.all.push(lock);
        let events = EVENTS.load(Ordering::Relaxed);
        if l.events_then == events {
            return;
        }
        l.events_then = events;
        if l.registered == SLOTS {
            if !l.warned {
                l.warned = true;
                tracing::warn!(
                    "more than {SLOTS} plugin libraries loaded between handlers that are not thread-safe: the \
                     host's fork handlers keep their last place among the plugins'"
                );
            }
            return;
        }
        l.registered += 1;
        l.registered - 1
    };
    // Outside LOCKS: glibc may hold its own atfork lock while a fork runs
    // the handlers, one of which waits for LOCKS.
    let (prepare, parent, child) = TRAMPOLINES[slot];
    // SAFETY: plain functions that stay valid for the process (the host is
    // never unloaded).
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// Before a fork (registration `slot`). Prepare handlers run newest first:
/// the first of the host's to run acts, the older ones see it did.
fn prepare(slot: usize) {
    if FORKING.load(Ordering::Relaxed) == me() {
        return;
    }
    let list = locks();
    FORKING.store(me(), Ordering::Relaxed);
    hold_all(&list.all);
    // SAFETY: this thread holds LOCKS, which protects HELD.
    unsafe { *HELD.0.get() = Some((list, slot)) };
}

/// Take every lock or none, never waiting while holding one.
fn hold_all(all: &[&'static (dyn ForkLock + Sync)]) {
    'again: loop {
        for (i, lock) in all.iter().enumerate() {
            // SAFETY: host locks live for the process and never move; this
            // thread releases them in `release`.
            if unsafe { lock.try_hold() } {
                continue;
            }
            for held in all[..i].iter().rev() {
                // SAFETY: held just above, by this thread.
                unsafe { held.release() };
            }
            // Wait for it holding nothing, then try everything again.
            // SAFETY: as above; released at once.
            unsafe {
                lock.hold();
                lock.release();
            }
            continue 'again;
        }
        return;
    }
}

/// After a fork, in the parent or the child (registration `slot`).
fn release(slot: usize) {
    // SAFETY: only the forking thread reaches here with a matching slot; it
    // stored HELD in `prepare` and holds LOCKS.
    let held = unsafe { &mut *HELD.0.get() };
    if !matches!(held, Some((_, s)) if *s == slot) {
        return;
    }
    let Some((list, _)) = held.take() else { return };
    for lock in list.all.iter().rev() {
        // SAFETY: this thread held every one of them in `prepare`.
        unsafe { lock.release() };
    }
    FORKING.store(0, Ordering::Relaxed);
    drop(list);
}

/// How many times the handlers can be registered.
pub(crate) const SLOTS: usize = 32;

type Trio = (extern "C" fn(), extern "C" fn(), extern "C" fn());

extern "C" fn prepare_in<const S: usize>() {
    prepare(S);
}

extern "C" fn release_in<const S: usize>() {
    release(S);
}

macro_rules! trampolines {
    ($($s:literal)*) => {
        [$((prepare_in::<$s>, release_in::<$s>, release_in::<$s>)),*]
    };
}

/// One set of handlers per registration: each knows its slot.
static TRAMPOLINES: [Trio; SLOTS] =
    trampolines!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
