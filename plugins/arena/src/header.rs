//! Raw block memory: the 16-byte header in front of every small block, the
//! free-list link a freed block holds, and the two bulk writes into a block
//! (zeroing a reused one, copying one that moves).
//!
//! Owns the header's layout (a tag word, then a word holding the size and the
//! class), the tags that mark live and freed blocks, and the per-class free
//! lists threaded through freed blocks. It touches only the [`HEADER`] bytes
//! in front of a block and the payload of a block it is handed, through raw
//! pointers whose validity its callers vouch for (every such function is an
//! `unsafe fn` saying what they vouch). It imports nothing from the crate.
//!
//! This file and `sys.rs` are the arena's raw layer: the only places that
//! read or write memory through raw pointers or call the OS and libc. The
//! modules above them call their `unsafe fn`s, each call with its argument.

use std::ptr;

/// Bytes in front of every small block: its tag, then its size and class.
pub const HEADER: usize = 16;

/// Tag of a live small block, XORed with its address.
const LIVE: u64 = 0xA7E4_A11C_0DE5_10B5;
/// Tag of a freed small block, XORed with its address.
const FREED: u64 = 0xF7EE_DA7E_4A0F_F7EE;
/// Where the class sits in the header's size word.
const CLASS_SHIFT: u32 = 56;
/// The size bits of the header's size word.
const SIZE_MASK: u64 = (1 << CLASS_SHIFT) - 1;

/// Whether a header can record `size` (below 2^56 bytes); the arena refuses
/// larger requests.
#[inline]
pub(crate) fn fits(size: usize) -> bool {
    size as u64 <= SIZE_MASK
}

/// What the header in front of a pointer says, checked against the pointer.
#[derive(Clone, Copy)]
pub(crate) enum Header {
    /// A live small block of `class`, holding `size` bytes.
    Live { class: usize, size: usize },
    /// A block this arena made and has freed since.
    Freed,
    /// No header this arena wrote for this address.
    Foreign,
}

/// Write a header in front of `p`.
///
/// # Safety
/// `p` has [`HEADER`] writable, 16-aligned bytes in front of it that the
/// caller owns (the header of a slot in one of its regions).
#[inline]
unsafe fn write(p: *mut u8, tag: u64, class: usize, size: usize) {
    // SAFETY: per the contract, two aligned u64 fit in front of `p`.
    unsafe {
        let h = p.sub(HEADER) as *mut u64;
        h.write(tag ^ p as u64);
        h.add(1).write(size as u64 | (class as u64) << CLASS_SHIFT);
    }
}

/// Mark `p` a live block of `class` holding `size` bytes.
///
/// # Safety
/// As for `write`: `p` has [`HEADER`] writable, 16-aligned bytes in front of
/// it that the caller owns.
#[inline]
pub(crate) unsafe fn write_live(p: *mut u8, class: usize, size: usize) {
    // SAFETY: forwarded from this function's contract.
    unsafe { write(p, LIVE, class, size) }
}

/// Read the header in front of `p` and check its tag against `p`.
///
/// # Safety
/// `p` has [`HEADER`] readable, 16-aligned bytes in front of it (any bytes:
/// a header this arena did not write reads as [`Header::Foreign`]).
#[inline]
pub(crate) unsafe fn read(p: *mut u8) -> Header {
    // SAFETY: per the contract, two aligned u64 in front of `p` are readable.
    let (tag, meta) = unsafe {
        let h = p.sub(HEADER) as *const u64;
        (h.read(), h.add(1).read())
    };
    let addr = p as u64;
    if tag == LIVE ^ addr {
        Header::Live { class: (meta >> CLASS_SHIFT) as usize, size: (meta & SIZE_MASK) as usize }
    } else if tag == FREED ^ addr {
        Header::Freed
    } else {
        Header::Foreign
    }
}

/// Zero the first `size` bytes of the block at `p`.
///
/// # Safety
/// `p` is a block the caller owns with at least `size` writable bytes.
#[inline]
pub(crate) unsafe fn zero(p: *mut u8, size: usize) {
    // SAFETY: per the contract.
    unsafe { ptr::write_bytes(p, 0, size) }
}

/// Copy `n` bytes from the block at `from` to the block at `to`.
///
/// # Safety
/// Both blocks are live, distinct, and hold at least `n` bytes; `to`'s are
/// the caller's to write.
#[inline]
pub(crate) unsafe fn copy(from: *const u8, to: *mut u8, n: usize) {
    // SAFETY: per the contract.
    unsafe { ptr::copy_nonoverlapping(from, to, n) }
}

/// One free list per class: the head of each, and in each freed block's
/// first 8 bytes the next block of its list.
pub(crate) struct FreeLists<const N: usize> {
    heads: [*mut u8; N],
}

// SAFETY: the lists hold addresses of blocks in mappings that the same arena
// owns outright (no thread-local data); they are followed only through the
// `unsafe fn`s below, whose callers vouch for those blocks. Moving the lists
// to another thread together with their arena is sound. `FreeLists` is not
// `Sync`.
unsafe impl<const N: usize> Send for FreeLists<N> {}

impl<const N: usize> FreeLists<N> {
    /// Every list empty.
    pub(crate) const fn new() -> Self {
        FreeLists { heads: [ptr::null_mut(); N] }
    }

    /// Take the block freed last from `class`'s list; null if it is empty.
    ///
    /// # Safety
    /// Every block pushed on `class`'s list (by [`FreeLists::push_freed`])
    /// and not taken since is still mapped, and nothing but these lists has
    /// written its first 8 bytes since it was pushed.
    #[inline]
    pub(crate) unsafe fn pop(&mut self, class: usize) -> *mut u8 {
        let head = self.heads[class];
        if !head.is_null() {
            // SAFETY: per the contract `head` is a freed block, 16-aligned, in
            // a live mapping, whose first 8 bytes hold the next one.
            self.heads[class] = unsafe { (head as *const *mut u8).read() };
        }
        head
    }

    /// Mark `p` freed and put it at the head of `class`'s list.
    ///
    /// # Safety
    /// `p` is a live small block of `class` (16-aligned, with its [`HEADER`]
    /// in front and at least 16 bytes of payload) in a mapping that stays
    /// mapped while it is on the list; the caller gives it up.
    #[inline]
    pub(crate) unsafe fn push_freed(&mut self, p: *mut u8, class: usize) {
        // SAFETY: per the contract the header in front of `p` and its first
        // 8 bytes are the caller's to rewrite.
        unsafe {
            write(p, FREED, class, 0);
            (p as *mut *mut u8).write(self.heads[class]);
        }
        self.heads[class] = p;
    }
}
