//! Dispatch overhead of memplug against direct libc.
//!
//! One criterion group, `alloc_free_64`, times one allocation plus one free of
//! a 64-byte block per iteration, by six routes side by side:
//!
//! 1. `libc_direct` — `libc::malloc` + `libc::free`, the baseline;
//! 2. `handler_system_plugin` — [`memplug::Handler`] for the bundled `system`
//!    plugin (an indirect call into the plugin, which calls libc);
//! 3. `handler_builtin` — the host's built-in libc handler, no plugin;
//! 4. `buffer_owning` — [`memplug::Buffer::with_capacity_in`] + drop, with the
//!    `system` plugin's handler;
//! 5. `buffer_current` — [`memplug::Buffer::with_capacity`] + drop under
//!    [`memplug::current::scoped`], so the current-handler lookup is included;
//! 6. `vec_with_capacity` — `Vec::<u8>::with_capacity` + drop (Rust's global
//!    allocator, i.e. libc).
//!
//! Run with `cargo bench --bench dispatch`; the `system` plugin is a
//! dev-dependency, so cargo builds `libmemplug_system.so` next to the bench
//! executable.

mod common;

use common::plugin;
use criterion::{Criterion, criterion_main};
use memplug::{Buffer, Handler, Registry, current};
use std::hint::black_box;

/// The block size of every variant.
const SIZE: usize = 64;

/// Load the bundled `system` plugin into a fresh registry.
fn system_handler() -> Handler {
    let path = plugin("system");
    Registry::new()
        .load_path(&path)
        .unwrap_or_else(|e| panic!("loading the system plugin from {}: {e}", path.display()))
}

/// The `alloc_free_64` group: one 64-byte allocation plus its free per
/// iteration, by each route in turn.
fn alloc_free_64(c: &mut Criterion) {
    let system = system_handler();
    let builtin = current::builtin();

    let mut group = c.benchmark_group("alloc_free_64");

    group.bench_function("libc_direct", |b| {
        b.iter(|| {
            // SAFETY: `malloc` has no preconditions.
            let p = unsafe { libc::malloc(black_box(SIZE)) };
            assert!(!p.is_null(), "libc::malloc({SIZE}) failed");
            let p = black_box(p);
            // SAFETY: `p` came from `libc::malloc` just above, is non-null and
            // is freed exactly once, here, and not used afterwards.
            unsafe { libc::free(p) };
        })
    });

    group.bench_function("handler_system_plugin", |b| {
        b.iter(|| {
            let p = system.alloc(black_box(SIZE)).expect("system plugin alloc");
            let p = black_box(p);
            // SAFETY: `p` was returned by `system.alloc(SIZE)` just above, is
            // freed exactly once with that same size, and not used afterwards.
            unsafe { system.free(p, SIZE) };
        })
    });

    group.bench_function("handler_builtin", |b| {
        b.iter(|| {
            let p = builtin.alloc(black_box(SIZE)).expect("builtin alloc");
            let p = black_box(p);
            // SAFETY: `p` was returned by `builtin.alloc(SIZE)` just above, is
            // freed exactly once with that same size, and not used afterwards.
            unsafe { builtin.free(p, SIZE) };
        })
    });

    group.bench_function("buffer_owning", |b| {
        b.iter(|| {
            let buf = Buffer::with_capacity_in(black_box(SIZE), system).expect("system plugin buffer");
            drop(black_box(buf));
        })
    });

    group.bench_function("buffer_current", |b| {
        let _scope = current::scoped(system);
        b.iter(|| {
            let buf = Buffer::with_capacity(black_box(SIZE)).expect("current-handler buffer");
            drop(black_box(buf));
        })
    });

    group.bench_function("vec_with_capacity", |b| {
        b.iter(|| {
            let v = Vec::<u8>::with_capacity(black_box(SIZE));
            drop(black_box(v));
        })
    });

    group.finish();
}

/// The benchmark group runner (what `criterion_group!` would generate,
/// written out so that it carries documentation): reads criterion's command
/// line options and runs [`alloc_free_64`].
pub fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    alloc_free_64(&mut criterion);
}

criterion_main!(benches);
