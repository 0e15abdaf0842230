//! Ordinary Rust collections on plugin memory: `allocator_api2::vec::Vec`,
//! `allocator_api2::boxed::Box` and a `hashbrown::HashMap` built with
//! `new_in`, all on the bundled `tracking` plugin, whose statistics show that
//! every byte comes back.
//!
//! ```sh
//! cargo build --release --workspace
//! cargo run --release --example collections            # on `tracking`
//! cargo run --release --example collections -- arena   # any handler by name
//! ```
//!
//! In your own crate: `memplug`, `allocator-api2 = "0.2"` and
//! `hashbrown = "0.17"` (its default features include `allocator-api2`).

use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec;
use hashbrown::{DefaultHashBuilder, HashMap};
use memplug::{Handler, Registry};
use std::process::ExitCode;

/// A type with a larger alignment than any plugin's blocks: served through
/// the handler's aligned path.
#[repr(align(4096))]
struct Page([u8; 4096]);

fn show(h: Handler, when: &str) {
    if let Some(s) = h.stats() {
        println!(
            "{when:<28} live {:>9} bytes in {:>5} blocks; peak {:>9}; {:>6} allocations; bad frees {}, size mismatches {}",
            s.live_bytes, s.live_count, s.peak_bytes, s.total_allocations, s.bad_frees, s.size_mismatches
        );
    }
}

fn main() -> ExitCode {
    let wanted = std::env::args().nth(1).unwrap_or_else(|| "tracking".into());
    let registry = Registry::global();
    for outcome in registry.load_search_path() {
        if let Err(e) = outcome.result {
            eprintln!("skipped: {e}");
        }
    }
    let Some(h) = registry.get(&wanted) else {
        eprintln!("no handler named {wanted:?}; registered: {}", registry.names().join(", "));
        return ExitCode::from(1);
    };
    println!("collections on `{h}` (alignment {}, thread-safe: {})", h.alignment(), h.is_thread_safe());
    show(h, "before");
    {
        // A vector: growth goes through the plugin's realloc with the old size.
        let mut squares: Vec<u64, Handler> = Vec::new_in(h);
        squares.extend((0..100_000u64).map(|i| i * i));
        show(h, "Vec<u64> of 100 000");

        // A box, and a page-aligned box (the aligned path).
        let boxed: Box<[u64; 512], Handler> = Box::new_in([1; 512], h);
        let page: Box<Page, Handler> = Box::new_in(Page([7; 4096]), h);
        assert_eq!(&*page as *const Page as usize % 4096, 0);
        show(h, "+ Box<[u64; 512]>, Box<Page>");

        // A hash map whose table and values are all plugin memory.
        let mut words: HashMap<u64, Vec<u8, Handler>, DefaultHashBuilder, Handler> = HashMap::new_in(h);
        for i in 0..10_000u64 {
            let mut v = Vec::new_in(h);
            v.extend_from_slice(i.to_string().as_bytes());
            words.insert(i, v);
        }
        show(h, "+ HashMap of 10 000");
        println!(
            "sum of squares {}, box sum {}, page byte {}, word 4242 = {:?}",
            squares.iter().sum::<u64>(),
            boxed.iter().sum::<u64>(),
            page.0[4095],
            std::str::from_utf8(&words[&4242]).unwrap(),
        );

        // A batch under one lock: a vector on a guard (for a handler that is
        // not thread-safe, no lock is taken per call).
        let guard = h.lock();
        let mut batch: Vec<u32, &memplug::HandlerGuard> = Vec::with_capacity_in(16, &guard);
        batch.extend(0..10_000);
        show(h, "+ Vec<u32> on a guard");
    }
    show(h, "after dropping them all");
    match h.stats() {
        Some(s) if s.live_bytes != 0 || s.bad_frees != 0 || s.size_mismatches != 0 => {
            eprintln!("not every byte came back");
            ExitCode::from(1)
        }
        Some(_) => {
            println!("every byte came back");
            ExitCode::SUCCESS
        }
        None => {
            println!("(`{h}` reports no statistics)");
            ExitCode::SUCCESS
        }
    }
}
