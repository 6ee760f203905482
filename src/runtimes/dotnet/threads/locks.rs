//! .NET waits as lock facts: Monitors (sync blocks, thin locks) and `System.Threading.Lock`s
//! from the runtime reading become locks of kind `monitor` and `lock`, with the owner the
//! runtime records, so the wait-for graph joins them to native locks and finds cycles across
//! both. A thread in Monitor.Wait waits to be pulsed: a `monitor_wait`, with no owner, like a
//! condition variable.
//!
//! A thread blocked in a managed wait sleeps, natively, on the runtime's own event (a
//! pthread condition variable or futex inside libcoreclr). That native wait is how the managed
//! one is implemented, not a second wait: the managed wait supersedes it, and a native lock
//! left with no waiters is dropped.

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::{threads::names, BlockingKind, RuntimeReading, WaitSource, STAGE};
use crate::diagnostics::Diagnostic;
use crate::hex::Hex;
use crate::waits::{BarrierFacts, Evidence, LockFact, LockKind, LockStorage, ManagedLock, ManagedTask, ManagedThreads, ManagedWaitKind, NamedThread, Owner, UnknownOwner, WaitFacts, WaitRecord, WorkerPool};
use std::collections::{BTreeMap, BTreeSet};

/// The name CoreCLR's portable thread pool gives its worker threads.
pub(crate) const THREADPOOL_WORKER_NAME: &str = ".NET TP Worker";

/// Names and ids of the managed threads, by OS tid.
use crate::roles::RuntimeMark;

pub(crate) fn managed_threads(runtime: &Context<'_>, r: &RuntimeReading, diagnostics: &mut Vec<Diagnostic>) -> ManagedThreads {
    let mut out = ManagedThreads::default();
    for th in r.threads.iter().filter(|th| th.os_tid != 0) {
        out.ids.insert(th.os_tid, th.managed_id);
        let marks: Vec<RuntimeMark> =
            [(th.is_finalizer, RuntimeMark::Finalizer), (th.is_threadpool_worker(), RuntimeMark::ThreadPoolWorker)].into_iter().filter(|(on, _)| *on).map(|(_, m)| m).collect();
        if !marks.is_empty() {
            out.marks.insert(th.os_tid, marks);
        }
    }
    let t = runtime.target();
    for th in r.threads.iter().filter(|th| th.os_tid != 0 && th.thread_object != 0) {
        match names::thread_name(&t, th.thread_object) {
            Ok(Some(n)) => {
                out.names.insert(th.os_tid, n);
            }
            Ok(None) => {}
            Err(e) => diagnostics.push(Diagnostic::info(STAGE, format!("name of managed thread {} (OS tid {}): {e}", th.managed_id, th.os_tid))),
        }
    }
    out
}

fn lock_id(m: &ManagedLock) -> String {
    match m.storage {
        LockStorage::LockObject => format!("lock@{:#x}", m.object),
        LockStorage::SemaphoreSlim => format!("semaphore_slim@{:#x}", m.object),
        LockStorage::RwLockSlim => format!("rwlock_slim@{:#x}", m.object),
        LockStorage::ClassInit => format!("class_init@{:#x}", m.object),
        LockStorage::Pool => format!("pool@{:#x}", m.object),
        LockStorage::SyncBlock | LockStorage::ThinLock | LockStorage::Task => format!("monitor@{:#x}", m.object),
    }
}

fn who(tid: u32, threads: &ManagedThreads) -> NamedThread {
    NamedThread { tid, name: threads.names.get(&tid).cloned() }
}

pub(crate) fn merge_runtime(r: &RuntimeReading, threads: &ManagedThreads, tids: &[u32], stacks: &[&[&str]], facts: &mut WaitFacts) {
    let in_dump: BTreeSet<u32> = tids.iter().copied().collect();
    let mut locks: BTreeMap<String, LockFact> = BTreeMap::new();
    // Monitors and Locks: held ones, and ones threads wait for.
    for m in &r.monitors {
        // A Monitor nobody holds and nobody waits to enter is one only `Monitor.Wait`ed on (its
        // waiters are a `monitor_wait`): no lock to hand over.
        if !m.is_held() && m.waiters.is_empty() && m.waiter_count.unwrap_or(0) == 0 {
            continue;
        }
        let id = lock_id(m);
        let kind = match m.storage {
            LockStorage::LockObject => LockKind::Lock,
            _ => LockKind::Monitor,
        };
        let owner = match m.owner_os_tid {
            Some(tid) if in_dump.contains(&tid) => Owner::Known { tid },
            Some(tid) => Owner::Exited { tid },
            None if m.is_held() => Owner::Unknown { why: UnknownOwner::UnmappedManagedThread { managed_id: m.owner_managed_id.unwrap_or(0) } },
            None => Owner::Unknown { why: UnknownOwner::HandedOver },
        };
        let mut evidence = Vec::new();
        match m.storage {
            LockStorage::SyncBlock | LockStorage::Task => evidence.push(Evidence::SyncBlock {
                index: m.sync_block_index.unwrap_or(0),
                address: m.sync_block.map_or(0, |b| b.0),
                object: m.object,
                monitor_held: m.monitor_held.unwrap_or(0),
                recursion: m.recursion,
                owner_managed_id: m.owner_managed_id,
            }),
            // SemaphoreSlims are made after the heap walk (`async_waits`), the waits on objects
            // the frames keep by `object_waits`: never read as monitors.
            LockStorage::SemaphoreSlim | LockStorage::RwLockSlim | LockStorage::ClassInit | LockStorage::Pool => {}
            LockStorage::ThinLock => evidence.push(Evidence::ThinLock { object: m.object, owner_managed_id: m.owner_managed_id.unwrap_or(0), recursion: m.recursion }),
            LockStorage::LockObject => evidence.push(Evidence::LockObject { object: m.object, owner_os_tid: m.owner_os_tid, recursion: m.recursion }),
        }
        let managed = ManagedLock { owner_name: m.owner_os_tid.and_then(|t| threads.names.get(&t).cloned()), ..m.clone() };
        locks.insert(
            id.clone(),
            LockFact {
                id,
                kind,
                // The words are the report's (`report::words::managed_lock_label`), from `managed`.
                label: String::new(),
                address: Some(m.object),
                name: None,
                owner_tid: owner.tid(),
                holders: vec![],
                release: None,
                owner,
                waiter_tids: Vec::new(),
                evidence,
                recursion: (m.recursion > 0).then_some(m.recursion),
                readers: None,
                native: None,
                managed: Some(managed),
                signature: None,
            },
        );
    }
    // Waits: each thread's managed wait supersedes its native one.
    let by_object: BTreeMap<u64, &ManagedLock> = r.monitors.iter().map(|m| (m.object.0, m)).collect();
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
                locks.entry(id.clone()).or_insert_with(|| LockFact {
                    id: id.clone(),
                    kind: LockKind::Task,
                    label: String::new(),
                    address: Some(Hex(tw.task)),
                    name: None,
                    owner: Owner::None,
                    owner_tid: None,
                    holders: vec![],
                    release: None,
                    waiter_tids: Vec::new(),
                    evidence: if tw.set_by_continuation {
                        vec![Evidence::TaskSetsEvent {
                            task: tw.task,
                            type_name: tw.type_name.clone(),
                            state_flags: tw.state_flags,
                            status: tw.status.name().into(),
                            event: tw.event,
                            event_lock: tw.lock_object,
                        }]
                    } else {
                        vec![Evidence::Task {
                            task: tw.task,
                            type_name: tw.type_name.clone(),
                            state_flags: tw.state_flags,
                            status: tw.status.name().into(),
                            event: tw.event,
                            event_type: tw.event_type.clone(),
                            event_lock: tw.lock_object,
                        }]
                    },
                    recursion: None,
                    readers: None,
                    native: None,
                    managed: Some(ManagedLock {
                        type_name: tw.type_name.clone(),
                        task: Some(ManagedTask {
                            status: tw.status.name().into(),
                            state_flags: Hex(tw.state_flags as u64),
                            event: Hex(tw.event),
                            event_type: tw.event_type.clone(),
                            event_lock: Hex(tw.lock_object),
                            async_stack: None,
                            async_method: None,
                            queued: None,
                            timer_queued: false,
                        }),
                        ..ManagedLock::new(LockStorage::Task, tw.task)
                    }),
                    signature: None,
                });
                if let Some(l) = locks.get_mut(&id) {
                    l.evidence.push(if tw.set_by_continuation {
                        Evidence::EventWaiter { thread: who(w.os_tid, threads), event: tw.event, object, stack_slot: tw.stack_slot }
                    } else {
                        Evidence::TaskWaiter { thread: who(w.os_tid, threads), object, stack_slot: tw.stack_slot }
                    });
                }
                id
            }
            BlockingKind::MonitorWait | BlockingKind::Condition => {
                let id = format!("monitor_wait@{object:#x}");
                let m = by_object.get(&object);
                let ty = m.and_then(|m| m.type_name.clone());
                locks.entry(id.clone()).or_insert_with(|| LockFact {
                    id: id.clone(),
                    kind: LockKind::MonitorWait,
                    label: String::new(),
                    address: Some(Hex(object)),
                    name: None,
                    owner: Owner::None,
                    owner_tid: None,
                    holders: vec![],
                    release: None,
                    waiter_tids: Vec::new(),
                    evidence: Vec::new(),
                    recursion: None,
                    readers: None,
                    // The object's Monitor as read, as a wait to be pulsed: no owner, no recursion.
                    native: None,
                    managed: Some(ManagedLock {
                        type_name: ty,
                        sync_block_index: m.and_then(|m| m.sync_block_index),
                        sync_block: w.sync_block.map(Hex),
                        monitor_held: m.and_then(|m| m.monitor_held),
                        waiter_count: m.and_then(|m| m.waiter_count),
                        pulse_waiters: m.map(|m| m.pulse_waiters.clone()).unwrap_or_default(),
                        barrier: r.barrier_waits.iter().find(|b| b.lock_object == object).map(|b| BarrierFacts {
                            address: Hex(b.barrier),
                            arrived: b.arrived,
                            participants: b.participants,
                            phase: b.phase,
                            held_by: None,
                        }),
                        ..ManagedLock::new(m.map_or(LockStorage::SyncBlock, |m| m.storage), object)
                    }),
                    signature: None,
                });
                id
            }
        };
        let Some(lock) = locks.get_mut(&id) else { continue };
        if lock.waiter_tids.contains(&w.os_tid) {
            continue;
        }
        lock.waiter_tids.push(w.os_tid);
        let wait = match w.kind {
            BlockingKind::MonitorEnter => ManagedWaitKind::EnterMonitor,
            BlockingKind::Lock => ManagedWaitKind::EnterLock,
            _ if lock.kind == LockKind::Task => ManagedWaitKind::TaskEvent,
            _ => ManagedWaitKind::MonitorWait,
        };
        let source = match w.source {
            WaitSource::BlockingRecord => WaitRecord::BlockingRecord,
            WaitSource::WaitList => WaitRecord::WaitList,
        };
        lock.evidence.push(Evidence::ManagedWait { thread: who(w.os_tid, threads), wait, source });
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
                m.evidence.push(Evidence::NativeWait { tid: *tid, kind: l.kind, address: l.address, id: l.id.clone() });
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

/// The program's own wait on an event a task's continuation sets.
const EVENT_WAIT_FRAME: &str = "System.Threading.ManualResetEventSlim.Wait";

/// The task `tid` waits for: only when its stack shows a task wait — or a
/// `ManualResetEventSlim.Wait` on an event the task's continuation sets — and the reader tied a
/// task referenced from that stack to `object`, the object of its Monitor.Wait.
fn task_wait<'r>(r: &'r RuntimeReading, tid: u32, object: u64, stack: &[&str]) -> Option<&'r crate::runtimes::dotnet::tasks::TaskWait> {
    let task_frames = stack.iter().any(|f| is_task_wait_frame(f));
    let event_frames = stack.iter().any(|f| f.split('(').next() == Some(EVENT_WAIT_FRAME));
    r.task_waits.iter().find(|tw| tw.os_tid == tid && tw.lock_object == object && if tw.set_by_continuation { event_frames && !task_frames } else { task_frames })
}

/// The thread pool's workers (by their name), and those blocked in a managed wait; `None` when
/// the process has no thread pool.
pub(crate) fn worker_pool(r: &RuntimeReading, threads: &ManagedThreads, facts: &WaitFacts) -> Option<WorkerPool> {
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
    let blocked: Vec<u32> = worker_tids
        .iter()
        .copied()
        .filter(|t| r.waits.iter().any(|w| w.os_tid == *t) || facts.locks.iter().any(|l| blocked_ids.contains(l.id.as_str()) && l.waiter_tids.contains(t)))
        .collect();
    Some(WorkerPool { workers: worker_tids, blocked, queued: None, existing: None, max: None, idle: None })
}
