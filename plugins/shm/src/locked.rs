//! The segment's lock, held: [`Locked`], the proof that the allocator's
//! metadata may be read and written, and the words it reads and writes.
//! `Segment::lock` (`segment.rs`) takes it, and repairs the allocator
//! first when the last holder died with it.

use crate::format::at;
use crate::raw::map::Mapping;
use crate::raw::mutex::{self, Taken};
use std::io;
use std::sync::atomic::Ordering;

/// The segment's lock, held: the proof the allocator's metadata may be
/// read and written. Released when dropped; if that happens while
/// unwinding from a panic, the segment is marked for repair first.
pub(crate) struct Locked<'a> {
    map: &'a Mapping,
    /// The segment's name, for messages.
    name: &'a str,
}

impl<'a> Locked<'a> {
    /// Take the lock of the segment `name` mapped at `map`, and how it was
    /// taken ([`Taken::OwnerDied`]: the caller repairs).
    pub(crate) fn take(map: &'a Mapping, name: &'a str) -> io::Result<(Locked<'a>, Taken)> {
        let taken = mutex::lock(map)?;
        Ok((Locked { map, name }, taken))
    }

    /// The header or metadata word at `off`.
    #[inline]
    pub(crate) fn get(&self, off: u64) -> u64 {
        self.map.word(off).load(Ordering::Relaxed)
    }

    /// Write the word at `off` (one store: a process dying around it left
    /// either the old value or the new one).
    #[inline]
    pub(crate) fn set(&self, off: u64, value: u64) {
        self.map.word(off).store(value, Ordering::Relaxed)
    }

    pub(crate) fn add(&self, off: u64, n: u64) {
        self.set(off, self.get(off).wrapping_add(n));
    }

    pub(crate) fn sub(&self, off: u64, n: u64) {
        self.set(off, self.get(off).saturating_sub(n));
    }

    /// Bytes of the segment.
    pub(crate) fn size(&self) -> u64 {
        self.map.len()
    }

    pub(crate) fn map(&self) -> &Mapping {
        self.map
    }

    /// The segment's name.
    pub(crate) fn name(&self) -> &str {
        self.name
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.set(at::DIRTY, 1);
        }
        self.set(at::LOCK_OWNER, 0);
        mutex::unlock(self.map);
    }
}
