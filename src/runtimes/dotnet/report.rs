//! The .NET runtime's section of the report: what knot read of the runtime, its thread pool.

use crate::runtimes::dotnet::tasks::thread_pool::{PoolReading, Queue};
use crate::waits::WorkerPool;
use schemars::JsonSchema;
use serde::Serialize;

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
    pub createdump: Option<crate::runtimes::dotnet::crash::diaginfo::DiagInfo>,
    /// The sync block table as SOS's `syncblk` counts it; null when it was not read.
    pub sync_table: Option<SyncTableReport>,
    /// Async stacks as SOS `dumpasync` lists them: chains of tasks and async methods that hold
    /// no thread, in SOS's order. Empty when none (or not read: see `async_tasks`).
    #[serde(rename = "async")]
    pub async_stacks: Vec<AsyncStackReport>,
    /// Identical async stacks (same awaited type, frame types and states), largest group first.
    pub async_groups: Vec<AsyncGroupReport>,
    /// How the async stacks were read; null when the heap was not walked.
    pub async_tasks: Option<AsyncTasksReport>,
}

/// One async stack (SOS `dumpasync`'s `STACK n`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AsyncStackReport {
    /// What the innermost async method awaits (SOS's `<< Awaiting: … >>` line), or null.
    pub awaiting: Option<AsyncAwaitingReport>,
    /// Innermost first, in SOS's order.
    pub frames: Vec<AsyncFrameReport>,
    /// Why the stack was cut (too many frames, a continuation cycle), or null.
    pub cut: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AsyncAwaitingReport {
    /// As SOS prints it: `System.Runtime.CompilerServices.TaskAwaiter<System.Int32>`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The awaiter object, or the awaiter field inside the state machine.
    pub address: crate::hex::Hex,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct AsyncFrameReport {
    /// As SOS prints it: an async method's state machine type
    /// (`App.Program+<LoadAsync>d__4`), else the object's type.
    #[serde(rename = "type")]
    pub type_name: String,
    /// What SOS prints in parentheses: an async method's await state (`0`, `1`; `-1` running),
    /// else the task's notable flags (`Started|DelegateInvoked`; a space when none), empty for
    /// a continuation that is no task.
    pub state: String,
    /// The task, the async method's box, or the continuation object.
    pub address: crate::hex::Hex,
    pub method_table: crate::hex::Hex,
    /// Continuation levels from the innermost frame (SOS's indentation): a task with several
    /// continuations has several frames one level deeper.
    pub depth: u32,
}

/// Async stacks that read the same (addresses aside).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AsyncGroupReport {
    /// Indexes into `dotnet.async`.
    pub stacks: Vec<usize>,
    /// The awaited type, or null.
    pub awaiting: Option<String>,
    /// The first stack's frames.
    pub frames: Vec<AsyncFrameReport>,
}

/// What the async stacks were read from.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AsyncTasksReport {
    /// Tasks on the heap that had not completed (the frames are made of them).
    pub pending_tasks: usize,
    /// What was cut (stacks, tasks, continuation lists past their caps), for people.
    pub cut: Vec<String>,
}

impl AsyncStackReport {
    pub(crate) fn of(s: &crate::runtimes::dotnet::tasks::async_stacks::AsyncStack) -> AsyncStackReport {
        AsyncStackReport {
            awaiting: s.awaiting.as_ref().map(|a| AsyncAwaitingReport { type_name: a.type_name.clone(), address: crate::hex::Hex(a.address) }),
            frames: s
                .frames
                .iter()
                .map(|f| AsyncFrameReport {
                    type_name: f.type_name.clone(),
                    state: f.state.clone(),
                    address: crate::hex::Hex(f.address),
                    method_table: crate::hex::Hex(f.method_table),
                    depth: f.depth,
                })
                .collect(),
            cut: s.cut.clone(),
        }
    }
}

/// Groups identical stacks as thread stacks are grouped (`graph::groups`): by the awaited type
/// and each frame's type, state and depth.
pub(crate) fn async_groups(stacks: &[AsyncStackReport]) -> Vec<AsyncGroupReport> {
    type Key = (Option<String>, Vec<(String, String, u32)>);
    let keys: Vec<Key> = stacks
        .iter()
        .map(|s| (s.awaiting.as_ref().map(|a| a.type_name.clone()), s.frames.iter().map(|f| (f.type_name.clone(), f.state.clone(), f.depth)).collect()))
        .collect();
    crate::graph::groups::group_by_stack(&keys)
        .into_iter()
        .map(|idx| AsyncGroupReport { awaiting: keys[idx[0]].0.clone(), frames: stacks[idx[0]].frames.clone(), stacks: idx })
        .collect()
}

/// SOS `syncblk`'s `Total` and `Free`.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct SyncTableReport {
    /// Where the table is (`g_pSyncTable`).
    pub address: crate::hex::Hex,
    /// Entries the runtime handed out (`SyncBlockCache::m_FreeSyncTableIndex` - 1).
    pub total: u32,
    /// Of those, entries on the free list (their objects died).
    pub free: u32,
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
    /// SOS's Workers Running (the pool's count of workers processing work) and Workers Idle
    /// (the workers that exist less those); null when knot cannot read them (see `unavailable`).
    pub workers_running: Option<u32>,
    pub workers_idle: Option<u32>,
    /// SOS's Worker Min Limit and Worker Max Limit.
    pub min_workers: Option<u32>,
    pub max_workers: Option<u32>,
    /// SOS's CPU utilization (percent).
    pub cpu_utilization: Option<u32>,
    /// Work items waiting in the pool's queues, global and local (SOS `threadpool -wi`); null
    /// when knot cannot read the queues.
    pub queued_work_items: Option<u32>,
    /// Of those, in the global queue (low-priority and assignable queues included) and in the
    /// high-priority queue.
    pub global_queue: Option<u32>,
    pub high_priority_queue: Option<u32>,
    /// Each worker's local queue (`WorkStealingQueue`), with the items in it.
    pub local_queues: Vec<LocalQueueReport>,
    /// The queued work items by type, most first (SOS `threadpool -stat`).
    pub work_item_types: Vec<WorkItemTypeReport>,
    /// Of those, the ones in the high-priority queue, by type (SOS `threadpoolqueue` lists only
    /// the global queue): a `TimerQueue` the timer thread queued to fire due timers, ….
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub high_priority_work_items: Vec<WorkItemTypeReport>,
    /// What is not read, and why.
    pub unavailable: Vec<String>,
}

/// One worker's local queue.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LocalQueueReport {
    /// The `WorkStealingQueue` object.
    pub address: crate::hex::Hex,
    /// The worker it belongs to (its thread static `ThreadPoolWorkQueueThreadLocals.threadLocals`);
    /// null when knot cannot tell.
    pub worker_tid: Option<u32>,
    pub work_items: u32,
}

/// Queued work items of one type.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkItemTypeReport {
    /// As SOS's heap commands print it: `System.Threading.Tasks.Task`.
    pub name: String,
    pub method_table: crate::hex::Hex,
    pub count: u32,
}

impl ThreadPoolReport {
    /// The pool from its workers (by thread name) and what knot read of its counters and queues.
    pub(crate) fn new(pool: Option<&WorkerPool>, reading: &PoolReading) -> ThreadPoolReport {
        let mut unavailable = Vec::new();
        let counters = match &reading.counters {
            Ok(c) => Some(*c),
            Err(e) => {
                unavailable.push(format!("the pool's counters (PortableThreadPool.ThreadPoolInstance): {e}"));
                None
            }
        };
        let queues = match &reading.queues {
            Ok(q) => {
                unavailable.extend(q.problems.iter().cloned());
                Some(q)
            }
            Err(e) => {
                unavailable.push(format!("the queued work items (ThreadPool.s_workQueue): {e}"));
                None
            }
        };
        // A queue knot could not read leaves the total unknown; the parts it read stay.
        ThreadPoolReport {
            workers_total: pool.map_or(0, |p| p.workers.len() as u32),
            worker_tids: pool.map(|p| p.workers.clone()).unwrap_or_default(),
            workers_blocked: pool.map(|p| p.blocked.clone()).unwrap_or_default(),
            workers_running: counters.map(|c| c.processing),
            workers_idle: counters.map(|c| c.idle()),
            min_workers: counters.map(|c| c.min),
            max_workers: counters.map(|c| c.max),
            cpu_utilization: counters.map(|c| c.cpu_utilization),
            queued_work_items: reading.queued(),
            global_queue: queues.map(|q| q.count(|k| *k == Queue::Global) as u32),
            high_priority_queue: queues.map(|q| q.count(|k| *k == Queue::HighPriority) as u32),
            local_queues: queues
                .map(|q| q.local_queues.iter().map(|&a| LocalQueueReport { address: crate::hex::Hex(a), worker_tid: q.owners.get(&a).copied(), work_items: q.count(|k| *k == Queue::Local(a)) as u32 }).collect())
                .unwrap_or_default(),
            work_item_types: reading.types.iter().map(|t| WorkItemTypeReport { name: t.name.clone(), method_table: crate::hex::Hex(t.method_table), count: t.count as u32 }).collect(),
            high_priority_work_items: reading
                .types
                .iter()
                .filter_map(|t| {
                    let n = queues.map_or(0, |q| q.items.iter().filter(|i| i.queue == Queue::HighPriority && i.method_table == t.method_table).count());
                    (n > 0).then(|| WorkItemTypeReport { name: t.name.clone(), method_table: crate::hex::Hex(t.method_table), count: n as u32 })
                })
                .collect(),
            unavailable,
        }
    }
}
