//! All of the plugin's `unsafe` code: shared-memory objects and their
//! mappings ([`map`]), the robust process-shared lock ([`mutex`]), and the
//! export through the memplug ABI ([`export`]: the `unsafe fn`s of the
//! `Allocator` trait). The rest of the crate denies `unsafe`.

pub(crate) mod export;
pub(crate) mod map;
pub(crate) mod mutex;
