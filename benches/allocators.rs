//! The bundled `system` plugin against mimalloc and tcmalloc loaded by symbol
//! name (no plugin code), and libc directly, as ratios from one run.
//!
//! This machine's speed drifts by up to 1.7x over seconds, so variants are not
//! timed one after another (as criterion does) but **interleaved**: each round
//! times every variant for a short block, in a rotating order, and a variant's
//! figure is the median over rounds of its time relative to the baseline's in
//! the same round. Two workloads:
//!
//! - `pair64`: one 64-byte allocation and its free;
//! - `batch`: 1000 allocations of mixed sizes (16 B to 4 KiB) held live, then
//!   freed in another order — per allocation+free.
//!
//! Run: `cargo bench --bench allocators` (needs libmimalloc2.0 and
//! libtcmalloc-minimal4, as `.ci/run` installs). `ROUNDS=n` changes the
//! number of rounds (default 200).

mod common;

use common::variant;
use memplug::symbols::SymbolSpec;
use memplug::{Handler, Registry};
use std::hint::black_box;
use std::ptr::NonNull;

/// A way to allocate and free.
#[derive(Clone, Copy)]
enum Route {
    Libc,
    Handler(Handler),
}

impl Route {
    #[inline(always)]
    fn alloc(self, size: usize) -> NonNull<u8> {
        match self {
            // SAFETY: malloc has no preconditions; a failure is a bench abort.
            Route::Libc => NonNull::new(unsafe { libc::malloc(size) } as *mut u8).expect("malloc"),
            Route::Handler(h) => h.alloc(size).expect("alloc"),
        }
    }

    #[inline(always)]
    fn free(self, p: NonNull<u8>, size: usize) {
        match self {
            // SAFETY: `p` came from `libc::malloc` in `alloc` and is freed once.
            Route::Libc => unsafe { libc::free(p.as_ptr().cast()) },
            // SAFETY: `p` came from `h.alloc(size)` and is freed once.
            Route::Handler(h) => unsafe { h.free(p, size) },
        }
    }
}

fn pair64(route: Route, iters: usize) {
    for _ in 0..iters {
        let p = route.alloc(black_box(64));
        route.free(black_box(p), 64);
    }
}

const BATCH: usize = 1000;

fn batch(route: Route, sizes: &[usize], order: &[usize], live: &mut Vec<(NonNull<u8>, usize)>) {
    live.clear();
    for &s in sizes {
        let p = route.alloc(s);
        // Touch the block, as a user would.
        // SAFETY: `p` has at least `s >= 16` writable bytes.
        unsafe { p.as_ptr().write(s as u8) };
        live.push((p, s));
    }
    for &i in order {
        let (p, s) = live[i];
        route.free(black_box(p), s);
    }
}

fn main() {
    if common::listing() {
        return;
    }
    let r = Registry::new();
    let system = r.load_path(common::plugin("system")).expect("system plugin");
    let mimalloc = r
        .load_symbols(
            &SymbolSpec::new("mimalloc", "libmimalloc.so.2", "mi_malloc", "mi_free")
                .calloc("mi_calloc")
                .realloc("mi_realloc")
                .sized_free("mi_free_size")
                .thread_safe(true),
        )
        .expect("mimalloc by symbol (apt-get install libmimalloc2.0)");
    let tcmalloc = r
        .load_symbols(
            &SymbolSpec::new("tcmalloc", "libtcmalloc_minimal.so.4", "tc_malloc", "tc_free").thread_safe(true),
        )
        .expect("tcmalloc by symbol (apt-get install libtcmalloc-minimal4)");
    let libc_sym = r
        .load_symbols(&SymbolSpec::new("libc-sym", "libc.so.6", "malloc", "free").thread_safe(true))
        .expect("libc by symbol");
    let variants: [(&str, Route); 5] = [
        ("libc_direct", Route::Libc),
        ("system_plugin", Route::Handler(system)),
        ("libc_by_symbol", Route::Handler(libc_sym)),
        ("mimalloc_by_symbol", Route::Handler(mimalloc)),
        ("tcmalloc_by_symbol", Route::Handler(tcmalloc)),
    ];

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

    let rounds = common::rounds(200);
    let mut pairs: Vec<common::Variant<'_>> = variants
        .iter()
        .map(|&(name, route)| {
            variant(name, move || {
                pair64(route, 20_000);
                20_000
            })
        })
        .collect();
    common::run("pair64: one 64-byte allocation + free", rounds, &mut pairs);
    let (sizes, order) = (&sizes, &order);
    let mut batches: Vec<common::Variant<'_>> = variants
        .iter()
        .map(|&(name, route)| {
            let mut live = Vec::with_capacity(BATCH);
            variant(name, move || {
                for _ in 0..10 {
                    batch(route, sizes, order, &mut live);
                }
                10 * BATCH
            })
        })
        .collect();
    common::run("batch: 1000 live blocks of 16 B..4 KiB, then freed shuffled (per alloc+free)", rounds, &mut batches);
}
