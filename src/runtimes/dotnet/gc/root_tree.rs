//! The shortest path from a root to every object at once: one breadth-first search from all
//! roots, each object remembering the object it was reached from (4 bytes a node), so the
//! paths of many holders (the top holders, the leak suspects) cost one search, not one each.
//! Roots are queued as `gcroot` prefers them: handles and statics first, then the finalization
//! queue, then stack slots; sync blocks and dependent handles are not roots the GC marks from.

use super::graph::{ObjectGraph, Root, RootKind};
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
/// A root's own node: `parent` is this, and `root_of` says which root.
const ROOT: u32 = u32::MAX - 1;

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
        RootTree::in_buffer(g, statics, crate::scratch::ScratchVec::new(&g.place))
    }

    /// As [`RootTree::new`], its 4 bytes per node in `buffer` (an array the caller no longer
    /// needs, so that the search takes no new memory for them).
    pub(crate) fn in_buffer(g: &ObjectGraph, statics: &[(u32, u32, u32)], buffer: crate::scratch::ScratchVec<u32>) -> RootTree {
        let n = g.len();
        let mut order: Vec<usize> = (0..g.roots.len()).filter(|&i| tier(g.roots[i].kind) < 5).collect();
        order.sort_by_key(|&i| (tier(g.roots[i].kind), i));
        let mut parent = buffer;
        parent.clear();
        parent.resize(n, UNSEEN);
        let mut root_of = rustc_hash::FxHashMap::default();
        let mut queue = Fifo::default();
        for (j, &(node, _, _)) in statics.iter().enumerate() {
            if (node as usize) < n && parent[node as usize] == UNSEEN {
                parent[node as usize] = ROOT;
                root_of.insert(node, g.roots.len() + j);
                queue.push(node);
            }
        }
        for i in order {
            let node = g.roots[i].node;
            if (node as usize) < n && parent[node as usize] == UNSEEN {
                parent[node as usize] = ROOT;
                root_of.insert(node, i);
                queue.push(node);
            }
        }
        while let Some(v) = queue.pop() {
            for &w in g.edges_of(v) {
                if (w as usize) < n && parent[w as usize] == UNSEEN {
                    parent[w as usize] = v;
                    queue.push(w);
                }
            }
        }
        RootTree { parent, root_of, statics: statics.to_vec() }
    }

    /// The root reaching `node` first and the nodes from its object to `node`; `None` when no
    /// root reaches it.
    pub(crate) fn path<'g>(&self, g: &'g ObjectGraph, node: u32) -> Option<(RootOf<'g>, Vec<u32>)> {
        if *self.parent.get(node as usize)? == UNSEEN {
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
}
