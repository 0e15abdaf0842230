//! The layout companion: what a Rust plugin says about the handler type it
//! was compiled against, so that a host can check it field by field.
//!
//! `struct_size` and the ABI version tell the host how many bytes a handler
//! has and which fields to expect; they cannot tell it that a plugin was
//! built against an altered copy of the types — a field whose type changed
//! at the same size (`alignment: u64` made `i64`), or two function pointers
//! swapped. Rust plugins can say more: [`export_handler!`] and
//! [`export_handler_v1_0!`] also export, beside the entry function, a
//! companion function `<entry>_layout` ([`LAYOUT_SUFFIX`]) returning a
//! [`MemplugLayout`]: a pointer to the `abi_stable` type layout of the
//! handler struct the plugin actually fills in (`MemplugHandler`, or
//! `frozen::v1_0::MemplugHandler`). The host compares it with its own frozen
//! type of the ABI minor the plugin claims, using `abi_stable`'s layout
//! checker, and refuses a mismatch (`layout-mismatch`).
//!
//! The companion is optional: C plugins, and Rust plugins built with the
//! crate's `layout` feature off, do not export it and are checked by
//! `struct_size` and the ABI version alone. The descriptor itself is plain
//! `#[repr(C)]` data and is defined with or without the feature; only
//! building a descriptor from a Rust type (`MemplugLayout::of`) needs
//! `abi_stable`.
//!
//! [`export_handler!`]: crate::export_handler
//! [`export_handler_v1_0!`]: crate::export_handler_v1_0

use core::ffi::c_void;

/// Suffix of the optional layout companion of an entry function
/// (`memplug_handler_layout` for the default entry).
pub const LAYOUT_SUFFIX: &str = "_layout";

/// [`MemplugLayout::format`]: `layout` points at an `abi_stable` 0.11
/// `TypeLayout` (`abi_stable::type_layout::TypeLayout`). A host compares only
/// formats it knows; a new `abi_stable` release whose layouts it cannot
/// read gets a new number.
pub const FORMAT_ABI_STABLE_0_11: u32 = 1;

/// The layout companion a plugin may export as `<entry>_layout`: a pointer
/// to a [`MemplugLayout`] in static storage, valid for the life of the
/// process, or NULL (then nothing is checked).
pub type LayoutFn = unsafe extern "C" fn() -> *const MemplugLayout;

/// What the layout companion returns: the type layout of the handler struct
/// the plugin was compiled against.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemplugLayout {
    /// [`MAGIC`](crate::MAGIC), so that an unrelated function that happens to
    /// be named `<entry>_layout` is told apart.
    pub magic: u32,
    /// What `layout` points at: [`FORMAT_ABI_STABLE_0_11`].
    pub format: u32,
    /// The layout itself, in the form `format` names, in static storage.
    pub layout: *const c_void,
}

// SAFETY: a descriptor is plain data, written once (in a `static`) and only
// read; `layout` points at an immutable type layout in static storage, which
// nobody writes through it.
#[allow(unsafe_code)]
unsafe impl Sync for MemplugLayout {}

#[cfg(feature = "layout")]
impl MemplugLayout {
    /// The descriptor of `T`'s `abi_stable` layout, in
    /// [`FORMAT_ABI_STABLE_0_11`].
    ///
    /// ```
    /// use memplug_abi::layout::{FORMAT_ABI_STABLE_0_11, MemplugLayout};
    ///
    /// let d = MemplugLayout::of::<memplug_abi::frozen::v1_1::MemplugHandler>();
    /// assert_eq!((d.magic, d.format), (memplug_abi::MAGIC, FORMAT_ABI_STABLE_0_11));
    /// assert!(!d.layout.is_null());
    /// ```
    pub const fn of<T: abi_stable::StableAbi>() -> MemplugLayout {
        MemplugLayout {
            magic: crate::MAGIC,
            format: FORMAT_ABI_STABLE_0_11,
            layout: T::LAYOUT as *const abi_stable::type_layout::TypeLayout as *const c_void,
        }
    }
}

/// The descriptor `export_handler!` returns: the current
/// [`MemplugHandler`](crate::MemplugHandler). Not public API.
#[cfg(feature = "layout")]
#[doc(hidden)]
pub static CURRENT: MemplugLayout = MemplugLayout::of::<crate::MemplugHandler>();

/// The descriptor `export_handler_v1_0!` returns: the frozen 1.0 handler.
/// Not public API.
#[cfg(feature = "layout")]
#[doc(hidden)]
pub static V1_0: MemplugLayout = MemplugLayout::of::<crate::frozen::v1_0::MemplugHandler>();

/// Export the layout companion of the entry `$entry`, returning
/// `$descriptor`. Expands to nothing without the `layout` feature. Not
/// public API.
#[cfg(feature = "layout")]
#[doc(hidden)]
#[macro_export]
macro_rules! __export_layout {
    ($entry:ident, $descriptor:path) => {
        const _: () = {
            /// The layout companion of the entry function: the type layout
            /// of the handler struct this plugin was built against.
            #[unsafe(export_name = concat!(stringify!($entry), "_layout"))]
            extern "C" fn layout() -> *const $crate::layout::MemplugLayout {
                &$descriptor
            }
        };
    };
}

/// Without the `layout` feature there is no layout companion. Not public
/// API.
#[cfg(not(feature = "layout"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __export_layout {
    ($entry:ident, $descriptor:path) => {};
}
