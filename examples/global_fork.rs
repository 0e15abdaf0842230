//! A program on `memplug::global::Global` that forks while its threads
//! allocate (a helper of tests/global.rs, and what a server that forks
//! workers does): four threads build and drop vectors, strings and maps
//! without pause while the main thread forks children one after another.
//! Each child allocates, uses and frees memory through the same handler
//! and exits; the parent waits for every child. It prints
//! `forks N ok, handler NAME` when every child exited 0.
//!
//! ```text
//! MEMPLUG_EXAMPLE_ALLOCATOR=tracking cargo run --example global_fork -- 200
//! ```

use memplug::global::Global;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

#[global_allocator]
static GLOBAL: Global = Global::from_env("MEMPLUG_EXAMPLE_ALLOCATOR");

static STOP: AtomicBool = AtomicBool::new(false);

/// Vectors, strings and a map of many sizes, built and dropped.
fn churn(seed: usize) -> usize {
    let mut sum = 0;
    let mut map: HashMap<String, Vec<u8>> = HashMap::new();
    for i in 0..200 {
        let n = (i * 37 + seed * 101) % 5000 + 1;
        map.insert(format!("key {}", i % 50), vec![i as u8; n]);
        if i % 7 == 0 {
            let big: Vec<u64> = (0..(n * 20) as u64).collect();
            sum += big.len();
        }
    }
    sum + map.values().map(Vec::len).sum::<usize>()
}

fn main() {
    let children: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut sum = 0;
                while !STOP.load(Ordering::Relaxed) {
                    sum += churn(t);
                }
                sum
            })
        })
        .collect();
    let mut failed = 0;
    for k in 0..children {
        // SAFETY: `fork` has no preconditions; the child below only
        // allocates through the global allocator, writes, and ends with
        // `_exit`, running nothing of the parent's threads.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let ok = churn(k) > 0 && format!("child {k}").len() > 6;
            // SAFETY: ends this child process at once.
            unsafe { libc::_exit(if ok { 0 } else { 3 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just made; `status` is writable.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid, "waitpid: {}", std::io::Error::last_os_error());
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            eprintln!("child {k} ended with status {status:#x}");
            failed += 1;
        }
    }
    STOP.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a churning thread panicked");
    }
    let handler = GLOBAL.handler().map_or("none", |h| h.name());
    if failed > 0 {
        println!("forks {children} failed {failed}, handler {handler}");
        std::process::exit(1);
    }
    println!("forks {children} ok, handler {handler}");
}
