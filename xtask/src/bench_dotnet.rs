//! `cargo xtask bench dotnet [--runs N] [--sample NAME]`: knot against SOS on one .NET heap dump.
//!
//! In one run, on the same committed heap dump (default: autofac_container, the container
//! deadlock), `knot analyze` (release) and `dotnet-dump analyze <core> -c "setclrpath <runtime>"
//! -c clrthreads -c syncblk -c threadpool -c dumpasync -c "clrstack -all" -c exit` — the SOS
//! commands a person runs for what knot's one report gives (issue 32, item 7: the seed's read):
//! the managed threads, monitor owners, the thread pool, async stacks and every thread's managed
//! stack ([`SOS_COMMANDS`]). Both are given the committed runtime
//! files (`samples/dotnet/dumps/runtime/<version>`, decompressed): knot as a search directory,
//! dotnet-dump as its DAC path, as make-dumps.sh read them. Each runs once to warm up (the core
//! is then in the page cache), then N rounds in turn, so a drift of the machine hits both alike.
//! Prints the medians and the ratio (target: knot at least 10x faster), and writes the raw
//! numbers to `target/bench/dotnet.json`.

use crate::bench::{build_knot, git, loadavg, machine_info, median, run_once, sample_json, target_dir, utc_now, Sample};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target: dotnet-dump's median over knot's.
const SOS_OVER_KNOT_TARGET: f64 = 10.0;
const RUNTIME_VERSION: &str = "10.0.12";

/// The SOS commands knot's one report replaces, in the order a person runs them (issue 32, item
/// 7): `clrthreads` (the managed threads), `syncblk` (monitor owners), `threadpool` (the pool's
/// counters and queues), `dumpasync` (async stacks, a walk of the heap) and `clrstack -all`.
pub(crate) const SOS_COMMANDS: [&str; 5] = ["clrthreads", "syncblk", "threadpool", "dumpasync", "clrstack -all"];
/// dotnet-dump's row in the benches' tables.
pub(crate) const SOS_LABEL: &str = "dotnet-dump clrthreads + syncblk + threadpool + dumpasync + clrstack -all";

/// `gzip -dc from > to`, once.
fn gunzip(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        return Ok(());
    }
    let part = to.with_extension("part");
    let out = fs::File::create(&part).with_context(|| format!("creating {}", part.display()))?;
    let status = Command::new("gzip").arg("-dc").arg(from).stdout(out).status().context("running gzip")?;
    if !status.success() {
        bail!("gzip -dc {} failed ({status})", from.display());
    }
    fs::rename(&part, to)?;
    Ok(())
}

pub(crate) fn dotnet_dump() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DOTNET_DUMP") {
        return Some(p.into());
    }
    crate::bench::find_tool("dotnet-dump").or_else(|| {
        let p = PathBuf::from(std::env::var_os("HOME")?).join(".dotnet/tools/dotnet-dump");
        p.is_file().then_some(p)
    })
}

/// The committed heap dump of `sample` and the runtime files, decompressed under
/// `out_dir/dotnet/`: (core, runtime directory, app directory).
pub(crate) fn prepare(root: &Path, out_dir: &Path, sample: &str) -> Result<(PathBuf, PathBuf, PathBuf)> {
    let work = out_dir.join("dotnet");
    fs::create_dir_all(work.join("runtime"))?;
    let dumps = root.join("samples/dotnet/dumps");
    let gz = dumps.join(sample).join("heap/core.gz");
    if !gz.is_file() {
        bail!("no committed heap dump {}", gz.display());
    }
    let core = work.join(format!("{sample}.core"));
    gunzip(&gz, &core)?;
    let runtime_src = dumps.join("runtime").join(RUNTIME_VERSION);
    let runtime = work.join("runtime").join(RUNTIME_VERSION);
    fs::create_dir_all(&runtime)?;
    for e in fs::read_dir(&runtime_src).with_context(|| format!("reading {}", runtime_src.display()))?.flatten() {
        let p = e.path();
        if let Some(name) = p.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".gz")) {
            gunzip(&p, &runtime.join(name))?;
        }
    }
    Ok((core, runtime, dumps.join(sample).join("app")))
}

/// `knot analyze` on a .NET bench dump as every .NET bench times it: the JSON report to
/// /dev/null, the runtime and app files as search directories, and with `cache` the section
/// cache the warm-up run fills (as the user's default cache is after a first run); without it
/// `--no-cache` (a first run on a machine).
pub(crate) fn knot_argv(knot: &Path, core: &Path, runtime: &Path, app: &Path, cache: Option<&Path>) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![knot.into(), "analyze".into(), core.into()];
    v.extend(["--format", "json", "-o", "/dev/null"].map(OsString::from));
    v.extend(["--search-dir".into(), runtime.into(), "--search-dir".into(), app.into()]);
    match cache {
        Some(dir) => v.extend(["--cache-dir".into(), dir.into()]),
        None => v.push("--no-cache".into()),
    }
    v
}

/// `dotnet-dump analyze CORE -c "setclrpath RUNTIME" -c CMD … -c exit`, each of [`SOS_COMMANDS`].
pub(crate) fn sos_argv(sos: &Path, core: &Path, runtime: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![sos.into(), "analyze".into(), core.into(), "-c".into(), format!("setclrpath {}", runtime.display()).into()];
    for cmd in SOS_COMMANDS.iter().chain(&["exit"]) {
        v.extend(["-c".into(), OsString::from(cmd)]);
    }
    v
}

pub fn run(runs: u32, sample: &str) -> Result<()> {
    let root = knot_samples::workspace_root();
    let target = target_dir(&root);
    let out_dir = target.join("bench");
    fs::create_dir_all(out_dir.join("logs"))?;
    let (core, runtime, app) = prepare(&root, &out_dir, sample)?;

    let Some(sos) = dotnet_dump() else { bail!("dotnet-dump not found (dotnet tool install -g dotnet-dump, or set DOTNET_DUMP)") };
    let (knot, _) = build_knot(&root, &target)?;
    let cache = out_dir.join("knot-cache");
    let sos_argv = sos_argv(&sos, &core, &runtime);
    let tools = [
        ("knot analyze", knot_argv(&knot, &core, &runtime, &app, Some(&cache))),
        (SOS_LABEL, sos_argv),
        ("knot analyze (no cache)", knot_argv(&knot, &core, &runtime, &app, None)),
    ];
    let log = |i: usize| out_dir.join("logs").join(format!("dotnet-{i}.stderr"));

    eprintln!("measure {sample} heap: warm-up, then {runs} rounds");
    let paired = measure_paired(&tools, &core, runs, log)?;
    let (samples, medians) = (&paired.samples, &paired.medians);
    let ratio = paired.sos_over_knot();
    let core_size = fs::metadata(&core)?.len();
    println!("\n.NET: {sample} heap dump, {:.1} MiB, {runs} runs after 1 warm-up, median wall time", core_size as f64 / (1 << 20) as f64);
    let width = tools.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (i, (name, _)) in tools.iter().enumerate() {
        let rss = samples[i].iter().map(|s| s.max_rss_kib).max().unwrap_or(0);
        println!("  {name:<width$} {:>8.3} s   peak RSS {:>6.1} MiB", medians[i], rss as f64 / 1024.0);
    }
    println!(
        "  dotnet-dump / knot: {ratio:.1}x (target >= {SOS_OVER_KNOT_TARGET}x: {}); without the cache {:.1}x",
        if ratio >= SOS_OVER_KNOT_TARGET { "met" } else { "NOT met" },
        medians[1] / medians[2]
    );
    let doc = raw_doc(&root, &core, &tools, &paired, SOS_OVER_KNOT_TARGET, json!({ "sample": sample }))?;
    write_raw(&out_dir, "dotnet", &doc)
}

/// A .NET bench's raw numbers: `own` (what only that bench measures) and the tail every one of
/// them writes — when, at which commit, on what machine, the core, the runs, the load before
/// and after, each tool's argv and samples, the ratio of the medians and its target.
pub(crate) fn raw_doc(root: &Path, core: &Path, tools: &[(&str, Vec<OsString>)], paired: &Paired, target: f64, own: serde_json::Value) -> Result<serde_json::Value> {
    let mut doc = json!({
        "date_utc": utc_now(),
        "commit": git(root, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
        "machine": machine_info(),
        "core": core.display().to_string(),
        "core_bytes": fs::metadata(core)?.len(),
        "runs": paired.samples.first().map_or(0, Vec::len),
        "loadavg_1min_before": paired.load_before,
        "loadavg_1min_after": loadavg(),
        "tools": tools_json(tools, &paired.warm, &paired.samples, &paired.medians),
        "sos_over_knot": paired.sos_over_knot(),
        "target_sos_over_knot_at_least": target,
    });
    if let (Some(doc), serde_json::Value::Object(own)) = (doc.as_object_mut(), own) {
        doc.extend(own);
    }
    Ok(doc)
}

/// Writes `doc` to `out_dir/NAME.json` and says where.
pub(crate) fn write_raw(out_dir: &Path, name: &str, doc: &serde_json::Value) -> Result<()> {
    let path = out_dir.join(format!("{name}.json"));
    fs::write(&path, serde_json::to_string_pretty(doc)? + "\n").with_context(|| format!("writing {}", path.display()))?;
    println!("raw numbers: {}", path.display());
    Ok(())
}

/// One paired measurement: each tool once to warm the page cache, then `runs` rounds in turn, so
/// a drift of the machine hits both alike.
pub(crate) struct Paired {
    pub(crate) load_before: Option<f64>,
    pub(crate) warm: Vec<Sample>,
    pub(crate) samples: Vec<Vec<Sample>>,
    /// Median wall time of each tool, in seconds.
    pub(crate) medians: Vec<f64>,
}

impl Paired {
    /// The second tool's (dotnet-dump's) median over the first's (knot's).
    pub(crate) fn sos_over_knot(&self) -> f64 {
        match self.medians.as_slice() {
            [knot, sos, ..] => sos / knot,
            _ => f64::NAN,
        }
    }
}

pub(crate) fn measure_paired(tools: &[(&str, Vec<OsString>)], core: &Path, runs: u32, log: impl Fn(usize) -> PathBuf) -> Result<Paired> {
    let load_before = loadavg();
    let mut warm = Vec::new();
    for (i, (name, argv)) in tools.iter().enumerate() {
        let s = run_once(argv, &log(i))?;
        if s.code != Some(0) {
            bail!("{name} failed on {} (exit {:?}); see {}", core.display(), s.code, log(i).display());
        }
        warm.push(s);
    }
    let mut samples = vec![Vec::new(); tools.len()];
    for _ in 0..runs {
        for (i, (_, argv)) in tools.iter().enumerate() {
            samples[i].push(run_once(argv, &log(i))?);
        }
    }
    let medians = samples.iter().map(|s| median(&s.iter().map(|x| x.wall.as_secs_f64()).collect::<Vec<_>>())).collect();
    Ok(Paired { load_before, warm, samples, medians })
}

/// The `tools` part of a bench's raw-numbers JSON.
pub(crate) fn tools_json(tools: &[(&str, Vec<OsString>)], warm: &[Sample], samples: &[Vec<Sample>], medians: &[f64]) -> Vec<serde_json::Value> {
    tools
        .iter()
        .enumerate()
        .map(|(i, (name, argv))| {
            json!({
                "name": name,
                "argv": argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
                "warmup": sample_json(&warm[i]),
                "runs": samples[i].iter().map(sample_json).collect::<Vec<_>>(),
                "median_wall_s": medians[i],
            })
        })
        .collect()
}
