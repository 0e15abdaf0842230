//! Where the dynamic loader would find a library: a name with a `/` is a
//! path; a soname is looked for, in order, in the asking object's
//! `DT_RPATH` (only when it has no `DT_RUNPATH`), `LD_LIBRARY_PATH`, its
//! `DT_RUNPATH` (`$ORIGIN` is the asking object's directory), the loader's
//! cache (`/etc/ld.so.cache`, or `ldconfig -p` when that file cannot be
//! parsed) and the default directories. A file found in a directory is taken
//! only if it is an ELF file of this host's class and machine, as the loader
//! skips others. Used by the verdict cache to key a file on the libraries it
//! brings in; [`dependencies_of`] reads a file's `DT_NEEDED` through the
//! pure parser ([`super::elf::dependencies`]).
//!
//! Not modelled: `glibc-hwcaps` subdirectories, `$LIB`/`$PLATFORM` (a
//! directory naming them is skipped), the main program's own `DT_RPATH`, and
//! libraries already loaded under the same soname.

use super::elf::{self, Dependencies, HEADER_LEN, Target};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The default directories, after the loader's cache.
fn default_dirs() -> Vec<PathBuf> {
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    let mut dirs = vec![PathBuf::from("/lib").join(&multiarch), PathBuf::from("/usr/lib").join(&multiarch)];
    if cfg!(target_pointer_width = "64") {
        dirs.extend(["/lib64", "/usr/lib64"].map(PathBuf::from));
    }
    dirs.extend(["/lib", "/usr/lib"].map(PathBuf::from));
    dirs
}

/// The `ld.so.cache` flags this build's libraries carry (`libc6` plus the
/// architecture bits), or `None` to accept any `libc6` entry and check the
/// file's ELF header.
const fn cache_flags() -> Option<i32> {
    if cfg!(target_arch = "x86_64") {
        Some(0x0303)
    } else if cfg!(target_arch = "aarch64") {
        Some(0x0a03)
    } else {
        None
    }
}

/// Parse the loader's cache (`glibc-ld.so.cache1.1`, alone or after the old
/// `ld.so-1.7.0` table): `(soname, path, flags)` in the file's order (the
/// order the loader prefers). Pure; `None` when it is not such a file.
pub fn parse_ld_cache(bytes: &[u8]) -> Option<Vec<(String, String, i32)>> {
    const NEW: &[u8] = b"glibc-ld.so.cache1.1";
    const OLD: &[u8] = b"ld.so-1.7.0";
    let u32_at = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    let base = if bytes.starts_with(NEW) {
        0
    } else if bytes.starts_with(OLD) {
        let old_n = usize::try_from(u32_at(12)?).ok()?;
        let end = old_n.checked_mul(12)?.checked_add(16)?;
        (end..end.checked_add(8)?).find(|&at| bytes.get(at..).is_some_and(|b| b.starts_with(NEW)))?
    } else {
        return None;
    };
    let n = usize::try_from(u32_at(base + 20)?).ok()?;
    let string = |off: u32| {
        let rest = bytes.get(base.checked_add(usize::try_from(off).ok()?)?..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    let mut out = Vec::new();
    for i in 0..n.min(1 << 20) {
        let at = base + 48 + i * 24;
        let flags = u32_at(at)? as i32;
        out.push((string(u32_at(at + 4)?)?, string(u32_at(at + 8)?)?, flags));
    }
    Some(out)
}

/// Parse `ldconfig -p`'s lines `\tNAME (FLAGS) => PATH`: `(soname, path,
/// flags text)`.
fn parse_ldconfig_p(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter_map(|line| {
            let (left, path) = line.trim().split_once(" => ")?;
            let (name, flags) = left.split_once(" (")?;
            Some((name.to_string(), path.to_string(), flags.trim_end_matches(')').to_string()))
        })
        .collect()
}

/// The loader's cache of this system: soname → path, this build's
/// architecture only (first entry wins), read once per process.
fn ld_cache() -> &'static HashMap<String, PathBuf> {
    static CACHE: OnceLock<HashMap<String, PathBuf>> = OnceLock::new();
    CACHE.get_or_init(|| {
        let mut map = HashMap::new();
        if let Some(entries) = std::fs::read("/etc/ld.so.cache").ok().as_deref().and_then(parse_ld_cache) {
            for (name, path, flags) in entries {
                let ok = match cache_flags() {
                    Some(want) => flags == want,
                    None => flags & 0xff == 3,
                };
                if ok {
                    map.entry(name).or_insert_with(|| PathBuf::from(path));
                }
            }
            return map;
        }
        let arch = if cfg!(target_arch = "x86_64") {
            Some("x86-64")
        } else if cfg!(target_arch = "aarch64") {
            Some("AArch64")
        } else {
            None
        };
        let out = std::process::Command::new("ldconfig")
            .arg("-p")
            .output()
            .or_else(|_| std::process::Command::new("/sbin/ldconfig").arg("-p").output());
        if let Ok(out) = out {
            for (name, path, flags) in parse_ldconfig_p(&String::from_utf8_lossy(&out.stdout)) {
                if arch.is_none_or(|a| flags.contains(a)) {
                    map.entry(name).or_insert_with(|| PathBuf::from(path));
                }
            }
        }
        map
    })
}

/// Whether `path` is a file the loader would take: an ELF file of this
/// host's class, byte order and machine.
pub fn loadable(path: &Path) -> bool {
    let Ok(file) = File::open(path) else { return false };
    let mut head = [0u8; HEADER_LEN];
    let Ok(n) = file.read_at(&mut head, 0) else { return false };
    elf::parse_header(path, &head[..n]).is_ok_and(|h| elf::check_target(path, &h, Target::HOST).is_ok())
}

/// Read the dependencies of the library at `path` (`None`: not a readable
/// ELF file).
pub fn dependencies_of(path: &Path) -> Option<Dependencies> {
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    elf::dependencies(len, &mut |offset, n| {
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, offset).ok().map(|()| buf)
    })
}

/// Finds libraries as the loader would, remembering what it found (one
/// per process, or per cache lookup).
#[derive(Debug, Default)]
pub struct Resolver {
    found: HashMap<(String, Vec<PathBuf>), Option<PathBuf>>,
}

impl Resolver {
    /// Where the loader would find `name` asked for by the object at `from`
    /// with dependencies `needs`. A relative path (a name with a `/`) is
    /// taken from `base` when given, else from the current directory.
    pub fn find(&mut self, name: &str, from: &Path, needs: &Dependencies, base: Option<&Path>) -> Option<PathBuf> {
        if name.is_empty() {
            return None;
        }
        if name.contains('/') {
            let path = match base {
                Some(dir) if Path::new(name).is_relative() => dir.join(name),
                _ => PathBuf::from(name),
            };
            return path.is_file().then_some(path);
        }
        let origin = from.parent().unwrap_or(Path::new("."));
        let expand = |list: &Option<String>| -> Vec<PathBuf> {
            let Some(list) = list else { return Vec::new() };
            list.split(':')
                .filter(|d| !d.is_empty())
                .filter_map(|d| {
                    let d = d.replace("${ORIGIN}", "$ORIGIN").replace("$ORIGIN", &origin.to_string_lossy());
                    (!d.contains('$')).then(|| PathBuf::from(d))
                })
                .collect()
        };
        let mut dirs = Vec::new();
        if needs.runpath.is_none() {
            dirs.extend(expand(&needs.rpath));
        }
        if let Some(env) = std::env::var_os("LD_LIBRARY_PATH") {
            let env = env.to_string_lossy().into_owned();
            dirs.extend(env.split([':', ';']).filter(|d| !d.is_empty()).map(PathBuf::from));
        }
        dirs.extend(expand(&needs.runpath));
        let key = (name.to_string(), dirs);
        if let Some(found) = self.found.get(&key) {
            return found.clone();
        }
        let found = key
            .1
            .iter()
            .map(|d| d.join(name))
            .find(|p| loadable(p))
            .or_else(|| ld_cache().get(name).filter(|p| loadable(p)).cloned())
            .or_else(|| default_dirs().into_iter().map(|d| d.join(name)).find(|p| loadable(p)));
        self.found.insert(key, found.clone());
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_cache_parses_and_finds_libc() {
        if let Ok(bytes) = std::fs::read("/etc/ld.so.cache") {
            let entries = parse_ld_cache(&bytes).expect("a glibc ld.so.cache");
            assert!(entries.iter().any(|(name, ..)| name == "libc.so.6"), "{entries:?}");
        }
        let needs = Dependencies::default();
        let libc = Resolver::default().find("libc.so.6", Path::new("/x/y.so"), &needs, None);
        assert!(libc.is_some_and(|p| p.is_file()));
    }

    #[test]
    fn ldconfig_lines_parse() {
        let text = "12 libs found in cache `/etc/ld.so.cache'\n\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n";
        let got = parse_ldconfig_p(text);
        assert_eq!(got, vec![("libz.so.1".into(), "/lib/x86_64-linux-gnu/libz.so.1".into(), "libc6,x86-64".into())]);
        assert_eq!(parse_ld_cache(b"nothing"), None);
    }
}
