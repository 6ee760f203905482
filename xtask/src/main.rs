//! Project tasks: `cargo xtask <command>`. One module per subcommand.

use clap::{Parser, Subcommand};

mod arm64;
mod bench;
mod bench_dotnet;
mod bench_dotnet_async;
mod bench_dotnet_heap;
mod dotnet_catalog;
mod peers;
mod programs;
mod samples;
mod scale;
mod snapshot;

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
    /// The native samples made on arm64 in an emulated arm64 Debian system (built once under
    /// target/arm64-vm/); `--commit` copies them into samples/dumps-aarch64/.
    Arm64Samples(arm64::Args),
    /// Time knot against gdb and eu-stack -i on Debian programs and a 2,000-thread core, and
    /// against dotnet-dump on a .NET heap dump (wall, CPU, peak RSS, instructions);
    /// `--scale`: on a core of 8 GiB with 1,000 threads beside the small ones.
    Bench(bench::Args),
    /// The .NET runtime catalogue (analyzers/dotnet/runtime-catalog.toml) from the official
    /// runtime packs: what knot reads from libcoreclr.so / singlefilehost, per build-id.
    DotnetCatalog(dotnet_catalog::Args),
    /// Every report knot gives on the committed dumps, into one directory (paths of this
    /// checkout as `<ROOT>`); `--diff NEW` compares two such directories.
    Snapshot(snapshot::Args),
    /// (Used by `bench` itself.) Runs one tool and prints its wall time and rusage, from a
    /// process small enough not to count in the tool's peak RSS.
    #[command(hide = true)]
    MeasureChild(bench::MeasureArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Samples(args) => samples::run(args),
        Command::Arm64Samples(args) => arm64::run(args),
        Command::Bench(args) => bench::run(args),
        Command::DotnetCatalog(args) => dotnet_catalog::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::MeasureChild(args) => bench::measure_child(args),
    }
}
