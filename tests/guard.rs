//! The `guard` plugin through the host. The faults it exists to cause are
//! tested in child processes: the test executable runs itself, filtered to
//! `child_process_entry` with `MEMPLUG_GUARD_CHILD` naming a case, and the
//! parent checks how the child ended — by SIGSEGV/SIGBUS at the bad access,
//! by SIGABRT after the guard's message, or cleanly.

#[path = "support/maps.rs"]
mod maps;
mod support;

use memplug::check::{Verdict, conformance};
use memplug::{Buffer, Handler, Instance, Registry};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};
use std::ptr::NonNull;

/// The variable that turns `child_process_entry` into a case.
const CHILD: &str = "MEMPLUG_GUARD_CHILD";
const PAGE: usize = 4096;

/// How a child must end.
#[derive(Debug, Clone, Copy)]
enum End {
    /// Exit 0 with nothing from the guard on stderr.
    Clean,
    /// Killed by SIGSEGV or SIGBUS: the access itself faulted.
    Fault,
    /// Killed by SIGABRT after printing this on stderr.
    Abort(&'static str),
}

/// Every child case: its name, the guard's options, how it must end.
const CASES: &[(&str, &str, End)] = &[
    ("correct-use", "abort_on_error=1", End::Clean),
    ("correct-use", "side=start,abort_on_error=1", End::Clean),
    ("correct-use", "alignment=64,quarantine=0,abort_on_error=1", End::Clean),
    ("overrun-one-byte", "", End::Fault),
    ("overrun-one-byte", "alignment=64", End::Fault),
    ("overrun-in-slack", "abort_on_error=1", End::Abort("heap overrun: 1 byte after the end")),
    ("underrun-one-byte", "side=start", End::Fault),
    ("underrun-in-slack", "abort_on_error=1", End::Abort("heap underrun: 1 byte before the start")),
    ("use-after-free", "", End::Fault),
    ("use-after-free", "side=start", End::Fault),
    ("use-after-realloc", "", End::Fault),
    ("double-free", "", End::Abort("ERROR: memplug guard: double-free on address")),
    ("foreign-free", "", End::Abort("ERROR: memplug guard: invalid-free on address")),
    ("interior-free", "", End::Abort("is located 8 bytes inside the 100-byte block")),
    ("size-mismatch", "abort_on_error=1", End::Abort("size mismatch: free of")),
    ("free-after-quarantine", "quarantine=64k", End::Abort("ERROR: memplug guard: invalid-free on address")),
    // Sampling: what is guarded faults and is checked as without it; what
    // is not (every slot live, or not picked) is the system allocator's.
    ("correct-use", "sample=1,slots=8,abort_on_error=1", End::Clean),
    ("correct-use", "sample=3,abort_on_error=1", End::Clean),
    ("overrun-one-byte", "sample=1", End::Fault),
    ("underrun-one-byte", "sample=1,side=start", End::Fault),
    ("use-after-free", "sample=1", End::Fault),
    ("use-after-realloc", "sample=1", End::Fault),
    ("double-free", "sample=1", End::Abort("ERROR: memplug guard: double-free on address")),
    ("overrun-in-slack", "sample=1,abort_on_error=1", End::Abort("heap overrun: 1 byte after the end")),
];

/// Run one case in a child process.
fn run_child(case: &str, options: &str) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_process_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{case}:{options}"))
        .output()
        .unwrap()
}

#[test]
fn guard_child_processes_end_as_expected() {
    for &(case, options, end) in CASES {
        let out = run_child(case, options);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("case {case} with options {options:?}: {:?}\nstderr:\n{stderr}", out.status);
        match end {
            End::Clean => {
                assert!(out.status.success(), "{what}");
                assert!(!stderr.contains("memplug guard"), "correct use made the guard speak: {what}");
            }
            End::Fault => {
                let signal = out.status.signal();
                assert!(signal == Some(libc::SIGSEGV) || signal == Some(libc::SIGBUS), "expected a fault: {what}");
            }
            End::Abort(message) => {
                assert_eq!(out.status.signal(), Some(libc::SIGABRT), "expected an abort: {what}");
                assert!(stderr.contains(message), "expected {message:?}: {what}");
                // A bad free aborts as glibc does; other findings only with
                // abort_on_error=1, which says so.
                if !message.contains("-free on address") && !message.contains("inside the") {
                    assert!(stderr.contains("memplug guard: aborting (abort_on_error=1)"), "{what}");
                }
            }
        }
    }
}

/// The child side: nothing unless `MEMPLUG_GUARD_CHILD` is set.
#[test]
fn child_process_entry() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let (case, options) = spec.split_once(':').unwrap();
    let (_instance, h) = guard(options);
    match case {
        "correct-use" => correct_use(h),
        "overrun-one-byte" => {
            let p = h.alloc(64).unwrap();
            // SAFETY: deliberately out of bounds by one byte: the guard page
            // after the block must stop this write.
            unsafe { p.as_ptr().add(64).write_volatile(1) };
        }
        "overrun-in-slack" => {
            let p = h.alloc(13).unwrap();
            // SAFETY: deliberately one byte past a 13-byte block, into the
            // slack up to the 16-byte boundary; the free must notice.
            unsafe { p.as_ptr().add(13).write_volatile(1) };
            // SAFETY: `p` is the guard's block of 13 bytes.
            unsafe { h.free(p, 13) };
        }
        "underrun-one-byte" => {
            let p = h.alloc(64).unwrap();
            // SAFETY: deliberately one byte before the block: the guard page
            // in front of it (side=start) must stop this write.
            unsafe { p.as_ptr().sub(1).write_volatile(1) };
        }
        "underrun-in-slack" => {
            let p = h.alloc(100).unwrap();
            // SAFETY: deliberately one byte before the block, into the slack
            // of its page; the free must notice.
            unsafe { p.as_ptr().sub(1).write_volatile(1) };
            // SAFETY: `p` is the guard's block of 100 bytes.
            unsafe { h.free(p, 100) };
        }
        "use-after-free" => {
            let p = h.alloc(100).unwrap();
            // SAFETY: `p` is the guard's block of 100 bytes.
            unsafe { h.free(p, 100) };
            // SAFETY: deliberately a use after free: the quarantined pages
            // must stop this read.
            let _ = unsafe { p.as_ptr().read_volatile() };
        }
        "use-after-realloc" => {
            let p = h.alloc(100).unwrap();
            // SAFETY: `p` is the guard's block of 100 bytes.
            let q = unsafe { h.realloc(p, 100, 200) }.unwrap();
            assert_ne!(p, q, "the guard always moves a block on realloc");
            // SAFETY: deliberately a read through the stale pointer.
            let _ = unsafe { p.as_ptr().read_volatile() };
        }
        "double-free" => {
            let p = h.alloc(100).unwrap();
            // SAFETY: deliberately freed twice; the guard must refuse the second.
            unsafe { h.free(p, 100) };
            // SAFETY: as above.
            unsafe { h.free(p, 100) };
        }
        "foreign-free" => {
            let mut theirs = Box::new([0u8; 32]);
            // SAFETY: deliberately a pointer the guard did not make; it must
            // refuse without touching it.
            unsafe { h.free(NonNull::from(&mut theirs[0]), 32) };
        }
        "interior-free" => {
            let p = h.alloc(100).unwrap();
            // SAFETY: deliberately a pointer into the middle of a block.
            unsafe { h.free(NonNull::new(p.as_ptr().wrapping_add(8)).unwrap(), 92) };
        }
        "size-mismatch" => {
            let p = h.alloc(100).unwrap();
            // SAFETY: the guard's block, deliberately freed with a wrong size.
            unsafe { h.free(p, 99) };
        }
        "free-after-quarantine" => {
            let first = h.alloc(100).unwrap();
            // SAFETY: `first` is the guard's block of 100 bytes.
            unsafe { h.free(first, 100) };
            let rest: Vec<_> = (0..64).map(|_| h.alloc(100).unwrap()).collect();
            for p in rest {
                // SAFETY: each is the guard's block of 100 bytes, freed once.
                unsafe { h.free(p, 100) };
            }
            // SAFETY: deliberately a second free, after 64 other blocks
            // pushed the first out of a 64 KiB quarantine.
            unsafe { h.free(first, 100) };
        }
        other => panic!("unknown child case {other}"),
    }
    if !matches!(case, "correct-use") {
        // The bad access above should not have returned.
        std::process::exit(3);
    }
}

/// A guard instance with `options`, and its handler.
fn guard(options: &str) -> (Instance, Handler) {
    let base = Registry::new().load_path(support::plugin("guard")).unwrap();
    assert_eq!(base.name(), "guard");
    let instance = base.instantiate(options).unwrap();
    let h = instance.handler();
    (instance, h)
}

/// Every byte of many blocks written and read, resized, aligned, zeroed,
/// freed: nothing may fault and nothing may be reported.
fn correct_use(h: Handler) {
    let mut bufs = Vec::new();
    for size in [1usize, 7, 13, 16, 64, 100, 4095, 4096, 4097, 65_536, 1 << 20] {
        let mut b = Buffer::with_capacity_in(size, h).unwrap();
        b.resize(size, 0x11).unwrap();
        b.iter_mut().for_each(|x| *x = size as u8);
        bufs.push(b);
        let z = Buffer::zeroed_in(size, h).unwrap();
        assert!(z.iter().all(|&x| x == 0));
        let a = Buffer::with_capacity_aligned_in(size, 4096, h).unwrap();
        assert_eq!(a.as_ptr() as usize % 4096, 0);
    }
    for b in &mut bufs {
        let n = b.len();
        b.resize(n * 3 + 1, 0x22).unwrap(); // realloc
        assert!(b[..n].iter().all(|&x| x == n as u8));
        b.truncate(n / 2);
        b.shrink_to_fit().unwrap();
    }
    let s = h.stats().unwrap();
    assert_eq!((s.bad_frees, s.size_mismatches), (0, 0));
}

#[test]
fn guard_blocks_touch_their_guard_page() {
    let (_i, end) = guard("");
    let (_j, start) = guard("side=start");
    for size in [1usize, 13, 16, 64, 100, 4096, 100_000] {
        let p = end.alloc(size).unwrap().as_ptr() as usize;
        let edge = p + size.next_multiple_of(16);
        assert_eq!(edge % PAGE, 0, "side=end: a {size}-byte block ends on a page boundary (rounded to 16)");
        let (inside, after) = (maps::containing(p).unwrap(), maps::containing(edge).unwrap());
        assert!(inside.perms.starts_with("rw"), "{inside:?}");
        assert!(after.is_inaccessible(), "the page after a {size}-byte block is a guard: {after:?}");

        let q = start.alloc(size).unwrap().as_ptr() as usize;
        assert_eq!(q % PAGE, 0, "side=start: the block starts on a page");
        assert!(maps::containing(q - 1).unwrap().is_inaccessible(), "the page before is a guard");
        // SAFETY: each block came from its handler with this size.
        unsafe {
            end.free(NonNull::new(p as *mut u8).unwrap(), size);
            start.free(NonNull::new(q as *mut u8).unwrap(), size);
        }
        assert!(maps::containing(p).unwrap().is_inaccessible(), "a freed block's pages are quarantined");
    }
    let p = end.alloc_aligned(100, 8192).unwrap();
    assert_eq!(p.as_ptr() as usize % 8192, 0);
    // Rounded up to its alignment, the block ends on the guard page.
    assert!(maps::containing(p.as_ptr() as usize + 8192).unwrap().is_inaccessible());
    // SAFETY: the block came from `alloc_aligned(100, 8192)`.
    unsafe { end.free_aligned(p, 100, 8192) };
}

#[test]
fn guard_counts_bad_frees_and_size_mismatches_and_carries_on_with_recover() {
    let (_instance, h) = guard("recover=1");
    let a = h.alloc(100).unwrap();
    let b = h.alloc(200).unwrap();
    // SAFETY: `a` is freed once correctly; the other three calls are
    // deliberately wrong, and the guard must detect them from its tables
    // without touching the memory they name.
    unsafe {
        h.free(a, 100);
        h.free(a, 100); // double
        h.free(NonNull::new(b.as_ptr().wrapping_add(16)).unwrap(), 184); // interior
        h.free(NonNull::new(0x1000 as *mut u8).unwrap(), 8); // never made
    }
    let s = h.stats().unwrap();
    assert_eq!((s.bad_frees, s.size_mismatches, s.live_count, s.live_bytes), (3, 0, 1, 200));
    // SAFETY: `b` is live with 200 bytes; freed with a wrong size on purpose.
    unsafe { h.free(b, 150) };
    let s = h.stats().unwrap();
    assert_eq!((s.bad_frees, s.size_mismatches, s.live_count, s.live_bytes), (3, 1, 0, 0));
    assert_eq!((s.total_allocations, s.peak_bytes), (2, 300));
}

#[test]
fn guard_passes_the_conformance_pass() {
    for options in
        ["", "side=start", "alignment=64,junk=0", "quarantine=0", "sample=1000", "sample=2,slots=16,alignment=64"]
    {
        let (_i, h) = guard(options);
        assert!(h.is_thread_safe());
        let results = conformance(h);
        let bad: Vec<_> = results.iter().filter(|r| r.verdict != Verdict::Passed).collect();
        assert!(bad.is_empty(), "options {options:?}: {bad:?}");
    }
}

#[test]
fn guard_refuses_bad_options_with_the_reason() {
    let base = Registry::new().load_path(support::plugin("guard")).unwrap();
    for (options, says) in [("side=left", "side=end"), ("quarantine=much", "not a size"), ("fence=1", "knows side")] {
        let e = base.instantiate(options).unwrap_err();
        assert_eq!(e.code(), "bad-options");
        assert!(e.to_string().contains(says), "{options}: {e}");
    }
}

#[test]
fn memplug_check_lists_guard_ok() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(support::plugin("guard"), dir.path().join("libmemplug_guard.so")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env_remove("MEMPLUG_PLUGIN_PATH")
        .env_remove("RUST_LOG")
        .args(["check", "--json", "--options", "guard:side=start,abort_on_error=1"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2, "the handler and its instance: {v}");
    for o in rows {
        assert_eq!(o["name"], "guard");
        assert_eq!(o["status"], "ok", "{o}");
        assert_eq!(o["thread_safe"], true);
        assert_eq!(o["takes_options"], true);
        assert_eq!(o["aligned_alloc"], "plugin");
        assert_eq!(o["checks"]["failed"], 0, "{o}");
        assert_eq!(o["checks"]["skipped"], 0, "the guard has statistics: {o}");
    }
    assert!(!String::from_utf8_lossy(&out.stderr).contains("memplug guard"), "the check pass made no error");
}
