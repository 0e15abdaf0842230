//! Where memplug looks for plugins and keeps its cache, by convention (the
//! GStreamer model: an environment path, then the user's directory, then the
//! system's).
//!
//! The plugin search path, in order:
//! 1. the directories in `MEMPLUG_PLUGIN_PATH` (colon-separated; empty
//!    entries are ignored);
//! 2. the **user directory**, `$XDG_DATA_HOME/memplug/plugins` (default
//!    `~/.local/share/memplug/plugins`);
//! 3. the **system directories**: the directories in
//!    `MEMPLUG_SYSTEM_PLUGIN_PATH` when it is set (even empty), else
//!    - the directory of the running executable, when it is a cargo build
//!      tree (it holds cargo's `.cargo-lock`; `deps/` and `examples/` count as
//!      their parent) — where `cargo build` leaves the bundled plugins —
//!      and then, when the file itself lives in the tree's `deps/` (a
//!      library built as a dependency, as `cargo test` builds it), that
//!      `deps/`, where cargo left the plugins built beside it;
//!    - `<prefix>/lib/memplug/plugins`, where `<prefix>` is the directory
//!      above the executable's (`/usr/local/bin/memplug` →
//!      `/usr/local/lib/memplug/plugins`);
//!    - `/usr/local/lib/memplug/plugins` and `/usr/lib/memplug/plugins`.
//!
//!    In libmemplug (the host as a C library, [`Env::library`] set) the
//!    first two come from the library's own file instead, as a C program
//!    may be anywhere: its directory when that is a cargo build tree, and
//!    `<libdir>/memplug/plugins` beside it (`/opt/mp/lib/libmemplug.so.0` →
//!    `/opt/mp/lib/memplug/plugins`).
//!
//! Duplicates are searched once, at their first place. The verdict cache
//! lives in `$XDG_CACHE_HOME/memplug/` (default `~/.cache/memplug/`).

use std::path::{Path, PathBuf};

/// The environment variable holding plugin directories searched first.
pub const PATH_ENV: &str = "MEMPLUG_PLUGIN_PATH";
/// The environment variable that, when set, replaces the system directories.
pub const SYSTEM_PATH_ENV: &str = "MEMPLUG_SYSTEM_PLUGIN_PATH";
/// The environment variable that turns the verdict cache off (`off`).
pub const CACHE_ENV: &str = "MEMPLUG_CACHE";

/// Why a directory is on the search path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// From `MEMPLUG_PLUGIN_PATH`.
    Env,
    /// The user directory.
    User,
    /// From `MEMPLUG_SYSTEM_PLUGIN_PATH`.
    SystemEnv,
    /// The cargo build tree the executable runs from.
    BuildTree,
    /// A system directory.
    System,
}

impl Origin {
    /// How `memplug paths` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Env => "MEMPLUG_PLUGIN_PATH",
            Origin::User => "user",
            Origin::SystemEnv => "MEMPLUG_SYSTEM_PLUGIN_PATH",
            Origin::BuildTree => "build tree",
            Origin::System => "system",
        }
    }
}

/// One directory of the search path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SearchDir {
    /// The directory.
    #[serde(with = "crate::text::path_serde")]
    pub path: PathBuf,
    /// Why it is searched.
    pub origin: Origin,
}

/// The environment the conventions read, so that they can be computed for
/// any environment (tests, `memplug paths`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    /// `MEMPLUG_PLUGIN_PATH`.
    pub plugin_path: Option<String>,
    /// `MEMPLUG_SYSTEM_PLUGIN_PATH`.
    pub system_plugin_path: Option<String>,
    /// `XDG_DATA_HOME`.
    pub xdg_data_home: Option<PathBuf>,
    /// `XDG_CACHE_HOME`.
    pub xdg_cache_home: Option<PathBuf>,
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// The running executable.
    pub exe: Option<PathBuf>,
    /// libmemplug's own file, when the host runs as the C library in a
    /// program of its own: the system directories and the worker are then
    /// found from it, not from `exe` ([`Env::current`] leaves it unset).
    pub library: Option<PathBuf>,
    /// `MEMPLUG_CACHE`.
    pub cache: Option<String>,
}

impl Env {
    /// This process's environment.
    pub fn current() -> Env {
        let var = |name: &str| std::env::var_os(name).and_then(|v| v.into_string().ok());
        let dir = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Env {
            plugin_path: var(PATH_ENV),
            system_plugin_path: var(SYSTEM_PATH_ENV),
            xdg_data_home: dir("XDG_DATA_HOME").filter(|p| p.is_absolute()),
            xdg_cache_home: dir("XDG_CACHE_HOME").filter(|p| p.is_absolute()),
            home: dir("HOME"),
            exe: std::env::current_exe().ok(),
            library: None,
            cache: var(CACHE_ENV),
        }
    }

    /// The user plugin directory, if a home is known.
    pub fn user_dir(&self) -> Option<PathBuf> {
        let data = self.xdg_data_home.clone().or_else(|| self.home.as_ref().map(|h| h.join(".local/share")))?;
        Some(data.join("memplug/plugins"))
    }

    /// The directory of the verdict cache, if a home is known.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        let cache = self.xdg_cache_home.clone().or_else(|| self.home.as_ref().map(|h| h.join(".cache")))?;
        Some(cache.join("memplug"))
    }

    /// The verdict cache file ([`crate::isolate::cache`]):
    /// `verdicts-ARCH.cbor` in [`cache_dir`](Env::cache_dir); `None` when
    /// `MEMPLUG_CACHE` is `off` or no home is known.
    pub fn verdict_cache(&self) -> Option<PathBuf> {
        if self.cache.as_deref().is_some_and(|v| v.trim().eq_ignore_ascii_case("off")) {
            return None;
        }
        Some(self.cache_dir()?.join(format!("verdicts-{}.cbor", std::env::consts::ARCH)))
    }

    /// The system directories (see the module docs), in order.
    pub fn system_dirs(&self) -> Vec<SearchDir> {
        if let Some(var) = &self.system_plugin_path {
            return split(var).map(|path| SearchDir { path, origin: Origin::SystemEnv }).collect();
        }
        let mut dirs = Vec::new();
        let anchor = self.library.as_deref().or(self.exe.as_deref());
        if let Some((dir, tree)) = anchor.and_then(home_of) {
            if tree {
                dirs.push(SearchDir { path: dir.to_path_buf(), origin: Origin::BuildTree });
                if let Some(deps) = anchor.and_then(Path::parent).filter(|d| d.file_name().is_some_and(|n| n == "deps"))
                {
                    dirs.push(SearchDir { path: deps.to_path_buf(), origin: Origin::BuildTree });
                }
            }
            let plugins = match &self.library {
                Some(_) => Some(dir.join("memplug/plugins")),
                None => dir.parent().map(|prefix| prefix.join("lib/memplug/plugins")),
            };
            dirs.extend(plugins.map(|path| SearchDir { path, origin: Origin::System }));
        }
        for d in ["/usr/local/lib/memplug/plugins", "/usr/lib/memplug/plugins"] {
            dirs.push(SearchDir { path: PathBuf::from(d), origin: Origin::System });
        }
        dirs
    }

    /// The whole search path, in order, each directory once.
    pub fn search_path(&self) -> Vec<SearchDir> {
        let mut dirs: Vec<SearchDir> = Vec::new();
        let env = self.plugin_path.iter().flat_map(|v| split(v)).map(|path| SearchDir { path, origin: Origin::Env });
        let user = self.user_dir().map(|path| SearchDir { path, origin: Origin::User });
        for d in env.chain(user).chain(self.system_dirs()) {
            if !dirs.iter().any(|e| same_dir(&e.path, &d.path)) {
                dirs.push(d);
            }
        }
        dirs
    }

    /// The `memplug` commands of libmemplug's own installation
    /// ([`Env::library`]), in the order to try: in a cargo build tree the
    /// one built beside the library; else `<prefix>/bin/memplug` for a
    /// library in `<prefix>/lib` (or `lib64`, or a directory under `lib`,
    /// as Debian's `lib/x86_64-linux-gnu`). Empty without `library`.
    pub fn library_workers(&self) -> Vec<PathBuf> {
        let Some((dir, tree)) = self.library.as_deref().and_then(home_of) else { return Vec::new() };
        if tree {
            return vec![dir.join("memplug")];
        }
        let is_lib = |d: &Path| d.file_name().is_some_and(|n| n.to_string_lossy().starts_with("lib"));
        let libdir = match dir.parent() {
            Some(parent) if !is_lib(dir) && is_lib(parent) => parent,
            _ => dir,
        };
        libdir.parent().map(|prefix| prefix.join("bin/memplug")).into_iter().collect()
    }

    /// Where `memplug install` puts plugins: the user directory, or the
    /// first system directory (`MEMPLUG_SYSTEM_PLUGIN_PATH`'s first entry
    /// when set, else `/usr/local/lib/memplug/plugins`).
    pub fn install_dir(&self, system: bool) -> Option<PathBuf> {
        if !system {
            return self.user_dir();
        }
        match &self.system_plugin_path {
            Some(var) => split(var).next(),
            None => Some(PathBuf::from("/usr/local/lib/memplug/plugins")),
        }
    }
}

/// The directory of one of memplug's own files (the executable, or
/// libmemplug; `deps/` and `examples/` count as their parent), and whether
/// it is a cargo build tree (it holds cargo's `.cargo-lock`).
fn home_of(file: &Path) -> Option<(&Path, bool)> {
    let dir = file.parent()?;
    let dir = match dir.file_name() {
        Some(n) if n == "deps" || n == "examples" => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    Some((dir, dir.join(".cargo-lock").exists()))
}

/// The non-empty entries of a colon-separated path variable.
fn split(var: &str) -> impl Iterator<Item = PathBuf> + '_ {
    var.split(':').filter(|e| !e.is_empty()).map(PathBuf::from)
}

/// Whether two paths name the same directory (compared canonically when
/// both exist).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env { home: Some("/home/u".into()), exe: Some("/opt/mp/bin/memplug".into()), ..Env::default() }
    }

    #[test]
    fn the_order_is_env_then_user_then_system() {
        let mut e = env();
        e.plugin_path = Some("/a::/b".into());
        let dirs: Vec<_> = e.search_path().into_iter().map(|d| (d.path, d.origin)).collect();
        assert_eq!(
            dirs,
            vec![
                (PathBuf::from("/a"), Origin::Env),
                (PathBuf::from("/b"), Origin::Env),
                (PathBuf::from("/home/u/.local/share/memplug/plugins"), Origin::User),
                (PathBuf::from("/opt/mp/lib/memplug/plugins"), Origin::System),
                (PathBuf::from("/usr/local/lib/memplug/plugins"), Origin::System),
                (PathBuf::from("/usr/lib/memplug/plugins"), Origin::System),
            ]
        );
    }

    #[test]
    fn xdg_variables_and_the_system_variable() {
        let mut e = env();
        e.xdg_data_home = Some("/x/data".into());
        e.xdg_cache_home = Some("/x/cache".into());
        e.system_plugin_path = Some("/s1:/s2".into());
        assert_eq!(e.user_dir(), Some(PathBuf::from("/x/data/memplug/plugins")));
        assert_eq!(e.cache_dir(), Some(PathBuf::from("/x/cache/memplug")));
        let system: Vec<_> = e.system_dirs().into_iter().map(|d| d.path).collect();
        assert_eq!(system, vec![PathBuf::from("/s1"), PathBuf::from("/s2")]);
        assert_eq!(e.install_dir(true), Some(PathBuf::from("/s1")));
        e.system_plugin_path = Some(String::new());
        assert!(e.system_dirs().is_empty(), "an empty variable means no system directories");
    }

    #[test]
    fn a_library_in_a_build_trees_deps_searches_the_tree_then_deps() {
        let tree = tempfile::tempdir().unwrap();
        std::fs::write(tree.path().join(".cargo-lock"), b"").unwrap();
        let mut e = env();
        e.library = Some(tree.path().join("deps/libmemplug_c.so"));
        let system: Vec<_> = e.system_dirs().into_iter().take(2).map(|d| (d.path, d.origin)).collect();
        assert_eq!(
            system,
            [(tree.path().to_path_buf(), Origin::BuildTree), (tree.path().join("deps"), Origin::BuildTree)]
        );
        e.library = Some(tree.path().join("libmemplug_c.so"));
        assert_eq!(e.system_dirs()[1].path, tree.path().join("memplug/plugins"), "uplifted: the tree alone");
    }

    #[test]
    fn libmemplug_finds_its_own_installation_not_the_programs() {
        let mut e = env();
        e.exe = Some("/home/u/src/app/a.out".into());
        e.library = Some("/opt/mp/lib/libmemplug.so.0".into());
        let system: Vec<_> = e.system_dirs().into_iter().map(|d| d.path).collect();
        assert_eq!(
            system,
            ["/opt/mp/lib/memplug/plugins", "/usr/local/lib/memplug/plugins", "/usr/lib/memplug/plugins"]
                .map(PathBuf::from)
        );
        assert_eq!(e.library_workers(), [PathBuf::from("/opt/mp/bin/memplug")]);
        e.library = Some("/usr/lib/x86_64-linux-gnu/libmemplug.so.0".into());
        assert_eq!(e.system_dirs()[0].path, PathBuf::from("/usr/lib/x86_64-linux-gnu/memplug/plugins"));
        assert_eq!(e.library_workers(), [PathBuf::from("/usr/bin/memplug")]);
        e.library = Some("/opt/mp/lib64/libmemplug.so.0".into());
        assert_eq!(e.library_workers(), [PathBuf::from("/opt/mp/bin/memplug")]);
        e.library = None;
        assert!(e.library_workers().is_empty());
    }

    #[test]
    fn no_home_no_user_directory() {
        let e = Env { exe: Some("/opt/bin/memplug".into()), ..Env::default() };
        assert_eq!(e.user_dir(), None);
        assert_eq!(e.cache_dir(), None);
    }
}
