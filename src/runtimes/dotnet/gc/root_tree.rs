//! The shortest path from a root to every object at once: one breadth-first search from all
//! roots, each object remembering the object it was reached from (4 bytes a node), so the
//! paths of many holders (the top holders, the leak suspects) cost one search, not one each.
//! Roots are queued as `gcroot` prefers them: handles and statics first, then the finalization
//! queue, then stack slots; sync blocks and dependent handles are not roots the GC marks from.

use crate::runtimes::dotnet::gc::graph::{ObjectGraph, Root, RootKind};
use std::collections::VecDeque;

/// Nodes per block of the search's queue.
const BLOCK: usize = 1 << 16;

/// A first-in first-out queue of nodes in blocks, each freed once read: it holds about the
/// search's frontier (a VecDeque would keep the largest frontier's power of two, and a copy of
/// it while growing; a heap's frontier can be millions of an array's elements).
#[derive(Default)]
struct Fifo {
    blocks: VecDeque<Vec<u32>>,
    /// Read position in the first block.
    head: usize,
}

impl Fifo {
    fn push(&mut self, v: u32) {
        match self.blocks.back_mut() {
            Some(b) if b.len() < BLOCK => b.push(v),
            _ => {
                let mut b = Vec::with_capacity(BLOCK);
                b.push(v);
                self.blocks.push_back(b);
            }
        }
    }

    fn pop(&mut self) -> Option<u32> {
        let front = self.blocks.front()?;
        let v = *front.get(self.head)?;
        self.head += 1;
        if self.head == BLOCK {
            self.blocks.pop_front();
            self.head = 0;
        }
        Some(v)
    }
}

const UNSEEN: u32 = u32::MAX;
/// Not seen yet, and one of the nodes whose paths are asked for (see [`RootTree::in_buffer`]).
const WANTED: u32 = u32::MAX - 1;
/// A root's own node: `parent` is this, and `root_of` says which root.
const ROOT: u32 = u32::MAX - 2;

/// Every reachable object's predecessor on a shortest path from a root.
pub(crate) struct RootTree {
    parent: crate::scratch::ScratchVec<u32>,
    /// Root node → the root that reached it first: an index into the graph's `roots`, or
    /// (past them) into the static slots.
    root_of: rustc_hash::FxHashMap<u32, usize>,
    /// Statics arrays' elements as roots: (node, the array's node, element index).
    statics: Vec<(u32, u32, u32)>,
}

/// What a path starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RootOf<'g> {
    Root(&'g Root),
    /// Element `index` of the statics array `array` (a node): a static field.
    StaticSlot { array: u32, index: u32 },
}

fn tier(kind: RootKind) -> u8 {
    match kind {
        RootKind::Static => 0,
        RootKind::StrongHandle | RootKind::PinnedHandle | RootKind::AsyncPinnedHandle | RootKind::RefCountedHandle | RootKind::SizedRefHandle | RootKind::VariableHandle => 1,
        RootKind::FinalizerQueue => 2,
        RootKind::Stack { conservative: false } => 3,
        RootKind::Stack { conservative: true } => 4,
        RootKind::DependentHandle | RootKind::SyncBlock => 5,
    }
}

impl RootTree {
    /// `statics`: statics arrays' elements, searched from first (node, array node, index).
    #[cfg(test)]
    pub(crate) fn new(g: &ObjectGraph, statics: &[(u32, u32, u32)]) -> RootTree {
        RootTree::in_buffer(g, statics, crate::scratch::ScratchVec::new(&g.place), None)
    }

    /// As [`RootTree::new`], its 4 bytes per node in `buffer` (an array the caller no longer
    /// needs, so that the search takes no new memory for them). With `wanted`, the search stops
    /// once it has reached each of those nodes: their paths (all the caller asks for) are the
    /// whole search's, since a path is made of nodes reached before its end; another node's
    /// path may be missing.
    pub(crate) fn in_buffer(g: &ObjectGraph, statics: &[(u32, u32, u32)], buffer: crate::scratch::ScratchVec<u32>, wanted: Option<&[u32]>) -> RootTree {
        let n = g.len();
        let mut order: Vec<usize> = (0..g.roots.len()).filter(|&i| tier(g.roots[i].kind) < 5).collect();
        order.sort_by_key(|&i| (tier(g.roots[i].kind), i));
        let mut parent = buffer;
        parent.clear();
        parent.resize(n, UNSEEN);
        // Wanted nodes not reached yet (`usize::MAX`: every node is).
        let mut left = usize::MAX;
        if let Some(wanted) = wanted {
            left = 0;
            for &w in wanted {
                if let Some(p) = parent.get_mut(w as usize).filter(|p| **p == UNSEEN) {
                    *p = WANTED;
                    left += 1;
                }
            }
        }
        // Marks `node` reached from `from`; false when it was already (or is no node).
        let reach = |parent: &mut [u32], left: &mut usize, node: u32, from: u32| -> bool {
            let Some(p) = parent.get_mut(node as usize) else { return false };
            if *p < WANTED {
                return false;
            }
            if *p == WANTED {
                *left -= 1;
            }
            *p = from;
            true
        };
        let mut root_of = rustc_hash::FxHashMap::default();
        let mut queue = Fifo::default();
        for (j, &(node, _, _)) in statics.iter().enumerate() {
            if reach(&mut parent, &mut left, node, ROOT) {
                root_of.insert(node, g.roots.len() + j);
                queue.push(node);
            }
        }
        for i in order {
            let node = g.roots[i].node;
            if reach(&mut parent, &mut left, node, ROOT) {
                root_of.insert(node, i);
                queue.push(node);
            }
        }
        while left > 0 {
            let Some(v) = queue.pop() else { break };
            for &w in g.edges_of(v) {
                if reach(&mut parent, &mut left, w, v) {
                    queue.push(w);
                }
            }
        }
        RootTree { parent, root_of, statics: statics.to_vec() }
    }

    /// The root reaching `node` first and the nodes from its object to `node`; `None` when no
    /// root reaches it.
    pub(crate) fn path<'g>(&self, g: &'g ObjectGraph, node: u32) -> Option<(RootOf<'g>, Vec<u32>)> {
        if *self.parent.get(node as usize)? >= WANTED {
            return None;
        }
        let mut nodes = vec![node];
        let mut at = node;
        // Each step goes to an object found earlier in the search: at most n steps.
        while self.parent[at as usize] != ROOT && nodes.len() <= self.parent.len() {
            at = self.parent[at as usize];
            nodes.push(at);
        }
        nodes.reverse();
        let i = *self.root_of.get(&at)?;
        let root = match g.roots.get(i) {
            Some(r) => RootOf::Root(r),
            None => {
                let &(_, array, index) = self.statics.get(i - g.roots.len())?;
                RootOf::StaticSlot { array, index }
            }
        };
        Some((root, nodes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::dotnet::gc::graph::RootSource;

    #[test]
    fn the_queue_is_first_in_first_out_across_blocks() {
        let mut q = Fifo::default();
        let mut model = VecDeque::new();
        // Pushes and pops interleaved so the front block empties, refills and is freed.
        for round in 0..5u32 {
            for i in 0..(BLOCK as u32 + 7 * round) {
                q.push(round * 1_000_000 + i);
                model.push_back(round * 1_000_000 + i);
            }
            for _ in 0..(BLOCK / 2 + round as usize) {
                assert_eq!(q.pop(), model.pop_front());
            }
        }
        while let Some(v) = model.pop_front() {
            assert_eq!(q.pop(), Some(v));
        }
        assert_eq!(q.pop(), None);
        q.push(7);
        assert_eq!(q.pop(), Some(7));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn paths_are_shortest_and_prefer_statics_and_handles() {
        // 0 (stack root) → 1 → 2; 3 (static) → 2; 4 unreachable.
        let g = ObjectGraph {
            index: crate::runtimes::dotnet::gc::node_index::NodeIndex::of(&[0x10, 0x20, 0x30, 0x40, 0x50]),
            types: vec![0; 5].into(),
            place: Default::default(),
            type_table: vec![0x1000],
            sizes: vec![24; 5].into(),
            edge_start: vec![0, 1, 2, 2, 3, 3].into(),
            edges: vec![1, 2, 2].into(),
            roots: vec![
                Root { kind: RootKind::Stack { conservative: true }, node: 0, source: RootSource::Stack { os_tid: 1, managed_id: 1, frame_sp: 0, frame_ip: 0, slot: 0x7ff0, register: None } },
                Root { kind: RootKind::Static, node: 3, source: RootSource::Static { method_table: 0x2000, field_token: 0x0400_0001, handle: 0 } },
            ],
        };
        let t = RootTree::new(&g, &[]);
        let (root, nodes) = t.path(&g, 2).unwrap();
        assert!(matches!(root, RootOf::Root(r) if r.kind == RootKind::Static));
        assert_eq!(nodes, vec![3, 2]);
        let (root, nodes) = t.path(&g, 1).unwrap();
        assert!(matches!(root, RootOf::Root(r) if r.kind == RootKind::Stack { conservative: true }));
        assert_eq!(nodes, vec![0, 1]);
        // A static slot is searched from first.
        let t = RootTree::new(&g, &[(1, 3, 7)]);
        let (root, nodes) = t.path(&g, 2).unwrap();
        assert_eq!(root, RootOf::StaticSlot { array: 3, index: 7 });
        assert_eq!(nodes, vec![1, 2]);
        assert!(t.path(&g, 4).is_none());
        assert!(t.path(&g, 99).is_none());
    }

    #[test]
    fn a_search_for_a_root_stops_at_once() {
        // A chain 0 → 1 → … → 99 from a root at 0: only the root is wanted.
        let n = 100u32;
        let (start, targets) = crate::graph::dominators::csr(n as usize, &(0..n - 1).map(|i| (i, i + 1)).collect::<Vec<_>>());
        let g = ObjectGraph {
            index: crate::runtimes::dotnet::gc::node_index::NodeIndex::of(&(0..u64::from(n)).map(|i| 0x10 * (i + 1)).collect::<Vec<_>>()),
            types: vec![0; n as usize].into(),
            place: Default::default(),
            type_table: vec![0x1000],
            sizes: vec![24; n as usize].into(),
            edge_start: start.into(),
            edges: targets.into(),
            roots: vec![Root { kind: RootKind::StrongHandle, node: 0, source: RootSource::FinalizerQueue { slot: 0 } }],
        };
        let t = RootTree::in_buffer(&g, &[], crate::scratch::ScratchVec::new(&g.place), Some(&[0]));
        assert_eq!(t.path(&g, 0).map(|p| p.1), Some(vec![0]));
        assert!(t.path(&g, 50).is_none(), "the search went on past the wanted node");
        assert_eq!(RootTree::new(&g, &[]).path(&g, 50).map(|p| p.1.len()), Some(51));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..proptest::prelude::ProptestConfig::default() })]
        /// A search that stops once it has reached the wanted nodes gives each of them the whole
        /// search's root and path (wanted nodes that are roots, statics, unreachable or past the
        /// last node among them).
        #[test]
        fn a_search_stopped_at_the_wanted_nodes_gives_their_whole_paths(
            n in 1usize..40,
            raw in proptest::collection::vec((0u32..40, 0u32..40), 0..80),
            rs in proptest::collection::vec((0u32..42, 0u8..4), 0..5),
            st in proptest::collection::vec(0u32..42, 0..3),
            wanted in proptest::collection::vec(0u32..44, 0..6),
        ) {
            let mut edges: Vec<(u32, u32)> = raw.into_iter().filter(|&(a, b)| (a as usize) < n && (b as usize) < n).collect();
            edges.sort_by_key(|e| e.0);
            let (start, targets) = crate::graph::dominators::csr(n, &edges);
            let kinds = [RootKind::Stack { conservative: false }, RootKind::StrongHandle, RootKind::FinalizerQueue, RootKind::SyncBlock];
            let roots: Vec<Root> = rs
                .iter()
                .map(|&(node, k)| Root { kind: kinds[k as usize], node, source: RootSource::FinalizerQueue { slot: 0 } })
                .collect();
            let statics: Vec<(u32, u32, u32)> = st.iter().enumerate().map(|(i, &node)| (node, 0, i as u32)).collect();
            let g = ObjectGraph {
                index: crate::runtimes::dotnet::gc::node_index::NodeIndex::of(&(0..n as u64).map(|i| 0x10 * (i + 1)).collect::<Vec<_>>()),
                types: vec![0; n].into(),
                place: Default::default(),
                type_table: vec![0x1000],
                sizes: vec![24; n].into(),
                edge_start: start.into(),
                edges: targets.into(),
                roots,
            };
            let whole = RootTree::new(&g, &statics);
            let stopped = RootTree::in_buffer(&g, &statics, crate::scratch::ScratchVec::new(&g.place), Some(&wanted));
            for &w in &wanted {
                proptest::prop_assert_eq!(stopped.path(&g, w), whole.path(&g, w), "node {}", w);
            }
        }
    }
}
