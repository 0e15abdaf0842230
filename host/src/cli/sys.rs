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
