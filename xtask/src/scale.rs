//! `cargo xtask bench --scale [--threads N] [--gib G] [--runs R] [--gcore] [--keep]`
//!
//! The issue "knot's cost grows with threads x stack depth, not with dump size", measured: a
//! real core of G GiB (default 8) with N blocked threads (default 1000), beside the small
//! `many_threads` cores (220, 600 and N threads, no ballast), all dumped by the kernel.
//!
//! The big one is `many_threads N G`: the sample maps G GiB of private anonymous memory and
//! writes one byte per 64 MiB of it before its threads block, so the process is G GiB big but
//! hardly resident, and the kernel (SIGABRT, RLIMIT_CORE unlimited) writes the untouched pages
//! as holes: the file's apparent size is G GiB, its disk use is not (both are recorded).
//! `--gcore` also dumps it with gcore, which (gdb 13) writes every zero page for real: G GiB of
//! disk, and the time that takes, so it is off by default.
//!
//! Every tool (knot analyze, knot --stacks-only, gdb `thread apply all bt`, eu-stack) runs once
//! on every core to warm up, then R rounds go over all cores and tools in turn, so a drift of
//! this (shared, loaded) machine hits them alike. Per run, from `wait4`: wall time, CPU time
//! (user+sys), peak RSS and page faults (`ru_minflt + ru_majflt`, the pages the tool mapped in:
//! what it touched of an mmapped core, plus its heap); and the bytes it read with read-like
//! syscalls (`rchar`, for tools that pread the core instead of mapping it).
//!
//! Writes `target/bench/scale.json` (raw runs) and `target/bench/scale.md` (the tables for
//! `docs/benchmarks.md`). Nothing is asserted: the numbers are reported. knot's JSON report of
//! each core is checked once (untimed) against gdb's thread count. The big core(s) are removed
//! at the end, whatever happened, unless `--keep` (then a later `--scale` reuses them).

use crate::bench::{self, Sample, Tool};
use anyhow::{Context, Result, bail};
use knot_samples::{Availability, DumpKind, SampleDump};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;
/// Kept free on the disk beyond what a dump may need.
const DISK_MARGIN: u64 = 4 << 30;

pub struct Opts {
    pub threads: u32,
    pub gib: u32,
    pub runs: u32,
    pub gcore: bool,
    pub keep: bool,
}

/// One core to measure.
struct Case {
    /// Blocked threads asked for (the core has one more: main).
    threads: u32,
    /// Ballast GiB (0: the plain sample).
    gib: u32,
    kind: DumpKind,
    dump: SampleDump,
    /// Whether the dump was already there (cached) rather than made by this run.
    reused: bool,
    /// Seconds `ensure` took (build, run, dump, gdb's oracle), when made by this run.
    make_s: Option<f64>,
    /// Seconds the dump itself took, from the files' times (see [`dump_seconds`]).
    dump_s: Option<f64>,
    size: u64,
    allocated: u64,
    gdb_threads: Option<usize>,
    /// Threads and gate_lock waiters in knot's JSON report (an untimed run).
    knot_threads: Option<usize>,
    knot_waiters: Option<usize>,
}

impl Case {
    fn label(&self) -> String {
        if self.gib > 0 {
            format!("{} threads + {} GiB, {}", self.threads, self.gib, self.kind)
        } else {
            format!("{} threads, {}", self.threads, self.kind)
        }
    }
}

/// Removes the big dumps' directory when dropped (on success and on error alike), unless kept.
struct Cleanup {
    dir: PathBuf,
    keep: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.keep || !self.dir.exists() {
            return;
        }
        match fs::remove_dir_all(&self.dir) {
            Ok(()) => eprintln!("cleanup removed {}", self.dir.display()),
            Err(e) => eprintln!("cleanup: could not remove {}: {e}", self.dir.display()),
        }
    }
}

pub fn run(o: Opts) -> Result<()> {
    let root = knot_samples::workspace_root();
    let target = bench::target_dir(&root);
    let out_dir = target.join("bench");
    let logs = out_dir.join("logs");
    fs::create_dir_all(&logs)?;
    let command = std::iter::once("cargo xtask".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");

    let big_args = [o.threads.to_string(), o.gib.to_string()];
    let big_dir = knot_samples::out_dir().join(format!("many_threads-{}-{}", o.threads, o.gib));
    let _cleanup = Cleanup {
        dir: big_dir.clone(),
        keep: o.keep,
    };

    // The dumps first: making them runs gcc and gdb, which should not overlap the timings.
    let mut cases: Vec<Case> = Vec::new();
    let mut skipped: Vec<Value> = Vec::new();
    let mut small = vec![220, 600, o.threads];
    small.sort_unstable();
    small.dedup();
    for &n in &small {
        // 220 is the sample's default: its cached dump is the one the tests use.
        let args: Vec<String> = if n == 220 {
            vec![]
        } else {
            vec![n.to_string()]
        };
        make(&mut cases, &mut skipped, n, 0, DumpKind::Kernel, &args)?;
    }
    let free = free_bytes(&knot_samples::out_dir()).unwrap_or(u64::MAX);
    let need = (u64::from(o.gib) << 30) + DISK_MARGIN;
    if free < need {
        skipped.push(json!({"case": format!("{} threads + {} GiB, kernel", o.threads, o.gib),
            "reason": format!("{:.1} GiB free on disk, {:.1} GiB wanted (should the kernel not write holes)", free as f64 / GIB, need as f64 / GIB)}));
    } else {
        make(
            &mut cases,
            &mut skipped,
            o.threads,
            o.gib,
            DumpKind::Kernel,
            &big_args,
        )?;
    }
    if o.gcore {
        if bench::find_tool("gcore").is_none() {
            skipped.push(json!({"case": "gcore", "reason": "gcore not found on PATH"}));
        } else {
            make(
                &mut cases,
                &mut skipped,
                o.threads,
                0,
                DumpKind::Gcore,
                &[o.threads.to_string()],
            )?;
            let free = free_bytes(&knot_samples::out_dir()).unwrap_or(u64::MAX);
            if free < need {
                skipped.push(json!({"case": format!("{} threads + {} GiB, gcore", o.threads, o.gib),
                    "reason": format!("{:.1} GiB free on disk, {:.1} GiB wanted", free as f64 / GIB, need as f64 / GIB)}));
            } else {
                make(
                    &mut cases,
                    &mut skipped,
                    o.threads,
                    o.gib,
                    DumpKind::Gcore,
                    &big_args,
                )?;
            }
        }
    } else {
        skipped.push(json!({"case": format!("{} threads + {} GiB, gcore", o.threads, o.gib),
            "reason": format!("not made unless --gcore: gdb 13's gcore writes every page of the ballast, zeros included \
                       ({} GiB of disk written for real; see docs/benchmarks.md)", o.gib)}));
    }
    if !cases.iter().any(|c| c.gib > 0) {
        bail!("the big core could not be made (see above); nothing to compare");
    }

    let (knot, has_stacks_only) = bench::build_knot(&root, &target)?;
    let gdb = bench::find_tool("gdb");
    let eu_stack = bench::find_tool("eu-stack");
    let mut skipped_tools: Vec<Value> = Vec::new();
    if !has_stacks_only {
        skipped_tools.push(
            json!({"tool": "knot --stacks-only", "reason": "this knot has no --stacks-only"}),
        );
    }
    if gdb.is_none() {
        skipped_tools.push(json!({"tool": "gdb", "reason": "gdb not found on PATH"}));
    }
    if eu_stack.is_none() {
        skipped_tools.push(json!({"tool": "eu-stack", "reason": "eu-stack not found on PATH (apt-get install elfutils)"}));
    }
    let tools_for = |d: &SampleDump| -> Vec<Tool> {
        let mut v = vec![Tool {
            name: "knot analyze",
            argv: bench::knot_argv(&knot, d, false),
        }];
        if has_stacks_only {
            v.push(Tool {
                name: "knot --stacks-only",
                argv: bench::knot_argv(&knot, d, true),
            });
        }
        if let Some(g) = &gdb {
            v.push(Tool {
                name: "gdb",
                argv: bench::gdb_argv(g, d),
            });
        }
        if let Some(e) = &eu_stack {
            v.push(Tool {
                name: "eu-stack",
                argv: bench::eu_stack_argv(e, d),
            });
        }
        v
    };

    // Untimed: knot's report of each core, against gdb's thread count.
    for c in &mut cases {
        let report = logs.join(format!("scale-{}.json", slug(&c.label())));
        let mut argv = bench::knot_argv(&knot, &c.dump, false);
        if let Some(i) = argv.iter().position(|a| a == "/dev/null") {
            argv[i] = report.clone().into();
        }
        let s = bench::run_once(
            &argv,
            &logs.join(format!("scale-{}-check.stderr", slug(&c.label()))),
        )?;
        if s.code != Some(0) {
            bail!(
                "knot failed on {} (exit {:?})",
                c.dump.core.display(),
                s.code
            );
        }
        let v: Value = serde_json::from_str(&fs::read_to_string(&report)?)
            .with_context(|| format!("parsing {}", report.display()))?;
        c.knot_threads = v["threads"].as_array().map(Vec::len);
        c.knot_waiters = v["locks"].as_array().and_then(|locks| {
            locks
                .iter()
                .find(|l| l["name"] == "gate_lock")
                .and_then(|l| l["waiter_tids"].as_array().map(Vec::len))
        });
        eprintln!(
            "check   {}: knot {} threads, {} gate_lock waiters; gdb {} threads",
            c.label(),
            opt(c.knot_threads),
            opt(c.knot_waiters),
            opt(c.gdb_threads)
        );
    }

    let commit = bench::git(&root, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = bench::git(
        &root,
        &[
            "status",
            "--porcelain",
            "--",
            "src",
            "Cargo.toml",
            "Cargo.lock",
        ],
    )
    .is_some_and(|s| !s.is_empty());
    let machine = bench::machine_info();
    let versions = json!({
        "knot": bench::knot_version(&knot),
        "gdb": gdb.as_ref().and_then(|g| bench::first_line(g, "--version")),
        "eu-stack": eu_stack.as_ref().and_then(|e| bench::first_line(e, "--version")),
    });
    let date = bench::utc_now();
    let load_before = loadavg3();

    // Warm-up over everything, then the rounds over everything.
    let tools: Vec<Vec<Tool>> = cases.iter().map(|c| tools_for(&c.dump)).collect();
    let log = |c: &Case, t: &Tool| {
        logs.join(format!(
            "scale-{}-{}.stderr",
            slug(&c.label()),
            slug(t.name)
        ))
    };
    let mut warmups: Vec<Vec<Sample>> = Vec::new();
    let mut runs: Vec<Vec<Vec<Sample>>> = Vec::new();
    eprintln!(
        "measure {} cores x {} tools: warm-up, then {} rounds",
        cases.len(),
        tools[0].len(),
        o.runs
    );
    for (c, ts) in cases.iter().zip(&tools) {
        let mut w = Vec::new();
        for t in ts {
            let s = bench::run_once(&t.argv, &log(c, t))?;
            eprintln!(
                "warm-up {:<28} {:<20} {:>7.2}s",
                c.label(),
                t.name,
                s.wall.as_secs_f64()
            );
            w.push(s);
        }
        warmups.push(w);
        runs.push(vec![Vec::new(); ts.len()]);
    }
    for r in 0..o.runs {
        for (ci, (c, ts)) in cases.iter().zip(&tools).enumerate() {
            for (ti, t) in ts.iter().enumerate() {
                let s = bench::run_once(&t.argv, &log(c, t))?;
                runs[ci][ti].push(s);
            }
        }
        eprintln!(
            "round   {}/{} done (load {:.2})",
            r + 1,
            o.runs,
            bench::loadavg().unwrap_or(f64::NAN)
        );
    }
    let load_after = loadavg3();

    // Aggregates: per case, per tool.
    let stats: Vec<Vec<Stats>> = runs
        .iter()
        .map(|per_tool| per_tool.iter().map(|s| Stats::of(s)).collect())
        .collect();
    let find = |ci: usize, name: &str| {
        tools[ci]
            .iter()
            .position(|t| t.name == name)
            .map(|ti| &stats[ci][ti])
    };

    let mut text = String::new();
    let mut md = String::new();
    let _ = writeln!(md, "Command: `{command}`  ");
    let _ = writeln!(
        md,
        "Date: {date}; knot {}{}; machine: {} cores ({}), {:.0} GiB RAM, Linux {}, shared and loaded: \
         loadavg (1/5/15 min) {} before, {} after.  ",
        &commit[..commit.len().min(12)],
        if dirty {
            " (uncommitted changes in src/)"
        } else {
            ""
        },
        machine["cores"],
        machine["cpu"].as_str().unwrap_or("?"),
        machine["mem_total_bytes"].as_f64().unwrap_or(0.0) / GIB,
        machine["kernel"].as_str().unwrap_or("?"),
        fmt_load(&load_before),
        fmt_load(&load_after),
    );
    let _ = writeln!(
        md,
        "Tools: {}; {}; {}. One warm-up run of every tool on every core, then {} rounds over all of them; \
         medians of the rounds (peak RSS: the largest).\n",
        versions["knot"].as_str().unwrap_or("knot"),
        versions["gdb"].as_str().unwrap_or("gdb: skipped"),
        versions["eu-stack"].as_str().unwrap_or("eu-stack: skipped"),
        o.runs
    );
    let _ = writeln!(
        md,
        "Cores (all of `many_threads`, blocked threads + main):\n"
    );
    let _ = writeln!(
        md,
        "| core | threads | apparent size | on disk | dump took | knot check |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---|");
    for c in &cases {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            c.label(),
            opt(c.gdb_threads),
            size(c.size),
            size(c.allocated),
            c.dump_s.map_or("?".into(), |s| format!(
                "{s:.1} s{}",
                if c.reused { " (earlier)" } else { "" }
            )),
            check_text(c)
        );
    }
    let _ = writeln!(
        md,
        "\n| core | tool | wall | CPU | peak RSS | page faults | read() |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|");
    for (ci, c) in cases.iter().enumerate() {
        let _ = writeln!(
            text,
            "\n{}: {} threads, {} apparent, {} on disk\n  {:<20} {:>9} {:>9} {:>11} {:>12} {:>11}",
            c.label(),
            opt(c.gdb_threads),
            size(c.size),
            size(c.allocated),
            "tool",
            "wall",
            "cpu",
            "peak RSS",
            "page faults",
            "read()"
        );
        for (ti, t) in tools[ci].iter().enumerate() {
            let s = &stats[ci][ti];
            let note = if s.failed > 0 {
                format!("  exit != 0 in {}/{} runs", s.failed, o.runs)
            } else {
                String::new()
            };
            let _ = writeln!(
                text,
                "  {:<20} {:>8.3}s {:>8.3}s {:>11} {:>12.0} {:>11}{note}",
                t.name,
                s.wall,
                s.cpu,
                bench::mib(s.rss),
                s.faults,
                s.rchar.map_or("?".into(), |b| bench::mib(b as u64))
            );
            let _ = writeln!(
                md,
                "| {} | {} | {:.3} s | {:.3} s | {:.1} MiB | {:.0} | {} |{}",
                c.label(),
                t.name,
                s.wall,
                s.cpu,
                s.rss as f64 / MIB,
                s.faults,
                s.rchar
                    .map_or("?".into(), |b| format!("{:.1} MiB", b / MIB)),
                if s.failed > 0 {
                    format!(" exit != 0 in {}/{} runs", s.failed, o.runs)
                } else {
                    String::new()
                }
            );
        }
    }

    // Peers over knot, on the same core.
    let _ = writeln!(
        md,
        "\nPeer / knot analyze, same core (wall, CPU, peak RSS, page faults):\n"
    );
    let _ = writeln!(md, "| core | gdb / knot | eu-stack / knot |");
    let _ = writeln!(md, "|---|---|---|");
    let _ = writeln!(
        text,
        "\npeer / knot analyze, same core (wall, cpu, peak RSS, page faults):"
    );
    let mut peer_json = Vec::new();
    for (ci, c) in cases.iter().enumerate() {
        let k = find(ci, "knot analyze").expect("knot is always measured");
        let g = find(ci, "gdb").map(|p| p.over(k));
        let e = find(ci, "eu-stack").map(|p| p.over(k));
        let _ = writeln!(
            text,
            "  {:<28} gdb {}   eu-stack {}",
            c.label(),
            ratio_text(g.as_ref()),
            ratio_text(e.as_ref())
        );
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            c.label(),
            ratio_text(g.as_ref()),
            ratio_text(e.as_ref())
        );
        peer_json.push(json!({"core": c.label(), "gdb_over_knot": g.map(|r| r.json()), "eu_stack_over_knot": e.map(|r| r.json())}));
    }

    // The question: big core over the small one with as many threads, per tool.
    let mut growth_json = Vec::new();
    for (bi, b) in cases.iter().enumerate().filter(|(_, c)| c.gib > 0) {
        let Some(si) = cases
            .iter()
            .position(|c| c.gib == 0 && c.threads == b.threads && c.kind == b.kind)
        else {
            continue;
        };
        let s = &cases[si];
        let head = format!(
            "{} over {} ({:.0}x the apparent size, {:.2}x the disk use)",
            b.label(),
            s.label(),
            b.size as f64 / s.size as f64,
            b.allocated as f64 / s.allocated as f64
        );
        let _ = writeln!(
            text,
            "\n{head}, per tool (wall, cpu, peak RSS, page faults, read()):"
        );
        let _ = writeln!(md, "\nDump-size effect: {head}; per tool:\n");
        let _ = writeln!(
            md,
            "| tool | wall | CPU | peak RSS | page faults | read() |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
        let mut per_tool = Vec::new();
        for t in &tools[bi] {
            let (Some(x), Some(y)) = (find(bi, t.name), find(si, t.name)) else {
                continue;
            };
            let r = x.over(y);
            let _ = writeln!(
                text,
                "  {:<20} {}  read() {}",
                t.name,
                ratio_text(Some(&r)),
                fmt_ratio(r.rchar)
            );
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                t.name,
                fmt_ratio(Some(r.wall)),
                fmt_ratio(Some(r.cpu)),
                fmt_ratio(Some(r.rss)),
                fmt_ratio(Some(r.faults)),
                fmt_ratio(r.rchar)
            );
            per_tool.push(json!({"tool": t.name, "ratios": r.json()}));
        }
        growth_json.push(json!({"big": b.label(), "small": s.label(),
            "apparent_size_ratio": b.size as f64 / s.size as f64,
            "allocated_ratio": b.allocated as f64 / s.allocated as f64,
            "per_tool": per_tool}));
    }

    // What knot's cost does grow with: threads. Over the kernel cores without ballast, the
    // cost added per thread beyond the smallest core (its fixed cost: loading the modules'
    // symbols and CFI, whatever the dump).
    let plain: Vec<usize> = (0..cases.len())
        .filter(|&i| cases[i].kind == DumpKind::Kernel)
        .collect();
    let base = plain
        .iter()
        .copied()
        .filter(|&i| cases[i].gib == 0)
        .min_by_key(|&i| cases[i].threads);
    let mut per_thread_json = Vec::new();
    if let Some(bi) = base {
        let b = find(bi, "knot analyze").expect("knot is always measured");
        let bn = cases[bi]
            .gdb_threads
            .unwrap_or(cases[bi].threads as usize + 1) as f64;
        let _ = writeln!(
            text,
            "\nknot analyze against threads (kernel cores; added cost per thread beyond {}):",
            cases[bi].label()
        );
        let _ = writeln!(
            md,
            "\nknot analyze against threads and dump size (kernel cores; the added cost per thread is over {}):\n",
            cases[bi].label()
        );
        let _ = writeln!(
            md,
            "| core | threads | apparent size | CPU | page faults | peak RSS | added CPU / thread | added faults / thread |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for &ci in &plain {
            let c = &cases[ci];
            let (Some(k), Some(n)) = (find(ci, "knot analyze"), c.gdb_threads) else {
                continue;
            };
            let dn = n as f64 - bn;
            let (dcpu, dflt) = if dn > 0.0 {
                (
                    Some((k.cpu - b.cpu) * 1e3 / dn),
                    Some((k.faults - b.faults) / dn),
                )
            } else {
                (None, None)
            };
            let per =
                |v: Option<f64>, unit: &str| v.map_or("-".into(), |v| format!("{v:.3}{unit}"));
            let _ = writeln!(
                text,
                "  {:<28} {:>5} threads {:>11}  cpu {:>7.3}s  faults {:>7.0}  +cpu/thread {:>10}  +faults/thread {:>7}",
                c.label(),
                n,
                size(c.size),
                k.cpu,
                k.faults,
                per(dcpu, " ms"),
                per(dflt, "")
            );
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.3} s | {:.0} | {:.1} MiB | {} | {} |",
                c.label(),
                n,
                size(c.size),
                k.cpu,
                k.faults,
                k.rss as f64 / MIB,
                per(dcpu, " ms"),
                per(dflt, "")
            );
            per_thread_json.push(
                json!({"core": c.label(), "threads": n, "cpu_s": k.cpu, "page_faults": k.faults,
                "added_cpu_ms_per_thread": dcpu, "added_faults_per_thread": dflt}),
            );
        }
    }
    if !skipped.is_empty() || !skipped_tools.is_empty() {
        let _ = writeln!(md, "\nSkipped:\n");
        let _ = writeln!(text, "\nskipped:");
        for s in skipped.iter().chain(&skipped_tools) {
            let what = s["case"].as_str().or(s["tool"].as_str()).unwrap_or("?");
            let why = s["reason"].as_str().unwrap_or("?");
            let _ = writeln!(md, "- {what}: {why}");
            let _ = writeln!(text, "  {what}: {why}");
        }
    }
    print!("{text}");

    let case_json: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(ci, c)| {
            json!({
                "label": c.label(),
                "threads_arg": c.threads,
                "ballast_gib": c.gib,
                "kind": c.kind.as_str(),
                "core": c.dump.core,
                "binary": c.dump.binary,
                "core_size_bytes": c.size,
                "core_allocated_bytes": c.allocated,
                "core_threads_gdb": c.gdb_threads,
                "core_threads_knot": c.knot_threads,
                "gate_lock_waiters_knot": c.knot_waiters,
                "reused_cached_dump": c.reused,
                "make_s": c.make_s,
                "dump_s": c.dump_s,
                "tools": tools[ci].iter().enumerate().map(|(ti, t)| {
                    let s = &stats[ci][ti];
                    json!({
                        "tool": t.name,
                        "command": t.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
                        "wall_s_median": s.wall,
                        "cpu_s_median": s.cpu,
                        "peak_rss_bytes": s.rss,
                        "page_faults_median": s.faults,
                        "rchar_bytes_median": s.rchar,
                        "failed_runs": s.failed,
                        "warmup": bench::sample_json(&warmups[ci][ti]),
                        "runs": runs[ci][ti].iter().map(bench::sample_json).collect::<Vec<_>>(),
                    })
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    let doc = json!({
        "command": command,
        "date_utc": date,
        "commit": commit,
        "knot_sources_dirty": dirty,
        "machine": machine,
        "versions": versions,
        "threads_arg": o.threads,
        "ballast_gib": o.gib,
        "runs": o.runs,
        "warmup_runs": 1,
        "page_cache": "warm (every tool ran once on every core before the rounds)",
        "page_faults": "ru_minflt + ru_majflt of the tool's process (wait4)",
        "rchar": "bytes read with read-like syscalls, any file (/proc/PID/io of the zombie)",
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cores": case_json,
        "peer_over_knot": peer_json,
        "big_over_small": growth_json,
        "knot_against_threads": per_thread_json,
        "skipped": skipped,
        "skipped_tools": skipped_tools,
        "kept_big_cores": o.keep,
    });
    let json_path = out_dir.join("scale.json");
    fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let md_path = out_dir.join("scale.md");
    fs::write(&md_path, &md).with_context(|| format!("writing {}", md_path.display()))?;
    println!(
        "\nmeasured {date}, loadavg {} -> {}\nraw numbers: {}\ntables for docs/benchmarks.md: {}",
        fmt_load(&load_before),
        fmt_load(&load_after),
        json_path.display(),
        md_path.display()
    );
    if o.keep {
        println!("kept: {}", big_dir.display());
    }
    Ok(())
}

/// Makes (or finds cached) one dump and appends it to `cases`, or records why not.
fn make(
    cases: &mut Vec<Case>,
    skipped: &mut Vec<Value>,
    threads: u32,
    gib: u32,
    kind: DumpKind,
    args: &[String],
) -> Result<()> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let what = format!("many_threads {} ({kind})", args.join(" "));
    eprintln!("dump    {what} ...");
    let started = Instant::now();
    let expected_core = knot_samples::out_dir()
        .join(
            std::iter::once("many_threads")
                .chain(args.iter().copied())
                .collect::<Vec<_>>()
                .join("-"),
        )
        .join(kind.as_str())
        .join("core");
    let before = fs::metadata(&expected_core).and_then(|m| m.modified()).ok();
    let d = match knot_samples::try_ensure_with_args("many_threads", kind, &args)
        .with_context(|| format!("making {what}"))?
    {
        Availability::Ready(d) => d,
        Availability::Skipped(why) => {
            eprintln!("skipped {what}: {why}");
            skipped.push(json!({"case": what, "reason": why}));
            return Ok(());
        }
    };
    let took = started.elapsed().as_secs_f64();
    let meta = fs::metadata(&d.core).with_context(|| format!("reading {}", d.core.display()))?;
    // A stale dump (older than the sources) is remade: then the core is new.
    let reused = before.is_some() && meta.modified().ok() == before;
    let c = Case {
        threads,
        gib,
        kind,
        reused,
        make_s: (!reused).then_some(took),
        dump_s: dump_seconds(&d),
        size: meta.len(),
        allocated: meta.blocks() * 512,
        gdb_threads: d.gdb_threads().ok().map(|t| t.len()),
        knot_threads: None,
        knot_waiters: None,
        dump: d,
    };
    eprintln!(
        "dump    {what}: {} apparent, {} on disk, {} threads{}",
        size(c.size),
        size(c.allocated),
        opt(c.gdb_threads),
        if c.reused {
            " (cached)".to_string()
        } else {
            format!(" (made in {took:.1}s)")
        }
    );
    cases.push(c);
    Ok(())
}

/// How long the dump itself took, from the maker's files: a kernel core's mtime less that of
/// `maps.txt` (written when the program said "ready", before the wait for every thread to
/// block: an upper bound), a gcore's mtime less the birth of `gcore.log` (gcore's start).
fn dump_seconds(d: &SampleDump) -> Option<f64> {
    let dir = d.core.parent()?;
    let end = fs::metadata(&d.core).ok()?.modified().ok()?;
    let start = match d.kind {
        DumpKind::Kernel => fs::metadata(dir.join("maps.txt")).ok()?.modified().ok()?,
        DumpKind::Gcore => fs::metadata(dir.join("gcore.log")).ok()?.created().ok()?,
    };
    end.duration_since(start).ok().map(|t| t.as_secs_f64())
}

/// Medians over the timed runs of one tool on one core.
struct Stats {
    wall: f64,
    cpu: f64,
    /// The largest peak RSS, bytes.
    rss: u64,
    faults: f64,
    rchar: Option<f64>,
    failed: usize,
}

impl Stats {
    fn of(s: &[Sample]) -> Stats {
        let med = |f: &dyn Fn(&Sample) -> f64| bench::median(&s.iter().map(f).collect::<Vec<_>>());
        let rchar = s
            .iter()
            .all(|x| x.rchar.is_some())
            .then(|| med(&|x| x.rchar.unwrap_or(0) as f64));
        Stats {
            wall: med(&|x| x.wall.as_secs_f64()),
            cpu: med(&|x| x.cpu().as_secs_f64()),
            rss: s
                .iter()
                .map(|x| x.max_rss_kib.max(0) as u64 * 1024)
                .max()
                .unwrap_or(0),
            faults: med(&|x| x.faults() as f64),
            rchar,
            failed: s.iter().filter(|x| x.code != Some(0)).count(),
        }
    }

    fn over(&self, base: &Stats) -> Ratios {
        Ratios {
            wall: self.wall / base.wall,
            cpu: self.cpu / base.cpu,
            rss: self.rss as f64 / base.rss as f64,
            faults: self.faults / base.faults,
            rchar: match (self.rchar, base.rchar) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            },
        }
    }
}

struct Ratios {
    wall: f64,
    cpu: f64,
    rss: f64,
    faults: f64,
    rchar: Option<f64>,
}

impl Ratios {
    fn json(&self) -> Value {
        json!({"wall": self.wall, "cpu": self.cpu, "peak_rss": self.rss, "page_faults": self.faults, "rchar": self.rchar})
    }
}

fn ratio_text(r: Option<&Ratios>) -> String {
    match r {
        Some(r) => format!(
            "{} / {} / {} / {}",
            fmt_ratio(Some(r.wall)),
            fmt_ratio(Some(r.cpu)),
            fmt_ratio(Some(r.rss)),
            fmt_ratio(Some(r.faults))
        ),
        None => "skipped".into(),
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r.is_finite() => format!("{r:.2}x"),
        _ => "n/a".into(),
    }
}

fn check_text(c: &Case) -> String {
    match (c.knot_threads, c.gdb_threads) {
        (Some(k), Some(g)) if k == g => format!(
            "{k} threads as gdb, {} gate_lock waiters",
            opt(c.knot_waiters)
        ),
        (k, g) => format!("knot {} threads, gdb {}", opt(k), opt(g)),
    }
}

fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= GIB {
        format!("{:.2} GiB", b / GIB)
    } else {
        format!("{:.1} MiB", b / MIB)
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("?".into(), |v| v.to_string())
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The 1, 5 and 15-minute load averages.
fn loadavg3() -> Option<[f64; 3]> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn fmt_load(l: &Option<[f64; 3]>) -> String {
    l.map_or("?".into(), |[a, b, c]| format!("{a:.2}/{b:.2}/{c:.2}"))
}

/// Free bytes for an unprivileged writer on the filesystem holding `dir` (or its parent).
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let mut p = dir;
    while !p.exists() {
        p = p.parent()?;
    }
    let c = CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed statvfs is a valid value; statvfs fills it in from a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}
