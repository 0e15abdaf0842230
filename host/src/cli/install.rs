//! `memplug install` and `memplug uninstall`: put a checked plugin (or
//! allocator manifest) into the user or system plugin directory, with safe
//! permissions, or take one out.
//!
//! `install` copies the file once, into a private temporary file in the
//! target directory (created exclusively, mode 0600), checks that copy in a
//! worker process, makes it 0644 and renames it into place: what lands is
//! the bytes that were checked, whatever happens to the original meanwhile.
//! `uninstall` removes only regular files (not symlinks) directly inside the
//! plugin directory, found by its own listing of it; a worker may say which
//! of those files holds a handler of the name asked for, but an answer that
//! is not one of them is refused.

use super::args::IsolationArgs;
use super::jobs;
use super::table;
use memplug::dirs::Env;
use memplug::discover::CandidateKind;
use memplug::probe::{Request, Task};
use memplug::symbols::{SymbolSpec, is_manifest_name};
use memplug::text::{escape, escape_os};
use memplug::{Candidate, Policy, Report};
use std::fs::{self, File};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tempfile::NamedTempFile;

/// The directory to install into, or why there is none.
fn target_dir(system: bool) -> Result<PathBuf, String> {
    Env::current().install_dir(system).ok_or_else(|| "no home directory is known (HOME is unset)".to_string())
}

/// Install `file`: copy it into the target directory privately, check the
/// copy in a worker process, and rename the copy into place.
pub(crate) fn install(file: &Path, system: bool, mut policy: Policy, isolation: &IsolationArgs) -> ExitCode {
    let dir = match target_dir(system) {
        Ok(d) => d,
        Err(e) => return fail(&format!("cannot install: {e}")),
    };
    let Some(name) = file.file_name() else { return fail(&format!("{} is not a file", file.display())) };
    let is_manifest = Candidate::new(file).kind() == CandidateKind::Manifest;
    if !is_manifest && !name.to_string_lossy().ends_with(".so") {
        return fail(&format!(
            "{} is neither a plugin library (*.so) nor an allocator manifest (*.memplug.toml)",
            file.display()
        ));
    }
    if is_manifest && let Err(e) = movable_manifest(file) {
        return fail(&e);
    }
    let staged = match stage(file, &dir, &name.to_string_lossy(), is_manifest) {
        Ok(t) => t,
        Err(e) => return fail(&format!("cannot install {} into {}: {e}", file.display(), dir.display())),
    };
    // The private copy is checked afresh: its verdict is not cached.
    policy.cache = None;
    let candidate = Candidate::new(staged.path());
    let request =
        Request { task: Task::Check, candidate: Some(candidate), spec: None, options: Vec::new(), policy, bench: None };
    let mut reports: Vec<Report> = jobs::run(vec![request], isolation).into_iter().flatten().collect();
    for r in reports.iter_mut().filter(|r| r.path == staged.path()) {
        r.path = file.to_path_buf();
    }
    if reports.is_empty() || reports.iter().any(Report::fails) {
        table::print(&reports, true, "checked");
        return fail(&format!("not installed: {} did not pass the check", file.display()));
    }
    let dest = dir.join(name);
    match put_in_place(staged, &dest) {
        Ok(replaced) => {
            let r = &reports[0];
            let what = format!("{} {}", r.name.as_deref().unwrap_or("?"), r.version.as_deref().unwrap_or(""));
            let verb = if replaced { "replaced" } else { "installed" };
            println!("{}", escape(&format!("{verb} {} at {}", what.trim(), dest.display())));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot install {} into {}: {e}", file.display(), dir.display())),
    }
}

/// Copy `file` once into a new private file (0600, created exclusively) in
/// `dir` (made if missing, 0755), synced. Its name starts with a dot and,
/// for a library, does not end in `.so`, so that no search finds it; a
/// manifest's copy keeps the manifest suffix, by which it is recognised.
fn stage(file: &Path, dir: &Path, name: &str, is_manifest: bool) -> std::io::Result<NamedTempFile> {
    fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)?;
    let suffix = if is_manifest { ".memplug.toml" } else { ".tmp" };
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(suffix)
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    std::io::copy(&mut File::open(file)?, tmp.as_file_mut())?;
    tmp.as_file().sync_all()?;
    Ok(tmp)
}

/// Make the checked copy 0644 and rename it over `dest`. Whether something
/// was replaced.
fn put_in_place(staged: NamedTempFile, dest: &Path) -> std::io::Result<bool> {
    staged.as_file().set_permissions(fs::Permissions::from_mode(0o644))?;
    let replaced = fs::symlink_metadata(dest).is_ok();
    staged.persist(dest).map_err(|e| e.error)?;
    Ok(replaced)
}

/// A manifest keeps working once copied only if it names its library by
/// soname or by an absolute path.
fn movable_manifest(file: &Path) -> Result<(), String> {
    let text = fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let spec = SymbolSpec::parse_manifest(&text).map_err(|e| format!("{}: [{}] {e}", file.display(), e.code()))?;
    if spec.library.contains('/') && Path::new(&spec.library).is_relative() {
        return Err(format!(
            "{} names its library by the relative path {:?}, which would not resolve from the plugin directory: name \
             it by soname or absolute path, or install the library itself",
            file.display(),
            spec.library
        ));
    }
    Ok(())
}

/// The files of `dir` `uninstall` may remove: regular files (by `lstat`:
/// not symlinks) directly in it, named as plugins or manifests, in name
/// order; and the symlinks so named, which it leaves.
fn own_listing(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut files, mut links) = (Vec::new(), Vec::new());
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !(name.ends_with(".so") || is_manifest_name(name)) {
            continue;
        }
        let kind = fs::symlink_metadata(entry.path())?.file_type();
        if kind.is_file() {
            files.push(dir.join(name));
        } else if kind.is_symlink() {
            links.push(dir.join(name));
        }
    }
    files.sort();
    links.sort();
    Ok((files, links))
}

/// Uninstall the plugin named `name` (its handler's name, or its file name)
/// from the user or system plugin directory.
pub(crate) fn uninstall(name: &str, system: bool, policy: Policy, isolation: &IsolationArgs) -> ExitCode {
    let dir = match target_dir(system) {
        Ok(d) => d,
        Err(e) => return fail(&format!("cannot uninstall: {e}")),
    };
    if name.is_empty() || name.contains('/') || name == ".." || name == "." {
        return fail(&format!(
            "`{name}` is not a plugin name: give a handler's name or the file name of a plugin in {} (no `/`)",
            dir.display()
        ));
    }
    let (files, links) = match own_listing(&dir) {
        Ok(l) => l,
        Err(e) => return fail(&format!("no plugin named `{name}` in {} ({e})", dir.display())),
    };
    let named = |p: &PathBuf| {
        let f = p.file_name().unwrap_or_default().to_string_lossy();
        f == name || f == format!("lib{name}.so") || f == format!("{name}.memplug.toml")
    };
    if let Some(link) = links.iter().find(|p| named(p)) {
        return fail(&format!(
            "{} is a symbolic link, not a file `memplug install` put there: remove it yourself if you mean to",
            link.display()
        ));
    }
    let by_file: Vec<PathBuf> = files.iter().filter(|p| named(p)).cloned().collect();
    let found = if by_file.is_empty() {
        let requests = files
            .iter()
            .map(|p| Request {
                task: Task::List,
                candidate: Some(Candidate::new(p)),
                spec: None,
                options: Vec::new(),
                policy: policy.clone(),
                bench: None,
            })
            .collect();
        let reports: Vec<Report> = jobs::run(requests, isolation).into_iter().flatten().collect();
        let answered: Vec<PathBuf> =
            reports.into_iter().filter(|r| r.name.as_deref() == Some(name)).map(|r| r.path).collect();
        // A worker's answer only picks among the files listed here.
        if let Some(stray) = answered.iter().find(|p| !files.contains(p)) {
            return fail(&format!(
                "a worker named {} for `{name}`, which is not a file in {}; nothing removed",
                stray.display(),
                dir.display()
            ));
        }
        answered
    } else {
        by_file
    };
    if found.is_empty() {
        return fail(&format!("no plugin named `{name}` in {} (see `memplug list {}`)", dir.display(), dir.display()));
    }
    for path in &found {
        // Still a regular file (not swapped for a symlink since listing)?
        if !fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file()) {
            return fail(&format!("{} is no longer a regular file; nothing more removed", path.display()));
        }
        match fs::remove_file(path) {
            Ok(()) => println!("removed {}", escape_os(path.as_os_str())),
            Err(e) => return fail(&format!("cannot remove {}: {e}", path.display())),
        }
    }
    ExitCode::SUCCESS
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("memplug: {}", escape(msg));
    ExitCode::from(1)
}
