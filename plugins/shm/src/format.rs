//! The segment's format: where everything is, as offsets from the segment's
//! start (never pointers: every process maps the segment at its own
//! address). Pure arithmetic.
//!
//! ```text
//! 0      header page (4096 bytes): magic, version, size, generation, the
//!        allocator's state (top, clean_from, free list head), the journal
//!        of the operation in progress, the statistics, and at MUTEX_AT the
//!        process-shared robust pthread mutex
//! 4096   blocks, back to back, up to `top`
//! top    never allocated since the segment was made or last shrank to it
//! size   end
//! ```
//!
//! A block starts with two 8-byte words:
//! - `word` = size | flags: the block's size (header included, a multiple
//!   of 16) and [`USED`], [`PREV_FREE`] and the constant [`TAG`] bit (so a
//!   zero word is never a block). It is written in one store, so that the
//!   chain of blocks from the data start to `top` can always be walked,
//!   whenever a process dies;
//! - `seal`: for a used block, the size asked for, sealed with the block's
//!   offset ([`seal`]); 0 once freed, so a stale header is never taken for
//!   a live block.
//!
//! A free block keeps, after its header, the offsets of the next and
//! previous free blocks, and its size again in its last word (a footer), so
//! the block after it can find it. The free list and footers are derived
//! data: a repair rebuilds them from the walk.

/// The first word of a made segment: "MPLGSHM1".
pub const MAGIC: u64 = u64::from_le_bytes(*b"MPLGSHM1");
/// The format's version.
pub const VERSION: u64 = 1;
/// Bytes of the header: the blocks start here.
pub const DATA_START: u64 = 4096;

/// Offsets of the header's 8-byte fields.
pub mod at {
    /// [`MAGIC`](super::MAGIC), written last when the segment is made.
    pub const MAGIC: u64 = 0;
    /// [`VERSION`](super::VERSION).
    pub const VERSION: u64 = 8;
    /// The segment's size in bytes.
    pub const SIZE: u64 = 16;
    /// The segment's incarnation: random, never 0.
    pub const GENERATION: u64 = 24;
    /// The PID of the process that made it.
    pub const CREATOR: u64 = 32;
    /// Where the never-allocated top starts.
    pub const TOP: u64 = 40;
    /// From here on the memory was never written: it is still zero.
    pub const CLEAN_FROM: u64 = 48;
    /// The first free block (0: none).
    pub const FREE_HEAD: u64 = 56;
    /// The journal: the operation in progress ([`Op`](super::Op)).
    pub const OP: u64 = 64;
    /// The journal: the block it concerns.
    pub const OP_BLOCK: u64 = 72;
    /// The PID holding the lock (0: none), for the recovery message.
    pub const LOCK_OWNER: u64 = 80;
    /// 1 when a process stopped in the middle of an operation without
    /// dying (a caught panic): the next lock repairs.
    pub const DIRTY: u64 = 88;
    /// Statistics: bytes asked for by the live blocks.
    pub const LIVE_BYTES: u64 = 96;
    /// Statistics: the highest `LIVE_BYTES` seen.
    pub const PEAK_BYTES: u64 = 104;
    /// Statistics: successful allocations.
    pub const TOTAL_ALLOCATIONS: u64 = 112;
    /// Statistics: live blocks.
    pub const LIVE_COUNT: u64 = 120;
    /// Statistics: frees of pointers that are not live blocks.
    pub const BAD_FREES: u64 = 128;
    /// Statistics: frees whose size differs from the block's.
    pub const SIZE_MISMATCHES: u64 = 136;
    /// Statistics: repairs after a process died holding the lock.
    pub const RECOVERIES: u64 = 144;
    /// Statistics: instances attached now (a killed process stays counted).
    pub const ATTACHED: u64 = 152;
    /// Statistics: attachments ever made.
    pub const ATTACHES: u64 = 160;
    /// Statistics: bytes withheld after a repair found damaged headers.
    pub const WITHHELD: u64 = 168;
    /// The withheld range (0 if none): no block in it is freed or reused.
    pub const WITHHELD_FROM: u64 = 176;
    /// The end of the withheld range.
    pub const WITHHELD_TO: u64 = 184;
}

/// Where the process-shared robust mutex lives (up to 128 bytes).
pub const MUTEX_AT: u64 = 256;
/// The room kept for the mutex.
pub const MUTEX_ROOM: u64 = 128;

/// [`at::OP`] values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Nothing in progress.
    None = 0,
    /// Allocating the block at [`at::OP_BLOCK`] (it never reached the caller).
    Alloc = 1,
    /// Freeing the block at [`at::OP_BLOCK`].
    Free = 2,
}

impl Op {
    /// The operation a journal value names.
    pub fn of(value: u64) -> Op {
        match value {
            1 => Op::Alloc,
            2 => Op::Free,
            _ => Op::None,
        }
    }
}

/// Block flag: in use.
pub const USED: u64 = 1;
/// Block flag: the block before this one is free (its footer is valid).
pub const PREV_FREE: u64 = 2;
/// Block flag: always set in a block's word.
pub const TAG: u64 = 8;
/// The flag bits of a word.
pub const FLAGS: u64 = 15;
/// Bytes of a block header.
pub const HEADER: u64 = 16;
/// The smallest block: a header, two links and a footer, rounded to 16.
pub const MIN_BLOCK: u64 = 48;
/// Offset of a free block's next link.
pub const NEXT: u64 = 16;
/// Offset of a free block's previous link.
pub const PREV: u64 = 24;

/// The size of a block holding `len` bytes (at least [`MIN_BLOCK`]); `None`
/// if it overflows.
pub fn block_size(len: u64) -> Option<u64> {
    let need = len.checked_add(HEADER + 15)? & !15;
    Some(need.max(MIN_BLOCK))
}

/// A block word.
pub fn word(size: u64, used: bool, prev_free: bool) -> u64 {
    size | TAG | if used { USED } else { 0 } | if prev_free { PREV_FREE } else { 0 }
}

/// The size in a block word.
pub fn size_of(word: u64) -> u64 {
    word & !FLAGS
}

/// The seal of a used block at `block` holding `len` bytes.
pub fn seal(len: u64, block: u64) -> u64 {
    len ^ block.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EA1_5EA1_5EA1_5EA1
}

/// The length sealed in `value` for the block at `block`, if it is a
/// plausible one for a block of `size` bytes.
pub fn unseal(value: u64, block: u64, size: u64) -> Option<u64> {
    let len = seal(value, block);
    (value != 0 && len <= size - HEADER && block_size(len).is_some_and(|s| s <= size)).then_some(len)
}

/// Whether `word` is a well-formed block word for a block at `block` in a
/// heap ending at `end`.
pub fn is_block(word: u64, block: u64, end: u64) -> bool {
    let size = size_of(word);
    word & TAG != 0 && word & 4 == 0 && size >= MIN_BLOCK && block.checked_add(size).is_some_and(|e| e <= end)
}

/// The segment size for `size` bytes asked: whole pages, at least a header
/// and one small block.
pub fn segment_size(size: u64) -> u64 {
    size.div_ceil(4096).saturating_mul(4096).max(DATA_START + 4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_what_was_asked() {
        assert_eq!(block_size(1), Some(MIN_BLOCK));
        assert_eq!(block_size(32), Some(MIN_BLOCK));
        assert_eq!(block_size(33), Some(64));
        assert_eq!(block_size(64), Some(80));
        assert_eq!(block_size(u64::MAX - 8), None);
        for len in [0u64, 1, 15, 16, 100, 4096] {
            let size = block_size(len).unwrap();
            assert_eq!(unseal(seal(len, 4096), 4096, size), Some(len));
            assert_eq!(unseal(seal(len, 4096), 4112, size), None, "another block's seal");
            assert_eq!(unseal(0, 4096, size), None, "a freed block");
        }
        let w = word(64, true, true);
        assert_eq!((size_of(w), w & USED, w & PREV_FREE), (64, USED, PREV_FREE));
        assert!(is_block(w, 4096, 4096 + 64) && !is_block(w, 4096, 4096 + 63) && !is_block(0, 4096, 1 << 20));
        assert_eq!(segment_size(100_000), 102_400);
    }
}
