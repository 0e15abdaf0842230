//! All of the guard's `unsafe` code: the page mappings ([`pages`]), the
//! system allocator that serves what `sample=N` does not guard
//! ([`system`]), and the export of the allocator through the memplug ABI
//! ([`export`]). The rest of the crate denies `unsafe`.

pub(crate) mod export;
pub(crate) mod pages;
pub(crate) mod system;
