//! What packagers install beside the command, generated from its clap
//! definitions so that nothing is written twice: the shell completion
//! scripts (`memplug completions SHELL`) and the man pages, one for
//! `memplug` and one per subcommand (`memplug man-pages DIR`).

use clap_complete::Shell;
use std::path::Path;
use std::process::ExitCode;

/// Print `shell`'s completion script for `cmd` on stdout.
pub(crate) fn completions(mut cmd: clap::Command, shell: Shell) -> ExitCode {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// Write `memplug.1` and `memplug-SUBCOMMAND.1` for every subcommand into `dir` (made if missing), and list them on stdout.
pub(crate) fn man_pages(cmd: clap::Command, dir: &Path) -> ExitCode {
    let written = std::fs::create_dir_all(dir).and_then(|()| write_pages(cmd, dir));
    match written {
        Ok(names) => {
            for n in names {
                println!("{}", dir.join(n).display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("memplug: cannot write the man pages into {}: {e}", memplug::text::escape_os(dir.as_os_str()));
            ExitCode::FAILURE
        }
    }
}

/// The pages of `cmd` and its subcommands, written into `dir`; the
/// file names written.
fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<Vec<String>> {
    let mut cmd = cmd;
    cmd.build();
    let mut names = Vec::new();
    let root = cmd.get_name().to_string();
    let mut pages = vec![(root.clone(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        // Titled and named `memplug-run`, as man expects; the synopsis keeps
        // the built command's `memplug run`.
        let name = format!("{root}-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().display_name(name)));
    }
    for (name, page) in pages {
        let file = format!("{name}.1");
        let mut out = Vec::new();
        clap_mangen::Man::new(page).render(&mut out)?;
        std::fs::write(dir.join(&file), out)?;
        names.push(file);
    }
    Ok(names)
}
