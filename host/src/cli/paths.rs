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
    #[serde(serialize_with = "memplug::text::path_serde::serialize")]
    path: PathBuf,
    origin: &'static str,
    exists: bool,
}

/// Where `install` puts plugins.
#[derive(Serialize)]
struct InstallJson {
    user: Option<String>,
    system: Option<String>,
}

/// The verdict cache.
#[derive(Serialize)]
struct CacheJson {
    #[serde(serialize_with = "memplug::text::path_serde::serialize")]
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
    let json_path = |p: Option<PathBuf>| p.as_deref().map(memplug::text::json_path);
    let install = InstallJson { user: json_path(env.install_dir(false)), system: json_path(env.install_dir(true)) };
    let cache = env.verdict_cache().map(|file| CacheJson { exists: file.exists(), file });
    if json_out {
        super::print_json(&PathsJson { search_path: dirs, install, cache });
        return ExitCode::SUCCESS;
    }
    println!("plugin search path, in order (earlier directories shadow later ones):");
    let show = |p: &std::path::Path| memplug::text::escape_os(p.as_os_str());
    let width = dirs.iter().map(|d| show(&d.path).chars().count()).max().unwrap_or(0);
    for (i, d) in dirs.iter().enumerate() {
        let state = if d.exists { "exists" } else { "missing" };
        println!("  {:>2}. {:<width$}  {state:<7}  {}", i + 1, show(&d.path), d.origin);
    }
    let shown = |p: &Option<String>| p.as_ref().map_or("(no home directory)".to_string(), |p| memplug::text::escape(p));
    println!("install --user:   {}", shown(&install.user));
    println!("install --system: {}", shown(&install.system));
    match cache {
        Some(c) => {
            println!("verdict cache:    {} ({})", show(&c.file), if c.exists { "exists" } else { "not written yet" })
        }
        None => println!("verdict cache:    off (MEMPLUG_CACHE=off, or no home directory)"),
    }
    ExitCode::SUCCESS
}
