//! Where a block goes inside its reservation: pure arithmetic over
//! addresses, no memory touched.
//!
//! Every block gets a reservation of its own, all of it inaccessible except
//! a window of whole pages, the *data pages*, which hold the block:
//!
//! ```text
//! side=end:    | guard ≥ 1 page | head slack | block | tail < alignment | guard ≥ 1 page |
//! side=start:  | guard ≥ 1 page | block | tail slack < 1 page             | guard ≥ 1 page |
//!                               ^ data pages (readable, writable)         ^
//! ```
//!
//! With `side=end` the block ends on the first byte of the trailing guard
//! page, rounded up to the alignment: a block whose size is a multiple of
//! the alignment touches the guard, and one byte past it faults. With
//! `side=start` the block starts on the first byte after the leading guard
//! page. The slack bytes of the data pages around the block are filled with
//! a canary and checked when the block is freed, so a small overrun that
//! stays inside the slack is still caught, later.

/// The page-level plan for one request, before its address is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The block's size in bytes.
    pub size: usize,
    /// Bytes to reserve (a multiple of the page size).
    pub total: usize,
    /// Bytes of data pages inside the reservation.
    pub data_len: usize,
    /// Bytes from the block's start to the end of the data pages with
    /// `side=end` (the size rounded up to the alignment); the size with
    /// `side=start`.
    span: usize,
    /// The block's alignment.
    align: usize,
    /// `max(align, page)`: the alignment of the guarded edge.
    edge: usize,
    page: usize,
    side_end: bool,
}

/// Where the pieces of a placed block are, as absolute addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// The first data page.
    pub data_lo: usize,
    /// The end of the data pages (the first byte of the trailing guard).
    pub data_hi: usize,
    /// The block handed out.
    pub ptr: usize,
    /// The block's size.
    pub size: usize,
}

impl Placed {
    /// The slack before the block, inside the data pages: `[data_lo, ptr)`.
    pub fn head(&self) -> std::ops::Range<usize> {
        self.data_lo..self.ptr
    }

    /// The slack after the block, inside the data pages: `[ptr + size, data_hi)`.
    pub fn tail(&self) -> std::ops::Range<usize> {
        self.ptr + self.size..self.data_hi
    }
}

impl Plan {
    /// The plan for `size` bytes (`size >= 1`) aligned to `align` (a power
    /// of two) with pages of `page` bytes, guarded at the end (`side_end`)
    /// or the start. `None` if the sizes overflow the address space.
    pub fn new(size: usize, align: usize, page: usize, side_end: bool) -> Option<Plan> {
        debug_assert!(size >= 1 && align.is_power_of_two() && page.is_power_of_two());
        let edge = align.max(page);
        let span = if side_end { size.checked_next_multiple_of(align)? } else { size };
        let data_len = span.checked_next_multiple_of(page)?;
        // A guard page on each side, plus room to move the guarded edge up to
        // an `edge` boundary when the alignment exceeds a page.
        let total = data_len.checked_add(2 * page)?.checked_add(edge - page)?;
        Some(Plan { size, total, data_len, span, align, edge, page, side_end })
    }

    /// The block's alignment.
    pub fn align(&self) -> usize {
        self.align
    }

    /// Place the plan in a reservation starting at `base` (page-aligned,
    /// `total` bytes long).
    ///
    /// ```
    /// use memplug_guard::layout::Plan;
    ///
    /// let plan = Plan::new(100, 16, 4096, true).unwrap();
    /// let at = plan.at(0x10_0000);
    /// // The block, rounded up to 16 bytes, ends where the trailing guard begins.
    /// assert_eq!(at.ptr + 112, at.data_hi);
    /// assert_eq!(at.data_hi - at.data_lo, 4096);
    /// assert_eq!(at.tail().len(), 12); // the slack checked at free
    /// ```
    pub fn at(&self, base: usize) -> Placed {
        debug_assert_eq!(base % self.page, 0);
        if self.side_end {
            let data_hi = (base + self.page + self.data_len).next_multiple_of(self.edge);
            Placed { data_lo: data_hi - self.data_len, data_hi, ptr: data_hi - self.span, size: self.size }
        } else {
            let data_lo = (base + self.page).next_multiple_of(self.edge);
            Placed { data_lo, data_hi: data_lo + self.data_len, ptr: data_lo, size: self.size }
        }
    }
}

/// The canary byte at address `addr`: varies with the address, so that a
/// run of one repeated byte written over the slack is still noticed.
#[inline]
pub const fn canary(addr: usize) -> u8 {
    ((addr >> 3) as u8) ^ 0x5C
}

/// The canary repeats every `PERIOD` bytes of address.
const PERIOD: usize = 2048;

/// One period of canaries, so that filling and checking are `memcpy` and
/// `memcmp` rather than a loop over bytes.
static CANARIES: [u8; PERIOD] = {
    let mut t = [0u8; PERIOD];
    let mut i = 0;
    while i < PERIOD {
        t[i] = canary(i);
        i += 1;
    }
    t
};

/// The stretches of `len` bytes at address `addr` that each line up with
/// one piece of [`CANARIES`]: their offset from `addr`, and that piece.
fn stretches(addr: usize, len: usize) -> impl Iterator<Item = (usize, &'static [u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < len).then(|| {
            let phase = (addr + at) % PERIOD;
            let n = (PERIOD - phase).min(len - at);
            at += n;
            (at - n, &CANARIES[phase..phase + n])
        })
    })
}

/// Fill `bytes`, which sit at address `addr`, with their canaries.
pub fn fill_canaries(addr: usize, bytes: &mut [u8]) {
    for (off, canaries) in stretches(addr, bytes.len()) {
        bytes[off..off + canaries.len()].copy_from_slice(canaries);
    }
}

/// How many of `bytes`, which sit at address `addr`, no longer hold their
/// canary, and the address of the first.
pub fn damaged_canaries(addr: usize, bytes: &[u8]) -> (usize, Option<usize>) {
    let (mut count, mut first) = (0, None);
    for (off, canaries) in stretches(addr, bytes.len()) {
        let piece = &bytes[off..off + canaries.len()];
        if piece != canaries {
            for (i, _) in piece.iter().zip(canaries).enumerate().filter(|(_, (x, y))| x != y) {
                first = first.or(Some(addr + off + i));
                count += 1;
            }
        }
    }
    (count, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    /// Every placement keeps a whole guard page on both sides, stays inside
    /// its reservation, and is aligned; `side=end` blocks end on the guard
    /// (rounded to the alignment), `side=start` blocks begin on it.
    #[test]
    fn placements_keep_guards_inside_the_reservation() {
        let bases = [0x7000_0000_0000usize, 0x7000_0000_1000, 0x7000_0003_3000];
        for side_end in [true, false] {
            for align in [16usize, 64, 4096, 8192, 1 << 21] {
                for size in [1usize, 15, 16, 17, 100, 4095, 4096, 4097, 70_000, 3 << 20] {
                    let plan = Plan::new(size, align, PAGE, side_end).unwrap();
                    assert_eq!(plan.total % PAGE, 0);
                    for base in bases {
                        let at = plan.at(base);
                        let what = format!("size {size} align {align} end {side_end} base {base:#x}: {at:?}");
                        assert!(at.data_lo >= base + PAGE, "{what}");
                        assert!(at.data_hi + PAGE <= base + plan.total, "{what}");
                        assert_eq!(at.data_lo % PAGE, 0, "{what}");
                        assert_eq!(at.data_hi - at.data_lo, plan.data_len, "{what}");
                        assert_eq!(at.ptr % align, 0, "{what}");
                        assert!(at.ptr >= at.data_lo && at.ptr + size <= at.data_hi, "{what}");
                        if side_end {
                            assert_eq!(at.data_hi - (at.ptr + size), size.next_multiple_of(align) - size, "{what}");
                        } else {
                            assert_eq!(at.ptr, at.data_lo, "{what}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn canaries_fill_and_report_damage_at_any_address() {
        for (addr, len) in [(0x1000usize, 5000usize), (0x1ff9, 3), (0x2007, 4089), (0x3000, 0)] {
            let mut bytes = vec![0u8; len];
            fill_canaries(addr, &mut bytes);
            assert!(bytes.iter().enumerate().all(|(i, &b)| b == canary(addr + i)));
            assert_eq!(damaged_canaries(addr, &bytes), (0, None));
            if len > 2 {
                bytes[1] ^= 1;
                bytes[len - 1] ^= 0xFF;
                assert_eq!(damaged_canaries(addr, &bytes), (2, Some(addr + 1)));
            }
        }
    }

    #[test]
    fn overflowing_requests_have_no_plan() {
        assert_eq!(Plan::new(usize::MAX - 10, 16, PAGE, true), None);
        assert_eq!(Plan::new(usize::MAX - 5000, 16, PAGE, false), None);
    }
}
