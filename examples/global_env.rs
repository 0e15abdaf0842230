//! The process's global allocator chosen when it starts, by an environment
//! variable: every `Vec`, `String` and `HashMap` of the program (and of its
//! dependencies) comes from the handler it names.
//!
//! ```sh
//! cargo build --release --workspace
//! cargo run --release --example global_env                                       # the system allocator
//! MEMPLUG_EXAMPLE_ALLOCATOR=tracking cargo run --release --example global_env     # the bundled `tracking`
//! MEMPLUG_EXAMPLE_ALLOCATOR=arena:region_size=1m cargo run --release --example global_env
//! ```
//!
//! A name that cannot be used is reported on stderr in one line, and the
//! program runs on the system allocator.

use memplug::global::{Global, Status};
use std::collections::HashMap;

#[global_allocator]
static GLOBAL: Global = Global::from_env("MEMPLUG_EXAMPLE_ALLOCATOR");

/// Some ordinary work: vectors, strings, a hash map; returns a checksum.
fn work(seed: usize) -> usize {
    let mut words: HashMap<String, Vec<usize>> = HashMap::new();
    for i in 0..2000 {
        let key = format!("word-{}", (i * 7 + seed) % 300);
        words.entry(key).or_default().push(i);
    }
    let mut text = String::new();
    for (k, v) in &words {
        text.push_str(k);
        text.push_str(&v.len().to_string());
    }
    let mut big: Vec<u64> = (0..10_000).collect();
    big.retain(|x| x % 3 == 0);
    // A zeroed block (`alloc_zeroed`), grown (`realloc`).
    let mut zeros = vec![0u64; 4096];
    zeros.extend(std::iter::repeat_n(0, 4096));
    assert!(zeros.iter().all(|&z| z == 0), "a zeroed block holds zeros");
    words.len() + text.len() + big.len()
}

fn main() {
    // The Rust runtime allocates before `main`, so this is `false`: the
    // choice was made then.
    let pending_at_start = *GLOBAL.status() == Status::Pending;
    let sum = work(0);
    println!("decided at the first allocation: {pending_at_start}");
    println!("checksum: {sum}");
    match GLOBAL.status() {
        Status::Pending => println!("status: pending"),
        Status::System => println!("status: system"),
        Status::Handler(h) => println!("status: handler {}", h.name()),
        Status::Failed { error, .. } => println!("status: failed {}", error.code()),
    }
    println!("handler: {}", GLOBAL.handler().map_or("none", |h| h.name()));
    match GLOBAL.stats() {
        Some(s) => println!(
            "stats: live_count={} live_bytes={} total_allocations={} peak_bytes={} bad_frees={} size_mismatches={}",
            s.live_count, s.live_bytes, s.total_allocations, s.peak_bytes, s.bad_frees, s.size_mismatches
        ),
        None => println!("stats: none"),
    }
    println!("bootstrap bytes: {}", GLOBAL.bootstrap_bytes());
}
