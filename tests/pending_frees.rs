//! Dropping memory of one non-thread-safe handler while holding another's
//! guard never deadlocks: a free that would have to wait for a lock held
//! elsewhere is queued as a pending free and done by the lock's holder
//! (`memplug::lock`, "The rules that keep it deadlock-free"). Two threads do
//! the reverse of each other — with buffers, with raw blocks, with
//! allocator-api2 and hashbrown collections, an instance's last reference —
//! under a watchdog that aborts
//! the test process instead of hanging; every block must then be back.

mod support;
#[path = "support/threads.rs"]
mod threads;

use allocator_api2::vec::Vec;
use hashbrown::{DefaultHashBuilder, HashMap};
use memplug::{Buffer, Handler, HandlerGuard, Registry, lock};
use std::sync::{Barrier, mpsc};
use threads::{Rng, Watchdog};

/// `n` distinct arenas (not thread-safe), each a private copy.
fn arenas(n: usize, dir: &tempfile::TempDir) -> std::vec::Vec<Handler> {
    (0..n)
        .map(|i| {
            let path = threads::private_copy("arena", dir.path(), &format!("libarena_p{i}.so"));
            let h = Registry::new().load_path(path).unwrap();
            assert!(!h.is_thread_safe());
            h
        })
        .collect()
}

#[track_caller]
fn assert_clean(h: Handler) {
    let s = h.stats().unwrap();
    assert_eq!((s.live_bytes, s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0, 0), "{h}");
}

/// What one thread frees of the other handler's memory while it holds a
/// guard of its own (held only to be dropped).
#[allow(dead_code)]
enum Loot {
    Buffers(std::vec::Vec<Buffer>),
    Vecs(std::vec::Vec<Vec<u64, Handler>>),
    Map(HashMap<u64, Vec<u8, Handler>, DefaultHashBuilder, Handler>),
}

fn loot(h: Handler, kind: usize, rng: &mut Rng) -> Loot {
    match kind % 3 {
        0 => Loot::Buffers((0..8).map(|i| Buffer::from_slice_in(&[i as u8; 300], h).unwrap()).collect()),
        1 => Loot::Vecs(
            (0..8)
                .map(|i| {
                    let mut v = Vec::new_in(h);
                    v.extend(0..(i * 50 + rng.below(100)) as u64);
                    v
                })
                .collect(),
        ),
        _ => {
            let mut m = HashMap::new_in(h);
            for i in 0..64u64 {
                let mut v = Vec::new_in(h);
                v.resize(rng.below(200), i as u8);
                m.insert(i, v);
            }
            Loot::Map(m)
        }
    }
}

#[test]
fn two_threads_dropping_each_others_memory_under_their_own_guards_never_deadlock() {
    let _watchdog = Watchdog::arm("two_threads_dropping_each_others_memory", threads::watchdog_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let hs = arenas(2, &dir);
    let (a, b) = (hs[0], hs[1]);
    const ROUNDS: usize = 600;
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        for (me, (mine, theirs)) in [(a, b), (b, a)].into_iter().enumerate() {
            let start = &start;
            s.spawn(move || {
                let mut rng = Rng::new(me as u64 + 7);
                for round in 0..ROUNDS {
                    // Made without any guard, then dropped while holding
                    // `mine` — at the same moment the other thread does the
                    // opposite, holding `theirs`.
                    let stolen = loot(theirs, round + me, &mut rng);
                    let p = theirs.alloc_aligned(100, 256).unwrap();
                    start.wait();
                    let guard = mine.lock();
                    // Some work under the guard, on a collection of its own.
                    let mut batch: Vec<u32, &HandlerGuard> = Vec::new_in(&guard);
                    batch.extend(0..rng.below(500) as u32);
                    drop(stolen); // must not wait for `theirs`
                    if rng.chance(30) {
                        std::thread::yield_now();
                    }
                    // A raw aligned block of theirs too (an over-allocation:
                    // queued by its underlying block), and a per-call block
                    // of its own handler (reentrant).
                    // SAFETY: `p` came from `theirs.alloc_aligned(100, 256)`.
                    unsafe { theirs.free_aligned(p, 100, 256) };
                    drop(batch);
                    let q = mine.alloc(24).unwrap();
                    // SAFETY: `q` is a live 24-byte block of `mine`.
                    unsafe { mine.free(q, 24) };
                    drop(guard);
                }
            });
        }
    });
    assert_clean(a);
    assert_clean(b);
}

#[test]
fn a_free_queued_behind_a_held_lock_is_done_when_that_lock_is_released() {
    let _watchdog = Watchdog::arm("a_free_queued_behind_a_held_lock", threads::watchdog_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let hs = arenas(2, &dir);
    let (a, b) = (hs[0], hs[1]);
    let instance = b.instantiate("region_size=64k").unwrap();
    let bi = instance.handler();
    let doomed = Buffer::from_slice_in(&[9; 5000], b).unwrap();
    let last: Vec<u64, Handler> = {
        let mut v = Vec::new_in(bi);
        v.extend(0..1000);
        v
    };
    drop(instance); // `last` is now the only thing keeping the instance
    let idle = b.instantiate("region_size=64k").unwrap(); // no blocks: its owner is its last reference
    let bj = idle.handler();

    let (held_tx, held_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        // Another thread holds `b` and the instance until told to let go.
        let holder = s.spawn(move || {
            let guards = lock::lock_all(&[b, bi, bj]);
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            drop(guards); // drains the queued frees of both
        });
        held_rx.recv().unwrap();
        let guard = a.lock();
        // Both frees find their lock taken and this thread holding `a`: they
        // are queued, and this thread goes on (the watchdog fails the test
        // if it waits).
        drop(doomed);
        drop(last);
        drop(idle); // the last reference: `destroy` is queued too
        let p = guard.alloc(64).unwrap();
        // SAFETY: a live 64-byte block of `a`.
        unsafe { guard.free(p, 64) };
        go_tx.send(()).unwrap();
        drop(guard);
        holder.join().unwrap();
    });
    assert_clean(b);
    assert_clean(a);
    // The instance's last block was freed from the queue, which released its
    // count: it is gone, and refuses to allocate.
    assert_eq!(bi.alloc(8).unwrap_err().code(), "instance-gone");
    assert_eq!(bj.alloc(8).unwrap_err().code(), "instance-gone");
}

#[test]
fn many_threads_freeing_across_guards_lose_no_block() {
    let _watchdog = Watchdog::arm("many_threads_freeing_across_guards", threads::watchdog_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let hs = arenas(3, &dir);
    const THREADS: usize = 6;
    const ROUNDS: usize = 400;
    std::thread::scope(|s| {
        let (txs, rxs): (std::vec::Vec<_>, std::vec::Vec<_>) =
            (0..THREADS).map(|_| mpsc::channel::<Vec<u64, Handler>>()).unzip();
        for (me, rx) in rxs.into_iter().enumerate() {
            let (hs, txs) = (&hs, txs.clone());
            s.spawn(move || {
                let mut rng = Rng::new(100 + me as u64);
                for round in 0..ROUNDS {
                    // Send a vector of a random handler to a random thread...
                    let h = hs[rng.below(hs.len())];
                    let mut v = Vec::new_in(h);
                    v.extend(0..rng.below(300) as u64);
                    let _ = txs[rng.below(THREADS)].send(v);
                    // ...and drop what others sent, holding a guard (or not).
                    let mine = hs[(me + round) % hs.len()];
                    let guards = if rng.chance(70) { Some(lock::lock_all(&[mine])) } else { None };
                    while let Ok(v) = rx.try_recv() {
                        drop(v);
                    }
                    drop(guards);
                }
                // Whatever arrives after this thread stopped is dropped with
                // the receiver, at the end of the scope.
                drop(rx);
            });
        }
        drop(txs);
    });
    for h in hs {
        assert_clean(h);
    }
}

/// The plugin's own statistics, read straight from its handler struct (the
/// library is the one the registry opened: same path, same state), without
/// the host's lock — so without draining any pending free first.
fn stats_behind_the_hosts_back(path: &std::path::Path) -> memplug_abi::MemplugStats {
    // SAFETY: the library is already open (the registry opened it) and is
    // never closed; opening it again only adds a reference.
    let lib = unsafe { libloading::Library::new(path) }.unwrap();
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    // SAFETY: `memplug_handler` is the plugin's entry, of type `EntryFn`.
    let entry = unsafe { lib.get::<memplug_abi::EntryFn>(memplug_abi::ENTRY_SYMBOL.as_bytes()) }.unwrap();
    // SAFETY: the entry returns its static handler, valid for ever.
    let handler = unsafe { entry().as_ref() }.unwrap();
    let stats = handler.stats.expect("the arena reports statistics");
    let mut out =
        memplug_abi::MemplugStats { struct_size: size_of::<memplug_abi::MemplugStats>() as u64, ..Default::default() };
    // SAFETY: the plugin's stats function with its own ctx and a writable
    // struct; no other thread is using the arena any more.
    assert_eq!(unsafe { stats(handler.ctx, &mut out) }, 0);
    out
}

#[test]
fn no_queued_free_is_left_behind_when_its_holder_lets_go() {
    let _watchdog = Watchdog::arm("no_queued_free_is_left_behind", threads::watchdog_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let b_path = threads::private_copy("arena", dir.path(), "libarena_behind.so");
    let b = Registry::new().load_path(&b_path).unwrap();
    let a = arenas(1, &dir)[0];
    const ROUNDS: usize = 2_000;
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        // Takes and lets go of `b` as fast as it can.
        s.spawn(|| {
            start.wait();
            for _ in 0..ROUNDS * 4 {
                let g = b.lock();
                let p = g.alloc(16).unwrap();
                // SAFETY: a live 16-byte block of `b`.
                unsafe { g.free(p, 16) };
            }
        });
        // Frees blocks of `b` while holding `a`: some find `b` taken and are
        // queued, often just as the other thread lets go of it.
        s.spawn(|| {
            start.wait();
            for _ in 0..ROUNDS {
                let blocks: std::vec::Vec<Buffer> = (0..4).map(|_| Buffer::with_capacity_in(40, b).unwrap()).collect();
                let guard = a.lock();
                drop(blocks);
                drop(guard);
            }
        });
    });
    // Nobody has taken `b`'s lock since: whatever was queued must have been
    // freed by the thread that let go of it (or by the queuer itself).
    let s = stats_behind_the_hosts_back(&b_path);
    assert_eq!((s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0), "blocks left in the queue of pending frees");
    assert_clean(b);
    assert_clean(a);
}
