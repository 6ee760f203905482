//! The GC heap as a graph: every object a node, every reference a field holds an edge, and the
//! roots that hold objects from outside the heap. This is the contract the heap's later readings
//! (why alive, dominators and retained sizes, diff) are built on:
//!
//! - Node `i` is the object at `addresses[i]`; `addresses` is sorted ascending and holds every
//!   object the walk found (free objects left out), so an address is a node by binary search
//!   ([`ObjectGraph::node_of`]).
//! - `types[i]` indexes `type_table` (the MethodTable; named through the heap's namer),
//!   `sizes[i]` is the size SOS reports for it (`dumpheap`/`objsize`: unaligned, saturated at
//!   `u32::MAX`).
//! - Edges are CSR: the targets of `i` are `edges[edge_start[i]..edge_start[i + 1]]`
//!   (`edge_start` has `len() + 1` entries), in field order, duplicates kept (two fields that
//!   hold one object are two edges). A field that holds no object of the walk (null, an address
//!   outside the heap, into an object's middle) is no edge. A dependent handle is an edge from
//!   its primary to its secondary, after the primary's own.
//! - `roots` holds every root read, each with its kind and where it is ([`RootSource`]); one
//!   object may be held by many roots. Roots that could not be read are diagnostics of the
//!   reading, never dropped silently.
//!
//! Memory: 4 + 4 + 8 bytes per node besides the edges (4 bytes each) and `edge_start`, so a
//! graph of N objects with E references takes about 20·N + 4·E bytes.
// The readings that build on the contract land next (#19); `expect` warns once they use it.
#![expect(dead_code, reason = "the heap graph's contract, before its first reading uses it")]

use serde::Serialize;

/// The object graph of one heap (see the module doc: the contract).
#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectGraph {
    /// Node i's object address, sorted ascending.
    pub(crate) addresses: Vec<u64>,
    /// Node i's index into `type_table`.
    pub(crate) types: Vec<u32>,
    /// MethodTables (named through the heap's type namer).
    pub(crate) type_table: Vec<u64>,
    /// Node i's size as SOS reports it (saturating).
    pub(crate) sizes: Vec<u32>,
    /// CSR: the edges of i are `edges[edge_start[i]..edge_start[i + 1]]`.
    pub(crate) edge_start: Vec<u32>,
    /// Target node indices (references to non-objects dropped).
    pub(crate) edges: Vec<u32>,
    pub(crate) roots: Vec<Root>,
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
    /// A dependent handle's primary: recorded as an edge primary → secondary; the handle itself
    /// is listed with this kind for the secondary so a path can name it.
    DependentHandle,
    /// Unreachable but finalizable: the finalizer thread will run its finalizer (f-reachable).
    FinalizerQueue,
    /// A thread's stack slot or register. `conservative`: found by scanning the frame's words,
    /// not from GC info (it may be a stale or non-reference word that happens to point at an
    /// object).
    Stack { conservative: bool },
    /// A sync block's object (the runtime keeps the object of a sync block in use alive).
    SyncBlock,
    /// A static field (held through the runtime's statics; named by class and field).
    Static,
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
    Static { method_table: u64, field_token: u32, handle: u64 },
}

impl ObjectGraph {
    /// The node of the object at `address`, if it is one.
    pub(crate) fn node_of(&self, address: u64) -> Option<u32> {
        self.addresses.binary_search(&address).ok().and_then(|i| u32::try_from(i).ok())
    }

    /// Nodes in the graph.
    pub(crate) fn len(&self) -> usize {
        self.addresses.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.addresses.is_empty()
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
