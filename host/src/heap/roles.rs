//! The roles a C function plays in an allocator made of plain functions
//! (`malloc`, `free`, `calloc`, …): [`Role`], declared once in the call
//! core the host shares with its interposer (`memplug-callcore`), the
//! functions named for each ([`Symbols`]), and the builder methods every
//! such spec shares. The specs themselves are the admit wing's (`symbols`,
//! allocators by symbol name) and this wing's `functions`; the call core's
//! reader (`raw/symbols.rs`) reads this table.

use serde::{Deserialize, Serialize};

pub use memplug_callcore::Role;

/// Which functions to take from the library, by role.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Symbols {
    /// `malloc(size)`.
    pub malloc: String,
    /// `calloc(nelem, size)`, optional.
    pub calloc: Option<String>,
    /// `realloc(ptr, size)`, optional.
    pub realloc: Option<String>,
    /// `free(ptr)`.
    pub free: String,
    /// `sized_free(ptr, size)`, optional; used instead of `free` when given.
    pub sized_free: Option<String>,
    /// `aligned_alloc(alignment, size)`, optional.
    pub aligned_alloc: Option<String>,
    /// `usable_size(ptr)`, optional: the usable size of a live block.
    #[serde(default)]
    pub usable_size: Option<String>,
}

impl Symbols {
    /// The symbol named for `role`, if any.
    pub fn get(&self, role: Role) -> Option<&str> {
        match role {
            Role::Malloc => Some(&self.malloc),
            Role::Calloc => self.calloc.as_deref(),
            Role::Realloc => self.realloc.as_deref(),
            Role::Free => Some(&self.free),
            Role::SizedFree => self.sized_free.as_deref(),
            Role::AlignedAlloc => self.aligned_alloc.as_deref(),
            Role::UsableSize => self.usable_size.as_deref(),
        }
    }

    /// Name `symbol` for `role` (`None` leaves an optional role out; a
    /// required role cannot be left out and keeps its name).
    pub fn set(&mut self, role: Role, symbol: Option<String>) {
        match role {
            Role::Malloc => self.malloc = symbol.unwrap_or_else(|| std::mem::take(&mut self.malloc)),
            Role::Calloc => self.calloc = symbol,
            Role::Realloc => self.realloc = symbol,
            Role::Free => self.free = symbol.unwrap_or_else(|| std::mem::take(&mut self.free)),
            Role::SizedFree => self.sized_free = symbol,
            Role::AlignedAlloc => self.aligned_alloc = symbol,
            Role::UsableSize => self.usable_size = symbol,
        }
    }
}

/// The builder methods of what a spec declares about its functions, shared
/// by [`SymbolSpec`](crate::symbols::SymbolSpec) and [`FunctionSpec`](crate::heap::functions::FunctionSpec)
/// (each has the fields `thread_safe`, `alignment` and `version`). Expands
/// to methods, inside the spec's `impl`.
macro_rules! declared_setters {
    () => {
        /// Declare the functions thread-safe (no host lock).
        pub fn thread_safe(mut self, yes: bool) -> Self {
            self.thread_safe = yes;
            self
        }

        /// Declare the alignment every block has.
        pub fn alignment(mut self, alignment: u64) -> Self {
            self.alignment = Some(alignment);
            self
        }

        /// Declare the allocator's version.
        pub fn version(mut self, version: &str) -> Self {
            self.version = Some(version.to_string());
            self
        }
    };
}
pub(crate) use declared_setters;
