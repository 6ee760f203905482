//! The `knot heap` commands: a dump's managed heap read alone (no stacks, no locks: `knot heap
//! stat CORE`, SOS `dumpheap -stat`), two dumps of one program compared (`knot heap diff OLD
//! NEW`), and why an object is alive (`knot heap root CORE ADDRESS`: the paths from its roots).
//! Every reading goes through the recognised runtime's handle (`runtimes::Runtime`): this file
//! names no runtime's types.

use crate::core::CoreError;
use crate::diagnostics::Diagnostic;
use crate::process::{Locator, Process};
use crate::report::heap_diff::HeapDiffReport;
use crate::report::heap_stat::HeapStatReport;
use crate::runtimes::{self, HeapReading, Runtime};
use crate::threads::FrameReport;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default)]
pub struct HeapOptions {
    /// Where module files are looked for (the runtime's, when the catalogue lacks its build).
    pub locator: Locator,
    /// A compressed core is decompressed to at most this many bytes (None: the default).
    pub max_decompressed: Option<u64>,
    /// The memory `knot heap diff` may use for each dump's object graph, in bytes (None: the
    /// memory cgroup's limit, if any); a graph that would not fit is not read, and a diagnostic
    /// says so.
    pub max_memory: Option<u64>,
    /// Where a graph too large for `max_memory` keeps its arrays (None: `$TMPDIR`).
    pub scratch_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum HeapError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("{path}: {}", runtimes::NONE_RECOGNISED)]
    NoRuntime { path: PathBuf },
    #[error("{path}: {why}")]
    NotRead { path: PathBuf, why: String },
}

/// Opens the dump at `path`.
fn open(path: &Path, opts: &HeapOptions) -> Result<Process, HeapError> {
    let limit = opts.max_decompressed.unwrap_or(crate::core::compressed::DEFAULT_MAX_DECOMPRESSED);
    Ok(Process::open_limited(path, &opts.locator, limit)?)
}

/// The heap of `process` (the dump at `path`) read through its runtime's handle.
fn read(path: &Path, process: &Process, runtime: Option<&dyn Runtime>) -> Result<HeapReading, HeapError> {
    let reading = match runtime.and_then(|r| r.heap_reading()) {
        None => return Err(HeapError::NoRuntime { path: path.to_path_buf() }),
        Some(Err(why)) => return Err(HeapError::NotRead { path: path.to_path_buf(), why }),
        Some(Ok(g)) => g,
    };
    if process.core.changed_while_read() {
        return Err(CoreError::ChangedWhileRead { path: path.to_path_buf() }.into());
    }
    Ok(reading)
}

/// `knot heap stat CORE`: the heap by type and the GC's state, from one walk of the heap (no
/// stacks, no locks, no object graph: what SOS `dumpheap -stat` answers).
pub fn stat(path: impl AsRef<Path>, opts: &HeapOptions) -> Result<HeapStatReport, HeapError> {
    let path = path.as_ref();
    let process = open(path, opts)?;
    let runtime = runtimes::recognise(&process, &opts.locator);
    let reading = read(path, &process, runtime.as_deref())?;
    Ok(HeapStatReport::of(path, &reading))
}

/// `knot heap diff OLD NEW`: what grew from `old` to `new`, by type.
pub fn diff(old: &Path, new: &Path, opts: &HeapOptions) -> Result<HeapDiffReport, HeapError> {
    let (pa, pb) = (open(old, opts)?, open(new, opts)?);
    let (runtime_a, runtime_b) = (runtimes::recognise(&pa, &opts.locator), runtimes::recognise(&pb, &opts.locator));
    for r in runtime_a.iter().chain(&runtime_b) {
        r.plan_heap(crate::memory_budget::HeapBudget::of_this_process(opts.max_memory, opts.scratch_dir.as_deref()));
    }
    let a = read(old, &pa, runtime_a.as_deref())?;
    let b = read(new, &pb, runtime_b.as_deref())?;
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    // Retained by type and the top holders by root path from each dump's object graph, when
    // both are read.
    let retained = |runtime: Option<&dyn Runtime>, which: &str, diagnostics: &mut Vec<Diagnostic>| {
        let said = |mut d: Diagnostic| {
            d.message = format!("{which} dump: {}", d.message);
            d
        };
        match runtime?.heap_retention()? {
            Ok(r) => {
                diagnostics.extend(r.diagnostics.iter().cloned().map(said));
                Some(r)
            }
            Err(why) => {
                diagnostics.push(said(why));
                None
            }
        }
    };
    let (ra, rb) = (retained(runtime_a.as_deref(), "old", &mut diagnostics), retained(runtime_b.as_deref(), "new", &mut diagnostics));
    let d = a.diff(&b, (ra.as_ref(), rb.as_ref()));
    // The heap's own: module files the stacks would need do not matter here.
    for (reading, which) in [(&a, "old"), (&b, "new")] {
        diagnostics.extend(reading.diagnostics().iter().cloned().map(|mut d| {
            d.message = format!("{which} dump: {}", d.message);
            d
        }));
    }
    Ok(HeapDiffReport::of(old, new, &d, diagnostics))
}

/// Why `knot heap root` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum HeapRootError {
    #[error(transparent)]
    Core(#[from] CoreError),
    /// No runtime knot reads, or its heap could not be read.
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
    /// roots): the whole heap read as a graph, planned under the memory limit (`max_memory` or
    /// the cgroup's) as `analyze`'s: in memory, in scratch files (`scratch_dir`), or refused
    /// with the limit said.
    AllRoots,
}

/// `knot heap root`: says why the object at `address` of the managed heap of the core at `path`
/// is alive (the shortest path from a root; with [`RootSearch::AllRoots`], from every root).
pub fn heap_root(path: impl AsRef<Path>, opts: &crate::analysis::Options, address: u64, search: RootSearch) -> Result<crate::report::heap_root::HeapRootReport, HeapRootError> {
    let mut all = heap_roots(path, opts, &[address], search)?;
    all.pop().ok_or_else(|| HeapRootError::Heap("no answer".into()))
}

/// As [`heap_root`] for several objects of one dump: the dump is read once.
pub fn heap_roots(path: impl AsRef<Path>, opts: &crate::analysis::Options, addresses: &[u64], search: RootSearch) -> Result<Vec<crate::report::heap_root::HeapRootReport>, HeapRootError> {
    use crate::analysis::{tell, Phase};
    use crate::report::heap_root::HeapRootReport;
    use crate::symbols::Symbolizer;
    use crate::threads::build;
    use crate::unwind::Unwinder;

    tell(opts, Phase::Open);
    let limit = opts.max_decompressed.unwrap_or(crate::core::compressed::DEFAULT_MAX_DECOMPRESSED);
    let process = Process::open_limited(path.as_ref(), &opts.locator, limit)?;
    let runtime = runtimes::recognise(&process, &opts.locator).ok_or_else(|| HeapRootError::Heap(runtimes::NONE_RECOGNISED.into()))?;
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
    tell(opts, Phase::Heap);
    if search == RootSearch::AllRoots {
        runtime.plan_heap(crate::memory_budget::HeapBudget::of_this_process(opts.max_memory, opts.scratch_dir.as_deref()));
    }
    let all = runtime
        .object_roots(&stacks, &reports, addresses, search == RootSearch::AllRoots)
        .unwrap_or_else(|| Err(runtimes::NONE_RECOGNISED.into()))
        .map_err(HeapRootError::Heap)?;
    let process_diagnostics: Vec<_> = process.all_diagnostics().cloned().collect();
    if process.core.changed_while_read() {
        return Err(CoreError::ChangedWhileRead { path: path.as_ref().to_path_buf() }.into());
    }
    Ok(all.iter().map(|why| HeapRootReport::of(why, &methods, process_diagnostics.clone())).collect())
}
