//! Registries, loading, looking up and unregistering: the exports of
//! `memplug_host.h`'s "Registries" and "Loading" sections but
//! `memplug_host_load_symbols` (`symbols_raw`), and [`ready`], which makes a
//! registry ready to load. Every load goes through [`memplug::Registry`], so it is checked exactly
//! as the Rust library checks (trust policy, worker probe, verdict cache).

use crate::boundary_raw::{ErrOut, arg, guarded, optional_text, put, quiet, text};
use crate::error::{ErrorObject, Status};
use crate::opaque::{Entry, Outcomes, RegistryHandle};
use crate::settings;
use memplug::discover::{Candidate, discover_in, scan_dir};
use memplug::{Policy, Registry};
use std::ffi::c_char;
use std::ptr::null;

/// The process's registry handle.
static GLOBAL: RegistryHandle = RegistryHandle::Global;

/// `memplug_host_registry_global`: the process's registry (policy from
/// the environment); never freed.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_registry_global() -> *const RegistryHandle {
    &GLOBAL
}

/// `memplug_host_registry_new`: a registry applying a copy of `policy`
/// (NULL: the strict default); owned by the caller.
///
/// # Safety
/// `policy` is NULL or a live policy; `err` NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_registry_new(policy: *const Policy, err: ErrOut) -> *mut RegistryHandle {
    // SAFETY: the caller's contract.
    unsafe {
        guarded("memplug_host_registry_new", err, std::ptr::null_mut(), || {
            // SAFETY: the caller's contract: NULL or a live policy.
            let policy = policy.as_ref().cloned().unwrap_or_default();
            Ok(Box::into_raw(Box::new(RegistryHandle::Owned(Box::new(Registry::with_policy(policy))))))
        })
    }
}

/// `memplug_host_registry_free`: free a registry the caller made (the
/// global one and NULL are ignored). Its handlers stay valid.
///
/// # Safety
/// `registry` is NULL, the global registry, or one this library returned
/// and not yet freed, which no other thread uses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_registry_free(registry: *mut RegistryHandle) {
    if registry.is_null() || std::ptr::eq(registry, &GLOBAL) {
        return;
    }
    // SAFETY: the caller's contract: a box this library leaked, freed once.
    let boxed = unsafe { Box::from_raw(registry) };
    quiet((), || drop(boxed));
}

/// The registry, ready to load: a policy asking for a probe gets the
/// worker executable, or the refusal `probe-unavailable`.
pub(crate) fn ready<'a>(handle: &'a RegistryHandle, subject: &str) -> Result<&'a Registry, ErrorObject> {
    let registry = handle.get();
    let policy = registry.policy();
    if policy.probe.is_some() {
        let resolved = settings::resolve(policy.clone())
            .map_err(|refusal| memplug::LoadError { source_desc: subject.to_string(), refusal })?;
        if resolved != policy {
            registry.set_policy(resolved);
        }
    }
    Ok(registry)
}

/// `memplug_host_load_path`: load one file — a plugin library, or an
/// allocator manifest (`*.memplug.toml`) — with the entry symbol `symbol`
/// (NULL: `memplug_handler`).
///
/// # Safety
/// `registry` a live registry, `path` a C string, `symbol` NULL or a C
/// string, `out` valid for a write, `err` NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_load_path(
    registry: *const RegistryHandle,
    path: *const c_char,
    symbol: *const c_char,
    out: *mut *const Entry,
    err: ErrOut,
) -> i32 {
    const F: &str = "memplug_host_load_path";
    // SAFETY: the caller's contract.
    unsafe {
        guarded(F, err, -1, || {
            let path = text(path, F, "path")?;
            let mut candidate = Candidate::new(path);
            if let Some(symbol) = optional_text(symbol, F, "symbol")? {
                candidate = candidate.with_symbol(symbol);
            }
            let registry = ready(arg(registry, F, "registry")?, &candidate.to_string())?;
            let handler = registry.load(&candidate)?;
            put(out, Entry::of(handler) as *const Entry, F, "out")?;
            Ok(0)
        })
    }
}

/// Load a batch, giving the outcomes to `out`.
///
/// # Safety
/// As for [`memplug_host_load_path`].
unsafe fn load_batch(
    what: &str,
    registry: *const RegistryHandle,
    out: *mut *mut Outcomes,
    err: ErrOut,
    batch: impl FnOnce(&Registry) -> Result<Vec<memplug::Outcome>, ErrorObject>,
    subject: &str,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        guarded(what, err, -1, || {
            let registry = ready(arg(registry, what, "registry")?, subject)?;
            if out.is_null() {
                return Err(ErrorObject::null(what, "out"));
            }
            let outcomes = Outcomes::from_library(batch(registry)?);
            put(out, Box::into_raw(Box::new(outcomes)), what, "out")?;
            Ok(0)
        })
    }
}

/// `memplug_host_load_dir`: load every candidate in one directory.
///
/// # Safety
/// As for [`memplug_host_load_path`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_load_dir(
    registry: *const RegistryHandle,
    dir: *const c_char,
    out: *mut *mut Outcomes,
    err: ErrOut,
) -> i32 {
    const F: &str = "memplug_host_load_dir";
    // SAFETY: the caller's contract.
    let dir = match unsafe { text(dir, F, "dir") } {
        Ok(d) => d,
        Err(e) => {
            // SAFETY: the caller's contract on `err`.
            unsafe { crate::boundary_raw::fail(err, e) };
            return -1;
        }
    };
    let batch = |r: &Registry| {
        let candidates = scan_dir(dir.as_ref()).map_err(|e| {
            ErrorObject::new("cannot-read-dir", format!("cannot read the plugin directory {dir}: {e}; check the path"))
        })?;
        Ok(r.load_all(&candidates))
    };
    // SAFETY: the caller's contract.
    unsafe { load_batch(F, registry, out, err, batch, dir) }
}

/// `memplug_host_load_search_path`: load every candidate on the search
/// path (`MEMPLUG_PLUGIN_PATH`, the user and system plugin directories,
/// the latter found from libmemplug's own file: see `settings`).
///
/// # Safety
/// As for [`memplug_host_load_path`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_load_search_path(
    registry: *const RegistryHandle,
    out: *mut *mut Outcomes,
    err: ErrOut,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        load_batch(
            "memplug_host_load_search_path",
            registry,
            out,
            err,
            |r| Ok(r.load_all(&discover_in(&settings::env()))),
            "the search path",
        )
    }
}

/// `memplug_host_registry_unregister`: remove `name` from the registry and
/// return its handler, or NULL when no handler has that name. The handler
/// stays valid and its library loaded (nothing is ever unloaded): it keeps
/// serving and freeing its blocks; the name is free for another load.
///
/// # Safety
/// `registry` a live registry, `name` a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_registry_unregister(
    registry: *const RegistryHandle,
    name: *const c_char,
) -> *const Entry {
    const F: &str = "memplug_host_registry_unregister";
    quiet(null(), || {
        // SAFETY: the caller's contract.
        let (Ok(r), Ok(name)) = (unsafe { arg(registry, F, "registry") }, unsafe { text(name, F, "name") }) else {
            return null();
        };
        r.get().unregister(name).map_or(null(), |h| Entry::of(h) as *const Entry)
    })
}

/// `memplug_host_registry_get`: the handler registered under `name`, or
/// NULL.
///
/// # Safety
/// `registry` a live registry, `name` a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_registry_get(
    registry: *const RegistryHandle,
    name: *const c_char,
) -> *const Entry {
    const F: &str = "memplug_host_registry_get";
    quiet(std::ptr::null(), || {
        // SAFETY: the caller's contract.
        let (Ok(r), Ok(name)) = (unsafe { arg(registry, F, "registry") }, unsafe { text(name, F, "name") }) else {
            return std::ptr::null();
        };
        r.get().get(name).map_or(std::ptr::null(), |h| Entry::of(h) as *const Entry)
    })
}

/// `memplug_host_registry_handlers`: the registered handlers, by name:
/// writes up to `cap` of them to `out` (which may be NULL when `cap` is 0)
/// and returns how many there are.
///
/// # Safety
/// `registry` a live registry; `out` valid for `cap` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_registry_handlers(
    registry: *const RegistryHandle,
    out: *mut *const Entry,
    cap: usize,
) -> usize {
    quiet(0, || {
        // SAFETY: the caller's contract.
        let Ok(r) = (unsafe { arg(registry, "memplug_host_registry_handlers", "registry") }) else { return 0 };
        let handlers = r.get().handlers();
        if !out.is_null() {
            for (i, h) in handlers.iter().take(cap).enumerate() {
                // SAFETY: the caller's contract: `out` has room for `cap` pointers.
                unsafe { out.add(i).write(Entry::of(*h)) };
            }
        }
        handlers.len()
    })
}

/// `memplug_host_outcomes_count`: how many candidates a batch load saw.
///
/// # Safety
/// `outcomes` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_outcomes_count(outcomes: *const Outcomes) -> usize {
    // SAFETY: the caller's contract.
    unsafe { outcomes.as_ref() }.map_or(0, Outcomes::len)
}

/// `memplug_host_outcomes_loaded`: how many of them loaded.
///
/// # Safety
/// `outcomes` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_outcomes_loaded(outcomes: *const Outcomes) -> usize {
    // SAFETY: the caller's contract.
    unsafe { outcomes.as_ref() }.map_or(0, Outcomes::loaded)
}

/// `memplug_host_outcomes_candidate`: the `i`th candidate's description;
/// owned by the outcomes. NULL past the end.
///
/// # Safety
/// `outcomes` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_outcomes_candidate(outcomes: *const Outcomes, i: usize) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { outcomes.as_ref() }.and_then(|o| o.candidate(i)).map_or(std::ptr::null(), |c| c.as_ptr())
}

/// `memplug_host_outcomes_handler`: the `i`th candidate's handler, or NULL
/// if it was refused.
///
/// # Safety
/// `outcomes` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_outcomes_handler(outcomes: *const Outcomes, i: usize) -> *const Entry {
    // SAFETY: the caller's contract.
    unsafe { outcomes.as_ref() }.and_then(|o| o.handler(i)).map_or(std::ptr::null(), |e| e as *const Entry)
}

/// `memplug_host_outcomes_error`: why the `i`th candidate was refused, or
/// NULL; owned by the outcomes (do not free it).
///
/// # Safety
/// `outcomes` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_outcomes_error(outcomes: *const Outcomes, i: usize) -> *const ErrorObject {
    // SAFETY: the caller's contract.
    unsafe { outcomes.as_ref() }.and_then(|o| o.error(i)).map_or(std::ptr::null(), |e| e as *const ErrorObject)
}

/// `memplug_host_outcomes_status`: what became of the `i`th candidate —
/// loaded, skipped (a `shadowed` refusal: not a failure) or failed (any
/// other refusal); failed past the end.
///
/// # Safety
/// `outcomes` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_outcomes_status(outcomes: *const Outcomes, i: usize) -> Status {
    // SAFETY: the caller's contract.
    unsafe { outcomes.as_ref() }.map_or(Status::Failed, |o| o.status(i))
}

/// `memplug_host_outcomes_free`: free a batch's outcomes (NULL is ignored).
///
/// # Safety
/// `outcomes` is NULL or outcomes this library returned, not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_outcomes_free(outcomes: *mut Outcomes) {
    if !outcomes.is_null() {
        // SAFETY: the caller's contract: a box this library leaked, freed once.
        let boxed = unsafe { Box::from_raw(outcomes) };
        quiet((), || drop(boxed));
    }
}
