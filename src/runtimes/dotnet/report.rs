//! The .NET runtime's section of the report: what knot read of the runtime, its thread pool.

use super::thread_pool::{PoolReading, Queue};
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
    pub heap: Option<super::gc::report::HeapReport>,
    /// The GC's own state; null when it was not read.
    pub gc: Option<super::gc::report::GcReport>,
    /// Every thread's last thrown exception (clrthreads' Exception column), as SOS `pe` prints it.
    pub exceptions: Vec<ThreadExceptionReport>,
    /// createdump's header (`DIAGINFOHEADER`), present when createdump wrote the dump.
    pub createdump: Option<super::diaginfo::DiagInfo>,
    /// The sync block table as SOS's `syncblk` counts it; null when it was not read.
    pub sync_table: Option<SyncTableReport>,
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
            unavailable,
        }
    }
}
