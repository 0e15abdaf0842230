//! The process-wide side of tracking's reports: the instances' registries,
//! which the destructor asks for the blocks live at exit (written to the
//! trace under `memplug run --report`), and the foreign-free companion of
//! the entry function (see `memplug_abi::FOREIGN_FREE_SUFFIX`).

use crate::Tracking;
use crate::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Registries of the live instances (null: a free slot).
const SLOTS: usize = 64;
static INSTANCES: [AtomicPtr<Registry>; SLOTS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; SLOTS];

/// Let the destructor list `reg`'s blocks at exit.
pub(crate) fn register(reg: &Arc<Registry>) {
    let p = Arc::into_raw(reg.clone()) as *mut Registry;
    if !INSTANCES
        .iter()
        .any(|s| s.compare_exchange(core::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire).is_ok())
    {
        // SAFETY: from Arc::into_raw above, published nowhere.
        drop(unsafe { Arc::from_raw(p) });
    }
}

/// Forget `reg` (its instance is destroyed).
pub(crate) fn unregister(reg: &Arc<Registry>) {
    let want = Arc::as_ptr(reg) as *mut Registry;
    for s in &INSTANCES {
        if s.compare_exchange(want, core::ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire).is_ok() {
            // SAFETY: the reference `register` leaked into this slot, taken
            // out of it and dropped once.
            drop(unsafe { Arc::from_raw(want) });
        }
    }
}

/// At exit, under `memplug run --report`: the live blocks by allocation
/// stack, into the run's trace.
extern "C" fn at_exit() {
    if !memplug_stacks::emit::owns_report() {
        return;
    }
    let mut groups = Vec::new();
    for s in &INSTANCES {
        let p = s.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: a registered registry, kept alive by its slot's reference.
            groups.extend(crate::errors::live_by_stack(unsafe { &*p }));
        }
    }
    groups.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    memplug_stacks::emit::leaks(&mut groups.into_iter());
}

/// Run `at_exit` when the process exits (after `atexit` handlers and C++
/// static destructors).
#[used]
#[unsafe(link_section = ".fini_array")]
static AT_EXIT: extern "C" fn() = at_exit;

/// The foreign-free companion: `memplug run`'s interposer could not match
/// `ptr` to a block. A bad free is reported and aborts the program (1 with
/// `recover=1`); 0 when it may be a block libc made.
///
/// # Safety
/// `ctx` is the `ctx` of a handler of this plugin.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn memplug_handler_foreign_free(
    ctx: *mut core::ffi::c_void,
    ptr: *mut core::ffi::c_void,
) -> i32 {
    // SAFETY: every handler of this plugin has a `Tracking` as its ctx.
    let t = unsafe { &*ctx.cast::<Tracking>() };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| i32::from(t.foreign_free(ptr as usize)))).unwrap_or(0)
}
