//! The .NET runtime handle: CoreCLR recognised once per analysis. It owns the located
//! [`Context`] (descriptor, pointer data, memory views), the code map with the threads' Frame
//! chains, and the reading of threads, monitors and waits (made once, when the locks are
//! asked for).

use crate::runtimes::dotnet::code::codemap::CodeMap;
use crate::runtimes::dotnet::contract::context::{Context, NoContext};
use crate::runtimes::dotnet::code::frames::{self, WithFrames};
use crate::runtimes::dotnet::types::metadata::image_notes;
use crate::runtimes::dotnet::crash;
use crate::runtimes::dotnet::gc;
use crate::runtimes::dotnet::report::{DotnetReport, SyncTableReport, ThreadExceptionReport, ThreadPoolReport};
use crate::runtimes::dotnet::{contract::facts, threads::idle, threads::locks, read_runtime, unreadable, DotnetReading, STAGE};
use crate::diagnostics::Diagnostic;
use crate::graph::limits::Limit;
use crate::memory_budget::{GraphPlan, HeapBudget, GRAPH_BYTES_PER_OBJECT, WALK_BYTES_PER_OBJECT};
use crate::process::{Locator, Process};
use crate::runtimes::RuntimeSection;
use crate::runtimes::{Runtime, RuntimeReport};
use crate::unwind::Stack;
use crate::unwind::managed::CodeLookup;
use crate::waits::{RuntimeLocks, RuntimeWaits, ThreadInput, ThreadState, WaitFacts};
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) struct DotnetRuntime<'p> {
    /// The located runtime, or why it could not be located.
    context: Result<Arc<Context<'p>>, NoContext>,
    code: Option<WithFrames<CodeMap<'p>>>,
    /// Why the code map or the Frame chains could not be read.
    failures: Vec<Diagnostic>,
    reading: OnceLock<DotnetReading>,
    /// Every thread's last thrown exception and createdump's header, read once (for the report
    /// section and the crash).
    exceptions: OnceLock<Option<crash::CrashReading>>,
    /// The path the dump names for `libcoreclr.so` and its build-id, for saying how to supply it.
    runtime_file: Option<(String, Option<String>, bool)>,
    /// The thread pool's counters and queues, read once (for the verdict and the report).
    pool: OnceLock<Option<crate::runtimes::dotnet::tasks::thread_pool::PoolReading>>,
    /// The heap work the stacks have no part in, made once ([`DotnetRuntime::heap_ahead`]) and
    /// taken by the report section.
    ahead: OnceLock<Mutex<Option<HeapAhead>>>,
    /// The object graph made ahead, without its stack roots: the section leaves it for
    /// [`crate::runtimes::dotnet::gc::readings::attach`] (taken once).
    graph: Mutex<Option<Result<gc::GraphAhead, String>>>,
    /// The memory limit the heap graph is planned under (none: no limit), set once before the
    /// heap is read ([`Runtime::plan_heap`]).
    memory_limit: OnceLock<HeapBudget>,
    /// The heap graph left out because it would not fit the memory limit (for the verdict's
    /// limits), set by the report section.
    over_limit: OnceLock<Limit>,
    /// The collection in progress and who waits for it, read with the locks (the verdict and the
    /// report section use it).
    collection: OnceLock<Option<gc::collection::Collection>>,
    /// What each thread's frames show it runs, and the stacks of the threads not idle (for the
    /// tasks' and semaphores' inferred holders, once the heap gives the tasks), set by the locks'
    /// merge.
    work: OnceLock<(Vec<crate::runtimes::dotnet::tasks::task_runners::ThreadWork>, Vec<crate::runtimes::dotnet::tasks::task_runners::StackOf>)>,
}

/// What of the report's heap reading needs no stacks, read while they are walked: the walk
/// (with the referrers of every object a lock may be on: which locks there are depends on the
/// stacks), and the object graph with every root but the stacks'.
pub(crate) struct HeapAhead {
    gc: Result<gc::Unresolved, String>,
    /// `None` when the heap was not walked.
    graph: Option<Result<gc::GraphAhead, String>>,
    /// The graph was not built: it would not fit the memory limit.
    over_limit: Option<Limit>,
}

/// The .NET runtime of `process`; `None` when the process has no `libcoreclr.so`.
pub(crate) fn recognise<'p>(process: &'p Process, locator: &Locator) -> Option<DotnetRuntime<'p>> {
    let context = match Context::open(process, locator) {
        Err(NoContext::NotDotnet) => return None,
        Err(e) => Err(e),
        Ok(c) => Ok(Arc::new(c)),
    };
    crate::trace::step("dotnet: context");
    let mut failures = Vec::new();
    if let Ok(Err(why)) = context.as_ref().map(|c| &c.supplement) {
        failures.push(Diagnostic::warning(STAGE, format!("the runtime's descriptor lacks what knot's data adds for this build, and that data was not applied: {why}")));
    }
    let code = context.as_ref().ok().and_then(|c| match CodeMap::new(c.clone()) {
        Ok(code) => {
            crate::trace::step("dotnet: code map");
            let frames = frames::read(&c.target(), c.process.core.arch).unwrap_or_else(|e| {
                failures.push(Diagnostic::warning(STAGE, format!("transition frames (the threads' Frame chains) not read: {e}")));
                Default::default()
            });
            Some(WithFrames { code, frames })
        }
        Err(e) => {
            failures.push(Diagnostic::warning(STAGE, format!("managed code not mapped, managed frames are unnamed: {e}")));
            None
        }
    });
    let runtime_file = crate::runtimes::dotnet::contract::locate::runtime_module(process).map(|m| (m.path.clone(), m.build_id_hex(), m.file.is_some()));
    Some(DotnetRuntime { context, code, failures, reading: OnceLock::new(), exceptions: OnceLock::new(), runtime_file, pool: OnceLock::new(), ahead: OnceLock::new(), graph: Mutex::new(None), memory_limit: OnceLock::new(), over_limit: OnceLock::new(), collection: OnceLock::new(), work: OnceLock::new() })
}

impl<'p> DotnetRuntime<'p> {
    /// The located runtime, or why it could not be located.
    pub(crate) fn context(&self) -> Result<&Context<'p>, String> {
        self.context.as_deref().map_err(|e| e.why().map(|(_, w)| w).unwrap_or_else(|| "not a .NET process (no libcoreclr.so)".into()))
    }

    /// Threads, monitors and waits, read on first use.
    pub(crate) fn reading(&self) -> &DotnetReading {
        self.reading.get_or_init(|| match &self.context {
            Ok(c) => match facts::builtin() {
                Ok(all) => read_runtime(c, Ok(all)),
                Err(e) => read_runtime(c, Err(e.clone())),
            },
            Err(e) => unreadable(e),
        })
    }
}

impl DotnetRuntime<'_> {
    /// The thread pool: its workers by name, its counters and queues read from CoreLib's
    /// statics; none when the process has no workers and the pool was never started.
    fn thread_pool(&self, waits: &RuntimeWaits) -> Option<ThreadPoolReport> {
        let reading = self.pool_reading()?;
        if waits.worker_pool.is_none() && reading.counters.is_err() {
            return None;
        }
        Some(ThreadPoolReport::new(waits.worker_pool.as_ref(), reading))
    }

    /// The pool's counters and queues, read on first use.
    /// The object graph the report's heap reading made ahead, without its stack roots, once
    /// (`None` after, or when the heap was not walked).
    pub(crate) fn take_graph(&self) -> Option<Result<gc::GraphAhead, String>> {
        self.graph.lock().ok().and_then(|mut g| g.take())
    }

    /// The heap work that needs no stacks, made on first use: on the thread
    /// [`Runtime::prepare_heap`] runs on while the stacks are walked, or by the report section
    /// (which waits for that thread when it is under way). `None` inside when the heap is not
    /// walked. A panic in it is the heap's failure, not the report's.
    fn heap_ahead(&self) -> &Mutex<Option<HeapAhead>> {
        self.ahead.get_or_init(|| {
            let ahead = match (self.walks_heap(), &self.context) {
                (true, Ok(c)) => Some(read_ahead(c, &self.lock_objects_ahead(), self.memory_limit())),
                _ => None,
            };
            Mutex::new(ahead)
        })
    }

    /// Every object a lock the report section finds may be on: the monitors' objects and the
    /// objects the runtime's waits wait on (a superset: whether a Monitor.Wait is a wait on a
    /// task depends on the stack).
    fn lock_objects_ahead(&self) -> Vec<u64> {
        let DotnetReading::Runtime(r) = self.reading() else { return Vec::new() };
        let mut all: Vec<u64> = r.monitors.iter().map(|m| m.object.0).chain(r.waits.iter().filter_map(|w| w.object)).collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// What the runtime's reading leaves the verdict without: its monitors, its metadata, or
    /// the runtime's data altogether.
    fn reading_limits(&self) -> Vec<Limit> {
        // A runtime read without its per-build sync-block facts: threads yes, monitors no.
        if let DotnetReading::Runtime(r) = self.reading()
            && let crate::runtimes::dotnet::Support::Unsupported { why } = &r.monitor_support
        {
            return vec![Limit::DotnetMonitors { version: r.version.to_string(), why: why.clone() }];
        }
        // A single-file app read without its bundle: everything but the names.
        if let DotnetReading::Runtime(_) = self.reading()
            && let Ok(c) = &self.context
            && c.single_file_metadata_missing().is_some()
        {
            return vec![Limit::SingleFileMetadata { executable: c.module.path.clone(), build_id: c.module.build_id_hex() }];
        }
        let DotnetReading::Unsupported { version, why } = self.reading() else { return Vec::new() };
        let (path, build_id, at_hand) = match &self.runtime_file {
            Some((path, build, at_hand)) => (Some(path.clone()), build.clone(), *at_hand),
            None => (None, None, false),
        };
        let file_would_help = self.context.as_ref().err().is_some_and(|e| e.file_would_help(at_hand));
        vec![Limit::DotnetRuntime { version: version.to_string(), why: why.clone(), path, build_id, file_would_help }]
    }

    /// The object graph without its stack roots for a reading made apart from the report (`knot
    /// heap diff`): `None` when no memory limit was planned (the caller reads it unbounded), else
    /// read with the walk's node cap, or why it would not fit.
    pub(crate) fn graph_within_limit(&self) -> Option<Result<gc::GraphAhead, String>> {
        let budget = self.memory_limit().filter(|b| b.limit.is_some())?;
        let c = self.context.as_deref().ok()?;
        read_ahead(c, &[], Some(budget)).graph
    }

    fn memory_limit(&self) -> Option<&HeapBudget> {
        self.memory_limit.get()
    }

    fn pool_reading(&self) -> Option<&crate::runtimes::dotnet::tasks::thread_pool::PoolReading> {
        self.pool.get_or_init(|| self.context.as_ref().ok().map(|c| crate::runtimes::dotnet::tasks::thread_pool::read(c))).as_ref()
    }

    /// The runtime's crash facts (every thread's last exception, createdump's header, which
    /// thread died how); `None` when the runtime or its code map cannot be read.
    pub(crate) fn crash_reading(&self, stacks: &[Stack]) -> Option<crash::CrashReading> {
        let c = self.context.as_ref().ok()?;
        let code = self.code.as_ref()?;
        let mut r = self.exceptions()?.clone();
        r.crash = crash::crash_in(c, &r, stacks, code);
        Some(r)
    }

    /// Every thread's last thrown exception and createdump's header, read on first use.
    fn exceptions(&self) -> Option<&crash::CrashReading> {
        self.exceptions
            .get_or_init(|| {
                let c = self.context.as_ref().ok()?;
                Some(crash::exceptions_in(c, self.code.as_ref()?))
            })
            .as_ref()
    }
}

impl RuntimeLocks for DotnetRuntime<'_> {
    fn merge_locks(&self, threads: &[ThreadInput<'_>], facts: &mut WaitFacts) -> RuntimeWaits {
        match (self.reading(), &self.context) {
            (DotnetReading::Runtime(r), Ok(c)) => {
                facts.diagnostics.extend(r.diagnostics.iter().cloned());
                let names = locks::managed_threads(c, r, &mut facts.diagnostics);
                let tids: Vec<u32> = threads.iter().map(|t| t.tid).collect();
                let stacks: Vec<&[&str]> = threads.iter().map(|t| t.functions.as_slice()).collect();
                locks::merge_runtime(r, &names, &tids, &stacks, facts);
                // Waits the runtime keeps no record of: on what the threads' frames keep.
                crate::runtimes::dotnet::threads::object_waits::merge(c, r, &names, threads, facts);
                let mut worker_pool = locks::worker_pool(r, &names, facts);
                if let Some(p) = worker_pool.as_mut() {
                    p.queued = self.pool_reading().and_then(|q| q.queued());
                    if let Some(Ok(c)) = self.pool_reading().map(|q| &q.counters) {
                        (p.existing, p.max, p.idle) = (Some(c.existing), Some(c.max), Some(c.idle()));
                    }
                }
                // The GC's events and who waits on them, before anything is called idle: a
                // thread waiting for a collection is not idle.
                let collection = self.collection.get_or_init(|| read_collection(c, r, threads, facts));
                // Sleepers, idle workers and the runtime's idle service threads wait for nobody.
                let finalizer = r.threads.iter().find(|th| th.is_finalizer && th.os_tid != 0).map(|th| th.os_tid);
                let WaitFacts { threads: waits, locks: all_locks, .. } = facts;
                for (t, w) in threads.iter().zip(waits.iter_mut()) {
                    if collection.as_ref().is_some_and(|g| g.waiters.contains(&t.tid)) || !idle::may_be_idle(w, all_locks) {
                        continue;
                    }
                    let inputs = idle::IdleInputs {
                        is_finalizer: finalizer == Some(t.tid),
                        timed: matches!(w.state, ThreadState::Futex { .. }) && t.registers.syscall_args()[3] != 0,
                        holds_awaited_lock: all_locks.iter().any(|l| l.owner.tid() == Some(t.tid) && !l.waiter_tids.is_empty()),
                    };
                    if let Some(state) = idle::classify(&t.frames, inputs) {
                        idle::set_idle(t.tid, state, w, all_locks);
                    }
                }
                let work = threads.iter().filter_map(|t| crate::runtimes::dotnet::tasks::task_runners::thread_work(t.tid, t.registers.sp(), &t.frames)).collect();
                let stacks = threads
                    .iter()
                    .zip(waits.iter())
                    .filter(|(_, w)| !w.state.is_idle())
                    .map(|(t, _)| crate::runtimes::dotnet::tasks::task_runners::StackOf { tid: t.tid, sp: t.registers.sp() })
                    .collect();
                let _ = self.work.set((work, stacks));
                RuntimeWaits { threads: names, worker_pool }
            }
            (DotnetReading::Unsupported { why, .. }, _) => {
                facts.diagnostics.push(Diagnostic::warning(STAGE, why.clone()));
                RuntimeWaits::default()
            }
            _ => RuntimeWaits::default(),
        }
    }
}

impl Runtime for DotnetRuntime<'_> {
    fn code_lookup(&self) -> Option<&dyn CodeLookup> {
        self.code.as_ref().map(|c| c as &dyn CodeLookup)
    }

    fn walks_heap(&self) -> bool {
        matches!(self.reading(), DotnetReading::Runtime(r) if !r.threads.is_empty())
    }

    fn plan_heap(&self, budget: HeapBudget) {
        let _ = self.memory_limit.set(budget);
    }

    fn prepare_heap(&self) {
        let _ = self.heap_ahead();
    }

    fn report_section(&self, waits: &RuntimeWaits, facts: &mut WaitFacts) -> Option<RuntimeReport> {
        let reading = self.reading();
        let mut report = match reading {
            DotnetReading::NotDotnet => return None,
            DotnetReading::Unsupported { version, .. } => DotnetReport {
                summary: reading.summary(),
                runtime_version: Some(version.clone()),
                managed_threads: 0,
                thread_pool: None,
                heap: None,
                gc: None,
                exceptions: Vec::new(),
                createdump: None,
                sync_table: None,
                async_stacks: Vec::new(),
                async_groups: Vec::new(),
                async_tasks: None,
            },
            DotnetReading::Runtime(r) => DotnetReport {
                summary: reading.summary(),
                runtime_version: Some(r.version.product.clone()),
                managed_threads: r.threads.len(),
                thread_pool: self.thread_pool(waits),
                heap: None,
                gc: None,
                exceptions: Vec::new(),
                createdump: None,
                sync_table: r.sync_table.map(|t| SyncTableReport { address: crate::hex::Hex(t.address), total: t.total, free: t.free }),
                async_stacks: Vec::new(),
                async_groups: Vec::new(),
                async_tasks: None,
            },
        };
        if let Some(x) = self.exceptions() {
            report.exceptions = x
                .thread_exceptions
                .iter()
                .map(|t| ThreadExceptionReport { tid: t.os_tid, exception: crash::exception_report(&t.exception) })
                .collect();
            report.createdump = x.diaginfo;
            facts.diagnostics.extend(x.diagnostics.iter().cloned());
        }
        if let (true, Ok(c)) = (self.walks_heap(), &self.context) {
            let ahead = self.heap_ahead().lock().ok().and_then(|mut a| a.take()).unwrap_or_else(|| read_ahead(c, &self.lock_objects_ahead(), self.memory_limit()));
            if let Some(l) = ahead.over_limit {
                let _ = self.over_limit.set(l);
            }
            let targets = gc::report::lock_objects(&facts.locks);
            // The walk ahead looked for these objects' referrers among others; walked again for
            // exactly these in the rare case it cannot tell what that walk would have found.
            let reading = ahead.gc.and_then(|u| u.resolve(c, &targets).map(Ok).unwrap_or_else(|| gc::read_in(c, &targets, false)));
            if let Ok(mut g) = self.graph.lock() {
                *g = ahead.graph;
            }
            if let Some(gc) = gc::report::attach_reading(reading, &mut report, &mut facts.locks, &mut facts.diagnostics) {
                // A lock object held by a static field is named by it (`Ledger._sync`).
                let statics = crate::runtimes::dotnet::threads::static_holders::StaticSlots::new(c, &gc);
                crate::runtimes::dotnet::threads::static_holders::name(&statics, &mut facts.locks);
                // The objects queued to the pool, when its queues were read.
                let queued: Option<std::collections::HashSet<u64>> =
                    self.pool_reading().and_then(|p| p.queues.as_ref().ok()).map(|q| q.items.iter().map(|i| i.object).collect());
                let timer_queue = self.pool_reading().and_then(|p| p.timer_queue());
                crate::runtimes::dotnet::tasks::async_waits::link(&report.async_stacks, &gc.semaphores, queued.as_ref(), timer_queue, facts);
                // Who runs the tasks and holds the semaphores nothing records a holder of.
                if let Some((work, stacks)) = self.work.get() {
                    crate::runtimes::dotnet::tasks::task_runners::tie_tasks(c.process, work, &mut facts.locks);
                    crate::runtimes::dotnet::tasks::task_runners::tie_semaphores(c.process, stacks, &mut facts.locks);
                    crate::runtimes::dotnet::threads::static_holders::name_statics_of_waits(&statics, &mut facts.locks);
                    if let Some(p) = self.pool_reading() {
                        let queued: Vec<&str> = p.types.iter().map(|t| t.name.as_str()).collect();
                        crate::runtimes::dotnet::tasks::task_runners::queued_release(&queued, work, &mut facts.locks);
                    }
                }
            }
        }
        if let (Some(g), Some(Some(c)), Some(heap)) = (report.gc.as_mut(), self.collection.get(), report.heap.as_ref()) {
            g.attach_collection(c, heap.total_bytes);
        }
        let gc_stalled = report.gc.as_ref().is_some_and(|g| g.stalled);
        Some(RuntimeReport { section: RuntimeSection::Dotnet(report), gc_stalled })
    }

    fn attach_heap(&self, stacks: &[Stack], frames: &[Vec<crate::threads::FrameReport>], section: &mut RuntimeReport, diagnostics: &mut Vec<Diagnostic>) {
        let RuntimeSection::Dotnet(report) = &mut section.section;
        if let Some(heap) = report.heap.as_mut() {
            crate::runtimes::dotnet::gc::readings::attach(self, stacks, frames, heap, diagnostics);
        }
    }

    fn heap_reading(&self) -> Option<Result<crate::runtimes::HeapReading, String>> {
        crate::runtimes::dotnet::gc::readings::reading(self)
    }

    fn heap_retention(&self) -> Option<Result<crate::runtimes::HeapRetention, Diagnostic>> {
        Some(crate::runtimes::dotnet::gc::readings::retention(self))
    }

    fn object_roots(&self, stacks: &[Stack], frames: &[Vec<crate::threads::FrameReport>], addresses: &[u64], all_roots: bool) -> Option<Result<Vec<crate::runtimes::ObjectRoots>, String>> {
        Some(crate::runtimes::dotnet::gc::readings::object_roots(self, stacks, frames, addresses, all_roots))
    }

    fn crash(&self, stacks: &[Stack]) -> Option<crate::crash::RuntimeCrashFacts> {
        self.crash_reading(stacks)?.runtime_facts()
    }

    fn verdict_limits(&self) -> Vec<Limit> {
        let mut out = self.reading_limits();
        out.extend(self.over_limit.get().cloned());
        out
    }

    fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut out = self.failures.clone();
        // Said by the reading when it was made; else here, once.
        if self.reading.get().is_none()
            && let Err(e) = &self.context
            && let Some((_, why)) = e.why()
        {
            out.push(Diagnostic::warning(STAGE, why));
        }
        if let Some(code) = &self.code {
            out.extend(code.code.lookup_diagnostics());
        }
        if let Ok(c) = &self.context {
            out.extend(image_notes(&c.image));
        }
        out
    }
}

/// The heap work of [`HeapAhead`]: the walk looking for the referrers of `targets`, then the
/// object graph from its objects. A panic in either is said as why that part was not read.
/// Under a memory `limit`, the walk keeps objects for the graph only as many as it leaves room
/// for; past that, the graph is not built and the limit says why.
fn read_ahead(c: &Context<'_>, targets: &[u64], budget: Option<&HeapBudget>) -> HeapAhead {
    let limit = budget.and_then(|b| b.limit.as_ref());
    let available = limit.map(|l| l.for_heap_graph(crate::memory_budget::anonymous_in_use()));
    // The scratch directory is looked at only under a limit; the walk keeps objects for as
    // many as its lists leave room for, with scratch after it or without.
    let scratch = match (budget, available) {
        (Some(b), Some(_)) => Some((b.scratch_dir.as_path(), crate::scratch::space_of(&b.scratch_dir))),
        _ => None,
    };
    // With scratch at hand, the objects' references the walk reads for the graph stay in memory
    // while what its lists leave lasts, and go to scratch files after (the plan, made once the
    // walk has counted the objects, comes after).
    let (per_object, refs) = match (&scratch, available) {
        (Some((dir, crate::scratch::ScratchSpace::Free(_))), Some(a)) => {
            (WALK_BYTES_PER_OBJECT, crate::scratch::Place::Files(crate::scratch::ScratchDir::new(dir.to_path_buf(), crate::memory_budget::walk_refs_memory(a))))
        }
        _ => (GRAPH_BYTES_PER_OBJECT, crate::scratch::Place::Memory),
    };
    let cap = available.map(|a| gc::walk::NodeCap::new(a / per_object));
    match caught(|| gc::walk_in(c, targets, cap.as_ref(), &refs)) {
        Ok(mut u) => {
            let objects = u.reading.stats.total_objects;
            let plan = match (&scratch, limit) {
                (Some((dir, space)), Some(_)) => crate::memory_budget::plan_graph(objects, available, dir, space, u.reading.over_node_cap),
                _ => GraphPlan::Memory,
            };
            // The walk's objects and references: for the graph, or freed now when there is none.
            let walked = u.reading.walked.take();
            let place = match plan {
                GraphPlan::Memory => crate::scratch::Place::Memory,
                // What the walk's lists took is free again once the graph is built from them: the
                // dominator tree's arrays (read at random) may have it, beside the files.
                GraphPlan::Scratch(dir) => crate::scratch::Place::Files(crate::scratch::ScratchDir::new(dir, available.unwrap_or(0).saturating_sub(objects.saturating_mul(2)))),
                GraphPlan::Degraded { needed, scratch } => {
                    let (Some(limit), Some(available)) = (limit, available) else { return HeapAhead { gc: Ok(u), graph: None, over_limit: None } };
                    let why = format!(
                        "the object graph of {objects} objects needs about {needed} bytes, over the {available} bytes the memory limit of {} bytes leaves it, and scratch files do not make it fit (--max-memory, --scratch-dir lift it)",
                        limit.bytes
                    );
                    return HeapAhead { graph: Some(Err(why)), gc: Ok(u), over_limit: Some(Limit::HeapGraphMemory { objects, needed, available, limit: limit.clone(), scratch }) };
                }
            };
            HeapAhead { graph: Some(caught(|| gc::graph_ahead(c, walked, &place))), gc: Ok(u), over_limit: None }
        }
        Err(why) => HeapAhead { gc: Err(why), graph: None, over_limit: None },
    }
}

/// `read()`, or why it panicked.
fn caught<T>(read: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|panic| {
        // A scratch file that could not grow (the disk filled after the plan looked): said as
        // such, not as a bug.
        if let Some(full) = panic.downcast_ref::<crate::scratch::ScratchFull>() {
            return Err(format!("the heap's object graph not read: {full}"));
        }
        let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default();
        Err(format!("GC heap not read: knot failed reading it (a bug: {what})"))
    })
}

/// The collection in progress, from the GC's state and the condition variables threads wait on
/// (see [`gc::collection`]); the GC events' locks are named for the GC and, in a workstation GC,
/// owned by the thread that collects. `None` when the GC's state cannot be read.
fn read_collection(c: &Context<'_>, r: &crate::runtimes::dotnet::threads::reading::RuntimeReading, threads: &[ThreadInput<'_>], facts: &mut WaitFacts) -> Option<gc::collection::Collection> {
    use crate::waits::evidence::Inference;
    use crate::waits::lock::Holder;
    use crate::waits::{LockKind, NativeLock, NativeLockType, Owner, Release};
    use gc::collection::{Collection, Collector, CollectorWhy, StackTop};
    let t = c.target();
    let build = gc::build_facts(c).ok()?;
    let prepared = gc::prepare(c.module, &t, build).ok()?;
    let vars = &prepared.vars;
    let conds: Vec<u64> = facts.locks.iter().filter(|l| l.kind == LockKind::Cond).filter_map(|l| l.address.map(|a| a.0)).collect();
    let events = gc::collection::events(&t, vars, &conds);
    let event_locks: Vec<String> = facts.locks.iter().filter(|l| l.kind == LockKind::Cond && l.address.is_some_and(|a| events.iter().any(|e| e.cond == a.0))).map(|l| l.id.clone()).collect();
    let mut collectors: Vec<Collector> = r.threads.iter().filter(|th| th.is_gc_thread && th.os_tid != 0).map(|th| Collector { tid: th.os_tid, why: CollectorWhy::SuspendedRuntime }).collect();
    if vars.server && collectors.is_empty() {
        let managed: std::collections::HashSet<u32> = r.threads.iter().map(|th| th.os_tid).collect();
        let unmanaged: Vec<StackTop> = threads.iter().filter(|th| !managed.contains(&th.tid)).map(|th| StackTop { tid: th.tid, sp: th.registers.sp() }).collect();
        collectors = gc::collection::server_gc_threads(&t, vars, &unmanaged);
    }
    // The collectors wait on the GC's events too (its threads join): they are not its waiters.
    let mut waiters: Vec<u32> = threads
        .iter()
        .zip(facts.threads.iter())
        .filter(|(t, w)| !collectors.iter().any(|c| c.tid == t.tid) && w.blocked_on.as_ref().is_some_and(|b| event_locks.contains(b)))
        .map(|(t, _)| t.tid)
        .collect();
    waiters.sort_unstable();
    let mid_collection = vars.structures_invalid == Some(true);
    let background = vars.background_gc_state.is_some_and(|s| s != 2);
    let suspended = collectors.iter().any(|c| c.why == CollectorWhy::SuspendedRuntime);
    // A wait on a GC event is no collection by itself (an idle background GC thread waits for
    // its start event): the runtime suspended for a GC, or a server heap's done event waited on
    // (it is set whenever no GC runs), is.
    let on_done_event = facts.locks.iter().filter(|l| event_locks.contains(&l.id) && !l.waiter_tids.is_empty()).any(|l| {
        l.address.is_some_and(|a| events.iter().any(|e| e.cond == a.0 && matches!(e.place, gc::collection::EventPlace::Heap { .. })))
    });
    let in_progress = suspended || background || mid_collection || (vars.server && on_done_event && !waiters.is_empty());
    if !in_progress {
        return Some(Collection { server: vars.server, ..Collection::default() });
    }
    // The events' locks: the GC's, held by the collector when the runtime records it.
    for l in facts.locks.iter_mut().filter(|l| event_locks.contains(&l.id)) {
        let place = l.address.and_then(|a| events.iter().find(|e| e.cond == a.0)).map(|e| e.place);
        let heap = place.and_then(|p| match p {
            gc::collection::EventPlace::Heap { index, .. } => Some(index),
            gc::collection::EventPlace::Statics { .. } => None,
        });
        l.native = Some(NativeLock { what: NativeLockType::GcEvent { heap, collectors: collectors.iter().map(|c| c.tid).collect() }, exited_owner: None });
        if let [Collector { tid, why: CollectorWhy::SuspendedRuntime }] = collectors.as_slice() {
            l.owner = Owner::Known { tid: *tid };
            l.owner_tid = Some(*tid);
        } else {
            // The server GC's threads: the collection ends when every one of them is done.
            l.holders = collectors
                .iter()
                .map(|c| match c.why {
                    CollectorWhy::SuspendedRuntime => Holder::known(c.tid),
                    CollectorWhy::ServerGcThread { index, heap } => Holder::inferred(c.tid, Inference::ServerGcThread { index, heap }),
                })
                .collect();
            l.release = (!l.holders.is_empty()).then_some(Release::All);
        }
    }
    Some(Collection { server: vars.server, in_progress, collectors, waiters, events, mid_collection })
}
