//! The hugepage allocator's counters: the ABI crate's relaxed atomics
//! ([`memplug_abi::counters::AtomicCounters`], shared by the plugins),
//! updated once per block by the plugin export and read as the ABI's
//! statistics.

pub use memplug_abi::counters::AtomicCounters as Counters;
