//! The fork lock the host and the interposer share: a [`ForkSet`] of the
//! locks held around calls into plugins, which `pthread_atfork` handlers
//! hold from before a `fork` until after it, in the parent and in the
//! child — so that in the child no call into a plugin is half made and no
//! such lock is held by a thread the child does not have. glibc's `malloc`
//! does the same with its arenas.
//!
//! # Allocating nothing
//! The set is an intrusive list of `'static` [`ForkNode`]s, pushed and
//! never removed (a handler is never unloaded, so neither is its lock): the
//! host leaks one box per lock before it pushes it, the interposer's one
//! node is a static. Pushing and forking take the set's own gate, a pthread
//! mutex, so no lock joins the set while a fork holds it.
//!
//! # Taking them
//! No thread takes these locks in one global order (a thread holding one
//! handler's guard may allocate from another), so the prepare handler takes
//! them all or none: it tries each without waiting; if one is taken, it
//! gives back what it has, waits for that one alone (holding nothing), and
//! starts again. It never waits while holding a lock, so it cannot close a
//! cycle of waiting threads.
//!
//! # Registering again
//! A thread inside a plugin that is not thread-safe holds the caller's
//! lock and may wait there for a lock of the plugin's own, which the
//! plugin's fork handlers take. So the set's prepare handler must run
//! *before* the plugins' (and its parent and child handlers after theirs).
//! Prepare handlers run newest first, so a caller registers the set's
//! handlers again ([`ForkSet::register`]) after a plugin may have
//! registered its own, up to [`SLOTS`] times: each registration has its own
//! slot, and only the one whose prepare handler runs first (the newest)
//! acts in a fork; the older ones see it did and do nothing.

#![allow(unsafe_code)]

use core::cell::UnsafeCell;
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use memplug_abi::fork::ForkLock;

/// A pthread mutex, which allocates nothing: the interposer's call lock and
/// a [`ForkSet`]'s gate. As a [`ForkLock`] it is released in the child by
/// the thread that held it in the parent (the forking thread, the same
/// `pthread_t` there).
pub struct PthreadLock(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: a pthread mutex is made to be shared between threads; it is only
// reached through the pthread functions.
unsafe impl Sync for PthreadLock {}

impl PthreadLock {
    /// An unlocked mutex.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> PthreadLock {
        PthreadLock(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER))
    }

    /// Lock it, waiting for another thread that holds it.
    #[inline]
    pub fn lock(&self) {
        // SAFETY: an initialised mutex, valid as long as `self`.
        unsafe { libc::pthread_mutex_lock(self.0.get()) };
    }

    /// Unlock it.
    ///
    /// # Safety
    /// This thread locked it (in this process, or in the parent of this
    /// child) and has not unlocked it since.
    #[inline]
    pub unsafe fn unlock(&self) {
        // SAFETY: the caller holds it.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
    }
}

impl ForkLock for PthreadLock {
    unsafe fn hold(&self) {
        self.lock();
    }

    unsafe fn try_hold(&self) -> bool {
        // SAFETY: an initialised mutex, valid as long as `self`.
        unsafe { libc::pthread_mutex_trylock(self.0.get()) == 0 }
    }

    unsafe fn release(&self) {
        // SAFETY: the caller held it with `hold` or `try_hold` on this
        // thread and has not released it since.
        unsafe { self.unlock() }
    }
}

/// One lock in a [`ForkSet`], for the rest of the process.
pub struct ForkNode {
    lock: &'static (dyn ForkLock + Sync),
    /// The node pushed before this one.
    next: AtomicPtr<ForkNode>,
}

impl ForkNode {
    /// A node for `lock`, in no set yet.
    pub const fn new(lock: &'static (dyn ForkLock + Sync)) -> ForkNode {
        ForkNode { lock, next: AtomicPtr::new(ptr::null_mut()) }
    }
}

/// How many times a set's handlers can be registered.
pub const SLOTS: usize = 32;

/// No slot acts (no fork is under way).
const NONE: usize = usize::MAX;

/// The locks held across every `fork` (see the module docs).
pub struct ForkSet {
    /// Held from a fork's prepare handler to its parent or child handler,
    /// and to push a node.
    gate: PthreadLock,
    /// The newest node.
    head: AtomicPtr<ForkNode>,
    /// The thread (`pthread_self`) between a prepare handler and the
    /// parent or child handler, 0 if none; the slot whose handlers act.
    forking: AtomicUsize,
    acting: AtomicUsize,
    /// How many times the handlers were registered.
    registered: AtomicUsize,
}

/// The static a set's handlers reach (`pthread_atfork` handlers take no
/// argument).
pub trait ForkSetStatic {
    /// The set.
    fn set() -> &'static ForkSet;
}

impl ForkSet {
    /// An empty set.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> ForkSet {
        ForkSet {
            gate: PthreadLock::new(),
            head: AtomicPtr::new(ptr::null_mut()),
            forking: AtomicUsize::new(0),
            acting: AtomicUsize::new(NONE),
            registered: AtomicUsize::new(0),
        }
    }

    /// A set of `node` alone, made at compile time (the interposer's).
    pub const fn with(node: &'static ForkNode) -> ForkSet {
        ForkSet { head: AtomicPtr::new(ptr::from_ref(node).cast_mut()), ..ForkSet::new() }
    }

    /// Hold `node`'s lock around every fork from now on. Waits while a
    /// fork holds the set.
    pub fn push(&self, node: &'static ForkNode) {
        self.gate.lock();
        node.next.store(self.head.load(Ordering::Relaxed), Ordering::Relaxed);
        self.head.store(ptr::from_ref(node).cast_mut(), Ordering::Release);
        // SAFETY: locked just above, on this thread.
        unsafe { self.gate.unlock() };
    }

    /// Register the set's fork handlers (once more: see the module docs)
    /// through `S`, in the next slot; `false`, registering nothing, when
    /// all [`SLOTS`] are used.
    pub fn register<S: ForkSetStatic>(&self) -> bool {
        let slot = self.registered.fetch_add(1, Ordering::Relaxed);
        if slot >= SLOTS {
            self.registered.store(SLOTS, Ordering::Relaxed);
            return false;
        }
        let (prepare, parent, child) = handlers::<S>(slot);
        // SAFETY: plain functions that stay valid for the process (neither
        // the host nor the interposer is ever unloaded).
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        true
    }

    /// The nodes, newest first.
    fn nodes(&self) -> impl Iterator<Item = &'static ForkNode> {
        // SAFETY: every pointer in the list is a `&'static ForkNode`.
        let deref = |p: *mut ForkNode| unsafe { p.as_ref() };
        let mut next = deref(self.head.load(Ordering::Acquire));
        core::iter::from_fn(move || {
            let node = next?;
            next = deref(node.next.load(Ordering::Acquire));
            Some(node)
        })
    }

    /// Before a fork (registration `slot`): the first of the set's prepare
    /// handlers to run takes the gate and every lock; the older ones see
    /// this thread did.
    pub fn prepare(&self, slot: usize) {
        let me = me();
        if self.forking.load(Ordering::Relaxed) == me {
            return;
        }
        self.gate.lock();
        self.forking.store(me, Ordering::Relaxed);
        self.acting.store(slot, Ordering::Relaxed);
        'again: loop {
            for (i, node) in self.nodes().enumerate() {
                // SAFETY: the locks live for the process and never move;
                // this thread releases them in `release`.
                if unsafe { node.lock.try_hold() } {
                    continue;
                }
                for held in self.nodes().take(i) {
                    // SAFETY: held just above, by this thread.
                    unsafe { held.lock.release() };
                }
                // Wait for it holding nothing, then try everything again.
                // SAFETY: as above; released at once.
                unsafe {
                    node.lock.hold();
                    node.lock.release();
                }
                continue 'again;
            }
            return;
        }
    }

    /// After a fork, in the parent or the child (registration `slot`):
    /// the slot that acted in `prepare` gives every lock and the gate back.
    pub fn release(&self, slot: usize) {
        if self.forking.load(Ordering::Relaxed) != me() || self.acting.load(Ordering::Relaxed) != slot {
            return;
        }
        for node in self.nodes() {
            // SAFETY: this thread held every one of them in `prepare` (the
            // gate kept the list as it was).
            unsafe { node.lock.release() };
        }
        self.acting.store(NONE, Ordering::Relaxed);
        self.forking.store(0, Ordering::Relaxed);
        // SAFETY: `prepare` locked it on this thread.
        unsafe { self.gate.unlock() };
    }
}

/// This thread's id: never 0.
fn me() -> usize {
    // SAFETY: no preconditions; valid in the child of a fork too (the
    // forking thread keeps its `pthread_t`).
    unsafe { libc::pthread_self() as usize }
}

extern "C" fn prepare_in<S: ForkSetStatic, const N: usize>() {
    S::set().prepare(N);
}

extern "C" fn release_in<S: ForkSetStatic, const N: usize>() {
    S::set().release(N);
}

/// The prepare, parent and child handlers of one registration.
type Handlers = (extern "C" fn(), extern "C" fn(), extern "C" fn());

macro_rules! slots {
    ($slot:ident, $s:ident; $($n:literal)*) => {
        match $slot {
            $($n => (prepare_in::<$s, $n>, release_in::<$s, $n>, release_in::<$s, $n>),)*
            _ => unreachable!("a slot is below SLOTS"),
        }
    };
}

/// Registration `slot`'s handlers: each knows its slot.
fn handlers<S: ForkSetStatic>(slot: usize) -> Handlers {
    slots!(slot, S; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    static A: PthreadLock = PthreadLock::new();
    static B: PthreadLock = PthreadLock::new();
    static NA: ForkNode = ForkNode::new(&A);
    static NB: ForkNode = ForkNode::new(&B);
    static SET: ForkSet = ForkSet::new();

    #[test]
    fn a_fork_holds_every_lock_and_the_acting_slot_releases_them() {
        SET.push(&NA);
        SET.push(&NB);
        SET.prepare(3);
        SET.prepare(2); // an older registration: does nothing
        // SAFETY: both held by this thread now: trylock from here fails.
        assert!(unsafe { !A.try_hold() && !B.try_hold() });
        SET.release(2); // not the acting slot
        // SAFETY: as above.
        assert!(unsafe { !A.try_hold() });
        SET.release(3);
        // SAFETY: released: taken and given back at once.
        unsafe {
            assert!(A.try_hold() && B.try_hold());
            A.release();
            B.release();
        }
    }
}
