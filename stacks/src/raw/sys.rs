//! The system calls the crate makes, each safe to make from a signal
//! handler and none allocating: the thread's and process's ids, the
//! environment, appending to a file, anonymous memory, and reading memory
//! that may not be mapped (`process_vm_readv` on this process, which fails
//! with `EFAULT` instead of faulting).

use core::ffi::{CStr, c_void};

/// Forks seen by this process image (a thread's cached id is stale after
/// one: the child's one thread has a new id).
static FORKS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

std::thread_local! {
    /// This thread's id, with the fork count it was read at (0: not read).
    static TID: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Count a fork (in the child).
extern "C" fn forked() {
    FORKS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
}

/// Whether forks are counted ([`watch_forks`] was called): only then is
/// the process id cached.
static WATCHING: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
/// This process's id, with the fork count it was read at (0: not read).
static PID: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Keep cached thread and process ids right across `fork` (called once, by
/// `init`).
pub fn watch_forks() {
    // SAFETY: a plain function as the child's handler, none for the parent.
    if unsafe { libc::pthread_atfork(None, None, Some(forked)) } == 0 {
        WATCHING.store(true, core::sync::atomic::Ordering::Release);
    }
}

/// The calling thread's kernel id (read once per thread, and again after a
/// fork).
pub fn thread_id() -> u32 {
    let forks = FORKS.load(core::sync::atomic::Ordering::Relaxed);
    let cached = TID.try_with(core::cell::Cell::get).unwrap_or(0);
    if cached != 0 && (cached >> 32) as u32 == forks {
        return cached as u32;
    }
    // SAFETY: gettid has no preconditions.
    let tid = (unsafe { libc::syscall(libc::SYS_gettid) }) as u32;
    let _ = TID.try_with(|c| c.set(u64::from(forks) << 32 | u64::from(tid)));
    tid
}

/// This process's id: read once, and again after a fork, once forks are
/// counted ([`watch_forks`]; a heap profile's every record names its
/// process, and `getpid` is a system call). A child made by a raw `clone`,
/// which runs no fork handler, would go on naming its parent.
pub fn process_id() -> u32 {
    use core::sync::atomic::Ordering::{Acquire, Relaxed};
    if !WATCHING.load(Acquire) {
        // SAFETY: getpid has no preconditions.
        return (unsafe { libc::getpid() }) as u32;
    }
    let forks = FORKS.load(Relaxed);
    let cached = PID.load(Relaxed);
    if cached != 0 && (cached >> 32) as u32 == forks {
        return cached as u32;
    }
    // SAFETY: getpid has no preconditions.
    let pid = (unsafe { libc::getpid() }) as u32;
    PID.store(u64::from(forks) << 32 | u64::from(pid), Relaxed);
    pid
}

/// The value of environment variable `name`, if set (the environment's own
/// bytes; `getenv` allocates nothing).
pub fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated.
    let v = unsafe { libc::getenv(name.as_ptr()) };
    // SAFETY: getenv's answer is a NUL-terminated string that lives as long
    // as the variable is not changed; the callers read it at once.
    (!v.is_null()).then(|| unsafe { CStr::from_ptr(v) }.to_bytes())
}

/// The value of environment variable `name` as a C string, if set.
pub fn env_c(name: &CStr) -> Option<&'static CStr> {
    // SAFETY: as in `env`.
    let v = unsafe { libc::getenv(name.as_ptr()) };
    // SAFETY: as in `env`.
    (!v.is_null()).then(|| unsafe { CStr::from_ptr(v) })
}

/// Write all of `bytes` to `fd` (retrying short writes and `EINTR`);
/// whether it all went.
pub fn write_all(fd: i32, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: the buffer is valid for its length.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            // SAFETY: this thread's errno.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            return false;
        }
        bytes = &bytes[n as usize..];
    }
    true
}

/// Open `path` to append to it (never creating it); the descriptor, or
/// `None`.
pub fn open_append(path: &CStr) -> Option<i32> {
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC) };
    (fd >= 0).then_some(fd)
}

/// Close `fd`.
pub fn close(fd: i32) {
    // SAFETY: the caller's descriptor, closed once.
    unsafe { libc::close(fd) };
}

/// `len` bytes of fresh anonymous memory (zeroed), reserved without
/// swap accounting (`MAP_NORESERVE`: pages are committed when touched).
pub fn map_zeroed(len: usize) -> Option<*mut u8> {
    // SAFETY: an anonymous private mapping at an address the kernel picks.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

/// Atomic words in memory of their own, zeroed, mapped at
/// [`Words::zeroed`] (pages committed as they are written) and unmapped
/// when dropped: never through `malloc`.
pub struct Words {
    at: core::ptr::NonNull<core::sync::atomic::AtomicU64>,
    len: usize,
}

// SAFETY: `Words` owns its mapping and hands out only shared references to
// atomics, which any thread may use.
unsafe impl Send for Words {}
// SAFETY: as for `Send`: every access goes through an atomic.
unsafe impl Sync for Words {}

impl Words {
    /// `len` zeroed words; `None` if the memory could not be mapped.
    pub fn zeroed(len: usize) -> Option<Words> {
        let bytes = len.checked_mul(8)?.max(1);
        let at = core::ptr::NonNull::new(map_zeroed(bytes)?.cast())?;
        Some(Words { at, len })
    }
}

impl core::ops::Deref for Words {
    type Target = [core::sync::atomic::AtomicU64];

    fn deref(&self) -> &[core::sync::atomic::AtomicU64] {
        // SAFETY: the mapping holds `len` words, zeroed (a valid AtomicU64),
        // page-aligned, readable and writable until `drop`, and only ever
        // accessed through these atomics.
        unsafe { core::slice::from_raw_parts(self.at.as_ptr(), self.len) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        // SAFETY: our own mapping of this length, no longer borrowed (drop
        // has `&mut self`).
        unsafe { libc::munmap(self.at.as_ptr().cast(), (self.len * 8).max(1)) };
    }
}

/// The `N` bytes at `addr`, if they are all mapped and readable; never
/// faults.
pub fn read_bytes<const N: usize>(addr: usize) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let local = libc::iovec { iov_base: out.as_mut_ptr().cast::<c_void>(), iov_len: N };
    let remote = libc::iovec { iov_base: addr as *mut c_void, iov_len: N };
    // SAFETY: the local buffer is ours and N bytes long; the kernel checks
    // the remote range and fails with EFAULT rather than faulting.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == N as isize).then_some(out)
}

/// The two words at `addr`, if readable.
pub fn read_words(addr: usize) -> Option<[u64; 2]> {
    let b: [u8; 16] = read_bytes(addr)?;
    let w = |i: usize| u64::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]]);
    Some([w(0), w(8)])
}

/// The program break (`sbrk(0)`): the end of glibc's main heap.
pub fn program_break() -> usize {
    // SAFETY: sbrk(0) only reads the break.
    unsafe { libc::sbrk(0) as usize }
}

/// Write `bytes` to standard error.
pub fn stderr(bytes: &[u8]) {
    let _ = write_all(2, bytes);
}

/// A number that differs between process images: the clock, the pid and
/// an address of this image.
pub fn nonce() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is writable.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let here = nonce as fn() -> u64 as usize as u64;
    (ts.tv_sec as u64).wrapping_mul(1_000_000_007) ^ (ts.tv_nsec as u64) ^ (u64::from(process_id()) << 40) ^ here
}

/// The path of the running executable (`/proc/self/exe`) into `buf`; its
/// bytes.
pub fn exe_path(buf: &mut [u8]) -> &[u8] {
    // SAFETY: the path is NUL-terminated and the buffer writable for its length.
    let n = unsafe { libc::readlink(c"/proc/self/exe".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 { &[] } else { &buf[..n as usize] }
}
