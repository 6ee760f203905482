//! Managed runtimes, behind one entry: `recognise` finds the runtime of a process once per
//! analysis and gives one handle (`Runtime`) that owns everything read about it — the located
//! descriptor, memory views, caches. The pipeline asks the handle, and only the handle:
//! - the unwinder and symbolizer for its code map (`Runtime::code_lookup`, the
//!   [`CodeLookup`] seam of `unwind::managed`);
//! - the wait engine for its locks and waits (`crate::waits::RuntimeLocks`);
//! - the report for its section (`Runtime::report_section`), the heap's retention in it
//!   (`Runtime::attach_heap`) and crash facts (`Runtime::crash`);
//! - the `knot heap` commands for the heap read alone (`Runtime::heap_reading`), its retention
//!   (`Runtime::heap_retention`) and why objects are alive (`Runtime::object_roots`);
//! - every failure to read a part of it, as diagnostics that name the contract or structure
//!   (`Runtime::diagnostics`).
//!
//! Each reader says plainly when it does not know the runtime build it is looking at, and the
//! native reading goes on regardless. A second runtime (the JVM) is one more module here with
//! one more arm in `recognise`.

pub(crate) mod dotnet;

use crate::crash::RuntimeCrashFacts;
use crate::diagnostics::Diagnostic;
use crate::graph::limits::Limit;
use crate::process::{Locator, Process};
use crate::threads::FrameReport;
use crate::unwind::managed::CodeLookup;
use crate::unwind::Stack;
use crate::waits::{RuntimeLocks, RuntimeWaits, WaitFacts};

/// One managed runtime in one process, read once.
pub(crate) trait Runtime: RuntimeLocks + Send + Sync {
    /// The runtime's map of the code it made, for the unwinder and the symbolizer; `None` when
    /// it cannot be read (a diagnostic says why).
    fn code_lookup(&self) -> Option<&dyn CodeLookup>;

    /// Whether [`Runtime::report_section`] walks a heap (the pipeline's `Phase::Heap`).
    fn walks_heap(&self) -> bool {
        false
    }

    /// The memory limit the heap's reading is planned under (none: no limit) and its scratch
    /// directory, before [`Runtime::prepare_heap`]: a heap graph that would not fit in memory
    /// goes to scratch files, and one that fits neither is left out, [`Runtime::verdict_limits`]
    /// saying so. Nothing by default.
    fn plan_heap(&self, budget: crate::memory_budget::HeapBudget) {
        let _ = budget;
    }

    /// Does the part of [`Runtime::report_section`]'s heap work that needs no stacks (the walk,
    /// the object graph's nodes, edges and other roots). The pipeline calls it on a thread of
    /// its own as soon as the runtime is recognised, so that it runs while the stacks are walked
    /// and symbolized; `report_section` waits for it then, or does it itself when it was not
    /// started. Nothing by default.
    fn prepare_heap(&self) {}

    /// The runtime's section of the report (its heap and collector included), after
    /// [`RuntimeLocks::merge_locks`] gave `waits`. It may add to the locks it merged (the heap
    /// names their objects' holders); what could not be read goes to `facts.diagnostics`.
    fn report_section(&self, waits: &RuntimeWaits, facts: &mut WaitFacts) -> Option<RuntimeReport>;

    /// Adds what holds the heap to `section` (the object graph, with its stack roots from the
    /// pipeline's `stacks` and their `frames`, its dominator tree and retained sizes); what could
    /// not be read goes to `diagnostics`. Nothing by default.
    fn attach_heap(&self, stacks: &[Stack], frames: &[Vec<FrameReport>], section: &mut RuntimeReport, diagnostics: &mut Vec<Diagnostic>) {
        let _ = (stacks, frames, section, diagnostics);
    }

    /// The heap read alone, by type, with the collector's state (`knot heap stat`, `knot heap
    /// diff`); `None` when the runtime has no heap knot reads.
    fn heap_reading(&self) -> Option<Result<HeapReading, String>> {
        None
    }

    /// What holds the heap, summarized by type and top holder (`knot heap diff`), its stacks
    /// walked for their roots, or the diagnostic that says why not; `None` when the runtime has
    /// no heap knot reads.
    fn heap_retention(&self) -> Option<Result<HeapRetention, Diagnostic>> {
        None
    }

    /// Why each object of `addresses` is alive, the stack roots from `stacks` and their
    /// `frames`: every root that reaches it (`all_roots`) or the shortest path the search meets
    /// first (`knot heap root`); `None` when the runtime has no heap knot reads.
    fn object_roots(&self, stacks: &[Stack], frames: &[Vec<FrameReport>], addresses: &[u64], all_roots: bool) -> Option<Result<Vec<ObjectRoots>, String>> {
        let _ = (stacks, frames, addresses, all_roots);
        None
    }

    /// What the runtime recorded about how the process died (an unhandled exception, a
    /// FailFast), given the unwound stacks (a FailFast frame is found on them), for the
    /// crash reading ([`crate::crash::read`]); none by default.
    fn crash(&self, stacks: &[Stack]) -> Option<RuntimeCrashFacts> {
        let _ = stacks;
        None
    }

    /// What could not be read, and why. Call after the stacks and locks were read: lookups
    /// made during the walk add to it.
    fn diagnostics(&self) -> Vec<Diagnostic>;

    /// What the verdict is reached without because the runtime could not be read (its
    /// threads, locks and waits); none when it was read.
    fn verdict_limits(&self) -> Vec<Limit> {
        Vec::new()
    }
}

/// The runtime of `process`, when it has one knot knows; managed images are looked for through
/// `locator`.
/// Why a dump has no runtime handle: none of the runtimes knot reads is mapped in it.
pub(crate) const NONE_RECOGNISED: &str = "no managed runtime knot reads in the dump";

pub(crate) fn recognise<'p>(process: &'p Process, locator: &Locator) -> Option<Box<dyn Runtime + 'p>> {
    if let Some(d) = dotnet::runtime::recognise(process, locator) {
        return Some(Box::new(d));
    }
    None
}

/// Parses the built-in tables of the runtime `core` mapped, if any (called on a thread of its
/// own while the module files are opened). The runtime catalogue is read for the one build the
/// dump has, once its build-id is known: not here.
pub(crate) fn tables_ahead(core: &crate::core::Core) -> impl FnOnce() + Send + 'static {
    let dotnet = core.files.iter().flatten().any(|f| f.path.ends_with(dotnet::contract::locate::RUNTIME_MODULE));
    move || {
        if dotnet {
            let _ = dotnet::contract::facts::builtin();
        }
    }
}

/// A runtime's section of the report, and the facts of it the verdict reads.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeReport {
    pub(crate) section: RuntimeSection,
    /// The garbage collector is stalled: its heap is near the hard limit and it recorded an
    /// out-of-memory.
    pub(crate) gc_stalled: bool,
}

/// A runtime's own section of the report, as the runtime's handle gives it
/// (`crate::runtimes::Runtime::report_section`).
#[derive(Debug, Clone)]
pub enum RuntimeSection {
    Dotnet(crate::runtimes::dotnet::DotnetReport),
}

/// A runtime's heap read alone: its objects by type and its collector's state.
pub(crate) enum HeapReading {
    Dotnet(dotnet::gc::GcReading),
}

impl HeapReading {
    /// What the reading could not read.
    pub(crate) fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            HeapReading::Dotnet(g) => &g.diagnostics,
        }
    }

    /// What grew from `self` to `new`, type by type (two heaps of one runtime; a type's retained
    /// bytes when that dump's retention was read), with the top holders matched by root path
    /// when both were.
    pub(crate) fn diff(&self, new: &HeapReading, retained: (Option<&HeapRetention>, Option<&HeapRetention>)) -> dotnet::gc::diff::HeapDiff {
        let (HeapReading::Dotnet(a), HeapReading::Dotnet(b)) = (self, new);
        let mut d = dotnet::gc::diff::diff(&a.stats, &b.stats, (retained.0.map(|r| &r.by_type), retained.1.map(|r| &r.by_type)));
        if let (Some(ra), Some(rb)) = retained {
            d.holders = dotnet::gc::diff::holders(&ra.holders, &rb.holders);
        }
        d
    }
}

/// What holds a heap, summarized (`knot heap diff`).
pub(crate) struct HeapRetention {
    /// Retained bytes by type name.
    pub(crate) by_type: std::collections::BTreeMap<String, u64>,
    /// The top holders, each by its root path.
    pub(crate) holders: Vec<dotnet::gc::diff::HolderByPath>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// Why one object of a runtime's heap is alive: its roots and paths from them.
pub(crate) enum ObjectRoots {
    Dotnet(dotnet::gc::why_alive::WhyAlive),
}
