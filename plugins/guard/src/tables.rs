//! The guard's tables, what its one lock guards: the live blocks, the
//! quarantine (and its queue, oldest first), the pool's free slots and the
//! counters. Data and the two moves between them; [`crate::state`] decides.

use crate::layout::Placed;
use crate::raw::pages::Region;
use memplug_abi::MemplugStats;
use memplug_stacks::capture::StackId;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Who made a block, or freed it: the stack and the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Origin {
    pub(crate) stack: StackId,
    pub(crate) thread: u32,
}

/// A live block: its region and where it sits.
#[derive(Debug)]
pub(crate) struct Block {
    pub(crate) region: Region,
    pub(crate) at: Placed,
    pub(crate) align: usize,
    /// Where it was allocated.
    pub(crate) made: Origin,
    /// Whether an error in it was reported (with `recover=1`, once per block).
    pub(crate) reported: bool,
}

impl Block {
    /// The bytes of the block (for moving them out of a guarded block).
    pub(crate) fn contents(&self) -> &[u8] {
        let from = self.at.ptr - self.at.data_lo;
        &self.region.window()[from..from + self.at.size]
    }
}

/// A freed block: its region once it is closed and queued
/// (`None` while the free that put it here is still closing it); the
/// region's span, the block as the program saw it, who made and freed it.
#[derive(Debug)]
pub(crate) struct Quarantined {
    pub(crate) region: Option<Region>,
    /// `[base, end)` of the region.
    pub(crate) span: (usize, usize),
    /// The block as the program saw it: start and size.
    pub(crate) user: (usize, usize),
    pub(crate) made: Origin,
    pub(crate) freed: Origin,
    /// Whether an error in it was reported.
    pub(crate) reported: bool,
}

/// What the lock guards.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// Live blocks by the address handed out.
    pub(crate) live: BTreeMap<usize, Block>,
    /// Freed blocks still reserved, by the address they had.
    pub(crate) quarantine: HashMap<usize, Quarantined>,
    /// Closed quarantined blocks, oldest first.
    pub(crate) queue: VecDeque<usize>,
    /// Bytes of address space the queued blocks hold.
    pub(crate) held: usize,
    /// With `sample=`: the pool's slots that hold no block, the longest
    /// free first.
    pub(crate) free_slots: VecDeque<Region>,
    pub(crate) stats: MemplugStats,
}

impl Tables {
    /// Take the oldest queued block out of the quarantine: its region.
    pub(crate) fn evict_oldest(&mut self) -> Option<Region> {
        while let Some(old) = self.queue.pop_front() {
            if let Some(region) = self.quarantine.remove(&old).and_then(|q| q.region) {
                self.held -= region.len();
                return Some(region);
            }
        }
        None
    }

    /// Put a region no block uses any more where it goes: a slot back among
    /// the free ones; a mapping of its own into `unmap` (dropped outside the
    /// lock).
    pub(crate) fn discard(&mut self, mut region: Region, unmap: &mut Vec<Region>) {
        if region.is_pooled() {
            region.seal();
            self.free_slots.push_back(region)
        } else {
            unmap.push(region)
        }
    }
}
