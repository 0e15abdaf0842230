//! The roles a plain C function plays in an allocator made of such
//! functions (`malloc`, `free`, `calloc`, …): the one declaration of them,
//! which the host's manifests, command line and lookups, and the
//! interposer's reader of the table `memplug run` hands it, all follow.

use core::ffi::CStr;
use memplug_abi::run as var;

/// The roles a library function can play in an allocator taken by symbol
/// name. The one declaration of them: the manifest's `[symbols]` keys
/// (memplug's `Symbols`), the command line's flags, the host's lookups and
/// the interposer's reader all follow this table.
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

    /// The environment variable that names the function of this role to
    /// the interposer (`memplug run` sets it, the interposer reads it), e.g.
    /// `MEMPLUG_RUN_SYM_SIZED_FREE`.
    pub fn run_variable(self) -> &'static CStr {
        match self {
            Role::Malloc => var::SYM_MALLOC,
            Role::Calloc => var::SYM_CALLOC,
            Role::Realloc => var::SYM_REALLOC,
            Role::Free => var::SYM_FREE,
            Role::SizedFree => var::SYM_SIZED_FREE,
            Role::AlignedAlloc => var::SYM_ALIGNED_ALLOC,
            Role::UsableSize => var::SYM_USABLE_SIZE,
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
