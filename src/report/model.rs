//! The report: every fact knot established about a dump, in one data model. Renderers (text,
//! JSON) only format it. Changing a field's meaning or shape bumps [`SCHEMA_VERSION`].

use crate::hex::Hex;
use crate::diagnostics::Diagnostic;
use crate::unwind::Trust;
use crate::waits::{LockFact, ThreadState};
use schemars::JsonSchema;
use serde::Serialize;

/// Version of the JSON report's shape; see docs/report-fields.md and docs/schema/.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    pub schema_version: u32,
    /// The knot version that wrote this report.
    pub knot_version: String,
    pub dump: DumpInfo,
    /// The one-line answer: deadlock, crash, gc_stall, contention, thread_pool_starved, blocked_on_io, idle or nothing_blocked; not_analyzed with `--stacks-only`.
    pub verdict: Verdict,
    /// Facts the verdict needs that could not be read: what is missing, what it hides, the
    /// option that supplies it. Empty when the verdict rests on everything it needs.
    pub verdict_limits: Vec<crate::graph::limits::VerdictLimit>,
    /// Why the process died; null when the dump records no crash (a gcore of a live process).
    pub crash: Option<crate::crash::CrashReport>,
    /// Every wait-for cycle; each is a deadlock.
    pub deadlocks: Vec<Deadlock>,
    /// Every lock some thread is blocked on, most contended first.
    pub locks: Vec<LockFact>,
    /// Threads with identical stacks, largest group first.
    pub groups: Vec<Group>,
    /// In the order the core lists them (the signalled thread first, for kernel cores).
    pub threads: Vec<ThreadReport>,
    pub modules: Vec<ModuleReport>,
    /// What was odd, missing or refused. A warning means some facts are missing or less certain.
    pub diagnostics: Vec<Diagnostic>,
    /// The .NET runtime, when the process has one: its version, managed threads, thread pool.
    pub dotnet: Option<crate::runtimes::dotnet::DotnetReport>,
    /// How the live process was read (`knot pid`, or the core it wrote); absent for dumps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveReport>,
}

/// A runtime's own section of the report, as the runtime's handle gives it
/// (`crate::runtimes::Runtime::report_section`).
#[derive(Debug, Clone)]
pub enum RuntimeSection {
    Dotnet(crate::runtimes::dotnet::DotnetReport),
}

impl Report {
    /// Puts a runtime's section in its place.
    pub fn set_runtime_section(&mut self, section: RuntimeSection) {
        match section {
            RuntimeSection::Dotnet(d) => self.dotnet = Some(d),
        }
    }
}

// A wait-for cycle (`graph::Cycle`) as the report gives it, with its chain in words. (No doc
// comment: the schema's `Deadlock` has none.)
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Deadlock {
    /// The threads in cycle order: each waits for a lock held by the next; the last waits for
    /// one held by the first. Starts with the lowest tid.
    pub tids: Vec<u32>,
    /// `locks[i]` is the lock `tids[i]` waits for (held by `tids[i+1]`).
    pub locks: Vec<String>,
    /// True when an edge rests on an inferred owner rather than one the lock records.
    pub inferred: bool,
    /// The chain in words.
    pub description: String,
}

/// A live reading: the process was stopped only while its registers and memory were copied.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LiveReport {
    pub pid: u32,
    /// How long the process was stopped, from the first thread stopped to the last let go.
    pub pause_ms: f64,
    pub threads: u32,
    /// Process memory copied (stacks, writable memory, module headers).
    pub bytes_copied: u64,
    /// Memory left out by the copy limit (a warning says so when not 0).
    pub bytes_left_out: u64,
}

impl From<&crate::core::knot_note::Capture> for LiveReport {
    fn from(c: &crate::core::knot_note::Capture) -> Self {
        LiveReport { pid: c.pid, pause_ms: c.pause_us as f64 / 1000.0, threads: c.threads, bytes_copied: c.bytes_copied, bytes_left_out: c.bytes_left_out }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DumpInfo {
    pub path: String,
    pub size_bytes: u64,
    pub pid: Option<u32>,
    /// The executable's name (the main thread's `comm`).
    pub process_name: Option<String>,
    /// The start of the command line, as the core records it (at most 80 bytes).
    pub command_line: Option<String>,
    /// The signal that caused the dump (kernel cores), if any.
    pub signal: Option<SignalReport>,
    /// True when part of the dump could not be read: see `diagnostics`.
    pub partial: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SignalReport {
    pub number: i32,
    pub name: String,
    /// `si_code`; null when the core has no NT_SIGINFO.
    pub code: Option<i32>,
    pub fault_address: Option<Hex>,
    pub sender_pid: Option<u32>,
    /// `siginfo` (NT_SIGINFO) or `prstatus` (only `pr_cursig`: code and address unknown).
    pub source: crate::core::siginfo::SignalSource,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ThreadReport {
    pub tid: u32,
    /// The thread's name where the dump records one (kernel and gcore cores only the main thread's; `knot pid` every thread's).
    pub name: Option<String>,
    /// This thread took the signal that caused the dump.
    pub signalled: bool,
    /// Innermost first. Inlined calls are frames of their own (`inlined: true`), at the same `ip`
    /// as the real frame that follows them.
    pub frames: Vec<FrameReport>,
    /// Why the walk stopped; `complete` is true only when it reached the thread's first frame.
    pub stack_end: StackEndReport,
    /// What the thread was doing, from its registers.
    pub state: ThreadState,
    /// The id of the lock (in `locks`) the thread is blocked on.
    pub blocked_on: Option<String>,
    /// The managed thread id (`Thread.ManagedThreadId`), for a .NET thread.
    pub managed_thread_id: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At least one wait-for cycle: those threads can never move again.
    Deadlock,
    /// The process died of a crash (see `crash`) and no deadlock was found.
    Crash,
    /// The .NET GC heap is near its hard limit and the GC recorded an out-of-memory: the process
    /// is stalled in its own garbage collector.
    GcStall,
    /// Threads wait for locks other threads hold, without a cycle (a convoy).
    Contention,
    /// Every .NET thread-pool worker is blocked inside a work item and some wait for tasks (sync
    /// over async): the work that would complete those tasks is queued behind them.
    ThreadPoolStarved,
    /// Blocked threads wait on I/O, not on each other.
    BlockedOnIo,
    /// Threads sleep, poll or wait on condition variables; nobody waits for a lock's owner.
    Idle,
    /// No thread is blocked.
    NothingBlocked,
    /// No verdict: locks and waits were not analysed (`--stacks-only`).
    NotAnalyzed,
}

impl Verdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Deadlock => "deadlock",
            Verdict::Crash => "crash",
            Verdict::GcStall => "gc stall",
            Verdict::Contention => "contention",
            Verdict::ThreadPoolStarved => "thread pool starved",
            Verdict::BlockedOnIo => "blocked on I/O",
            Verdict::Idle => "idle",
            Verdict::NothingBlocked => "nothing blocked",
            Verdict::NotAnalyzed => "not analyzed",
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Group {
    /// Threads whose stacks are identical (same frames at the same instruction pointers).
    pub tids: Vec<u32>,
    /// The shared stack.
    pub frames: Vec<FrameReport>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FrameReport {
    /// Position in the stack, 0 innermost; inlined frames get their own index, as in gdb.
    pub index: usize,
    pub ip: Hex,
    pub function: Option<String>,
    /// Offset of `ip` from the start of `function`, when a symbol table gave it.
    pub function_offset: Option<Hex>,
    /// File name of the module (`libc.so.6`), or null when the address is in no known module.
    pub module: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// A call the compiler inlined into the frame that follows.
    pub inlined: bool,
    /// A function that tail-called (jumped to) the frame before it and so has no frame on the
    /// stack: put back from the DWARF call sites, as gdb shows it. `ip` is the address after
    /// the jump.
    pub tail_call: bool,
    /// This frame is a signal trampoline: gdb's `<signal handler called>`.
    pub signal_frame: bool,
    /// How the frame was found: context, cfi, runtime_unwind_info, frame_pointer, scan or
    /// transition_frame. Frames in managed code found by frame pointer or scan are best effort.
    pub trust: Trust,
    /// A managed (.NET JIT or ReadyToRun) method's frame: `function` is its qualified name as
    /// SOS's `clrstack` gives it, `module` its assembly, `function_offset` from the method's start.
    pub managed: bool,
    /// A managed method's parameter list, e.g. `(System.Object, Boolean ByRef)`.
    pub signature: Option<String>,
    /// Not a call frame but a runtime transition record on the stack (SOS's
    /// `[InlinedCallFrame: addr]`), shown where it sits between the frames; `ip` is the return
    /// address it saved, or 0.
    pub transition: Option<TransitionReport>,
    /// The frame's module has no file and no debug file at hand (its file was absent): nothing
    /// can name the frame, as `eu-unstrip -n` lists such a module without a file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_symbols: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TransitionReport {
    /// The runtime's type name for the record, e.g. `InlinedCallFrame`.
    pub kind: String,
    /// Where the record lives.
    pub address: Hex,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StackEndReport {
    /// The walk reached the thread's first frame (or the program's entry point) and found no
    /// frame by scanning.
    pub complete: bool,
    /// outermost, zero_return_address, entry_point, no_progress, unreadable, no_caller,
    /// not_code, depth_limit.
    pub reason: String,
    /// The address involved, when there is one.
    pub address: Option<Hex>,
    pub detail: String,
    /// Frames found by scanning the stack for return addresses (`trust` `scan`); present only
    /// when there are some.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scanned_frames: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ModuleReport {
    /// The path the dump names.
    pub path: String,
    /// Set only for the program when the dump's list of files does not name it: where `path`
    /// came from instead (`exe_option`, `auxv_execfn`, `prpsinfo`, `unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_source: Option<String>,
    pub start: Hex,
    pub end: Hex,
    pub load_bias: Hex,
    pub build_id: Option<String>,
    /// "dump" when read from the image in the dump, "file" when only the file had one.
    pub build_id_source: Option<String>,
    /// loaded, in_memory, missing or refused.
    pub file_status: String,
    /// The file used, or the reason it was refused.
    pub file_detail: Option<String>,
    /// Where symbols came from.
    pub debug_info: Option<String>,
}

impl FrameReport {
    /// The marker for a runtime transition record.
    pub fn transition(index: usize, t: &crate::unwind::managed::TransitionFrame) -> FrameReport {
        FrameReport {
            index,
            ip: Hex(t.resume.and_then(|r| r.ip()).unwrap_or(0)),
            function: None,
            function_offset: None,
            module: None,
            file: None,
            line: None,
            inlined: false,
            tail_call: false,
            signal_frame: false,
            trust: Trust::TransitionFrame,
            managed: false,
            signature: None,
            transition: Some(TransitionReport { kind: t.kind.clone(), address: Hex(t.address) }),
            no_symbols: false,
        }
    }

    /// A managed method's frame.
    pub fn managed(index: usize, frame: &crate::unwind::Frame, m: crate::symbols::ManagedSymbol, module: Option<String>) -> FrameReport {
        FrameReport {
            index,
            ip: Hex(frame.ip),
            function: m.qualified,
            function_offset: Some(Hex(m.offset)),
            module: m.module.or(module),
            file: None,
            line: None,
            inlined: false,
            tail_call: false,
            signal_frame: false,
            trust: frame.trust,
            managed: true,
            signature: m.signature,
            transition: None,
            no_symbols: false,
        }
    }
}
