//! The cache file: read it (ignoring one that is corrupt, of another format
//! version or host version, or not owned by this user alone), and merge
//! changes into it under its lock, replacing it atomically.

use super::key::Library;
use super::{Entry, EntryKey, FORMAT, HOST};
use crate::probe::wire;
use crate::raw::os::euid;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

const MAGIC: &str = "memplug-verdicts";

/// The file's layout: the entries, and the libraries their keys name (by
/// index: one copy of the C library's key, not one per entry).
#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: String,
    version: u32,
    entries: Vec<Entry>,
    libraries: Vec<Library>,
}

/// The file's first fields, read before its entries (whose layout depends
/// on the version).
#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
}

/// The usable entries of the cache file `file` (none when it cannot be
/// used).
pub(super) fn entries(file: &Path) -> BTreeMap<EntryKey, Entry> {
    read(file)
        .into_iter()
        .flatten()
        .filter(|e| e.host == HOST)
        .map(|e| ((e.path.clone(), e.symbol.clone(), e.context.clone()), e))
        .collect()
}

/// Under the cache's lock, apply `changed` (an entry, or `None` to remove
/// it) to the file as it is now, drop entries of files that no longer
/// exist, and replace the file atomically.
pub(super) fn merge(file: &Path, changed: Vec<(Option<Entry>, EntryKey)>) -> io::Result<()> {
    let dir = file.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(file.with_extension("lock"))?;
    lock.lock()?;
    let mut merged = entries(file);
    for (entry, at) in changed {
        match entry {
            Some(e) => merged.insert(at, e),
            None => merged.remove(&at),
        };
    }
    merged.retain(|(path, ..), _| path.exists());
    let mut libraries: Vec<Library> = Vec::new();
    let mut index: std::collections::HashMap<Library, u32> = std::collections::HashMap::new();
    let mut entries: Vec<Entry> = merged.into_values().collect();
    for e in &mut entries {
        e.key.stored = std::mem::take(&mut e.key.libraries)
            .into_iter()
            .map(|l| {
                *index.entry(l.clone()).or_insert_with(|| {
                    libraries.push(l);
                    (libraries.len() - 1) as u32
                })
            })
            .collect();
    }
    let out = CacheFile { format: MAGIC.into(), version: FORMAT, entries, libraries };
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    let mut f = fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
    f.write_all(&wire::encode(&out).map_err(io::Error::other)?)?;
    f.sync_all()?;
    fs::rename(&tmp, file)?;
    lock.unlock()
}

/// The entries of a cache file, or `None` (with a warning) when it cannot
/// be used.
fn read(file: &Path) -> Option<Vec<Entry>> {
    let meta = fs::metadata(file).ok()?;
    if meta.uid() != euid() || meta.permissions().mode() & 0o022 != 0 {
        tracing::warn!(cache = %file.display(), "ignoring the verdict cache: it is not owned by this user alone");
        return None;
    }
    let bytes = fs::read(file).ok()?;
    let corrupt = |e: String| {
        tracing::warn!(cache = %file.display(), error = %e, "ignoring a corrupt verdict cache; it will be rebuilt");
    };
    match wire::decode::<Header>(&bytes) {
        Ok(h) if h.format == MAGIC && h.version == FORMAT => {}
        Ok(h) => {
            tracing::info!(cache = %file.display(), version = h.version, "ignoring a verdict cache of another version");
            return None;
        }
        Err(e) => {
            corrupt(e);
            return None;
        }
    }
    let file = wire::decode::<CacheFile>(&bytes).map_err(corrupt).ok()?;
    let mut entries = file.entries;
    for e in &mut entries {
        let stored = std::mem::take(&mut e.key.stored);
        let libraries = stored.iter().map(|&i| file.libraries.get(i as usize).cloned()).collect::<Option<Vec<_>>>();
        match libraries {
            Some(l) => e.key.libraries = l,
            None => {
                corrupt("an entry names a library the file does not hold".into());
                return None;
            }
        }
    }
    Some(entries)
}
