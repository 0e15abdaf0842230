//! What serialising a non-thread-safe handler costs: the bundled `arena`
//! plugin (not thread-safe) driven five ways, side by side in one criterion
//! group, `arena_alloc_free_64_x1000`. Every iteration is 1000 pairs of a
//! 64-byte allocation and its free (per thread), so the figures compare
//! directly:
//!
//! 1. `unlocked_direct` — the plugin's own `malloc`/`free` function pointers,
//!    called straight from the handler struct its entry returns (loaded with
//!    libloading from a private copy of the library): the baseline, no lock,
//!    no host;
//! 2. `per_op_lock` — [`memplug::Handler::alloc`] + [`memplug::Handler::free`]:
//!    the host takes and releases the handler's lock around every call;
//! 3. `guard_batch_1000` — one [`memplug::Handler::lock`] guard held across the
//!    1000 pairs, whose calls do not lock again;
//! 4. `two_threads_per_op` — two threads each doing 1000 per-op pairs on the
//!    same handler at once (wall time until both are done);
//! 5. `two_threads_batch_1000` — the same with each thread holding a guard
//!    for its 1000 pairs.
//!
//! Run with `cargo bench --bench arena`; the arena plugin is a
//! dev-dependency, so cargo builds `libmemplug_arena.so` next to the bench
//! executable. The figures are in docs/src/benchmarks.md.

mod common;

use common::plugin;
use criterion::{Criterion, Throughput, criterion_main};
use memplug::{Handler, Registry};
use memplug_abi::MemplugHandler;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The block size of every variant.
const SIZE: usize = 64;
/// Pairs (allocation + free) per iteration and thread.
const BATCH: usize = 1000;

/// The arena through the host, from a private copy (its own state).
fn hosted_arena(dir: &tempfile::TempDir) -> Handler {
    let path = dir.path().join("libmemplug_arena_hosted.so");
    std::fs::copy(plugin("arena"), &path).expect("copy the arena plugin");
    let h = Registry::new().load_path(&path).expect("load the arena plugin");
    assert!(!h.is_thread_safe(), "the arena is not thread-safe, so the host locks it");
    h
}

/// The arena's handler struct straight from its entry, from another private
/// copy, with the library kept open for the rest of the process.
fn direct_arena(dir: &tempfile::TempDir) -> &'static MemplugHandler {
    let path = dir.path().join("libmemplug_arena_direct.so");
    std::fs::copy(plugin("arena"), &path).expect("copy the arena plugin");
    // SAFETY: the arena library runs no initialisers with preconditions.
    let lib = unsafe { libloading::Library::new(&path) }.expect("open the arena plugin");
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    // SAFETY: `memplug_handler` is the plugin's entry, of type `EntryFn`.
    let entry = unsafe { lib.get::<memplug_abi::EntryFn>(memplug_abi::ENTRY_SYMBOL.as_bytes()) }.expect("entry");
    // SAFETY: the entry returns a pointer to a static handler (or NULL,
    // checked), valid while the library is open: for ever.
    unsafe { entry().as_ref() }.expect("the arena's entry returned a handler")
}

/// 1000 per-op pairs through the host.
#[inline]
fn per_op(h: Handler) {
    for _ in 0..BATCH {
        let p = h.alloc(black_box(SIZE)).expect("arena alloc");
        // SAFETY: `p` was returned by `h.alloc(SIZE)` just above and is freed
        // once, with that size.
        unsafe { h.free(black_box(p), SIZE) };
    }
}

/// 1000 pairs under one guard.
#[inline]
fn batch(h: Handler) {
    let g = h.lock();
    for _ in 0..BATCH {
        let p = g.alloc(black_box(SIZE)).expect("arena alloc");
        // SAFETY: `p` was returned by this guard's handler for `SIZE` bytes
        // just above and is freed once.
        unsafe { g.free(black_box(p), SIZE) };
    }
}

/// Wall time for two threads each running `work` `iters` times at once.
fn two_threads(iters: u64, h: Handler, work: fn(Handler)) -> Duration {
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        let partner = s.spawn(|| {
            start.wait();
            for _ in 0..iters {
                work(h);
            }
        });
        start.wait();
        let t0 = Instant::now();
        for _ in 0..iters {
            work(h);
        }
        partner.join().expect("partner thread");
        t0.elapsed()
    })
}

/// The `arena_alloc_free_64_x1000` group.
fn arena_alloc_free(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let hosted = hosted_arena(&dir);
    let direct = direct_arena(&dir);
    let (ctx, malloc, free) = (direct.ctx, direct.malloc.expect("malloc"), direct.free.expect("free"));

    let mut group = c.benchmark_group("arena_alloc_free_64_x1000");
    group.throughput(Throughput::Elements(BATCH as u64));

    group.bench_function("unlocked_direct", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                // SAFETY: `ctx` and `malloc` belong to the same handler; only
                // this thread uses that (private) arena instance.
                let p = unsafe { malloc(ctx, black_box(SIZE)) };
                assert!(!p.is_null(), "arena malloc failed");
                // SAFETY: `p` is this arena's block of `SIZE` bytes, freed once.
                unsafe { free(ctx, black_box(p), SIZE) };
            }
        })
    });

    group.bench_function("per_op_lock", |b| b.iter(|| per_op(hosted)));
    group.bench_function("guard_batch_1000", |b| b.iter(|| batch(hosted)));
    group.bench_function("two_threads_per_op", |b| b.iter_custom(|iters| two_threads(iters, hosted, per_op)));
    group.bench_function("two_threads_batch_1000", |b| b.iter_custom(|iters| two_threads(iters, hosted, batch)));
    group.finish();

    interleaved_summary(hosted, || {
        for _ in 0..BATCH {
            // SAFETY: as in `unlocked_direct` above.
            let p = unsafe { malloc(ctx, black_box(SIZE)) };
            assert!(!p.is_null(), "arena malloc failed");
            // SAFETY: `p` is this arena's block of `SIZE` bytes, freed once.
            unsafe { free(ctx, black_box(p), SIZE) };
        }
    });

    let s = hosted.stats().expect("the arena reports statistics");
    assert_eq!((s.live_count, s.bad_frees, s.size_mismatches), (0, 0, 0));
}

/// Rounds of the interleaved summary (`ROUNDS=n` changes it).
const ROUNDS: usize = 400;
/// Iterations per two-thread measurement (amortises starting the partner).
const TWO_THREAD_ITERS: u64 = 20;

/// A noise-resistant cross-check of the criterion figures, printed after
/// them: the variants take turns, round after round, so that a burst of
/// noise on a shared machine hits all of them alike. For each variant: the
/// minimum and median time per iteration, and the median (and interquartile
/// range) over the rounds of its ratio to `unlocked_direct` in the same round.
fn interleaved_summary(hosted: Handler, unlocked: impl Fn()) {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` / `--list`: no timing
    }
    let time = |f: &dyn Fn()| {
        let t0 = Instant::now();
        f();
        t0.elapsed()
    };
    type Timed<'a> = Box<dyn Fn() -> Duration + 'a>;
    let variants: [(&str, Timed<'_>); 5] = [
        ("unlocked_direct", Box::new(|| time(&unlocked))),
        ("per_op_lock", Box::new(|| time(&|| per_op(hosted)))),
        ("guard_batch_1000", Box::new(|| time(&|| batch(hosted)))),
        ("two_threads_per_op", Box::new(|| two_threads(TWO_THREAD_ITERS, hosted, per_op) / TWO_THREAD_ITERS as u32)),
        ("two_threads_batch_1000", Box::new(|| two_threads(TWO_THREAD_ITERS, hosted, batch) / TWO_THREAD_ITERS as u32)),
    ];
    let rounds = common::rounds(ROUNDS);
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); variants.len()];
    for _ in 0..rounds {
        for (i, (_, run)) in variants.iter().enumerate() {
            samples[i].push(run());
        }
    }
    // Per-round ratios first (each round's variants saw the same machine).
    let ratios: Vec<Vec<f64>> = samples
        .iter()
        .map(|v| {
            let mut r: Vec<f64> = v.iter().zip(&samples[0]).map(|(x, b)| x.as_secs_f64() / b.as_secs_f64()).collect();
            r.sort_by(f64::total_cmp);
            r
        })
        .collect();
    // Per pair of one thread: an iteration is `BATCH` pairs.
    let ns = |d: Duration| d.as_secs_f64() * 1e9 / BATCH as f64;
    println!(
        "\ninterleaved summary ({rounds} rounds; one iteration = {BATCH} pairs of alloc+free of {SIZE} B per thread; \
         ratio = median of per-round variant / unlocked_direct)"
    );
    println!("| variant | min ns/pair | median ns/pair | ratio | ratio IQR |");
    println!("|---|---:|---:|---:|---:|");
    for (((name, _), v), r) in variants.iter().zip(samples.iter_mut()).zip(&ratios) {
        v.sort();
        let q = |f: f64| r[((r.len() - 1) as f64 * f) as usize];
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2}–{:.2} |",
            ns(v[0]),
            ns(v[v.len() / 2]),
            q(0.5),
            q(0.25),
            q(0.75)
        );
    }
}

/// The benchmark runner (what `criterion_group!` would generate): reads
/// criterion's command line options and runs [`arena_alloc_free`].
pub fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    arena_alloc_free(&mut criterion);
}

criterion_main!(benches);
