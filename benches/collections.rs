//! Rust collections on a memplug `Handler` against the same collections on
//! the global allocator, side by side in one run (interleaved: see
//! `common/mod.rs`):
//!
//! - `vec_push`: an `allocator_api2::vec::Vec<u64, A>` pushed to 1 000 000
//!   elements from empty, then dropped (ns per push);
//! - `hashmap_insert`: a `hashbrown::HashMap<u64, u64, _, A>` filled with
//!   100 000 entries from empty, then dropped (ns per insert);
//! - `small_boxes`: 100 000 `Box<[u64; 4], A>` in a `Vec<_, A>`, then the
//!   odd ones dropped and the rest with the vector (ns per box): many small
//!   blocks, where allocators differ most.
//!
//! Variants: `global` (allocator-api2's `Global`: Rust's global allocator,
//! glibc here), then `Handler`s of the bundled `system` plugin (glibc through
//! the plugin ABI: the cost of the route, goal ≤ 1.05×), of mimalloc and of
//! tcmalloc loaded by symbol name from `examples/manifests/` (what a user
//! gains by picking another allocator).
//!
//! Run: `cargo bench --bench collections` (needs libmimalloc2.0 and
//! libtcmalloc-minimal4, as `.ci/run` installs). `ROUNDS=n` changes the
//! number of rounds (default 60).

mod common;

use allocator_api2::alloc::{Allocator, Global};
use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec;
use common::variant;
use hashbrown::{DefaultHashBuilder, HashMap};
use memplug::{Candidate, Handler, Registry};
use std::hint::black_box;

const PUSHES: u64 = 1_000_000;
const INSERTS: u64 = 100_000;

fn vec_push<A: Allocator>(alloc: A) -> usize {
    let mut v: Vec<u64, A> = Vec::new_in(alloc);
    for i in 0..PUSHES {
        v.push(black_box(i));
    }
    black_box(&v);
    PUSHES as usize
}

fn hashmap_insert<A: Allocator>(alloc: A) -> usize {
    let mut m: HashMap<u64, u64, DefaultHashBuilder, A> = HashMap::with_hasher_in(DefaultHashBuilder::default(), alloc);
    for i in 0..INSERTS {
        m.insert(black_box(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)), i);
    }
    black_box(&m);
    INSERTS as usize
}

const BOXES: usize = 100_000;

fn small_boxes<A: Allocator + Copy>(alloc: A) -> usize {
    let mut v: Vec<Box<[u64; 4], A>, A> = Vec::with_capacity_in(BOXES, alloc);
    for i in 0..BOXES as u64 {
        v.push(Box::new_in([i; 4], alloc));
    }
    let mut i = 0;
    v.retain(|_| {
        i += 1;
        i % 2 == 0
    });
    black_box(&v);
    BOXES
}

/// An allocator of a variant.
#[derive(Clone, Copy)]
enum Route {
    Global,
    Handler(Handler),
}

fn main() {
    if common::listing() {
        return;
    }
    let r = Registry::new();
    let system = r.load_path(common::plugin("system")).expect("system plugin");
    let manifests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/manifests");
    let by_manifest = |name: &str| {
        r.load(&Candidate::new(manifests.join(format!("{name}.memplug.toml")))).unwrap_or_else(|e| {
            panic!("{name} by symbol name ({e}); apt-get install libmimalloc2.0 libtcmalloc-minimal4")
        })
    };
    let variants: [(&'static str, Route); 4] = [
        ("global", Route::Global),
        ("handler_system", Route::Handler(system)),
        ("handler_mimalloc", Route::Handler(by_manifest("mimalloc"))),
        ("handler_tcmalloc", Route::Handler(by_manifest("tcmalloc"))),
    ];
    let rounds = common::rounds(60);
    let mut pushes: std::vec::Vec<common::Variant<'_>> = variants
        .iter()
        .map(|&(name, route)| {
            variant(name, move || match route {
                Route::Global => vec_push(Global),
                Route::Handler(h) => vec_push(h),
            })
        })
        .collect();
    common::run("vec_push: Vec<u64> pushed to 1 000 000 elements (ns per push)", rounds, &mut pushes);
    let mut inserts: std::vec::Vec<common::Variant<'_>> = variants
        .iter()
        .map(|&(name, route)| {
            variant(name, move || match route {
                Route::Global => hashmap_insert(Global),
                Route::Handler(h) => hashmap_insert(h),
            })
        })
        .collect();
    common::run("hashmap_insert: HashMap<u64, u64> filled with 100 000 entries (ns per insert)", rounds, &mut inserts);
    let mut boxes: std::vec::Vec<common::Variant<'_>> = variants
        .iter()
        .map(|&(name, route)| {
            variant(name, move || match route {
                Route::Global => small_boxes(Global),
                Route::Handler(h) => small_boxes(h),
            })
        })
        .collect();
    common::run("small_boxes: 100 000 Box<[u64; 4]>, half freed early (ns per box)", rounds, &mut boxes);
}
