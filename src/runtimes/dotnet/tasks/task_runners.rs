//! Who runs what nothing records a holder of (issue 40, items 1 and 2), inferred from the
//! threads' frames and stacks, never known:
//! - a task is run by the thread whose stack is inside its work — its state machine's
//!   `MoveNext` (an async method's box) or `Task.ExecuteWithThreadLocal` (a delegate task the
//!   thread runs) — and holds the task: threads waiting for the task wait for that thread;
//! - a `SemaphoreSlim` taken with `Wait()` (count 0) is held by the thread whose stack holds
//!   the semaphore while it does not wait for it: past `Wait()`, inside the code it guards.
//!
//! Each is taken only when exactly one thread fits; the evidence (the frame, the stack slot)
//! goes with the inference.

use crate::process::{Process, StackWords};
use crate::threads::FrameReport;
use crate::waits::{Evidence, Inference, LockFact, LockKind, Owner, QueuedRelease, UnknownOwner};

/// How far above a thread's stack pointer its stack is searched for an object: the frames of
/// the code that runs a task or holds a semaphore lie above the wait's own frames.
const STACK_SCAN_BYTES: u64 = 256 * 1024;
const MOVE_NEXT: &str = ".MoveNext";
/// Where a worker runs a delegate task.
const EXECUTE_TASK: &str = "System.Threading.Tasks.Task.ExecuteWithThreadLocal";

/// What one thread's frames say it runs: state machines' `MoveNext`s and delegate tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadWork {
    pub(crate) tid: u32,
    /// The stack pointer its stack is searched from.
    pub(crate) sp: u64,
    /// `(frame index, state machine type)` of each `MoveNext` frame, innermost first.
    pub(crate) move_next: Vec<(usize, String)>,
    /// The frame index of `Task.ExecuteWithThreadLocal`, when it runs a delegate task.
    pub(crate) executes_task: Option<usize>,
    /// It runs a `Parallel` loop's replica (`TaskReplicator+Replica.Execute`).
    pub(crate) replica: bool,
    /// The first frame of a network client library (`StackExchange.Redis.…`), when it is inside one.
    pub(crate) network: Option<String>,
}

/// Namespaces of network clients: a wait inside one (or on a task of its types) waits for a reply
/// on a socket.
const NETWORK_CLIENTS: &[&str] = &["StackExchange.Redis.", "Npgsql.", "Microsoft.Data.SqlClient.", "MySqlConnector.", "System.Net.Http.", "System.Net.Sockets."];
const REPLICA: &str = "System.Threading.Tasks.TaskReplicator+Replica.Execute";
/// The work item that delivers socket completions to the pool on Linux.
const SOCKET_ENGINE: &str = "System.Net.Sockets.SocketAsyncEngine";
/// A `Parallel` replica is queued as a plain task.
const TASK: &str = "System.Threading.Tasks.Task";

fn is_network(name: &str) -> bool {
    NETWORK_CLIENTS.iter().any(|p| name.contains(p))
}

/// The work a thread's frames show (none when they show none).
pub(crate) fn thread_work(tid: u32, sp: u64, frames: &[&FrameReport]) -> Option<ThreadWork> {
    let mut move_next = Vec::new();
    let mut executes_task = None;
    let (mut replica, mut network) = (false, None);
    for f in frames.iter().filter(|f| f.managed) {
        let Some(name) = f.function.as_deref() else { continue };
        replica |= name == REPLICA;
        if network.is_none() && NETWORK_CLIENTS.iter().any(|p| name.starts_with(p)) {
            network = Some(name.to_string());
        }
        if let Some(machine) = name.strip_suffix(MOVE_NEXT)
            && machine.contains(">d__")
        {
            move_next.push((f.index, machine.to_string()));
        } else if name == EXECUTE_TASK && executes_task.is_none() {
            executes_task = Some(f.index);
        }
    }
    (!move_next.is_empty() || executes_task.is_some() || replica || network.is_some()).then_some(ThreadWork { tid, sp, move_next, executes_task, replica, network })
}

/// The first slot of the thread's stack, from `sp` up, that holds `object`.
fn stack_slot(process: &Process, sp: u64, object: u64) -> Option<u64> {
    StackWords::new(process, sp & !7, STACK_SCAN_BYTES)?.find(|&(_, v)| v == object).map(|(at, _)| at)
}

/// Ties each task nobody owns to the one thread that runs it, as an inferred owner.
pub(crate) fn tie_tasks(process: &Process, work: &[ThreadWork], locks: &mut [LockFact]) {
    for l in locks.iter_mut().filter(|l| l.kind == LockKind::Task && l.owner.tid().is_none()) {
        let Some(m) = l.managed.as_ref() else { continue };
        let Some(task) = m.task.as_ref() else { continue };
        let object = m.object.0;
        let running = task.status == "Running";
        let mut found: Vec<(u32, Inference)> = Vec::new();
        for w in work.iter().filter(|w| !l.waiter_tids.contains(&w.tid)) {
            // Its own MoveNext, by the state machine's type; or, for a delegate task that has
            // started running, the worker's ExecuteWithThreadLocal.
            let frame = task
                .async_method
                .as_deref()
                .and_then(|am| w.move_next.iter().find(|(_, t)| t == am))
                .map(|(i, t)| (*i, format!("{t}{MOVE_NEXT}")))
                .or_else(|| w.executes_task.filter(|_| running && task.async_method.is_none()).map(|i| (i, EXECUTE_TASK.to_string())));
            let Some((frame, method)) = frame else { continue };
            if let Some(at) = stack_slot(process, w.sp, object) {
                found.push((w.tid, Inference::RunsTask { method, frame, stack_slot: at }));
            }
        }
        if let [(tid, evidence)] = found.as_slice() {
            l.owner = Owner::Inferred { tid: *tid, evidence: evidence.clone() };
            l.owner_tid = Some(*tid);
        }
    }
}

/// One thread that is not idle, as the semaphore search needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StackOf {
    pub(crate) tid: u32,
    pub(crate) sp: u64,
}

/// Ties each SemaphoreSlim taken (count 0) with no holder to the one thread, among those not
/// waiting for it, whose stack holds it.
pub(crate) fn tie_semaphores(process: &Process, threads: &[StackOf], locks: &mut [LockFact]) {
    for l in locks.iter_mut().filter(|l| l.kind == LockKind::SemaphoreSlim) {
        if !matches!(l.owner, Owner::Unknown { why: UnknownOwner::SemaphoreTaken { .. } }) {
            continue;
        }
        // An async flow in WaitAsync can hold it too: a thread's stack then proves nothing.
        if l.managed.as_ref().is_some_and(|m| !m.async_waiters.is_empty()) {
            continue;
        }
        let Some(object) = l.managed.as_ref().map(|m| m.object.0) else { continue };
        let found: Vec<(u32, u64)> = threads
            .iter()
            .filter(|th| !l.waiter_tids.contains(&th.tid))
            .filter_map(|th| stack_slot(process, th.sp, object).map(|at| (th.tid, at)))
            .collect();
        if let [(tid, at)] = found.as_slice() {
            l.owner = Owner::Inferred { tid: *tid, evidence: Inference::HoldsSemaphore { stack_slot: *at } };
            l.owner_tid = Some(*tid);
        }
    }
}

/// Marks each wait no thread can end whose release waits in the pool's queue (`queued`: the
/// queued work items' type names): a network client's reply behind the socket engine's work
/// item, a Barrier's missing participants behind a `Parallel` replica.
pub(crate) fn queued_release(queued: &[&str], work: &[ThreadWork], locks: &mut [LockFact]) {
    let socket = queued.contains(&SOCKET_ENGINE);
    let replica_queued = queued.contains(&TASK);
    for l in locks.iter_mut().filter(|l| matches!(l.kind, LockKind::Task | LockKind::MonitorWait) && l.owner.tid().is_none() && !l.waiter_tids.is_empty()) {
        let waiters: Vec<&ThreadWork> = work.iter().filter(|w| l.waiter_tids.contains(&w.tid)).collect();
        let Some(m) = l.managed.as_mut() else { continue };
        let release = if m.barrier.as_ref().is_some_and(|b| b.remaining() > 0) && replica_queued && waiters.iter().any(|w| w.replica) {
            Some((QueuedRelease::ParallelReplica, TASK))
        } else if socket && (waiters.iter().any(|w| w.network.is_some()) || m.type_name.as_deref().is_some_and(is_network)) {
            Some((QueuedRelease::SocketEvent, SOCKET_ENGINE))
        } else {
            None
        };
        let Some((what, item)) = release else { continue };
        m.released_by_queued = Some(what);
        let inside = waiters.iter().find_map(|w| w.network.clone());
        l.evidence.push(Evidence::ReleasedByQueued { what, item_type: item.to_string(), inside });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_in_an_async_method_s_move_next_runs_its_state_machine() {
        let names = [
            "System.Threading.Monitor.Enter_Slowpath",
            "Knot.Samples.TaskCycle.Program+<RefreshLedgerAsync>d__9.MoveNext",
            "System.Threading.ExecutionContext.RunFromThreadPoolDispatchLoop",
            "System.Threading.ThreadPoolWorkQueue.Dispatch",
        ];
        let frames: Vec<FrameReport> = names.iter().enumerate().map(|(i, n)| FrameReport::recorded_managed(i, 0x1000 + i as u64, Some(n.to_string()))).collect();
        let refs: Vec<&FrameReport> = frames.iter().collect();
        let w = thread_work(7, 0x7000, &refs).expect("work");
        assert_eq!(w.move_next, vec![(1, "Knot.Samples.TaskCycle.Program+<RefreshLedgerAsync>d__9".to_string())]);
        assert_eq!(w.executes_task, None);
    }

    #[test]
    fn a_thread_with_no_task_frames_runs_nothing() {
        let frames = [FrameReport::recorded_managed(0, 0x1000, Some("System.Threading.Thread.Sleep".into()))];
        assert_eq!(thread_work(1, 0x7000, &frames.iter().collect::<Vec<_>>()), None);
    }
}
