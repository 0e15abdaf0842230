//! Choose an allocator at run time, by name, without rebuilding.
//!
//! ```sh
//! cargo build --release --workspace
//! cargo run --release --example choose_allocator -- aligned
//! MEMPLUG_PLUGIN_PATH=/opt/my-plugins cargo run --release --example choose_allocator -- my-allocator
//! ```
//!
//! Loads every plugin on the search path (refusals are reported, not fatal),
//! makes the named handler current for a scope, allocates a few buffers there,
//! and shows that they keep their handler after the scope ends.

use memplug::{Buffer, Registry, current};
use std::process::ExitCode;

fn main() -> ExitCode {
    // memplug logs through `tracing`; show its warnings (or what RUST_LOG asks for).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let wanted = std::env::args().nth(1).unwrap_or_else(|| "aligned".into());
    let registry = Registry::global();
    for outcome in registry.load_search_path() {
        match outcome.result {
            Ok(h) => println!("loaded {:<12} {} from {}", h.name(), h.info().version, h.info().source),
            Err(e) => eprintln!("skipped: {e}"),
        }
    }
    let Some(handler) = registry.get(&wanted) else {
        eprintln!("no handler named {wanted:?}; registered: {}", registry.names().join(", "));
        return ExitCode::from(1);
    };

    let buffers: Vec<Buffer> = current::with_handler(handler, || {
        println!("current handler: {}", current::current_name());
        (0..4).map(|i| Buffer::zeroed(1 << (10 + i)).expect("allocation")).collect()
    });
    println!("current handler after the scope: {}", current::current_name());
    for b in &buffers {
        println!(
            "{:>6} bytes at {:p} (64-byte aligned: {}), freed by {}",
            b.len(),
            b.as_ptr(),
            (b.as_ptr() as usize).is_multiple_of(64),
            b.handler().map_or("-", |h| h.name())
        );
    }
    if let Some(s) = handler.stats() {
        println!("{wanted}: {} live bytes in {} blocks, peak {}", s.live_bytes, s.live_count, s.peak_bytes);
    }
    ExitCode::SUCCESS
}
