//! Sync over async in an ASP.NET Core 10 service (issue 34): `samples/dotnet/aspnet_pool`, dumped
//! by `samples/dotnet/make-dumps.sh aspnet_pool` in four modes — the pool at its maximum
//! (deadlock, twice), the default pool mid-starvation under a lock (starved), `.Result` and
//! Kestrel's synchronous body read without a lock (nolock), a healthy busy service (healthy).
//! The dumps are ~6.5 MB gzip'd each (an ASP.NET Core heap dump holds the pages of ~40
//! assemblies), over the 3 MB a committed dump may have: they are made here, and each test is
//! skipped, with its reason, when its dump is absent. Their SOS readings are committed in
//! `samples/dotnet/aspnet_pool/sos/`.

use knot::Options;
use knot::process::Locator;
use knot::report::{Report, Verdict};
use knot::report::text::{self, TextOptions};
use std::path::PathBuf;

fn made(mode: &str) -> PathBuf {
    knot_samples::workspace_root().join("target/samples/dotnet/aspnet_pool").join(mode)
}

/// The report of `mode`'s dump and its SOS directory, or none (skipped) when it was not made.
fn read(mode: &str) -> Option<(Report, PathBuf)> {
    let dir = made(mode);
    let core = dir.join("core");
    if !core.is_file() {
        knot_samples::skipped(&format!("skipping aspnet_pool/{mode}: {} is made by samples/dotnet/make-dumps.sh aspnet_pool (~210 MB raw, 6.5 MB gzip'd: over the 3 MB a committed dump may have)", core.display()));
        return None;
    }
    let mut search_dirs = knot_samples::dotnet::runtime_dirs();
    search_dirs.push(knot_samples::workspace_root().join("target/samples/dotnet/artifacts/bin/aspnet_pool/debug"));
    let locator = Locator { search_dirs, ..Locator::default() };
    let r = knot::analyze(&core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", core.display()));
    Some((r, dir.join("sos")))
}

fn sos(dir: &std::path::Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
}

/// `Workers Total:    12` → 12.
fn sos_count(text: &str, key: &str) -> u32 {
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no {key} in threadpool.txt"))
}

fn first_screen(r: &Report) -> String {
    let out = text::render(r, &TextOptions::default());
    out.split("\n== ").next().unwrap_or_default().to_string()
}

/// The pool's counts equal SOS `threadpool`'s; the high-priority queue's items equal the ones
/// `threadpool -wi` marks `[Global high-pri]`, and are listed as such.
fn pool_equals_sos(r: &Report, sos_dir: &std::path::Path) {
    let tp = r.dotnet.as_ref().and_then(|d| d.thread_pool.as_ref()).expect("thread pool read");
    let text = sos(sos_dir, "threadpool.txt");
    assert_eq!(tp.workers_running, Some(sos_count(&text, "Workers Running:")));
    assert_eq!(tp.workers_idle, Some(sos_count(&text, "Workers Idle:")));
    assert_eq!(tp.min_workers, Some(sos_count(&text, "Worker Min Limit:")));
    assert_eq!(tp.max_workers, Some(sos_count(&text, "Worker Max Limit:")));
    assert_eq!(tp.workers_running.zip(tp.workers_idle).map(|(a, b)| a + b), Some(sos_count(&text, "Workers Total:")));
    let wi = sos(sos_dir, "threadpool-wi.txt");
    let high = wi.lines().filter(|l| l.starts_with("[Global high-pri]")).count() as u32;
    let global = wi.lines().filter(|l| l.starts_with("[Global]")).count() as u32;
    assert_eq!(tp.high_priority_queue, Some(high));
    // `threadpool -wi` marks the workers' local queues' items `[Global]` too.
    assert_eq!(tp.queued_work_items, Some(high + global));
    assert_eq!(tp.high_priority_work_items.iter().map(|t| t.count).sum::<u32>(), high);
}

#[test]
fn at_its_maximum_the_pool_is_a_node_of_the_deadlock() {
    let Some((r, sos_dir)) = read("deadlock") else { return };
    pool_equals_sos(&r, &sos_dir);
    assert_eq!(r.verdict, Verdict::Deadlock);
    assert_eq!(r.deadlocks.len(), 1, "{:?}", r.deadlocks);
    let d = &r.deadlocks[0];
    let through = d.thread_pool.as_ref().expect("through the thread pool");
    assert_eq!(through.max_workers, Some(12));
    assert_eq!(through.workers.len(), 12);
    // The chain: a worker behind the lock, its owner, the task the pool would complete.
    let kinds: Vec<&str> = d.locks.iter().map(|id| r.locks.iter().find(|l| &l.id == id).map_or("?", |l| l.kind.as_str())).collect();
    assert_eq!(kinds, ["monitor", "task"], "{}", d.description);
    let tp = r.dotnet.as_ref().and_then(|x| x.thread_pool.as_ref()).expect("pool");
    assert!(tp.high_priority_work_items.iter().any(|t| t.name == "System.Threading.TimerQueue"), "{:?}", tp.high_priority_work_items);
    let screen = first_screen(&r);
    println!("{screen}");
    let verdict = screen.lines().find(|l| l.starts_with("Verdict:")).expect("verdict");
    assert!(verdict.starts_with("Verdict: DEADLOCK through the thread pool: all 12 workers (max 12) are blocked — 11 ASP.NET Core requests behind "), "{verdict}");
    // The owner is a request either way: run from its connection's Kestrel loop, or resumed by
    // the routing middleware after an await — which request won the lock differs run to run.
    assert!(verdict.contains(" behind Ledger._sync, held by "), "{verdict}");
    assert!([", held by an ASP.NET Core request (", ", held by a Kestrel request loop ("].iter().any(|w| verdict.contains(w)), "{verdict}");
    assert!(verdict.contains("that blocks at Ledger.Post on Rates.FetchRatesAsync (sync over async: Task.Result), which waits for a worker to fire its timer"), "{verdict}");
    assert!(screen.contains("    in the high-priority queue: "), "{screen}");
}

#[test]
fn mid_starvation_the_cause_is_the_lock_most_workers_wait_for() {
    let Some((r, sos_dir)) = read("starved") else { return };
    pool_equals_sos(&r, &sos_dir);
    let tp = r.dotnet.as_ref().and_then(|x| x.thread_pool.as_ref()).expect("pool");
    let screen = first_screen(&r);
    println!("{screen}");
    // Dumped while the queue grows: every worker blocked, below the pool's maximum.
    assert_eq!(tp.workers_blocked.len(), tp.worker_tids.len(), "{screen}");
    assert!(tp.queued_work_items.is_some_and(|q| q > 0), "{screen}");
    assert!(tp.max_workers > Some(tp.workers_total));
    assert_eq!(r.verdict, Verdict::ThreadPoolStarved, "{screen}");
    assert!(r.deadlocks.is_empty());
    let cause = screen.lines().find(|l| l.starts_with("  cause: ")).expect("a cause line");
    assert!(cause.contains(" behind ") && cause.contains("that blocks at Ledger.Post on Rates.FetchRatesAsync (sync over async: Task.Result)"), "{cause}");
}

#[test]
fn without_a_lock_the_async_calls_and_the_library_that_blocks_are_named() {
    let Some((r, sos_dir)) = read("nolock") else { return };
    pool_equals_sos(&r, &sos_dir);
    let screen = first_screen(&r);
    println!("{screen}");
    assert_eq!(r.verdict, Verdict::ThreadPoolStarved, "{screen}");
    let cause = screen.lines().find(|l| l.starts_with("  cause: ")).expect("a cause line");
    assert!(cause.contains("at Ledger.Quote on Rates.FetchRatesAsync (sync over async: Task.Result)"), "{cause}");
    assert!(cause.contains("in HttpRequestStream.Read (called at Ledger.Upload)"), "{cause}");
    assert!(!cause.contains(" behind "), "no lock: {cause}");
}

#[test]
fn a_healthy_busy_service_is_not_starved() {
    let Some((r, sos_dir)) = read("healthy") else { return };
    pool_equals_sos(&r, &sos_dir);
    let screen = first_screen(&r);
    println!("{screen}");
    assert!(!matches!(r.verdict, Verdict::ThreadPoolStarved | Verdict::Deadlock | Verdict::Contention), "{screen}");
}

#[test]
fn the_shape_has_one_signature_across_two_dumps_and_not_a_lock_cycles() {
    let (Some((a, _)), Some((b, _))) = (read("deadlock"), read("deadlock2")) else { return };
    assert_ne!(a.dump.pid, b.dump.pid);
    let (x, y) = (a.verdict_signature.clone().expect("signature"), b.verdict_signature.clone().expect("signature"));
    assert!(x.starts_with("deadlock:"), "{x}");
    assert_eq!(x, y);
    assert_eq!(a.deadlocks[0].signature, b.deadlocks[0].signature);
    // A plain lock-order deadlock keys differently.
    let root = knot_samples::workspace_root().join("samples/dotnet/dumps/monitor_abba/heap/core.gz");
    let locator = Locator { search_dirs: knot_samples::dotnet::runtime_dirs(), ..Locator::default() };
    let abba = knot::analyze(&root, &Options { locator, ..Options::default() }).expect("monitor_abba");
    assert_eq!(abba.verdict, Verdict::Deadlock);
    assert_ne!(abba.verdict_signature.as_deref(), Some(x.as_str()));
    assert!(abba.deadlocks.iter().all(|d| d.signature != a.deadlocks[0].signature));
}
