//! The .NET GC heap in the text report's first screen: one line always (what the heap holds,
//! what the GC has committed, against which limit), the last OOM when there is one, and the
//! largest types when the heap is the story (a GC stall, an OOM, or a heap near its limit).

use crate::runtimes::dotnet::gc::report::{CollectionReport, GcReport, HeapReport, NEAR_LIMIT_PERCENT};
use crate::runtimes::dotnet::gc::state::thousands;
use crate::runtimes::dotnet::DotnetReport;
use std::fmt::Write;

/// Types shown when the heap is the story.
pub(crate) const TOP_TYPES: usize = 8;

/// `12.3 MiB`, `512 KiB`, `100 B`.
pub(crate) fn bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f >= K * K * K {
        format!("{:.1} GiB", f / (K * K * K))
    } else if f >= K * K {
        format!("{:.1} MiB", f / (K * K))
    } else if f >= K {
        format!("{:.1} KiB", f / K)
    } else {
        format!("{n} B")
    }
}

/// Whether the heap is what the report is about.
pub(crate) fn heap_is_the_story(gc: &GcReport) -> bool {
    gc.stalled || gc.last_oom.is_some() || gc.limit_percent().is_some_and(|p| p >= NEAR_LIMIT_PERCENT as f64)
}

/// The words after "Verdict: GC STALL": the share of the limit, the OOM, who collects and who
/// waits.
pub(crate) fn stall_words(r: &crate::report::Report, gc: &GcReport) -> String {
    let mut s = String::new();
    if let (Some(limit), Some(p)) = (gc.hard_limit_bytes, gc.limit_percent()) {
        let _ = write!(s, " — heap at {p:.1} % of its {} hard limit", bytes(limit));
    }
    if let Some(o) = &gc.last_oom {
        let _ = write!(s, ", out of memory after GC #{} allocating {} bytes", o.gc_index, thousands(o.allocation_bytes));
    }
    if let Some(c) = &gc.collection {
        let _ = write!(s, "; {}", collection_words(r, c));
    }
    s
}

/// Who runs a collection and who waits for it: `thread 12 "Churn-2" collects, 5 threads wait for
/// it`; a server GC's `the GC's 2 threads (31318, 31319) collect, 6 threads wait for all of them`.
pub(crate) fn collection_words(r: &crate::report::Report, c: &CollectionReport) -> String {
    let n = c.waiter_tids.len();
    let waiters = format!("{n} thread{} wait{}", if n == 1 { "" } else { "s" }, if n == 1 { "s" } else { "" });
    match c.collectors.as_slice() {
        [] if c.release == "all" => format!("the GC's threads collect (not identified), {waiters} for them"),
        [] => format!("the thread collecting is not known, {waiters} for the collection"),
        [one] if c.release == "one" => format!("{} collects, {waiters} for it", super::crash_text::thread_words(r, one.tid)),
        many => {
            let tids: Vec<String> = many.iter().map(|k| k.tid.to_string()).collect();
            format!("the GC's {} threads ({}) collect, {waiters} for all of them", many.len(), tids.join(", "))
        }
    }
}

/// Where the hard limit came from, as words after it: `, set in the environment`, `, the
/// container default`, or nothing when unknown.
pub(crate) fn limit_source_words(gc: &GcReport) -> &'static str {
    match gc.hard_limit_source.as_deref() {
        Some("setting") => ", set in the environment",
        Some("container_default") => ", the container default",
        _ => "",
    }
}

pub(crate) fn summary_lines(out: &mut String, r: &crate::report::Report, d: &DotnetReport) {
    let (Some(heap), Some(gc)) = (d.heap.as_ref(), d.gc.as_ref()) else { return };
    let _ = write!(out, "  GC heap: {} in {} objects ({} free", bytes(heap.total_bytes), thousands(heap.total_objects), bytes(heap.free_bytes));
    if heap.skipped_objects > 0 {
        // Counted as SOS counts them, so the totals are dumpheap's.
        let n = heap.skipped_objects;
        let _ = write!(out, "; {} bad object{} passed, as SOS does", thousands(n), if n == 1 { "" } else { "s" });
    }
    let _ = write!(out, "); committed {}", bytes(gc.committed_bytes));
    match (gc.hard_limit_bytes, gc.limit_percent()) {
        (Some(limit), Some(p)) => {
            let limit = bytes(limit);
            let _ = write!(out, " of {} {limit} hard limit ({p:.1} %{})", super::words::a_or_an(&limit), limit_source_words(gc));
        }
        _ if gc.hard_limit_read => out.push_str(", no hard limit"),
        _ => {}
    }
    let _ = writeln!(out, "; {}, {} GC{}", gc.layout, if gc.server { "server" } else { "workstation" }, if gc.gc_in_progress { "; a GC was in progress" } else { "" });
    if let Some(o) = &gc.last_oom {
        let _ = write!(out, "  last OOM: {} (after GC #{}, allocating {} bytes)", o.reason_text, o.gc_index, thousands(o.allocation_bytes));
        if let Some(detail) = &o.detail {
            let _ = write!(out, "; {detail}");
        }
        out.push('\n');
    }
    let mid_collection = gc.collection.as_ref().is_some_and(|c| c.mid_collection);
    if let Some(c) = &gc.collection {
        if c.kind == "stall" {
            let _ = writeln!(out, "  collection: {}", collection_words(r, c));
        } else {
            let far = match gc.limit_percent() {
                Some(p) => format!("the heap at {p:.1} % of its limit"),
                None => "no hard limit".into(),
            };
            let _ = writeln!(out, "  collection in progress, a routine one ({far}, no stall): {}", collection_words(r, c));
        }
    }
    if mid_collection {
        // What the walk found is the heap as the GC left it mid-move: said before any number a
        // person would read as the heap's.
        let _ = writeln!(
            out,
            "  the heap was caught mid-collection (the GC was planning or moving objects): the walk went past {} bad object{} as SOS does; the objects, garbage and retained sizes are as the GC left them, not as the program had them",
            thousands(heap.skipped_objects),
            if heap.skipped_objects == 1 { "" } else { "s" }
        );
    } else if let Some(u) = &heap.unreachable {
        let _ = writeln!(out, "  garbage not yet collected: {} objects, {} (in no retained size)", thousands(u.objects), bytes(u.bytes));
    }
    if heap_is_the_story(gc) {
        top_types(out, heap);
    }
}

/// A holder is said in every report, whatever the verdict, when it keeps at least this much
/// (and its share of the heap makes it a suspect): a large share of a tiny heap (47 % of
/// 67 KiB) is noise, not a leak.
pub(crate) const SUSPECT_FIRST_MIN_BYTES: u64 = 1 << 20;

/// Where the leak suspects are said in the first screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SuspectPlace {
    /// Before the verdict: the heap is the story, or nothing else is.
    First,
    /// After the verdict's lines: a deadlock, a crash, a convoy or a starved pool is the story.
    AfterVerdict,
}

/// Where (and whether) the leak suspects are said: first when the heap is the story (a stall,
/// an OOM, near its limit) or nothing else is (nothing blocked, idle, or waiting on I/O); after
/// the verdict's lines when something else is. Either way only when a suspect keeps at least
/// [`SUSPECT_FIRST_MIN_BYTES`], except when the heap is the story.
pub(crate) fn suspect_place(r: &crate::report::Report) -> Option<SuspectPlace> {
    use crate::report::Verdict;
    let d = r.dotnet.as_ref()?;
    let (heap, gc) = (d.heap.as_ref()?, d.gc.as_ref()?);
    if heap.suspects.is_empty() {
        return None;
    }
    if heap_is_the_story(gc) || matches!(r.verdict, Verdict::GcStall) {
        return Some(SuspectPlace::First);
    }
    if !heap.suspects.iter().any(|s| s.retained_bytes >= SUSPECT_FIRST_MIN_BYTES) {
        return None;
    }
    match r.verdict {
        Verdict::Idle | Verdict::NothingBlocked | Verdict::BlockedOnIo | Verdict::NotAnalyzed => Some(SuspectPlace::First),
        Verdict::Deadlock | Verdict::Crash | Verdict::Abandoned | Verdict::Contention | Verdict::ThreadPoolStarved | Verdict::GcStall => Some(SuspectPlace::AfterVerdict),
    }
}

/// The suspects a report says: every one when the heap is the story, else those that keep at
/// least [`SUSPECT_FIRST_MIN_BYTES`].
pub(crate) fn said_suspects(r: &crate::report::Report) -> Vec<&crate::runtimes::dotnet::gc::report::SuspectReport> {
    let Some(heap) = r.dotnet.as_ref().and_then(|d| d.heap.as_ref()) else { return Vec::new() };
    let all = r.dotnet.as_ref().and_then(|d| d.gc.as_ref()).is_some_and(heap_is_the_story) || r.verdict == crate::report::Verdict::GcStall;
    heap.suspects.iter().filter(|s| all || s.retained_bytes >= SUSPECT_FIRST_MIN_BYTES).collect()
}

/// The leak suspects at `place` in the text's first screen (a blank line, then
/// [`suspect_lines`]), or nothing when they belong elsewhere or are not said.
pub(crate) fn suspects_at(out: &mut String, r: &crate::report::Report, place: SuspectPlace) {
    if suspect_place(r) == Some(place) {
        out.push('\n');
        suspect_lines(out, &said_suspects(r));
    }
}

/// The leak suspects, one line each, then each one's path from its root.
pub(crate) fn suspect_lines(out: &mut String, suspects: &[&crate::runtimes::dotnet::gc::report::SuspectReport]) {
    for s in suspects {
        let _ = writeln!(out, "Leak suspect: {}", super::words::suspect(s));
        if s.path.len() > 1 {
            let steps: Vec<String> = s
                .path
                .iter()
                .map(|p| match &p.field {
                    Some(f) => format!("{} {} .{f}", p.type_name, p.address),
                    None => format!("{} {}", p.type_name, p.address),
                })
                .collect();
            let _ = writeln!(out, "  path: {}", steps.join(" → "));
        }
    }
}

fn top_types(out: &mut String, heap: &HeapReport) {
    let _ = writeln!(out, "  largest types on the heap:");
    for t in heap.types.iter().take(TOP_TYPES) {
        let share = if heap.total_bytes > 0 { t.bytes as f64 * 100.0 / heap.total_bytes as f64 } else { 0.0 };
        let _ = writeln!(out, "    {:>10} {share:>5.1} %  {:>9} × {}", bytes(t.bytes), thousands(t.count), t.name);
    }
}
