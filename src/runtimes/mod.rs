//! Managed runtimes, behind one entry: `recognise` finds the runtime of a process once per
//! analysis and gives one handle (`Runtime`) that owns everything read about it — the located
//! descriptor, memory views, caches. The pipeline asks the handle, and only the handle:
//! - the unwinder and symbolizer for its code map (`Runtime::code_lookup`, the
//!   [`CodeLookup`] seam of `unwind::managed`);
//! - the wait engine for its locks and waits (`crate::waits::RuntimeLocks`);
//! - the report for its section (`Runtime::report_section`) and crash facts
//!   (`Runtime::crash`);
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
use crate::unwind::managed::CodeLookup;
use crate::unwind::Stack;
use crate::waits::{RuntimeLocks, RuntimeWaits, WaitFacts};

/// One managed runtime in one process, read once.
pub(crate) trait Runtime: RuntimeLocks + Send + Sync {
    /// The runtime's map of the code it made, for the unwinder and the symbolizer; `None` when
    /// it cannot be read (a diagnostic says why).
    fn code_lookup(&self) -> Option<&dyn CodeLookup>;

    /// The handle as the .NET runtime's, when it is (the heap's holders are read through it,
    /// never by recognising the runtime again).
    fn as_dotnet(&self) -> Option<&dotnet::runtime::DotnetRuntime<'_>> {
        None
    }

    /// Whether [`Runtime::report_section`] walks a heap (the pipeline's `Phase::Heap`).
    fn walks_heap(&self) -> bool {
        false
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
pub(crate) fn recognise<'p>(process: &'p Process, locator: &Locator) -> Option<Box<dyn Runtime + 'p>> {
    if let Some(d) = dotnet::runtime::recognise(process, locator) {
        return Some(Box::new(d));
    }
    None
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

impl RuntimeSection {
    /// The .NET GC heap's reading, when the section has one.
    pub(crate) fn dotnet_heap_mut(&mut self) -> Option<&mut dotnet::gc::report::HeapReport> {
        match self {
            RuntimeSection::Dotnet(d) => d.heap.as_mut(),
        }
    }
}
