//! Every released layout of the handler, frozen.
//!
//! Each module is the struct exactly as it was released, with compile-time
//! assertions on its size and every field offset (64-bit targets): changing a
//! released prefix fails the build. The current [`MemplugHandler`] must
//! start with every one of them, field for field; `tests/abi_compat.rs` and
//! the assertions below check that. A plugin may build against an old layout
//! on purpose (see `export_handler_v1_0!`).
//!
//! The C headers as released are kept beside the crate in
//! `abi/frozen/<version>/memplug.h`.
//!
//! With the `layout` feature the frozen types derive `abi_stable::StableAbi`:
//! a host compares a Rust plugin's [layout companion](crate::layout) with
//! them. Their function pointer fields are spelled out (the same types as
//! the `*Fn` aliases of the crate root, which the derive cannot see
//! through).
//!
//! [`MemplugHandler`]: crate::MemplugHandler

/// ABI 1.0 as released: 248 bytes.
pub mod v1_0 {
    use crate::{NAME_CAP, VERSION_CAP};
    use core::ffi::c_void;

    /// The ABI 1.0 handler.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    #[cfg_attr(feature = "layout", derive(abi_stable::StableAbi))]
    pub struct MemplugHandler {
        /// Magic.
        pub magic: u32,
        /// ABI major.
        pub abi_major: u16,
        /// ABI minor.
        pub abi_minor: u16,
        /// Declared size.
        pub struct_size: u32,
        /// Advisory flags.
        pub flags: u32,
        /// Name, NUL-terminated.
        pub name: [u8; NAME_CAP],
        /// Version, NUL-terminated.
        pub version: [u8; VERSION_CAP],
        /// Context.
        pub ctx: *mut c_void,
        /// malloc.
        pub malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
        /// calloc.
        pub calloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
        /// realloc.
        pub realloc: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize, usize) -> *mut c_void>,
        /// free.
        pub free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize)>,
    }

    #[cfg(target_pointer_width = "64")]
    const _: () = {
        use core::mem::{offset_of, size_of};
        assert!(size_of::<MemplugHandler>() == 248);
        assert!(offset_of!(MemplugHandler, magic) == 0);
        assert!(offset_of!(MemplugHandler, abi_major) == 4);
        assert!(offset_of!(MemplugHandler, abi_minor) == 6);
        assert!(offset_of!(MemplugHandler, struct_size) == 8);
        assert!(offset_of!(MemplugHandler, flags) == 12);
        assert!(offset_of!(MemplugHandler, name) == 16);
        assert!(offset_of!(MemplugHandler, version) == 144);
        assert!(offset_of!(MemplugHandler, ctx) == 208);
        assert!(offset_of!(MemplugHandler, malloc) == 216);
        assert!(offset_of!(MemplugHandler, calloc) == 224);
        assert!(offset_of!(MemplugHandler, realloc) == 232);
        assert!(offset_of!(MemplugHandler, free) == 240);
    };
}

/// ABI 1.1 as released: 296 bytes, the 1.0 fields then seven more.
pub mod v1_1 {
    use crate::{MemplugInstance, MemplugStats, NAME_CAP, VERSION_CAP};
    use core::ffi::{c_char, c_void};

    /// The ABI 1.1 handler.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    #[cfg_attr(feature = "layout", derive(abi_stable::StableAbi))]
    pub struct MemplugHandler {
        /// Magic.
        pub magic: u32,
        /// ABI major.
        pub abi_major: u16,
        /// ABI minor.
        pub abi_minor: u16,
        /// Declared size.
        pub struct_size: u32,
        /// Advisory flags.
        pub flags: u32,
        /// Name, NUL-terminated.
        pub name: [u8; NAME_CAP],
        /// Version, NUL-terminated.
        pub version: [u8; VERSION_CAP],
        /// Context.
        pub ctx: *mut c_void,
        /// malloc.
        pub malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
        /// calloc.
        pub calloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
        /// realloc.
        pub realloc: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize, usize) -> *mut c_void>,
        /// free.
        pub free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize)>,
        /// Alignment of every block (0 = default).
        pub alignment: u64,
        /// DLPack device type (0 = CPU).
        pub memory_kind: i32,
        /// Required flags.
        pub required_flags: u32,
        /// Optional aligned allocation.
        pub aligned_alloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
        /// Optional instance creation.
        pub create: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut MemplugInstance) -> i32>,
        /// Optional instance destruction.
        pub destroy: Option<unsafe extern "C" fn(*mut c_void)>,
        /// Optional statistics.
        pub stats: Option<unsafe extern "C" fn(*mut c_void, *mut MemplugStats) -> i32>,
    }

    #[cfg(target_pointer_width = "64")]
    const _: () = {
        use core::mem::{offset_of, size_of};
        assert!(size_of::<MemplugHandler>() == 296);
        assert!(offset_of!(MemplugHandler, free) == 240);
        assert!(offset_of!(MemplugHandler, alignment) == 248);
        assert!(offset_of!(MemplugHandler, memory_kind) == 256);
        assert!(offset_of!(MemplugHandler, required_flags) == 260);
        assert!(offset_of!(MemplugHandler, aligned_alloc) == 264);
        assert!(offset_of!(MemplugHandler, create) == 272);
        assert!(offset_of!(MemplugHandler, destroy) == 280);
        assert!(offset_of!(MemplugHandler, stats) == 288);
    };
}

/// ABI 1.2 as released: 312 bytes, the 1.1 fields then `locate` and
/// `resolve`.
pub mod v1_2 {
    use crate::{MemplugInstance, MemplugLocation, MemplugStats, NAME_CAP, VERSION_CAP};
    use core::ffi::{c_char, c_void};

    /// The ABI 1.2 handler.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    #[cfg_attr(feature = "layout", derive(abi_stable::StableAbi))]
    pub struct MemplugHandler {
        /// Magic.
        pub magic: u32,
        /// ABI major.
        pub abi_major: u16,
        /// ABI minor.
        pub abi_minor: u16,
        /// Declared size.
        pub struct_size: u32,
        /// Advisory flags.
        pub flags: u32,
        /// Name, NUL-terminated.
        pub name: [u8; NAME_CAP],
        /// Version, NUL-terminated.
        pub version: [u8; VERSION_CAP],
        /// Context.
        pub ctx: *mut c_void,
        /// malloc.
        pub malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
        /// calloc.
        pub calloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
        /// realloc.
        pub realloc: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize, usize) -> *mut c_void>,
        /// free.
        pub free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize)>,
        /// Alignment of every block (0 = default).
        pub alignment: u64,
        /// DLPack device type (0 = CPU).
        pub memory_kind: i32,
        /// Required flags.
        pub required_flags: u32,
        /// Optional aligned allocation.
        pub aligned_alloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
        /// Optional instance creation.
        pub create: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut MemplugInstance) -> i32>,
        /// Optional instance destruction.
        pub destroy: Option<unsafe extern "C" fn(*mut c_void)>,
        /// Optional statistics.
        pub stats: Option<unsafe extern "C" fn(*mut c_void, *mut MemplugStats) -> i32>,
        /// Optional: where a block lives.
        pub locate: Option<unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut MemplugLocation) -> i32>,
        /// Optional: a location back to a pointer.
        pub resolve: Option<unsafe extern "C" fn(*mut c_void, *const MemplugLocation, *mut *mut c_void) -> i32>,
    }

    #[cfg(target_pointer_width = "64")]
    const _: () = {
        use core::mem::{offset_of, size_of};
        assert!(size_of::<MemplugHandler>() == 312);
        assert!(offset_of!(MemplugHandler, stats) == 288);
        assert!(offset_of!(MemplugHandler, locate) == 296);
        assert!(offset_of!(MemplugHandler, resolve) == 304);
        assert!(size_of::<MemplugLocation>() == 424);
    };
}

/// ABI 1.3 as released: 320 bytes, the 1.2 fields then `usable_size`.
pub mod v1_3 {
    use crate::{MemplugInstance, MemplugLocation, MemplugStats, NAME_CAP, VERSION_CAP};
    use core::ffi::{c_char, c_void};

    /// The ABI 1.3 handler.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    #[cfg_attr(feature = "layout", derive(abi_stable::StableAbi))]
    pub struct MemplugHandler {
        /// Magic.
        pub magic: u32,
        /// ABI major.
        pub abi_major: u16,
        /// ABI minor.
        pub abi_minor: u16,
        /// Declared size.
        pub struct_size: u32,
        /// Advisory flags.
        pub flags: u32,
        /// Name, NUL-terminated.
        pub name: [u8; NAME_CAP],
        /// Version, NUL-terminated.
        pub version: [u8; VERSION_CAP],
        /// Context.
        pub ctx: *mut c_void,
        /// malloc.
        pub malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
        /// calloc.
        pub calloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
        /// realloc.
        pub realloc: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize, usize) -> *mut c_void>,
        /// free.
        pub free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize)>,
        /// Alignment of every block (0 = default).
        pub alignment: u64,
        /// DLPack device type (0 = CPU).
        pub memory_kind: i32,
        /// Required flags.
        pub required_flags: u32,
        /// Optional aligned allocation.
        pub aligned_alloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
        /// Optional instance creation.
        pub create: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut MemplugInstance) -> i32>,
        /// Optional instance destruction.
        pub destroy: Option<unsafe extern "C" fn(*mut c_void)>,
        /// Optional statistics.
        pub stats: Option<unsafe extern "C" fn(*mut c_void, *mut MemplugStats) -> i32>,
        /// Optional: where a block lives.
        pub locate: Option<unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut MemplugLocation) -> i32>,
        /// Optional: a location back to a pointer.
        pub resolve: Option<unsafe extern "C" fn(*mut c_void, *const MemplugLocation, *mut *mut c_void) -> i32>,
        /// Optional: a block's usable size (0: not this handler's, under
        /// `FLAG_KNOWS_FOREIGN`).
        pub usable_size: Option<unsafe extern "C" fn(*mut c_void, *const c_void) -> usize>,
    }

    #[cfg(target_pointer_width = "64")]
    const _: () = {
        use core::mem::{offset_of, size_of};
        assert!(size_of::<MemplugHandler>() == 320);
        assert!(offset_of!(MemplugHandler, locate) == 296);
        assert!(offset_of!(MemplugHandler, resolve) == 304);
        assert!(offset_of!(MemplugHandler, usable_size) == 312);
    };
}

/// Each frozen layout is a prefix of the next and of the current struct:
/// same offsets for every shared field.
const _: () = {
    use crate::MemplugHandler as Cur;
    use core::mem::offset_of;
    macro_rules! same {
        ($a:ty, $b:ty: $($f:ident),*) => { $( assert!(offset_of!($a, $f) == offset_of!($b, $f)); )* };
    }
    same!(v1_0::MemplugHandler, v1_1::MemplugHandler: magic, abi_major, abi_minor, struct_size, flags, name, version, ctx, malloc, calloc, realloc, free);
    same!(v1_1::MemplugHandler, v1_2::MemplugHandler: magic, abi_major, abi_minor, struct_size, flags, name, version, ctx, malloc, calloc,
        realloc, free, alignment, memory_kind, required_flags, aligned_alloc, create, destroy, stats);
    same!(v1_2::MemplugHandler, v1_3::MemplugHandler: magic, abi_major, abi_minor, struct_size, flags, name, version, ctx, malloc,
        calloc, realloc, free, alignment, memory_kind, required_flags, aligned_alloc, create, destroy, stats, locate, resolve);
    same!(v1_3::MemplugHandler, Cur: magic, abi_major, abi_minor, struct_size, flags, name, version, ctx, malloc, calloc, realloc, free,
        alignment, memory_kind, required_flags, aligned_alloc, create, destroy, stats, locate, resolve, usable_size);
    assert!(core::mem::size_of::<v1_3::MemplugHandler>() == core::mem::size_of::<Cur>());
};

// The function pointer fields of every layout are the `*Fn` types of the
// crate root, spelled out for `abi_stable`'s derive: this does not compile
// if the two drift apart.
use crate::{
    AlignedAllocFn, CallocFn, CreateFn, DestroyFn, FreeFn, LocateFn, MallocFn, ReallocFn, ResolveFn, StatsFn,
    UsableSizeFn,
};

/// The function pointer fields are the `*Fn` types above, spelled out for
/// `abi_stable`'s derive: this does not compile if the two drift apart.
type Functions = (
    Option<MallocFn>,
    Option<CallocFn>,
    Option<ReallocFn>,
    Option<FreeFn>,
    Option<AlignedAllocFn>,
    Option<CreateFn>,
    Option<DestroyFn>,
    Option<StatsFn>,
    Option<LocateFn>,
    Option<ResolveFn>,
    Option<UsableSizeFn>,
);
const _: fn(&crate::MemplugHandler) -> Functions = |h| {
    (
        h.malloc,
        h.calloc,
        h.realloc,
        h.free,
        h.aligned_alloc,
        h.create,
        h.destroy,
        h.stats,
        h.locate,
        h.resolve,
        h.usable_size,
    )
};
const _: fn(&v1_3::MemplugHandler) -> Functions = |h| {
    (
        h.malloc,
        h.calloc,
        h.realloc,
        h.free,
        h.aligned_alloc,
        h.create,
        h.destroy,
        h.stats,
        h.locate,
        h.resolve,
        h.usable_size,
    )
};
/// The ABI 1.2 function pointer fields.
type Functions12 = (
    Option<MallocFn>,
    Option<CallocFn>,
    Option<ReallocFn>,
    Option<FreeFn>,
    Option<AlignedAllocFn>,
    Option<CreateFn>,
    Option<DestroyFn>,
    Option<StatsFn>,
    Option<LocateFn>,
    Option<ResolveFn>,
);
const _: fn(&v1_2::MemplugHandler) -> Functions12 =
    |h| (h.malloc, h.calloc, h.realloc, h.free, h.aligned_alloc, h.create, h.destroy, h.stats, h.locate, h.resolve);
/// The ABI 1.1 function pointer fields.
type Functions11 = (
    Option<MallocFn>,
    Option<CallocFn>,
    Option<ReallocFn>,
    Option<FreeFn>,
    Option<AlignedAllocFn>,
    Option<CreateFn>,
    Option<DestroyFn>,
    Option<StatsFn>,
);
const _: fn(&v1_1::MemplugHandler) -> Functions11 =
    |h| (h.malloc, h.calloc, h.realloc, h.free, h.aligned_alloc, h.create, h.destroy, h.stats);
/// The ABI 1.0 function pointer fields.
type Functions10 = (Option<MallocFn>, Option<CallocFn>, Option<ReallocFn>, Option<FreeFn>);
const _: fn(&v1_0::MemplugHandler) -> Functions10 = |h| (h.malloc, h.calloc, h.realloc, h.free);
