//! The `knot heap` commands on .NET dumps: a dump's GC heap read alone (no stacks, no locks:
//! `knot heap stat CORE`, SOS `dumpheap -stat`), two dumps of one program compared (`knot heap
//! diff OLD NEW`), and why an object is alive (`knot heap root CORE ADDRESS`: the paths from its
//! roots).

use crate::core::CoreError;
use crate::diagnostics::Diagnostic;
use crate::process::{Locator, Process};
use crate::report::heap_diff::HeapDiffReport;
use crate::report::heap_stat::HeapStatReport;
use crate::threads::FrameReport;
use crate::runtimes::dotnet::gc::roots::{StackFrame, ThreadStack};
use crate::runtimes::dotnet::gc::{self, diff, GcReading};
use crate::runtimes::dotnet::{self as dotnet, context::Context};
use crate::unwind::{Stack, StackEnd};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default)]
pub struct HeapOptions {
    /// Where module files are looked for (the runtime's, when the catalogue lacks its build).
    pub locator: Locator,
    /// A compressed core is decompressed to at most this many bytes (None: the default).
    pub max_decompressed: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum HeapError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("{path}: no .NET runtime found in the dump")]
    NoRuntime { path: PathBuf },
    #[error("{path}: {why}")]
    NotRead { path: PathBuf, why: String },
}

/// One dump's heap.
pub(crate) struct HeapDump {
    pub(crate) path: PathBuf,
    pub(crate) process: Process,
    pub(crate) gc: GcReading,
}

/// Opens the dump at `path` and walks its GC heap.
pub(crate) fn read(path: &Path, opts: &HeapOptions) -> Result<HeapDump, HeapError> {
    let limit = opts.max_decompressed.unwrap_or(crate::core::compressed::DEFAULT_MAX_DECOMPRESSED);
    let process = Process::open_limited(path, &opts.locator, limit)?;
    let gc = match gc::read(&process, &opts.locator, &[]) {
        None => return Err(HeapError::NoRuntime { path: path.to_path_buf() }),
        Some(Err(why)) => return Err(HeapError::NotRead { path: path.to_path_buf(), why }),
        Some(Ok(g)) => g,
    };
    if process.core.changed_while_read() {
        return Err(CoreError::ChangedWhileRead { path: path.to_path_buf() }.into());
    }
    Ok(HeapDump { path: path.to_path_buf(), process, gc })
}

/// The threads' stacks as the heap graph's stack roots read them: each frame's stack pointer,
/// code address, registers (managed frames only) and whether it is managed (from `frames`, the
/// report's frames of the same stacks).
pub(crate) fn thread_stacks(process: &Process, context: &Context<'_>, stacks: &[Stack], frames: &[Vec<FrameReport>]) -> Vec<ThreadStack> {
    use crate::arch::x86_64::dwarf;
    let t = context.target();
    let mut managed_ids = std::collections::HashMap::new();
    if let Ok(ts) = dotnet::threads::thread_store(&t)
        && let Ok(list) = dotnet::threads::thread_addresses(&t, ts)
    {
        for a in list {
            if let Ok(th) = dotnet::threads::read_thread(&t, a, 0, 0) {
                managed_ids.insert(th.os_tid, th.managed_id);
            }
        }
    }
    process
        .core
        .threads
        .iter()
        .zip(stacks)
        .zip(frames)
        .map(|((th, stack), reports)| {
            let frames = stack
                .frames
                .iter()
                .map(|f| {
                    let managed = reports.iter().any(|r| r.ip.0 == f.ip && !r.inlined && r.transition.is_none() && r.managed);
                    let registers = if managed { (0..dwarf::TRACKED as u16).filter(|&r| r != dwarf::RSP && r != dwarf::RIP).filter_map(|r| f.regs.get(r).map(|v| (r, v))).collect() } else { Vec::new() };
                    StackFrame { sp: f.sp, ip: f.ip, managed, registers }
                })
                .collect();
            let mut stack_end = process.core.segments.find(th.registers.sp()).map(|s| s.end()).unwrap_or(0);
            // A walk stopped at a return address outside known code still knew that caller's
            // stack pointer: the last frame ends there. Scanning on to the stack's end would take
            // the callers' slots (the runtime's native frames) as the last managed frame's roots,
            // and make the roots depend on whether the runtime's file was at hand.
            if let StackEnd::NotCode { sp, .. } = stack.end
                && sp > 0
            {
                stack_end = stack_end.min(sp);
            }
            ThreadStack { os_tid: th.tid, managed_id: managed_ids.get(&th.tid).copied().unwrap_or(0), frames, stack_end }
        })
        .collect()
}

/// The heap's retention of an opened .NET process through its recognised runtime: its stacks
/// walked for their roots (unless given), the object graph, the dominator tree.
pub(crate) fn holding(process: &Process, runtime: &dotnet::runtime::DotnetRuntime<'_>, stacks_and_frames: Option<(&[Stack], &[Vec<FrameReport>])>) -> Result<gc::holders::Holding, String> {
    let context = runtime.context()?;
    let threads = match stacks_and_frames {
        Some((stacks, frames)) => thread_stacks(process, context, stacks, frames),
        None => {
            use crate::runtimes::Runtime as _;
            let mut unwinder = crate::unwind::Unwinder::new(process);
            let mut symbolizer = crate::symbols::Symbolizer::new(process);
            if let Some(l) = runtime.code_lookup() {
                unwinder = unwinder.with_code_lookup(l);
                symbolizer = symbolizer.with_code_lookup(l);
            }
            let stacks = unwinder.walk_all();
            let frames: Vec<Vec<FrameReport>> = stacks.iter().map(|s| crate::threads::build::frames(process, &symbolizer, s)).collect();
            thread_stacks(process, context, &stacks, &frames)
        }
    };
    match runtime.take_graph() {
        // Made while the stacks were walked (the report's section), but for their roots.
        Some(graph) => gc::holders::of_graph(context, graph?.finish(context, &threads)),
        None => gc::holders::read(context, &threads, None),
    }
}

/// Fills the retained fields of a report's .NET heap (`dotnet.heap.retained`, `dominators`,
/// `unreachable`, `suspects`) through the analysis's runtime handle; what could not be read
/// goes to `diagnostics`.
pub(crate) fn attach(process: &Process, runtime: &dotnet::runtime::DotnetRuntime<'_>, stacks: &[Stack], frames: &[Vec<FrameReport>], heap: &mut crate::runtimes::dotnet::gc::report::HeapReport, diagnostics: &mut Vec<Diagnostic>) {
    match holding(process, runtime, Some((stacks, frames))) {
        Err(why) => diagnostics.push(Diagnostic::warning(gc::STAGE, format!("retained sizes not read: {why}"))),
        Ok(h) => {
            if let Ok(context) = runtime.context() {
                h.attach(context, heap);
            }
            diagnostics.extend(h.diagnostics);
        }
    }
}

/// `knot heap stat CORE`: the heap by type and the GC's state, from one walk of the heap (no
/// stacks, no locks, no object graph: what SOS `dumpheap -stat` answers).
pub fn stat(path: impl AsRef<Path>, opts: &HeapOptions) -> Result<HeapStatReport, HeapError> {
    let dump = read(path.as_ref(), opts)?;
    Ok(HeapStatReport::of(&dump.path, &dump.gc))
}

/// `knot heap diff OLD NEW`: what grew from `old` to `new`, by type.
pub fn diff(old: &Path, new: &Path, opts: &HeapOptions) -> Result<HeapDiffReport, HeapError> {
    let a = read(old, opts)?;
    let b = read(new, opts)?;
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    // Retained by type and the top holders by root path from each dump's object graph, when
    // both are read.
    let retained = |dump: &HeapDump, which: &str, diagnostics: &mut Vec<Diagnostic>| {
        let runtime = dotnet::runtime::recognise(&dump.process, &opts.locator)?;
        match holding(&dump.process, &runtime, None) {
            Ok(h) => {
                diagnostics.extend(h.diagnostics.iter().cloned().map(|mut d| {
                    d.message = format!("{which} dump: {}", d.message);
                    d
                }));
                let holders = runtime.context().map(|c| h.holders_by_path(c)).unwrap_or_default();
                Some((h.retained_by_type(), holders))
            }
            Err(why) => {
                diagnostics.push(Diagnostic::warning(gc::STAGE, format!("{which} dump: retained sizes not read: {why}")));
                None
            }
        }
    };
    let (ra, rb) = (retained(&a, "old", &mut diagnostics), retained(&b, "new", &mut diagnostics));
    let mut d = diff::diff(&a.gc.stats, &b.gc.stats, (ra.as_ref().map(|r| &r.0), rb.as_ref().map(|r| &r.0)));
    if let (Some((_, ha)), Some((_, hb))) = (&ra, &rb) {
        d.holders = diff::holders(ha, hb);
    }
    // The heap's own: module files the stacks would need do not matter here.
    for (dump, which) in [(&a, "old"), (&b, "new")] {
        diagnostics.extend(dump.gc.diagnostics.iter().cloned().map(|mut d| {
            d.message = format!("{which} dump: {}", d.message);
            d
        }));
    }
    Ok(HeapDiffReport::of(&a.path, &b.path, &d, diagnostics))
}

/// Why `knot heap root` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum HeapRootError {
    #[error(transparent)]
    Core(#[from] CoreError),
    /// No .NET runtime, or its heap could not be read.
    #[error("{0}")]
    Heap(String),
}

/// How far `knot heap root` searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RootSearch {
    /// From the roots until the object is reached: the shortest path (and the other roots that
    /// hold the object itself); the heap is read only as far as the search goes.
    #[default]
    FirstPath,
    /// Every root that reaches the object, a shortest path from each (SOS `gcroot`'s unique
    /// roots): the whole heap read as a graph.
    AllRoots,
}

/// `knot heap root`: says why the object at `address` of the .NET heap of the core at `path`
/// is alive (the shortest path from a root; with [`RootSearch::AllRoots`], from every root).
pub fn heap_root(path: impl AsRef<Path>, opts: &crate::analysis::Options, address: u64, search: RootSearch) -> Result<crate::report::heap_root::HeapRootReport, HeapRootError> {
    let mut all = heap_roots(path, opts, &[address], search)?;
    all.pop().ok_or_else(|| HeapRootError::Heap("no answer".into()))
}

/// As [`heap_root`] for several objects of one dump: the dump is read once.
pub fn heap_roots(path: impl AsRef<Path>, opts: &crate::analysis::Options, addresses: &[u64], search: RootSearch) -> Result<Vec<crate::report::heap_root::HeapRootReport>, HeapRootError> {
    use crate::report::heap_root::{HeapPathStep, HeapRootCount, HeapRootHolder, HeapRootPath, HeapRootReport, HeapRootThread, HeapStaticField};
    use crate::analysis::{tell, Phase};
    use crate::hex::Hex;
    use crate::report::words;
    use crate::runtimes::Runtime as _;
    use crate::symbols::Symbolizer;
    use crate::threads::build;
    use crate::unwind::Unwinder;
    use crate::runtimes::dotnet::gc::graph::RootSource;
    use crate::runtimes::dotnet::gc::paths::Link;

    tell(opts, Phase::Open);
    let limit = opts.max_decompressed.unwrap_or(crate::core::compressed::DEFAULT_MAX_DECOMPRESSED);
    let process = Process::open_limited(path.as_ref(), &opts.locator, limit)?;
    let runtime = dotnet::runtime::recognise(&process, &opts.locator).ok_or_else(|| HeapRootError::Heap("not a .NET process (no libcoreclr.so)".into()))?;
    let context = runtime.context().map_err(HeapRootError::Heap)?;
    tell(opts, Phase::Stacks);
    let mut unwinder = Unwinder::new(&process);
    let mut symbolizer = Symbolizer::new(&process);
    if let Some(l) = runtime.code_lookup() {
        unwinder = unwinder.with_code_lookup(l);
        symbolizer = symbolizer.with_code_lookup(l);
    }
    if let Some(n) = opts.max_walk_frames {
        unwinder.max_frames = n;
    }
    let stacks = unwinder.walk_all();
    let reports: Vec<Vec<FrameReport>> = stacks.iter().map(|stack| build::frames(&process, &symbolizer, stack)).collect();
    // Each managed frame's method name, for the stack root's line.
    let mut methods: std::collections::HashMap<(u32, u64), String> = std::collections::HashMap::new();
    for ((th, stack), reports) in process.core.threads.iter().zip(&stacks).zip(&reports) {
        for f in &stack.frames {
            let report = reports.iter().find(|r| r.ip.0 == f.ip && !r.inlined && r.transition.is_none());
            if let Some(name) = report.filter(|r| r.managed).and_then(|r| r.function.clone()) {
                methods.insert((th.tid, f.sp), name);
            }
        }
    }
    let threads = thread_stacks(&process, context, &stacks, &reports);
    tell(opts, Phase::Heap);
    let all = match search {
        RootSearch::FirstPath => gc::why_alive::first_paths(context, &threads, addresses),
        RootSearch::AllRoots => gc::why_alive::why_alive(context, &threads, addresses),
    }
    .map_err(HeapRootError::Heap)?;
    let process_diagnostics: Vec<_> = process.all_diagnostics().cloned().collect();
    if process.core.changed_while_read() {
        return Err(CoreError::ChangedWhileRead { path: path.as_ref().to_path_buf() }.into());
    }
    Ok(all
        .into_iter()
        .map(|why| {
            let holder = |root: &crate::runtimes::dotnet::gc::roots::RootAt| {
                let (kind, conservative) = root.kind.name();
                let mut h = HeapRootHolder { kind: kind.to_string(), conservative, handle: None, thread: None, finalizer_slot: None, sync_block: None, description: String::new() };
                match &root.source {
                    RootSource::Handle { handle } => h.handle = Some(Hex(*handle)),
                    RootSource::Static { handle, .. } => h.handle = Some(Hex(*handle)),
                    RootSource::Stack { os_tid, managed_id, frame_sp, frame_ip, slot, register } => {
                        h.thread = Some(HeapRootThread {
                            os_tid: *os_tid,
                            managed_id: *managed_id,
                            method: methods.get(&(*os_tid, *frame_sp)).cloned(),
                            frame_sp: Hex(*frame_sp),
                            frame_ip: Hex(*frame_ip),
                            slot: register.is_none().then_some(Hex(*slot)),
                            register: register.map(|r| crate::arch::x86_64::dwarf::name(r).map(str::to_string).unwrap_or_else(|| format!("dwarf register {r}"))),
                        })
                    }
                    RootSource::FinalizerQueue { slot } => h.finalizer_slot = Some(Hex(*slot)),
                    RootSource::SyncBlock { index } => h.sync_block = Some(*index),
                }
                h.description = words::heap_root_description(&h);
                h
            };
            let steps = |steps: &[crate::runtimes::dotnet::gc::why_alive::Step]| -> Vec<HeapPathStep> {
                steps
                    .iter()
                    .map(|s| HeapPathStep {
                        address: Hex(s.address),
                        type_name: s.type_name.clone(),
                        size: s.size,
                        via: s.link.as_ref().map(|l| match l {
                            Link::Field(f) => f.clone(),
                            Link::Element(i) => format!("[{i}]"),
                            Link::Dependent => "(dependent handle)".to_string(),
                        }),
                        static_field: s.static_field.as_ref().map(|f| HeapStaticField { class: f.class.clone(), field: f.field.clone() }),
                    })
                    .collect()
            };
            let mut all: Vec<HeapRootPath> = why.paths.iter().map(|(r, s)| HeapRootPath { root: holder(r), path: steps(s) }).collect();
            let first = (!all.is_empty()).then(|| all.remove(0));
            let roots = why
                .roots
                .iter()
                .map(|(k, n)| {
                    let (kind, conservative) = k.name();
                    HeapRootCount { kind: kind.to_string(), conservative, count: *n }
                })
                .collect();
            let mut diagnostics = process_diagnostics.clone();
            diagnostics.extend(why.diagnostics);
            HeapRootReport {
                knot_version: env!("CARGO_PKG_VERSION").to_string(),
                object: Hex(why.object),
                type_name: why.object_type,
                size: why.object_size,
                reachable: first.is_some(),
                root: first.as_ref().map(|f| f.root.clone()),
                path: first.map(|f| f.path).unwrap_or_default(),
                other_roots: all,
                other_roots_not_listed: why.more_roots,
                roots,
                handles_read: why.handles_read,
                all_roots: why.all_roots,
                objects: why.objects,
                references: why.references,
                diagnostics,
            }
        })
        .collect())
}
