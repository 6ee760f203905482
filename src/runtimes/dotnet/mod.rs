//! The .NET (CoreCLR) runtime reader: CoreCLR's own structures read straight from dump memory
//! through the runtime's data contract descriptor — no DAC, no SOS.
//!
//! An analysis reaches it through one handle, `runtime::DotnetRuntime` (the
//! `crate::runtimes::Runtime` of a .NET process), which owns everything read about the runtime.
//! The reader is grouped by what each part reads:
//! - `contract`: finding the runtime and its version's facts — `libcoreclr.so` and its
//!   exported contract descriptor (`locate`, `descriptor`, `elf`), located once (`context`), the
//!   memory view over it (`target`), and what a build's descriptor does not say, as data from
//!   `analyzers/dotnet/` (`facts`, `supplement`, `catalog`, `hard_limit_store`, `gc_constants`);
//! - `types`: objects, their MethodTables and type names (`objects`), the modules' ECMA-335
//!   metadata (`metadata`), methods and their names (`methoddesc`, `methodname`), static fields
//!   (`statics`);
//! - `code`: an instruction pointer in JIT-compiled (`codeheap`) or ReadyToRun (`readytorun`)
//!   code to its method (`codemap`, `rangesection`), precode stubs (`precode`), the transition
//!   Frames (`frames`): the unwinder's `unwind::managed::CodeLookup`;
//! - `threads`: the `ThreadStore`'s threads and their names, the monitors (sync blocks, thin
//!   locks, `System.Threading.Lock`), who waits for which (`blocking`), who is idle (`idle`),
//!   their lock facts (`locks`) — one reading, `threads::reading`; the waits it keeps no record
//!   of, read from what the waiting threads' frames keep (`object_waits`: a ReaderWriterLockSlim,
//!   a pool of resources, a class's initialiser);
//! - `crash`: each thread's last thrown exception as SOS `pe` prints it, the FailFast message,
//!   createdump's header, and which thread died how;
//! - `tasks`: tasks and async state machines, async stacks as SOS `dumpasync` chains them, task
//!   waits and SemaphoreSlims, the thread pool's counters and queues;
//! - `gc`: the GC heap — its walk, statistics, state, the object graph, retention and roots.
//!
//! `report` is the runtime's report section. What a build's descriptor does not describe comes
//! from per-build data in `analyzers/dotnet/`; an unknown build gets threads but no monitors, with
//! "unsupported runtime build `<version> <build-id>`". A runtime without a descriptor (before .NET
//! 9) is `DotnetReading::Unsupported`. Nothing here panics on dump data, and every list walk is
//! bounded and cycle-checked.

pub(crate) mod code;
pub(crate) mod contract;
pub(crate) mod crash;
pub(crate) mod error;
pub(crate) mod gc;
pub(crate) mod report;
pub(crate) mod runtime;
pub(crate) mod tasks;
pub(crate) mod threads;
pub(crate) mod types;

/// The stage a .NET reading's diagnostics name.
const STAGE: &str = "dotnet";

pub(crate) use threads::blocking::BlockingKind;
#[cfg(test)]
pub(crate) use code::codemap::{code_map, CodeMap};
pub(crate) use contract::context::{Context, NoContext};
pub(crate) use error::DotnetError;
pub(crate) use contract::locate::{DescriptorSource, RuntimeVersion, Source};
pub(crate) use report::DotnetReport;
pub(crate) use threads::{ManagedThread, ThreadCounts};
pub(crate) use threads::reading::{read_runtime, unreadable, DotnetReading, MonitorWait, RuntimeReading, Support, WaitSource};
#[cfg(test)]
pub(crate) use threads::reading::{read, read_with, read_with_facts};

#[cfg(test)]
mod tests;
