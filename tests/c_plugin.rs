//! The C example plugin (`plugins/c/counting.c`) builds with the machine's
//! `cc` against the shipped header, loads, passes the conformance pass and
//! reports statistics.

mod support;

use memplug::{Buffer, Registry, check};

#[test]
fn c_plugin_builds_loads_and_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let lib = support::build_c(&support::root().join("plugins/c/counting.c"), dir.path(), "libcounting.so", &[]);
    let r = Registry::new();
    let h = r.load_path(&lib).unwrap();
    assert_eq!(h.name(), "c-counting");
    assert_eq!(h.info().abi(), "1.3");
    assert!(
        h.info().defaulted.is_empty()
            || h.info().defaulted.iter().all(|f| [
                "aligned_alloc",
                "create",
                "destroy",
                "locate",
                "resolve",
                "usable_size"
            ]
            .contains(f)),
        "{:?}",
        h.info().defaulted
    );
    let results = check::conformance(h);
    let t = check::tally(&results);
    assert_eq!((t.failed, t.skipped), (0, 0), "{results:?}");

    let b = Buffer::zeroed_in(4096, h).unwrap();
    let s = h.stats().unwrap();
    assert_eq!((s.live_bytes, s.live_count), (4096, 1));
    drop(b);
    let s = h.stats().unwrap();
    assert_eq!((s.live_bytes, s.live_count), (0, 0));
    assert!(s.peak_bytes >= 4096);
}
