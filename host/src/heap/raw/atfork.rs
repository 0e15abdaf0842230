//! The host's fork lock: around a `fork`, the forking thread holds every
//! lock the host takes around calls into a plugin — the lock of each handler
//! that is not thread-safe with its queue of pending frees (`pending.rs`),
//! and `Global`'s own — so that in the child no call into a plugin is half
//! made and no such lock is held by a thread the child does not have.
//!
//! The set of locks, how a fork takes them (all or none, never waiting
//! while holding one) and gives them back, and the handlers' registration
//! slots are the call core's ([`ForkSet`], shared with the interposer).
//! What is the host's is *when* it registers the handlers again.
//!
//! # Order with the plugins' handlers
//! A thread inside a plugin that is not thread-safe holds the host's lock
//! and may wait there for a lock of the plugin's own, which the plugin's
//! fork handlers take. So the host's prepare handler must run *before* the
//! plugins' (and its parent and child handlers after theirs). Prepare
//! handlers run newest first, so the host registers its handlers again when
//! it adds a lock after a library was opened or an entry called (which is
//! when plugins register theirs), up to [`SLOTS`](memplug_callcore::fork_raw::SLOTS)
//! times; only the newest registration acts. The same reasoning puts the
//! host's handlers after glibc's own, which take `malloc`'s locks after
//! every handler ran.

use memplug_abi::fork::ForkLock;
use memplug_callcore::fork_raw::SLOTS;
use memplug_callcore::{ForkNode, ForkSet, ForkSetStatic};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Every lock the fork handlers hold.
static SET: ForkSet = ForkSet::new();

/// The host's [`SET`], for its handlers.
struct Host;

impl ForkSetStatic for Host {
    fn set() -> &'static ForkSet {
        &SET
    }
}

/// Libraries opened and entries called so far (see the module docs).
static EVENTS: AtomicUsize = AtomicUsize::new(0);

/// [`EVENTS`] at the last registration.
static EVENTS_THEN: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Whether running out of slots was said.
static WARNED: AtomicBool = AtomicBool::new(false);

/// A library was opened, or an entry function called: the plugins' fork
/// handlers may have been registered after the host's.
pub(crate) fn library_event() {
    EVENTS.fetch_add(1, Ordering::Relaxed);
}

/// Hold `lock` around every fork from now on (for the rest of the process:
/// host locks live as long as their handlers, which is forever).
pub(crate) fn register(lock: &'static (dyn ForkLock + Sync)) {
    // Made before the set's gate is taken: under `Global`, an allocation
    // could need a lock a fork holds.
    SET.push(Box::leak(Box::new(ForkNode::new(lock))));
    let events = EVENTS.load(Ordering::Relaxed);
    if EVENTS_THEN.swap(events, Ordering::Relaxed) == events {
        return;
    }
    if !SET.register::<Host>() && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "more than {SLOTS} plugin libraries loaded between handlers that are not thread-safe: the host's fork \
             handlers keep their last place among the plugins'"
        );
    }
}
