//! Project tasks: `cargo xtask <command>`. One module per subcommand.

use clap::{Parser, Subcommand};

mod bench;
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
    /// Time knot against gdb and eu-stack on a many-threads core (wall, peak RSS).
    Bench(bench::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Samples(args) => samples::run(args),
        Command::Bench(args) => bench::run(args),
    }
}
