//! `cargo xtask bench dotnet-heap [--heap-mib N] [--runs N] [--remake]`: knot against SOS
//! `dumpheap -stat` on a .NET dump with a multi-GB heap.
//!
//! The dump is made here, never committed: `samples/dotnet/big_heap` (built with the machine's
//! .NET SDK) fills its heap to `--heap-mib` MiB (default 2048) with millions of small objects,
//! prints `ready`, and `createdump --withheap` dumps it into `target/bench/dotnet-heap/core`
//! (kept for the next run; `--remake` makes it again). Then, in one run, `knot analyze` (release;
//! its whole report: stacks, locks and the heap walk) and `dotnet-dump analyze <core> -c
//! "dumpheap -stat" -c exit` run once each to warm the page cache and N rounds in turn. Before
//! timing, both outputs are compared: knot's `dotnet.heap` totals must equal SOS's "Total" line.
//! Prints the medians, peak RSS and the ratio (target: knot at least 10x faster), and writes the
//! raw numbers to `target/bench/dotnet-heap.json`.

use crate::bench::{build_knot, target_dir};
use crate::bench_dotnet::{dotnet_dump, measure_paired, raw_doc, write_raw};
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
    let line = text.lines().filter(|l| l.starts_with("Microsoft.NETCore.App ")).last().context("no Microsoft.NETCore.App runtime")?;
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
    let status = Command::new(&dotnet).args(["build", "-c", "Debug", "-nologo", "-v", "q"]).arg(&project).status().context("dotnet build")?;
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

/// `Total N objects, B bytes` of `dumpheap -stat`.
fn sos_totals(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("Total ") && l.contains(" objects, "))?;
    let rest = line.strip_prefix("Total ")?;
    let (objects, bytes) = rest.split_once(" objects, ")?;
    let n = |s: &str| s.trim().trim_end_matches(" bytes").replace(',', "").parse::<u64>().ok();
    Some((n(objects)?, n(bytes)?))
}

pub fn run(runs: u32, heap_mib: u64, remake: bool) -> Result<()> {
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

    let knot_argv: Vec<OsString> = vec![knot.clone().into(), "analyze".into(), core.clone().into()];
    let sos_argv: Vec<OsString> = vec![sos.clone().into(), "analyze".into(), core.clone().into(), "-c".into(), "dumpheap -stat".into(), "-c".into(), "exit".into()];
    let tools = [("knot analyze (whole report)", knot_argv), ("dotnet-dump dumpheap -stat", sos_argv)];
    let log = |i: usize| out_dir.join("logs").join(format!("dotnet-heap-{i}.stderr"));
    eprintln!("measure big heap: warm-up, then {runs} rounds");
    let paired = measure_paired(&tools, &core, runs, log)?;
    let (samples, medians) = (&paired.samples, &paired.medians);
    let ratio = paired.sos_over_knot();
    let core_size = fs::metadata(&core)?.len();
    println!("\n.NET heap: {:.2} GiB dump, {} objects on the heap, {runs} runs after 1 warm-up, median wall time", core_size as f64 / (1u64 << 30) as f64, sos_tot.0);
    for (i, (name, _)) in tools.iter().enumerate() {
        let rss = samples[i].iter().map(|s| s.max_rss_kib).max().unwrap_or(0);
        println!("  {name:<32} {:>8.3} s   peak RSS {:>7.1} MiB", medians[i], rss as f64 / 1024.0);
    }
    println!("  dotnet-dump / knot: {ratio:.1}x (target >= {SOS_OVER_KNOT_TARGET}x: {})", if ratio >= SOS_OVER_KNOT_TARGET { "met" } else { "NOT met" });
    let own = json!({
        "heap_objects": sos_tot.0,
        "heap_bytes": sos_tot.1,
        "totals_equal_sos": same,
    });
    write_raw(&out_dir, "dotnet-heap", &raw_doc(&root, &core, &tools, &paired, SOS_OVER_KNOT_TARGET, own)?)?;
    if !same {
        bail!("knot's heap totals differ from SOS's");
    }
    Ok(())
}
