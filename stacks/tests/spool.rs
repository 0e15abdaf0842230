//! A spool written by many threads and a forked child reads back whole.

use memplug_stacks::format::{self, NOT_FREED, Origin, Record, SPOOL_INFIX, SampleOut};
use memplug_stacks::raw::spool;
use std::ffi::CString;

const THREADS: u64 = 4;
const EACH: u64 = 3000;
const CHILD: u64 = 500;

/// Append sample `n` (its stack says which it is, so a torn record shows).
fn put(origin: Origin, n: u64) {
    let frames: Vec<usize> = (0..(n % 17) as usize).map(|i| n as usize * 100 + i).collect();
    let s = SampleOut { bytes: n, rate: 512, allocated: n, freed: NOT_FREED, inherited: false, stack: &frames };
    let mut buf = [0u8; 512];
    let r = format::sample(&mut buf, origin, &s).unwrap();
    assert!(spool::append(r), "record {n} was refused");
}

#[test]
fn threads_and_a_forked_child_append_to_one_spool() {
    let dir = std::env::temp_dir().join(format!("memplug-spool-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace");
    let origin = Origin { pid: std::process::id(), nonce: 0xabc };
    assert!(spool::beside(&CString::new(trace.to_str().unwrap()).unwrap(), origin));
    // The first record makes the spool (one meanwhile would be refused).
    put(origin, 0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || (1..=EACH).for_each(|i| put(origin, t * EACH + i)));
        }
    });
    // SAFETY: the child only appends (no allocation) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let child = Origin { pid: 0, nonce: 0xabc };
        (0..CHILD).for_each(|i| put(child, 1_000_000 + i));
        // SAFETY: ends the child without running the parent's handlers.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert_eq!(status, 0);

    let spools: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(spools.len(), 1, "one spool, the child's records in it: {spools:?}");
    let name = &spools[0];
    assert!(name.to_str().unwrap().ends_with(&format!("{SPOOL_INFIX}{}.abc", std::process::id())), "{name:?}");
    let bytes = std::fs::read(name).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let mut records = format::spooled(&bytes).unwrap();
    let mut seen: Vec<u64> = Vec::new();
    for r in records.by_ref() {
        let Record::Sample { bytes, allocated, stack, origin: o, .. } = r else { panic!("{r:?}") };
        assert_eq!(bytes, allocated);
        let want: Vec<u64> = (0..allocated % 17).map(|i| allocated * 100 + i).collect();
        assert_eq!(stack.iter().collect::<Vec<_>>(), want, "record {allocated} is whole");
        assert_eq!(o.pid == 0, allocated >= 1_000_000);
        seen.push(allocated);
    }
    assert_eq!(records.skipped(), 0);
    seen.sort_unstable();
    let want: Vec<u64> = (0..=THREADS * EACH).chain(1_000_000..1_000_000 + CHILD).collect();
    assert_eq!(seen, want);
}
