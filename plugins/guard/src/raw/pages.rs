//! Page mappings: a [`Region`] owns one anonymous reservation, mapped
//! inaccessible, with at most one window of readable and writable pages —
//! a mapping of its own, or one slot of a [`Region::pool`], a reservation
//! made once and cut into slots (the sampled blocks of `sample=N`).
//! Everything above this file sees only safe methods.

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

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
    /// The pool this region is a slot of (`None`: its own mapping).
    pool: Option<Arc<Mapping>>,
    /// Whether a page was opened by [`Region::expose`] (a slot is sealed
    /// again before it is reused).
    exposed: bool,
}

// SAFETY: a `Region` owns its pages outright (its own mapping, or one slot
// of a pool that no other region overlaps): no other value refers to them,
// and mappings are process-wide, not tied to a thread. Moving one to
// another thread and unmapping it there is sound.
unsafe impl Send for Region {}

/// A pool's reservation, unmapped when its last slot is dropped.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: only its address and length are shared; the pages belong to the
// slots (regions), and the mapping is unmapped once, by the last owner.
unsafe impl Send for Mapping {}
// SAFETY: as above: `&Mapping` gives nothing but the two numbers.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the pool's reservation, unmapped once, when the last slot
        // (the last `Arc`) goes: no region refers to its pages any more.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// An anonymous, inaccessible reservation of `len` bytes.
fn map_none(len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: an anonymous private mapping at an address the kernel picks:
    // it overlaps nothing that exists, and nothing else refers to it until
    // the caller owns it.
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
    NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mmap returned address 0"))
}

impl Region {
    /// Reserve `len` bytes (a non-zero multiple of the page size), all
    /// inaccessible.
    pub(crate) fn reserve(len: usize) -> io::Result<Region> {
        Ok(Region { base: map_none(len)?, len, window: None, pool: None, exposed: false })
    }

    /// Reserve `slots * slot_len` bytes at once (`slot_len` a non-zero
    /// multiple of the page size), all inaccessible, and cut them into
    /// `slots` regions of `slot_len` bytes, lowest first. The reservation is
    /// one mapping until windows open in it; it is unmapped when the last of
    /// its regions is dropped.
    pub(crate) fn pool(slots: usize, slot_len: usize) -> io::Result<Vec<Region>> {
        let len = slots.checked_mul(slot_len).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let mapping = Arc::new(Mapping { base: map_none(len)?, len });
        Ok((0..slots)
            .map(|i| {
                // SAFETY: `i * slot_len < len`: inside the reservation.
                let at = unsafe { mapping.base.add(i * slot_len) };
                Region { base: at, len: slot_len, window: None, pool: Some(mapping.clone()), exposed: false }
            })
            .collect())
    }

    /// Whether this region is a slot of a pool (it goes back to the pool's
    /// free slots instead of being unmapped).
    pub(crate) fn is_pooled(&self) -> bool {
        self.pool.is_some()
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

    /// Make the page holding `addr` (inside the region) readable and
    /// writable, so that a faulting access to it can go on (`recover=1`);
    /// whether it could.
    pub(crate) fn expose(&mut self, addr: usize) -> bool {
        let page = page_size();
        let at = addr & !(page - 1);
        if at < self.base() || at + page > self.base() + self.len {
            return false;
        }
        // SAFETY: a page inside this reservation, which this value owns;
        // only its protection changes.
        let rc = unsafe { libc::mprotect(at as *mut libc::c_void, page, libc::PROT_READ | libc::PROT_WRITE) };
        self.exposed |= rc == 0;
        rc == 0
    }

    /// After [`Region::expose`]: make the whole region inaccessible again
    /// (fresh `PROT_NONE` pages over it), before a slot is reused.
    pub(crate) fn seal(&mut self) {
        if !self.exposed {
            return;
        }
        self.window = None;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED;
        // SAFETY: the whole reservation, which this value owns; MAP_FIXED
        // replaces only our own pages.
        let p = unsafe { libc::mmap(self.base.as_ptr().cast(), self.len, libc::PROT_NONE, flags, -1, 0) };
        self.exposed = p == libc::MAP_FAILED;
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
        if self.pool.is_some() {
            // A slot: its pages go with the pool's mapping (`Mapping`).
            return;
        }
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

    #[test]
    fn a_pool_is_cut_into_adjacent_slots_that_open_alone() {
        let page = page_size();
        let mut slots = Region::pool(4, 3 * page).unwrap();
        assert_eq!(slots.len(), 4);
        for w in slots.windows(2) {
            assert_eq!(w[0].base() + 3 * page, w[1].base());
        }
        assert!(slots.iter().all(Region::is_pooled));
        slots[2].open(page, page).unwrap();
        slots[2].window_mut().fill(9);
        slots[2].close().unwrap();
        let last = slots.pop().unwrap();
        drop(slots); // the mapping stays while one slot is left
        let mut last = last;
        last.open(0, page).unwrap();
        last.window_mut()[0] = 1;
    }
}
