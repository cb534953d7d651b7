//! `broker-fs`: the broker core on a real data directory, from the command line.
//!
//! Every command that writes first locks and recovers the directory (replaying the
//! journal, resuming pending deletions, removing stray logs), then does its work; the
//! commands that only read open it read-only, under a shared lock, and write nothing. Exit status:
//! 0 on success, 1 when a command fails, 2 on bad usage, 3 when the broker halts or
//! refuses to start (a corrupt journal), 4 when another process holds the directory.
//!
//! The commands are in [`cli`], one module each; they call the driver, which applies
//! the retry policy of `--timeout`, and the driver never calls them back.

mod cli;

use clap::{CommandFactory, Parser};
use cli::args::Cli;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // clap cannot require a global option, so its absence is checked here, with clap's
    // own usage error (exit status 2).
    let Some(data_dir) = cli.data_dir.clone() else {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--data-dir DIR is required (before or after the command)",
            )
            .exit()
    };
    match cli::run(cli, data_dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
