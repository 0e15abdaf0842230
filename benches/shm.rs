//! What allocating from the bundled `shm` plugin (blocks in a POSIX
//! shared-memory segment, every call under the segment's process-shared
//! robust lock) costs against the `system` plugin (libc), side by side in
//! one run (interleaved rounds, see `benches/common`):
//!
//! - `pair64`: one 64-byte allocation and its free;
//! - `pair1m`: one 1 MiB allocation and its free (nothing touched);
//! - `touch1m`: one 1 MiB allocation, one byte written in each 4 KiB page,
//!   and its free;
//! - `batch`: 1000 allocations of mixed sizes (16 B to 4 KiB) held live,
//!   each written once, then freed in another order — per allocation+free
//!   (the first-fit free list at work);
//! - `share`: `Buffer::share` of a block and attaching the handle again
//!   through the instance it names (what a worker process does with a
//!   handle), per round trip: while another block of the segment is
//!   attached here (the instance is reused: `resolve` only), and as the
//!   first attachment (`shm_open`, `mmap`, and `munmap` when it goes).
//!
//! The `shm` instance has a 256 MiB segment of this process.
//!
//! Run: `cargo bench --bench shm` (`ROUNDS=n`, default 60).

mod common;

use common::variant;
use memplug::{Buffer, Handler, Registry};
use std::hint::black_box;
use std::ptr::NonNull;

const BATCH: usize = 1000;
const MIB: usize = 1 << 20;

fn pair(h: Handler, size: usize, iters: usize) -> usize {
    for _ in 0..iters {
        let p = h.alloc(black_box(size)).expect("alloc");
        // SAFETY: `p` came from `h` with `size` bytes, freed once.
        unsafe { h.free(black_box(p), size) };
    }
    iters
}

fn touch(h: Handler, iters: usize) -> usize {
    for _ in 0..iters {
        let p = h.alloc(MIB).expect("alloc");
        for page in (0..MIB).step_by(4096) {
            // SAFETY: `page < MIB`: inside the block.
            unsafe { p.as_ptr().add(page).write(page as u8) };
        }
        // SAFETY: `p` came from `h` with `MIB` bytes, freed once.
        unsafe { h.free(black_box(p), MIB) };
    }
    iters
}

fn batch(h: Handler, sizes: &[usize], order: &[usize], live: &mut Vec<(NonNull<u8>, usize)>) -> usize {
    live.clear();
    for &s in sizes {
        let p = h.alloc(s).expect("alloc");
        // SAFETY: `p` has at least `s >= 16` writable bytes.
        unsafe { p.as_ptr().write(s as u8) };
        live.push((p, s));
    }
    for &i in order {
        let (p, s) = live[i];
        // SAFETY: each block came from `h` with size `s` and is freed once.
        unsafe { h.free(black_box(p), s) };
    }
    sizes.len()
}

fn share(registry: &Registry, buf: &Buffer, iters: usize) -> usize {
    for _ in 0..iters {
        let block = buf.share().expect("share");
        // SAFETY: nothing writes the block while the attached buffer lives.
        let attached = unsafe { registry.attach(black_box(&block)) }.expect("attach");
        black_box(attached.as_ptr());
    }
    iters
}

fn main() {
    if common::listing() {
        return;
    }
    let r = Registry::new();
    let system = r.load_path(common::plugin("system")).expect("system plugin");
    let plugin = r.load_path(common::plugin("shm")).expect("shm plugin");
    let instance = plugin.instantiate("size=256m").expect("a 256 MiB segment");
    let shm = instance.handler();

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

    let rounds = common::rounds(60);
    common::run(
        "pair64: one 64-byte allocation + free",
        rounds,
        &mut [variant("system", || pair(system, 64, 2000)), variant("shm", || pair(shm, 64, 2000))],
    );
    common::run(
        "pair1m: one 1 MiB allocation + free",
        rounds,
        &mut [variant("system", || pair(system, MIB, 500)), variant("shm", || pair(shm, MIB, 500))],
    );
    common::run(
        "touch1m: one 1 MiB allocation, a byte written per 4 KiB page, free",
        rounds,
        &mut [variant("system", || touch(system, 20)), variant("shm", || touch(shm, 20))],
    );
    let (mut ls, mut lh) = (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH));
    common::run(
        "batch: 1000 live blocks of 16 B-4 KiB, then freed in another order (per alloc+free)",
        rounds,
        &mut [
            variant("system", || batch(system, &sizes, &order, &mut ls)),
            variant("shm", || batch(shm, &sizes, &order, &mut lh)),
        ],
    );
    let small = Buffer::from_slice_in(&[7; 64], shm).expect("a block");
    let other = Buffer::from_slice_in(&[8; 64], shm).expect("a block");
    let (fresh, attached) = (Registry::new(), Registry::new());
    for reg in [&fresh, &attached] {
        reg.load_path(common::plugin("shm")).expect("shm plugin");
    }
    // SAFETY: nothing writes `other` while this attachment lives.
    let keep = unsafe { attached.attach(&other.share().expect("share")) }.expect("attach");
    common::run(
        "share: share a 64-byte block and attach its handle (per round trip; baseline: pair64 of shm)",
        rounds,
        &mut [
            variant("shm pair64", || pair(shm, 64, 200)),
            variant("share+attach, segment attached", || share(&attached, &small, 200)),
            variant("share+attach, first attachment", || share(&fresh, &small, 20)),
        ],
    );
    drop(keep);
    let s = shm.stats().expect("shm statistics");
    assert_eq!((s.live_count, s.bad_frees, s.size_mismatches), (2, 0, 0), "{s:?}");
}
