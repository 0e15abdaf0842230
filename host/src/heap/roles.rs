//! The roles a C function plays in an allocator made of plain functions
//! (`malloc`, `free`, `calloc`, …): the one declaration of them ([`Role`]),
//! the functions named for each ([`Symbols`]), and the builder methods
//! every such spec shares. The specs themselves are the admit wing's
//! (`symbols`, allocators by symbol name) and this wing's `functions`;
//! the call core's trampolines (`raw/symbols.rs`) read this table.

use serde::{Deserialize, Serialize};

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

/// The roles a library function can play in an allocator taken by symbol
/// name. The one declaration of them: the manifest's `[symbols]` keys
/// ([`Symbols`]), the command line's flags and the host's lookups all follow
/// this table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// `void *malloc(size_t size)`, required.
    Malloc,
    /// `void *calloc(size_t nelem, size_t size)`; derived as malloc + zero.
    Calloc,
    /// `void *realloc(void *ptr, size_t size)`; derived as malloc + copy + free.
    Realloc,
    /// `void free(void *ptr)`, required.
    Free,
    /// `void sized_free(void *ptr, size_t size)`; used instead of `free`.
    SizedFree,
    /// `void *aligned_alloc(size_t alignment, size_t size)`; else the host
    /// over-allocates.
    AlignedAlloc,
    /// `size_t usable_size(void *ptr)`: the usable size of a live block
    /// (ABI 1.3 `usable_size`); else the handler answers none.
    UsableSize,
}

impl Role {
    /// Every role, in the order of the table in the module docs.
    pub const ALL: [Role; 7] =
        [Role::Malloc, Role::Calloc, Role::Realloc, Role::Free, Role::SizedFree, Role::AlignedAlloc, Role::UsableSize];

    /// The role's key in a manifest's `[symbols]` table, e.g. `sized_free`.
    pub fn key(self) -> &'static str {
        match self {
            Role::Malloc => "malloc",
            Role::Calloc => "calloc",
            Role::Realloc => "realloc",
            Role::Free => "free",
            Role::SizedFree => "sized_free",
            Role::AlignedAlloc => "aligned_alloc",
            Role::UsableSize => "usable_size",
        }
    }

    /// The role's command-line flag, without the dashes, e.g. `sized-free`.
    pub fn flag(self) -> &'static str {
        match self {
            Role::SizedFree => "sized-free",
            Role::AlignedAlloc => "aligned-alloc",
            Role::UsableSize => "usable-size",
            other => other.key(),
        }
    }

    /// The C signature the named function must have.
    pub fn signature(self) -> &'static str {
        match self {
            Role::Malloc => "void *malloc(size_t)",
            Role::Calloc => "void *calloc(size_t, size_t)",
            Role::Realloc => "void *realloc(void *, size_t)",
            Role::Free => "void free(void *)",
            Role::SizedFree => "void sized_free(void *, size_t)",
            Role::AlignedAlloc => "void *aligned_alloc(size_t alignment, size_t size)",
            Role::UsableSize => "size_t usable_size(void *)",
        }
    }

    /// Whether every spec must name a function for this role.
    pub fn required(self) -> bool {
        matches!(self, Role::Malloc | Role::Free)
    }

    /// What the host does when the role is left out; `None` for required
    /// roles.
    pub fn when_absent(self) -> Option<&'static str> {
        match self {
            Role::Malloc | Role::Free => None,
            Role::Calloc | Role::Realloc => Some("derived"),
            Role::SizedFree => Some("free is used"),
            Role::AlignedAlloc => Some("the host over-allocates"),
            Role::UsableSize => Some("no usable sizes"),
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
