//! The cache file: read it (ignoring one that is corrupt, of another format
//! version or host version, or not owned by this user alone), and merge
//! changes into it under its lock, replacing it atomically.

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

/// The file's layout.
#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: String,
    version: u32,
    entries: Vec<Entry>,
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
    let out = CacheFile { format: MAGIC.into(), version: FORMAT, entries: merged.into_values().collect() };
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    let mut f = fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
    f.write_all(&wire::encode(&out))?;
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
    wire::decode::<CacheFile>(&bytes).map(|f| f.entries).map_err(corrupt).ok()
}
