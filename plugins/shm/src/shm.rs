//! [`Shm`]: one instance of the allocator — a segment (made or attached)
//! and the operations the plugin exports, each under the segment's lock.
//!
//! Pointers cross here as addresses: an address is turned into an offset
//! by comparing it with the mapping, never by reading through it, so a
//! foreign or stale pointer is refused (and counted), not followed.

use crate::config::{PREFIX, ShmConfig};
use crate::format::{DATA_START, at};
use crate::heap::{self, Corrupt, Freed, Request};
use crate::locked::Locked;
use crate::repair;
use crate::segment::Segment;
use memplug_abi::fork::{ForkLock, ForkMutex};
use memplug_abi::{MemplugLocation, MemplugStats, ShareFailure};
use std::sync::OnceLock;
use std::time::Duration;

/// The test hook: when set (milliseconds) as an instance is made, every
/// allocation holds the segment's lock that long after choosing its block,
/// so a test can kill the process while it holds the lock.
pub const HOLD_ENV: &str = "MEMPLUG_SHM_HOLD_LOCK_MS";

/// One allocator instance over one segment.
pub struct Shm {
    config: ShmConfig,
    segment: OnceLock<Segment>,
    /// Held while the lazy handler makes its segment (taken around a
    /// `fork`, so a child never sees the segment half made).
    making: ForkMutex<()>,
    hold: Option<Duration>,
    /// Whether this is the plugin's own handler, which also names the
    /// process-wide locks to the fork handlers.
    process_locks: bool,
}

/// A segment's statistics, kept in the segment itself: the same for every
/// process attached to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentStats {
    /// Bytes of the segment.
    pub size: u64,
    /// Bytes asked for by the live blocks.
    pub live_bytes: u64,
    /// The highest `live_bytes` seen.
    pub peak_bytes: u64,
    /// Successful allocations.
    pub total_allocations: u64,
    /// Live blocks.
    pub live_count: u64,
    /// Frees of pointers that were not live blocks (ignored).
    pub bad_frees: u64,
    /// Frees whose size differs from the block's (served with the block's).
    pub size_mismatches: u64,
    /// Repairs after a process died holding the lock (or an operation was
    /// interrupted).
    pub recoveries: u64,
    /// Instances attached now (a process killed without detaching stays
    /// counted).
    pub attached: u64,
    /// Attachments ever made.
    pub attaches: u64,
    /// Bytes withheld after a repair found a damaged block header.
    pub withheld: u64,
}

impl Shm {
    /// The plugin's own handler: a segment of this process, made at the
    /// first allocation (not before: loading the plugin makes nothing).
    pub fn lazy() -> Shm {
        Shm {
            config: ShmConfig::default(),
            segment: OnceLock::new(),
            making: ForkMutex::new(()),
            hold: hold(),
            process_locks: true,
        }
    }

    /// An instance from an options string ([`ShmConfig::parse`]): its
    /// segment is made or attached now.
    ///
    /// ```
    /// let shm = memplug_shm::Shm::from_options("size=1m").unwrap();
    /// let p = shm.alloc(100, true);
    /// assert!(!p.is_null());
    /// let name = shm.segment_name().unwrap();
    /// assert!(std::path::Path::new("/dev/shm").join(&name[1..]).exists());
    /// shm.free(p, 100);
    /// drop(shm);
    /// assert!(!std::path::Path::new("/dev/shm").join(&name[1..]).exists(), "its own segment is removed");
    /// ```
    pub fn from_options(options: &str) -> Result<Shm, String> {
        let config = ShmConfig::parse(options)?;
        let segment = Segment::open(&config)?;
        Ok(Shm {
            config,
            segment: OnceLock::from(segment),
            making: ForkMutex::new(()),
            hold: hold(),
            process_locks: false,
        })
    }

    /// The locks a `fork` must find free (see [`memplug_abi::fork`]): the
    /// lazy handler's while it makes its segment, then (for the plugin's own
    /// handler) the process-wide list of segments to remove at exit, which
    /// making a segment takes inside it. A segment's own lock lives in the
    /// segment, shared with the child, and is released by its holder in
    /// the parent as usual.
    pub fn fork_locks<'a>(&'a self, locks: &mut dyn FnMut(&'a dyn ForkLock)) {
        locks(&self.making);
        if self.process_locks {
            crate::segment::fork_locks(locks);
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ShmConfig {
        &self.config
    }

    /// The segment, made now if this is the lazy handler's first use; `None`
    /// if it cannot be made (said on standard error).
    fn segment(&self) -> Option<&Segment> {
        if let Some(s) = self.segment.get() {
            return Some(s);
        }
        let _making = self.making.lock();
        if self.segment.get().is_none() {
            match Segment::open(&self.config) {
                Ok(s) => {
                    let _ = self.segment.set(s);
                }
                Err(e) => eprintln!("memplug shm: {e}"),
            }
        }
        self.segment.get()
    }

    #[cfg(test)]
    pub(crate) fn segment_for_tests(&self) -> &Segment {
        self.segment().expect("a segment")
    }

    /// The segment's name, once there is one, e.g. `/memplug-results`.
    pub fn segment_name(&self) -> Option<String> {
        self.segment.get().map(|s| s.name().to_string())
    }

    /// Run `op` under the segment's lock; if it finds the metadata
    /// inconsistent, repair and run it once more.
    fn locked<T>(&self, segment: &Segment, op: impl Fn(&Locked) -> Result<T, Corrupt>) -> Option<T> {
        let l = segment.lock().map_err(|e| eprintln!("memplug shm: {e}")).ok()?;
        match op(&l) {
            Ok(t) => Some(t),
            Err(Corrupt(what)) => {
                let report = repair::repair(&l);
                eprintln!("memplug shm: segment {}: {what}; repaired the allocator: {report}", segment.name());
                op(&l).ok()
            }
        }
    }

    /// A block of `len` bytes (zeroed if `zero`), or null when the segment
    /// is full.
    pub fn alloc(&self, len: usize, zero: bool) -> *mut u8 {
        self.alloc_counted(len, zero, true)
    }

    fn alloc_counted(&self, len: usize, zero: bool, counted: bool) -> *mut u8 {
        let Some(seg) = self.segment() else { return std::ptr::null_mut() };
        let req = Request { len: len as u64, zero, counted, hold: self.hold };
        match self.locked(seg, |l| heap::alloc(l, req)).flatten() {
            Some(off) => seg.map().addr(off),
            None => std::ptr::null_mut(),
        }
    }

    /// Free a block of `len` bytes. A pointer that is not a live block of
    /// this segment is reported on standard error, counted and ignored; a
    /// wrong size is reported, counted and served with the block's own.
    pub fn free(&self, ptr: *mut u8, len: usize) {
        let Some(seg) = self.segment.get() else {
            eprintln!("memplug shm: free of {ptr:p} ({len} bytes) by an instance that has made nothing: ignored");
            return;
        };
        let off = seg.map().offset_of(ptr as usize).unwrap_or(0);
        let freed = self.locked(seg, |l| {
            let freed = heap::free(l, off, len as u64)?;
            match freed {
                Freed::NotABlock => l.add(at::BAD_FREES, 1),
                Freed::SizeMismatch(_) => l.add(at::SIZE_MISMATCHES, 1),
                Freed::Done => {}
            }
            Ok(freed)
        });
        match freed {
            Some(Freed::NotABlock) => eprintln!(
                "memplug shm: free of {ptr:p} ({len} bytes), which is not a live block of segment {}: ignored",
                seg.name()
            ),
            Some(Freed::SizeMismatch(recorded)) => eprintln!(
                "memplug shm: free of {ptr:p} as {len} bytes, but it was allocated as {recorded} (segment {}): freed",
                seg.name()
            ),
            _ => {}
        }
    }

    /// Resize a block, keeping `min(old, new)` bytes: in place when its size
    /// class stays, else a new block, a copy (outside the lock) and a free.
    /// Null on failure, the old block untouched.
    pub fn realloc(&self, ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
        let Some(seg) = self.segment.get() else { return std::ptr::null_mut() };
        let off = seg.map().offset_of(ptr as usize).unwrap_or(0);
        let found =
            self.locked(seg, |l| Ok(heap::live(l, off).map(|b| (b.len, heap::resize_in_place(l, b, new as u64)))));
        let Some(Some((len, in_place))) = found else {
            eprintln!("memplug shm: realloc of {ptr:p}, which is not a live block of segment {}", seg.name());
            self.locked(seg, |l| {
                l.add(at::BAD_FREES, 1);
                Ok(())
            });
            return std::ptr::null_mut();
        };
        if in_place {
            return ptr;
        }
        let q = self.alloc_counted(new, false, false);
        if !q.is_null() {
            let to = seg.map().offset_of(q as usize).expect("a block of this segment");
            seg.map().copy(off, to, len.min(new as u64));
            self.free(ptr, old);
        }
        q
    }

    /// The ABI 1.2 `locate`: where the `size` bytes at `ptr` live. Only
    /// compares `ptr` with the segment.
    pub fn locate(&self, ptr: *const u8, size: usize, out: &mut MemplugLocation) -> Result<(), ShareFailure> {
        let seg = self.segment.get().ok_or(ShareFailure::Foreign)?;
        let off = seg.map().offset_of(ptr as usize).filter(|&o| o >= DATA_START).ok_or(ShareFailure::Foreign)?;
        if off.checked_add(size as u64).is_none_or(|end| end > seg.size()) {
            return Err(ShareFailure::Foreign);
        }
        let short = &seg.name()[PREFIX.len()..];
        if !out.set_segment(seg.name()) || !out.set_attach(&format!("name={short},create=0")) {
            return Err(ShareFailure::Unavailable);
        }
        out.segment_size = seg.size();
        out.generation = seg.generation();
        out.offset = off;
        out.length = size as u64;
        Ok(())
    }

    /// The ABI 1.2 `resolve`: the address here of a range `locate` described.
    pub fn resolve(&self, location: &MemplugLocation) -> Result<*mut u8, ShareFailure> {
        let seg = self.segment.get().ok_or(ShareFailure::Unavailable)?;
        if location.segment_str() != Some(seg.name()) {
            return Err(ShareFailure::Foreign);
        }
        if location.segment_size != seg.size() {
            return Err(ShareFailure::Size);
        }
        if location.generation != seg.generation() {
            return Err(ShareFailure::Stale);
        }
        match location.offset.checked_add(location.length) {
            Some(end) if location.offset >= DATA_START && end <= seg.size() => Ok(seg.map().addr(location.offset)),
            _ => Err(ShareFailure::Range),
        }
    }

    /// The segment's statistics (all zero before the lazy handler's first
    /// allocation).
    pub fn stats(&self) -> SegmentStats {
        let Some(seg) = self.segment.get() else { return SegmentStats::default() };
        self.locked(seg, |l| {
            Ok(SegmentStats {
                size: l.size(),
                live_bytes: l.get(at::LIVE_BYTES),
                peak_bytes: l.get(at::PEAK_BYTES),
                total_allocations: l.get(at::TOTAL_ALLOCATIONS),
                live_count: l.get(at::LIVE_COUNT),
                bad_frees: l.get(at::BAD_FREES),
                size_mismatches: l.get(at::SIZE_MISMATCHES),
                recoveries: l.get(at::RECOVERIES),
                attached: l.get(at::ATTACHED),
                attaches: l.get(at::ATTACHES),
                withheld: l.get(at::WITHHELD),
            })
        })
        .unwrap_or_default()
    }

    /// The statistics as the ABI reports them.
    pub fn memplug_stats(&self) -> MemplugStats {
        let s = self.stats();
        MemplugStats {
            struct_size: size_of::<MemplugStats>() as u64,
            live_bytes: s.live_bytes,
            peak_bytes: s.peak_bytes,
            total_allocations: s.total_allocations,
            live_count: s.live_count,
            bad_frees: s.bad_frees,
            size_mismatches: s.size_mismatches,
        }
    }
}

/// The test hook's duration, from [`HOLD_ENV`].
fn hold() -> Option<Duration> {
    let ms: u64 = std::env::var(HOLD_ENV).ok()?.parse().ok()?;
    Some(Duration::from_millis(ms))
}
