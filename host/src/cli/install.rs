//! `memplug install` and `memplug uninstall`: put a checked plugin (or
//! allocator manifest) into the user or system plugin directory, with safe
//! permissions, or take one out.

use super::args::IsolationArgs;
use super::jobs;
use super::table;
use memplug::dirs::Env;
use memplug::probe::{Request, Task};
use memplug::symbols::SymbolSpec;
use memplug::text::{escape, escape_os};
use memplug::{Candidate, Policy, Report};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The directory to install into, or why there is none.
fn target_dir(system: bool) -> Result<PathBuf, String> {
    Env::current().install_dir(system).ok_or_else(|| "no home directory is known (HOME is unset)".to_string())
}

/// Install `file` after checking it in a worker process.
pub(crate) fn install(file: &Path, system: bool, policy: Policy, isolation: &IsolationArgs) -> ExitCode {
    let dir = match target_dir(system) {
        Ok(d) => d,
        Err(e) => return fail(&format!("cannot install: {e}")),
    };
    let Some(name) = file.file_name() else { return fail(&format!("{} is not a file", file.display())) };
    let candidate = Candidate::new(file);
    let is_manifest = candidate.is_manifest();
    if !is_manifest && !name.to_string_lossy().ends_with(".so") {
        return fail(&format!(
            "{} is neither a plugin library (*.so) nor an allocator manifest (*.memplug.toml)",
            file.display()
        ));
    }
    if is_manifest && let Err(e) = movable_manifest(file) {
        return fail(&e);
    }
    let request =
        Request { task: Task::Check, candidate: Some(candidate), spec: None, options: Vec::new(), policy, bench: None };
    let reports: Vec<Report> = jobs::run(vec![request], isolation).into_iter().flatten().collect();
    if reports.is_empty() || reports.iter().any(Report::fails) {
        table::print(&reports, true, "checked");
        return fail(&format!("not installed: {} did not pass the check", file.display()));
    }
    let dest = dir.join(name);
    match copy_safely(file, &dir, &dest) {
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

/// Copy `file` to `dest` in `dir` (made if missing, 0755): a temporary file
/// written, synced and made 0644 first, then renamed over `dest`. Whether
/// something was replaced.
fn copy_safely(file: &Path, dir: &Path, dest: &Path) -> std::io::Result<bool> {
    fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)?;
    let bytes = fs::read(file)?;
    let tmp =
        dir.join(format!(".{}.tmp.{}", dest.file_name().unwrap_or_default().to_string_lossy(), std::process::id()));
    let mut out = fs::OpenOptions::new().create_new(true).write(true).mode(0o644).open(&tmp)?;
    let written = out.write_all(&bytes).and_then(|()| out.sync_all());
    if let Err(e) = written.and_then(|()| fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644))) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    let replaced = dest.exists();
    fs::rename(&tmp, dest)?;
    Ok(replaced)
}

/// Uninstall the plugin named `name` (its handler's name, or its file name)
/// from the user or system plugin directory.
pub(crate) fn uninstall(name: &str, system: bool, policy: Policy, isolation: &IsolationArgs) -> ExitCode {
    let dir = match target_dir(system) {
        Ok(d) => d,
        Err(e) => return fail(&format!("cannot uninstall: {e}")),
    };
    let files = match memplug::discover::scan_dir(&dir) {
        Ok(c) => c,
        Err(e) => return fail(&format!("no plugin named `{name}` in {} ({e})", dir.display())),
    };
    let by_file: Vec<PathBuf> = files
        .iter()
        .map(|c| c.path.clone())
        .filter(|p| {
            let f = p.file_name().unwrap_or_default().to_string_lossy();
            f == name || f == format!("lib{name}.so") || f == format!("{name}.memplug.toml")
        })
        .collect();
    let found = if by_file.is_empty() {
        let requests = files
            .into_iter()
            .map(|c| Request {
                task: Task::List,
                candidate: Some(c),
                spec: None,
                options: Vec::new(),
                policy: policy.clone(),
                bench: None,
            })
            .collect();
        let reports: Vec<Report> = jobs::run(requests, isolation).into_iter().flatten().collect();
        reports.into_iter().filter(|r| r.name.as_deref() == Some(name)).map(|r| r.path).collect()
    } else {
        by_file
    };
    if found.is_empty() {
        return fail(&format!("no plugin named `{name}` in {} (see `memplug list {}`)", dir.display(), dir.display()));
    }
    for path in &found {
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
