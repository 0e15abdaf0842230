//! The `pthread_atfork` handlers of a plugin library built with the export
//! macros, and the list of live instances they visit (see [`crate::fork`]
//! for what they do and why).
//!
//! The list is the library's own (every plugin library has its copy of this
//! crate): the default instance of each entry when the entry first builds
//! it, each instance made by `create` until its `destroy`. The handlers hold
//! the list from before the fork until after it, so no instance is made or
//! destroyed meanwhile.

use crate::allocator::Allocator;
use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard, Once};

/// One instance the fork handlers visit: its `ctx` and the function that
/// visits an `A` at that address.
#[derive(Clone, Copy)]
struct Registered {
    ctx: usize,
    visit: unsafe fn(usize, Phase),
}

/// What a visit does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the fork: hold every lock.
    Hold,
    /// After it, in the parent: release them.
    Parent,
    /// After it, in the child: release them, then `after_fork_child`.
    Child,
}

/// Every live instance of this library's handlers, in the order made.
static INSTANCES: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// The guard of [`INSTANCES`] the fork handlers hold across a fork, so that
/// no instance is made or destroyed meanwhile.
struct HeldList(UnsafeCell<Option<MutexGuard<'static, Vec<Registered>>>>);

// SAFETY: written only by the thread that holds `INSTANCES` (the forking
// thread, between the prepare handler and the parent or child handler).
unsafe impl Sync for HeldList {}

static HELD: HeldList = HeldList(UnsafeCell::new(None));
static ATFORK: Once = Once::new();

unsafe extern "C" {
    fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> c_int;
}

fn instances() -> MutexGuard<'static, Vec<Registered>> {
    INSTANCES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Visit `ctx` as an `A`.
///
/// # Safety
/// `ctx` is the address of a live `A` registered with [`register`], which
/// stays alive and in place until it is unregistered.
unsafe fn visit<A: Allocator>(ctx: usize, phase: Phase) {
    // SAFETY: the caller's promise.
    let a = unsafe { &*(ctx as *const A) };
    // A panic must not unwind into `fork`: the visit is abandoned instead.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        a.fork_locks(&mut |lock| match phase {
            // SAFETY: the instance is registered, so it stays in place until
            // the fork handlers are done (unregistering waits for the list,
            // which they hold); the same, forking, thread releases next.
            Phase::Hold => unsafe { lock.hold() },
            // SAFETY: this thread held it in the prepare handler.
            Phase::Parent | Phase::Child => unsafe { lock.release() },
        });
        if phase == Phase::Child {
            a.after_fork_child();
        }
    }));
}

/// Before a fork: hold the list, then every instance's locks in order.
extern "C" fn prepare() {
    let list = instances();
    for r in list.iter() {
        // SAFETY: a registered instance is alive until it is unregistered,
        // which waits for the list this thread now holds.
        unsafe { (r.visit)(r.ctx, Phase::Hold) };
    }
    // SAFETY: this thread holds INSTANCES, which protects HELD.
    unsafe { *HELD.0.get() = Some(list) };
}

/// After a fork: release every instance's locks, newest first, then the
/// list.
fn release(phase: Phase) {
    // SAFETY: the prepare handler stored the guard in this (forking) thread.
    let Some(list) = (unsafe { (*HELD.0.get()).take() }) else { return };
    for r in list.iter().rev() {
        // SAFETY: as in `prepare`; this thread held these locks there.
        unsafe { (r.visit)(r.ctx, phase) };
    }
    drop(list);
}

extern "C" fn parent() {
    release(Phase::Parent);
}

extern "C" fn child() {
    release(Phase::Child);
}

/// Have the fork handlers visit the `A` at `a` from now on (registering the
/// handlers with `pthread_atfork` the first time).
///
/// # Safety
/// `a` stays alive and in place until [`unregister`] is called with it (or
/// for the rest of the process).
pub(crate) unsafe fn register<A: Allocator>(a: *const A) {
    ATFORK.call_once(|| {
        // SAFETY: three plain functions that stay valid: the library is
        // never closed.
        unsafe { pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    });
    instances().push(Registered { ctx: a as usize, visit: visit::<A> });
}

/// Stop visiting the instance at `ctx` (before it is destroyed).
pub(crate) fn unregister(ctx: *const c_void) {
    instances().retain(|r| r.ctx != ctx as usize);
}
