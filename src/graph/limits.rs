//! What a verdict was reached without: a fact it needs that could not be read, what that hides,
//! and the option that supplies it. A verdict reached without its facts says so
//! (`verdict_limits[]`), so that it never changes silently when a file is found or lost.

use crate::process::module::FileStatus;
use crate::process::Process;
use crate::threads::ThreadReport;
use crate::unwind::Trust;
use crate::waits::{LockFact, Owner, ThreadState};

/// A fact the verdict needs that could not be read (the report says it in words:
/// `report::words::verdict_limit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Limit {
    /// A module's file was not at hand and waiting threads' stacks were unwound through the
    /// module without its CFI.
    ModuleFile {
        /// The module's file name, the path the dump names, its build-id.
        name: String,
        path: String,
        build_id: Option<String>,
        file: MissingFile,
        /// The waiting threads unwound blind through it, and the ownerless locks they wait for.
        threads: usize,
        ownerless_locks: usize,
    },
    /// The .NET runtime was read, but knot has no per-build facts for its monitors' layout.
    DotnetMonitors { version: String, why: String },
    /// The .NET runtime's data could not be read at all.
    /// `file_would_help`: only the runtime's file, not at hand, kept its descriptor from knot.
    DotnetRuntime { version: String, why: String, path: Option<String>, build_id: Option<String>, file_would_help: bool },
    /// A single-file app whose managed metadata the dump lacks: its assemblies (CoreLib's among
    /// them) are bundled in the executable, whose pages a heap dump does not hold, so types and
    /// managed frames are unnamed (threads, monitors, owners and cycles are read).
    SingleFileMetadata { executable: String, build_id: Option<String> },
    /// The heap's object graph (dominators, retained sizes, holders, leak suspects) was not
    /// built: `objects` objects need about `needed` bytes, over the `available` bytes the memory
    /// limit leaves it; `scratch` says why scratch files did not make it fit.
    HeapGraphMemory { objects: u64, needed: u64, available: u64, limit: crate::memory_budget::MemoryLimit, scratch: crate::memory_budget::ScratchVerdict },
}

/// Why a module's file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MissingFile {
    NotFound { tried: String },
    Refused { path: String, reason: String },
}

/// A thread that waits: on a lock the analysis named, or on a futex word.
fn waits(t: &ThreadReport) -> bool {
    t.blocked_on.is_some() || matches!(t.state, ThreadState::Futex { .. } | ThreadState::FutexWaitv)
}

/// Modules whose file was not found (or refused) and through which a waiting thread's stack
/// could not be unwound by CFI: the walk out of them fell back to frame pointers or scanning, or
/// stopped there. Without their CFI the frames that name a lock are lost, so a lock's owner, and
/// a cycle through it, cannot be seen.
pub(crate) fn from_modules(process: &Process, threads: &[ThreadReport], locks: &[LockFact]) -> Vec<Limit> {
    let mut out = Vec::new();
    for m in &process.modules {
        let file = match &m.file_status {
            FileStatus::Missing { tried } => MissingFile::NotFound { tried: tried.to_string() },
            FileStatus::Refused { path, reason } => MissingFile::Refused { path: path.to_string(), reason: reason.to_string() },
            FileStatus::Loaded { .. } | FileStatus::InMemory => continue,
        };
        // Only where it matters: a thread whose lock, read without the module's CFI, has no
        // known owner (a wait the frames still named, a condvar say, lost nothing).
        let owner_unknown = |t: &ThreadReport| match t.blocked_on.as_deref().and_then(|id| locks.iter().find(|l| l.id == id)) {
            Some(l) => matches!(l.owner, Owner::Unknown { .. }),
            None => true,
        };
        let affected: Vec<&ThreadReport> = threads.iter().filter(|t| waits(t) && unwound_blind_through(t, m) && owner_unknown(t)).collect();
        if affected.is_empty() {
            continue;
        }
        let ownerless_locks = locks
            .iter()
            .filter(|l| matches!(l.owner, Owner::Unknown { .. }) && l.waiter_tids.iter().any(|w| affected.iter().any(|t| t.tid == *w)))
            .count();
        out.push(Limit::ModuleFile {
            name: m.name().to_string(),
            path: m.path.to_string(),
            build_id: m.build_id_hex(),
            file,
            threads: affected.len(),
            ownerless_locks,
        });
    }
    out
}

/// Whether the walk of `t`'s stack left module `m` without its CFI: the frame after one in `m`
/// was found by frame pointer or scan, or the walk ended in `m` before the thread's first frame.
fn unwound_blind_through(t: &ThreadReport, m: &crate::process::Module) -> bool {
    let real: Vec<_> = t.frames.iter().filter(|f| !f.inlined && f.transition.is_none()).collect();
    real.iter().enumerate().any(|(i, f)| {
        m.contains(f.ip.0)
            && match real.get(i + 1) {
                Some(next) => matches!(next.trust, Trust::FramePointer | Trust::Scan),
                None => !t.stack_end.complete,
            }
    })
}
