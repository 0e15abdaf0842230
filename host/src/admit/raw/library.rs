//! Opening plugin libraries, finding and calling their entry functions, and
//! copying a handler's bytes out of the plugin; calling a Rust plugin's
//! layout companion.
//!
//! Libraries are opened with `RTLD_NOW | RTLD_LOCAL` (unresolved symbols fail
//! at open, not at the first call) and are never closed: each handle is
//! leaked into [`LIBRARIES`] for the life of the process. "Unloading" a
//! handler only unregisters its name.

use crate::admit::error::Refusal;
use crate::admit::validate::{self, Prefix, ValidatedHeader};
use abi_stable::type_layout::TypeLayout;
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use memplug_abi::layout::{FORMAT_ABI_STABLE_0_11, LAYOUT_SUFFIX, LayoutFn};
use memplug_abi::{EntryFn, MemplugHandler, PREFIX_LEN, STATS_SUFFIX, StatsFn};
use memplug_callcore::VTable;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Every library this process opened, in order. Never shrinks.
static LIBRARIES: Mutex<Vec<(PathBuf, &'static Library)>> = Mutex::new(Vec::new());

/// The paths of every library opened so far (none is ever closed).
pub(crate) fn opened() -> Vec<PathBuf> {
    LIBRARIES.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(p, _)| p.clone()).collect()
}

/// Open `path` and keep it open for the rest of the process.
pub(crate) fn open(path: &Path) -> Result<&'static Library, Refusal> {
    // A bare file name would make dlopen search the system paths; a plugin
    // candidate is always a file, so make it a path.
    let path_buf = if path.components().count() == 1 { Path::new(".").join(path) } else { path.to_path_buf() };
    open_raw(path_buf.as_os_str(), path)
}

/// Open a library by a path (anything with a `/`) or a bare soname such as
/// `libmimalloc.so.2`, which the dynamic loader resolves through its search
/// path; keep it open for the rest of the process.
pub(crate) fn open_by_name(name: &str) -> Result<&'static Library, Refusal> {
    open_raw(std::ffi::OsStr::new(name), Path::new(name))
}

fn open_raw(arg: &std::ffi::OsStr, record: &Path) -> Result<&'static Library, Refusal> {
    // SAFETY: opening a library runs its initialisers. Loading a plugin means
    // trusting its code; the user chose this file (or put it in a plugins
    // directory, or named it in a manifest). Nothing else is assumed here.
    let lib = unsafe { Library::open(Some(arg), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| Refusal::NotALibrary { library: arg.to_string_lossy().into_owned(), loader: loader_text(&e) })?;
    let lib: &'static Library = Box::leak(Box::new(lib));
    // Its constructors may have registered fork handlers.
    crate::heap::raw::atfork::library_event();
    LIBRARIES.lock().unwrap_or_else(|e| e.into_inner()).push((record.to_path_buf(), lib));
    Ok(lib)
}

fn loader_text(e: &libloading::Error) -> String {
    match e {
        libloading::Error::DlOpen { desc } => format!("{desc:?}").trim_matches('"').to_string(),
        other => other.to_string(),
    }
}

/// The entry function `symbol` of `lib`.
pub(crate) fn entry(lib: &'static Library, symbol: &str) -> Result<EntryFn, Refusal> {
    // SAFETY: the symbol is looked up as the ABI's entry type. The contract of
    // a memplug plugin (memplug.h) is that a symbol with this name is such a
    // function; the library stays loaded forever, so the pointer never dangles.
    let f = unsafe { lib.get::<EntryFn>(symbol.as_bytes()) };
    match f {
        Ok(sym) => Ok(*sym),
        Err(_) => Err(Refusal::MissingSymbol { symbol: symbol.to_string() }),
    }
}

/// The optional statistics companion of the entry `symbol`.
pub(crate) fn stats_companion(lib: &'static Library, symbol: &str) -> Option<StatsFn> {
    let name = format!("{symbol}{STATS_SUFFIX}");
    // SAFETY: by the ABI's contract a symbol with this name has the `StatsFn`
    // signature; the library is never unloaded.
    let f = unsafe { lib.get::<StatsFn>(name.as_bytes()) };
    f.ok().map(|s| *s)
}

/// The optional layout companion of the entry `symbol` (`<symbol>_layout`,
/// exported by `memplug-abi`'s export macros).
pub(crate) fn layout_companion(lib: &'static Library, symbol: &str) -> Option<LayoutFn> {
    let name = format!("{symbol}{LAYOUT_SUFFIX}");
    // SAFETY: by the ABI's contract (ABI.md, "layout companion") a symbol
    // with this name is a `LayoutFn`; the library is never unloaded.
    let f = unsafe { lib.get::<LayoutFn>(name.as_bytes()) };
    f.ok().map(|s| *s)
}

/// What a layout companion returned.
pub(crate) enum LayoutReading {
    /// It returned NULL, or a descriptor with a NULL layout: nothing to check.
    Null,
    /// The descriptor does not start with `MEMPLUG_MAGIC`.
    BadMagic(u32),
    /// A layout format this host cannot read.
    UnknownFormat(u32),
    /// An `abi_stable` 0.11 type layout.
    AbiStable(&'static TypeLayout),
}

/// Call a layout companion (plugin code) and read what it describes.
pub(crate) fn read_layout(companion: LayoutFn) -> LayoutReading {
    // SAFETY: `companion` was found under the companion's name (see
    // `layout_companion`); the ABI says it takes no arguments and returns
    // NULL or a descriptor in static storage.
    let ptr = unsafe { companion() };
    if ptr.is_null() {
        return LayoutReading::Null;
    }
    // SAFETY: a non-null result points at a `MemplugLayout` in the plugin's
    // static storage, valid for the life of the process (the library is
    // never closed); it is copied, not kept.
    let descriptor = unsafe { ptr.read() };
    if descriptor.magic != memplug_abi::MAGIC {
        return LayoutReading::BadMagic(descriptor.magic);
    }
    if descriptor.format != FORMAT_ABI_STABLE_0_11 {
        return LayoutReading::UnknownFormat(descriptor.format);
    }
    if descriptor.layout.is_null() {
        return LayoutReading::Null;
    }
    // SAFETY: format `FORMAT_ABI_STABLE_0_11` says `layout` points at an
    // `abi_stable` 0.11 `TypeLayout` (the `StableAbi::LAYOUT` constant the
    // plugin was compiled with, in its static storage), the version this
    // host links: the same type. The library is never unloaded, so
    // `'static` holds, and a `TypeLayout` is immutable.
    LayoutReading::AbiStable(unsafe { &*(descriptor.layout as *const TypeLayout) })
}

/// What calling an entry function and copying its handler gave.
pub(crate) struct Image {
    /// The prefix, always read.
    pub(crate) prefix: Prefix,
    /// The bytes the host reads: `min(struct_size, SIZE_V1_0)` of them, or
    /// only the prefix when the prefix itself is refused.
    pub(crate) bytes: Vec<u8>,
    /// Why the prefix was refused, if it was.
    pub(crate) prefix_refusal: Option<Refusal>,
}

/// Call `entry` and copy its handler's bytes.
pub(crate) fn read_handler(entry: EntryFn, symbol: &str) -> Result<Image, Refusal> {
    // SAFETY: `entry` is a plugin entry function (see `entry`); the ABI says it
    // takes no arguments and returns a handler pointer or NULL.
    let ptr: *const MemplugHandler = unsafe { entry() };
    // The entry may have registered fork handlers (the Rust export macros'
    // do, at the first call).
    crate::heap::raw::atfork::library_event();
    if ptr.is_null() {
        return Err(Refusal::NullHandler { symbol: symbol.to_string() });
    }
    let mut bytes = vec![0u8; PREFIX_LEN];
    // SAFETY: a non-null handler pointer points at a handler of at least the
    // 16-byte prefix every ABI version starts with, valid for the life of the
    // process (the library is never unloaded).
    unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, bytes.as_mut_ptr(), PREFIX_LEN) };
    let prefix = Prefix::parse(&bytes).expect("the buffer holds a whole prefix");
    match validate::readable_len(&prefix) {
        Ok(len) => {
            bytes.resize(len, 0);
            // SAFETY: the plugin declared `struct_size >= len` bytes for its
            // handler (checked by `readable_len`), so `len` bytes are readable.
            unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, bytes.as_mut_ptr(), len) };
            Ok(Image { prefix, bytes, prefix_refusal: None })
        }
        Err(r) => Ok(Image { prefix, bytes, prefix_refusal: Some(r) }),
    }
}

impl Image {
    /// Validate the image and, if it passes, build the handler's vtable.
    pub(crate) fn validate(&self, stats: Option<StatsFn>) -> Result<(ValidatedHeader, VTable), Refusal> {
        if let Some(r) = &self.prefix_refusal {
            return Err(r.clone());
        }
        let header = validate::validate(&self.bytes)?;
        // SAFETY: an `Image` is only made by `read_handler`, from a handler
        // in a library that is never closed, and `validate` checked that its
        // magic, major and size are this ABI's and its functions non-null.
        let vtable = unsafe { VTable::from_header(&header.functions, header.ctx, stats) };
        Ok((header, vtable))
    }
}
