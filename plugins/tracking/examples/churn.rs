//! The cost of `tracking`'s bookkeeping: its `malloc`+`free` against libc's,
//! as a ratio measured in the same rounds (interleaved, so the machine's
//! drift cancels). Two workloads: `pair64` (one 64-byte block allocated and
//! freed) and `batch` (1000 blocks of 16 B to 4 KiB held live, then freed in
//! another order), per allocation+free.
//!
//! Run: `cargo run --release -p memplug-plugin-tracking --example churn`.

use memplug_abi::Allocator;
use memplug_tracking::Tracking;
use std::hint::black_box;
use std::time::Instant;

fn pair64(t: Option<&Tracking>, n: usize) {
    for _ in 0..n {
        match t {
            Some(t) => {
                let p = black_box(t.malloc(64));
                // SAFETY: `p` came from `t.malloc(64)` and is freed once.
                unsafe { t.free(p, 64) };
            }
            None => {
                // SAFETY: libc malloc/free of one block.
                unsafe { libc::free(black_box(libc::malloc(64))) };
            }
        }
    }
}

fn batch(t: Option<&Tracking>, sizes: &[usize], blocks: &mut Vec<*mut u8>) {
    for &s in sizes {
        blocks.push(match t {
            Some(t) => t.malloc(s),
            // SAFETY: libc malloc has no preconditions.
            None => unsafe { libc::malloc(s) as *mut u8 },
        });
    }
    for i in (0..sizes.len()).map(|i| (i * 7919) % sizes.len()) {
        let (p, s) = (blocks[i], sizes[i]);
        match t {
            // SAFETY: each block came from `t.malloc(s)` and is freed once
            // (7919 is prime to the length, so `i` visits each index once).
            Some(t) => unsafe { t.free(p, s) },
            // SAFETY: as above, from libc.
            None => unsafe { libc::free(p.cast()) },
        }
    }
    blocks.clear();
}

fn main() {
    let t = Tracking::create();
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let sizes: Vec<usize> = (0..1000).map(|i| 16 << (i % 9)).collect();
    let mut blocks = Vec::with_capacity(sizes.len());
    let (mut pair, mut bat) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let time = |f: &mut dyn FnMut()| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as f64
        };
        let order = r % 2 == 0;
        let ratio = |w: &mut dyn FnMut(Option<&Tracking>)| {
            let (a, b) = if order {
                let a = time(&mut || w(Some(&t)));
                (a, time(&mut || w(None)))
            } else {
                let b = time(&mut || w(None));
                (time(&mut || w(Some(&t))), b)
            };
            a / b
        };
        pair.push(ratio(&mut |t| pair64(t, 20_000)));
        bat.push(ratio(&mut |t| batch(t, &sizes, &mut blocks)));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "tracking / libc, median of {rounds} rounds: pair64 {:.3}  batch {:.3}",
        median(&mut pair),
        median(&mut bat)
    );
}
