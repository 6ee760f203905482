//! Project tasks: `cargo xtask <command>`. One module per subcommand.

use clap::{Parser, Subcommand};

mod samples;

#[derive(Parser)]
#[command(name = "xtask", about = "knot's project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build, run and dump the native samples; record gdb's oracle.
    Samples(samples::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Samples(args) => samples::run(args),
    }
}
