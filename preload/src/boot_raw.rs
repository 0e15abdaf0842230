//! The bootstrap heap's memory: it serves what cannot go to the plugin —
//! requests made before the plugin is ready (the dynamic loader, this
//! library's start-up, `dlopen` of the plugin, its constructor) and any made
//! while this thread is inside a plugin call (the plugin's own calls through
//! libc, and a signal handler that interrupted the thread there).
//!
//! - Requests of up to 64 KiB (with header and alignment) get a chunk of a
//!   static region of [`SIZE`] bytes, through `boot_lists`: freed chunks go
//!   back on their class's free list and serve again, so a program may
//!   allocate and free there forever in bounded memory. Blocks of the region
//!   are recognised by address.
//! - Larger requests, and any the region cannot serve, are mapped with
//!   `mmap` and unmapped when freed. They are recognised by address: each
//!   is recorded in [`ODD`], a lock-free table a `free` asks only while it
//!   holds something, so that no memory before a plugin's pointer is ever
//!   read to tell the two apart (a handler may put a block right after an
//!   unmapped page). Their headers are sealed with the key of mapped blocks
//!   ([`block::write_mapped`]) and read once the table has said the block
//!   is one.
//!
//! Nothing here takes a lock or calls anything but `mmap` and `munmap`
//! (system calls, safe in a signal handler in practice), so every path works
//! in a signal handler, on any thread, and in a forked child.

use crate::addr_table::Table;
use crate::block_raw::{self as block, HEADER};
use crate::boot_class::{GRAIN, chunk_of, class_of, class_size, place};
use crate::boot_lists::Lists;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of the static region.
pub(crate) const SIZE: usize = 8 << 20;

/// Bytes before the region that are never handed out: `free`'s fast path
/// lets a pointer at most [`ODD`]'s live count below the region through
/// while the table is shut (see [`fast_free_allowed`]), so those addresses
/// are this pad's, which no program frees.
const PAD: usize = 64 << 10;
const _: () = assert!(PAD > ODD_SLOTS + 1, "the pad covers every count the gate can hold");

/// The region, page-aligned (in `.bss`: pages cost memory once touched),
/// after its pad.
#[repr(C, align(4096))]
struct Region {
    /// Never used.
    _pad: [u8; PAD],
    /// The bootstrap heap's memory.
    heap: UnsafeCell<[u8; SIZE]>,
}

// SAFETY: the region's bytes are handed out as disjoint chunks by `LISTS`,
// whose atomics order every hand-over; this module only writes a chunk's
// header (and zeroes) while it holds the chunk.
unsafe impl Sync for Region {}

static REGION: Region = Region { _pad: [0; PAD], heap: UnsafeCell::new([0; SIZE]) };

/// The region's bookkeeping.
static LISTS: Lists<{ SIZE / GRAIN }> = Lists::new();

/// The live blocks recognised by address: this heap's mapped blocks (with
/// the value [`MAPPED`]), and the aligned blocks a headerless handler
/// without `aligned_alloc` serves (with the handler's own pointer).
pub(crate) static ODD: Table<ODD_SLOTS> = Table::new();

/// Slots of [`ODD`].
const ODD_SLOTS: usize = 1 << 14;

/// The value of this heap's mapped blocks in [`ODD`] (handlers' pointers
/// are 16-byte aligned, never 1).
pub(crate) const MAPPED: usize = 1;

/// The region's first address, as a number in a variable: the fast path's
/// range check subtracts it straight from memory, one instruction, where
/// the address itself would cost one more to form (`lea`).
static BASE: AtomicUsize = AtomicUsize::new(0);

/// The region's first address.
fn base() -> *mut u8 {
    REGION.heap.get().cast()
}

/// Whether `p` points into the region.
pub(crate) fn contains(p: *const u8) -> bool {
    (p as usize).wrapping_sub(base() as usize) < SIZE
}

/// Whether `free(p)` may take the fast path: the table of blocks known by
/// address is open and empty and `p` is not in the region. Four
/// instructions: `p`'s offset from [`BASE`] (which wraps for a pointer
/// below the region), compared with [`ODD`]'s gate word straight from
/// memory — the region's size while the table is open and empty (so the
/// compare is the range check), and within `c` of `usize::MAX` while `c`
/// blocks are live or the table is shut (so only a pointer less than `c`
/// bytes below the region, in its pad, could pass: see [`Table::open`]).
/// Right only after [`publish_base`] (the fast modes are set after it;
/// before, `BASE` is 0 and only the top `c` addresses pass).
#[inline(always)]
pub(crate) fn fast_free_allowed(p: *const c_void) -> bool {
    // SAFETY: reads two words of statics (atomics: the base the
    // constructor wrote once, and the table's gate); writes a scratch
    // register and the flags; the branch leaves for the label.
    unsafe {
        core::arch::asm!(
            "mov {t}, {p}",
            "sub {t}, qword ptr [rip + {base}]",
            "cmp {t}, qword ptr [rip + {odd} + {gate}]",
            "jb {no}",
            odd = sym ODD,
            gate = const Table::<ODD_SLOTS>::GATE_OFFSET,
            base = sym BASE,
            p = in(reg) p,
            t = out(reg) _,
            no = label { return false },
            options(nostack, readonly),
        )
    };
    true
}

/// Put the region's address in [`BASE`] and open [`ODD`]'s gate with the
/// region's size as its bound, for the fast path: called by the
/// constructor, single-threaded, before it sets a fast mode.
pub(crate) fn publish_base() {
    BASE.store(base() as usize, Ordering::Relaxed);
    ODD.open(SIZE);
}

/// Bytes of the region carved into chunks so far (its high-water mark).
pub(crate) fn carved() -> usize {
    LISTS.carved()
}

/// A block of `size` bytes aligned to `align` (a power of two, at least
/// 16), zeroed if `zero`, with its header; null only when the region is
/// full and the system maps no more memory.
pub(crate) fn alloc(size: usize, align: usize, zero: bool) -> *mut c_void {
    let Some(total) = size.checked_add(align.max(HEADER)).filter(|&t| t <= isize::MAX as usize) else {
        return core::ptr::null_mut();
    };
    if let Some((off, k)) = class_of(total).and_then(|class| LISTS.take(class)) {
        let chunk = base().wrapping_add(off);
        match place(chunk as usize, class_size(k), size, align) {
            Some(offset) => {
                let user = chunk.wrapping_add(offset);
                if zero {
                    // SAFETY: the chunk is ours (taken above) and holds
                    // `size` bytes from `user` (`place` says so).
                    unsafe { core::ptr::write_bytes(user, 0, size) };
                }
                // SAFETY: the header's bytes lie in the chunk, before `user`.
                unsafe { block::write(user, class_size(k), offset) };
                return user.cast();
            }
            // Cannot happen (the class holds size + max(align, 16)); the
            // chunk goes back and the request is mapped.
            None => LISTS.give(k, off),
        }
    }
    map(size, align, total)
}

/// The page size.
fn page() -> usize {
    // SAFETY: sysconf has no preconditions (glibc reads a variable for it).
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// A mapped block (fresh pages are zero); null when `mmap` fails.
fn map(size: usize, align: usize, total: usize) -> *mut c_void {
    let Some(len) = total.checked_next_multiple_of(page()) else { return core::ptr::null_mut() };
    let (prot, flags) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
    // SAFETY: a fresh anonymous mapping; nothing else is touched.
    let m = unsafe { libc::mmap(core::ptr::null_mut(), len, prot, flags, -1, 0) };
    if m == libc::MAP_FAILED {
        return core::ptr::null_mut();
    }
    let Some(offset) = place(m as usize, len, size, align) else {
        // SAFETY: the mapping made just above, not handed out.
        unsafe { libc::munmap(m, len) };
        return core::ptr::null_mut();
    };
    let user = m.cast::<u8>().wrapping_add(offset);
    // SAFETY: the header's bytes lie in the mapping, before `user`.
    unsafe { block::write_mapped(user, len, offset) };
    if !ODD.insert(user as usize, MAPPED) {
        // SAFETY: the mapping made just above, not handed out.
        unsafe { libc::munmap(m, len) };
        return core::ptr::null_mut();
    }
    user.cast()
}

/// The chunk of the region block at `p` (in the region) and the header's
/// `(total, offset)`, if its header is one this heap wrote and is live.
fn region_block(p: *const u8) -> Option<(usize, usize, usize, usize)> {
    let user = (p as usize).wrapping_sub(base() as usize);
    if !contains(p) || user < HEADER {
        return None;
    }
    // SAFETY: the header's 16 bytes lie in the region (p is at least
    // HEADER bytes into it), which is always mapped.
    let (total, offset) = unsafe { block::read(p, false) }?;
    let (chunk, class) = chunk_of(user, total, offset)?;
    (chunk + total <= LISTS.carved()).then_some((chunk, class, total, offset))
}

/// Free the region block at `p` (a pointer into the region): back on its
/// free list. `false` (and nothing done) when its header is not a live one
/// of this heap's: freed already, or a pointer into a block.
pub(crate) fn release_in_region(p: *mut c_void) -> bool {
    let Some((chunk, class, _, _)) = region_block(p.cast()) else { return false };
    // SAFETY: the header is live and ours (checked above).
    unsafe { block::clear(p.cast()) };
    LISTS.give(class, chunk);
    true
}

/// The header `(total, offset)` of the mapped block at `p`, if it is one.
fn mapped_block(p: *const u8) -> Option<(usize, usize)> {
    if ODD.get(p as usize) != Some(MAPPED) {
        return None;
    }
    // SAFETY: the table says p is a live block this heap mapped: its header
    // lies in the mapping, before p.
    let (len, offset) = unsafe { block::read_mapped(p) }?;
    let start = (p as usize).wrapping_sub(offset);
    (start.is_multiple_of(page()) && len.is_multiple_of(page())).then_some((len, offset))
}

/// Unmap `p` if it is a block this heap mapped; `false` otherwise.
pub(crate) fn release_mapped(p: *mut c_void) -> bool {
    let Some((len, offset)) = mapped_block(p.cast()) else { return false };
    if ODD.remove(p as usize) != Some(MAPPED) {
        return false;
    }
    // SAFETY: the header is live and ours.
    unsafe { block::clear(p.cast()) };
    // SAFETY: the mapping of `len` bytes this heap made, `offset` before p;
    // the program has given it back.
    unsafe { libc::munmap(p.cast::<u8>().sub(offset).cast(), len) };
    true
}

/// The usable size of `p` if it is a block of this heap (of the region or
/// mapped). Reads no memory outside the region and this heap's mappings.
pub(crate) fn usable(p: *const u8) -> Option<usize> {
    if contains(p) {
        return region_block(p).map(|(_, _, total, offset)| total - offset);
    }
    mapped_block(p).map(|(total, offset)| total - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_reused_and_recognised() {
        for align in [16, 64, 4096] {
            let p = alloc(100, align, false);
            assert!(!p.is_null() && contains(p.cast()));
            assert_eq!(p as usize % align, 0);
            assert!(usable(p.cast()).unwrap() >= 100);
            assert!(release_in_region(p));
            assert!(!release_in_region(p), "a second free is refused");
        }
        let p = alloc(1024, 16, false);
        assert!(release_in_region(p));
        assert_eq!(alloc(1024, 16, false), p, "the freed chunk serves the next request");
        assert!(release_in_region(p));
        assert!(!contains(core::ptr::null()));
    }

    #[test]
    fn calloc_blocks_are_zeroed_when_reused() {
        let p = alloc(500, 16, false).cast::<u8>();
        // SAFETY: 500 bytes of ours.
        unsafe { core::ptr::write_bytes(p, 0xAB, 500) };
        assert!(release_in_region(p.cast()));
        let q = alloc(500, 16, true).cast::<u8>();
        // SAFETY: as above.
        assert!(unsafe { core::slice::from_raw_parts(q, 500) }.iter().all(|&b| b == 0));
        assert!(release_in_region(q.cast()));
    }

    #[test]
    fn large_blocks_are_mapped_and_unmapped() {
        let p = alloc(1 << 20, 16, true);
        assert!(!p.is_null() && !contains(p.cast()));
        assert!(usable(p.cast()).unwrap() >= 1 << 20);
        assert!(release_mapped(p));
        assert!(!release_mapped(p), "a second free is refused");
        let mut buf = [0u64; 8];
        assert!(!release_mapped(buf.as_mut_ptr().wrapping_add(4).cast()), "not a mapped block");
        let q = alloc(200 << 10, 1 << 16, false);
        assert_eq!(q as usize % (1 << 16), 0);
        assert!(release_mapped(q));
    }
}
