//! Every call into the plugin: marked as inside a call (one byte of
//! thread-local storage, so that the plugin's own requests through libc,
//! and a signal handler that interrupted the call, are served by the
//! bootstrap heap instead of recursing), under a lock when the handler is
//! not thread-safe (taken and released around `fork()`).

use crate::setup::{MODE, Mode, Plugin};
use core::sync::atomic::Ordering;
use memplug_callcore::{ForkNode, ForkSet, PthreadLock};

/// Which allocator serves now: [`MODE`]'s byte as the mode it is, with no
/// conversion (one load; each question asked of it one compare).
#[inline(always)]
pub(crate) fn mode() -> Mode {
    let byte = MODE.load(Ordering::Acquire);
    // SAFETY: only `setup::set_mode` writes MODE, always a `Mode`'s byte
    // (`Mode` is `repr(u8)`), and its initial value is `Mode::Boot`'s.
    unsafe { core::mem::transmute::<u8, Mode>(byte) }
}

/// The lock for handlers that are not thread-safe: a pthread mutex, which
/// allocates nothing, held across every `fork` by the call core's fork lock
/// (the host's, shared).
static LOCK: PthreadLock = PthreadLock::new();

/// [`LOCK`]'s place in [`FORK`].
static NODE: ForkNode = ForkNode::new(&LOCK);

/// The locks held across a `fork`: [`LOCK`] alone.
static FORK: ForkSet = ForkSet::with(&NODE);

/// Whether this thread is inside a plugin call (its re-entrant requests go
/// to the bootstrap heap instead of recursing): one byte of thread-local
/// storage. On x86-64 Linux it sits in the static TLS block and is reached
/// with the initial-exec model, two instructions (this library is always
/// preloaded, so its TLS is static); `thread_local!` in a shared library
/// would call `__tls_get_addr` and std's accessor on every `malloc` and
/// `free` (about 35 instructions, a quarter of the interposer's cost).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod in_call {
    core::arch::global_asm!(
        ".pushsection .tbss.memplug_preload_in_call,\"awT\",@nobits",
        ".globl memplug_preload_in_call",
        ".hidden memplug_preload_in_call",
        ".type memplug_preload_in_call, @object",
        ".size memplug_preload_in_call, 4",
        ".p2align 2",
        "memplug_preload_in_call:",
        ".zero 4",
        ".popsection",
    );

    /// This thread's flag.
    #[inline(always)]
    pub(crate) fn flag() -> *mut bool {
        let p: *mut bool;
        // SAFETY: reads the thread pointer (`fs:0`, the TCB's self pointer)
        // and the GOT entry the loader filled with the variable's offset in
        // the static TLS block; writes nothing but the output register.
        unsafe {
            core::arch::asm!(
                "mov {p}, qword ptr fs:[0]",
                "add {p}, qword ptr [rip + memplug_preload_in_call@GOTTPOFF]",
                p = out(reg) p,
                options(nostack, readonly, pure),
            )
        };
        p
    }

    /// The flag's offset from the thread pointer (the same for every
    /// thread): the GOT entry the loader filled, one instruction.
    #[inline(always)]
    pub(crate) fn offset() -> usize {
        let off: usize;
        // SAFETY: reads the GOT entry the loader filled with the flag's
        // offset in the static TLS block; writes only the output register.
        unsafe {
            core::arch::asm!(
                "mov {o}, qword ptr [rip + memplug_preload_in_call@GOTTPOFF]",
                o = out(reg) off,
                options(nostack, readonly, pure, preserves_flags),
            )
        };
        off
    }

    /// Set this thread's flag and give its offset for [`leave`]; `None`,
    /// changing nothing, when it was set already (this thread is inside a
    /// plugin call). The fast path's question: three instructions (the
    /// GOT entry, then one `bts` that tests and sets bit 0 of the flag's
    /// word, and a branch on its carry). Not atomic, and need not be: the
    /// flag is this thread's own, and a signal handler that interrupts
    /// this thread runs between two instructions, not inside one.
    #[inline(always)]
    pub(crate) fn try_enter() -> Option<usize> {
        let off = offset();
        // SAFETY: this thread's own flag word (4 bytes of its static TLS
        // block, at the offset the loader gave); `bts` reads and writes
        // only it, and the branch leaves for the label on a set flag.
        unsafe {
            core::arch::asm!(
                "bts dword ptr fs:[{o}], 0",
                "jc {busy}",
                o = in(reg) off,
                busy = label { return None },
                options(nostack),
            )
        };
        Some(off)
    }

    /// Whether a fast mode serves (`Mode::FastHandler` or `Mode::FastManifest`, the highest modes):
    /// one compare of the mode byte in memory and a branch. The mode is
    /// written once, by the constructor, before any other thread runs.
    #[inline(always)]
    pub(crate) fn fast_mode() -> bool {
        // SAFETY: reads one byte of a static (the mode, an atomic that
        // only the constructor writes); the branch leaves for the label.
        unsafe {
            core::arch::asm!(
                "cmp byte ptr [rip + {mode}], {fast}",
                "jb {no}",
                mode = sym crate::setup::MODE,
                fast = const crate::setup::Mode::FastHandler as u8,
                no = label { return false },
                options(nostack, readonly),
            )
        };
        true
    }

    /// Clear this thread's flag, at the offset [`enter`] gave.
    #[inline(always)]
    pub(crate) fn leave(off: usize) {
        // SAFETY: as in `enter`: this thread's own flag, at the offset the
        // loader gave (the same for every thread).
        unsafe {
            core::arch::asm!(
                "mov byte ptr fs:[{o}], 0",
                o = in(reg) off,
                options(nostack, preserves_flags),
            )
        };
    }
}

/// The same flag through `thread_local!`, elsewhere.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub(crate) mod in_call {
    use core::cell::Cell;

    thread_local! {
        static IN_CALL: Cell<bool> = const { Cell::new(false) };
    }

    /// This thread's flag.
    #[inline(always)]
    pub(crate) fn flag() -> *mut bool {
        IN_CALL.with(Cell::as_ptr)
    }

    /// Set this thread's flag; whether it was set already (and 0: no
    /// offset is needed here).
    #[inline(always)]
    pub(crate) fn enter() -> (bool, usize) {
        (IN_CALL.with(|c| c.replace(true)), 0)
    }

    /// Whether a fast mode serves.
    #[inline(always)]
    pub(crate) fn fast_mode() -> bool {
        super::mode().fast()
    }

    /// Set this thread's flag; `None` when it was set already.
    #[inline(always)]
    pub(crate) fn try_enter() -> Option<usize> {
        match enter() {
            (true, _) => None,
            (false, off) => Some(off),
        }
    }

    /// Clear this thread's flag.
    #[inline(always)]
    pub(crate) fn leave(_off: usize) {
        IN_CALL.with(|c| c.set(false))
    }
}

/// Call into the plugin: under the lock unless it is thread-safe, marked as
/// inside a call. `None`, without calling, when this thread is already
/// inside one (a request the plugin's own code made through libc). One
/// thread-local access per call: this is the hot path.
#[inline]
pub(crate) fn call<R>(p: &Plugin, f: impl FnOnce(&Plugin) -> R) -> Option<R> {
    let inside = in_call::flag();
    // SAFETY: this thread's own flag, which no other thread touches; valid
    // for the thread's whole life.
    if unsafe { inside.replace(true) } {
        return None;
    }
    let r = if p.thread_safe {
        f(p)
    } else {
        LOCK.lock();
        let r = f(p);
        // SAFETY: this thread locked it just above.
        unsafe { LOCK.unlock() };
        r
    };
    // SAFETY: as above.
    unsafe { inside.write(false) };
    Some(r)
}

/// `fork()` prepare: hold the lock, so no thread is inside the plugin (the
/// call core's [`ForkSet::prepare`], registered once: slot 0).
pub(crate) extern "C" fn before_fork() {
    FORK.prepare(0);
}

/// `fork()` in the parent: release it.
pub(crate) extern "C" fn after_fork_parent() {
    FORK.release(0);
}

/// `fork()` in the child: release it (the forking thread held it).
pub(crate) extern "C" fn after_fork_child() {
    FORK.release(0);
}
