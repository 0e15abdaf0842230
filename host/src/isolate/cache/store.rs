//! The cache file: read it (ignoring one that is corrupt, of another format
//! version or host version, or not owned by this user alone), and merge
//! changes into it under its lock, replacing it atomically.
//!
//! Each entry is stored as its key fields beside its body, the entry's own
//! encoding as one byte string: opening the cache reads the keys and keeps
//! the bodies as bytes, and only an entry that is looked up is decoded
//! ([`Slot`]). Every `memplug run` and every load through the cache opens
//! it, and most of its entries are of other files.

use super::key::Library;
use super::{Entry, EntryKey, FORMAT, HOST};
use crate::admit::raw::os::euid;
use crate::isolate::probe::wire;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: &str = "memplug-verdicts";

/// The file's layout: the entries, and the libraries their keys name (by
/// index: one copy of the C library's key, not one per entry).
#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: String,
    version: u32,
    entries: Vec<Stored>,
    libraries: Vec<Library>,
}

/// An entry as the file holds it: what it is looked up by, and the rest as
/// bytes (the [`Entry`], its libraries by index), decoded when used.
#[derive(Serialize, Deserialize)]
struct Stored {
    #[serde(with = "crate::text::path_serde")]
    path: PathBuf,
    symbol: String,
    context: String,
    host: String,
    #[serde(with = "serde_bytes")]
    body: Vec<u8>,
}

/// An entry of the open cache: still the file's bytes, or decoded.
#[derive(Debug, Clone)]
pub(super) enum Slot {
    /// Not decoded yet: its body, and the file's libraries its key names by
    /// index.
    Stored(Vec<u8>, Arc<[Library]>),
    /// Decoded (or made by this process).
    Entry(Box<Entry>),
}

impl Slot {
    /// The entry, decoded on first use; `None` (with a warning) when its
    /// body cannot be (the caller then treats it as absent).
    pub(super) fn entry(&mut self) -> Option<&mut Entry> {
        if let Slot::Stored(body, libraries) = self {
            let entry = wire::decode::<Entry>(body).ok().and_then(|mut e| {
                let stored = std::mem::take(&mut e.key.stored);
                e.key.libraries = stored.iter().map(|&i| libraries.get(i as usize).cloned()).collect::<Option<_>>()?;
                Some(e)
            });
            match entry {
                Some(e) => *self = Slot::Entry(Box::new(e)),
                None => {
                    tracing::warn!("ignoring a corrupt entry of the verdict cache; it will be rebuilt");
                    return None;
                }
            }
        }
        match self {
            Slot::Entry(e) => Some(e),
            Slot::Stored(..) => None,
        }
    }
}

/// The file's first fields, read before its entries (whose layout depends
/// on the version).
#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
}

/// The usable entries of the cache file `file` (none when it cannot be
/// used), not decoded yet.
pub(super) fn entries(file: &Path) -> BTreeMap<EntryKey, Slot> {
    let Some(file) = read(file) else { return BTreeMap::new() };
    let libraries: Arc<[Library]> = file.libraries.into();
    file.entries
        .into_iter()
        .filter(|e| e.host == HOST)
        .map(|e| ((e.path, e.symbol, e.context), Slot::Stored(e.body, libraries.clone())))
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
    let mut merged: BTreeMap<EntryKey, Entry> =
        entries(file).into_iter().filter_map(|(at, mut slot)| Some((at, slot.entry()?.clone()))).collect();
    for (entry, at) in changed {
        match entry {
            Some(e) => merged.insert(at, e),
            None => merged.remove(&at),
        };
    }
    merged.retain(|(path, ..), _| path.exists());
    let mut libraries: Vec<Library> = Vec::new();
    let mut index: std::collections::HashMap<Library, u32> = std::collections::HashMap::new();
    let mut entries = Vec::with_capacity(merged.len());
    for ((path, symbol, context), mut e) in merged {
        e.key.stored = std::mem::take(&mut e.key.libraries)
            .into_iter()
            .map(|l| {
                *index.entry(l.clone()).or_insert_with(|| {
                    libraries.push(l);
                    (libraries.len() - 1) as u32
                })
            })
            .collect();
        let body = wire::encode(&e).map_err(io::Error::other)?;
        entries.push(Stored { path, symbol, context, host: e.host, body });
    }
    let out = CacheFile { format: MAGIC.into(), version: FORMAT, entries, libraries };
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    let mut f = fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
    f.write_all(&wire::encode(&out).map_err(io::Error::other)?)?;
    f.sync_all()?;
    fs::rename(&tmp, file)?;
    lock.unlock()
}

/// The cache file's contents, or `None` (with a warning) when it cannot be
/// used.
fn read(file: &Path) -> Option<CacheFile> {
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
    wire::decode::<CacheFile>(&bytes).map_err(corrupt).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_whose_body_cannot_be_decoded_is_absent_not_an_error() {
        let mut slot = Slot::Stored(vec![0xff, 0x00, 0x13], Arc::from(Vec::new()));
        assert!(slot.entry().is_none());
        assert!(matches!(slot, Slot::Stored(..)), "left as it was, to be rebuilt");
    }

    #[test]
    fn a_file_of_the_previous_format_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("verdicts.cbor");
        let old = CacheFile { format: MAGIC.into(), version: FORMAT - 1, entries: Vec::new(), libraries: Vec::new() };
        fs::write(&file, wire::encode(&old).unwrap()).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(entries(&file).is_empty());
    }
}
