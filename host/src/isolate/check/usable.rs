//! The conformance checks of the ABI 1.3 functions and flags:
//! - `usable-size` (a handler with `usable_size`): for blocks of several
//!   sizes, and after they grow and shrink, the usable size is at least the
//!   size asked for, every byte up to it can be written and read back, and
//!   the answer is the same when asked again of the live block; with
//!   `FLAG_KNOWS_FOREIGN`, the usable size of memory the handler did not
//!   make (the stack, a static, a libc `malloc` block) is 0;
//! - `sizeless-free` (a handler with `FLAG_SIZELESS_FREE`): `realloc` with
//!   old size 0 keeps a block's bytes as it grows and shrinks, and `free`
//!   with size 0 releases blocks (allocation keeps working after many).
//!
//! A failure's detail starts with its reason code, e.g.
//! `usable-size-too-small: …` ([`USABLE_SIZE_CODES`]).

use super::{alloc_failure, pattern};
use crate::heap::handler::Handler;
use std::ptr::NonNull;

/// The reason codes a failed `usable-size` or `sizeless-free` check starts
/// its detail with: the usable size is smaller than the block
/// (`usable-size-too-small`), changes while the block lives
/// (`usable-size-unstable`), is not answered for a live block
/// (`usable-size-unanswered`) or is not 0 for foreign memory under
/// `FLAG_KNOWS_FOREIGN` (`usable-size-of-foreign`); a block resized or
/// freed without its size lost its bytes or its memory (`sizeless-free-broken`).
pub const USABLE_SIZE_CODES: [&str; 5] = [
    "usable-size-too-small",
    "usable-size-unstable",
    "usable-size-unanswered",
    "usable-size-of-foreign",
    "sizeless-free-broken",
];

const SIZES: [usize; 6] = [1, 16, 17, 100, 4096, 1 << 20];

/// The bytes of a `len`-byte block these checks write and read back: the
/// first 256 of every 4096 (every page of a large block is touched, at a
/// sixteenth of the cost of all of it: the checks run in every worker),
/// and with `tail` the last 64 as well.
fn sampled(len: usize, tail: bool) -> impl Iterator<Item = usize> {
    let pages = (0..len).step_by(4096).flat_map(move |start| start..(start + 256).min(len));
    pages.chain(if tail { len.saturating_sub(64)..len } else { 0..0 })
}

/// Write the sampled bytes of `b` (see [`sampled`]).
fn fill(b: &mut [u8], seed: usize, tail: bool) {
    for i in sampled(b.len(), tail) {
        b[i] = pattern(seed, i);
    }
}

/// Read the sampled bytes of `b` back.
fn verify(b: &[u8], seed: usize, tail: bool, what: &str) -> Result<(), String> {
    match sampled(b.len(), tail).find(|&i| b[i] != pattern(seed, i)) {
        None => Ok(()),
        Some(i) => Err(format!("{what}: byte {i} is {:#04x}, expected {:#04x}", b[i], pattern(seed, i))),
    }
}

/// A live block of the handler, freed with its size on drop.
struct Live {
    h: Handler,
    ptr: NonNull<u8>,
    size: usize,
}

#[allow(unsafe_code)]
impl Live {
    fn new(h: Handler, size: usize) -> Result<Live, String> {
        let ptr = h.alloc(size).map_err(alloc_failure)?;
        Ok(Live { h, ptr, size })
    }

    /// The block's usable size, checked against its size and asked twice.
    fn usable(&self, when: &str) -> Result<usize, String> {
        // SAFETY: a live block of `h` from `alloc` or `realloc`.
        let answer = || unsafe { self.h.usable_size(self.ptr) };
        let Some(u) = answer() else {
            return Err(format!("usable-size-unanswered: no usable size for a live {}-byte block {when}", self.size));
        };
        if u < self.size {
            return Err(format!(
                "usable-size-too-small: a {}-byte block {when} has usable size {u}, less than its size",
                self.size
            ));
        }
        match answer() {
            Some(again) if again == u => Ok(u),
            again => Err(format!(
                "usable-size-unstable: a live {}-byte block {when} has usable size {u}, then {again:?}",
                self.size
            )),
        }
    }

    /// Write the usable bytes (every page, and the very last ones), read
    /// them back.
    fn write_usable(&mut self, usable: usize, seed: usize, when: &str) -> Result<(), String> {
        // SAFETY: the handler says `usable` bytes of the live block may be
        // used (checked at least `size` above); nothing else refers to them.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), usable) };
        fill(bytes, seed, true);
        verify(bytes, seed, true, &format!("the {usable} usable bytes of a {}-byte block {when}", self.size))
    }

    fn realloc(&mut self, new_size: usize) -> Result<(), String> {
        // SAFETY: a live block of `h` of `size` bytes; replaced on success.
        self.ptr = unsafe { self.h.realloc(self.ptr, self.size, new_size) }.map_err(alloc_failure)?;
        self.size = new_size;
        Ok(())
    }
}

#[allow(unsafe_code)]
impl Drop for Live {
    fn drop(&mut self) {
        // SAFETY: a live block of `h` of `size` bytes, not used again.
        unsafe { self.h.free(self.ptr, self.size) }
    }
}

pub(super) fn check_usable_size(h: Handler) -> Result<(), String> {
    for size in SIZES {
        let mut b = Live::new(h, size)?;
        let u = b.usable("as allocated")?;
        b.write_usable(u, size, "as allocated")?;
        for (what, new_size) in [("grown", size * 3 + 5), ("shrunk", (size / 2).max(1))] {
            b.realloc(new_size)?;
            let when = format!("{what} from {size} bytes");
            let u = b.usable(&when)?;
            b.write_usable(u, size + new_size, &when)?;
        }
    }
    if h.knows_foreign() {
        check_foreign(h)?;
    }
    Ok(())
}

static A_STATIC: [u8; 64] = [7; 64];

/// Memory the handler did not make: the usable size is 0.
#[allow(unsafe_code)]
fn check_foreign(h: Handler) -> Result<(), String> {
    let on_stack = [0u8; 64];
    // SAFETY: libc's malloc of a small size; freed below.
    let from_libc = unsafe { libc::malloc(64) } as *const u8;
    let cases = [("the stack", on_stack.as_ptr()), ("a static", A_STATIC.as_ptr()), ("a libc malloc block", from_libc)];
    let mut wrong = None;
    for (what, ptr) in cases.into_iter().filter(|(_, p)| !p.is_null()) {
        match h.usable_size_any(ptr) {
            Some(0) => {}
            other => {
                wrong = Some(format!(
                    "usable-size-of-foreign: the handler declares FLAG_KNOWS_FOREIGN, but the usable size of memory \
                     on {what} at {ptr:p} is {other:?}, not 0"
                ));
                break;
            }
        }
    }
    // SAFETY: the block from libc's malloc above, freed once (NULL is fine).
    unsafe { libc::free(from_libc as *mut libc::c_void) };
    wrong.map_or(Ok(()), Err)
}

#[allow(unsafe_code)]
pub(super) fn check_sizeless_free(h: Handler) -> Result<(), String> {
    let broken = |what: String| format!("sizeless-free-broken: {what}");
    for (i, size) in [1usize, 100, 4096, 1 << 20].into_iter().enumerate() {
        let p = h.alloc(size).map_err(alloc_failure)?;
        // SAFETY: a live block of `size` bytes, used only here.
        fill(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), size) }, i, false);
        let mut kept = (p, size);
        for new_size in [size * 2 + 8, (size / 2).max(1)] {
            // SAFETY: a live block of `h` (the handler declares
            // FLAG_SIZELESS_FREE); replaced on success.
            let q = match unsafe { h.realloc_sizeless(kept.0, new_size) } {
                Ok(q) => q,
                Err(e) => {
                    // SAFETY: the old block is untouched and still live.
                    unsafe { h.free_sizeless(kept.0) };
                    return Err(broken(format!("realloc with old size 0 to {new_size} bytes failed: {e}")));
                }
            };
            let keep = kept.1.min(new_size);
            // SAFETY: the resized block holds at least `keep` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(q.as_ptr(), keep) };
            let seen = verify(bytes, i, false, &format!("a {size}-byte block resized to {new_size} with old size 0"));
            // SAFETY: a live block of `new_size` bytes, used only here.
            fill(unsafe { std::slice::from_raw_parts_mut(q.as_ptr(), new_size) }, i, false);
            kept = (q, new_size);
            if let Err(e) = seen {
                // SAFETY: a live block, not used again.
                unsafe { h.free_sizeless(q) };
                return Err(broken(e));
            }
        }
        // SAFETY: a live block of `h`, not used again.
        unsafe { h.free_sizeless(kept.0) };
    }
    // Allocation keeps working after blocks were freed without their size
    // (a handler that lost track of them might not).
    for _ in 0..128 {
        let p =
            h.alloc(1 << 16).map_err(|e| broken(format!("after blocks freed with size 0: {}", alloc_failure(e))))?;
        // SAFETY: a live block of `h`, not used again.
        unsafe { h.free_sizeless(p) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sampled;

    #[test]
    fn the_sample_touches_every_page_and_the_tail() {
        let len = 3 * 4096 + 100;
        let at: Vec<usize> = sampled(len, true).collect();
        for page in [0, 4096, 8192, 12288] {
            assert!(at.contains(&page) && at.contains(&(page + 99)), "page at {page}");
        }
        assert!(at.contains(&(len - 1)) && !at.contains(&300));
        assert!(sampled(len, false).all(|i| i % 4096 < 256), "without the tail, page heads only");
        assert_eq!(sampled(10, true).max(), Some(9));
    }
}
