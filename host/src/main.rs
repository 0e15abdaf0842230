//! The `memplug` command: a consumer of the `memplug` library's public API
//! (its modules live in `host/src/cli/`, one file per command and one for
//! rendering). Built with the default cargo feature `cli`.
//!
//! Exit status: 0 when everything is ok, 1 when any candidate is refused or
//! fails a check, 2 for a usage error. Logs go to stderr, filtered by
//! `RUST_LOG` (default `warn`).

#![deny(unsafe_code)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
