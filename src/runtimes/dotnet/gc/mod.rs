//! The GC heap of a .NET process: where it is, what fills it, and the GC's own state.
//!
//! The .NET 10 contract descriptor has no GC contract, so the way in is libcoreclr's exported
//! DAC table (`dactable`) to the GC's DAC interface `GcDacVars` (`gcvars`): the generation
//! tables, the segments or regions of each generation, the allocation contexts, the OOM
//! history. Which table slot is which variable is a per-build fact (`analyzers/dotnet/`).
//! Then every object is walked (`walk`, segments in parallel) and counted per type
//! (`stats`, named as SOS's heap commands name them: `names`); `state` says what the GC was
//! doing and whether it had run out of memory.

pub(crate) mod collection;
pub(crate) mod dactable;
pub(crate) mod gcdesc;
pub(crate) mod diff;
pub(crate) mod gcvars;
pub(crate) mod graph;
pub(crate) mod handles;
pub(crate) mod names;
pub(crate) mod node_index;
pub(crate) mod object_index;
pub(crate) mod first_path;
pub(crate) mod paths;
pub(crate) mod referrers;
pub(crate) mod report;
pub(crate) mod roots;
pub(crate) mod holders;
pub(crate) mod retained;
pub(crate) mod root_tree;
pub(crate) mod state;
pub(crate) mod static_names;
pub(crate) mod stats;
pub(crate) mod raw_refs;
pub(crate) mod readings;
pub(crate) mod walk;
pub(crate) mod why_alive;

pub(crate) use gcvars::{HeapLayout, Segment};
pub(crate) use state::GcState;
pub(crate) use stats::HeapStats;

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::contract::facts::{self, BuildFacts};
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::threads;
use crate::diagnostics::Diagnostic;
use crate::process::Process;
use std::collections::{BTreeMap, HashMap, HashSet};

pub(crate) const STAGE: &str = "dotnet-gc";

use crate::trace::step as trace;

/// `g_heap_type` values (gcinterface.h).
const GC_HEAP_WKS: u32 = 1;
const GC_HEAP_SVR: u32 = 2;

/// What knot read of the GC heap.
#[derive(Debug, Clone)]
pub struct GcReading {
    pub layout: HeapLayout,
    pub server: bool,
    pub heap_count: usize,
    pub segments: Vec<Segment>,
    pub stats: HeapStats,
    /// Segments whose walk stopped early: (segment, where, why).
    pub broken: Vec<(u64, u64, String)>,
    pub state: GcState,
    /// For each object asked about, the heap objects whose fields refer to it.
    pub(crate) referrers: BTreeMap<u64, Vec<referrers::Referrer>>,
    /// The async stacks (SOS `dumpasync`), from the tasks this walk collected; `None` when
    /// CoreLib's `Task` type was not found.
    pub(crate) async_stacks: Option<crate::runtimes::dotnet::tasks::async_stacks::AsyncReading>,
    /// The `System.Threading.SemaphoreSlim`s on the heap, address order.
    pub(crate) semaphores: Vec<crate::runtimes::dotnet::tasks::semaphores::Semaphore>,
    pub diagnostics: Vec<Diagnostic>,
    /// The walk's objects, when asked for: the object graph is built from them rather than
    /// from a second walk of the heap ([`read_graph`] takes them).
    pub(crate) walked: Option<Walked>,
    /// The heap had more objects than the walk's node cap: none was kept (`walked` is `None`),
    /// and the object graph is not to be built.
    pub(crate) over_node_cap: bool,
}

/// What one walk of every segment found, for the object graph: per segment (in the order of
/// [`GcReading::segments`]), its objects and where and why its walk stopped early; and every
/// object's references (so the graph's edges need not read the dump again).
#[derive(Debug, Clone, Default)]
pub(crate) struct Walked {
    pub(crate) nodes: Vec<walk::SegmentNodes>,
    pub(crate) broken: Vec<Option<(u64, String)>>,
    pub(crate) refs: raw_refs::RawRefs,
}

/// Which of the walk's wanted types an object is.
const WANTED_TASK: u8 = 0;
const WANTED_SEMAPHORE: u8 = 1;

/// A CoreLib type as the walk recognises it: CoreLib is the module of `System.String`'s
/// MethodTable; the type is found by name in its TypeDef table.
fn corelib_type(t: &Target, namer: &TypeNamer, string_mt: u64, namespace: &str, name: &str) -> Option<walk::WantedType> {
    let module = t.field_ptr(string_mt, "MethodTable", "Module").ok().filter(|&m| m != 0)?;
    let md = namer.module_metadata(module).ok()?;
    let rid = md.type_def_by_name(namer.image(), &format!("{namespace}.{name}")).ok()??;
    Some(walk::WantedType { module, rid })
}

/// Reads the GC heap of the .NET runtime in `process`; `None` when there is no readable .NET
/// runtime, `Err` with the reason when the heap cannot be read. The objects in `targets` (lock
/// objects) get their referrers. (The commands read it through the runtime handle.)
#[cfg(test)]
pub(crate) fn read(process: &Process, locator: &crate::process::Locator, targets: &[u64]) -> Option<Result<GcReading, String>> {
    let runtime = Context::open(process, locator).ok()?;
    Some(read_in(&runtime, targets, false))
}

/// Reads the GC heap of a located runtime; the objects in `targets` get their referrers.
/// `keep_nodes`: keep every object for the object graph ([`GcReading::walked`]).
pub(crate) fn read_in(runtime: &Context<'_>, targets: &[u64], keep_nodes: bool) -> Result<GcReading, String> {
    let version = &runtime.version;
    let t = runtime.target();
    let all = facts::builtin().map_err(|e| e.to_string())?;
    let Some(build) = facts::lookup(all, version.build_id.as_deref(), &version.product, version.file_version.as_deref()) else {
        return Err(format!("GC heap not read: unsupported runtime build {} {}", version.product, version.build_id.as_deref().unwrap_or("(no build-id)")));
    };
    let namer = TypeNamer::of(&t, runtime);
    let bundle_missing = runtime.single_file_metadata_missing().is_some();
    read_with(runtime.process, runtime.module, &t, build, &namer, targets, keep_nodes, bundle_missing)
}

/// As [`read_in`], keeping every object for the object graph (their references at `refs`:
/// memory or scratch files), with the referrers of `targets` found but not named: the stacks
/// decide which of them are wanted ([`Unresolved::resolve`]). With `node_cap`, objects are kept
/// only up to it (see [`walk::NodeCap`]).
pub(crate) fn walk_in(runtime: &Context<'_>, targets: &[u64], node_cap: Option<&walk::NodeCap>, refs: &crate::scratch::Place) -> Result<Unresolved, String> {
    let t = runtime.target();
    let build = build_facts(runtime)?;
    let namer = TypeNamer::of(&t, runtime);
    let bundle_missing = runtime.single_file_metadata_missing().is_some();
    walk_with(runtime.process, runtime.module, &t, build, &namer, targets, (Some(refs), node_cap), bundle_missing)
}

/// What every reading of the heap starts from: the GC's vars, its segments, the allocation
/// contexts the walk skips, the free and string MethodTables.
pub(crate) struct Prepared {
    pub(crate) vars: gcvars::GcVars,
    pub(crate) segments: Vec<Segment>,
    pub(crate) contexts: HashMap<u64, u64>,
    pub(crate) free_mt: u64,
    pub(crate) string_mt: u64,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// The build facts of a located runtime, or why there are none.
pub(crate) fn build_facts(runtime: &Context<'_>) -> Result<&'static BuildFacts, String> {
    let version = &runtime.version;
    let all = facts::builtin().map_err(|e| e.to_string())?;
    facts::lookup(all, version.build_id.as_deref(), &version.product, version.file_version.as_deref())
        .ok_or_else(|| format!("GC heap not read: unsupported runtime build {} {}", version.product, version.build_id.as_deref().unwrap_or("(no build-id)")))
}

pub(crate) fn prepare(module: &crate::process::Module, t: &Target, build: &BuildFacts) -> Result<Prepared, String> {
    let l = &build.layout;
    let mut diagnostics = Vec::new();
    let table = dactable::DacTable::locate(t, module, l.dac_table_thread_store).map_err(|e| format!("GC heap not read: {e}"))?;
    let vars_at = table.variable(t, l.dac_table_gc_dac_globals).and_then(|a| t.read_ptr(a, "g_gcDacGlobals")).map_err(|e| format!("GC heap not read: {e}"))?;
    if vars_at == 0 {
        return Err("GC heap not read: g_gcDacGlobals is null (the GC had not started)".into());
    }
    let heap_type = table.variable(t, l.dac_table_heap_type).and_then(|a| t.read_u32(a, "g_heap_type")).map_err(|e| format!("GC heap not read: {e}"))?;
    let server = match heap_type {
        GC_HEAP_WKS => false,
        GC_HEAP_SVR => true,
        other => return Err(format!("GC heap not read: g_heap_type is {other} (the GC had not started)")),
    };
    let constants = crate::runtimes::dotnet::contract::locate::catalogued(module).and_then(|b| b.gc_constants.as_ref()).map(|c| (c, module.bias));
    let vars = gcvars::GcVars::read(t, vars_at, server, constants).map_err(|e| format!("GC heap not read: {e}"))?;
    let (segments, errors) = vars.segments(t);
    for e in errors {
        let mut d = Diagnostic::warning(STAGE, format!("GC segment list: {e}"));
        if let Some(a) = e.address() {
            d = d.at_address(a);
        }
        diagnostics.push(d);
    }

    // Allocation contexts: every thread's, the global one, each heap's generations'.
    let mut contexts: HashMap<u64, u64> = HashMap::new();
    let mut add = |(ptr, limit): (u64, u64)| {
        if ptr != 0 && ptr < limit {
            contexts.insert(ptr, limit);
        }
    };
    if let Ok(ts) = threads::thread_store(t) {
        match threads::thread_addresses(t, ts) {
            Ok(list) => {
                for a in list {
                    if let Ok(th) = threads::read_thread(t, a, 0, 0) {
                        add(th.alloc_context);
                    }
                }
            }
            Err(e) => diagnostics.push(Diagnostic::warning(STAGE, format!("threads' allocation contexts not read: {e}"))),
        }
    }
    if let Ok(g) = table.variable(t, l.dac_table_global_alloc_context) {
        // ee_alloc_context: m_CombinedLimit, then the gc_alloc_context (pointer, limit).
        if let (Ok(p), Ok(lim)) = (t.read_ptr(g + 8, "g_global_alloc_context"), t.read_ptr(g + 16, "g_global_alloc_context")) {
            add((p, lim));
        }
    }
    for c in vars.heap_alloc_contexts() {
        add(c);
    }

    let free_mt = t.global_deref("FreeObjectMethodTable").map_err(|e| format!("GC heap not read: {e}"))?;
    let string_mt = t.global_deref("StringMethodTable").unwrap_or(0);
    Ok(Prepared { vars, segments, contexts, free_mt, string_mt, diagnostics })
}

/// As [`read`], given the runtime's target, build facts and type namer.
/// `bundle_missing`: the runtime is a single-file app's executable and CoreLib's metadata is in
/// neither the dump nor a file at hand ([`Context::single_file_metadata_missing`]), so every type
/// goes unnamed for that one reason, said once.
#[allow(clippy::too_many_arguments, reason = "the reading's inputs, passed once by read_in")]
pub(crate) fn read_with(
    process: &Process,
    module: &crate::process::Module,
    t: &Target,
    build: &BuildFacts,
    namer: &TypeNamer,
    targets: &[u64],
    keep_nodes: bool,
    bundle_missing: bool,
) -> Result<GcReading, String> {
    let keep = keep_nodes.then_some(&crate::scratch::Place::Memory);
    let Unresolved { mut reading, hits, string_mt, .. } = walk_with(process, module, t, build, namer, targets, (keep, None), bundle_missing)?;
    reading.referrers = name_referrers(t, namer, &build.layout, &hits, string_mt);
    Ok(reading)
}

/// As [`read_with`], the referrers of `targets` found but not yet named ([`Unresolved::resolve`]).
/// `keep`: where the objects' references are kept for the graph, when its objects are.
#[allow(clippy::too_many_arguments, reason = "the reading's inputs, passed once by read_with")]
fn walk_with(
    process: &Process,
    module: &crate::process::Module,
    t: &Target,
    build: &BuildFacts,
    namer: &TypeNamer,
    targets: &[u64],
    (keep, node_cap): (Option<&crate::scratch::Place>, Option<&walk::NodeCap>),
    bundle_missing: bool,
) -> Result<Unresolved, String> {
    let l = &build.layout;
    let Prepared { vars, segments, contexts, free_mt, string_mt, mut diagnostics } = prepare(module, t, build)?;
    let target_set: HashSet<u64> = targets.iter().copied().filter(|&a| a != 0).collect();
    let task_type = corelib_type(t, namer, string_mt, "System.Threading.Tasks", "Task");
    let semaphore_type = corelib_type(t, namer, string_mt, "System.Threading", "SemaphoreSlim");
    // Indexes are WANTED_TASK and WANTED_SEMAPHORE: a missing type is one no MethodTable matches.
    let none = walk::WantedType { module: u64::MAX, rid: u32::MAX };
    let wanted = [task_type.unwrap_or(none), semaphore_type.unwrap_or(none)];
    if task_type.is_none() {
        diagnostics.push(Diagnostic::warning(STAGE, "System.Threading.Tasks.Task not found in CoreLib's metadata: async stacks not read"));
    }
    let sink = keep.map(|place| raw_refs::RefSink::of(&segments, place));
    let input = walk::WalkInput { t, alloc_contexts: &contexts, free_mt, targets: &target_set, string_mt, core: Some(&process.core), wanted: &wanted, collect: sink.as_ref(), node_cap };
    trace("heap: prepared");
    let mut walks = walk::walk_all(&input, &segments);
    trace("heap: walked");
    let over_node_cap = node_cap.is_some_and(|c| c.exceeded());
    let walked = sink.filter(|_| !over_node_cap).map(|sink| Walked {
        nodes: walks.iter_mut().map(|w| std::mem::take(&mut w.nodes)).collect(),
        broken: walks.iter().map(|w| w.broken.clone()).collect(),
        refs: sink.into_refs(walks.iter_mut().map(|w| std::mem::take(&mut w.refs)).collect()),
    });
    let mut broken = Vec::new();
    for (s, w) in segments.iter().zip(&walks) {
        if let Some((at, why)) = &w.broken {
            diagnostics.push(Diagnostic::warning(STAGE, format!("the walk of {:?} region {:#x} stopped at {at:#x}: {why}", s.kind, s.address)).at_address(*at));
            broken.push((s.address, *at, why.clone()));
        }
    }
    // The bad objects passed are counted in the statistics (the heap's line says how many), as
    // SOS counts them: no warning, as SOS gives none.
    let (stats, name_errors) = stats::heap_stats(&walks, free_mt, namer);
    // One warning per cause: a module whose metadata is not in the dump (a single-file app's
    // assemblies live in its executable) fails every one of its types the same way.
    let mut by_cause: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (mt, e) in name_errors {
        by_cause.entry(e.to_string()).or_default().push(mt);
    }
    // Unnamed types of a single-file app read without its bundle: say once what would name them
    // (the same test as the verdict's limit, not merely "not libcoreclr.so": a full dump of such
    // an app names its types, and a type it cannot name has another cause).
    if !by_cause.is_empty() && bundle_missing {
        let build = module.build_id_hex().map(|b| format!(" (build-id {b})")).unwrap_or_default();
        diagnostics.push(Diagnostic::warning(
            STAGE,
            format!(
                "types unnamed: {} is a single-file app, whose assemblies are bundled in the executable and not in this dump; pass the directory holding that executable{build} with --search-dir, or take a full dump (createdump --full; DOTNET_DbgMiniDumpType=4 for the runtime's own dumps)",
                module.path
            ),
        ));
    }
    for (e, mut mts) in by_cause {
        mts.sort_unstable();
        let d = match mts.as_slice() {
            [mt] => Diagnostic::warning(STAGE, format!("type name of MethodTable {mt:#x}: {e}")),
            [first, ..] => Diagnostic::warning(STAGE, format!("type names of {} MethodTables (the first {first:#x}): {e}", mts.len())),
            [] => continue,
        };
        diagnostics.push(d.at_address(mts[0]));
    }
    let state = state::gc_state(process, t, &vars, &segments);
    let collected_cut: u64 = walks.iter().map(|w| w.collected_cut).sum();
    if collected_cut > 0 {
        diagnostics.push(Diagnostic::warning(STAGE, format!("{collected_cut} tasks and semaphores past {} per heap segment were not collected: async stacks are cut", walk::MAX_COLLECTED_PER_SEGMENT)));
    }
    // SOS skips objects of 24 bytes or less: too small to be a task.
    let mut tasks: Vec<(u64, u64)> =
        walks.iter().flat_map(|w| w.collected.iter()).filter(|c| c.wanted == WANTED_TASK && c.size > walk::MIN_OBJECT_SIZE).map(|c| (c.address, c.method_table)).collect();
    let mut semaphores: Vec<(u64, u64)> = walks.iter().flat_map(|w| w.collected.iter()).filter(|c| c.wanted == WANTED_SEMAPHORE).map(|c| (c.address, c.method_table)).collect();
    // Address order, as SOS walks the heap: the segments come in generation order (gen0's regions
    // before gen2's), which on a heap with several regions is not the order dumpasync lists.
    tasks.sort_unstable();
    semaphores.sort_unstable();
    let async_stacks = task_type.map(|tt| crate::runtimes::dotnet::tasks::async_stacks::read(t, namer, l, tt, &tasks));
    let semaphores = crate::runtimes::dotnet::tasks::semaphores::read(t, namer, l, &semaphores);
    let hits_capped = walks.iter().any(|w| w.hits.len() >= walk::MAX_HITS_PER_SEGMENT);
    let hits: Vec<walk::Hit> = walks.iter().flat_map(|w| w.hits.iter().copied()).collect();
    let reading = GcReading {
        layout: vars.layout,
        server: vars.server,
        heap_count: vars.heaps.len(),
        segments,
        stats,
        broken,
        state,
        referrers: BTreeMap::new(),
        async_stacks,
        semaphores,
        diagnostics,
        walked,
        over_node_cap,
    };
    Ok(Unresolved { reading, hits, hits_capped, targets: target_set, string_mt })
}

/// A heap walk whose referrers are not yet named: what [`walk_with`] found of every target.
#[derive(Debug)]
pub(crate) struct Unresolved {
    /// The reading, its `referrers` empty.
    pub(crate) reading: GcReading,
    /// Every word that held a target's address, in walk order (segment by segment).
    hits: Vec<walk::Hit>,
    /// Some segment kept [`walk::MAX_HITS_PER_SEGMENT`] hits and scanned no further.
    hits_capped: bool,
    /// The targets the walk looked for.
    targets: HashSet<u64>,
    string_mt: u64,
}

impl Unresolved {
    /// The reading with the referrers of `targets`, named; `None` when this walk cannot say
    /// what a walk for exactly `targets` would have found: it did not look for one of them, or
    /// it looked for others too and a segment's hits were cut (theirs may have crowded out
    /// those of `targets`).
    pub(crate) fn resolve(self, runtime: &Context<'_>, targets: &[u64]) -> Option<GcReading> {
        let wanted: HashSet<u64> = targets.iter().copied().filter(|&a| a != 0).collect();
        if !wanted.is_subset(&self.targets) || (self.hits_capped && wanted != self.targets) {
            return None;
        }
        let Unresolved { mut reading, hits, string_mt, .. } = self;
        // A walk for fewer targets finds, in each segment not cut, their hits in the same order.
        let hits: Vec<walk::Hit> = hits.into_iter().filter(|h| wanted.contains(&h.target)).collect();
        if !hits.is_empty() {
            let t = runtime.target();
            let namer = TypeNamer::of(&t, runtime);
            let layout = &build_facts(runtime).ok()?.layout;
            reading.referrers = name_referrers(&t, &namer, layout, &hits, string_mt);
        }
        Some(reading)
    }
}

/// The hits' referrers, named, by target (at most [`referrers::MAX_REFERRERS`] each, in hit order).
fn name_referrers(t: &Target, namer: &TypeNamer, l: &facts::Layout, hits: &[walk::Hit], string_mt: u64) -> BTreeMap<u64, Vec<referrers::Referrer>> {
    let mut by_target: BTreeMap<u64, Vec<referrers::Referrer>> = BTreeMap::new();
    for (target, r) in referrers::resolve(t, namer, l, hits, string_mt) {
        let v = by_target.entry(target).or_default();
        if v.len() < referrers::MAX_REFERRERS {
            v.push(r);
        }
    }
    by_target
}

/// The heap as a graph ([`graph::ObjectGraph`]) with its roots, and what could not be read.
#[derive(Debug, Clone)]
pub(crate) struct GraphReading {
    pub(crate) graph: graph::ObjectGraph,
    /// Handles in use read from the handle table (rooting or not).
    pub(crate) handles_read: usize,
    /// What could not be read (walks stopped early, refused GC descriptions, unreadable roots).
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// Reads the heap of a located runtime as a graph: every object, its references, and the
/// roots (handles, finalization queue, sync blocks, and the stacks of `threads`). The objects
/// are `walked` when an earlier walk of the same segments kept them, else walked here.
pub(crate) fn read_graph(runtime: &Context<'_>, threads: &[roots::ThreadStack], walked: Option<Walked>) -> Result<GraphReading, String> {
    Ok(graph_ahead(runtime, walked, &crate::scratch::Place::Memory)?.finish(runtime, threads))
}

/// The object graph with every root but the stacks': what [`read_graph`] reads before it needs
/// the threads' stacks ([`GraphAhead::finish`] adds them).
pub(crate) struct GraphAhead {
    graph: graph::ObjectGraph,
    roots: roots::RootsAhead,
    /// What the edges could not read (after the roots' errors in the reading).
    edge_errors: graph::GraphErrors,
    diagnostics: Vec<Diagnostic>,
}

/// [`read_graph`] up to the stack roots: the nodes, the edges, the other roots.
/// The graph's large arrays live at `place` (memory or scratch files).
pub(crate) fn graph_ahead(runtime: &Context<'_>, walked: Option<Walked>, place: &crate::scratch::Place) -> Result<GraphAhead, String> {
    let t = runtime.target();
    let build = build_facts(runtime)?;
    let Prepared { vars, segments, contexts, free_mt, string_mt, mut diagnostics } = prepare(runtime.module, &t, build)?;
    let walked = match walked {
        Some(w) if w.nodes.len() == segments.len() && w.broken.len() == segments.len() && w.refs.segments() == segments.len() => w,
        _ => {
            let none = HashSet::new();
            let sink = raw_refs::RefSink::of(&segments, place);
            let input = walk::WalkInput { t: &t, alloc_contexts: &contexts, free_mt, targets: &none, string_mt, core: Some(&runtime.process.core), wanted: &[], collect: Some(&sink), node_cap: None };
            let mut walks = walk::walk_all(&input, &segments);
            let broken = walks.iter().map(|w| w.broken.clone()).collect();
            let refs = sink.into_refs(walks.iter_mut().map(|w| std::mem::take(&mut w.refs)).collect());
            Walked { nodes: walks.into_iter().map(|w| w.nodes).collect(), broken, refs }
        }
    };
    let Walked { nodes, broken, refs } = walked;
    for (s, b) in segments.iter().zip(&broken) {
        if let Some((at, why)) = b {
            diagnostics.push(Diagnostic::warning(STAGE, format!("the walk of {:?} region {:#x} stopped at {at:#x}: {why}; objects past it are not in the graph", s.kind, s.address)).at_address(*at));
        }
    }
    trace("graph: walk taken");
    // Which of each segment's references are of nodes (taken before the nodes consume the
    // walk's lists).
    let parts = refs.in_node_order(&nodes);
    let (mut g, overlapped) = graph::nodes(nodes, place);
    if overlapped.objects > 0 {
        diagnostics.push(
            Diagnostic::warning(STAGE, format!("{} objects of heap segments overlapping earlier ones are not in the graph (the first at {:#x}): the GC's segment list is damaged", overlapped.objects, overlapped.first))
                .at_address(overlapped.first),
        );
    }
    trace("graph: nodes");
    let sync = crate::runtimes::dotnet::threads::syncblock::read_cache(&t, runtime.module, &build.layout).ok();
    let roots = roots::read_ahead(&t, &build.layout, &vars, sync, &g);
    trace("graph: roots but the stacks'");
    let mut edge_errors = graph::GraphErrors::default();
    let dependent = roots.dependent(&g);
    graph::edges(&mut g, refs, &parts, &dependent, &mut edge_errors);
    trace("graph: edges");
    Ok(GraphAhead { graph: g, roots, edge_errors, diagnostics })
}

impl GraphAhead {
    /// The graph with the stack roots of `threads`, as [`read_graph`] reads it.
    pub(crate) fn finish(self, runtime: &Context<'_>, threads: &[roots::ThreadStack]) -> GraphReading {
        let GraphAhead { mut graph, roots, edge_errors, mut diagnostics } = self;
        let reading = roots.finish(&runtime.target(), &graph, threads);
        trace("graph: roots");
        let mut errors = reading.errors;
        errors.extend(edge_errors);
        graph.roots = reading.roots;
        for (at, why) in errors.errors {
            let d = Diagnostic::warning(STAGE, why);
            diagnostics.push(if at != 0 { d.at_address(at) } else { d });
        }
        if errors.more > 0 {
            diagnostics.push(Diagnostic::warning(STAGE, format!("{} more objects or roots of the heap graph not read", errors.more)));
        }
        GraphReading { graph, handles_read: reading.handles_read, diagnostics }
    }
}

#[cfg(test)]
/// For each address of `from`, the objects reachable from it through references (dependent
/// handles included), itself first then ascending — what SOS `objsize` lists; `None` for an
/// address that is no object of the heap. `Err` when the heap cannot be read.
pub(crate) fn reachable(process: &Process, locator: &crate::process::Locator, from: &[u64]) -> Result<Vec<Option<Vec<u64>>>, String> {
    let runtime = Context::open(process, locator).map_err(|e| e.why().map(|(_, w)| w).unwrap_or_else(|| "not a .NET process".into()))?;
    let g = read_graph(&runtime, &[], None)?.graph;
    Ok(from
        .iter()
        .map(|&a| {
            let start = g.node_of(a)?;
            let mut seen = vec![false; g.len()];
            let mut stack = vec![start];
            seen[start as usize] = true;
            let mut out = Vec::new();
            while let Some(n) = stack.pop() {
                out.push(g.address(n).unwrap_or(0));
                for &m in g.edges_of(n) {
                    if !seen[m as usize] {
                        seen[m as usize] = true;
                        stack.push(m);
                    }
                }
            }
            out[1..].sort_unstable();
            Some(out)
        })
        .collect())
}
