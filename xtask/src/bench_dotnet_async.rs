//! `cargo xtask bench dotnet-async [--runs N] [--remake]`: knot's async stacks against SOS
//! `dumpasync` on a .NET dump with ~100k tasks.
//!
//! The dump is made here, never committed: `samples/dotnet/many_tasks` (built with the machine's
//! .NET SDK) makes 4,000 async stacks of 26 state machines each, every one awaiting a
//! TaskCompletionSource nobody completes (108,000 tasks), prints `ready`, and `createdump
//! --withheap` dumps it into `target/bench/dotnet-async/core` (kept for the next run; `--remake`
//! makes it again; delete it when done). Before timing, both readings are compared: knot's
//! `dotnet.async` stacks must be SOS's (the same boxes, in the same order). Then `knot analyze`
//! (release; its whole report, the async stacks from its one heap walk) and `dotnet-dump analyze
//! <core> -c dumpasync -c exit` run once each to warm the page cache and N rounds in turn. Prints
//! the medians, peak RSS and the ratio (target: knot at least 10x faster), and writes the raw
//! numbers to `target/bench/dotnet-async.json`.

use crate::bench::{build_knot, target_dir};
use crate::bench_dotnet::{dotnet_dump, measure_paired, raw_doc, write_raw};
use crate::bench_dotnet_heap::make_sample_dump;
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::ffi::OsString;
use std::fs;
use std::process::Command;

/// The target: dotnet-dump's median over knot's.
const SOS_OVER_KNOT_TARGET: f64 = 10.0;
const CHAINS: u32 = 4_000;
const DEPTH: u32 = 24;

/// The frame addresses of each `STACK n` block of `dumpasync`, in order (an awaited task's
/// `<< Awaiting: … >>` line is not a frame).
fn sos_stacks(text: &str) -> Vec<Vec<u64>> {
    let mut out: Vec<Vec<u64>> = Vec::new();
    for line in text.lines() {
        if line.starts_with("STACK ") {
            out.push(Vec::new());
            continue;
        }
        let Some(s) = out.last_mut() else { continue };
        let t = line.trim_start();
        if t.is_empty() || t.starts_with("<<") {
            continue;
        }
        if let Some(a) = t.split(' ').next().and_then(|a| u64::from_str_radix(a, 16).ok()) {
            s.push(a);
        }
    }
    out
}

fn knot_stacks(report: &serde_json::Value) -> Vec<Vec<u64>> {
    let addr = |v: &serde_json::Value| v.as_str().and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()).unwrap_or(0);
    report["dotnet"]["async"].as_array().map(|a| a.iter().map(|s| s["frames"].as_array().map(|f| f.iter().map(|f| addr(&f["address"])).collect()).unwrap_or_default()).collect()).unwrap_or_default()
}

pub fn run(runs: u32, remake: bool) -> Result<()> {
    let root = knot_samples::workspace_root();
    let target = target_dir(&root);
    let out_dir = target.join("bench");
    fs::create_dir_all(out_dir.join("logs"))?;
    let core = out_dir.join("dotnet-async").join("core");
    if remake || !core.exists() {
        make_sample_dump(&root, &target, &core, "many_tasks", &[CHAINS.to_string(), DEPTH.to_string()])?;
    }
    let Some(sos) = dotnet_dump() else { bail!("dotnet-dump not found (dotnet tool install -g dotnet-dump, or set DOTNET_DUMP)") };
    let (knot, _) = build_knot(&root, &target)?;

    // The same answer first: knot's async stacks are SOS's.
    let json_out = Command::new(&knot).arg("analyze").arg(&core).args(["--format", "json"]).output().context("knot analyze --format json")?;
    let report: serde_json::Value = serde_json::from_slice(&json_out.stdout).context("knot's JSON")?;
    let knot_read = knot_stacks(&report);
    let sos_out = Command::new(&sos).arg("analyze").arg(&core).args(["-c", "dumpasync", "-c", "exit"]).output().context("dotnet-dump")?;
    let sos_read = sos_stacks(&String::from_utf8_lossy(&sos_out.stdout));
    let frames: usize = sos_read.iter().map(Vec::len).sum();
    let same = knot_read == sos_read;
    println!(
        "async stacks: knot {} ({} frames), SOS {} ({frames} frames): {}",
        knot_read.len(),
        knot_read.iter().map(Vec::len).sum::<usize>(),
        sos_read.len(),
        if same { "equal" } else { "DIFFERENT" }
    );
    let tasks = report["dotnet"]["async_tasks"].clone();

    let knot_argv: Vec<OsString> = vec![knot.clone().into(), "analyze".into(), core.clone().into()];
    let sos_argv: Vec<OsString> = vec![sos.clone().into(), "analyze".into(), core.clone().into(), "-c".into(), "dumpasync".into(), "-c".into(), "exit".into()];
    let tools = [("knot analyze (whole report)", knot_argv), ("dotnet-dump dumpasync", sos_argv)];
    let log = |i: usize| out_dir.join("logs").join(format!("dotnet-async-{i}.stderr"));
    eprintln!("measure many tasks: warm-up, then {runs} rounds");
    let paired = measure_paired(&tools, &core, runs, log)?;
    let (samples, medians) = (&paired.samples, &paired.medians);
    let ratio = paired.sos_over_knot();
    let core_size = fs::metadata(&core)?.len();
    println!("\n.NET async: {:.0} MiB dump, {} async stacks, {frames} state machines in them, {runs} runs after 1 warm-up, median wall time", core_size as f64 / (1u64 << 20) as f64, sos_read.len());
    for (i, (name, _)) in tools.iter().enumerate() {
        let rss = samples[i].iter().map(|s| s.max_rss_kib).max().unwrap_or(0);
        println!("  {name:<32} {:>8.3} s   peak RSS {:>7.1} MiB", medians[i], rss as f64 / 1024.0);
    }
    println!("  dotnet-dump / knot: {ratio:.1}x (target >= {SOS_OVER_KNOT_TARGET}x: {})", if ratio >= SOS_OVER_KNOT_TARGET { "met" } else { "NOT met" });
    let own = json!({
        "async_stacks": sos_read.len(),
        "async_frames": frames,
        "knot_async_tasks": tasks,
        "stacks_equal_sos": same,
    });
    write_raw(&out_dir, "dotnet-async", &raw_doc(&root, &core, &tools, &paired, SOS_OVER_KNOT_TARGET, own)?)?;
    if !same {
        bail!("knot's async stacks differ from SOS's dumpasync");
    }
    Ok(())
}
