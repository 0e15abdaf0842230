//! The bundled `hugepage` plugin against the `system` plugin (libc) on a
//! 256 MiB array, side by side in one run (interleaved rounds, see
//! `benches/common`). Three workloads, each a table of its own:
//!
//! - `fresh`: allocate the array, touch its pages in a random order (one
//!   word written per 4 KiB page: the page faults, in an order that defeats
//!   the kernel's fault-around and the prefetchers), sum all of it, free it —
//!   per 4 KiB page;
//! - `gather`: on an array allocated and touched once, read one word from
//!   every 4 KiB page in a random order, eight times over — per read. This
//!   is where the TLB is: 65 536 pages of 4 KiB, or 128 huge pages;
//! - `sum`: on the same arrays, a sequential sum of all of it — per 4 KiB
//!   page (bandwidth, where huge pages matter least).
//!
//! Before the tables it prints whether the kernel actually granted huge
//! pages: the `AnonHugePages` of each array's mapping in `/proc/self/smaps`.
//!
//! Run: `cargo bench --bench hugepage` (`ROUNDS=n` for more rounds than
//! the default 15).

mod common;

use common::variant;
use memplug::{Handler, Registry};
use std::hint::black_box;
use std::ptr::NonNull;

const LEN: usize = 256 << 20;
const PAGE: usize = 4096;
const PAGES: usize = LEN / PAGE;
const WORDS_PER_PAGE: usize = PAGE / 8;
/// Passes of the gather workload per round.
const GATHER_PASSES: usize = 8;

/// A random permutation of the page numbers (xorshift, Fisher-Yates).
fn random_pages() -> Vec<usize> {
    let mut order: Vec<usize> = (0..PAGES).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..PAGES).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// The array as words.
///
/// # Safety
/// `p` is a live block of `LEN` bytes, at least 8-byte aligned, whose every
/// page was written (so every word is initialised).
unsafe fn words<'a>(p: NonNull<u8>) -> &'a mut [u64] {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts_mut(p.as_ptr().cast::<u64>(), LEN / 8) }
}

/// Write one word per page, in `order`; the first touch of each page.
fn touch(p: NonNull<u8>, order: &[usize]) {
    for &page in order {
        // SAFETY: `page < PAGES`, so the word is inside the `LEN`-byte block.
        unsafe { p.as_ptr().cast::<u64>().add(page * WORDS_PER_PAGE).write(page as u64) };
    }
}

fn sum(w: &[u64]) -> u64 {
    w.iter().fold(0u64, |a, &x| a.wrapping_add(x))
}

/// Allocate, touch at random, sum, free. Returns pages.
fn fresh(h: Handler, order: &[usize]) -> usize {
    let p = h.alloc_zeroed(LEN / 8, 8).expect("256 MiB");
    touch(p, order);
    // SAFETY: `p` holds `LEN` zeroed (then partly written) bytes.
    black_box(sum(unsafe { words(p) }));
    // SAFETY: `p` came from `h` with `LEN` bytes.
    unsafe { h.free(p, LEN) };
    PAGES
}

/// One word of every page, in `order`, `GATHER_PASSES` times. Returns reads.
fn gather(w: &[u64], order: &[usize]) -> usize {
    let mut s = 0u64;
    for pass in 0..GATHER_PASSES {
        for &page in order {
            s = s.wrapping_add(w[page * WORDS_PER_PAGE + (page + pass * 61) % WORDS_PER_PAGE]);
        }
    }
    black_box(s);
    PAGES * GATHER_PASSES
}

/// `AnonHugePages` (kB) of the mapping holding `addr`, from smaps.
fn anon_huge_kb(addr: usize) -> u64 {
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut inside = false;
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-')
            && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
        {
            inside = (a..b).contains(&addr);
            continue;
        }
        if inside && let Some(v) = line.strip_prefix("AnonHugePages:") {
            return v.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
        }
    }
    0
}

fn main() {
    if common::listing() {
        return;
    }
    let r = Registry::new();
    let system = r.load_path(common::plugin("system")).expect("system plugin");
    let huge = r.load_path(common::plugin("hugepage")).expect("hugepage plugin");
    let order = random_pages();
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    println!("THP setting: {}", thp.trim());

    // The warm arrays, allocated and touched once; what the kernel gave.
    let warm: Vec<(Handler, NonNull<u8>)> = [system, huge]
        .into_iter()
        .map(|h| {
            let p = h.alloc_zeroed(LEN / 8, 8).expect("256 MiB");
            touch(p, &order);
            let kb = anon_huge_kb(p.as_ptr() as usize);
            println!(
                "{:>8}: 256 MiB array at {:p}: AnonHugePages {kb} kB ({:.0}% of it on huge pages)",
                h.name(),
                p.as_ptr(),
                kb as f64 * 100.0 / (LEN >> 10) as f64
            );
            (h, p)
        })
        .collect();
    println!();

    let rounds = common::rounds(15);
    common::run(
        "fresh: alloc 256 MiB, touch pages in random order, sum, free (per 4 KiB page)",
        rounds,
        &mut [variant("system", || fresh(system, &order)), variant("hugepage", || fresh(huge, &order))],
    );
    // SAFETY: each warm array is live, `LEN` bytes, every page written.
    let (ws, wh) = unsafe { (words(warm[0].1), words(warm[1].1)) };
    common::run(
        "gather: one word of every page in random order, 8 passes (per read)",
        rounds,
        &mut [variant("system", || gather(ws, &order)), variant("hugepage", || gather(wh, &order))],
    );
    common::run(
        "sum: sequential sum of the warm 256 MiB array (per 4 KiB page)",
        rounds,
        &mut [
            variant("system", || {
                black_box(sum(ws));
                PAGES
            }),
            variant("hugepage", || {
                black_box(sum(wh));
                PAGES
            }),
        ],
    );
    for (h, p) in warm {
        // SAFETY: each warm array came from its handler with `LEN` bytes.
        unsafe { h.free(p, LEN) };
    }
}
