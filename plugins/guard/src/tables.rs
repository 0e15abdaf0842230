//! The guard's tables, what its one lock guards: the live blocks, the
//! quarantine (and its queue, oldest first), the pool's free slots and the
//! counters. Data and the two moves between them; [`crate::state`] decides.

use crate::layout::Placed;
use crate::raw::pages::Region;
use memplug_abi::MemplugStats;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A live block: its region and where it sits.
#[derive(Debug)]
pub(crate) struct Block {
    pub(crate) region: Region,
    pub(crate) at: Placed,
    pub(crate) align: usize,
}

impl Block {
    /// The bytes of the block (for moving them out of a guarded block).
    pub(crate) fn contents(&self) -> &[u8] {
        let from = self.at.ptr - self.at.data_lo;
        &self.region.window()[from..from + self.at.size]
    }
}

/// A freed block: its size, and its region once it is closed and queued
/// (`None` while the free that put it here is still closing it).
#[derive(Debug)]
pub(crate) struct Quarantined {
    pub(crate) size: usize,
    pub(crate) region: Option<Region>,
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
    pub(crate) fn discard(&mut self, region: Region, unmap: &mut Vec<Region>) {
        if region.is_pooled() { self.free_slots.push_back(region) } else { unmap.push(region) }
    }
}
