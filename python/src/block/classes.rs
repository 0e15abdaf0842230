//! The size classes of small blocks: the room a bridge that caches gives a
//! small request (its class's size), so that a freed block of the class
//! can serve any later request of it. Pure arithmetic over constants.
//!
//! The classes reach 1 KiB, as NumPy's own cache does (it keeps up to 7
//! blocks of each byte size below 1024).

/// Bytes of data served by each size class; a cached block of class `c`
/// was allocated with room for `CLASSES[c]` bytes (at most half as much
/// again as it was asked for).
pub const CLASSES: [usize; 12] = [16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024];
/// The largest request served from the cache.
pub const MAX_CACHED: usize = 1024;

/// The class of a request of `size <= MAX_CACHED` bytes, by 16-byte step:
/// the smallest class that holds the step's top.
const CLASS_BY_16: [u8; MAX_CACHED / 16 + 1] = {
    let mut table = [0u8; MAX_CACHED / 16 + 1];
    let mut step = 0;
    while step < table.len() {
        let mut class = 0;
        while CLASSES[class] < step * 16 {
            class += 1;
        }
        table[step] = class as u8;
        step += 1;
    }
    table
};

const _: () = assert!(CLASSES[CLASSES.len() - 1] == MAX_CACHED);

/// The size class of a request of `size` bytes (`size <= MAX_CACHED`).
#[inline]
pub fn class_of(size: usize) -> usize {
    CLASS_BY_16[size.div_ceil(16)] as usize
}

/// The bytes a request of `size` is given room for: its class's size for
/// small requests, else `size`.
#[inline]
pub fn rounded(size: usize) -> usize {
    if size <= MAX_CACHED { CLASSES[class_of(size)] } else { size }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_the_next_class() {
        for size in 0..=MAX_CACHED {
            let c = class_of(size);
            assert!(CLASSES[c] >= size, "{size}");
            assert!(c == 0 || CLASSES[c - 1] < size, "{size} is in the smallest class that fits");
        }
        assert_eq!(
            (rounded(8), rounded(64), rounded(65), rounded(512), rounded(513), rounded(1024), rounded(1025)),
            (16, 64, 96, 512, 768, 1024, 1025)
        );
    }
}
