//! What can be known of the program before it starts: whether the dynamic
//! loader will honour `LD_PRELOAD` for it at all (not for a statically
//! linked executable, nor — from an ordinary path — for a set-user-ID or
//! set-group-ID one).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The file `program` names: itself if it has a `/`, else the first
/// executable of that name on `PATH`.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        return Some(p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|f| f.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Whether the ELF file `bytes` asks for a dynamic loader (has a
/// `PT_INTERP` program header); `None` if it is not a 64-bit
/// little-endian ELF file (a script, say).
fn has_interpreter(bytes: &[u8]) -> Option<bool> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| bytes.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at = |o: usize| bytes.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let phentsize = usize::from(u16_at(54)?);
    let phnum = usize::from(u16_at(56)?);
    const PT_INTERP: u32 = 3;
    let found = (0..phnum).any(|i| {
        let at = phoff.saturating_add(i.saturating_mul(phentsize));
        bytes.get(at..at + 4).is_some_and(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) == PT_INTERP)
    });
    Some(found)
}

/// Why the interposer will not run in `program`, if that can be seen
/// before it starts.
pub(super) fn why_not_preloaded(program: &OsStr) -> Option<String> {
    let file = resolve(program)?;
    let meta = file.metadata().ok()?;
    let shown = memplug::text::escape_os(file.as_os_str());
    if meta.permissions().mode() & 0o6000 != 0 {
        return Some(format!(
            "{shown} is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD for it, so it runs on its own allocator"
        ));
    }
    let mut head = vec![0u8; 4096];
    let n = std::io::Read::read(&mut std::fs::File::open(&file).ok()?, &mut head).ok()?;
    match has_interpreter(&head[..n]) {
        Some(false) => Some(format!(
            "{shown} is statically linked: no dynamic loader reads LD_PRELOAD for it, so it runs on its own allocator"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_has_an_interpreter_and_a_script_is_not_elf() {
        let sh = std::fs::read("/bin/sh").unwrap();
        assert_eq!(has_interpreter(&sh[..4096.min(sh.len())]), Some(true));
        assert_eq!(has_interpreter(b"#!/bin/sh\necho hi\n"), None);
        assert!(why_not_preloaded(OsStr::new("sh")).is_none());
    }
}
