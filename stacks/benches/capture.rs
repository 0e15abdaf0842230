//! What one stack costs: `capture(32)` (and `intern`) at the bottom of a
//! 40-frame call chain without frame pointers, which runs through libc
//! (`qsort`'s comparison callback) half-way. The unwinder is the one
//! `MEMPLUG_UNWINDER` picks (`libunwind`, the default when
//! `libunwind.so.8` is installed, or `libgcc`): run the bench once with each
//! to compare them (scripts/bench.sh does).

use criterion::{Criterion, criterion_main};
use memplug_stacks::capture::{self, DEFAULT_DEPTH};
use std::hint::black_box;

/// Recurse `n` frames (not inlined, each with a frame of its own), then
/// run `f` at the bottom.
#[inline(never)]
fn deep(n: u32, f: &mut dyn FnMut()) -> u64 {
    let local = black_box([u64::from(n); 4]);
    if n == 0 {
        f();
        return local[0];
    }
    deep(n - 1, f) + black_box(local[1])
}

thread_local! {
    static BOTTOM: std::cell::RefCell<Option<Box<dyn FnMut()>>> = const { std::cell::RefCell::new(None) };
}

/// `qsort`'s comparison: the first call runs the rest of the chain.
extern "C" fn compare(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
    BOTTOM.with(|b| {
        if let Some(mut f) = b.borrow_mut().take() {
            deep(20, &mut *f);
        }
    });
    // SAFETY: qsort passes pointers into the array of i32 below.
    unsafe { *a.cast::<i32>() - *b.cast::<i32>() }
}

/// 20 frames, libc's `qsort`, 20 more frames, then `f`.
fn through_libc(f: Box<dyn FnMut()>) {
    BOTTOM.with(|b| *b.borrow_mut() = Some(f));
    deep(20, &mut || {
        let mut xs = [3i32, 1, 2];
        // SAFETY: three i32 and a comparison of i32.
        unsafe { libc::qsort(xs.as_mut_ptr().cast(), 3, 4, Some(compare)) };
    });
}

/// The one benchmark.
fn bench(c: &mut Criterion) {
    let backend = capture::init();
    let name = format!("capture {DEFAULT_DEPTH} frames of a 40-frame stack through libc ({})", backend.name());
    // Criterion's rounds are timed at the bottom of the chain.
    c.bench_function(&name, |b| {
        b.iter_custom(|iters| {
            let spent = std::rc::Rc::new(std::cell::Cell::new(std::time::Duration::ZERO));
            let out = spent.clone();
            through_libc(Box::new(move || {
                assert!(capture::capture(DEFAULT_DEPTH).frames().len() >= DEFAULT_DEPTH, "a deep stack");
                let t = std::time::Instant::now();
                for _ in 0..iters {
                    black_box(black_box(capture::capture(DEFAULT_DEPTH)).intern());
                }
                out.set(t.elapsed());
            }));
            spent.get()
        })
    });
}

/// The benchmark group runner (what `criterion_group!` would generate,
/// written out so that it carries documentation).
pub fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
}

criterion_main!(benches);
