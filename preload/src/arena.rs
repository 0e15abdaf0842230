//! The bootstrap arena: a bump allocator over a static buffer that serves
//! every allocation made before the plugin is ready (the dynamic loader,
//! this library's start-up, `dlopen` of the plugin, the plugin's own
//! constructor) and any made from inside a plugin call on the same thread.
//! Frees of its blocks are ignored; its blocks are recognised by address.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of the arena.
pub(crate) const SIZE: usize = 8 << 20;

/// The buffer, page-aligned.
#[repr(C, align(4096))]
struct Buffer(UnsafeCell<[u8; SIZE]>);

// SAFETY: disjoint ranges of the buffer are handed out by an atomic bump
// pointer; no two callers ever get the same bytes.
unsafe impl Sync for Buffer {}

static BUFFER: Buffer = Buffer(UnsafeCell::new([0; SIZE]));
/// Offset of the first free byte.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The buffer's first address.
fn base() -> usize {
    BUFFER.0.get() as usize
}

/// Take `total` bytes whose address plus `offset` is a multiple of
/// `align` (a power of two): the raw start of a block; null when the arena
/// is exhausted.
pub(crate) fn take(total: usize, align: usize, offset: usize) -> *mut u8 {
    let mut cur = NEXT.load(Ordering::Relaxed);
    loop {
        let start = base() + cur;
        let user = (start + offset + align - 1) & !(align - 1);
        let raw = user - offset;
        let Some(end) = (raw - base()).checked_add(total) else { return core::ptr::null_mut() };
        if end > SIZE {
            return core::ptr::null_mut();
        }
        match NEXT.compare_exchange_weak(cur, end, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return raw as *mut u8,
            Err(now) => cur = now,
        }
    }
}

/// Whether `p` points into the arena.
pub(crate) fn contains(p: *const u8) -> bool {
    let p = p as usize;
    p >= base() && p < base() + SIZE
}

/// Bytes of the arena used so far.
pub(crate) fn used() -> usize {
    NEXT.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_after_their_header_and_recognised() {
        for align in [16, 64, 4096] {
            let raw = take(100, align, 16);
            assert!(!raw.is_null());
            assert_eq!((raw as usize + 16) % align, 0);
            assert!(contains(raw) && contains(raw.wrapping_add(115)));
        }
        assert!(!contains(core::ptr::null()));
        assert!(take(SIZE + 1, 16, 16).is_null(), "more than the arena holds fails, never overruns");
    }
}
