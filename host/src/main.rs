//! The `memplug` command; see [`memplug::cli`].

fn main() -> std::process::ExitCode {
    memplug::cli::main()
}
