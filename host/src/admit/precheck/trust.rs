//! The trust rules, modelled on sshd's `StrictModes`: pure Rust over facts
//! about the file and every directory and symlink its path goes through
//! (gathered by `walk.rs`), and the effective user id. No I/O.
//!
//! A path is trusted when nobody but root and the current user can change
//! what it names:
//! - the **file** is owned by root or the current user and is not writable
//!   by its group or by others;
//! - every **directory** a name is looked up in on the way — each ancestor
//!   of the file's real path up to `/`, the directories holding any symlink
//!   as given, and the directories a symlink's target passes through — is
//!   owned by root or the current user and is not writable by its group or
//!   others, unless it has the sticky bit (like `/tmp`: others may add
//!   files there, but not rename or remove ours);
//! - a **symlink** in such a sticky, shared directory is owned by root or
//!   the current user (its owner could replace it with one pointing
//!   elsewhere).
//!
//! As Debian's sshd does, group write is harmless when the group has exactly
//! one member and that member owns the file: a user-private group, as
//! `umask 002` systems create for every user.

use crate::admit::error::Refusal;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const GROUP_WRITE: u32 = 0o020;
const OTHER_WRITE: u32 = 0o002;
const STICKY: u32 = 0o1000;

/// What an entry on the path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A directory a name was looked up in.
    Directory,
    /// A symlink followed on the way (its directory came just before it).
    Symlink,
    /// The file itself (last).
    File,
}

/// What is known of one entry on the way to a file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fact {
    /// The entry's path (real, except for a symlink's own name).
    pub path: PathBuf,
    /// What it is.
    pub kind: EntryKind,
    /// `st_mode` (only the permission bits are looked at).
    pub mode: u32,
    /// The owner.
    pub uid: u32,
    /// The user id of the only member of the entry's group, when it has
    /// exactly one (see [`sole_member`]); only needed when the entry is
    /// group-writable.
    pub group_sole_member: Option<u32>,
    /// For a symlink, what it points to.
    pub link_target: Option<PathBuf>,
}

impl Fact {
    /// Which write bits give someone other than the owner write access:
    /// `"go"`, `"g"`, `"o"` or `""`.
    fn foreign_write(&self) -> &'static str {
        let group = self.mode & GROUP_WRITE != 0 && self.group_sole_member != Some(self.uid);
        match (group, self.mode & OTHER_WRITE != 0) {
            (true, true) => "go",
            (true, false) => "g",
            (false, true) => "o",
            (false, false) => "",
        }
    }
}

/// Judge the facts of one path, in the order they were met: each directory
/// before the names looked up in it, the file last. `euid` is the effective
/// user id of the process. The first problem met is the refusal
/// (`untrusted-file`), with the command that fixes it.
pub fn judge(facts: &[Fact], euid: u32) -> Result<(), Refusal> {
    let mut in_shared_dir = false;
    for fact in facts {
        let owner_ok = fact.uid == 0 || fact.uid == euid;
        let foreign = fact.foreign_write();
        let refuse = |problem: String, fix: String| Refusal::UntrustedFile { path: fact.path.clone(), problem, fix };
        let quoted = shell_quote(&fact.path);
        match fact.kind {
            EntryKind::Directory | EntryKind::File if !owner_ok => {
                let what = if fact.kind == EntryKind::Directory { "is a directory owned by" } else { "is owned by" };
                return Err(refuse(format!("{what} uid {}, {}", fact.uid, not_trusted(euid)), chown(euid, &quoted)));
            }
            EntryKind::Directory => {
                if !foreign.is_empty() && fact.mode & STICKY == 0 {
                    return Err(refuse(
                        format!(
                            "is a directory writable by {} (mode {:o}) without the sticky bit, so they could \
                             replace what is in it",
                            who(foreign),
                            fact.mode & 0o7777
                        ),
                        format!("chmod {foreign}-w {quoted} (or chmod +t {quoted}, if others must keep writing there)"),
                    ));
                }
                in_shared_dir = !foreign.is_empty();
            }
            EntryKind::Symlink => {
                if in_shared_dir && !owner_ok {
                    let target = fact.link_target.as_deref().map_or_else(|| "TARGET".into(), shell_quote);
                    return Err(refuse(
                        format!(
                            "is a symlink owned by uid {} ({}) in a directory others can write to, so its owner \
                             could point it elsewhere",
                            fact.uid,
                            not_trusted(euid)
                        ),
                        format!("rm {quoted} && ln -s {target} {quoted}"),
                    ));
                }
            }
            EntryKind::File => {
                if !foreign.is_empty() {
                    return Err(refuse(
                        format!("is writable by {} (mode {:o})", who(foreign), fact.mode & 0o7777),
                        format!("chmod {foreign}-w {quoted}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// "neither root nor the current user (uid 1000)".
fn not_trusted(euid: u32) -> String {
    if euid == 0 { "not root (the current user)".into() } else { format!("neither root nor you (uid {euid})") }
}

/// The command that gives a path to a trusted owner.
fn chown(euid: u32, quoted: &str) -> String {
    if euid == 0 {
        format!("chown root {quoted}, once you have checked its contents")
    } else {
        format!("sudo chown {euid} {quoted}, once you have checked its contents (or use a copy of your own)")
    }
}

/// Who the write bits `go`, `g` or `o` let in.
fn who(bits: &str) -> &'static str {
    match bits {
        "go" => "its group and by others",
        "g" => "its group",
        _ => "others",
    }
}

/// The user id of the only member of group `gid`, if it has exactly one,
/// from the text of `/etc/passwd` (members by primary group) and
/// `/etc/group` (supplementary members). `None` when the group is unknown,
/// empty or shared, or its member is not in `passwd`.
pub fn sole_member(gid: u32, passwd: &str, group: &str) -> Option<u32> {
    let users: Vec<(&str, u32, u32)> =
        records(passwd).filter_map(|f| Some((*f.first()?, f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?))).collect();
    let entry = records(group).find(|f| f.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(gid))?;
    let mut members: BTreeSet<&str> = users.iter().filter(|u| u.2 == gid).map(|u| u.0).collect();
    members.extend(entry.get(3).into_iter().flat_map(|m| m.split(',')).map(str::trim).filter(|m| !m.is_empty()));
    let mut only = members.into_iter();
    match (only.next(), only.next()) {
        (Some(name), None) => users.iter().find(|u| u.0 == name).map(|u| u.1),
        _ => None,
    }
}

/// The colon-separated fields of each non-comment line.
fn records(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(|l| l.split(':').collect())
}

/// A path as a shell word: as it is when it has no special characters,
/// else in single quotes.
pub fn shell_quote(path: &Path) -> String {
    let s = path.to_string_lossy();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !s.is_empty() && s.chars().all(plain) { s.into_owned() } else { format!("'{}'", s.replace('\'', "'\\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: EntryKind, mode: u32, uid: u32) -> Fact {
        Fact { path: path.into(), kind, mode, uid, group_sole_member: None, link_target: None }
    }

    /// A case: the facts, the effective uid, and the offender and the start
    /// of the fix (or `None` for trusted).
    type Case = (Vec<Fact>, u32, Option<(&'static str, &'static str)>);

    fn verdict(facts: &[Fact], euid: u32) -> Result<(), (PathBuf, String)> {
        judge(facts, euid).map_err(|e| match e {
            Refusal::UntrustedFile { path, fix, .. } => (path, fix),
            other => panic!("{other:?}"),
        })
    }

    #[test]
    fn each_rule_names_the_offender_and_the_fix() {
        use EntryKind::{Directory as D, File as F, Symlink as L};
        let root = entry("/", D, 0o755, 0);
        let tmp = entry("/tmp", D, 0o1777, 0);
        let mine = entry("/home/me", D, 0o755, 1000);
        let cases: Vec<Case> = vec![
            (vec![root.clone(), mine.clone(), entry("/home/me/p.so", F, 0o644, 1000)], 1000, None),
            (
                vec![root.clone(), mine.clone(), entry("/home/me/p.so", F, 0o664, 1000)],
                1000,
                Some(("/home/me/p.so", "chmod g-w /home/me/p.so")),
            ),
            (
                vec![root.clone(), mine.clone(), entry("/home/me/p.so", F, 0o644, 1001)],
                1000,
                Some(("/home/me/p.so", "sudo chown 1000 /home/me/p.so")),
            ),
            (
                vec![root.clone(), entry("/home/me", D, 0o777, 1000), entry("/home/me/p.so", F, 0o644, 1000)],
                1000,
                Some(("/home/me", "chmod go-w /home/me")),
            ),
            (vec![root.clone(), tmp.clone(), entry("/tmp/p.so", F, 0o644, 0)], 0, None),
            (
                vec![root.clone(), tmp.clone(), entry("/tmp/l.so", L, 0o777, 5), entry("/p.so", F, 0o644, 0)],
                0,
                Some(("/tmp/l.so", "rm /tmp/l.so && ln -s TARGET /tmp/l.so")),
            ),
            (
                vec![root.clone(), mine.clone(), entry("/home/me/l.so", L, 0o777, 5), entry("/p.so", F, 0o644, 0)],
                1000,
                None,
            ),
            (
                vec![root.clone(), entry("/we ird", D, 0o755, 7), entry("/we ird/p.so", F, 0o644, 0)],
                0,
                Some(("/we ird", "chown root '/we ird'")),
            ),
        ];
        for (facts, euid, want) in cases {
            let got = verdict(&facts, euid);
            match (&got, want) {
                (Ok(()), None) => {}
                (Err((path, fix)), Some((want_path, want_fix))) => {
                    assert_eq!(path, Path::new(want_path), "{facts:?}");
                    assert!(fix.starts_with(want_fix), "{fix:?} should start with {want_fix:?}");
                }
                _ => panic!("{facts:?} as uid {euid}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn group_write_is_harmless_in_a_user_private_group() {
        let mut file = entry("/home/me/p.so", EntryKind::File, 0o664, 1000);
        file.group_sole_member = Some(1000);
        assert!(judge(&[file.clone()], 1000).is_ok());
        file.group_sole_member = Some(1001);
        assert!(judge(&[file.clone()], 1000).is_err());
        file.group_sole_member = None;
        assert!(judge(&[file], 1000).is_err());
    }

    #[test]
    fn sole_members_from_the_account_files() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nme:x:1000:1000::/home/me:/bin/sh\n\
                      you:x:1001:1001::/home/you:/bin/sh\nsvc:x:998:100::/:/bin/false\n";
        let group = "root:x:0:\nme:x:1000:\nyou:x:1001:me\nusers:x:100:\nwheel:x:10:me\n# comment\nbroken\n";
        assert_eq!(sole_member(1000, passwd, group), Some(1000), "me's private group");
        assert_eq!(sole_member(1001, passwd, group), None, "you's group has me as well");
        assert_eq!(sole_member(100, passwd, group), Some(998), "svc is the only one with it as primary");
        assert_eq!(sole_member(10, passwd, group), Some(1000), "a supplementary sole member");
        assert_eq!(sole_member(4242, passwd, group), None, "an unknown group");
    }

    #[test]
    fn shell_words() {
        assert_eq!(shell_quote(Path::new("/opt/lib/x.so")), "/opt/lib/x.so");
        assert_eq!(shell_quote(Path::new("/a b/it's.so")), "'/a b/it'\\''s.so'");
    }
}
