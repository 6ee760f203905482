//! The shortest path from the root set to one object without building the object graph: a
//! breadth-first search forward from the roots, each object's references read on demand from
//! its GC description, objects found through [`ObjectIndex`] (a lazy walk), stopping as soon as
//! the object is reached. Its cost depends on where the object sits, as SOS `gcroot`'s does.
//!
//! The roots start the search in the order [`crate::runtimes::dotnet::gc::paths::all_paths`] ranks them (handles,
//! the finalization queue, stacks; in read order within a kind), and each object's references
//! are followed in field order, then its dependent handles' secondaries: so the path found is
//! the one the whole graph's search gives first (the breadth-first tree's path to a node is its
//! smallest shortest path in that order). Held monitors' sync blocks start a second search only
//! when the first reaches nothing (the GC does not mark from them).

use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::gcdesc::GcDesc;
use crate::runtimes::dotnet::gc::graph::{GraphErrors, RootKind};
use crate::runtimes::dotnet::gc::object_index::ObjectIndex;
use crate::runtimes::dotnet::gc::paths::tier;
use crate::runtimes::dotnet::gc::roots::RootsAt;
use rustc_hash::FxHashMap;

const NO_PARENT: u32 = u32::MAX;

/// What the search found.
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstPath {
    /// The root (index into the roots) and the objects from its object to the target.
    pub(crate) path: Option<(usize, Vec<u64>)>,
    /// The other roots that hold the target itself, in rank order.
    pub(crate) direct: Vec<usize>,
    /// Addresses the search reached (objects, and words that looked like references to one until
    /// expanded) and the non-null references it read.
    pub(crate) visited: usize,
    pub(crate) references: usize,
}

/// One visited object: its address, the queue index of the object it was reached from
/// ([`NO_PARENT`] for a root's) and the root it descends from.
struct Entry {
    address: u64,
    parent: u32,
    root: u32,
}

/// Searches from `roots` for the object at `target` (an object of `index`).
pub(crate) fn first_path(t: &Target, index: &mut ObjectIndex, roots: &RootsAt, target: u64, errors: &mut GraphErrors) -> FirstPath {
    let mut out = FirstPath::default();
    if !index.is_object(target) {
        return out;
    }
    let mut ranked: Vec<usize> = (0..roots.roots.len()).collect();
    ranked.sort_by_key(|&r| (tier(roots.roots[r].kind), r));
    let (sync, others): (Vec<usize>, Vec<usize>) = ranked.into_iter().partition(|&r| roots.roots[r].kind == RootKind::SyncBlock);
    let mut descs: FxHashMap<u64, Option<GcDesc>> = FxHashMap::default();
    let mut queue: Vec<Entry> = Vec::new();
    for phase in [others, sync] {
        let holding: Vec<usize> = phase.iter().copied().filter(|&r| roots.roots[r].object == target).collect();
        if let Some((&first, rest)) = holding.split_first() {
            out.path = Some((first, vec![target]));
            out.direct = rest.to_vec();
            break;
        }
        let head = queue.len();
        for &r in &phase {
            let a = roots.roots[r].object;
            if index.visit(a) {
                queue.push(Entry { address: a, parent: NO_PARENT, root: r as u32 });
            }
        }
        if let Some(found) = search(t, index, roots, target, &mut queue, head, &mut descs, &mut out.references, errors) {
            let mut path = vec![target];
            let mut at = found;
            loop {
                let e = &queue[at as usize];
                path.push(e.address);
                if e.parent == NO_PARENT {
                    break;
                }
                at = e.parent;
            }
            path.reverse();
            out.path = Some((queue[found as usize].root as usize, path));
            break;
        }
    }
    out.visited = queue.len();
    out
}

/// The breadth-first search over `queue` from `head`: the queue index of the object whose
/// reference reaches `target` first.
#[allow(clippy::too_many_arguments, reason = "the search's state, passed once")]
fn search(t: &Target, index: &mut ObjectIndex, roots: &RootsAt, target: u64, queue: &mut Vec<Entry>, mut head: usize, descs: &mut FxHashMap<u64, Option<GcDesc>>, references: &mut usize, errors: &mut GraphErrors) -> Option<u32> {
    let mut refs: Vec<u64> = Vec::new();
    while head < queue.len() {
        let at = queue[head].address;
        refs.clear();
        // Addresses are queued unchecked; only those expanded are asked whether they are objects.
        if !index.is_object(at) {
            head += 1;
            continue;
        }
        if let Some((mt, size)) = index.object(at) {
            let desc = descs.entry(mt).or_insert_with(|| match GcDesc::read(t, mt) {
                Ok(d) => Some(d),
                Err(e) => {
                    errors.push(mt, format!("{e}; objects of this type have no references in the graph"));
                    None
                }
            });
            if let Some(desc) = desc.as_ref()
                && *desc != GcDesc::None
            {
                match t.mem.chunk(at, size as usize) {
                    Ok(bytes) if bytes.len() as u64 >= size => {
                        let r = desc.offsets(size, |off| {
                            let o = off as usize;
                            if let Some(w) = bytes.get(o..o + 8) {
                                refs.push(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
                            }
                        });
                        if let Err(why) = r {
                            refs.clear();
                            errors.push(at, format!("references of the object at {at:#x} (MethodTable {mt:#x}) not read: {why}"));
                        }
                    }
                    _ => errors.push(at, format!("references of the object at {at:#x} not read: its {size} bytes are not in the dump")),
                }
            }
        }
        // A dependent handle: an edge primary → secondary after the primary's own.
        let d = roots.dependent.partition_point(|e| e.0 < at);
        refs.extend(roots.dependent[d..].iter().take_while(|e| e.0 == at).map(|e| e.1));
        for &v in &refs {
            if v == 0 {
                continue;
            }
            *references += 1;
            if v == target {
                return Some(head as u32);
            }
            // Queue indices are u32: a heap past them is searched no further (said once).
            if queue.len() >= NO_PARENT as usize {
                errors.push(0, format!("more than {NO_PARENT} objects on the search: the rest are not searched"));
                return None;
            }
            if index.visit(v) {
                queue.push(Entry { address: v, parent: head as u32, root: queue[head].root });
            }
        }
        head += 1;
    }
    None
}
