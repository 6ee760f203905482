//! Why an object is alive: every root that reaches it and a shortest path from each (SOS
//! `gcroot`), by one breadth-first search backwards from the object over the reversed
//! references, each step named by the field (or array element) of the object that leads on.
//!
//! Paths of one length are ordered handles first, then the finalization queue, then
//! (conservative) stack slots and registers. A held monitor's sync block is not a root the GC
//! marks from; it counts only when no other root reaches the object.

use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::gcdesc::GcDesc;
use crate::runtimes::dotnet::gc::graph::{ObjectGraph, RootKind};
use crate::runtimes::dotnet::gc::referrers::instance_fields;
use std::collections::VecDeque;

const UNSEEN: u32 = u32::MAX;

/// A path from a root to an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RootPath {
    /// Index into the graph's `roots`.
    pub(crate) root: usize,
    /// The nodes from the root's object to the object asked about.
    pub(crate) nodes: Vec<u32>,
}

/// A root kind's rank among paths of one length (handles first).
pub(crate) fn tier(kind: RootKind) -> u8 {
    match kind {
        RootKind::StrongHandle
        | RootKind::PinnedHandle
        | RootKind::AsyncPinnedHandle
        | RootKind::RefCountedHandle
        | RootKind::SizedRefHandle
        | RootKind::VariableHandle
        | RootKind::Static => 0,
        RootKind::DependentHandle => 1,
        RootKind::FinalizerQueue => 2,
        RootKind::Stack { .. } => 3,
        RootKind::SyncBlock => 4,
    }
}

/// How an object refers to the next one on a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Link {
    /// An instance field (its name from metadata, `<field 0x…>` when unreadable).
    Field(String),
    /// An element of an array.
    Element(u64),
    /// No field holds it: a dependent handle with this object as primary.
    Dependent,
}

/// How the object `from` refers to `to`: the first reference field (or element) holding it.
pub(crate) fn link(t: &Target, namer: &TypeNamer, l: &Layout, g: &ObjectGraph, from: u32, to: u32) -> Link {
    let (Some(mt), Some(at), Some(target)) = (g.method_table(from), g.address(from), g.address(to)) else {
        return Link::Dependent;
    };
    // The holders drop the sizes once the retained sizes are read: then read it as the walk does.
    let size = match g.sizes.get(from as usize) {
        Some(&s) => s as u64,
        None => match crate::runtimes::dotnet::gc::walk::TypeShape::read(t, mt, 0) {
            Ok(shape) => {
                let count = if shape.component_size != 0 { t.read_u32(at + 8, "component count").unwrap_or(0) } else { 0 };
                u32::try_from(shape.size(count)).unwrap_or(u32::MAX) as u64
            }
            Err(_) => return Link::Dependent,
        },
    };
    link_at(t, namer, l, (at, mt, size), target)
}

/// As [`link`], for the object at `at` of MethodTable `mt` and (SOS) `size` referring to the
/// object at `target`.
pub(crate) fn link_at(t: &Target, namer: &TypeNamer, l: &Layout, (at, mt, size): (u64, u64, u64), target: u64) -> Link {
    let Ok(desc) = GcDesc::read(t, mt) else { return Link::Dependent };
    let Ok(bytes) = t.mem.chunk(at, size as usize) else { return Link::Dependent };
    let mut found = None;
    let _ = desc.offsets(size, |off| {
        let o = off as usize;
        if found.is_none() && bytes.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))) == Some(target) {
            found = Some(off);
        }
    });
    let Some(off) = found else { return Link::Dependent };
    let flags = t.field_u32(mt, "MethodTable", "MTFlags").unwrap_or(0);
    if flags & 0x8000_0000 != 0 {
        // An array (strings hold no references): elements after the MT pointer and length.
        let component = (flags & 0xffff).max(1) as u64;
        return Link::Element(off.saturating_sub(16) / component);
    }
    match instance_fields(t, namer, l, mt).into_iter().find(|f| f.offset == off) {
        Some(f) => Link::Field(f.name),
        None => Link::Field(format!("<offset {off:#x}>")),
    }
}

/// Every root that reaches `target` (SOS `gcroot`'s "unique roots"), each with a shortest path
/// from it; shortest first, ties in root order (handles, then the finalization queue, then
/// stacks); at most `max` of them, and how many more there were. Held monitors' sync blocks
/// count only when nothing else reaches the object (the GC does not mark from them).
///
/// One backward search from the target over the reversed references gives every object's
/// distance to it; a root's path then steps, from its object, to any referent one step closer.
pub(crate) fn all_paths(g: &ObjectGraph, target: u32, max: usize) -> (Vec<RootPath>, usize) {
    let n = g.len();
    if (target as usize) >= n {
        return (Vec::new(), 0);
    }
    // Reversed references, CSR.
    let mut start = vec![0u32; n + 1];
    for &m in g.edges.iter() {
        if (m as usize) < n {
            start[m as usize + 1] += 1;
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut from = vec![0u32; start[n] as usize];
    for i in 0..n as u32 {
        for &m in g.edges_of(i) {
            if (m as usize) < n {
                from[fill[m as usize] as usize] = i;
                fill[m as usize] += 1;
            }
        }
    }
    drop(fill);
    let mut dist = vec![UNSEEN; n];
    dist[target as usize] = 0;
    let mut queue = VecDeque::from([target]);
    while let Some(m) = queue.pop_front() {
        for &p in &from[start[m as usize] as usize..start[m as usize + 1] as usize] {
            if dist[p as usize] == UNSEEN {
                dist[p as usize] = dist[m as usize] + 1;
                queue.push_back(p);
            }
        }
    }
    let reaching = |keep: &dyn Fn(RootKind) -> bool| -> Vec<usize> {
        let mut v: Vec<usize> = (0..g.roots.len()).filter(|&r| keep(g.roots[r].kind) && (g.roots[r].node as usize) < n && dist[g.roots[r].node as usize] != UNSEEN).collect();
        v.sort_by_key(|&r| (dist[g.roots[r].node as usize], tier(g.roots[r].kind), r));
        v
    };
    let mut roots = reaching(&|k| k != RootKind::SyncBlock);
    if roots.is_empty() {
        roots = reaching(&|k| k == RootKind::SyncBlock);
    }
    let more = roots.len().saturating_sub(max);
    let paths = roots
        .into_iter()
        .take(max)
        .map(|r| {
            let mut at = g.roots[r].node;
            let mut nodes = vec![at];
            while at != target {
                let d = dist[at as usize];
                match g.edges_of(at).iter().find(|&&m| (m as usize) < n && dist[m as usize] == d - 1) {
                    Some(&m) => {
                        at = m;
                        nodes.push(m);
                    }
                    None => break,
                }
            }
            RootPath { root: r, nodes }
        })
        .collect();
    (paths, more)
}
