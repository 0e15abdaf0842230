//! Stateful plugins under 8 threads through the host: random allocations,
//! zeroed allocations, reallocations, pattern writes and checks, frees on
//! the allocating thread and on other threads, batches under a held guard.
//! No pattern may be corrupted, and the plugin's own statistics must come
//! back to zero live bytes and blocks, with no bad free and no wrongly sized
//! free. Run on two plugins ([`PLUGINS`]): the `arena` (not thread-safe: the
//! host serialises every call) and the `guard` (thread-safe: calls run
//! concurrently inside it, and every block is a mapping of its own).
//!
//! `MEMPLUG_STRESS_OPS` sets the operations per thread (default 10 000; the
//! guard does a quarter of them, each of its blocks costing system calls);
//! `scripts/valgrind-stress.sh` runs this file under valgrind.

mod support;
#[path = "support/threads.rs"]
mod threads;

use memplug::{Buffer, Handler, Registry};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use threads::{Rng, Watchdog};

const THREADS: usize = 8;
/// Live blocks a thread keeps at most.
const MAX_LIVE: usize = 48;

fn ops_per_thread() -> usize {
    std::env::var("MEMPLUG_STRESS_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000)
}

/// The stressed plugins: name, whether it declares itself thread-safe, and
/// the share of `ops_per_thread` it runs (in quarters).
const PLUGINS: [(&str, bool, usize); 2] = [("arena", false, 4), ("guard", true, 1)];

/// The plugin `name` from a private copy of its library, so that its
/// statistics are this test's alone.
fn private_plugin(dir: &tempfile::TempDir, name: &str, thread_safe: bool) -> Handler {
    let path = threads::private_copy(name, dir.path(), &format!("libmemplug_{name}.so"));
    let h = Registry::new().load_path(path).unwrap();
    assert_eq!(h.name(), name);
    assert_eq!(h.is_thread_safe(), thread_safe, "{name} declares itself thread-safe or not");
    h
}

fn private_arena(dir: &tempfile::TempDir) -> Handler {
    private_plugin(dir, "arena", false)
}

/// The byte at `i` of a block written with `seed`.
fn pattern(seed: u64, i: usize) -> u8 {
    (seed as usize).wrapping_mul(131).wrapping_add(i.wrapping_mul(7)).wrapping_add(i >> 8) as u8
}

fn fill(bytes: &mut [u8], seed: u64) {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = pattern(seed, i);
    }
}

#[track_caller]
fn verify(bytes: &[u8], seed: u64, what: &str) {
    if let Some(i) = (0..bytes.len()).find(|&i| bytes[i] != pattern(seed, i)) {
        panic!(
            "{what}: byte {i} of {} is {:#04x}, expected {:#04x} (seed {seed})",
            bytes.len(),
            bytes[i],
            pattern(seed, i)
        );
    }
}

/// A size: mostly small (the arena's size classes), some medium, a few
/// large (straight from libc), so that reallocations cross every boundary.
fn random_size(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=69 => rng.below(300),
        70..=94 => 300 + rng.below(4000),
        _ => 4097 + rng.below(60_000),
    }
}

/// A live buffer and the seed its bytes were written with.
struct Live {
    buf: Buffer,
    seed: u64,
}

/// One thread's work; returns how many allocations (not reallocations) it
/// made through the plugin.
fn worker(h: Handler, me: usize, ops: usize, tx: mpsc::Sender<Live>, rx: mpsc::Receiver<Live>) -> u64 {
    let mut rng = Rng::new(0xC0FFEE + me as u64);
    let mut live: Vec<Live> = Vec::new();
    let mut allocations = 0u64;
    let mut next_seed = (me as u64) << 40;
    let mut seed = || {
        next_seed += 1;
        next_seed
    };
    for op in 0..ops {
        // Adopt blocks other threads sent: they are freed, resized and
        // checked here, on a thread that did not make them.
        while let Ok(l) = rx.try_recv() {
            verify(&l.buf, l.seed, "a block received from another thread");
            live.push(l);
        }
        let full = live.len() >= MAX_LIVE;
        match rng.below(100) {
            // Allocate, then write a pattern.
            0..=21 if !full => {
                let n = random_size(&mut rng);
                let mut buf = Buffer::with_capacity_in(n, h).unwrap();
                allocations += 1;
                buf.resize(n, 0).unwrap();
                let s = seed();
                fill(&mut buf, s);
                live.push(Live { buf, seed: s });
            }
            // Zeroed allocation: all zero (even over reused blocks), then a pattern.
            22..=33 if !full => {
                let n = random_size(&mut rng);
                let mut buf = Buffer::zeroed_in(n, h).unwrap();
                allocations += 1;
                assert!(buf.iter().all(|&b| b == 0), "zeroed block of {n} bytes is not zero");
                let s = seed();
                fill(&mut buf, s);
                live.push(Live { buf, seed: s });
            }
            // Grow or shrink (realloc through the plugin), keeping the prefix.
            34..=51 if !live.is_empty() => {
                let i = rng.below(live.len());
                let l = &mut live[i];
                let old = l.buf.len();
                let new = random_size(&mut rng);
                if new > old {
                    l.buf.resize(new, 0).unwrap();
                } else {
                    l.buf.truncate(new);
                    l.buf.shrink_to_fit().unwrap();
                }
                verify(&l.buf[..old.min(new)], l.seed, "the kept prefix after a realloc");
                let s = seed();
                fill(&mut l.buf, s);
                l.seed = s;
            }
            // Verify one.
            52..=61 if !live.is_empty() => {
                let l = &live[rng.below(live.len())];
                verify(&l.buf, l.seed, "a live block");
            }
            // Free one here.
            62..=75 if !live.is_empty() => {
                let l = live.swap_remove(rng.below(live.len()));
                verify(&l.buf, l.seed, "a block before its free");
            }
            // Hand one to the next thread, which frees or resizes it later.
            76..=87 if !live.is_empty() => {
                let l = live.swap_remove(rng.below(live.len()));
                tx.send(l).unwrap();
            }
            // A batch under one held guard: raw blocks through the guard,
            // plus the per-call path of the same handler (reentrant).
            88..=93 => {
                let guard = h.lock();
                let mut raw: Vec<(NonNull<u8>, usize, u64)> = Vec::new();
                for _ in 0..1 + rng.below(12) {
                    let n = 1 + rng.below(600);
                    let p = if rng.chance(30) { guard.alloc_zeroed(n, 1).unwrap() } else { guard.alloc(n).unwrap() };
                    allocations += 1;
                    // SAFETY: `p` is a fresh block of `n` bytes, ours alone.
                    let bytes = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), n) };
                    let s = seed();
                    fill(bytes, s);
                    raw.push((p, n, s));
                }
                if let Some(l) = (!live.is_empty()).then(|| live.swap_remove(rng.below(live.len()))) {
                    // Dropping a buffer of the same handler under its guard:
                    // the per-call free takes the (reentrant) lock again.
                    verify(&l.buf, l.seed, "a block freed under a guard");
                    drop(l);
                }
                let (p, n, s) = raw.swap_remove(rng.below(raw.len()));
                let m = 1 + rng.below(9000);
                // SAFETY: `p` is a live block of `n` bytes from this handler.
                let q = unsafe { guard.realloc(p, n, m) }.unwrap();
                // SAFETY: `q` holds `m` bytes; the first `min(n, m)` were kept.
                let bytes = unsafe { std::slice::from_raw_parts_mut(q.as_ptr(), m) };
                verify(&bytes[..n.min(m)], s, "the kept prefix after a guard realloc");
                fill(bytes, s);
                raw.push((q, m, s));
                for (p, n, s) in raw {
                    // SAFETY: each block is live, `n` bytes, written above.
                    verify(unsafe { std::slice::from_raw_parts(p.as_ptr(), n) }, s, "a block made under a guard");
                    // SAFETY: a live block of this handler with its size.
                    unsafe { guard.free(p, n) };
                }
            }
            _ => {}
        }
        if op % 512 == 0 {
            std::thread::yield_now();
        }
    }
    // Stop sending, then take what is still in flight to us until the
    // previous thread has stopped sending too.
    drop(tx);
    for l in rx {
        verify(&l.buf, l.seed, "a block received at the end");
    }
    for l in live {
        verify(&l.buf, l.seed, "a block freed at the end");
    }
    allocations
}

#[test]
fn thread_stress_arena_8_threads_random_mixed_operations() {
    let _watchdog = Watchdog::arm("thread_stress_arena_8_threads_random_mixed_operations", threads::watchdog_secs(300));
    stress(PLUGINS[0]);
}

#[test]
fn thread_stress_guard_8_threads_random_mixed_operations() {
    let _watchdog = Watchdog::arm("thread_stress_guard_8_threads_random_mixed_operations", threads::watchdog_secs(300));
    stress(PLUGINS[1]);
}

/// 8 threads of [`worker`] on a private copy of one plugin, then its
/// statistics checked.
fn stress((name, thread_safe, quarters): (&str, bool, usize)) {
    let dir = tempfile::tempdir().unwrap();
    let h = private_plugin(&dir, name, thread_safe);
    let before = h.stats().expect("the plugin reports statistics");
    assert_eq!((before.live_bytes, before.live_count, before.total_allocations), (0, 0, 0));

    let ops = (ops_per_thread() * quarters / 4).max(1);
    let total = AtomicU64::new(0);
    // A ring of channels: thread `me` receives on channel `me` and sends on
    // channel `me + 1`.
    let (mut txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel::<Live>()).unzip();
    txs.rotate_left(1);
    std::thread::scope(|s| {
        for (me, (to_next, from_prev)) in txs.into_iter().zip(rxs).enumerate() {
            let total = &total;
            s.spawn(move || {
                let n = worker(h, me, ops, to_next, from_prev);
                total.fetch_add(n, Ordering::Relaxed);
            });
        }
    });

    let after = h.stats().unwrap();
    assert_eq!(after.bad_frees, 0, "{name} saw no pointer it did not make");
    assert_eq!(after.size_mismatches, 0, "every free and realloc carried the right size");
    assert_eq!(after.live_bytes, 0, "every byte came back: {after:?}");
    assert_eq!(after.live_count, 0, "every block came back: {after:?}");
    assert_eq!(
        after.total_allocations,
        total.load(Ordering::Relaxed),
        "{name} counted exactly the allocations the threads made"
    );
    assert!(after.peak_bytes > 0);
}

#[test]
fn thread_buffers_made_on_one_thread_are_freed_and_resized_on_others() {
    let _watchdog = Watchdog::arm("thread_buffers_made_on_one_thread", threads::watchdog_secs(120));
    for (name, thread_safe, _) in PLUGINS {
        made_here_freed_there(name, thread_safe);
    }
}

fn made_here_freed_there(name: &str, thread_safe: bool) {
    let dir = tempfile::tempdir().unwrap();
    let h = private_plugin(&dir, name, thread_safe);
    let bufs: Vec<Buffer> = (0..64)
        .map(|i| {
            let mut b = Buffer::with_capacity_in(10 + i * 37, h).unwrap();
            b.resize(10 + i * 37, i as u8).unwrap();
            b
        })
        .collect();
    let mut chunks: Vec<Vec<Buffer>> = (0..4).map(|_| Vec::new()).collect();
    for (i, b) in bufs.into_iter().enumerate() {
        chunks[i % 4].push(b);
    }
    std::thread::scope(|s| {
        for chunk in chunks {
            s.spawn(move || {
                for mut b in chunk {
                    let fill = b[0];
                    assert!(b.iter().all(|&x| x == fill));
                    b.resize(b.len() * 3 + 5000, fill).unwrap(); // realloc here
                    assert!(b.iter().all(|&x| x == fill));
                } // and freed here
            });
        }
    });
    let s = h.stats().unwrap();
    assert_eq!((s.live_bytes, s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0, 0));
    assert_eq!(s.total_allocations, 64);
}

#[test]
fn thread_arena_passes_the_conformance_pass_and_checks_as_not_thread_safe() {
    let dir = tempfile::tempdir().unwrap();
    let arena = private_arena(&dir);
    let results = memplug::check::conformance(arena);
    // `threads` is for thread-safe handlers only.
    let failed: Vec<_> =
        results.iter().filter(|r| r.verdict != memplug::check::Verdict::Passed && r.name != "threads").collect();
    assert!(failed.is_empty(), "{failed:?}");
    let threads = results.iter().find(|r| r.name == "threads").unwrap();
    assert_eq!(threads.verdict, memplug::check::Verdict::Skipped, "{threads:?}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memplug"))
        .env_remove("MEMPLUG_PLUGIN_PATH")
        .env_remove("RUST_LOG")
        .args(["check", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let o = &v.as_array().unwrap()[0];
    assert_eq!(o["name"], "arena");
    assert_eq!(o["status"], "ok");
    assert_eq!(o["thread_safe"], false);
    assert_eq!(o["checks"]["failed"], 0);
    // Only `threads` and `fork` are skipped (the host serialises its calls and
    // holds its lock across a fork): the arena has statistics, so free-size
    // runs.
    assert_eq!(o["checks"]["skipped"], 2, "{o}");
    let skipped: Vec<&str> = o["checks"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] == "skipped")
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(skipped, ["threads", "fork"], "{o}");
}
