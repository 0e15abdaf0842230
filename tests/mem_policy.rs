//! NumPy's `test_mem_policy` semantics through memplug's public API: the
//! current handler switches and restores, is thread-local, and a buffer is
//! freed by the handler that made it whatever is current by then.

mod support;

use memplug::{Buffer, Handler, Registry, current};
use std::path::PathBuf;

/// A private copy of a bundled plugin, so that this test's counters are its
/// own (the same file loaded twice shares one state; a copy does not).
fn private_copy(name: &str, dir: &tempfile::TempDir) -> PathBuf {
    let to = dir.path().join(format!("libmemplug_{name}.so"));
    std::fs::copy(support::plugin(name), &to).unwrap();
    to
}

fn load(registry: &Registry, name: &str, dir: &tempfile::TempDir) -> Handler {
    registry.load_path(private_copy(name, dir)).unwrap()
}

#[test]
fn switch_nest_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::new();
    let aligned = load(&r, "aligned", &dir);
    let tracking = load(&r, "tracking", &dir);
    let default = current::default_handler();
    assert_eq!(current::current(), default);
    {
        let _a = current::scoped(aligned);
        assert_eq!(current::current_name(), "aligned");
        {
            let _t = current::scoped(tracking);
            assert_eq!(current::current_name(), "tracking");
        }
        assert_eq!(current::current_name(), "aligned", "the inner scope restores the outer one");
    }
    assert_eq!(current::current(), default, "the default comes back");
    assert_eq!(current::with_handler(tracking, current::current_name), "tracking");
    assert_eq!(current::current(), default);
}

#[test]
fn a_panic_restores_the_previous_handler() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::new();
    let aligned = load(&r, "aligned", &dir);
    let before = current::current();
    let result = std::panic::catch_unwind(|| {
        let _scope = current::scoped(aligned);
        assert_eq!(current::current_name(), "aligned");
        panic!("boom");
    });
    assert!(result.is_err());
    assert_eq!(current::current(), before);
}

#[test]
fn thread_locality() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::new();
    let aligned = load(&r, "aligned", &dir);
    let tracking = load(&r, "tracking", &dir);
    let default_name = current::default_handler().name();

    let _scope = current::scoped(aligned);
    // A new thread starts from the process default, not from this override.
    let seen = std::thread::spawn(current::current_name).join().unwrap();
    assert_eq!(seen, default_name);

    // A change in another thread is invisible here, and vice versa.
    let (tx, rx) = std::sync::mpsc::channel();
    let (back_tx, back_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let _s = current::scoped(tracking);
        tx.send(current::current_name()).unwrap();
        back_rx.recv().unwrap();
        current::current_name()
    });
    assert_eq!(rx.recv().unwrap(), "tracking");
    assert_eq!(current::current_name(), "aligned", "the other thread's override does not leak here");
    back_tx.send(()).unwrap();
    assert_eq!(t.join().unwrap(), "tracking");
    assert_eq!(current::current_name(), "aligned");
}

#[test]
fn buffer_is_freed_by_its_own_handler_after_the_current_one_changed() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::new();
    let tracking = load(&r, "tracking", &dir);
    let aligned = load(&r, "aligned", &dir);
    let base = tracking.stats().expect("tracking reports statistics");
    assert_eq!(base.live_count, 0);

    let mut bufs = Vec::new();
    {
        let _t = current::scoped(tracking);
        for i in 0..10 {
            let mut b = Buffer::with_capacity(100 + i).unwrap();
            b.extend_from_slice(&[i as u8; 50]).unwrap();
            assert_eq!(b.handler(), Some(tracking));
            bufs.push(b);
        }
    }
    let live = tracking.stats().unwrap();
    assert_eq!(live.live_count, 10);
    assert_eq!(live.live_bytes, (0..10).map(|i| 100 + i).sum::<u64>());

    {
        let _a = current::scoped(aligned);
        assert_eq!(current::current_name(), "aligned");
        // Grow under another current handler: still through tracking.
        for b in bufs.iter_mut() {
            b.extend_from_slice(&[7; 1000]).unwrap();
            assert_eq!(b.handler(), Some(tracking));
        }
        // A new buffer comes from the new current handler.
        let fresh = Buffer::with_capacity(10).unwrap();
        assert_eq!(fresh.handler(), Some(aligned));
        assert_eq!(fresh.as_ptr() as usize % 64, 0);
        drop(bufs);
    }
    let after = tracking.stats().unwrap();
    assert_eq!(after.live_count, 0, "every buffer went back to tracking");
    assert_eq!(after.live_bytes, 0);
    assert_eq!(after.bad_frees, 0, "tracking saw no pointer it did not make");
    assert_eq!(after.size_mismatches, 0, "tracking saw every free with the right size");
    assert_eq!(after.total_allocations, 10);
    assert!(after.peak_bytes >= live.live_bytes);
}

#[test]
fn tracking_reports_foreign_and_wrongly_sized_frees() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::new();
    // recover=1: a bad free is reported and the program goes on (by default
    // tracking aborts it, as glibc would).
    let instance = load(&r, "tracking", &dir).instantiate("recover=1").unwrap();
    let tracking = instance.handler();
    let builtin = current::builtin();

    // A pointer tracking did not make (from libc through the builtin handler).
    let foreign = builtin.alloc(64).unwrap();
    // SAFETY: deliberately wrong: tracking must detect it and leave the block alone.
    unsafe { tracking.free(foreign, 64) };
    // SAFETY: the block is still the builtin's, untouched by tracking.
    unsafe { builtin.free(foreign, 64) };
    // A wrong size.
    let p = tracking.alloc(64).unwrap();
    // SAFETY: `p` is tracking's; the size is wrong on purpose (tracking frees
    // with the size it recorded).
    unsafe { tracking.free(p, 65) };
    let s = tracking.stats().unwrap();
    assert_eq!(s.bad_frees, 1);
    assert_eq!(s.size_mismatches, 1);
    assert_eq!(s.live_count, 0);
}

#[test]
fn a_handler_outlives_its_registration() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::new();
    let tracking = load(&r, "tracking", &dir);
    let b = Buffer::from_slice_in(b"still here", tracking).unwrap();
    // "Unloading" only unregisters: the name is free again, the library stays.
    assert_eq!(r.unregister("tracking"), Some(tracking));
    assert!(r.get("tracking").is_none());
    assert_eq!(&b[..], b"still here");
    drop(b);
    let s = tracking.stats().unwrap();
    assert_eq!((s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0));
    // The same library can be registered again under its name.
    let again = r.load_path(dir.path().join("libmemplug_tracking.so")).unwrap();
    assert_eq!(again.name(), "tracking");
}
