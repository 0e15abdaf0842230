//! What the C API's handles point to.
//!
//! - A `memplug_host_handler *` points to an [`Entry`]: its fast-call
//!   prefix ([`FastCalls`], read by the header's inline
//!   `memplug_host_alloc` / `_free`), the [`Handler`](memplug::Handler)
//!   and its info as C strings. There is one
//!   entry per handler, made the first time C sees the handler and kept for
//!   the rest of the process, as the handler itself is — so handler
//!   pointers are never freed, compare equal exactly when the handlers are
//!   the same, and stay valid after the registry that loaded them is gone.
//! - A `memplug_host_instance *` owns an [`InstanceBox`]: the library's
//!   [`Instance`](memplug::Instance) owner and its handler's entry.
//! - A `memplug_host_outcomes *` owns [`Outcomes`]: what a batch load did
//!   to each candidate.

use crate::error::{ErrorObject, Status, c_string};
use memplug::{Handler, Instance};
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

/// The fast-call prefix of a handler: laid out exactly as the header's
/// `memplug_host_direct` (`void *ctx; memplug_malloc_fn malloc;
/// memplug_free_fn free;`) at offset 0 of every [`Entry`], so that the
/// header's inline `memplug_host_alloc` / `_free` call the plugin with no
/// call into this library. Filled for a handler whose calls need nothing
/// around them ([`memplug::DirectCalls`]: thread-safe, not an instance),
/// all NULL for any other. Written once, when the entry is made, and
/// never changed: part of libmemplug's ABI for soname 0.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct FastCalls {
    /// The plugin's `ctx` (an `AtomicPtr` has the layout of `void *` and
    /// lets the entry be shared between threads; it is never written).
    ctx: AtomicPtr<c_void>,
    /// The plugin's `malloc`, or NULL.
    malloc: Option<memplug_abi::MallocFn>,
    /// The plugin's `free`, or NULL.
    free: Option<memplug_abi::FreeFn>,
}

impl FastCalls {
    fn of(direct: Option<&memplug::DirectCalls>) -> FastCalls {
        match direct.map(memplug::DirectCalls::parts) {
            Some((ctx, malloc, free)) => FastCalls { ctx: AtomicPtr::new(ctx), malloc: Some(malloc), free: Some(free) },
            None => FastCalls { ctx: AtomicPtr::new(std::ptr::null_mut()), malloc: None, free: None },
        }
    }

    /// The plugin's `ctx`, `malloc` and `free`, for a handler that has
    /// them filled.
    pub(crate) fn parts(&self) -> Option<(*mut c_void, memplug_abi::MallocFn, memplug_abi::FreeFn)> {
        Some((self.ctx.load(Ordering::Relaxed), self.malloc?, self.free?))
    }
}

// The prefix's layout, as memplug_host.h declares `memplug_host_direct`
// and documents the handler: at offset 0, three pointer-sized fields.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    const P: usize = size_of::<*const c_void>();
    assert!(offset_of!(Entry, fast) == 0);
    assert!(offset_of!(FastCalls, ctx) == 0);
    assert!(offset_of!(FastCalls, malloc) == P);
    assert!(offset_of!(FastCalls, free) == 2 * P);
    assert!(size_of::<FastCalls>() == 3 * P && align_of::<FastCalls>() == align_of::<*const c_void>());
    assert!(size_of::<Option<memplug_abi::MallocFn>>() == P && size_of::<Option<memplug_abi::FreeFn>>() == P);
    assert!(size_of::<AtomicPtr<c_void>>() == P);
};

/// A handler as C sees it, with the strings its info hands out.
///
/// `#[repr(C)]` with [`FastCalls`] first: a `memplug_host_handler *` is a
/// pointer to its fast-call prefix too.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Entry {
    /// The fast-call prefix (must stay the first field).
    pub(crate) fast: FastCalls,
    /// The handler.
    pub(crate) handler: Handler,
    name: CString,
    version: CString,
    kind: CString,
    options: Option<CString>,
    source: CString,
}

/// `memplug_host_info`: a handler's info, its strings borrowed from the
/// entry (valid for the rest of the process). The caller sets
/// `struct_size`; the fields that fit in it are filled.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Info {
    pub(crate) struct_size: u64,
    pub(crate) name: *const std::ffi::c_char,
    pub(crate) version: *const std::ffi::c_char,
    pub(crate) abi_major: u16,
    pub(crate) abi_minor: u16,
    pub(crate) flags: u32,
    pub(crate) required_flags: u32,
    pub(crate) memory_kind: i32,
    pub(crate) alignment: u64,
    pub(crate) memory_kind_name: *const std::ffi::c_char,
    pub(crate) options: *const std::ffi::c_char,
    pub(crate) source: *const std::ffi::c_char,
    pub(crate) thread_safe: i32,
    pub(crate) is_instance: i32,
}

impl Entry {
    /// The entry of `handler`, made on first use.
    pub(crate) fn of(handler: Handler) -> &'static Entry {
        static ENTRIES: OnceLock<Mutex<HashMap<Handler, &'static Entry>>> = OnceLock::new();
        let mut map = ENTRIES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        map.entry(handler).or_insert_with(|| Box::leak(Box::new(Entry::new(handler))))
    }

    fn new(handler: Handler) -> Entry {
        let info = handler.info();
        Entry {
            fast: FastCalls::of(handler.direct_calls().as_ref()),
            handler,
            name: c_string(&info.name),
            version: c_string(&info.version.to_string()),
            kind: c_string(info.memory_kind_name()),
            options: info.options.as_deref().map(c_string),
            source: c_string(&info.source.to_string()),
        }
    }

    /// The handler's name.
    pub(crate) fn name(&self) -> &CStr {
        &self.name
    }

    /// The info, with `struct_size` the full size of [`Info`].
    pub(crate) fn info(&self) -> Info {
        let info = self.handler.info();
        Info {
            struct_size: std::mem::size_of::<Info>() as u64,
            name: self.name.as_ptr(),
            version: self.version.as_ptr(),
            abi_major: info.abi_major,
            abi_minor: info.abi_minor,
            flags: info.flags,
            required_flags: info.required_flags,
            memory_kind: info.memory_kind,
            alignment: self.handler.alignment() as u64,
            memory_kind_name: self.kind.as_ptr(),
            options: self.options.as_ref().map_or(std::ptr::null(), |o| o.as_ptr()),
            source: self.source.as_ptr(),
            thread_safe: i32::from(self.handler.is_thread_safe()),
            is_instance: i32::from(self.handler.is_instance()),
        }
    }
}

/// An instance's owner, as C holds it.
#[derive(Debug)]
pub(crate) struct InstanceBox {
    /// The owner: dropping it lets the instance go once its last block is
    /// freed.
    _owner: Instance,
    /// The instance's handler.
    pub(crate) entry: &'static Entry,
}

impl InstanceBox {
    /// Hold `owner`.
    pub(crate) fn new(owner: Instance) -> InstanceBox {
        let entry = Entry::of(owner.handler());
        InstanceBox { _owner: owner, entry }
    }
}

/// What a batch load did to each candidate, in order.
#[derive(Debug, Default)]
pub(crate) struct Outcomes {
    items: Vec<(CString, Result<&'static Entry, ErrorObject>)>,
}

impl Outcomes {
    /// The outcomes of [`memplug::Registry::load_all`] and its kin.
    pub(crate) fn from_library(outcomes: Vec<memplug::Outcome>) -> Outcomes {
        let items = outcomes
            .into_iter()
            .map(|o| (c_string(&o.candidate.to_string()), o.result.map(Entry::of).map_err(ErrorObject::from)))
            .collect();
        Outcomes { items }
    }

    /// How many candidates there were.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// How many were loaded.
    pub(crate) fn loaded(&self) -> usize {
        self.items.iter().filter(|(_, r)| r.is_ok()).count()
    }

    /// The `i`th candidate, as the library shows it.
    pub(crate) fn candidate(&self, i: usize) -> Option<&CStr> {
        self.items.get(i).map(|(c, _)| c.as_c_str())
    }

    /// The `i`th handler, if it loaded.
    pub(crate) fn handler(&self, i: usize) -> Option<&'static Entry> {
        self.items.get(i).and_then(|(_, r)| r.as_ref().ok().copied())
    }

    /// Why the `i`th was refused, if it was.
    pub(crate) fn error(&self, i: usize) -> Option<&ErrorObject> {
        self.items.get(i).and_then(|(_, r)| r.as_ref().err())
    }

    /// What became of the `i`th: loaded, skipped or failed (`Failed` past
    /// the end).
    pub(crate) fn status(&self, i: usize) -> Status {
        match self.items.get(i) {
            Some((_, Ok(_))) => Status::Loaded,
            Some((_, Err(e))) => e.status(),
            None => Status::Failed,
        }
    }
}

/// A `memplug_host_registry *`: the process's registry, or one the caller
/// made and frees.
#[derive(Debug)]
pub(crate) enum RegistryHandle {
    /// [`memplug::Registry::global`].
    Global,
    /// A registry of the caller's.
    Owned(Box<memplug::Registry>),
}

impl RegistryHandle {
    /// The registry.
    pub(crate) fn get(&self) -> &memplug::Registry {
        match self {
            RegistryHandle::Global => memplug::Registry::global(),
            RegistryHandle::Owned(r) => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn the_fast_call_prefix_is_at_offsets_0_8_16_of_the_handler() {
        use std::mem::offset_of;
        assert_eq!(offset_of!(Entry, fast), 0);
        assert_eq!(offset_of!(Entry, fast) + offset_of!(FastCalls, ctx), 0);
        assert_eq!(offset_of!(Entry, fast) + offset_of!(FastCalls, malloc), 8);
        assert_eq!(offset_of!(Entry, fast) + offset_of!(FastCalls, free), 16);
    }

    #[test]
    fn a_direct_handler_fills_the_prefix_and_any_other_leaves_it_null() {
        let builtin = Entry::of(memplug::current::builtin());
        let direct = builtin.handler.direct_calls();
        assert_eq!(builtin.fast.parts().is_some(), direct.is_some());
        if let (Some((ctx, malloc, free)), Some(d)) = (builtin.fast.parts(), direct) {
            let (c, m, f) = d.parts();
            assert_eq!((ctx, malloc as usize, free as usize), (c, m as usize, f as usize));
        }
        let none = FastCalls::of(None);
        assert!(none.parts().is_none() && none.malloc.is_none() && none.free.is_none());
        assert!(none.ctx.load(Ordering::Relaxed).is_null());
    }
}
