//! `cargo xtask bench [--threads N] [--runs N] [--kind gcore|kernel|all] [--criterion]`
//! `cargo xtask bench --scale [--threads N] [--gib G] [--runs N] [--gcore] [--keep]` (see
//! [`crate::scale`]: a core of G GiB with N threads against the small ones).
//!
//! End-to-end timings of knot against its peers on one big dump: the `many_threads` sample
//! with N blocked threads (default 600), dumped by gcore and by the kernel. In one run, on the
//! same core, each tool is run once to warm up (the core is then in the page cache), then N
//! rounds in turn (knot, knot --stacks-only, gdb, eu-stack, knot, ...) so that a drift of the
//! machine hits them alike. Each child is reaped with `wait4`, whose rusage gives that child's
//! own peak RSS (`ru_maxrss`) and CPU time.
//!
//! Prints a table and the targets (met or not; nothing is asserted), and writes the raw
//! numbers to `target/bench/native.json`. `--criterion` then runs `cargo bench -p knot`.

use anyhow::{Context, Result, bail};
use knot_samples::{Availability, DumpKind, SampleDump};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The targets.
const GDB_OVER_KNOT_TARGET: f64 = 10.0;
const EU_STACK_OVER_KNOT_TARGET: f64 = 1.0;
/// Our reading of "peak RSS far below the dump size": at most a quarter of the core.
const RSS_OVER_CORE_TARGET: f64 = 0.25;

#[derive(clap::Args)]
pub struct Args {
    /// `dotnet`: knot against dotnet-dump (syncblk + clrstack -all) on a committed .NET heap
    /// dump instead (see [`crate::bench_dotnet`]; takes --runs and --sample). `dotnet-heap`: knot
    /// against `dumpheap -stat` on a multi-GB heap dump made here ([`crate::bench_dotnet_heap`];
    /// --heap-mib, --runs, --remake).
    #[arg(value_enum)]
    suite: Option<Suite>,
    /// With `dotnet-heap`: the heap to fill, in MiB.
    #[arg(long, default_value_t = 2048)]
    heap_mib: u64,
    /// With `dotnet-heap`: make the dump again even when one is there.
    #[arg(long)]
    remake: bool,
    /// With `dotnet`: the committed sample whose heap dump is measured.
    #[arg(long, default_value = "autofac_container")]
    sample: String,
    /// Blocked threads in the many_threads sample (the core has one more: main).
    /// Default 600; with --scale, 1000.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// Timed runs per tool, after one warm-up run. Default 5; with --scale, 3.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    runs: Option<u32>,
    /// Which dumps to measure.
    #[arg(long, value_enum, default_value_t = KindArg::All, conflicts_with = "scale")]
    kind: KindArg,
    /// Afterwards, run the criterion micro-benchmarks (`cargo bench -p knot --bench analyze`).
    #[arg(long, conflicts_with = "scale")]
    criterion: bool,
    /// Scale case: a kernel core of --gib GiB with --threads threads, measured beside the
    /// small many_threads cores (wall, CPU, peak RSS, page faults); `target/bench/scale.json`.
    #[arg(long)]
    scale: bool,
    /// With --scale: GiB of anonymous memory the big core's process maps (touched once per
    /// 64 MiB, so the kernel's core is sparse).
    #[arg(long, default_value_t = 8, requires = "scale", value_parser = clap::value_parser!(u32).range(1..=1024))]
    gib: u32,
    /// With --scale: also dump the big process with gcore (gdb 13 writes every zero page:
    /// G GiB of disk written for real), and measure that core too.
    #[arg(long, requires = "scale")]
    gcore: bool,
    /// With --scale: keep the big core(s) afterwards (and reuse them next time).
    #[arg(long, requires = "scale")]
    keep: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum KindArg {
    Gcore,
    Kernel,
    All,
}

impl KindArg {
    fn kinds(self) -> &'static [DumpKind] {
        match self {
            KindArg::Gcore => &[DumpKind::Gcore],
            KindArg::Kernel => &[DumpKind::Kernel],
            KindArg::All => &DumpKind::ALL,
        }
    }
}

/// One tool's command line on one dump.
pub(crate) struct Tool {
    pub(crate) name: &'static str,
    pub(crate) argv: Vec<OsString>,
}

/// One run of a tool.
#[derive(Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) wall: Duration,
    /// Peak resident set, KiB (Linux's unit for `ru_maxrss`).
    pub(crate) max_rss_kib: i64,
    pub(crate) user: Duration,
    pub(crate) sys: Duration,
    /// Page faults (`ru_minflt`, `ru_majflt`): pages the child mapped in, its heap and stacks
    /// as well as the files it mmapped (a file read with read/pread shows in `rchar` instead).
    pub(crate) minflt: i64,
    pub(crate) majflt: i64,
    /// Bytes the child read with read-like syscalls (`rchar` of /proc/PID/io, read from the
    /// zombie before it is reaped), every file included; `None` if unreadable.
    pub(crate) rchar: Option<u64>,
    /// Exit code, or `None` when killed by a signal.
    pub(crate) code: Option<i32>,
}

impl Sample {
    pub(crate) fn cpu(&self) -> Duration {
        self.user + self.sys
    }
    pub(crate) fn faults(&self) -> u64 {
        (self.minflt.max(0) + self.majflt.max(0)) as u64
    }
}

struct Measured {
    tool: Tool,
    warmup: Sample,
    runs: Vec<Sample>,
}

impl Measured {
    fn walls(&self) -> Vec<f64> {
        self.runs.iter().map(|s| s.wall.as_secs_f64()).collect()
    }
    fn median(&self) -> f64 {
        median(&self.walls())
    }
    fn min(&self) -> f64 {
        self.walls().into_iter().fold(f64::INFINITY, f64::min)
    }
    /// The largest peak RSS over the timed runs, bytes.
    fn peak_rss(&self) -> u64 {
        self.runs.iter().map(|s| s.max_rss_kib.max(0) as u64 * 1024).max().unwrap_or(0)
    }
    fn median_cpu(&self) -> f64 {
        median(&self.runs.iter().map(|s| (s.user + s.sys).as_secs_f64()).collect::<Vec<_>>())
    }
    fn failed_runs(&self) -> usize {
        self.runs.iter().filter(|s| s.code != Some(0)).count()
    }
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Suite {
    Dotnet,
    /// knot against SOS `dumpheap -stat` on a dump with a multi-GB heap made here.
    DotnetHeap,
}

pub fn run(a: Args) -> Result<()> {
    if a.suite == Some(Suite::DotnetHeap) {
        return crate::bench_dotnet_heap::run(a.runs.unwrap_or(3), a.heap_mib, a.remake);
    }
    if a.suite == Some(Suite::Dotnet) {
        return crate::bench_dotnet::run(a.runs.unwrap_or(5), &a.sample);
    }
    if a.scale {
        return crate::scale::run(crate::scale::Opts {
            threads: a.threads.unwrap_or(1000),
            gib: a.gib,
            runs: a.runs.unwrap_or(3),
            gcore: a.gcore,
            keep: a.keep,
        });
    }
    let a = Plain { threads: a.threads.unwrap_or(600), runs: a.runs.unwrap_or(5), kind: a.kind, criterion: a.criterion };
    let root = knot_samples::workspace_root();
    let target = target_dir(&root);
    let out_dir = target.join("bench");
    fs::create_dir_all(out_dir.join("logs"))?;

    // The dumps first: making them runs gdb and gcc, which should not overlap the timings.
    let threads = a.threads.to_string();
    let mut dumps: Vec<SampleDump> = Vec::new();
    let mut skipped_dumps: Vec<Value> = Vec::new();
    for &kind in a.kind.kinds() {
        let started = Instant::now();
        match knot_samples::ensure_with_args("many_threads", kind, &[threads.as_str()]) {
            Availability::Ready(d) => {
                eprintln!(
                    "dump    many_threads {threads} {kind}: {} ({:.1}s)",
                    d.core.display(),
                    started.elapsed().as_secs_f64()
                );
                dumps.push(d);
            }
            Availability::Skipped(why) => {
                println!("skipped many_threads {threads} {kind}: {why}");
                skipped_dumps.push(json!({"kind": kind.as_str(), "reason": why}));
            }
        }
    }
    if dumps.is_empty() {
        bail!("no dump could be made on this machine (see above)");
    }

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let (knot, has_stacks_only) = build_knot(&root, &target)?;

    let gdb = find_tool("gdb");
    let eu_stack = find_tool("eu-stack");
    let mut skipped_tools: Vec<(String, String)> = Vec::new();
    if !has_stacks_only {
        skipped_tools.push((
            "knot --stacks-only".into(),
            "`knot analyze --help` has no --stacks-only flag in this build".into(),
        ));
    }
    if gdb.is_none() {
        skipped_tools.push(("gdb".into(), "gdb not found on PATH (apt-get install gdb)".into()));
    }
    if eu_stack.is_none() {
        skipped_tools.push((
            "eu-stack".into(),
            "eu-stack not found on PATH; install it with: apt-get install elfutils".into(),
        ));
    }

    let commit = git(&root, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&root, &["status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock"])
        .is_some_and(|s| !s.is_empty());
    let machine = machine_info();
    let versions = json!({
        "knot": knot_version(&knot),
        "gdb": gdb.as_ref().and_then(|g| first_line(g, "--version")),
        "eu-stack": eu_stack.as_ref().and_then(|e| first_line(e, "--version")),
    });
    let date = utc_now();
    let load_before = loadavg();
    if load_before.is_some_and(|l| l > 0.5) {
        eprintln!(
            "note: the 1-minute load average is {:.2}: other work on this machine will show in the timings",
            load_before.unwrap_or_default()
        );
    }

    let mut dump_results: Vec<Value> = Vec::new();
    let mut tables = String::new();
    for d in &dumps {
        let meta = fs::metadata(&d.core).with_context(|| format!("reading {}", d.core.display()))?;
        let core_size = meta.len();
        let core_alloc = meta.blocks() * 512;
        let core_threads = d.gdb_threads().map(|t| t.len()).ok();

        let mut tools = vec![Tool { name: "knot analyze", argv: knot_argv(&knot, d, false) }];
        if has_stacks_only {
            tools.push(Tool { name: "knot --stacks-only", argv: knot_argv(&knot, d, true) });
        }
        if let Some(g) = &gdb {
            tools.push(Tool { name: "gdb", argv: gdb_argv(g, d) });
        }
        if let Some(e) = &eu_stack {
            tools.push(Tool { name: "eu-stack", argv: eu_stack_argv(e, d) });
        }

        eprintln!("measure {} {}: warm-up, then {} rounds", d.name, d.kind, a.runs);
        let log = |t: &Tool| out_dir.join("logs").join(format!("{}-{}.stderr", d.kind, t.name.replace([' ', '-'], "_")));
        let mut warmups = Vec::new();
        for t in &tools {
            let s = run_once(&t.argv, &log(t))?;
            if s.code != Some(0) && t.name.starts_with("knot") {
                bail!("{} failed on {} (exit {:?}); see {}", t.name, d.core.display(), s.code, log(t).display());
            }
            warmups.push(s);
        }
        let mut runs: Vec<Vec<Sample>> = vec![Vec::new(); tools.len()];
        for _ in 0..a.runs {
            for (i, t) in tools.iter().enumerate() {
                runs[i].push(run_once(&t.argv, &log(t))?);
            }
        }
        let measured: Vec<Measured> = tools
            .into_iter()
            .zip(warmups)
            .zip(runs)
            .map(|((tool, warmup), runs)| Measured { tool, warmup, runs })
            .collect();

        let (table, value) = report(d, core_size, core_alloc, core_threads, &measured, &skipped_tools, a.runs);
        print!("{table}");
        tables.push_str(&table);
        dump_results.push(value);
    }

    let doc = json!({
        "date_utc": date,
        "commit": commit,
        "knot_sources_dirty": dirty,
        "machine": machine,
        "versions": versions,
        "threads_arg": a.threads,
        "runs": a.runs,
        "warmup_runs": 1,
        "page_cache": "warm (each tool ran once before the timed rounds)",
        "loadavg_1min_before": load_before,
        "loadavg_1min_after": loadavg(),
        "targets": {
            "gdb_over_knot_time_at_least": GDB_OVER_KNOT_TARGET,
            "eu_stack_over_knot_time_above": EU_STACK_OVER_KNOT_TARGET,
            "knot_peak_rss_over_core_size_at_most": RSS_OVER_CORE_TARGET,
        },
        "dumps": dump_results,
        "skipped_dumps": skipped_dumps,
        "skipped_tools": skipped_tools.iter().map(|(t, r)| json!({"tool": t, "reason": r})).collect::<Vec<_>>(),
    });
    let json_path = out_dir.join("native.json");
    fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    println!(
        "\nmeasured {}{} on {} ({} cores), {date}\nraw numbers: {}",
        &commit[..commit.len().min(12)],
        if dirty { " (with uncommitted changes in src/)" } else { "" },
        machine["cpu"].as_str().unwrap_or("?"),
        machine["cores"],
        json_path.display()
    );

    if a.criterion {
        eprintln!("bench   cargo bench -p knot --bench analyze");
        let status = Command::new(&cargo)
            .current_dir(&root)
            .args(["bench", "-p", "knot", "--bench", "analyze"])
            .status()
            .context("running cargo bench -p knot")?;
        if !status.success() {
            bail!("cargo bench -p knot --bench analyze failed ({status})");
        }
    }
    Ok(())
}

/// The arguments of the plain (not --scale) bench.
struct Plain {
    threads: u32,
    runs: u32,
    kind: KindArg,
    criterion: bool,
}

fn report(
    d: &SampleDump,
    core_size: u64,
    core_alloc: u64,
    core_threads: Option<usize>,
    m: &[Measured],
    skipped: &[(String, String)],
    runs: u32,
) -> (String, Value) {
    use std::fmt::Write;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\nmany_threads, {} core: {} threads, {} ({} allocated on disk)\n{}",
        d.kind,
        core_threads.map_or("?".into(), |n| n.to_string()),
        mib(core_size),
        mib(core_alloc),
        d.core.display()
    );
    let _ = writeln!(
        t,
        "  {:<20} {:>10} {:>10} {:>10} {:>12}  notes",
        "tool",
        "median",
        "min",
        "cpu (med)",
        "peak RSS"
    );
    for x in m {
        let failed = x.failed_runs();
        let note = if failed > 0 || x.warmup.code != Some(0) {
            format!("exit {} in {failed}/{runs} runs", fmt_code(x.runs.iter().chain([&x.warmup]).find(|s| s.code != Some(0)).and_then(|s| s.code)))
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "  {:<20} {:>9.3}s {:>9.3}s {:>9.3}s {:>12}  {note}",
            x.tool.name,
            x.median(),
            x.min(),
            x.median_cpu(),
            mib(x.peak_rss())
        );
    }
    for (tool, why) in skipped {
        let _ = writeln!(t, "  {tool:<20} skipped: {why}");
    }

    let get = |name: &str| m.iter().find(|x| x.tool.name == name);
    let knot = get("knot analyze").expect("knot is always measured");
    let ratio = |peer: &str, k: &Measured| get(peer).map(|p| p.median() / k.median());
    let gdb_ratio = ratio("gdb", knot);
    let eu_ratio = ratio("eu-stack", knot);
    let rss_ratio = knot.peak_rss() as f64 / core_size as f64;
    let so = get("knot --stacks-only");
    let gdb_so = so.and_then(|k| ratio("gdb", k));
    let eu_so = so.and_then(|k| ratio("eu-stack", k));

    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    let _ = writeln!(t, "  ratios (medians; knot = `knot analyze --format json`):");
    match gdb_ratio {
        Some(r) => {
            let _ = writeln!(
                t,
                "    gdb / knot time       {r:>7.1}x   target >= {GDB_OVER_KNOT_TARGET}x: {}",
                verdict(r >= GDB_OVER_KNOT_TARGET)
            );
        }
        None => {
            let _ = writeln!(t, "    gdb / knot time       n/a (gdb skipped)");
        }
    }
    match eu_ratio {
        Some(r) => {
            let _ = writeln!(
                t,
                "    eu-stack / knot time  {r:>7.1}x   target > {EU_STACK_OVER_KNOT_TARGET}x (knot faster): {}",
                verdict(r > EU_STACK_OVER_KNOT_TARGET)
            );
        }
        None => {
            let _ = writeln!(t, "    eu-stack / knot time  n/a (eu-stack skipped)");
        }
    }
    let _ = writeln!(
        t,
        "    knot peak RSS / core  {rss_ratio:>7.3}    target <= {RSS_OVER_CORE_TARGET} (far below the dump): {}  ({} of {})",
        verdict(rss_ratio <= RSS_OVER_CORE_TARGET),
        mib(knot.peak_rss()),
        mib(core_size)
    );
    let cpu_ratio = |peer: &str| get(peer).map(|p| p.median_cpu() / knot.median_cpu());
    let gdb_cpu = cpu_ratio("gdb");
    let eu_cpu = cpu_ratio("eu-stack");
    let _ = writeln!(
        t,
        "    CPU time (user+sys, less sensitive to a busy machine): gdb / knot {}, eu-stack / knot {}",
        gdb_cpu.map_or("n/a".into(), |r| format!("{r:.1}x")),
        eu_cpu.map_or("n/a".into(), |r| format!("{r:.1}x"))
    );
    if let Some(so) = so {
        let _ = writeln!(
            t,
            "    with --stacks-only: gdb / knot {}, eu-stack / knot {}, peak RSS / core {:.3}",
            gdb_so.map_or("n/a".into(), |r| format!("{r:.1}x")),
            eu_so.map_or("n/a".into(), |r| format!("{r:.1}x")),
            so.peak_rss() as f64 / core_size as f64
        );
    }

    let tools: Vec<Value> = m
        .iter()
        .map(|x| {
            json!({
                "tool": x.tool.name,
                "command": x.tool.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
                "wall_s_median": x.median(),
                "wall_s_min": x.min(),
                "cpu_s_median": x.median_cpu(),
                "peak_rss_bytes": x.peak_rss(),
                "warmup": sample_json(&x.warmup),
                "runs": x.runs.iter().map(sample_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    let value = json!({
        "sample": d.name,
        "kind": d.kind.as_str(),
        "core": d.core,
        "binary": d.binary,
        "core_size_bytes": core_size,
        "core_allocated_bytes": core_alloc,
        "core_threads": core_threads,
        "tools": tools,
        "ratios": {
            "gdb_over_knot_time": gdb_ratio,
            "eu_stack_over_knot_time": eu_ratio,
            "knot_peak_rss_over_core_size": rss_ratio,
            "gdb_over_knot_cpu": gdb_cpu,
            "eu_stack_over_knot_cpu": eu_cpu,
            "gdb_over_knot_stacks_only_time": gdb_so,
            "eu_stack_over_knot_stacks_only_time": eu_so,
        },
        "targets_met": {
            "gdb_over_knot_time": gdb_ratio.map(|r| r >= GDB_OVER_KNOT_TARGET),
            "eu_stack_over_knot_time": eu_ratio.map(|r| r > EU_STACK_OVER_KNOT_TARGET),
            "knot_peak_rss_over_core_size": rss_ratio <= RSS_OVER_CORE_TARGET,
        },
    });
    (t, value)
}

/// The workspace's target directory (`$CARGO_TARGET_DIR`, relative to the root, or `target`).
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => root.join(t),
        None => root.join("target"),
    }
}

/// `cargo build --release -p knot`; the binary, and whether it has `analyze --stacks-only`.
pub(crate) fn build_knot(root: &Path, target: &Path) -> Result<(PathBuf, bool)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("build   cargo build --release -p knot");
    let status = Command::new(&cargo)
        .current_dir(root)
        .args(["build", "--release", "-p", "knot"])
        .status()
        .context("running cargo build --release -p knot")?;
    if !status.success() {
        bail!("cargo build --release -p knot failed ({status})");
    }
    let knot = target.join("release").join("knot");
    let help = Command::new(&knot)
        .args(["analyze", "--help"])
        .output()
        .with_context(|| format!("running {} analyze --help", knot.display()))?;
    Ok((knot, String::from_utf8_lossy(&help.stdout).contains("--stacks-only")))
}

pub(crate) fn sample_json(s: &Sample) -> Value {
    json!({
        "wall_s": s.wall.as_secs_f64(),
        "user_s": s.user.as_secs_f64(),
        "sys_s": s.sys.as_secs_f64(),
        "max_rss_kib": s.max_rss_kib,
        "minor_faults": s.minflt,
        "major_faults": s.majflt,
        "rchar_bytes": s.rchar,
        "exit_code": s.code,
    })
}

pub(crate) fn fmt_code(c: Option<i32>) -> String {
    c.map_or("by signal".into(), |c| c.to_string())
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

pub(crate) fn knot_argv(knot: &Path, d: &SampleDump, stacks_only: bool) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![knot.into(), "analyze".into(), d.core.clone().into()];
    v.extend(["--format", "json", "-o", "/dev/null"].map(OsString::from));
    if stacks_only {
        v.push("--stacks-only".into());
    }
    // The same files gdb is given: the binary (the path the dump records is the maker's
    // temporary directory), and the sample's sysroot and debug directory if it has them.
    v.push("--exe".into());
    v.push(d.binary.clone().into());
    if let Some(s) = &d.sysroot {
        v.push("--sysroot".into());
        v.push(s.clone().into());
    }
    if let Some(dd) = &d.debug_dir {
        v.push("--debug-dir".into());
        v.push(dd.clone().into());
    }
    v
}

pub(crate) fn gdb_argv(gdb: &Path, d: &SampleDump) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![gdb.into()];
    v.extend(["-nx", "-batch", "-iex", "set debuginfod enabled off"].map(OsString::from));
    if let Some(s) = &d.sysroot {
        v.push("-iex".into());
        v.push(format!("set sysroot {}", s.display()).into());
    }
    if let Some(dd) = &d.debug_dir {
        v.push("-iex".into());
        v.push(format!("set debug-file-directory {}", dd.display()).into());
    }
    v.extend(["-ex", "thread apply all bt"].map(OsString::from));
    v.push(d.binary.clone().into());
    v.push(d.core.clone().into());
    v
}

pub(crate) fn eu_stack_argv(eu: &Path, d: &SampleDump) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![eu.into(), "--core".into(), d.core.clone().into()];
    v.push("--executable".into());
    v.push(d.binary.clone().into());
    if let Some(s) = &d.sysroot {
        v.push("--sysroot".into());
        v.push(s.clone().into());
    }
    if let Some(dd) = &d.debug_dir {
        v.push(format!("--debuginfo-path={}", dd.display()).into());
    }
    v
}

/// Runs `argv` to its end (stdout to /dev/null, stderr to `stderr`) and reaps it with `wait4`,
/// for its own rusage.
pub(crate) fn run_once(argv: &[OsString], stderr: &Path) -> Result<Sample> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(stderr).with_context(|| format!("creating {}", stderr.display()))?)
        // No network look-ups of debug files (gdb's and elfutils' debuginfod), C messages.
        .env_remove("DEBUGINFOD_URLS")
        .env("LC_ALL", "C");
    let started = Instant::now();
    let child = cmd.spawn().with_context(|| format!("starting {}", argv[0].to_string_lossy()))?;
    let pid = child.id() as libc::pid_t;
    // First wait without reaping (WNOWAIT): the zombie's /proc/PID/io still holds its totals.
    loop {
        // SAFETY: a zeroed siginfo_t is a valid value; waitid fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child, not yet reaped; WNOWAIT leaves it so.
        let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if r == 0 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            bail!("waitid on {}: {err}", argv[0].to_string_lossy());
        }
    }
    let wall = started.elapsed();
    let rchar = fs::read_to_string(format!("/proc/{pid}/io")).ok().and_then(|io| {
        io.lines().find_map(|l| l.strip_prefix("rchar:")).and_then(|v| v.trim().parse::<u64>().ok())
    });
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our child, not yet reaped (std's Child is never waited on here);
        // the pointers are to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if r == -1 && err.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        bail!("wait4 on {}: {err}", argv[0].to_string_lossy());
    }
    drop(child);
    let code = if libc::WIFEXITED(status) { Some(libc::WEXITSTATUS(status)) } else { None };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok(Sample {
        wall,
        max_rss_kib: ru.ru_maxrss,
        user: tv(ru.ru_utime),
        sys: tv(ru.ru_stime),
        minflt: ru.ru_minflt,
        majflt: ru.ru_majflt,
        rchar,
        code,
    })
}

pub(crate) fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
    })
}

pub(crate) fn first_line(program: &Path, arg: &str) -> Option<String> {
    let out = Command::new(program).arg(arg).env("LC_ALL", "C").output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_string)
}

pub(crate) fn knot_version(knot: &Path) -> Option<String> {
    first_line(knot, "--version")
}

pub(crate) fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").current_dir(root).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub(crate) fn machine_info() -> Value {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string()));
    let mem_kib = fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpu": cpu,
        "mem_total_bytes": mem_kib.map(|k| k * 1024),
        "kernel": fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
    })
}

/// The 1-minute load average (other work competing for the cores).
pub(crate) fn loadavg() -> Option<f64> {
    fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
