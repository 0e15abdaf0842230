//! A segment: made or attached by name, its header checked, its lock (with
//! the repair after a process died holding it), and its lifetime.
//!
//! # Lifetime
//! - A segment's *name* is removed by an instance made with `unlink=1`
//!   when it goes (or when its process exits normally, if it is still
//!   there), and always for a segment of this process (no `name=`). Without
//!   `unlink=1` a named segment stays until someone removes it — an
//!   instance with `unlink=1`, or `rm /dev/shm/memplug-NAME` — even when no
//!   process uses it: that is what lets a process attach later. It is never
//!   removed behind anyone's back.
//! - Its *memory* lasts until the name is gone and the last process has
//!   unmapped it (POSIX semantics): attached processes keep working after
//!   the name is removed.
//! - A process killed before it could remove its own segment leaves it
//!   behind; the next process of the same user that makes a segment of its
//!   own removes every such segment whose process is gone, and says so on
//!   standard error.
//! - A child made by `fork` inherits the mappings, not the attachments: it
//!   never removes its parent's segments (nor counts itself attached)
//!   unless it attaches them itself.

use crate::config::{Create, PREFIX, ShmConfig, process_name, process_of};
use crate::format::{self, DATA_START, MAGIC, VERSION, at};
use crate::locked::Locked;
use crate::raw::map::{self, Mapping};
use crate::raw::mutex::{self, Taken};
use crate::repair;
use memplug_abi::fork::{ForkLock, ForkMutex};
use std::ffi::CString;
use std::sync::Once;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long an attaching process waits for the process making the segment
/// to finish it.
const MAKING_WAIT: Duration = Duration::from_secs(2);

/// A mapped segment with a checked header.
pub struct Segment {
    map: Mapping,
    name: String,
    c_name: CString,
    generation: u64,
    unlink: bool,
    /// The process that opened it: a child made by `fork` inherits the
    /// mapping, not the attachment (it neither counts nor unlinks it).
    opened_by: u32,
}

/// Names to remove when the process exits normally, with the process that
/// asked (a forked child inherits this list, and must not remove its
/// parent's segments when it exits). Taken around a `fork`
/// ([`fork_locks`]), so that a child that exits normally can read it.
static AT_EXIT: ForkMutex<Vec<(CString, u32)>> = ForkMutex::new(Vec::new());

/// The process-wide lock a `fork` must find free: the list of names to
/// remove at exit (named once, by the plugin's own handler).
pub(crate) fn fork_locks<'a>(locks: &mut dyn FnMut(&'a dyn ForkLock)) {
    locks(&AT_EXIT);
}

extern "C" fn unlink_at_exit() {
    let names = std::mem::take(&mut *AT_EXIT.lock());
    let me = map::pid();
    for (name, _) in names.iter().filter(|(_, pid)| *pid == me) {
        let _ = map::unlink(name);
    }
}

impl Segment {
    /// Make or attach the segment `config` describes, and count this
    /// attachment in it.
    pub fn open(config: &ShmConfig) -> Result<Segment, String> {
        let name = match config.segment_name() {
            Some(name) => name,
            None => {
                remove_segments_of_dead_processes();
                format!("{PREFIX}{}", process_name(map::uid(), map::pid(), map::random()))
            }
        };
        let c_name = CString::new(name.clone()).map_err(|_| format!("segment name {name:?} holds a NUL"))?;
        let size = format::segment_size(config.create_size());
        let map = match config.create {
            Create::New => make(&c_name, size, config.reserve)?,
            Create::Existing => attach(&c_name, config.size)?.ok_or_else(|| {
                format!(
                    "there is no segment {name} (create=0): it was never made, or its name was removed (unlink); \
                     make it with create=1 (or leave create= out)"
                )
            })?,
            Create::Auto => match attach(&c_name, config.size)? {
                Some(map) => map,
                None => match make(&c_name, size, config.reserve) {
                    Err(e) if e.contains("exists already") => attach(&c_name, config.size)?
                        .ok_or_else(|| format!("segment {name} appeared and vanished while attaching: try again"))?,
                    other => other?,
                },
            },
        };
        let generation = map.word(at::GENERATION).load(Ordering::Relaxed);
        if config.unlink {
            static REGISTER: Once = Once::new();
            REGISTER.call_once(|| map::at_exit(unlink_at_exit));
            AT_EXIT.lock().push((c_name.clone(), map::pid()));
        }
        let segment = Segment { map, name, c_name, generation, unlink: config.unlink, opened_by: map::pid() };
        {
            let l = segment.lock()?;
            l.add(at::ATTACHED, 1);
            l.add(at::ATTACHES, 1);
        }
        Ok(segment)
    }

    /// The segment's POSIX name, e.g. `/memplug-results`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes of the segment.
    pub fn size(&self) -> u64 {
        self.map.len()
    }

    /// The segment's incarnation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the name is removed when this goes.
    pub fn unlinks(&self) -> bool {
        self.unlink
    }

    pub(crate) fn map(&self) -> &Mapping {
        &self.map
    }

    /// Take the segment's lock; if the last holder died with it (or
    /// stopped in the middle of an operation), repair the allocator first
    /// and say what was recovered on standard error.
    pub(crate) fn lock(&self) -> Result<Locked<'_>, String> {
        let (l, taken) = Locked::take(&self.map, &self.name).map_err(|e| format!("segment {}: {e}", self.name))?;
        let owner = l.get(at::LOCK_OWNER);
        l.set(at::LOCK_OWNER, u64::from(map::pid()));
        let dirty = l.get(at::DIRTY) != 0;
        if taken == Taken::OwnerDied || dirty {
            let why = if taken == Taken::OwnerDied {
                format!("process {owner} died holding its lock")
            } else {
                "an operation was interrupted".to_string()
            };
            let report = repair::repair(&l);
            eprintln!(
                "memplug shm: segment {}: {why}; repaired the allocator: {report} (recovery {} of this segment)",
                self.name,
                l.get(at::RECOVERIES)
            );
        }
        Ok(l)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.opened_by != map::pid() {
            return; // a forked child's copy: only the mapping goes
        }
        if let Ok(l) = self.lock() {
            l.sub(at::ATTACHED, 1);
        }
        if self.unlink {
            let _ = map::unlink(&self.c_name);
            AT_EXIT.lock().retain(|(n, _)| n != &self.c_name);
        }
    }
}

/// Make the segment `name` of `size` bytes and publish its header.
fn make(name: &std::ffi::CStr, size: u64, reserve: bool) -> Result<Mapping, String> {
    let shown = name.to_string_lossy();
    let map = Mapping::create(name, size, reserve).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => format!(
            "segment {shown} exists already: attach to it with create=0 (or leave create= out), or remove it first \
             (an instance with unlink=1 removes it when it goes; or rm /dev/shm{shown})"
        ),
        _ => format!("cannot make segment {shown}: {e}"),
    })?;
    let w = |off, v| map.word(off).store(v, Ordering::Relaxed);
    w(at::VERSION, VERSION);
    w(at::SIZE, size);
    w(at::GENERATION, map::random());
    w(at::CREATOR, u64::from(map::pid()));
    w(at::TOP, DATA_START);
    w(at::CLEAN_FROM, DATA_START);
    if let Err(e) = mutex::init(&map) {
        let _ = map::unlink(name);
        return Err(format!("cannot make segment {shown}: {e}"));
    }
    // Publish: an attaching process reads the magic with acquire ordering,
    // and then sees everything above.
    map.word(at::MAGIC).store(MAGIC, Ordering::Release);
    Ok(map)
}

/// Attach the existing segment `name`, waiting for its maker to finish it;
/// `Ok(None)` if there is none. With `size`, it must have that size.
fn attach(name: &std::ffi::CStr, size: Option<u64>) -> Result<Option<Mapping>, String> {
    let shown = name.to_string_lossy();
    let started = Instant::now();
    let map = loop {
        let map = match Mapping::open(name) {
            Ok(None) => return Ok(None),
            Ok(Some(map)) => Some(map),
            // Made but not sized yet: its maker is between shm_open and ftruncate.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => None,
            Err(e) => return Err(format!("cannot attach segment {shown}: {e}")),
        };
        if let Some(map) = map.filter(|m| m.len() >= DATA_START) {
            match map.word(at::MAGIC).load(Ordering::Acquire) {
                MAGIC => break map,
                0 => {}
                other => {
                    return Err(format!(
                        "{shown} is not a memplug shm segment (it starts with {other:#018x}); choose another name"
                    ));
                }
            }
        }
        if started.elapsed() > MAKING_WAIT {
            return Err(format!(
                "segment {shown} exists but was never finished (the process making it died?): remove it \
                 (rm /dev/shm{shown}) and make it again"
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let word = |off| map.word(off).load(Ordering::Relaxed);
    if word(at::VERSION) != VERSION || word(at::SIZE) != map.len() || word(at::GENERATION) == 0 {
        return Err(format!(
            "segment {shown} has format version {} and says it is {} bytes (it is {}): not one this plugin can use",
            word(at::VERSION),
            word(at::SIZE),
            map.len()
        ));
    }
    if let Some(asked) = size.map(format::segment_size).filter(|&s| s != map.len()) {
        return Err(format!(
            "segment {shown} is {} bytes, not the size={asked} asked: leave size= out to attach to it whatever its \
             size",
            map.len()
        ));
    }
    Ok(Some(map))
}

/// Remove, once per process, the segments of this user's processes that
/// are gone (killed before they could remove their own), saying so.
fn remove_segments_of_dead_processes() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = std::fs::read_dir("/dev/shm") else { return };
        let (uid, me) = (map::uid(), map::pid());
        for entry in entries.flatten() {
            let file = entry.file_name();
            let Some(file) = file.to_str() else { continue };
            match process_of(file, uid) {
                Some(pid) if pid != me && !map::alive(pid) => {
                    let Ok(name) = CString::new(format!("/{file}")) else { continue };
                    if map::unlink(&name).is_ok() {
                        eprintln!("memplug shm: removed /dev/shm/{file}, left by process {pid}, which is gone");
                    }
                }
                _ => {}
            }
        }
    });
}
