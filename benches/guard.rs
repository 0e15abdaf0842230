//! What the bundled `guard` plugin (a debugging allocator) costs against the
//! `system` plugin (libc), side by side in one run (interleaved rounds, see
//! `benches/common`):
//!
//! - `pair64`: one 64-byte allocation and its free;
//! - `batch`: 1000 allocations of mixed sizes (16 B to 4 KiB) held live,
//!   each written once, then freed in another order — per allocation+free;
//!
//! and what it costs in memory: resident memory, address space and mappings
//! per live 64-byte block, read from `/proc/self/status` and
//! `/proc/self/maps` around 10 000 live blocks of each.
//!
//! Run: `cargo bench --bench guard` (`ROUNDS=n`, default 60).

mod common;

use common::variant;
use memplug::{Handler, Registry};
use std::hint::black_box;
use std::ptr::NonNull;

const BATCH: usize = 1000;
const LIVE: usize = 10_000;

fn pair64(h: Handler, iters: usize) -> usize {
    for _ in 0..iters {
        let p = h.alloc(black_box(64)).expect("alloc");
        // SAFETY: `p` came from `h` with 64 bytes, freed once.
        unsafe { h.free(black_box(p), 64) };
    }
    iters
}

fn batch(h: Handler, sizes: &[usize], order: &[usize], live: &mut Vec<(NonNull<u8>, usize)>) -> usize {
    live.clear();
    for &s in sizes {
        let p = h.alloc(s).expect("alloc");
        // SAFETY: `p` has at least `s >= 16` writable bytes.
        unsafe { p.as_ptr().write(s as u8) };
        live.push((p, s));
    }
    for &i in order {
        let (p, s) = live[i];
        // SAFETY: each block came from `h` with size `s` and is freed once.
        unsafe { h.free(black_box(p), s) };
    }
    sizes.len()
}

/// `(resident kB, address space kB, mappings)` of this process.
fn footprint() -> (u64, u64, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap_or("");
        line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    let maps = std::fs::read_to_string("/proc/self/maps").map(|m| m.lines().count()).unwrap_or(0);
    (kb("VmRSS:"), kb("VmSize:"), maps)
}

/// Per-block footprint of `LIVE` live 64-byte blocks of `h`.
fn per_block(h: Handler) -> (f64, f64, f64) {
    let before = footprint();
    let blocks: Vec<NonNull<u8>> = (0..LIVE)
        .map(|i| {
            let p = h.alloc(64).expect("alloc");
            // SAFETY: 64 writable bytes.
            unsafe { p.as_ptr().write_bytes(i as u8, 64) };
            p
        })
        .collect();
    let after = footprint();
    for p in blocks {
        // SAFETY: each came from `h` with 64 bytes.
        unsafe { h.free(p, 64) };
    }
    let n = LIVE as f64;
    (
        (after.0 as f64 - before.0 as f64) * 1024.0 / n,
        (after.1 as f64 - before.1 as f64) * 1024.0 / n,
        (after.2 as f64 - before.2 as f64) / n,
    )
}

fn main() {
    if common::listing() {
        return;
    }
    let r = Registry::new();
    let system = r.load_path(common::plugin("system")).expect("system plugin");
    let guard = r.load_path(common::plugin("guard")).expect("guard plugin");

    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let sizes: Vec<usize> = (0..BATCH)
        .map(|_| {
            let s: usize = 16 << (next() % 9);
            s - (next() as usize % (s / 2))
        })
        .collect();
    let mut order: Vec<usize> = (0..BATCH).collect();
    for i in (1..BATCH).rev() {
        order.swap(i, next() as usize % (i + 1));
    }

    let rounds = common::rounds(60);
    common::run(
        "pair64: one 64-byte allocation + free",
        rounds,
        &mut [variant("system", || pair64(system, 2000)), variant("guard", || pair64(guard, 2000))],
    );
    let (mut ls, mut lg) = (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH));
    common::run(
        "batch: 1000 live blocks of 16 B-4 KiB, then freed in another order (per alloc+free)",
        rounds,
        &mut [
            variant("system", || batch(system, &sizes, &order, &mut ls)),
            variant("guard", || batch(guard, &sizes, &order, &mut lg)),
        ],
    );

    println!("memory per live 64-byte block ({LIVE} live blocks)");
    println!("| variant | resident bytes | address space bytes | mappings |");
    println!("|---|---:|---:|---:|");
    for h in [system, guard] {
        let (rss, vm, maps) = per_block(h);
        println!("| {} | {rss:.0} | {vm:.0} | {maps:.2} |", h.name());
    }
    let s = guard.stats().expect("the guard reports statistics");
    assert_eq!((s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0));
}
