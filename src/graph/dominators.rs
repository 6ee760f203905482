//! Dominators of a directed graph given as CSR (`start[i]..start[i+1]` index `targets`), from a
//! virtual root joined to every given root: the Semi-NCA form of Lengauer–Tarjan (semidominators
//! by link-eval with path halving, then each immediate dominator as the nearest common ancestor in
//! the DFS tree). No recursion and no DFS stack (a heap may hold a 10 M-long chain), u32 arrays
//! only, each freed when done.
//!
//! Most heap objects have one referrer: a node whose only predecessor (edges from reachable
//! nodes, self loops left out, each listing as a root counted as an edge from the virtual root)
//! is one node has it as DFS parent, semidominator and immediate dominator. Only nodes with two
//! or more incoming edges get a predecessor list and the semidominator search; the others cost a
//! DFS step and two counting reads. Every pass over the edges goes in node order so that only
//! the far end of an edge is a random read. Peak: 16 bytes per node (node → number, number →
//! node, and the link-eval forest's ancestor and label, which first hold the DFS parent and the
//! in-degree) plus 4 bytes per edge into a node of in-degree ≥ 2.
//!
//! Everything is numbered in DFS preorder: 0 is the virtual root, 1..=r the reachable nodes;
//! a node's immediate dominator has a smaller number than it, so a pass in reverse preorder
//! visits every node before its dominator (for sums over the dominator tree).

use crate::scratch::{Place, ScratchVec};

/// The virtual root's number, and the `order` entry standing for it.
pub(crate) const VIRTUAL_ROOT: u32 = 0;
/// Not reached / no node.
const NONE: u32 = u32::MAX;
/// Marks, in the top bit of a u32 holding a preorder number, a node of in-degree ≥ 2 (numbers
/// stay below it: see [`MAX_NODES`]).
const MULTI: u32 = 1 << 31;
/// Progress is said every this many + 1 nodes (a power of two less one, as a mask).
const PROGRESS_STEP: u32 = (1 << 20) - 1;
/// Nodes a graph may have, so that every number is below [`MULTI`].
const MAX_NODES: usize = (MULTI - 2) as usize;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DominatorError {
    #[error("the graph's edge index is malformed at node {node}: {why}")]
    BadStart { node: usize, why: &'static str },
    #[error("edge {edge} goes to node {target}, past the last node {last}")]
    BadTarget { edge: usize, target: u32, last: usize },
    #[error("root {root} is past the last node {last}")]
    BadRoot { root: u32, last: usize },
    #[error("{nodes} nodes are more than a u32 numbering holds")]
    TooMany { nodes: usize },
}

/// The dominator tree of the nodes reachable from the roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DominatorTree {
    /// Preorder number → node; `order[0]` is the virtual root (`u32::MAX`).
    pub(crate) order: ScratchVec<u32>,
    /// Preorder number → its immediate dominator's preorder number (0: the virtual root, which
    /// is its own).
    pub(crate) idom: ScratchVec<u32>,
}

impl DominatorTree {
    /// Reachable nodes, the virtual root not counted.
    #[cfg(test)]
    pub(crate) fn reachable(&self) -> usize {
        self.order.len().saturating_sub(1)
    }
}

/// Node → preorder number (`u32::MAX`: not reachable) of a tree's `order`, for `nodes` nodes.
/// O(n) memory; for callers (tests) that need it.
#[cfg(test)]
pub(crate) fn numbers(order: &[u32], nodes: usize) -> Vec<u32> {
    let mut pre = vec![NONE; nodes];
    for (k, &v) in order.iter().enumerate().skip(1) {
        if let Some(p) = pre.get_mut(v as usize) {
            *p = k as u32;
        }
    }
    pre
}

/// Checks the CSR before anything indexes with it.
fn check(start: &[u32], targets: &[u32], roots: &[u32]) -> Result<usize, DominatorError> {
    let Some(n) = start.len().checked_sub(1) else { return Err(DominatorError::BadStart { node: 0, why: "no start entry" }) };
    if n >= MAX_NODES {
        return Err(DominatorError::TooMany { nodes: n });
    }
    if start[0] != 0 {
        return Err(DominatorError::BadStart { node: 0, why: "does not start at 0" });
    }
    for i in 0..n {
        if start[i + 1] < start[i] {
            return Err(DominatorError::BadStart { node: i, why: "its edges end before they start" });
        }
    }
    if start[n] as usize != targets.len() {
        return Err(DominatorError::BadStart { node: n, why: "the last entry is not the edge count" });
    }
    // Edge indices double as "visited" marks in the DFS: u32::MAX must never be one.
    if start[n] == NONE {
        return Err(DominatorError::BadStart { node: n, why: "more edges than a u32 index holds" });
    }
    if let Some((edge, &target)) = targets.iter().enumerate().find(|(_, t)| **t as usize >= n) {
        return Err(DominatorError::BadTarget { edge, target, last: n.saturating_sub(1) });
    }
    if let Some(&root) = roots.iter().find(|&&r| r as usize >= n) {
        return Err(DominatorError::BadRoot { root, last: n.saturating_sub(1) });
    }
    Ok(n)
}

/// The dominator tree of the nodes reachable from `roots` (duplicates allowed).
#[cfg(test)]
pub(crate) fn dominators(start: &[u32], targets: &[u32], roots: &[u32]) -> Result<DominatorTree, DominatorError> {
    dominators_and_spare(start, targets, roots, &Place::Memory).map(|(tree, _)| tree)
}

/// One link-eval forest entry: the ancestor in the low half, the label in the high half (one
/// u64, so that its buffer can be handed on as a `Vec<u64>`).
fn pack(ancestor: u32, label: u32) -> u64 {
    u64::from(ancestor) | u64::from(label) << 32
}

fn unpack(l: u64) -> (u32, u32) {
    (l as u32, (l >> 32) as u32)
}

/// [`dominators`], and an empty buffer with room for one u64 per preorder number (its pages
/// already touched), for the caller's per-node sums: on a heap of 10 M objects a fresh one costs
/// as much in page faults and zeroing as a pass of the algorithm. Its arrays live at `place`
/// (memory or scratch files).
pub(crate) fn dominators_and_spare(start: &[u32], targets: &[u32], roots: &[u32], place: &Place) -> Result<(DominatorTree, ScratchVec<u64>), DominatorError> {
    let n = check(start, targets, roots)?;

    // 1. DFS from the virtual root, without a stack: the path is climbed back through the
    //    parents, and a node on the path keeps its next edge index in `pre` (any value but NONE
    //    marks a node seen), which gets its preorder number once the node is left. The parent
    //    of number k goes in `link[k].0` (the link-eval forest starts as the DFS tree).
    // (`pre` has room for one more: it becomes `idom`, one entry per number.)
    // Read and written at random: in memory while the place's budget has room.
    let mut pre: ScratchVec<u32> = ScratchVec::hot(place, n + 1);
    pre.resize(n, NONE);
    let mut link: ScratchVec<u64> = ScratchVec::hot(place, n + 1);
    let mut order: ScratchVec<u32> = ScratchVec::hot(place, n + 1);
    order.push(NONE);
    link.push(pack(VIRTUAL_ROOT, 0));
    crate::trace::step("dom: alloc");
    // Progress: the search's nodes, then the semidominators' (each said per million).
    crate::heap_progress::start(crate::heap_progress::HeapStep::Dominators, 2 * n as u64);
    for &r in roots {
        if pre[r as usize] != NONE {
            continue;
        }
        let mut c = order.len() as u32;
        order.push(r);
        link.push(pack(VIRTUAL_ROOT, 0));
        let (mut v, mut e) = (r as usize, start[r as usize]);
        pre[v] = e;
        loop {
            let end = start[v + 1];
            let mut next = None;
            while e < end {
                let w = targets[e as usize] as usize;
                e += 1;
                if pre[w] == NONE {
                    next = Some(w);
                    break;
                }
            }
            if let Some(w) = next {
                pre[v] = e;
                let k = order.len() as u32;
                if k & PROGRESS_STEP == 0 {
                    crate::heap_progress::advance(u64::from(PROGRESS_STEP) + 1);
                }
                order.push(w as u32);
                link.push(pack(c, 0));
                c = k;
                v = w;
                e = start[w];
                pre[w] = e;
                continue;
            }
            pre[v] = c;
            let up = link[c as usize] as u32;
            if up == VIRTUAL_ROOT {
                break;
            }
            c = up;
            v = order[c as usize] as usize;
            e = pre[v];
        }
    }
    let count = order.len();
    // The nodes no root reaches are no step of the search: the semidominators' half starts.
    crate::heap_progress::start(crate::heap_progress::HeapStep::Dominators, 2 * count as u64);
    crate::heap_progress::advance(count as u64);
    crate::trace::step("dom: dfs");

    // 2. In-degrees (in the high half of `link[k]`): edges from reachable nodes, self loops
    //    left out, and one from the virtual root per listing as a root.
    const ONE: u64 = 1 << 32;
    for &r in roots {
        link[pre[r as usize] as usize] += ONE;
    }
    for v in 0..n {
        if pre[v] == NONE {
            continue;
        }
        for &w in &targets[start[v] as usize..start[v + 1] as usize] {
            if w as usize != v {
                link[pre[w as usize] as usize] += ONE;
            }
        }
    }
    // Predecessor lists (preorder numbers) for the nodes of in-degree ≥ 2 only, marked MULTI
    // in their parent's top bit. The high half becomes where k's list ends, then each
    // predecessor is placed by decrementing it: afterwards it is where k's list starts (and the
    // next node's start is where it ends).
    // The node's own number is marked too (in `pre`), so that the placement below reads
    // `link` only for the edges into such nodes.
    let mut total = 0u32;
    for (l, &v) in link.iter_mut().zip(order.iter()).skip(1) {
        let (mut parent, degree) = unpack(*l);
        if degree >= 2 {
            parent |= MULTI;
            total += degree;
            pre[v as usize] |= MULTI;
        }
        *l = pack(parent, total);
    }
    link[0] = pack(VIRTUAL_ROOT, 0);
    crate::trace::step("dom: indegree");
    let mut preds: ScratchVec<u32> = ScratchVec::with_capacity(place, total as usize);
    preds.resize(total as usize, 0);
    crate::trace::step("dom: preds alloc");
    // `k`: a number as `pre` holds it (MULTI-marked when its node has a list).
    let mut place = |k: u32, from: u32| {
        if k & MULTI != 0 {
            let l = &mut link[(k & !MULTI) as usize];
            *l -= ONE;
            preds[(*l >> 32) as usize] = from;
        }
    };
    for &r in roots {
        place(pre[r as usize], VIRTUAL_ROOT);
    }
    for v in 0..n {
        let pv = pre[v];
        if pv == NONE {
            continue;
        }
        let pv = pv & !MULTI;
        for &w in &targets[start[v] as usize..start[v + 1] as usize] {
            if w as usize != v {
                place(pre[w as usize], pv);
            }
        }
    }

    // 3. Semidominators in reverse preorder, by link-eval with path compression over the
    //    processed forest. Semi-NCA needs only semidominator values, never the vertex that has
    //    one, so the label of a vertex is the least semidominator on its compressed path, kept
    //    beside its ancestor (one cache line per step of a climb). A vertex is linked (under its
    //    DFS parent) once processed, that is when its number is above the one being processed:
    //    no "unlinked" mark is needed. A node of in-degree 1 has its parent as semidominator and
    //    immediate dominator: `idom` gets it now. A node of in-degree ≥ 2 gets its semidominator
    //    (MULTI-marked) and its parent is kept for step 4 in the part of `preds` already read
    //    (it has at least two slots there), from the end down: increasing number from `kept` on.
    crate::trace::step("dom: placed");
    let mut idom = pre;
    idom.clear();
    idom.resize(count, VIRTUAL_ROOT);
    let mut end = total;
    let mut kept = total as usize;
    for w in (1..count).rev() {
        if w as u32 & PROGRESS_STEP == 0 {
            crate::heap_progress::advance(u64::from(PROGRESS_STEP) + 1);
        }
        let (p, begin) = unpack(link[w]);
        let parent = p & !MULTI;
        let s = if p & MULTI == 0 {
            idom[w] = parent;
            parent
        } else {
            let mut s = w as u32;
            for &v in &preds[begin as usize..end as usize] {
                let cand = if (v as usize) <= w { v } else { eval(v, w as u32, &mut link) };
                s = s.min(cand);
            }
            idom[w] = s | MULTI;
            kept -= 1;
            preds[kept] = parent;
            s
        };
        end = begin;
        link[w] = pack(parent, s);
    }
    crate::trace::step("dom: semi");
    let mut spare = link;
    spare.clear();

    // 4. Immediate dominators of the nodes of in-degree ≥ 2: start at the DFS parent, climb
    //    while above the semidominator (Semi-NCA); ancestors are final before their
    //    descendants in preorder.
    for w in 1..count {
        let sw = idom[w];
        if sw & MULTI == 0 {
            continue;
        }
        let sw = sw & !MULTI;
        let mut d = preds[kept];
        kept += 1;
        while d > sw {
            d = idom[d as usize];
        }
        idom[w] = d;
    }
    crate::trace::step("dom: idom");
    Ok((DominatorTree { order, idom }, spare))
}

/// The least semidominator on the path from `v` up to (not including) the root of its tree in
/// the processed forest (whose number is `w` or below), halving the path as it goes (Tarjan and
/// van Leeuwen's path halving: each vertex passed is hung under its grandparent, its label
/// taking the parent's in): one pass, no recursion, no stack.
///
/// Invariant: a vertex's label is the least semidominator from it up to (not including) its
/// ancestor, which the halving keeps.
fn eval(v: u32, w: u32, link: &mut [u64]) -> u32 {
    let mut x = v;
    let mut best = u32::MAX;
    loop {
        let (a, lx) = unpack(link[x as usize]);
        if a <= w {
            return best.min(lx);
        }
        let (aa, la) = unpack(link[a as usize]);
        let l = lx.min(la);
        if aa <= w {
            return best.min(l);
        }
        link[x as usize] = pack(aa, l);
        best = best.min(l);
        x = aa;
    }
}

/// CSR from an edge list over `n` nodes (the tests' graphs, here and in the retained sizes').
#[cfg(test)]
pub(crate) fn csr(n: usize, edges: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; n + 1];
    for &(a, _) in edges {
        start[a as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut targets = vec![0u32; edges.len()];
    for &(a, b) in edges {
        targets[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
    }
    (start, targets)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;


    /// Node → its immediate dominator as a node (`None`: the virtual root), unreachable nodes
    /// absent.
    fn idoms(n: usize, edges: &[(u32, u32)], roots: &[u32]) -> Vec<Option<Option<u32>>> {
        let (s, t) = csr(n, edges);
        let d = dominators(&s, &t, roots).expect("valid graph");
        let mut out = vec![None; n];
        for k in 1..d.order.len() {
            let id = d.idom[k];
            out[d.order[k] as usize] = Some(if id == VIRTUAL_ROOT { None } else { Some(d.order[id as usize]) });
        }
        out
    }

    #[test]
    fn diamond() {
        // 0 → 1, 0 → 2, 1 → 3, 2 → 3: 3 is dominated by 0 alone.
        let d = idoms(4, &[(0, 1), (0, 2), (1, 3), (2, 3)], &[0]);
        assert_eq!(d, vec![Some(None), Some(Some(0)), Some(Some(0)), Some(Some(0))]);
    }

    #[test]
    fn chain() {
        let n = 100_000u32;
        let edges: Vec<(u32, u32)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        let d = idoms(n as usize, &edges, &[0]);
        assert_eq!(d[0], Some(None));
        for (i, di) in d.iter().enumerate().skip(1) {
            assert_eq!(*di, Some(Some(i as u32 - 1)));
        }
    }

    #[test]
    fn cycle_and_unreachable() {
        // 0 → 1 → 2 → 3 → 1; 4 → 2 but 4 is unreachable; 5 alone.
        let d = idoms(6, &[(0, 1), (1, 2), (2, 3), (3, 1), (4, 2)], &[0]);
        assert_eq!(d, vec![Some(None), Some(Some(0)), Some(Some(1)), Some(Some(2)), None, None]);
    }

    #[test]
    fn two_roots_share_what_both_reach() {
        // Roots 0 and 1 both reach 2: only the virtual root dominates it. 3 hangs under 0 alone.
        let d = idoms(4, &[(0, 2), (1, 2), (0, 3)], &[0, 1, 0]);
        assert_eq!(d, vec![Some(None), Some(None), Some(None), Some(Some(0))]);
    }

    #[test]
    fn lengauer_tarjan_paper_graph() {
        // The example of Lengauer & Tarjan (1979), R=0 A=1 B=2 C=3 D=4 E=5 F=6 G=7 H=8 I=9 J=10 K=11 L=12.
        let e = [
            (0, 1), (0, 2), (0, 3), (1, 4), (2, 1), (2, 4), (2, 5), (3, 6), (3, 7), (4, 12), (5, 8), (6, 9), (7, 9), (7, 10),
            (8, 5), (8, 11), (9, 11), (10, 9), (11, 9), (11, 0), (12, 8),
        ];
        let d = idoms(13, &e, &[0]);
        let want = [None, Some(0), Some(0), Some(0), Some(0), Some(0), Some(3), Some(3), Some(0), Some(0), Some(7), Some(0), Some(4)];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(d[i], Some(*w), "node {i}");
        }
    }

    #[test]
    fn in_degree_one_chains_hang_under_their_referrer() {
        // Two chains from one root, joined at 5: 0 → 1 → 2 → 5, 0 → 3 → 4 → 5 → 6 → 7.
        let d = idoms(8, &[(0, 1), (1, 2), (2, 5), (0, 3), (3, 4), (4, 5), (5, 6), (6, 7)], &[0]);
        assert_eq!(d, vec![Some(None), Some(Some(0)), Some(Some(1)), Some(Some(0)), Some(Some(3)), Some(Some(0)), Some(Some(5)), Some(Some(6))]);
    }

    #[test]
    fn self_loops_and_duplicate_edges_are_one_referrer() {
        // 1 refers to itself and to 2 twice; 2 refers to itself: each still has one referrer.
        // 3 is held by 1 and by itself only; 4 only by itself (unreachable).
        let d = idoms(5, &[(0, 1), (1, 1), (1, 2), (1, 2), (2, 2), (1, 3), (3, 3), (4, 4), (4, 3)], &[0]);
        assert_eq!(d, vec![Some(None), Some(Some(0)), Some(Some(1)), Some(Some(1)), None]);
    }

    #[test]
    fn a_root_also_referenced_is_dominated_by_the_virtual_root() {
        // 1 is a root and referenced by 0 (also a root): only the virtual root dominates it;
        // 2 is listed twice as a root and referenced by nothing.
        let d = idoms(4, &[(0, 1), (1, 3)], &[0, 1, 2, 2]);
        assert_eq!(d, vec![Some(None), Some(None), Some(None), Some(Some(1))]);
    }

    #[test]
    fn unreachable_cycles_stay_out() {
        // 2 ⇄ 3 and 3 → 1: the cycle is unreachable, so 1 keeps its one reachable referrer.
        let d = idoms(4, &[(0, 1), (2, 3), (3, 2), (3, 1)], &[0]);
        assert_eq!(d, vec![Some(None), Some(Some(0)), None, None]);
    }

    #[test]
    fn a_deep_chain_with_back_edges() {
        // 0 → 1 → … → n-1, every node also back to the root: still a chain of dominators, the
        // DFS path n deep (no stack to overflow).
        let n = 200_000u32;
        let mut edges: Vec<(u32, u32)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        edges.extend((1..n).map(|i| (i, 0)));
        let d = idoms(n as usize, &edges, &[0]);
        assert!((1..n as usize).all(|i| d[i] == Some(Some(i as u32 - 1))));
    }

    #[test]
    fn malformed_graphs_are_errors() {
        assert!(matches!(dominators(&[0, 1], &[5], &[0]), Err(DominatorError::BadTarget { .. })));
        assert!(matches!(dominators(&[0, 2, 1], &[1, 0], &[0]), Err(DominatorError::BadStart { .. })));
        assert!(matches!(dominators(&[0, 0], &[], &[3]), Err(DominatorError::BadRoot { .. })));
        assert!(matches!(dominators(&[], &[], &[]), Err(DominatorError::BadStart { .. })));
        let empty = dominators(&[0, 0], &[], &[]).expect("no roots is fine");
        assert_eq!(empty.reachable(), 0);
    }

    /// Dominators by definition: d dominates v when v is unreachable from the roots without
    /// passing d. O(n²·m), for small graphs.
    fn naive(n: usize, edges: &[(u32, u32)], roots: &[u32]) -> Vec<Option<Option<u32>>> {
        let reach = |skip: Option<u32>| -> Vec<bool> {
            let mut seen = vec![false; n];
            let mut stack: Vec<u32> = roots.iter().copied().filter(|&r| Some(r) != skip).collect();
            while let Some(v) = stack.pop() {
                if seen[v as usize] {
                    continue;
                }
                seen[v as usize] = true;
                for &(a, b) in edges {
                    if a == v && Some(b) != skip && !seen[b as usize] {
                        stack.push(b);
                    }
                }
            }
            seen
        };
        let all = reach(None);
        // doms[v] = strict dominators of v.
        let mut doms: Vec<Vec<u32>> = vec![Vec::new(); n];
        for d in 0..n as u32 {
            if !all[d as usize] {
                continue;
            }
            let without = reach(Some(d));
            for v in 0..n {
                if all[v] && v as u32 != d && !without[v] {
                    doms[v].push(d);
                }
            }
        }
        (0..n)
            .map(|v| {
                if !all[v] {
                    return None;
                }
                // The immediate dominator is the strict dominator that every other one dominates:
                // the one with the most strict dominators of its own.
                Some(doms[v].iter().copied().max_by_key(|&d| doms[d as usize].len()))
            })
            .collect()
    }

    /// A heap-shaped graph of `n` nodes: a few roots, trees of small objects, shared nodes, long
    /// chains and cycles (a xorshift, so every run builds the same one).
    pub(crate) fn heap_like(n: u32) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut start = Vec::with_capacity(n as usize + 1);
        let mut targets = Vec::with_capacity(n as usize * 2);
        start.push(0u32);
        for i in 0..n {
            // A parent edge from a nearby earlier node keeps most of it reachable and tree-like;
            // a quarter get a second edge anywhere (sharing, cycles).
            if i > 0 {
                let back = (rnd() % 64 + 1) as u32;
                targets.push(i.saturating_sub(back));
            }
            if rnd() % 4 == 0 {
                targets.push((rnd() % n as u64) as u32);
            }
            if i + 1 < n && rnd() % 2 == 0 {
                targets.push(i + 1);
            }
            start.push(targets.len() as u32);
        }
        // Edges above point backwards; reverse them so that node 0's subtree reaches forwards.
        let mut rev_start = vec![0u32; n as usize + 1];
        for &t in &targets {
            rev_start[t as usize + 1] += 1;
        }
        for i in 0..n as usize {
            rev_start[i + 1] += rev_start[i];
        }
        let mut fill = rev_start.clone();
        let mut rev = vec![0u32; targets.len()];
        for v in 0..n as usize {
            for &t in &targets[start[v] as usize..start[v + 1] as usize] {
                rev[fill[t as usize] as usize] = v as u32;
                fill[t as usize] += 1;
            }
        }
        let roots: Vec<u32> = (0..16).map(|i| i * (n / 16)).collect();
        (rev_start, rev, roots)
    }

    /// petgraph's dominators (`simple_fast`: Cooper, Harvey and Kennedy's algorithm) of the graph
    /// of `n` nodes (`start`, `targets`), from a virtual root: one more node, `n`, joined to the
    /// roots.
    fn petgraph_dominators(n: u32, start: &[u32], targets: &[u32], roots: &[u32]) -> petgraph::algo::dominators::Dominators<petgraph::graph::NodeIndex> {
        let mut g: petgraph::Graph<(), ()> = petgraph::Graph::with_capacity(n as usize + 1, targets.len() + roots.len());
        for _ in 0..=n {
            g.add_node(());
        }
        for v in 0..n as usize {
            for &w in &targets[start[v] as usize..start[v + 1] as usize] {
                g.add_edge((v as u32).into(), w.into(), ());
            }
        }
        for &r in roots {
            g.add_edge(n.into(), r.into(), ());
        }
        petgraph::algo::dominators::simple_fast(&g, n.into())
    }

    /// A heap-shaped graph of 250 000 nodes: the tree equals petgraph's (Cooper, Harvey and
    /// Kennedy's algorithm).
    #[test]
    fn a_heap_shaped_graph_agrees_with_petgraph() {
        let n = 250_123u32;
        let (s, t, roots) = heap_like(n);
        let d = dominators(&s, &t, &roots).expect("valid");
        let want = petgraph_dominators(n, &s, &t, &roots);
        let num = numbers(&d.order, n as usize);
        for v in 0..n {
            let got = (num[v as usize] != NONE).then(|| {
                let id = d.idom[num[v as usize] as usize];
                if id == VIRTUAL_ROOT { n } else { d.order[id as usize] }
            });
            assert_eq!(got, want.immediate_dominator(v.into()).map(|i| i.index() as u32), "node {v}");
        }
    }

    /// Peak RSS (VmHWM) in KiB, after resetting it when `reset`.
    pub(crate) fn peak_kib(reset: bool) -> u64 {
        if reset {
            let _ = std::fs::write("/proc/self/clear_refs", "5");
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok()).unwrap_or(0)
    }

    /// This thread's time on a CPU so far (from /proc/thread-self/schedstat): on a shared,
    /// loaded machine the wall time says little.
    pub(crate) fn cpu_secs() -> f64 {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        text.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()).unwrap_or(0) as f64 / 1e9
    }

    pub(crate) fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok()).unwrap_or(0)
    }

    /// `cargo test --release --lib scale_against_petgraph -- --ignored --nocapture`: this module
    /// and petgraph's `simple_fast` on heap-shaped graphs (KNOT_DOM_NODES nodes for ours, default
    /// 10 M; KNOT_DOM_PETGRAPH_NODES for petgraph's, default 2 M, 0 skips it): time and the memory
    /// each adds to the graph's. (A runtime's retained sizes over the same graphs: its own test,
    /// e.g. `gc::retained`'s `scale_on_heap_like_graphs`.)
    #[test]
    #[ignore]
    fn scale_against_petgraph() {
        let env = |k: &str, d: u32| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
        let runs = [("knot", env("KNOT_DOM_NODES", 10_000_000)), ("petgraph", env("KNOT_DOM_PETGRAPH_NODES", 2_000_000))];
        for (who, n) in runs.into_iter().filter(|&(_, n)| n > 0) {
            let (s, t, roots) = heap_like(n);
            let base = rss_kib();
            peak_kib(true);
            let t0 = std::time::Instant::now();
            let c0 = cpu_secs();
            let reachable = if who == "knot" {
                let d = dominators(&s, &t, &roots).expect("valid");
                d.reachable()
            } else {
                let d = petgraph_dominators(n, &s, &t, &roots);
                (0..n).filter(|&v| d.immediate_dominator(v.into()).is_some()).count()
            };
            let secs = t0.elapsed().as_secs_f64();
            let cpu = cpu_secs() - c0;
            let extra = peak_kib(false).saturating_sub(base);
            eprintln!(
                "{who}: {n} nodes, {} edges, {reachable} reachable: {secs:.2} s ({cpu:.2} s on a CPU), peak +{:.0} MiB = {:.1} bytes/node beyond the graph",
                t.len(),
                extra as f64 / 1024.0,
                extra as f64 * 1024.0 / n as f64
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
        #[test]
        fn agrees_with_the_definition(n in 1usize..14, raw in proptest::collection::vec((0u32..14, 0u32..14), 0..40), rs in proptest::collection::vec(0u32..14, 1..3)) {
            let edges: Vec<(u32, u32)> = raw.into_iter().filter(|&(a, b)| (a as usize) < n && (b as usize) < n).collect();
            let roots: Vec<u32> = rs.into_iter().filter(|&r| (r as usize) < n).collect();
            prop_assert_eq!(idoms(n, &edges, &roots), naive(n, &edges, &roots));
        }

        /// Heap-like: most nodes have one referrer (a tree), a few more edges, duplicates and
        /// self loops, roots that are also referenced.
        #[test]
        fn agrees_with_the_definition_on_mostly_trees(n in 2usize..40, parents in proptest::collection::vec(0u32..40, 40), extra in proptest::collection::vec((0u32..40, 0u32..40), 0..8), rs in proptest::collection::vec(0u32..40, 1..4)) {
            let mut edges: Vec<(u32, u32)> = (1..n as u32).map(|i| (parents[i as usize] % i, i)).collect();
            edges.extend(extra.into_iter().filter(|&(a, b)| (a as usize) < n && (b as usize) < n));
            let roots: Vec<u32> = rs.into_iter().map(|r| r % n as u32).collect();
            prop_assert_eq!(idoms(n, &edges, &roots), naive(n, &edges, &roots));
        }
    }
}
