//! [`HandlerInfo`]: what the host knows about a handler besides its
//! functions, and [`Source`]: where it came from. Built once per handler,
//! by `HandlerInfo::from_header` for plugins and
//! `HandlerInfo::from_functions` for handlers made of plain functions.

use crate::heap::roles::Symbols;
use crate::text::{escape, escape_os};
use std::fmt;
use std::path::PathBuf;

/// Where a handler came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Built into the host (the process default, libc).
    Builtin,
    /// A plugin library and the entry symbol called.
    Plugin {
        /// The library's path.
        path: PathBuf,
        /// The entry symbol.
        symbol: String,
    },
    /// Plain C allocation functions taken by name from a library
    /// ([`crate::admit::symbols`]).
    Symbols {
        /// The library as named (path or soname).
        library: String,
        /// The manifest it was described in, if any.
        manifest: Option<PathBuf>,
        /// The functions taken.
        symbols: Symbols,
    },
    /// Functions given by address, with no library to open
    /// ([`crate::heap::functions`]).
    Functions {
        /// Where they came from, in words, e.g. `Python callables`.
        origin: String,
    },
}

impl Source {
    /// The file it came from: the plugin library, or the manifest of an
    /// allocator taken by symbol name (`None` for the built-in handler, for
    /// specs given directly and for functions given by address).
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            Source::Plugin { path, .. } => Some(path),
            Source::Symbols { manifest, .. } => manifest.as_deref(),
            Source::Builtin | Source::Functions { .. } => None,
        }
    }
}

/// Shown escaped ([`crate::text`]): a file name or symbol from outside
/// never draws on the terminal.
impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Builtin => f.write_str("<builtin>"),
            Source::Plugin { path, symbol } if symbol == memplug_abi::ENTRY_SYMBOL => {
                f.write_str(&escape_os(path.as_os_str()))
            }
            Source::Plugin { path, symbol } => write!(f, "{}#{}", escape_os(path.as_os_str()), escape(symbol)),
            Source::Symbols { manifest: Some(m), .. } => f.write_str(&escape_os(m.as_os_str())),
            Source::Symbols { library, symbols, .. } => {
                write!(f, "{} ({} / {})", escape(library), escape(&symbols.malloc), escape(&symbols.free))
            }
            Source::Functions { origin } => write!(f, "<{}>", escape(origin)),
        }
    }
}

/// What the layout check of a plugin found: whether its `<entry>_layout`
/// companion (exported by `memplug-abi`'s Rust export macros) was compared
/// with the host's frozen type of the ABI minor it claims. A mismatch is not
/// here: it refuses the plugin (`layout-mismatch`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum LayoutCheck {
    /// No layout companion: a C plugin, a Rust plugin built without
    /// `memplug-abi`'s `layout` feature, or a handler without a header.
    /// `struct_size` and the ABI version are all that is checked, as
    /// always.
    NotExported,
    /// `abi_stable` compared the plugin's handler type with the host's
    /// frozen type of the claimed ABI minor, field by field: compatible.
    Checked,
    /// The plugin exports a companion, but the host could not compare it.
    NotChecked {
        /// Why, e.g. "ABI 1.3 is newer than this host's 1.2".
        reason: String,
    },
}

impl LayoutCheck {
    /// A stable code: `not-exported`, `checked` or `not-checked`.
    pub fn code(&self) -> &'static str {
        match self {
            LayoutCheck::NotExported => "not-exported",
            LayoutCheck::Checked => "checked",
            LayoutCheck::NotChecked { .. } => "not-checked",
        }
    }
}

impl fmt::Display for LayoutCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutCheck::NotExported => f.write_str("not exported (struct_size and ABI version only)"),
            LayoutCheck::Checked => f.write_str("checked (abi_stable)"),
            LayoutCheck::NotChecked { reason } => write!(f, "not checked: {reason}"),
        }
    }
}

/// What the host knows about a handler besides its functions.
#[derive(Debug, Clone)]
pub struct HandlerInfo {
    /// The unique name.
    pub name: String,
    /// The plugin's own version.
    pub version: semver::Version,
    /// ABI major the plugin was built against.
    pub abi_major: u16,
    /// ABI minor the plugin was built against.
    pub abi_minor: u16,
    /// The size the plugin declared for its handler struct; 0 for handlers
    /// without a header (the built-in one, allocators taken by symbol name).
    pub struct_size: u32,
    /// The advisory flag bits as declared.
    pub flags: u32,
    /// The required flag bits (ABI 1.1; 0 for older plugins).
    pub required_flags: u32,
    /// The alignment every block has (declared, or the default 16).
    pub alignment: usize,
    /// The memory kind, a DLPack device type (`1` = CPU).
    pub memory_kind: i32,
    /// Fields the host supplied defaults for (missing in an older ABI, or 0).
    pub defaulted: Vec<&'static str>,
    /// Whether the host's policy marks this plugin's ABI minor deprecated.
    pub deprecated: bool,
    /// The options this instance was made with; `None` for a plugin's own
    /// handler.
    pub options: Option<String>,
    /// Whether the plugin's handler type was checked against the frozen
    /// layout of its ABI minor ([`LayoutCheck`]).
    pub layout: LayoutCheck,
    /// Where it came from.
    pub source: Source,
}

impl HandlerInfo {
    /// Whether the plugin declared [`memplug_abi::FLAG_THREAD_SAFE`].
    pub fn thread_safe(&self) -> bool {
        self.flags & memplug_abi::FLAG_THREAD_SAFE != 0
    }

    /// The advisory flags in force: the declared ones, less the ABI 1.3
    /// bits for a plugin of an older minor (for which they were unknown,
    /// and so meaningless, bits).
    pub fn flags_in_force(&self) -> u32 {
        match self.abi_minor {
            0..=2 => self.flags & !(memplug_abi::FLAG_SIZELESS_FREE | memplug_abi::FLAG_KNOWS_FOREIGN),
            _ => self.flags,
        }
    }

    /// Whether the handler's `free` and `realloc` need no size
    /// ([`memplug_abi::FLAG_SIZELESS_FREE`], ABI 1.3): the host may pass 0
    /// for the size of a block.
    pub fn sizeless_free(&self) -> bool {
        self.flags_in_force() & memplug_abi::FLAG_SIZELESS_FREE != 0
    }

    /// Whether the handler's `usable_size` answers 0 for pointers it did not
    /// make ([`memplug_abi::FLAG_KNOWS_FOREIGN`], ABI 1.3).
    pub fn knows_foreign(&self) -> bool {
        self.flags_in_force() & memplug_abi::FLAG_KNOWS_FOREIGN != 0
    }

    /// The names of the flags set, e.g. `["thread-safe"]`; unknown bits
    /// (and the ABI 1.3 bits of an older plugin) as `bit-N`.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut names = flag_names(self.flags_in_force());
        let ignored = self.flags & !self.flags_in_force();
        names.extend(flag_names(ignored).into_iter().map(|n| match n {
            "sizeless-free" => "bit-1",
            "knows-foreign" => "bit-2",
            other => other,
        }));
        names
    }

    /// `"major.minor"`.
    pub fn abi(&self) -> String {
        format!("{}.{}", self.abi_major, self.abi_minor)
    }

    /// The memory kind's DLPack name, e.g. `kDLCPU`.
    pub fn memory_kind_name(&self) -> &'static str {
        memory_kind_name(self.memory_kind)
    }

    /// The info of a handler the host built from plain functions (the
    /// built-in one, or one taken by symbol name): it speaks this host's ABI,
    /// has no header (`struct_size` 0) and serves CPU memory; `flags` are
    /// the advisory flags the host gives it (`FLAG_THREAD_SAFE`,
    /// `FLAG_SIZELESS_FREE`).
    pub(crate) fn from_functions(
        name: String,
        version: semver::Version,
        flags: u32,
        alignment: usize,
        defaulted: Vec<&'static str>,
        source: Source,
    ) -> HandlerInfo {
        HandlerInfo {
            name,
            version,
            abi_major: memplug_abi::ABI_MAJOR,
            abi_minor: memplug_abi::ABI_MINOR,
            struct_size: 0,
            flags,
            required_flags: 0,
            alignment,
            memory_kind: memplug_abi::KIND_CPU,
            defaulted,
            deprecated: false,
            options: None,
            layout: LayoutCheck::NotExported,
            source,
        }
    }
}

/// The names of the known flags in `flags`; unknown bits as `bit-N`.
pub fn flag_names(flags: u32) -> Vec<&'static str> {
    const BITS: [&str; 32] = [
        "thread-safe",
        "sizeless-free",
        "knows-foreign",
        "bit-3",
        "bit-4",
        "bit-5",
        "bit-6",
        "bit-7",
        "bit-8",
        "bit-9",
        "bit-10",
        "bit-11",
        "bit-12",
        "bit-13",
        "bit-14",
        "bit-15",
        "bit-16",
        "bit-17",
        "bit-18",
        "bit-19",
        "bit-20",
        "bit-21",
        "bit-22",
        "bit-23",
        "bit-24",
        "bit-25",
        "bit-26",
        "bit-27",
        "bit-28",
        "bit-29",
        "bit-30",
        "bit-31",
    ];
    (0..32).filter(|b| flags & (1 << b) != 0).map(|b| BITS[b]).collect()
}

/// The DLPack name of a memory kind, e.g. `"kDLCUDAHost"`.
pub fn memory_kind_name(kind: i32) -> &'static str {
    match kind {
        1 => "kDLCPU",
        2 => "kDLCUDA",
        3 => "kDLCUDAHost",
        4 => "kDLOpenCL",
        7 => "kDLVulkan",
        8 => "kDLMetal",
        9 => "kDLVPI",
        10 => "kDLROCM",
        11 => "kDLROCMHost",
        12 => "kDLExtDev",
        13 => "kDLCUDAManaged",
        14 => "kDLOneAPI",
        15 => "kDLWebGPU",
        16 => "kDLHexagon",
        _ => "unknown",
    }
}
