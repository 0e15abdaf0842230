//! Size classes: which class a request falls in, and how big a class's
//! blocks and slots are.
//!
//! Owns the class arithmetic and the constants it rests on ([`MIN_ALIGN`],
//! [`MAX_CLASSES`]). Pure functions: it touches no memory and imports only
//! the header's size.

#![forbid(unsafe_code)]

use crate::header::HEADER;

/// The least alignment of every block this arena hands out.
pub const MIN_ALIGN: usize = 16;
/// The most size classes an arena can have (`max_small` of 1 MiB).
pub const MAX_CLASSES: usize = 60;

/// The size class of a request of `size` bytes (`size >= 1`): classes 0–7 are
/// 16, 32, …, 128 bytes; above that there are four classes per power of two
/// (160, 192, 224, 256, 320, …).
///
/// ```
/// use memplug_arena::{class_of, class_size};
///
/// assert_eq!(class_size(class_of(1)), 16);
/// assert_eq!(class_size(class_of(129)), 160);
/// assert_eq!(class_size(class_of(4096)), 4096);
/// ```
#[inline]
pub fn class_of(size: usize) -> usize {
    debug_assert!(size >= 1);
    if size <= 128 {
        size.div_ceil(16) - 1
    } else {
        let k = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
        let j = (size - 1 - (1 << k)) >> (k - 2);
        8 + (k - 7) * 4 + j
    }
}

/// The payload size of class `class`: the most bytes a block of it holds.
#[inline]
pub fn class_size(class: usize) -> usize {
    if class < 8 {
        (class + 1) * 16
    } else {
        let k = 7 + (class - 8) / 4;
        let j = (class - 8) % 4;
        (1 << k) + ((j + 1) << (k - 2))
    }
}

/// Bytes a block of class `class` takes in a region, header included.
#[inline]
pub(crate) fn slot_size(class: usize) -> usize {
    HEADER + class_size(class)
}

/// The largest request the classes can serve: the size of the last class
/// (1 MiB).
pub(crate) const LARGEST_CLASS_SIZE: usize = 1 << 20;

const _: () = assert!(HEADER.is_multiple_of(MIN_ALIGN), "slots stay 16-aligned");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_and_are_16_multiples() {
        let mut last = 0;
        for c in 0..MAX_CLASSES {
            let s = class_size(c);
            assert!(s > last && s.is_multiple_of(16), "class {c}: {s}");
            assert_eq!(class_of(s), c, "size {s}");
            assert_eq!(class_of(last + 1), c, "size {}", last + 1);
            last = s;
        }
        assert_eq!(class_of(1 << 20), MAX_CLASSES - 1);
        // At most 25 % waste above 128 bytes.
        for size in 129..70_000 {
            let s = class_size(class_of(size));
            assert!(s >= size && (s - size) * 4 <= size, "{size} -> {s}");
        }
    }

    #[test]
    fn the_last_class_is_the_largest_small_size() {
        assert_eq!(class_size(MAX_CLASSES - 1), LARGEST_CLASS_SIZE);
        assert_eq!(class_of(LARGEST_CLASS_SIZE), MAX_CLASSES - 1);
    }
}
