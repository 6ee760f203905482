//! `cargo xtask bench dotnet-heap [--heap-mib N] [--runs N] [--remake] [--memory-limit SIZE]`:
//! knot against SOS `dumpheap -stat` on a .NET dump with a multi-GB heap.
//!
//! The dump is made here, never committed: `samples/dotnet/big_heap` (built with the machine's
//! .NET SDK) fills its heap to `--heap-mib` MiB (default 2048) with millions of small objects,
//! prints `ready`, and `createdump --withheap` dumps it into `target/bench/dotnet-heap/core`
//! (kept for the next run; `--remake` makes it again). Before timing, both answers are compared:
//! `knot heap stat`'s table (the sorted `Statistics:`..`Total` lines) must equal `dumpheap
//! -stat`'s line for line, and `knot analyze`'s `dotnet.heap` totals SOS's "Total" line. Then,
//! in one run, `knot heap stat` (release; the like-for-like peer of `dumpheap -stat`: the same
//! table from one walk), `dotnet-dump analyze <core> -c "dumpheap -stat" -c exit` and `knot
//! analyze` (the whole report: stacks, locks, the heap walk, graph and retained sizes) run once
//! each to warm the page cache and N rounds in turn. Prints the medians, peak RSS and the ratios:
//! dotnet-dump over `knot heap stat` is the one the target applies to (knot at least 10x
//! faster); dotnet-dump over `knot analyze` is printed beside it as the whole report's. Writes the
//! raw numbers to `target/bench/dotnet-heap.json`. Then knot's own memory: the peak `RssAnon` of
//! `knot analyze` (sampled from /proc every 20 ms: what it holds beyond the mapped dump) per
//! heap object (target at most 40 bytes). Then `knot heap root` against `dotnet-dump gcroot` on
//! two objects, each path checked equal first: the `List` the static holds (knot's top holder,
//! near a root) and element 5,600,000 of its array (its address read with SOS `dq`).
//!
//! With `--memory-limit SIZE`, `knot analyze` also runs inside a memory cgroup of that size (a
//! pod's limit: a child group of cgroup v1's memory controller with `memory.limit_in_bytes`, or
//! of v2's hierarchy with `memory.max`, whichever the machine has; the process joins it before
//! knot starts), and the bench prints its wall time, peak anonymous memory and RSS, bytes per
//! object, scratch bytes (the unlinked files it holds open: its graph's arrays in scratch
//! files), the group's own peak, and whether the report came whole (retained sizes, top holders
//! and suspects equal to the unconstrained run's) or with the limit said — beside dotnet-dump's
//! `dumpheap -stat` of the same run. Several sizes (`--memory-limit 4G,1G`) run one after the
//! other.

use crate::bench::{build_knot, target_dir};
use crate::bench_dotnet::{dotnet_dump, measure_paired, raw_doc, tools_json, write_raw, Paired};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The target: dotnet-dump's median over knot's.
const SOS_OVER_KNOT_TARGET: f64 = 10.0;
const READY_TIMEOUT: Duration = Duration::from_secs(900);

/// The newest Microsoft.NETCore.App directory `dotnet --list-runtimes` names.
fn runtime_dir(dotnet: &Path) -> Result<PathBuf> {
    let out = Command::new(dotnet).arg("--list-runtimes").output().context("running dotnet --list-runtimes")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rfind(|l| l.starts_with("Microsoft.NETCore.App ")).context("no Microsoft.NETCore.App runtime")?;
    let mut parts = line.split_whitespace();
    let version = parts.nth(1).context("runtime version")?;
    let dir = line.split('[').nth(1).and_then(|r| r.split(']').next()).context("runtime directory")?;
    Ok(Path::new(dir).join(version))
}

/// Builds and runs big_heap, dumps it with createdump once it is ready.
fn make_dump(root: &Path, target: &Path, core: &Path, heap_mib: u64) -> Result<()> {
    make_sample_dump(root, target, core, "big_heap", &[heap_mib.to_string()])
}

/// Builds the sample `samples/dotnet/<name>` (the machine's .NET SDK), runs it with `args`, and
/// once it prints `ready` dumps it with `createdump --withheap` into `core`.
pub(crate) fn make_sample_dump(root: &Path, target: &Path, core: &Path, name: &str, args: &[String]) -> Result<()> {
    let dotnet = crate::bench::find_tool("dotnet").context("dotnet not found (the .NET 10 SDK makes the dump)")?;
    let project = root.join(format!("samples/dotnet/{name}/{name}.csproj"));
    eprintln!("build   dotnet build {}", project.display());
    // The build's output where the dll is looked for below: samples/dotnet/Directory.Build.props
    // puts it under the workspace's target/, which is not this target dir when CARGO_TARGET_DIR
    // points elsewhere.
    let artifacts = target.join("samples/dotnet/artifacts");
    let status = Command::new(&dotnet)
        .args(["build", "-c", "Debug", "-nologo", "-v", "q"])
        .arg(format!("-p:ArtifactsPath={}", artifacts.display()))
        .arg(&project)
        .status()
        .context("dotnet build")?;
    if !status.success() {
        bail!("dotnet build of {name} failed ({status})");
    }
    let dll = target.join(format!("samples/dotnet/artifacts/bin/{name}/debug/{name}.dll"));
    let createdump = runtime_dir(&dotnet)?.join("createdump");
    eprintln!("run     {name} {} (then waits)", args.join(" "));
    let mut child = Command::new(&dotnet)
        .arg(&dll)
        .args(args)
        .env("DOTNET_gcServer", "0")
        // Every object stays alive: with the default gen0 budget (a few MiB) each of thousands
        // of gen0 GCs copies what it holds into gen1 and gen2 and the background GC marks the
        // growing heap again and again (half an hour for 8 GiB on a loaded machine). A 512 MiB
        // gen0 and no background GC: about 2 minutes.
        .env("DOTNET_GCgen0size", "0x20000000")
        .env("DOTNET_gcConcurrent", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let pid = child.id();
    let started = Instant::now();
    let ready = {
        let stdout = child.stdout.take().with_context(|| format!("{name} stdout"))?;
        BufReader::new(stdout).lines().map_while(|l| l.ok()).any(|l| l.trim() == "ready")
    };
    let result = (|| {
        if !ready || started.elapsed() > READY_TIMEOUT {
            bail!("{name} did not print 'ready'");
        }
        eprintln!("dump    createdump --withheap {pid} ({:.0} s to get ready)", started.elapsed().as_secs_f64());
        if let Some(dir) = core.parent() {
            fs::create_dir_all(dir)?;
        }
        let part = core.with_extension("part");
        let status = Command::new(&createdump).arg("-f").arg(&part).arg("--withheap").arg(pid.to_string()).stdout(Stdio::null()).status().context("createdump")?;
        if !status.success() {
            bail!("createdump failed ({status})");
        }
        fs::rename(&part, core)?;
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// `dumpheap -stat`'s table, from `Statistics:` through the `Total` line, sorted (rows of equal
/// size SOS lists in its own order).
fn sorted_table(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().skip_while(|l| l.trim_end() != "Statistics:").collect();
    if let Some(end) = lines.iter().position(|l| l.starts_with("Total ")) {
        lines.truncate(end + 1);
    }
    lines.sort_unstable();
    lines
}

/// `Total N objects, B bytes` of `dumpheap -stat`.
fn sos_totals(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("Total ") && l.contains(" objects, "))?;
    let rest = line.strip_prefix("Total ")?;
    let (objects, bytes) = rest.split_once(" objects, ")?;
    let n = |s: &str| s.trim().trim_end_matches(" bytes").replace(',', "").parse::<u64>().ok();
    Some((n(objects)?, n(bytes)?))
}

pub fn run(runs: u32, heap_mib: u64, remake: bool, memory_limits: &[u64]) -> Result<()> {
    let root = knot_samples::workspace_root();
    let target = target_dir(&root);
    let out_dir = target.join("bench");
    let work = out_dir.join("dotnet-heap");
    fs::create_dir_all(&work)?;
    fs::create_dir_all(out_dir.join("logs"))?;
    let core = work.join("core");
    if remake || !core.exists() {
        make_dump(&root, &target, &core, heap_mib)?;
    }
    let Some(sos) = dotnet_dump() else { bail!("dotnet-dump not found (dotnet tool install -g dotnet-dump, or set DOTNET_DUMP)") };
    let (knot, _) = build_knot(&root, &target)?;

    // The same answer first: knot's totals are SOS's.
    let json_out = Command::new(&knot).arg("analyze").arg(&core).args(["--format", "json"]).output().context("knot analyze --format json")?;
    let report: serde_json::Value = serde_json::from_slice(&json_out.stdout).context("knot's JSON")?;
    let heap = &report["dotnet"]["heap"];
    let knot_totals = (heap["total_objects"].as_u64(), heap["total_bytes"].as_u64());
    let sos_out = Command::new(&sos).arg("analyze").arg(&core).args(["-c", "dumpheap -stat", "-c", "exit"]).output().context("dotnet-dump")?;
    let sos_text = String::from_utf8_lossy(&sos_out.stdout);
    let sos_tot = sos_totals(&sos_text).context("no Total line in dotnet-dump's dumpheap -stat")?;
    let same = knot_totals == (Some(sos_tot.0), Some(sos_tot.1));
    println!("totals: knot {:?} objects/bytes, SOS {sos_tot:?}: {}", knot_totals, if same { "equal" } else { "DIFFERENT" });

    // `knot heap stat` prints `dumpheap -stat`'s table: the same lines, rows of equal size in
    // any order (SOS lists those in its own).
    let stat_out = Command::new(&knot).args(["heap", "stat"]).arg(&core).output().context("knot heap stat")?;
    if !stat_out.status.success() {
        bail!("knot heap stat failed ({}): {}", stat_out.status, String::from_utf8_lossy(&stat_out.stderr));
    }
    let stat_text = String::from_utf8_lossy(&stat_out.stdout);
    let (knot_table, sos_table) = (sorted_table(&stat_text), sorted_table(&sos_text));
    let table_same = knot_table.len() > 3 && knot_table == sos_table;
    println!(
        "table: knot heap stat {} lines, SOS dumpheap -stat {}: {}",
        knot_table.len(),
        sos_table.len(),
        if table_same { "every line equal" } else { "DIFFERENT" }
    );
    if !table_same {
        let only_knot: Vec<&&str> = knot_table.iter().filter(|l| !sos_table.contains(l)).take(5).collect();
        let only_sos: Vec<&&str> = sos_table.iter().filter(|l| !knot_table.contains(l)).take(5).collect();
        bail!("knot heap stat's table differs from dumpheap -stat's: only knot's {only_knot:#?}, only SOS's {only_sos:#?}");
    }

    let stat_argv: Vec<OsString> = vec![knot.clone().into(), "heap".into(), "stat".into(), core.clone().into()];
    let sos_argv: Vec<OsString> = vec![sos.clone().into(), "analyze".into(), core.clone().into(), "-c".into(), "dumpheap -stat".into(), "-c".into(), "exit".into()];
    let knot_argv: Vec<OsString> = vec![knot.clone().into(), "analyze".into(), core.clone().into()];
    // knot heap stat first and dotnet-dump second: `sos_over_knot` (the raw file's, the target's)
    // is theirs.
    let tools = [("knot heap stat", stat_argv), ("dotnet-dump dumpheap -stat", sos_argv), ("knot analyze (whole report)", knot_argv)];
    let log = |i: usize| out_dir.join("logs").join(format!("dotnet-heap-{i}.stderr"));
    eprintln!("measure big heap: warm-up, then {runs} rounds");
    let paired = measure_paired(&tools, &core, runs, log)?;
    let (samples, medians) = (&paired.samples, &paired.medians);
    let ratio = paired.sos_over_knot();
    let whole_ratio = medians[1] / medians[2];
    let core_size = fs::metadata(&core)?.len();
    println!("\n.NET heap: {:.2} GiB dump, {} objects on the heap, {runs} runs after 1 warm-up, median wall time", core_size as f64 / (1u64 << 30) as f64, sos_tot.0);
    for (i, (name, _)) in tools.iter().enumerate() {
        let rss = samples[i].iter().map(|s| s.max_rss_kib).max().unwrap_or(0);
        println!("  {name:<32} {:>8.3} s   peak RSS {:>7.1} MiB", medians[i], rss as f64 / 1024.0);
    }
    println!("  dotnet-dump / knot heap stat: {ratio:.1}x (target >= {SOS_OVER_KNOT_TARGET}x: {})", if ratio >= SOS_OVER_KNOT_TARGET { "met" } else { "NOT met" });
    println!("  dotnet-dump / knot analyze:   {whole_ratio:.1}x (whole report: stacks, locks, heap graph, retained sizes)");
    let own = json!({
        "heap_objects": sos_tot.0,
        "heap_bytes": sos_tot.1,
        "totals_equal_sos": same,
        "heap_stat_table_equals_sos": table_same,
        "sos_over_knot_analyze": whole_ratio,
    });
    let mut own = own;
    // Memory beyond the mapped dump: the analysis's peak anonymous resident set per object.
    let rss_anon = peak_rss_anon(&[knot.clone().into(), "analyze".into(), core.clone().into(), "--format".into(), "json".into(), "-o".into(), "/dev/null".into()])?;
    let per_object = rss_anon as f64 * 1024.0 / sos_tot.0.max(1) as f64;
    println!("  knot analyze peak RssAnon {:.1} MiB = {per_object:.1} bytes per object (target <= {BYTES_PER_OBJECT_TARGET})", rss_anon as f64 / 1024.0);
    own["knot_analyze_peak_rss_anon_kib"] = json!(rss_anon);
    own["knot_analyze_bytes_per_object"] = json!(per_object);

    let mut groups = Vec::new();
    for &limit in memory_limits {
        groups.push(in_cgroup(&knot, &core, limit, sos_tot.0, medians[1], &report)?);
    }
    if !groups.is_empty() {
        own["in_memory_cgroup"] = json!(groups);
    }

    // `knot heap root` against SOS `gcroot` on two objects: the list the static holds (near a
    // root) and an element deep in its array.
    own["heap_root"] = heap_root_bench(&knot, &sos, &core, report, runs, &out_dir)?;
    write_raw(&out_dir, "dotnet-heap", &raw_doc(&root, &core, &tools, &paired, SOS_OVER_KNOT_TARGET, own)?)?;
    if !same {
        bail!("knot's heap totals differ from SOS's");
    }
    Ok(())
}

/// The memory target: peak bytes per object beyond the mapped dump.
const BYTES_PER_OBJECT_TARGET: f64 = 40.0;
/// The issue's `knot heap root` target: SOS `gcroot`'s median over knot's.
const GCROOT_OVER_KNOT_TARGET: f64 = 10.0;
/// The element of the kept list's array timed as the deep object.
const DEEP_INDEX: u64 = 5_600_000;

/// Runs `argv` and samples its `/proc/PID/status` every 20 ms: the peak `RssAnon` in KiB
/// (memory of its own, not the mapped dump's pages).
fn peak_rss_anon(argv: &[OsString]) -> Result<u64> {
    let mut child = Command::new(&argv[0]).args(&argv[1..]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().context("spawn for RssAnon")?;
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    loop {
        if let Ok(text) = fs::read_to_string(&status)
            && let Some(kib) = text.lines().find_map(|l| l.strip_prefix("RssAnon:")).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(peak)
}

/// One 8-byte word of the dump, through SOS (`dq ADDR -c 1`).
fn sos_word(sos: &Path, core: &Path, address: u64) -> Result<u64> {
    let out = Command::new(sos).arg("analyze").arg(core).args(["-c", &format!("dq {address:x} -c 1"), "-c", "exit"]).output().context("dotnet-dump dq")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.trim_start().starts_with(&format!("{address:016x}:"))).with_context(|| format!("no word at {address:#x} in dotnet-dump's dq: {text}"))?;
    let word = line.split(':').nth(1).and_then(|w| w.split_whitespace().next()).context("dq's word")?;
    u64::from_str_radix(word, 16).context("dq's word in hex")
}

/// The object addresses of a path: knot's JSON `path[].address`, SOS's `-> ADDRESS` lines.
fn knot_path(json: &[u8]) -> Vec<u64> {
    let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_default();
    v["path"].as_array().map(|p| p.iter().filter_map(|s| u64::from_str_radix(s["address"].as_str()?.trim_start_matches("0x"), 16).ok()).collect()).unwrap_or_default()
}

fn sos_path(text: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.trim().strip_prefix("-> ")?.split_whitespace().next().and_then(|a| u64::from_str_radix(a, 16).ok())).collect()
}

fn heap_root_bench(knot: &Path, sos: &Path, core: &Path, report: serde_json::Value, runs: u32, out_dir: &Path) -> Result<serde_json::Value> {
    let list = report["dotnet"]["heap"]["dominators"]
        .as_array()
        .and_then(|d| d.iter().find(|h| h["type"].as_str().is_some_and(|t| t.starts_with("System.Collections.Generic.List<"))))
        .and_then(|h| u64::from_str_radix(h["address"].as_str()?.trim_start_matches("0x"), 16).ok())
        .context("no List among knot's top holders")?;
    // List<T>: the MethodTable, then `_items`; an array's elements start 16 bytes in.
    let items = sos_word(sos, core, list + 8)?;
    let deep = sos_word(sos, core, items + 16 + 8 * DEEP_INDEX)?;
    let mut out = Vec::new();
    for (what, address) in [("the List the static holds (near a root)", list), ("element 5,600,000 of its array (deep)", deep)] {
        let a = format!("{address:x}");
        // The same path first.
        let k = Command::new(knot).args(["heap", "root"]).arg(core).arg(&a).args(["--format", "json"]).output().context("knot heap root")?;
        let s = Command::new(sos).arg("analyze").arg(core).args(["-c", &format!("gcroot {a}"), "-c", "exit"]).output().context("dotnet-dump gcroot")?;
        let (kp, sp) = (knot_path(&k.stdout), sos_path(&String::from_utf8_lossy(&s.stdout)));
        let same = !kp.is_empty() && kp == sp;
        println!("\nheap root {a} ({what}): knot's path {} SOS gcroot's ({} objects)", if same { "equals" } else { "DIFFERS from" }, kp.len());
        let tools = [
            ("knot heap root", vec![knot.as_os_str().to_owned(), "heap".into(), "root".into(), core.as_os_str().to_owned(), a.clone().into()]),
            ("dotnet-dump gcroot", vec![sos.as_os_str().to_owned(), "analyze".into(), core.as_os_str().to_owned(), "-c".into(), format!("gcroot {a}").into(), "-c".into(), "exit".into()]),
        ];
        let log = |i: usize| out_dir.join("logs").join(format!("dotnet-heap-root-{a}-{i}.stderr"));
        let Paired { warm, samples, medians, .. } = measure_paired(&tools, core, runs, log)?;
        let ratio = medians[1] / medians[0];
        for (i, (name, _)) in tools.iter().enumerate() {
            let rss = samples[i].iter().map(|s| s.max_rss_kib).max().unwrap_or(0);
            println!("  {name:<32} {:>8.3} s   peak RSS {:>7.1} MiB", medians[i], rss as f64 / 1024.0);
        }
        println!("  gcroot / knot: {ratio:.1}x (target >= {GCROOT_OVER_KNOT_TARGET}x: {})", if ratio >= GCROOT_OVER_KNOT_TARGET { "met" } else { "NOT met" });
        if !same {
            bail!("knot heap root {a}: path {kp:x?}, SOS gcroot's {sp:x?}");
        }
        out.push(json!({ "object": what, "address": format!("{address:#x}"), "path_objects": kp.len(), "tools": tools_json(&tools, &warm, &samples, &medians), "gcroot_over_knot": ratio }));
    }
    Ok(json!(out))
}

/// A memory cgroup of its own for one run, removed when dropped.
struct MemoryCgroup {
    dir: PathBuf,
    /// The file a process joins the group through.
    join: PathBuf,
    /// The group's peak usage file (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`).
    peak: PathBuf,
    kind: &'static str,
}

impl MemoryCgroup {
    /// A child group limited to `limit` bytes: under v1's memory controller when mounted,
    /// else under v2's unified hierarchy (the memory controller enabled for children there).
    fn new(limit: u64) -> Result<MemoryCgroup> {
        let name = format!("knot-bench-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        if v1.join("memory.limit_in_bytes").exists() {
            let dir = v1.join(&name);
            fs::create_dir(&dir).with_context(|| format!("creating {} (needs root)", dir.display()))?;
            let g = MemoryCgroup { join: dir.join("tasks"), peak: dir.join("memory.max_usage_in_bytes"), dir, kind: "cgroup v1 memory.limit_in_bytes" };
            fs::write(g.dir.join("memory.limit_in_bytes"), limit.to_string()).context("memory.limit_in_bytes")?;
            return Ok(g);
        }
        let v2 = Path::new("/sys/fs/cgroup");
        if v2.join("cgroup.controllers").exists() {
            let _ = fs::write(v2.join("cgroup.subtree_control"), "+memory");
            let dir = v2.join(&name);
            fs::create_dir(&dir).with_context(|| format!("creating {} (needs root)", dir.display()))?;
            let g = MemoryCgroup { join: dir.join("cgroup.procs"), peak: dir.join("memory.peak"), dir, kind: "cgroup v2 memory.max" };
            fs::write(g.dir.join("memory.max"), limit.to_string()).context("memory.max")?;
            let _ = fs::write(g.dir.join("memory.swap.max"), "0");
            return Ok(g);
        }
        bail!("no memory cgroup: neither /sys/fs/cgroup/memory (v1) nor a v2 hierarchy at /sys/fs/cgroup")
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}

/// `knot analyze CORE --format json` inside a memory cgroup of `limit` bytes: wall time, peak
/// RssAnon and VmRSS (sampled every 20 ms), the group's peak, what the report held; printed beside
/// dotnet-dump's `sos_seconds`.
fn in_cgroup(knot: &Path, core: &Path, limit: u64, objects: u64, sos_seconds: f64, unconstrained: &serde_json::Value) -> Result<serde_json::Value> {
    let group = MemoryCgroup::new(limit)?;
    let out = std::env::temp_dir().join(format!("knot-bench-cgroup-{}.json", std::process::id()));
    // The shell joins the group, then becomes knot: every page knot touches is charged there.
    let script = "echo $$ > \"$1\" && shift && exec \"$@\"";
    let started = Instant::now();
    let mut child = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(&group.join)
        .arg(knot)
        .arg("analyze")
        .arg(core)
        .args(["--format", "json", "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("knot analyze in the cgroup")?;
    let status_file = format!("/proc/{}/status", child.id());
    let fd_dir = PathBuf::from(format!("/proc/{}/fd", child.id()));
    let (mut anon, mut rss, mut scratch) = (0u64, 0u64, 0u64);
    let status = loop {
        if let Ok(text) = fs::read_to_string(&status_file) {
            let kib = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok()).unwrap_or(0);
            anon = anon.max(kib("RssAnon:"));
            rss = rss.max(kib("VmRSS:"));
        }
        scratch = scratch.max(scratch_bytes(&fd_dir));
        if let Some(s) = child.try_wait()? {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall = started.elapsed().as_secs_f64();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    let group_peak = fs::read_to_string(&group.peak).ok().and_then(|t| t.trim().parse::<u64>().ok());
    let report: serde_json::Value = fs::read(&out).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let _ = fs::remove_file(&out);
    use std::os::unix::process::ExitStatusExt;
    let killed = status.signal() == Some(9);
    let whole = report["dotnet"]["heap"]["retained"].is_array();
    // The retained sizes, top holders and suspects of the unconstrained run, when they came.
    let parts = ["retained", "dominators", "suspects", "unreachable"];
    let equal = whole.then(|| parts.iter().all(|p| report["dotnet"]["heap"][p] == unconstrained["dotnet"]["heap"][p]));
    let limit_said = report["verdict_limits"].as_array().and_then(|l| l.iter().find(|l| l["short"] == "the heap's retained sizes")).and_then(|l| l["missing"].as_str()).map(str::to_string);
    let per_object = anon as f64 * 1024.0 / objects.max(1) as f64;
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("\nknot analyze in a {:.1} GiB memory cgroup ({}):", limit as f64 / (1u64 << 30) as f64, group.kind);
    println!(
        "  wall {wall:.3} s ({}), peak RssAnon {:.1} MiB = {per_object:.1} bytes per object, peak RSS {:.1} MiB, group peak {}, scratch {:.1} MiB",
        if killed { "KILLED (SIGKILL: the OOM killer)".to_string() } else { format!("exit {}", status.code().unwrap_or(-1)) },
        mib(anon),
        mib(rss),
        group_peak.map(|b| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)).unwrap_or_else(|| "unknown".into()),
        scratch as f64 / (1u64 << 20) as f64,
    );
    println!("  dotnet-dump dumpheap -stat {sos_seconds:.3} s (median above)");
    match (&limit_said, whole) {
        (_, true) => println!(
            "  report: whole (retained sizes read); retained sizes, top holders and suspects {} the unconstrained run's",
            if equal == Some(true) { "equal to" } else { "DIFFERENT from" }
        ),
        (Some(m), false) => println!("  report: without retained sizes, the limit said: {m}"),
        (None, false) if !killed => println!("  report: no retained sizes and no limit said (stderr: {})", stderr.trim()),
        _ => println!("  report: none"),
    }
    Ok(json!({
        "limit_bytes": limit,
        "cgroup": group.kind,
        "wall_seconds": wall,
        "exit": status.code(),
        "killed": killed,
        "peak_rss_anon_kib": anon,
        "peak_rss_kib": rss,
        "group_peak_bytes": group_peak,
        "bytes_per_object": per_object,
        "scratch_bytes": scratch,
        "retained_sizes": whole,
        "equal_to_unconstrained": equal,
        "limit_said": limit_said,
    }))
}

/// Bytes of the unlinked files a process has open (knot's scratch files: `… (deleted)`).
fn scratch_bytes(fd_dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(fd_dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().ends_with(" (deleted)")))
        .filter_map(|e| fs::metadata(e.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}
