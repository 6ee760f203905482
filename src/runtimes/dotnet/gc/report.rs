//! The GC heap and the GC's state as the report carries them (`dotnet.heap`, `dotnet.gc`), and
//! the GC-stall judgement (a heap near its hard limit with an OOM recorded).

use crate::runtimes::dotnet::gc::referrers::{self, Referrer};
use crate::runtimes::dotnet::gc::state::{Committed, HardLimitSource, LastOom};
use crate::runtimes::dotnet::gc::GcReading;
use crate::diagnostics::Diagnostic;
use crate::hex::Hex;
use crate::runtimes::dotnet::report::{async_groups, AsyncStackReport, AsyncTasksReport, DotnetReport};
use crate::waits::LockFact;
use schemars::JsonSchema;
use serde::Serialize;

/// A heap within this share of its hard limit is "near" it.
pub(crate) const NEAR_LIMIT_PERCENT: u64 = 85;

/// `dumpheap -stat` as knot reads it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapReport {
    /// Objects on the GC heap (free objects included), as SOS's "Total N objects".
    pub total_objects: u64,
    /// Their bytes, as SOS counts them (unaligned sizes).
    pub total_bytes: u64,
    /// Bytes of free objects (SOS's `Free` row).
    pub free_bytes: u64,
    /// Bad objects the walk went on past (a null MethodTable where an allocation context left
    /// memory unused, the GC's notes in a heap caught mid-collection), each counted in
    /// `total_objects` as an object of no size, as SOS's `dumpheap -stat` counts them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_objects: u64,
    /// Every type on the heap, largest total first.
    pub types: Vec<HeapTypeReport>,
    /// Retained bytes by type, largest first (MAT's dominator tree grouped by class: per type,
    /// its objects that no object of the same type dominates, their count and retained sum);
    /// null when the object graph was not read.
    pub retained: Option<Vec<RetainedTypeReport>>,
    /// The top holders: objects only the roots dominate, largest retained first (at most 20);
    /// null when the object graph was not read.
    pub dominators: Option<Vec<DominatorReport>>,
    /// Objects no root reaches (garbage not yet collected; free objects not counted): in no
    /// retained size. Null when the object graph was not read.
    pub unreachable: Option<UnreachableReport>,
    /// Holders retaining 10 % of the heap or more, largest first: the leak suspects.
    pub suspects: Vec<SuspectReport>,
    /// The top of the dominator tree for the HTML icicle (not in JSON: `dominators` and
    /// `suspects` carry its facts).
    #[serde(skip)]
    #[schemars(skip)]
    pub dominator_tree: Vec<DominatorNode>,
    /// What every reachable object retains together: the icicle's full width.
    #[serde(skip)]
    #[schemars(skip)]
    pub reachable_bytes: u64,
}

/// One type's retained bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct RetainedTypeReport {
    /// As SOS's heap commands print it.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Objects of the type that no object of the same type dominates.
    pub count: u64,
    /// What they retain together (each object counted once).
    pub retained_bytes: u64,
}

/// What holds an object from outside the heap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct HeapRootRef {
    /// `static`, `strong_handle`, `pinned_handle`, `stack`, `finalizer_queue`, … (as
    /// `knot heap root` names kinds).
    pub kind: String,
    /// The root for people: `static field SessionCache.s_all`, `strong handle 0x7f…`, `thread
    /// 1234 (Main), conservative`.
    #[schemars(with = "String")]
    pub name: RootName,
}

/// Which root holds an object, as facts (`report::words` says it: `strong handle 0x7f…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootName {
    /// A slot of the runtime's statics array whose class and field are not read.
    StaticSlot { array: u64, index: u32 },
    /// A static field, by its class (as SOS's heap commands name types) and name.
    StaticField { class: String, field: String },
    /// A root of a kind (`RootKind::name`) at a place.
    Root { kind: &'static str, conservative: bool, place: RootPlace },
}

/// Where a root is: its handle or slot address, its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootPlace {
    Handle(u64),
    Thread { os_tid: u32, slot: u64, register: Option<u16> },
    Queue(u64),
    SyncBlock(u32),
}

/// One top holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DominatorReport {
    pub address: Hex,
    #[serde(rename = "type")]
    pub type_name: String,
    /// Its own bytes and those of every object it dominates (reachable only through it).
    pub retained_bytes: u64,
    /// The root of its shortest path from a root; null when none was found.
    pub root: Option<HeapRootRef>,
}

/// Garbage not yet collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct UnreachableReport {
    pub objects: u64,
    pub bytes: u64,
}

/// A leak suspect: one holder of a large share of the heap.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SuspectReport {
    pub address: Hex,
    #[serde(rename = "type")]
    pub type_name: String,
    pub retained_bytes: u64,
    /// Of the heap's objects' bytes (reachable and garbage; free space not counted).
    pub heap_percent: f64,
    pub root: Option<HeapRootRef>,
    /// The shortest path from the root to the holder, the holder last.
    pub path: Vec<HeapPathStepReport>,
    /// Where its bytes accumulate.
    pub accumulation: AccumulationReport,
}

/// One object on a path from a root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct HeapPathStepReport {
    pub address: Hex,
    #[serde(rename = "type")]
    pub type_name: String,
    /// The field of this object that leads to the next one (`[i]` for an array element); null
    /// on the last.
    pub field: Option<String>,
}

/// The object under a holder whose children hold the bulk (a dictionary's entries array):
/// found by going down the dominator tree while one child retains 80 % of its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct AccumulationReport {
    pub address: Hex,
    #[serde(rename = "type")]
    pub type_name: String,
    pub retained_bytes: u64,
    /// Its children in the dominator tree.
    pub children: u64,
    /// The type whose children retain most, how many they are and what they retain.
    pub child_type: String,
    pub child_count: u64,
    pub child_retained_bytes: u64,
}

/// A node of the dominator tree's top, in preorder (a parent before its children, the
/// largest child first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DominatorNode {
    pub address: u64,
    pub type_name: String,
    pub retained_bytes: u64,
    /// Index of its parent in the list; `None` for the top holders.
    pub parent: Option<usize>,
    pub depth: u32,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapTypeReport {
    /// As SOS `dumpheap -stat` prints it: `System.Collections.Generic.List<System.Char>`,
    /// `System.Int32[]`, `Free`.
    pub name: String,
    pub method_table: Hex,
    pub count: u64,
    pub bytes: u64,
}

/// The GC's own state.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GcReport {
    /// `regions` (the .NET 7+ default) or `segments`.
    pub layout: String,
    /// Server GC (one heap per core) or workstation GC.
    pub server: bool,
    pub heaps: usize,
    /// The heap hard limit; null when there is none (or knot cannot read it for this build).
    pub hard_limit_bytes: Option<u64>,
    /// `setting` (GCHeapHardLimit in the environment) or `container_default` (75 % of the
    /// container's memory limit); null without a limit.
    pub hard_limit_source: Option<String>,
    /// Whether knot could read the limit for this runtime build.
    pub hard_limit_read: bool,
    /// Memory the GC heap has committed (frozen segments left out).
    pub committed_bytes: u64,
    pub committed: CommittedReport,
    /// The runtime was suspended for a GC, or a background GC was running.
    pub gc_in_progress: bool,
    /// The last OOM the GC recorded (SOS `analyzeoom`), or null.
    pub last_oom: Option<OomReport>,
    /// The heap is within 85 % of its hard limit and either an OOM is recorded or threads wait
    /// for a collection in progress: the GC-stall shape.
    pub stalled: bool,
    /// The collection in progress as a node of the wait-for graph: who runs it, who waits for
    /// it; absent when no collection was in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<CollectionReport>,
}

/// A collection in progress (`dotnet.gc.collection`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CollectionReport {
    /// `stall` (the heap near its hard limit, threads waiting) or `routine` (far from any
    /// limit: a collection like any other, caught by the dump).
    pub kind: String,
    /// Who runs it. Workstation GC: the thread that suspended the runtime for it (known: the
    /// runtime records it). Server GC: the GC's threads, one per heap (inferred from their stacks).
    pub collectors: Vec<CollectorReport>,
    /// `one` (workstation: the waiters go on when it finishes) or `all` (server GC: when every
    /// GC thread has).
    pub release: String,
    /// Threads blocked on the GC's events, waiting for the collection.
    pub waiter_tids: Vec<u32>,
    /// The GC was planning or moving objects (`gc_structures_invalid_cnt` ≠ 0, SOS: "not in a
    /// valid state for traversal"): the heap is as the GC left it, its walk partial.
    pub mid_collection: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CollectorReport {
    pub tid: u32,
    /// `known` or `inferred`.
    pub certainty: String,
    /// `suspended_the_runtime` (workstation) or `server_gc_thread`.
    pub role: String,
    /// The server GC heap the thread serves.
    pub heap: Option<usize>,
}

impl CollectionReport {
    /// `c` as the report says it; `near_limit`: the heap is near its hard limit.
    pub(crate) fn of(c: &super::collection::Collection, near_limit: bool) -> CollectionReport {
        use super::collection::CollectorWhy;
        CollectionReport {
            kind: if near_limit && !c.waiters.is_empty() { "stall" } else { "routine" }.to_string(),
            collectors: c
                .collectors
                .iter()
                .map(|k| match k.why {
                    CollectorWhy::SuspendedRuntime => CollectorReport { tid: k.tid, certainty: "known".into(), role: "suspended_the_runtime".into(), heap: None },
                    CollectorWhy::ServerGcThread { index, .. } => CollectorReport { tid: k.tid, certainty: "inferred".into(), role: "server_gc_thread".into(), heap: Some(index) },
                })
                .collect(),
            release: if c.server { "all" } else { "one" }.to_string(),
            waiter_tids: c.waiters.clone(),
            mid_collection: c.mid_collection,
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CommittedReport {
    pub gen0: u64,
    pub gen1: u64,
    pub gen2: u64,
    pub loh: u64,
    pub poh: u64,
    /// Read-only segments (string literals; SOS's "NonGC heap").
    pub frozen: u64,
    /// Segments layout: the ephemeral segment.
    pub ephemeral: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OomReport {
    pub heap: usize,
    /// `budget`, `cant_commit`, `cant_reserve`, `loh`, `low_mem`, `unproductive_full_gc`.
    pub reason: String,
    /// SOS `analyzeoom`'s words for the reason.
    pub reason_text: String,
    /// The allocation that failed, in bytes.
    pub allocation_bytes: u64,
    /// The GC after which it happened.
    pub gc_index: u64,
    /// Why the GC could not get memory from the OS (`reserve_segment`, `commit_segment_beg`,
    /// `commit_eph_segment`, `grow_table`, `commit_table`), or null.
    pub get_memory_failure: Option<String>,
    /// SOS's `Details:` line, or null.
    pub detail: Option<String>,
    pub large_object_heap: bool,
    pub size: u64,
    pub available_commit_mb: u64,
}

/// One heap object that refers to a lock's object (`locks[].managed.referrers[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReferrerReport {
    /// The referrer's type, as SOS's heap commands print it.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The field that refers to the lock's object (`_synchRoot`), or `[i]` for an array element.
    pub field: String,
    /// The referrer.
    pub address: Hex,
    /// A cheap identifying field of the referrer (`Tag "root"`), or null.
    pub identity: Option<String>,
    /// The lock's object is held by this static field (`type` is its class, `address` its slot
    /// in the statics' `System.Object[]`), the only static that holds it; absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not", rename = "static")]
    pub is_static: bool,
}

impl ReferrerReport {
    pub fn of(r: &Referrer) -> ReferrerReport {
        ReferrerReport { type_name: r.type_name.clone(), field: r.field.clone(), address: Hex(r.address), identity: r.identity.clone(), is_static: false }
    }
}

/// The objects of the locks on managed objects: the heap walk finds their referrers.
pub(crate) fn lock_objects(locks: &[LockFact]) -> Vec<u64> {
    locks.iter().filter(|l| l.kind.is_on_managed_object()).filter_map(|l| l.managed.as_ref()).map(|m| m.object.0).collect()
}

/// Puts the GC heap's reading (for the objects of [`lock_objects`]) into `report`
/// (`dotnet.heap`, `dotnet.gc`), and names the objects of the .NET locks in `locks` by the heap
/// objects that refer to them. Returns the reading, for what is built on it (the semaphores'
/// waits).
pub(crate) fn attach_reading(gc: Result<GcReading, String>, report: &mut DotnetReport, locks: &mut [LockFact], diagnostics: &mut Vec<Diagnostic>) -> Option<GcReading> {
    match gc {
        Ok(gc) => {
            report.heap = Some(HeapReport::of(&gc));
            if let Some(a) = &gc.async_stacks {
                report.async_stacks = a.stacks.iter().map(AsyncStackReport::of).collect();
                report.async_groups = async_groups(&report.async_stacks);
                report.async_tasks = Some(AsyncTasksReport { pending_tasks: a.pending_tasks, cut: a.cut.clone() });
            }
            report.gc = Some(GcReport::of(&gc));
            for l in locks.iter_mut() {
                let Some(m) = l.managed.as_mut() else { continue };
                if let Some(rs) = gc.referrers.get(&m.object.0) {
                    let mut rs: Vec<&Referrer> = rs.iter().collect();
                    let best = referrers::best(&rs.iter().map(|r| (*r).clone()).collect::<Vec<_>>()).cloned();
                    // The best first, then by address.
                    rs.sort_by_key(|r| (Some(*r) != best.as_ref(), r.address));
                    m.referrers = rs.into_iter().map(ReferrerReport::of).collect();
                }
            }
            diagnostics.extend(gc.diagnostics.iter().cloned());
            Some(gc)
        }
        Err(why) => {
            diagnostics.push(Diagnostic::warning(crate::runtimes::dotnet::gc::STAGE, why));
            None
        }
    }
}

impl HeapReport {
    pub fn of(r: &GcReading) -> HeapReport {
        HeapReport {
            total_objects: r.stats.total_objects,
            total_bytes: r.stats.total_bytes,
            free_bytes: r.stats.free_bytes,
            skipped_objects: r.stats.skipped_objects,
            types: r.stats.types.iter().map(|t| HeapTypeReport { name: t.name.clone(), method_table: Hex(t.method_table), count: t.count, bytes: t.bytes }).collect(),
            retained: None,
            dominators: None,
            unreachable: None,
            suspects: Vec::new(),
            dominator_tree: Vec::new(),
            reachable_bytes: 0,
        }
    }
}

impl GcReport {
    pub fn of(r: &GcReading) -> GcReport {
        let s = &r.state;
        let c: &Committed = &s.committed;
        GcReport {
            layout: match r.layout {
                crate::runtimes::dotnet::gc::HeapLayout::Regions => "regions",
                crate::runtimes::dotnet::gc::HeapLayout::Segments => "segments",
            }
            .to_string(),
            server: r.server,
            heaps: r.heap_count,
            hard_limit_bytes: s.hard_limit_bytes,
            hard_limit_source: s.hard_limit_source.map(|h| match h {
                HardLimitSource::Setting => "setting".to_string(),
                HardLimitSource::ContainerDefault => "container_default".to_string(),
            }),
            hard_limit_read: s.hard_limit_read,
            committed_bytes: s.committed_bytes,
            committed: CommittedReport { gen0: c.gen0, gen1: c.gen1, gen2: c.gen2, loh: c.loh, poh: c.poh, frozen: c.frozen, ephemeral: c.ephemeral },
            gc_in_progress: s.gc_in_progress,
            last_oom: s.last_oom.as_ref().map(oom),
            stalled: stalled(s.hard_limit_bytes, s.committed_bytes, r.stats.total_bytes, s.last_oom.is_some()),
            collection: None,
        }
    }

    /// Adds the collection in progress: the GC was in progress, and a stall when threads wait
    /// for it with the heap near its hard limit (with or without an OOM on record).
    pub(crate) fn attach_collection(&mut self, c: &super::collection::Collection, heap_bytes: u64) {
        if !c.in_progress {
            return;
        }
        let near = near_limit(self.hard_limit_bytes, self.committed_bytes, heap_bytes);
        self.gc_in_progress = true;
        self.stalled |= near && !c.waiters.is_empty();
        self.collection = Some(CollectionReport::of(c, near));
    }

    /// The share of the hard limit in use (committed memory), in percent.
    pub fn limit_percent(&self) -> Option<f64> {
        self.hard_limit_bytes.filter(|&l| l > 0).map(|l| self.committed_bytes as f64 * 100.0 / l as f64)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Near its hard limit (committed memory or live bytes at 85 % or more) with an OOM recorded.
pub(crate) fn stalled(hard_limit: Option<u64>, committed: u64, heap_bytes: u64, oom: bool) -> bool {
    oom && near_limit(hard_limit, committed, heap_bytes)
}

/// Committed memory or live bytes at 85 % or more of the hard limit.
pub(crate) fn near_limit(hard_limit: Option<u64>, committed: u64, heap_bytes: u64) -> bool {
    let Some(limit) = hard_limit.filter(|&l| l > 0) else { return false };
    committed.max(heap_bytes).saturating_mul(100) >= limit.saturating_mul(NEAR_LIMIT_PERCENT)
}

fn oom(o: &LastOom) -> OomReport {
    OomReport {
        heap: o.heap,
        reason: o.reason.to_string(),
        reason_text: o.reason_text.to_string(),
        allocation_bytes: o.allocation_bytes,
        gc_index: o.gc_index,
        get_memory_failure: o.get_memory_failure.map(str::to_string),
        detail: o.detail.clone(),
        large_object_heap: o.large_object_heap,
        size: o.size,
        available_commit_mb: o.available_commit_mb,
    }
}


/// How the retained fields name what they show: a type by its index in the graph's type table,
/// and a node's root with the path from it (`None`: no root found).
pub(crate) struct RetentionNames<'a> {
    pub(crate) type_name: &'a dyn Fn(u32) -> String,
    pub(crate) root_path: &'a dyn Fn(u32) -> Option<(HeapRootRef, Vec<HeapPathStepReport>)>,
}

/// Fills `heap`'s `retained`, `dominators`, `unreachable`, `suspects` and the icicle's tree from
/// the retention of graph `g`.
pub(crate) fn attach_retention(heap: &mut HeapReport, g: &crate::runtimes::dotnet::gc::graph::ObjectGraph, r: &crate::runtimes::dotnet::gc::retained::Retention, names: &RetentionNames<'_>) {
    use crate::runtimes::dotnet::gc::retained::{SUSPECT_PERCENT, TOP_HOLDERS};
    let node_type = |k: u32| g.types.get(r.node(k) as usize).copied().unwrap_or(u32::MAX);
    let address = |k: u32| Hex(g.address(r.node(k)).unwrap_or(0));
    heap.retained = Some(r.by_type.iter().map(|t| RetainedTypeReport { type_name: (names.type_name)(t.type_index), count: t.count, retained_bytes: t.retained }).collect());
    heap.unreachable = Some(UnreachableReport { objects: r.unreachable_objects, bytes: r.unreachable_bytes });
    heap.dominators = Some(
        r.top_holders(TOP_HOLDERS)
            .into_iter()
            .map(|k| DominatorReport {
                address: address(k),
                type_name: (names.type_name)(node_type(k)),
                retained_bytes: r.retained(k),
                root: (names.root_path)(r.node(k)).map(|(root, _)| root),
            })
            .collect(),
    );
    let heap_bytes = r.heap_bytes().max(1);
    heap.suspects = r
        .suspects()
        .into_iter()
        .map(|k| {
            let a = r.accumulation(k);
            let (root, path) = match (names.root_path)(r.node(k)) {
                Some((root, path)) => (Some(root), path),
                None => (None, Vec::new()),
            };
            SuspectReport {
                address: address(k),
                type_name: (names.type_name)(node_type(k)),
                retained_bytes: r.retained(k),
                heap_percent: r.retained(k) as f64 * 100.0 / heap_bytes as f64,
                root,
                path,
                accumulation: AccumulationReport {
                    address: address(a.point),
                    type_name: (names.type_name)(node_type(a.point)),
                    retained_bytes: r.retained(a.point),
                    children: a.children,
                    child_type: if a.child_count_known() { (names.type_name)(a.child_type) } else { String::new() },
                    child_count: a.child_type_count,
                    child_retained_bytes: a.child_type_retained,
                },
            }
        })
        .collect();
    debug_assert!(heap.suspects.iter().all(|s| s.heap_percent >= SUSPECT_PERCENT as f64));
    heap.reachable_bytes = r.retained(0);
    heap.dominator_tree = r
        .top_of_tree()
        .iter()
        .map(|&(k, parent, depth)| DominatorNode { address: address(k).0, type_name: (names.type_name)(node_type(k)), retained_bytes: r.retained(k), parent, depth })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::stalled;

    #[test]
    fn stalled_needs_a_limit_an_oom_and_a_full_heap() {
        assert!(stalled(Some(100), 90, 0, true));
        assert!(stalled(Some(100), 10, 85, true));
        assert!(!stalled(Some(100), 90, 0, false));
        assert!(!stalled(Some(100), 50, 50, true));
        assert!(!stalled(None, 90, 90, true));
    }
}
