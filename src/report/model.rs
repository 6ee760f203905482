//! The report: every fact knot established about a dump, in one data model. Renderers (text,
//! JSON) only format it. Changing a field's meaning or shape bumps [`SCHEMA_VERSION`].

use crate::hex::Hex;
use crate::diagnostics::Diagnostic;
pub use crate::graph::verdict::Verdict;
pub use crate::runtimes::RuntimeSection;
pub use crate::threads::frame::{FrameReport, TransitionReport};
pub use crate::threads::{StackEndReport, ThreadReport};
use crate::waits::LockFact;
use schemars::JsonSchema;
use serde::Serialize;

/// Version of the JSON report's shape; see docs/report-fields.md and docs/schema/.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    pub schema_version: u32,
    /// The knot version that wrote this report.
    pub knot_version: String,
    pub dump: DumpInfo,
    /// The one-line answer: deadlock, crash, gc_stall, contention, thread_pool_starved, blocked_on_io, idle or nothing_blocked; not_analyzed with `--stacks-only`.
    pub verdict: Verdict,
    /// The verdict's stable key for counting a wedge across a fleet (`deadlock:<16 hex
    /// digits>`, `contention:…`): the same wedge gives the same key in every dump; null with
    /// `--stacks-only`. See docs/report-fields.md.
    pub verdict_signature: Option<String>,
    /// Facts the verdict needs that could not be read: what is missing, what it hides, the
    /// option that supplies it. Empty when the verdict rests on everything it needs.
    pub verdict_limits: Vec<VerdictLimit>,
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
    /// The cycle's stable key (`cycle:<16 hex digits>`): the same deadlock gives the same key in
    /// every dump of it; see docs/report-fields.md.
    pub signature: String,
    /// Present when the cycle goes through the thread pool (sync over async): the last lock is
    /// completed only by work queued to the pool, and every worker of the pool — the first
    /// thread among them — is blocked while the pool cannot grow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_pool: Option<DeadlockPool>,
    /// The deadlock's other threads, beyond the chain (ascending): holders of a lock on it that
    /// any one of them could release (a semaphore, a pool), all stuck in the same deadlock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<u32>,
}

/// The thread pool as a node of a cycle.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeadlockPool {
    /// Every worker, all blocked: the pool's edges to threads.
    pub workers: Vec<u32>,
    /// The most workers the pool may have (it has that many).
    pub max_workers: Option<u32>,
    /// Work items waiting in its queues.
    pub queued_work_items: Option<u32>,
}

// A `graph::limits::Limit` in words (`words::verdict_limit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct VerdictLimit {
    /// What could not be read: a module's file, the runtime's data.
    pub missing: String,
    /// What the verdict cannot see without it.
    pub hides: String,
    /// The option (or step) that supplies it.
    pub fix: String,
    /// The missing thing in a few words, for the verdict line (`libc.so.6's file`).
    pub short: String,
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
pub struct Group {
    /// Threads whose stacks are identical (same frames at the same instruction pointers).
    pub tids: Vec<u32>,
    /// The shared stack.
    pub frames: Vec<FrameReport>,
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
