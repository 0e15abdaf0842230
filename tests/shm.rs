//! Memory shared between real processes through the `shm` plugin: the test
//! executable runs itself, filtered to `child_process_entry` with
//! `MEMPLUG_SHM_TEST_CHILD` naming a case, and parent and children talk
//! over pipes (handles as JSON lines).
//!
//! - a block allocated and written in one process is changed by another,
//!   and the first sees the change (from a named segment and from the
//!   plugin's own per-process one);
//! - several processes (with several threads each) allocate and free in one
//!   segment at once, patterns verified; blocks one made are freed by
//!   another; the segment's statistics add up;
//! - a process killed (SIGKILL) while holding the segment's lock does not
//!   wedge the others: the next one repairs, says so, and counts it;
//! - an instance that is gone is never called again (statistics, sharing).
//!
//! Every test's segment has a unique name and is removed at the end.

#[path = "support/shm.rs"]
mod shared;
mod support;
#[path = "support/threads.rs"]
mod threads;

use memplug::{Handler, Ownership, Registry, SharedBlock};
use shared::{CHILD, NAME, TestSegment, fill, hear, holds, lines, say, send, spawn};
use std::io::{BufRead, BufReader};
use std::ptr::NonNull;
use threads::{Rng, Watchdog};

/// The `shm` handler, loaded in a registry of its own.
fn shm() -> (Registry, Handler) {
    let registry = Registry::new();
    let h = registry.load_path(support::plugin("shm")).unwrap();
    (registry, h)
}

#[test]
fn a_block_written_in_one_process_is_changed_by_another() {
    let _watchdog = Watchdog::arm("a_block_written_in_one_process_is_changed_by_another", 120);
    let seg = TestSegment::new("modify");
    let (_registry, h) = shm();
    let named = h.instantiate(&seg.options("size=4m,create=1,unlink=1")).unwrap();
    // From a named segment, and from the plugin's own (this process's).
    for (what, handler) in [("named", named.handler()), ("own", h)] {
        let len = (1 << 20) + 3;
        let mut buf = memplug::Buffer::with_capacity_in(len, handler).unwrap();
        buf.resize(len, 0).unwrap();
        fill(&mut buf, 1);
        let block = buf.share().unwrap();
        assert_eq!(block.length, len as u64);
        let mut child = spawn("modify", &[], false);
        send(&mut child, &serde_json::to_string(&block).unwrap());
        let said = lines(child.stdout.take().unwrap());
        assert!(child.wait().unwrap().success(), "{what}: the child failed");
        assert_eq!(said, ["changed"], "{what}");
        assert!(holds(&buf, 2), "{what}: the child's writes are seen here");
    }
    assert_eq!(named.handler().stats().unwrap().live_count, 0);
}

#[test]
fn processes_allocate_and_free_in_one_segment_at_once() {
    let _watchdog = Watchdog::arm("processes_allocate_and_free_in_one_segment_at_once", 300);
    let seg = TestSegment::new("stress");
    let (_registry, h) = shm();
    let owner = h.instantiate(&seg.options("size=32m,create=1,unlink=1")).unwrap();
    let mine = owner.handler();
    let children: Vec<_> = (0..3).map(|_| spawn("stress", &[(NAME, &seg.name)], false)).collect();
    // This process works too, with two threads, while the children do.
    let here: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2).map(|t| s.spawn(move || stress(mine, 1000 + t, 3000))).collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let mut allocations = here;
    let mut gifts = Vec::new();
    for mut child in children {
        for line in lines(child.stdout.take().unwrap()) {
            match line.split_once(' ') {
                Some(("count", n)) => allocations += n.parse::<u64>().unwrap(),
                Some(("gift", json)) => gifts.push(serde_json::from_str::<SharedBlock>(json).unwrap()),
                _ => panic!("unexpected line {line:?}"),
            }
        }
        assert!(child.wait().unwrap().success(), "a stress child failed (its stderr says why)");
    }
    // Blocks the children made (and left live) are freed here.
    assert_eq!(gifts.len(), 3 * 8);
    assert_eq!(mine.stats().unwrap().live_count, gifts.len() as u64);
    for (i, gift) in gifts.iter().enumerate() {
        // SAFETY: the child that made the block has exited; nothing else
        // uses it; it is freed below, after the last read.
        let b = unsafe { mine.attach(gift) }.unwrap();
        assert!(holds(&b, 7 + (i % 8) as u64), "gift {i}");
        let p = NonNull::new(b.as_ptr() as *mut u8).unwrap();
        drop(b);
        // SAFETY: `p` is a live block of the segment of `len` bytes, mapped
        // by this instance; no one uses it any more.
        unsafe { mine.free(p, gift.length as usize) };
    }
    let stats = mine.stats().unwrap();
    assert_eq!((stats.live_count, stats.live_bytes), (0, 0), "every block came back");
    assert_eq!((stats.bad_frees, stats.size_mismatches), (0, 0));
    assert_eq!(stats.total_allocations, allocations + gifts.len() as u64, "counted across processes");
}

/// Allocate, fill, verify and free at random in `h` (`ops` steps), some
/// blocks grown by `realloc`. The number of allocations.
fn stress(h: Handler, seed: u64, ops: usize) -> u64 {
    let mut rng = Rng::new(seed);
    let mut live: Vec<(NonNull<u8>, usize, u64)> = Vec::new();
    let mut count = 0;
    for i in 0..ops as u64 {
        if live.len() < 64 && rng.chance(55) {
            let most = if rng.chance(5) { 200_000 } else { 4000 };
            let len = 1 + rng.below(most);
            let p = h.alloc(len).unwrap();
            count += 1;
            // SAFETY: a fresh block of `len` bytes, this thread's alone.
            fill(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), len) }, seed ^ i);
            live.push((p, len, seed ^ i));
        } else if !live.is_empty() {
            let (p, len, tag) = live.swap_remove(rng.below(live.len()));
            // SAFETY: a live block of `len` bytes this thread filled.
            assert!(holds(unsafe { std::slice::from_raw_parts(p.as_ptr(), len) }, tag), "block {p:?} changed");
            if rng.chance(20) {
                let new = len + 1 + rng.below(3000);
                // SAFETY: `p` is `h`'s block of `len` bytes; replaced by `q`.
                let q = unsafe { h.realloc(p, len, new) }.unwrap();
                // SAFETY: `q` holds the first `len` bytes of the old block.
                assert!(holds(unsafe { std::slice::from_raw_parts(q.as_ptr(), len) }, tag), "realloc kept it");
                // SAFETY: `q` is `h`'s block of `new` bytes, not used again.
                unsafe { h.free(q, new) };
            } else {
                // SAFETY: `p` is `h`'s block of `len` bytes, not used again.
                unsafe { h.free(p, len) };
            }
        }
    }
    for (p, len, tag) in live {
        // SAFETY: as above.
        assert!(holds(unsafe { std::slice::from_raw_parts(p.as_ptr(), len) }, tag));
        // SAFETY: as above.
        unsafe { h.free(p, len) };
    }
    count
}

#[test]
fn a_process_killed_holding_the_lock_does_not_wedge_the_others() {
    let _watchdog = Watchdog::arm("a_process_killed_holding_the_lock_does_not_wedge_the_others", 120);
    let seg = TestSegment::new("killed");
    let (_registry, h) = shm();
    let owner = h.instantiate(&seg.options("size=4m,create=1,unlink=1")).unwrap();
    let keep = owner.handler().alloc(100).unwrap();
    let mut victim = spawn("hold", &[(NAME, &seg.name), (memplug_shm::HOLD_ENV, "60000")], true);
    let mut stderr = BufReader::new(victim.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("holding the lock") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the child ended before it took the lock");
    }
    let victim_pid = victim.id();
    victim.kill().unwrap(); // SIGKILL, lock held
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&victim.wait().unwrap()), Some(libc::SIGKILL));

    let survivor = spawn("survivor", &[(NAME, &seg.name)], true).wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&survivor.stderr);
    assert!(survivor.status.success(), "{said}");
    assert!(said.contains(&format!("process {victim_pid} died holding its lock")), "{said}");
    assert!(said.contains("released the") && said.contains("block it was allocating"), "{said}");
    assert!(said.contains("recovery 1 of this segment"), "{said}");
    // This process carries on too, and the statistics say what happened.
    let p = owner.handler().alloc(1000).unwrap();
    let stats = memplug_shm::Shm::from_options(&seg.options("create=0")).unwrap().stats();
    assert_eq!((stats.recoveries, stats.live_count), (1, 2), "{stats:?}");
    // SAFETY: both are the owner's live blocks of these sizes.
    unsafe {
        owner.handler().free(p, 1000);
        owner.handler().free(keep, 100);
    }
    assert_eq!(owner.handler().stats().unwrap().live_count, 0);
}

#[test]
fn a_destroyed_instance_reports_no_statistics_and_shares_nothing() {
    let seg = TestSegment::new("gone");
    let (_registry, h) = shm();
    let inst = h.instantiate(&seg.options("size=1m,create=1,unlink=1")).unwrap();
    let ih = inst.handler();
    let b = memplug::Buffer::zeroed_in(64, ih).unwrap();
    let addr = b.as_ptr();
    drop(inst);
    assert_eq!(ih.stats().unwrap().live_count, 1, "its last block keeps the instance");
    drop(b);
    assert!(!seg.file().exists(), "the instance went with its last block (unlink=1)");
    // Its plugin state is destroyed: nothing may reach it any more.
    assert_eq!(ih.stats(), None);
    assert_eq!(ih.share(addr, 64).unwrap_err().code(), "instance-gone");
    assert_eq!(ih.alloc(8).unwrap_err().code(), "instance-gone");
}

/// The child side: nothing unless `MEMPLUG_SHM_TEST_CHILD` is set.
#[test]
fn child_process_entry() {
    let Ok(case) = std::env::var(CHILD) else { return };
    let (registry, h) = shm();
    let name = std::env::var(NAME).unwrap_or_default();
    match case.as_str() {
        "modify" => {
            let block: SharedBlock = serde_json::from_str(&hear()).unwrap();
            // SAFETY: the parent waits for this process to end before it
            // touches the block again.
            let mut b = unsafe { registry.attach(&block) }.unwrap();
            assert_eq!((b.len() as u64, b.ownership()), (block.length, Ownership::Base));
            assert!(holds(&b, 1), "the parent's bytes are here");
            fill(&mut b, 2);
            say("changed");
        }
        "stress" => {
            let inst = h.instantiate(&format!("name={name},create=0")).unwrap();
            let mine = inst.handler();
            let seed = u64::from(std::process::id()) << 8;
            let count: u64 = std::thread::scope(|s| {
                let workers: Vec<_> = (0..2).map(|t| s.spawn(move || stress(mine, seed + t, 3000))).collect();
                workers.into_iter().map(|w| w.join().unwrap()).sum()
            });
            say(&format!("count {count}"));
            for i in 0..8u64 {
                let len = 100 + 1000 * i as usize;
                let mut b = memplug::Buffer::with_capacity_in(len, mine).unwrap();
                b.resize(len, 0).unwrap();
                fill(&mut b, 7 + i);
                say(&format!("gift {}", serde_json::to_string(&b.share().unwrap()).unwrap()));
                // Left allocated for the parent to free.
                let _ = b.into_raw_parts().unwrap();
            }
        }
        "hold" => {
            let inst = h.instantiate(&format!("name={name},create=0")).unwrap();
            // Blocks, lock held, until the parent kills this process.
            let _ = inst.handler().alloc(64);
            unreachable!("the hold hook sleeps for a minute");
        }
        "survivor" => {
            let inst = h.instantiate(&format!("name={name},create=0")).unwrap();
            let n = stress(inst.handler(), 99, 500);
            assert!(n > 0);
        }
        other => panic!("unknown child case {other}"),
    }
}
