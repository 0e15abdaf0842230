//! Aligned anonymous mappings for large blocks: made with `mmap` (plain, to
//! be advised for transparent huge pages, or `MAP_HUGETLB`), resized with
//! `mremap` — in place when the following addresses are free, otherwise
//! moved page tables and all to a new aligned address, never copied — and
//! unmapped on drop. Everything above this file sees only safe methods.
//!
//! The Linux-only calls (`mremap`, `MAP_HUGETLB`, `MADV_HUGEPAGE`) report
//! `Unsupported` elsewhere, and the caller falls back (copying, or plain
//! pages).

use std::io;
use std::ptr::NonNull;

/// What backs a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backing {
    /// Ordinary pages, eligible for transparent huge pages once advised.
    Thp,
    /// Explicit huge pages from the reserved pool (`MAP_HUGETLB`).
    Hugetlb,
}

/// One anonymous mapping `[ptr, ptr + len)` starting on an `align`
/// boundary, owned outright and unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
    backing: Backing,
}

// SAFETY: a `Mapping` owns its pages outright (no other value refers to
// them), and mappings belong to the process, not to a thread: moving one to
// another thread and unmapping it there is sound.
unsafe impl Send for Mapping {}

/// Reserve `len + align` bytes inaccessible and keep only the `len` bytes
/// from the first `align` boundary (`align` a power of two, at least a page;
/// `len` a multiple of the page size). Returns that start.
fn reserve_aligned(len: usize, align: usize) -> io::Result<usize> {
    let total = len.checked_add(align).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
    // SAFETY: a fresh anonymous mapping where the kernel chooses: it overlaps
    // nothing that exists.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let base = p as usize;
    let start = base.next_multiple_of(align);
    let (head, tail) = (start - base, base + total - (start + len));
    // SAFETY: both pieces are the surplus of the reservation just made, not
    // the kept range; nothing else refers to them. Page-aligned: `base` is,
    // and `start` and `len` are multiples of the page size.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
    }
    Ok(start)
}

/// Unmap `[start, start + len)`.
///
/// # Safety
/// The range is owned by the caller (a mapping or reservation of its own)
/// and nothing refers to it afterwards.
unsafe fn unmap(start: usize, len: usize) {
    // SAFETY: per the contract, the caller owns the range.
    unsafe { libc::munmap(start as *mut libc::c_void, len) };
}

#[cfg(target_os = "linux")]
const HUGETLB: libc::c_int = libc::MAP_HUGETLB;
#[cfg(not(target_os = "linux"))]
const HUGETLB: libc::c_int = 0;

impl Mapping {
    /// Map `len` bytes (a multiple of the page size — of the huge page size
    /// for [`Backing::Hugetlb`]), readable, writable and zeroed, starting on
    /// an `align` boundary (a power of two, at least a page).
    pub(crate) fn map(len: usize, align: usize, backing: Backing) -> io::Result<Mapping> {
        if backing == Backing::Hugetlb && !cfg!(target_os = "linux") {
            return Err(io::ErrorKind::Unsupported.into());
        }
        let start = reserve_aligned(len, align)?;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED;
        let flags = if backing == Backing::Hugetlb { flags | HUGETLB } else { flags };
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: MAP_FIXED replaces only `[start, start + len)`, the
        // reservation `reserve_aligned` just made for us.
        let p = unsafe { libc::mmap(start as *mut libc::c_void, len, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            let err = io::Error::last_os_error();
            // SAFETY: the reservation is ours and nothing refers to it.
            unsafe { unmap(start, len) };
            return Err(err);
        }
        let ptr = NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mmap returned address 0"))?;
        Ok(Mapping { ptr, len, align, backing })
    }

    /// Advise the kernel to back the mapping with transparent huge pages
    /// (`MADV_HUGEPAGE`). Harmless to repeat.
    pub(crate) fn advise_huge(&self) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: advice on our own mapping; it changes no contents.
            let rc = unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_HUGEPAGE) };
            if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
        }
        #[cfg(not(target_os = "linux"))]
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Resize to `new_len` bytes (rounded as for [`map`](Mapping::map)),
    /// keeping the contents and the alignment without copying: in place if
    /// the kernel can, otherwise by moving the pages to a new aligned
    /// address. On error the mapping is unchanged.
    pub(crate) fn resize(&mut self, new_len: usize) -> io::Result<()> {
        if new_len == self.len {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        {
            let old = self.ptr.as_ptr().cast::<libc::c_void>();
            // SAFETY: in place (no MREMAP_MAYMOVE): our mapping shrinks, or
            // grows into addresses nobody has mapped; the kernel refuses
            // otherwise.
            let p = unsafe { libc::mremap(old, self.len, new_len, 0) };
            if p != libc::MAP_FAILED {
                self.len = new_len;
                return Ok(());
            }
            if new_len < self.len {
                return Err(io::Error::last_os_error());
            }
            let target = reserve_aligned(new_len, self.align)?;
            // SAFETY: moves our mapping onto `target`, a reservation of our
            // own that MREMAP_FIXED replaces; the old range is unmapped by
            // the move. Nothing else refers to either.
            let p = unsafe {
                libc::mremap(
                    old,
                    self.len,
                    new_len,
                    libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                    target as *mut libc::c_void,
                )
            };
            if p == libc::MAP_FAILED {
                let err = io::Error::last_os_error();
                // SAFETY: the reservation is ours and unused.
                unsafe { unmap(target, new_len) };
                return Err(err);
            }
            self.ptr = NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mremap returned address 0"))?;
            self.len = new_len;
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        Err(io::ErrorKind::Unsupported.into())
    }

    /// The first byte: the block handed out.
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// The alignment the mapping keeps.
    pub(crate) fn align(&self) -> usize {
        self.align
    }

    /// What backs it.
    pub(crate) fn backing(&self) -> Backing {
        self.backing
    }

    /// The contents. The allocator reads them only while the caller does not
    /// own the block (in `realloc`).
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the whole mapping is readable and owned by this value;
        // `&self` rules out a `&mut` from `bytes_mut`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The contents, writable (see [`bytes`](Mapping::bytes)).
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and unmapped once, here; the allocator
        // drops it only when its block was freed.
        unsafe { unmap(self.addr(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB2: usize = 2 << 20;

    #[test]
    fn mappings_are_aligned_and_resize_without_losing_contents() {
        let mut m = Mapping::map(3 * MB2 + 4096, MB2, Backing::Thp).unwrap();
        assert_eq!(m.addr() % MB2, 0);
        m.advise_huge().ok(); // EINVAL where the kernel lacks THP
        m.bytes_mut()[..8].copy_from_slice(b"hugepage");
        let last = m.len - 1;
        m.bytes_mut()[last] = 7;
        for new_len in [64 << 20, 5 * MB2, 200 << 20] {
            m.resize(new_len).unwrap();
            assert_eq!((m.addr() % MB2, m.len), (0, new_len));
            assert_eq!(&m.bytes()[..8], b"hugepage");
        }
        assert_eq!(m.bytes()[last], 7);
        assert!(m.bytes()[(200 << 20) - 1] == 0, "grown pages are zero");
    }
}
