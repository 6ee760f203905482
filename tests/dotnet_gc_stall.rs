//! The GC as a node of the wait-for graph (issue 40, items 0 and 8), on `gc_stall`'s dumps: six
//! threads churning live objects, dumped while the GC collects (samples/dotnet/make-dumps.sh).
//! - workstation, at its hard limit: a GC stall, said first with the share of the limit; the
//!   thread SOS `clrthreads` marks `(GC)` collects, the other Churn threads wait for it.
//! - server, near its limit: the GC's own threads (`.NET Server GC` at dump time) collect, the
//!   allocating threads wait for all of them.
//! - routine, far from any limit and caught mid-move: not a stall, and said so; the heap read as
//!   far as it is consistent, the rest said where a person looks first, names still read.
//!
//! Every heap total equals SOS `dumpheap -stat` (`-ignoreGCState` where SOS refuses the walk),
//! the bad objects passed counted as SOS counts them.

mod common;

use common::DotnetDump;
use knot::report::text::{self, TextOptions};
use knot::report::{Report, Verdict};
use knot::Options;
use std::collections::BTreeMap;

fn dumps(kind: &str) -> Vec<DotnetDump> {
    common::dotnet_dumps("sos/clrthreads.txt").into_iter().filter(|d| d.name.starts_with(&format!("gc_stall/{kind}"))).collect()
}

fn analyze(d: &DotnetDump) -> Report {
    knot::analyze(&d.core, &Options { locator: d.locator.clone(), ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", d.name))
}

fn sos(d: &DotnetDump, file: &str) -> String {
    std::fs::read_to_string(d.dir.join("sos").join(file)).unwrap_or_else(|e| panic!("{}: sos/{file}: {e}", d.name))
}

/// SOS's thread names: OS tid → `Thread.Name` (sos/thread-names.txt).
fn names(d: &DotnetDump) -> BTreeMap<u32, String> {
    sos(d, "thread-names.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            Some((cols.get(3)?.parse().ok()?, cols.get(5..)?.join(" ")))
        })
        .collect()
}

fn churners(d: &DotnetDump) -> Vec<u32> {
    names(d).into_iter().filter(|(_, n)| n.starts_with("Churn-")).map(|(t, _)| t).collect()
}

/// The OS tid of the thread SOS `clrthreads` marks `(GC)`.
fn sos_collector(d: &DotnetDump) -> Option<u32> {
    let text = sos(d, "clrthreads.txt");
    let row = text.lines().find(|l| l.contains("(GC)"))?;
    u32::from_str_radix(row.split_whitespace().nth(2)?, 16).ok()
}

/// SOS's `Total N objects, B bytes`: from `dumpheap -stat -ignoreGCState` when SOS refused the
/// plain walk (a heap mid-collection), else `dumpheap -stat`.
fn sos_totals(d: &DotnetDump) -> (u64, u64) {
    let plain = sos(d, "dumpheap-stat.txt");
    let text = if plain.contains("not in a valid state") { sos(d, "dumpheap-stat-ignoregcstate.txt") } else { plain };
    let line = text.lines().find(|l| l.starts_with("Total ")).unwrap_or_else(|| panic!("{}: no Total line", d.name));
    let num = |s: &str| s.replace(',', "").parse::<u64>().expect("a number");
    let (objects, bytes) = line.trim_start_matches("Total ").trim_end_matches(" bytes").split_once(" objects, ").expect("Total line");
    (num(objects), num(bytes))
}

/// The OS tids threads.txt names `comm` (the OS's thread names at dump time).
fn tids_named(d: &DotnetDump, comm: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(d.dir.join("threads.txt")).expect("threads.txt");
    text.lines().filter(|l| !l.starts_with('#')).filter(|l| l.split('\t').nth(3) == Some(comm)).filter_map(|l| l.split('\t').next()?.parse().ok()).collect()
}

fn check_totals(d: &DotnetDump, r: &Report) {
    let heap = r.dotnet.as_ref().and_then(|x| x.heap.as_ref()).unwrap_or_else(|| panic!("{}: no heap", d.name));
    assert_eq!((heap.total_objects, heap.total_bytes), sos_totals(d), "{}: heap totals are SOS dumpheap -stat's", d.name);
}

#[test]
fn a_workstation_gc_at_its_limit_is_a_stall_the_collector_holds() {
    for d in dumps("workstation") {
        let r = analyze(&d);
        let gc = r.dotnet.as_ref().and_then(|x| x.gc.as_ref()).expect("dotnet.gc");
        assert_eq!(r.verdict, Verdict::GcStall, "{}", d.name);
        assert!(gc.last_oom.is_none() && gc.stalled, "{}: a stall with no OOM on record", d.name);
        let c = gc.collection.as_ref().expect("the collection");
        let collector = sos_collector(&d).expect("SOS marks a (GC) thread");
        let tids: Vec<u32> = c.collectors.iter().map(|k| k.tid).collect();
        assert_eq!(tids, vec![collector], "{}: the (GC) thread collects", d.name);
        assert_eq!((c.collectors[0].certainty.as_str(), c.release.as_str()), ("known", "one"), "{}", d.name);
        let others: Vec<u32> = churners(&d).into_iter().filter(|t| *t != collector).collect();
        assert_eq!(c.waiter_tids, others, "{}: the other Churn threads wait for the collection", d.name);
        // Each waits on a GC event held by the collector: an edge to it.
        for w in &c.waiter_tids {
            let t = r.threads.iter().find(|t| t.tid == *w).expect("waiter");
            let l = r.locks.iter().find(|l| Some(&l.id) == t.blocked_on.as_ref()).unwrap_or_else(|| panic!("{}: {w} blocked on no lock", d.name));
            assert_eq!(l.owner_tid, Some(collector), "{}: {} held by the collector", d.name, l.label);
            assert!(l.label.contains(".NET GC"), "{}: {}", d.name, l.label);
        }
        check_totals(&d, &r);
        let out = text::render(&r, &TextOptions::default());
        let verdict = out.lines().find(|l| l.starts_with("Verdict:")).expect("verdict line");
        let p = gc.limit_percent().expect("a limit");
        assert!(p >= 92.0, "{}: {p}", d.name);
        let name = &names(&d)[&collector];
        assert!(
            verdict.starts_with(&format!("Verdict: GC STALL — heap at {p:.1} % of its 48.0 MiB hard limit; thread {collector} \"{name}\" collects, 5 threads wait for it")),
            "{}: {verdict}",
            d.name
        );
    }
}

#[test]
fn a_server_gc_near_its_limit_is_a_stall_all_gc_threads_hold() {
    for d in dumps("server") {
        let r = analyze(&d);
        let gc = r.dotnet.as_ref().and_then(|x| x.gc.as_ref()).expect("dotnet.gc");
        assert_eq!(r.verdict, Verdict::GcStall, "{}", d.name);
        assert!(gc.server && gc.gc_in_progress, "{}: the server GC was collecting", d.name);
        let c = gc.collection.as_ref().expect("the collection");
        let mut tids: Vec<u32> = c.collectors.iter().map(|k| k.tid).collect();
        tids.sort_unstable();
        assert_eq!(tids, tids_named(&d, ".NET Server GC"), "{}: the GC's own threads collect", d.name);
        assert!(c.collectors.iter().all(|k| k.certainty == "inferred" && k.role == "server_gc_thread"), "{}", d.name);
        assert_eq!(c.release, "all", "{}: the wait ends when every GC thread is done", d.name);
        let churn = churners(&d);
        assert!(!c.waiter_tids.is_empty(), "{}: threads wait", d.name);
        assert!(c.waiter_tids.iter().all(|w| churn.contains(w) || tids_named(&d, ".NET Finalizer").contains(w)), "{}: {:?} wait, not all allocating threads", d.name, c.waiter_tids);
        check_totals(&d, &r);
        let out = text::render(&r, &TextOptions::default());
        let verdict = out.lines().find(|l| l.starts_with("Verdict:")).expect("verdict line");
        assert!(verdict.contains(&format!("the GC's 2 threads ({}, {}) collect", tids[0], tids[1])), "{}: {verdict}", d.name);
    }
}

#[test]
fn a_routine_collection_caught_mid_move_is_no_stall_and_says_what_it_is() {
    for d in dumps("routine") {
        let r = analyze(&d);
        let gc = r.dotnet.as_ref().and_then(|x| x.gc.as_ref()).expect("dotnet.gc");
        assert_ne!(r.verdict, Verdict::GcStall, "{}: far from any limit", d.name);
        assert!(!gc.stalled && gc.hard_limit_bytes.is_none(), "{}", d.name);
        let c = gc.collection.as_ref().expect("the collection");
        assert_eq!(c.kind, "routine", "{}", d.name);
        let mid = sos(&d, "dumpheap-stat.txt").contains("not in a valid state");
        assert_eq!(c.mid_collection, mid, "{}: mid-collection as SOS says", d.name);
        if let Some(collector) = sos_collector(&d) {
            assert_eq!(c.collectors.iter().map(|k| k.tid).collect::<Vec<_>>(), vec![collector], "{}", d.name);
        }
        check_totals(&d, &r);
        // Names still read: every thread SOS names, knot names alike.
        for (tid, name) in names(&d).into_iter().filter(|(_, n)| n != "<null>") {
            let t = r.threads.iter().find(|t| t.tid == tid).unwrap_or_else(|| panic!("{}: no thread {tid}", d.name));
            assert_eq!(t.name.as_deref(), Some(name.as_str()), "{}: thread {tid}'s name", d.name);
        }
        let out = text::render(&r, &TextOptions::default());
        let first: Vec<&str> = out.lines().take(8).collect();
        let first = first.join("\n");
        assert!(first.contains("collection in progress, a routine one (no hard limit, no stall)"), "{}: {first}", d.name);
        if mid {
            assert!(first.contains("the heap was caught mid-collection"), "{}: {first}", d.name);
            assert!(!out.contains("garbage not yet collected"), "{}: a heap mid-move is not called garbage", d.name);
        }
    }
}
