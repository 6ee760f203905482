//! The .NET wait-for graph against the ground truth: for every committed .NET dump, knot's
//! monitor and Lock owners, waiters and cycles equal `samples/dotnet/expected.toml` (its
//! `[[sample.lock]]`/`[[sample.cycle]]`, with names turned into tids by the dump's own
//! `[[dump]].threads` table) and SOS's `syncblk` on that very dump; the container sample's text
//! report shows the cycle and the grouped convoy; the P/Invoke cycle crosses a managed monitor
//! and a native mutex.
//!
//! Committed dumps are read with the committed runtime and app files (`dumps/runtime/<version>`,
//! `<sample>/app`) as search directories, and the host's system libraries for libc (the glibc
//! analyzer needs it to find a pthread mutex's owner).

mod dumpedit;

use knot::Options;
use knot::process::Locator;
use knot::report::text::{self, TextOptions};
use knot::report::Report;
use knot::report::LockFact;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use toml::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn expected() -> &'static Value {
    static E: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    E.get_or_init(|| {
        let text = std::fs::read_to_string(repo().join("samples/dotnet/expected.toml")).expect("samples/dotnet/expected.toml");
        toml::from_str(&text).expect("expected.toml parses")
    })
}

fn gunzip(from: &Path, to: &Path) {
    if to.exists() {
        return;
    }
    let part = to.with_extension("part");
    let mut d = flate2::read::GzDecoder::new(std::fs::File::open(from).expect("open gz"));
    let mut o = std::fs::File::create(&part).expect("create");
    std::io::copy(&mut d, &mut o).expect("gunzip");
    std::fs::rename(&part, to).expect("rename");
}



struct Case {
    sample: String,
    kind: String,
    dump: &'static Value,
    report: Report,
    /// managed thread name → OS tid, from the dump's table.
    tids: BTreeMap<String, u32>,
    sos_dir: PathBuf,
}

/// Every committed dump with a managed heap, analyzed once.
fn cases() -> &'static [Case] {
    static ALL: std::sync::OnceLock<Vec<Case>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut out = Vec::new();
        for dump in expected()["dump"].as_array().expect("[[dump]]") {
            let Some(threads) = dump.get("threads").and_then(Value::as_table) else { continue };
            let sample = dump["sample"].as_str().unwrap_or_default().to_string();
            let kind = dump["kind"].as_str().unwrap_or_default().to_string();
            let gz = repo().join("samples/dotnet").join(dump["path"].as_str().expect("path"));
            // knot reads a core.zst as it is; a core.gz is inflated once.
            let core = if gz.extension().is_some_and(|e| e == "zst") {
                gz.clone()
            } else {
                let core = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dotnet-graph-{sample}-{kind}.core"));
                gunzip(&gz, &core);
                core
            };
            // The host's libc is read (no empty sysroot): the glibc analyzer needs it for the P/Invoke
            // sample's pthread mutex.
            let mut search_dirs = knot_samples::dotnet::runtime_dirs();
            search_dirs.push(knot_samples::dotnet::committed_root().join(&sample).join("app"));
            let locator = Locator { search_dirs, ..Locator::default() };
            let report = knot::analyze(&core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{sample}/{kind}: {e}"));
            let tids = threads.iter().map(|(n, v)| (n.clone(), v.as_array().and_then(|a| a[0].as_integer()).expect("[tid, id]") as u32)).collect();
            let sos_dir = gz.parent().expect("dump dir").join("sos");
            out.push(Case { sample, kind, dump, report, tids, sos_dir });
        }
        assert!(!out.is_empty(), "no committed .NET dumps in samples/dotnet/expected.toml");
        out
    })
}

fn sample(name: &str) -> &'static Value {
    expected()["sample"].as_array().expect("[[sample]]").iter().find(|s| s["name"].as_str() == Some(name)).unwrap_or_else(|| panic!("no [[sample]] {name}"))
}

fn case(sample: &str) -> &'static Case {
    cases().iter().find(|c| c.sample == sample && c.kind == "heap").unwrap_or_else(|| panic!("no committed heap dump of {sample}"))
}

fn tid(c: &Case, name: &str) -> u32 {
    *c.tids.get(name).unwrap_or_else(|| panic!("{}: no thread {name} in the dump's table", c.sample))
}

fn knot_kind(expected_kind: &str) -> &str {
    match expected_kind {
        "pthread_mutex" => "mutex",
        "reader_writer_lock_slim" => "rwlock_slim",
        "connection_pool" => "pool",
        k => k,
    }
}

/// The lock expected.toml names `id`, as knot reported it: same kind, same owner; a
/// ReaderWriterLockSlim, which has no one owner, by its writer's wait (the node of its holders).
fn knot_lock<'r>(c: &'r Case, lock: &Value) -> &'r LockFact {
    let kind = knot_kind(lock["kind"].as_str().expect("kind"));
    if let Some(writers) = lock.get("write_waiters").and_then(Value::as_array) {
        let writers: Vec<u32> = writers.iter().map(|w| tid(c, w.as_str().expect("name"))).collect();
        let found: Vec<&LockFact> = c.report.locks.iter().filter(|l| l.kind == kind && l.waiter_tids == writers).collect();
        assert_eq!(found.len(), 1, "{}: expected one {kind} the writers {writers:?} wait for, knot has {:?}", c.sample, found.iter().map(|l| &l.id).collect::<Vec<_>>());
        return found[0];
    }
    // A pool has holders, not one owner: it is the pool its waiters wait for.
    if lock.get("owner").is_none() && lock.get("holders").is_some() {
        let waiters: BTreeSet<u32> = lock["waiters"].as_array().expect("waiters").iter().map(|w| tid(c, w.as_str().expect("name"))).collect();
        let found: Vec<&LockFact> = c.report.locks.iter().filter(|l| l.kind == kind && l.waiter_tids.iter().copied().collect::<BTreeSet<u32>>() == waiters).collect();
        assert_eq!(found.len(), 1, "{}: expected one {kind} that {waiters:?} wait for, knot has {:?}", c.sample, found.iter().map(|l| &l.id).collect::<Vec<_>>());
        return found[0];
    }
    let owner = tid(c, lock["owner"].as_str().expect("owner"));
    let found: Vec<&LockFact> = c.report.locks.iter().filter(|l| l.kind == kind && l.owner_tid == Some(owner)).collect();
    assert_eq!(found.len(), 1, "{}: expected one {kind} held by {owner} for lock {:?}, knot has {:?}", c.sample, lock["id"], found.iter().map(|l| &l.id).collect::<Vec<_>>());
    found[0]
}

#[test]
fn owners_waiters_and_identity_equal_the_ground_truth() {
    for c in cases() {
        for lock in sample(&c.sample).get("lock").and_then(Value::as_array).into_iter().flatten() {
            let l = knot_lock(c, lock);
            let id = lock["id"].as_str().unwrap_or("?");
            let names = |key: &str| -> BTreeSet<u32> { lock.get(key).and_then(Value::as_array).into_iter().flatten().map(|w| tid(c, w.as_str().expect("name"))).collect() };
            if l.kind == "rwlock_slim" {
                // Its holders: the readers (their ReaderWriterCount records) and the upgradeable
                // holder; its writer waits for them all.
                let mut want = names("readers");
                want.extend(lock.get("upgradeable").and_then(Value::as_str).map(|u| tid(c, u)));
                assert_eq!(l.holders.iter().map(|h| h.tid).collect::<BTreeSet<u32>>(), want, "{}: holders of {id}", c.sample);
                assert_eq!(l.waiter_tids.iter().copied().collect::<BTreeSet<u32>>(), names("write_waiters"), "{}: writers of {id}", c.sample);
                let rw = l.managed.as_ref().and_then(|m| m.rwlock.as_ref()).expect("its state");
                assert_eq!(rw.owners.0, lock["owners_word"].as_integer().expect("owners_word") as u64, "{}: _owners of {id}", c.sample);
                assert_eq!(rw.read_waiters.iter().copied().collect::<BTreeSet<u32>>(), names("read_waiters"), "{}: readers waiting for {id}", c.sample);
                continue;
            }
            if l.kind == "pool" {
                // Every holder of one of its items (inferred from the frame keeping the lease).
                assert_eq!(l.holders.iter().map(|h| h.tid).collect::<BTreeSet<u32>>(), names("holders"), "{}: holders of {id}", c.sample);
                assert_eq!(l.waiter_tids.iter().copied().collect::<BTreeSet<u32>>(), names("waiters"), "{}: waiters of {id}", c.sample);
                assert_eq!(l.managed.as_ref().and_then(|m| m.type_name.as_deref()), lock["object_type"].as_str(), "{}: type of {id}", c.sample);
                continue;
            }
            if l.kind == "class_init" {
                assert_eq!(l.waiter_tids.iter().copied().collect::<BTreeSet<u32>>(), names("waiters"), "{}: waiters of {id}", c.sample);
                assert_eq!(l.managed.as_ref().and_then(|m| m.type_name.as_deref()), lock["class"].as_str(), "{}: class of {id}", c.sample);
                continue;
            }
            let want: BTreeSet<u32> = lock["waiters"].as_array().expect("waiters").iter().map(|w| tid(c, w.as_str().expect("name"))).collect();
            let got: BTreeSet<u32> = l.waiter_tids.iter().copied().collect();
            assert_eq!(got, want, "{}: waiters of {id} ({})", c.sample, l.id);
            if let Some(m) = &l.managed {
                assert_eq!(m.type_name.as_deref(), lock["object_type"].as_str(), "{}: type of {id}", c.sample);
                let recursion = lock["recursion"].as_integer().expect("recursion") as u32;
                // SOS's Recursion column counts the first entry; Lock._recursionCount does not.
                let want_recursion = if l.kind == "lock" { recursion + 1 } else { recursion };
                assert_eq!(m.recursion, want_recursion, "{}: recursion of {id}", c.sample);
                if let Some(held) = lock.get("monitor_held").and_then(Value::as_integer) {
                    assert_eq!(m.monitor_held, Some(held as u32), "{}: MonitorHeld of {id}", c.sample);
                }
                let owner = lock["owner"].as_str().unwrap_or_default();
                assert_eq!(m.owner_name.as_deref(), Some(owner), "{}: owner name of {id}", c.sample);
            }
            for w in &want {
                let t = c.report.threads.iter().find(|t| t.tid == *w).expect("waiter thread");
                assert_eq!(t.blocked_on.as_deref(), Some(l.id.as_str()), "{}: thread {w} must be blocked on {id}, not its native wait", c.sample);
            }
        }
    }
}

#[test]
fn cycles_equal_the_ground_truth() {
    for c in cases() {
        let s = sample(&c.sample);
        let cycles = s.get("cycle").and_then(Value::as_array).cloned().unwrap_or_default();
        // Lock cycles; a cycle through the thread pool is checked on its own (sync_over_async).
        let lock_cycles = c.report.deadlocks.iter().filter(|d| d.thread_pool.is_none()).count();
        assert_eq!(lock_cycles, cycles.len(), "{}: cycles {:?}", c.sample, c.report.deadlocks);
        let locks: BTreeMap<&str, &LockFact> =
            s.get("lock").and_then(Value::as_array).into_iter().flatten().map(|l| (l["id"].as_str().unwrap_or("?"), knot_lock(c, l))).collect();
        for cycle in &cycles {
            let threads: Vec<u32> = cycle["threads"].as_array().expect("threads").iter().map(|t| tid(c, t.as_str().expect("name"))).collect();
            let want_locks: Vec<&str> = cycle["locks"].as_array().expect("locks").iter().map(|l| locks[l.as_str().expect("id")].id.as_str()).collect();
            let d = c.report.deadlocks.iter().find(|d| d.tids.iter().collect::<BTreeSet<_>>() == threads.iter().collect()).unwrap_or_else(|| panic!("{}: no cycle of {threads:?}", c.sample));
            for (t, l) in threads.iter().zip(&want_locks) {
                let i = d.tids.iter().position(|x| x == t).expect("thread in cycle");
                assert_eq!(d.locks[i], *l, "{}: in the cycle, thread {t} waits for {l}", c.sample);
            }
        }
    }
}

#[test]
fn monitors_equal_sos_syncblk() {
    for c in cases() {
        let Ok(text) = std::fs::read_to_string(c.sos_dir.join("syncblk.txt")) else { panic!("{}: no sos/syncblk.txt", c.sample) };
        let mut rows = 0;
        let mut in_rows = false;
        for line in text.lines() {
            let l = line.trim();
            if l.starts_with("Index") {
                in_rows = true;
                continue;
            }
            if l.starts_with("-----") {
                break;
            }
            if !in_rows || l.is_empty() {
                continue;
            }
            let tok: Vec<&str> = l.split_whitespace().collect();
            let index: u32 = tok[0].parse().expect("index");
            let held: u32 = tok[2].parse().expect("MonitorHeld");
            let recursion: u32 = tok[3].parse().expect("Recursion");
            let owner = u32::from_str_radix(tok[5], 16).expect("owner OS tid");
            let object = u64::from_str_radix(tok[7], 16).expect("object");
            let type_name = tok[8..].join(" ");
            let l = c
                .report
                .locks
                .iter()
                .find(|l| l.kind == "monitor" && l.managed.as_ref().is_some_and(|m| m.sync_block_index == Some(index)))
                .unwrap_or_else(|| panic!("{}: no monitor for sync block {index}", c.sample));
            let m = l.managed.as_ref().expect("managed");
            assert_eq!((l.owner_tid, m.recursion, m.monitor_held, m.object.0, m.type_name.as_deref()), (Some(owner), recursion, Some(held), object, Some(type_name.as_str())), "{}: sync block {index}", c.sample);
            // MonitorHeld = 1 (held) + 2 per waiter, and knot's waiters are those threads.
            assert_eq!(held, 1 + 2 * l.waiter_tids.len() as u32, "{}: waiters of sync block {index}", c.sample);
            rows += 1;
        }
        let held = c.report.locks.iter().filter(|l| l.kind == "monitor" && l.managed.as_ref().is_some_and(|m| m.storage == "sync_block" && m.recursion > 0)).count();
        assert_eq!(held, rows, "{}: held sync-block monitors", c.sample);
    }
}

#[test]
fn thread_names_are_the_managed_ones() {
    for c in cases() {
        for (name, &t) in &c.tids {
            let r = c.report.threads.iter().find(|x| x.tid == t).unwrap_or_else(|| panic!("{}: thread {t}", c.sample));
            // The main thread's managed name is "Main"; the core names it by its comm.
            if name != "Main" {
                assert_eq!(r.name.as_deref(), Some(name.as_str()), "{}: name of thread {t}", c.sample);
            }
        }
    }
}

#[test]
fn the_container_report_shows_the_cycle_then_the_grouped_convoy() {
    let c = case("autofac_container");
    let root = c.dump["root_scope"]["synch_root"].as_str().expect("root synch_root");
    let builder = tid(c, "RootBuilder");
    let tenant = tid(c, "TenantWorker");
    let root_lock = sample("autofac_container")["lock"].as_array().expect("locks").iter().find(|l| l["id"].as_str() == Some("root_scope")).expect("root_scope");
    let n = root_lock["waiters"].as_array().expect("waiters").len();
    // Frames cut to 3 for waiters; owners are still shown whole, each first in its lock's section.
    let out = text::render(&c.report, &TextOptions { max_frames: Some(3) });
    let heading = format!("== {n} threads wait for monitor on System.Object at {root} (LifetimeScope._synchRoot, Tag \"root\") (held by thread {builder} (RootBuilder)) ==");
    let convoy_at = out.find(&heading).unwrap_or_else(|| panic!("no convoy heading {heading:?}:\n{out}"));
    let tenant_at = out.find("== 1 thread waits for monitor on System.Object at ").unwrap_or_else(|| panic!("no section for the tenant lock:\n{out}"));
    assert!(tenant_at < convoy_at, "the cycle's other lock comes before the convoy");
    for owner in [tenant, builder] {
        let t = c.report.threads.iter().find(|t| t.tid == owner).expect("owner");
        let at = out.find(&format!("Owner: Thread {owner} \"")).unwrap_or_else(|| panic!("owner {owner} not shown:\n{out}"));
        let end = at + out[at..].find("Waiters:").expect("waiters after owner");
        // Whole, a run of libcoreclr.so's unsymbolized frames one line (`#4-#13  … 10 frames
        // in libcoreclr.so, no symbols`; issue #30, item 11); the JSON keeps every frame.
        let lines: Vec<&str> = out[at..end].lines().map(str::trim_start).filter(|l| l.starts_with('#')).collect();
        let folded = |l: &str| l.find(" frames in libcoreclr.so, no symbols").and_then(|e| l[..e].rsplit(' ').next()?.parse::<usize>().ok());
        let runs: Vec<usize> = lines.iter().filter_map(|l| folded(l)).collect();
        assert!(!runs.is_empty(), "owner {owner}: libcoreclr.so's frames folded:\n{}", lines.join("\n"));
        assert_eq!(lines.len() - runs.len() + runs.iter().sum::<usize>(), t.frames.len(), "owner {owner}'s stack is whole:\n{}", lines.join("\n"));
        assert!(!lines.windows(2).any(|w| w.iter().all(|l| l.contains("?? [libcoreclr.so]"))), "owner {owner}: no two `??` lines of libcoreclr.so in a row:\n{}", lines.join("\n"));
        assert!(lines[0].starts_with("#0 "), "owner {owner}: frame #0 alone");
    }
    assert!(out.find(&format!("Owner: Thread {builder} \"")).is_some_and(|o| o > convoy_at), "the root lock's owner heads the convoy section");
    // The convoy's waiters are grouped: fewer stacks than threads, every waiter listed once.
    let section = &out[convoy_at..out[convoy_at + 1..].find("\n== ").map_or(out.len(), |e| convoy_at + 1 + e)];
    let stacks = section.lines().filter(|l| l.contains(" threads (waiting for") || l.contains(" thread (waiting for")).count();
    assert!(stacks >= 1 && stacks < n - 1, "{stacks} stacks for {n} waiters:\n{section}");
    let listed: usize = section
        .lines()
        .filter(|l| l.contains("(waiting for"))
        .filter_map(|l| l.rsplit("): ").next())
        .map(|tids| tids.split(", ").count())
        .sum::<usize>()
        + section.matches("(stack shown above)").count();
    assert_eq!(listed, n, "every waiter once:\n{section}");
    assert!(out.contains(&format!("cycle: RootBuilder ({builder}) holds monitor on System.Object at {root} (LifetimeScope._synchRoot, Tag \"root\"), waits for monitor on System.Object at ")), "summary cycle line:\n{out}");
    // The HTML folds the owners' runs too, each run's addresses on hover.
    let page = knot::report::html::render(&c.report);
    for owner in [tenant, builder] {
        let at = page.find(&format!("<b>Owner:</b> Thread {owner} ")).unwrap_or_else(|| panic!("owner {owner}'s stack in the HTML"));
        let block = &page[at..at + page[at..].find("</details>").expect("details end")];
        assert!(block.contains("<div class=\"f folded\" title=\"#") && block.contains(" frames in libcoreclr.so, no symbols</span>"), "owner {owner}:\n{block}");
    }
    // And in JSON, every frame.
    let json: serde_json::Value = serde_json::from_str(&knot::report::to_json(&c.report)).expect("json");
    for owner in [tenant, builder] {
        let t = json["threads"].as_array().expect("threads").iter().find(|t| t["tid"] == owner).expect("owner in JSON");
        let unnamed = t["frames"].as_array().expect("frames").iter().filter(|f| f["module"] == "libcoreclr.so" && f["function"].is_null()).count();
        assert!(unnamed >= 2, "owner {owner}: the JSON keeps libcoreclr.so's frames");
    }
    let lock = json["locks"].as_array().expect("locks").iter().find(|l| l["address"] == root).expect("root lock in JSON");
    assert_eq!(lock["managed"]["monitor_held"], 47);
    assert_eq!(lock["waiter_tids"].as_array().map(Vec::len), Some(n));
    // Its label (what dashboards show) names the holder as the text does (issue #30, item 10).
    let label = lock["label"].as_str().expect("label");
    assert!(label.starts_with("Monitor on System.Object (LifetimeScope._synchRoot, Tag \"root\"; sync block ") && label.ends_with(", MonitorHeld 47, recursion 1)"), "{label}");
}

/// A lock object held by one static field is named by it (issue 34: `Ledger._sync`, not an
/// address): where expected.toml says a lock is `reached_by` a static field, knot's first
/// referrer is that static (its class and field), and the lock's name says `(Program.Ledger)`.
#[test]
fn a_lock_held_by_a_static_field_is_named_by_it() {
    let mut named = 0;
    for c in cases() {
        for lock in sample(&c.sample).get("lock").and_then(Value::as_array).into_iter().flatten() {
            let Some(path) = lock.get("reached_by").and_then(Value::as_str).and_then(|r| r.strip_prefix("static field ")) else { continue };
            let (class, field) = path.rsplit_once('.').expect("Class.Field");
            let l = knot_lock(c, lock);
            let m = l.managed.as_ref().expect("a managed lock");
            let first = m.referrers.first().unwrap_or_else(|| panic!("{}/{}: no referrer of {}", c.sample, c.kind, l.id));
            let json = serde_json::to_value(first).expect("json");
            assert_eq!((json["type"].as_str(), json["field"].as_str(), json["static"].as_bool()), (Some(class), Some(field), Some(true)), "{}/{}: {}", c.sample, c.kind, l.id);
            let short = format!("({}.{field})", class.rsplit('.').next().unwrap_or(class));
            let out = text::render(&c.report, &TextOptions::default());
            assert!(out.lines().any(|line| line.contains(&format!(" at {} {short}", m.object))), "{}/{}: no line names {} {short}", c.sample, c.kind, m.object);
            named += 1;
        }
    }
    assert!(named >= 4, "monitor_abba's two statics, in its heap and other dumps: {named}");
}

#[test]
fn the_pinvoke_cycle_crosses_a_monitor_and_a_native_mutex() {
    let c = case("pinvoke_mutex");
    let libc_loaded = c.report.modules.iter().any(|m| m.path.contains("libc.so") && m.file_status == "loaded");
    if !libc_loaded {
        knot_samples::skipped("skipping the native half: this machine's libc is not the dump's");
        return;
    }
    assert_eq!(c.report.deadlocks.len(), 1, "{:?}", c.report.deadlocks);
    let d = &c.report.deadlocks[0];
    let kinds: BTreeSet<&str> = d.locks.iter().map(|id| c.report.locks.iter().find(|l| &l.id == id).map_or("?", |l| l.kind.as_str())).collect();
    assert_eq!(kinds, BTreeSet::from(["monitor", "mutex"]));
    let mutex = c.dump["knot_mutex"]["address"].as_str().expect("knot_mutex address");
    assert!(d.locks.iter().any(|id| id == &format!("mutex@{mutex}")), "the native mutex {mutex} is in the cycle: {:?}", d.locks);
}

#[test]
fn monitor_waits_and_the_thread_pool_in_sync_over_async() {
    let c = case("sync_over_async");
    let s = sample("sync_over_async");
    let pool = c.report.dotnet.as_ref().and_then(|d| d.thread_pool.as_ref()).expect("thread pool read");
    let want: Vec<u32> = c.dump["threadpool_worker_tids"].as_array().expect("tids").iter().map(|t| t.as_integer().expect("tid") as u32).collect();
    assert_eq!(pool.workers_total as i64, s["threadpool_workers_total"].as_integer().expect("total"));
    assert_eq!(pool.worker_tids, want);
    // Every worker is blocked in its work item (SOS: Running 8, Idle 0).
    assert_eq!(pool.workers_blocked, want);
    // No monitor cycle (monitor_cycles = 0): the one cycle goes through the pool, at its
    // maximum (SOS: Max Limit 8), with every worker blocked.
    assert_eq!(c.report.deadlocks.len(), 1, "{:?}", c.report.deadlocks);
    let through = c.report.deadlocks[0].thread_pool.as_ref().expect("the cycle goes through the thread pool");
    assert_eq!(through.workers, want);
    assert_eq!(through.max_workers, pool.max_workers);
    assert_eq!(through.queued_work_items, pool.queued_work_items);
    let out = text::render(&c.report, &TextOptions::default());
    assert!(out.contains(&format!("  thread pool: {} workers, {} blocked inside work items", want.len(), want.len())), "{out}");
    // No worker (nor Main) waits on a runtime condvar any more: each worker waits for its task
    // (see below), Main (Task.WaitAll, not a wait on one task) is in Monitor.Wait.
    for t in want.iter().chain([tid(c, "Main")].iter()) {
        let th = c.report.threads.iter().find(|x| x.tid == *t).expect("thread");
        let l = th.blocked_on.as_deref().and_then(|id| c.report.locks.iter().find(|l| l.id == id)).unwrap_or_else(|| panic!("thread {t} is blocked on nothing"));
        let kind = if *t == tid(c, "Main") { "monitor_wait" } else { "task" };
        assert_eq!(l.kind, kind, "thread {t}: {}", l.id);
    }
}

/// `dq` lines of sos/task-fields.txt: address → the words SOS printed from it.
fn dq_lines(text: &str) -> BTreeMap<u64, Vec<u64>> {
    text.lines()
        .filter_map(|l| {
            let (a, rest) = l.split_once(": ")?;
            let a = u64::from_str_radix(a.trim(), 16).ok()?;
            let words: Vec<u64> = rest.split_whitespace().map(|w| u64::from_str_radix(w, 16)).collect::<Result<_, _>>().ok()?;
            Some((a, words))
        })
        .collect()
}

#[test]
fn task_waits_in_sync_over_async_name_the_task_sos_shows() {
    let c = case("sync_over_async");
    // The FetchQuoteAsync boxes (the Task<int>s HandleRequestSync blocks on), as dumpasync lists them.
    let dumpasync = std::fs::read_to_string(c.sos_dir.join("dumpasync.txt")).expect("dumpasync.txt");
    let boxes: BTreeSet<u64> = dumpasync
        .lines()
        .filter(|l| l.contains("(0) Knot.Samples.SyncOverAsync.Program+<FetchQuoteAsync>d__9"))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .collect();
    assert_eq!(boxes.len(), 8, "dumpasync lists 8 FetchQuoteAsync state machines");
    let fields = std::fs::read_to_string(c.sos_dir.join("task-fields.txt")).expect("task-fields.txt");
    let dq = dq_lines(&fields);
    let box_type = "System.Runtime.CompilerServices.AsyncTaskMethodBuilder`1+AsyncStateMachineBox`1[[System.Int32, System.Private.CoreLib],[Knot.Samples.SyncOverAsync.Program+<FetchQuoteAsync>d__9, sync_over_async]]";
    assert!(fields.contains(&format!("Name:                {box_type}")), "task-fields.txt: dumpmt of the box type");

    let s = sample("sync_over_async");
    let mut seen = BTreeSet::new();
    for want in s["thread"].as_array().expect("threads").iter().filter(|t| t["blocked_on"].as_str() == Some("task_wait")) {
        let single_task = want["frames"].as_array().expect("frames").iter().any(|f| f.as_str() == Some("System.Threading.Tasks.Task.InternalWaitCore"));
        let threads: Vec<u32> = match want.get("name_pattern").and_then(Value::as_str) {
            Some(p) => {
                // The one pattern sync_over_async uses: the pool's worker name, exactly.
                assert_eq!(p, r"^\.NET TP Worker$");
                c.report.threads.iter().filter(|t| t.name.as_deref() == Some(".NET TP Worker" /* the name the runtime gives its pool workers */)).map(|t| t.tid).collect()
            }
            None => vec![tid(c, want["name"].as_str().expect("name"))],
        };
        for t in threads {
            let th = c.report.threads.iter().find(|x| x.tid == t).expect("thread");
            let l = th.blocked_on.as_deref().and_then(|id| c.report.locks.iter().find(|l| l.id == id)).unwrap_or_else(|| panic!("thread {t} is blocked on nothing"));
            if !single_task {
                // Task.WaitAll waits on a countdown event over many tasks: not (yet) a task wait.
                assert_eq!(l.kind, "monitor_wait", "thread {t} (Task.WaitAll)");
                continue;
            }
            assert_eq!(l.kind, "task", "thread {t}: {}", l.id);
            assert_eq!(l.waiter_tids, vec![t]);
            let m = l.managed.as_ref().expect("managed");
            let task = m.task.as_ref().expect("task fields");
            let a = m.object.0;
            assert!(boxes.contains(&a), "thread {t} waits for {a:#x}, not a box dumpasync lists");
            assert!(seen.insert(a), "two threads wait for {a:#x}");
            assert_eq!(m.type_name.as_deref(), Some(box_type));
            // SOS's words at box+0x20: m_continuationObject, m_contingentProperties, then m_taskId
            // (low half) and m_stateFlags (high half).
            let words = dq.get(&(a + 0x20)).unwrap_or_else(|| panic!("task-fields.txt: no dq of {:#x}", a + 0x20));
            assert_eq!(task.event.0, words[0], "thread {t}: continuation of {a:#x}");
            assert_eq!(task.state_flags.0, words[2] >> 32, "thread {t}: m_stateFlags of {a:#x}");
            // 0x02000c00: of the status bits only TASK_STATE_WAITINGFORACTIVATION (0x2000000).
            assert_eq!(task.status, "WaitingForActivation");
            let event = dq.get(&task.event.0).unwrap_or_else(|| panic!("task-fields.txt: no dq of {}", task.event));
            assert_eq!(task.event_lock.0, event[1], "thread {t}: m_lock of {}", task.event);
            assert_eq!(task.event_type.as_deref(), Some("System.Threading.Tasks.Task+SetOnInvokeMres"));
            assert_eq!(l.owner_tid, None);
        }
    }
    assert_eq!(seen, boxes, "each of the 8 workers waits for its own FetchQuoteAsync task");
    let out = text::render(&c.report, &TextOptions::default());
    for a in &boxes {
        assert!(out.contains(&format!("waiting for task {box_type} at {a:#x} (status: WaitingForActivation)")), "{out}");
    }
}

/// The verdict line names the wedge each sample was written to show: a cycle is a deadlock,
/// workers all blocked on tasks is a starved thread pool.
#[test]
fn each_heap_dump_gets_the_verdict_of_its_wedge() {
    for c in cases() {
        let wedge = sample(&c.sample)["wedge"].as_str().expect("wedge");
        let want = match wedge {
            "monitor_cycle" | "lock_cycle" | "monitor_native_cycle" | "rwlock_cycle" | "class_init_cycle" | "pool_cycle" => knot::report::Verdict::Deadlock,
            "threadpool_starvation" => knot::report::Verdict::ThreadPoolStarved,
            "threadpool_deadlock" => knot::report::Verdict::Deadlock,
            "monitor_contention" => knot::report::Verdict::Contention,
            "gc_stall" => knot::report::Verdict::GcStall,
            "idle" => knot::report::Verdict::Idle,
            "crash" => knot::report::Verdict::Crash,
            "io_wait" => knot::report::Verdict::BlockedOnIo,
            other => panic!("{}: wedge {other} has no expected verdict", c.sample),
        };
        assert_eq!(c.report.verdict, want, "{}/{}: wedge {wedge}", c.sample, c.kind);
    }
}

/// The GC's state against `[sample.heap]` (the limit each sample ran under, SOS analyzeoom's
/// reason), and the GC-stall shape in the first screen of the OOM sample.
#[test]
fn gc_state_and_the_gc_stall_shape() {
    for c in cases().iter().filter(|c| c.kind == "heap") {
        let gc = c.report.dotnet.as_ref().and_then(|d| d.gc.as_ref()).unwrap_or_else(|| panic!("{}: no dotnet.gc", c.sample));
        assert!(gc.hard_limit_read, "{}", c.sample);
        let heap_cfg = sample(&c.sample).get("heap");
        let limit = heap_cfg.and_then(|h| h.get("hard_limit")).and_then(Value::as_integer).map(|v| v as u64);
        assert_eq!(gc.hard_limit_bytes, limit, "{}: hard limit", c.sample);
        assert_eq!(gc.hard_limit_source.as_deref(), limit.map(|_| "setting"), "{}: hard limit source", c.sample);
        let oom = std::fs::read_to_string(c.sos_dir.join("analyzeoom.txt")).expect("sos/analyzeoom.txt");
        match &gc.last_oom {
            Some(o) => assert!(oom.contains(&o.reason_text), "{}: {:?} not in {oom}", c.sample, o.reason_text),
            None => assert!(oom.contains("There was no managed OOM"), "{}: SOS says {oom}", c.sample),
        }
        let want_oom = heap_cfg.and_then(|h| h.get("oom_reason")).and_then(Value::as_str);
        assert_eq!(gc.last_oom.as_ref().map(|o| o.reason_text.as_str()), want_oom, "{}: last OOM", c.sample);
        assert_eq!(gc.stalled, sample(&c.sample)["wedge"].as_str() == Some("gc_stall"), "{}: stalled", c.sample);
        assert!(!gc.gc_in_progress, "{}: no GC was running", c.sample);
    }
    let c = case("gc_oom");
    let out = text::render(&c.report, &TextOptions::default());
    // The first screen (24 lines): the crash, then the leak suspect, then the GC-stall verdict and the top types.
    let first: Vec<&str> = out.lines().take(24).collect();
    let first = first.join("\n");
    assert!(first.contains("Verdict: GC STALL — heap at 98.1 % of its 64.0 MiB hard limit, out of memory after GC #"), "{first}");
    assert!(first.contains("last OOM: OOM was due to an internal .Net error, likely a bug in the GC"), "{first}");
    assert!(first.contains("× System.Byte[]") && first.contains("× Knot.Samples.GcOom.CacheEntry"), "{first}");
}

/// Contended locks are named by the heap objects that hold them in a field, as SOS finds them:
/// `dumpobjgcrefs` of each holder (lock_abba's gates, heap_population's Inventory and Ledger)
/// and the LifetimeScopes' `_synchRoot` fields read with `dumpclass` offsets (autofac_container).
#[test]
fn locks_are_named_by_their_referrers() {
    // SOS: holder object -> (field, referenced object) from dumpobjgcrefs blocks.
    fn gcrefs(text: &str) -> Vec<(u64, String, u64)> {
        let mut out = Vec::new();
        let mut holder = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("object ") {
                holder = rest.split_whitespace().next().and_then(|h| u64::from_str_radix(h, 16).ok());
                continue;
            }
            let tok: Vec<&str> = line.split_whitespace().collect();
            if let (Some(h), [field, off, obj, _ty]) = (holder, tok.as_slice())
                && off.starts_with("0x")
            {
                out.push((h, field.to_string(), u64::from_str_radix(obj, 16).expect("object")));
            }
        }
        out
    }
    let referrers = |c: &Case, object: u64| -> Vec<(String, String, u64, Option<String>)> {
        let l = c.report.locks.iter().find(|l| l.managed.as_ref().is_some_and(|m| m.object.0 == object)).unwrap_or_else(|| panic!("{}: no lock on {object:#x}", c.sample));
        l.managed.as_ref().expect("managed").referrers.iter().map(|r| (r.type_name.clone(), r.field.clone(), r.address.0, r.identity.clone())).collect()
    };
    let checks: [(&str, &[&str], &str); 2] = [
        ("lock_abba", &["lock-holders.txt"], "Knot.Samples.LockAbba."),
        ("heap_population", &["inventory-refs.txt", "ledger-refs.txt"], "Knot.Samples.HeapPopulation."),
    ];
    for (sample_name, files, ns) in checks {
        let c = case(sample_name);
        let mut n = 0;
        for f in files {
            let text = std::fs::read_to_string(c.sos_dir.join(f)).expect("sos gcrefs");
            for (holder, field, object) in gcrefs(&text) {
                let Some(l) = c.report.locks.iter().find(|l| l.managed.as_ref().is_some_and(|m| m.object.0 == object) && !l.waiter_tids.is_empty()) else { continue };
                let got = referrers(c, object);
                let first = got.first().unwrap_or_else(|| panic!("{sample_name}: no referrer of {object:#x}"));
                assert_eq!((first.1.as_str(), first.2), (field.as_str(), holder), "{sample_name}: referrer of {object:#x}");
                assert!(first.0.starts_with(ns), "{sample_name}: {first:?}");
                assert!(knot::report::words::lock_name(l).contains(&format!("({}.{field}", knot::report::words::short_type(&first.0))), "{}", knot::report::words::lock_name(l));
                n += 1;
            }
        }
        assert_eq!(n, 2, "{sample_name}: both contended locks named");
    }
    // heap_population's holders carry a Tag string.
    let c = case("heap_population");
    let tags: BTreeSet<String> = c.report.locks.iter().filter_map(|l| l.managed.as_ref()).filter_map(|m| m.referrers.first()).filter_map(|r| r.identity.clone()).collect();
    assert_eq!(tags, BTreeSet::from(["Tag \"inventory\"".to_string(), "Tag \"ledger\"".to_string()]));
    // autofac_container: sos/lifetimescopes.txt "object SCOPE  _synchRoot=0x…  <Tag>k__BackingField=0x… ('root')".
    let c = case("autofac_container");
    let text = std::fs::read_to_string(c.sos_dir.join("lifetimescopes.txt")).expect("lifetimescopes.txt");
    let mut named = 0;
    for line in text.lines().filter(|l| l.starts_with("object ")) {
        let scope = u64::from_str_radix(line.split_whitespace().nth(1).expect("scope"), 16).expect("hex");
        let root = line.split("_synchRoot=0x").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|h| u64::from_str_radix(h, 16).ok()).expect("_synchRoot");
        let tag = line.split("('").nth(1).and_then(|r| r.split("')").next()).expect("tag");
        let Some(l) = c.report.locks.iter().find(|l| l.managed.as_ref().is_some_and(|m| m.object.0 == root) && l.kind == "monitor") else { continue };
        let got = referrers(c, root);
        assert_eq!(got.first(), Some(&("Autofac.Core.Lifetime.LifetimeScope".to_string(), "_synchRoot".to_string(), scope, Some(format!("Tag \"{tag}\"")))), "scope {scope:#x}");
        assert!(knot::report::words::lock_name(l).ends_with(&format!("(LifetimeScope._synchRoot, Tag \"{tag}\")")), "{}", knot::report::words::lock_name(l));
        named += 1;
    }
    assert_eq!(named, 2, "the root and tenant scopes' locks");
}

/// Issue 13, item 9: every committed app assembly is the one that ran, byte for byte where the
/// dump saved it (knot refuses, with a warning, a file that differs from the image it holds).
#[test]
fn every_committed_assembly_matches_the_image_in_its_dump() {
    for c in cases() {
        // The committed files only: a file at the path the dump names may exist on this machine
        // (the sample rebuilt since) and is rightly refused.
        let committed = knot_samples::dotnet::committed_root().display().to_string();
        let differs: Vec<&str> =
            c.report.diagnostics.iter().map(|d| d.message.as_str()).filter(|m| m.contains("differs from the image") && m.contains(&committed)).collect();
        assert!(differs.is_empty(), "{}/{}: {differs:#?}", c.sample, c.kind);
    }
}

/// Issue 12, item 3: sleeping, waiting for work and the runtime's own idle threads are not
/// "blocked". On the idle_runtime sample the headline counts are the truth expected.toml states
/// (2 threads on 1 lock); its sleepers sleep, its pool workers wait for work, and every runtime
/// service thread the dump's threads.txt names (by comm) is an idle runtime thread. On every
/// committed dump no thread the runtime made for itself is counted blocked.
#[test]
fn idle_threads_are_not_blocked_and_headline_counts_are_the_truth() {
    use knot::report::ThreadState;
    let mut checked = 0;
    for c in cases() {
        let s = sample(&c.sample);
        let comm: BTreeMap<u32, String> = std::fs::read_to_string(c.sos_dir.parent().expect("dump dir").join("threads.txt"))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                Some((f.first()?.parse().ok()?, f.get(3)?.to_string()))
            })
            .collect();
        for t in &c.report.threads {
            let Some(name) = comm.get(&t.tid) else { continue };
            let service = name.starts_with(".NET ") && name != ".NET TP Worker";
            // heap_graph's finalizer thread runs a user finalizer that blocks in Monitor.Wait on
            // purpose (its f-reachable queue is never drained): blocked, and rightly said so.
            let own_wait = c.sample == "heap_graph" && name == ".NET Finalizer";
            if service && !own_wait && !matches!(c.sample.as_str(), "sync_over_async") {
                assert!(t.blocked_on.is_none(), "{}: runtime thread {} ({name}) counted blocked on {:?}", c.sample, t.tid, t.blocked_on);
            }
            if c.sample == "idle_runtime" {
                if service {
                    assert!(matches!(t.state, ThreadState::IdleRuntimeThread { .. }), "{}: {} ({name}) is {:?}", c.sample, t.tid, t.state);
                }
                if name == ".NET TP Worker" {
                    assert!(matches!(t.state, ThreadState::WaitingForWork { .. }), "{}: worker {} is {:?}", c.sample, t.tid, t.state);
                }
                if name == ".NET Finalizer" {
                    assert_eq!(t.state, ThreadState::IdleRuntimeThread { role: knot::report::IdleRole::Finalizer });
                }
            }
        }
        for th in s.get("thread").and_then(Value::as_array).into_iter().flatten() {
            if th.get("blocked_on").and_then(Value::as_str) != Some("sleep") {
                continue;
            }
            // Threads the dump's table names (a sample's own sleepers, by Thread.Name).
            let Some(&tid) = th["name"].as_str().and_then(|n| c.tids.get(n)) else { continue };
            let t = c.report.threads.iter().find(|t| t.tid == tid).expect("thread");
            let idle = matches!(&t.state, ThreadState::Sleeping { .. } | ThreadState::IdleRuntimeThread { .. });
            assert!(idle, "{}: {:?} sleeps, knot says {:?}", c.sample, t.name, t.state);
            assert!(t.blocked_on.is_none(), "{}: a sleeper is not blocked", c.sample);
        }
        if let (Some(threads), Some(locks)) = (s.get("blocked_threads").and_then(Value::as_integer), s.get("blocked_locks").and_then(Value::as_integer)) {
            let blocked = c.report.threads.iter().filter(|t| t.blocked_on.is_some()).count();
            let contended = c.report.locks.iter().filter(|l| !l.waiter_tids.is_empty()).count();
            assert_eq!((blocked as i64, contended as i64), (threads, locks), "{}: threads blocked, locks contended", c.sample);
            let text = text::render(&c.report, &TextOptions::default());
            let want = format!("; {threads} of {} threads blocked on {locks} lock", c.report.threads.len());
            assert!(text.lines().any(|l| l.starts_with("Verdict:") && l.contains(&want)), "{}: headline {want:?} in\n{text}", c.sample);
            checked += 1;
        }
    }
    assert!(checked > 0, "no sample states its headline counts");
}

/// Issue 12, item 1: the sync table is read as far as the runtime handed it out — SOS
/// `syncblk`'s `Total` and `Free` on every committed dump (idle_runtime: 300 and 198, 200 of its
/// sync blocks freed).
#[test]
fn sync_table_total_and_free_equal_sos() {
    let mut checked = 0;
    for c in cases() {
        let Ok(text) = std::fs::read_to_string(c.sos_dir.join("syncblk.txt")) else { continue };
        let count = |what: &str| text.lines().find_map(|l| l.strip_prefix(what).and_then(|v| v.trim().parse::<u32>().ok()));
        let (Some(total), Some(free)) = (count("Total"), count("Free")) else { continue };
        let t = c.report.dotnet.as_ref().and_then(|d| d.sync_table).unwrap_or_else(|| panic!("{}: no sync table read", c.sample));
        assert_eq!((t.total, t.free), (total, free), "{}/{}: syncblk Total, Free", c.sample, c.kind);
        if let Some(want) = sample(&c.sample).get("sync_table_total").and_then(Value::as_integer) {
            assert_eq!(t.total as i64, want, "{}: expected.toml's sync_table_total", c.sample);
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} dumps have a syncblk Total");
}

/// Issue 12, item 1: entries past the ones the runtime handed out are not locks. The table grows
/// by `new[]` without zeroing, so those entries hold what the allocator had there; here the
/// idle_runtime dump gets, right past its 300 used entries, copies of the held GateLock's entry
/// (what a stale or reused block looks like). The reading is SOS's: one monitor, Total 300.
#[test]
fn stale_entries_past_the_used_ones_are_not_read() {
    let c = case("idle_runtime");
    let t = c.report.dotnet.as_ref().and_then(|d| d.sync_table).expect("sync table");
    let core = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dotnet-graph-idle_runtime-heap.core");
    let mut bytes = std::fs::read(&core).expect("core");
    let entry = |i: u64| t.address.0 + 16 * i;
    let mut used = [0u8; 16];
    let gate = c.report.locks.iter().find(|l| l.kind == "monitor").and_then(|l| l.managed.as_ref()).and_then(|m| m.sync_block_index).expect("gate's index");
    used[..8].copy_from_slice(&dumpedit::peek_u64(&bytes, entry(gate as u64)).to_le_bytes());
    used[8..].copy_from_slice(&dumpedit::peek_u64(&bytes, entry(gate as u64) + 8).to_le_bytes());
    for i in 0..8 {
        dumpedit::poke(&mut bytes, entry(t.total as u64 + 1 + i), &used);
    }
    let stale = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dotnet-graph-idle_runtime-stale.core");
    std::fs::write(&stale, &bytes).expect("write");
    drop(bytes);
    let mut search_dirs = knot_samples::dotnet::runtime_dirs();
    search_dirs.push(knot_samples::dotnet::committed_root().join("idle_runtime/app"));
    let r = knot::analyze(&stale, &Options { locator: Locator { search_dirs, ..Locator::default() }, ..Options::default() }).expect("read");
    let _ = std::fs::remove_file(&stale);
    let monitors: Vec<&LockFact> = r.locks.iter().filter(|l| l.kind == "monitor").collect();
    assert_eq!(monitors.len(), 1, "{:?}", monitors.iter().map(|l| &l.label).collect::<Vec<_>>());
    assert_eq!(r.dotnet.as_ref().and_then(|d| d.sync_table).map(|t| (t.total, t.free)), Some((300, 198)));
    assert!(!r.diagnostics.iter().any(|d| d.message.contains("sync block 30")), "{:?}", r.diagnostics);
}

/// mres_continuation (issue 34): a worker in the program's own `ManualResetEventSlim.Wait` on
/// an event that a continuation of its task sets (`OnCompleted(() => done.Set())`,
/// `ContinueWith(_ => done.Set())`) waits for that task: an edge to it, hence to its async
/// stack and, its timer's TimerQueue queued behind the workers, to the pool — a deadlock through
/// the pool. The tasks are the FetchQuoteAsync boxes SOS `dumpasync --tasks` lists.
#[test]
fn an_event_a_task_s_continuation_sets_ties_its_waiter_to_the_task() {
    let c = case("mres_continuation");
    let dumpasync = std::fs::read_to_string(c.sos_dir.join("dumpasync-tasks.txt")).expect("sos/dumpasync-tasks.txt");
    let boxes: BTreeSet<u64> = dumpasync
        .lines()
        .filter(|l| l.ends_with("Knot.Samples.MresContinuation.Program+<FetchQuoteAsync>d__7"))
        .filter_map(|l| l.split_whitespace().next().and_then(|a| u64::from_str_radix(a, 16).ok()))
        .collect();
    assert_eq!(boxes.len(), 4, "{dumpasync}");
    let workers: Vec<u32> = c.dump["threadpool_worker_tids"].as_array().expect("worker tids").iter().map(|t| t.as_integer().expect("tid") as u32).collect();
    let mut waited = BTreeSet::new();
    for t in &workers {
        let th = c.report.threads.iter().find(|x| x.tid == *t).expect("worker");
        let id = th.blocked_on.as_deref().unwrap_or_else(|| panic!("worker {t} is blocked on nothing"));
        let l = c.report.locks.iter().find(|l| l.id == id).expect("its lock");
        assert_eq!(l.kind, "task", "worker {t}: {}", l.id);
        let json = serde_json::to_value(l).expect("json");
        let evidence: Vec<&str> = json["evidence"].as_array().expect("evidence").iter().filter_map(|e| e.as_str()).collect();
        assert!(evidence.iter().any(|e| e.contains("a continuation of it (its m_continuationObject) sets ManualResetEventSlim")), "worker {t}: {evidence:?}");
        assert!(evidence.iter().any(|e| e.contains("is in ManualResetEventSlim.Wait on")), "worker {t}: {evidence:?}");
        waited.insert(l.managed.as_ref().expect("managed").object.0);
    }
    assert_eq!(waited, boxes, "each worker waits for its own FetchQuoteAsync task");
    assert_eq!(c.report.verdict, knot::report::Verdict::Deadlock);
    let pool = c.report.deadlocks.iter().find_map(|d| d.thread_pool.as_ref()).expect("a deadlock through the pool");
    assert_eq!(pool.workers.iter().copied().collect::<BTreeSet<u32>>(), workers.iter().copied().collect::<BTreeSet<u32>>());
    let out = text::render(&c.report, &TextOptions::default());
    let verdict = out.lines().find(|l| l.starts_with("Verdict:")).expect("verdict");
    assert!(verdict.contains("all 4 workers (max 4) are blocked — 4 workers block at Program.WaitForQuote on Program.FetchQuoteAsync (sync over async: ManualResetEventSlim.Wait), which wait for a worker to fire their timers"), "{verdict}");
}
