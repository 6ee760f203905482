//! .NET waits as lock facts: Monitors (sync blocks, thin locks) and `System.Threading.Lock`s
//! from the runtime reader ([`crate::runtimes::dotnet`]) become locks of kind `monitor` and
//! `lock`, with the owner the runtime records, so the wait-for graph joins them to native locks
//! and finds cycles across both. A thread in Monitor.Wait waits to be pulsed: a
//! `monitor_wait`, with no owner, like a condition variable.
//!
//! A thread blocked in a managed wait sleeps, natively, on the runtime's own event (a
//! pthread condition variable or futex inside libcoreclr). That native wait is how the managed
//! one is implemented, not a second wait: the managed wait supersedes it, and a native lock
//! left with no waiters is dropped.

use super::{LockFact, Owner, WaitFacts};
use crate::diagnostics::Diagnostic;
use crate::process::{Locator, Process};
use crate::report::Hex;
use crate::runtimes::dotnet::{self, locate, target, thread_names, BlockingKind, DotnetReading, Monitor, MonitorKind, RuntimeReading};
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

const STAGE: &str = "dotnet";
/// The name CoreCLR's portable thread pool gives its worker threads.
pub const THREADPOOL_WORKER_NAME: &str = ".NET TP Worker";

/// What a .NET lock is, beside the generic lock fact: SOS's `syncblk` columns for a Monitor,
/// `System.Threading.Lock`'s fields for a Lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ManagedLock {
    /// sync_block (an inflated Monitor), thin_lock (a Monitor in the object header) or
    /// lock_object (a `System.Threading.Lock`).
    pub storage: String,
    /// The locked object (for a Lock, the Lock object itself).
    pub object: Hex,
    /// The object's type as SOS prints it (`System.Object`, `System.Threading.Lock`).
    pub type_name: Option<String>,
    /// The sync block's index in the sync block table (syncblk's Index column).
    pub sync_block_index: Option<u32>,
    pub sync_block: Option<Hex>,
    /// The owner's managed thread id.
    pub owner_managed_id: Option<u32>,
    /// The owner's managed thread name (`Thread.Name`).
    pub owner_name: Option<String>,
    /// Times the owner holds it (syncblk's Recursion column; 0 = not held).
    pub recursion: u32,
    /// syncblk's MonitorHeld: 1 when held, plus 2 per waiting thread.
    pub monitor_held: Option<u32>,
    /// Threads waiting to enter, by the lock's own count.
    pub waiter_count: Option<u32>,
    /// Threads in Monitor.Wait on the object (they released it and wait to be pulsed).
    pub pulse_waiters: Vec<u32>,
    /// For a lock of kind `task` (storage `task`): the task waited for (`object` and
    /// `type_name` are the task's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<ManagedTask>,
    /// The heap objects whose fields refer to the locked object, the one that names the lock
    /// best first (the application's types before the framework's, objects before arrays).
    pub referrers: Vec<crate::runtimes::dotnet::gc::report::ReferrerReport>,
}

/// A task threads wait for in `Task.Wait` / `Task<T>.Result` / `GetAwaiter().GetResult()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ManagedTask {
    /// `Task.Status` as the runtime derives it from `m_stateFlags` (WaitingForActivation,
    /// WaitingToRun, Running, WaitingForChildrenToComplete, RanToCompletion, Canceled, Faulted,
    /// Created).
    pub status: String,
    pub state_flags: Hex,
    /// The ManualResetEventSlim registered as the task's continuation, which the waiter waits on.
    pub event: Hex,
    pub event_type: Option<String>,
    /// The event's `m_lock`: the object of the waiter's Monitor.Wait.
    pub event_lock: Hex,
}

/// What knot read of the .NET runtime, for the report.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DotnetReport {
    /// `.NET 10.0.12: 25 managed threads, …`, or why the runtime could not be read.
    pub summary: String,
    pub runtime_version: Option<String>,
    pub managed_threads: usize,
    pub thread_pool: Option<ThreadPoolReport>,
    /// The GC heap by type (SOS `dumpheap -stat`); null when it was not read (see diagnostics).
    pub heap: Option<crate::runtimes::dotnet::gc::report::HeapReport>,
    /// The GC's own state; null when it was not read.
    pub gc: Option<crate::runtimes::dotnet::gc::report::GcReport>,
    /// Every thread's last thrown exception (clrthreads' Exception column), as SOS `pe` prints it.
    pub exceptions: Vec<ThreadExceptionReport>,
    /// createdump's header (`DIAGINFOHEADER`), present when createdump wrote the dump.
    pub createdump: Option<crate::runtimes::dotnet::diaginfo::DiagInfo>,
}

/// One thread's last thrown exception.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ThreadExceptionReport {
    pub tid: u32,
    pub exception: crate::crash::ExceptionReport,
}

/// The thread pool as SOS's `threadpool` shows it, as far as knot can read it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ThreadPoolReport {
    /// Worker threads (named `.NET TP Worker`).
    pub workers_total: u32,
    pub worker_tids: Vec<u32>,
    /// Workers blocked inside a work item on a managed wait (they count as running for SOS:
    /// they hold their worker and process no other work).
    pub workers_blocked: Vec<u32>,
    /// Running and idle workers, and queued work items: null when knot cannot read them
    /// (see `unavailable`).
    pub workers_running: Option<u32>,
    pub workers_idle: Option<u32>,
    pub queued_work_items: Option<u32>,
    /// What is not read, and why.
    pub unavailable: Vec<String>,
}

/// Per managed thread, what the report shows beside the native thread.
#[derive(Debug, Clone, Default)]
pub struct ManagedThreads {
    /// OS tid → managed thread name.
    pub names: BTreeMap<u32, String>,
    /// OS tid → managed thread id.
    pub ids: BTreeMap<u32, u32>,
}

/// The .NET part of the analysis.
#[derive(Debug, Clone, Default)]
pub struct DotnetFacts {
    pub threads: ManagedThreads,
    pub report: Option<DotnetReport>,
}

/// Reads the .NET runtime (when `process` has one) and merges its locks and waits into
/// `facts`. `tids` are the dump's threads, in the order of `facts.threads`.
/// `stacks` are the threads' function names, innermost first, in the same order.
pub fn merge(process: &Process, locator: &Locator, tids: &[u32], stacks: &[&[&str]], facts: &mut WaitFacts) -> DotnetFacts {
    let reading = dotnet::read_with(process, locator);
    match &reading {
        DotnetReading::NotDotnet => DotnetFacts::default(),
        DotnetReading::Unsupported { version, why } => {
            facts.diagnostics.push(Diagnostic::warning(STAGE, why.clone()));
            DotnetFacts { threads: ManagedThreads::default(), report: Some(DotnetReport { summary: reading.summary(), runtime_version: Some(version.clone()), managed_threads: 0, thread_pool: None, heap: None, gc: None, exceptions: Vec::new(), createdump: None }) }
        }
        DotnetReading::Runtime(r) => {
            facts.diagnostics.extend(r.diagnostics.iter().cloned());
            let threads = managed_threads(process, r, &mut facts.diagnostics);
            merge_runtime(r, &threads, tids, stacks, facts);
            let thread_pool = thread_pool(r, &threads, facts);
            let report = DotnetReport { summary: reading.summary(), runtime_version: Some(r.version.product.clone()), managed_threads: r.threads.len(), thread_pool, heap: None, gc: None, exceptions: Vec::new(), createdump: None };
            DotnetFacts { threads, report: Some(report) }
        }
    }
}

/// Names and ids of the managed threads, by OS tid.
fn managed_threads(process: &Process, r: &RuntimeReading, diagnostics: &mut Vec<Diagnostic>) -> ManagedThreads {
    let mut out = ManagedThreads::default();
    for th in r.threads.iter().filter(|th| th.os_tid != 0) {
        out.ids.insert(th.os_tid, th.managed_id);
    }
    let Some(module) = locate::runtime_module(process) else { return out };
    let Ok(located) = locate::locate(process, module) else { return out };
    let memory = target::RuntimeMemory { process };
    let t = target::Target::new(&memory, located.descriptor, located.pointer_data);
    for th in r.threads.iter().filter(|th| th.os_tid != 0 && th.thread_object != 0) {
        match thread_names::thread_name(&t, th.thread_object) {
            Ok(Some(n)) => {
                out.names.insert(th.os_tid, n);
            }
            Ok(None) => {}
            Err(e) => diagnostics.push(Diagnostic::info(STAGE, format!("name of managed thread {} (OS tid {}): {e}", th.managed_id, th.os_tid))),
        }
    }
    out
}

fn lock_id(m: &Monitor) -> String {
    match m.kind {
        MonitorKind::Lock => format!("lock@{:#x}", m.object),
        MonitorKind::SyncBlock | MonitorKind::ThinLock => format!("monitor@{:#x}", m.object),
    }
}

fn storage(kind: MonitorKind) -> &'static str {
    match kind {
        MonitorKind::SyncBlock => "sync_block",
        MonitorKind::ThinLock => "thin_lock",
        MonitorKind::Lock => "lock_object",
    }
}

fn who(tid: u32, threads: &ManagedThreads) -> String {
    match threads.names.get(&tid) {
        Some(n) => format!("thread {tid} \"{n}\""),
        None => format!("thread {tid}"),
    }
}

fn merge_runtime(r: &RuntimeReading, threads: &ManagedThreads, tids: &[u32], stacks: &[&[&str]], facts: &mut WaitFacts) {
    let in_dump: BTreeSet<u32> = tids.iter().copied().collect();
    let mut locks: BTreeMap<String, LockFact> = BTreeMap::new();
    // Monitors and Locks: held ones, and ones threads wait for.
    for m in &r.monitors {
        let id = lock_id(m);
        let (kind, what) = match m.kind {
            MonitorKind::Lock => ("lock", "System.Threading.Lock"),
            _ => ("monitor", "Monitor"),
        };
        let ty = m.type_name.clone().unwrap_or_else(|| "(type unread)".into());
        let label = match (m.kind, m.sync_block_index) {
            (MonitorKind::SyncBlock, Some(i)) => format!("{what} on {ty} (sync block {i}, MonitorHeld {}, recursion {})", m.monitor_held.unwrap_or(0), m.recursion),
            (MonitorKind::ThinLock, _) => format!("{what} on {ty} (thin lock, recursion {})", m.recursion),
            _ => format!("{what} {ty} (recursion {})", m.recursion),
        };
        let owner = match m.owner_os_tid {
            Some(tid) if in_dump.contains(&tid) => Owner::Known { tid },
            Some(tid) => Owner::Exited { tid },
            None if m.is_held() => Owner::Unknown { why: format!("held by managed thread {} which knot cannot map to an OS thread", m.owner_managed_id.unwrap_or(0)) },
            None => Owner::Unknown { why: "not held at the time of the dump (being handed over)".into() },
        };
        let mut evidence = Vec::new();
        match m.kind {
            MonitorKind::SyncBlock => evidence.push(format!(
                "sync block {} at {:#x}: object {:#x}, MonitorHeld {}, recursion {}, holding thread id {}",
                m.sync_block_index.unwrap_or(0),
                m.sync_block.unwrap_or(0),
                m.object,
                m.monitor_held.unwrap_or(0),
                m.recursion,
                m.owner_managed_id.map_or("none".into(), |i| i.to_string())
            )),
            MonitorKind::ThinLock => evidence.push(format!("object header of {:#x}: thin lock of managed thread {}, recursion {}", m.object, m.owner_managed_id.unwrap_or(0), m.recursion)),
            MonitorKind::Lock => evidence.push(format!(
                "System.Threading.Lock {:#x}: _owningThreadId {}, recursion {}",
                m.object,
                m.owner_os_tid.map_or("0".into(), |t| t.to_string()),
                m.recursion
            )),
        }
        let managed = ManagedLock {
            storage: storage(m.kind).into(),
            object: Hex(m.object),
            type_name: m.type_name.clone(),
            sync_block_index: m.sync_block_index,
            sync_block: m.sync_block.map(Hex),
            owner_managed_id: m.owner_managed_id,
            owner_name: m.owner_os_tid.and_then(|t| threads.names.get(&t).cloned()),
            recursion: m.recursion,
            monitor_held: m.monitor_held,
            waiter_count: m.waiter_count,
            pulse_waiters: m.wait_list.clone(),
            task: None,
            referrers: Vec::new(),
        };
        locks.insert(
            id.clone(),
            LockFact {
                id,
                kind: kind.into(),
                label,
                address: Some(Hex(m.object)),
                name: None,
                owner_tid: owner.tid(),
                owner,
                waiter_tids: Vec::new(),
                evidence,
                recursion: (m.recursion > 0).then_some(m.recursion),
                readers: None,
                managed: Some(managed),
            },
        );
    }
    // Waits: each thread's managed wait supersedes its native one.
    let by_object: BTreeMap<u64, &Monitor> = r.monitors.iter().map(|m| (m.object, m)).collect();
    let mut superseded: BTreeMap<u32, String> = BTreeMap::new();
    for w in &r.waits {
        let Some(object) = w.object else {
            facts.diagnostics.push(Diagnostic::warning(STAGE, format!("thread {} waits on a monitor knot could not tie to an object", w.os_tid)));
            continue;
        };
        let Some(ti) = tids.iter().position(|&t| t == w.os_tid) else { continue };
        let id = match w.kind {
            BlockingKind::MonitorEnter | BlockingKind::Lock => match by_object.get(&object) {
                Some(m) => lock_id(m),
                None => {
                    facts.diagnostics.push(Diagnostic::warning(STAGE, format!("thread {} waits for the lock on {object:#x}, which the reader did not read", w.os_tid)));
                    continue;
                }
            },
            BlockingKind::MonitorWait if let Some(tw) = task_wait(r, w.os_tid, object, stacks.get(ti).copied().unwrap_or(&[])) => {
                let id = format!("task@{:#x}", tw.task);
                let ty = tw.type_name.as_deref().unwrap_or("(type unread)");
                locks.entry(id.clone()).or_insert_with(|| LockFact {
                    id: id.clone(),
                    kind: "task".into(),
                    label: format!("task {ty} (status: {})", tw.status.name()),
                    address: Some(Hex(tw.task)),
                    name: None,
                    owner: Owner::None,
                    owner_tid: None,
                    waiter_tids: Vec::new(),
                    evidence: vec![format!(
                        "task {:#x} ({ty}): m_stateFlags {:#x} = {}; its continuation {:#x} ({}) has m_lock {:#x}",
                        tw.task,
                        tw.state_flags,
                        tw.status.name(),
                        tw.event,
                        tw.event_type.as_deref().unwrap_or("(type unread)"),
                        tw.lock_object
                    )],
                    recursion: None,
                    readers: None,
                    managed: Some(ManagedLock {
                        storage: "task".into(),
                        object: Hex(tw.task),
                        type_name: tw.type_name.clone(),
                        sync_block_index: None,
                        sync_block: None,
                        owner_managed_id: None,
                        owner_name: None,
                        recursion: 0,
                        monitor_held: None,
                        waiter_count: None,
                        pulse_waiters: Vec::new(),
                        task: Some(ManagedTask {
                            status: tw.status.name().into(),
                            state_flags: Hex(tw.state_flags as u64),
                            event: Hex(tw.event),
                            event_type: tw.event_type.clone(),
                            event_lock: Hex(tw.lock_object),
                        }),
                        referrers: Vec::new(),
                    }),
                });
                if let Some(l) = locks.get_mut(&id) {
                    l.evidence.push(format!(
                        "{} is in Monitor.Wait on {object:#x} under a task wait frame; the task is referenced from its stack at {:#x}",
                        who(w.os_tid, threads),
                        tw.stack_slot
                    ));
                }
                id
            }
            BlockingKind::MonitorWait | BlockingKind::Condition => {
                let id = format!("monitor_wait@{object:#x}");
                let m = by_object.get(&object);
                let ty = m.and_then(|m| m.type_name.clone());
                locks.entry(id.clone()).or_insert_with(|| LockFact {
                    id: id.clone(),
                    kind: "monitor_wait".into(),
                    label: format!("Monitor.Wait on {} (waiting to be pulsed)", ty.as_deref().unwrap_or("(type unread)")),
                    address: Some(Hex(object)),
                    name: None,
                    owner: Owner::None,
                    owner_tid: None,
                    waiter_tids: Vec::new(),
                    evidence: Vec::new(),
                    recursion: None,
                    readers: None,
                    managed: Some(ManagedLock {
                        storage: m.map_or("sync_block", |m| storage(m.kind)).into(),
                        object: Hex(object),
                        type_name: ty,
                        sync_block_index: m.and_then(|m| m.sync_block_index),
                        sync_block: w.sync_block.map(Hex),
                        owner_managed_id: None,
                        owner_name: None,
                        recursion: 0,
                        monitor_held: m.and_then(|m| m.monitor_held),
                        waiter_count: m.and_then(|m| m.waiter_count),
                        pulse_waiters: m.map(|m| m.wait_list.clone()).unwrap_or_default(),
                        task: None,
                        referrers: Vec::new(),
                    }),
                });
                id
            }
        };
        let Some(lock) = locks.get_mut(&id) else { continue };
        if lock.waiter_tids.contains(&w.os_tid) {
            continue;
        }
        lock.waiter_tids.push(w.os_tid);
        let how = match w.kind {
            BlockingKind::MonitorEnter => "waits to enter the monitor",
            BlockingKind::Lock => "waits to enter the Lock",
            _ if id.starts_with("task@") => "is in Monitor.Wait on the task's event",
            _ => "is in Monitor.Wait",
        };
        let source = match w.source {
            dotnet::WaitSource::BlockingRecord => "its ThreadBlockingInfo record",
            dotnet::WaitSource::WaitList => "the sync block's Monitor.Wait list",
        };
        lock.evidence.push(format!("{} {how} (by {source})", who(w.os_tid, threads)));
        if let Some(native) = facts.threads[ti].blocked_on.replace(id.clone())
            && native != id
        {
            superseded.insert(w.os_tid, native);
        }
    }
    // The native waits the managed ones supersede.
    for (tid, native) in &superseded {
        if let Some(l) = facts.locks.iter_mut().find(|l| &l.id == native) {
            l.waiter_tids.retain(|t| t != tid);
            if let Some(managed) = facts.threads.get(tids.iter().position(|t| t == tid).unwrap_or(usize::MAX)).and_then(|t| t.blocked_on.as_ref())
                && let Some(m) = locks.get_mut(managed)
            {
                m.evidence.push(format!("thread {tid}'s native wait ({} {}) is the runtime's implementation of this wait", l.kind, l.address.map_or(l.id.clone(), |a| a.to_string())));
            }
        }
    }
    facts.locks.retain(|l| !l.waiter_tids.is_empty() || !superseded.values().any(|n| n == &l.id));
    for mut l in locks.into_values() {
        l.waiter_tids.sort_unstable();
        facts.locks.push(l);
    }
    facts.locks.sort_by(|a, b| a.id.cmp(&b.id));
}

/// Frames of `Task.Wait`, `Task<T>.Result` and `TaskAwaiter.GetResult` (by way of
/// `Task.InternalWaitCore` → `SpinThenBlockingWait`); `Task.WaitAll` is not a wait on one task.
const TASK_WAIT_FRAMES: &[&str] = &["System.Threading.Tasks.Task.SpinThenBlockingWait", "System.Threading.Tasks.Task.InternalWaitCore"];

fn is_task_wait_frame(function: &str) -> bool {
    let name = function.split('(').next().unwrap_or(function);
    TASK_WAIT_FRAMES.contains(&name)
}

/// The task `tid` waits for: only when its stack shows a task wait and the reader tied a task
/// referenced from that stack to `object`, the object of its Monitor.Wait.
fn task_wait<'r>(r: &'r RuntimeReading, tid: u32, object: u64, stack: &[&str]) -> Option<&'r dotnet::tasks::TaskWait> {
    if !stack.iter().any(|f| is_task_wait_frame(f)) {
        return None;
    }
    r.task_waits.iter().find(|tw| tw.os_tid == tid && tw.lock_object == object)
}

fn thread_pool(r: &RuntimeReading, threads: &ManagedThreads, facts: &WaitFacts) -> Option<ThreadPoolReport> {
    let worker_tids: Vec<u32> = r
        .threads
        .iter()
        .filter(|th| th.os_tid != 0 && !th.is_dead() && threads.names.get(&th.os_tid).is_some_and(|n| n == THREADPOOL_WORKER_NAME))
        .map(|th| th.os_tid)
        .collect();
    if worker_tids.is_empty() && !r.threads.iter().any(|th| th.is_threadpool_worker()) {
        return None;
    }
    let blocked_ids: BTreeSet<&str> = facts.locks.iter().filter(|l| l.managed.is_some()).map(|l| l.id.as_str()).collect();
    let workers_blocked: Vec<u32> = worker_tids
        .iter()
        .copied()
        .filter(|t| r.waits.iter().any(|w| w.os_tid == *t) || facts.locks.iter().any(|l| blocked_ids.contains(l.id.as_str()) && l.waiter_tids.contains(t)))
        .collect();
    Some(ThreadPoolReport {
        workers_total: worker_tids.len() as u32,
        worker_tids,
        workers_blocked,
        workers_running: None,
        workers_idle: None,
        queued_work_items: None,
        unavailable: vec![
            "running and idle workers: the pool's counters (PortableThreadPool's ThreadCounts) are CoreLib statics knot does not read yet".into(),
            "queued work items: ThreadPoolWorkQueue is reached through CoreLib statics knot does not read yet".into(),
        ],
    })
}
