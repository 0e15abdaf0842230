//! Gathering the facts the trust rules judge (`trust.rs`): resolve a path
//! one component at a time, as the kernel does, and record every directory
//! a name is looked up in, every symlink followed (with what it points to)
//! and, last, the file. A relative path starts at the current directory's
//! real path; a symlink's target is resolved the same way, so the
//! directories holding the symlinks as given and the ancestors of the
//! file's real path are all recorded.
//!
//! I/O (`lstat`, `readlink`, and `/etc/passwd` and `/etc/group` when an
//! entry is group-writable).

use super::trust::{EntryKind, Fact, sole_member};
use std::ffi::OsString;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// At most this many symlinks are followed (Linux's own limit).
const MAX_LINKS: usize = 40;

/// A path component still to resolve.
enum Part {
    Root,
    Parent,
    Name(OsString),
}

/// Push `path`'s components onto `stack` so that the first pops first.
fn push_parts(stack: &mut Vec<Part>, path: &Path) {
    let parts: Vec<Part> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir => Some(Part::Root),
            Component::ParentDir => Some(Part::Parent),
            Component::Normal(n) => Some(Part::Name(n.to_os_string())),
            Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

/// The group's sole member, read from the account files when first needed.
struct Groups(Option<(String, String)>);

impl Groups {
    fn sole_member(&mut self, gid: u32) -> Option<u32> {
        let (passwd, group) = self.0.get_or_insert_with(|| {
            let read = |p| std::fs::read_to_string(p).unwrap_or_default();
            (read("/etc/passwd"), read("/etc/group"))
        });
        sole_member(gid, passwd, group)
    }
}

/// The fact of one entry.
fn fact(path: PathBuf, kind: EntryKind, md: &Metadata, groups: &mut Groups) -> Fact {
    let group_sole_member = if md.mode() & 0o020 != 0 { groups.sole_member(md.gid()) } else { None };
    Fact { path, kind, mode: md.mode(), uid: md.uid(), group_sole_member, link_target: None }
}

/// The facts of `path`, in the order they are met; the file's own fact
/// comes from `file` (the metadata of the file as opened).
pub(crate) fn facts(path: &Path, file: &Metadata) -> io::Result<Vec<Fact>> {
    let mut stack = Vec::new();
    push_parts(&mut stack, &std::env::current_dir()?.join(path));
    let mut groups = Groups(None);
    let mut out: Vec<Fact> = Vec::new();
    let mut current = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = stack.pop() {
        let name = match part {
            Part::Root => {
                current = PathBuf::from("/");
                continue;
            }
            Part::Parent => {
                current.pop();
                continue;
            }
            Part::Name(name) => name,
        };
        if out.last().is_none_or(|f| f.kind != EntryKind::Directory || f.path != current) {
            let md = std::fs::symlink_metadata(&current)?;
            out.push(fact(current.clone(), EntryKind::Directory, &md, &mut groups));
        }
        let next = current.join(&name);
        let md = std::fs::symlink_metadata(&next)?;
        if md.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let target = std::fs::read_link(&next)?;
            let mut link = fact(next, EntryKind::Symlink, &md, &mut groups);
            link.link_target = Some(target.clone());
            out.push(link);
            push_parts(&mut stack, &target);
        } else if stack.is_empty() {
            out.push(fact(next, EntryKind::File, file, &mut groups));
        } else if md.is_dir() {
            current = next;
        } else {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
    }
    if out.last().is_none_or(|f| f.kind != EntryKind::File) {
        out.push(fact(current, EntryKind::File, file, &mut groups));
    }
    Ok(out)
}
