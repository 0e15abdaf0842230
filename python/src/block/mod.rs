//! A bridged block's memory: the header in front of its data, the size
//! class of a small one, and the per-thread cache of freed ones.
//!
//! # Layers
//! Each imports only from the modules above it in this list (bottom first).
//! 0. `header_raw` — the block header in both its formats (plain, and
//!    padded to a cache line), its check words and sizes, and every read
//!    and write of its words; imports nothing;
//! 1. `classes` — the size classes of small blocks (pure arithmetic);
//! 2. `cache_raw` — one thread's lists of freed small blocks and its two
//!    spares, threaded through the blocks' headers.

#[allow(unsafe_code)]
pub mod header_raw;
pub mod classes;
#[allow(unsafe_code)]
pub mod cache_raw;
