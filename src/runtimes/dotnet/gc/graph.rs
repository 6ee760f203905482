//! The GC heap as a graph: every object a node, every reference a field holds an edge, and the
//! roots that hold objects from outside the heap. This is the contract the heap's later readings
//! (why alive, dominators and retained sizes, diff) are built on:
//!
//! - Nodes are numbered in address order: node `i` is the object at [`ObjectGraph::address`]`(i)`,
//!   every object the walk found (free objects left out); an address is a node through the
//!   index ([`ObjectGraph::node_of`]: a bit test and a popcount, see `node_index`).
//! - `types[i]` indexes `type_table` (the MethodTable; named through the heap's namer),
//!   `sizes[i]` is the size SOS reports for it (`dumpheap`/`objsize`: unaligned, saturated at
//!   `u32::MAX`; `holders` empties `sizes` once the retained sizes are read).
//! - Edges are CSR: the targets of `i` are `edges[edge_start[i]..edge_start[i + 1]]`
//!   (`edge_start` has `len() + 1` entries), in field order, duplicates kept (two fields that
//!   hold one object are two edges). A field that holds no object of the walk (null, an address
//!   outside the heap, into an object's middle) is no edge. A dependent handle is an edge from
//!   its primary to its secondary, after the primary's own.
//! - `roots` holds every root read, each with its kind and where it is ([`RootSource`]); one
//!   object may be held by many roots. Roots that could not be read are diagnostics of the
//!   reading, never dropped silently.
//!
//! Memory: 4 + 4 bytes per node (type, size) and about 1.3 for the address index, besides the
//! edges (4 bytes each) and `edge_start`, so a graph of N objects with E references takes about
//! 13.3·N + 4·E bytes.

use crate::runtimes::dotnet::gc::node_index::NodeIndex;
use crate::runtimes::dotnet::gc::raw_refs::{Failed, Part, RawRefs, BLOCK};
use crate::scratch::{Place, ScratchVec};
use serde::Serialize;

/// The object graph of one heap (see the module doc: the contract).
#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectGraph {
    /// Node i's object address (nodes in address order).
    pub(crate) index: NodeIndex,
    /// Node i's index into `type_table`.
    pub(crate) types: ScratchVec<u32>,
    /// MethodTables (named through the heap's type namer).
    pub(crate) type_table: Vec<u64>,
    /// Node i's size as SOS reports it (saturating).
    pub(crate) sizes: ScratchVec<u32>,
    /// CSR: the edges of i are `edges[edge_start[i]..edge_start[i + 1]]`.
    pub(crate) edge_start: ScratchVec<u32>,
    /// Target node indices (references to non-objects dropped).
    pub(crate) edges: ScratchVec<u32>,
    pub(crate) roots: Vec<Root>,
    /// Where the graph's large arrays, and those of the readings made from it (dominators,
    /// retained sizes, root tree), live: memory or scratch files (the plan's choice).
    pub(crate) place: Place,
}

/// One root: an object held from outside the heap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Root {
    pub(crate) kind: RootKind,
    /// The node held.
    pub(crate) node: u32,
    pub(crate) source: RootSource,
}

/// What kind of root holds an object (the GC's own classes of roots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub(crate) enum RootKind {
    /// `GCHandle.Alloc(o)` / `HNDTYPE_STRONG` (also how .NET 10 holds its statics' arrays).
    StrongHandle,
    /// `GCHandleType.Pinned` / `HNDTYPE_PINNED`.
    PinnedHandle,
    /// `HNDTYPE_ASYNCPINNED` (overlapped I/O buffers).
    AsyncPinnedHandle,
    /// `HNDTYPE_REFCOUNTED` with a non-zero count (COM/CCW).
    RefCountedHandle,
    /// `HNDTYPE_SIZEDREF`.
    SizedRefHandle,
    /// `HNDTYPE_VARIABLE` of a strong kind.
    VariableHandle,
    /// A dependent handle: never a root of the graph — it is an edge primary → secondary
    /// (`ConditionalWeakTable`) — but a kind readings may name.
    #[allow(dead_code, reason = "part of the contract: dependent handles are edges, never roots")]
    DependentHandle,
    /// Unreachable but finalizable: the finalizer thread will run its finalizer (f-reachable).
    FinalizerQueue,
    /// A thread's stack slot or register. `conservative`: found by scanning the frame's words,
    /// not from GC info (it may be a stale or non-reference word that happens to point at an
    /// object).
    Stack { conservative: bool },
    /// A sync block's object (the runtime keeps the object of a sync block in use alive).
    SyncBlock,
    /// A static field (held through the runtime's statics; named by class and field). .NET 10's
    /// statics are slots of a `System.Object[]` held by a strong handle: that handle is the root,
    /// and `static_names` names the slot.
    #[allow(dead_code, reason = "part of the contract: .NET 10's statics are reached through a strong handle")]
    Static,
}

impl RootKind {
    /// The kind's name in JSON (`strong_handle`, `stack`, …) and whether it was found by a
    /// conservative scan (only stack roots can be).
    pub(crate) fn name(self) -> (&'static str, bool) {
        match self {
            RootKind::StrongHandle => ("strong_handle", false),
            RootKind::PinnedHandle => ("pinned_handle", false),
            RootKind::AsyncPinnedHandle => ("async_pinned_handle", false),
            RootKind::RefCountedHandle => ("ref_counted_handle", false),
            RootKind::SizedRefHandle => ("sized_ref_handle", false),
            RootKind::VariableHandle => ("variable_handle", false),
            RootKind::DependentHandle => ("dependent_handle", false),
            RootKind::FinalizerQueue => ("finalizer_queue", false),
            RootKind::Stack { conservative } => ("stack", conservative),
            RootKind::SyncBlock => ("sync_block", false),
            RootKind::Static => ("static", false),
        }
    }
}

/// Where a root is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "source")]
pub(crate) enum RootSource {
    /// A handle: the handle's own address (what `GCHandle.ToIntPtr` gives).
    Handle { handle: u64 },
    /// A slot of a thread's stack, or a register (`register` set, `slot` 0).
    Stack {
        /// The OS thread id.
        os_tid: u32,
        /// The managed thread id (0 when the thread has none).
        managed_id: u32,
        /// The frame's stack pointer and the method's code address (0 when not known).
        frame_sp: u64,
        frame_ip: u64,
        /// The slot's address on the stack (0 for a register).
        slot: u64,
        /// The register's DWARF number when the root is a register.
        register: Option<u16>,
    },
    /// The finalization queue's slot holding the object.
    FinalizerQueue { slot: u64 },
    /// Sync block table index.
    SyncBlock { index: u32 },
    /// A static field: its class's MethodTable and the field's metadata token, and the handle
    /// that holds the statics' array (0 when not read through one).
    #[allow(dead_code, reason = "part of the contract: .NET 10's statics are reached through a strong handle")]
    Static { method_table: u64, field_token: u32, handle: u64 },
}

impl ObjectGraph {
    /// The node of the object at `address`, if it is one.
    pub(crate) fn node_of(&self, address: u64) -> Option<u32> {
        self.index.node_of(address)
    }

    /// The address of node `i`.
    pub(crate) fn address(&self, i: u32) -> Option<u64> {
        self.index.address(i)
    }

    /// Nodes in the graph.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The targets of node `i`'s references (empty for a node out of range).
    pub(crate) fn edges_of(&self, i: u32) -> &[u32] {
        let i = i as usize;
        match (self.edge_start.get(i), self.edge_start.get(i + 1)) {
            (Some(&a), Some(&b)) if a <= b => self.edges.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// The MethodTable of node `i`.
    pub(crate) fn method_table(&self, i: u32) -> Option<u64> {
        self.types.get(i as usize).and_then(|&t| self.type_table.get(t as usize)).copied()
    }
}

/// Errors kept per graph at most; the rest are counted.
pub(crate) const MAX_ERRORS: usize = 64;
/// Edges a graph may have (its indices are u32).
const MAX_EDGES: u64 = u32::MAX as u64 - 1;

/// What building the graph could not do: objects whose references were not read (the
/// object, why), types whose GC description was refused, and how many more were cut.
#[derive(Debug, Clone, Default)]
pub(crate) struct GraphErrors {
    pub(crate) errors: Vec<(u64, String)>,
    pub(crate) more: usize,
}

impl GraphErrors {
    pub(crate) fn push(&mut self, at: u64, why: String) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push((at, why));
        } else {
            self.more += 1;
        }
    }

    /// `later`'s errors after these, as if each had been pushed here (`later` kept at least
    /// as many as fit).
    pub(crate) fn extend(&mut self, later: GraphErrors) {
        for (at, why) in later.errors {
            self.push(at, why);
        }
        self.more += later.more;
    }
}

/// Objects [`nodes`] left out: those of a segment overlapping one before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Overlapped {
    pub(crate) objects: usize,
    /// The first object left out.
    pub(crate) first: u64,
}

/// The nodes of the walks, merged: addresses ascending (segments in address order, objects
/// in each in order), the MethodTables in one table. Each walk's lists are freed once merged.
/// With the objects left out because their segment overlaps one before it (a damaged segment
/// list).
pub(crate) fn nodes(walks: Vec<crate::runtimes::dotnet::gc::walk::SegmentNodes>, place: &Place) -> (ObjectGraph, Overlapped) {
    let mut walks: Vec<_> = walks.into_iter().filter(|w| !w.is_empty()).collect();
    walks.sort_by_key(|w| w.first());
    let total: usize = walks.iter().map(|w| w.len()).sum();
    let mut g = ObjectGraph { types: ScratchVec::with_capacity(place, total), sizes: ScratchVec::with_capacity(place, total), place: place.clone(), ..ObjectGraph::default() };
    let mut index: rustc_hash::FxHashMap<u64, u32> = rustc_hash::FxHashMap::default();
    let mut overlapped = Overlapped::default();
    for w in walks {
        let map: Vec<u32> = w
            .method_tables
            .iter()
            .map(|&mt| {
                *index.entry(mt).or_insert_with(|| {
                    g.type_table.push(mt);
                    (g.type_table.len() - 1) as u32
                })
            })
            .collect();
        // Overlapping segments (a damaged segment list): an object at or below one already
        // taken is left out, so nodes stay in address order.
        for ((a, &t), &size) in w.addresses().zip(&w.types).zip(&w.sizes) {
            if g.index.push(a) {
                g.types.push(map.get(t as usize).copied().unwrap_or(0));
                g.sizes.push(size);
            } else {
                if overlapped.objects == 0 {
                    overlapped.first = a;
                }
                overlapped.objects += 1;
            }
        }
    }
    g.types.shrink_to_fit();
    g.sizes.shrink_to_fit();
    g.types.write_back();
    g.sizes.write_back();
    g.index.shrink_to_fit();
    (g, overlapped)
}

/// Fills the graph's edges from the references the walk read (`refs`: raw addresses, resolved
/// here to nodes; `parts` says which segment's objects are which nodes), in parallel over blocks
/// of objects; `extra` are edges besides the fields (a dependent handle's primary → secondary),
/// as (from, to) nodes sorted by `from`. References to no object are dropped. The dump is not
/// read again: what could not be read was said by the walk, and is said here in node order.
/// Each segment's references are freed once resolved: the edges grow as they shrink.
pub(crate) fn edges(g: &mut ObjectGraph, mut refs: RawRefs, parts: &[Part], extra: &[(u32, u32)], errors: &mut GraphErrors) {
    use rayon::prelude::*;
    for &mt in &g.type_table {
        if let Some(Err(e)) = refs.descs.get(&mt) {
            errors.push(mt, format!("{e}; objects of this type have no references in the graph"));
        }
    }
    // Blocks resolved in parallel at a time: what they hold before being appended is bounded
    // (a few MiB a block), whatever the heap's size.
    const BATCH: usize = 64;
    let n = g.len();
    let mut edge_start: ScratchVec<u32> = ScratchVec::with_capacity(&g.place, n + 1);
    let mut edges: ScratchVec<u32> = ScratchVec::new(&g.place);
    let mut start: u64 = 0;
    edge_start.push(0);
    let graph: &ObjectGraph = g;
    let units = refs.units(parts);
    crate::heap_progress::start(crate::heap_progress::HeapStep::References, n as u64);
    let mut done = 0usize;
    let mut ends: Vec<u32> = Vec::with_capacity(BLOCK);
    for batch in units.chunks(BATCH) {
        let refs_now = &refs;
        let parts: Vec<(Vec<u32>, Vec<u32>, GraphErrors)> = batch
            .par_iter()
            .map(|unit| {
                let mut counts = Vec::with_capacity(BLOCK);
                let mut out = Vec::new();
                let mut errs = GraphErrors::default();
                let refs = refs_now;
                let mut x = extra.partition_point(|e| (e.0 as usize) < refs.first_node(unit));
                let mut hint = 0;
                refs.visit(unit, |i, values, failed| {
                    if i >= n {
                        return;
                    }
                    let before = out.len();
                    for &v in values {
                        if let Some(j) = graph.index.node_near(v, &mut hint) {
                            out.push(j);
                        }
                    }
                    if let Some(failed) = failed {
                        let at = graph.index.address(i as u32).unwrap_or(0);
                        let size = graph.sizes.get(i).copied().unwrap_or(0);
                        let mt = graph.types.get(i).and_then(|&t| graph.type_table.get(t as usize)).copied().unwrap_or(0);
                        errs.push(at, match failed {
                            Failed::Missing => format!("references of the object at {at:#x} not read: its {size} bytes are not in the dump"),
                            Failed::Description => {
                                let why = match refs.descs.get(&mt) {
                                    Some(Ok(d)) => d.offsets(u64::from(size), |_| ()).err().unwrap_or_default(),
                                    _ => String::new(),
                                };
                                format!("references of the object at {at:#x} (MethodTable {mt:#x}) not read: {why}")
                            }
                        });
                    }
                    while x < extra.len() && extra[x].0 as usize == i {
                        out.push(extra[x].1);
                        x += 1;
                    }
                    counts.push((out.len() - before) as u32);
                });
                (counts, out, errs)
            })
            .collect();
        for (counts, es, errs) in parts {
            done += counts.len();
            for (at, why) in errs.errors {
                errors.push(at, why);
            }
            errors.more += errs.more;
            if start + es.len() as u64 <= MAX_EDGES {
                // The common case, under the cap: the block's edges whole, its ends shifted.
                edges.extend_from_slice(&es);
                ends.clear();
                ends.extend(counts.iter().map(|&c| {
                    start += u64::from(c);
                    start as u32
                }));
                edge_start.extend_from_slice(&ends);
                continue;
            }
            let mut k = 0usize;
            for c in counts {
                // A graph past u32 edges keeps the first ones (said once).
                let take = (c as u64).min(MAX_EDGES.saturating_sub(start));
                if take < c as u64 && start < MAX_EDGES {
                    errors.push(0, format!("more than {MAX_EDGES} references: the rest are not in the graph"));
                }
                edges.extend_from_slice(&es[k..k + take as usize]);
                k += c as usize;
                start += take;
                edge_start.push(start as u32);
            }
        }
        crate::heap_progress::advance(done as u64);
        done = 0;
        let finished: Vec<usize> = batch.iter().filter(|u| refs.ends_segment(u)).map(|u| u.part.segment).collect();
        if !finished.is_empty() {
            for k in finished {
                refs.release(k);
            }
            crate::memory_budget::give_back_freed();
        }
    }
    // Nodes no block held (none, unless the walk's lists and the nodes disagree): no edges.
    while edge_start.len() < n + 1 {
        edge_start.push(start as u32);
    }
    edges.write_back();
    edge_start.write_back();
    g.edge_start = edge_start;
    g.edges = edges;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::dotnet::gc::walk::SegmentNodes;

    fn segment(addresses: &[u64], mt: u64, size: u32) -> SegmentNodes {
        SegmentNodes::of(addresses, vec![0; addresses.len()], vec![size; addresses.len()], vec![mt])
    }

    /// The edges come from what the walk kept of each object's references: no dump, no target
    /// at hand here. Field order and duplicates kept, null, outside and mid-object references
    /// dropped, escaped values (a heap past 32 GiB, an unaligned object) and counts (an array of
    /// 300), blocks of many objects, the dependent handle's edge after the object's own, the
    /// objects of an overlapping segment left out with their references and errors, and the
    /// errors' texts, the same in memory and in scratch files.
    #[test]
    fn edges_resolve_the_references_the_walk_kept_without_the_dump() {
        use crate::runtimes::dotnet::gc::gcdesc::GcDesc;
        use crate::runtimes::dotnet::gc::raw_refs::{RefSink, SegmentRefs, BLOCK};
        const T: u64 = 0xa0; // two fields, at 8 and 16, in 32 bytes
        const V: u64 = 0xb0; // a refused description
        const N: u64 = 0xc0; // no references
        const U: u64 = 0xd0; // a series that does not fit its objects
        const R: u64 = 0xe0; // a reference array
        let far = 0x1000 + (40u64 << 30);
        let desc = |mt: u64| match mt {
            T => Ok(GcDesc::Series(vec![(8, -16)])),
            V => Err("GC description of MethodTable 0xb0: refused".to_string()),
            N => Ok(GcDesc::None),
            U => Ok(GcDesc::Series(vec![(8, 1 << 20)])),
            _ => Ok(GcDesc::Series(vec![(16, -24)])),
        };
        let object = |fields: &[u64], size: usize| {
            let mut b = vec![0u8; size];
            for (i, f) in fields.iter().enumerate() {
                b[8 + 8 * i..16 + 8 * i].copy_from_slice(&f.to_le_bytes());
            }
            b
        };
        let mut array: Vec<u64> = vec![0; 2];
        array.extend(std::iter::repeat_n(0x1000u64, 299));
        array.push(far + 0x43);
        let array = object(&array[1..], 24 + 8 * 300);
        let d_objects = BLOCK + 4464;
        // (address, type, size, bytes: None when the dump lacks them), per segment, in walk order.
        type Obj = (u64, u64, u32, Option<Vec<u8>>);
        let mut d: Vec<Obj> = (0..d_objects as u64).map(|k| (0x10_0000 + 24 * k, N, 24, Some(vec![0; 24]))).collect();
        d[d_objects - 1] = (0x10_0000 + 24 * (d_objects as u64 - 1), T, 32, Some(object(&[0x1000, 0], 32)));
        let segments: Vec<Vec<Obj>> = vec![
            vec![(far, T, 32, None), (far + 0x20, U, 32, Some(object(&[0x1000, 0x1000], 32))), (far + 0x43, R, array.len() as u32, Some(array))],
            vec![(0x1000, T, 32, Some(object(&[0x1020, 0x1020], 32))), (0x1020, T, 32, Some(object(&[0, 0x9999_0000_0000], 32))), (0x1040, T, 32, Some(object(&[0x1000, 0x1044], 32)))],
            d,
            vec![(0x1030, T, 32, None), (0x1040, T, 32, Some(object(&[far + 0x20, far + 0x20], 32))), (0x1060, V, 32, Some(object(&[0x1000, 0x1000], 32))), (0x1080, T, 32, Some(object(&[0x1060, far], 32)))],
        ];
        let dir = tempfile::tempdir().expect("a scratch dir");
        // In memory; in files; in files with a memory budget that holds some blocks (the first
        // three segments' and the last's) but not the large segment's second block.
        let mixed = crate::scratch::ScratchDir::new(dir.path().to_path_buf(), BLOCK as u64 + 2000);
        for (place, in_files) in [(Place::Memory, 0), (Place::Files(crate::scratch::ScratchDir::new(dir.path().to_path_buf(), 0)), 5), (Place::Files(mixed), 1)] {
            let sink = RefSink::new(0x1000, far + 0x1000, &place);
            let mut walked = Vec::new();
            let mut refs = Vec::new();
            for objects in &segments {
                let mut r = SegmentRefs::default();
                let mut tables: Vec<u64> = Vec::new();
                let (mut addresses, mut types, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
                for (at, mt, size, bytes) in objects {
                    let k = tables.iter().position(|t| t == mt).unwrap_or_else(|| {
                        tables.push(*mt);
                        r.with_desc(*mt, desc(*mt))
                    });
                    r.push(&sink, k, *at, *size, |len| bytes.as_deref().filter(|b| b.len() >= len));
                    addresses.push(*at);
                    types.push(k as u32);
                    sizes.push(*size);
                }
                r.finish(&sink);
                walked.push(SegmentNodes::of(&addresses, types, sizes, tables));
                refs.push(r);
            }
            let refs = sink.into_refs(refs);
            assert_eq!(refs.blocks_in_files(), (in_files, 5), "blocks in files, of all, in {place:?}");
            let parts = refs.in_node_order(&walked);
            let (mut g, overlapped) = nodes(walked, &place);
            assert_eq!(overlapped, Overlapped { objects: 2, first: 0x1030 });
            let mut errors = GraphErrors::default();
            edges(&mut g, refs, &parts, &[(1, 4)], &mut errors);
            let last_d = 5 + d_objects as u32 - 1;
            let (f, f20, f43) = (last_d + 1, last_d + 2, last_d + 3);
            assert_eq!([g.address(4), g.address(f), g.address(f43)], [Some(0x1080), Some(far), Some(far + 0x43)]);
            let mut want: Vec<(u32, Vec<u32>)> = vec![(0, vec![1, 1]), (1, vec![4]), (2, vec![0]), (3, vec![]), (4, vec![3, f]), (last_d, vec![0]), (f, vec![]), (f20, vec![])];
            let mut big = vec![0; 299];
            big.push(f43);
            want.push((f43, big));
            for (i, w) in &want {
                assert_eq!(g.edges_of(*i), &w[..], "node {i} in {place:?}");
            }
            let with_edges = (0..g.len() as u32).filter(|&i| !g.edges_of(i).is_empty()).count();
            assert_eq!((with_edges, g.edge_start.len(), g.edges.len()), (6, g.len() + 1, 2 + 1 + 1 + 2 + 1 + 300));
            let why = GcDesc::Series(vec![(8, 1 << 20)]).offsets(32, |_| ()).expect_err("does not fit");
            assert_eq!(
                errors.errors,
                vec![
                    (V, "GC description of MethodTable 0xb0: refused; objects of this type have no references in the graph".to_string()),
                    (far, format!("references of the object at {far:#x} not read: its 32 bytes are not in the dump")),
                    (far + 0x20, format!("references of the object at {:#x} (MethodTable {U:#x}) not read: {why}", far + 0x20)),
                ]
            );
            assert_eq!(errors.more, 0);
        }
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0, "no scratch file left");
    }

    #[test]
    fn a_segments_addresses_kept_in_four_bytes_come_back_whole() {
        // Word steps, a step that is no whole word from the run's start, a gap past 32 GiB, the
        // top of memory: each starts a run where it must.
        let a = [0x1000, 0x1018, 0x1030, 0x1033, 0x103b, 0x1033 + (8 << 32), 0x1033 + (8 << 32) + 16, u64::MAX - 7];
        let n = SegmentNodes::of(&a, vec![0; a.len()], vec![24; a.len()], vec![0xa0]);
        assert_eq!(n.addresses().collect::<Vec<_>>(), a);
        assert_eq!((n.len(), n.first()), (a.len(), Some(0x1000)));
        let (g, _) = nodes(vec![n], &Place::Memory);
        assert_eq!((0..g.len() as u32).filter_map(|i| g.address(i)).collect::<Vec<_>>(), a);
    }

    #[test]
    fn a_segment_overlapping_an_earlier_one_adds_only_objects_above_it_and_counts_the_rest() {
        // A damaged segment list: the second segment starts inside the first (at its second
        // object) and runs past it; a third lies wholly inside the first.
        let first = segment(&[0x1000, 0x1018, 0x1030], 0xa0, 24);
        let second = segment(&[0x1018, 0x1030, 0x1048, 0x1060], 0xb0, 24);
        let inside = segment(&[0x1008, 0x1020], 0xc0, 16);
        let (g, overlapped) = nodes(vec![second, inside, first], &Place::Memory);
        // Segments are merged in address order: the first's objects, then the second's above
        // 0x1030; every object of `inside` is at or below an address already taken.
        let addresses: Vec<u64> = (0..g.len() as u32).filter_map(|n| g.address(n)).collect();
        assert_eq!(addresses, [0x1000, 0x1018, 0x1030, 0x1048, 0x1060]);
        let types: Vec<u64> = g.types.iter().map(|&t| g.type_table[t as usize]).collect();
        assert_eq!(types, [0xa0, 0xa0, 0xa0, 0xb0, 0xb0], "a kept object keeps its own segment's type");
        assert_eq!(g.sizes, [24; 5]);
        assert_eq!(overlapped, Overlapped { objects: 4, first: 0x1008 });
        for (n, &a) in addresses.iter().enumerate() {
            assert_eq!(g.node_of(a), Some(n as u32));
        }
        // Disjoint segments leave nothing out.
        let (g, overlapped) = nodes(vec![segment(&[0x2000, 0x2018], 0xa0, 24), segment(&[0x1000], 0xb0, 24)], &Place::Memory);
        assert_eq!((g.len(), overlapped), (3, Overlapped::default()));
    }
}
