//! The arithmetic of the bootstrap heap, without memory: its size classes
//! (two per power of two, from 32 bytes to 64 KiB), where a block goes in
//! the chunk that serves it, and the head word of a free list (a chunk
//! index and a generation packed into one `u64`, so that a compare-exchange
//! that raced with other pops and pushes — from another thread, or from a
//! signal handler that interrupted it on the same thread — fails instead of
//! taking a stale link).

#![forbid(unsafe_code)]

/// Chunks start on this many bytes (the header keeps blocks 16-aligned).
pub(crate) const GRAIN: usize = 16;

/// How many size classes.
pub(crate) const CLASSES: usize = 23;

/// The largest chunk the classes serve; larger requests are mapped.
pub(crate) const LARGEST: usize = 64 << 10;

/// Bytes of the chunks of class `k` (`k < CLASSES`): 32, 48, 64, 96, 128,
/// 192, … 49152, 65536.
pub(crate) const fn class_size(k: usize) -> usize {
    let base = 32 << (k / 2);
    if k.is_multiple_of(2) { base } else { base + base / 2 }
}

/// The smallest class whose chunks hold `total` bytes; `None` above
/// [`LARGEST`].
pub(crate) fn class_of(total: usize) -> Option<usize> {
    if total > LARGEST {
        return None;
    }
    if total <= 32 {
        return Some(0);
    }
    let p = total.next_power_of_two(); // 64 ..= LARGEST
    let e = (p.trailing_zeros() - 5) as usize; // class_size(2e) == p
    Some(if total <= p / 2 + p / 4 { 2 * e - 1 } else { 2 * e })
}

/// Where the block goes in a chunk at address `chunk` (a multiple of
/// [`GRAIN`]) of `chunk_size` bytes: the offset from the chunk to the
/// program's pointer, the first `align`-aligned address (a power of two)
/// with room for the header before it; `None` when `size` bytes do not fit
/// after it.
pub(crate) fn place(chunk: usize, chunk_size: usize, size: usize, align: usize) -> Option<usize> {
    let user = chunk.checked_add(GRAIN)?.checked_next_multiple_of(align.max(GRAIN))?;
    let offset = user - chunk;
    (offset.checked_add(size)? <= chunk_size).then_some(offset)
}

/// The chunk of a block the program holds at offset `user` of the region,
/// from its header (`total` bytes of chunk, the block `offset` bytes into
/// it): the chunk's offset and class, if the header describes a chunk the
/// heap could have made.
pub(crate) fn chunk_of(user: usize, total: usize, offset: usize) -> Option<(usize, usize)> {
    let chunk = user.checked_sub(offset)?;
    let k = class_of(total)?;
    (class_size(k) == total && chunk.is_multiple_of(GRAIN)).then_some((chunk, k))
}

/// The head of a free list: the chunk on top (its index plus one; 0 when
/// the list is empty) and how many times the head has changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    /// The generation: bumped by every successful pop and push.
    pub(crate) generation: u32,
    /// The top chunk's index plus one, or 0.
    pub(crate) top: u32,
}

impl Head {
    /// The packed word.
    pub(crate) const fn pack(self) -> u64 {
        (self.generation as u64) << 32 | self.top as u64
    }

    /// From a packed word.
    pub(crate) const fn unpack(word: u64) -> Head {
        Head { generation: (word >> 32) as u32, top: word as u32 }
    }

    /// The head after a pop or a push that leaves `top` on top.
    pub(crate) const fn then(self, top: u32) -> Head {
        Head { generation: self.generation.wrapping_add(1), top }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_grow_by_half_and_whole_steps_to_the_largest() {
        let sizes: Vec<usize> = (0..CLASSES).map(class_size).collect();
        assert_eq!(&sizes[..6], &[32, 48, 64, 96, 128, 192]);
        assert_eq!(sizes[CLASSES - 1], LARGEST);
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
        assert!(sizes.iter().all(|s| s % GRAIN == 0), "every chunk keeps the next one on its grain");
    }

    #[test]
    fn class_of_is_the_smallest_class_that_holds_the_request() {
        for total in 1..=LARGEST {
            let want = (0..CLASSES).find(|&k| class_size(k) >= total);
            assert_eq!(class_of(total), want, "total {total}");
        }
        assert_eq!(class_of(LARGEST + 1), None);
        assert_eq!(class_of(usize::MAX), None);
        assert_eq!(class_of(0), Some(0));
    }

    #[test]
    fn a_block_is_placed_aligned_after_its_header_or_not_at_all() {
        assert_eq!(place(0x1000, 64, 48, 16), Some(16));
        assert_eq!(place(0x1000, 64, 49, 16), None);
        // An aligned request: the first aligned address past the header.
        assert_eq!(place(0x1010, 1024, 100, 256), Some(0xf0));
        assert_eq!(place(0x1000, 1024, 100, 256), Some(0x100));
        // The request sizes the heap computes (size + max(align, 16)) fit in
        // the class that holds them, whatever the chunk's grain address.
        for align in [16, 32, 64, 256, 4096] {
            for size in [0, 1, 15, 16, 100, 1000, 8000] {
                let total = size + align;
                let k = class_of(total).unwrap();
                for chunk in (0x10000..0x10000 + 4096).step_by(GRAIN) {
                    let off = place(chunk, class_size(k), size, align).expect("fits");
                    assert!(off >= GRAIN && (chunk + off).is_multiple_of(align));
                }
            }
        }
        assert_eq!(place(usize::MAX - 8, 64, 1, 16), None, "no overflow");
    }

    #[test]
    fn a_chunk_is_found_from_a_header_that_could_be_the_heaps() {
        assert_eq!(chunk_of(0x1010, 48, 16), Some((0x1000, 1)));
        assert_eq!(chunk_of(0x1100, 1536, 0x100), Some((0x1000, class_of(1536).unwrap())));
        assert_eq!(chunk_of(0x1010, 50, 16), None, "not a class size");
        assert_eq!(chunk_of(0x1018, 48, 16), None, "not on the grain");
        assert_eq!(chunk_of(0x10, 48, 32), None, "before the region");
        assert_eq!(chunk_of(0x1010, LARGEST * 2, 16), None);
    }

    #[test]
    fn a_head_packs_and_every_change_bumps_its_generation() {
        let h = Head { generation: 7, top: 42 };
        assert_eq!(Head::unpack(h.pack()), h);
        assert_eq!(h.then(0), Head { generation: 8, top: 0 });
        let wrap = Head { generation: u32::MAX, top: 1 };
        assert_eq!(wrap.then(5), Head { generation: 0, top: 5 });
        assert_ne!(h.then(42).pack(), h.pack(), "the same top after a pop and a push is a new word (no ABA)");
    }
}
