//! `cargo xtask bench`: knot against gdb and `eu-stack -i` on the bench set, in one run.
//!
//! The set: real programs from Debian (redis, memcached, mariadb; [`crate::programs`]), each
//! dumped by gcore and by the kernel, and the shape of a big service's thread pool: the
//! `many_threads` sample with N threads (default 2,000) whose stacks are 40 to 60 frames
//! deep, dumped the same two ways. Plus, when dotnet-dump is installed, knot against
//! `dotnet-dump analyze -c clrthreads -c syncblk -c threadpool -c dumpasync -c "clrstack -all"`
//! on a committed .NET heap dump.
//!
//! Every tool runs once to warm up (the core is then in the page cache, and knot's
//! `--cache-dir` is filled), then `--runs` rounds in turn; a peer whose warm-up took longer
//! than [`SLOW`] is timed once more only (eu-stack takes about a minute on 2,000 threads).
//! Each child is reaped with `wait4`: wall time, user + sys CPU, peak RSS (`ru_maxrss`). knot's
//! instructions are counted once per dump under callgrind (`valgrind --tool=callgrind`), a
//! number that does not move with the machine's load, so a regression shows even when wall
//! time is noise. Prints one table, the ratios and the targets (met or not; nothing is
//! asserted); writes `target/bench/native.json` (every run) and `target/bench/native.md`.

use crate::bench::{self, Sample};
use crate::programs::{self, PROGRAMS};
use anyhow::{Result, bail};
use knot_samples::{Availability, DumpKind};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A peer whose warm-up run took longer than this is timed once, not `--runs` times.
const SLOW: Duration = Duration::from_secs(3);
/// A peer still running after this is stopped, and shown as "> limit" (eu-stack -i on 2,000
/// threads ran for 24 minutes on a loaded machine).
const PEER_LIMIT: Duration = Duration::from_secs(180);
/// The targets.
const SMALL_DUMP_TARGET_S: f64 = 0.020;
const BIG_RSS_TARGET_MIB: f64 = 100.0;
const SOS_OVER_KNOT_TARGET: f64 = 10.0;

pub(crate) struct Opts {
    pub(crate) threads: u32,
    pub(crate) frames: u32,
    pub(crate) runs: u32,
    pub(crate) kinds: &'static [DumpKind],
    pub(crate) remake: bool,
    pub(crate) programs: bool,
    pub(crate) dotnet: bool,
    pub(crate) callgrind: bool,
}

/// One dump of the set.
struct Dump {
    label: String,
    kind: DumpKind,
    core: PathBuf,
    binary: PathBuf,
    /// The 2,000-thread shape (the memory target is read on it).
    big: bool,
    /// An arm64 core (committed, from the emulated guest): knot and `gdb-multiarch` read it with
    /// the guest's libraries as sysroot and its debug files; eu-stack is left out (bookworm's
    /// has no `--sysroot`, so it would read this machine's x86-64 libraries).
    arm64: Option<Arm64Files>,
}

struct Arm64Files {
    sysroot: PathBuf,
    debug_dir: Option<PathBuf>,
}

struct Row {
    dump: Dump,
    threads: Option<usize>,
    tools: Vec<Measured>,
    instructions: Option<u64>,
}

struct Measured {
    name: &'static str,
    argv: Vec<OsString>,
    warmup: Sample,
    runs: Vec<Sample>,
}

impl Measured {
    fn median(&self) -> f64 {
        bench::median(&self.runs.iter().map(|s| s.wall.as_secs_f64()).collect::<Vec<_>>())
    }
    fn cpu(&self) -> f64 {
        bench::median(&self.runs.iter().map(|s| s.cpu().as_secs_f64()).collect::<Vec<_>>())
    }
    fn rss_mib(&self) -> f64 {
        self.runs.iter().chain([&self.warmup]).map(|s| s.max_rss_kib.max(0)).max().unwrap_or(0) as f64 / 1024.0
    }
    fn failed(&self) -> usize {
        self.runs.iter().filter(|s| s.code != Some(0)).count()
    }
}

pub(crate) fn run(o: Opts) -> Result<()> {
    let root = knot_samples::workspace_root();
    let target = bench::target_dir(&root);
    let out_dir = target.join("bench");
    fs::create_dir_all(out_dir.join("logs"))?;
    let knot_cache = out_dir.join("knot-cache");

    // The dumps first: making them runs servers, gdb and gcc, which must not overlap timings.
    if o.programs {
        programs::install_missing();
    }
    let mut dumps: Vec<Dump> = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    if o.programs {
        let dir = out_dir.join("programs");
        for p in &PROGRAMS {
            for &kind in o.kinds {
                let started = Instant::now();
                match programs::ensure(p, kind, &dir, o.remake) {
                    Ok(d) => {
                        eprintln!("dump    {} {kind}: {} ({:.1}s)", d.name, d.core.display(), started.elapsed().as_secs_f64());
                        dumps.push(Dump { label: format!("{} ({kind})", d.name), kind, core: d.core, binary: d.binary, big: false, arm64: None });
                    }
                    Err(e) => {
                        println!("skipped {} {kind}: {e:#}", p.name);
                        skipped.push((format!("{} {kind}", p.name), format!("{e:#}")));
                    }
                }
            }
        }
    }
    let (threads, frames) = (o.threads.to_string(), o.frames.to_string());
    for &kind in o.kinds {
        let started = Instant::now();
        match knot_samples::ensure_with_args("many_threads", kind, &[threads.as_str(), "0", frames.as_str()]) {
            Availability::Ready(d) => {
                eprintln!("dump    many_threads {threads} x {frames}+ {kind}: {} ({:.1}s)", d.core.display(), started.elapsed().as_secs_f64());
                let label = format!("{threads} threads x {}-{} frames ({kind})", o.frames + 6, o.frames + 26);
                dumps.push(Dump { label, kind, core: d.core, binary: d.binary, big: true, arm64: None });
            }
            Availability::Skipped(why) => {
                println!("skipped many_threads {threads} {kind}: {why}");
                skipped.push((format!("many_threads {kind}"), why));
            }
        }
    }
    // The committed arm64 ABBA (issue 33): every machine has it.
    for &kind in o.kinds {
        if let Some(d) = knot_samples::committed_aarch64("abba", kind) {
            let Some(sysroot) = d.sysroot.clone() else { continue };
            let arm64 = Some(Arm64Files { sysroot, debug_dir: d.debug_dir.clone() });
            dumps.push(Dump { label: format!("abba, arm64 ({kind})"), kind, core: d.core, binary: d.binary, big: false, arm64 });
        }
    }
    if dumps.is_empty() {
        bail!("no dump could be made on this machine (see above)");
    }

    let (knot, _) = bench::build_knot(&root, &target)?;
    let gdb = bench::find_tool("gdb");
    let gdb_multiarch = bench::find_tool("gdb-multiarch");
    let eu_stack = bench::find_tool("eu-stack");
    let valgrind = bench::find_tool("valgrind").filter(|_| o.callgrind);
    let load_before = bench::loadavg();
    let date = bench::utc_now();

    let mut rows: Vec<Row> = Vec::new();
    for d in dumps {
        let mut knot_argv: Vec<OsString> = vec![knot.clone().into(), "analyze".into(), d.core.clone().into()];
        knot_argv.extend(["--format", "json", "-o", "/dev/null", "--exe"].map(OsString::from));
        knot_argv.push(d.binary.clone().into());
        if let Some(a) = &d.arm64 {
            knot_argv.extend(["--sysroot".into(), a.sysroot.clone().into()]);
            if let Some(dd) = &a.debug_dir {
                knot_argv.extend(["--debug-dir".into(), dd.clone().into()]);
            }
        }
        let mut cached = knot_argv.clone();
        cached.push("--cache-dir".into());
        cached.push(knot_cache.clone().into());
        knot_argv.push("--no-cache".into());
        let mut tools: Vec<(&'static str, Vec<OsString>)> = vec![("knot", cached.clone()), ("knot (no cache)", knot_argv)];
        // On an arm64 core the gdb column is gdb-multiarch's (the table's notes say so).
        if let Some(g) = if d.arm64.is_some() { &gdb_multiarch } else { &gdb } {
            let mut v: Vec<OsString> = vec![g.into()];
            v.extend(["-nx", "-batch", "-iex", "set debuginfod enabled off"].map(OsString::from));
            if let Some(a) = &d.arm64 {
                v.extend(["-iex".into(), format!("set sysroot {}", a.sysroot.display()).into()]);
                if let Some(dd) = &a.debug_dir {
                    v.extend(["-iex".into(), format!("set debug-file-directory {}", dd.display()).into()]);
                }
            }
            v.extend(["-ex", "thread apply all bt"].map(OsString::from));
            v.push(d.binary.clone().into());
            v.push(d.core.clone().into());
            tools.push(("gdb", v));
        }
        if let Some(e) = eu_stack.as_ref().filter(|_| d.arm64.is_none()) {
            let mut v: Vec<OsString> = vec![e.into(), "-i".into(), "--core".into(), d.core.clone().into(), "--executable".into()];
            v.push(d.binary.clone().into());
            tools.push(("eu-stack -i", v));
        }
        eprintln!("measure {}: warm-up, then {} rounds", d.label, o.runs);
        let log = |name: &str| out_dir.join("logs").join(format!("{}-{}.stderr", slug(&d.label), slug(name)));
        let mut measured: Vec<Measured> = Vec::new();
        for (name, argv) in tools {
            let limit = (!name.starts_with("knot")).then_some(PEER_LIMIT);
            let warmup = bench::run_limited(&argv, &log(name), limit)?;
            if warmup.code != Some(0) && name.starts_with("knot") {
                bail!("{name} failed on {} (exit {:?}); see {}", d.core.display(), warmup.code, log(name).display());
            }
            measured.push(Measured { name, argv, warmup, runs: Vec::new() });
        }
        for round in 0..o.runs {
            for m in &mut measured {
                if m.warmup.stopped {
                    // Not run again: its one (stopped) run is the warm-up.
                    if round == 0 {
                        m.runs.push(m.warmup);
                    }
                    continue;
                }
                if round > 0 && !m.name.starts_with("knot") && m.warmup.wall > SLOW {
                    continue;
                }
                let limit = (!m.name.starts_with("knot")).then_some(PEER_LIMIT);
                m.runs.push(bench::run_limited(&m.argv, &log(m.name), limit)?);
            }
        }
        let instructions = valgrind.as_ref().and_then(|v| callgrind(v, &cached, &log("callgrind")));
        let threads = knot_threads(&knot, &d);
        rows.push(Row { dump: d, threads, tools: measured, instructions });
    }

    let sos = if o.dotnet { dotnet(&root, &out_dir, &knot, o.runs)? } else { None };
    let load_after = bench::loadavg();
    let (table, verdicts) = render(&rows, sos.as_ref());
    let header = format!(
        "Command: `cargo xtask bench` ({} rounds after 1 warm-up). Date: {date}; knot {}; machine: {} cores ({}), loadavg (1 min) {} before, {} after.\n",
        o.runs,
        bench::git(&root, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_default(),
        bench::machine_info()["cores"],
        bench::machine_info()["cpu"].as_str().unwrap_or("?"),
        load_before.map_or("?".into(), |l| format!("{l:.2}")),
        load_after.map_or("?".into(), |l| format!("{l:.2}")),
    );
    let md = format!("{header}\n{table}\n{verdicts}");
    println!("\n{md}");
    for (what, why) in &skipped {
        println!("skipped {what}: {why}");
    }
    fs::write(out_dir.join("native.md"), &md)?;
    let doc = json!({
        "date_utc": date,
        "commit": bench::git(&root, &["rev-parse", "HEAD"]),
        "knot_sources_dirty": bench::git(&root, &["status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock"]).is_some_and(|s| !s.is_empty()),
        "machine": bench::machine_info(),
        "versions": {
            "knot": bench::knot_version(&knot),
            "gdb": gdb.as_ref().and_then(|g| bench::first_line(g, "--version")),
            "eu-stack": eu_stack.as_ref().and_then(|e| bench::first_line(e, "--version")),
        },
        "runs": o.runs,
        "loadavg_1min_before": load_before,
        "loadavg_1min_after": load_after,
        "dumps": rows.iter().map(row_json).collect::<Vec<_>>(),
        "dotnet": sos.as_ref().map(|s| json!({"sample": s.sample, "threads": s.threads, "knot_median_s": s.knot, "knot_no_cache_median_s": s.knot_cold, "sos_median_s": s.sos, "knot_rss_mib": s.knot_rss_mib, "sos_rss_mib": s.sos_rss_mib})),
        "skipped": skipped.iter().map(|(w, r)| json!({"what": w, "reason": r})).collect::<Vec<_>>(),
    });
    let path = out_dir.join("native.json");
    fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
    println!("raw numbers: {}; this table: {}", path.display(), out_dir.join("native.md").display());
    Ok(())
}

fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// knot's instructions on one run, under callgrind (the cache warm, as in the timed runs).
fn callgrind(valgrind: &Path, knot_argv: &[OsString], log: &Path) -> Option<u64> {
    let out = Command::new(valgrind)
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .args(knot_argv)
        .env("LC_ALL", "C")
        .stdout(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let _ = fs::write(log, text.as_bytes());
    text.lines().find_map(|l| l.split_once("Collected :").and_then(|(_, n)| n.trim().parse().ok()))
}

/// The dump's thread count, from knot's own JSON report.
fn knot_threads(knot: &Path, d: &Dump) -> Option<usize> {
    let out = Command::new(knot).arg("analyze").arg(&d.core).args(["--format", "json", "--stacks-only", "--exe"]).arg(&d.binary).output().ok()?;
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    v["threads"].as_array().map(Vec::len)
}

struct Sos {
    sample: String,
    threads: Option<usize>,
    knot: f64,
    /// Without the section cache (the first run on a machine).
    knot_cold: f64,
    sos: f64,
    knot_rss_mib: f64,
    sos_rss_mib: f64,
}

/// knot against dotnet-dump ([`crate::bench_dotnet::SOS_COMMANDS`]) on the committed .NET heap dump with the
/// most threads; `None` (said why) when dotnet-dump is not installed.
fn dotnet(root: &Path, out_dir: &Path, knot: &Path, runs: u32) -> Result<Option<Sos>> {
    let Some(sos) = crate::bench_dotnet::dotnet_dump() else {
        println!("skipped .NET: dotnet-dump not found (dotnet tool install -g dotnet-dump, or set DOTNET_DUMP)");
        return Ok(None);
    };
    let sample = "autofac_container";
    let (core, runtime, app) = crate::bench_dotnet::prepare(root, out_dir, sample)?;
    let cache = out_dir.join("knot-cache");
    let knot_argv = crate::bench_dotnet::knot_argv(knot, &core, &runtime, &app, Some(&cache));
    let sos_argv = crate::bench_dotnet::sos_argv(&sos, &core, &runtime);
    let tools = [
        ("knot analyze", knot_argv),
        (crate::bench_dotnet::SOS_LABEL, sos_argv),
        ("knot analyze (no cache)", crate::bench_dotnet::knot_argv(knot, &core, &runtime, &app, None)),
    ];
    eprintln!("measure .NET {sample}: warm-up, then {runs} rounds");
    let p = crate::bench_dotnet::measure_paired(&tools, &core, runs, |i| out_dir.join("logs").join(format!("dotnet-{i}.stderr")))?;
    let rss = |i: usize| p.samples[i].iter().map(|s| s.max_rss_kib).max().unwrap_or(0) as f64 / 1024.0;
    let out = Command::new(knot)
        .arg("analyze")
        .arg(&core)
        .args(["--format", "json", "--stacks-only", "--search-dir"])
        .arg(&runtime)
        .arg("--search-dir")
        .arg(&app)
        .output()?;
    let threads = serde_json::from_slice::<Value>(&out.stdout).ok().and_then(|v| v["threads"].as_array().map(Vec::len));
    Ok(Some(Sos {
        sample: sample.into(),
        threads,
        knot: p.medians[0],
        knot_cold: p.medians[2],
        sos: p.medians[1],
        knot_rss_mib: rss(0),
        sos_rss_mib: rss(1),
    }))
}

fn ms(s: f64) -> String {
    if s >= 1.0 { format!("{s:.2} s") } else { format!("{:.0} ms", s * 1000.0) }
}

fn render(rows: &[Row], sos: Option<&Sos>) -> (String, String) {
    let mut t = String::new();
    let _ = writeln!(t, "Wall time (median), CPU time (user+sys, median), peak RSS (largest run); ratios are the peer's over knot's (above 1: knot is faster or smaller). knot runs with `--cache-dir` (filled by its warm-up); \"no cache\" is the first run on a machine. On the arm64 rows (committed cores from the emulated guest) gdb is gdb-multiarch, both read the guest's libraries (`--sysroot`, gdb's `set sysroot`), and eu-stack is left out: bookworm's has no `--sysroot`.\n");
    let _ = writeln!(t, "| dump | threads | knot | knot (no cache) | gdb | eu-stack -i | gdb / knot | eu-stack -i / knot | CPU: gdb / knot, eu-stack / knot | peak RSS: knot, no cache, gdb, eu-stack | knot instructions |");
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let get = |n: &str| r.tools.iter().find(|m| m.name == n);
        let stopped = |m: &Measured| m.runs.iter().any(|s| s.stopped);
        let wall = |n: &str| {
            get(n).map_or("-".into(), |m| {
                if stopped(m) {
                    format!("> {} (stopped)", ms(PEER_LIMIT.as_secs_f64()))
                } else if m.failed() > 0 {
                    format!("{} (exit≠0 ×{})", ms(m.median()), m.failed())
                } else {
                    ms(m.median())
                }
            })
        };
        let k = get("knot");
        let ratio = |n: &str, f: fn(&Measured) -> f64| match (get(n), k) {
            // A stopped peer's time is at least the limit: the ratio is at least this.
            (Some(p), Some(k)) if stopped(p) => format!("> {:.1}x", f(p) / f(k)),
            (Some(p), Some(k)) => format!("{:.1}x", f(p) / f(k)),
            _ => "-".into(),
        };
        let rss = |n: &str| get(n).map_or("-".into(), |m| format!("{:.0}", m.rss_mib()));
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {}, {} | {}, {}, {}, {} MiB | {} |",
            r.dump.label,
            r.threads.map_or("?".into(), |n| n.to_string()),
            wall("knot"),
            wall("knot (no cache)"),
            wall("gdb"),
            wall("eu-stack -i"),
            ratio("gdb", Measured::median),
            ratio("eu-stack -i", Measured::median),
            ratio("gdb", Measured::cpu),
            ratio("eu-stack -i", Measured::cpu),
            rss("knot"),
            rss("knot (no cache)"),
            rss("gdb"),
            rss("eu-stack -i"),
            r.instructions.map_or("-".into(), |n| format!("{:.1} M", n as f64 / 1e6)),
        );
    }
    if let Some(s) = sos {
        let _ = writeln!(
            t,
            "\n.NET, {} heap dump ({} threads): knot {} ({:.0} MiB), dotnet-dump analyze {} {} ({:.0} MiB): **{:.1}x**; knot without the cache {}: {:.1}x",
            s.sample,
            s.threads.map_or("?".into(), |n| n.to_string()),
            ms(s.knot),
            s.knot_rss_mib,
            crate::bench_dotnet::SOS_COMMANDS.map(|c| if c.contains(' ') { format!("-c \"{c}\"") } else { format!("-c {c}") }).join(" "),
            ms(s.sos),
            s.sos_rss_mib,
            s.sos / s.knot,
            ms(s.knot_cold),
            s.sos / s.knot_cold
        );
    }

    let mut v = String::new();
    let met = |b: bool| if b { "met" } else { "**NOT met**" };
    let _ = writeln!(v, "| target | reading | met |\n|---|---|---|");
    let small = rows.iter().filter(|r| !r.dump.big).filter_map(|r| r.tools.iter().find(|m| m.name == "knot").map(|m| (r, m.median())));
    if let Some((r, s)) = small.min_by(|a, b| a.1.total_cmp(&b.1)) {
        let _ = writeln!(v, "| small native dump ≤ 20 ms | {} on {} | {} |", ms(s), r.dump.label, met(s <= SMALL_DUMP_TARGET_S));
    }
    for name in ["knot", "knot (no cache)"] {
        let mut worst: Option<(f64, &str)> = None;
        for r in rows {
            let k = r.tools.iter().find(|m| m.name == name);
            let e = r.tools.iter().find(|m| m.name == "eu-stack -i");
            if let (Some(k), Some(e)) = (k, e) {
                let x = e.median() / k.median();
                if worst.is_none_or(|(w, _)| x < w) {
                    worst = Some((x, &r.dump.label));
                }
            }
        }
        if let Some((x, label)) = worst {
            let _ = writeln!(v, "| {name} faster than eu-stack -i on every dump | slowest margin {x:.1}x ({label}) | {} |", met(x > 1.0));
        }
    }
    for r in rows.iter().filter(|r| r.dump.big) {
        if let Some(k) = r.tools.iter().find(|m| m.name == "knot") {
            let _ = writeln!(v, "| peak RSS ≤ 100 MiB, {} | {:.0} MiB | {} |", r.dump.label, k.rss_mib(), met(k.rss_mib() <= BIG_RSS_TARGET_MIB));
        }
    }
    if let Some(s) = sos {
        let x = s.sos / s.knot;
        let _ = writeln!(v, "| .NET ≥ 10x dotnet-dump ({}) | {x:.1}x | {} |", crate::bench_dotnet::SOS_COMMANDS.join(" + "), met(x >= SOS_OVER_KNOT_TARGET));
    }
    (t, v)
}

fn row_json(r: &Row) -> Value {
    json!({
        "dump": r.dump.label,
        "kind": r.dump.kind.as_str(),
        "core": r.dump.core,
        "core_bytes": fs::metadata(&r.dump.core).map(|m| m.len()).ok(),
        "binary": r.dump.binary,
        "arm64": r.dump.arm64.is_some(),
        "threads": r.threads,
        "knot_instructions": r.instructions,
        "tools": r.tools.iter().map(|m| json!({
            "tool": m.name,
            "command": m.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
            "wall_s_median": m.median(),
            "cpu_s_median": m.cpu(),
            "peak_rss_mib": m.rss_mib(),
            "warmup": bench::sample_json(&m.warmup),
            "runs": m.runs.iter().map(bench::sample_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
