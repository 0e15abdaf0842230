//! Arguments shared by several commands: the policy (`--require`,
//! `--deprecate-abi`, and the trust flags `--trust`, `--allow-digest`,
//! `--allowlist`) and an allocator taken by symbol name (`--library`
//! and one flag per role of [`memplug::symbols::Role`], generated from that
//! table).

use clap::{Arg, ArgAction, ArgMatches, Command};
use memplug::policy::{ALLOWLIST_ENV, Policy, PolicyError, TRUST_ENV, Trust};
use memplug::symbols::{Role, SymbolSpec, name_from_library};
use std::path::PathBuf;
use std::time::Duration;

/// What the registry accepts beyond the ABI's rules.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct PolicyArgs {
    /// Require a plugin version: `NAME REQ`, e.g. 'aligned >=1.2, <2'
    /// (repeatable). A miss is refused as `version-unsatisfied`.
    #[arg(long = "require", value_name = "SPEC")]
    require: Vec<String>,
    /// Mark an ABI version deprecated, e.g. `1.0` (repeatable): such plugins
    /// still load, with a warning and a `deprecated` mark.
    #[arg(long = "deprecate-abi", value_name = "MAJOR.MINOR")]
    deprecate_abi: Vec<String>,
    /// Which candidate files are trusted.
    #[command(flatten)]
    trust: TrustArgs,
}

/// How far candidate files are trusted: `--trust`, `--allow-digest`,
/// `--allowlist`, over the environment's `MEMPLUG_TRUST` and
/// `MEMPLUG_ALLOWLIST`.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct TrustArgs {
    /// `strict` (default): refuse files that someone other than root and
    /// you could change; `any`: no such checks, for development (overrides
    /// MEMPLUG_TRUST).
    #[arg(long = "trust", value_name = "LEVEL", value_parser = ["strict", "any"])]
    trust: Option<String>,
    /// Pin plugins by SHA-256: allow this digest (repeatable; 64 hex digits
    /// as `sha256sum` prints). Unlisted files are refused.
    #[arg(long = "allow-digest", value_name = "HEX")]
    allow_digest: Vec<String>,
    /// Pin plugins by SHA-256: allow the digests in FILE (`sha256sum`
    /// format; repeatable; added to MEMPLUG_ALLOWLIST).
    #[arg(long = "allowlist", value_name = "FILE")]
    allowlist: Vec<PathBuf>,
}

impl TrustArgs {
    /// The trust these flags and the environment describe.
    pub(crate) fn trust(&self) -> Result<Trust, PolicyError> {
        let env = |name| std::env::var(name).ok().filter(|v: &String| !v.trim().is_empty());
        let level = self.trust.clone().or_else(|| env(TRUST_ENV));
        let mut allowlists: Vec<PathBuf> = env(ALLOWLIST_ENV).map(PathBuf::from).into_iter().collect();
        allowlists.extend(self.allowlist.iter().cloned());
        Trust::from_settings(level.as_deref(), &self.allow_digest, &allowlists)
    }
}

impl PolicyArgs {
    /// The policy these arguments describe.
    pub(crate) fn policy(&self) -> Result<Policy, PolicyError> {
        let mut p = Policy { cache: memplug::dirs::Env::current().verdict_cache(), ..Policy::default() };
        for r in &self.require {
            p.require(r)?;
        }
        for a in &self.deprecate_abi {
            p.deprecate_abi(a)?;
        }
        p.trust = self.trust.trust()?;
        Ok(p)
    }
}

/// An allocator taken by symbol name from a library, on the command line
/// (the same as a `*.memplug.toml` manifest): `--library LIB`, `--name`,
/// one `--ROLE SYMBOL` flag per role, `--thread-safe`, `--alignment`.
#[derive(Debug, Clone, Default)]
pub(crate) struct SymbolArgs {
    library: Option<String>,
    name: Option<String>,
    /// The symbols named, by role.
    roles: Vec<(Role, String)>,
    thread_safe: bool,
    alignment: Option<u64>,
}

impl SymbolArgs {
    /// The spec these arguments describe, if `--library` was given.
    pub(crate) fn spec(&self) -> Option<SymbolSpec> {
        let library = self.library.as_ref()?;
        let named = |role| self.roles.iter().find(|(r, _)| *r == role).map(|(_, s)| s.clone());
        let name = self.name.clone().unwrap_or_else(|| name_from_library(library));
        let mut spec =
            SymbolSpec::new(&name, library, &named(Role::Malloc)?, &named(Role::Free)?).thread_safe(self.thread_safe);
        for role in Role::ALL.into_iter().filter(|r| !r.required()) {
            spec.symbols.set(role, named(role));
        }
        spec.alignment = self.alignment;
        Some(spec)
    }
}

/// The help line of a role's flag, e.g. "`void free(void *)` symbol".
fn role_help(role: Role) -> String {
    match role.when_absent() {
        None => format!("`{}` symbol", role.signature()),
        Some(absent) => format!("`{}` symbol (default: {absent})", role.signature()),
    }
}

impl clap::Args for SymbolArgs {
    fn augment_args(cmd: Command) -> Command {
        let required: Vec<&str> = Role::ALL.into_iter().filter(|r| r.required()).map(Role::key).collect();
        let mut cmd = cmd
            .arg(
                Arg::new("library")
                    .long("library")
                    .value_name("LIB")
                    .requires_all(required)
                    .help("Take plain C allocation functions from this library: a path, or a soname for the dynamic loader (e.g. libmimalloc.so.2)"),
            )
            .arg(
                Arg::new("name")
                    .long("name")
                    .value_name("NAME")
                    .requires("library")
                    .help("The handler's name (default: from the library's file name)"),
            );
        for role in Role::ALL {
            cmd = cmd.arg(
                Arg::new(role.key()).long(role.flag()).value_name("SYMBOL").requires("library").help(role_help(role)),
            );
        }
        cmd.arg(
            Arg::new("thread_safe")
                .long("thread-safe")
                .action(ArgAction::SetTrue)
                .requires("library")
                .help("The functions are thread-safe (default: the host locks every call)"),
        )
        .arg(
            Arg::new("alignment")
                .long("alignment")
                .value_name("BYTES")
                .value_parser(clap::value_parser!(u64))
                .requires("library")
                .help("The alignment every block has (default 16)"),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for SymbolArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let text = |id: &str| m.get_one::<String>(id).cloned();
        Ok(SymbolArgs {
            library: text("library"),
            name: text("name"),
            roles: Role::ALL.into_iter().filter_map(|r| text(r.key()).map(|s| (r, s))).collect(),
            thread_safe: m.get_flag("thread_safe"),
            alignment: m.get_one::<u64>("alignment").copied(),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// Where plugin code runs while a command judges it.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct IsolationArgs {
    /// Load and check each candidate in this process instead of a worker
    /// process per candidate (for debugging: a plugin that crashes, hangs or
    /// exits then takes memplug with it).
    #[arg(long)]
    pub(crate) in_process: bool,
    /// Seconds of its own time (waiting for a processor not counted) a
    /// worker may take for one candidate before it is killed and the
    /// candidate reported `timed-out` (more than 0, at most 86400).
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_timeout)]
    pub(crate) timeout: Duration,
    /// Check every candidate again, even those the verdict cache has seen
    /// unchanged (the cache is then updated); MEMPLUG_CACHE=off ignores it.
    #[arg(long)]
    pub(crate) rescan: bool,
}

/// The longest `--timeout`: one day.
pub(crate) const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// A command-line value that breaks its rule (reason code `bad-argument`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("[bad-argument] {flag} {value:?}: {rule}")]
pub(crate) struct BadArgument {
    /// The flag, e.g. `--timeout`.
    flag: &'static str,
    /// The value as given.
    value: String,
    /// The rule it breaks and what to write instead.
    rule: String,
}

impl BadArgument {
    /// The reason code.
    #[allow(dead_code)] // for callers that report it apart from the message
    pub(crate) fn code(&self) -> &'static str {
        "bad-argument"
    }
}

/// A timeout: a finite number of seconds, more than 0 and at most
/// [`MAX_TIMEOUT_SECS`].
pub(crate) fn parse_timeout(s: &str) -> Result<Duration, BadArgument> {
    let bad = || BadArgument {
        flag: "--timeout",
        value: s.to_string(),
        rule: format!(
            "write a number of seconds greater than 0 and at most {MAX_TIMEOUT_SECS} (one day), e.g. --timeout 10"
        ),
    };
    match s.trim().parse::<f64>() {
        Ok(t) if t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_SECS => Duration::try_from_secs_f64(t).map_err(|_| bad()),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_positive_finite_and_at_most_a_day() {
        assert_eq!(parse_timeout("5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_timeout("0.25").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_timeout("86400").unwrap(), Duration::from_secs(86_400));
        for bad in ["1e30", "-1", "nan", "NaN", "inf", "0", "-0", "86401", "", "five"] {
            let e = parse_timeout(bad).unwrap_err();
            assert_eq!(e.code(), "bad-argument");
            assert!(e.to_string().starts_with("[bad-argument] --timeout"), "{e}");
        }
    }
}
