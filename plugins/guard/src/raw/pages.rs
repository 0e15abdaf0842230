//! Page mappings: a [`Region`] owns one anonymous reservation, mapped
//! inaccessible, with at most one window of readable and writable pages.
//! Everything above this file sees only safe methods.

use std::io;
use std::ptr::NonNull;

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as usize } else { 4096 }
}

/// An anonymous reservation `[base, base + len)`, owned outright and
/// unmapped on drop. It is created inaccessible (`PROT_NONE`); [`open`]
/// makes one window of it readable and writable, [`close`] makes that
/// window inaccessible again and gives its memory back to the system.
///
/// [`open`]: Region::open
/// [`close`]: Region::close
#[derive(Debug)]
pub(crate) struct Region {
    base: NonNull<u8>,
    len: usize,
    /// The readable and writable window, as an offset and length.
    window: Option<(usize, usize)>,
}

// SAFETY: a `Region` owns its mapping outright: no other value refers to
// the pages, and mappings are process-wide, not tied to a thread. Moving
// one to another thread and unmapping it there is sound.
unsafe impl Send for Region {}

impl Region {
    /// Reserve `len` bytes (a non-zero multiple of the page size), all
    /// inaccessible.
    pub(crate) fn reserve(len: usize) -> io::Result<Region> {
        // SAFETY: an anonymous private mapping at an address the kernel
        // picks: it overlaps nothing that exists, and nothing else refers to
        // it until this function returns it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mmap returned address 0"))?;
        Ok(Region { base, len, window: None })
    }

    /// The first address of the reservation.
    pub(crate) fn base(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// The reservation's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Make `[base + offset, base + offset + len)` readable and writable: the
    /// window. Both are multiples of the page size, inside the reservation,
    /// and there is no window yet.
    pub(crate) fn open(&mut self, offset: usize, len: usize) -> io::Result<()> {
        assert!(self.window.is_none(), "a region has one window");
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len), "window outside the region");
        // SAFETY: the range is inside this reservation (asserted), which this
        // value owns; only the protection of our own pages changes.
        let rc =
            unsafe { libc::mprotect(self.base.as_ptr().add(offset).cast(), len, libc::PROT_READ | libc::PROT_WRITE) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.window = Some((offset, len));
        Ok(())
    }

    /// The window's bytes (empty when there is none).
    pub(crate) fn window(&self) -> &[u8] {
        match self.window {
            // SAFETY: the window is mapped readable and writable and owned by
            // this region; `&self` rules out a `&mut` from `window_mut`. Blocks
            // handed out point into it, but the allocator reads it only while
            // the caller does not own the block (before it is handed out, or
            // after it was given back).
            Some((off, len)) => unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) },
            None => &[],
        }
    }

    /// The window's bytes, writable (empty when there is none).
    pub(crate) fn window_mut(&mut self) -> &mut [u8] {
        match self.window {
            // SAFETY: as in `window`, and `&mut self` makes this the only
            // reference the allocator holds.
            Some((off, len)) => unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len) },
            None => &mut [],
        }
    }

    /// Make the window inaccessible again and release its memory: fresh
    /// `PROT_NONE` pages are mapped over it, so any later access faults and
    /// the old contents cost no memory. If that mapping cannot be made,
    /// the window is only protected (its memory stays committed).
    pub(crate) fn close(&mut self) -> io::Result<()> {
        let Some((off, len)) = self.window.take() else {
            return Ok(());
        };
        // SAFETY: the window is inside this reservation, which this value
        // owns; MAP_FIXED replaces only our own pages.
        let (p, fixed) = unsafe {
            let at = self.base.as_ptr().add(off).cast();
            let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED;
            (at, libc::mmap(at, len, libc::PROT_NONE, flags, -1, 0))
        };
        if fixed != libc::MAP_FAILED {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        // SAFETY: as above: our own pages, only their protection changes.
        if unsafe { libc::mprotect(p, len, libc::PROT_NONE) } == 0 { Ok(()) } else { Err(err) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the reservation is owned by this value and unmapped once,
        // here. The allocator drops a region only when no block in it is
        // live (it was freed and left the quarantine, or the instance is
        // being destroyed after its last block).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_opens_writable_and_closes() {
        let page = page_size();
        let mut r = Region::reserve(4 * page).unwrap();
        assert!(r.window().is_empty());
        r.open(page, 2 * page).unwrap();
        assert_eq!(r.window().len(), 2 * page);
        r.window_mut().fill(7);
        assert!(r.window().iter().all(|&b| b == 7));
        r.close().unwrap();
        assert!(r.window().is_empty());
        r.close().unwrap(); // closing twice is harmless
    }
}
