//! The header before each block: the size the handler was asked for (its
//! sized `free`/`realloc` get it back) and the offset from the handler's
//! block to the pointer the program holds (non-zero padding for aligned
//! requests), sealed with a check word so that a pointer this library did
//! not make is recognised and never given to the plugin.

/// Bytes of the header (keeps 16-byte alignment).
pub(crate) const HEADER: usize = 16;

/// Mixed into the check word.
const KEY: usize = 0x6d65_6d70_6c75_6721;

/// The check word of a block at `user` of `total` bytes, offset `offset`.
fn seal(user: usize, total: usize, offset: usize) -> usize {
    let check = (user ^ total ^ KEY).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32 << 32;
    check | (offset & 0xFFFF_FFFF)
}

/// Write the header of the block the program sees at `user`.
///
/// # Safety
/// The `HEADER` bytes before `user` belong to the block.
pub(crate) unsafe fn write(user: *mut u8, total: usize, offset: usize) {
    let words = [total, seal(user as usize, total, offset)];
    // SAFETY: the caller gives the HEADER bytes before `user`.
    unsafe { core::ptr::write_unaligned(user.sub(HEADER).cast::<[usize; 2]>(), words) }
}

/// `(total, offset)` of the block at `user`, if its header is one this
/// library wrote. Blocks are 16-byte aligned unless `any_alignment` (the
/// blocks placed against a guard page, aligned only as their size is).
///
/// # Safety
/// The `HEADER` bytes before `user` are readable (true of every pointer a
/// malloc-compatible allocator hands out).
pub(crate) unsafe fn read(user: *const u8, any_alignment: bool) -> Option<(usize, usize)> {
    if (!any_alignment && !(user as usize).is_multiple_of(HEADER)) || (user as usize) < HEADER {
        return None;
    }
    // SAFETY: the caller says these bytes are readable.
    let [total, tag] = unsafe { core::ptr::read_unaligned(user.sub(HEADER).cast::<[usize; 2]>()) };
    let offset = tag & 0xFFFF_FFFF;
    let ok = offset >= HEADER && offset <= total && tag == seal(user as usize, total, offset);
    ok.then_some((total, offset))
}

/// Spoil the header, so that a second free of the block is recognised.
///
/// # Safety
/// `user` is a live block this library made.
pub(crate) unsafe fn clear(user: *mut u8) {
    // SAFETY: the caller says the block is live and its header ours.
    unsafe { core::ptr::write_unaligned(user.sub(HEADER / 2).cast::<usize>(), 0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_and_is_spoiled_by_clear() {
        let mut buf = [0u64; 8];
        let base = buf.as_mut_ptr().cast::<u8>();
        // SAFETY: 64 bytes, 8-aligned; user at +16 (16-aligned when base is).
        let user = unsafe { base.add(HEADER + (16 - base as usize % 16) % 16) };
        // SAFETY: the header lies in `buf`.
        unsafe { write(user, 40, HEADER) };
        // SAFETY: readable, in `buf`.
        assert_eq!(unsafe { read(user, false) }, Some((40, HEADER)));
        // SAFETY: as above.
        unsafe { clear(user) };
        // SAFETY: as above.
        assert_eq!(unsafe { read(user, false) }, None, "a second free is foreign");
    }

    #[test]
    fn foreign_pointers_are_not_ours() {
        let buf = [0x5au64; 8];
        let p = buf.as_ptr().cast::<u8>();
        // SAFETY: the bytes before each pointer lie in `buf`.
        for user in [unsafe { p.add(16) }, unsafe { p.add(17) }, unsafe { p.add(32) }] {
            // SAFETY: as above.
            assert_eq!(unsafe { read(user, false) }, None);
        }
    }
}
