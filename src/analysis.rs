//! The pipeline from a core file to a [`Report`]: open → modules → the runtime, recognised
//! once → stacks (parallel, with the runtime's code map) → symbols → waits and locks (native,
//! then the runtime's) → the wait-for graph and its cycles → the verdict → the report.

use crate::core::CoreError;
use crate::graph::signature::SignatureInputs;
use crate::graph::verdict::{order_locks, verdict, Verdict};
use crate::graph::{groups, WaitForGraph};
use crate::process::{Locator, Process};
use crate::report::{dump, words, Group, LiveReport, Report, SCHEMA_VERSION};
use crate::runtimes;
use crate::symbols::Symbolizer;
use crate::threads::{build, FrameReport, ThreadReport};
use crate::unwind::Unwinder;
use crate::waits::{self, RuntimeWaits};
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Where module files and debug files are looked for.
    pub locator: Locator,
    /// Frames per stack at most (the walk's bound, not a display limit).
    pub max_walk_frames: Option<usize>,
    /// Only stacks: no lock analysis, no wait-for graph (for measuring, and for dumps where
    /// only the stacks matter).
    pub stacks_only: bool,
    /// Told as each phase of the pipeline starts (for a progress bar). It changes no fact.
    pub progress: Option<Progress>,
    /// A compressed core is decompressed to at most this many bytes (None: the default,
    /// `core::compressed::DEFAULT_MAX_DECOMPRESSED`); its program headers bound it too.
    pub max_decompressed: Option<u64>,
    /// The memory the analysis may use, in bytes (None: the limit of the memory cgroup it runs
    /// in, the lowest of its own and its parents', if any). A heap graph that would not fit is
    /// left out, and the report's `verdict_limits` says so.
    pub max_memory: Option<u64>,
    /// Where a heap graph too large for `max_memory` keeps its arrays, in unlinked files (None:
    /// `$TMPDIR`). A memory-backed file system (tmpfs) is not used: it would not help.
    pub scratch_dir: Option<std::path::PathBuf>,
}

/// The phases of [`analyze`], in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Mapping the core, reading its notes, finding module and debug files.
    Open,
    /// Walking every thread's stack.
    Stacks,
    /// Symbols, lines and inlined frames.
    Symbols,
    /// Thread states, lock owners and waiters, the wait-for graph.
    Locks,
    /// Walking the runtime's heap (its garbage collector's).
    Heap,
}

impl Phase {
    pub const ALL: [Phase; 5] = [Phase::Open, Phase::Stacks, Phase::Symbols, Phase::Locks, Phase::Heap];

    pub fn label(self) -> &'static str {
        match self {
            Phase::Open => "opening the dump",
            Phase::Stacks => "walking stacks",
            Phase::Symbols => "reading symbols",
            Phase::Locks => "reading locks",
            Phase::Heap => "walking the GC heap",
        }
    }
}

/// A progress hook: called with each [`Phase`] as it starts.
#[derive(Clone)]
pub struct Progress(pub Arc<dyn Fn(Phase) + Send + Sync>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}

pub(crate) fn tell(opts: &Options, phase: Phase) {
    if let Some(p) = &opts.progress {
        (p.0)(phase);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// Reads the core at `path` and builds the report.
pub fn analyze(path: impl AsRef<Path>, opts: &Options) -> Result<Report, AnalyzeError> {
    analyze_keeping_process(path, opts).map(|(_, report)| report)
}

/// [`analyze`], handing back the opened process with the report. A program that exits next may
/// `std::mem::forget` it: the kernel then unmaps the dump and every module file at once, where
/// dropping it unmaps them one by one (a TLB shootdown each on a multi-core machine).
pub fn analyze_keeping_process(path: impl AsRef<Path>, opts: &Options) -> Result<(Process, Report), AnalyzeError> {
    tell(opts, Phase::Open);
    crate::trace::step("analyze: start");
    let limit = opts.max_decompressed.unwrap_or(crate::core::compressed::DEFAULT_MAX_DECOMPRESSED);
    let core = crate::core::Core::open_limited(path.as_ref(), limit)?;
    let (process, report) = std::thread::scope(|scope| {
        // Nothing waits for this thread: whoever needs a table first parses it or waits for it.
        let _ = std::thread::Builder::new().name("knot-tables".into()).spawn_scoped(scope, tables_ahead(&core));
        let process = Process::from_core(core, &opts.locator);
        crate::trace::step("process opened");
        let report = report_for(&process, opts);
        (process, report)
    });
    crate::trace::step("report built");
    // A file that shrank under the reading was read as zeros past its new end: no report.
    if process.core.changed_while_read() {
        return Err(CoreError::ChangedWhileRead { path: path.as_ref().to_path_buf() }.into());
    }
    Ok((process, report))
}

/// Parses the built-in tables (`analyzers/*.toml`) a report of `core` will read, a runtime's
/// only when the process mapped that runtime (`runtimes::tables_ahead`). Run while the module files are opened: the
/// parsing is about 1 M instructions on a native dump and 2 M on a .NET one, which were on the
/// critical path. Each table is parsed once whoever asks first (a `OnceLock`); a panic here
/// stays on this thread.
fn tables_ahead(core: &crate::core::Core) -> impl FnOnce() + Send + 'static {
    let runtime_tables = runtimes::tables_ahead(core);
    move || {
        let _ = std::panic::catch_unwind(|| {
            runtime_tables();
            let _ = crate::waits::catalog::Catalog::builtin();
            let _ = crate::roles::Roles::builtin();
            let _ = crate::crash::machinery::Machinery::builtin();
        });
    }
}

/// Builds the report for an opened process.
///
/// The compressed DWARF the threads' innermost frames need is inflated on a thread of its own
/// meanwhile (the runtime's reading and the stack walks need none of it): on a small dump that
/// inflation is most of the work (`symbols::inflate_ahead`).
pub fn report_for(process: &Process, opts: &Options) -> Report {
    std::thread::scope(|scope| {
        // Without that thread (none could be started) the first lookups inflate, as before; a
        // panic there is caught so that it cannot take the report with it.
        let ahead = || {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crate::symbols::inflate_ahead(process)));
        };
        let _ = std::thread::Builder::new().name("knot-dwarf".into()).spawn_scoped(scope, ahead);
        build_report(process, opts)
    })
}

fn build_report(process: &Process, opts: &Options) -> Report {
    let runtime = runtimes::recognise(process, &opts.locator);
    crate::trace::step("runtime recognised");
    let runtime = runtime.as_deref();
    std::thread::scope(|scope| {
        // The runtime's heap work that needs no stacks runs meanwhile on a thread of its own
        // (the section waits for it; without the thread it does that work itself). Its rayon
        // work goes to the one global pool.
        if let Some(r) = runtime.filter(|_| !opts.stacks_only) {
            r.plan_heap(crate::memory_budget::HeapBudget::of_this_process(opts.max_memory, opts.scratch_dir.as_deref()));
            let _ = std::thread::Builder::new().name("knot-heap".into()).spawn_scoped(scope, move || r.prepare_heap());
        }
        report_with(process, opts, runtime)
    })
}

fn report_with(process: &Process, opts: &Options, runtime: Option<&dyn runtimes::Runtime>) -> Report {
    let code_lookup = runtime.as_ref().and_then(|r| r.code_lookup());
    let mut unwinder = Unwinder::new(process);
    let mut symbolizer = Symbolizer::new(process);
    if let Some(l) = code_lookup {
        unwinder = unwinder.with_code_lookup(l);
        symbolizer = symbolizer.with_code_lookup(l);
    }
    if let Some(n) = opts.max_walk_frames {
        unwinder.max_frames = n;
    }
    tell(opts, Phase::Stacks);
    let stacks = unwinder.walk_all();
    crate::trace::step("stacks walked");
    tell(opts, Phase::Symbols);
    let core = &process.core;
    let pid = core.process.as_ref().map(|p| p.pid);
    let frames: Vec<Vec<FrameReport>> = stacks.par_iter().map(|stack| build::frames(process, &symbolizer, stack)).collect();
    crate::trace::step("frames symbolized");

    let inputs: Vec<waits::ThreadInput<'_>> = core
        .threads
        .iter()
        .zip(&frames)
        .zip(&stacks)
        .map(|((t, f), stack)| waits::ThreadInput {
            tid: t.tid,
            registers: &t.registers,
            stack,
            cursig: t.cursig,
            functions: f.iter().filter(|f| f.transition.is_none()).map(|f| f.function.as_deref().unwrap_or("")).collect(),
            frames: f.iter().filter(|f| f.transition.is_none()).collect(),
        })
        .collect();
    tell(opts, Phase::Locks);
    let mut facts = if opts.stacks_only { waits::states_only(process, &inputs) } else { waits::analyze(process, &symbolizer, &inputs) };
    crate::trace::step("native waits");
    let runtime_waits = match &runtime {
        Some(r) if !opts.stacks_only => r.merge_locks(&inputs, &mut facts),
        _ => RuntimeWaits::default(),
    };
    crate::trace::step("runtime locks merged");
    let section = match &runtime {
        Some(r) if !opts.stacks_only => {
            if r.walks_heap() {
                tell(opts, Phase::Heap);
            }
            r.report_section(&runtime_waits, &mut facts)
        }
        _ => None,
    };
    crate::trace::step("runtime section");
    let mut section = section;
    // The heap as a graph: what holds it (stack roots from the stacks walked above).
    if let (Some(s), Some(r)) = (section.as_mut(), runtime) {
        let mut more = Vec::new();
        r.attach_heap(&stacks, &frames, s, &mut more);
        facts.diagnostics.extend(more);
        crate::trace::step("heap attached");
    }
    let blocked: Vec<(u32, Option<&str>)> = core.threads.iter().zip(&facts.threads).map(|(t, w)| (t.tid, w.blocked_on.as_deref())).collect();
    let graph = WaitForGraph::new(&blocked, &facts.locks).with_pool(runtime_waits.worker_pool.as_ref());
    let (cycles, stuck) = (graph.cycles(), graph.stuck());
    let mut locks = order_locks(facts.locks.clone(), &cycles);
    words::label_locks(&mut locks);

    let keys: Vec<Vec<u64>> = stacks.iter().map(|s| s.frames.iter().map(|f| f.ip).collect()).collect();
    let groups = groups::group_by_stack(&keys)
        .into_iter()
        .map(|idx| Group { tids: idx.iter().map(|&i| core.threads[i].tid).collect(), frames: frames[idx[0]].clone() })
        .collect();

    let managed = &runtime_waits.threads;
    let threads: Vec<ThreadReport> = core
        .threads
        .iter()
        .zip(stacks.iter())
        .zip(frames)
        .zip(facts.threads.iter().cloned())
        .map(|(((t, stack), frames), wait)| {
            let name = managed
                .names
                .get(&t.tid)
                .or_else(|| core.thread_names.get(&t.tid))
                .cloned()
                .or_else(|| (Some(t.tid) == pid).then(|| core.process.as_ref().map(|p| p.name.clone())).flatten())
                .filter(|n| !n.is_empty());
            // The OS name too: a managed thread's Thread.Name hides the kernel's for it.
            let functions: Vec<&str> = frames.iter().filter_map(|f| f.function.as_deref()).collect();
            let marks = managed.marks.get(&t.tid).map(Vec::as_slice).unwrap_or_default();
            let role = crate::roles::role_of_thread(crate::roles::RoleInputs { functions: &functions, name: name.as_deref(), marks })
                .or_else(|| core.thread_names.get(&t.tid).and_then(|n| crate::roles::role_of_thread(crate::roles::RoleInputs { functions: &[], name: Some(n), marks: &[] })));
            ThreadReport {
            role,
            tid: t.tid,
            name,
            signalled: t.signalled,
            frames,
            stack_end: build::stack_end(stack),
            state: wait.state,
            blocked_on: wait.blocked_on,
            managed_thread_id: managed.ids.get(&t.tid).copied(),
            own_tid: facts.own_tids.iter().find(|(d, _)| *d == t.tid).map(|(_, o)| *o),
            }
        })
        .collect();
    let runtime_crash = runtime.as_ref().and_then(|r| r.crash(&stacks));
    let crash = crate::crash::read(process, &symbolizer, &threads, runtime_crash.as_ref());
    let gc_stalled = section.as_ref().is_some_and(|s| s.gc_stalled);
    let (verdict, verdict_limits) = if opts.stacks_only {
        (Verdict::NotAnalyzed, Vec::new())
    } else {
        let mut limits = crate::graph::limits::from_modules(process, &threads, &locks);
        limits.extend(runtime.iter().flat_map(|r| r.verdict_limits()));
        let limits = limits.iter().map(words::verdict_limit).collect();
        (verdict(&cycles, &stuck, &locks, &threads, &facts.threads, crash.as_ref(), runtime_waits.worker_pool.as_ref(), gc_stalled), limits)
    };
    // The stable keys, from the facts the report holds (never addresses or tids).
    let keys = SignatureInputs::new(process, &locks, &threads).with_pool(runtime_waits.worker_pool.as_ref());
    // Threads by the names people know them by; a name several threads share (the process's
    // own, which every thread inherits; a pool's workers') tells none of them apart: its
    // threads are said by their tids.
    let mut shared: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for n in threads.iter().filter_map(|t| t.name.as_deref()) {
        *shared.entry(n).or_default() += 1;
    }
    let process_name = core.process.as_ref().map(|p| p.name.as_str());
    let names: std::collections::BTreeMap<u32, String> =
        threads.iter().filter_map(|t| Some((t.tid, t.name.clone().filter(|n| Some(n.as_str()) != process_name && shared.get(n.as_str()) == Some(&1))?))).collect();
    let deadlocks = cycles.iter().map(|c| words::deadlock(c, &locks, &names, keys.cycle(c))).collect();
    let convoys: Vec<Option<String>> = locks.iter().map(|l| keys.convoy(l)).collect();
    let verdict_signature = keys.verdict(verdict, &cycles, crash.as_ref());
    for (l, s) in locks.iter_mut().zip(convoys) {
        l.signature = s;
    }
    let mut diagnostics: Vec<_> = process.all_diagnostics().cloned().collect();
    diagnostics.extend(facts.diagnostics);
    diagnostics.extend(runtime.iter().flat_map(|r| r.diagnostics()));
    let diagnostics = crate::diagnostics::cap_per_stage(diagnostics);
    let mut dump = dump::dump_info(process);
    // Partial when anything, in any stage, was missing, refused or cut.
    dump.partial |= diagnostics.iter().any(|d| d.severity == crate::Severity::Warning);
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        knot_version: env!("CARGO_PKG_VERSION").to_string(),
        dump,
        verdict,
        verdict_signature,
        verdict_limits,
        crash,
        deadlocks,
        locks,
        groups,
        threads,
        modules: process.modules.iter().map(dump::module_report).collect(),
        diagnostics,
        dotnet: None,
        live: core.capture.as_ref().map(LiveReport::from),
    };
    if let Some(s) = section {
        report.set_runtime_section(s.section);
    }
    report
}
