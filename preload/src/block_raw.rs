//! The header before each block: the size the handler was asked for (its
//! sized `free`/`realloc` get it back) and the offset from the handler's
//! block to the pointer the program holds (non-zero padding for aligned
//! requests), sealed with a check word so that a pointer this library did
//! not make is recognised and never given to the plugin. The blocks the
//! bootstrap heap maps for itself are sealed with another key, so that they
//! are told from the plugin's by their header alone.

/// Bytes of the header (keeps 16-byte alignment).
pub(crate) const HEADER: usize = 16;

/// Mixed into the check word of the blocks of the plugin and of the
/// bootstrap heap's region.
const KEY: usize = 0x6d65_6d70_6c75_6721;

/// Mixed into the check word of the blocks the bootstrap heap maps.
const MAPPED_KEY: usize = 0x626f_6f74_6d61_7021;

/// The check word of a block at `user` of `total` bytes, offset `offset`.
fn seal(key: usize, user: usize, total: usize, offset: usize) -> usize {
    let check = (user ^ total ^ key).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32 << 32;
    check | (offset & 0xFFFF_FFFF)
}

/// Write the header of the block the program sees at `user`.
///
/// # Safety
/// The `HEADER` bytes before `user` belong to the block.
pub(crate) unsafe fn write(user: *mut u8, total: usize, offset: usize) {
    // SAFETY: the caller's promise.
    unsafe { write_keyed(KEY, user, total, offset) }
}

/// Write the header of a block the bootstrap heap mapped.
///
/// # Safety
/// As [`write`].
pub(crate) unsafe fn write_mapped(user: *mut u8, total: usize, offset: usize) {
    // SAFETY: the caller's promise.
    unsafe { write_keyed(MAPPED_KEY, user, total, offset) }
}

/// Write a header sealed with `key`.
///
/// # Safety
/// As [`write`].
unsafe fn write_keyed(key: usize, user: *mut u8, total: usize, offset: usize) {
    let words = [total, seal(key, user as usize, total, offset)];
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
    // SAFETY: the caller's promise.
    unsafe { read_keyed(KEY, user, any_alignment) }
}

/// `(total, offset)` of the block at `user`, if its header is one the
/// bootstrap heap wrote for a block it mapped.
///
/// # Safety
/// As [`read`].
pub(crate) unsafe fn read_mapped(user: *const u8) -> Option<(usize, usize)> {
    // SAFETY: the caller's promise.
    unsafe { read_keyed(MAPPED_KEY, user, false) }
}

/// A header sealed with `key`.
///
/// # Safety
/// As [`read`].
unsafe fn read_keyed(key: usize, user: *const u8, any_alignment: bool) -> Option<(usize, usize)> {
    if (!any_alignment && !(user as usize).is_multiple_of(HEADER)) || (user as usize) < HEADER {
        return None;
    }
    // SAFETY: the caller says these bytes are readable.
    let [total, tag] = unsafe { core::ptr::read_unaligned(user.sub(HEADER).cast::<[usize; 2]>()) };
    let offset = tag & 0xFFFF_FFFF;
    let ok = offset >= HEADER && offset <= total && tag == seal(key, user as usize, total, offset);
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
    fn a_mapped_header_is_told_from_a_plugin_header() {
        let mut buf = [0u64; 8];
        let base = buf.as_mut_ptr().cast::<u8>();
        // SAFETY: as above.
        let user = unsafe { base.add(HEADER + (16 - base as usize % 16) % 16) };
        // SAFETY: the header lies in `buf`.
        unsafe { write_mapped(user, 4096, HEADER) };
        // SAFETY: readable, in `buf`.
        assert_eq!(unsafe { (read_mapped(user), read(user, false)) }, (Some((4096, HEADER)), None));
        // SAFETY: as above.
        unsafe { write(user, 4096, HEADER) };
        // SAFETY: as above.
        assert_eq!(unsafe { (read_mapped(user), read(user, false)) }, (None, Some((4096, HEADER))));
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
