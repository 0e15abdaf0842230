//! Writing a spool (see [`crate::format::spooled`]): records appended
//! through a shared mapping of a file of this process's own, with no
//! system call per record — one atomic add reserves the space, a copy
//! fills it. The file is allocated on disk ahead of the writers
//! (`fallocate`, doubling), so a write into the mapping never meets a full
//! disk (which would be a `SIGBUS`); a record that finds no room (the
//! file cannot grow, or has reached [`SPOOL_MAX`]) is refused, and the
//! caller writes it some other way.
//!
//! The spool is made with the first record (most processes of a run
//! sample nothing, and make none). The mapping is shared with every
//! process forked from this one once it is made, and so
//! is the header word the space is reserved from: parent and children
//! append to one spool without overwriting each other. An `exec`'d image
//! makes its own. Every function is safe in a signal handler and
//! allocates nothing.

use crate::format::{Origin, SPOOL_ALIGN, SPOOL_COMMITTED, SPOOL_HEADER, SPOOL_INFIX, SPOOL_MAGIC, SPOOL_USED};
use crate::text::Buf;
use core::ffi::CStr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, Ordering};

/// The most bytes a spool holds (the mapping's length; the file grows
/// into it).
pub const SPOOL_MAX: usize = 256 << 20;
/// The bytes a spool is created with.
const FIRST: usize = 64 << 10;
/// The longest path a spool may have.
const PATH_MAX: usize = 4096;

/// A path kept in static memory, NUL-terminated, read and written as
/// atomic words (so that any thread may read it, in a signal handler too).
struct StaticPath([AtomicU64; PATH_MAX / 8]);

impl StaticPath {
    const fn new() -> StaticPath {
        StaticPath([const { AtomicU64::new(0) }; PATH_MAX / 8])
    }

    /// Keep `bytes` (NUL-terminated, at most PATH_MAX long).
    fn set(&self, bytes: &[u8]) {
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0[i].store(u64::from_ne_bytes(w), Ordering::Relaxed);
        }
    }

    /// The path kept, into `out`; its bytes with the NUL.
    fn get<'b>(&self, out: &'b mut [u8; PATH_MAX]) -> &'b [u8] {
        for (i, w) in self.0.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        let len = out.iter().position(|&b| b == 0).map_or(0, |n| n + 1);
        &out[..len]
    }
}

/// No spool is made until the first record (most processes sample
/// nothing); then one thread makes it.
const UNMADE: u8 = 0;
/// A thread is making it (records meanwhile are refused).
const MAKING: u8 = 1;
/// It is made ([`BASE`] is set), or could not be (`BASE` stays null).
const SETTLED: u8 = 2;

/// Where the spool is made.
static STATE: AtomicU8 = AtomicU8::new(SETTLED);
/// The trace the spool is made beside, and the image's nonce.
static TRACE: StaticPath = StaticPath::new();
static NONCE: AtomicU64 = AtomicU64::new(0);
/// The mapping (null: no spool).
static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// The file could not grow once: records are refused from then on.
static FULL: AtomicBool = AtomicBool::new(false);
/// The spool's own path (to grow it by).
static PATH: StaticPath = StaticPath::new();

/// Have this process image's records spooled beside the trace file
/// `trace`: the spool is made with the first record [`append`]ed, named
/// `<trace>.spool.<pid>.<nonce>` (`origin`'s nonce, in hexadecimal; the
/// pid of the process that makes it). Call once, single-threaded (from a
/// constructor); whether the path fits.
pub fn beside(trace: &CStr, origin: Origin) -> bool {
    let bytes = trace.to_bytes_with_nul();
    if bytes.len() + SPOOL_INFIX.len() + 28 > PATH_MAX {
        return false;
    }
    TRACE.set(bytes);
    NONCE.store(origin.nonce, Ordering::Relaxed);
    STATE.store(UNMADE, Ordering::Release);
    true
}

/// Make the spool (the first record's writer); the mapping, if made.
#[cold]
fn make() -> Option<*mut u8> {
    if STATE.compare_exchange(UNMADE, MAKING, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return None;
    }
    let mut path = [0u8; PATH_MAX];
    let mut len = 0;
    let mut put = |b: &[u8]| {
        path[len..len + b.len()].copy_from_slice(b);
        len += b.len();
    };
    let mut trace = [0u8; PATH_MAX];
    let trace = TRACE.get(&mut trace);
    put(&trace[..trace.len().saturating_sub(1)]);
    let mut name = Buf::<48>::new();
    let (pid, nonce) = (super::sys::process_id(), NONCE.load(Ordering::Relaxed));
    let _ = core::fmt::Write::write_fmt(&mut name, format_args!("{SPOOL_INFIX}{pid}.{nonce:x}\0"));
    put(name.bytes());
    let base = CStr::from_bytes_with_nul(&path[..len]).ok().and_then(create);
    if base.is_some() {
        PATH.set(&path[..len]);
    }
    BASE.store(base.unwrap_or(core::ptr::null_mut()), Ordering::Release);
    STATE.store(SETTLED, Ordering::Release);
    base
}

/// Create the spool at `path` (which must not exist: it is created, never
/// followed through a link) and map it; the mapping, with its header.
fn create(path: &CStr) -> Option<*mut u8> {
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0o600) };
    if fd < 0 {
        return None;
    }
    let base = allocate(fd, 0, FIRST).then(|| map(fd)).flatten();
    // SAFETY: our own descriptor, closed once (the mapping keeps the file).
    unsafe { libc::close(fd) };
    let Some(base) = base else {
        // SAFETY: `path` is NUL-terminated; the file is the one just made.
        unsafe { libc::unlink(path.as_ptr()) };
        return None;
    };
    // SAFETY: the mapping is SPOOL_MAX bytes, page-aligned, and its first
    // FIRST bytes are backed by the file (allocated above); the header is
    // written before the mapping is published.
    unsafe {
        core::ptr::copy_nonoverlapping(SPOOL_MAGIC.as_ptr(), base, SPOOL_MAGIC.len());
        word(base, SPOOL_USED).store(SPOOL_HEADER as u64, Ordering::Relaxed);
        word(base, SPOOL_COMMITTED).store(FIRST as u64, Ordering::Relaxed);
    }
    Some(base)
}

/// Append `record` (a whole record of the trace format) to the spool;
/// whether it was (`false`: there is no spool, or no room in it).
pub fn append(record: &[u8]) -> bool {
    let mut base = BASE.load(Ordering::Acquire);
    if base.is_null() {
        match make() {
            Some(b) => base = b,
            None => return false,
        }
    }
    if record.len() < SPOOL_ALIGN || FULL.load(Ordering::Relaxed) {
        return false;
    }
    let len = record.len().next_multiple_of(SPOOL_ALIGN) as u64;
    // SAFETY: the header is in the first page of a live mapping of
    // SPOOL_MAX bytes, backed by the file since `create`.
    let (used, committed) = unsafe { (word(base, SPOOL_USED), word(base, SPOOL_COMMITTED)) };
    let at = used.fetch_add(len, Ordering::Relaxed);
    let Some(end) = at.checked_add(len).filter(|&e| e <= SPOOL_MAX as u64) else { return false };
    if end > committed.load(Ordering::Acquire) && !grow(committed, end as usize) {
        FULL.store(true, Ordering::Relaxed);
        return false;
    }
    let at = at as usize;
    let mut head = [0u8; SPOOL_ALIGN];
    head.copy_from_slice(&record[..SPOOL_ALIGN]);
    // SAFETY: `at..at + len` lies inside the mapping and inside the file
    // (`end` is at most the committed bytes), was reserved by this call
    // alone (the add above), and is 8-aligned (every reservation is a
    // multiple of 8 from an aligned header); the record's first word is
    // stored last, with release order, so a reader sees either no record
    // or a whole one.
    unsafe {
        let to = base.add(at);
        core::ptr::copy_nonoverlapping(record[SPOOL_ALIGN..].as_ptr(), to.add(SPOOL_ALIGN), record.len() - SPOOL_ALIGN);
        word(base, at).store(u64::from_ne_bytes(head), Ordering::Release);
    }
    true
}

/// The atomic word at byte `at` of the mapping at `base`.
///
/// # Safety
/// `at` is 8-aligned, and the 8 bytes there are inside the mapping and
/// backed by the file, for as long as the word is used.
unsafe fn word<'a>(base: *mut u8, at: usize) -> &'a AtomicU64 {
    // SAFETY: the caller's promise; an AtomicU64 may alias shared memory
    // that every writer accesses atomically.
    unsafe { AtomicU64::from_ptr(base.add(at).cast()) }
}

/// Make the file hold at least `end` bytes (doubling what it holds, up to
/// SPOOL_MAX); whether it does.
fn grow(committed: &AtomicU64, end: usize) -> bool {
    let now = committed.load(Ordering::Acquire) as usize;
    let want = end.max(now.saturating_mul(2)).min(SPOOL_MAX);
    let mut path = [0u8; PATH_MAX];
    let path = PATH.get(&mut path);
    // The program may have closed any descriptor kept open: the file is
    // opened again by its path, never followed through a link.
    let Ok(path) = CStr::from_bytes_with_nul(path) else { return false };
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let grown = want <= now || allocate(fd, now, want - now);
    // SAFETY: our own descriptor, closed once.
    unsafe { libc::close(fd) };
    if grown {
        committed.fetch_max(want as u64, Ordering::Release);
    }
    grown
}

/// Allocate `len` bytes of the file `fd` from `from` on disk (growing it,
/// if shorter; never shrinking it); whether they are. A file system
/// without `fallocate` has no spool (glibc's emulation would write into
/// space other threads may be filling).
fn allocate(fd: i32, from: usize, len: usize) -> bool {
    loop {
        // SAFETY: a plain system call on our descriptor.
        let r = unsafe { libc::fallocate(fd, 0, from as libc::off_t, len as libc::off_t) };
        // SAFETY: this thread's errno.
        if r == 0 || unsafe { *libc::__errno_location() } != libc::EINTR {
            return r == 0;
        }
    }
}

/// A shared mapping of SPOOL_MAX bytes of the file `fd`.
fn map(fd: i32) -> Option<*mut u8> {
    // SAFETY: a shared mapping of our descriptor at an address the kernel
    // picks; only the part the file holds is ever touched.
    let p = unsafe {
        libc::mmap(core::ptr::null_mut(), SPOOL_MAX, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}
