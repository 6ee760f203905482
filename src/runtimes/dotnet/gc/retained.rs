//! What each object keeps alive: the dominator tree of the object graph (from a virtual root
//! joined to every root the GC marks from), each object's retained bytes (its own plus those of
//! every object it dominates: one pass in reverse preorder), retained bytes by type as MAT's
//! "dominator tree grouped by class" gives them, the top holders, and each large holder's
//! accumulation point (where its bulk spreads over many children). Objects no root reaches are
//! garbage the GC has not collected yet: counted apart, never in a retained size.

use crate::runtimes::dotnet::gc::graph::{ObjectGraph, RootKind};
use crate::graph::dominators::{self, DominatorError, DominatorTree, VIRTUAL_ROOT};
use crate::scratch::{Place, ScratchVec};

/// A holder retaining this share of the heap (percent) is a leak suspect.
pub(crate) const SUSPECT_PERCENT: u64 = 10;
/// The accumulation point is reached where no child holds this share (percent) of its parent's
/// retained bytes.
const ACCUMULATION_PERCENT: u64 = 80;
/// Top holders kept (`dotnet.heap.dominators`).
pub(crate) const TOP_HOLDERS: usize = 20;
/// The icicle's bounds: a node must retain this share of the reachable heap (percent), the tree
/// is cut this deep, and at this many nodes.
const ICICLE_MIN_SHARE: f64 = 0.2;
const ICICLE_DEPTH: u32 = 8;
const ICICLE_NODES: usize = 400;

/// The object graph as this reading needs it (node-indexed; see `gc::graph`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GraphView<'a> {
    /// CSR: node i's references are `edges[edge_start[i]..edge_start[i + 1]]`.
    pub(crate) edge_start: &'a [u32],
    pub(crate) edges: &'a [u32],
    /// Node i's size as SOS reports it.
    pub(crate) sizes: &'a [u32],
    /// Node i's type (an index below `type_count`).
    pub(crate) types: &'a [u32],
    pub(crate) type_count: usize,
    /// The nodes the GC marks from (duplicates allowed).
    pub(crate) roots: &'a [u32],
    /// The type of free objects, when they are nodes: neither garbage nor retained.
    pub(crate) free_type: Option<u32>,
    /// Where the dominator tree's and the sums' arrays live.
    pub(crate) place: &'a Place,
}

impl<'a> GraphView<'a> {
    /// The view of an object graph; `roots` from [`marking_roots`].
    pub(crate) fn of(g: &'a ObjectGraph, roots: &'a [u32], free_type: Option<u32>) -> GraphView<'a> {
        GraphView { edge_start: &g.edge_start, edges: &g.edges, sizes: &g.sizes, types: &g.types, type_count: g.type_table.len(), roots, free_type, place: &g.place }
    }
}

/// The nodes the GC marks from: every root but a sync block's (the GC does not mark from sync
/// blocks) and a dependent handle's secondary (held only while its primary is: that is an edge).
pub(crate) fn marking_roots(g: &ObjectGraph) -> Vec<u32> {
    let mut roots: Vec<u32> = g.roots.iter().filter(|r| !matches!(r.kind, RootKind::SyncBlock | RootKind::DependentHandle)).map(|r| r.node).filter(|&n| (n as usize) < g.len()).collect();
    roots.sort_unstable();
    roots.dedup();
    roots
}

/// Retained bytes of one type: its objects that no object of the same type dominates, their
/// count and the sum of their retained sizes (so nested objects of one type count once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypeRetention {
    pub(crate) type_index: u32,
    pub(crate) count: u64,
    pub(crate) retained: u64,
}

/// Where a holder's bulk accumulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Accumulation {
    /// The object (preorder number) whose children hold the bulk.
    pub(crate) point: u32,
    /// Its children in the dominator tree.
    pub(crate) children: u64,
    /// The type whose children retain most, their count and retained bytes.
    pub(crate) child_type: u32,
    pub(crate) child_type_count: u64,
    pub(crate) child_type_retained: u64,
}

impl Accumulation {
    /// Whether the point has children (and so a child type).
    pub(crate) fn child_count_known(&self) -> bool {
        self.child_type_count > 0
    }
}

/// The dominator tree and the sizes it gives, for every reachable node: what [`Retention`] is
/// read from, then dropped (20 bytes a node).
#[derive(Debug, Clone)]
pub(crate) struct Sums {
    /// Preorder number → node; `[0]` stands for the virtual root.
    order: ScratchVec<u32>,
    /// Preorder number → retained bytes; `[0]`, the virtual root, is every reachable object's.
    pub(crate) retained: ScratchVec<u64>,
    /// The dominator tree as first child and next sibling (preorder numbers, `u32::MAX`: none),
    /// children in increasing preorder: built in place of the immediate dominators, in the pass
    /// that sums the retained sizes.
    first_child: ScratchVec<u32>,
    next_sibling: ScratchVec<u32>,
    #[allow(dead_code)] // the tests' check of the count
    pub(crate) reachable_objects: u64,
    /// Objects no root reaches (free objects left out), and their bytes.
    pub(crate) unreachable_objects: u64,
    pub(crate) unreachable_bytes: u64,
    /// By type, largest retained first (ties by type index).
    pub(crate) by_type: Vec<TypeRetention>,
    /// Types below this are the graph's (a type table's index).
    type_count: usize,
}

/// No node (a first child or next sibling).
const NONE: u32 = u32::MAX;

/// Reads the dominator tree of `g` and the retained sizes, and keeps what the readings name.
#[cfg(test)]
pub(crate) fn retention(g: &GraphView<'_>) -> Result<Retention, DominatorError> {
    sums(g).map(|s| s.summary(g.types).0)
}

/// The dominator tree of `g` and every node's retained size.
#[cfg(test)]
pub(crate) fn sums(g: &GraphView<'_>) -> Result<Sums, DominatorError> {
    own_sizes(g).map(|own| own.sums(g.types, g.type_count, g.place, ScratchVec::new(g.place)))
}

/// The dominator tree with every reachable node's own size: the part of [`sums`] that reads the
/// sizes, so that the caller may hand their array to [`Own::sums`] as its buffer afterwards.
pub(crate) struct Own {
    order: ScratchVec<u32>,
    idom: ScratchVec<u32>,
    /// Preorder number → own size (`[0]`: 0).
    retained: ScratchVec<u64>,
    unreachable_objects: u64,
    unreachable_bytes: u64,
}

/// The first half of [`sums`]: the dominator tree and the own sizes, and what no root reaches.
pub(crate) fn own_sizes(g: &GraphView<'_>) -> Result<Own, DominatorError> {
    let (DominatorTree { order, idom }, spare) = dominators::dominators_and_spare(g.edge_start, g.edges, g.roots, g.place)?;
    let size = |v: usize| g.sizes.get(v).copied().unwrap_or(0) as u64;
    // Whether node v is a free object (no type read when no type is free's: the usual case).
    let free = |v: usize| g.free_type.is_some_and(|f| g.types.get(v).copied().unwrap_or(u32::MAX) == f);

    // Own sizes; what the roots reach, free objects aside (the rest of the heap is garbage).
    let (mut reached_objects, mut reached_bytes) = (0u64, 0u64);
    let mut retained = spare;
    retained.push(0);
    for &v in order.iter().skip(1) {
        let s = size(v as usize);
        if !free(v as usize) {
            reached_objects += 1;
            reached_bytes += s;
        }
        retained.push(s);
    }
    let (mut all_objects, mut all_bytes) = (0u64, 0u64);
    for (v, &s) in g.sizes.iter().enumerate() {
        if !free(v) {
            all_objects += 1;
            all_bytes += u64::from(s);
        }
    }
    Ok(Own { order, idom, retained, unreachable_objects: all_objects.saturating_sub(reached_objects), unreachable_bytes: all_bytes.saturating_sub(reached_bytes) })
}

impl Own {
    /// The second half of [`sums`]: the retained sizes and the tree's children, by type.
    /// `buffer` (an array the caller no longer needs, such as the sizes once read: its pages
    /// are touched already) holds the first children when it is long enough.
    pub(crate) fn sums(self, types: &[u32], type_count: usize, place: &Place, buffer: ScratchVec<u32>) -> Sums {
        let Own { order, idom, mut retained, unreachable_objects, unreachable_bytes } = self;
        let count = order.len();
        // One pass in reverse preorder (every node before its dominator): each node's sum added
        // to its dominator's, and the node hung first under it, its immediate dominator's slot
        // taking its next sibling.
        crate::heap_progress::start(crate::heap_progress::HeapStep::RetainedSizes, count as u64);
        let mut first_child = if buffer.len() >= count { buffer } else { ScratchVec::hot(place, count) };
        first_child.clear();
        first_child.resize(count, NONE);
        let mut next_sibling = idom;
        for k in (1..count).rev() {
            if k & ((1 << 20) - 1) == 0 {
                crate::heap_progress::advance(1 << 20);
            }
            let d = next_sibling[k] as usize;
            retained[d] = retained[d].saturating_add(retained[k]);
            next_sibling[k] = first_child[d];
            first_child[d] = k as u32;
        }
        if let Some(s) = next_sibling.first_mut() {
            *s = NONE;
        }

        let mut r = Sums { reachable_objects: (count - 1) as u64, order, retained, first_child, next_sibling, unreachable_objects, unreachable_bytes, by_type: Vec::new(), type_count };
        r.by_type = r.by_type(types, type_count);
        r
    }
}

impl Sums {
    /// MAT's grouping by class: a depth-first walk of the dominator tree keeping, per type, how
    /// many of the current object's dominators are of that type; an object counts for its type
    /// only when none is.
    fn by_type(&self, types: &[u32], type_count: usize) -> Vec<TypeRetention> {
        let mut open = vec![0u32; type_count];
        let mut sums: Vec<(u64, u64)> = vec![(0, 0); type_count];
        // Node k's type as an index of `open` (`NONE`: none, or past the table).
        let ty = |k: usize| types.get(self.order[k] as usize).copied().filter(|&t| (t as usize) < type_count).unwrap_or(NONE);
        // The path from the virtual root's child being walked down to `k`'s parent, each with
        // its type. A node without children (most of a heap) goes on it never: it is counted
        // and left in one step.
        let mut path: Vec<(u32, u32)> = Vec::new();
        let mut k = self.first_child.first().copied().unwrap_or(NONE);
        loop {
            if k == NONE {
                let Some((up, t)) = path.pop() else { break };
                if let Some(o) = open.get_mut(t as usize) {
                    *o -= 1;
                }
                k = self.next_sibling[up as usize];
                continue;
            }
            let at = k as usize;
            let t = ty(at);
            if open.get(t as usize) == Some(&0) {
                let s = &mut sums[t as usize];
                s.0 += 1;
                s.1 = s.1.saturating_add(self.retained[at]);
            }
            let child = self.first_child[at];
            if child == NONE {
                k = self.next_sibling[at];
                continue;
            }
            if let Some(o) = open.get_mut(t as usize) {
                *o += 1;
            }
            path.push((k, t));
            k = child;
        }
        let mut out: Vec<TypeRetention> =
            sums.into_iter().enumerate().filter(|(_, s)| s.0 > 0).map(|(t, (count, retained))| TypeRetention { type_index: t as u32, count, retained }).collect();
        out.sort_by(|a, b| b.retained.cmp(&a.retained).then(a.type_index.cmp(&b.type_index)));
        out
    }

    /// The children of `k` in the dominator tree (preorder numbers, increasing).
    fn children_of(&self, k: u32) -> impl Iterator<Item = u32> + '_ {
        let first = self.first_child.get(k as usize).copied().unwrap_or(NONE);
        std::iter::successors(Some(first).filter(|&c| c != NONE), move |&c| self.next_sibling.get(c as usize).copied().filter(|&s| s != NONE))
    }

    /// The `max` objects that only the virtual root dominates, largest retained first (ties by
    /// preorder): the heap's top holders.
    fn top_holders(&self, max: usize) -> Vec<u32> {
        let mut top: Vec<u32> = self.children_of(VIRTUAL_ROOT).collect();
        top.sort_by(|&a, &b| self.retained[b as usize].cmp(&self.retained[a as usize]).then(a.cmp(&b)));
        top.truncate(max);
        top
    }

    /// From `holder`, down the dominator tree while one child retains most of its parent's
    /// bytes; there, the children's largest type.
    fn accumulation(&self, holder: u32, scans: &mut Scans<'_>) -> Accumulation {
        let mut k = holder;
        // Each step goes one level down a finite tree.
        while let Some(best) = scans.get(k).best {
            if self.retained[best as usize].saturating_mul(100) < self.retained[k as usize].saturating_mul(ACCUMULATION_PERCENT) {
                break;
            }
            k = best;
        }
        let at = scans.get(k);
        let (child_type, child_type_count, child_type_retained) = at.top_type.unwrap_or((u32::MAX, 0, 0));
        Accumulation { point: k, children: at.children, child_type, child_type_count, child_type_retained }
    }

    /// The top of the dominator tree in preorder (a parent before its children, largest child
    /// first): the holders and every descendant retaining at least `scans`' share of the
    /// reachable heap, at most `max_depth` levels and `max_nodes` nodes. (preorder number,
    /// index of the parent in the list, depth)
    fn top_of_tree(&self, scans: &mut Scans<'_>, max_depth: u32, max_nodes: usize) -> Vec<IcicleNode> {
        preorder_top(&self.retained, |k| scans.get(k).big.clone(), max_depth, max_nodes)
    }

    /// Node → preorder number (`u32::MAX`: not reachable).
    #[cfg(test)]
    pub(crate) fn numbers(&self, nodes: usize) -> Vec<u32> {
        dominators::numbers(&self.order, nodes)
    }

    /// What the readings name — the top holders, the suspects' accumulation points, the
    /// icicle's nodes — with their nodes and retained sizes; the per-node arrays are dropped
    /// but the first children's, given back empty (its pages touched: for the caller's next
    /// array of u32).
    pub(crate) fn summary(self, types: &[u32]) -> (Retention, ScratchVec<u32>) {
        let top = self.top_holders(TOP_HOLDERS);
        let mut scans = Scans::new(&self, types, ICICLE_MIN_SHARE);
        let tree_top = self.top_of_tree(&mut scans, ICICLE_DEPTH, ICICLE_NODES);
        let mut r = Retention {
            reachable_bytes: self.retained[0],
            reachable_objects: self.reachable_objects,
            unreachable_objects: self.unreachable_objects,
            unreachable_bytes: self.unreachable_bytes,
            by_type: Vec::new(),
            kept: rustc_hash::FxHashMap::default(),
            top,
            accumulations: Vec::new(),
            tree_top,
        };
        r.accumulations = r.suspects_of(|k| self.retained[k as usize]).into_iter().map(|k| (k, self.accumulation(k, &mut scans))).collect();
        drop(scans);
        let named = r.top.iter().copied().chain(r.accumulations.iter().map(|a| a.1.point)).chain(r.tree_top.iter().map(|t| t.0));
        let kept: rustc_hash::FxHashMap<u32, (u32, u64)> = named.map(|k| (k, (self.order[k as usize], self.retained[k as usize]))).collect();
        r.kept = kept;
        r.by_type = self.by_type;
        let mut spare = self.first_child;
        spare.clear();
        (r, spare)
    }
}

/// One node of the icicle in preorder: the node, its parent's index in the preorder, its depth.
type IcicleNode = (u32, Option<usize>, u32);

/// The dominator tree from the virtual root in preorder, largest child first (ties: the lower
/// preorder number), going down only to the children `kids` gives, at most `max_depth` levels
/// and `max_nodes` nodes: (preorder number, index of the parent in the list, depth).
fn preorder_top(retained: &[u64], mut kids: impl FnMut(u32) -> Vec<u32>, max_depth: u32, max_nodes: usize) -> Vec<IcicleNode> {
    let mut sorted = |k: u32| {
        let mut kids = kids(k);
        kids.sort_by(|&a, &b| retained[b as usize].cmp(&retained[a as usize]).then(a.cmp(&b)));
        kids
    };
    let mut out: Vec<IcicleNode> = Vec::new();
    // (node, parent's index, depth), pushed in reverse so the largest comes out first.
    let mut stack: Vec<IcicleNode> = sorted(VIRTUAL_ROOT).into_iter().rev().map(|k| (k, None, 0)).collect();
    while let Some((k, parent, depth)) = stack.pop() {
        if out.len() >= max_nodes {
            break;
        }
        out.push((k, parent, depth));
        if depth + 1 < max_depth {
            let me = out.len() - 1;
            stack.extend(sorted(k).into_iter().rev().map(|c| (c, Some(me), depth + 1)));
        }
    }
    out
}

/// One pass over a node's children in the dominator tree: what the summary's readings need of
/// them (a node with millions of children, such as a large array's, is read once for all).
struct Scan {
    children: u64,
    /// The child retaining most (the last of equals: children go in increasing preorder).
    best: Option<u32>,
    /// The children retaining at least the icicle's share of the reachable heap, in increasing
    /// preorder.
    big: Vec<u32>,
    /// The children's type retaining most (ties: the lower type index): type, count, retained.
    top_type: Option<(u32, u64, u64)>,
}

/// Each node's [`Scan`], read when first asked for.
struct Scans<'s> {
    sums: &'s Sums,
    types: &'s [u32],
    /// The reachable heap's bytes (at least 1) and the share (percent) a big child retains.
    total: f64,
    min_share: f64,
    done: rustc_hash::FxHashMap<u32, Scan>,
    /// Per type index below the type count: the children's count and retained bytes; the
    /// types touched, to clear; other type values (none, past the table) apart.
    by: Vec<(u64, u64)>,
    touched: Vec<u32>,
    other: rustc_hash::FxHashMap<u32, (u64, u64)>,
}

impl<'s> Scans<'s> {
    fn new(sums: &'s Sums, types: &'s [u32], min_share: f64) -> Scans<'s> {
        let total = sums.retained.first().copied().unwrap_or(0).max(1) as f64;
        Scans { sums, types, total, min_share, done: Default::default(), by: vec![(0, 0); sums.type_count], touched: Vec::new(), other: Default::default() }
    }

    fn get(&mut self, k: u32) -> &Scan {
        if !self.done.contains_key(&k) {
            let scan = self.scan(k);
            self.done.insert(k, scan);
        }
        &self.done[&k]
    }

    fn scan(&mut self, k: u32) -> Scan {
        let s = self.sums;
        let (mut children, mut best, mut best_retained, mut big) = (0u64, None, 0u64, Vec::new());
        for c in s.children_of(k) {
            let r = s.retained[c as usize];
            children += 1;
            if best.is_none() || r >= best_retained {
                (best, best_retained) = (Some(c), r);
            }
            if r as f64 * 100.0 / self.total >= self.min_share {
                big.push(c);
            }
            let t = self.types.get(s.order[c as usize] as usize).copied().unwrap_or(u32::MAX);
            let e = match self.by.get_mut(t as usize) {
                Some(e) => {
                    if e.0 == 0 {
                        self.touched.push(t);
                    }
                    e
                }
                None => self.other.entry(t).or_default(),
            };
            e.0 += 1;
            e.1 = e.1.saturating_add(r);
        }
        let mut top_type: Option<(u32, u64, u64)> = None;
        let tallies = self.touched.drain(..).map(|t| (t, std::mem::take(&mut self.by[t as usize]))).chain(self.other.drain());
        for (t, (count, retained)) in tallies {
            if top_type.is_none_or(|(bt, _, br)| retained > br || (retained == br && t < bt)) {
                top_type = Some((t, count, retained));
            }
        }
        Scan { children, best, big, top_type }
    }
}

/// The retention as the readings use it: totals, by type, and the few nodes they name.
#[derive(Debug, Clone)]
pub(crate) struct Retention {
    /// Every reachable object's bytes (the virtual root's retained size).
    reachable_bytes: u64,
    #[allow(dead_code)] // the tests' check of the count
    pub(crate) reachable_objects: u64,
    /// Objects no root reaches (free objects left out), and their bytes.
    pub(crate) unreachable_objects: u64,
    pub(crate) unreachable_bytes: u64,
    /// By type, largest retained first (ties by type index).
    pub(crate) by_type: Vec<TypeRetention>,
    /// Preorder number → (node, retained bytes) of every number below.
    kept: rustc_hash::FxHashMap<u32, (u32, u64)>,
    /// The [`TOP_HOLDERS`] top holders, largest retained first (ties by preorder).
    top: Vec<u32>,
    /// Each suspect's accumulation.
    accumulations: Vec<(u32, Accumulation)>,
    /// [`Sums::top_of_tree`] within the icicle's bounds.
    tree_top: Vec<IcicleNode>,
}

impl Retention {
    /// The retained bytes of preorder number `k` (one the retention names; 0: everything
    /// reachable).
    pub(crate) fn retained(&self, k: u32) -> u64 {
        if k == VIRTUAL_ROOT {
            return self.reachable_bytes;
        }
        self.kept.get(&k).map_or(0, |e| e.1)
    }

    /// The node (graph index) of preorder number `k` (one the retention names).
    pub(crate) fn node(&self, k: u32) -> u32 {
        self.kept.get(&k).map_or(u32::MAX, |e| e.0)
    }

    /// Bytes of every object on the heap, garbage included, free objects not.
    pub(crate) fn heap_bytes(&self) -> u64 {
        self.reachable_bytes.saturating_add(self.unreachable_bytes)
    }

    /// The `max` (at most [`TOP_HOLDERS`]) objects that only the virtual root dominates,
    /// largest retained first (ties by preorder): the heap's top holders.
    pub(crate) fn top_holders(&self, max: usize) -> Vec<u32> {
        self.top.iter().copied().take(max).collect()
    }

    fn suspects_of(&self, retained: impl Fn(u32) -> u64) -> Vec<u32> {
        let heap = self.heap_bytes();
        self.top.iter().copied().filter(|&k| heap > 0 && retained(k).saturating_mul(100) >= heap.saturating_mul(SUSPECT_PERCENT)).collect()
    }

    /// The top holders retaining at least [`SUSPECT_PERCENT`] of the heap.
    pub(crate) fn suspects(&self) -> Vec<u32> {
        self.suspects_of(|k| self.retained(k))
    }

    /// Where a suspect's bulk accumulates (see [`Sums::accumulation`]); a holder that is no
    /// suspect has none read (itself, no children).
    pub(crate) fn accumulation(&self, holder: u32) -> Accumulation {
        self.accumulations.iter().find(|a| a.0 == holder).map_or(Accumulation { point: holder, children: 0, child_type: u32::MAX, child_type_count: 0, child_type_retained: 0 }, |a| a.1)
    }

    /// The top of the dominator tree in preorder (a parent before its children, largest child
    /// first), as [`Sums::top_of_tree`] gives it within the icicle's bounds: (preorder number,
    /// index of the parent in the list, depth).
    pub(crate) fn top_of_tree(&self) -> &[(u32, Option<usize>, u32)] {
        &self.tree_top
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo test --release --lib scale_on_heap_like_graphs -- --ignored --nocapture`: the
    /// dominators, retained sizes and by-type sums of the dominator module's heap-shaped graphs
    /// (KNOT_DOM_NODES nodes, default 10 M; sizes and types counted as the graph's): time and the
    /// memory they add to the graph's, beside `graph::dominators`' `scale_against_petgraph`.
    #[test]
    #[ignore]
    fn scale_on_heap_like_graphs() {
        use crate::graph::dominators::tests::{cpu_secs, heap_like, peak_kib, rss_kib};
        let n = std::env::var("KNOT_DOM_NODES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000_000u32);
        let (s, t, roots) = heap_like(n);
        let sizes: Vec<u32> = (0..n).map(|i| 16 + (i % 7) * 8).collect();
        let types: Vec<u32> = (0..n).map(|i| (i * 2_654_435_761u32) >> 22).collect();
        let base = rss_kib();
        peak_kib(true);
        let (t0, c0) = (std::time::Instant::now(), cpu_secs());
        let view = GraphView { edge_start: &s, edges: &t, sizes: &sizes, types: &types, type_count: 1024, roots: &roots, free_type: None, place: &Place::Memory };
        let r = retention(&view).expect("valid");
        assert!(!r.by_type.is_empty());
        let (secs, cpu) = (t0.elapsed().as_secs_f64(), cpu_secs() - c0);
        let extra = peak_kib(false).saturating_sub(base);
        eprintln!("retention: {n} nodes, {} edges, {} reachable: {secs:.2} s ({cpu:.2} s on a CPU), peak +{:.0} MiB = {:.1} bytes/node beyond the graph", t.len(), r.reachable_objects, extra as f64 / 1024.0, extra as f64 * 1024.0 / n as f64);
    }

    struct Built {
        start: Vec<u32>,
        edges: Vec<u32>,
        sizes: Vec<u32>,
        types: Vec<u32>,
    }

    fn build(nodes: &[(u32, u32)], edges: &[(u32, u32)]) -> Built {
        let (start, targets) = crate::graph::dominators::csr(nodes.len(), edges);
        Built { start, edges: targets, sizes: nodes.iter().map(|n| n.1).collect(), types: nodes.iter().map(|n| n.0).collect() }
    }

    fn view<'a>(b: &'a Built, roots: &'a [u32], type_count: usize, free: Option<u32>) -> GraphView<'a> {
        GraphView { edge_start: &b.start, edges: &b.edges, sizes: &b.sizes, types: &b.types, type_count, roots, free_type: free, place: &Place::Memory }
    }

    /// Types: 0 Dictionary, 1 Entry[], 2 Session, 3 byte[], 4 Free, 5 Junk.
    /// A cache: dict(0) → entries(1) → sessions 2..5, each → its payload 6..9; a session 2 is
    /// also held by a second root (10, type Junk); free object 11; garbage 12 → 13.
    fn cache() -> Built {
        let nodes = [
            (0, 80), (1, 200), (2, 48), (2, 48), (2, 48), (2, 48), (3, 1024), (3, 1024), (3, 1024), (3, 1024), (5, 32), (4, 500), (5, 32), (5, 32),
        ];
        let edges = [(0, 1), (1, 2), (1, 3), (1, 4), (1, 5), (2, 6), (3, 7), (4, 8), (5, 9), (10, 2), (12, 13)];
        build(&nodes, &edges)
    }

    #[test]
    fn retained_sizes_sum_the_dominator_subtree() {
        let b = cache();
        let r = sums(&view(&b, &[0, 10], 6, Some(4))).unwrap();
        let num = r.numbers(b.sizes.len());
        let ret = |v: usize| r.retained[num[v] as usize];
        // Session 2 is reached from the dict and from node 10: neither retains it.
        assert_eq!(ret(0), 80 + 200 + 3 * (48 + 1024));
        assert_eq!(ret(1), 200 + 3 * (48 + 1024));
        assert_eq!(ret(2), 48 + 1024);
        assert_eq!(ret(10), 32);
        assert_eq!(r.retained[0], 80 + 200 + 4 * (48 + 1024) + 32);
        assert_eq!((r.unreachable_objects, r.unreachable_bytes), (2, 64));
        assert_eq!(r.reachable_objects, 11);
        let summary = r.summary(&b.types).0;
        assert_eq!(summary.heap_bytes(), summary.retained(0) + 64);
        assert_eq!(summary.retained(0), 80 + 200 + 4 * (48 + 1024) + 32);
    }

    #[test]
    fn by_type_counts_nested_objects_of_one_type_once() {
        // A linked list of 3 nodes of type 0 (sizes 10 each) holding a type-1 object each.
        let b = build(&[(0, 10), (0, 10), (0, 10), (1, 5), (1, 5), (1, 5)], &[(0, 1), (1, 2), (0, 3), (1, 4), (2, 5)]);
        let r = retention(&view(&b, &[0], 2, None)).unwrap();
        assert_eq!(r.by_type, vec![TypeRetention { type_index: 0, count: 1, retained: 45 }, TypeRetention { type_index: 1, count: 3, retained: 15 }]);
    }

    #[test]
    fn the_cache_is_the_suspect_and_its_entries_the_accumulation_point() {
        let b = cache();
        let r = retention(&view(&b, &[0, 10], 6, Some(4))).unwrap();
        let num = sums(&view(&b, &[0, 10], 6, Some(4))).unwrap().numbers(b.sizes.len());
        let top = r.top_holders(TOP_HOLDERS);
        assert_eq!(top.iter().map(|&k| r.node(k)).collect::<Vec<_>>(), vec![0, 2, 10]);
        let suspects = r.suspects();
        assert_eq!(suspects.iter().map(|&k| r.node(k)).collect::<Vec<_>>(), vec![0, 2]);
        let a = r.accumulation(num[0]);
        assert_eq!(r.retained(num[0]), 80 + 200 + 3 * (48 + 1024));
        assert_eq!(r.top_of_tree().iter().map(|&(k, parent, depth)| (r.node(k), parent, depth)).collect::<Vec<_>>()[..3], [(0, None, 0), (1, Some(0), 1), (3, Some(1), 2)]);
        assert_eq!(r.node(a.point), 1);
        assert_eq!((a.children, a.child_type, a.child_type_count, a.child_type_retained), (3, 2, 3, 3 * 1072));
    }

    #[test]
    fn a_tree_retains_what_it_reaches() {
        // A complete binary tree of depth 4 (15 nodes), each with its own leaf array.
        let mut nodes = Vec::new();
        let mut edges = Vec::new();
        nodes.extend([(0, 40); 15]);
        for i in 0..15u32 {
            nodes.push((1, 88));
            edges.push((i, 15 + i));
            if 2 * i + 2 < 15 {
                edges.push((i, 2 * i + 1));
                edges.push((i, 2 * i + 2));
            }
        }
        let b = build(&nodes, &edges);
        let r = sums(&view(&b, &[0], 2, None)).unwrap();
        assert_eq!(r.retained[r.numbers(30)[0] as usize], 15 * 128);
        assert_eq!(r.by_type[0], TypeRetention { type_index: 0, count: 1, retained: 15 * 128 });
    }

    /// The summary's readings as plainly as they can be read (each child list walked afresh,
    /// types tallied in a map): what the one scan per node must equal. The icicle's preorder is
    /// the summary's own ([`preorder_top`]); the children it goes down to are read here.
    fn plain_summary(r: &Sums, types: &[u32]) -> (Vec<IcicleNode>, Vec<(u32, Accumulation)>) {
        let total = r.retained[0].max(1) as f64;
        let big = |k: u32| r.children_of(k).filter(|&c| r.retained[c as usize] as f64 * 100.0 / total >= ICICLE_MIN_SHARE).collect();
        let tree = preorder_top(&r.retained, big, ICICLE_DEPTH, ICICLE_NODES);
        let heap = r.retained[0] + r.unreachable_bytes;
        let acc = r
            .top_holders(TOP_HOLDERS)
            .into_iter()
            .filter(|&k| heap > 0 && r.retained[k as usize] * 100 >= heap * SUSPECT_PERCENT)
            .map(|holder| {
                let mut k = holder;
                while let Some(best) = r.children_of(k).max_by_key(|&c| r.retained[c as usize]) {
                    if r.retained[best as usize] * 100 < r.retained[k as usize] * ACCUMULATION_PERCENT {
                        break;
                    }
                    k = best;
                }
                let mut by: std::collections::HashMap<u32, (u64, u64)> = std::collections::HashMap::new();
                for c in r.children_of(k) {
                    let e = by.entry(types.get(r.order[c as usize] as usize).copied().unwrap_or(u32::MAX)).or_default();
                    e.0 += 1;
                    e.1 += r.retained[c as usize];
                }
                let (child_type, (count, retained)) = by.into_iter().max_by(|a, b| a.1 .1.cmp(&b.1 .1).then(b.0.cmp(&a.0))).unwrap_or((u32::MAX, (0, 0)));
                (holder, Accumulation { point: k, children: r.children_of(k).count() as u64, child_type, child_type_count: count, child_type_retained: retained })
            })
            .collect();
        (tree, acc)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..proptest::prelude::ProptestConfig::default() })]
        /// The icicle and the accumulation points as [`plain_summary`] reads them: heap-like
        /// graphs (a tree of references and a few more), sizes that tie, types some of which are
        /// past the type table.
        #[test]
        fn the_summary_agrees_with_a_plain_reading(n in 1usize..40, parents in proptest::collection::vec(0u32..40, 40), extra in proptest::collection::vec((0u32..40, 0u32..40), 0..10), rs in proptest::collection::vec(0u32..40, 1..4), ts in proptest::collection::vec((0u32..5, 1u32..4), 40)) {
            let mut edges: Vec<(u32, u32)> = (1..n as u32).map(|i| (parents[i as usize] % i, i)).collect();
            edges.extend(extra.into_iter().filter(|&(a, b)| (a as usize) < n && (b as usize) < n));
            let roots: Vec<u32> = rs.into_iter().map(|r| r % n as u32).collect();
            // Sizes 1..4 times 1000: many ties; type 4 is past a table of 4.
            let nodes: Vec<(u32, u32)> = ts[..n].iter().map(|&(t, s)| (t, s * 1000)).collect();
            let b = build(&nodes, &edges);
            let r = sums(&view(&b, &roots, 4, None)).unwrap();
            let (tree, acc) = plain_summary(&r, &b.types);
            let (got, _) = r.summary(&b.types);
            proptest::prop_assert_eq!(got.top_of_tree(), &tree[..]);
            proptest::prop_assert_eq!(got.accumulations, acc);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..proptest::prelude::ProptestConfig::default() })]
        /// Retained sizes and the by-type grouping against their definitions over the
        /// immediate dominators: a node retains the sizes of every node it dominates (itself
        /// included); a type's objects count when no dominator of theirs is of that type.
        #[test]
        fn sums_agree_with_the_definition(n in 1usize..30, raw in proptest::collection::vec((0u32..30, 0u32..30), 0..60), rs in proptest::collection::vec(0u32..30, 1..4), ts in proptest::collection::vec((0u32..4, 1u32..100), 30)) {
            let edges: Vec<(u32, u32)> = raw.into_iter().filter(|&(a, b)| (a as usize) < n && (b as usize) < n).collect();
            let roots: Vec<u32> = rs.into_iter().map(|r| r % n as u32).collect();
            let b = build(&ts[..n], &edges);
            let r = sums(&view(&b, &roots, 4, Some(3))).unwrap();
            let tree = dominators::dominators(&b.start, &b.edges, &roots).unwrap();
            let num = r.numbers(n);
            // Node → its immediate dominator as a node (None: the virtual root).
            let up = |v: usize| -> Option<usize> { let d = tree.idom[num[v] as usize]; (d != VIRTUAL_ROOT).then(|| tree.order[d as usize] as usize) };
            let mut want = vec![0u64; n];
            let mut want_total = 0u64;
            let mut by: std::collections::BTreeMap<u32, (u64, u64)> = std::collections::BTreeMap::new();
            for v in (0..n).filter(|&v| num[v] != u32::MAX) {
                want_total += b.sizes[v] as u64;
                let mut a = Some(v);
                while let Some(x) = a {
                    want[x] += b.sizes[v] as u64;
                    a = up(x);
                }
            }
            for v in (0..n).filter(|&v| num[v] != u32::MAX) {
                proptest::prop_assert_eq!(r.retained[num[v] as usize], want[v], "node {}", v);
                let mut a = up(v);
                let mut nested = false;
                while let Some(x) = a {
                    nested |= b.types[x] == b.types[v];
                    a = up(x);
                }
                if !nested {
                    let e = by.entry(b.types[v]).or_default();
                    e.0 += 1;
                    e.1 += want[v];
                }
            }
            proptest::prop_assert_eq!(r.retained[0], want_total);
            let mut got: Vec<(u32, u64, u64)> = r.by_type.iter().map(|t| (t.type_index, t.count, t.retained)).collect();
            got.sort();
            proptest::prop_assert_eq!(got, by.into_iter().map(|(t, (c, s))| (t, c, s)).collect::<Vec<_>>());
            let garbage: Vec<usize> = (0..n).filter(|&v| num[v] == u32::MAX && b.types[v] != 3).collect();
            proptest::prop_assert_eq!(r.unreachable_objects, garbage.len() as u64);
            proptest::prop_assert_eq!(r.unreachable_bytes, garbage.iter().map(|&v| b.sizes[v] as u64).sum::<u64>());
        }
    }
}
