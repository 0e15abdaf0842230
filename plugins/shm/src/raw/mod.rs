//! The plugin's `unsafe` primitives: shared-memory objects and their
//! mappings ([`map`]) and the robust process-shared lock ([`mutex`]). The
//! export through the memplug ABI is the other unsafe module,
//! `export_raw`, at the top of the crate; the rest of the crate denies
//! `unsafe`.

pub(crate) mod map;
pub(crate) mod mutex;
