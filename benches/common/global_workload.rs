//! The workload of the `global` benchmark, shared by its two binaries
//! (`global.rs` on memplug's `Global`, `global_plain.rs` on the standard
//! library's system allocator): vectors, strings and a hash map, the way
//! ordinary programs allocate.

use std::collections::HashMap;
use std::hint::black_box;

/// One iteration: 2 000 formatted keys into a `HashMap<String, Vec<u32>>`,
/// a `String` built from it, a vector grown and filtered; all dropped.
fn iteration(seed: u32) -> usize {
    let mut words: HashMap<String, Vec<u32>> = HashMap::new();
    for i in 0..2000u32 {
        words.entry(format!("key-{}", (i.wrapping_mul(7) + seed) % 400)).or_default().push(i);
    }
    let mut text = String::new();
    for (k, v) in &words {
        text.push_str(k);
        text.push_str(&v.len().to_string());
    }
    let mut big: Vec<u64> = (0..4000).collect();
    big.retain(|x| x % 3 == 0);
    black_box(words.len() + text.len() + big.len())
}

/// This thread's CPU time in nanoseconds: unlike the wall clock, it does
/// not count the time other processes of this busy machine take the CPU.
fn cpu_ns() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid place for the result; the clock id is valid.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime");
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

/// The child's side: run `iterations` iterations after one of warm-up and
/// print the CPU nanoseconds per iteration.
pub(crate) fn child(iterations: u32) {
    black_box(iteration(0));
    let start = cpu_ns();
    for i in 0..iterations {
        black_box(iteration(i));
    }
    println!("{}", (cpu_ns() - start) / f64::from(iterations));
}

/// `--child N` on the command line: the number of iterations.
pub(crate) fn child_iterations() -> Option<u32> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--child")?;
    args.get(i + 1)?.parse().ok()
}
