//! The commands of `broker-fs`, one module each, and [`run`], which opens the data
//! directory with the CLI's driver options and hands it to the command. A command calls
//! the driver and prints; the driver applies the retry policy of `--timeout`.

pub mod args;
mod create;
mod delete;
mod describe;
mod failure;
mod fetch;
mod list;
mod output;
mod produce;
mod recover;
mod serve;
mod status;

use args::{Cli, Cmd};
use broker_fs::driver::{Driver, DriverOptions};
use broker_fs::patience::RetryPolicy;
use failure::Failure;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Runs the command of `cli` on `data_dir`, writing its output to standard output.
pub fn run(cli: Cli, data_dir: PathBuf) -> Result<(), Failure> {
    let mut options = DriverOptions {
        // Every wait of the CLI, a start whose recovery keeps failing included, reports
        // each retry and gives up after --timeout.
        recovery_attempts: None,
        retry: RetryPolicy { timeout: Some(cli.timeout), report: true },
        ..DriverOptions::default()
    };
    options.config.read_only = cli.command.only_reads();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if let Cmd::Serve { kafka, kafka_write_timeout_ms, durability } = &cli.command {
        options.durability = *durability;
        return serve::run(&data_dir, options, kafka.as_deref(), *kafka_write_timeout_ms, &mut out);
    }
    let mut d = Driver::<()>::open(&data_dir, options)?;
    let result = command(&mut d, cli.command, cli.json, &data_dir, &mut out);
    // A halt ends every command the same way, whatever the command made of it.
    if let Some(reason) = d.halted() {
        return Err(Failure::halted(reason));
    }
    result
}

/// Runs one command other than `serve` on an open directory, writing to `out`. `status`
/// and `recover` report the driver's notices in their output; the others print them on
/// standard error once they succeed.
fn command(d: &mut Driver, command: Cmd, json: bool, data_dir: &Path, out: &mut impl Write) -> Result<(), Failure> {
    match command {
        Cmd::Create { name, partitions, grace_ms } => create::run(d, &name, partitions, grace_ms, json, out)?,
        Cmd::Delete { name, wait } => delete::run(d, &name, wait, json, out)?,
        Cmd::Produce { name, key, values } => produce::run(d, &name, key, values, json, out)?,
        Cmd::Fetch { name, partition, offset, max } => fetch::run(d, &name, partition, offset, max, json, out)?,
        Cmd::List => list::run(d, json, out)?,
        Cmd::Describe { name } => describe::run(d, name, json, out)?,
        Cmd::Status => return status::run(d, json, data_dir, out),
        Cmd::Recover => return recover::run(d, json, data_dir, out),
        Cmd::Serve { .. } => unreachable!("serve runs on a driver of its own"),
    }
    output::print_notices(d);
    Ok(())
}
