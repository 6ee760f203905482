//! The `knot` command: argument parsing, output and exit codes. Everything else is the library.

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use knot::{Options, Phase, Progress};
use knot::process::Locator;
use knot::report::{self, text::TextOptions};
use knot::watch::{self, WatchOptions};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit status: the analysis ran and the report was written.
const EXIT_OK: u8 = 0;
/// Exit status: the dump could not be read at all (not a core, unreadable, wrong architecture).
const EXIT_UNREADABLE: u8 = 2;
/// Exit status with `--fail-on-deadlock`: the analysis ran and found at least one cycle.
const EXIT_DEADLOCK: u8 = 3;
/// Exit status of `knot pid`: the process cannot be read (no such process, ptrace not permitted,
/// another tracer attached); nothing was attached.
const EXIT_REFUSED: u8 = 4;
/// Exit status of `knot pid` stopped by SIGINT or SIGTERM (after letting the process go).
const EXIT_INTERRUPTED: u8 = 130;
/// Exit status: the command line is wrong (EX_USAGE).
const EXIT_USAGE: u8 = 64;
/// Exit status of `watch --once`: some dump could not be analyzed (it has its `.knot.error.txt`).
const EXIT_WATCH_FAILED: u8 = 1;

const ANALYZE_EXIT: &str = "Exit status: 0 the analysis ran (also for a partial dump: see the warnings); 2 the dump could not be read at all; 3 a deadlock was found and --fail-on-deadlock was given; 64 the command line is wrong.";

const PID_EXIT: &str = "The process is stopped (ptrace) only while its registers and memory are copied, then let go; the analysis runs on the copy. The pause is in the report (text: the `Live:` line; JSON: `live.pause_ms`). knot never leaves the process stopped: not on an error, nor when knot gets SIGINT or SIGTERM.

Exit status: 0 the analysis ran; 2 the reading failed part-way (the process was let go); 3 a deadlock was found and --fail-on-deadlock was given; 4 the process cannot be read: no such process, ptrace not permitted (kernel.yama.ptrace_scope, CAP_SYS_PTRACE, another uid) or another tracer (a debugger) attached; 64 the command line is wrong; 130 interrupted by SIGINT or SIGTERM (the process was let go).";

const WATCH_EXIT: &str = "Writes <dump>.knot.json beside each dump (or in --out), or <dump>.knot.error.txt when it cannot be analyzed, and a <dump>.knot.done marker; each once, also across restarts (a dump that changes is analyzed again). Files are written to a temporary name and renamed. Several watchers may share DIR: the one that analyzes a dump holds a lock on <dump>.knot.running meanwhile, and the others skip that dump while it is held (with --once they wait for it).

Exit status: 0 every dump found was analyzed (or already was); 1 (--once) some dump could not be analyzed: see its .knot.error.txt; 2 DIR or --out is not a readable directory, or (--once) an output could not be written; 3 (--once) a deadlock was found and --fail-on-deadlock was given; 64 the command line is wrong. Without --once knot watch runs until stopped (SIGTERM or SIGINT: exit 0).";

#[derive(Parser)]
#[command(name = "knot", version, about = "Reads a Linux core dump and tells which threads are stuck, on what, behind whom.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Analyze a core dump: every thread's stack, with symbols and lines.
    #[command(after_help = ANALYZE_EXIT)]
    Analyze(AnalyzeArgs),
    /// Analyze a live process: stop it for milliseconds, copy what the analysis reads, let it go, analyze the copy.
    #[command(after_help = PID_EXIT)]
    Pid(PidArgs),
    /// Analyze each new core dump in DIR once, writing <dump>.knot.json beside it (for a sidecar or a Job).
    #[command(after_help = WATCH_EXIT)]
    Watch(WatchArgs),
    /// .NET heap commands: what fills the heap (`stat`), why an object is alive (`root`), what grew between two dumps (`diff`).
    #[command(subcommand)]
    Heap(HeapCommand),
    /// Print the JSON Schema of the report (--format json), or of `knot watch --log-format json`'s lines.
    Schema(SchemaArgs),
}

#[derive(Args)]
struct SchemaArgs {
    /// The schema of one line of `knot watch --log-format json` instead of the report's.
    #[arg(long)]
    watch_line: bool,
}

#[derive(Subcommand)]
enum HeapCommand {
    /// What fills the heap: every type's count and bytes as SOS `dumpheap -stat` prints them, and the GC's state (hard limit, committed, last OOM). Reads the heap alone: no stacks, locks or object graph (`knot analyze` adds those).
    #[command(after_help = HEAP_STAT_EXIT)]
    Stat(HeapStatArgs),
    /// Why an object is alive: the shortest path from each GC root (handle, stack, finalization
    /// queue) that reaches it, as SOS `gcroot` prints it, each object with the field that leads on.
    #[command(after_help = HEAP_ROOT_EXIT)]
    Root(HeapRootArgs),
    /// What grew between two dumps of one program: per type, count and bytes (as SOS `dumpheap -stat`), largest growth first. Types are matched by name, never by address.
    #[command(after_help = HEAP_EXIT)]
    Diff(HeapDiffArgs),
}

const HEAP_ROOT_EXIT: &str = "Stack roots are found by scanning each managed frame's stack words and registers (marked conservative): a stale local may show as a root. Exit status: 0 the heap was read (whether or not a root reaches the object: see `reachable`); 2 the dump or its .NET heap could not be read; 64 the command line is wrong.";

#[derive(Parser)]
struct HeapRootArgs {
    /// The core file (a .NET process's, with its heap: createdump --withheap or --full).
    #[arg(value_name = "DUMP")]
    core: PathBuf,
    /// The object's address (hex, with or without 0x), as SOS prints it.
    #[arg(value_name = "ADDRESS", value_parser = parse_address)]
    address: u64,
    /// Search from every root (SOS gcroot's unique roots: the whole heap read as a graph) instead of stopping at the first, shortest path.
    #[arg(long)]
    all: bool,
    /// With --all: the memory knot may use for the heap's graph (4G, 512M, bytes); default: its
    /// memory cgroup's limit. A graph too large for it goes to scratch files (--scratch-dir);
    /// one that fits neither is refused, saying so (exit 2).
    #[arg(long, value_name = "SIZE", value_parser = knot::parse_size, requires = "all")]
    max_memory: Option<u64>,
    /// With --all: where a graph too large for the memory limit keeps its arrays (default: $TMPDIR).
    #[arg(long, value_name = "DIR", requires = "all")]
    scratch_dir: Option<PathBuf>,
    #[command(flatten)]
    lookup: LookupArgs,
    /// A compressed core (.gz, .zst) is decompressed to at most this many MiB (besides the size its own headers declare).
    #[arg(long, value_name = "MIB", default_value_t = knot::core::DEFAULT_MAX_DECOMPRESSED >> 20)]
    max_decompressed_mib: u64,
    /// `text` (SOS gcroot's shape) or `json` (fields: docs/report-fields.md, "knot heap root").
    #[arg(long, value_enum, default_value_t = HeapFormat::Text)]
    format: HeapFormat,
    /// Write to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
}

fn parse_address(s: &str) -> Result<u64, String> {
    let h = s.trim().trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(h, 16).map_err(|_| format!("{s:?} is not a hex address"))
}

const HEAP_STAT_EXIT: &str = "Exit status: 0 the heap was read (a region whose walk stopped early is a warning in the report); 2 the dump or its .NET heap could not be read (the message says why); 64 the command line is wrong.";

#[derive(Parser)]
struct HeapStatArgs {
    /// The core file (a .NET process's, with its heap: createdump --withheap or --full).
    core: PathBuf,
    #[command(flatten)]
    lookup: LookupArgs,
    /// `text` (SOS dumpheap -stat's table) or `json` (fields: docs/report-fields.md, "knot heap stat").
    #[arg(long, value_enum, default_value_t = HeapFormat::Text)]
    format: HeapFormat,
    /// A compressed core (.gz, .zst) is decompressed to at most this many MiB (besides the size its own headers declare).
    #[arg(long, value_name = "MIB", default_value_t = knot::core::DEFAULT_MAX_DECOMPRESSED >> 20)]
    max_decompressed_mib: u64,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
}

const HEAP_EXIT: &str = "Exit status: 0 the heaps were compared; 2 a dump could not be read, or its .NET heap could not be walked (the message says which and why); 64 the command line is wrong.";

#[derive(Parser)]
struct HeapDiffArgs {
    /// The earlier dump.
    old: PathBuf,
    /// The later dump (of the same program: another run, or the same process later).
    new: PathBuf,
    #[command(flatten)]
    lookup: LookupArgs,
    /// `text` or `json`.
    #[arg(long, value_enum, default_value_t = HeapFormat::Text)]
    format: HeapFormat,
    /// Types shown in the text report (JSON has every type).
    #[arg(long, value_name = "N", default_value_t = knot::report::heap_diff::TEXT_TYPES)]
    top: usize,
    /// A compressed core (.gz, .zst) is decompressed to at most this many MiB (besides the size its own headers declare).
    #[arg(long, value_name = "MIB", default_value_t = knot::core::DEFAULT_MAX_DECOMPRESSED >> 20)]
    max_decompressed_mib: u64,
    /// The memory knot may use for each dump's object graph (4G, 512M, bytes); default: its
    /// memory cgroup's limit. A graph that would not fit is not read (retained sizes left out,
    /// a diagnostic says so).
    #[arg(long, value_name = "SIZE", value_parser = knot::parse_size)]
    max_memory: Option<u64>,
    /// Where a .NET heap graph too large for the memory limit keeps its large arrays: unlinked
    /// files, mapped, whose pages the kernel can write back (default: $TMPDIR). Not a
    /// memory-backed file system (tmpfs, a memory emptyDir): that would not help.
    #[arg(long, value_name = "DIR")]
    scratch_dir: Option<PathBuf>,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// How a `knot heap` command writes its document.
#[derive(Clone, Copy, ValueEnum)]
enum HeapFormat {
    /// For people.
    Text,
    /// For programs (fields: docs/report-fields.md).
    Json,
}

#[derive(Parser)]
struct AnalyzeArgs {
    /// The core file (from the kernel, gcore or createdump). gdb's order, PROGRAM CORE, is
    /// accepted too: the first is then the program, as with --exe.
    #[arg(value_name = "CORE")]
    core: PathBuf,
    /// With PROGRAM first (gdb's order): the core file.
    #[arg(value_name = "CORE", hide = true)]
    gdb_core: Option<PathBuf>,
    #[command(flatten)]
    lookup: LookupArgs,
    /// Only rebuild the stacks: skip lock analysis and the wait-for graph.
    #[arg(long)]
    stacks_only: bool,
    /// Exit with status 3 when a deadlock (a wait-for cycle) is found, for jobs and CI scripts.
    #[arg(long, conflicts_with = "stacks_only")]
    fail_on_deadlock: bool,
    /// A compressed core (.gz, .zst) is decompressed to at most this many MiB (besides the size its own headers declare).
    #[arg(long, value_name = "MIB", default_value_t = knot::core::DEFAULT_MAX_DECOMPRESSED >> 20)]
    max_decompressed_mib: u64,
    /// The memory knot may use (4G, 512M, bytes). Default: the memory cgroup's limit it runs
    /// under (v2 memory.max, v1 memory.limit_in_bytes; the lowest of its own and its parents'),
    /// if any. A .NET heap graph that would not fit is left out, and the report says so.
    #[arg(long, value_name = "SIZE", value_parser = knot::parse_size)]
    max_memory: Option<u64>,
    /// Where a .NET heap graph too large for the memory limit keeps its large arrays: unlinked
    /// files, mapped, whose pages the kernel can write back (default: $TMPDIR). Not a
    /// memory-backed file system (tmpfs, a memory emptyDir): that would not help.
    #[arg(long, value_name = "DIR")]
    scratch_dir: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Parser)]
struct PidArgs {
    /// The process id (a thread id means its process).
    pid: i32,
    /// Also write what was read as a core file (created new, mode 0600), for `knot analyze FILE` later.
    #[arg(long, value_name = "FILE")]
    core: Option<PathBuf>,
    /// Copy at most this many MiB of memory besides the stacks and module headers (a warning says what was left out).
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    max_copy_mib: u64,
    #[command(flatten)]
    lookup: LookupArgs,
    /// Only rebuild the stacks: skip lock analysis and the wait-for graph.
    #[arg(long)]
    stacks_only: bool,
    /// Exit with status 3 when a deadlock (a wait-for cycle) is found.
    #[arg(long, conflicts_with = "stacks_only")]
    fail_on_deadlock: bool,
    #[command(flatten)]
    output: OutputArgs,
}

/// Where module files and their debug files are found: gdb's sysroot, debug-file-directory,
/// solib-search-path and program argument. One definition for every command that reads a process.
#[derive(Args)]
struct LookupArgs {
    /// Prefix for every path the dump (or process) names, like gdb's `set sysroot`. For `knot pid`
    /// the default is /proc/PID/root when knot runs in another mount namespace (another container).
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
    /// Keep inflated debug sections in DIR (by build-id), so later runs map them instead of
    /// inflating them again. Default: the user's own, $XDG_CACHE_HOME/knot or ~/.cache/knot
    /// (made private; not used if another user may write it). Safe to share between concurrent runs.
    #[arg(long, value_name = "DIR", env = "KNOT_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Keep and read no inflated debug sections: every run inflates them again (wins over
    /// --cache-dir and KNOT_CACHE_DIR).
    #[arg(long)]
    no_cache: bool,
    /// The most the cache directory may hold; the least recently used entries go first.
    #[arg(long, value_name = "MIB", default_value_t = knot::process::DEFAULT_CACHE_MAX_BYTES >> 20)]
    cache_max_mib: u64,
}

impl LookupArgs {
    fn section_cache(&self) -> Option<knot::process::SectionCache> {
        use knot::process::{SectionCache, UserCacheError};
        let max_bytes = self.cache_max_mib.saturating_mul(1 << 20);
        if self.no_cache {
            return None;
        }
        if let Some(dir) = &self.cache_dir {
            return Some(SectionCache::new(dir, max_bytes));
        }
        match SectionCache::for_user(max_bytes) {
            Ok(cache) => Some(cache),
            // No home, or one that cannot be written (a read-only container): no cache, as before.
            Err(UserCacheError::NoHome | UserCacheError::Create { .. }) => None,
            // Someone else's directory where ours should be: said, since it may be an attack.
            Err(e) => {
                eprintln!("knot: not caching debug sections: {e}");
                None
            }
        }
    }

    fn locator(self) -> Locator {
        let section_cache = self.section_cache().map(std::sync::Arc::new);
        Locator { sysroot: self.sysroot, debug_dirs: self.debug_dirs, search_dirs: self.search_dirs, executable: self.exe, no_default_debug_dir: false, section_cache }
    }
}

/// How one report is written: for `analyze` and `pid`.
#[derive(Args)]
struct OutputArgs {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Show at most N frames per stack in the text report.
    #[arg(long, value_name = "N")]
    max_frames: Option<usize>,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Colour the text report: auto = when standard output is a terminal and NO_COLOR is not set.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    color: ColorChoice,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// A line per dump for people, on standard error.
    Text,
    /// A JSON object per dump on standard output.
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// For people, on a terminal.
    Text,
    /// For programs (schema: `knot schema`).
    Json,
    /// One self-contained page: the verdict, the wait-for graph, stacks, a flame graph.
    Html,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Parser)]
struct WatchArgs {
    /// The directory dumps appear in (not searched recursively).
    dir: PathBuf,
    /// Write reports, error files and markers here instead of beside the dumps (for a read-only dump volume).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// A dump is complete once its size and time have not changed for this long.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    settle_secs: u64,
    /// Seconds between scans of DIR.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    interval_secs: u64,
    /// Handle the dumps that are there (waiting for them to settle), then exit.
    #[arg(long)]
    once: bool,
    #[command(flatten)]
    lookup: LookupArgs,
    /// Only rebuild the stacks: skip lock analysis and the wait-for graph.
    #[arg(long)]
    stacks_only: bool,
    /// With --once, exit with status 3 when some dump has a deadlock.
    #[arg(long, conflicts_with = "stacks_only")]
    fail_on_deadlock: bool,
    /// How each dump handled is logged: `text`, a line for people on standard error; `json`, one
    /// JSON object per dump on standard output, for a log pipeline (schema: `knot schema
    /// --watch-line`). Other events are lines on standard error either way.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// A compressed dump (.gz, .zst) is decompressed to at most this many MiB (besides the size its own headers declare).
    #[arg(long, value_name = "MIB", default_value_t = knot::core::DEFAULT_MAX_DECOMPRESSED >> 20)]
    max_decompressed_mib: u64,
    /// The memory knot may use per dump (4G, 512M, bytes); default: its memory cgroup's limit.
    /// A .NET heap graph that would not fit is left out, and the report says so.
    #[arg(long, value_name = "SIZE", value_parser = knot::parse_size)]
    max_memory: Option<u64>,
    /// Where a .NET heap graph too large for the memory limit keeps its large arrays: unlinked
    /// files, mapped, whose pages the kernel can write back (default: $TMPDIR). Not a
    /// memory-backed file system (tmpfs, a memory emptyDir): that would not help.
    #[arg(long, value_name = "DIR")]
    scratch_dir: Option<PathBuf>,
}

/// A command line that parsed but does not make sense: exit 64, as clap's own errors.
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// An error and its causes, each said once: a library error whose message already ends with its
/// source's words (`cannot watch D: No such file…`, thiserror's `{source}`) is not followed by
/// them again, as anyhow's `{:#}` would.
fn error_chain(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let words = cause.to_string();
        if text.is_empty() {
            text = words;
        } else if !text.ends_with(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
    }
    text
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
        Command::Watch(args) => run_watch(args),
        Command::Pid(args) => run_pid(args),
        Command::Heap(HeapCommand::Stat(args)) => run_heap_stat(args),
        Command::Heap(HeapCommand::Root(args)) => run_heap_root(args),
        Command::Heap(HeapCommand::Diff(args)) => run_heap_diff(args),
        Command::Schema(args) => {
            println!("{}", if args.watch_line { report::watch_line::json_schema() } else { report::json_schema() });
            Ok(EXIT_OK)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("knot: {}", error_chain(&e));
            ExitCode::from(if e.downcast_ref::<Usage>().is_some() { EXIT_USAGE } else { EXIT_UNREADABLE })
        }
    }
}

fn run_analyze(mut args: AnalyzeArgs) -> anyhow::Result<u8> {
    // `knot analyze PROGRAM CORE`, as gdb is run.
    if let Some(core) = args.gdb_core.take() {
        if args.lookup.exe.is_some() {
            return Err(Usage("give the program either first (knot analyze PROGRAM CORE) or as --exe, not both".into()).into());
        }
        args.lookup.exe = Some(std::mem::replace(&mut args.core, core));
    }
    let locator = args.lookup.locator();
    let bar = ProgressBar::start();
    let opts = Options {
        locator,
        stacks_only: args.stacks_only,
        progress: bar.as_ref().map(ProgressBar::hook),
        max_decompressed: Some(args.max_decompressed_mib.saturating_mul(1 << 20)),
        max_memory: args.max_memory,
        scratch_dir: args.scratch_dir,
        ..Options::default()
    };
    let analyzed = knot::analyze_keeping_process(&args.core, &opts);
    drop(bar);
    let (process, report) = analyzed?;
    // knot exits next: the kernel unmaps the dump and the module files at once.
    std::mem::forget(process);
    emit(&report, &args.output)?;
    let code = if args.fail_on_deadlock && !report.deadlocks.is_empty() { EXIT_DEADLOCK } else { EXIT_OK };
    // The report's thousands of strings are freed at exit too.
    std::mem::forget(report);
    Ok(code)
}

fn run_heap_root(args: HeapRootArgs) -> anyhow::Result<u8> {
    let opts = Options {
        locator: args.lookup.locator(),
        max_decompressed: Some(args.max_decompressed_mib.saturating_mul(1 << 20)),
        max_memory: args.max_memory,
        scratch_dir: args.scratch_dir,
        ..Options::default()
    };
    let search = if args.all { knot::heap::RootSearch::AllRoots } else { knot::heap::RootSearch::FirstPath };
    let r = knot::heap::heap_root(&args.core, &opts, args.address, search)?;
    let rendered = match args.format {
        HeapFormat::Text => report::heap_root::render(&r),
        HeapFormat::Json => report::heap_root::to_json(&r) + "\n",
    };
    match &args.output {
        Some(path) => std::fs::write(path, rendered).with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let _ = std::io::stdout().lock().write_all(rendered.as_bytes());
        }
    }
    Ok(EXIT_OK)
}

/// Renders the report and writes it to `output` or standard output; a verdict reached without
/// facts it needs is said on stderr too, in one line, whatever the format.
fn emit(report: &report::Report, how: &OutputArgs) -> anyhow::Result<()> {
    if !report.verdict_limits.is_empty() {
        let what: Vec<String> = report.verdict_limits.iter().map(|l| format!("{} missing (fix: {})", l.short, l.fix)).collect();
        eprintln!("knot: the verdict ({}) is limited: {}", report::words::verdict(report.verdict).to_uppercase(), what.join("; "));
    }
    let (output, max_frames) = (how.output.as_deref(), how.max_frames);
    if matches!(how.format, Format::Json) {
        // Streamed: the JSON of a big dump is as large as the report itself.
        return match output {
            Some(path) => std::fs::File::create(path)
                .and_then(|f| report::write_json(report, f))
                .with_context(|| format!("cannot write {}", path.display())),
            None => {
                // A closed pipe (`knot … | head`) is not an error worth reporting.
                let _ = report::write_json(report, std::io::stdout().lock());
                Ok(())
            }
        };
    }
    let rendered = match how.format {
        Format::Text => {
            let color = use_color(how.color, output.is_some());
            report::text::render_colored(report, &TextOptions { max_frames }, color)
        }
        Format::Json => report::to_json(report) + "\n",
        Format::Html => report::html::render(report),
    };
    write_out(output, &rendered)
}

/// Writes `rendered` to `output`, or to standard output.
fn write_out(output: Option<&std::path::Path>, rendered: &str) -> anyhow::Result<()> {
    match output {
        Some(path) => std::fs::write(path, rendered).with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`knot … | head`) is not an error worth reporting.
            let _ = out.write_all(rendered.as_bytes());
        }
    }
    Ok(())
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn run_pid(args: PidArgs) -> anyhow::Result<u8> {
    use knot::live::{self, LiveOptions};
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    let mut lopts = LiveOptions { max_copy_bytes: args.max_copy_mib.saturating_mul(1 << 20), ..LiveOptions::default() };
    // Hidden hooks for the tests that interrupt knot while it holds the process, or fail there.
    lopts.test_pause_after_attach = std::env::var("KNOT_TEST_PAUSE_AFTER_ATTACH_MS").ok().and_then(|v| v.parse().ok()).map(Duration::from_millis);
    lopts.test_fail_after_attach = std::env::var_os("KNOT_TEST_FAIL_AFTER_ATTACH").is_some();
    let (cancel, attached) = (lopts.cancel.clone(), lopts.attached.clone());
    // ptrace requests only work from the thread that attached: the handler asks it to let go and
    // waits until it has, then exits. (Were knot killed outright, the kernel would detach; with
    // PTRACE_SEIZE no stop signal is left behind.)
    let _ = ctrlc::set_handler(move || {
        cancel.store(true, Ordering::SeqCst);
        let until = Instant::now() + Duration::from_secs(3);
        while attached.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        eprintln!("knot pid: interrupted; the process was let go");
        std::process::exit(i32::from(EXIT_INTERRUPTED));
    });

    let snapshot = match live::take(args.pid, &lopts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("knot pid: {e}");
            return Ok(if e.is_refusal() {
                EXIT_REFUSED
            } else if e.is_interruption() {
                EXIT_INTERRUPTED
            } else {
                EXIT_UNREADABLE
            });
        }
    };
    let pid = snapshot.pid;
    let bytes = snapshot.core_bytes();
    if let Some(path) = &args.core {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).with_context(|| format!("cannot create {}", path.display()))?;
        f.write_all(&bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut locator = args.lookup.locator();
    if locator.sysroot.is_none() && other_mount_namespace(pid) {
        locator.sysroot = Some(PathBuf::from(format!("/proc/{pid}/root")));
    }
    let core = knot::core::Core::from_bytes(format!("/proc/{pid}"), bytes)?;
    let process = knot::process::Process::from_core(core, &locator);
    let opts = Options { locator, stacks_only: args.stacks_only, ..Options::default() };
    let report = knot::report_for(&process, &opts);
    emit(&report, &args.output)?;
    Ok(if args.fail_on_deadlock && !report.deadlocks.is_empty() { EXIT_DEADLOCK } else { EXIT_OK })
}

/// Whether process `pid` sees another file system than knot (another container): then the
/// paths it names are read through `/proc/PID/root`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn other_mount_namespace(pid: u32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
    matches!((ns("self"), ns(&pid.to_string())), (Some(a), Some(b)) if a != b)
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn run_pid(_args: PidArgs) -> anyhow::Result<u8> {
    eprintln!("knot pid: reading a live process needs Linux on x86_64");
    Ok(EXIT_REFUSED)
}

/// `--color auto`: colour when standard output is a terminal, NO_COLOR is unset (or empty) and
/// TERM is not `dumb`; never into a file.
fn use_color(choice: ColorChoice, to_file: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
            !to_file && !no_color && !dumb && std::io::stdout().is_terminal()
        }
    }
}

/// The progress bar on standard error: only on a terminal, and only once the work has taken a
/// second (a quick analysis shows nothing). Dropping it clears it.
struct ProgressBar {
    bar: indicatif::ProgressBar,
    /// The words of the step under way (the phase's), to which the heap's progress is added.
    words: Arc<std::sync::Mutex<&'static str>>,
    done: Option<std::sync::mpsc::Sender<()>>,
    shower: Option<std::thread::JoinHandle<()>>,
}

impl ProgressBar {
    /// The analysis's phases as a bar.
    fn start() -> Option<ProgressBar> {
        Self::shown_after_a_second(Some(Phase::ALL.len() as u64), "{spinner} [{elapsed}] [{bar:24}] {pos}/{len} {msg}", "")
    }

    /// One step of unknown length (a heap walk): a spinner with its words.
    fn spinner(message: &'static str) -> Option<ProgressBar> {
        Self::shown_after_a_second(None, "{spinner} [{elapsed}] {msg}", message)
    }

    /// Drawn on stderr only when it is a terminal, and only once the work has taken a second;
    /// while the heap is read, its step and the work done and left follow the words.
    fn shown_after_a_second(len: Option<u64>, template: &str, message: &'static str) -> Option<ProgressBar> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = indicatif::ProgressBar::with_draw_target(len, indicatif::ProgressDrawTarget::hidden());
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message);
        let words = Arc::new(std::sync::Mutex::new(message));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (shown, said) = (bar.clone(), words.clone());
        let shower = std::thread::spawn(move || {
            if rx.recv_timeout(Duration::from_secs(1)) != Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            shown.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            shown.enable_steady_tick(Duration::from_millis(120));
            while rx.recv_timeout(Duration::from_millis(250)) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                let base = said.lock().map(|w| *w).unwrap_or("");
                shown.set_message(match knot::heap_progress() {
                    Some(p) if base.is_empty() || base == p.step.label().0 => heap_words(&p),
                    Some(p) => format!("{base} · heap: {}", heap_words(&p)),
                    None => base.to_string(),
                });
            }
        });
        Some(ProgressBar { bar, words, done: Some(tx), shower: Some(shower) })
    }

    fn hook(&self) -> Progress {
        let (bar, words) = (self.bar.clone(), self.words.clone());
        Progress(Arc::new(move |phase: Phase| {
            bar.set_position(Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0) as u64);
            bar.set_message(phase.label());
            if let Ok(mut w) = words.lock() {
                *w = phase.label();
            }
        }))
    }
}

/// The heap's step, with its work done and left: "reading references 12.3 M of 169.2 M objects".
fn heap_words(p: &knot::HeapProgress) -> String {
    let (step, unit) = p.step.label();
    let (done, total) = (p.done.min(p.total), p.total);
    if unit == "bytes" {
        let (shift, unit) = if total >= 1 << 30 { (30, "GiB") } else { (20, "MiB") };
        let f = |b: u64| b as f64 / (1u64 << shift) as f64;
        format!("{step} {:.1} of {:.1} {unit}", f(done), f(total))
    } else {
        let m = |n: u64| n as f64 / 1e6;
        format!("{step} {:.1} M of {:.1} M {unit} ({:.1} M left)", m(done), m(total), m(total - done))
    }
}

impl Drop for ProgressBar {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.shower.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

fn run_heap_stat(args: HeapStatArgs) -> anyhow::Result<u8> {
    let opts = knot::heap::HeapOptions { locator: args.lookup.locator(), max_decompressed: Some(args.max_decompressed_mib.saturating_mul(1 << 20)), ..Default::default() };
    let spinner = ProgressBar::spinner("walking the GC heap");
    let r = knot::heap::stat(&args.core, &opts);
    drop(spinner);
    let r = r?;
    let rendered = match args.format {
        HeapFormat::Text => r.to_text(),
        HeapFormat::Json => r.to_json() + "\n",
    };
    write_out(args.output.as_deref(), &rendered)?;
    Ok(EXIT_OK)
}

fn run_heap_diff(args: HeapDiffArgs) -> anyhow::Result<u8> {
    let opts = knot::heap::HeapOptions { locator: args.lookup.locator(), max_decompressed: Some(args.max_decompressed_mib.saturating_mul(1 << 20)), max_memory: args.max_memory, scratch_dir: args.scratch_dir };
    let d = knot::heap::diff(&args.old, &args.new, &opts)?;
    let rendered = match args.format {
        HeapFormat::Text => d.to_text(args.top),
        HeapFormat::Json => d.to_json() + "\n",
    };
    write_out(args.output.as_deref(), &rendered)?;
    Ok(EXIT_OK)
}

fn run_watch(args: WatchArgs) -> anyhow::Result<u8> {
    let locator = args.lookup.locator();
    let opts = WatchOptions {
        dir: args.dir,
        out: args.out,
        settle: Duration::from_secs(args.settle_secs),
        interval: Duration::from_secs(args.interval_secs.max(1)),
        once: args.once,
        analysis: Options { locator, stacks_only: args.stacks_only, max_decompressed: Some(args.max_decompressed_mib.saturating_mul(1 << 20)), max_memory: args.max_memory, scratch_dir: args.scratch_dir, ..Options::default() },
    };
    watch::check_dirs(&opts)?;
    if !opts.once {
        // A sidecar is stopped with SIGTERM; every file is written by rename, so stopping
        // anywhere leaves nothing half-written in place. (As PID 1 in a container, a signal
        // without a handler would be ignored.)
        let _ = ctrlc::set_handler(|| {
            eprintln!("knot watch: stopping");
            std::process::exit(i32::from(EXIT_OK));
        });
        eprintln!(
            "knot watch: watching {} every {}s (a dump is complete after {}s unchanged); reports go to {}",
            opts.dir.display(),
            opts.interval.as_secs(),
            opts.settle.as_secs(),
            opts.out.as_ref().unwrap_or(&opts.dir).display()
        );
    }
    let mut log = |line: &str| eprintln!("knot watch: {line}");
    // One object per line, flushed at once: a log agent reads the pod's stdout as it comes.
    let mut json_line = |line: &knot::report::watch_line::WatchLine| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", line.to_json());
        let _ = out.flush();
    };
    let on_dump: Option<&mut dyn FnMut(&knot::report::watch_line::WatchLine)> = if args.log_format == LogFormat::Json { Some(&mut json_line) } else { None };
    let summary = watch::run_with(&opts, &mut log, on_dump)?;
    if opts.once {
        eprintln!(
            "knot watch: {} analyzed ({} with a deadlock), {} could not be analyzed, {} not written",
            summary.analyzed, summary.deadlocked, summary.failed, summary.write_errors
        );
    }
    Ok(if summary.write_errors > 0 {
        EXIT_UNREADABLE
    } else if args.fail_on_deadlock && summary.deadlocked > 0 {
        EXIT_DEADLOCK
    } else if summary.failed > 0 {
        EXIT_WATCH_FAILED
    } else {
        EXIT_OK
    })
}
