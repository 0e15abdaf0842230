//! The message for a library the dynamic loader refused
//! ([`Refusal::NotALibrary`](super::Refusal::NotALibrary)): what is
//! missing and who needs it, what to do, and the loader's own text.

/// The message for a library the dynamic loader refused: what is missing
/// and who needs it, then what to do, then the loader's own text.
///
/// glibc names only the missing piece ("libfoo.so.1: cannot open shared
/// object file"; "./x.so: undefined symbol: foo"), so the message adds
/// which library was being loaded.
pub(super) fn loader_message(library: &str, loader: &str) -> String {
    let (who, what) = match loader.strip_prefix(library).and_then(|r| r.strip_prefix(": ")) {
        Some(rest) => (library, rest),
        None => loader.split_once(": ").unwrap_or(("", loader)),
    };
    let bare = !library.contains('/');
    let advice = if loader.contains("static TLS") {
        format!(
            "{library} uses initial-exec TLS and cannot be opened after the program started (typical of jemalloc \
             builds): start the program with it preloaded (`LD_PRELOAD={library}`), or give glibc more static TLS \
             room (`GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384`)"
        )
    } else if let Some(err) = what.strip_prefix("cannot open shared object file: ") {
        if who == library && bare {
            format!(
                "the dynamic loader found no library named {library} ({err}): check the name, see whether the \
                 loader knows it (`ldconfig -p | grep {library}`), and install the package that ships it"
            )
        } else if who == library || who.is_empty() {
            format!("cannot open {library} ({err}): check the path")
        } else {
            format!(
                "{who}, needed by {library}, was not found ({err}): install the package that ships {who} \
                 (`ldconfig -p | grep {who}` shows whether the loader can see it), or put its directory on \
                 {library}'s RUNPATH or on LD_LIBRARY_PATH"
            )
        }
    } else if let Some(symbol) = what.strip_prefix("undefined symbol: ") {
        let symbol = symbol.split(',').next().unwrap_or(symbol).trim();
        let needer = if who.is_empty() { library } else { who };
        let loading = if needer == library { String::new() } else { format!(" (loading {library})") };
        format!(
            "the symbol `{symbol}`, needed by {needer}{loading}, is not defined by it or by any library it links: \
             link it against the library that defines `{symbol}` (`-lNAME`); building with `-Wl,--no-undefined` \
             finds such symbols at link time"
        )
    } else {
        format!(
            "{library} could not be loaded: check that it is a shared library built for this platform and that its \
             own dependencies resolve (`ldd {library}`)"
        )
    };
    format!("not a loadable shared library: {advice}. The loader said: {loader}")
}

#[cfg(test)]
mod tests {
    use super::loader_message;

    #[test]
    fn each_kind_of_failure_names_what_is_missing_and_who_needs_it() {
        let missing = "cannot open shared object file: No such file or directory";
        for (library, loader, says, not) in [
            (
                "./p.so",
                &format!("libfoo.so.1: {missing}") as &str,
                "libfoo.so.1, needed by ./p.so, was not found",
                "no library named",
            ),
            ("libbar.so.2", &format!("libbar.so.2: {missing}"), "no library named libbar.so.2", "needed by"),
            ("./gone.so", &format!("./gone.so: {missing}"), "cannot open ./gone.so", "ldconfig"),
            (
                "./p.so",
                "./p.so: undefined symbol: foo_init",
                "the symbol `foo_init`, needed by ./p.so, is not defined",
                "loading",
            ),
            (
                "./p.so",
                "libdep.so: undefined symbol: bar, version V1",
                "`bar`, needed by libdep.so (loading ./p.so)",
                "ldconfig",
            ),
            (
                "libjemalloc.so.2",
                "/lib/libjemalloc.so.2: cannot allocate memory in static TLS block",
                "LD_PRELOAD=libjemalloc.so.2",
                "ldconfig",
            ),
            ("./p.so", "./p.so: invalid ELF header", "ldd ./p.so", "ldconfig"),
        ] {
            let msg = loader_message(library, loader);
            assert!(msg.contains(says), "{msg}");
            assert!(!msg.contains(not), "{msg}");
            assert!(msg.ends_with(&format!("The loader said: {loader}")), "{msg}");
        }
    }
}
