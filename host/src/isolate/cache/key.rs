//! The key of a cache entry: what must be unchanged for the entry to be
//! used — the file itself, and every library it brings in.
//!
//! For each file the key holds its [`FileId`] (size, modification and
//! status-change times in nanoseconds, inode, device, mode, owner), its
//! SHA-256 and when that `stat` was taken. A file is unchanged when:
//! - its size is the same, and
//! - either every field of its `FileId` is the same and the entry is not
//!   *racy*, or its SHA-256 now is the one recorded.
//!
//! An entry is racy when the file's modification or status-change time is
//! less than [`RACY_NS`] (2 s) before the moment its `stat` was recorded
//! (or after it): a file written again within the file system's timestamp
//! granularity could keep both times, so the times prove nothing and the
//! contents are compared. The status-change time (`ctime`) cannot be set
//! back by a user (`touch -r` restores only the modification time). When a
//! lookup proves a file unchanged by its digest, the entry's key is renewed
//! with the file's `stat` now, so that later lookups need only a `stat`.
//!
//! The libraries a file brings in: for a plugin, its `DT_NEEDED` libraries
//! and theirs (at most [`MAX_LIBRARIES`]); for a manifest, the library it
//! names (a path, relative to the manifest's directory, or a soname) and
//! its dependencies — each found the way the dynamic loader finds it
//! ([`crate::admit::precheck::resolve`]), found again at every lookup, and held to
//! the same rule. A library that is found elsewhere than before, appears or
//! disappears, or changed makes the entry unusable.

use crate::admit::discover::{Candidate, CandidateKind};
use crate::admit::precheck::Digest;
use crate::admit::precheck::elf::Dependencies;
use crate::admit::precheck::resolve::{self, Resolver};
use crate::admit::symbols::SymbolSpec;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// How close to the recording of a `stat` a file's times must be for the
/// entry to be racy (nanoseconds): two seconds, more than the timestamp
/// granularity of the file systems memplug runs on (FAT's is 2 s).
pub const RACY_NS: i128 = 2_000_000_000;
/// The most libraries followed from one file (the rest are not keyed).
pub const MAX_LIBRARIES: usize = 64;

/// The identity of a file's contents, as cheap to read as a `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileId {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds and nanoseconds since the epoch.
    pub mtime: (i64, i64),
    /// Status-change time, seconds and nanoseconds since the epoch (which
    /// no user can set back).
    pub ctime: (i64, i64),
    /// Inode number.
    pub ino: u64,
    /// Device number.
    pub dev: u64,
    /// Mode bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
}

impl FileId {
    /// The identity of the file at `path` (following symlinks).
    pub fn of(path: &Path) -> io::Result<FileId> {
        let m = fs::metadata(path)?;
        Ok(FileId {
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
            dev: m.dev(),
            mode: m.mode(),
            uid: m.uid(),
        })
    }
}

/// One file as it was when an entry was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileKey {
    /// Its `stat`.
    pub id: FileId,
    /// Its SHA-256, as hex.
    pub digest: String,
    /// When the `stat` was taken (seconds and nanoseconds since the epoch).
    pub seen: (i64, i64),
}

impl FileKey {
    /// Whether the file's times are too close to when they were seen to
    /// prove it unchanged (see the module docs).
    pub fn racy(&self) -> bool {
        ns(self.id.mtime).max(ns(self.id.ctime)) + RACY_NS > ns(self.seen)
    }

    /// Whether the file at `path` is still this one, read afresh.
    fn holds(&self, path: &Path) -> bool {
        FileId::of(path).is_ok_and(|id| id == self.id)
            && (!self.racy() || digest(path, self.id).is_some_and(|d| d == self.digest))
    }
}

/// A library a file brings in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Library {
    /// The name asked for (a soname or a path).
    pub name: String,
    /// Where the loader finds it (`None`: nowhere).
    #[serde(with = "crate::text::opt_path_serde")]
    pub path: Option<PathBuf>,
    /// The file there.
    pub file: Option<FileKey>,
    /// What it asks for in turn.
    pub needs: Dependencies,
}

/// The key of an entry (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// The file checked.
    pub file: FileKey,
    /// What it asks the loader for (a manifest: its library).
    pub needs: Dependencies,
    /// Every library brought in, in the order they are found. (In the
    /// cache file, each entry names them by index into one table of the
    /// file's libraries, which many entries share.)
    #[serde(skip)]
    pub libraries: Vec<Library>,
    /// Where [`libraries`](Key::libraries) are in the cache file's table
    /// (only while it is written or read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) stored: Vec<u32>,
}

impl Key {
    /// Whether `candidate` and its libraries are still as keyed, read
    /// afresh (after a check: what was checked is what was keyed).
    pub fn holds(&self, candidate: &Candidate) -> bool {
        self.file.holds(&candidate.path)
            && self.libraries.iter().all(|l| match (&l.path, &l.file) {
                (Some(path), Some(file)) => file.holds(path),
                (None, None) => true,
                _ => false,
            })
    }
}

/// What one process saw of a file: its `stat` (and when), and its digest
/// once asked for.
#[derive(Debug)]
struct Seen {
    at: (i64, i64),
    id: Option<FileId>,
    digest: Option<Option<String>>,
}

/// What this process has seen of files and libraries, so that a file
/// shared by many entries (the C library) is looked at once.
#[derive(Debug, Default)]
pub struct State {
    files: Files,
    resolver: Resolver,
}

#[derive(Debug, Default)]
struct Files(HashMap<PathBuf, Seen>);

impl Files {
    fn seen(&mut self, path: &Path) -> &mut Seen {
        self.0.entry(path.to_path_buf()).or_insert_with(|| {
            let at = now();
            Seen { at, id: FileId::of(path).ok(), digest: None }
        })
    }

    /// The file's key as this process first saw it.
    fn key(&mut self, path: &Path) -> Option<FileKey> {
        let seen = self.seen(path);
        let id = seen.id?;
        let digest = seen.digest.get_or_insert_with(|| digest(path, id)).clone()?;
        Some(FileKey { id, digest, seen: seen.at })
    }

    /// The file's key now if it is unchanged since `recorded`, else `None`.
    fn verify(&mut self, path: &Path, recorded: &FileKey) -> Option<FileKey> {
        let seen = self.seen(path);
        let id = seen.id?;
        if id.size != recorded.id.size {
            return None;
        }
        if id == recorded.id && !recorded.racy() {
            return Some(recorded.clone());
        }
        self.key(path).filter(|k| k.digest == recorded.digest)
    }
}

impl State {
    /// The key of `candidate` as it is now, or `None` when it cannot be
    /// made (the file or a library cannot be read): then nothing is cached.
    pub fn key(&mut self, candidate: &Candidate) -> Option<Key> {
        let file = self.files.key(&candidate.path)?;
        let (needs, base) = match candidate.kind() {
            CandidateKind::Manifest => {
                let library = SymbolSpec::read_manifest(&candidate.path).map(|s| s.library).unwrap_or_default();
                let needed = if library.is_empty() { Vec::new() } else { vec![library] };
                (Dependencies { needed, ..Dependencies::default() }, candidate.path.parent())
            }
            CandidateKind::Plugin => (resolve::dependencies_of(&candidate.path)?, None),
        };
        let files = &mut self.files;
        let mut found: HashMap<PathBuf, (FileKey, Dependencies)> = HashMap::new();
        let walked = walk(&mut self.resolver, &candidate.path, &needs, base, &mut |path| {
            let key = files.key(path)?;
            let needs = resolve::dependencies_of(path).unwrap_or_default();
            found.insert(path.to_path_buf(), (key, needs.clone()));
            Some(needs)
        })?;
        let libraries = walked
            .into_iter()
            .map(|(name, path)| {
                let (file, needs) = path.as_ref().and_then(|p| found.get(p)).cloned().unzip();
                Library { name, path, file, needs: needs.unwrap_or_default() }
            })
            .collect();
        Some(Key { file, needs, libraries, stored: Vec::new() })
    }

    /// If `candidate` and its libraries are unchanged since `key`: the key
    /// to keep (renewed where a digest proved a file unchanged); else
    /// `None`.
    pub fn verify(&mut self, candidate: &Candidate, key: &Key) -> Option<Key> {
        let file = self.files.verify(&candidate.path, &key.file)?;
        let base = (candidate.kind() == CandidateKind::Manifest).then(|| candidate.path.parent()).flatten();
        let files = &mut self.files;
        let mut renewed: HashMap<PathBuf, FileKey> = HashMap::new();
        let walked = walk(&mut self.resolver, &candidate.path, &key.needs, base, &mut |path| {
            let lib = key.libraries.iter().find(|l| l.path.as_deref() == Some(path))?;
            renewed.insert(path.to_path_buf(), files.verify(path, lib.file.as_ref()?)?);
            Some(lib.needs.clone())
        })?;
        let same = walked.len() == key.libraries.len()
            && walked.iter().zip(&key.libraries).all(|((name, path), l)| *name == l.name && *path == l.path);
        if !same {
            return None;
        }
        let libraries = key
            .libraries
            .iter()
            .map(|l| Library { file: l.path.as_ref().and_then(|p| renewed.get(p)).cloned(), ..l.clone() })
            .collect();
        Some(Key { file, needs: key.needs.clone(), libraries, stored: Vec::new() })
    }
}

/// Every library `root` brings in, breadth first: `(name asked for, where
/// found)`, at most [`MAX_LIBRARIES`]. `next` gives what a found library
/// asks for in turn (`None` stops the walk: it cannot be used).
fn walk(
    resolver: &mut Resolver,
    root: &Path,
    needs: &Dependencies,
    base: Option<&Path>,
    next: &mut dyn FnMut(&Path) -> Option<Dependencies>,
) -> Option<Vec<(String, Option<PathBuf>)>> {
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from([(root.to_path_buf(), needs.clone(), base)]);
    let mut visited = std::collections::HashSet::new();
    while let Some((from, needs, base)) = queue.pop_front() {
        for name in &needs.needed {
            if out.len() >= MAX_LIBRARIES {
                return Some(out);
            }
            let path = resolver.find(name, &from, &needs, base);
            if let Some(p) = &path
                && visited.insert(p.clone())
            {
                queue.push_back((p.clone(), next(p)?, None));
            }
            out.push((name.clone(), path));
        }
    }
    Some(out)
}

/// The SHA-256 of the file at `path`, if it is still `id` after reading.
fn digest(path: &Path, id: FileId) -> Option<String> {
    let d = File::open(path).and_then(Digest::of_reader).ok()?;
    (FileId::of(path).ok()? == id).then(|| d.to_string())
}

fn ns((secs, nanos): (i64, i64)) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nanos)
}

/// Now, in seconds and nanoseconds since the epoch.
fn now() -> (i64, i64) {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (i64::try_from(d.as_secs()).unwrap_or(i64::MAX), i64::from(d.subsec_nanos()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_times_are_racy() {
        let id = |t: i64| FileId { size: 1, mtime: (t, 0), ctime: (t, 0), ino: 1, dev: 1, mode: 0, uid: 0 };
        let key = |t: i64, seen: i64| FileKey { id: id(t), digest: String::new(), seen: (seen, 0) };
        assert!(key(100, 100).racy());
        assert!(key(100, 101).racy());
        assert!(key(105, 100).racy(), "a time in the future proves nothing");
        assert!(!key(100, 103).racy());
    }
}
