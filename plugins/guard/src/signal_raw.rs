//! The process-wide side of guard's reports: the instances the `SIGSEGV`
//! handler asks about a faulting address, the handler itself, and the
//! destructor that lists the blocks live at exit under `memplug run
//! --report`.
//!
//! The handler is installed when the first instance is made. For a fault
//! in a guard block it reports (`errors::on_fault`) and then lets the
//! access fault again under the previous disposition, so the program dies
//! by the signal as it would have (or aborts, for a bad free found by the
//! interposer reading a freed block's header; or goes on, with
//! `recover=1`). A fault that is not guard's goes to the handler that was
//! there before (Rust's stack-overflow handler, say), or ends the program.
//! The handler allocates nothing: the tables are looked up, not changed,
//! and the report is encoded in a fixed buffer.

use crate::errors::{self, Shared, Verdict};
use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// Instances the handler asks (null: a free slot).
const SLOTS: usize = 64;
static INSTANCES: [AtomicPtr<Shared>; SLOTS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; SLOTS];

/// `memplug run`'s interposer, `[start, end)` (0, 0: none).
static INTERPOSER: (AtomicUsize, AtomicUsize) = (AtomicUsize::new(0), AtomicUsize::new(0));

/// Whether the handler is installed.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The disposition before ours.
struct Old(UnsafeCell<libc::sigaction>);
// SAFETY: written once, by the thread that set INSTALLED, before the
// handler can run; only read afterwards.
unsafe impl Sync for Old {}
// SAFETY: an all-zero sigaction is SIG_DFL with no flags.
static OLD: Old = Old(UnsafeCell::new(unsafe { core::mem::zeroed() }));

/// Record where `memplug run`'s interposer is (its faults are bad frees).
pub(crate) fn set_interposer(range: Option<(usize, usize)>) {
    if let Some((lo, hi)) = range {
        INTERPOSER.1.store(hi, Ordering::Relaxed);
        INTERPOSER.0.store(lo, Ordering::Release);
    }
}

/// Let the handler ask `shared` about faults (and install it, the first
/// time). An instance beyond the slots' number is not asked.
pub(crate) fn register(shared: &Arc<Shared>) {
    install();
    let p = Arc::into_raw(shared.clone()) as *mut Shared;
    if !INSTANCES
        .iter()
        .any(|s| s.compare_exchange(core::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire).is_ok())
    {
        // SAFETY: the pointer came from Arc::into_raw just above and was
        // published nowhere.
        drop(unsafe { Arc::from_raw(p) });
    }
}

/// Stop asking `shared` (its instance is being destroyed).
pub(crate) fn unregister(shared: &Arc<Shared>) {
    let want = Arc::as_ptr(shared) as *mut Shared;
    for s in &INSTANCES {
        if s.compare_exchange(want, core::ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire).is_ok() {
            // SAFETY: the slot held the reference `register` leaked; taken
            // out of the slot, it is dropped once.
            drop(unsafe { Arc::from_raw(want) });
        }
    }
}

/// Install the `SIGSEGV` handler, once per process.
fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: an all-zero sigaction is a valid value; the fields set are the
    // handler (of the SA_SIGINFO signature) and its flags; OLD is written
    // before any fault can reach the handler (it is written by the same
    // call that installs it) and only by this one thread.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_fault as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGSEGV, &sa, OLD.0.get());
    }
}

/// The handler.
extern "C" fn on_fault(sig: c_int, info: *mut libc::siginfo_t, uc: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo and ucontext to an
    // SA_SIGINFO handler.
    let (addr, ip) = unsafe { ((*info).si_addr() as usize, memplug_stacks::raw::unwind::fault_ip(uc)) };
    let lo = INTERPOSER.0.load(Ordering::Acquire);
    let interposer = (lo != 0).then(|| (lo, INTERPOSER.1.load(Ordering::Relaxed)));
    let mut verdict = Verdict::NotOurs;
    for s in &INSTANCES {
        let p = s.load(Ordering::Acquire);
        if p.is_null() {
            continue;
        }
        // SAFETY: a registered instance's shared part, kept alive by the
        // reference its slot holds.
        verdict = errors::on_fault(unsafe { &*p }, addr, ip, interposer);
        if verdict != Verdict::NotOurs {
            break;
        }
    }
    match verdict {
        Verdict::GoOn => return,
        // SAFETY: abort has no preconditions.
        Verdict::Abort => unsafe { libc::abort() },
        Verdict::NotOurs | Verdict::Die => {}
    }
    // SAFETY: OLD was written before the handler was installed.
    let old = unsafe { *OLD.0.get() };
    let h = old.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // SAFETY: resetting to the default: returning re-runs the faulting
        // instruction, whose fault then ends the process by SIGSEGV.
        unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
        return;
    }
    // SAFETY: the previous handler, called as the kernel would have called
    // it (with siginfo and ucontext when it asked for them).
    unsafe {
        if old.sa_flags & libc::SA_SIGINFO != 0 {
            core::mem::transmute::<usize, extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)>(h)(sig, info, uc);
        } else {
            core::mem::transmute::<usize, extern "C" fn(c_int)>(h)(sig);
        }
    }
}

/// At exit: under `memplug run --report`, the blocks live now, grouped by
/// allocation stack, into the run's trace.
extern "C" fn at_exit() {
    let mut groups = Vec::new();
    for s in &INSTANCES {
        let p = s.load(Ordering::Acquire);
        if !p.is_null() && memplug_stacks::emit::owns_report() {
            // SAFETY: as in `on_fault`.
            groups.extend(errors::live_by_stack(unsafe { &*p }));
        }
    }
    groups.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    memplug_stacks::emit::leaks(&mut groups.into_iter());
}

/// Run `at_exit` when the process exits (after `atexit` handlers and C++
/// static destructors, which may still free blocks).
#[used]
#[unsafe(link_section = ".fini_array")]
static AT_EXIT: extern "C" fn() = at_exit;
