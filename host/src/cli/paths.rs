//! `memplug paths`: the directories searched for plugins, in order, whether
//! each exists, where `install` puts plugins, and where the verdict cache
//! lives.

use memplug::dirs::{Env, SearchDir};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `paths --json` prints.
#[derive(Serialize)]
struct PathsJson {
    search_path: Vec<DirJson>,
    install: InstallJson,
    cache: Option<CacheJson>,
}

/// One searched directory.
#[derive(Serialize)]
struct DirJson {
    path: PathBuf,
    origin: &'static str,
    exists: bool,
}

/// Where `install` puts plugins.
#[derive(Serialize)]
struct InstallJson {
    user: Option<PathBuf>,
    system: Option<PathBuf>,
}

/// The verdict cache.
#[derive(Serialize)]
struct CacheJson {
    file: PathBuf,
    exists: bool,
}

/// Print the paths.
pub(crate) fn run(json_out: bool) -> ExitCode {
    let env = Env::current();
    let dirs: Vec<DirJson> = env
        .search_path()
        .into_iter()
        .map(|SearchDir { path, origin }| DirJson { exists: path.is_dir(), path, origin: origin.as_str() })
        .collect();
    let install = InstallJson { user: env.install_dir(false), system: env.install_dir(true) };
    let cache = env.verdict_cache().map(|file| CacheJson { exists: file.exists(), file });
    if json_out {
        super::print_json(&PathsJson { search_path: dirs, install, cache });
        return ExitCode::SUCCESS;
    }
    println!("plugin search path, in order (earlier directories shadow later ones):");
    let width = dirs.iter().map(|d| d.path.display().to_string().len()).max().unwrap_or(0);
    for (i, d) in dirs.iter().enumerate() {
        let state = if d.exists { "exists" } else { "missing" };
        println!("  {:>2}. {:<width$}  {state:<7}  {}", i + 1, d.path.display().to_string(), d.origin);
    }
    let shown = |p: &Option<PathBuf>| p.as_ref().map_or("(no home directory)".to_string(), |p| p.display().to_string());
    println!("install --user:   {}", shown(&install.user));
    println!("install --system: {}", shown(&install.system));
    match cache {
        Some(c) => {
            println!("verdict cache:    {} ({})", c.file.display(), if c.exists { "exists" } else { "not written yet" })
        }
        None => println!("verdict cache:    off (MEMPLUG_CACHE=off, or no home directory)"),
    }
    ExitCode::SUCCESS
}
