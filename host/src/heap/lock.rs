//! Locks for handlers that are not thread-safe, and guards that hold them.
//!
//! A plugin that does not declare [`memplug_abi::FLAG_THREAD_SAFE`] gets a
//! lock when it is installed, and **every call into it holds that lock**:
//! there is no way to reach its functions from safe code without it. A
//! thread-safe handler has no lock: its calls go straight to the plugin.
//!
//! There are two ways to hold the lock:
//! - **per call** — [`Handler::alloc`], [`Handler::free`], dropping a
//!   [`Buffer`](crate::Buffer), … each take and release the lock around one
//!   call into the plugin;
//! - **per batch** — [`Handler::lock`] returns a [`HandlerGuard`] whose
//!   `alloc` / `alloc_zeroed` / `realloc` / `free` call the plugin directly,
//!   without locking again, until the guard is dropped (a ufunc inner loop,
//!   a parser filling many small buffers). For a thread-safe handler the guard
//!   holds nothing and costs nothing.
//!
//! ```
//! use memplug::current;
//!
//! let h = current::default_handler(); // any handler, thread-safe or not
//! let guard = h.lock();
//! let blocks: Vec<_> = (0..100).map(|i| (guard.alloc(16 + i).unwrap(), 16 + i)).collect();
//! for (p, size) in blocks {
//!     // SAFETY: each block came from this handler with this size.
//!     unsafe { guard.free(p, size) };
//! }
//! drop(guard); // the lock (if any) is released here, or on panic
//! ```
//!
//! # Reentrancy
//! The lock is reentrant: a thread that holds a guard may also use the
//! per-call path of the same handler — drop a [`Buffer`](crate::Buffer) it
//! made, call [`Handler::alloc`], or take another guard of it — without
//! deadlocking. Other threads wait until the last guard is dropped.
//!
//! Guards are neither `Send` nor `Sync`: a lock is released by the thread
//! that took it, and the guard's calls are serialised because only that
//! thread can make them.
//!
//! ```compile_fail
//! let guard = memplug::current::default_handler().lock();
//! std::thread::spawn(move || drop(guard)); // a guard stays on its thread
//! ```
//!
//! ```compile_fail
//! let guard = memplug::current::default_handler().lock();
//! std::thread::scope(|s| {
//!     s.spawn(|| guard.alloc(8)); // nor is it shared with another thread
//! });
//! ```
//!
//! # Several handlers at once
//! [`lock_all`] takes the locks of 2, 3 or N handlers at once and returns a
//! [`MultiGuard`] holding one [`HandlerGuard`] per distinct handler:
//! - a handler given twice is locked once (locking it twice is harmless with
//!   a reentrant lock, but one guard per handler is what callers index);
//! - distinct handlers are locked in **one global order** — ascending address
//!   of their state — so two threads asking for the same handlers in opposite
//!   orders cannot deadlock (NumPy gh-31682 is that deadlock);
//! - everything is released when the `MultiGuard` is dropped: normally, on an
//!   early return with `?`, or while unwinding from a panic.
//!
//! ```
//! use memplug::{Buffer, current, lock};
//!
//! let a = current::builtin();
//! let b = current::default_handler();
//! let guards = lock::lock_all(&[b, a, b]); // any order, duplicates allowed
//! let p = guards[a].alloc(64).unwrap();
//! // SAFETY: `p` came from `a` with 64 bytes.
//! unsafe { guards.guard(a).free(p, 64) };
//! ```
//!
//! # The rules that keep it deadlock-free
//! But for the one case left to the caller (below), a thread waits for a
//! handler's lock in two cases only (1 and 2), and neither can close a
//! cycle of threads waiting for each other; frees (3) and every other call
//! (4) never wait while the thread holds a lock:
//! 1. **Guards are taken in one [`lock_all`] call**, in the global order. A
//!    thread that already holds guards may lock again only handlers it
//!    already holds (which never waits: the lock is reentrant): asking for a
//!    new one, which could be locked out of the global order, is refused —
//!    [`Handler::lock`] and [`lock_all`] panic, [`Handler::lock_checked`] and
//!    [`lock_all_checked`] return [`LockError::OrderViolation`]. (Handlers
//!    that are thread-safe have no lock and are always allowed.)
//! 2. **A per-call operation by a thread that holds no lock** waits for the
//!    one lock it needs, and holds nothing else while it waits.
//! 3. **Frees never wait while holding a lock.** Dropping memory of handler B
//!    — a [`Buffer`](crate::Buffer), a `Vec<T, Handler>`, a [`Handler::free`]
//!    — while this thread holds a guard of another handler A frees the
//!    block at once if B's lock is free (or this thread's), and otherwise
//!    hands the block to B's **queue of pending frees**, and goes on. The
//!    queue is emptied by whoever holds B's lock next: every time B's lock
//!    is taken, and every time it is released (after releasing, the holder
//!    looks again, so a block queued at that very moment is not left
//!    behind). A queued block stays counted until it is really freed, so an
//!    instance is destroyed only after its last pending block is freed.
//!
//! 4. **Other calls never wait while holding a lock.** Everything else that
//!    needs a handler's lock — [`Handler::stats`], [`Handler::instantiate`],
//!    [`Handler::share`] and [`Handler::attach`] — waits for it only if this
//!    thread holds no lock (case 2). A thread that holds a guard of A and
//!    makes such a call on B takes B's lock if that needs no wait (it is
//!    free, or this thread's); if another thread holds it, the call is
//!    **not made** and fails with [`LockError::WouldBlock`] (code
//!    `would-block`; wrapped in `InstanceError::Lock` and
//!    `ShareError::Lock`; [`Handler::stats`] returns `None`,
//!    [`Handler::stats_checked`] the error). Make the call before taking
//!    the guards, or lock B with A in one [`lock_all`] and use B's guard.
//!
//! So two threads that each hold a guard and drop the other handler's
//! memory — collections built on plugin memory make that an everyday
//! pattern — both go on; the blocks are freed when the guards are dropped.
//!
//! ```
//! use memplug::{Buffer, current};
//!
//! let (a, b) = (current::builtin(), current::default_handler());
//! let buf = Buffer::with_capacity_in(64, b).unwrap();
//! let guard = a.lock();
//! drop(buf); // never waits for `b`'s lock while `a`'s is held
//! drop(guard);
//! ```
//!
//! # Instances
//! Every call into an instance — allocation, free, statistics, `create`,
//! `locate`, `resolve` — counts as a user of it for its length, so none
//! reaches a destroyed one: the instance goes when its [`Instance`](crate::Instance)
//! owner is dropped and its last block freed, and a guard does not keep it
//! alive (the guard holds the lock, not the instance). After that, on its
//! handler, allocation fails with `instance-gone`, [`HandlerGuard::stats`]
//! and [`Handler::stats`] return `None`, `instantiate` fails with
//! `instance-destroyed`, and `share`/`attach` with `instance-gone`.
//!
//! # The one case left to the caller
//! **Allocating** per call from a
//! non-thread-safe handler B while holding a guard of another one A waits
//! for B's lock (an allocation cannot be put off), which can deadlock against
//! a thread that holds B and allocates from A. Lock both with [`lock_all`]
//! and allocate through the guards, or allocate from B before taking A.

use crate::heap::error::AllocError;
pub use crate::heap::error::LockError;
use crate::heap::guarded::HELD;
pub(crate) use crate::heap::guarded::would_block;
use crate::heap::handler::Handler;
use crate::heap::raw::raw_handler::Held;
use std::fmt;
use std::ptr::NonNull;

/// The key of the global lock order: the address of the handler's state.
#[inline]
fn order_key(h: Handler) -> usize {
    h.key()
}

/// Refuse to lock a handler this thread does not hold while it holds others.
fn check_order(sorted: &[Handler]) -> Result<(), LockError> {
    HELD.with(|held| {
        let held = held.borrow();
        if held.is_empty() {
            return Ok(());
        }
        let new = |h: &&Handler| !h.state.raw.is_thread_safe() && !held.iter().any(|&(a, _)| a == order_key(**h));
        match sorted.iter().find(new) {
            None => Ok(()),
            Some(h) => {
                let mut names: Vec<&'static str> = held.iter().map(|&(_, n)| n).collect();
                names.dedup();
                Err(LockError::OrderViolation { wanted: h.state.raw.name(), held: names })
            }
        }
    })
}

/// Exclusive access to one handler for as long as it lives.
///
/// Made by [`Handler::lock`] or [`lock_all`]. While a guard exists, this
/// thread holds the handler's lock (if the handler has one), so its
/// [`alloc`](HandlerGuard::alloc), [`alloc_zeroed`](HandlerGuard::alloc_zeroed),
/// [`realloc`](HandlerGuard::realloc) and [`free`](HandlerGuard::free) call
/// the plugin directly. Dropping it releases the lock. Not `Send`, not
/// `Sync`.
pub struct HandlerGuard {
    handler: Handler,
    /// Holds the handler's lock (if it has one) for the guard's whole life;
    /// neither `Send` nor `Sync`, which makes the guard neither.
    held: Held<'static>,
}

impl HandlerGuard {
    /// Lock `handler` (no order check; callers check first). A guard that
    /// holds a lock is recorded in `HELD` until dropped.
    #[inline]
    fn acquire(handler: Handler) -> HandlerGuard {
        let held = handler.state.raw.lock();
        if !handler.state.raw.is_thread_safe() {
            HELD.with(|h| h.borrow_mut().push((order_key(handler), handler.state.raw.name())));
        }
        HandlerGuard { handler, held }
    }

    /// The handler this guard is for.
    #[inline]
    pub fn handler(&self) -> Handler {
        self.handler
    }

    /// Whether the guard holds a lock (`false` for a thread-safe handler,
    /// whose guard is a plain wrapper).
    pub fn holds_lock(&self) -> bool {
        !self.handler.state.raw.is_thread_safe()
    }

    /// Statistics, if the plugin reports them (see [`Handler::stats`]):
    /// `None` too for an instance that is destroyed — the guard holds the
    /// lock, not the instance, which goes when its owner is dropped and its
    /// last block freed, even while a guard of it lives. Never waits: this
    /// thread holds the lock.
    pub fn stats(&self) -> Option<memplug_abi::MemplugStats> {
        self.held.stats()
    }
}

crate::heap::calls::block_calls!(HandlerGuard, " under the held lock", |g| core: g.held, handler: g.handler);

/// Guards are made from the handler: [`Handler::lock`] (and
/// [`lock_all`] for several).
impl Handler {
    /// Hold this handler's lock until the returned guard is dropped, and call
    /// the plugin through the guard without locking again. For a thread-safe
    /// handler nothing is locked. See the [`lock`](crate::heap::lock) module.
    ///
    /// # Panics
    /// If this thread holds guards of other non-thread-safe handlers (see the
    /// [module docs](crate::heap::lock)); [`Handler::lock_checked`] returns the
    /// error instead.
    ///
    /// ```
    /// let h = memplug::current::default_handler();
    /// let g = h.lock();
    /// let p = g.alloc_zeroed(4, 8).unwrap();
    /// // SAFETY: `p` came from `h` with 32 bytes; it is freed once.
    /// unsafe { g.free(p, 32) };
    /// ```
    #[must_use = "the lock is released when the guard is dropped"]
    pub fn lock(&self) -> HandlerGuard {
        self.lock_checked().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Handler::lock`], returning [`LockError::OrderViolation`] instead of
    /// panicking.
    pub fn lock_checked(&self) -> Result<HandlerGuard, LockError> {
        lock_one(*self)
    }
}

/// Lock `handler` for [`Handler::lock_checked`]: refused if this thread
/// holds guards of other non-thread-safe handlers.
pub(crate) fn lock_one(handler: Handler) -> Result<HandlerGuard, LockError> {
    check_order(std::slice::from_ref(&handler))?;
    Ok(HandlerGuard::acquire(handler))
}

impl Drop for HandlerGuard {
    fn drop(&mut self) {
        if self.holds_lock() {
            let key = order_key(self.handler);
            // `try_with`: during thread teardown the list may be gone already.
            let _ = HELD.try_with(|h| {
                let mut h = h.borrow_mut();
                if let Some(i) = h.iter().rposition(|&(a, _)| a == key) {
                    h.remove(i);
                }
            });
        }
        // The lock is released after this, by `held`'s own drop.
    }
}

impl fmt::Debug for HandlerGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerGuard")
            .field("handler", &self.handler.name())
            .field("holds_lock", &self.holds_lock())
            .finish()
    }
}

/// The guards of several handlers, taken at once by [`lock_all`]: one per
/// distinct handler, in lock order. Dropping it releases them all.
///
/// Look a guard up by handler with [`MultiGuard::get`],
/// [`MultiGuard::guard`] or indexing (`guards[h]`).
pub struct MultiGuard {
    /// Sorted by `order_key`, distinct.
    guards: Vec<HandlerGuard>,
}

impl MultiGuard {
    /// The guard for `handler`, if it was asked for.
    #[inline]
    pub fn get(&self, handler: Handler) -> Option<&HandlerGuard> {
        let key = order_key(handler);
        self.guards.binary_search_by_key(&key, |g| order_key(g.handler)).ok().map(|i| &self.guards[i])
    }

    /// The guard for `handler`.
    ///
    /// # Panics
    /// If `handler` was not among those locked.
    #[inline]
    pub fn guard(&self, handler: Handler) -> &HandlerGuard {
        self.get(handler).unwrap_or_else(|| panic!("handler `{}` is not held by this MultiGuard", handler.name()))
    }

    /// The guards, in the order they were locked.
    pub fn iter(&self) -> std::slice::Iter<'_, HandlerGuard> {
        self.guards.iter()
    }

    /// The distinct handlers held, in the order they were locked.
    pub fn handlers(&self) -> impl Iterator<Item = Handler> + '_ {
        self.guards.iter().map(|g| g.handler)
    }

    /// How many distinct handlers are held.
    pub fn len(&self) -> usize {
        self.guards.len()
    }

    /// Whether no handler is held (`lock_all(&[])`).
    pub fn is_empty(&self) -> bool {
        self.guards.is_empty()
    }
}

impl std::ops::Index<Handler> for MultiGuard {
    type Output = HandlerGuard;

    /// See [`MultiGuard::guard`].
    fn index(&self, handler: Handler) -> &HandlerGuard {
        self.guard(handler)
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.guards.iter()).finish()
    }
}

/// Lock every handler in `handlers` at once: duplicates are locked once and
/// distinct handlers in the global order (ascending address of their state),
/// whatever order they are given in. See the [module docs](crate::heap::lock).
///
/// # Panics
/// On a lock-order violation ([`lock_all_checked`] returns it instead).
#[must_use = "the locks are released when the guard is dropped"]
pub fn lock_all(handlers: &[Handler]) -> MultiGuard {
    lock_all_checked(handlers).unwrap_or_else(|e| panic!("{e}"))
}

/// [`lock_all`], returning [`LockError::OrderViolation`] instead of
/// panicking when this thread holds guards of other handlers already.
/// Nothing is locked when it fails.
pub fn lock_all_checked(handlers: &[Handler]) -> Result<MultiGuard, LockError> {
    let mut sorted = handlers.to_vec();
    sorted.sort_unstable_by_key(|&h| order_key(h));
    sorted.dedup();
    check_order(&sorted)?;
    // Acquired one by one in ascending order; if anything unwinds midway, the
    // guards collected so far are dropped, releasing their locks.
    let guards = sorted.into_iter().map(HandlerGuard::acquire).collect();
    Ok(MultiGuard { guards })
}
