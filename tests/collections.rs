//! Rust collections on plugin memory (`memplug::alloc_api`): `Vec`, `Box`
//! and `hashbrown::HashMap` on a `Handler` (and on a guard), on the
//! `tracking` plugin (every byte returned, no bad free, no size mismatch),
//! on `aligned` with over-aligned types, on `arena` from several threads;
//! grow/shrink checked byte for byte, zero-sized types, panics, instances.

mod support;
#[path = "support/threads.rs"]
mod threads;

use allocator_api2::alloc::{Allocator, Layout};
use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec;
use hashbrown::DefaultHashBuilder;
use hashbrown::HashMap;
use memplug::{Handler, Registry};
use std::ptr::NonNull;
use threads::Watchdog;

/// A private copy of a bundled plugin, loaded in a registry of its own, so
/// that its statistics are this test's alone.
fn private(name: &str, dir: &tempfile::TempDir) -> Handler {
    let path = threads::private_copy(name, dir.path(), &format!("libmemplug_{name}.so"));
    Registry::new().load_path(path).unwrap()
}

/// Live bytes and blocks back to where they were, no bad free, no wrongly
/// sized free.
#[track_caller]
fn assert_clean(h: Handler) {
    let s = h.stats().expect("the plugin reports statistics");
    assert_eq!(
        (s.live_bytes, s.live_count, s.bad_frees, s.size_mismatches),
        (0, 0, 0, 0),
        "{h}: live bytes, live blocks, bad frees, size mismatches"
    );
}

#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Line([u64; 8]);

#[repr(C, align(4096))]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Page(u64);

#[test]
fn collections_on_tracking_return_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let h = private("tracking", &dir);
    {
        let mut v: Vec<u64, Handler> = Vec::new_in(h);
        for i in 0..100_000u64 {
            v.push(i * 3);
        }
        assert_eq!(v[99_999], 299_997);
        let live = h.stats().unwrap().live_bytes;
        assert!(live >= 800_000, "the vector's memory is the plugin's: {live} bytes live");
        v.truncate(10);
        v.shrink_to_fit();
        assert_eq!(h.stats().unwrap().live_bytes, 80, "shrink_to_fit gave the rest back through realloc");
        let cloned = v.clone();
        assert_eq!(cloned.allocator(), &h);

        let b: Box<[u64; 100], Handler> = Box::new_in([7; 100], h);
        assert_eq!(b.iter().sum::<u64>(), 700);
        let s: Box<str, Handler> = {
            let mut bytes: Vec<u8, Handler> = Vec::new_in(h);
            bytes.extend_from_slice(b"plugin memory");
            let boxed = bytes.into_boxed_slice();
            let (ptr, alloc) = Box::into_raw_with_allocator(boxed);
            // SAFETY: the bytes are UTF-8, and the box is rebuilt with the
            // allocator it came from.
            unsafe { Box::from_raw_in(ptr as *mut str, alloc) }
        };
        assert_eq!(&*s, "plugin memory");

        let mut m: HashMap<u64, String, DefaultHashBuilder, Handler> = HashMap::new_in(h);
        for i in 0..10_000u64 {
            m.insert(i, i.to_string());
        }
        m.retain(|k, _| k % 2 == 0);
        assert_eq!(m.len(), 5_000);
        assert_eq!(m[&4242], "4242");
        m.shrink_to_fit();
    }
    assert_clean(h);
    assert!(h.stats().unwrap().total_allocations > 10, "the collections did allocate from the plugin");
}

#[test]
fn over_aligned_types_on_aligned_and_on_over_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let aligned = private("aligned", &dir);
    let tracking = private("tracking", &dir); // 16-byte blocks, no aligned_alloc: host over-allocation
    assert_eq!(aligned.alignment(), 64);
    for h in [aligned, tracking] {
        let mut lines: Vec<Line, Handler> = Vec::new_in(h);
        let mut pages: Vec<Page, Handler> = Vec::new_in(h);
        for i in 0..300u64 {
            lines.push(Line([i; 8]));
            pages.push(Page(i));
            assert_eq!(lines.as_ptr() as usize % 64, 0, "{h}: Vec<Line> at {:p}", lines.as_ptr());
            assert_eq!(pages.as_ptr() as usize % 4096, 0, "{h}: Vec<Page> at {:p}", pages.as_ptr());
        }
        assert!(lines.iter().enumerate().all(|(i, l)| *l == Line([i as u64; 8])), "{h}: lines kept through growth");
        assert!(pages.iter().enumerate().all(|(i, p)| p.0 == i as u64), "{h}: pages kept through growth");
        pages.truncate(3);
        pages.shrink_to_fit();
        assert_eq!(pages.as_ptr() as usize % 4096, 0);
        let boxed: Box<Page, Handler> = Box::new_in(Page(9), h);
        assert_eq!(&*boxed as *const Page as usize % 4096, 0);
        let zeroed: Box<[Line], Handler> = zeroed_lines(h, 33);
        assert!(zeroed.iter().all(|l| *l == Line([0; 8])));
        assert_eq!(zeroed.as_ptr() as usize % 64, 0);
    }
    assert_clean(tracking);
}

/// `n` zeroed `Line`s through `allocate_zeroed`.
fn zeroed_lines(h: Handler, n: usize) -> Box<[Line], Handler> {
    let b = Box::<[Line], Handler>::new_zeroed_slice_in(n, h);
    // SAFETY: all-zero bytes are a valid `Line`.
    unsafe { b.assume_init() }
}

#[test]
fn arena_collections_from_several_threads_through_the_lock() {
    let _watchdog = Watchdog::arm("arena_collections_from_several_threads", threads::watchdog_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let arena = private("arena", &dir);
    assert!(!arena.is_thread_safe());
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u64, Handler>>();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let tx = tx.clone();
            s.spawn(move || {
                let mut m: HashMap<u64, Vec<u64, Handler>, DefaultHashBuilder, Handler> = HashMap::new_in(arena);
                for i in 0..2_000u64 {
                    let mut v = Vec::with_capacity_in((i % 17) as usize, arena);
                    v.extend((0..i % 40).map(|x| x ^ t));
                    m.insert(i, v);
                    if i % 3 == 0 {
                        let old = m.remove(&(i / 2)).unwrap_or_else(|| Vec::new_in(arena));
                        tx.send(old).unwrap(); // dropped on another thread
                    }
                }
                for (i, v) in &m {
                    assert!(v.iter().enumerate().all(|(x, &y)| y == x as u64 ^ t), "thread {t}, entry {i}");
                }
                // A batch under one lock: a collection on the guard.
                let guard = arena.lock();
                let mut batch: Vec<u64, &memplug::HandlerGuard> = Vec::new_in(&guard);
                batch.extend(0..5_000);
                assert_eq!(batch.iter().sum::<u64>(), 12_497_500);
            });
        }
        drop(tx);
        s.spawn(move || rx.iter().for_each(drop));
    });
    assert_clean(arena);
}

/// The byte at `i` of a block written with `seed`.
fn pattern(seed: usize, i: usize) -> u8 {
    (seed.wrapping_mul(131) ^ i.wrapping_mul(7) ^ (i >> 9)) as u8
}

#[test]
fn grow_and_shrink_keep_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let hs = [private("tracking", &dir), private("arena", &dir), private("aligned", &dir)];
    // (size, alignment) steps; alignment changes force allocate-copy-free.
    let steps: [(usize, usize); 12] = [
        (24, 8),
        (100, 8),
        (5_000, 8),
        (70_000, 16),
        (300, 16),
        (300, 64),
        (9_000, 4096),
        (50, 4096),
        (200_000, 8),
        (1, 1),
        (17, 2),
        (0, 32),
    ];
    for h in hs {
        let mut layout = Layout::from_size_align(8, 8).unwrap();
        let mut p = h.allocate(layout).unwrap().cast::<u8>();
        fill(p, layout.size(), 0);
        for (k, &(size, align)) in steps.iter().enumerate() {
            let new = Layout::from_size_align(size, align).unwrap();
            let keep = layout.size().min(size);
            let zeroed = k % 2 == 1;
            // SAFETY: `p` is a live block of `h` with `layout`.
            let q = unsafe {
                if size >= layout.size() {
                    if zeroed { h.grow_zeroed(p, layout, new) } else { h.grow(p, layout, new) }
                } else {
                    h.shrink(p, layout, new)
                }
            }
            .unwrap();
            assert_eq!(q.len(), size, "{h}: the slice is as long as asked");
            let q = q.cast::<u8>();
            assert_eq!(q.as_ptr() as usize % align, 0, "{h}: step {k} ({size}, {align})");
            // SAFETY: `q` holds `size` bytes, the first `keep` initialised.
            let bytes = unsafe { std::slice::from_raw_parts(q.as_ptr(), keep) };
            assert!(bytes.iter().enumerate().all(|(i, &b)| b == pattern(k, i)), "{h}: step {k} kept the bytes");
            if zeroed && size > keep {
                // SAFETY: `grow_zeroed` zeroed the bytes past the old size.
                let tail = unsafe { std::slice::from_raw_parts(q.as_ptr().add(keep), size - keep) };
                assert!(tail.iter().all(|&b| b == 0), "{h}: step {k} zeroed the new tail");
            }
            fill(q, size, k + 1);
            (p, layout) = (q, new);
        }
        // SAFETY: the last block, with its layout.
        unsafe { h.deallocate(p, layout) };
        if h.has_stats() {
            assert_clean(h);
        }
    }
}

fn fill(p: NonNull<u8>, size: usize, seed: usize) {
    for i in 0..size {
        // SAFETY: the block holds `size` writable bytes.
        unsafe { p.as_ptr().add(i).write(pattern(seed, i)) };
    }
}

#[test]
fn zero_sized_types_and_layouts_never_reach_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let h = private("tracking", &dir);
    let before = h.stats().unwrap().total_allocations;
    #[repr(align(4096))]
    struct Empty;
    {
        let mut units: Vec<(), Handler> = Vec::new_in(h);
        units.extend(std::iter::repeat_n((), 1_000_000));
        assert_eq!(units.len(), 1_000_000);
        let mut empties: Vec<Empty, Handler> = Vec::with_capacity_in(10, h);
        empties.push(Empty);
        assert_eq!(empties.as_ptr() as usize % 4096, 0);
        let b: Box<(), Handler> = Box::new_in((), h);
        drop(b);
        let empty: Vec<u64, Handler> = Vec::with_capacity_in(0, h);
        drop(empty);
        let m: HashMap<u64, u64, DefaultHashBuilder, Handler> = HashMap::new_in(h);
        assert!(m.is_empty());
    }
    let zero = Layout::from_size_align(0, 256).unwrap();
    let p = h.allocate(zero).unwrap();
    assert_eq!((p.len(), p.cast::<u8>().as_ptr() as usize % 256), (0, 0));
    // SAFETY: a zero-size block of `h` with its layout: growing from it is
    // allocating, shrinking to 0 is freeing.
    unsafe {
        let q = h.grow_zeroed(p.cast(), zero, Layout::new::<[u8; 40]>()).unwrap();
        assert!(q.as_ref().iter().all(|&b| b == 0));
        let r = h.shrink(q.cast(), Layout::new::<[u8; 40]>(), zero).unwrap();
        h.deallocate(r.cast(), zero);
    }
    assert_eq!(h.stats().unwrap().total_allocations, before + 1, "only the 40-byte block reached the plugin");
    assert_clean(h);
}

#[test]
fn a_panic_in_the_middle_of_a_collection_leaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let h = private("tracking", &dir);
    let r = std::panic::catch_unwind(|| {
        let mut m: HashMap<u64, Vec<u64, Handler>, DefaultHashBuilder, Handler> = HashMap::new_in(h);
        let mut boxes: Vec<Box<Page, Handler>, Handler> = Vec::new_in(h);
        for i in 0..1_000u64 {
            let mut v = Vec::new_in(h);
            v.extend(0..i);
            m.insert(i, v);
            boxes.push(Box::new_in(Page(i), h));
        }
        // A panic inside the collection's own code (a closure it calls).
        m.retain(|&k, _| if k == 777 { panic!("boom in retain") } else { k % 2 == 0 });
    });
    assert!(r.is_err());
    assert_clean(h);
}

#[test]
fn instance_handlers_serve_collections_and_outlive_their_owner() {
    let dir = tempfile::tempdir().unwrap();
    let aligned = private("aligned", &dir);
    let instance = aligned.instantiate("alignment=4096").unwrap();
    let h = instance.handler();
    let mut v: Vec<u8, Handler> = Vec::with_capacity_in(10, h);
    assert_eq!(v.as_ptr() as usize % 4096, 0);
    v.extend_from_slice(&[5; 10_000]);
    drop(instance); // the vector keeps the instance alive
    assert_eq!(v.as_ptr() as usize % 4096, 0);
    assert!(v.iter().all(|&b| b == 5));
    v.shrink_to(100);
    drop(v); // the last block: the instance is destroyed
    let mut after: Vec<u8, Handler> = Vec::new_in(h);
    assert!(after.try_reserve(8).is_err(), "a destroyed instance refuses to allocate");
}
