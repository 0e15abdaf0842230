//! Process-level settings for the `memplug` command.

/// Restore the default `SIGPIPE` action, so that `memplug check | head`
/// ends quietly instead of panicking on a closed pipe (Rust ignores
/// `SIGPIPE` by default).
#[allow(unsafe_code)]
pub(crate) fn default_sigpipe() {
    // SAFETY: called once at the start of `main`, before any thread is
    // started; setting a signal's disposition to SIG_DFL has no other
    // precondition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Ignore `SIGINT` and `SIGQUIT` while `memplug run` waits for its program
/// (as `system()` does): the terminal sends them to the program too, which
/// decides; memplug then reports how it ended.
#[allow(unsafe_code)]
pub(crate) fn ignore_interrupts() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no other
    // precondition; memplug installs no handlers of its own for these.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}
