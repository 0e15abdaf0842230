//! What a pointer passed to `free` can be, when the allocator did not make
//! it: a block glibc's `malloc` made (before memplug's interposer was
//! there, or by a library calling libc directly) — which is left alone, as
//! memplug always has — or something no allocator ever handed out (a
//! pointer into the stack, a static, the middle of a block), which glibc
//! would stop and so must memplug. And where a block the interposer placed
//! in a handler's block starts for the program.
//!
//! [`could_be_libc_block`] asks glibc's chunk layout the questions glibc's
//! own `free` asks (alignment, a sane size field, an in-use mark on the
//! next chunk, a main-heap chunk below the program break, a mapped chunk
//! on whole pages), reading memory only where it is mapped.

use crate::raw::sys;

/// glibc's `MALLOC_ALIGNMENT` on 64-bit targets.
const ALIGN: usize = 16;
/// `PREV_INUSE`, `IS_MMAPPED`, `NON_MAIN_ARENA`.
const PREV_INUSE: u64 = 1;
const IS_MMAPPED: u64 = 2;
const NON_MAIN_ARENA: u64 = 4;
/// The smallest chunk.
const MIN_CHUNK: u64 = 32;
/// The page size glibc's mapped chunks are rounded to.
const PAGE: u64 = 4096;
/// Anything larger is no chunk.
const MAX_CHUNK: u64 = 1 << 46;

/// The checks over the words glibc keeps before a block, `read(addr)`
/// giving the two words at `addr` when they are mapped.
pub fn chunk_is_plausible(p: usize, brk: usize, read: &dyn Fn(usize) -> Option<[u64; 2]>) -> bool {
    if p < 4096 || !p.is_multiple_of(ALIGN) {
        return false;
    }
    let Some([prev_size, size_field]) = read(p - 16) else { return false };
    let size = size_field & !7;
    if size < MIN_CHUNK || !size.is_multiple_of(ALIGN as u64) || size > MAX_CHUNK {
        return false;
    }
    let chunk = (p - 16) as u64;
    if size_field & IS_MMAPPED != 0 {
        return (chunk.wrapping_sub(prev_size)).is_multiple_of(PAGE) && (prev_size + size).is_multiple_of(PAGE);
    }
    if size_field & NON_MAIN_ARENA == 0 && (p > brk || chunk.checked_add(size).is_none_or(|end| end > brk as u64)) {
        return false;
    }
    // The next chunk's size field says this one is in use.
    let Some([_, next]) = read((chunk + size) as usize) else { return false };
    next & PREV_INUSE != 0 && (next & !7) >= 16
}

/// Whether `p` may be a live block of glibc's `malloc` (see the module
/// docs). Never faults.
pub fn could_be_libc_block(p: usize) -> bool {
    chunk_is_plausible(p, sys::program_break(), &|a| sys::read_words(a))
}

/// Whether `memplug run`'s interposer serves this process's heap, so that a
/// handler's blocks may start with its header ([`interposed_view`] is worth
/// asking); a host that calls the handler itself (the NumPy bridge, a C
/// program) gets the handler's blocks as they are. Asked of the dynamic
/// linker once (the modules it has loaded: `memplug run` preloads
/// `libmemplug_preload*`; a lookup of `malloc` would not do, since a plugin
/// opened with `RTLD_DEEPBIND` sees libc's), then remembered.
pub fn interposer_present() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
    static KNOWN: AtomicU8 = AtomicU8::new(0);
    match KNOWN.load(Relaxed) {
        1 => return false,
        2 => return true,
        _ => {}
    }
    let mut ours = false;
    crate::raw::maps::each_module(&mut |m| {
        let name = m.path.rsplit(|&b| b == b'/').next().unwrap_or(m.path);
        ours |= name.starts_with(b"libmemplug_preload");
    });
    KNOWN.store(if ours { 2 } else { 1 }, Relaxed);
    ours
}

/// The program's view of a block that `memplug run`'s interposer placed in
/// a handler's block of `total` bytes at `raw` (aligned to `align`): its
/// start and size, found by the interposer's header (`total`, then a word
/// whose low half is the block's offset — cleared to 0 once it is freed).
/// `None` when no header is found (the handler serves a host directly).
pub fn interposed_view(
    raw: usize,
    total: usize,
    align: usize,
    freed: bool,
    read: &dyn Fn(usize) -> Option<[u64; 2]>,
) -> Option<(usize, usize)> {
    let fits = |o: usize| {
        let Some([t, seal]) = read(raw + o - 16) else { return false };
        let seal_ok = if freed { seal == 0 } else { seal & 0xFFFF_FFFF == o as u64 };
        t == total as u64 && seal_ok
    };
    let aligned = (align > 16).then_some(align);
    let candidates = [16].into_iter().chain(aligned).chain(17..32);
    candidates.filter(|&o| o <= total).find(|&o| fits(o)).map(|o| (raw + o, total - o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_blocks_look_like_chunks_and_statics_do_not() {
        if std::env::var_os("MEMPLUG_ASAN").is_some() {
            eprintln!("skipped under AddressSanitizer: its malloc does not lay out glibc's chunks");
            return;
        }
        // Rust's global allocator here is libc's malloc.
        let small = Box::new([7u8; 100]);
        let p = small.as_ptr() as usize;
        assert!(could_be_libc_block(p), "a live malloc block");
        let big: Vec<u8> = Vec::with_capacity(1 << 20);
        assert!(could_be_libc_block(big.as_ptr() as usize), "a mapped malloc block");
        static FAKE: [u64; 16] = [0; 16];
        assert!(!could_be_libc_block(FAKE.as_ptr() as usize + 64), "a static");
        let local = [0u64; 8];
        assert!(!could_be_libc_block(local.as_ptr() as usize + 32), "the stack");
        assert!(!could_be_libc_block(p + 16), "inside a block");
        assert!(!could_be_libc_block(p + 1), "misaligned");
        drop((small, big));
    }

    #[test]
    fn the_interposers_header_gives_the_programs_block() {
        let mut mem = vec![0u64; 64];
        let raw = mem.as_mut_ptr() as usize;
        mem[0] = 116;
        mem[1] = 0xABCD_0000_0000_0010;
        let read = |a: usize| {
            let i = (a - raw) / 8;
            Some([mem[i], mem[i + 1]])
        };
        assert_eq!(interposed_view(raw, 116, 16, false, &read), Some((raw + 16, 100)));
        assert_eq!(interposed_view(raw, 117, 16, false, &read), None, "another size: no header of ours");
    }
}
