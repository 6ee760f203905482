//! The verdict: the one-line answer, read from the wait-for graph's cycles, the locks and the
//! threads' states; and the order the report lists locks in.

use super::Cycle;
use crate::crash::{CrashKind, CrashReport};
use crate::threads::ThreadReport;
use crate::waits::{LockFact, LockKind, ThreadState, ThreadWait, WorkerPool};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At least one wait-for cycle: those threads can never move again.
    Deadlock,
    /// The process died of a crash (see `crash`) and no deadlock was found.
    Crash,
    /// No cycle, but threads wait for good behind a lock nobody left can release: its owner
    /// exited (or was killed) holding it (an abandoned lock).
    Abandoned,
    /// The .NET GC heap is near its hard limit while a collection runs, or the GC recorded an
    /// out-of-memory there: the process is stalled in its own garbage collector.
    GcStall,
    /// Threads wait for locks other threads hold, without a cycle (a convoy).
    Contention,
    /// Every .NET thread-pool worker is blocked inside a work item, with work items queued behind
    /// them or some waiting for tasks (sync over async), and the pool may still grow (at its
    /// maximum, a cycle through the pool is a deadlock). Said before contention: the lock most
    /// workers wait for is its cause.
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


/// Every thread-pool worker blocked inside a work item, and one of them waiting for a task (the
/// classic sync-over-async starvation, SOS users read it from `threadpool` + `clrstack`) or work
/// items queued behind them (SOS `threadpool -wi`): no worker is left to run the queued work.
fn thread_pool_starved(locks: &[LockFact], pool: Option<&WorkerPool>) -> bool {
    let Some(pool) = pool else { return false };
    pool.starved_of_workers() || (pool.exhausted() && locks.iter().any(|l| l.kind == LockKind::Task && l.waiter_tids.iter().any(|t| pool.workers.contains(t))))
}

/// Locks in deadlocks first (in cycle order), then the most waited-for.
pub(crate) fn order_locks(mut locks: Vec<LockFact>, deadlocks: &[Cycle]) -> Vec<LockFact> {
    let rank = |l: &LockFact| deadlocks.iter().flat_map(|d| d.locks.iter()).position(|id| *id == l.id).unwrap_or(usize::MAX);
    locks.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.waiter_tids.len().cmp(&a.waiter_tids.len())).then(a.id.cmp(&b.id)));
    locks
}

/// `stuck`: the threads that can never proceed (`WaitForGraph::stuck`); `reports`: the threads as
/// reported; `crash`: the crash the dump records; `pool`: the runtime's worker pool, when it has
/// one; `gc_stalled`: the runtime's collector is stalled.
#[allow(clippy::too_many_arguments)]
pub(crate) fn verdict(
    deadlocks: &[Cycle],
    stuck: &[u32],
    locks: &[LockFact],
    reports: &[ThreadReport],
    threads: &[ThreadWait],
    crash: Option<&CrashReport>,
    pool: Option<&WorkerPool>,
    gc_stalled: bool,
) -> Verdict {
    let exclusive = |l: &&LockFact| l.kind.is_exclusive();
    let crashed = crash.filter(|c| c.kind != CrashKind::Killed);
    if !deadlocks.is_empty() {
        Verdict::Deadlock
    } else if gc_stalled {
        // A wedge the crash followed from (an OOM FailFast in a stalled GC) stays the verdict.
        Verdict::GcStall
    } else if crashed.is_some() {
        Verdict::Crash
    } else if !stuck.is_empty() {
        // With no cycle, what holds a thread for good is a lock whose owner is gone.
        Verdict::Abandoned
    } else if thread_pool_starved(locks, pool) {
        // Before contention: a lock the workers queue behind is the starvation's cause, not
        // the whole story (the pool's queue waits behind them all).
        Verdict::ThreadPoolStarved
    } else if locks.iter().filter(exclusive).filter(|l| contends(l, locks, reports, crashed)).any(|l| !l.waiter_tids.is_empty()) {
        Verdict::Contention
    } else if threads.iter().any(|t| matches!(t.state, ThreadState::Io { .. })) {
        Verdict::BlockedOnIo
    } else if threads.iter().any(|t| t.state.is_blocked()) {
        Verdict::Idle
    } else {
        Verdict::NothingBlocked
    }
}

/// Whether waiting for `l` is contention. Joining a thread is only when that thread is itself
/// busy or waits for an exclusive lock: a join on the crashed thread, or on a thread that sleeps
/// or waits to be signalled, is waiting for nobody's lock.
fn contends(l: &LockFact, locks: &[LockFact], reports: &[ThreadReport], crash: Option<&CrashReport>) -> bool {
    if l.kind != LockKind::Join {
        return true;
    }
    let Some(joined) = l.owner.tid() else { return true };
    if crash.is_some_and(|c| c.thread == Some(joined)) {
        return false;
    }
    match reports.iter().find(|t| t.tid == joined) {
        Some(t) if t.state.is_idle() => false,
        Some(t) if t.state.is_blocked() => t
            .blocked_on
            .as_deref()
            .and_then(|id| locks.iter().find(|x| x.id == id))
            .is_some_and(|x| x.kind != LockKind::Join && x.kind.is_exclusive()),
        _ => true,
    }
}
