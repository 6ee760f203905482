//! Criterion micro-benchmarks of knot's stages: `cargo bench -p knot --bench analyze`.
//!
//! Over the committed `abba` gcore (every machine has it) and, when this machine can make it
//! (gcc, gdb, gcore), a `many_threads` gcore of `KNOT_BENCH_THREADS` threads (default 600):
//!
//! - `core_open`: [`Core::open`], parsing the ELF core (headers, notes, threads);
//! - `process_open`: [`Process::open`], the core plus its modules and their files;
//! - `stacks_only`: every thread's stack, symbolized, on an opened process (`--stacks-only`);
//! - `analyze`: the whole pipeline from the path ([`knot::analyze`]).
//!
//! Kept short (10 samples, 2 s of measurement each, 8 s for `analyze`) so that the measuring
//! takes about a minute on 2 cores (the first build of the bench profile takes longer). End-to-end timings against gdb and eu-stack: `cargo xtask bench`.

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use knot::Options;
use knot::core::Core;
use knot::process::{Locator, Process};
use knot_samples::{Availability, DumpKind, SampleDump};
use std::hint::black_box;
use std::time::Duration;

/// knot's options for a sample: the files gdb was given (as `tests/common` does).
fn options_for(d: &SampleDump) -> Options {
    let locator = Locator {
        sysroot: d.sysroot.clone(),
        debug_dirs: d.debug_dir.iter().cloned().collect(),
        no_default_debug_dir: d.debug_dir.is_some(),
        search_dirs: d.binary.parent().map(|p| vec![p.to_path_buf()]).unwrap_or_default(),
        executable: Some(d.binary.clone()),
        section_cache: None,
    };
    Options { locator, ..Options::default() }
}

fn dumps() -> Vec<(String, SampleDump)> {
    let mut out = Vec::new();
    match knot_samples::committed("abba", DumpKind::Gcore) {
        Some(d) => out.push(("abba-gcore".to_string(), d)),
        None => eprintln!("bench: committed abba gcore is missing from samples/dumps"),
    }
    let threads = std::env::var("KNOT_BENCH_THREADS").unwrap_or_else(|_| "600".into());
    match knot_samples::try_ensure_with_args("many_threads", DumpKind::Gcore, &[threads.as_str()]) {
        Ok(Availability::Ready(d)) => out.push((format!("many_threads-{threads}-gcore"), d)),
        Ok(Availability::Skipped(why)) => eprintln!("bench: skipping many_threads ({threads} threads): {why}"),
        Err(e) => eprintln!("bench: skipping many_threads ({threads} threads): making it failed: {e:#}"),
    }
    out
}

fn stages(c: &mut Criterion) {
    let dumps = dumps();
    // The stages take microseconds to tens of milliseconds: 2 s of measurement is plenty.
    let mut g = c.benchmark_group("knot");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let mut opened = Vec::new();
    for (label, d) in &dumps {
        let opts = options_for(d);
        let core = &d.core;
        g.bench_with_input(BenchmarkId::new("core_open", label), core, |b, core| {
            b.iter(|| black_box(Core::open(core).expect("Core::open")))
        });
        g.bench_with_input(BenchmarkId::new("process_open", label), core, |b, core| {
            b.iter(|| black_box(Process::open(core, &opts.locator).expect("Process::open")))
        });
        let process = Process::open(core, &opts.locator).expect("Process::open");
        let stacks = Options { stacks_only: true, ..opts.clone() };
        g.bench_with_input(BenchmarkId::new("stacks_only", label), &process, |b, process| {
            b.iter(|| black_box(knot::report_for(process, &stacks)))
        });
        opened.push((label, d, opts));
    }
    g.finish();

    // The whole pipeline (symbols and lock analysis included) takes a few hundred ms a run:
    // flat sampling, 10 samples in about 8 s.
    let mut g = c.benchmark_group("knot");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(8));
    for (label, d, opts) in &opened {
        g.bench_with_input(BenchmarkId::new("analyze", label), &d.core, |b, core| {
            b.iter(|| black_box(knot::analyze(core, opts).expect("analyze")))
        });
    }
    g.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
