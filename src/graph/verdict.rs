//! The verdict: the one-line answer, read from the wait-for graph's cycles, the locks and the
//! threads' states; and the order the report lists locks in.

use super::Deadlock;
use crate::report::Verdict;
use crate::waits::{LockFact, ThreadState, ThreadWait, WorkerPool};

/// Every thread-pool worker blocked inside a work item, and one of them waiting for a task: the
/// classic sync-over-async starvation (SOS users read it from `threadpool` + `clrstack`).
fn thread_pool_starved(locks: &[LockFact], pool: Option<&WorkerPool>) -> bool {
    let Some(pool) = pool else { return false };
    pool.exhausted() && locks.iter().any(|l| l.kind == "task" && l.waiter_tids.iter().any(|t| pool.workers.contains(t)))
}

/// Locks in deadlocks first (in cycle order), then the most waited-for.
pub fn order_locks(mut locks: Vec<LockFact>, deadlocks: &[Deadlock]) -> Vec<LockFact> {
    let rank = |l: &LockFact| deadlocks.iter().flat_map(|d| d.locks.iter()).position(|id| *id == l.id).unwrap_or(usize::MAX);
    locks.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.waiter_tids.len().cmp(&a.waiter_tids.len())).then(a.id.cmp(&b.id)));
    locks
}

/// `pool`: the runtime's worker pool, when it has one; `gc_stalled`: the runtime's collector
/// is stalled.
pub fn verdict(deadlocks: &[Deadlock], locks: &[LockFact], threads: &[ThreadWait], pool: Option<&WorkerPool>, gc_stalled: bool) -> Verdict {
    let exclusive = |l: &&LockFact| matches!(l.kind.as_str(), "mutex" | "rwlock" | "futex" | "join" | "monitor" | "lock");
    if !deadlocks.is_empty() {
        Verdict::Deadlock
    } else if gc_stalled {
        Verdict::GcStall
    } else if locks.iter().filter(exclusive).any(|l| !l.waiter_tids.is_empty()) {
        Verdict::Contention
    } else if thread_pool_starved(locks, pool) {
        Verdict::ThreadPoolStarved
    } else if threads.iter().any(|t| matches!(t.state, ThreadState::Io { .. })) {
        Verdict::BlockedOnIo
    } else if threads.iter().any(|t| t.state.is_blocked()) {
        Verdict::Idle
    } else {
        Verdict::NothingBlocked
    }
}

