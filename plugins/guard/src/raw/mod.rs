//! The guard's `unsafe` primitives: the page mappings ([`pages`]) and the
//! system allocator that serves what `sample=N` does not guard
//! ([`system`]). The export of the allocator through the memplug ABI is
//! the other unsafe module, `export_raw`, at the top of the crate; the rest
//! of the crate denies `unsafe`.

pub(crate) mod pages;
pub(crate) mod system;
