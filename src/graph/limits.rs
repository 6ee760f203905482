//! What a verdict was reached without: a fact it needs that could not be read, what that hides,
//! and the option that supplies it. A verdict reached without its facts says so
//! (`verdict_limits[]`), so that it never changes silently when a file is found or lost.

use crate::process::module::FileStatus;
use crate::process::Process;
use crate::threads::ThreadReport;
use crate::unwind::Trust;
use crate::waits::{LockFact, Owner, ThreadState};
use schemars::JsonSchema;
use serde::Serialize;

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

/// A thread that waits: on a lock the analysis named, or on a futex word.
fn waits(t: &ThreadReport) -> bool {
    t.blocked_on.is_some() || matches!(t.state, ThreadState::Futex { .. } | ThreadState::FutexWaitv)
}

/// Modules whose file was not found (or refused) and through which a waiting thread's stack
/// could not be unwound by CFI: the walk out of them fell back to frame pointers or scanning, or
/// stopped there. Without their CFI the frames that name a lock are lost, so a lock's owner, and
/// a cycle through it, cannot be seen.
pub(crate) fn from_modules(process: &Process, threads: &[ThreadReport], locks: &[LockFact]) -> Vec<VerdictLimit> {
    let mut out = Vec::new();
    for m in &process.modules {
        let detail = match &m.file_status {
            FileStatus::Missing { tried } => format!("not found at {tried}"),
            FileStatus::Refused { path, reason } => format!("{path} refused: {reason}"),
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
        let unknown = locks
            .iter()
            .filter(|l| matches!(l.owner, Owner::Unknown { .. }) && l.waiter_tids.iter().any(|w| affected.iter().any(|t| t.tid == *w)))
            .count();
        let n = affected.len();
        let build = m.build_id_hex().map(|b| format!(" (build-id {b})")).unwrap_or_default();
        let fix = match &m.file_status {
            FileStatus::Refused { .. } => format!("--search-dir DIR holding the {} that ran{build}", m.name()),
            _ => format!("--sysroot DIR (the root the dump's paths are under: DIR{}) or --search-dir DIR holding {}{build}", m.path, m.name()),
        };
        out.push(VerdictLimit {
            missing: format!("{}'s file ({detail})", m.name()),
            hides: format!(
                "{n} waiting thread{}' stacks through it were not unwound by its CFI, so the calls that name their locks are lost; {unknown} lock{} they wait for {} no known owner: a lock's owner, and a deadlock through it, cannot be seen",
                if n == 1 { "" } else { "s" },
                if unknown == 1 { "" } else { "s" },
                if unknown == 1 { "has" } else { "have" },
            ),
            fix,
            short: format!("{}'s file", m.name()),
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
