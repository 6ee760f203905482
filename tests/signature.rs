//! Signatures a fleet can count (issue 15 part 5): the same wedge gives the same `signature` in
//! every dump of it, and another wedge another one. The truth is the committed samples that hold
//! one wedge dumped different ways — the native ABBA by the kernel and by gcore (other tids,
//! other addresses); the .NET Monitor ABBA as monitor_abba (createdump, framework-dependent),
//! self_contained (its own runtime, another namespace) and failfast (the runtime's own dump on
//! `Environment.FailFast`, another namespace) — beside samples that wedge otherwise.

mod common;

use knot::Options;
use knot::process::Locator;
use knot::report::Report;
use knot_samples::DumpKind;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn native(name: &str, kind: DumpKind) -> Report {
    common::analyze(&common::committed(name, kind))
}

/// A committed .NET dump, read with the committed runtime and app files (as tests/dotnet_graph.rs).
fn dotnet(path: &str) -> Report {
    let root = knot_samples::workspace_root().join("samples/dotnet");
    let core = root.join(path).join("core.gz");
    let mut search_dirs = knot_samples::dotnet::runtime_dirs();
    let app: PathBuf = core.parent().and_then(|d| d.parent()).map(|s| s.join("app")).unwrap_or_default();
    if app.is_dir() {
        search_dirs.push(app);
    }
    let locator = Locator { search_dirs, ..Locator::default() };
    knot::analyze(&core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What a dump's signatures are: the verdict's, each cycle's, and each convoy's (as a set).
#[derive(Debug, PartialEq, Eq)]
struct Keys {
    verdict: String,
    cycles: BTreeSet<String>,
    convoys: BTreeSet<String>,
}

fn keys(r: &Report) -> Keys {
    let verdict = r.verdict_signature.clone().expect("a verdict signature");
    let cycles = r.deadlocks.iter().map(|d| d.signature.clone()).collect();
    let convoys = r.locks.iter().filter_map(|l| l.signature.clone()).collect();
    for l in &r.locks {
        // Every lock some thread waits on is a convoy with a key; one nobody waits on has none.
        assert_eq!(l.signature.is_some(), !l.waiter_tids.is_empty(), "{}: {}", r.dump.path, l.id);
    }
    for s in r.deadlocks.iter().map(|d| &d.signature).chain(r.locks.iter().filter_map(|l| l.signature.as_ref())).chain([&verdict]) {
        let (what, hash) = s.split_once(':').unwrap_or_else(|| panic!("{s}"));
        assert!(!what.is_empty() && hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()), "{s}");
    }
    Keys { verdict, cycles, convoys }
}

#[test]
fn the_native_abba_has_one_signature_whether_the_kernel_or_gcore_dumped_it() {
    let (kernel, gcore) = (native("abba", DumpKind::Kernel), native("abba", DumpKind::Gcore));
    // Not the same dump: other threads' ids and the process's addresses.
    let tids = |r: &Report| r.threads.iter().map(|t| t.tid).collect::<BTreeSet<_>>();
    assert_ne!(tids(&kernel), tids(&gcore));
    let (a, b) = (keys(&kernel), keys(&gcore));
    assert!(a.verdict.starts_with("deadlock:"), "{a:?}");
    assert_eq!(a.cycles.len(), 1);
    assert_eq!(a, b);
    // The text's verdict lines say it.
    let text = knot::report::text::render(&kernel, &Default::default());
    assert!(text.contains(&format!("\n  signature: {}\n", a.verdict)), "{text}");
}

#[test]
fn the_dotnet_monitor_abba_has_one_signature_across_deployments_and_dump_makers() {
    let heap = keys(&dotnet("dumps/monitor_abba/heap"));
    assert!(heap.verdict.starts_with("deadlock:"), "{heap:?}");
    assert_eq!(heap.cycles.len(), 1);
    // Self-contained (its own libcoreclr.so), in the namespace Knot.Samples.SelfContained.
    let self_contained = keys(&dotnet("deploy-dumps/self_contained/heap"));
    assert_eq!(self_contained, heap);
    // The runtime's own dump on FailFast, a watchdog thread more, Knot.Samples.FailFast.
    let failfast = keys(&dotnet("dumps/failfast/heap"));
    assert_eq!(failfast, heap);
}

#[test]
fn another_wedge_has_another_signature() {
    let mut by_signature: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let natives = [("abba", DumpKind::Kernel), ("timed_abba", DumpKind::Kernel), ("omitfp", DumpKind::Kernel), ("rwlock_readers", DumpKind::Kernel), ("crash_null", DumpKind::Kernel), ("crash_readonly", DumpKind::Kernel)];
    for (name, kind) in natives {
        by_signature.entry(keys(&native(name, kind)).verdict).or_default().push(name);
    }
    for path in ["dumps/monitor_abba/heap", "dumps/lock_abba/heap", "dumps/autofac_container/heap", "dumps/pinvoke_mutex/heap", "dumps/heap_population/heap", "dumps/sync_over_async/heap", "dumps/idle_runtime/heap"] {
        by_signature.entry(keys(&dotnet(path)).verdict).or_default().push(path);
    }
    let shared: Vec<_> = by_signature.values().filter(|v| v.len() > 1).collect();
    assert!(shared.is_empty(), "different wedges share a signature: {shared:?}");
    assert_eq!(by_signature.len(), 13);
}

#[test]
fn two_runs_of_the_orleans_silo_wedge_carry_one_signature() {
    // Two processes (make-dumps.sh orleans_silo: kinds heap and again): other pids, tids,
    // addresses and thread-pool workers; ~330 MB each, so made here and never committed.
    let made = knot_samples::workspace_root().join("target/samples/dotnet/orleans_silo");
    let (a, b) = (made.join("heap/core"), made.join("again/core"));
    if !a.is_file() || !b.is_file() {
        knot_samples::skipped(&format!("skipping the Orleans restart signatures ({} and {} are made by samples/dotnet/make-dumps.sh orleans_silo)", a.display(), b.display()));
        return;
    }
    let read = |core: &std::path::Path| {
        let mut search_dirs = knot_samples::dotnet::runtime_dirs();
        search_dirs.push(knot_samples::workspace_root().join("target/samples/dotnet/artifacts/bin/orleans_silo/debug"));
        let locator = Locator { search_dirs, ..Locator::default() };
        knot::analyze(core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", core.display()))
    };
    let (first, second) = (read(&a), read(&b));
    assert_ne!(first.dump.pid, second.dump.pid);
    let (x, y) = (keys(&first), keys(&second));
    assert!(x.verdict.starts_with("contention:"), "{x:?}");
    assert_eq!(x.verdict, y.verdict);
    // The cache's convoy (ten waiters behind PriceCache._sync) is the same in both.
    let convoy = |r: &Report| r.locks.iter().find(|l| l.waiter_tids.len() == 10).and_then(|l| l.signature.clone()).expect("the cache's convoy");
    assert_eq!(convoy(&first), convoy(&second));
    // And it is not any committed wedge's.
    assert!(!["dumps/autofac_container/heap", "dumps/idle_runtime/heap"].iter().any(|p| keys(&dotnet(p)).verdict == x.verdict));
}
