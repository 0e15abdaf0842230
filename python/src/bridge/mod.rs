//! Bridges: a memplug handler seen from NumPy — its state, the record of
//! NumPy's mistakes, and the functions NumPy calls through its handler
//! struct (the hot path of every NumPy allocation).
//!
//! # Layers
//! Each imports only from the modules above it in this list (bottom first).
//! 0. `events` — what NumPy got wrong (a wrong size passed to `free`, a
//!    pointer the bridge never made), by the Python line it happened at;
//! 1. `state` — the [`Bridge`](state::Bridge) itself: the handler, the
//!    header size, the counters, the switch of the cache of freed blocks;
//! 2. `plugin_raw` — the calls into the plugin, direct or through the
//!    handler, and the giving back of cached blocks when the cache is
//!    turned off or the bridge closed;
//! 3. `padded_raw` — `malloc`, `calloc`, `realloc` and `free` of a padded
//!    bridge (a shareable handler's, its data aligned to a cache line);
//! 4. `alloc_raw` — `malloc`, `calloc` and `realloc` of the other bridges,
//!    with the cache of freed blocks;
//! 5. `free_raw` — their `free`.

pub mod events;
pub mod state;
#[allow(unsafe_code)]
pub mod plugin_raw;
#[allow(unsafe_code)]
pub mod padded_raw;
#[allow(unsafe_code)]
pub mod alloc_raw;
#[allow(unsafe_code)]
pub mod free_raw;
