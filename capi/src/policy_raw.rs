//! Policies: what a registry accepts and whether it probes (the exports of
//! `memplug_host.h`'s "Policies" section), each a setting of
//! [`memplug::Policy`].

use crate::boundary_raw::{ErrOut, guarded, optional_text, quiet, text};
use crate::error::ErrorObject;
use crate::settings;
use memplug::Policy;
use std::ffi::c_char;
use std::time::Duration;

/// `memplug_host_policy_new`: a strict policy that reads no environment,
/// probes nothing and uses no verdict cache; owned by the caller
/// (`memplug_host_policy_free`). NULL only if memplug panicked.
#[unsafe(no_mangle)]
pub extern "C" fn memplug_host_policy_new() -> *mut Policy {
    quiet(std::ptr::null_mut(), || Box::into_raw(Box::new(Policy::default())))
}

/// `memplug_host_policy_from_env`: the policy of the environment
/// (`MEMPLUG_TRUST`, `MEMPLUG_ALLOWLIST`, the verdict cache unless
/// `MEMPLUG_CACHE=off`), as the Rust library's `Policy::try_from_env`.
///
/// # Safety
/// `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_policy_from_env(err: ErrOut) -> *mut Policy {
    // SAFETY: the caller's contract on `err`.
    unsafe {
        guarded("memplug_host_policy_from_env", err, std::ptr::null_mut(), || {
            Ok(Box::into_raw(Box::new(Policy::try_from_env()?)))
        })
    }
}

/// `memplug_host_policy_free`: free a policy (NULL is ignored).
///
/// # Safety
/// `policy` is NULL or a policy this library returned, not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_policy_free(policy: *mut Policy) {
    if !policy.is_null() {
        // SAFETY: the caller's contract: a box this library leaked, freed once.
        let boxed = unsafe { Box::from_raw(policy) };
        quiet((), || drop(boxed));
    }
}

/// Run `body` on the policy behind `policy`; 0, or −1 with `err` set.
///
/// # Safety
/// `policy` is NULL or a live policy no other thread uses; `err` as for
/// [`guarded`].
unsafe fn with_policy(
    what: &str,
    policy: *mut Policy,
    err: ErrOut,
    body: impl FnOnce(&mut Policy) -> Result<(), ErrorObject>,
) -> i32 {
    // SAFETY: the caller's contract: `policy` is NULL or a live policy used
    // by this thread alone.
    let p = unsafe { policy.as_mut() };
    // SAFETY: the caller's contract on `err`.
    unsafe {
        guarded(what, err, -1, || {
            let p = p.ok_or_else(|| ErrorObject::null(what, "policy"))?;
            body(p).map(|()| 0)
        })
    }
}

/// `memplug_host_policy_set_trust`: `"strict"` or `"any"`.
///
/// # Safety
/// `policy` is a live policy no other thread uses; `level` a C string; `err`
/// NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_policy_set_trust(policy: *mut Policy, level: *const c_char, err: ErrOut) -> i32 {
    const F: &str = "memplug_host_policy_set_trust";
    // SAFETY: the caller's contract.
    unsafe { with_policy(F, policy, err, |p| settings::set_trust(p, text(level, F, "level")?)) }
}

/// `memplug_host_policy_pin`: pin plugins to the digests of an allowlist
/// file (`sha256sum` format).
///
/// # Safety
/// As for [`memplug_host_policy_set_trust`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_policy_pin(policy: *mut Policy, allowlist: *const c_char, err: ErrOut) -> i32 {
    const F: &str = "memplug_host_policy_pin";
    // SAFETY: the caller's contract.
    unsafe { with_policy(F, policy, err, |p| settings::pin(p, text(allowlist, F, "allowlist")?)) }
}

/// `memplug_host_policy_set_probe`: probe each candidate in a worker
/// process before loading it (`on` non-zero), with a timeout in
/// milliseconds (0: the library's default, 10 s).
///
/// # Safety
/// `policy` is NULL or a live policy no other thread uses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_policy_set_probe(policy: *mut Policy, on: i32, timeout_ms: u64) -> i32 {
    let timeout =
        if timeout_ms == 0 { memplug::policy::Probe::DEFAULT_TIMEOUT } else { Duration::from_millis(timeout_ms) };
    // SAFETY: the caller's contract; no error argument.
    unsafe {
        with_policy("memplug_host_policy_set_probe", policy, std::ptr::null_mut(), |p| {
            settings::set_probe(p, on != 0, timeout);
            Ok(())
        })
    }
}

/// `memplug_host_policy_set_cache`: the verdict cache file, or NULL for
/// none.
///
/// # Safety
/// As for [`memplug_host_policy_set_trust`]; `path` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_policy_set_cache(policy: *mut Policy, path: *const c_char, err: ErrOut) -> i32 {
    const F: &str = "memplug_host_policy_set_cache";
    // SAFETY: the caller's contract.
    unsafe {
        with_policy(F, policy, err, |p| {
            p.cache = optional_text(path, F, "path")?.map(Into::into);
            Ok(())
        })
    }
}

/// `memplug_host_policy_require`: a version requirement, `NAME REQ`.
///
/// # Safety
/// As for [`memplug_host_policy_set_trust`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_policy_require(policy: *mut Policy, spec: *const c_char, err: ErrOut) -> i32 {
    const F: &str = "memplug_host_policy_require";
    // SAFETY: the caller's contract.
    unsafe { with_policy(F, policy, err, |p| Ok(p.require(text(spec, F, "spec")?)?)) }
}

/// `memplug_host_policy_deprecate_abi`: an ABI version, `MAJOR.MINOR`,
/// that still loads with a warning.
///
/// # Safety
/// As for [`memplug_host_policy_set_trust`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memplug_host_policy_deprecate_abi(
    policy: *mut Policy,
    spec: *const c_char,
    err: ErrOut,
) -> i32 {
    const F: &str = "memplug_host_policy_deprecate_abi";
    // SAFETY: the caller's contract.
    unsafe { with_policy(F, policy, err, |p| Ok(p.deprecate_abi(text(spec, F, "spec")?)?)) }
}
