//! The `knot` command: argument parsing, output and exit codes. Everything else is the library.

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use knot::analysis::{self, Options};
use knot::process::Locator;
use knot::report::{self, text::TextOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit status: the analysis ran and the report was written.
const EXIT_OK: u8 = 0;
/// Exit status: the dump could not be read at all (not a core, unreadable, wrong architecture).
const EXIT_UNREADABLE: u8 = 2;
/// Exit status with `--fail-on-deadlock`: the analysis ran and found at least one cycle.
const EXIT_DEADLOCK: u8 = 3;
/// Exit status: the command line is wrong (EX_USAGE).
const EXIT_USAGE: u8 = 64;

#[derive(Parser)]
#[command(name = "knot", version, about = "Reads a Linux core dump and tells which threads are stuck, on what, behind whom.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Analyze a core dump: every thread's stack, with symbols and lines.
    Analyze(AnalyzeArgs),
    /// Print the JSON Schema of the report (--format json).
    Schema,
}

#[derive(Parser)]
struct AnalyzeArgs {
    /// The core file (from the kernel, gcore or createdump).
    core: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Prefix for every path the dump names, like gdb's `set sysroot`.
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// Directory with separate debug files (`.build-id/xx/yyyy.debug`); may repeat. /usr/lib/debug is searched last.
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<PathBuf>,
    /// Directory searched for module files by name when they are not at the path the dump
    /// records (or are another build there); may repeat. Like gdb's solib-search-path.
    #[arg(long = "search-dir", value_name = "DIR")]
    search_dirs: Vec<PathBuf>,
    /// The program that was dumped, wherever the dump says it was (`gdb PROGRAM CORE`).
    #[arg(long, value_name = "FILE")]
    exe: Option<PathBuf>,
    /// Only rebuild the stacks: skip lock analysis and the wait-for graph.
    #[arg(long)]
    stacks_only: bool,
    /// Show at most N frames per stack in the text report.
    #[arg(long, value_name = "N")]
    max_frames: Option<usize>,
    /// Exit with status 3 when a deadlock (a wait-for cycle) is found, for jobs and CI scripts.
    #[arg(long)]
    fail_on_deadlock: bool,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    let result = match cli.command {
        Command::Analyze(args) => run_analyze(args),
        Command::Schema => {
            println!("{}", report::json_schema());
            Ok(EXIT_OK)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("knot: {e:#}");
            ExitCode::from(EXIT_UNREADABLE)
        }
    }
}

fn run_analyze(args: AnalyzeArgs) -> anyhow::Result<u8> {
    let locator = Locator { sysroot: args.sysroot, debug_dirs: args.debug_dirs, search_dirs: args.search_dirs, executable: args.exe, no_default_debug_dir: false };
    let opts = Options { locator, stacks_only: args.stacks_only, ..Options::default() };
    let report = analysis::analyze(&args.core, &opts)?;
    let rendered = match args.format {
        Format::Text => report::text::render(&report, &TextOptions { max_frames: args.max_frames }),
        Format::Json => report::to_json(&report) + "\n",
    };
    match &args.output {
        Some(path) => std::fs::write(&path, rendered).with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`knot … | head`) is not an error worth reporting.
            let _ = out.write_all(rendered.as_bytes());
        }
    }
    Ok(if args.fail_on_deadlock && !report.deadlocks.is_empty() { EXIT_DEADLOCK } else { EXIT_OK })
}
