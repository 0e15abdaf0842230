//! Soundness of the calls that are not allocations: no call ever reaches a
//! destroyed instance (statistics through a guard or a handler, making an
//! instance), calls that need another handler's lock never wait while this
//! thread holds one (crossed statistics under two guards), and the
//! `tracking` plugin tells foreign pointers apart without reading them.
//! Under `scripts/asan.sh` these also prove that no freed or foreign memory
//! is read. Every test runs under a watchdog.

mod support;
#[path = "support/threads.rs"]
mod threads;

use memplug::lock::LockError;
use memplug::{Handler, Registry};
use std::ptr::NonNull;
use std::sync::{Barrier, mpsc};
use threads::Watchdog;

const SECS: u64 = 20;

/// A private copy of the bundled plugin `name` (its own library, with its
/// own state and counters), loaded.
fn private(name: &str, dir: &tempfile::TempDir, file: &str) -> Handler {
    let path = threads::private_copy(name, dir.path(), file);
    Registry::new().load_path(path).unwrap()
}

fn arena() -> Handler {
    Registry::new().load_path(support::plugin("arena")).unwrap()
}

#[test]
fn guard_stats_after_the_instance_is_dropped_reach_no_freed_instance() {
    let _w = Watchdog::arm("guard_stats_after_the_instance_is_dropped", threads::watchdog_secs(SECS));
    let base = arena();

    // The guard taken after the drop.
    let inst = base.instantiate("").unwrap();
    let h = inst.handler();
    assert!(h.lock().stats().is_some(), "a live instance reports its statistics");
    drop(inst);
    assert_eq!(h.lock().stats(), None, "a destroyed instance is not called");
    assert_eq!(h.stats(), None);
    assert_eq!(h.stats_checked(), Ok(None));

    // The guard taken before the drop: the instance goes under it.
    let inst = base.instantiate("").unwrap();
    let h = inst.handler();
    let guard = h.lock();
    drop(inst);
    assert_eq!(guard.stats(), None, "the guard holds the lock, not the instance");
    drop(guard);

    // A block keeps it alive under the guard; its free destroys it.
    let inst = base.instantiate("").unwrap();
    let h = inst.handler();
    let guard = h.lock();
    let p = guard.alloc(64).unwrap();
    drop(inst);
    assert_eq!(guard.stats().map(|s| s.live_count), Some(1), "its live block keeps the instance");
    // SAFETY: `p` came from this handler with 64 bytes; freed once.
    unsafe { guard.free(p, 64) };
    assert_eq!(guard.stats(), None, "the last free destroyed it");
    assert_eq!(guard.alloc(8).unwrap_err().code(), "instance-gone");
}

#[test]
fn instantiate_of_a_dropped_instance_is_instance_destroyed() {
    let _w = Watchdog::arm("instantiate_of_a_dropped_instance", threads::watchdog_secs(SECS));
    let inst = arena().instantiate("region_size=64k").unwrap();
    let h = inst.handler();
    drop(inst);
    let e = h.instantiate("").unwrap_err();
    assert_eq!(e.code(), "instance-destroyed");
    let message = e.to_string();
    assert!(message.contains("destroyed") && message.contains("instantiate"), "{message}");
}

#[test]
fn crossed_calls_under_two_guards_never_wait() {
    let _w = Watchdog::arm("crossed_calls_under_two_guards_never_wait", threads::watchdog_secs(SECS));
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (private("arena", &dir, "libarena_a.so"), private("arena", &dir, "libarena_b.so"));
    assert!(!a.is_thread_safe() && !b.is_thread_safe());

    // Uncontended, the other handler's lock is simply taken.
    {
        let _g = a.lock();
        assert!(b.stats().is_some(), "a free lock is taken while holding another");
    }

    let both = Barrier::new(2);
    let crossed = |mine: Handler, other: Handler| {
        let guard = mine.lock();
        both.wait(); // both guards are held from here
        let e = other.stats_checked().unwrap_err();
        assert_eq!(e.code(), "would-block");
        assert!(
            matches!(&e, LockError::WouldBlock { wanted, held } if *wanted == other.name() && held.as_slice() == [mine.name()]),
            "{e:?}"
        );
        assert!(e.to_string().contains("lock_all"), "the message says what to do: {e}");
        assert_eq!(other.stats(), None);
        let e = other.instantiate("").unwrap_err();
        assert_eq!(e.code(), "would-block", "{e}");
        assert!(guard.stats().is_some(), "its own guard's statistics never wait");
        both.wait(); // the other thread is done with its calls
        drop(guard);
    };
    std::thread::scope(|s| {
        s.spawn(|| crossed(a, b));
        s.spawn(|| crossed(b, a));
    });
    // Both threads finished; the handlers work as before.
    assert!(a.stats().is_some() && b.stats().is_some());
}

#[test]
fn crossed_instance_stats_under_two_guards_finish() {
    let _w = Watchdog::arm("crossed_instance_stats_under_two_guards_finish", threads::watchdog_secs(SECS));
    let base = arena();
    let (x, y) = (base.instantiate("").unwrap(), base.instantiate("").unwrap());
    let (xh, yh) = (x.handler(), y.handler());
    let both = Barrier::new(2);
    let crossed = |mine: Handler, other: Handler| {
        for _ in 0..200 {
            let guard = mine.lock();
            let _ = guard.alloc(16).map(|p| {
                // SAFETY: `p` came from this guard's handler with 16 bytes.
                unsafe { guard.free(p, 16) }
            });
            both.wait();
            // Either the other's lock was free (statistics) or it was not
            // (nothing): never a wait.
            let _ = other.stats_checked();
            drop(guard);
            both.wait();
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| crossed(xh, yh));
        s.spawn(|| crossed(yh, xh));
    });
    drop((x, y));
}

/// A raw block sent to another thread.
struct Block(NonNull<u8>);
// SAFETY: the block is plain memory of a thread-safe handler; the receiving
// thread is its only user.
unsafe impl Send for Block {}

#[test]
fn a_thread_safe_instance_freed_by_another_thread_during_stats() {
    let _w = Watchdog::arm("a_thread_safe_instance_freed_during_stats", threads::watchdog_secs(SECS * 3));
    let base = Registry::new().load_path(support::plugin("guard")).unwrap();
    assert!(base.is_thread_safe() && base.has_stats());
    let rounds = if std::env::var_os("MEMPLUG_ASAN").is_some() { 500 } else { 2000 };
    let (tx, rx) = mpsc::channel::<(Handler, Block)>();
    let both = Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            for (h, Block(p)) in rx {
                both.wait();
                // SAFETY: `p` came from `h.alloc(64)`; freed once, here.
                unsafe { h.free(p, 64) };
            }
        });
        for _ in 0..rounds {
            let inst = base.instantiate("").unwrap();
            let h = inst.handler();
            let p = h.alloc(64).unwrap();
            drop(inst); // only the block keeps the instance now
            tx.send((h, Block(p))).unwrap();
            both.wait();
            // Races with the last free: either statistics of the live
            // instance or nothing, never a call into a destroyed one.
            for _ in 0..3 {
                if let Some(stats) = h.stats() {
                    assert!(stats.live_count <= 1);
                }
            }
        }
        drop(tx);
    });
}

/// A page whose predecessor is not mapped: reading a byte before it faults.
struct LonePage(*mut u8);

impl LonePage {
    fn new() -> LonePage {
        const PAGE: usize = 4096;
        // SAFETY: an anonymous private mapping of two fresh pages, then the
        // first unmapped; no existing memory is touched.
        unsafe {
            let two = libc::mmap(
                std::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(two, libc::MAP_FAILED);
            assert_eq!(libc::munmap(two, PAGE), 0);
            LonePage((two as *mut u8).add(PAGE))
        }
    }
}

impl Drop for LonePage {
    fn drop(&mut self) {
        // SAFETY: the page mapped by `new`, unmapped once.
        unsafe { libc::munmap(self.0.cast(), 4096) };
    }
}

#[test]
fn tracking_counts_foreign_pointers_without_reading_them() {
    let _w = Watchdog::arm("tracking_counts_foreign_pointers", threads::watchdog_secs(SECS));
    let dir = tempfile::tempdir().unwrap();
    // recover=1: each bad free is reported and the program goes on (by
    // default tracking aborts it, as glibc would).
    let instance = private("tracking", &dir, "libtracking_foreign.so").instantiate("recover=1").unwrap();
    let h = instance.handler();
    let bad = || h.stats().unwrap().bad_frees;
    assert_eq!(bad(), 0);

    // A libc block: the 16 bytes before it are libc's, not tracking's.
    // SAFETY: libc malloc of 64 bytes.
    let foreign = NonNull::new(unsafe { libc::malloc(64) }.cast::<u8>()).unwrap();
    // SAFETY: deliberately foreign: `tracking` refuses it without touching
    // it (the test of that promise); the block stays libc's.
    unsafe { h.free(foreign, 64) };
    assert_eq!(bad(), 1, "a foreign free is counted");
    // SAFETY: as above; a refused resize leaves the block alone.
    let e = unsafe { h.realloc(foreign, 64, 128) }.unwrap_err();
    assert_eq!(e.code(), "allocation-failed");
    assert_eq!(bad(), 2, "a foreign resize is counted");
    // SAFETY: the block is still libc's, freed once.
    unsafe { libc::free(foreign.as_ptr().cast()) };

    // The start of a page with nothing mapped before it.
    let page = LonePage::new();
    // SAFETY: deliberately foreign, as above.
    unsafe { h.free(NonNull::new(page.0).unwrap(), 16) };
    assert_eq!(bad(), 3, "a free at the start of a lone page is counted, not read");

    // A block of its own, freed twice: the second is refused and counted.
    let p = h.alloc(32).unwrap();
    // SAFETY: `p` came from `h` with 32 bytes.
    unsafe { h.free(p, 32) };
    assert_eq!(bad(), 3);
    // SAFETY: deliberately a double free: `tracking` refuses it unread.
    unsafe { h.free(p, 32) };
    assert_eq!(bad(), 4, "a double free is counted");
    let s = h.stats().unwrap();
    assert_eq!((s.live_count, s.live_bytes), (0, 0));
}
