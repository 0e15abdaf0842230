//! The block header, in one place: the words every bridged block carries in
//! front of the pointer NumPy gets, in both of its formats, and every read
//! and write of them. Nothing else in the crate touches these words.
//!
//! NumPy's `realloc(ctx, ptr, new_size)` does not pass the old size and its
//! `free(ctx, ptr, size)` may pass a wrong one, while a memplug plugin is
//! owed the exact size on both. So every block carries a header in front of
//! the pointer NumPy gets, whose last words hold the size NumPy asked for
//! and a check word derived from the pointer, the size and the bridge's
//! salt ([`check_word`]): a pointer the bridge did not make (or freed
//! already: the check word is cleared on free, [`clear`]) is recognised
//! and never handed to the plugin.
//!
//! # The plain format
//! [`header_size`] bytes, a multiple of the handler's alignment and at
//! least [`HEADER_MIN_BYTES`], so the pointer keeps the handler's
//! alignment ([`write()`], [`write_after`], [`read`], [`says`]):
//!
//! ```text
//!   base (from the plugin)          ptr (to NumPy)
//!   |<------------ header ------------>|<------- size bytes ------->
//!   [ padding ... | size | check      ][ array data ...            ]
//! ```
//!
//! # The padded format
//! For a bridge whose data is aligned to [`PAD_ALIGN`] (a cache line)
//! although its handler aligns less: every block is asked of the plugin
//! with [`PADDED_OVERHEAD`] bytes more than NumPy wants; the data starts at
//! the first 64-aligned address at least three words into it. The three
//! words in front of the data hold the offset from the block's start, the
//! size, and the check word, with the offset mixed in ([`write_padded`],
//! [`read_padded`]):
//!
//! ```text
//!   base (from the plugin)                 ptr (to NumPy, 64-aligned)
//!   |<--------- offset (24 to 87) -------->|<------- size bytes ------->
//!   [ padding ... | offset | size | check  ][ array data ... ][ rest of the padding ]
//! ```
//!
//! # A cached block
//! A plain block in a per-thread list of freed blocks keeps the next block
//! of its list where the size was and a cleared check word ([`link`],
//! [`linked_next`]); a spare only has its check word cleared. So a cached
//! block is never taken for a live one (a double free of it is recognised
//! as a foreign pointer).
//!
//! The callers pass the bridge's salt and header size.

use std::ffi::c_void;
use std::ptr::NonNull;

/// The plain header's least size: two words (the size, the check word).
pub const HEADER_MIN_BYTES: usize = 16;
/// Data of a padded bridge's arrays is aligned to this (a cache line).
pub const PAD_ALIGN: usize = 64;
/// Bytes a padded bridge asks of its plugin beyond NumPy's size.
pub const PADDED_OVERHEAD: usize = 88;

/// The words in front of the data pointer, counted back from it: the
/// check word is the last, the size the one before it (in a cached block,
/// the next block of its list), the padded format's offset the one before.
const CHECK: usize = 1;
const SIZE: usize = 2;
const NEXT: usize = SIZE;
const OFFSET: usize = 3;

/// Bytes of the padded format's words in front of the data.
const PADDED_WORDS: usize = OFFSET * size_of::<usize>();

const _: () = assert!(SIZE * size_of::<usize>() <= HEADER_MIN_BYTES && PADDED_OVERHEAD >= PADDED_WORDS + PAD_ALIGN);

/// The plain header in front of each block for a handler aligned to
/// `alignment`: at least [`HEADER_MIN_BYTES`], and a multiple of the
/// alignment so the pointer NumPy gets keeps it.
pub fn header_size(alignment: usize) -> usize {
    alignment.max(HEADER_MIN_BYTES).next_multiple_of(alignment.max(1))
}

/// The check word stored beside a plain block's size: the pointer, the
/// size and the bridge's salt mixed.
#[inline]
pub fn check_word(salt: usize, ptr: *mut u8, size: usize) -> usize {
    (ptr as usize) ^ size ^ salt
}

/// The check word of a padded block.
#[inline]
fn padded_check(salt: usize, ptr: *mut u8, size: usize, offset: usize) -> usize {
    check_word(salt, ptr, size) ^ offset.rotate_left(48)
}

/// Write the plain header in front of `ptr` (a block's data pointer);
/// `ptr`.
///
/// # Safety
/// The two words before `ptr` are the block's, writable; `ptr` is 8-aligned.
#[inline]
pub unsafe fn write(salt: usize, ptr: *mut u8, size: usize) -> *mut c_void {
    let words = ptr.cast::<usize>();
    // SAFETY: the caller's contract: both words lie in the block, aligned.
    unsafe {
        words.sub(SIZE).write(size);
        words.sub(CHECK).write(check_word(salt, ptr, size));
    }
    ptr.cast()
}

/// Write the plain header of a block the plugin just returned, of a
/// bridge whose header is `header` bytes ([`header_size`]); the pointer
/// for NumPy.
///
/// # Safety
/// `base` is a live block of at least `header` bytes.
#[inline]
pub unsafe fn write_after(salt: usize, header: usize, base: NonNull<u8>, size: usize) -> *mut c_void {
    // SAFETY: `header >= 16` bytes lie in the block before `ptr`, and both
    // words are aligned (header is a multiple of 16 and base is 16-aligned,
    // or at least 8-aligned for handlers declaring alignment 8).
    unsafe { write(salt, base.as_ptr().add(header), size) }
}

/// Read the plain header in front of a pointer NumPy handed back: the
/// size, or `None` if the check word does not match (not the bridge's, or
/// freed already).
///
/// # Safety
/// The two words before `ptr` are readable: NumPy passes back pointers from
/// the handler's `malloc`/`calloc`/`realloc` (an array's data is freed by
/// the handler that made it).
#[inline]
pub unsafe fn read(salt: usize, ptr: *mut u8) -> Option<usize> {
    // SAFETY: the caller's contract.
    let (size, check) = unsafe {
        let words = ptr.cast::<usize>();
        (words.sub(SIZE).read(), words.sub(CHECK).read())
    };
    (check == check_word(salt, ptr, size)).then_some(size)
}

/// Whether the check word in front of `ptr` says it is a live plain block
/// asked with `size` bytes: the [`read`] of a caller that knows the size
/// already (NumPy's `free`), one load, no size read. (The check word mixes
/// the size in, so it matches only if the header's size is `size`.)
///
/// # Safety
/// As for [`read`].
#[inline]
pub unsafe fn says(salt: usize, ptr: *mut u8, size: usize) -> bool {
    // SAFETY: the caller's contract.
    let check = unsafe { ptr.cast::<usize>().sub(CHECK).read() };
    check == check_word(salt, ptr, size)
}

/// Clear the check word in front of `ptr`, in either format: the block is
/// no longer a live one (freed, or cached), so that a second free of the
/// same pointer is recognised.
///
/// # Safety
/// The word before `ptr` is the block's, writable; `ptr` is 8-aligned.
#[inline]
pub unsafe fn clear(ptr: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe { ptr.cast::<usize>().sub(CHECK).write(0) };
}

/// The data's offset in a padded block starting at `base` (where
/// [`write_padded`] puts it).
#[inline]
pub fn padded_offset(base: NonNull<u8>) -> usize {
    let start = base.as_ptr() as usize;
    (start + PADDED_WORDS).next_multiple_of(PAD_ALIGN) - start
}

/// Write the padded header of a block the plugin just returned; the
/// pointer for NumPy.
///
/// # Safety
/// `base` is a live block of `size + PADDED_OVERHEAD` bytes, 8-aligned.
#[inline]
pub unsafe fn write_padded(salt: usize, base: NonNull<u8>, size: usize) -> *mut c_void {
    let offset = padded_offset(base);
    // SAFETY: `PADDED_WORDS <= offset <= PADDED_WORDS + PAD_ALIGN - 8 <=
    // PADDED_OVERHEAD`, so the three words before `ptr` and the `size`
    // bytes after it lie in the block; `ptr` is 64-aligned, so the words
    // are aligned.
    unsafe {
        let ptr = base.as_ptr().add(offset);
        let words = ptr.cast::<usize>();
        words.sub(OFFSET).write(offset);
        words.sub(SIZE).write(size);
        words.sub(CHECK).write(padded_check(salt, ptr, size, offset));
        ptr.cast()
    }
}

/// The size and offset in the padded header in front of a pointer NumPy
/// handed back, or `None` if the check word does not match.
///
/// # Safety
/// The three words before `ptr` are readable (a pointer from a padded
/// bridge).
#[inline]
pub unsafe fn read_padded(salt: usize, ptr: *mut u8) -> Option<(usize, usize)> {
    // SAFETY: the caller's contract.
    let (offset, size, word) = unsafe {
        let words = ptr.cast::<usize>();
        (words.sub(OFFSET).read(), words.sub(SIZE).read(), words.sub(CHECK).read())
    };
    (word == padded_check(salt, ptr, size, offset)).then_some((size, offset))
}

/// The size NumPy asked for of the live block at `ptr`, from its header in
/// the format of its bridge (`padded` or plain); `None` if the check word
/// does not match.
///
/// # Safety
/// `ptr` was returned by the `malloc`, `calloc` or `realloc` of the bridge
/// whose salt and format are given, and has not been freed.
pub unsafe fn asked_size(salt: usize, padded: bool, ptr: NonNull<u8>) -> Option<usize> {
    if padded {
        // SAFETY: the caller's contract, for a padded bridge's block.
        return unsafe { read_padded(salt, ptr.as_ptr()) }.map(|(size, _)| size);
    }
    // SAFETY: the caller's contract is `read`'s.
    unsafe { read(salt, ptr.as_ptr()) }
}

/// Make the plain block at `ptr` a cached one whose list goes on with
/// `next` (a data pointer, or 0): `next` where the size was, the check
/// word cleared.
///
/// # Safety
/// The two words before `ptr` are the block's, writable; `ptr` is
/// 8-aligned.
#[inline]
pub unsafe fn link(ptr: NonNull<u8>, next: usize) {
    let words = ptr.as_ptr().cast::<usize>();
    // SAFETY: the caller's contract.
    unsafe {
        words.sub(NEXT).write(next);
        words.sub(CHECK).write(0);
    }
}

/// The next block of the list a cached block at `ptr` is in.
///
/// # Safety
/// `ptr` was [`link`]ed, and its header untouched since.
#[inline]
pub unsafe fn linked_next(ptr: NonNull<u8>) -> usize {
    // SAFETY: the caller's contract: the word `link` wrote is readable.
    unsafe { ptr.as_ptr().cast::<usize>().sub(NEXT).read() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_keeps_the_alignment_and_holds_two_words() {
        for (alignment, want) in [(1, 16), (8, 16), (16, 16), (64, 64), (4096, 4096)] {
            assert_eq!(header_size(alignment), want, "alignment {alignment}");
        }
    }

    #[test]
    fn both_formats_read_back_what_was_written_and_cleared_words_do_not() {
        let salt = 0x5a5a;
        let mut plain = [0usize; 4];
        let base = NonNull::new(plain.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `plain` holds the 16-byte header and two words of data.
        unsafe {
            let ptr = write_after(salt, 16, base, 9).cast::<u8>();
            assert_eq!((read(salt, ptr), says(salt, ptr, 9), says(salt, ptr, 8)), (Some(9), true, false));
            assert_eq!(read(salt ^ 1, ptr), None, "another bridge's salt");
            assert_eq!(asked_size(salt, false, NonNull::new(ptr).unwrap()), Some(9));
            clear(ptr);
            assert_eq!(read(salt, ptr), None);
        }
        let mut padded = [0usize; 16];
        let base = NonNull::new(padded.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `padded` holds `PADDED_OVERHEAD` bytes and the 16 of data.
        unsafe {
            let ptr = write_padded(salt, base, 16).cast::<u8>();
            assert_eq!(ptr as usize % PAD_ALIGN, 0);
            assert_eq!(read_padded(salt, ptr), Some((16, ptr as usize - base.as_ptr() as usize)));
            assert_eq!(asked_size(salt, true, NonNull::new(ptr).unwrap()), Some(16));
            clear(ptr);
            assert_eq!(read_padded(salt, ptr), None);
        }
    }
}
