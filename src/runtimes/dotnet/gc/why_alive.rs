//! `knot heap root`: the heap read as a graph, the shortest path from a root to one object,
//! each object on it named by its type (as SOS's heap commands name it) and the field that
//! leads on, with how many roots of each kind were read.

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::contract::facts;
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::gc::first_path;
use crate::runtimes::dotnet::gc::graph::{GraphErrors, RootKind};
use crate::runtimes::dotnet::gc::object_index::ObjectIndex;
use crate::runtimes::dotnet::gc::paths::{self, Link};
use crate::runtimes::dotnet::gc::roots::{Objects, RootAt, ThreadStack};
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
    pub(crate) static_field: Option<crate::runtimes::dotnet::gc::static_names::StaticName>,
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
    pub(crate) paths: Vec<(RootAt, Vec<Step>)>,
    /// Roots that reach it beyond those listed.
    pub(crate) more_roots: usize,
    /// Roots read, per kind (conservative stack roots apart).
    pub(crate) roots: BTreeMap<RootKind, usize>,
    pub(crate) handles_read: usize,
    /// Every root was searched (the whole graph read): `paths` lists every root that reaches
    /// the object. Else the search stopped at the first path, and `paths` adds only the other
    /// roots that hold the object itself.
    pub(crate) all_roots: bool,
    /// The graph's objects and references; for a search that stopped early, the objects it
    /// visited and the (non-null) references it read.
    pub(crate) objects: usize,
    pub(crate) references: usize,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// Roots (with their paths) listed per object at most.
pub(crate) const MAX_ROOT_PATHS: usize = 64;

/// Finds why each of `addresses` is alive in the heap of `runtime` read as a graph (`reading`,
/// with its stack roots).
pub(crate) fn why_alive(runtime: &Context<'_>, reading: crate::runtimes::dotnet::gc::GraphReading, addresses: &[u64]) -> Result<Vec<WhyAlive>, String> {
    let g = &reading.graph;
    let t = runtime.target();
    let namer = TypeNamer::of(&t, runtime);
    let version = &runtime.version;
    let all = facts::builtin().map_err(|e| e.to_string())?;
    let build = facts::lookup(all, version.build_id.as_deref(), &version.product, version.file_version.as_deref()).ok_or("unsupported runtime build")?;
    let name = |node: u32| -> String {
        match g.method_table(node) {
            Some(mt) => namer.heap_type_name(mt).unwrap_or_else(|_| format!("<unknown type {mt:#x}>")),
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
                    let address = g.address(n).unwrap_or(0);
                    let static_field = match &link {
                        // A reference array's element k is at 16 + 8k.
                        Some(Link::Element(k)) if name(n) == "System.Object[]" => {
                            slots.get_or_init(|| crate::runtimes::dotnet::gc::static_names::static_slots(&t, &namer, &build.layout, g)).get(&(address + 16 + 8 * k)).cloned()
                        }
                        _ => None,
                    };
                    Step { address, type_name: name(n), size: g.sizes[n as usize] as u64, link, static_field }
                })
                .collect();
            let r = &g.roots[p.root];
            (RootAt { kind: r.kind, object: g.address(r.node).unwrap_or(0), source: r.source.clone() }, steps)
        }).collect();
        out.push(WhyAlive {
            object: address,
            object_type: node.map(name),
            object_size: node.map(|n| g.sizes[n as usize] as u64),
            paths,
            more_roots,
            roots: roots.clone(),
            handles_read: reading.handles_read,
            all_roots: true,
            objects: g.len(),
            references: g.edges.len(),
            diagnostics: reading.diagnostics.clone(),
        });
    }
    Ok(out)
}

/// Finds why each of `addresses` is alive without reading the whole heap as a graph: per
/// object, a search from the roots that stops at the first (shortest) path
/// ([`first_path::first_path`]), the heap walked only as far as the search needs. The path is
/// the one [`why_alive`] gives first; of the other roots only those holding the object itself
/// are listed.
pub(crate) fn first_paths(runtime: &Context<'_>, threads: &[ThreadStack], addresses: &[u64]) -> Result<Vec<WhyAlive>, String> {
    let build = crate::runtimes::dotnet::gc::build_facts(runtime)?;
    let t = runtime.target();
    let crate::runtimes::dotnet::gc::Prepared { vars, segments, contexts, free_mt, diagnostics: prepared, .. } = crate::runtimes::dotnet::gc::prepare(runtime.module, &t, build)?;
    let namer = TypeNamer::of(&t, runtime);
    let mut index = ObjectIndex::new(&t, &contexts, &segments, free_mt);
    let bounds = index.bounds;
    let roots = {
        let mut is_object = |a: u64| index.is_object(a);
        let sync = crate::runtimes::dotnet::threads::syncblock::read_cache(&t, runtime.module, &build.layout).ok();
        crate::runtimes::dotnet::gc::roots::read_at(&t, &build.layout, &vars, sync, &mut Objects { bounds, is_object: &mut is_object }, threads)
    };
    let mut counts = BTreeMap::new();
    for r in &roots.roots {
        *counts.entry(r.kind).or_insert(0) += 1;
    }
    let mut slots: Option<(usize, std::collections::HashMap<u64, crate::runtimes::dotnet::gc::static_names::StaticName>)> = None;
    let mut out = Vec::with_capacity(addresses.len());
    for &address in addresses {
        let mut errors = GraphErrors { errors: roots.errors.errors.clone(), more: roots.errors.more };
        // Each object's search starts afresh.
        index.clear_visited();
        let found = first_path::first_path(&t, &mut index, &roots, address, &mut errors);
        let object = index.is_object(address).then(|| index.object(address)).flatten();
        let name = |mt: u64| namer.heap_type_name(mt).unwrap_or_else(|_| format!("<unknown type {mt:#x}>"));
        let mut paths = Vec::new();
        if let Some((root, nodes)) = &found.path {
            let mut steps = Vec::with_capacity(nodes.len());
            for (i, &a) in nodes.iter().enumerate() {
                let Some((mt, size)) = index.object(a) else { break };
                let link = nodes.get(i + 1).map(|&next| paths::link_at(&t, &namer, &build.layout, (a, mt, size), next));
                let type_name = name(mt);
                let static_field = match &link {
                    // A reference array's element k is at 16 + 8k.
                    Some(Link::Element(k)) if type_name == "System.Object[]" => {
                        let slot = a + 16 + 8 * k;
                        // The modules of the types walked so far name it, most often; else
                        // those of every type of the heap, as the whole graph's reading does —
                        // only for the path's first object: the statics' arrays are held by
                        // handles (a walk of the whole heap for any other array would be waste).
                        for complete in [false, true] {
                            if complete && i > 0 {
                                break;
                            }
                            if slots.as_ref().is_some_and(|(_, m)| m.contains_key(&slot)) {
                                break;
                            }
                            if complete {
                                index.walk_all();
                            }
                            let mts = index.method_tables();
                            if slots.as_ref().is_none_or(|(n, _)| *n < mts.len()) {
                                slots = Some((mts.len(), crate::runtimes::dotnet::gc::static_names::static_slots_of(&t, &namer, &build.layout, &mts)));
                            }
                        }
                        slots.as_ref().and_then(|(_, m)| m.get(&slot).cloned())
                    }
                    _ => None,
                };
                steps.push(Step { address: a, type_name, size, link, static_field });
            }
            paths.push((roots.roots[*root].clone(), steps));
            for &r in &found.direct {
                if paths.len() >= MAX_ROOT_PATHS {
                    break;
                }
                let steps = object.map(|(mt, size)| vec![Step { address, type_name: name(mt), size, link: None, static_field: None }]).unwrap_or_default();
                paths.push((roots.roots[r].clone(), steps));
            }
        }
        let more_roots = (found.path.is_some() as usize + found.direct.len()).saturating_sub(paths.len());
        let mut diagnostics = prepared.clone();
        for (s, at, why) in index.broken() {
            diagnostics.push(Diagnostic::warning(crate::runtimes::dotnet::gc::STAGE, format!("the walk of {:?} region {:#x} stopped at {at:#x}: {why}; objects past it are not searched", s.kind, s.address)).at_address(at));
        }
        for (at, why) in errors.errors {
            let d = Diagnostic::warning(crate::runtimes::dotnet::gc::STAGE, why);
            diagnostics.push(if at != 0 { d.at_address(at) } else { d });
        }
        if errors.more > 0 {
            diagnostics.push(Diagnostic::warning(crate::runtimes::dotnet::gc::STAGE, format!("{} more objects or roots of the heap not read", errors.more)));
        }
        out.push(WhyAlive {
            object: address,
            object_type: object.map(|(mt, _)| name(mt)),
            object_size: object.map(|(_, size)| size),
            paths,
            more_roots,
            roots: counts.clone(),
            handles_read: roots.handles_read,
            all_roots: false,
            objects: found.visited,
            references: found.references,
            diagnostics,
        });
    }
    Ok(out)
}
