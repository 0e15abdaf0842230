//! `memplug symbolize`: a heap report printed by a debugging plugin where
//! no `memplug run` was there to name its frames (a host, the NumPy bridge)
//! comes in on stdin, each frame `#N 0x… (module+0x…)`; it goes out on
//! stdout with each such frame replaced by `#N 0x… in function file:line`
//! (inlined calls as `#N.1`, `#N.2`, …). Other lines pass unchanged.

use std::io::{Read, Write};
use std::process::ExitCode;

/// Run `memplug symbolize`.
pub(crate) fn run() -> ExitCode {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("memplug symbolize: cannot read standard input: {e}");
        return ExitCode::from(1);
    }
    let mut sym = memplug_stacks::symbolize::Symbolizer::new();
    let out = memplug_stacks::symbolize::symbolize_text(&input, &mut sym);
    match std::io::stdout().write_all(out.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    }
}
