//! A [`Bridge`]: one memplug handler seen from NumPy — the handler, the
//! header size its blocks carry, its counters, the switch of its cache of
//! freed blocks, and the record of what NumPy got wrong
//! ([`super::events`]). Bridges are made once per handler name and live
//! for the process: NumPy's capsules point at them.
//!
//! The functions NumPy calls are in [`super::alloc_raw`],
//! [`super::free_raw`] and [`super::padded_raw`]; this module owns the
//! state they use and the cold paths they call into.

use super::events::EventLog;
use crate::block::classes::{MAX_CACHED, rounded};
use crate::block::header_raw::{PAD_ALIGN, PADDED_OVERHEAD, header_size};
use crate::counters::counting::Totals;
use crate::counters::thread_lines::Counts;
use memplug::{DirectCalls, Handler, Instance};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// [`Bridge::cache_below`] while the cache of freed blocks is on: every
/// request the size classes serve.
const CACHE_ON_BELOW: usize = MAX_CACHED + 1;

/// The variable that, set to `0` before a bridge is made, keeps it from
/// ever caching.
pub const CACHE_ENV: &str = "MEMPLUG_NUMPY_CACHE";

/// One memplug handler bridged to NumPy. The fields NumPy's every call
/// reads come first, in one cache line; then the counters' lines.
#[repr(C, align(128))]
pub struct Bridge {
    /// The handler blocks come from.
    pub handler: Handler,
    /// Bytes in front of each block (see [`crate::block::header_raw`]); for a
    /// padded bridge, the bytes added to each block ([`PADDED_OVERHEAD`]).
    pub header: usize,
    /// Whether small requests get the room of their size class, so that
    /// their blocks may be cached ([`super::alloc_raw`]): fixed when the
    /// bridge is made, for a thread-safe handler that reports no
    /// statistics (see [`cache_refusal`]).
    pub rounds: bool,
    /// Whether the data is aligned to [`PAD_ALIGN`] by padding: bridges of
    /// shareable handlers aligned less ([`super::padded_raw`]).
    pub padded: bool,
    /// Requests of fewer bytes than this are served from the cache of
    /// freed blocks, and such blocks freed go to it: [`CACHE_ON_BELOW`]
    /// while it is on, 0 while it is off (or never on: see
    /// [`Bridge::cache_refusal`]). One word, so that the hot paths ask
    /// "small, and caching?" in one comparison.
    cache_below: AtomicUsize,
    /// Mixed into every block's check word (see [`crate::block::header_raw`]):
    /// drawn for each bridge, so that a block of one bridge handed to
    /// another is recognised as not its own.
    pub salt: usize,
    /// The handler's `malloc` and `free`, when calls need nothing around
    /// them (thread-safe, not an instance): the hot path calls them from
    /// here, without following [`Bridge::handler`] to its core.
    pub direct: Option<DirectCalls>,
    /// Why the bridge never caches, if it does not.
    pub cache_refusal: Option<String>,
    /// Allocation counters, and each thread's cached blocks.
    pub counts: Counts,
    /// The name NumPy shows: `memplug:<name>` (with options, if any).
    pub numpy_name: String,
    /// The name it was asked by, e.g. `arena` or `arena:region_size=1m`.
    pub key: String,
    /// `free` calls whose size differs from the block's.
    pub size_mismatches: EventLog,
    /// Pointers handed to `free`/`realloc` that this bridge did not make
    /// (or freed already): never passed to the plugin.
    pub foreign_pointers: EventLog,
    /// The instance made from options, kept until [`super::plugin_raw::close`].
    instance: Mutex<Option<Instance>>,
}

/// Why a bridge of `handler` must not cache freed blocks, if so. A cached
/// block stays allocated in the plugin's eyes: only a plugin that cannot
/// observe that (it reports no statistics) and does not need its calls
/// serialised may be cached for — as NumPy's own handler caches for libc.
pub fn cache_refusal(handler: Handler, padded: bool) -> Option<String> {
    if std::env::var(CACHE_ENV).is_ok_and(|v| v.trim() == "0") {
        return Some(format!("{CACHE_ENV}=0 was set when the bridge was made"));
    }
    if !handler.is_thread_safe() {
        return Some("the handler is not thread-safe".into());
    }
    if handler.stats().is_some() {
        return Some("the plugin reports statistics, which cached blocks would change".into());
    }
    if padded {
        return Some("the handler is shareable (its arrays are padded to 64 bytes)".into());
    }
    None
}

impl Bridge {
    /// A bridge for `handler`, leaked: it lives for the process.
    pub fn leak(key: &str, handler: Handler, instance: Option<Instance>) -> &'static Bridge {
        let padded = handler.is_shareable() && handler.alignment() < PAD_ALIGN;
        let cache_refusal = cache_refusal(handler, padded);
        Box::leak(Box::new(Bridge {
            handler,
            header: if padded { PADDED_OVERHEAD } else { header_size(handler.alignment()) },
            rounds: cache_refusal.is_none(),
            padded,
            cache_below: AtomicUsize::new(if cache_refusal.is_none() { CACHE_ON_BELOW } else { 0 }),
            salt: new_salt(),
            direct: handler.direct_calls(),
            cache_refusal,
            counts: Counts::new(),
            numpy_name: format!("memplug:{key}"),
            key: key.to_string(),
            size_mismatches: EventLog::default(),
            foreign_pointers: EventLog::default(),
            instance: Mutex::new(instance),
        }))
    }

    /// Whether freed blocks go to the cache now.
    #[inline]
    pub fn caching(&self) -> bool {
        self.cache_below.load(Relaxed) != 0
    }

    /// Whether a request of `size` bytes is served from the cache of freed
    /// blocks, and such a block freed goes to it: it is small enough for
    /// the size classes and the cache is on.
    #[inline]
    pub fn caches(&self, size: usize) -> bool {
        size < self.cache_below.load(Relaxed)
    }

    /// The bytes asked of the plugin for a request of `size`: the header
    /// and the room (see [`Bridge::rounds`]); `None` on overflow.
    #[inline]
    pub fn plugin_size(&self, size: usize) -> Option<usize> {
        let room = if self.rounds { rounded(size) } else { size };
        room.checked_add(self.header)
    }

    /// Switch the cache of freed blocks on or off; whether it was on. `Err`
    /// with the reason for a bridge that never caches. Switching it off
    /// leaves the blocks cached: [`super::plugin_raw::set_caching`] frees
    /// them (that is the call to make).
    pub fn switch_cache(&self, on: bool) -> Result<bool, String> {
        if let Some(why) = &self.cache_refusal {
            return Err(why.clone());
        }
        Ok(self.cache_below.swap(if on { CACHE_ON_BELOW } else { 0 }, Relaxed) != 0)
    }

    /// The cache's state: `on`, `off` or `never`.
    pub fn cache_state(&self) -> &'static str {
        if self.cache_refusal.is_some() {
            "never"
        } else if self.caching() {
            "on"
        } else {
            "off"
        }
    }

    /// Let go of the bridge's instance (see [`super::plugin_raw::close`],
    /// which turns the cache off first: the call to make); `false` if it
    /// has none or let it go already.
    pub fn take_instance(&self) -> bool {
        self.instance.lock().unwrap_or_else(|e| e.into_inner()).take().is_some()
    }

    /// Whether the bridge serves an instance made from options.
    pub fn is_instance(&self) -> bool {
        self.key.contains(':')
    }

    /// NumPy passed `passed` to `free` for a block of `allocated` bytes.
    #[cold]
    #[inline(never)]
    pub fn numpy_size_mismatch(&self, allocated: usize, passed: usize) {
        self.size_mismatches.record(allocated, passed);
    }

    /// NumPy handed `free`/`realloc` a pointer this bridge did not make.
    #[cold]
    #[inline(never)]
    pub fn foreign_pointer(&self, call: &str) {
        tracing::warn!(handler = %self.key, call, "NumPy passed a pointer this handler did not make; ignored");
        self.foreign_pointers.record(0, 0);
    }

    /// The counters summed over threads.
    pub fn totals(&self) -> Totals {
        self.counts.totals()
    }
}

// The fields of NumPy's every call lie in the bridge's first cache line.
const _: () = assert!(
    std::mem::offset_of!(Bridge, direct) + size_of::<Option<DirectCalls>>() <= 64
        && std::mem::offset_of!(Bridge, header) < 64
        && std::mem::offset_of!(Bridge, salt) < 64
        && std::mem::offset_of!(Bridge, cache_below) < 64
);

/// A salt for a new bridge's check words: different for every bridge of
/// the process, and from one process to the next.
fn new_salt() -> usize {
    use std::hash::{BuildHasher, Hasher};
    static BRIDGES: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(BRIDGES.fetch_add(1, Relaxed));
    h.finish() as usize
}
