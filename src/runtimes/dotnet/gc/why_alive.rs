//! `knot heap root`: the heap read as a graph, the shortest path from a root to one object,
//! each object on it named by its type (as SOS's heap commands name it) and the field that
//! leads on, with how many roots of each kind were read.

use super::super::context::Context;
use super::super::facts;
use super::super::objects::TypeNamer;
use super::graph::{Root, RootKind};
use super::names::sos_heap_name;
use super::paths::{self, Link};
use super::roots::ThreadStack;
use crate::diagnostics::Diagnostic;
use std::collections::BTreeMap;

/// One object of the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) address: u64,
    pub(crate) type_name: String,
    /// As SOS reports it (unaligned).
    pub(crate) size: u64,
    /// How this object refers to the next one (`None` on the last).
    pub(crate) link: Option<Link>,
    /// The static field the element `link` names is, when this object is an array of statics.
    pub(crate) static_field: Option<super::static_names::StaticName>,
}

/// Why the object is alive, as read.
#[derive(Debug, Clone)]
pub(crate) struct WhyAlive {
    pub(crate) object: u64,
    /// `None` when the address is no object of the heap.
    pub(crate) object_type: Option<String>,
    pub(crate) object_size: Option<u64>,
    /// Every root that reaches it (at most [`MAX_ROOT_PATHS`]), each with the objects from
    /// its object to the one asked about, the shortest first; empty when no root reaches it.
    pub(crate) paths: Vec<(Root, Vec<Step>)>,
    /// Roots that reach it beyond those listed.
    pub(crate) more_roots: usize,
    /// Roots read, per kind (conservative stack roots apart).
    pub(crate) roots: BTreeMap<RootKind, usize>,
    pub(crate) handles_read: usize,
    pub(crate) objects: usize,
    pub(crate) references: usize,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// Roots (with their paths) listed per object at most.
pub(crate) const MAX_ROOT_PATHS: usize = 64;

/// Reads the heap of `runtime` as a graph (once) and finds why each of `addresses` is alive.
pub(crate) fn why_alive(runtime: &Context<'_>, threads: &[ThreadStack], addresses: &[u64]) -> Result<Vec<WhyAlive>, String> {
    let reading = super::read_graph(runtime, threads)?;
    let g = &reading.graph;
    let t = runtime.target();
    let namer = TypeNamer::new(&t, &runtime.image);
    let version = &runtime.version;
    let all = facts::builtin().map_err(|e| e.to_string())?;
    let build = facts::lookup(all, version.build_id.as_deref(), &version.product, version.file_version.as_deref()).ok_or("unsupported runtime build")?;
    let name = |node: u32| -> String {
        match g.method_table(node) {
            Some(mt) => namer.type_name(mt).map(|n| sos_heap_name(&n)).unwrap_or_else(|_| format!("<unknown type {mt:#x}>")),
            None => "<no type>".into(),
        }
    };
    let mut roots = BTreeMap::new();
    for r in &g.roots {
        *roots.entry(r.kind).or_insert(0) += 1;
    }
    // Read once, when a path goes through an array element (a statics array, perhaps).
    let slots = std::cell::OnceCell::new();
    let mut out = Vec::with_capacity(addresses.len());
    for &address in addresses {
        let node = g.node_of(address);
        let (found, more_roots) = node.map(|n| paths::all_paths(g, n, MAX_ROOT_PATHS)).unwrap_or_default();
        let paths = found.into_iter().map(|p| {
            let steps = p
                .nodes
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let link = p.nodes.get(i + 1).map(|&next| paths::link(&t, &namer, &build.layout, g, n, next));
                    let address = g.addresses[n as usize];
                    let static_field = match &link {
                        // A reference array's element k is at 16 + 8k.
                        Some(Link::Element(k)) if name(n) == "System.Object[]" => {
                            slots.get_or_init(|| super::static_names::static_slots(&t, &namer, &build.layout, g)).get(&(address + 16 + 8 * k)).cloned()
                        }
                        _ => None,
                    };
                    Step { address, type_name: name(n), size: g.sizes[n as usize] as u64, link, static_field }
                })
                .collect();
            (g.roots[p.root].clone(), steps)
        }).collect();
        out.push(WhyAlive {
            object: address,
            object_type: node.map(name),
            object_size: node.map(|n| g.sizes[n as usize] as u64),
            paths,
            more_roots,
            roots: roots.clone(),
            handles_read: reading.handles_read,
            objects: g.len(),
            references: g.edges.len(),
            diagnostics: reading.diagnostics.clone(),
        });
    }
    Ok(out)
}
