//! A helper of the integration tests (tests/global.rs): several threads
//! allocate at once while the first allocation of the process loads the
//! handler `MEMPLUG_EXAMPLE_ALLOCATOR` names. `#![no_main]`, so that the
//! Rust runtime allocates nothing before the threads are running.

#![no_main]

use memplug::global::{Global, Status};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[global_allocator]
static GLOBAL: Global = Global::from_env("MEMPLUG_EXAMPLE_ALLOCATOR");

const THREADS: usize = 8;
static GO: AtomicBool = AtomicBool::new(false);
static READY: AtomicUsize = AtomicUsize::new(0);
static SUM: AtomicUsize = AtomicUsize::new(0);

/// Vectors, strings and a hash map; a checksum.
fn work(seed: usize) -> usize {
    let mut words: HashMap<String, Vec<usize>> = HashMap::new();
    for i in 0..5000 {
        words.entry(format!("w{}", (i * 7 + seed) % 500)).or_default().push(i);
    }
    let text: String = words.keys().map(String::as_str).collect();
    words.len() + text.len()
}

extern "C" fn run(arg: *mut libc::c_void) -> *mut libc::c_void {
    READY.fetch_add(1, Ordering::AcqRel);
    while !GO.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    SUM.fetch_add(work(arg as usize), Ordering::Relaxed);
    std::ptr::null_mut()
}

/// The C entry point (no Rust runtime start-up before it).
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    let pending = *GLOBAL.status() == Status::Pending;
    let mut ids: [libc::pthread_t; THREADS] = [0; THREADS];
    for (i, id) in ids.iter_mut().enumerate() {
        // SAFETY: `run` is a C-ABI thread function; `id` is a valid place
        // for the thread's id; default attributes.
        assert_eq!(unsafe { libc::pthread_create(id, std::ptr::null(), run, i as *mut libc::c_void) }, 0);
    }
    while READY.load(Ordering::Acquire) < THREADS {
        std::hint::spin_loop();
    }
    GO.store(true, Ordering::Release);
    let mine = work(THREADS);
    for id in ids {
        // SAFETY: a thread created above and not joined yet.
        assert_eq!(unsafe { libc::pthread_join(id, std::ptr::null_mut()) }, 0);
    }
    println!("pending at start: {pending}");
    println!("checksum: {}", mine + SUM.load(Ordering::Relaxed));
    println!("handler: {}", GLOBAL.handler().map_or("none", |h| h.name()));
    let stats = GLOBAL.stats().map(|s| (s.total_allocations, s.bad_frees, s.size_mismatches));
    println!("stats: {stats:?}");
    0
}
