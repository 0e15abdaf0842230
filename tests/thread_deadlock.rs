//! Locking several handlers at once (`memplug::lock`): opposite orders and
//! duplicates from several threads never deadlock, a thread holding a guard
//! may still use the per-call path of that handler, and every lock is
//! released on drop, on error paths and on panic. Every test runs under a
//! watchdog that aborts the process with a clear message instead of hanging.

mod support;
#[path = "support/threads.rs"]
mod threads;

use memplug::lock::{self, LockError};
use memplug::{Buffer, Handler, Registry, current};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, mpsc};
use threads::{Rng, Watchdog};

/// `n` distinct non-thread-safe handlers: private copies of the arena, each
/// a library of its own, registered in registries of their own (they share
/// the name `arena`).
fn arenas(n: usize, dir: &tempfile::TempDir) -> Vec<Handler> {
    (0..n)
        .map(|i| {
            let path = threads::private_copy("arena", dir.path(), &format!("libarena{i}.so"));
            let h = Registry::new().load_path(path).unwrap();
            assert!(!h.is_thread_safe());
            h
        })
        .collect()
}

const NOBODY: usize = usize::MAX;

/// Per-handler "who is inside" cells, to check mutual exclusion directly.
struct Owners(Vec<(Handler, AtomicUsize)>);

impl Owners {
    fn new(hs: &[Handler]) -> Owners {
        Owners(hs.iter().map(|&h| (h, AtomicUsize::new(NOBODY))).collect())
    }

    fn cell(&self, h: Handler) -> Option<&AtomicUsize> {
        self.0.iter().find(|(x, _)| *x == h).map(|(_, c)| c)
    }

    fn enter(&self, h: Handler, me: usize) {
        if let Some(c) = self.cell(h) {
            let was = c.swap(me, Ordering::SeqCst);
            assert_eq!(was, NOBODY, "thread {me} got `{h}` while thread {was} held it");
        }
    }

    fn leave(&self, h: Handler, me: usize) {
        if let Some(c) = self.cell(h) {
            assert_eq!(c.swap(NOBODY, Ordering::SeqCst), me);
        }
    }
}

#[test]
fn thread_multi_acquire_opposite_orders_and_duplicates_never_deadlock() {
    let _watchdog = Watchdog::arm(
        "thread_multi_acquire_opposite_orders_and_duplicates_never_deadlock",
        threads::watchdog_secs(120),
    );
    let dir = tempfile::tempdir().unwrap();
    let hs = arenas(4, &dir);
    let builtin = current::builtin(); // thread-safe: no lock, always allowed
    let owners = Owners::new(&hs);
    let (a, b, c, d) = (hs[0], hs[1], hs[2], hs[3]);
    // 2, 3 and 4 handlers, each set also reversed and with duplicates.
    let sets: Vec<Vec<Handler>> = vec![
        vec![a, b],
        vec![b, a],
        vec![c, d, c],
        vec![a, b, c],
        vec![c, b, a],
        vec![b, a, b, c, a],
        vec![a, b, c, d],
        vec![d, c, b, a],
        vec![d, a, c, b, d, a],
        vec![d, builtin, a, builtin],
    ];
    const THREADS: usize = 8;
    const ROUNDS: usize = 1500;
    let start = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for me in 0..THREADS {
            let (sets, owners, start) = (&sets, &owners, &start);
            s.spawn(move || {
                let mut rng = Rng::new(me as u64 + 1);
                start.wait();
                for round in 0..ROUNDS {
                    // Odd threads walk the sets backwards and reversed.
                    let mut set = sets[(round + me) % sets.len()].clone();
                    if me % 2 == 1 {
                        set.reverse();
                    }
                    let guards = lock::lock_all(&set);
                    let mut distinct: Vec<Handler> = Vec::new();
                    for &h in &set {
                        if !distinct.contains(&h) {
                            distinct.push(h);
                        }
                    }
                    assert_eq!(guards.len(), distinct.len(), "one guard per distinct handler");
                    for &h in &distinct {
                        owners.enter(h, me);
                    }
                    // Work inside: blocks through each guard, in the caller's order.
                    let mut blocks = Vec::new();
                    for &h in &set {
                        let g = &guards[h];
                        assert_eq!(g.handler(), h);
                        let n = 1 + rng.below(500);
                        let p = g.alloc(n).unwrap();
                        // SAFETY: `p` is a fresh block of `n` bytes.
                        unsafe { p.as_ptr().write_bytes(me as u8, n) };
                        blocks.push((h, p, n));
                    }
                    if rng.chance(20) {
                        std::thread::yield_now();
                    }
                    for (h, p, n) in blocks {
                        // SAFETY: written above, `n` bytes.
                        let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), n) };
                        assert!(bytes.iter().all(|&x| x == me as u8), "a block changed under its lock");
                        // SAFETY: a live block of `h` with its size.
                        unsafe { guards[h].free(p, n) };
                    }
                    for &h in &distinct {
                        owners.leave(h, me);
                    }
                }
            });
        }
    });
    for h in hs {
        let s = h.stats().unwrap();
        assert_eq!((s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0), "{h}");
        assert_eq!(s.total_allocations as usize, count_uses(&sets, h) * ROUNDS * THREADS / sets.len());
    }
}

/// How many times `h` appears (duplicates included) over all sets.
fn count_uses(sets: &[Vec<Handler>], h: Handler) -> usize {
    sets.iter().map(|s| s.iter().filter(|&&x| x == h).count()).sum()
}

#[test]
fn thread_two_threads_locking_the_same_pair_in_opposite_orders_take_turns() {
    let _watchdog = Watchdog::arm("thread_two_threads_locking_the_same_pair", threads::watchdog_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let hs = arenas(2, &dir);
    let (a, b) = (hs[0], hs[1]);
    // The global order does not depend on the order asked for.
    let global: Vec<Handler> = lock::lock_all(&[a, b]).handlers().collect();
    assert_eq!(lock::lock_all(&[b, a, b]).handlers().collect::<Vec<_>>(), global);
    // The classic deadlock: one thread takes a then b, the other b then a.
    // With `lock_all` both take them in the same global order.
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        for order in [[a, b], [b, a]] {
            let (start, global) = (&start, &global);
            s.spawn(move || {
                start.wait();
                for _ in 0..5000 {
                    let g = lock::lock_all(&order);
                    assert_eq!(&g.handlers().collect::<Vec<_>>(), global);
                    let p = g[order[0]].alloc(8).unwrap();
                    // SAFETY: a live 8-byte block of `order[0]`.
                    unsafe { g[order[0]].free(p, 8) };
                }
            });
        }
    });
}

#[test]
fn thread_holding_a_guard_the_per_call_path_of_the_same_handler_does_not_deadlock() {
    let _watchdog = Watchdog::arm("thread_holding_a_guard_the_per_call_path", threads::watchdog_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let a = arenas(1, &dir)[0];
    let early = Buffer::from_slice_in(b"made before the guard", a).unwrap();

    let guard = a.lock();
    assert!(guard.holds_lock());
    // Per-call allocations, buffers made and dropped, nested guards: all on
    // the thread that holds the lock.
    let p = a.alloc(100).unwrap();
    let mut buf = Buffer::with_capacity_in(10, a).unwrap();
    buf.extend_from_slice(&[1; 5000]).unwrap(); // realloc under the guard
    drop(buf);
    drop(early); // freed under the guard
    {
        let again = a.lock();
        let both = lock::lock_all(&[a, a]);
        assert_eq!(both.len(), 1);
        let q = again.alloc(7).unwrap();
        // SAFETY: a live 7-byte block of `a`.
        unsafe { both[a].free(q, 7) };
    }
    assert!(guard.stats().is_some(), "statistics under the guard (reentrant)");

    // Another thread's per-call allocation waits for the guard: it can only
    // finish after this thread has said it is letting go.
    let released = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (ready_tx, ready_rx) = mpsc::channel();
        let released = &released;
        let other = s.spawn(move || {
            ready_tx.send(()).unwrap();
            let q = a.alloc(32).unwrap(); // blocks until the guard is dropped
            let seen = released.load(Ordering::SeqCst);
            // SAFETY: a live 32-byte block of `a`.
            unsafe { a.free(q, 32) };
            seen
        });
        ready_rx.recv().unwrap();
        for _ in 0..1000 {
            std::thread::yield_now(); // give the other thread every chance to run
        }
        // SAFETY: `p` is a live 100-byte block of `a`.
        unsafe { guard.free(p, 100) };
        released.store(true, Ordering::SeqCst);
        drop(guard);
        assert!(other.join().unwrap(), "the other thread got the lock while the guard was held");
    });
    let s = a.stats().unwrap();
    assert_eq!((s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0));
}

#[test]
fn thread_locks_are_released_on_panic_and_on_error_paths() {
    let _watchdog = Watchdog::arm("thread_locks_are_released_on_panic", threads::watchdog_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let hs = arenas(3, &dir);
    let (a, b, c) = (hs[0], hs[1], hs[2]);

    // A panic while holding three locks releases all three.
    let r = std::panic::catch_unwind(|| {
        let _g = lock::lock_all(&[a, b, c]);
        panic!("boom while holding three locks");
    });
    assert!(r.is_err());
    // Another thread can take them (the watchdog fails the test otherwise).
    std::thread::spawn(move || drop(lock::lock_all(&[c, b, a]))).join().unwrap();

    // An early return with `?` releases them too (and the buffer made under
    // them is freed on the way out, through the reentrant lock).
    fn fails_half_way(hs: &[Handler]) -> Result<(), memplug::AllocError> {
        let g = lock::lock_all(hs);
        let _buf = Buffer::with_capacity_in(16, hs[0])?;
        g[hs[1]].alloc_zeroed(usize::MAX, 2)?; // size-overflow: returns here
        unreachable!("the overflowing request is refused")
    }
    let err = fails_half_way(&[a, b]).unwrap_err();
    assert_eq!(err.code(), "size-overflow");
    std::thread::spawn(move || drop(lock::lock_all(&[b, a]))).join().unwrap();
    assert_eq!(a.stats().unwrap().live_count, 0);

    // A guard dropped during unwinding in another thread is released too.
    let t = std::thread::spawn(move || {
        let _g = c.lock();
        panic!("boom on another thread");
    });
    assert!(t.join().is_err());
    drop(c.lock());
}

#[test]
fn thread_taking_a_new_handler_while_holding_guards_is_refused_with_a_code() {
    let _watchdog = Watchdog::arm("thread_taking_a_new_handler_while_holding", threads::watchdog_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let hs = arenas(2, &dir);
    let (a, b) = (hs[0], hs[1]);
    let builtin = current::builtin();

    let g = a.lock();
    // Again the same handler, or a thread-safe one: fine.
    drop(lock::lock_all_checked(&[a, builtin, a]).unwrap());
    drop(builtin.lock());
    // A new non-thread-safe handler: refused, and nothing is locked.
    let e = lock::lock_all_checked(&[b, a]).unwrap_err();
    assert_eq!(e.code(), "lock-order-violation");
    assert!(matches!(&e, LockError::OrderViolation { wanted, held } if *wanted == b.name() && held == &[a.name()]));
    assert!(e.to_string().contains("lock_all"), "{e}");
    assert_eq!(b.lock_checked().unwrap_err().code(), "lock-order-violation");
    std::thread::spawn(move || drop(b.lock())).join().unwrap(); // b is free
    let panicked = std::panic::catch_unwind(|| drop(b.lock())).unwrap_err();
    let msg = panicked.downcast_ref::<String>().unwrap();
    assert!(msg.contains("lock-order violation"), "{msg}");
    drop(g);
    // With nothing held, any set can be locked.
    let both = lock::lock_all(&[b, a]);
    assert_eq!(both.len(), 2);
    assert!(both.get(builtin).is_none());
}

#[test]
fn thread_safe_handlers_get_guards_that_hold_nothing() {
    let builtin = current::builtin();
    assert!(builtin.is_thread_safe());
    let g1 = builtin.lock();
    let g2 = std::thread::spawn(move || {
        let g = builtin.lock(); // not blocked by g1: there is no lock
        let p = g.alloc(64).unwrap();
        // SAFETY: a live 64-byte block of the builtin handler.
        unsafe { g.free(p, 64) };
        g.holds_lock()
    })
    .join()
    .unwrap();
    assert!(!g1.holds_lock() && !g2);
    assert!(lock::lock_all(&[]).is_empty());
}
