//! What holds the heap: the object graph read with its roots, its dominator tree and retained
//! sizes ([`retained`]), each holder's root and path ([`root_tree`]), into `dotnet.heap`.
//!
//! Statics: .NET 10 keeps a class's static references in a `System.Object[]` held by a strong
//! handle (one array for many classes). Read as one root, that array would dominate every
//! static's object and be the heap's one holder; each of its elements is a static field, so
//! each is a root of its own (the array then retains only itself).

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::gc::diff::HolderByPath;
use crate::runtimes::dotnet::gc::graph::{ObjectGraph, Root, RootKind, RootSource};
use crate::runtimes::dotnet::gc::report::{attach_retention, HeapPathStepReport, HeapReport, HeapRootRef, RetentionNames, RootName, RootPlace};
use crate::runtimes::dotnet::gc::retained::{self, GraphView, Retention};
use crate::runtimes::dotnet::gc::root_tree::RootTree;
use crate::runtimes::dotnet::gc::roots::ThreadStack;
use crate::trace::step as trace;
use crate::diagnostics::Diagnostic;
use std::cell::RefCell;

/// A node's path from its root: the root and each step down to the node.
type RootPath = (HeapRootRef, Vec<HeapPathStepReport>);

/// Elements of a statics array read at most (one per static field of reference type).
const MAX_STATICS: u32 = 1 << 20;

/// The type name a statics array has.
const STATICS_ARRAY: &str = "System.Object[]";

/// The heap's retention, read.
pub(crate) struct Holding {
    pub(crate) graph: ObjectGraph,
    pub(crate) retention: Retention,
    /// Type index → name, as SOS's heap commands print it.
    pub(crate) type_names: Vec<String>,
    /// Every object's shortest path from a root.
    tree: RootTree,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// Reads the object graph of `runtime` (stack roots from `threads`; objects from an earlier
/// walk when `walked`) and its retention.
pub(crate) fn read(runtime: &Context<'_>, threads: &[ThreadStack], walked: Option<crate::runtimes::dotnet::gc::Walked>) -> Result<Holding, String> {
    of_graph(runtime, crate::runtimes::dotnet::gc::read_graph(runtime, threads, walked)?)
}

/// As [`read`], walking the heap afresh, the graph's and its readings' large arrays at `place`
/// (memory or scratch files: the answers are the same).
#[cfg(test)]
pub(crate) fn read_at(runtime: &Context<'_>, threads: &[ThreadStack], place: &crate::scratch::Place) -> Result<Holding, String> {
    of_graph(runtime, crate::runtimes::dotnet::gc::graph_ahead(runtime, None, place)?.finish(runtime, threads))
}

/// The retention of a graph read with its roots.
pub(crate) fn of_graph(runtime: &Context<'_>, reading: crate::runtimes::dotnet::gc::GraphReading) -> Result<Holding, String> {
    let g = reading.graph;
    let t = runtime.target();
    let namer = TypeNamer::of(&t, runtime);
    let type_names: Vec<String> =
        g.type_table.iter().map(|&mt| namer.heap_type_name(mt).unwrap_or_else(|_| format!("<unknown type {mt:#x}>"))).collect();
    let mut roots = retained::marking_roots(&g);
    let mut static_slots = Vec::new();
    for r in g.roots.iter().filter(|r| r.kind == RootKind::StrongHandle) {
        let is_statics = g.types.get(r.node as usize).and_then(|&ty| type_names.get(ty as usize)).is_some_and(|n| n == STATICS_ARRAY);
        if is_statics {
            // Each element's own index (the edges skip null elements): the slot names the static.
            let array = g.address(r.node).unwrap_or(0);
            let len = t.read_u32(array + 8, "statics array length").map_or(0, |n| n.min(MAX_STATICS));
            let words = t.read_bytes(array + 16, 8 * len as usize, "statics array").unwrap_or_default();
            for (i, w) in words.chunks_exact(8).enumerate() {
                let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                if let Some(e) = g.node_of(v) {
                    static_slots.push((e, r.node, i as u32));
                    roots.push(e);
                }
            }
        }
    }
    roots.sort_unstable();
    roots.dedup();
    trace("holders: names, static roots");
    let view = GraphView::of(&g, &roots, None);
    let type_count = view.type_count;
    let own = retained::own_sizes(&view).map_err(|e| format!("dominators not computed: {e}"))?;
    // Every later reading of the holders needs a size only for the few objects on their paths
    // (`paths::link` reads those from the dump): the dominator tree's first children take the
    // sizes' array (its pages touched already), then the root tree's search.
    let mut g = g;
    let sizes = std::mem::take(&mut g.sizes);
    let (retention, spare) = own.sums(&g.types, type_count, &g.place, sizes).summary(&g.types);
    trace("holders: retention");
    // Paths are read for the top holders only (the suspects are among them).
    let wanted: Vec<u32> = retention.top_holders(retained::TOP_HOLDERS).into_iter().map(|k| retention.node(k)).collect();
    let tree = RootTree::in_buffer(&g, &static_slots, spare, Some(&wanted));
    trace("holders: root tree");
    crate::heap_progress::end();
    Ok(Holding { graph: g, retention, type_names, tree, diagnostics: reading.diagnostics })
}

impl Holding {
    /// The top holders ([`crate::runtimes::dotnet::gc::retained::TOP_HOLDERS`]) by root path (for `knot heap diff`).
    pub(crate) fn holders_by_path(&self, runtime: &Context<'_>) -> Vec<HolderByPath> {
        use crate::runtimes::dotnet::gc::root_tree::RootOf;
        let g = &self.graph;
        let tree = &self.tree;
        let t = runtime.target();
        let namer = TypeNamer::of(&t, runtime);
        let layout = crate::runtimes::dotnet::gc::build_facts(runtime).ok().map(|b| b.layout);
        let statics = std::cell::OnceCell::new();
        let node_type = |n: u32| self.type_name(g.types.get(n as usize).copied().unwrap_or(u32::MAX));
        self.retention
            .top_holders(crate::runtimes::dotnet::gc::retained::TOP_HOLDERS)
            .into_iter()
            .filter_map(|k| {
                let node = self.retention.node(k);
                let (root, nodes) = tree.path(g, node)?;
                let root = match root {
                    RootOf::StaticSlot { array, index } => {
                        let slot = g.address(array).unwrap_or(0) + 16 + 8 * u64::from(index);
                        let names = statics.get_or_init(|| layout.as_ref().map(|l| crate::runtimes::dotnet::gc::static_names::static_slots(&t, &namer, l, g)).unwrap_or_default());
                        match names.get(&slot) {
                            Some(s) => format!("static {}.{}", s.class, s.field),
                            None => format!("static slot [{index}]"),
                        }
                    }
                    RootOf::Root(r) => r.kind.name().0.to_string(),
                };
                let path = nodes
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        let ty = node_type(n);
                        match (nodes.get(i + 1), &layout) {
                            (Some(&next), Some(l)) => match crate::runtimes::dotnet::gc::paths::link(&t, &namer, l, g, n, next) {
                                crate::runtimes::dotnet::gc::paths::Link::Field(f) => format!("{ty}.{f}"),
                                crate::runtimes::dotnet::gc::paths::Link::Element(_) => format!("{ty}[]"),
                                crate::runtimes::dotnet::gc::paths::Link::Dependent => format!("{ty} (dependent handle)"),
                            },
                            _ => ty,
                        }
                    })
                    .collect();
                Some(HolderByPath { root, path, type_name: node_type(node), retained: self.retention.retained(k) })
            })
            .collect()
    }

    /// Retained bytes by type name (for `knot heap diff`).
    pub(crate) fn retained_by_type(&self) -> std::collections::BTreeMap<String, u64> {
        let mut out = std::collections::BTreeMap::new();
        for t in &self.retention.by_type {
            *out.entry(self.type_name(t.type_index)).or_insert(0) += t.retained;
        }
        out
    }

    fn type_name(&self, i: u32) -> String {
        self.type_names.get(i as usize).cloned().unwrap_or_else(|| "<no type>".into())
    }

    /// Fills `heap`'s retained fields; paths name fields through `runtime`.
    pub(crate) fn attach(&self, runtime: &Context<'_>, heap: &mut HeapReport) {
        let g = &self.graph;
        let tree = &self.tree;
        let t = runtime.target();
        let namer = TypeNamer::of(&t, runtime);
        let layout = crate::runtimes::dotnet::contract::facts::builtin()
            .ok()
            .and_then(|all| crate::runtimes::dotnet::contract::facts::lookup(all, runtime.version.build_id.as_deref(), &runtime.version.product, runtime.version.file_version.as_deref()))
            .map(|b| b.layout);
        // Read once, when a holder's root is a statics array's element.
        let static_names = std::cell::OnceCell::new();
        let cache: RefCell<std::collections::HashMap<u32, Option<RootPath>>> = RefCell::default();
        let type_name = |i: u32| self.type_name(i);
        let root_path = |node: u32| -> Option<RootPath> {
            if let Some(hit) = cache.borrow().get(&node) {
                return hit.clone();
            }
            let found = tree.path(g, node).map(|(root, nodes)| {
                let steps = nodes
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| HeapPathStepReport {
                        address: crate::hex::Hex(g.address(n).unwrap_or(0)),
                        type_name: self.type_name(g.types.get(n as usize).copied().unwrap_or(u32::MAX)),
                        field: match (nodes.get(i + 1), &layout) {
                            (Some(&next), Some(l)) => Some(match crate::runtimes::dotnet::gc::paths::link(&t, &namer, l, g, n, next) {
                                crate::runtimes::dotnet::gc::paths::Link::Field(f) => f,
                                crate::runtimes::dotnet::gc::paths::Link::Element(i) => format!("[{i}]"),
                                crate::runtimes::dotnet::gc::paths::Link::Dependent => "(dependent handle)".into(),
                            }),
                            _ => None,
                        },
                    })
                    .collect();
                (root_ref(g, root, &|slot| static_names.get_or_init(|| layout.as_ref().map(|l| crate::runtimes::dotnet::gc::static_names::static_slots(&t, &namer, l, g)).unwrap_or_default()).get(&slot).cloned()), steps)
            });
            cache.borrow_mut().insert(node, found.clone());
            found
        };
        attach_retention(heap, g, &self.retention, &RetentionNames { type_name: &type_name, root_path: &root_path });
        trace("holders: attached");
    }
}

/// A root's kind as `knot heap root` names kinds, and the root for people.
/// `static_field` names the static a statics array's slot (by address) is.
fn root_ref(g: &ObjectGraph, root: crate::runtimes::dotnet::gc::root_tree::RootOf<'_>, static_field: &dyn Fn(u64) -> Option<crate::runtimes::dotnet::gc::static_names::StaticName>) -> HeapRootRef {
    use crate::runtimes::dotnet::gc::root_tree::RootOf;
    match root {
        RootOf::StaticSlot { array, index } => {
            let array = g.address(array).unwrap_or(0);
            // A reference array's element k is at 16 + 8k.
            let name = match static_field(array + 16 + 8 * u64::from(index)) {
                Some(s) => RootName::StaticField { class: s.class, field: s.field },
                None => RootName::StaticSlot { array, index },
            };
            HeapRootRef { kind: "static".into(), name }
        }
        RootOf::Root(r) => {
            let (kind, conservative) = r.kind.name();
            HeapRootRef { kind: kind.to_string(), name: RootName::Root { kind, conservative, place: detail(r) } }
        }
    }
}


/// Where the root is, as facts for the words: (handle or slot address, thread).
fn detail(r: &Root) -> RootPlace {
    match &r.source {
        RootSource::Handle { handle } | RootSource::Static { handle, .. } => RootPlace::Handle(*handle),
        RootSource::Stack { os_tid, slot, register, .. } => RootPlace::Thread { os_tid: *os_tid, slot: *slot, register: *register },
        RootSource::FinalizerQueue { slot } => RootPlace::Queue(*slot),
        RootSource::SyncBlock { index } => RootPlace::SyncBlock(*index),
    }
}
